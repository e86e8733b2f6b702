#!/bin/sh
# Quick start 1: installs what is missing, builds, and runs a demo session through the real
# server on the local sandbox: Python and bash calls, their results printed.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh build
make -s
exec python3 examples/demo.py build/sandbox-mcp
