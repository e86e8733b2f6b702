# The kubernetes backend claiming its sandboxes from an agent-sandbox SandboxWarmPool
# (--kube-warm-pool) on the project's test server (tests/kubernetes/server.py, which implements
# the CRDs): a claimed pod is the cluster's, so it is checked hardened as ours before use; then
# it is used as a cold one; the claim goes with the sandbox; without the CRDs, plain pods.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-3f6a1c52"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kw
	control '{"clear_log": true}' >/dev/null
}

# warm_pool NAME [JQ]: a SandboxTemplate NAME (tests/kubernetes/sandbox-template.json, changed
# by JQ) and a SandboxWarmPool NAME of two of it; waits until both are ready.
warm_pool() {
	k POST "$EXT/sandboxtemplates" "$(jq -c "${2:-.} | .metadata.name = \"$1\"" "$BATS_TEST_DIRNAME/kubernetes/sandbox-template.json")" >/dev/null
	k POST "$EXT/sandboxwarmpools" "{\"apiVersion\": \"extensions.agents.x-k8s.io/v1alpha1\", \"kind\": \"SandboxWarmPool\", \"metadata\": {\"name\": \"$1\"}, \"spec\": {\"replicas\": 2, \"sandboxTemplateRef\": {\"name\": \"$1\"}}}" >/dev/null
	for _ in $(seq 100); do
		k GET "$EXT/sandboxwarmpools/$1" | jq -e '.status.readyReplicas == 2' >/dev/null && return 0
		sleep 0.1
	done
	false
}

claims() {
	k GET "$EXT/sandboxclaims" | jq -c '[.items[].metadata.name]'
}

netpols() {
	k GET "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" | jq -c '[.items[].metadata.name]'
}

# live_pods: the pods of this test's namespace not being deleted.
live_pods() {
	k GET "/api/v1/namespaces/$NS/pods" | jq -c '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name]'
}

# reqs LOG POD: the requests of LOG on objects of this test's namespace, but the start's reaping
# (its lists by label and the gone server's claim "dead" deleted), as "METHOD PATH", POD for pod.
reqs() {
	jq -c --arg ns "/namespaces/$NS/" --arg pod "$2" '[.requests[] | select((.path | contains($ns)) and ((.query // "") | test("labelSelector") | not) and (.path | endswith("/dead") | not))
		| "\(.method) \(.path | sub(".*/namespaces/[^/]+/"; "") | sub($pod; "POD"))"]' "$1"
}

@test "a warm pool: each sandbox is claimed from it and its pod used as a cold one, in 4 API requests once the server's pool policy is made; cleanup, shutdown and reaping delete the claims and the policy" {
	warm_pool pool
	# A claim of a server of this host that is gone: reaped at start.
	k POST "$EXT/sandboxclaims" "$(jq -cn --arg host "$(hostname | cut -c1-60).$(readlink /proc/self/ns/pid | tr -dc 0-9)" \
		'{apiVersion: "extensions.agents.x-k8s.io/v1alpha1", kind: "SandboxClaim", metadata: {name: "dead", labels: {"sandbox-mcp": "1", "sandbox-mcp.pid": "999999", "sandbox-mcp.starttime": "1", "sandbox-mcp.host": $host}},
		  spec: {sandboxTemplateRef: {name: "pool"}, warmpool: "pool"}}')" >/dev/null
	[ "$(claims)" = '["dead"]' ]
	export SANDBOX_KUBE_WARM_POOL=pool
	control '{"clear_log": true}' >/dev/null
	get="curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL"
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "id -u; pwd; grep -E \"^(CapEff|NoNewPrivs)\" /proc/self/status; touch /x 2>&1; cat /proc/1/cmdline | tr \"\\\\0\" \" \""}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control > $BATS_TEST_TMPDIR/log1"}
		{"sh": "$get$EXT/sandboxclaims > $BATS_TEST_TMPDIR/claims1; $get/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies > $BATS_TEST_TMPDIR/pols1"}
		$(call_json 2 cleanup_sandbox '{}')
		{"wait": 2}
		{"sh": "$get$EXT/sandboxclaims > $BATS_TEST_TMPDIR/claims2"}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{\"clear_log\": true}' $URL/_control > /dev/null"}
		$(call_json 3 execute_bash_commands '{"code": "echo again"}')
		{"wait": 3}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control > $BATS_TEST_TMPDIR/log3"}
		$(call_json 4 cleanup_sandbox '{}')
		{"wait": 4}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{\"clear_log\": true}' $URL/_control > /dev/null"}
		$(call_json 5 execute_bash_commands '{"code": "echo third"}')
		{"wait": 5}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control > $BATS_TEST_TMPDIR/log5"}
	EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent | .exit_code == 0 and (.stdout | startswith("65534\n/workspace\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"))'
	jqe "$r" '.result.structuredContent.stdout | test("Read-only file system") and test("sandbox-agent --stdio")'
	jqe "$(response 3)" '.result.structuredContent.stdout == "again\n"'
	jqe "$(response 5)" '.result.structuredContent.stdout == "third\n"'
	# One claim, ours, naming the pool; the gone server's reaped; its pod is the pool's.
	claim=$(jq -c '.items[]' "$BATS_TEST_TMPDIR/claims1")
	jqe "$(jq -s length <<<"$claim")" '. == 1'
	jqe "$claim" '.metadata.labels["sandbox-mcp"] == "1" and .spec.warmpool == "pool" and .spec.sandboxTemplateRef.name == "pool"'
	pod=$(jq -r .status.sandbox.name <<<"$claim")
	[[ "$pod" == pool-* ]]
	# The server's one policy: the pool's pods, by their template's label (FNV-1a of "pool").
	jqe "$(cat "$BATS_TEST_TMPDIR/pols1")" '[.items[] | select(.spec.podSelector.matchLabels["agents.x-k8s.io/sandbox-template-ref-hash"] == "91dd7983"
		and .spec.podSelector.matchExpressions == [{"key": "sandbox-mcp", "operator": "DoesNotExist"}] and .spec.policyTypes == ["Egress"]
		and .spec.egress == null and .metadata.labels["sandbox-mcp"] == "1")] | length == 1'
	jqe "$(cat "$BATS_TEST_TMPDIR/pols1")" '.items | length == 1'
	# What a sandbox cost: the first, the start's pool read and policy (before any sandbox),
	# then 4; each after, 4: the claim, its pod read, the attach and the exec.
	first=$(reqs "$BATS_TEST_TMPDIR/log1" "$pod")
	echo "the first sandbox from the warm pool, with the server's start: $first"
	jqe "$first" '. == ["GET sandboxwarmpools/pool", "POST networkpolicies", "POST sandboxclaims", "GET pods/POD", "GET pods/POD/attach", "GET pods/POD/exec"]'
	for log in log3 log5; do
		p=$(jq -r '[.requests[] | select(.path | test("/pods/[^/]+/attach$")) | .path | sub(".*/pods/"; "") | sub("/attach"; "")][0]' "$BATS_TEST_TMPDIR/$log")
		steady=$(reqs "$BATS_TEST_TMPDIR/$log" "$p")
		echo "a later sandbox from the warm pool: $(jq length <<<"$steady") API requests: $steady"
		jqe "$steady" '. == ["POST sandboxclaims", "GET pods/POD", "GET pods/POD/attach", "GET pods/POD/exec"]'
		jqe "$steady" 'length <= 4'
	done
	# No pod of ours was made: the pool's was used.
	jqe "$(cat "$BATS_TEST_TMPDIR/log1" "$BATS_TEST_TMPDIR/log3" | jq -s '[.[].requests[]]')" '[.[] | select(.method == "POST" and (.path | endswith("/pods")))] == []'
	# cleanup_sandbox deleted the claim, and its pod with it; shutdown the last, and the policy.
	first=$(jq -r .metadata.name <<<"$claim")
	jqe "$(cat "$BATS_TEST_TMPDIR/claims2")" "[.items[].metadata.name] | index(\"$first\") == null"
	[ "$(claims)" = "[]" ]
	[ "$(netpols)" = "[]" ]
	jqe "$(live_pods)" "index(\"$pod\") == null"
}

@test "a warm pool: the server's policy for its pods is there before any claimed pod is attached, and a policy of a server that is gone is reaped" {
	warm_pool pool
	k POST "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies" "$(jq -cn --arg host "$(hostname | cut -c1-60).$(readlink /proc/self/ns/pid | tr -dc 0-9)" \
		'{apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: {name: "sandbox-mcp-pool-dead", labels: {"sandbox-mcp": "1", "sandbox-mcp.pid": "999999", "sandbox-mcp.starttime": "1", "sandbox-mcp.host": $host, "sandbox-mcp.sandbox": "pool"}},
		  spec: {podSelector: {matchLabels: {"agents.x-k8s.io/sandbox-template-ref-hash": "91dd7983"}}, policyTypes: ["Egress"]}}')" >/dev/null
	control '{"clear_log": true}' >/dev/null
	SANDBOX_KUBE_WARM_POOL=pool mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo ok"}')
		{"wait": 1}
	EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "ok\n"'
	log=$(control '{}')
	# In the log's order: the old policy deleted, ours made (201), then the claim, then the attach.
	jqe "$log" "[.requests[] | select(.path | contains(\"/namespaces/$NS/\"))] | (map(.method == \"POST\" and (.path | endswith(\"/networkpolicies\"))) | index(true)) as \$pol
		| (map(.path | test(\"/attach\$\")) | index(true)) as \$att | (map(.method == \"POST\" and (.path | endswith(\"/sandboxclaims\"))) | index(true)) as \$cl
		| (map(.method == \"DELETE\" and (.path | endswith(\"/sandbox-mcp-pool-dead\"))) | index(true)) as \$dead
		| \$pol != null and \$att != null and \$cl != null and \$dead != null and \$dead < \$pol and \$pol < \$cl and \$cl < \$att"
	jqe "$log" "[.requests[] | select(.method == \"POST\" and (.path | endswith(\"/namespaces/$NS/networkpolicies\")))] | length == 1"
	[ "$(netpols)" = "[]" ]
	[ "$(claims)" = "[]" ]
}

# refused_claim POOL: one call on a sandbox claimed from POOL, which is refused: it ran nothing.
# $r: its response; $err: its error.
refused_claim() {
	SANDBOX_KUBE_WARM_POOL=$1 mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo ran"}')
		{"wait": 1}
	EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent | .exit_code != 0 and (.stdout // "" | test("ran") | not)'
	err=$(jq -r .result.structuredContent.error <<<"$r")
	echo "$err"
}

@test "a warm pool whose pods lack the label its policy selects them by: refused, the claim deleted, nothing run in them" {
	control '{"template_hash_label": false}' >/dev/null
	warm_pool old
	control '{"template_hash_label": true, "clear_log": true}' >/dev/null
	refused_claim old
	[[ "$err" == *"refused the sandbox claimed from the warm pool old"*"the label agents.x-k8s.io/sandbox-template-ref-hash="*"of the pool's template"* ]]
	[[ "$err" != *"runAsNonRoot"* ]]
	jqe "$(control '{}')" "[.requests[] | select(.path | test(\"/namespaces/$NS/pods/.*/(exec|attach)\$\"))] == []"
	[ "$(claims)" = "[]" ]
	[ "$(netpols)" = "[]" ]
}

@test "a warm pool whose pods are not hardened as ours, or do not run the agent's starter: refused, naming what they lack; the claim deleted, nothing run in them" {
	warm_pool weak '.spec.podTemplate.spec.automountServiceAccountToken = true
		| .spec.podTemplate.spec.securityContext |= (.runAsNonRoot = false | .runAsUser = 0)
		| .spec.podTemplate.spec.containers[0].securityContext |= (.runAsNonRoot = false | .runAsUser = 0 | .allowPrivilegeEscalation = true | .readOnlyRootFilesystem = false | .capabilities = {"drop": ["NET_RAW"], "add": ["SYS_ADMIN"]} | .appArmorProfile = {"type": "Unconfined"})
		| del(.spec.podTemplate.spec.containers[0].resources)'
	warm_pool other '.spec.podTemplate.spec.containers[0].command = ["sh", "-c", "exec sleep infinity"]'
	control '{"clear_log": true}' >/dev/null
	refused_claim weak
	for need in "refused the sandbox claimed from the warm pool weak" "runAsNonRoot" "a runAsUser not 0" \
		"no privilege escalation" "every capability dropped" "a read-only root" "no service account token" \
		"no unconfined AppArmor" "a memory limit"; do
		[[ "$err" == *"$need"* ]] || { echo "missing: $need"; false; }
	done
	[[ "$err" != *"starter"* ]]
	SANDBOX_KUBE_WARM_POOL=other mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo ran"}')
		{"wait": 1}
	EOF
	err=$(jq -r .result.structuredContent.error <<<"$(response 1)")
	echo "$err"
	[[ "$err" == *"refused the sandbox claimed from the warm pool other"*"the agent's starter as its command"* ]]
	[[ "$err" != *"runAsNonRoot"* ]]
	# Nothing was attached to or run in a refused pod; the claims and policies are gone.
	jqe "$(control '{}')" "[.requests[] | select(.path | test(\"/namespaces/$NS/pods/.*/(exec|attach)\$\"))] == []"
	[ "$(claims)" = "[]" ]
	[ "$(netpols)" = "[]" ]
}

@test "a warm pool named where the agent-sandbox CRDs are not served: pods made here; a pool that is not there: the call says so" {
	control '{"agent_sandbox": false}' >/dev/null
	SANDBOX_KUBE_WARM_POOL=pool mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo cold"}')
		{"wait": 1}
	EOF
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "cold\n"'
	log=$(control '{}')
	jqe "$log" "[.requests[] | select(.method == \"POST\" and (.path | endswith(\"/namespaces/$NS/pods\")))] | length == 1"
	grep -q "the agent-sandbox CRDs are not installed: a pod made here" "$SERVER_LOG"
	SANDBOX_KUBE_WARM_POOL=nosuch mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo x"}')
		{"wait": 1}
	EOF
	jqe "$(response 1)" '.result.structuredContent | .exit_code != 0 and (.error | test("the warm pool nosuch \\(--kube-warm-pool\\) is not in namespace"))'
	[ "$(live_pods)" = "[]" ]
	[ "$(claims)" = "[]" ]
}

@test "--check with a warm pool: the pool's permissions, the CRDs used, the claimed test pod's steps timed, its claim deleted" {
	warm_pool pool
	control '{"access": {"get sandboxclaims.extensions.agents.x-k8s.io": false}}' >/dev/null
	run env SANDBOX_KUBE_WARM_POOL=pool "$SANDBOX_MCP" --check
	printf '%s\n' "$output"
	control '{}' >/dev/null
	[[ "$output" == *"permissions 13 of 14 allowed in namespace $NS"*"DENIED: get sandboxclaims"* ]]
	[[ "$output" == *"agent-sandbox CRDs installed"*"sandboxes claimed from the warm pool pool"* ]]
	[[ "$output" =~ test\ pod\ +pool\ read\ and\ its\ policy\ [0-9]+\ ms,\ claimed\ [0-9]+\ ms,\ checked\ and\ running\ [0-9]+\ ms,\ attached\ [0-9]+\ ms,\ agent\ written\ [0-9]+\ ms,\ agent\ ready\ [0-9]+\ ms ]]
	[[ "$output" == *"warm pool   pool: each claimed pod is checked hardened"* ]]
	[ "$(claims)" = "[]" ]
	[ "$(netpols)" = "[]" ]
}

@test "a claim its controller binds later: read again until it names its Sandbox, then used" {
	warm_pool pool
	control '{"claim_bind_ms": 700}' >/dev/null
	SANDBOX_KUBE_WARM_POOL=pool mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo bound"}')
		{"wait": 1}
	EOF
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "bound\n"'
	jqe "$(control '{}')" "[.requests[] | select(.method == \"GET\" and (.path | test(\"/namespaces/$NS/sandboxclaims/sandbox-mcp-\")))] | length >= 2"
	[ "$(claims)" = "[]" ]
}
