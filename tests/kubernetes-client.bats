# The Kubernetes backend's client side, below the binary, through build/test-helper: the
# kubeconfig reader (backends/kubernetes/kyaml.h), the credentials (kcreds.h: kubeconfig and the
# in-cluster service account, and what is refused), and the WebSocket exec client (wsexec)
# against the project's Kubernetes test server.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

HELPER="$REPO_DIR/build/test-helper"

K8S_TOKEN="k8s-token-7d1e55b2"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	common_setup
	[ -x "$HELPER" ] || skip_or_fail "build/test-helper is missing (make)"
	D="$BATS_TEST_TMPDIR"
	URL="https://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/port")"
	KC="$BATS_FILE_TMPDIR/kubeconfig"
	NS="t$BATS_SUITE_TEST_NUMBER"
	control '{"clear_log": true}' >/dev/null
}

# control JSON: sets the test server's faults (see server.py); prints its state.
control() {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -X POST -H 'Content-Type: application/json' --data-binary "$1" "$URL/_control"
}

# make_pod NAME: a pod that sleeps, running.
make_pod() {
	local body
	body=$(curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" -X POST \
		-H 'Content-Type: application/json' "$URL/api/v1/namespaces/$NS/pods" --data-binary \
		"$(jq -cn --arg n "$1" '{apiVersion: "v1", kind: "Pod", metadata: {name: $n}, spec: {restartPolicy: "Never",
			containers: [{name: "main", image: "python:3.12-slim", command: ["sleep", "infinity"]}]}}')")
	jqe "$body" '.metadata.name'
	for _ in $(seq 150); do
		body=$(curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" "$URL/api/v1/namespaces/$NS/pods/$1")
		[[ "$body" == *'"phase": "Running"'* ]] && return 0
		sleep 0.1
	done
	echo "pod $1 never ran: $body" >&2
	return 1
}

# kexec [HELPER ARGS...]: test-helper kube-exec with the test server's kubeconfig.
kexec() {
	env -u KUBERNETES_SERVICE_HOST KUBECONFIG="${KCONF:-$KC}" "$HELPER" kube-exec "$NS" "$@"
}

# creds [CONTEXT]: the credentials found with only the variables the test sets.
creds() {
	env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT HOME="$D/home" "$HELPER" kube-creds "$D/sa" "$@"
}

@test "kyaml: block mappings and sequences as kubectl writes them, quoted scalars, comments, one-line flow, and JSON as it is" {
	cat >"$D/kc" <<-'EOF2'
		# written by kubectl
		---
		apiVersion: v1
		clusters:
		- cluster:
		    certificate-authority-data: QUJD   # a comment
		    server: "https://k.example:6443"
		  name: 'it''s'
		-   name: second
		    cluster: {}
		contexts: []
		flow: {a: [x, "y z", {b: c}], d: []}
		nested:
		  list:
		    - a
		    - - b
		      - "c\td\u00e9#x"
		    -
		      k: v
		  empty:
		kind: Config
		url: http://x/#frag
	EOF2
	out=$("$HELPER" kyaml <"$D/kc")
	jqe "$out" '.clusters[0] == {"cluster": {"certificate-authority-data": "QUJD", "server": "https://k.example:6443"}, "name": "it'"'"'s"}'
	jqe "$out" '.clusters[1] == {"name": "second", "cluster": {}} and .contexts == [] and .kind == "Config"'
	jqe "$out" '.nested.list == ["a", ["b", "c\tdé#x"], {"k": "v"}] and .nested.empty == null'
	jqe "$out" '.url == "http://x/#frag" and .flow == {"a": ["x", "y z", {"b": "c"}], "d": []}'
	out=$(printf '{"a": [1, {"b": true}]}' | "$HELPER" kyaml)
	jqe "$out" '. == {"a": [1, {"b": true}]}'
}

@test "kyaml: refuses what it does not read, naming the line: tabs, anchors, block scalars, broken or multi-line flow, duplicates, depth, a second document" {
	for bad in $'a:\n\tb: c' $'a: &x 1\nb: *x' $'a: |\n  text' $'a: {b: [c}' $'a: [b,\n  c]' $'a: {b: 1, b: 2}' $'a: 1\na: 2' $'a: b\n  c' \
		$'a: 1\n---\nb: 2' $'a: {b: [c}' $'a: [b,\n c]' $'a: "open' $'a: "\\q"' $'a: !!str x' $'- a\nb: c' $'a:\n  - x\n   - y' \
		$'a: "\\u0000"' '%YAML 1.2' ''; do
		out=$(printf '%s' "$bad" | "$HELPER" kyaml)
		[[ "$out" == refused:* ]] || { echo "took: $bad -> $out" >&2; false; }
	done
	[ "$(printf 'a: 1\na: 2' | "$HELPER" kyaml)" = "refused: line 2: a key given twice" ]
	[ "$(printf 'a:\n\tb: c' | "$HELPER" kyaml)" = "refused: line 2: a tab in the indentation" ]
	deep=$(python3 -c 'print("\n".join(" " * i + "k:" for i in range(40)))')
	[[ "$(printf '%s' "$deep" | "$HELPER" kyaml)" == *"nested too deep"* ]]
	# Bounded: a document over 4 MiB is not read at all.
	python3 -c 'print("a: " + "x" * (5 << 20))' >"$D/big"
	[[ "$("$HELPER" kyaml <"$D/big")" == *"larger than"* ]]
}

kubeconfig() {
	cat >"$D/kc" <<-EOF2
		apiVersion: v1
		kind: Config
		current-context: ${1:-tok}
		clusters:
		- name: c
		  cluster:
		    server: https://127.0.0.1:6443/
		    certificate-authority: ca.pem
		contexts:
		- name: tok
		  context: {cluster: c, user: tok}
		- name: cert
		  context:
		    cluster: c
		    user: cert
		    namespace: team-a
		- name: plugin
		  context:
		    cluster: c
		    user: plugin
		users:
		- name: tok
		  user:
		    tokenFile: token
		- name: cert
		  user:
		    client-certificate-data: Q0VSVA==
		    client-key: /$D/key.pem
		- name: plugin
		  user:
		    exec:
		      apiVersion: client.authentication.k8s.io/v1
		      command: aws
		      args: [eks, get-token]
	EOF2
}

@test "kcreds: a kubeconfig's current context, a token file and a client certificate, paths beside the file" {
	mkdir -p "$D/home/.kube" "$D/conf"
	printf 'CAPEM' >"$D/conf/ca.pem"
	printf 'tok-123\n' >"$D/conf/token"
	printf 'KEYPEM' >"$D/key.pem"
	cat >"$D/home/.kube/config" <<-'EOF2'
		current-context: x
		clusters:
		- name: c
		  cluster:
		    server: https://h:1
		    certificate-authority-data: Q0E=
		contexts:
		- name: x
		  context:
		    cluster: c
		    user: u
		users:
		- name: u
		  user:
		    token: abc
	EOF2
	out=$(creds)
	jqe "$out" '.server == "https://h:1" and .token == "abc" and .ns == "default" and .ca == 2 and (.source | test("/home/.kube/config, context x$"))'
	# KUBECONFIG wins; its first file that is there.
	kubeconfig
	cp "$D/kc" "$D/conf/kc"
	out=$(KUBECONFIG="$D/none:$D/conf/kc" creds)
	jqe "$out" '.server == "https://127.0.0.1:6443" and .token == "tok-123" and .ca == 5 and .cert == 0'
	out=$(KUBECONFIG="$D/conf/kc" creds cert)
	jqe "$out" '.token == null and .cert == 4 and .key == 6 and .ns == "team-a" and (.source | test("context cert$"))'
}

@test "kcreds: an exec plugin, an auth provider, basic auth, insecure TLS, plain HTTP, no credentials and header injection are refused, saying what to use" {
	mkdir -p "$D/home"
	printf 'CAPEM' >"$D/ca.pem"
	printf 'tok\n' >"$D/token"
	kubeconfig
	out=$(KUBECONFIG="$D/kc" creds plugin)
	[[ "$out" == "refused: "*"user 'plugin' gets its credentials from an exec plugin (aws)"*"bearer token (token or tokenFile) or a client certificate"* ]]
	for change in 's/    exec:/    auth-provider:/' 's/    exec:/    username: me\n    password: pw\n    x:/' \
		's|    server: https://127.0.0.1:6443/|    server: https://h\n    insecure-skip-tls-verify: true|' \
		's|https://127.0.0.1|http://127.0.0.1|' 's|    tokenFile: token|    token: "a\\r\\nX-Evil: 1"|' \
		's|    tokenFile: token|    other: x|' 's|  user: plugin|  user: nosuch|'; do
		kubeconfig
		sed -i "$change" "$D/kc"
		ctx=tok
		[[ "$change" == *exec* || "$change" == *nosuch* ]] && ctx=plugin
		out=$(KUBECONFIG="$D/kc" creds "$ctx")
		[[ "$out" == refused:* ]] || { echo "took: $change -> $out" >&2; false; }
		printf '%s\n' "$out" >>"$D/why"
	done
	grep -q 'auth provider' "$D/why"
	grep -q 'basic auth' "$D/why"
	grep -q 'insecure-skip-tls-verify' "$D/why"
	grep -q 'is not https://' "$D/why"
	grep -q 'a character a header cannot carry' "$D/why"
	grep -q 'has no credentials' "$D/why"
	grep -q 'names no user' "$D/why"
	out=$(KUBECONFIG="$D/missing" creds)
	[[ "$out" == "refused: KUBECONFIG names no file that is there"* ]]
	# A FIFO where the token file is: refused at once, not waited on.
	kubeconfig
	rm "$D/token"
	mkfifo "$D/token"
	out=$(timeout 5 env KUBECONFIG="$D/kc" HOME="$D/home" "$HELPER" kube-creds "$D/sa")
	[[ "$out" == *"not a regular file"* ]]
}

@test "kcreds: the pod's service account when KUBERNETES_SERVICE_HOST is set and KUBECONFIG is not" {
	mkdir -p "$D/sa" "$D/home"
	printf 'sa-token\n' >"$D/sa/token"
	printf 'SACA' >"$D/sa/ca.crt"
	printf 'sandboxes' >"$D/sa/namespace"
	out=$(env -u KUBECONFIG KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 HOME="$D/home" "$HELPER" kube-creds "$D/sa")
	jqe "$out" '.server == "https://10.96.0.1:443" and .token == "sa-token" and .ns == "sandboxes" and .ca == 4 and (.source | test("in-cluster"))'
	out=$(env -u KUBECONFIG KUBERNETES_SERVICE_HOST=fd00::1 KUBERNETES_SERVICE_PORT=443 HOME="$D/home" "$HELPER" kube-creds "$D/sa")
	jqe "$out" '.server == "https://[fd00::1]:443"'
	printf 'Bad_NS' >"$D/sa/namespace"
	out=$(env -u KUBECONFIG KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 HOME="$D/home" "$HELPER" kube-creds "$D/sa")
	[[ "$out" == "refused: "*"not a DNS label"* ]]
	out=$(env -u KUBECONFIG KUBERNETES_SERVICE_HOST='h/x' KUBERNETES_SERVICE_PORT=443 HOME="$D/home" "$HELPER" kube-creds "$D/sa")
	[[ "$out" == "refused: "* ]]
}

@test "wsframe: the accept value of RFC 6455's example key" {
	[ "$("$HELPER" ws-accept dGhlIHNhbXBsZSBub25jZQ==)" = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" ]
}

@test "kexec: v5 over the helper's TLS tunnel: stdin and its CLOSE, stdout and stderr apart, the exit code; a token and a client certificate" {
	make_pod p
	out=$(kexec p --stdin 'some input' --close-stdin -- sh -c 'cat; echo; echo to-err >&2; exit 3')
	jqe "$out" '.http_status == 101 and .protocol == "v5.channel.k8s.io" and .error == null'
	jqe "$out" '.stdout == "some input\n" and .stderr == "to-err\n" and .exit == 3 and .close_code == 1000'
	out=$(kexec p -- sh -c 'echo fine')
	jqe "$out" '.stdout == "fine\n" and .exit == 0'
	# The kubeconfig's other user: a client certificate, which the helper presents.
	jq '.["current-context"] = "test-cert"' "$KC" >"$D/kc-cert"
	out=$(KCONF="$D/kc-cert" kexec p -- id -u)
	jqe "$out" '.exit == 0 and .error == null'
	log=$(control '{}')
	jqe "$log" '[.requests[] | select(.path | endswith("/exec"))] | length == 3 and all(.[]; .status == 101 and .upgrade == "websocket")'
	jqe "$log" 'any(.requests[]; .auth == "cert:test-user" and (.path | endswith("/p/exec")))'
}

@test "kexec: 300,000 bytes in many frames; a message over the client's bound ends the stream (1009) and is not read" {
	make_pod p
	out=$(kexec p -- sh -c 'head -c 300000 /dev/zero | tr "\0" b; head -c 70000 /dev/zero | tr "\0" c >&2')
	jqe "$out" '(.stdout | length) == 300000 and (.stderr | length) == 70000 and .exit == 0 and (.messages | length) > 3'
	out=$(kexec p --max 1000 -- sh -c 'head -c 300000 /dev/zero | tr "\0" b')
	jqe "$out" '.stdout == "" and (.error | test("a frame larger than this client takes"))'
}

@test "kexec: a refused exec says the API server's reason; a wrong server, CA or token; a stream cut mid-call ends as 1006" {
	make_pod p
	out=$(kexec nosuch -- true)
	jqe "$out" '.http_status == 404 and .error == "the API server refused the stream (HTTP 404): pods \"nosuch\" not found"'
	control '{"access": {"create pods/exec": false, "get pods/exec": false}}' >/dev/null
	out=$(kexec p -- true)
	jqe "$out" '.http_status == 403 and (.error | test("refused the stream \\(HTTP 403\\)"))'
	control '{}' >/dev/null
	jq '.users[0].user.token = "wrong"' "$KC" >"$D/kc-bad"
	out=$(KCONF="$D/kc-bad" kexec p -- true)
	jqe "$out" '.http_status == 401'
	# A CA that did not sign the server's certificate: no connection at all.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$D/o.key" -out "$D/o.crt" \
		-days 1 -subj /CN=other 2>/dev/null
	jq --arg ca "$(base64 -w0 <"$D/o.crt")" '.clusters[0].cluster["certificate-authority-data"] = $ca' "$KC" >"$D/kc-ca"
	out=$(KCONF="$D/kc-ca" kexec p -- true)
	jqe "$out" '.http_status == 0 and (.error | test("certificate|SSL"))'
	jq '.clusters[0].cluster.server = "https://127.0.0.1:9"' "$KC" >"$D/kc-port"
	out=$(KCONF="$D/kc-port" kexec p -- true)
	jqe "$out" '.http_status == 0 and (.error | test("onnect"))'
	control '{"exec_drop_ms": 300}' >/dev/null
	out=$(kexec p -- sh -c 'echo before; sleep 10; echo after')
	jqe "$out" '.stdout == "before\n" and .exit == null and .close_code == 1006'
}

@test "kpod: the spec is hardened: non-root, no escalation, no capabilities, RuntimeDefault seccomp, read-only root, no token, limits, sized emptyDirs, a deadline, labels" {
	spec=$("$HELPER" kube-pod "$NS" sb spec)
	jqe "$spec" '.spec.automountServiceAccountToken == false and .spec.enableServiceLinks == false and .spec.restartPolicy == "Never" and .spec.activeDeadlineSeconds == 600'
	jqe "$spec" '.spec.securityContext == {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}}'
	jqe "$spec" '.spec.containers[0].securityContext == {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "allowPrivilegeEscalation": false, "privileged": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}'
	jqe "$spec" '.spec.containers[0].resources.limits == {"cpu": "1500m", "memory": "536870912", "ephemeral-storage": "1073741824"} and .spec.containers[0].resources.requests == .spec.containers[0].resources.limits'
	jqe "$spec" '[.spec.volumes[] | .emptyDir.sizeLimit] == ["67108864", "16777216", "33554432"] and all(.spec.volumes[]; keys == ["emptyDir", "name"])'
	jqe "$spec" '[.spec.volumes[] | .emptyDir.medium] == ["Memory", "Memory", null]'
	jqe "$spec" '.metadata.labels == {"sandbox-mcp": "1", "sandbox-mcp.pid": "123", "sandbox-mcp.starttime": "456", "sandbox-mcp.host": "test_host", "sandbox-mcp.sandbox": "k8s-0011aabb"}'
}

@test "kpod: made and waited on with one watch, a file put through exec, reaped by label, deleted; the test server takes the spec as it is" {
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb create)
	[ "$out" = ok ]
	head -c 200000 /dev/urandom >"$D/blob"
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb put /.sandbox-mcp/agent <"$D/blob")
	[ "$out" = ok ]
	out=$(kexec sb -- sh -c 'sha1sum < /.sandbox-mcp/agent; stat -c %a /.sandbox-mcp/agent; id -u; touch /x')
	jqe "$out" '.stdout == "'"$(sha1sum <"$D/blob" | cut -d' ' -f1)"'  -\n755\n1000\n" and (.stderr | test("Read-only file system"))'
	# A path the pod's user cannot write: the failure says so.
	out=$(echo x | KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb put /usr/x)
	[[ "$out" == "failed: writing /usr/x in the pod failed (exit status)"* ]]
	# Input the command never reads: the stream ends under the send, and its status still says why.
	head -c 30000000 /dev/zero >"$D/big"
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb put /usr/x <"$D/big")
	[[ "$out" == "failed: writing /usr/x in the pod failed (exit status)"* ]]
	log=$(control '{}')
	jqe "$log" '[.requests[] | select(.method == "GET" and (.query | test("watch=1")))] | length == 1'
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" other create)
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" x reap)
	[ "$out" = "reaped 2" ]
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb delete)
	[ "$out" = ok ]
	# An image the cluster cannot take, a pod that fails: said, not waited on.
	control '{"fail": {"status": 503, "method": "POST", "path": "*/pods", "count": 5}}' >/dev/null
	out=$(KUBECONFIG="$KC" "$HELPER" kube-pod "$NS" sb2 create)
	[[ "$out" == "failed: creating the pod: HTTP 503"* ]]
}
