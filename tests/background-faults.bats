# Background processes under faults: one that fills its output, forks a lot or is killed by
# the out-of-memory killer; output that JSON escapes six-fold; the agent killed under them;
# cleanup_sandbox and shutdown while they run (nothing left behind). See background.bats.
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
	session_of "$(bg 1 'for i in $(seq 400); do sleep 60 & done 2>/dev/null; echo forked; wait')" '{"wait": 1}' \
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
		"$(proc 4 '{"process_id": "bg-1", "wait_s": 30}')" '{"wait": 4}' \
		"$(call_json 5 execute_bash_commands '{"code": "echo alive"}')"
	# A read returns at new output or the end: "start" and its newline may come apart (print
	# writes them in turn, and a loaded machine may run the reader between), so the end comes
	# in one of three reads; a read after it finds the process forgotten.
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id >= 2 and .id <= 4) | .result]')
	jqe "$all" '[.[] | .structuredContent | select(.running == false)] | length == 1 and all(.exit_code == 137 or .exit_code == 1)'
	jqe "$all" '(map(.structuredContent.running == false) | index(true)) as $i | $i != null and (.[:$i] | all(.structuredContent.running == true)) and (.[$i + 1:] | all(.isError == true))'
	jqe "$all" '(map(.structuredContent.stdout // "") | join("")) | contains("survived") | not'
	res 5
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
