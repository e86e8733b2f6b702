# --allow-hosts: what the code may hand over to the server's proxy on its socket (one byte 0 and
# SCM_RIGHTS, backends/agenthost/proxy.h), tried as an attacker: nothing handed over may block
# the server, leak its descriptors or stop its proxy serving.
load lib/helpers
bats_require_minimum_version 1.5.0

setup() {
	common_setup
}

teardown() {
	unprivileged_teardown
}

# handover_case: lib/handover-attacks.py in the sandbox, then the server serves another call.
handover_case() {
	export SANDBOX_BACKEND=local
	local script
	script=$(cat "$TESTS_DIR/lib/handover-attacks.py")
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
