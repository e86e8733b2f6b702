#!/bin/sh
# Quick start 2: installs what is missing, builds, and runs the whole test suite.
# Ends with "N passed, N failed". Pass SANITIZE=address,undefined to test a sanitizer build.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh test
make -s ${SANITIZE:+SANITIZE=$SANITIZE}
exec tests/run "$@"
