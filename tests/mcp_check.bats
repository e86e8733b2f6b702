# The tools' contract as the official MCP TypeScript SDK client sees it (tests/mcp-check).
load lib/helpers

@test "mcp-check (official SDK client) passes every check on the local backend" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	# The key is there to prove it never reaches the sandbox; the API it names is a closed
	# local port, so auto passes over Daytona at once.
	run env DAYTONA_API_KEY=sk-test-secret DAYTONA_API_URL=http://127.0.0.1:9/api MCP_CHECK_SECRET=leak-me \
		"$MCP_CHECK" "$SANDBOX_MCP"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 13 ]
}
