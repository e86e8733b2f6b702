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

# runner_files DIR: bats files for the runner's own tests. a.bats and b.bats meet: each makes its
# mark and waits (10 s at most) for the other's, so both pass only when they run at the same time.
runner_files() {
	local d=$1
	mkdir -p "$d"
	for me in a b; do
		other=$([ $me = a ] && echo b || echo a)
		printf '@test "%s meets %s" {\n\ttouch "%s/%s.mark"\n\tfor _ in $(seq 100); do [ -e "%s/%s.mark" ] && return 0; sleep 0.1; done\n\treturn 1\n}\n' \
			$me $other "$d" $me "$d" $other >"$d/$me.bats"
	done
	# Two serial files, one that owns a name and two that use it: each writes when it starts and
	# ends, so the log tells which ran beside which. The two users meet as a and b do.
	for f in s1:serial s2:serial o1:'owns thing'; do
		printf '# suite: %s\n@test "%s" {\n\techo "start %s" >>"%s/log"\n\tsleep 0.3\n\techo "end %s" >>"%s/log"\n}\n' \
			"${f#*:}" "${f%%:*}" "${f%%:*}" "$d" "${f%%:*}" "$d" >"$d/${f%%:*}.bats"
	done
	for me in u1 u2; do
		other=$([ $me = u1 ] && echo u2 || echo u1)
		printf '# suite: uses other thing\n@test "%s" {\n\techo "start %s" >>"%s/log"\n\ttouch "%s/%s.mark"\n\tfor _ in $(seq 100); do [ -e "%s/%s.mark" ] && break; sleep 0.1; done\n\techo "end %s" >>"%s/log"\n\t[ -e "%s/%s.mark" ]\n}\n' \
			$me $me "$d" "$d" $me "$d" $other $me "$d" "$d" $other >"$d/$me.bats"
	done
	printf '@test "p" { true; }\n@test "f" { false; }\n@test "s" { skip "a reason"; }\n' >"$d/mixed.bats"
	# A bats that dies in its second test, of three: two tests never report.
	printf '@test "d1" { true; }\n@test "d2" { kill -KILL 0; }\n@test "d3" { true; }\n' >"$d/dies.bats"
}

@test "suite: tests/run runs files at once; a serial file alone, one that owns a name beside no user of it" {
	local d="$BATS_TEST_TMPDIR/rt"
	runner_files "$d"
	run "$REPO_DIR/tests/run" -j 4 "$d/a.bats" "$d/b.bats" "$d/o1.bats" "$d/u1.bats" "$d/u2.bats" "$d/s1.bats" "$d/s2.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = "7 passed, 0 failed" ]
	local tap=$output
	# Nothing starts while s1, s2 or o1 runs, and none of them starts beside another file.
	cat "$d/log"
	run python3 -c '
import sys
running = set()
for line in open(sys.argv[1]):
    what, name = line.split()
    if what == "start":
        alone = name in ("s1", "s2", "o1")
        if (alone and running) or running & {"s1", "s2", "o1"}:
            sys.exit("%s started beside %s" % (name, sorted(running)))
        running.add(name)
    else:
        running.discard(name)' "$d/log"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^start' "$d/log")" -eq 5 ]
	# Every test numbered once, in order, and a time for each file.
	[ "$(grep -E '^ok [0-9]+ ' <<<"$tap" | awk '{print $2}' | tr '\n' ' ')" = "1 2 3 4 5 6 7 " ]
	[ "$(grep -cE '^# .*\.bats: [0-9.]+ s, 1 tests$' <<<"$tap")" -eq 7 ]
	# Alone, a never meets b.
	rm "$d"/*.mark
	run "$REPO_DIR/tests/run" -j 1 "$d/a.bats"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = "0 passed, 1 failed" ]
}

@test "suite: tests/run counts failures, skips, and the tests of a bats that died" {
	local d="$BATS_TEST_TMPDIR/rt"
	runner_files "$d"
	run env -u CI -u SANDBOX_TEST_NO_SKIP "$REPO_DIR/tests/run" -j 2 "$d/mixed.bats" "$d/dies.bats"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = "2 passed, 3 failed, 1 skipped" ]
	[ "$(grep -c "^not ok [0-9]* $d/dies.bats: bats stopped after 1 of 3 tests" <<<"$output")" -eq 2 ]
	[ "$(grep -c '^1\.\.6$' <<<"$output")" -eq 1 ]
	# Under CI a skip is a failure.
	run env CI=true "$REPO_DIR/tests/run" "$d/mixed.bats"
	[ "$status" -eq 1 ]
	[ "${lines[-1]}" = "1 passed, 2 failed" ]
}
