# Background processes (background: true, the process tool): a program that outlives its wait
# goes on beside later calls, read, fed and signalled through `process`, which is answered even
# while a call runs; a call that asks for none still runs with nothing of its own before or
# after it; limits, timeouts, full output, forks, OOM, a killed agent, cleanup and shutdown.
# Local (root and not) and Docker.
# suite: uses docker
load lib/helpers
load lib/docker-setup
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

teardown() {
	[ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown
}

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
		'{"until": "true"}' \
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

@test "background: a program that ends within wait_s gets the whole result a foreground call would" {
	session_of "$(bg 1 'echo out; echo err >&2; exit 3' '{"wait_s": 10}')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo out; echo err >&2; exit 3"}')"
	res 1
	local a=$result
	res 2
	jqe "$a" '.structuredContent | has("process_id") | not'
	[ "$(jq -c '.structuredContent | del(.duration_ms)' <<<"$a")" = "$(jq -c '.structuredContent | del(.duration_ms)' <<<"$result")" ]
	[ "$(jq -c '.isError' <<<"$a")" = true ]
}

@test "background: output so far, then only what is new; input, close_input, the exit code (local)" {
	with_backend local
	life
}

@test "background: output so far, then only what is new; input, close_input, the exit code (local, not root)" {
	unprivileged_server
	with_backend local
	life
}

@test "background: output so far, then only what is new; input, close_input, the exit code (Docker)" {
	with_backend docker
	life
}

@test "background: process is answered at once while a long call runs, and calls still run one at a time" {
	session_of "$(bg 1 'echo tick; sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "sleep 3; echo slow"}')" \
		'{"sleep": 0.5}' \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(proc 4 '{}')" '{"wait": 4}' '{"wait": 2}'
	# 3 and 4 came back before the long call's answer.
	local order
	order=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id == 2 or .id == 3 or .id == 4)) | .id' | tr '\n' ' ')
	[ "$order" = "3 4 2 " ]
	res 4
	sc '.processes | map(select(.process_id == "bg-1" and .running and (.command | startswith("bash: echo tick")))) | length == 1'
	res 2
	sc '.stdout == "slow\n"'
}

@test "background: a call that asks for none still leaves nothing behind, beside a background process" {
	session_of "$(bg 1 'sleep 61')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "setsid sleep 62 & nohup sleep 63 >/dev/null 2>&1 & echo left"}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "ps -eo args"}')" '{"wait": 3}' \
		"$(proc 4 '{}')"
	res 3
	sc '(.stdout | contains("sleep 61")) and (.stdout | contains("sleep 62") | not) and (.stdout | contains("sleep 63") | not)'
	res 4
	sc '.processes | map(select(.running)) | length == 1'
}

@test "background: signals go to the process group; one that ignores TERM ends with KILL" {
	session_of "$(bg 1 "trap '' TERM; echo ready; sleep 60 & wait; sleep 60")" '{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "signal": "TERM", "wait_s": 0.5}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 20}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1", "signal": "INT"}')"
	res 2
	sc '.running == true'
	res 3
	sc '.running == false and .exit_code == 137'
	# Read once ended: gone.
	res 4
	sc '.error | test("no such background process")'
}

@test "background: at most --max-background run at once; a timeout_s ends one, whose last output stays readable" {
	SERVER_ARGS="--max-background 2" session_of "$(bg 1 'sleep 60')" '{"wait": 1}' \
		"$(bg 2 'echo t; sleep 60' '{"timeout_s": 1.5, "wait_s": 0.2}')" '{"wait": 2}' \
		"$(bg 3 'sleep 60')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-2", "wait_s": 20}')" '{"wait": 4}' \
		"$(bg 5 'echo again; sleep 60')"
	res 3
	sc '.exit_code == 1 and (.error | test("at most 2 background processes"))'
	res 4
	sc '.running == false and .timed_out == true and .exit_code == 124 and .stdout == ""'
	res 5
	sc '.process_id == "bg-3" and .stdout == "again\n"'
}

@test "background: a timeout_s above --max-background-timeout is refused; --max-background 0 refuses background" {
	session_of "$(bg 1 'true' '{"timeout_s": 100000}')"
	res 1
	jqe "$result" '.isError == true and (.content[0].text | test("max-background-timeout"))'
	SERVER_ARGS="--max-background 0" session_of "$(bg 1 'true')"
	res 1
	jqe "$result" '.isError == true and (.content[0].text | test("--max-background 0"))'
	run -2 "$SANDBOX_MCP" --max-background 65 --check
	[[ "$output" == *"--max-background must be at most 64"* ]]
}

@test "background: one that fills its output never blocks; what a read cannot hold is in a workspace file" {
	local f=.sandbox/output/call-1.stdout
	session_of "$(bg 1 'sleep 0.5; head -c 3000000 /dev/zero | tr "\0" x; echo; echo done >&2; exec sleep 60' '{"wait_s": 0.1}')" \
		'{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands "$(jq -cn --arg f "$f" '{code: "for i in $(seq 300); do [ \"$(wc -c < \($f) 2>/dev/null)\" = 3000001 ] && break; sleep 0.1; done; wc -c < \($f)"}')")" \
		'{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1", "wait_s": 5}')"
	res 1
	sc '.running == true and .stdout == ""'
	res 3
	sc '.stdout == "3000001\n"'
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 2 or .id == 4) | .result.structuredContent]')
	jqe "$all" 'all(.running and (.stdout | length) <= 8192)'
	jqe "$all" '(map(.stdout | length) | add) + (map(.stdout_skipped) | add) == 3000001 and (map(.stdout_skipped) | add) > 0'
	jqe "$all" 'map(.stdout_bytes) | max == 3000001'
	jqe "$all" 'map(select(.stdout_skipped > 0)) | length >= 1 and all(.stdout_file == "/workspace/.sandbox/output/call-1.stdout")'
	jqe "$all" '(map(.stderr) | join("")) == "done\n"'
}

@test "background: one that forks a lot stays inside the sandbox's process limit, and the server keeps serving" {
	session_of "$(bg 1 'for i in $(seq 2000); do sleep 60 & done 2>/dev/null; echo forked; wait')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo alive"}')" '{"wait": 2}' \
		"$(call_json 3 cleanup_sandbox '{}')" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "ps -e | wc -l"}')"
	res 1
	sc '.running == true or .exit_code != 0'
	res 4
	sc '.exit_code == 0 and (.stdout | tonumber) < 10 and (.notice | test("background process"))'
}

@test "background: one killed by the out-of-memory killer ends; the server and the sandbox go on" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "the memory cgroup needs root here"
	SERVER_ARGS="--memory 64M" session_of \
		"$(call_json 1 execute_python '{"script": "import time\nprint(\"start\", flush=True)\ntime.sleep(0.5)\nx = bytearray(200 << 20)\nprint(\"survived\")", "background": true, "wait_s": 0.1}')" \
		'{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "wait_s": 30}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 30}')" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "echo alive"}')"
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 2 or .id == 3) | .result.structuredContent]')
	jqe "$all" 'map(select(.running == false)) | length == 1 and all(.exit_code == 137 or .exit_code == 1)'
	jqe "$all" '(map(.stdout // "") | join("")) | contains("survived") | not'
	res 4
	sc '.stdout == "alive\n"'
}

@test "background: the agent killed under them: the next call gets a fresh sandbox and says they ended" {
	local pidf="$BATS_TEST_TMPDIR/server.pid" marker=61.2345
	{
		printf '%s\n' "$INIT" "$INITIALIZED" "$(bg 1 "sleep $marker")" '{"wait": 1}'
		jq -cn --arg c "kill -KILL \$(pgrep -P \$(cat $pidf) -f '^sandbox-agent ')" '{sh: $c}'
		proc 2 '{}'
		echo '{"wait": 2}'
		call_json 3 execute_bash_commands '{"code": "echo after"}'
	} >"$BATS_TEST_TMPDIR/s"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" --no-sandbox-ahead <"$BATS_TEST_TMPDIR/s"
	[ "$status" -eq 0 ]
	res 3
	sc '.stdout == "after\n" and (.notice | test("stopped unexpectedly"))'
	eventually 10 no_process_matching "sleep $marker"
}

@test "background: cleanup_sandbox ends them and the next call's notice says so; shutdown leaves nothing" {
	local marker=62.3456
	session_of "$(bg 1 "sleep $marker")" '{"wait": 1}' "$(bg 2 "sleep $marker")" '{"wait": 2}' \
		"$(call_json 3 cleanup_sandbox '{}')" '{"wait": 3}' \
		"$(proc 4 '{}')" '{"wait": 4}' \
		"$(call_json 5 execute_bash_commands '{"code": "echo new"}')" '{"wait": 5}' \
		"$(bg 6 "sleep $marker")"
	res 4
	sc '.processes == []'
	res 5
	sc '.notice | test("2 background processes of sandbox local-[0-9a-f]+ ended with it")'
	res 6
	sc '.running == true'
	# The session closed stdin: the server ended them with the sandbox.
	eventually 10 no_process_matching "sleep $marker"
}

@test "background: a foreground call's processes never outlive it in Docker either" {
	with_backend docker
	session_of "$(bg 1 'sleep 64')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "setsid sleep 65 & echo left"}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "for p in /proc/[0-9]*; do tr \"\\\\0\" \" \" < $p/cmdline; echo; done"}')"
	res 3
	sc '(.stdout | contains("sleep 64")) and (.stdout | contains("sleep 65") | not)'
}

@test "background: an ended one's output stays readable until 16 newer ones ended; idle removal ends the rest" {
	local i lines=()
	for i in $(seq 1 16); do
		lines+=("$(bg "$i" "sleep 0.3; echo n$i" '{"wait_s": 0.05}')" "{\"wait\": $i}")
	done
	# The last, quiet and slower, ends after them all: a read of it waits for its end.
	lines+=("$(bg 17 'sleep 1' '{"wait_s": 0.05}')" '{"wait": 17}' "$(proc 18 '{"process_id": "bg-17", "wait_s": 20}')" '{"wait": 18}')
	lines+=("$(proc 19 '{}')" '{"wait": 19}' "$(proc 20 '{"process_id": "bg-1"}')" "$(proc 21 '{"process_id": "bg-2"}')")
	lines+=("$(bg 22 'sleep 60')" '{"wait": 22}' '{"sleep": 2.5}' "$(call_json 23 execute_bash_commands '{"code": "echo new"}')")
	SERVER_ARGS="--idle-timeout 2" session_of "${lines[@]}"
	res 1
	sc '.running == true'
	res 18
	sc '.running == false and .exit_code == 0 and .stdout == ""'
	# bg-17 was read and went; of the 16 others, the oldest went when the 17th ended.
	res 19
	sc '(.processes | length == 15) and all(.processes[]; .running == false)'
	res 20
	sc '.error | test("no such background process")'
	res 21
	sc '.stdout == "n2\n" and .exit_code == 0'
	res 23
	sc '.stdout == "new\n" and (.notice | test("removed after 2 s without use")) and (.notice | test("1 background process of sandbox"))'
}

@test "background: no interpreter is started ahead while one runs (it is handed calls only when alone); after it, one is again" {
	SERVER_ARGS="--log-level debug" session_of "$(call_json 1 execute_python '{"script": "pass"}')" '{"wait": 1}' '{"sleep": 0.5}' \
		"$(call_json 2 execute_python '{"script": "pass"}')" '{"wait": 2}' \
		"$(bg 3 'sleep 60')" '{"wait": 3}' \
		"$(call_json 4 execute_python '{"script": "import os; print(len(os.listdir(\"/proc\")) > 0)"}')" '{"wait": 4}' \
		"$(call_json 5 execute_python '{"script": "pass"}')" '{"wait": 5}' \
		"$(proc 6 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 10}')" '{"wait": 6}' \
		"$(call_json 7 execute_bash_commands '{"code": "true"}')" '{"wait": 7}' '{"sleep": 1}' \
		"$(call_json 8 execute_python '{"script": "pass"}')"
	res 4
	sc '.stdout == "True\n"'
	# It ran on beside those calls until the KILL.
	res 6
	sc '.running == false and .exit_code == 137'
	grep -q "call 2 ran in an interpreter started ahead" "$SERVER_LOG"
	run ! grep -qE "call (4|5) ran in an interpreter started ahead" "$SERVER_LOG"
	# (the log counts calls, not process requests: request 8 is call 7)
	grep -q "call 7 ran in an interpreter started ahead" "$SERVER_LOG"
}

@test "background: a read stays within --result-max, even of output that JSON escapes six-fold" {
	session_of "$(bg 1 'sleep 0.3; head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2; exec sleep 60' '{"wait_s": 0.1}')" \
		'{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "for i in $(seq 300); do [ -s .sandbox/output/call-1.stderr ] && break; sleep 0.1; done"}')" \
		'{"wait": 2}' "$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(bg 4 'sleep 0.3; printf "%s" "$(head -c 3000 /dev/zero | tr "\0" y)"; exec sleep 60' '{"wait_s": 0.1}')" '{"wait": 4}' \
		"$(proc 5 '{"process_id": "bg-2", "wait_s": 20}')"
	res 3
	sc '.stdout_bytes == 100000 and .stderr_bytes == 100000 and (.stdout | length) > 0 and .stdout_skipped > 0'
	[ "$(response 3 | jq -c .result | wc -c)" -le 32768 ]
	# Output that fits is shown in the text block as well.
	res 5
	jqe "$result" '.content[0].text | contains("yyyyyyyyyy")'
}
