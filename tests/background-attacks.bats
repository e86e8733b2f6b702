# Attacks by a background process's code: on the calls that run after it (their environment,
# output, processes), on the sandbox's limits and its end, and on the server and agent through
# the process tool. Local (root and not) and Docker.
# suite: uses docker
load lib/helpers
load lib/prestart
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

# big_input ID LEN [CLOSE]: a process call line that writes LEN bytes of input to bg-1, built by
# jq itself (too large for an argument).
big_input() {
	jq -cn --argjson id "$1" --argjson n "$2" --argjson c "${3:-false}" \
		'{jsonrpc: "2.0", id: $id, method: "tools/call", params: {name: "process", arguments: {process_id: "bg-1", input: ("y" * $n), close_input: $c}}}'
}

session_of() {
	mcp_session --no-sandbox-ahead ${SERVER_ARGS:-} <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$@")"
}

# A background process that watches every process of the sandbox for what a later call holds:
# its environment (read through /proc), its stdout (written through /proc/PID/fd/1) and the
# process itself (stopped with SIGSTOP; its marker is split in the spy's own text). The later call must see none of it, and the spy must
# say it could not.
spy_on_later_call() {
	local spy='while :; do
	for p in /proc/[0-9]*; do
		case "$(tr "\0" " " < $p/cmdline 2>/dev/null)" in *"vic"tim-marker*) ;; *) continue ;; esac
		grep -qa TOKEN=s3cr3t $p/environ 2>/dev/null && echo "read its env"
		echo INJECTED 2>/dev/null > $p/fd/1 && echo "wrote its stdout"
		kill -STOP ${p#/proc/} 2>/dev/null && echo "stopped it"
		echo seen; exit 0
	done
done'
	session_of "$(bg 1 "$spy")" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "sleep 1.5; : victim-marker; echo clean", "env": {"TOKEN": "s3cr3t"}, "timeout_s": 20}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 20}')"
	res 2
	sc '.stdout == "clean\n" and .exit_code == 0 and .timed_out == false'
	res 3
	sc '.stdout == "seen\n"'
}

@test "background attack: a background process cannot read, write into or signal a later call (local)" {
	with_backend local
	spy_on_later_call
}

@test "background attack: a background process cannot read, write into or signal a later call (local, not root)" {
	unprivileged_server
	with_backend local
	spy_on_later_call
}

@test "background attack: a background process cannot read, write into or signal a later call (Docker)" {
	with_backend docker
	spy_on_later_call
}

@test "background attack: a read of two full streams at the largest caps fits one frame; nothing is lost" {
	# Each stream may keep --output-cap bytes (64M) between reads when --result-max allows it:
	# both together must still fit one answer of the agent, else the read fails and what it
	# took is gone.
	SERVER_ARGS="--output-cap 64M --result-max 256M --memory 2G" session_of \
		"$(bg 1 'head -c 40000000 /dev/zero | tr "\0" x; head -c 40000000 /dev/zero | tr "\0" y >&2; echo done >&2; exec sleep 60' '{"wait_s": 0.1}')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "f=.sandbox/output/call-1.stderr; for i in $(seq 600); do [ \"$(tail -c 5 $f 2>/dev/null)\" = done ] && break; sleep 0.1; done; tail -c 5 $f"}')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "signal": "KILL", "wait_s": 20}')"
	# One pass of jq over the large answers: their sizes only.
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 1 or .id == 2 or .id == 3) | .result.structuredContent | {o: (.stdout | length), e: (.stderr | length), os: (.stdout_skipped // 0), es: (.stderr_skipped // 0), tail: .stdout[-5:], running, error}]')
	jqe "$all" '.[1].tail == "done\n"'
	jqe "$all" 'all(.error == null)'
	jqe "$all" '(.[0].o + .[2].o + .[2].os) == 40000000 and (.[0].e + .[2].e + .[2].es) == 40000005'
}

@test "background attack: forged, out-of-range and malformed process ids and arguments get errors; the server goes on" {
	local ids=("bg-0" "bg-2" "bg-4294967295" "bg-4294967296" "bg-18446744073709551617" "bg--4294967295" "bg-1x" "bg-" "1" "BG-1" "bg-0x1")
	local lines=("$(bg 1 'read x; echo "got $x"; sleep 60')" '{"wait": 1}') i=10 id
	for id in "${ids[@]}"; do
		lines+=("$(proc $i "$(jq -cn --arg p "$id" '{process_id: $p, signal: "KILL"}')")" "{\"wait\": $i}")
		i=$((i + 1))
	done
	# Out of the schema's range: refused before anything runs.
	lines+=("$(proc 30 '{"process_id": "bg-1", "wait_s": 1e308}')" '{"wait": 30}')
	lines+=("$(proc 31 '{"process_id": "bg-1", "wait_s": -1}')" '{"wait": 31}')
	lines+=("$(proc 32 '{"process_id": "bg-1", "signal": "STOP"}')" '{"wait": 32}')
	lines+=("$(big_input 33 1048577)" '{"wait": 33}')
	lines+=("$(proc 34 '{"input": "x"}')" '{"wait": 34}')
	lines+=("$(proc 35 "$(jq -cn '{process_id: ("bg-" + ("1" * 64))}')")" '{"wait": 35}')
	# bg-1 was touched by none of them: it still reads its first line.
	lines+=("$(proc 40 '{"process_id": "bg-1", "input": "one\n", "wait_s": 20}')" '{"wait": 40}')
	lines+=("$(call_json 41 execute_bash_commands '{"code": "echo alive"}')")
	session_of "${lines[@]}"
	for i in $(seq 10 20) 34; do
		res "$i"
		jqe "$result" '.isError == true and (.structuredContent.error | type == "string")'
	done
	for i in 30 31 32 33 35; do
		res "$i"
		jqe "$result" '.isError == true'
	done
	res 40
	sc '.running == true and .stdout == "got one\n"'
	res 41
	sc '.stdout == "alive\n"'
}

@test "background attack: a MiB of input to a program that never reads returns at once with what the pipe took" {
	session_of "$(bg 1 'exec sleep 60')" '{"wait": 1}' \
		"$(big_input 2 1048576)" '{"wait": 2}' \
		"$(big_input 3 1048576 true)" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1", "input": "z"}')" '{"wait": 4}' \
		"$(call_json 5 execute_bash_commands '{"code": "echo alive", "timeout_s": 10}')"
	res 2
	sc '.running == true and .input_written > 0 and .input_written < 1048576'
	res 3
	sc '.input_written == 0'
	res 4
	sc '.error | test("input is closed")'
	res 5
	sc '.stdout == "alive\n"'
}

# A background process replaces the folder its spill files go to, and the file itself, with
# symlinks before it floods its output: the agent follows neither, and what it could not keep
# is said, never written through. The shell's own command line holds its code, so the marker
# the test waits for ("sleep 76.5", once the flood is written) is quoted apart there.
spill_symlinks() {
	local plant='mkdir -p /tmp/elsewhere .sandbox/output
: > /tmp/target
ln -sfn /tmp/target .sandbox/output/call-1.stdout
rm -rf .sandbox/output-real; mv .sandbox/output .sandbox/output-real; ln -s /tmp/elsewhere .sandbox/output
echo planted
read go
head -c 300000 /dev/zero | tr "\0" x
echo; echo flooded >&2
exec sleep 76."5"'
	session_of "$(bg 1 "$plant" '{"wait_s": 5}')" '{"wait": 1}' \
		"$(proc 2 '{"process_id": "bg-1", "input": "go\n"}')" '{"wait": 2}' "$(until_running "sleep 76.5")" \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1"}')" '{"wait": 4}' \
		"$(call_json 5 execute_bash_commands '{"code": "ls -A /tmp/elsewhere; wc -c < /tmp/target; ls -A .sandbox/output-real"}')"
	res 1
	sc '.running == true and .stdout == "planted\n"'
	local all
	# The read after the input (2) may take the flood's first bytes already.
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select(.id == 2 or .id == 3 or .id == 4) | .result.structuredContent]')
	jqe "$all" '(map(.stdout | length) | add) + (map(.stdout_skipped) | add) == 300001'
	jqe "$all" 'map(select(.stdout_skipped > 0)) | all(.stdout_file == null)'
	jqe "$all" '(map(.stderr) | join("")) == "flooded\n"'
	res 5
	sc '.stdout == "0\ncall-1.stdout\n"'
}

@test "background attack: spill files are never written through symlinks the code planted (local)" {
	with_backend local
	spill_symlinks
}

@test "background attack: spill files are never written through symlinks the code planted (local, not root)" {
	unprivileged_server
	with_backend local
	spill_symlinks
}

@test "background attack: spill files are never written through symlinks the code planted (Docker)" {
	with_backend docker
	spill_symlinks
}

# A background process that leaves children in every way it can: in a session of its own (a
# double fork), stopped with SIGSTOP, ignoring every signal it may ignore. The last one's
# marker is quoted apart in the code, which is the shell's command line, so that a wait for
# "sleep 73.104" ends only once that process runs.
ESCAPES='trap "" TERM HUP INT QUIT USR1 USR2
(setsid sh -c "trap \"\" TERM HUP; sleep 73.101 & exec sleep 73.102" &)
sh -c "kill -STOP \$\$; exec sleep 73.103" &
nohup setsid sleep 73.10"4" >/dev/null 2>&1 &
echo left'

@test "background attack: what a background process left in other sessions, stopped or deaf, ends with cleanup_sandbox" {
	session_of "$(bg 1 "$ESCAPES; exec sleep 73.105")" '{"wait": 1}' "$(until_running "sleep 73.104")" \
		"$(call_json 2 cleanup_sandbox '{}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "ps -eo args"}')" '{"wait": 3}' '{"sh": "sleep 0.2"}'
	res 1
	sc '.running == true and .stdout == "left\n"'
	res 3
	sc '(.stdout | contains("73.10") | not)'
	eventually 10 no_process_matching 'sleep 73\.10'
}

@test "background attack: what a background process left in other sessions, stopped or deaf, ends with shutdown (Docker)" {
	with_backend docker
	session_of "$(bg 1 "$ESCAPES; exec sleep 73.105")" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "for p in /proc/[0-9]*; do tr \"\\\\0\" \" \" < $p/cmdline; echo; done"}')"
	res 2
	sc '(.stdout | contains("sleep 73.104")) and (.stdout | contains("sleep 73.105"))'
	eventually 20 no_process_matching 'sleep 73\.10'
}

@test "background attack: what a background process left in other sessions ends when it ends, not only at the next call's end" {
	session_of "$(bg 1 "$ESCAPES; sleep 60" '{"timeout_s": 2, "wait_s": 0.5}')" '{"wait": 1}' \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 20}')" '{"wait": 3}' \
		"$(proc 5 '{}')" '{"wait": 5}' \
		"$(call_json 6 execute_bash_commands '{"code": "ps -eo args"}')"
	res 3
	sc '.running == false and .timed_out == true'
	res 5
	sc '.processes == []'
	res 6
	sc '(.stdout | contains("73.10") | not)'
}

@test "background attack: a flood of process requests beside a call, and reads waiting across cleanup_sandbox" {
	# The ticks stop once the file stop is there (then the process sleeps on): the read sent
	# behind the cleanup has nothing to take, so it can only end by the cleanup.
	local lines=("$(bg 1 'while [ ! -e stop ]; do echo tick; sleep 0.05; done; exec sleep 1000')" '{"wait": 1}'
		"$(call_json 2 execute_bash_commands '{"code": "sleep 2; echo slow"}')") i
	for i in $(seq 10 209); do
		lines+=("$(proc "$i" '{"process_id": "bg-1"}')")
	done
	lines+=('{"wait": 2}'
		"$(call_json 298 execute_bash_commands '{"code": "touch stop; until ps -eo args | grep -q \"^sleep 1000\"; do sleep 0.05; done"}')"
		'{"wait": 298}' "$(proc 300 '{"process_id": "bg-1"}')" '{"wait": 300}'
		"$(call_json 301 cleanup_sandbox '{}')" "$(proc 302 '{"process_id": "bg-1", "wait_s": 30}')" "$(proc 303 '{}')"
		'{"wait": 301}' '{"wait": 302}' '{"wait": 303}'
		"$(call_json 304 execute_bash_commands '{"code": "echo after"}')")
	session_of "${lines[@]}"
	res 2
	sc '.stdout == "slow\n"'
	# Every request got one answer; each tick was read at most once, in order.
	local all
	all=$(printf '%s\n' "$output" | jq -sc '[.[] | select((.id | type) == "number" and .id >= 10 and .id <= 209)]')
	jqe "$all" 'length == 200'
	jqe "$all" '[.[] | .result.structuredContent | select(.error == null) | .stdout] | join("") | test("^(tick\n)*$")'
	res 298
	sc '.exit_code == 0'
	res 302
	jqe "$result" '.isError == true or .structuredContent.running == false'
	jqe "$result" '(.structuredContent.stdout // "") | test("tick") | not'
	res 304
	sc '.stdout == "after\n" and (.notice | test("1 background process"))'
}

@test "background attack: the agent killed while a read waits: the read fails, the server goes on" {
	local pidf="$BATS_TEST_TMPDIR/server.pid"
	{
		printf '%s\n' "$INIT" "$INITIALIZED" "$(bg 1 'sleep 74.5')" '{"wait": 1}'
		proc 2 '{"process_id": "bg-1", "wait_s": 30}'
		# The kill comes right behind the read: whether the read reached the agent first or not,
		# it must fail with an error and the server go on.
		jq -cn --arg c "kill -KILL \$(pgrep -P \$(cat $pidf) -f '^sandbox-agent ')" '{sh: $c}'
		echo '{"wait": 2}'
		call_json 3 execute_bash_commands '{"code": "echo after"}'
	} >"$BATS_TEST_TMPDIR/s"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" --no-sandbox-ahead <"$BATS_TEST_TMPDIR/s"
	[ "$status" -eq 0 ]
	res 2
	jqe "$result" '.isError == true and (.structuredContent.error | type == "string")'
	res 3
	sc '.stdout == "after\n"'
	eventually 10 no_process_matching 'sleep 74\.5'
}

@test "background attack: a zombie flood and a stream of new sessions beside later calls" {
	# Children it never reaps, and a fork loop whose children each start a session of their
	# own: a later call's end must still come, and its end still leaves nothing of its own.
	session_of "$(bg 1 'for i in $(seq 100); do sh -c "exit 0" & done; exec 2>/dev/null; while :; do setsid sleep 75.5 & sleep 0.01; done')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "setsid sleep 75.6 & echo ran", "timeout_s": 30}')" '{"wait": 2}' \
		"$(call_json 3 execute_bash_commands '{"code": "ps -eo args | grep -c \"^sleep 75.6\""}')" '{"wait": 3}' \
		"$(proc 4 '{}')"
	res 2
	sc '.stdout == "ran\n"'
	res 3
	sc '.stdout == "0\n"'
}

@test "background attack: a background call in its wait cannot reach the prestarted interpreter beside it" {
	local spy='for p in /proc/[0-9]*; do
	case "$(tr "\0" " " < $p/cmdline 2>/dev/null)" in *"yth"on*) ;; *) continue ;; esac
	echo "found"
	cat $p/environ >/dev/null 2>&1 && echo "read its env"
	ls $p/fd/ >/dev/null 2>&1 && echo "listed its fds"
	kill -STOP ${p#/proc/} 2>/dev/null && echo "stopped it"
done; exit 0'
	# Once call 1 has ended, an interpreter is started ahead of the next Python call: wait until
	# it runs and has made itself non-dumpable (before that, its /proc files are its user's:
	# the fd folder can be listed by name, though never read through, in the start-up's window).
	session_of "$(call_json 1 execute_python '{"script": "print(1)"}')" '{"wait": 1}' "$(waited)" \
		"$(bg 2 "$spy" '{"wait_s": 20}')" '{"wait": 2}' \
		"$(call_json 3 execute_python '{"script": "print(3)", "timeout_s": 20}')"
	res 2
	jqe "$result" '.structuredContent | has("process_id") | not'
	sc '(.stdout | test("found")) and (.stdout | test("read|listed|stopped") | not)'
	res 3
	sc '.stdout == "3\n" and .timed_out == false'
}
