# Run semantics held to one standard on every backend, whatever runs the program there (the
# in-sandbox agent on local and Docker, the Python call runner on Daytona): the same scenario
# (tests/lib/runsem.bash) gives the same results, field by field, on local, Docker and the
# Daytona test server; and so does the /bin/sh fallback of an image without bash, on Docker (an
# image made without it) and on the Daytona test server (which plays such an image).
# suite: uses docker
load lib/helpers
load lib/runsem
load lib/docker-setup
load lib/daytona-setup
bats_require_minimum_version 1.5.0

NOBASH_IMAGE=sandbox-mcp-test-nobash:latest

setup_file() {
	docker_setup_file
	daytona_setup_file
}

teardown_file() {
	daytona_teardown_file
	docker_teardown_file
}

# The results of a run on backend, minus where it ran.
compare() { # NAME RESULTS_A RESULTS_B
	[ "$2" = "$3" ] && return 0
	echo "$1 differs:" >&2
	diff <(jq . <<<"$2") <(jq . <<<"$3") >&2 || true
	return 1
}

@test "parity: run semantics on the Daytona test server are the local backend's" {
	with_backend local
	runsem_run local
	local_res=$runsem_res
	runsem_assert
	with_backend daytona
	runsem_run daytona
	runsem_assert
	compare daytona "$local_res" "$runsem_res"
}

@test "parity: run semantics on Docker are the local backend's" {
	with_backend local
	runsem_run local
	local_res=$runsem_res
	with_backend docker
	runsem_run docker
	runsem_assert
	compare docker "$local_res" "$runsem_res"
}

# Calls that show which shell runs bash code, a long one included (it goes through a file).
fallback_scenario() {
	echo "$INIT"
	echo "$INITIALIZED"
	call_json 1 execute_bash_commands '{"code":"echo \"$0|${BASH_VERSION:-no bash}\"; echo ok >&2; exit 5"}'
	echo '{"wait": 1}'
	# Bash code over 120 KiB goes through a file (too long for one exec argument).
	python3 -c 'import json; print(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
		"name": "execute_bash_commands", "arguments": {"code": ": " * 70000 + "\necho long \"$0\""}}}))'
	echo '{"wait": 2}'
	call_json 3 execute_python '{"script": "print(6 * 7)"}'
	echo '{"wait": 3}'
}

fallback_run() {
	SESSION_TIMEOUT=300 mcp_session < <(fallback_scenario)
	fallback_res=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id | type) == "number")
		| {id, exit_code: .result.structuredContent.exit_code, stdout: .result.structuredContent.stdout,
		   stderr: .result.structuredContent.stderr}' | jq -sc 'sort_by(.id)')
}

@test "parity: in an image without bash, bash code runs with /bin/sh on Docker and on the Daytona test server alike" {
	with_backend docker
	docker image inspect "$NOBASH_IMAGE" >/dev/null 2>&1 || {
		cid=$(docker create --user 0 --network none --entrypoint /bin/rm "$TEST_IMAGE" -f /usr/bin/bash /bin/bash)
		docker start -a "$cid"
		docker commit "$cid" "$NOBASH_IMAGE" >/dev/null
		docker rm "$cid" >/dev/null
	}
	export SANDBOX_IMAGE=$NOBASH_IMAGE
	fallback_run
	docker_res=$fallback_res
	with_backend daytona
	daytona_control '{"no_bash": true}' >/dev/null
	fallback_run
	daytona_control '{"no_bash": false}' >/dev/null
	compare daytona "$docker_res" "$fallback_res"
	jqe "$fallback_res" '.[0] | .exit_code == 5 and .stdout == "/bin/sh|no bash\n" and .stderr == "ok\n"'
	jqe "$fallback_res" '.[1] | .exit_code == 0 and .stdout == "long /bin/sh\n"'
	jqe "$fallback_res" '.[2] | .exit_code == 0 and .stdout == "42\n"'
}

@test "the Daytona runner and sweep are valid Python (py_compile)" {
	local out="$BATS_TEST_TMPDIR/pyc"
	for f in "$REPO_DIR"/backends/daytona/*.py; do
		run python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' "$f" "$out/$(basename "$f")c"
		echo "$output"
		[ "$status" -eq 0 ]
	done
	[ "$(ls "$out" | wc -l)" -ge 2 ]
}
