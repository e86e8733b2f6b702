# The kubernetes backend against the project's Kubernetes test server (tests/kubernetes/server.py,
# itself checked with the official client in kubernetes.bats): a sandbox is one hardened pod,
# the agent its PID 1, every call on one attached stream; cleanup and shutdown delete the pod;
# what cannot work is refused at start-up; and the run-semantics scenario gives the local
# backend's results.
load lib/helpers
load lib/kubernetes
load lib/runsem
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-5be0c2d9"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kb
	control '{"clear_log": true}' >/dev/null
}

@test "a session on the kubernetes backend: python and bash, a file in and an output out, a timeout; a warm call makes no HTTP request" {
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_python '{"script": "print(6 * 7)"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "cat in.txt; id -u; pwd; mkdir -p outputs; echo made > outputs/o.txt", "files": {"in.txt": "given\n"}}')
		{"wait": 2}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control > $BATS_TEST_TMPDIR/before"}
		$(call_json 3 execute_bash_commands '{"code": "echo warm"}')
		{"wait": 3}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control > $BATS_TEST_TMPDIR/after"}
		$(call_json 4 execute_bash_commands '{"code": "echo start; sleep 30", "timeout_s": 2}')
		{"wait": 4}
		$(call_json 5 execute_bash_commands '{"code": "echo still here"}')
	EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent | .exit_code == 0 and .stdout == "42\n" and .backend == "kubernetes"'
	r=$(response 2)
	jqe "$r" '.result.structuredContent | .exit_code == 0 and .stdout == "given\n65534\n/workspace\n"'
	jqe "$r" '[.result.structuredContent.artifacts[]? | .path] == ["outputs/o.txt"]'
	jqe "$(response 3)" '.result.structuredContent.stdout == "warm\n"'
	# The warm call: not one request more in the API server's log.
	[ "$(jq '.requests | length' "$BATS_TEST_TMPDIR/before")" = "$(jq '.requests | length' "$BATS_TEST_TMPDIR/after")" ]
	jqe "$(cat "$BATS_TEST_TMPDIR/after")" '[.requests[] | select(.path | endswith("/attach"))] | length == 1'
	r=$(response 4)
	jqe "$r" '.result.structuredContent | .timed_out and .stdout == "start\n"'
	jqe "$(response 5)" '.result.structuredContent.stdout == "still here\n"'
}

@test "the pod is hardened as its spec says, cleanup_sandbox deletes it, and shutdown deletes the next" {
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "grep -E \"^(CapEff|NoNewPrivs)\" /proc/self/status; touch /x 2>&1; cat /proc/1/cmdline | tr \"\\\\0\" \" \""}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods1"}
		$(call_json 2 cleanup_sandbox '{}')
		{"wait": 2}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods2"}
		$(call_json 3 execute_bash_commands '{"code": "echo again"}')
		{"wait": 3}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods3"}
	EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent.stdout | test("CapEff:\t0000000000000000\nNoNewPrivs:\t1\n") and test("Read-only file system") and test("sandbox-agent --stdio")'
	pod=$(jq -c '.items[0]' "$BATS_TEST_TMPDIR/pods1")
	jqe "$pod" '.spec.automountServiceAccountToken == false and .spec.containers[0].securityContext.capabilities.drop == ["ALL"] and .spec.activeDeadlineSeconds > 0'
	jqe "$pod" '.metadata.labels["sandbox-mcp.pid"] and .metadata.labels["sandbox-mcp"] == "1"'
	first=$(jq -r .metadata.name <<<"$pod")
	jqe "$(cat "$BATS_TEST_TMPDIR/pods2")" "[.items[] | select(.metadata.name == \"$first\" and .metadata.deletionTimestamp == null)] == []"
	jqe "$(response 3)" '.result.structuredContent.stdout == "again\n"'
	jqe "$(cat "$BATS_TEST_TMPDIR/pods3")" '.items | length >= 1'
	# The session is over: the server deleted its pod on the way out.
	[ "$(pods)" = "[]" ]
}

@test "refused at start-up, saying why: an exec-plugin kubeconfig user, a server that does not answer" {
	jq '.users[0].user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "gke-gcloud-auth-plugin"}}' \
		"$KUBECONFIG" >"$BATS_TEST_TMPDIR/kc-exec"
	run env KUBECONFIG="$BATS_TEST_TMPDIR/kc-exec" "$SANDBOX_MCP" --backend kubernetes </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"exec plugin (gke-gcloud-auth-plugin)"*"bearer token (token or tokenFile) or a client certificate"* ]]
	jq '.clusters[0].cluster.server = "https://127.0.0.1:9"' "$KUBECONFIG" >"$BATS_TEST_TMPDIR/kc-port"
	run env KUBECONFIG="$BATS_TEST_TMPDIR/kc-port" "$SANDBOX_MCP" --backend kubernetes </dev/null
	[ "$status" -eq 2 ]
	[[ "$output" == *"the API server https://127.0.0.1:9"*"onnect"* ]]
	# auto passes over a cluster that is not configured for it.
	run env -u SANDBOX_KUBE_NAMESPACE SANDBOX_BACKEND=auto KUBECONFIG="$BATS_TEST_TMPDIR/kc-port" "$SANDBOX_MCP" --check
	[[ "$output" != *"127.0.0.1:9"* ]]
}

@test "at start, the pods of a server that is gone are deleted; another host's are left" {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" -H 'Content-Type: application/json' \
		-X POST "$URL/api/v1/namespaces/$NS/pods" --data-binary "$(jq -cn --arg host "$(hostname | cut -c1-60).$(readlink /proc/self/ns/pid | tr -dc 0-9)" \
		'{apiVersion: "v1", kind: "Pod", metadata: {name: "dead", labels: {"sandbox-mcp": "1", "sandbox-mcp.pid": "999999", "sandbox-mcp.starttime": "1", "sandbox-mcp.host": $host}},
		  spec: {containers: [{name: "c", image: "x", command: ["sleep", "infinity"]}]}}')" >/dev/null
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" -H 'Content-Type: application/json' \
		-X POST "$URL/api/v1/namespaces/$NS/pods" --data-binary '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "elsewhere", "labels": {"sandbox-mcp": "1", "sandbox-mcp.pid": "999999", "sandbox-mcp.starttime": "1", "sandbox-mcp.host": "other-host.1"}}, "spec": {"containers": [{"name": "c", "image": "x", "command": ["sleep", "infinity"]}]}}' >/dev/null
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo ok"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods"}
	EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "ok\n"'
	jqe "$(cat "$BATS_TEST_TMPDIR/pods")" '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | index("dead") == null and index("elsewhere") != null'
}

@test "parity: run semantics on the kubernetes backend are the local backend's" {
	SANDBOX_BACKEND=local runsem_run local
	local_res=$runsem_res
	runsem_run kubernetes --network none
	runsem_assert
	[ "$runsem_res" = "$local_res" ] || { diff <(jq . <<<"$local_res") <(jq . <<<"$runsem_res") >&2; false; }
}

@test "the agent's stream is out of the code's reach; a pod evicted between calls: the next call runs in a new one, and the old is deleted" {
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "ls /proc/1/fd 2>&1 | head -1; (echo x > /proc/1/fd/0) 2>&1 | head -1; (cat /proc/1/fd/1) 2>&1 | head -1; kill -9 1; echo kill=$?"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods | jq -r '.items[0].metadata.name' > $BATS_TEST_TMPDIR/pod"}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d \"{\\\\\"evict\\\\\": {\\\\\"namespace\\\\\": \\\\\"$NS\\\\\", \\\\\"name\\\\\": \\\\\"\$(cat $BATS_TEST_TMPDIR/pod)\\\\\", \\\\\"reason\\\\\": \\\\\"Evicted\\\\\"}}\" $URL/_control >/dev/null"}
		{"until": "grep -q 'was lost: its agent went away' $SERVER_LOG"}
		$(call_json 2 execute_bash_commands '{"code": "echo after"}')
		{"wait": 2}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods"}
	EOF
	r=$(response 1)
	# The agent is not dumpable: its descriptors (the stream) are closed to the code; PID 1 takes no signal from it.
	jqe "$r" '.result.structuredContent.stdout | test("Permission denied") and test("kill=0|kill=1")'
	jqe "$r" '.result.structuredContent.stdout | test("^ls: cannot open directory")'
	old=$(cat "$BATS_TEST_TMPDIR/pod")
	r2=$(response 2)
	jqe "$r2" '.result.structuredContent | .exit_code == 0 and .stdout == "after\n"'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r2")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	jqe "$(cat "$BATS_TEST_TMPDIR/pods")" "[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | index(\"$old\") == null and length == 1"
}

@test "mcp-check (official SDK client) passes every check on the kubernetes backend, background processes and sessions included" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run env MCP_CHECK_SECRET=leak-me "$MCP_CHECK" "$SANDBOX_MCP"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 15 ]
	[ "$(pods)" = "[]" ]
}

@test "faults: the API server answers 503 to the pod's creation: the call says why, and the next call gets a pod" {
	control '{"fail": {"status": 503, "method": "POST", "path": "*/pods", "count": 1}}' >/dev/null
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "echo two"}')
	EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent | .exit_code == 1 and (.error | test("creating the pod: HTTP 503 ServiceUnavailable"))'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .stdout == "two\n"'
	[ "$(pods)" = "[]" ]
}

# netpols: the names of the NetworkPolicies in this test's namespace.
netpols() {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" "$URL/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" |
		jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name]'
}

@test "egress: a NetworkPolicy that denies the pod's egress is made before the pod, deleted with it by cleanup and shutdown, and reaped with a gone server's" {
	curl -sS --cacert "$BATS_FILE_TMPDIR/ca.crt" -H "Authorization: Bearer $K8S_TOKEN" -H 'Content-Type: application/json' \
		-X POST "$URL/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" --data-binary "$(jq -cn --arg host "$(hostname | cut -c1-60).$(readlink /proc/self/ns/pid | tr -dc 0-9)" \
		'{apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: {name: "dead", labels: {"sandbox-mcp": "1", "sandbox-mcp.pid": "999999", "sandbox-mcp.starttime": "1", "sandbox-mcp.host": $host}},
		  spec: {podSelector: {}, policyTypes: ["Egress"]}}')" >/dev/null
	[ "$(netpols)" = '["dead"]' ]
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies > $BATS_TEST_TMPDIR/pols1"}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods1"}
		$(call_json 2 cleanup_sandbox '{}')
		{"wait": 2}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies > $BATS_TEST_TMPDIR/pols2"}
		$(call_json 3 execute_bash_commands '{"code": "echo again"}')
		{"wait": 3}
	EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "one\n"'
	jqe "$(response 3)" '.result.structuredContent.stdout == "again\n"'
	pod=$(jq -c '.items[0]' "$BATS_TEST_TMPDIR/pods1")
	pol=$(jq -c '.items[] | select(.metadata.deletionTimestamp == null)' "$BATS_TEST_TMPDIR/pols1")
	# One policy, the gone server's reaped: it selects this pod by its sandbox label, Egress with no rule.
	jqe "$(jq -s length <<<"$pol")" '. == 1'
	jqe "$pol" '.spec.policyTypes == ["Egress"] and (.spec.egress // [] | length == 0) and .metadata.labels["sandbox-mcp"] == "1"'
	sb=$(jq -r '.spec.podSelector.matchLabels["sandbox-mcp.sandbox"]' <<<"$pol")
	[ -n "$sb" ] && [ "$sb" != null ]
	jqe "$pod" ".metadata.labels[\"sandbox-mcp.sandbox\"] == \"$sb\""
	jqe "$(cat "$BATS_TEST_TMPDIR/pols2")" '[.items[] | select(.metadata.deletionTimestamp == null)] == []'
	# Made before the pod, in the request log (after this test's own "dead").
	jqe "$(control '{}')" "[.requests[] | select(.method == \"POST\" and (.path | contains(\"/namespaces/$NS/\"))) | .path | split(\"/\") | last] | .[1:3] == [\"networkpolicies\", \"pods\"]"
	# --check says what of it the cluster enforces.
	run "$SANDBOX_MCP" --check
	[[ "$output" == *"egress      denied by a NetworkPolicy"*"without a NetworkPolicy controller it does nothing"* ]]
	[ "$(netpols)" = "[]" ]
	[ "$(pods)" = "[]" ]
}

@test "--check on the kubernetes backend: the cluster's version, each permission it needs, NetworkPolicies and the agent-sandbox CRDs, the test pod's steps timed" {
	control '{"access": {"list networkpolicies.networking.k8s.io": false}, "agent_sandbox": false}' >/dev/null
	run "$SANDBOX_MCP" --check
	printf '%s\n' "$output"
	control '{}' >/dev/null
	[ "$status" -eq 0 ]
	[[ "$output" =~ version\ +v1\.[0-9]+\.[0-9]+[^$'\n']*\(GET\ /version:\ HTTP\ 200,\ [0-9]+\ ms\) ]]
	[[ "$output" == *"permissions 9 of 10 allowed in namespace $NS"*"DENIED: list networkpolicies"* ]]
	[[ "$output" == *"NetworkPolicies served"*"the network plugin's"* ]]
	[[ "$output" == *"agent-sandbox CRDs not installed"* ]]
	[[ "$output" =~ test\ pod\ +policy\ [0-9]+\ ms,\ pod\ created\ [0-9]+\ ms,\ running\ [0-9]+\ ms,\ attached\ [0-9]+\ ms,\ agent\ written\ [0-9]+\ ms,\ agent\ ready\ [0-9]+\ ms ]]
	[ "$(pods)" = "[]" ]
	[ "$(netpols)" = "[]" ]
}
