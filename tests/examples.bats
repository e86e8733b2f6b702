# The files in examples/ (host configurations and the demo session) stay correct.
load lib/helpers

EXAMPLES="$REPO_DIR/examples"

# env_of FILE: the KEY=VALUE pairs of every server entry's "env" in a host configuration.
env_of() {
	jq -r '(.mcpServers // .servers) | to_entries[] | .value.env // {} | to_entries[] | "\(.key)=\(.value)"' "$1"
}

@test "examples: every host configuration is valid JSON that starts the sandbox-mcp command" {
	local n=0 f
	for f in "$EXAMPLES"/*.json; do
		n=$((n + 1))
		jq -e . "$f" >/dev/null || { echo "$f is not valid JSON" >&2; return 1; }
		jq -e '(.mcpServers // .servers) | type == "object" and length > 0 and
			all(.[]; (.command | type == "string" and test("(^|/)sandbox-mcp$")) and
			          ((.args // []) | type == "array"))' "$f" >/dev/null ||
			{ echo "$f does not start sandbox-mcp" >&2; cat "$f" >&2; return 1; }
	done
	[ "$n" -ge 3 ]
}

@test "examples: each host uses its own format (Claude Desktop and Cursor: mcpServers; VS Code: servers, type stdio)" {
	jqe "$(cat "$EXAMPLES/claude_desktop_config.json")" '.mcpServers | length > 0'
	jqe "$(cat "$EXAMPLES/cursor-mcp.json")" '.mcpServers | length > 0'
	jqe "$(cat "$EXAMPLES/vscode-mcp.json")" '(.mcpServers == null) and (.servers | length > 0) and all(.servers[]; .type == "stdio")'
}

@test "examples: the environment variables they set are real options, with values the server accepts" {
	local f kv help
	help=$("$SANDBOX_MCP" --help)
	for f in "$EXAMPLES"/*.json; do
		[ -n "$(env_of "$f")" ] || { echo "$f sets no environment variable" >&2; return 1; }
		while IFS= read -r kv; do
			grep -q "env ${kv%%=*}," <<<"$help" || { echo "$f: ${kv%%=*} is not in --help" >&2; return 1; }
			# The server refuses bad values at start-up (exit 2), before it reads anything.
			run env "$kv" "$SANDBOX_MCP" --log-level error < /dev/null
			[ "$status" -eq 0 ] || { echo "$f: the server rejects $kv: $output" >&2; return 1; }
		done < <(env_of "$f")
	done
}

@test "examples: claude-code.sh is valid sh and prints a claude mcp add command for the stdio server" {
	sh -n "$EXAMPLES/claude-code.sh"
	run sh "$EXAMPLES/claude-code.sh"
	[ "$status" -eq 0 ]
	[[ "$output" == "claude mcp add "* ]]
	[[ "$output" == *"--transport stdio "* ]]
	[[ "$output" == *" -- /usr/local/bin/sandbox-mcp" ]]
	# Claude Code reads its own options only before the server's name and the "--".
	local before=${output%% -- *} kv
	[[ "$before" == *"--env SANDBOX_"* ]]
	kv=${before##*--env }
	kv=${kv%% *}
	"$SANDBOX_MCP" --help | grep -q "env ${kv%%=*},"
}

@test "examples: the README points at every example file" {
	local f
	for f in "$EXAMPLES"/*; do
		grep -qF "examples/$(basename "$f")" "$REPO_DIR/README.md" ||
			{ echo "README.md does not mention examples/$(basename "$f")" >&2; return 1; }
	done
}

@test "examples: demo.py runs its whole session through the real server and every step is as expected" {
	cd "$REPO_DIR"
	run python3 examples/demo.py --log "$BATS_TEST_TMPDIR/server.log" "$SANDBOX_MCP"
	printf '%s\n' "$output" | tail -40
	[ "$status" -eq 0 ]
	[[ "${lines[${#lines[@]} - 1]}" =~ ^summary:\ ([0-9]+)\ of\ ([0-9]+)\ steps\ as\ expected$ ]]
	[ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]
	[ "${BASH_REMATCH[1]}" -ge 9 ]
	[[ "$output" != *FAIL* ]]
	# What the session shows: persistence, a fresh interpreter, the timeout, the cleanup.
	[[ "$output" == *"wrote 60 rows to /workspace/data/temperatures.csv"* ]]
	[[ "$output" == *"NameError: name 'rows' is not defined"* ]]
	[[ "$output" == *"exit_code 124 | isError true"*"TIMED OUT"* ]]
	[[ "$output" == *"data/temperatures.csv is gone"* ]]
}

@test "examples: demo.py exits non-zero and says what failed when the steps go wrong" {
	cd "$REPO_DIR"
	# An interpreter the sandbox does not have: the Python steps fail, and so does step 2, which
	# reads the file step 1 should have written; the rest still pass.
	run python3 examples/demo.py --log "$BATS_TEST_TMPDIR/server.log" "$SANDBOX_MCP" --python sandbox-no-such-python
	[ "$status" -eq 1 ]
	[[ "${lines[${#lines[@]} - 1]}" == "summary: "*" steps as expected; FAILED: 1 execute_python, 2 execute_bash_commands, 3 execute_python" ]]
	[[ "$output" == *"FAIL: expected exit_code 0 and no isError"* ]]
}
