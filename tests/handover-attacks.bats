# --allow-hosts: what the code may hand over to the server's proxy on its socket (one byte 0 and
# SCM_RIGHTS, backends/agenthost/proxy.h), tried as an attacker: nothing handed over may block
# the server, leak its descriptors or stop its proxy serving.
# suite: uses docker
load lib/helpers
load lib/docker-setup
bats_require_minimum_version 1.5.0

setup_file() {
	docker_setup_file
}
teardown_file() {
	docker_teardown_file
}

setup() {
	common_setup
}

teardown() {
	unprivileged_teardown
}

# handover_case: lib/handover-attacks.py in the sandbox, then the server serves another call.
handover_case() {
	with_backend local
	local script
	script=$(cat "$TESTS_DIR/lib/handover-client.py" "$TESTS_DIR/lib/handover-attacks.py")
	local call2
	call2=$(call_json 2 execute_python '{"script": "print(6*7)"}')
	SESSION_TIMEOUT=60 mcp_session --allow-hosts 198.51.100.2:8080 <<<"$(printf '%s\n%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 8}')")" "$call2")"
	res 1
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | head -1)
	jqe "$P" '.after_linger == "403" and .after_linger_s < 3'
	res 2
	sc '.stdout == "42\n"'
}

@test "handover attacks, local: a handed-over socket set to linger on close holds neither the proxy nor the server" {
	handover_case
}

# many_case BACKEND: lib/handover-many.py in the sandbox of a server left 64 descriptors.
many_case() {
	with_backend "$1"
	few_fds_server 64
	local script
	script=$(cat "$TESTS_DIR/lib/handover-client.py" "$TESTS_DIR/lib/handover-many.py")
	mcp_session --allow-hosts 198.51.100.2:8080 <<EOS
$INIT
$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 60}')")
$(call_json 2 execute_bash_commands '{"code":"echo still here"}')
EOS
	res 1
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | tail -1)
	printf '%s' "$result" | jq -c . | cut -c1-1500 >&2
	jqe "$P" '.bad | to_entries | all(.value == "closed")'
	jqe "$P" '.socketpair_heard == false and .zero_no_fd == "400"'
	jqe "$P" '.tcp_evil == "403" and .tcp_loopback == "403" and .busy >= 2 and .after == "403"'
	res 2
	sc '.stdout == "still here\n"'
}

@test "handover attacks, local: files, pipes, eventfds, /proc/self/mem, other sockets, two at once, handed over 25 times to a server of 64 descriptors: dropped, nothing kept; TCP handed over keeps the policy" {
	many_case local
}

@test "handover attacks, local with a server that is not root: the same, dropped, nothing kept" {
	unprivileged_server
	many_case local
}

@test "handover attacks, docker: the same, dropped, nothing kept" {
	many_case docker
}

@test "handover attacks, local: a socket handed over while every slot is taken, its code clearing O_NONBLOCK and asking to linger over and over: the 503 blocks nothing" {
	with_backend local
	local script
	script=$(cat "$TESTS_DIR/lib/handover-client.py" "$TESTS_DIR/lib/handover-block.py")
	SESSION_TIMEOUT=60 mcp_session --allow-hosts 198.51.100.2:8080 <<EOS
$INIT
$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 10}')")
$(call_json 2 execute_bash_commands '{"code":"echo still here"}')
EOS
	res 1
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | head -1)
	jqe "$P" '.after == "403" and .after_s < 3'
	res 2
	sc '.stdout == "still here\n"'
}

# queued_case BACKEND [KINDS]: lib/handover-queued.py in the sandbox (KINDS: its HOWS); the
# server answers the call and the next, and its descriptors come back to what it had before.
queued_case() {
	with_backend "$1"
	local script fds="$BATS_TEST_TMPDIR/fds"
	script=$(printf 'HOWS = "%s"\n' "${2:-busy behind nested many}"; cat "$TESTS_DIR/lib/handover-client.py" "$TESTS_DIR/lib/handover-queued.py")
	SESSION_TIMEOUT=60 mcp_session --allow-hosts 198.51.100.2:8080 <<EOS
$INIT
$(call_json 1 execute_bash_commands '{"code":"true"}')
{"wait": 1}
{"sh": "ls /proc/\$SERVER_PID/fd | wc -l > '$fds'"}
$(call_json 2 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 30}')")
$(call_json 3 execute_bash_commands '{"code":"echo still here"}')
{"wait": 3}
{"until": "[ \$(ls /proc/\$SERVER_PID/fd | wc -l) -le \$(cat '$fds') ]"}
EOS
	res 2
	P=$(printf '%s' "$result" | jq -r '.structuredContent.stdout' | sed '/^$/d' | head -1)
	jqe "$P" '.after == "403" and .after_s < 3 and .busy == "503"'
	res 3
	sc '.stdout == "still here\n"'
}

@test "handover attacks, local: a lingering socket and its peer queued behind a handover, in a unix socket handed over, behind one told 503, or nine in a message: the proxy, the server and its descriptors are not held" {
	queued_case local
}

@test "handover attacks, local with a server that is not root: the same, not held" {
	unprivileged_server
	queued_case local
}

@test "handover attacks, docker: the same, not held" {
	queued_case docker
}
