#!/bin/sh
# Adds the sandbox-mcp container image to Claude Code as a stdio server for all your projects
# (--scope user): Claude Code runs `docker run -i` and talks to the server on its stdio; the
# server makes its sandboxes as sibling containers on the same engine. Prints the command;
# `sh examples/container/claude-code.sh --run` runs it. SANDBOX_MCP_IMAGE: the image (default
# sandbox-mcp:latest, which `make image` builds).
set -eu
mode=${1:-}
case $mode in --run | "") ;; *) echo "usage: sh examples/container/claude-code.sh [--run]" >&2; exit 2 ;; esac
set -- claude mcp add --transport stdio --scope user sandbox -- docker run -i --rm \
	-v /var/run/docker.sock:/var/run/docker.sock "${SANDBOX_MCP_IMAGE:-sandbox-mcp:latest}"
[ "$mode" = --run ] && exec "$@"
printf '%s\n' "$*"
