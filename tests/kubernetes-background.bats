# Background processes and Python sessions on the kubernetes backend: the channel to the agent
# rides in band on the pod's one attached stream (agent/proto.h's AG_MUX), so the same scenarios
# as on local and Docker give the same results; both streams at full volume at once lose nothing
# and wait on nothing; a stream that breaks the chunks' format, or is cut, ends the sandbox with
# a clear error, and the server serves on.
load lib/helpers
load lib/kubernetes
load lib/background
load lib/session
bats_require_minimum_version 1.5.0

K8S_TOKEN="k8s-token-3f6a9e12"

setup_file() { k8s_setup_file; }
teardown_file() { k8s_teardown_file; }

setup() {
	k8s_setup kbg
}

@test "kubernetes: a background process's output so far, then only what is new; input, close_input, the exit code" {
	life
	[ "$(pods)" = "[]" ]
}

@test "kubernetes: the process tool is answered at once while a long call runs, and calls still run one at a time" {
	answered_while_a_call_runs
}

@test "kubernetes: a Python session keeps names, imports and objects; the last expression is the value" {
	cells
}

@test "kubernetes: both streams at full volume at once: a call printing 20 MB while a background process is read and fed" {
	local fed
	fed=$(head -c 60000 /dev/zero | tr '\0' f)
	# The background process writes its 30 MB once the call has begun, and the call ends only
	# once that process has taken all it was fed: both streams carry MBs at the same time.
	SESSION_TIMEOUT=300 session_of \
		"$(bg 1 'until [ -e go ]; do sleep 0.05; done; yes abcdefghij | head -c 30000000; cat > fed.bin; wc -c < fed.bin > fed.count')" \
		'{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "touch go; yes 0123456789 | head -c 30000000 | wc -c; head -c 20000000 /dev/zero | tr \"\\0\" z; echo; until [ -e fed.count ]; do sleep 0.05; done; echo done-2", "timeout_s": 240}')" \
		"$(until_running 'done-2')" \
		"$(proc 3 '{"process_id": "bg-1", "wait_s": 3}')" '{"wait": 3}' \
		"$(proc 4 "$(jq -cn --arg i "$fed" '{process_id: "bg-1", input: $i, close_input: true, wait_s: 60}')")" '{"wait": 4}' \
		'{"wait": 2}' \
		"$(call_json 5 execute_bash_commands '{"code": "cat fed.count; wc -c < fed.bin"}')"
	res 3
	sc '.running == true and (.stdout | startswith("abcdefghij\nabcdefghij\n"))'
	res 4
	sc '.input_written == 60000'
	res 2
	sc '.exit_code == 0 and (.stdout | startswith("30000000\n")) and (.stdout | endswith("zzzz\ndone-2\n"))'
	res 5
	sc '.exit_code == 0 and .stdout == "60000\n60000\n"'
	# The process calls were answered while the call ran.
	[ "$(answer_order 2 3)" = "3 2" ]
}

# lying_chunk HEX: call 2 runs while the test server sends the WebSocket frame HEX on the attached
# stream; call 3 and a process call come after. $r, $r3, $p4: their responses.
lying_chunk() {
	control "{\"attach_raw\": {\"on\": \"RAW-NOW\", \"hex\": \"$1\"}}" >/dev/null
	session_of "$(bg 1 'sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo RAW-NOW; sleep 20", "timeout_s": 30}')" '{"wait": 2}' \
		"{\"sh\": \"curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null\"}" \
		"$(call_json 3 execute_bash_commands '{"code": "echo three"}')" '{"wait": 3}' \
		"$(proc 4 '{}')"
	r=$(response 2)
	r3=$(response 3)
	p4=$(response 4)
}

@test "kubernetes: a chunk of a stream that is not there, one too long, or the agent's end of the conversation: the call ends saying so, the next gets a new pod" {
	# On stdout (channel 1): stream 7, 1 byte; stream 0, 65537 bytes announced; stream 0, 0 bytes.
	for c in "820a01070000000100000041|stream broke its format" "8209010000000001000100|stream broke its format" \
		"8209010000000000000000|ended its side of the stream"; do
		: >"$SERVER_LOG"
		lying_chunk "${c%%|*}"
		jqe "$r" '.result.structuredContent | .exit_code != 0 and (.error | test("stopped unexpectedly"))'
		grep -q "lost the agent of pod .*${c#*|}" "$SERVER_LOG"
		jqe "$r3" '.result.structuredContent | .exit_code == 0 and .stdout == "three\n"'
		[ "$(jq -r .result.structuredContent.sandbox_id <<<"$r3")" != "$(jq -r .result.structuredContent.sandbox_id <<<"$r")" ]
		# The lost sandbox's background process went with it.
		jqe "$p4" '.result.structuredContent.processes | map(select(.process_id == "bg-1" and .running)) | length == 0'
	done
	[ "$(pods)" = "[]" ]
}

@test "kubernetes: the attached stream cut while a background process runs: the call says so, the process is gone, the next call gets a new pod" {
	control '{"attach_cut": "CUT-NOW"}' >/dev/null
	session_of "$(bg 1 'echo tick; sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo CUT-NOW; sleep 5", "timeout_s": 20}')" '{"wait": 2}' \
		"{\"sh\": \"curl -sS --cacert $BATS_FILE_TMPDIR/ca.crt -X POST -d '{}' $URL/_control >/dev/null\"}" \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "echo four"}')" '{"wait": 4}' \
		"$(proc 5 '{}')"
	jqe "$(response 2)" '.result.structuredContent | .exit_code != 0 and (.error | test("stopped unexpectedly"))'
	res 3
	jqe "$result" '.isError == true'
	res 4
	sc '.exit_code == 0 and .stdout == "four\n"'
	res 5
	sc '.processes | map(select(.process_id == "bg-1")) | length == 0'
	[ "$(pods)" = "[]" ]
}

@test "kubernetes: the process tool is answered while a call prints without pause" {
	# The agent's stdout never runs dry for 15 s: what the server sends (the channel's request)
	# still goes out between what comes in.
	SESSION_TIMEOUT=120 session_of "$(bg 1 'sleep 60')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "end=$((SECONDS+15)); while [ $SECONDS -lt $end ]; do yes flood-4711 | head -c 50000000; done; echo done-2", "timeout_s": 60}')" \
		"$(until_running 'flood-4711')" \
		"$(proc 3 '{"process_id": "bg-1"}')" '{"wait": 3}' \
		"$(proc 4 '{}')" '{"wait": 4}' '{"wait": 2}'
	res 3
	sc '.running == true'
	res 4
	sc '.processes | map(select(.process_id == "bg-1" and .running)) | length == 1'
	res 2
	sc '.exit_code == 0'
	[ "$(answer_order 2 3 4)" = "3 4 2" ]
}

@test "kubernetes: a process call whose answer came too late leaves no answer for the next to take as its own" {
	# The node holds the channel's request past the server's wait for its answer (10 s).
	control '{"attach_hold": {"on": "HOLD-4711", "ms": 12000}}' >/dev/null
	session_of "$(bg 1 'echo one-one; cat >/dev/null')" '{"wait": 1}' \
		"$(bg 2 'echo two; sleep 60')" '{"wait": 2}' \
		"$(proc 3 '{"process_id": "bg-1", "input": "HOLD-4711\n"}')" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-2"}')" '{"wait": 4}' \
		"$(proc 5 '{"process_id": "bg-1"}')" '{"wait": 5}'
	res 3
	jqe "$result" '.isError == true'
	# Each answer that is not an error is about the process it names (bg-1 wrote 8 bytes, bg-2 4).
	res 4
	jqe "$result" '.isError == true or .structuredContent.stdout_bytes == 4'
	res 5
	jqe "$result" '.isError == true or .structuredContent.stdout_bytes == 8'
}

@test "kubernetes: a process input of 1 MiB goes in while a call prints 40 MB" {
	local feed
	feed=$(head -c 1048576 /dev/zero | tr '\0' i | jq -cRs '{jsonrpc: "2.0", id: 3, method: "tools/call",
		params: {name: "process", arguments: {process_id: "bg-1", input: .}}}')
	SESSION_TIMEOUT=200 session_of "$(bg 1 'cat > /dev/null')" '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "for i in $(seq 40); do head -c 1000000 /dev/zero | tr \"\\0\" z; done; echo; echo in-4712", "timeout_s": 120}')" \
		"$(until_running 'in-4712')" \
		"$feed" '{"wait": 3}' \
		"$(proc 4 '{"process_id": "bg-1"}')" '{"wait": 4}' '{"wait": 2}'
	res 3
	sc '.input_written > 0 and .input_written <= 1048576'
	res 4
	sc '.running == true'
	res 2
	sc '.exit_code == 0 and (.stdout | endswith("zzz\nin-4712\n"))'
}
