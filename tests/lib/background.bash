# Shared by background.bats and background-faults.bats.

# bg ID CODE [MORE ARGS JSON]: a background execute_bash_commands call line.
bg() {
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" --argjson m "${3:-{\}}" '{code: $c, background: true} + $m')"
}

# proc ID ARGS_JSON: a process call line.
proc() {
	call_json "$1" process "$2"
}

# session_of LINES...: runs a session of INIT, INITIALIZED and the lines, with the server's
# arguments in SERVER_ARGS.
session_of() {
	mcp_session --no-sandbox-ahead ${SERVER_ARGS:-} <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$@")"
}

