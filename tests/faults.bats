# Failure paths of the server and its backends: whatever fails, the server keeps serving.
load lib/helpers

# A copy of the binary that any user may run, wherever the checkout is.
public_binary() {
	PUB=$(mktemp -d /tmp/sbx-faults.XXXXXX)
	chmod 755 "$PUB"
	cp "$SANDBOX_MCP" "$PUB/sandbox-mcp"
	chmod 755 "$PUB/sandbox-mcp"
}

teardown() {
	[ -z "${PUB:-}" ] || rm -rf "$PUB"
}

@test "no sandbox can be made (no user namespaces, not root): every call gets the reason, ping still answered" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to run a server without user namespaces"
	public_binary
	mkdir -m 700 "$PUB/state"
	chown 65534:65534 "$PUB/state"
	export SANDBOX_STATE_DIR="$PUB/state"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 30 -- \
		python3 "$TESTS_DIR/lib/no-userns.py" --uid 65534 -- "$PUB/sandbox-mcp" <<EOF2
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"echo one"}')
{"wait": 1}
{"jsonrpc":"2.0","id":"p1","method":"ping"}
{"wait": "p1"}
$(call_json 2 execute_python '{"script":"print(2)"}')
{"wait": 2}
{"jsonrpc":"2.0","id":"p2","method":"ping"}
{"jsonrpc":"2.0","id":"l","method":"tools/list"}
EOF2
	[ "$status" -eq 0 ]
	for id in 1 2; do
		result=$(response $id | jq -c .result)
		sc '.exit_code == 1 and .backend == null and (.error | startswith("Failed to initialize sandbox engine: local: "))'
	done
	jqe "$(response '"p1"')" '.result == {}'
	jqe "$(response '"p2"')" '.result == {}'
	jqe "$(response '"l"')" '.result.tools | length == 3'
	# It stopped because stdin closed at the end, not before.
	grep -q "shutting down: stdin closed" "$SERVER_LOG"
}
