# The tools' contract as the official MCP TypeScript SDK client sees it (shared/tools/mcp-check).
load lib/helpers

MCP_CHECK="$REPO_DIR/../shared/tools/mcp-check/run"

@test "mcp-check (official SDK client) passes every check on the local backend" {
	[ -x "$MCP_CHECK" ] || skip_or_fail "mcp-check not found at $MCP_CHECK"
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run env DAYTONA_API_KEY=sk-test-secret MCP_CHECK_SECRET=leak-me "$MCP_CHECK" "$SANDBOX_MCP"
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 13 ]
}
