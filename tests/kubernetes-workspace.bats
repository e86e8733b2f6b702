# The kubernetes backend's --workspace: a PersistentVolumeClaim of the namespace (made when it is
# not there, never deleted by the server), mounted at /workspace in place of the emptyDir, kept
# across an idle removal and a server restart, emptied by cleanup_sandbox; against the project's
# test server (tests/kubernetes/server.py), whose claims' volumes are folders of its own.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-7d41be09"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kw
	control '{"clear_log": true}' >/dev/null
	PVC="/api/v1/namespaces/$NS/persistentvolumeclaims"
}

@test "on kubernetes --workspace names a PersistentVolumeClaim: a path or a name that is not DNS-1123 is refused, and so is a warm pool" {
	for w in /tmp/ws Bad_Name 'a/b' '-x'; do
		run -2 "$SANDBOX_MCP" --workspace "$w" </dev/null
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == *"on kubernetes --workspace names a PersistentVolumeClaim"* ]]
	done
	run -2 "$SANDBOX_MCP" --workspace ws --kube-warm-pool pool </dev/null
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"--workspace cannot be used with --kube-warm-pool"* ]]
	# auto, where kubernetes is what auto tries: the same.
	SANDBOX_BACKEND=auto run -2 "$SANDBOX_MCP" --workspace /tmp/ws </dev/null
	[[ "$output" == *"on kubernetes --workspace names a PersistentVolumeClaim"* ]]
	# Another backend keeps the host folder's rule.
	SANDBOX_BACKEND=local run -2 "$SANDBOX_MCP" --workspace ws </dev/null
	[[ "$output" == *"--workspace must be an absolute path"* ]]
}

@test "the claim is made once with its spec, the pod mounts it with fsGroup, files stay across an idle removal and a restart, cleanup_sandbox empties it and keeps it" {
	mcp_session --workspace ws1 --workspace-size 64M --idle-timeout 1 <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo kept > a.txt; mkdir -p d; echo deep > d/b.txt; id -u; stat -c %g ."}')
		{"wait": 1}
		{"until": "grep -q 'removed after' '$SERVER_LOG'"}
		$(call_json 2 execute_bash_commands '{"code": "cat a.txt d/b.txt"}')
	EOF
	jqe "$(response 1)" '.result.structuredContent.exit_code == 0'
	uid=$(jq -r '.result.structuredContent.stdout' <<<"$(response 1)" | head -1)
	[ "$(jq -r '.result.structuredContent.stdout' <<<"$(response 1)" | sed -n 2p)" = "$uid" ]
	r2=$(response 2)
	jqe "$r2" '.result.structuredContent | .exit_code == 0 and .stdout == "kept\ndeep\n" and (.notice | test("same --workspace claim"))'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r2")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$(response 1)")" ]
	grep -q "removed after" "$SERVER_LOG"
	# Made once, as asked: ReadWriteOnce, the size, our labels but not the reaped one.
	log=$(control '{}')
	jqe "$log" "[.requests[] | select(.method == \"POST\" and (.path | endswith(\"/namespaces/$NS/persistentvolumeclaims\")))] | length == 1"
	claim=$(k GET "$PVC/ws1")
	jqe "$claim" '.spec.accessModes == ["ReadWriteOnce"] and .spec.resources.requests.storage == "67108864" and .status.phase == "Bound"'
	jqe "$claim" '.metadata.labels["app.kubernetes.io/managed-by"] == "sandbox-mcp" and (.metadata.labels | has("sandbox-mcp") | not)'
	# A restart: the claim is there, used as it is, the files seen.
	mcp_session --workspace ws1 <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "cat a.txt"}')
		{"wait": 1}
		$(call_json 2 cleanup_sandbox '{}')
		{"wait": 2}
		$(call_json 3 execute_bash_commands '{"code": "ls -A | wc -l"}')
	EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "kept\n"'
	jqe "$(response 2)" '.result.isError != true'
	jqe "$(response 3)" '.result.structuredContent.stdout == "0\n"'
	jqe "$(control '{}')" "[.requests[] | select(.method == \"POST\" and (.path | endswith(\"/persistentvolumeclaims\")))] | length == 1"
	# Nothing of ours is left but the claim, which no shutdown deletes.
	[ "$(pods)" = "[]" ]
	[ "$(names "$PVC")" = '["ws1"]' ]
	jqe "$(control '{}')" "[.requests[] | select(.method == \"DELETE\" and (.path | contains(\"persistentvolumeclaims\")))] | length == 0"
}

@test "the pod mounts the claim in place of the emptyDir, with fsGroup and OnRootMismatch, and --check says the claim" {
	mcp_session --workspace ws2 <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo x > f"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -H 'Authorization: Bearer $K8S_TOKEN' $URL/api/v1/namespaces/$NS/pods > $BATS_TEST_TMPDIR/pods"}
	EOF
	pod=$(jq -c '.items[0]' "$BATS_TEST_TMPDIR/pods")
	jqe "$pod" '[.spec.volumes[] | select(.name == "workspace")][0] == {"name": "workspace", "persistentVolumeClaim": {"claimName": "ws2"}}'
	jqe "$pod" '.spec.securityContext | .fsGroup == .runAsUser and .fsGroupChangePolicy == "OnRootMismatch"'
	run "$SANDBOX_MCP" --check --workspace ws2 </dev/null
	[[ "$output" == *"workspace claim ws2: exists, bound, capacity 1073741824"* ]]
	[[ "$output" == *"permissions 12 of 12 allowed"* ]]
}

@test "a claim gone as the pod is made: the call fails at once with the scheduler's message, the server serves on" {
	control '{"pvc_gone_on_pod": true}' >/dev/null
	start=$(date +%s)
	mcp_session --workspace ws3 <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo hi"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null"}
		$(call_json 2 execute_bash_commands '{"code": "echo again"}')
	EOF
	jqe "$(response 1)" '.result.isError == true and (.result.content[0].text | test("persistentvolumeclaim \"ws3\" not found"))'
	jqe "$(response 2)" '.result.structuredContent.stdout == "again\n"'
	[ $(($(date +%s) - start)) -lt 40 ]
	[ "$(pods)" = "[]" ]
}

@test "attacks through the kept workspace: a symlink, a set-id file, a FIFO and a full volume harm neither the next pod nor the server" {
	mcp_session --workspace ws4 --workspace-size 16M <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "ln -s /etc/passwd link; ln -s / root; cp /bin/sh suid; chmod 6755 suid; mkfifo fifo; mkdir -p locked/in; touch locked/in/f; chmod 000 locked; head -c 40M /dev/zero > big; echo rc=$?; rm -f big"}')
	EOF
	jqe "$(response 1)" '.result.structuredContent.stdout | test("rc=[1-9]")'
	# The next server: its pod starts (nothing followed or opened), the set-id file runs as the
	# sandbox user, and the workspace's resources list the links as links, read nothing through them.
	mcp_session --workspace ws4 <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "./suid -c \"id -u; id -g\"; id -u; ls -l link | cut -c1; [ -p fifo ] && echo fifo"}')
		{"wait": 1}
		{"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "sandbox://workspace/link"}}
		{"wait": 2}
		{"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "sandbox://workspace/fifo"}}
		{"wait": 3}
		$(call_json 4 cleanup_sandbox '{}')
		{"wait": 4}
		$(call_json 5 execute_bash_commands '{"code": "ls -A | wc -l; ls /usr/bin/env"}')
	EOF
	out=$(jq -r '.result.structuredContent.stdout' <<<"$(response 1)")
	uid=$(sed -n 3p <<<"$out")
	[ "$(sed -n 1p <<<"$out")" = "$uid" ]
	[ "$uid" != 0 ]
	[ "$(sed -n 4p <<<"$out")" = l ]
	[ "$(sed -n 5p <<<"$out")" = fifo ]
	jqe "$(response 2)" '.error.message | test("symlink")'
	jqe "$(response 3)" '.error.message | test("not a regular file")'
	# cleanup_sandbox empties it all, the locked folder too, following neither link.
	jqe "$(response 4)" '.result.isError != true'
	jqe "$(response 5)" '.result.structuredContent.stdout == "0\n/usr/bin/env\n"'
	[ "$(pods)" = "[]" ]
}
