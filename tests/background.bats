# Background processes (background: true, the process tool): a program that outlives its wait
# goes on beside later calls, read, fed and signalled through `process`, which is answered even
# while a call runs; a call that asks for none still runs with nothing of its own before or
# after it; limits, timeouts, idle removal, the prestarted interpreter. Local (root and not) and
# Docker; faults are in background-faults.bats.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/background
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

teardown() {
	[ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown
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
	answered_while_a_call_runs

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
		"$(bg 2 'echo t; sleep 60' '{"timeout_s": 1.5, "wait_s": 1}')" '{"wait": 2}' \
		"$(bg 3 'sleep 60')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-2", "wait_s": 20}')" '{"wait": 4}' \
		"$(bg 5 'echo again; sleep 60')"
	# Call 2 waited long enough for its "t" under any load, so the read after its end has
	# nothing new.
	res 2
	sc '.running == true and .stdout == "t\n"'
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
	# They end in their order, each once the one before it is gone, and none before the 17th
	# started: none can end within its call's wait however slow the machine, and the order
	# they end in is theirs, not the scheduler's. gone: whether the one numbered $1 is gone
	# (reaped by the agent: its /proc entry is no more). They wait on a FIFO of their own, so
	# that 16 waiting shells start no process.
	local gone='{ read -r p </tmp/bg-pid$1 && [ ! -d /proc/$p ]; }'
	for i in $(seq 1 16); do
		lines+=("$(bg "$i" "echo \$\$ >/tmp/bg-pid$i; mkfifo /tmp/bg-tick$i; exec 3<>/tmp/bg-tick$i; set -- $((i - 1))
until [ -e /tmp/bg-go ] && { [ $i = 1 ] || $gone; }; do read -r -t 0.05 -u 3 || :; done; echo n$i" '{"wait_s": 0.05}')" "{\"wait\": $i}")
	done
	# The last, quiet, ends once they all have: a read of it waits for its end.
	lines+=("$(bg 17 "touch /tmp/bg-go; set -- 16; until $gone; do sleep 0.05; done" '{"wait_s": 0.05}')" \
		'{"wait": 17}' "$(proc 18 '{"process_id": "bg-17", "wait_s": 60}')" '{"wait": 18}')
	lines+=("$(proc 19 '{}')" '{"wait": 19}' "$(proc 20 '{"process_id": "bg-1"}')" "$(proc 21 '{"process_id": "bg-2"}')")
	lines+=("$(bg 22 'sleep 60')" '{"wait": 22}' \
		"$(jq -cn --arg c "grep -q 'removed after 5 s unused' '$SERVER_LOG'" '{until: $c}')" "$(call_json 23 execute_bash_commands '{"code": "echo new"}')")
	SERVER_ARGS="--idle-timeout 5 --max-background 17" session_of "${lines[@]}"
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
	sc '.stdout == "new\n" and (.notice | test("removed after 5 s without use")) and (.notice | test("1 background process of sandbox"))'
}

@test "background: no interpreter is started ahead while one runs (it is handed calls only when alone); after it, one is again" {
	SERVER_ARGS="--log-level debug" session_of "$(call_json 1 execute_python '{"script": "pass"}')" '{"wait": 1}' \
		"$(call_json 2 execute_python '{"script": "pass"}')" '{"wait": 2}' \
		"$(bg 3 'sleep 60')" '{"wait": 3}' \
		"$(call_json 4 execute_python '{"script": "import os; print(len(os.listdir(\"/proc\")) > 0)"}')" '{"wait": 4}' \
		"$(call_json 5 execute_python '{"script": "pass"}')" '{"wait": 5}' \
		"$(proc 6 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 10}')" '{"wait": 6}' \
		"$(call_json 7 execute_bash_commands '{"code": "true"}')" '{"wait": 7}' \
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
