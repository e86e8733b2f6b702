# The Kubernetes test server (tests/kubernetes/server.py), the ground a Kubernetes backend will
# be tested on: checked with the official JavaScript client (tests/kubernetes/client-check),
# with a small WebSocket client of the tests' own for the exec protocols (v4, v5), and with
# each of its faults.
load lib/helpers
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-3c9e1f0a"

setup_file() {
	export K8S_TEST_TOKEN="$K8S_TOKEN"
	python3 "$BATS_TEST_DIRNAME/kubernetes/server.py" --port-file "$BATS_FILE_TMPDIR/port" \
		--kubeconfig-out "$BATS_FILE_TMPDIR/kubeconfig" 2>"$BATS_FILE_TMPDIR/k8s.log" &
	echo $! >"$BATS_FILE_TMPDIR/server.pid"
	for _ in $(seq 200); do [ -s "$BATS_FILE_TMPDIR/port" ] && break; sleep 0.1; done
	[ -s "$BATS_FILE_TMPDIR/port" ]
	jq -r '.clusters[0].cluster["certificate-authority-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/ca.crt"
	jq -r '.users[1].user["client-certificate-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/client.crt"
	jq -r '.users[1].user["client-key-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/client.key"
}

teardown_file() {
	[ -f "$BATS_FILE_TMPDIR/server.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/server.pid")" 2>/dev/null || true
}

setup() {
	URL="https://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/port")"
	KC="$BATS_FILE_TMPDIR/kubeconfig"
	CA="$BATS_FILE_TMPDIR/ca.crt"
	WSEXEC="$BATS_TEST_DIRNAME/kubernetes/wsexec.py"
	NS="t$BATS_SUITE_TEST_NUMBER"
	control '{"clear_log": true}' >/dev/null
}

# control JSON: sets the test server's faults (see server.py); prints its state.
control() {
	curl -sS --cacert "$CA" -X POST -H 'Content-Type: application/json' --data-binary "$1" "$URL/_control"
}

# k METHOD PATH [BODY] [CURL ARGS...]: one API request with the bearer token; sets $code and $body.
k() {
	local m=$1 p=$2 d=${3:-} out
	shift 3 2>/dev/null || shift $#
	out=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $K8S_TOKEN" -X "$m" -H 'Content-Type: application/json' \
		${d:+--data-binary "$d"} -w '\n%{http_code}' "$@" "$URL$p")
	code=${out##*$'\n'}
	body=${out%$'\n'*}
}

# pod_json NAME [JQ FILTER]: a pod that sleeps, with a workspace emptyDir, changed by the filter.
pod_json() {
	jq -cn --arg n "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: $n, labels: {app: "t"}},
		spec: {restartPolicy: "Never", containers: [{name: "main", image: "python:3.12-slim",
			command: ["sleep", "infinity"], workingDir: "/workspace",
			volumeMounts: [{name: "workspace", mountPath: "/workspace"}]}],
			volumes: [{name: "workspace", emptyDir: {sizeLimit: "8Mi"}}]}} | '"${2:-.}"
}

# make_pod NAME [JQ FILTER]: creates it and waits until it runs.
make_pod() {
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json "$@")"
	[ "$code" = 201 ] || { echo "$body" >&2; return 1; }
	wait_phase "$1" Running
}

# wait_phase NAME PHASE: bounded wait for the pod's phase.
wait_phase() {
	for _ in $(seq 150); do
		k GET "/api/v1/namespaces/$NS/pods/$1"
		[ "$(jq -r .status.phase <<<"$body")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "pod $1 never reached $2: $body" >&2
	return 1
}

wsexec() {
	python3 "$WSEXEC" "$KC" "$NS" "$@"
}

@test "the official client drives it: pods, watch, exec over WebSocket, network policies, access review, a claim from a warm pool" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run "$BATS_TEST_DIRNAME/kubernetes/client-check/run" "$KC"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "the npm registry is not reachable: cannot install @kubernetes/client-node"
	[ "$status" -eq 0 ]
	[[ "$output" == *"12 passed, 0 failed"* ]]
	log=$(control '{}')
	# The client upgraded to WebSocket, and the client-certificate user was seen as its CN.
	jqe "$log" 'any(.requests[]; (.path | endswith("/exec")) and .status == 101 and .upgrade == "websocket")'
	jqe "$log" 'any(.requests[]; .auth == "cert:test-user" and .status == 200)'
	jqe "$log" 'any(.requests[]; .auth == "token" and (.query | test("watch=true")))'
}

@test "exec v5: stdin, its CLOSE message, stdout and stderr apart, the status with the exit code" {
	make_pod p
	out=$(wsexec p --stdin 'some input' --close-stdin -- sh -c 'cat; echo; echo to-err >&2; exit 3')
	jqe "$out" '.http_status == 101 and .accept_ok and .protocol == "v5.channel.k8s.io"'
	jqe "$out" '.stdout == "some input\n" and .stderr == "to-err\n" and .close_code == 1000'
	jqe "$out" '.status.status == "Failure" and .status.reason == "NonZeroExitCode"'
	jqe "$out" '.status.details.causes == [{"reason": "ExitCode", "message": "3"}]'
	out=$(wsexec p -- sh -c 'echo fine')
	jqe "$out" '.stdout == "fine\n" and .status == {"metadata": {}, "status": "Success"}'
}
