# The kubernetes backend against a lying or stalled API server (the project's test server,
# tests/kubernetes/server.py, with its fault knobs): what the server sends is bounded, a stream
# that stalls does not hold the server past a call's time, and the next call gets a new pod.
load lib/helpers
load lib/kubernetes
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-0c9e4a17"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup ka
}

# The call can end only by its timeout's kill, which the stalled server never passes on: it
# ends in its time, whether or not the pings have filled the stream by then (a loaded machine
# floods slowly, and output may still come through).
@test "an API server that stops reading the attached stream and floods it with pings: the call ends in its time, the next gets a new pod" {
	control '{"attach_flood": "FLOOD-NOW"}' >/dev/null
	start=$(date +%s)
	SESSION_TIMEOUT=50 mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo warm"}')
		{"wait": 1}
		$(call_json 2 execute_bash_commands '{"code": "echo FLOOD-NOW; sleep 10; echo done", "timeout_s": 3}')
		{"wait": 2}
		$(call_json 3 execute_bash_commands '{"code": "echo after", "timeout_s": 5}')
	EOF
	took=$(($(date +%s) - start))
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "warm\n"'
	r=$(response 2)
	jqe "$r" '.result.structuredContent | .exit_code != 0 and (.error | test("did not stop the call"))'
	r3=$(response 3)
	jqe "$r3" '.result.structuredContent.stdout == "after\n"'
	[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	[ "$took" -lt 45 ]
	control '{}' >/dev/null
	[ "$(pods)" = "[]" ]
}

# flood_session MODE: with the test server's exec_flood MODE, a call that fails (response 1),
# then, the flood ended, one that runs (response 2).
flood_session() {
	control "{\"exec_flood\": $1}" >/dev/null
	SESSION_TIMEOUT=80 mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo one"}')
		{"wait": 1}
		{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null"}
		$(call_json 2 execute_bash_commands '{"code": "echo two"}')
	EOF
}

@test "an API server that floods the agent's upload with pings and reads none of it: the call fails in the upload's time, the server serves on" {
	start=$(date +%s)
	flood_session true
	took=$(($(date +%s) - start))
	jqe "$(response 1)" '.result.structuredContent | .exit_code != 0 and (.error | test("writing /.*(took over|in time)"))'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .stdout == "two\n"'
	[ "$took" -lt 60 ]
	[ "$(pods)" = "[]" ]
}

# The same flood once the upload is taken whole: the pongs it asks for are what the server
# stops taking, and the call's error names the step as well.
@test "an API server that takes the agent's upload, then floods pings and reads nothing more: the call fails naming the upload, the server serves on" {
	flood_session '"after_stdin"'
	jqe "$(response 1)" '.result.structuredContent | .exit_code != 0 and (.error | test("writing /.* in the pod: the API server took no more of the stream.s bytes in time"))'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .stdout == "two\n"'
	[ "$(pods)" = "[]" ]
}

@test "an API server that sends a frame too large, a masked frame, a fragmented control frame, a reserved opcode: each call ends at once saying so, the next gets a new pod" {
	# 2^62 bytes announced; 16 MiB + 1 announced; a masked binary frame; a ping not final; opcode 3.
	for hex in 827f4000000000000000 827f0000000001000001 8285010203040000000000 090161 8301ff; do
		control "{\"attach_raw\": {\"on\": \"RAW-NOW\", \"hex\": \"$hex\"}}" >/dev/null
		mcp_session <<-EOF
			$INIT
			$INITIALIZED
			$(call_json 1 execute_bash_commands '{"code": "echo one"}')
			{"wait": 1}
			$(call_json 2 execute_bash_commands '{"code": "echo RAW-NOW; sleep 20", "timeout_s": 30}')
			{"wait": 2}
			{"sh": "curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null"}
			$(call_json 3 execute_bash_commands '{"code": "echo three"}')
		EOF
		r=$(response 2)
		jqe "$r" '.result.structuredContent.exit_code != 0'
		jqe "$r" '.result.structuredContent.error | test("stopped unexpectedly")'
		grep -q "lost the agent of pod .*the API server broke the WebSocket protocol" "$SERVER_LOG"
		r3=$(response 3)
		jqe "$r3" '.result.structuredContent.stdout == "three\n"'
		[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
	done
	[ "$(pods)" = "[]" ]
}

@test "sandboxes made and removed in a row leave the server no more descriptors, threads or helpers than one did" {
	count='p=$(pgrep -P $PPID -x sandbox-mcp | head -1); echo $(ls /proc/$p/fd | wc -l) $(ls /proc/$p/task | wc -l) $(pgrep -P $p | wc -l)'
	steps=""
	for i in 2 3 4 5 6; do
		steps+="$(call_json $((i + 10)) cleanup_sandbox '{}')"$'\n'"{\"wait\": $((i + 10))}"$'\n'
		steps+="$(call_json "$i" execute_bash_commands '{"code": "echo x"}')"$'\n'"{\"wait\": $i}"$'\n'
	done
	mcp_session <<-EOF
		$INIT
		$INITIALIZED
		$(call_json 1 execute_bash_commands '{"code": "echo x"}')
		{"wait": 1}
		{"sh": "$count > $BATS_TEST_TMPDIR/before"}
		$steps
		{"sh": "$count > $BATS_TEST_TMPDIR/after"}
	EOF
	for i in 1 2 3 4 5 6; do jqe "$(response "$i")" '.result.structuredContent.stdout == "x\n"'; done
	read -r fd0 th0 ch0 <"$BATS_TEST_TMPDIR/before"
	read -r fd1 th1 ch1 <"$BATS_TEST_TMPDIR/after"
	echo "fds $fd0 -> $fd1, threads $th0 -> $th1, children $ch0 -> $ch1"
	[ "$fd0" -gt 3 ]
	[ "$fd1" -le "$fd0" ]
	[ "$th1" -le "$th0" ]
	[ "$ch1" -le "$ch0" ]
	[ "$(pods)" = "[]" ]
}
