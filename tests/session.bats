# Python sessions (execute_python with `session`): one interpreter per name whose names,
# imports and objects carry over; a cell's last expression is its value; an exception leaves the
# session alive; a timeout interrupts, and kills what does not stop; an interpreter killed (the
# process tool, OOM) loses the state and says so; files, env and args as for any call; listed
# and ended by the process tool; gone with cleanup_sandbox. Local (root and not) and Docker.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/session
bats_require_minimum_version 1.5.0

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

teardown() {
	[ -z "${UNPRIV_DIR:-}" ] || unprivileged_teardown
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
