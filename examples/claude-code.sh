#!/bin/sh
# Adds sandbox-mcp to Claude Code as a stdio server for all your projects (--scope user).
# Prints the command; `sh examples/claude-code.sh --run` runs it, and `--replace` runs it
# after removing an entry named sandbox that is there already (`claude mcp add` refuses to
# overwrite one: run `claude mcp remove --scope user sandbox` first, or use --replace).
# The server's name comes right after the --transport and --scope options: --env (-e) takes
# several values, so a name after it would be read as one more variable. Everything after
# `--` is the command line Claude Code starts.
# SANDBOX_MCP_BIN: the server to start (default /usr/local/bin/sandbox-mcp, where
# `make install` puts it).
set -eu
case ${1:-} in
--run) run=add ;;
--replace) run=replace ;;
"") run= ;;
*) echo "usage: sh examples/claude-code.sh [--run | --replace]" >&2; exit 2 ;;
esac
set -- claude mcp add --transport stdio --scope user sandbox --env SANDBOX_TIMEOUT=120 \
	-- "${SANDBOX_MCP_BIN:-/usr/local/bin/sandbox-mcp}"
if [ "$run" = replace ]; then
	# Absent is fine: then there is nothing to remove.
	claude mcp remove --scope user sandbox >/dev/null 2>&1 || true
fi
if [ -n "$run" ]; then
	status=0
	"$@" || status=$?
	if [ "$status" -ne 0 ] && [ "$run" = add ]; then
		echo "claude-code.sh: 'claude mcp add' failed; if Claude Code has a server named sandbox already," \
			"replace it: sh examples/claude-code.sh --replace (it runs 'claude mcp remove --scope user" \
			"sandbox' first)" >&2
	fi
	exit "$status"
fi
# Printed so that a shell reads it back as the same words.
line=
for a; do
	case $a in
	"" | *[!A-Za-z0-9_./=:@%+,-]*) a="'$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'" ;;
	esac
	line="$line${line:+ }$a"
done
printf '%s\n' "$line"
