# Background processes and Python sessions on the Daytona backend, against the loopback test
# server (tests/daytona/server.py): a background call's keeper goes on in the sandbox with no
# request while it runs; the process tool reads, feeds and signals it with one process/execute
# each; sweeps of later calls spare it (and only it); sessions run on them.
load lib/helpers
load lib/background
load lib/daytona-setup
bats_require_minimum_version 1.5.0

setup_file() {
	daytona_setup_file
}

teardown_file() {
	daytona_teardown_file
}

setup() {
	common_setup
	with_daytona
}

teardown() {
	[ -z "${JX:-}" ] || rm -rf "$JX"
}

live_sandboxes() {
	daytona_control '{}' | jq '.sandboxes | length'
}

# py ID SESSION SCRIPT [MORE ARGS JSON]: an execute_python call line in that session.
py() {
	call_json "$1" execute_python "$(jq -cn --arg s "$3" --arg n "$2" --argjson m "${4:-{\}}" '{script: $s, session: $n} + $m')"
}

@test "daytona background: output so far, then only new; input, close_input, the exit code; a 5xx during a read; --max-background; labels stay text" {
	SERVER_ARGS="--max-background 1" session_of \
		"$(bg 1 'echo start; read x; echo "got $x"; echo oops >&2; read y || echo "input closed"; exit 7')" '{"wait": 1}' \
		"$(bg 2 'echo second')" '{"wait": 2}' \
		"$(jq -cn --arg u "$DT_URL/_control" '{sh: ("curl -sf -o /dev/null -d '"'"'{\"fail\": \"500\", \"count\": 1, \"on\": \"toolbox\", \"path\": \"*/process/execute\"}'"'"' " + $u)}')" \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1", "input": "hello\n", "wait_s": 20}')" '{"wait": 4}' \
		"$(proc 5 '{"process_id": "bg-1", "close_input": true, "wait_s": 20}')" '{"wait": 5}' \
		"$(proc 6 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 6}' \
		"$(proc 7 '{}')" '{"wait": 7}' \
		"$(bg 8 "echo 'it'\"'\"'s \$(id)'; sleep 300" '{"timeout_s": 2}')" '{"wait": 8}' \
		"$(proc 9 '{}')" '{"wait": 9}' \
		"$(proc 10 '{"process_id": "bg-2", "wait_s": 30}')" '{"wait": 10}' \
		"$(proc 11 '{"process_id": "bg-2", "wait_s": 30}')"
	res 1
	sc '.process_id == "bg-1" and .running == true and .stdout == "start\n" and .backend == "daytona"'
	res 2
	sc '.error | test("at most 1 background processes")'
	res 3
	jqe "$result" '.isError == true and (.content[0].text | test("HTTP 500"))'
	res 4
	sc '.process_id == "bg-1" and .input_written == 6 and (.stdout | startswith("got hello\n")) and (.stdout | contains("start") | not)'
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 4 or .id == 5 or .id == 6) | .result.structuredContent]')
	jqe "$all" '(map(.stdout) | join("")) == "got hello\ninput closed\n" and (map(.stderr) | join("")) == "oops\n"'
	jqe "$all" 'map(select(.running == false)) | length >= 1 and all(.exit_code == 7)'
	res 7
	sc '.processes | map(select(.process_id == "bg-1")) | length == 0'
	res 8
	sc ".process_id == \"bg-2\" and .stdout == \"it's \$(id)\n\""
	res 9
	sc ".processes[0].command == \"bash: echo 'it'\\\"'\\\"'s \$(id)'; sleep 300\""
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 10 or .id == 11) | .result.structuredContent]')
	jqe "$all" 'map(select(.running == false)) | length >= 1 and all(.timed_out == true and .exit_code == 124)'
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "daytona background: it runs on with no request at all, and a read after its end has its output and exit code" {
	session_of "$(bg 1 'sleep 1.2345; echo late; exit 3' '{"wait_s": 0.2}')" '{"wait": 1}' \
		"$(jq -cn --arg u "$DT_URL/_control" '{sh: ("curl -sf -o /dev/null -d '"'"'{\"clear_log\": true}'"'"' " + $u)}')" \
		'{"until": "! pgrep -f '"'"'[s]leep 1.2345'"'"' >/dev/null"}' \
		"$(jq -cn --arg u "$DT_URL/_control" --arg f "$BATS_TEST_TMPDIR/log.json" '{sh: ("curl -sf -o " + $f + " " + $u)}')" \
		"$(proc 2 '{"process_id": "bg-1", "wait_s": 10}')"
	res 1
	sc '.running == true and .stdout == ""'
	jqe "$(cat "$BATS_TEST_TMPDIR/log.json")" '.requests | map(select(.path | test("/toolbox/"))) | length == 0'
	res 2
	sc '.running == false and .exit_code == 3 and .stdout == "late\n"'
}

@test "daytona background: a later call's sweep spares it and what it forked (setsid included), and nothing else; FIFOs planted among its files hang nothing; KILL ends them all" {
	session_of "$(bg 1 'setsid sleep 3011 & echo forked; exec sleep 3012')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "setsid sleep 3013 & echo fg"}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "ps -eo args | grep -c \"^sleep 301[123]\" || true; ps -eo args | grep \"^sleep 301\" | sort"}')" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "for d in /tmp/.sandbox-mcp/bg-*; do for f in 1.head 1.tail 2.tail status sig; do rm -f $d/$f; mkfifo $d/$f; done; done; echo planted"}')" '{"wait": 4}' \
		"$(proc 5 '{"process_id": "bg-1", "input": "x\n", "wait_s": 1}')" '{"wait": 5}' \
		"$(proc 6 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 20}')" '{"wait": 6}' \
		"$(call_json 7 execute_bash_commands '{"code": "ps -eo args | grep \"^sleep 301\" || echo none"}')"
	res 1
	sc '.running == true and .stdout == "forked\n"'
	res 3
	sc '.stdout == "2\nsleep 3011\nsleep 3012\n"'
	res 4
	sc '.stdout == "planted\n"'
	res 5
	sc '.running == true and .input_written == 2'
	res 6
	sc '.running == false and .exit_code == 137'
	res 7
	sc '.stdout == "none\n"'
}

@test "daytona background: it cannot read a later call's environment (a Landlock domain of its own)" {
	# Daytona's sandbox user is not root; the test server's is, so both sides run as another
	# user here (the kernel lets root's ptrace access through a Landlock domain). The reader
	# says "tick" after each look at every process; the later call waits for one made while
	# its process with LATER lived, having read it itself, unconfined.
	# A folder outside the test server's mapped ones, which both users reach.
	local as='setpriv --reuid=65534 --regid=65534 --clear-groups' scan jx=/var/tmp/sandbox-mcp-jobs-$$-$RANDOM
	JX=$jx
	scan='for f in /proc/[0-9]*/environ; do { tr "\0" "\n" < $f; } 2>/dev/null; done | grep -a "^LATER="'
	session_of "$(bg 1 "mkdir -m 1777 $jx; $as bash -c '$scan; : > $jx/tick; while [ ! -e $jx/done ]; do $scan; : > $jx/tick; sleep 0.02; done; echo scanned'" '{"timeout_s": 60}')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands "$(jq -cn --arg su "$as" --arg jx "$jx" '{code: ($su + " env LATER=hunter2 sleep 30 & p=$!; sleep 0.3; " + $su + " tr \"\\0\" \"\\n\" < /proc/$p/environ | grep -a ^LATER=; rm -f " + $jx + "/tick; for i in $(seq 200); do [ -e " + $jx + "/tick ] && break; sleep 0.05; done; : > " + $jx + "/done; kill $p")}')")" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 30}')"
	res 2
	sc '.stdout == "LATER=hunter2\n"'
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 1 or .id == 3) | .result.structuredContent.stdout] | join("")')
	[[ "$all" == *scanned* ]]
	[[ "$all" != *hunter2* ]]
}

@test "daytona background: huge output stays within the cap per read, the rest in the workspace file; ids of a removed sandbox are gone" {
	SERVER_ARGS="--output-cap 1K" session_of "$(bg 1 'head -c 3000000 /dev/zero | tr "\0" a; echo; echo end >&2; sleep 300' '{"wait_s": 0.2}')" '{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "wc -c < .sandbox/output/$(ls .sandbox/output | grep -m1 stdout)"}')" '{"wait": 3}' \
		"$(call_json 4 cleanup_sandbox '{}')" '{"wait": 4}' \
		"$(proc 5 '{"process_id": "bg-1"}')" '{"wait": 5}' \
		"$(proc 6 '{}')"
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 1 or .id == 2) | .result.structuredContent]')
	jqe "$all" 'all(.stdout | length <= 1024)'
	res 3
	sc '.stdout | tonumber > 1000000'
	res 5
	jqe "$result" '.isError == true and (.content[0].text | test("no such background process|no background process"))'
	res 6
	sc '.processes == []'
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "daytona session: state persists, the last expression is the value, an exception or a timeout leaves it alive; one that ignores the interrupt, or an interpreter a later call killed, loses it" {
	session_of "$(py 1 a 'import os
x = 1
x')" '{"wait": 1}' \
		"$(py 2 a 'x += 1
print("hi")
1/0')" '{"wait": 2}' \
		"$(py 3 a 'import time
while True: time.sleep(0.05)' '{"timeout_s": 2}')" '{"wait": 3}' \
		"$(py 4 a 'x, os.getenv("FOO"), open("f.txt").read()' '{"env": {"FOO": "bar"}, "files": {"f.txt": "data"}}')" '{"wait": 4}' \
		"$(call_json 5 process '{}')" '{"wait": 5}' \
		"$(py 6 a 'import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True: time.sleep(0.05)' '{"timeout_s": 2}')" '{"wait": 6}' \
		"$(py 7 a 'x = 6')" '{"wait": 7}' \
		"$(call_json 8 execute_bash_commands '{"code": "pkill -KILL -f \"[A] Python session\"; echo $?"}')" '{"wait": 8}' \
		"$(py 9 a 'y = 1
y')"
	res 1
	sc '.exit_code == 0 and .value == "1" and .session == "a" and .stdout == ""'
	res 2
	sc '.exit_code == 1 and .stdout == "hi\n" and (.stderr | test("ZeroDivisionError"))'
	res 3
	sc '.timed_out == true and .exit_code == 124 and (.notice | test("interrupted at its timeout"))'
	res 4
	sc '.value == "(2, '"'"'bar'"'"', '"'"'data'"'"')"'
	res 5
	sc '[.processes[] | select(.session)] | map(.session) == ["a"]'
	res 6
	sc '(.error | test("did not stop within 1000 ms")) and (.error | test("state .* is lost"))'
	res 8
	sc '.stdout == "0\n"'
	res 9
	sc '.value == "1" or (.error | test("session a ended"))'
	jqe "$result" '.structuredContent.value == null or (.structuredContent.notice | test("had ended"))'
}

@test "daytona background: idle removal deletes the sandbox with it and the next call says so; shutdown ends the next one" {
	SERVER_ARGS="--idle-timeout 2" session_of "$(bg 1 'exec sleep 3021')" '{"wait": 1}' \
		"$(jq -cn --arg c "grep -q 'removed after 2 s unused' '$SERVER_LOG'" '{until: $c}')" \
		"$(call_json 2 execute_bash_commands '{"code": "echo new"}')" '{"wait": 2}' \
		"$(proc 3 '{}')" '{"wait": 3}' \
		"$(bg 4 'exec sleep 3022')"
	res 2
	sc '.stdout == "new\n" and (.notice | test("1 background process of sandbox"))'
	res 3
	sc '.processes == []'
	res 4
	sc '.running == true'
	[ "$(live_sandboxes)" -eq 0 ]
	no_process_matching '^sleep 302[12]'
}

@test "daytona background: a shutdown with a background process running spends its time on the delete, even with a slow API" {
	# Every request takes 0.9 s now: the delete fits the shutdown's 1.7 s only as its one request.
	session_of "$(bg 1 'exec sleep 3023')" '{"wait": 1}' \
		"$(jq -cn --arg u "$DT_URL/_control" '{sh: ("curl -sf -o /dev/null -d '"'"'{\"latency_ms\": 900}'"'"' " + $u)}')"
	res 1
	sc '.running == true'
	grep -q 'shutting down: stdin closed' "$SERVER_LOG"
	grep -q '^sandbox-mcp: info: deleted Daytona sandbox' "$SERVER_LOG"
	[ "$(live_sandboxes)" -eq 0 ]
	no_process_matching '^sleep 3023'
}
