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

# The life of one: its output so far, then only what is new, its input, its end.
life() {
	session_of "$(bg 1 'echo start; read x; echo "got $x"; echo oops >&2; read y || echo "input closed"; exit 7')" \
		'{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "input": "hello\n", "wait_s": 20}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "close_input": true, "wait_s": 20}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 4}' \
		"$(proc 5 '{}')"
	res 1
	sc '.process_id == "bg-1" and .running == true and .stdout == "start\n"'
	res 2
	sc '.process_id == "bg-1" and .input_written == 6 and (.stdout | startswith("got hello\n")) and (.stdout | contains("start") | not)'
	# Until it ends: what 3 and 4 read together is the rest, and 4 or 3 says how it ended.
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 2 or .id == 3 or .id == 4) | .result.structuredContent]')
	jqe "$all" '(map(.stdout) | join("")) == "got hello\ninput closed\n" and (map(.stderr) | join("")) == "oops\n"'
	jqe "$all" 'map(select(.running == false)) | length >= 1 and all(.exit_code == 7)'
	# Read once ended, it is forgotten.
	res 5
	sc '.processes | map(select(.process_id == "bg-1")) | length == 0'
}

# Process calls are answered while a long call runs; calls still run one at a time.
answered_while_a_call_runs() {
	session_of "$(bg 1 'echo tick; sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "sleep 3.0123; echo slow"}')" \
		"$(until_running 'sleep 3.0123')" \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(proc 4 '{}')" '{"wait": 4}' '{"wait": 2}'
	# 3 and 4 came back before the long call's answer.
	[ "$(answer_order 2 3 4)" = "3 4 2" ]
	res 4
	sc '.processes | map(select(.process_id == "bg-1" and .running and (.command | startswith("bash: echo tick")))) | length == 1'
	res 2
	sc '.stdout == "slow\n"'
}
