# The Daytona backend, against the loopback Daytona test server (tests/daytona/server.py),
# which is itself checked with Daytona's official TypeScript SDK.
load lib/helpers
load lib/daytona-log
load lib/inputs
load lib/changes
bats_require_minimum_version 1.5.0

DT_KEY="dt-secret-key-5f1c9a7e"

setup_file() {
	export DAYTONA_TEST_KEY="$DT_KEY"
	DT_PORT_FILE="$BATS_FILE_TMPDIR/port"
	python3 "$BATS_TEST_DIRNAME/daytona/server.py" --port-file "$DT_PORT_FILE" 2>"$BATS_FILE_TMPDIR/daytona.log" &
	echo $! >"$BATS_FILE_TMPDIR/server.pid"
	for _ in $(seq 100); do [ -s "$DT_PORT_FILE" ] && break; sleep 0.1; done
	[ -s "$DT_PORT_FILE" ]
}

teardown_file() {
	[ -f "$BATS_FILE_TMPDIR/server.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/server.pid")" 2>/dev/null || true
}

setup() {
	common_setup
	DT_URL="http://127.0.0.1:$(cat "$BATS_FILE_TMPDIR/port")"
	DT_LOG="$BATS_FILE_TMPDIR/daytona.log"
	export DAYTONA_API_URL="$DT_URL/api" DAYTONA_API_KEY="$DT_KEY" SANDBOX_BACKEND=daytona
	unset DAYTONA_TARGET SANDBOX_DAYTONA_SNAPSHOT SANDBOX_DAYTONA_IMAGE SANDBOX_DAYTONA_START_TIMEOUT
	control '{"clear_log": true}' >/dev/null
}

# control JSON: sets the test server's failure mode (see server.py); prints its state.
control() {
	python3 - "$DT_URL/_control" "$1" <<'EOF'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST',
                             headers={'Content-Type': 'application/json'})
print(urllib.request.urlopen(req, timeout=10).read().decode())
EOF
}

# The test server's request log since the last control call, one JSON object per line.
requests() {
	control '{}' | jq -c '.requests[]'
}

# Sandboxes the test server still holds.
live_sandboxes() {
	control '{}' | jq '.sandboxes | length'
}

bash_args() {
	jq -cn --arg c "$1" --argjson t "${2:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)'
}

@test "the test server follows the API: Daytona's official TypeScript SDK creates, runs, uploads, downloads, deletes" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run "$BATS_TEST_DIRNAME/daytona/sdk-check/run"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "the npm registry is not reachable: cannot install @daytonaio/sdk"
	[ "$status" -eq 0 ]
	[[ "$output" == *"6 passed, 0 failed"* ]]
	requests | jq -se 'any(.source == "sdk-typescript-legacy" or .source == "sdk-typescript")'
}

@test "bash: stdout and stderr apart, real exit code, the SDK headers, the sandbox deleted at exit" {
	tool execute_bash_commands '{"code":"echo out; echo err >&2; exit 3"}'
	sc '.stdout == "out\n" and .stderr == "err\n" and .exit_code == 3 and .timed_out == false'
	sc '.backend == "daytona" and (.sandbox_id | test("^[0-9a-f-]{36}$")) and .error == null'
	jqe "$result" '.isError == true'
	requests | jq -se 'length > 0 and all(.source == "sandbox-mcp" and .sdk_version == "0.218.0" and (.user_agent | startswith("sandbox-mcp/")))'
	# Created with our labels, idle stop and delete, and no network for the code.
	requests | jq -se 'any(.method == "POST" and .path == "/api/sandbox")'
	grep -q 'deleted Daytona sandbox' "$SERVER_LOG"
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "the sandbox is created labelled, with auto-stop, auto-delete and the network blocked" {
	printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands '{"code":"sleep 2"}')" >"$BATS_TEST_TMPDIR/script"
	python3 "$SESSION" --stderr "$SERVER_LOG" -- "$SANDBOX_MCP" <"$BATS_TEST_TMPDIR/script" >/dev/null &
	local pid=$! state='{"sandboxes": {}}'
	# The sandbox as the server made it, read while it lives (the call holds it for 2 s).
	while kill -0 "$pid" 2>/dev/null; do
		state=$(control '{}')
		jq -e '.sandboxes | length > 0' <<<"$state" >/dev/null && break
		sleep 0.1
	done
	wait "$pid"
	jqe "$state" '[.sandboxes[]][0] | .labels["sandbox-mcp"] == "1" and (.labels["sandbox-mcp-owner"] | test(":[0-9]+:[0-9]+$"))
		and .autoDeleteInterval == 0 and .autoStopInterval >= 5 and .networkBlockAll == true'
}

@test "python runs; files persist between calls and tools; interpreter state does not" {
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_python '{"script":"import sys\nopen(\"data.txt\",\"w\").write(\"kept\")\nprint(\"héllo\", 6*7)\nprint(\"warn\", file=sys.stderr)\nx = 1"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"cat data.txt; echo; ls .sandbox"}')
{"wait": 2}
$(call_json 3 execute_python '{"script":"print(x)"}')
{"wait": 3}
$(call_json 4 cleanup_sandbox '{}')
{"wait": 4}
$(call_json 5 execute_bash_commands '{"code":"ls data.txt"}')
EOF
	jqe "$(response 1)" '.result.structuredContent | .stdout == "héllo 42\n" and .stderr == "warn\n" and .exit_code == 0'
	jqe "$(response 2)" '.result.structuredContent | .stdout == "kept\ntask.py\n"'
	jqe "$(response 3)" '.result.structuredContent | (.stderr | contains("NameError")) and .exit_code == 1'
	jqe "$(response 4)" '.result.structuredContent | .removed == true and .backend == "daytona"'
	jqe "$(response 5)" '.result.structuredContent | .exit_code != 0'
	[ "$(jq -r '.result.structuredContent.sandbox_id' <<<"$(response 1)")" != "$(jq -r '.result.structuredContent.sandbox_id' <<<"$(response 5)")" ]
}

@test "inputs: files, env and args as on the local backend; planted links and FIFOs replaced, never followed" {
	inputs_run daytona
	inputs_assert
}

@test "timeout: exit 124, output so far, and every process of the call is killed, setsid ones too" {
	marker="dt-timeout-$$-$RANDOM"
	t0=$(date +%s%N)
	# 3 s: on a loaded machine the runner's fork and bash's start took over a second, and the
	# call timed out before its first line.
	tool execute_bash_commands "$(bash_args "echo start; (sleep 300; : $marker) & setsid bash -c 'sleep 300; : $marker' & sleep 300" 3)"
	t1=$(date +%s%N)
	# The call ends at its timeout, not with its sleep: the server's own measure of the call,
	# and the whole session (the sandbox's making and removal included) far below 300 s.
	sc '.timed_out == true and .exit_code == 124 and .stdout == "start\n" and .duration_ms < 8000'
	[ $(((t1 - t0) / 1000000)) -lt 60000 ]
	eventually 5 no_process_matching "$marker"
}

@test "a call's background processes end with the call, even when it succeeds" {
	marker="dt-bg-$$-$RANDOM"
	tool execute_bash_commands "$(bash_args "(sleep 300; : $marker) & echo done")"
	sc '.exit_code == 0 and .stdout == "done\n"'
	eventually 5 no_process_matching "$marker"
}

@test "a call that kills its runner leaves no process behind, setsid ones included; the next call runs" {
	marker="dt-runner-$$-$RANDOM"
	# The call's code runs as the runner's user, so it can kill the runner (its parent); its
	# setsid daemon then leaves the runner's tree. The sweep after the call must still end it,
	# before the call's response (not only when the sandbox is deleted at the end).
	code='setsid bash -c "sleep 300; : '"$marker"'" </dev/null >/dev/null 2>&1 &
sleep 0.5; tr "\0" " " </proc/$PPID/cmdline >&2; kill -9 $PPID; sleep 1; echo after'
	printf '%s\n%s\n%s\n%s\n%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands "$(bash_args "$code" 30)")" \
		'{"wait": 1}' "$(call_json 2 execute_bash_commands "$(bash_args "pgrep -af '${marker/runner/runne[r]}' || echo alive" 30)")" '{"wait": 2}' >"$BATS_TEST_TMPDIR/script"
	python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 120 -- "$SANDBOX_MCP" <"$BATS_TEST_TMPDIR/script" >"$BATS_TEST_TMPDIR/out"
	output=$(cat "$BATS_TEST_TMPDIR/out")
	# The call's end came back (the runner was killed: never "after", and no clean exit).
	jqe "$(response 1)" '.result.structuredContent | .stdout != "after\n"'
	# The next call, sent at once after the first's response, finds the daemon gone (the test
	# server runs the sandbox's processes on this host, where the second call looks).
	jqe "$(response 2)" '.result.structuredContent.stdout == "alive\n" and .result.structuredContent.exit_code == 0'
	! ps -e -o args= | grep -v grep | grep -q "$marker"
}

@test "cancelling the running call kills it at once; the next call runs" {
	marker="dt-cancel-$$-$RANDOM"
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands "$(bash_args "sleep 300; : $marker")")
$(until_running "$marker")
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}
$(call_json 2 execute_bash_commands '{"code":"echo alive"}')
{"wait": 2}
EOF
	[ -z "$(response 1)" ]
	jqe "$(response 2)" '.result.structuredContent.stdout == "alive\n"'
	! ps -e -o args= | grep -v grep | grep -q "$marker"
}

# sh_step COMMAND: a session step that runs COMMAND on this host (see lib/session.py).
sh_step() {
	jq -cn --arg c "$1" '{sh: $c}'
}

@test "HTTP runs in a helper: no libcurl in the server, no key in the helper's environment; a helper killed during a request fails that call clearly, the next runs, and the helper ends with the server" {
	hh="'$TESTS_DIR/lib/http-helper.sh' \$PPID"
	slow=$(grep -c 'slow: holding' "$DT_LOG" || true)
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"echo one"}')
{"wait": 1}
$(sh_step "$hh nocurl && $hh nokey")
$(sh_step "curl -sf -d '{\"fail\": \"slow\", \"seconds\": 20, \"count\": 1}' '$DT_URL/_control' >/dev/null")
$(call_json 2 execute_bash_commands '{"code":"echo two"}')
$(jq -cn --arg c "[ \$(grep -c 'slow: holding' '$DT_LOG') -gt $slow ]" '{until: $c}')
$(sh_step "$hh kill")
{"wait": 2}
$(call_json 3 execute_bash_commands '{"code":"echo three"}')
{"wait": 3}
$(sh_step "$hh nocurl && $hh live >'$BATS_TEST_TMPDIR/helper'")
{"signal": "KILL"}
{"expect_exit": 5}
$(jq -cn --arg c "! kill -0 \$(cat '$BATS_TEST_TMPDIR/helper') 2>/dev/null" '{until: $c}')
EOF
	res 1
	sc '.stdout == "one\n"'
	res 2
	printf '%s\n' "$result" >&2
	sc '.exit_code != 0 and (.error | test("^the HTTP helper \\(sandbox-http\\) ended during the request"))'
	res 3
	sc '.exit_code == 0 and .stdout == "three\n"'
}

# executes_only LOG ID N RESPONSE: the requests of a call, in the test server's log LOG, were
# N process/execute requests to sandbox ID and nothing else, but the runner's polls of a call
# that ran long (a loaded machine: DT_UNPOLLED). (A request to a sandbox before this one, cut
# short under load, may end in the log late: not this call's.)
executes_only() {
	jqe "$4" '.result.structuredContent.duration_ms | type == "number"'
	jqe "$(cat "$1")" "[.requests[] | select((.path | startswith(\"/toolbox/\") | not) or (.path | contains(\"$2\")))]
		| $DT_UNPOLLED | length == $3 and all({method, path} == {method: \"POST\", path: \"/toolbox/$2/process/execute\"})"
}

@test "a warm call is one request: one process/execute starts it, with its files, waits for its end, brings its output" {
	log="$BATS_TEST_TMPDIR/log"
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"true"}')
{"wait": 1}
$(sh_step "curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 2 execute_bash_commands '{"code":"true"}')
{"wait": 2}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.2' && curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 3 execute_python '{"script":"print(6 * 7)"}')
{"wait": 3}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.3'")
EOF
	id=$(response 2 | jq -r '.result.structuredContent.sandbox_id')
	jqe "$(response 2)" '.result.structuredContent.exit_code == 0'
	jqe "$(response 3)" '.result.structuredContent.stdout == "42\n"'
	# The warm bash call, and the Python one with its script file: each one POST, nothing else.
	executes_only "$log.2" "$id" 1 "$(response 2)"
	executes_only "$log.3" "$id" 1 "$(response 3)"
}

# The runner's code object kept in the sandbox (backends/daytona/runner.h) is the call's to
# rewrite (the same user): whatever the code leaves there, a later call runs the genuine runner
# (its SHA-256 is the server's), sees nothing of a later call and never hangs; it costs that call
# one request more, while the copy cannot be put back, and no more. (A call whose go answers
# before its end, past the runner's 2 s wait or 0.25 s after output came on a loaded machine,
# costs a poll, which puts the copy back or costs two requests: a count is checked where the
# call before it made no poll, as its log says.) Such a poll, during the code, may put the copy
# back between the code's rm and mkdir: the code makes its folder again until it takes.
@test "the runner's kept code object, rewritten by the code, is never run: a spy, a FIFO, a symlink, a folder" {
	log="$BATS_TEST_TMPDIR/log"
	# A code object that would print what a later call's runner is told, and end it.
	spy=$(python3 -c 'import base64, marshal; print(base64.b64encode(marshal.dumps(compile("print(\"spied\", __import__(\"sys\").argv)\n", "spy", "exec"))).decode())')
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"true"}')
{"wait": 1}
$(sh_step "curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 2 execute_bash_commands "$(bash_args "n=0; for p in /tmp/.sandbox-mcp-runner-*; do echo $spy | base64 -d >\$p.new && mv \$p.new \$p && n=\$((n + 1)); done; echo planted \$n")")
{"wait": 2}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.2' && curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 3 execute_bash_commands '{"code":"echo secret-3; for p in /tmp/.sandbox-mcp-runner-*; do rm -f $p; mkfifo $p; done"}')
{"wait": 3}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.3'")
$(call_json 4 execute_bash_commands '{"code":"echo four; for p in /tmp/.sandbox-mcp-runner-*; do rm -f $p; ln -s /dev/zero $p; done"}')
{"wait": 4}
$(call_json 5 execute_bash_commands '{"code":"echo five; for p in /tmp/.sandbox-mcp-runner-*; do for t in 1 2 3 4 5 6 7 8; do rm -f $p; mkdir $p 2>/dev/null \u0026\u0026 break; done; [ -d $p ]; done"}')
{"wait": 5}
$(sh_step "curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 6 execute_bash_commands '{"code":"echo six; rmdir /tmp/.sandbox-mcp-runner-*"}')
{"wait": 6}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.6' && curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 7 execute_bash_commands '{"code":"echo seven"}')
{"wait": 7}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.7' && curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 8 execute_bash_commands '{"code":"echo eight"}')
{"wait": 8}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.8'")
EOF
	id=$(response 2 | jq -r '.result.structuredContent.sandbox_id')
	jqe "$(response 2)" '.result.structuredContent.stdout == "planted 1\n"'
	# The spy never ran, nothing hung: the genuine runner ran each call, with its own words.
	jqe "$(response 3)" '.result.structuredContent | .exit_code == 0 and .stdout == "secret-3\n"'
	for i in 4 5 6 7 8; do
		jqe "$(response $i)" '.result.structuredContent.exit_code == 0'
	done
	jqe "$(response 6)" '.result.structuredContent.stdout == "six\n"'
	jqe "$(response 8)" '.result.structuredContent.stdout == "eight\n"'
	quick() { [ "$(response "$1" | jq '.result.structuredContent.duration_ms')" -lt 2000 ]; }
	unpolled() { jq -e "(.requests | $DT_UNPOLLED) == .requests" "$1" >/dev/null; }
	if unpolled "$log.2" && quick 3; then executes_only "$log.3" "$id" 2 "$(response 3)"; fi
	if quick 5 && quick 6; then executes_only "$log.6" "$id" 2 "$(response 6)"; fi
	# The folder gone, the request that carries the copy puts it back: one request again.
	if unpolled "$log.6" && quick 7; then executes_only "$log.7" "$id" 2 "$(response 7)"; fi
	executes_only "$log.8" "$id" 1 "$(response 8)"
}

@test "a call returning 20 small files is one request: the listing and the files come with its end" {
	log="$BATS_TEST_TMPDIR/log"
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"true"}')
{"wait": 1}
$(sh_step "curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 2 execute_bash_commands '{"code":"mkdir -p outputs; for i in $(seq 10 29); do echo \"file $i\" > outputs/f$i.txt; done"}')
{"wait": 2}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.2' && curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 3 execute_bash_commands '{"code":"echo changed > outputs/f17.txt; rm outputs/f18.txt; ln -s /etc/passwd outputs/f18.txt; head -c 70000 /dev/zero > outputs/f19.txt"}')
{"wait": 3}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.3'")
EOF
	id=$(response 2 | jq -r '.result.structuredContent.sandbox_id')
	jqe "$(response 2)" '.result.structuredContent | (.artifacts | length) == 20 and all(.artifacts[]; .shown == "text")
		and [.artifacts[].text] == [range(10; 30) | "file \(.)\n"]'
	executes_only "$log.2" "$id" 1 "$(response 2)"
	# What came with the end is what a read says: a symlink not followed; a file over 64 KiB
	# is read by a request of its own, as before.
	jqe "$(response 3)" '.result.structuredContent | [.artifacts[] | [.path, .shown]] == [["outputs/f17.txt", "text"], ["outputs/f18.txt", "none"], ["outputs/f19.txt", "link"]]
		and .artifacts[0].text == "changed\n" and (.artifacts[1].note | test("symlink"))'
	executes_only "$log.3" "$id" 2 "$(response 3)"
}

@test "a long call streams its output while it runs, and waits in the sandbox: a silent one costs a request per 2 s" {
	log="$BATS_TEST_TMPDIR/log"
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"for i in 1 2 3; do echo tick $i; sleep 1; done"}' '{"progressToken":"tok-1"}')
{"wait": 1}
$(sh_step "curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null")
$(call_json 2 execute_bash_commands '{"code":"sleep 4.5; echo done"}')
{"wait": 2}
$(sh_step "curl -sf '$DT_URL/_control' >'$log'")
EOF
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "tick 1\ntick 2\ntick 3\n"'
	# Progress, before the result, carries output lines the call printed while it ran.
	printf '%s\n' "$output" | jq -e -s '(map(.id == 1) | index(true)) as $r
		| [.[:$r][] | select(.method == "notifications/progress") | .params.message] | any(test("^tick [12]$"))'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .stdout == "done\n"'
	# Each request waits up to 2 s in the sandbox: a 4.5 s call costs 3, all of them executes.
	# (A request to a sandbox before this one, cut short under load, may end in the log late: not this call's.)
	id=$(response 2 | jq -r '.result.structuredContent.sandbox_id')
	jqe "$(cat "$log")" "[.requests[] | select(.path | startswith(\"/toolbox/$id/\"))] | length >= 3 and length <= 4 and all(.path | endswith(\"/process/execute\"))"
}

@test "output cap: head and tail kept, byte counts full, the full text spilled into the workspace" {
	mcp_session --output-cap 1K <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"for i in $(seq 1 1000); do echo line-$i; done; echo bad >&2"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"wc -c < .sandbox/output/call-1.stdout; tail -n 1 .sandbox/output/call-1.stdout"}')
EOF
	r=$(response 1 | jq -c '.result.structuredContent')
	jqe "$r" '.truncated.stdout == true and .truncated.stdout_bytes == 8893 and .truncated.stdout_file == "/workspace/.sandbox/output/call-1.stdout"'
	jqe "$r" '.truncated.stderr == false and .stderr == "bad\n" and .truncated.stderr_file == null'
	jqe "$r" '(.stdout | startswith("line-1\nline-2\n")) and (.stdout | endswith("line-999\nline-1000\n")) and (.stdout | contains("8893") | not)'
	jqe "$r" '.stdout | test("\\[\\.\\.\\. [0-9]+ bytes left out here; the full output is in /workspace/.sandbox/output/call-1.stdout")'
	# The marker counts exactly what is left out: kept head and tail plus the count make the total.
	jqe "$(response 2)" '.result.structuredContent.stdout == "8893\nline-1000\n"'
}

@test "install failure: exit 1, stderr starts 'Failed to install requirements: ', script not run" {
	tool execute_python '{"script":"print(\"ran\")","requirements":["surely-not-a-package-dt==0.0.1"]}' --network none
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: ")) and .stdout == ""'
}

@test "policy install: the network is opened for the install step alone and blocked again" {
	# An index named by its address (this machine may resolve no name): the step's allow list
	# is made of what the index hosts resolve to.
	tool execute_python '{"script":"print(\"ran\")","requirements":["missing-dt-pkg"],"timeout_s":5}' \
		--index-url http://198.51.100.7:8080/simple
	sc '.exit_code != 0 and (.stderr | startswith("Failed to install requirements: ")) and (.stderr | test("is not allowed") | not)'
	requests | jq -se '[.[] | select(.path | endswith("/network-settings"))] | length == 2'
	grep -q 'network-settings .*"networkAllowList": "198.51.100.7/32"' "$BATS_FILE_TMPDIR/daytona.log"
	grep -q 'network-settings .*"networkBlockAll": true' "$BATS_FILE_TMPDIR/daytona.log"
}

marker_running() {
	ps -e -o args= | grep -v grep | grep -q "$1"
}

@test "the API key never reaches the sandbox, the server's log, or a process's arguments" {
	marker="dt-args-$$-$RANDOM"
	printf '%s\n%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands "$(bash_args "sleep 1.5; : $marker; env; cat /proc/self/environ")")" >"$BATS_TEST_TMPDIR/script"
	python3 "$SESSION" --stderr "$SERVER_LOG" -- "$SANDBOX_MCP" --log-level debug <"$BATS_TEST_TMPDIR/script" >"$BATS_TEST_TMPDIR/out" &
	eventually 60 marker_running "$marker"
	ps -e -o args= >"$BATS_TEST_TMPDIR/ps"
	wait
	output=$(cat "$BATS_TEST_TMPDIR/out")
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and (.stdout | contains("HOME="))'
	run ! grep -q "$DT_KEY" "$BATS_TEST_TMPDIR/out"
	run ! grep -q "$DT_KEY" "$SERVER_LOG"
	run ! grep -q "$DT_KEY" "$BATS_TEST_TMPDIR/ps"
	grep -q "$marker" "$BATS_TEST_TMPDIR/ps"
}

@test "no key: a named daytona backend says DAYTONA_API_KEY is not set, without falling back" {
	unset DAYTONA_API_KEY
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.exit_code == 1 and .backend == null and (.error | startswith("Failed to initialize sandbox engine: daytona: DAYTONA_API_KEY is not set"))'
}

@test "401: a refused key is a clear error naming DAYTONA_API_KEY" {
	export DAYTONA_API_KEY=wrong-key
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '(.error | test("daytona: the Daytona API at http://127.0.0.1:[0-9]+/api: HTTP 401: Unauthorized \\(the API key was refused: check DAYTONA_API_KEY\\)"))'
}

@test "500: a failing service is a clear error" {
	control '{"fail": "500"}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("daytona: .*HTTP 500: An unexpected error occurred. \\(the Daytona service failed\\)")'
}

@test "500 while creating: the error names the step, and nothing is retried" {
	control '{"fail": "500", "method": "POST", "path": "/api/sandbox"}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("daytona: creating a Daytona sandbox: HTTP 500: An unexpected error occurred")'
	requests | jq -se '[.[] | select(.method == "POST" and .path == "/api/sandbox")] | length == 1'
}

# leak_case MODE [MORE_CONTROL]: the create request is handled (a sandbox made), then its answer
# fails as MODE says (server.py). The call fails naming the step; the create was sent once; the
# sandbox it made is found by its label and deleted before the call's result; none is left.
leak_case() {
	control "{\"fail\": \"$1\", \"count\": 1, \"method\": \"POST\", \"path\": \"/api/sandbox\"${2:+, $2}}" >/dev/null
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo hi"}')
{"wait": 1}
$(jq -cn --arg c "python3 -c 'import json, sys, urllib.request; print(len(json.load(urllib.request.urlopen(sys.argv[1]))[\"sandboxes\"]))' '$DT_URL/_control' >'$BATS_TEST_TMPDIR/live'" '{sh: $c}')
EOF
	res 1
	sc '.exit_code == 1 and (.error | test("daytona: creating a Daytona sandbox: "))'
	[ "$(cat "$BATS_TEST_TMPDIR/live")" -eq 0 ]
	[ "$(live_sandboxes)" -eq 0 ]
	requests | jq -se '[.[] | select(.method == "POST" and .path == "/api/sandbox")] | length == 1'
	grep -q "made by a create whose answer was lost" "$SERVER_LOG"
}

@test "a create that made a sandbox and answered 500: the sandbox is found by its label and deleted, the create not sent again" {
	leak_case 500_after
}

@test "a create that made a sandbox and whose answer was cut short: the sandbox is deleted, the create not sent again" {
	leak_case truncated
}

@test "a create that made a sandbox and answered a malformed 200: the sandbox is deleted, the create not sent again" {
	leak_case malformed
}

@test "a create that made a sandbox and whose connection was reset: not sent again (no second sandbox), the sandbox deleted" {
	leak_case reset_after
}

@test "a create whose answer was lost, while its sandbox still refuses deletion (409, being made): deleted once it may be" {
	leak_case reset_after '"start_s": 2, "busy_delete": true'
	requests | jq -se 'any(.method == "DELETE" and .status == 409) and any(.method == "DELETE" and .status == 200)'
}

@test "a call's execute sent again by the HTTP client after a reset does not run the call twice" {
	# The runner's go is handled (the call runs), then the connection is reset before its
	# answer: libcurl sends it again on a new connection, and the second go waits instead.
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo warm"}')
{"wait": 1}
$(jq -cn --arg c "python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method=\"POST\"))' '$DT_URL/_control' '{\"fail\": \"reset_after\", \"count\": 1, \"method\": \"POST\", \"path\": \"*/process/execute\"}'" '{sh: $c}')
$(call_json 2 execute_bash_commands '{"code":"echo ran >> runs; echo once"}')
{"wait": 2}
$(call_json 3 execute_bash_commands '{"code":"cat runs"}')
EOF
	res 2
	sc '.exit_code == 0 and .stdout == "once\n"'
	res 3
	sc '.stdout == "ran\n"'
	# The go was handled, reset, and sent again: the one execute dropped is followed by one
	# answered (how many came before it, the making's and the first call's, is the server's own
	# business, and a loaded machine may change it).
	[ "$(grep -c 'reset_after: POST /toolbox/.*/process/execute handled' "$DT_LOG")" -eq 1 ]
	local ex
	ex=$(requests | jq -sc '[.[] | select(.path | endswith("/process/execute")) | .status]')
	jqe "$ex" '(map(. == "dropped") | indices(true)) as $d | ($d | length) == 1 and .[$d[0] + 1] == 200'
}

@test "429 with Retry-After is waited out and retried; the call succeeds" {
	control '{"fail": "429", "count": 2, "seconds": 1}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.stdout == "hi\n" and .backend == "daytona"'
	requests | jq -se '[.[] | select(.status == 429)] | length == 2'
}

@test "429 for longer than the retries: a clear rate-limit error" {
	control '{"fail": "429", "seconds": 1}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("HTTP 429: Rate limit exceeded \\(rate limited")'
}

@test "a dropped connection is retried for a GET; when every one drops, a clear error" {
	control '{"fail": "drop", "count": 1}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.stdout == "hi\n"'
	control '{"fail": "drop"}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("daytona: the Daytona API at .* does not answer: (Server returned nothing|Recv failure|Empty reply)")'
}

@test "a slow API: the probe gives up after its short timeout" {
	control '{"fail": "slow", "seconds": 120}' >/dev/null
	t0=$(date +%s)
	tool execute_bash_commands '{"code":"echo hi"}'
	took=$(($(date +%s) - t0))
	# What the server holds goes on now, answered to nobody, and not into a later test's log.
	control '{"release": true}' >/dev/null
	eventually 30 eval '[ "$(requests | wc -l)" -ge 2 ]'
	sc '.error | test("does not answer: Timeout was reached")'
	# Start-up reaping (2 s) and the probe (5 s), each bounded, and each once: never the 120 s
	# the API would take.
	[ "$(grep -c 'slow: holding GET /api/sandbox for 120 s' "$DT_LOG")" -eq 2 ]
	[ "$took" -lt 60 ]
}

@test "a full disk is said as such and the sandbox kept: the code gets ENOSPC, the next call runs, rm frees it, python runs again" {
	control '{"disk": 33554432}' | jq -e '.disk == 33554432' >/dev/null ||
		skip_or_fail "the Daytona test server cannot give a sandbox a disk of its own here (it needs root)"
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"head -c 64M /dev/zero > big; echo head=$?"}')
$(call_json 2 execute_bash_commands '{"code":"echo still here"}')
$(call_json 3 execute_bash_commands '{"code":"rm big; echo freed"}')
$(call_json 4 execute_python '{"script":"print(\"py again\")"}')
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "head=1\n" and (.stderr | test("No space left on device")) and .error == null'
	local id
	id=$(jqe "$result" '.' && jq -r '.structuredContent.sandbox_id' <<<"$result")
	res 2
	sc ".exit_code == 0 and .stdout == \"still here\n\" and .sandbox_id == \"$id\" and .notice == null"
	res 3
	sc ".exit_code == 0 and .stdout == \"freed\n\" and .sandbox_id == \"$id\""
	res 4
	sc ".exit_code == 0 and .stdout == \"py again\n\" and .sandbox_id == \"$id\" and .notice == null"
	# The sandbox was deleted once, at the end.
	requests | jq -se '[.[] | select(.method == "DELETE")] | length == 1'
	requests | jq -se '[.[] | select(.method == "POST" and .path == "/api/sandbox")] | length == 1'
}

@test "a disk too full for the call runner's own files, /dev/shm too: the call says the disk is full, the sandbox is kept, and cleanup_sandbox goes on" {
	control '{"disk": 33554432}' | jq -e '.disk == 33554432' >/dev/null ||
		skip_or_fail "the Daytona test server cannot give a sandbox a disk of its own here (it needs root)"
	# Between the calls another client of the sandbox takes everything, through the toolbox:
	# the runner's folders and reserve, the disk, /dev/shm.
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo one"}')
{"wait": 1}
$(jq -cn --arg c "python3 '$BATS_TEST_DIRNAME/daytona/fill.py' '$DT_URL' '$DT_KEY'" '{sh: $c}')
$(call_json 2 execute_bash_commands '{"code":"echo never"}')
{"wait": 2}
$(call_json 3 cleanup_sandbox '{}')
{"wait": 3}
$(call_json 4 execute_bash_commands '{"code":"echo fresh"}')
EOF
	res 1
	local id
	id=$(jq -r '.structuredContent.sandbox_id' <<<"$result")
	res 2
	sc ".exit_code == 1 and .stdout == \"\" and .sandbox_id == \"$id\" and .notice == null"
	sc '.error | test("disk is full \\(No space left on device\\): not even the call runner.s own files fit, so the call could not start; call cleanup_sandbox")'
	res 4
	sc '.exit_code == 0 and .stdout == "fresh\n" and .sandbox_id != "'"$id"'"'
	# Deleted by cleanup_sandbox, not before.
	requests | jq -se '[.[] | select(.method == "POST" and .path == "/api/sandbox")] | length == 2'
}

@test "a sandbox that never starts: a clear error within the start timeout, and it is deleted" {
	control '{"fail": "never_start"}' >/dev/null
	export SANDBOX_DAYTONA_START_TIMEOUT=2
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.error | test("daytona: the Daytona sandbox [0-9a-f-]+ did not start within 2 s \\(state: creating\\)")'
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "auto: when the Daytona API fails, the next backend is used and the reason is logged" {
	unset SANDBOX_BACKEND
	control '{"fail": "500"}' >/dev/null
	tool execute_bash_commands '{"code":"echo hi"}'
	sc '.stdout == "hi\n" and .backend != "daytona" and .backend != null'
	grep -q 'warning: backend auto: passed over daytona: the Daytona API at .*HTTP 500' "$SERVER_LOG"
	# The user set Daytona up: the call says that its code ran elsewhere, and why.
	sc '.notice | test("^--backend auto passed over what is set up here \\(daytona: the Daytona API at .*HTTP 500.*\\); this call ran on the (docker|local) backend instead[.]$")'
}

@test "reap: a sandbox labelled by a server that is gone is deleted at start-up" {
	id=$(python3 - "$DT_URL" "$DT_KEY" "$(hostname)" <<'EOF'
import json, sys, urllib.request
body = {"labels": {"sandbox-mcp": "1", "sandbox-mcp-owner": "%s:999999999:1" % sys.argv[3]}}
req = urllib.request.Request(sys.argv[1] + '/api/sandbox', data=json.dumps(body).encode(), method='POST',
                             headers={'Authorization': 'Bearer ' + sys.argv[2], 'Content-Type': 'application/json'})
print(json.load(urllib.request.urlopen(req))['id'])
EOF
)
	[ "$(live_sandboxes)" -eq 1 ]
	mcp_session <<<"$(printf '%s\n%s\n' "$INIT" "$INITIALIZED")"
	grep -q "deleted Daytona sandbox $id, left by a server that is gone" "$SERVER_LOG"
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "--check runs a test call on the daytona backend" {
	run "$SANDBOX_MCP" --check --backend daytona
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"daytona  ok"* ]]
}

@test "--workspace-size is the disk of a sandbox made from an image (whole GiB); a snapshot's own disk is reported" {
	SANDBOX_DAYTONA_IMAGE=python:3.12-slim run "$SANDBOX_MCP" --check --backend daytona --workspace-size 1536M
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"disk        2 GiB    the sandbox's disk, from --workspace-size (1536 MiB)"* ]]
	run "$SANDBOX_MCP" --check --backend daytona --workspace-size 1536M
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"disk        3 GiB    the sandbox's disk, the snapshot's own (--workspace-size applies with --daytona-image alone)"* ]]
}

@test "list_changed on daytona, which has no watch: told after a call that adds, rewrites or removes a file, none after one that changes nothing" {
	mcp_session <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'mkdir -p d && echo a > d/a.txt')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'true')
$(changes_call 4 'echo b > b.txt')
$(changes_call 5 'echo z > d/a.txt')
$(changes_call 6 'rm -r d')
$(changes_call 7 'touch tmp && rm tmp')
$(changes_fence 100)
EOF
	[ "$(changes_order)" = "1 2 3 4 changed 5 changed 6 changed 7 " ]
}

@test "files out and resources on the daytona backend, from the official SDK client (tests/sdk-files)" {
	sdk_files "$SANDBOX_MCP" --backend daytona
}

@test "mcp-check (official MCP SDK client) passes every check on the daytona backend" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run env MCP_CHECK_SECRET=leak-me "$MCP_CHECK" "$SANDBOX_MCP"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 13 ]
	[[ "$output" != *"$DT_KEY"* ]]
}

@test "--mount: the folder is copied in at creation, read-only by mode unless :rw; --check says so; too big a folder is a clear error" {
	proj="$BATS_TEST_TMPDIR/proj"
	mkdir -p "$proj/sub"
	printf 'project file\n' >"$proj/sub/readme.txt"
	head -c 3000 /dev/urandom >"$proj/blob.bin"
	ln -s /etc/passwd "$proj/link"
	mcp_session --mount "$proj:/mnt/project" --mount "$proj:/mnt/scratch:rw" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_bash_commands "$(bash_args 'cat /mnt/project/sub/readme.txt; cmp /mnt/project/blob.bin /mnt/scratch/blob.bin && echo same; [ -e /mnt/project/link ] || echo nolink; stat -c %A /mnt/project/sub /mnt/project/sub/readme.txt; echo y > /mnt/scratch/new && echo written')")")"
	# Read-only by mode (the test server runs commands as root, whom modes do not stop; a real
	# sandbox's user is not root).
	jqe "$(response 1)" '.result.structuredContent.stdout == "project file\nsame\nnolink\ndr-xr-xr-x\n-r--r--r--\nwritten\n"'
	# Nothing reaches the host folder.
	[ ! -e "$proj/new" ]
	run "$SANDBOX_MCP" --check --mount "$proj:/mnt/project"
	[ "$status" -eq 0 ]
	[[ "$output" == *"mount       /mnt/project: a copy of the host folder $proj made at creation (2 files, 3013 bytes, 1 skipped); read-only by its files' modes"* ]]
	# Past the copy's bounds: the reason, and the server keeps serving.
	mkdir "$proj/many"
	(cd "$proj/many" && seq 1 2001 | xargs touch)
	mcp_session --mount "$proj:/mnt/project" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands "$(bash_args 'true')")" '{"jsonrpc":"2.0","id":2,"method":"ping"}')"
	jqe "$(response 1)" '.result.isError == true and (.result.structuredContent.error | test("more than 2000 files"))'
	jqe "$(response 2)" '.result == {}'
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "--workspace: --check says how Daytona keeps the folder in step with the sandbox (daytona-workspace.bats has the rest)" {
	mkdir -p "$BATS_TEST_TMPDIR/ws/.sandbox"
	echo hi >"$BATS_TEST_TMPDIR/ws/a.txt"
	run "$SANDBOX_MCP" --check --workspace "$BATS_TEST_TMPDIR/ws"
	[ "$status" -eq 0 ]
	[[ "$output" == *"workspace   /workspace in the cloud sandbox, kept in step with --workspace $BATS_TEST_TMPDIR/ws"* ]]
	[[ "$output" == *"in    when the sandbox is made: 1 file, 3 bytes"* ]]
	[[ "$output" == *"back  after every call, before its result"* ]]
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "files out: a file whose name is not UTF-8 is read back too (its name travels as base64)" {
	tool execute_bash_commands "$(bash_args "mkdir -p outputs; printf hi > outputs/\$'\\xff'.txt")"
	sc '.artifacts | length == 1 and .[0].shown == "text" and .[0].text == "hi" and .[0].uri == "sandbox://workspace/outputs/%FF.txt"'
}
