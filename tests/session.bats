# Python sessions (execute_python with `session`): one interpreter per name whose names,
# imports and objects carry over; a cell's last expression is its value; an exception leaves the
# session alive; a timeout interrupts, and kills what does not stop; an interpreter killed (the
# process tool, OOM) loses the state and says so; files, env and args as for any call; listed
# and ended by the process tool; gone with cleanup_sandbox. Local (root and not) and Docker.
# suite: uses docker
load lib/helpers
load lib/docker-setup
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

teardown() {
	[ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown
}

# py ID SESSION SCRIPT [MORE ARGS JSON]: an execute_python call line in that session.
py() {
	call_json "$1" execute_python "$(jq -cn --arg s "$3" --arg n "$2" --argjson m "${4:-{\}}" '{script: $s, session: $n} + $m')"
}

session_of() {
	mcp_session --no-sandbox-ahead ${SERVER_ARGS:-} <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$@")"
}

cells() {
	session_of "$(py 1 a 'import os
x = 1
x')" '{"wait": 1}' \
		"$(py 2 a 'x += 1
print("hi")
x')" '{"wait": 2}' \
		"$(py 3 b 'x = 100')" '{"wait": 3}' \
		"$(py 4 a '1/0')" '{"wait": 4}' \
		"$(py 5 a 'x, os.getenv("FOO"), open("f.txt").read(), __import__("sys").argv[1:]' \
			'{"env": {"FOO": "bar"}, "args": ["q"], "files": {"f.txt": "data"}}')" '{"wait": 5}' \
		"$(py 6 a 'os.getenv("FOO")')" '{"wait": 6}' \
		"$(call_json 7 execute_python '{"script": "print(\"x\" in dir())"}')" '{"wait": 7}' \
		"$(call_json 8 process '{}')"
	res 1
	sc '.exit_code == 0 and .value == "1" and .session == "a" and .stdout == ""'
	res 2
	sc '.value == "2" and .stdout == "hi\n"'
	res 3
	sc '.value == null and .exit_code == 0'
	res 4
	sc '.exit_code == 1 and (.stderr | test("ZeroDivisionError")) and (.stderr | test("session.py") | not)'
	jqe "$result" '.isError == true'
	res 5
	sc '.value == "(2, '"'"'bar'"'"', '"'"'data'"'"', ['"'"'q'"'"'])"'
	# env is the call's alone.
	res 6
	sc '.value == null'
	# A call without session still starts fresh.
	res 7
	sc '.stdout == "False\n"'
	res 8
	sc '[.processes[] | select(.session)] | map(.session) | sort == ["a", "b"]'
}

@test "session: names, imports and objects persist; the last expression is the value; an exception leaves it alive (local)" {
	with_backend local
	cells
}

@test "session: the same, not root" {
	unprivileged_server
	with_backend local
	cells
}

@test "session: the same on Docker" {
	with_backend docker
	cells
}

@test "session: a timeout interrupts the cell and the session lives on; one that ignores the interrupt is killed and its state lost" {
	session_of "$(py 1 s 'import time
n = 5')" '{"wait": 1}' \
		"$(py 2 s 'while True: time.sleep(0.05)' '{"timeout_s": 1}')" '{"wait": 2}' \
		"$(py 3 s 'n')" '{"wait": 3}' \
		"$(py 4 s 'import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True: pass' '{"timeout_s": 1}')" '{"wait": 4}' \
		"$(py 5 s 'n')"
	res 2
	sc '.timed_out == true and .exit_code == 124 and (.stderr | test("KeyboardInterrupt")) and (.notice | test("session lives on"))'
	res 3
	sc '.value == "5"'
	res 4
	sc '.timed_out == true and (.error | test("session s ended: it did not stop within 1000 ms")) and (.error | test("state .* is lost"))'
	# The call before said so: this one simply starts a new session.
	res 5
	sc '.exit_code == 1 and (.stderr | test("NameError"))'
}

@test "session: killed by the process tool or the out-of-memory killer, it says its state is lost; cleanup_sandbox ends it" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "the memory cgroup needs root here"
	SERVER_ARGS="--memory 96M" session_of "$(py 1 m 'y = 7')" '{"wait": 1}' \
		"$(call_json 2 process '{"process_id": "m", "signal": "KILL", "wait_s": 10}')" '{"wait": 2}' \
		"$(py 3 m 'y')" '{"wait": 3}' \
		"$(py 4 m 'z = 1
b = bytearray(400 << 20)')" '{"wait": 4}' \
		"$(py 5 m 'z')" '{"wait": 5}' \
		"$(call_json 6 cleanup_sandbox '{}')" '{"wait": 6}' \
		"$(call_json 7 process '{}')" '{"wait": 7}' \
		"$(py 8 m '1')"
	res 2
	sc '.running == false and .exit_code == 137'
	res 3
	sc '.exit_code == 1 and (.notice | test("Session m had ended"))'
	res 4
	sc '(.error // "" | test("state .* is lost")) or (.stderr | test("MemoryError"))'
	res 7
	sc '.processes == []'
	res 8
	sc '.value == "1" and (.notice | test("background process"))'
}

@test "session: bad names, session with background, and more than --max-sessions are refused" {
	SERVER_ARGS="--max-sessions 1" session_of "$(py 1 'bad name' '1')" "$(py 2 a '1' '{"background": true}')" \
		"$(py 3 a '1')" '{"wait": 3}' "$(py 4 b '1')"
	res 1
	jqe "$result" '.isError == true and (.content[0].text | test("session"))'
	res 2
	jqe "$result" '.isError == true and (.content[0].text | test("session and background"))'
	res 3
	sc '.value == "1"'
	res 4
	sc '.exit_code == 1 and (.error | test("at most 1 sessions"))'
}
