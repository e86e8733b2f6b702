# The Kubernetes test server (tests/kubernetes/server.py), the ground a Kubernetes backend will
# be tested on: checked with the official JavaScript client (tests/kubernetes/client-check),
# with a small WebSocket client of the tests' own for the exec protocols (v4, v5), and with
# each of its faults.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-3c9e1f0a"

setup_file() {
	# The interpreter itself, once: a version manager's shim costs a process or two a call.
	python3 -c 'import sys; print(sys.executable)' >"$BATS_FILE_TMPDIR/python"
	k8s_setup_file
	jq -r '.users[1].user["client-certificate-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/client.crt"
	jq -r '.users[1].user["client-key-data"]' "$BATS_FILE_TMPDIR/kubeconfig" | base64 -d >"$BATS_FILE_TMPDIR/client.key"
}

teardown_file() { k8s_teardown_file; }

setup() {
	URL="https://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/port")"
	KC="$BATS_FILE_TMPDIR/kubeconfig"
	CA="$BATS_FILE_TMPDIR/ca.crt"
	WSEXEC="$BATS_TEST_DIRNAME/kubernetes/wsexec.py"
	PY=$(cat "$BATS_FILE_TMPDIR/python")
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
		# The server's JSON has one "phase", the pod's: no jq for each poll.
		[[ "$body" == *"\"phase\": \"$2\""* ]] && return 0
		[[ "$body" != *'"phase": "Succeeded"'* && "$body" != *'"phase": "Failed"'* ]] || break
		sleep 0.1
	done
	echo "pod $1 never reached $2: $body" >&2
	return 1
}

wsexec() {
	"$PY" "$WSEXEC" "$KC" "$NS" "$@"
}

@test "the official client drives it: pods, watch, exec and attach over WebSocket, persistent volume claims, network policies, access review, a claim from a warm pool" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	K8S_TEST_SANDBOXED=$(control '{}' | jq -r 'if .sandboxed then 1 else 0 end') \
		run "$BATS_TEST_DIRNAME/kubernetes/client-check/run" "$KC"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "the npm registry is not reachable: cannot install @kubernetes/client-node"
	[ "$status" -eq 0 ]
	[[ "$output" == *"14 passed, 0 failed"* ]]
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

@test "exec v5: fragmented stdin with a ping between the fragments, and a stream kept open while the client waits" {
	make_pod p
	out=$(wsexec p --stdin 'abcdefghij' --fragment --close-stdin -- cat)
	jqe "$out" '.stdout == "abcdefghij" and .pongs == 1 and .status.status == "Success"'
	# 100,000 bytes each way: a frame with a 64-bit length in, many frames out.
	big=$(head -c 100000 /dev/zero | tr '\0' a)
	out=$(wsexec p --stdin "$big" --close-stdin -- sh -c 'cat; cat /dev/zero | head -c 300000 | tr "\0" b >&2')
	jqe "$out" '(.stdout | length) == 100000 and (.stderr | length) == 300000 and .status.status == "Success"'
	# Nothing is sent for 2 s: the stream stays open until the client's line comes.
	out=$(wsexec p --stdin-delay 2 --stdin $'late\n' -- sh -c 'read x; echo "got $x"')
	jqe "$out" '.stdout == "got late\n" and .status.status == "Success"'
}

@test "exec v4: the status on channel 3 as a metav1.Status with the exit code; no CLOSE channel" {
	make_pod p
	out=$(wsexec p --protocols v4.channel.k8s.io --stdin 'xyz' -- sh -c 'head -c 3; echo; exit 7')
	jqe "$out" '.protocol == "v4.channel.k8s.io" and .stdout == "xyz\n"'
	jqe "$out" '.status.status == "Failure" and .status.details.causes[0] == {"reason": "ExitCode", "message": "7"}'
	# Under v4, 255 is no CLOSE message: stdin stays open, and the command ends on its own.
	out=$(wsexec p --protocols v4.channel.k8s.io --stdin 'abc' --close-stdin -- sh -c 'head -c 3; echo')
	jqe "$out" '.stdout == "abc\n" and .status.status == "Success"'
	# The client's first offer that the server speaks wins.
	out=$(wsexec p --protocols v4.channel.k8s.io,v5.channel.k8s.io -- true)
	jqe "$out" '.protocol == "v4.channel.k8s.io"'
}

@test "exec refuses: an unmasked client frame (1002), unknown subprotocols, tty, no command, a pod not running" {
	make_pod p
	out=$(wsexec p --unmasked --stdin x -- sleep 5)
	jqe "$out" '.close_code == 1002 and .status == null'
	out=$(wsexec p --protocols v3.channel.k8s.io,channel.k8s.io -- true)
	jqe "$out" '.http_status == 400 and .http_body.kind == "Status" and .http_body.reason == "BadRequest"'
	k GET "/api/v1/namespaces/$NS/pods/p/exec?command=true&stdout=true&tty=true" '' -H 'Upgrade: websocket' -H 'Connection: Upgrade'
	[ "$code" = 400 ]
	k GET "/api/v1/namespaces/$NS/pods/p/exec?stdout=true" '' -H 'Upgrade: websocket' -H 'Connection: Upgrade'
	[ "$code" = 400 ]
	jqe "$body" '.message == "you must specify at least 1 command"'
	control '{"start_ms": 60000}' >/dev/null
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json pending)"
	[ "$code" = 201 ]
	out=$(wsexec pending -- true)
	jqe "$out" '.http_status == 400 and (.http_body.message | test("does not have a host assigned"))'
	out=$(wsexec nosuch -- true)
	jqe "$out" '.http_status == 404 and .http_body.reason == "NotFound"'
}

@test "a pod runs in namespaces of its own: its own root (host /usr read-only), PID namespace, hostname, emptyDir of its sizeLimit" {
	jqe "$(control '{}')" '.sandboxed' || skip_or_fail "pods need root and unshare to run in namespaces"
	make_pod p '.spec.containers[0].securityContext = {runAsUser: 1000, allowPrivilegeEscalation: false}'
	out=$(wsexec p -- sh -c 'id -u; hostname; pwd; ls /; cat /proc/1/cmdline | tr "\0" " "; echo; grep NoNewPrivs /proc/self/status')
	jqe "$out" '.stdout | test("^1000\np\n/workspace\nbin\ndev\netc\n")'
	# The container's command is the pod's PID 1, as under a container runtime.
	jqe "$out" '.stdout | test("\n/usr/bin/sleep infinity \n|\nsleep infinity \n") and test("NoNewPrivs:\t1")'
	jqe "$out" '.stdout | test("\nwork\n|\nhome\n|\nfarm\n") | not'
	out=$(wsexec p -- sh -c 'touch /usr/x; echo "usr=$?"; head -c 12M /dev/zero > /workspace/big; echo "big=$?"; rm /workspace/big; head -c 4M /dev/zero > /workspace/small; echo "small=$?"')
	jqe "$out" '.stdout == "usr=1\nbig=1\nsmall=0\n" and (.stderr | test("No space left"))'
	# readOnlyRootFilesystem: the root is read-only, the workspace is not.
	make_pod ro '.spec.containers[0].securityContext = {readOnlyRootFilesystem: true}'
	out=$(wsexec ro -- sh -c 'touch /tmp/x; echo "tmp=$?"; touch /workspace/x; echo "ws=$?"')
	jqe "$out" '.stdout == "tmp=1\nws=0\n"'
	# Root in a pod has a runtime's default capabilities (no CAP_SYS_ADMIN: no mount), a root it
	# cannot climb out of (pivot_root, not chroot), and a network of its loopback only.
	make_pod root '.spec.containers[0].securityContext = {capabilities: {drop: ["NET_RAW"]}}'
	port=${URL##*:}
	out=$(wsexec root -- sh -c 'grep CapEff /proc/self/status; mount -t tmpfs x /tmp; echo "mount=$?"
		python3 -c "import os, socket
os.mkdir(\"/tmp/x\"); os.chroot(\"/tmp/x\")
for _ in range(30): os.chdir(\"..\")
os.chroot(\".\"); print(\" \".join(sorted(os.listdir(\"/\"))))
try:
    socket.create_connection((\"127.0.0.1\", '"$port"'), timeout=2); print(\"reached\")
except OSError as x: print(\"refused\")"')
	jqe "$out" '.stdout | test("CapEff:\t00000000a80405fb\nmount=32\n")'
	jqe "$out" '.stdout | test("\nbin dev etc lib .*usr workspace\nrefused\n$")'
	make_pod none '.spec.containers[0].securityContext = {capabilities: {drop: ["ALL"]}}'
	out=$(wsexec none -- grep CapEff /proc/self/status)
	jqe "$out" '.stdout == "CapEff:\t0000000000000000\n"'
	# The container's command runs as asked, in the same root as exec.
	make_pod cmd '.spec.containers[0].command = ["sh", "-c"] | .spec.containers[0].args = ["echo started > /workspace/mark; exec sleep infinity"]'
	out=$(wsexec cmd -- cat /workspace/mark)
	jqe "$out" '.stdout == "started\n"'
}

@test "pods: the spec is stored as sent and validated as the API server validates it" {
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json kept '.spec.automountServiceAccountToken = false | .spec.activeDeadlineSeconds = 3600 | .spec.runtimeClassName = "gvisor" | .spec.containers[0].resources = {limits: {cpu: "1", memory: "1Gi", "ephemeral-storage": "2Gi"}, requests: {cpu: "250m", memory: "256Mi"}} | .spec.containers[0].securityContext = {runAsNonRoot: true, runAsUser: 1000, capabilities: {drop: ["ALL"]}, seccompProfile: {type: "RuntimeDefault"}}')"
	[ "$code" = 201 ]
	k GET "/api/v1/namespaces/$NS/pods/kept"
	jqe "$body" '.spec.automountServiceAccountToken == false and .spec.activeDeadlineSeconds == 3600 and .spec.runtimeClassName == "gvisor"'
	jqe "$body" '.spec.containers[0].resources.limits.memory == "1Gi" and .spec.containers[0].securityContext.capabilities.drop == ["ALL"]'
	jqe "$body" '.spec.volumes[0].emptyDir.sizeLimit == "8Mi" and .metadata.labels.app == "t" and .status.qosClass == "Burstable"'
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json kept)"
	[ "$code" = 409 ]
	jqe "$body" '.reason == "AlreadyExists" and .details.name == "kept"'
	for bad in '.metadata.labels = {"bad key!": "x"}' '.metadata.name = "Upper"' '.spec.activeDeadlineSeconds = 0' \
		'.spec.volumes[0].emptyDir.sizeLimit = "8 MB"' '.spec.containers[0].volumeMounts[0].name = "other"' \
		'.spec.containers[0].securityContext = {privileged: true, allowPrivilegeEscalation: false}' \
		'.spec.containers[0].securityContext = {runAsUser: -1}' '.spec.automountServiceAccountToken = "no"' \
		'.spec.containers[0].resources = {limits: {memory: "1Gi"}, requests: {memory: "2Gi"}}' \
		'.spec.volumes[0] = {name: "workspace", hostPath: {path: "/"}}' '.spec.containers[0].volumeMounts[0].mountPath = "/a/../etc"' \
		'.spec.containers = []' '.spec.containers[0].securityContext = {seccompProfile: {type: "Open"}}'; do
		k POST "/api/v1/namespaces/$NS/pods" "$(pod_json invalid "$bad")"
		[ "$code" = 422 ] || { echo "accepted: $bad" >&2; false; }
		printf '%s\n' "$body" >>"$BATS_TEST_TMPDIR/invalid"
	done
	jq -se 'length == 13 and all(.[]; .kind == "Status" and .reason == "Invalid" and (.details.causes | length > 0))' \
		"$BATS_TEST_TMPDIR/invalid"
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json rc '.spec.runtimeClassName = "nosuch"')"
	[ "$code" = 403 ]
	jqe "$body" '.message == "pod rejected: RuntimeClass \"nosuch\" not found"'
	k GET "/api/v1/namespaces/$NS/pods/invalid"
	[ "$code" = 404 ]
}

@test "pods: list by label selector, Pending then Running with Ready, activeDeadlineSeconds fails the pod, delete with grace then gone" {
	make_pod a '.metadata.labels = {app: "x", tier: "one"}'
	make_pod b '.metadata.labels = {app: "x", tier: "two"}'
	make_pod c '.metadata.labels = {app: "y"}'
	for sel in 'app=x:a,b' 'app==x,tier!=one:b' 'tier in (one,two):a,b' 'tier notin (one),app:b,c' '!tier:c' 'app=nope:'; do
		k GET "/api/v1/namespaces/$NS/pods" '' -G --data-urlencode "labelSelector=${sel%%:*}"
		[ "$code" = 200 ]
		[ "$(jq -r '[.items[].metadata.name] | join(",")' <<<"$body")" = "${sel#*:}" ] || { echo "$sel: $body" >&2; false; }
	done
	jqe "$body" '.kind == "PodList" and (.metadata.resourceVersion | length > 0)'
	k GET "/api/v1/namespaces/$NS/pods/a"
	jqe "$body" '.status.phase == "Running" and any(.status.conditions[]; .type == "Ready" and .status == "True")'
	jqe "$body" '.status.containerStatuses[0].state.running.startedAt and .status.podIP'
	make_pod dl '.spec.activeDeadlineSeconds = 2'
	wait_phase dl Failed
	jqe "$body" '.status.reason == "DeadlineExceeded"'
	# A command that ignores SIGTERM is killed when the grace period ends.
	make_pod g '.spec.containers[0].command = ["sh", "-c", "trap \"\" TERM; while :; do sleep 0.1; done"]'
	k DELETE "/api/v1/namespaces/$NS/pods/g?gracePeriodSeconds=1"
	[ "$code" = 200 ]
	jqe "$body" '.metadata.deletionTimestamp and .metadata.deletionGracePeriodSeconds == 1'
	k GET "/api/v1/namespaces/$NS/pods/g"
	[ "$code" = 200 ]
	for _ in $(seq 100); do k GET "/api/v1/namespaces/$NS/pods/g"; [ "$code" = 404 ] && break; sleep 0.1; done
	[ "$code" = 404 ]
	jqe "$body" '.kind == "Status" and .reason == "NotFound"'
}

@test "watch: a chunked stream of events from a resourceVersion, ERROR 410 when it is too old, and an early end" {
	k GET "/api/v1/namespaces/$NS/pods"
	rv=$(jq -r .metadata.resourceVersion <<<"$body")
	curl -sS -N --cacert "$CA" -H "Authorization: Bearer $K8S_TOKEN" -D "$BATS_TEST_TMPDIR/headers" \
		"$URL/api/v1/namespaces/$NS/pods?watch=1&resourceVersion=$rv&timeoutSeconds=20" >"$BATS_TEST_TMPDIR/events" &
	watcher=$!
	make_pod w
	k DELETE "/api/v1/namespaces/$NS/pods/w" '{"gracePeriodSeconds": 0}'
	for _ in $(seq 100); do grep -q DELETED "$BATS_TEST_TMPDIR/events" && break; sleep 0.1; done
	kill "$watcher"
	grep -qi '^transfer-encoding: chunked' "$BATS_TEST_TMPDIR/headers"
	jq -se 'map(.type) | .[0] == "ADDED" and .[-1] == "DELETED" and index("MODIFIED") != null' "$BATS_TEST_TMPDIR/events"
	jq -se 'any(.[]; .type == "MODIFIED" and .object.status.phase == "Running")' "$BATS_TEST_TMPDIR/events"
	jq -se '[.[].object.metadata.resourceVersion | tonumber] | . == sort and .[0] > '"$rv" "$BATS_TEST_TMPDIR/events"
	# Without a resourceVersion, the stream starts with the objects that are there.
	make_pod x
	out=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $K8S_TOKEN" "$URL/api/v1/namespaces/$NS/pods?watch=true&timeoutSeconds=1")
	jqe "$(head -1 <<<"$out")" '.type == "ADDED" and .object.metadata.name == "x"'
	out=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $K8S_TOKEN" "$URL/api/v1/namespaces/$NS/pods?watch=1&resourceVersion=1")
	jqe "$out" '.type == "ERROR" and .object.code == 410 and .object.reason == "Expired"'
	# The fault: a watch that ends early, cleanly, long before its timeout.
	control '{"watch_end_ms": 300}' >/dev/null
	start=$(date +%s%N)
	out=$(curl -sS --cacert "$CA" -H "Authorization: Bearer $K8S_TOKEN" "$URL/api/v1/namespaces/$NS/pods?watch=1&resourceVersion=$rv&timeoutSeconds=30")
	[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 10000 ]
	jqe "$(head -1 <<<"$out")" '.type == "ADDED"'
}

@test "auth: no or a wrong token is 401; a client certificate from its CA is its CN; SelfSubjectAccessReview answers the access set, which governs requests too" {
	k GET /api/v1/namespaces/default/pods '' -H 'Authorization: Bearer wrong'
	[ "$code" = 200 ]  # curl sends the last Authorization header given: the right one
	out=$(curl -sS --cacert "$CA" -w '\n%{http_code}' "$URL/api/v1/namespaces/default/pods")
	[ "${out##*$'\n'}" = 401 ]
	jqe "${out%$'\n'*}" '.kind == "Status" and .reason == "Unauthorized"'
	out=$(curl -sS --cacert "$CA" -H 'Authorization: Bearer wrong' -w '\n%{http_code}' "$URL/version")
	[ "${out##*$'\n'}" = 401 ]
	out=$(curl -sS --cacert "$CA" --cert "$BATS_FILE_TMPDIR/client.crt" --key "$BATS_FILE_TMPDIR/client.key" -w '\n%{http_code}' "$URL/api/v1/namespaces/default/pods")
	[ "${out##*$'\n'}" = 200 ]
	jqe "$(control '{}')" 'any(.requests[]; .auth == "cert:test-user")'
	# A certificate this CA did not sign is refused in the handshake.
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$BATS_TEST_TMPDIR/o.key" \
		-out "$BATS_TEST_TMPDIR/o.crt" -days 1 -subj /CN=intruder 2>/dev/null
	run curl -sS --cacert "$CA" --cert "$BATS_TEST_TMPDIR/o.crt" --key "$BATS_TEST_TMPDIR/o.key" "$URL/api/v1/namespaces/default/pods"
	[ "$status" -ne 0 ]
	ssar='{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"namespace":"default","verb":"create","resource":"pods","subresource":"exec"}}}'
	k POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews "$ssar"
	[ "$code" = 201 ]
	jqe "$body" '.status.allowed == true and .spec.resourceAttributes.subresource == "exec"'
	control '{"access": {"create pods/exec": false, "get pods/exec": false}}' >/dev/null
	k POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews "$ssar"
	jqe "$body" '.status.allowed == false'
	make_pod p
	out=$(wsexec p -- true)
	jqe "$out" '.http_status == 403 and .http_body.reason == "Forbidden"'
	control '{"access_default": false, "access": {"get pods": true}}' >/dev/null
	k GET "/api/v1/namespaces/$NS/pods/p"
	[ "$code" = 200 ]
	k DELETE "/api/v1/namespaces/$NS/pods/p"
	[ "$code" = 403 ]
}

@test "network policies are stored; discovery names the groups; the agent-sandbox CRDs can be uninstalled" {
	np='{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"deny","labels":{"a":"b"}},"spec":{"podSelector":{},"policyTypes":["Egress"],"egress":[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}}'
	k POST "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" "$np"
	[ "$code" = 201 ]
	k GET "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies/deny"
	jqe "$body" '.spec.egress[0].to[0].ipBlock.cidr == "10.0.0.0/8" and .kind == "NetworkPolicy"'
	k POST "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" "$np"
	[ "$code" = 409 ]
	k DELETE "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies/deny"
	[ "$code" = 200 ]
	k GET /version
	jqe "$body" '.major == "1" and (.gitVersion | startswith("v1."))'
	k GET /api
	jqe "$body" '.versions == ["v1"]'
	k GET /api/v1
	jqe "$body" 'any(.resources[]; .name == "pods/exec")'
	k GET /apis
	jqe "$body" '[.groups[].name] | index("extensions.agents.x-k8s.io") and index("agents.x-k8s.io") and index("networking.k8s.io")'
	control '{"agent_sandbox": false}' >/dev/null
	k GET /apis
	jqe "$body" '[.groups[].name] | index("extensions.agents.x-k8s.io") == null'
	k GET "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/$NS/sandboxclaims"
	[ "$code" = 404 ]
}

@test "agent-sandbox: a claim binds a warm pool's pod (the pool refills), a claim without its template is not Ready, deletes cascade" {
	ext="/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/$NS"
	tpl=$(pod_json unused '{apiVersion: "extensions.agents.x-k8s.io/v1alpha1", kind: "SandboxTemplate", metadata: {name: "tpl"}, spec: {podTemplate: {metadata: {labels: {role: "sb"}}, spec: .spec}}}')
	k POST "$ext/sandboxtemplates" "$tpl"
	[ "$code" = 201 ]
	k POST "$ext/sandboxwarmpools" '{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxWarmPool","metadata":{"name":"pool"},"spec":{"replicas":2,"sandboxTemplateRef":{"name":"tpl"}}}'
	[ "$code" = 201 ]
	for _ in $(seq 100); do k GET "$ext/sandboxwarmpools/pool"; jq -e '.status.readyReplicas == 2' <<<"$body" >/dev/null && break; sleep 0.1; done
	jqe "$body" '.status.readyReplicas == 2'
	k GET "/api/v1/namespaces/$NS/pods" '' -G --data-urlencode 'labelSelector=role=sb'
	jqe "$body" '(.items | length) == 2 and all(.items[]; .spec.automountServiceAccountToken == false)'
	warm=$(jq -r '[.items[].metadata.name]' <<<"$body")
	k POST "$ext/sandboxclaims" '{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxClaim","metadata":{"name":"mine"},"spec":{"sandboxTemplateRef":{"name":"tpl"}}}'
	[ "$code" = 201 ]
	jqe "$body" '.status.conditions[0].type == "Ready" and .status.conditions[0].status == "True"'
	name=$(jq -r .status.sandbox.name <<<"$body")
	jqe "$warm" "index(\"$name\") != null"
	k GET "/apis/agents.x-k8s.io/v1alpha1/namespaces/$NS/sandboxes/$name"
	jqe "$body" '.metadata.ownerReferences[0].kind == "SandboxClaim" and .status.conditions[0].status == "True"'
	out=$(wsexec "$name" -- echo in-claim)
	jqe "$out" '.stdout == "in-claim\n"'
	# The pool made another one; then the claim goes, and its sandbox and pod with it.
	k GET "/api/v1/namespaces/$NS/pods" '' -G --data-urlencode 'labelSelector=role=sb'
	jqe "$body" '(.items | length) == 3'
	k DELETE "$ext/sandboxclaims/mine"
	[ "$code" = 200 ]
	for _ in $(seq 100); do k GET "/api/v1/namespaces/$NS/pods/$name"; [ "$code" = 404 ] && break; sleep 0.1; done
	[ "$code" = 404 ]
	k POST "$ext/sandboxclaims" '{"apiVersion":"extensions.agents.x-k8s.io/v1alpha1","kind":"SandboxClaim","metadata":{"name":"orphan"},"spec":{"sandboxTemplateRef":{"name":"nosuch"}}}'
	jqe "$body" '.status.conditions[0].status == "False" and .status.conditions[0].reason == "TemplateNotFound"'
	k DELETE "$ext/sandboxwarmpools/pool"
	for _ in $(seq 100); do k GET "/api/v1/namespaces/$NS/pods" '' -G --data-urlencode 'labelSelector=role=sb'; jq -e '.items == []' <<<"$body" >/dev/null && break; sleep 0.1; done
	jqe "$body" '.items == []'
}

@test "faults: latency, 5xx on matching requests, an exec stream cut mid-call, eviction, OOM kill, 409 on a delete while creating; the request log" {
	control '{"latency_ms": 400}' >/dev/null
	start=$(date +%s%N)
	k GET /version
	[ $(( ($(date +%s%N) - start) / 1000000 )) -ge 400 ]
	control '{"fail": {"status": 503, "method": "POST", "path": "*/pods", "count": 1}}' >/dev/null
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json p)"
	[ "$code" = 503 ]
	jqe "$body" '.kind == "Status" and .reason == "ServiceUnavailable" and .code == 503'
	make_pod p
	k GET "/api/v1/namespaces/$NS/pods/p"
	[ "$code" = 200 ]
	log=$(control '{}')
	jqe "$log" '[.requests[] | select(.method == "POST") | .status] == [503, 201]'
	# The stream is cut: neither a status nor a close frame comes.
	control '{"exec_drop_ms": 300}' >/dev/null
	out=$(wsexec p -- sh -c 'echo before; sleep 10; echo after')
	jqe "$out" '.stdout == "before\n" and .status == null and .close_code == null'
	control '{}' >/dev/null
	control "{\"evict\": {\"namespace\": \"$NS\", \"name\": \"p\", \"reason\": \"Evicted\"}}" >/dev/null
	wait_phase p Failed
	jqe "$body" '.status.reason == "Evicted" and (.status.message | test("low on resource"))'
	out=$(wsexec p -- true)
	jqe "$out" '.http_status == 400 and (.http_body.message | test("completed pod"))'
	make_pod oom
	control "{\"evict\": {\"namespace\": \"$NS\", \"name\": \"oom\", \"reason\": \"OOMKilled\"}}" >/dev/null
	wait_phase oom Failed
	jqe "$body" '.status.containerStatuses[0].state.terminated | .reason == "OOMKilled" and .exitCode == 137'
	control '{"busy_delete": true, "start_ms": 60000}' >/dev/null
	k POST "/api/v1/namespaces/$NS/pods" "$(pod_json slow)"
	k DELETE "/api/v1/namespaces/$NS/pods/slow"
	[ "$code" = 409 ]
	jqe "$body" '.reason == "Conflict"'
	control '{}' >/dev/null
	k DELETE "/api/v1/namespaces/$NS/pods/slow"
	[ "$code" = 200 ]
}

@test "bad input gets a clear error, and the server serves on" {
	k POST "/api/v1/namespaces/$NS/pods" '{"metadata": '
	[ "$code" = 400 ]
	jqe "$body" '.kind == "Status" and .reason == "BadRequest"'
	k POST "/api/v1/namespaces/$NS/pods" '{"metadata": ["x"], "spec": {}}'
	[ "$code" = 400 ]
	for bad in '.spec.containers[0].resources = "lots"' '.spec.containers[0].resources.limits = ["1Gi"]' \
		'.spec.volumes = {}' '.spec.volumes[0].emptyDir = "yes"' '.spec.containers[0].env = {"A": "b"}' \
		'.spec.containers[0].workingDir = "relative"' '.spec.containers[0].securityContext = "root"'; do
		k POST "/api/v1/namespaces/$NS/pods" "$(pod_json bad "$bad")"
		[ "$code" = 422 ] || { echo "$bad: $code $body" >&2; false; }
	done
	make_pod p
	k DELETE "/api/v1/namespaces/$NS/pods/p?gracePeriodSeconds=soon"
	[ "$code" = 400 ]
	k GET "/api/v1/namespaces/$NS/pods/p/exec?command=%00&stdout=true" '' -H 'Upgrade: websocket' -H 'Connection: Upgrade'
	[ "$code" = 400 ]
	k GET "/api/v1/namespaces/$NS/pods/p/exec?command=true&stdout=true" '' -H 'Upgrade: websocket' -H 'Connection: Upgrade' \
		-H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: not*base64' -H 'Sec-WebSocket-Protocol: v5.channel.k8s.io'
	[ "$code" = 400 ]
	jqe "$body" '.message | test("Sec-WebSocket-Key")'
	k POST "/api/v1/namespaces/$NS/pods" '' -H 'Content-Length: -5'
	[ "$code" = 400 ]
	out=$(wsexec p --huge --stdin x -- sleep 5)
	jqe "$out" '.close_code == 1009 and .status == null'
	k GET /version
	[ "$code" = 200 ]
	out=$(wsexec p -- echo still)
	jqe "$out" '.stdout == "still\n"'
	# Nothing above made the server fail on its own.
	run ! grep -q Traceback "$BATS_FILE_TMPDIR/k8s.log"
}
