# Attacks by a background process's code: on the calls that run after it (their environment,
# output, processes), on the sandbox's limits and its end, and on the server and agent through
# the process tool. Local (root and not) and Docker.
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
	jqe "$all" '.[2].running == false and all(.error == null)'
	jqe "$all" '(.[0].o + .[2].o + .[2].os) == 40000000 and (.[0].e + .[2].e + .[2].es) == 40000005'
}
