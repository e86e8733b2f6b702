# The suite's own guards: its test files hold no assertion that cannot fail and no fixed
# sleep, and the session driver every test uses fails on a result that breaks its tool's
# outputSchema or on a server that walks away from a request.
load lib/helpers
bats_require_minimum_version 1.5.0

LINT="$BATS_TEST_DIRNAME/lib/lint-suite.py"

# A stand-in server: answers initialize, then answers each tools/call with the result that
# $FAKE_RESULT holds (JSON), or exits at once when it is "exit".
fake_server() {
	cat >"$BATS_TEST_TMPDIR/fake.py" <<'PY'
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {}}), flush=True)
    elif m.get("method") == "tools/call":
        if os.environ["FAKE_RESULT"] == "exit":
            sys.exit(0)
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": json.loads(os.environ["FAKE_RESULT"])}), flush=True)
PY
	echo "$BATS_TEST_TMPDIR/fake.py"
}

@test "suite: no test file holds an assertion that cannot fail or a fixed sleep" {
	run python3 "$LINT" "$BATS_TEST_DIRNAME"/*.bats
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "0 found" ]
}

@test "suite: the lint finds a negated command that is not its test's last line, and a fixed sleep" {
	printf '%s\n' '@test "x" {' '	! grep -q a /dev/null' '	true' '}' '@test "y" {' '	mcp_session <<E' \
		'{"sl''eep": 1}' 'E' '}' '@test "z" {' '	true' '	! false' '}' >"$BATS_TEST_TMPDIR/bad.bats"
	run python3 "$LINT" "$BATS_TEST_TMPDIR/bad.bats"
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "${lines[0]}" == *"bad.bats:2:"*"cannot fail"* ]]
	[[ "${lines[1]}" == *"bad.bats:7:"*"fixed sleep"* ]]
	[ "${lines[2]}" = "2 found" ]
}

@test "suite: the session driver fails on a result that breaks its tool's outputSchema" {
	local srv
	srv=$(fake_server)
	export FAKE_RESULT='{"content":[{"type":"text","text":"x"}],"structuredContent":{"stdout":7}}'
	run python3 "$SESSION" -- python3 "$srv" <<<"$INIT
$(call_json 1 execute_bash_commands '{"code":"true"}')"
	[ "$status" -eq 5 ]
	[[ "$output" == *"does not satisfy its outputSchema"* ]]
	# ...and one that is no error but carries no structuredContent.
	export FAKE_RESULT='{"content":[{"type":"text","text":"x"}]}'
	run python3 "$SESSION" -- python3 "$srv" <<<"$INIT
$(call_json 1 execute_python '{"script":"1"}')"
	[ "$status" -eq 5 ]
	[[ "$output" == *"has no structuredContent"* ]]
	# An error result without it is fine.
	export FAKE_RESULT='{"content":[{"type":"text","text":"x"}],"isError":true}'
	run python3 "$SESSION" -- python3 "$srv" <<<"$INIT
$(call_json 1 execute_python '{"script":"1"}')"
	[ "$status" -eq 0 ]
}

@test "suite: the session driver fails when the server exits leaving a request unanswered" {
	local srv
	srv=$(fake_server)
	export FAKE_RESULT=exit
	run python3 "$SESSION" -- python3 "$srv" <<<"$INIT
$(call_json 1 execute_bash_commands '{"code":"true"}')"
	[ "$status" -eq 6 ]
	[[ "$output" == *"requests unanswered: 1"* ]]
}
