# Cancelling a call, or shutting down, while its sandbox is still being made (a Docker image
# pull, a Daytona create and start): honoured within a second, and nothing left behind.
load lib/helpers
load lib/docker-setup

setup_file() { docker_setup_file; }
teardown_file() { docker_teardown_file; }

teardown() {
	[ -f "$BATS_TEST_TMPDIR/stall.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/stall.pid")" 2>/dev/null
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


@test "docker: a call cancelled during an image pull ends within a second; the server goes on" {
	with_backend docker
	stall_registry
	export SANDBOX_IMAGE="$STALL_IMAGE"
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo never"}')
{"sh": "for i in \$(seq 600); do grep -q 'pulling the image' $SERVER_LOG && exit 0; sleep 0.1; done; exit 1"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
{"sh": "t0=\$(date +%s%N); for i in \$(seq 100); do grep -q 'making the sandbox was cancelled' $SERVER_LOG && { echo \$(( (\$(date +%s%N) - t0) / 1000000 )) > $BATS_TEST_TMPDIR/cancel_ms; exit 0; }; sleep 0.01; done; exit 1"}
{"jsonrpc":"2.0","id":"p","method":"ping"}
EOF
	[ -z "$(response 1)" ]
	jqe "$(response '"p"')" '.result == {}'
	echo "cancelled after $(cat "$BATS_TEST_TMPDIR/cancel_ms") ms"
	[ "$(cat "$BATS_TEST_TMPDIR/cancel_ms")" -lt 1000 ]
	[ -z "$(docker ps -aq --filter label=sandbox-mcp=1)" ]
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
	[ -z "$(docker ps -aq --filter label=sandbox-mcp=1)" ]
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name 'docker-*')" ]
}
