#!/bin/sh
# Adds sandbox-mcp to Claude Code as a stdio server for all your projects (--scope user).
# Prints the command; `sh examples/claude-code.sh --run` runs it. Options go before the
# server's name; everything after `--` is the command line Claude Code starts.
set -eu
run=false
[ "${1:-}" = --run ] && run=true
set -- claude mcp add --transport stdio --scope user --env SANDBOX_TIMEOUT=120 \
	sandbox -- /usr/local/bin/sandbox-mcp
if $run; then
	exec "$@"
fi
echo "$*"
