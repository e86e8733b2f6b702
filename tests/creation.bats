# Cancelling a call, or shutting down, while its sandbox is still being made (a Docker image
# pull, a Daytona create and start): honoured within a second, and nothing left behind.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/daytona-setup

setup_file() {
	docker_setup_file
	daytona_setup_file
}
teardown_file() {
	docker_teardown_file
	daytona_teardown_file
}

live_sandboxes() {
	daytona_control '{}' | jq '.sandboxes | length'
}

# A fresh Daytona test server: a create that an earlier test cut short is still held by the
# old one and makes its sandbox after that test ended; it must not count here.
fresh_daytona() {
	local old
	old=$(cat "$BATS_FILE_TMPDIR/daytona.pid")
	daytona_teardown_file
	eventually 10 test ! -e "/proc/$old"
	rm -f "$BATS_FILE_TMPDIR/daytona.port"
	daytona_setup_file
	with_backend daytona
}

teardown() {
	[ -f "$BATS_TEST_TMPDIR/stall.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/stall.pid")" 2>/dev/null
	unprivileged_teardown
	return 0
}

# A registry on 127.0.0.1 that accepts and never answers (the engine trusts 127.0.0.0/8
# registries without TLS, so it tries it): an image pull that hangs.
stall_registry() {
	python3 "$TESTS_DIR/lib/stall-server.py" "$BATS_TEST_TMPDIR/stall.port" &
	echo $! > "$BATS_TEST_TMPDIR/stall.pid"
	for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/stall.port" ] && break; sleep 0.05; done
	STALL_IMAGE="127.0.0.1:$(cat "$BATS_TEST_TMPDIR/stall.port")/stalls/forever:1"
}


# cancelled_while_made COND [ARGS...]: a session (the server started with ARGS) whose call is
# cancelled once the shell condition COND holds (the making has reached what it tests); the
# call gets no answer, a ping does, and the server says the making was cancelled within a
# second of the cancellation.
cancelled_while_made() {
	local cond=$1
	shift
	mcp_session "$@" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo never"}')
{"sh": "for i in \$(seq 600); do $cond && exit 0; sleep 0.1; done; exit 1"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
{"sh": "t0=\$(date +%s%N); for i in \$(seq 200); do grep -q 'making the sandbox was cancelled' $SERVER_LOG && { echo \$(( (\$(date +%s%N) - t0) / 1000000 )) > $BATS_TEST_TMPDIR/cancel_ms; exit 0; }; sleep 0.01; done; exit 1"}
{"jsonrpc":"2.0","id":"p","method":"ping"}
EOF
	[ -z "$(response 1)" ]
	jqe "$(response '"p"')" '.result == {}'
	echo "cancelled after $(cat "$BATS_TEST_TMPDIR/cancel_ms") ms"
	[ "$(cat "$BATS_TEST_TMPDIR/cancel_ms")" -lt 1000 ]
}

@test "docker: a call cancelled during an image pull ends within a second; the server goes on" {
	with_backend docker
	stall_registry
	export SANDBOX_IMAGE="$STALL_IMAGE"
	cancelled_while_made "grep -q 'pulling the image' $SERVER_LOG"
	[ -z "$(our_containers)" ]
}

@test "docker: SIGTERM during an image pull exits within 2 s and leaves nothing behind" {
	with_backend docker
	stall_registry
	export SANDBOX_IMAGE="$STALL_IMAGE"
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo never"}')
{"sh": "for i in \$(seq 600); do grep -q 'pulling the image' $SERVER_LOG && exit 0; sleep 0.1; done; exit 1"}
{"signal": "TERM"}
{"expect_exit": 5}
EOF
	jqe "$(printf '%s\n' "$output" | grep exit_after_ms)" '.exit == 0 and .exit_after_ms < 2000'
	[ -z "$(our_containers)" ]
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name 'docker-*')" ]
}

# Not root, the workspace is a volume the engine makes first (sandbox.bats, quota): a create held
# by the engine is cancelled the same way, and the volume it made goes.
@test "docker, not root: a call cancelled while the workspace's volume is made ends within a second; nothing is left" {
	with_backend docker
	unprivileged_server
	unprivileged_docker slow-volume
	cancelled_while_made "grep -q 'holding POST /volumes/create' $UNPRIV_DIR/relay.log" --workspace-size 32M
	# Cancelled, not a quota that failed: the making stopped there.
	[ -z "$(grep -F 'could not bound the workspace' "$SERVER_LOG")" ]
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	no_sandbox_processes "$UNPRIV_UID"
	unprivileged_cleanup
}

@test "daytona: a call cancelled while its sandbox is created, or starting, ends within a second" {
	with_backend daytona
	for mode in '{"fail": "slow", "seconds": 20, "method": "POST", "path": "/api/sandbox"}' '{"fail": "never_start"}'; do
		daytona_control "$mode" >/dev/null
		: > "$SERVER_LOG"
		echo "$mode:"
		cancelled_while_made "grep -qE 'slow: holding POST /api/sandbox|created; waiting for it to start' $BATS_FILE_TMPDIR/daytona.log $SERVER_LOG"
		: > "$BATS_FILE_TMPDIR/daytona.log"
	done
	# The one that was starting was deleted on the spot.
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "daytona: SIGTERM while the sandbox starts exits within 2 s and leaves no sandbox" {
	with_backend daytona
	daytona_control '{"fail": "never_start"}' >/dev/null
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo never"}')
{"sh": "for i in \$(seq 600); do grep -q 'created; waiting for it to start' $SERVER_LOG && exit 0; sleep 0.05; done; exit 1"}
{"signal": "TERM"}
{"expect_exit": 5}
EOF
	jqe "$(printf '%s\n' "$output" | grep exit_after_ms)" '.exit == 0 and .exit_after_ms < 2000'
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "daytona: a sandbox made by a create that was cut short is deleted by this server's next making" {
	fresh_daytona
	daytona_control '{"fail": "slow", "seconds": 5, "method": "POST", "path": "/api/sandbox", "count": 1}' >/dev/null
	# The test server's log is the file's: only what it logs from now on counts.
	local from=$(($(wc -l <"$BATS_FILE_TMPDIR/daytona.log") + 1))
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo never"}')
{"until": "tail -n +$from $BATS_FILE_TMPDIR/daytona.log | grep -q 'slow: holding POST /api/sandbox'"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
{"until": "tail -n +$from $BATS_FILE_TMPDIR/daytona.log | grep -q 'POST /api/sandbox -> '"}
$(call_json 2 execute_bash_commands '{"code":"echo fresh"}')
{"wait": 2}
{"sh": "python3 -c 'import json,sys,urllib.request; n=len(json.load(urllib.request.urlopen(\"$DT_URL/_control\"))[\"sandboxes\"]); sys.exit(0 if n == 1 else 1)'"}
EOF
	[ -z "$(response 1)" ]
	res 2
	sc '.exit_code == 0 and .stdout == "fresh\n"'
	grep -q "made by a create of this server that was cut short" "$SERVER_LOG"
	[ "$(live_sandboxes)" -eq 0 ]
}
