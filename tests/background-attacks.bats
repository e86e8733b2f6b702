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
