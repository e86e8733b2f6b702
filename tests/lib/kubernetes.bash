# The kubernetes backend's test files: the project's test API server (tests/kubernetes/server.py)
# started once per file, and each test in a namespace of its own. Load after lib/helpers; set
# K8S_TOKEN (the server's bearer token) first.

# k8s_setup_file: starts the test server (HTTPS, its own CA), writes its kubeconfig and CA.
k8s_setup_file() {
	export K8S_TEST_TOKEN="$K8S_TOKEN"
	python3 "$BATS_TEST_DIRNAME/kubernetes/server.py" --port-file "$BATS_FILE_TMPDIR/port" \
		--kubeconfig-out "$BATS_FILE_TMPDIR/kubeconfig" 2>"$BATS_FILE_TMPDIR/k8s.log" &
	echo $! >"$BATS_FILE_TMPDIR/server.pid"
	for _ in $(seq 200); do [ -s "$BATS_FILE_TMPDIR/port" ] && break; sleep 0.1; done
	[ -s "$BATS_FILE_TMPDIR/port" ]
	jq -r '.clusters[0].cluster["certificate-authority-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/ca.crt"
}

k8s_teardown_file() {
	[ -f "$BATS_FILE_TMPDIR/server.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/server.pid")" 2>/dev/null || true
}

# k8s_setup PREFIX: the server under test on the kubernetes backend, in the namespace PREFIX and
# the test's number ($NS; $EXT: its agent-sandbox API path; $URL: the API server).
k8s_setup() {
	common_setup
	URL="https://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/port")"
	NS="$1$BATS_SUITE_TEST_NUMBER"
	EXT="/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/$NS"
	export SANDBOX_BACKEND=kubernetes KUBECONFIG="$BATS_FILE_TMPDIR/kubeconfig" SANDBOX_KUBE_NAMESPACE="$NS"
	unset KUBERNETES_SERVICE_HOST
}

# control JSON: the test server's fault and log knobs.
control() {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -X POST -H 'Content-Type: application/json' --data-binary "$1" "$URL/_control"
}

# k METHOD PATH [BODY]: an API request with the server's token.
k() {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" -H 'Content-Type: application/json' \
		-X "$1" "$URL$2" ${3:+--data-binary "$3"}
}

# names PATH: the names of the objects listed at PATH that are not being deleted.
names() {
	k GET "$1" | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name]'
}

# pods: the names of the pods in this test's namespace.
pods() {
	names "/api/v1/namespaces/$NS/pods"
}
