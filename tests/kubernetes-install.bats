# The install step on the kubernetes backend (--network install): it runs in the sandbox's pod,
# whose only way out is the server's filtering proxy, reached through takers (agent --take) that
# the server runs in the pod with an exec each (backends/kubernetes/knet.h). The test pods have a
# loopback of their own and nothing else (tests/kubernetes/server.py), so what pip reaches, it
# reached through the proxy. The index is lib/test-index.bash's, on a network of its own.
# suite: owns test-index
load lib/helpers
load lib/kubernetes
load lib/test-index
load lib/prestart
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-81c4d2e7"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kin
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make the test index's network and the pods' namespaces"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	jq -e '.sandboxed' <<<"$(control '{}')" >/dev/null || skip_or_fail "the test server runs pods unsandboxed here"
	IDX="$BATS_TEST_TMPDIR/index"
	mkdir -p "$IDX/files"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$IDX/files" okpkg 1.0
	index_project "$IDX" okpkg ../../files/okpkg-1.0-py3-none-any.whl
	# The host's loopback service a hostile index page sends pip to.
	python3 "$TESTS_DIR/lib/stall-server.py" "$BATS_TEST_TMPDIR/host.port" &
	echo $! >"$BATS_TEST_TMPDIR/host.pid"
	for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/host.port" ] && break; sleep 0.05; done
	HOST_PORT=$(cat "$BATS_TEST_TMPDIR/host.port")
	index_project "$IDX" evil-loopback "http://127.0.0.1:$HOST_PORT/evil_loopback-1.0-py3-none-any.whl"
	index_project "$IDX" evil-metadata "http://169.254.169.254/latest/evil_metadata-1.0-py3-none-any.whl"
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	index_up "$IDX"
}

teardown() {
	index_down
	[ -f "$BATS_TEST_TMPDIR/host.pid" ] && kill "$(cat "$BATS_TEST_TMPDIR/host.pid")" 2>/dev/null
	return 0
}

py_req() { # ID REQUIREMENT
	call_json "$1" execute_python "$(jq -cn --arg r "$2" '{script: "import okpkg; print(okpkg.VALUE)", requirements: [$r], timeout_s: 60}')"
}

@test "kubernetes: the install step reaches the index from the pod, the package is imported by the next calls, and nothing else is reached" {
	control '{"clear_log": true}' >/dev/null
	mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(py_call 1 'print("before")')
		{"wait": 1}
		$(py_req 2 okpkg==1.0)
		{"wait": 2}
		$(py_call 3 'import okpkg; print(okpkg.VALUE)')
		{"wait": 3}
		$(py_req 4 evil-loopback)
		{"wait": 4}
		$(py_req 5 evil-metadata)
		{"wait": 5}
		$(call_json 6 execute_bash_commands '{"code": "python3 -c \"import socket; socket.create_connection((\\\"198.51.100.2\\\", 8080), 2)\" 2>&1 | tail -1; ls /.sandbox-mcp"}')
	EOF
	res 1
	sc '.exit_code == 0 and .stdout == "before\n"'
	for id in 2 3; do
		res $id
		sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	done
	for id in 4 5; do
		res $id
		sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: "))'
	done
	# Nothing reached the host's loopback service.
	[ ! -e "$BATS_TEST_TMPDIR/host.port.count" ]
	# The code itself reaches nothing: the pod's network is its loopback alone, and the takers'
	# socket went with the step.
	res 6
	sc '(.stdout | test("OSError|unreachable|refused"; "i")) and (.stdout | contains("take.sock") | not)'
	# The install steps' connections came through takers: an exec each, of the agent's --take.
	jqe "$(control '{}')" '[.requests[] | select((.path | endswith("/exec")) and (.query | contains("command=--take")))] | length >= 2'
	# One pod served every call.
	jqe "$(control '{}')" '[.requests[] | select(.method == "POST" and (.path | endswith("/pods")))] | length == 1'
}

@test "kubernetes: an index that cannot be reached is said so at once, with the proxy's reason" {
	mcp_session --index-url http://index.invalid/simple <<-EOF
		$INIT
		$(py_req 1 okpkg)
	EOF
	res 1
	sc '.exit_code == 1 and .stdout == "" and (.stderr | startswith("Failed to install requirements: the package index could not be reached (index.invalid:80: name resolution failed ("))'
}

@test "kubernetes: --check says how the install step gets out; --wheelhouse, a folder no pod sees, is refused at start-up" {
	run "$SANDBOX_MCP" --check --index-url "$INDEX_URL" </dev/null
	[ "$status" -eq 0 ]
	[[ "$output" == *"the install step reaches only the package index $INDEX_URL, through the server's filtering proxy"* ]]
	[[ "$output" == *"installs    in the sandbox's pod, through the server's filtering proxy"*"an exec each (the agent's --take)"* ]]
	[[ "$output" == *"not yet     --allow-hosts is refused"* ]]
	[ "$(pods)" = "[]" ]
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" okpkg 1.0
	chmod -R o+rX "$BATS_TEST_TMPDIR/wh"
	run "$SANDBOX_MCP" --wheelhouse "$BATS_TEST_TMPDIR/wh" </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"--wheelhouse: a folder of this host, which no pod sees"* ]]
}

# The faults of the takers' way: their exec refused, their streams cut, a slow API server. Each
# step ends in time with what went wrong said, and the sandbox serves the next call.
@test "kubernetes: the install step's takers refused, cut or slow: each step ends, says why, and the sandbox serves on" {
	local c="curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST $URL/_control -o /dev/null -d @$BATS_TEST_TMPDIR"
	jq -cn '{fail: {status: 403, method: "GET", path: "/api/v1/namespaces/*/pods/*/exec"}}' >"$BATS_TEST_TMPDIR/refuse"
	jq -cn '{exec_drop_ms: 1}' >"$BATS_TEST_TMPDIR/cut"
	jq -cn '{latency_ms: 150}' >"$BATS_TEST_TMPDIR/slow"
	echo '{}' >"$BATS_TEST_TMPDIR/none"
	SESSION_TIMEOUT=240 mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(py_call 1 'print("up")')
		{"wait": 1}
		{"sh": "$c/refuse; date +%s%N > $BATS_TEST_TMPDIR/t0"}
		$(py_req 2 okpkg==1.0)
		{"wait": 2}
		{"sh": "date +%s%N > $BATS_TEST_TMPDIR/t1; $c/cut"}
		$(py_req 3 okpkg==1.0)
		{"wait": 3}
		{"sh": "$c/slow"}
		$(py_req 4 okpkg==1.0)
		{"wait": 4}
		{"sh": "$c/none"}
		$(py_call 5 'print("still")')
	EOF
	# Refused: said at once, with the API server's answer, not after pip's retries.
	res 2
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: the package index could not be reached (the install step'"'"'s connections could not be carried out of the pod (0 were): the API server refused the stream (HTTP 403)"))'
	[ $(( ($(cat "$BATS_TEST_TMPDIR/t1") - $(cat "$BATS_TEST_TMPDIR/t0")) / 1000000 )) -lt 10000 ]
	# Cut: pip's own failure, in time.
	res 3
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: ")) and (.timed_out | not)'
	# Slow: it works, only later.
	res 4
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	res 5
	sc '.exit_code == 0 and .stdout == "still\n"'
	grep -qF "the install step's taker did not open" "$SERVER_LOG"
}
