# Many kubernetes sandboxes made and removed in a row, on the project's test API server
# (tests/kubernetes/server.py): nothing is left on it, and neither sandbox-mcp nor the API
# server grows in descriptors or threads.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-91b7e0d4"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup km
}

@test "30 sandboxes (100 take about 100 s on this loaded machine, 50 on the sanitizer build about 115 s) claimed from a warm pool, made and removed in a row: no pod, policy or claim left, no descriptor or thread more in either server" {
	control '{"start_ms": 0}' >/dev/null
	tpl=$(jq -c '.metadata.name = "many"' "$BATS_TEST_DIRNAME/kubernetes/sandbox-template.json")
	k POST "$EXT/sandboxtemplates" "$tpl" >/dev/null
	k POST "$EXT/sandboxwarmpools" '{"apiVersion": "extensions.agents.x-k8s.io/v1alpha1", "kind": "SandboxWarmPool", "metadata": {"name": "many"}, "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "many"}}}' >/dev/null
	api=$(cat "$BATS_FILE_TMPDIR/server.pid")
	count='p=$(pgrep -P $PPID -x sandbox-mcp | head -1); echo $(ls /proc/$p/fd | wc -l) $(ls /proc/$p/task | wc -l) $(pgrep -P $p | wc -l)'
	steps=""
	for i in $(seq 2 30); do
		steps+="$(call_json $((i + 1000)) cleanup_sandbox '{}')"$'\n'"{\"wait\": $((i + 1000))}"$'\n'
		steps+="$(call_json "$i" execute_bash_commands '{"code": "echo x"}')"$'\n'"{\"wait\": $i}"$'\n'
	done
	start=$(date +%s)
	SANDBOX_KUBE_WARM_POOL=many mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo x"}')
		{"wait": 1}
		{"sh": "$count > $BATS_TEST_TMPDIR/before; echo \$(ls /proc/$api/fd | wc -l) \$(ls /proc/$api/task | wc -l) > $BATS_TEST_TMPDIR/api-before"}
		$steps
		{"sh": "$count > $BATS_TEST_TMPDIR/after"}
	EOF
	echo "30 sandboxes in $(($(date +%s) - start)) s"
	for i in $(seq 1 30); do jqe "$(response "$i")" '.result.structuredContent.stdout == "x\n"'; done
	# 30 claims were made, each of a warm pod.
	jqe "$(control '{}')" "[.requests[] | select(.method == \"POST\" and (.path | endswith(\"$NS/sandboxclaims\")))] | length >= 30"
	read -r fd0 th0 ch0 <"$BATS_TEST_TMPDIR/before"
	read -r fd1 th1 ch1 <"$BATS_TEST_TMPDIR/after"
	echo "sandbox-mcp: fds $fd0 -> $fd1, threads $th0 -> $th1, children $ch0 -> $ch1"
	[ "$fd0" -gt 3 ]
	[ "$fd1" -le "$fd0" ]
	[ "$th1" -le "$th0" ]
	[ "$ch1" -le "$ch0" ]
	# Nothing of the sandboxes is left; the pool's own go with it.
	[ "$(names "$EXT/sandboxclaims")" = "[]" ]
	[ "$(names "/apis/networking.k8s.io/v1/namespaces/$NS/networkpolicies")" = "[]" ]
	k DELETE "$EXT/sandboxwarmpools/many" >/dev/null
	for _ in $(seq 100); do [ "$(names "/api/v1/namespaces/$NS/pods")" = "[]" ] && break; sleep 0.1; done
	[ "$(names "/api/v1/namespaces/$NS/pods")" = "[]" ]
	[ "$(names "/apis/agents.x-k8s.io/v1alpha1/namespaces/$NS/sandboxes")" = "[]" ]
	# The API server's descriptors and threads (its pods' and streams' end in their time).
	read -r afd0 ath0 <"$BATS_TEST_TMPDIR/api-before"
	for _ in $(seq 100); do
		afd1=$(ls "/proc/$api/fd" | wc -l) ath1=$(ls "/proc/$api/task" | wc -l)
		[ "$afd1" -le "$afd0" ] && [ "$ath1" -le "$ath0" ] && break
		sleep 0.1
	done
	echo "API server: fds $afd0 -> $afd1, threads $ath0 -> $ath1"
	[ "$afd1" -le "$afd0" ]
	[ "$ath1" -le "$ath0" ]
}
