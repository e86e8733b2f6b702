# The install step on the kubernetes backend (--network install): it runs in the sandbox's pod,
# whose only way out is the server's filtering proxy, reached through takers that the server
# runs in the pod with an exec each (backends/kubernetes/knet.h). The test pods have a
# loopback of their own and nothing else (tests/kubernetes/server.py), so what pip reaches, it
# reached through the proxy. The index is lib/test-index.bash's, on a network of its own.
# suite: owns test-index
load lib/helpers
load lib/kubernetes
load lib/test-index
load lib/prestart
load lib/background
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-81c4d2e7"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kin
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make the test index's network and the pods' namespaces"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	jq -e '.sandboxed' <<<"$(control '{}')" >/dev/null || skip_or_fail "the test server runs pods unsandboxed here"
	index_fixture_up
}

teardown() {
	index_fixture_down
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
		$(call_json 6 execute_bash_commands '{"code": "python3 -c \"import socket; socket.create_connection((\\\"198.51.100.2\\\", 8080), 2)\" 2>&1 | tail -1; grep -c sandbox-mcp-take /proc/net/unix"}')
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
	sc '(.stdout | test("OSError|unreachable|refused"; "i")) and (.stdout | endswith("\n0\n"))'
	# The install steps' connections came through takers: an exec each, naming the step's socket.
	jqe "$(control '{}')" '[.requests[] | select((.path | endswith("/exec")) and (.query | contains("sandbox-mcp-take-")))] | length >= 2'
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
	[[ "$output" == *"installs    in the sandbox's pod, through the server's filtering proxy"*"an exec each (a taker of the server's, run by the image's Python)"* ]]
	[[ "$output" == *"not yet     --allow-hosts is refused"* ]]
	[ "$(pods)" = "[]" ]
	mkdir -p "$BATS_TEST_TMPDIR/wh"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$BATS_TEST_TMPDIR/wh" okpkg 1.0
	chmod -R o+rX "$BATS_TEST_TMPDIR/wh"
	run "$SANDBOX_MCP" --wheelhouse "$BATS_TEST_TMPDIR/wh" </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"--wheelhouse: a folder of this host, which no pod sees"* ]]
}

# Each plain-HTTP request through the proxy is a connection of its own, which the proxy closes
# first: 10 packages are 20 connections, more than the 16 carried at once, so each must be
# freed as it ends (and pip must see its end) for the step to finish.
@test "kubernetes: an install step of 20 connections, each closed by the proxy first, finishes" {
	local reqs='[]'
	for i in 0 1 2 3 4 5 6 7 8 9; do
		python3 "$TESTS_DIR/lib/make_wheel.py" "$IDX/files" "many$i" 1.0
		index_project "$IDX" "many$i" "../../files/many$i-1.0-py3-none-any.whl"
		reqs=$(jq -c --arg r "many$i==1.0" '. + [$r]' <<<"$reqs")
	done
	chmod -R o+rX "$IDX"
	control '{"clear_log": true}' >/dev/null
	mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(call_json 1 execute_python "$(jq -cn --argjson r "$reqs" '{script: "import many0, many9; print(many0.VALUE, many9.VALUE)", requirements: $r, timeout_s: 60}')")
	EOF
	res 1
	sc '.exit_code == 0 and .stdout == "many0 1.0 many9 1.0\n"'
	jqe "$(control '{}')" '[.requests[] | select((.path | endswith("/exec")) and (.query | contains("sandbox-mcp-take-")))] | length >= 20'
}

# A background process outlives the install step's call (its end spares it), so the agent keeps
# its relays for it -- but not the step's: once the step is over, the port leads nowhere, and
# the next step gets a takers' socket of its own. Meanwhile the background process watches for
# the takers' socket and tries to take a connection there: its Landlock domain refuses it.
@test "kubernetes: a background process cannot take the step's connections, and the step's relay ends with it" {
	python3 "$TESTS_DIR/lib/make_wheel.py" "$IDX/files" second 1.0
	index_project "$IDX" second ../../files/second-1.0-py3-none-any.whl
	chmod -R o+rX "$IDX"
	local probe='import socket
try:
    socket.create_connection(("127.0.0.1", 3128), 2).close(); print("port open")
except OSError as e:
    print("port closed", e.errno)'
	local thief='import socket, time
names = set()
for _ in range(12000):
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        f = line.split()
        if len(f) == 8 and f[7].startswith("@sandbox-mcp-take-") and f[7] not in names:
            names.add(f[7])
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect("\0" + f[7][1:])
                print("connected", flush=True)
            except OSError as e:
                print("refused", e.errno, flush=True)
    if len(names) == 2:
        break
    time.sleep(0.005)'
	mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(bg 1 "python3 -c '$thief' > thief.out")
		{"wait": 1}
		$(py_req 2 okpkg==1.0)
		{"wait": 2}
		$(py_call 3 "$probe")
		{"wait": 3}
		$(call_json 4 execute_python "$(jq -cn '{script: "import second; print(second.VALUE)", requirements: ["second==1.0"], timeout_s: 60}')")
		{"wait": 4}
		$(py_call 5 "$probe")
		{"wait": 5}
		$(call_json 6 execute_bash_commands '{"code": "cat thief.out"}')
	EOF
	res 1
	sc '.error == null'
	res 2
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	res 3
	sc '.stdout | startswith("port closed")'
	res 4
	sc '.exit_code == 0 and .stdout == "second 1.0\n"'
	res 5
	sc '.stdout | startswith("port closed")'
	# Both steps' sockets, each a name of its own, each refused (EPERM: Landlock's scope).
	res 6
	sc '.stdout == "refused 1\nrefused 1\n"'
}

# The pod's copy of the agent is in the code's reach, so takers do not run it: they are the
# server's Python program, run isolated from the image's read-only root. Code that replaces the
# copy changes nothing of the step, and its program never runs.
@test "kubernetes: the code replaces the pod's copy of the agent: takers do not run it, and the step works" {
	local fake='printf "#!/bin/sh\\ntouch /workspace/fake-ran\\nwhile :; do echo flood >&2; done\\n" > /.sandbox-mcp/x && chmod 755 /.sandbox-mcp/x && mv -f /.sandbox-mcp/x /.sandbox-mcp/sandbox-agent && echo replaced'
	mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$fake" '{code: $c}')")
		{"wait": 1}
		$(py_req 2 okpkg==1.0)
		{"wait": 2}
		$(call_json 3 execute_bash_commands '{"code": "ls /workspace/fake-ran 2>&1; echo done"}')
	EOF
	res 1
	sc '.stdout == "replaced\n"'
	res 2
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	res 3
	sc '(.stdout | contains("No such file")) and (.stdout | endswith("done\n"))'
	[ -z "$(grep -F "taker says" "$SERVER_LOG")" ]
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
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: the package index could not be reached (the install step'"'"'s connections could not be carried out of the pod (0 were): the API server refused the stream (HTTP 403)")) and (.stderr | contains("or use an image that has the packages (--kube-image)"))'
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

# A step cancelled while a taker's exec is still being opened (the API server answers in 4 s)
# ends at once: the opening is cancelled with it, not waited out. The next call is answered
# within 2.5 s of the cancellation.
@test "kubernetes: a step cancelled while a taker's exec is being opened ends at once" {
	local c="curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST $URL/_control -o /dev/null -d @$BATS_TEST_TMPDIR"
	local look="curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt $URL/_control"
	jq -cn '{latency_ms: 4000}' >"$BATS_TEST_TMPDIR/slow"
	echo '{}' >"$BATS_TEST_TMPDIR/none"
	mcp_session --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(py_call 1 'print("up")')
		{"wait": 1}
		{"sh": "$c/slow"}
		$(py_req 2 okpkg==1.0)
		{"until": "$look | jq -e '[.requests[] | select(.query | contains(\"sandbox-mcp-take-\"))] | length >= 1' >/dev/null"}
		{"sh": "date +%s%N > $BATS_TEST_TMPDIR/t0"}
		{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}
		$(py_call 3 'print("next")')
		{"wait": 3}
		{"sh": "date +%s%N > $BATS_TEST_TMPDIR/t1; $c/none"}
	EOF
	[ -z "$(response 2)" ]
	res 3
	sc '.exit_code == 0 and .stdout == "next\n"'
	local ms=$(( ($(cat "$BATS_TEST_TMPDIR/t1") - $(cat "$BATS_TEST_TMPDIR/t0")) / 1000000 ))
	echo "answered $ms ms after the cancellation"
	[ "$ms" -lt 2500 ]
}
