# The kubernetes backend under the faults of a real cluster (the project's test server,
# tests/kubernetes/server.py, and its fault knobs): the attached stream cut mid-call, the pod
# OOM-killed, watches that end early, a slow API server: a clear error, nothing left behind, and
# the server serves on.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-7d21f3b8"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kf
}

@test "the attached stream cut during a call: that call gets a clear error, the next a new pod, the old pod is deleted" {
	control '{"attach_cut": "CUT-NOW"}' >/dev/null
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "echo CUT-NOW; sleep 5", "timeout_s": 20}')
		{"wait": 2}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null"}
		$(call_json 3 execute_bash_commands '{"code": "echo three"}')
		{"wait": 3}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods"}
	EOF
	r=$(response 2)
	jqe "$r" '.result.structuredContent | .exit_code != 0 and (.error | test("stopped unexpectedly.*the next call starts a new one"))'
	r3=$(response 3)
	jqe "$r3" '.result.structuredContent | .exit_code == 0 and .stdout == "three\n"'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	jqe "$(cat "$BATS_TEST_TMPDIR/pods")" '[.items[] | select(.metadata.deletionTimestamp == null)] | length == 1'
	[ "$(pods)" = "[]" ]
}

# lost_during_call STEP: call 2 runs in a pod that STEP (a session step, run once the pod's
# name is in $BATS_TEST_TMPDIR/pod) takes away; call 3 comes after. $r and $r3: their responses.
lost_during_call() {
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "echo started; sleep 20", "timeout_s": 30}')
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods | jq -r '.items[0].metadata.name' > $BATS_TEST_TMPDIR/pod"}
		$1
		{"wait": 2}
		$(call_json 3 execute_bash_commands '{"code": "echo three"}')
	EOF
	r=$(response 2)
	r3=$(response 3)
	echo "$r"
}

# evict_step REASON: the session step that evicts the pod named in $BATS_TEST_TMPDIR/pod with
# REASON (the test server's evict knob).
evict_step() {
	echo '{"sh": "curl -sS --cacert '"$BATS_FILE_TMPDIR"'/ca.crt -X POST -d \"{\\\"evict\\\": {\\\"namespace\\\": \\\"'"$NS"'\\\", \\\"name\\\": \\\"$(cat '"$BATS_TEST_TMPDIR"'/pod)\\\", \\\"reason\\\": \\\"'"$1"'\\\"}}\" '"$URL"'/_control >/dev/null"}'
}

@test "the pod OOM-killed during a call: that call says oom_killed (the container's terminated reason), the next gets a new pod" {
	lost_during_call "$(evict_step OOMKilled)"
	jqe "$r" '.result.structuredContent | .exit_code == 137 and .oom_killed == true and .error == null'
	jqe "$r" '.result.content[0].text | test("killed: out of memory")'
	jqe "$r3" '.result.structuredContent | .exit_code == 0 and .stdout == "three\n" and .oom_killed == false'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	[ "$(pods)" = "[]" ]
}

@test "the pod evicted during a call: that call's error says the pod's status's reason and message, the next gets a new pod" {
	lost_during_call "$(evict_step Evicted)"
	jqe "$r" '.result.structuredContent | .exit_code != 0 and .oom_killed != true
		and (.error | test("stopped unexpectedly.*the pod failed: Evicted: The node was low on resource: memory.*the next call starts a new one"))'
	jqe "$r3" '.result.structuredContent | .exit_code == 0 and .stdout == "three\n"'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	[ "$(pods)" = "[]" ]
}

@test "the pod deleted from outside during a call: that call's error says so, the next gets a new pod" {
	lost_during_call '{"sh": "curl -sS --cacert '"$BATS_FILE_TMPDIR"'/ca.crt -H '"'Authorization: Bearer $K8S_TOKEN'"' -X DELETE \"'"$URL/api/v1/namespaces/$NS"'/pods/$(cat '"$BATS_TEST_TMPDIR"'/pod)?gracePeriodSeconds=0\" >/dev/null"}'
	jqe "$r" '.result.structuredContent | .exit_code != 0 and (.error | test("stopped unexpectedly.*the pod (was|is being) deleted \\(not by this server\\).*the next call starts a new one"))'
	jqe "$r3" '.result.structuredContent | .exit_code == 0 and .stdout == "three\n"'
	[ "$(pods)" = "[]" ]
}

@test "watches that end early and a slow API server: the pod is waited for within the time, the calls run" {
	control '{"watch_end_ms": 100, "start_ms": 1200, "latency_ms": 150}' >/dev/null
	start=$(date +%s)
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "echo two"}')
	EOF
	took=$(($(date +%s) - start))
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "one\n"'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .stdout == "two\n"'
	[ "$took" -lt 30 ]
	n=$(control '{}' | jq --arg ns "/namespaces/$NS/" '[.requests[] | select((.path | contains($ns)) and (.query | test("watch=1")))] | length')
	[ "$n" -ge 2 ]
	[ "$(pods)" = "[]" ]
}
