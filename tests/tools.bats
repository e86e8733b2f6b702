# The tools' semantics (SPEC §3, §4) on the local backend, through the real server.
load lib/helpers
load lib/inputs

setup() {
	common_setup
	WHEELS="$BATS_TEST_TMPDIR/wheels"
	mkdir -p "$WHEELS"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$WHEELS" sbxdemo 1.0
}

teardown() {
	unprivileged_teardown
}

# The host folders of this test's sandboxes.
sandbox_dirs() {
	find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name 'local-*' 2>/dev/null
}

# bash_args CODE [TIMEOUT]: execute_bash_commands arguments as JSON.
bash_args() {
	jq -cn --arg c "$1" --argjson t "${2:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)'
}

# A shell command that starts a long-lived process whose command line carries the marker $1.
sleeper() {
	printf 'bash -c "sleep 300; : %s"' "$1"
}

# Counts the host processes started by sleeper MARKER that are still alive.
host_procs() {
	ps -e -o args= | grep -c -x -F "bash -c sleep 300; : $1" || true
}

marker_procs() {
	[ "$(host_procs "$1")" -gt 0 ]
}

no_marker_procs() {
	[ "$(host_procs "$1")" -eq 0 ]
}

@test "bash: stdout and stderr apart, real exit code, isError when non-zero" {
	tool execute_bash_commands '{"code":"echo out; echo err >&2; exit 3"}'
	sc '.stdout == "out\n" and .stderr == "err\n" and .exit_code == 3 and .timed_out == false'
	sc '.backend == "local" and (.sandbox_id | startswith("local-")) and .error == null'
	jqe "$result" '.isError == true and .content[0].type == "text" and (.content[0].text | contains("err"))'
}

@test "bash: success is not an error and runs in /workspace as the sandbox user" {
	tool execute_bash_commands '{"code":"pwd; id -un; echo $HOME"}'
	sc '.stdout == "/workspace\nsandbox\n/workspace\n" and .exit_code == 0'
	jqe "$result" '.isError != true'
}

@test "python: real interpreter, UTF-8 output, traceback and exit 1 on an exception" {
	tool execute_python '{"script":"import sys\nprint(\"héllo\", sys.executable, sys.version_info[0])\nraise ValueError(\"boom\")"}'
	sc '.stdout == "héllo /usr/bin/python3 3\n" and .exit_code == 1'
	sc '(.stderr | test("Traceback")) and (.stderr | test("ValueError: boom"))'
	jqe "$result" '.isError == true'
}

@test "files persist between calls and tools, interpreter state does not" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_python '{"script":"open(\"data.txt\",\"w\").write(\"kept\")\nx = 42"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"cat data.txt"}')
{"wait": 2}
$(call_json 3 execute_python '{"script":"print(x)"}')
{"wait": 3}
$(call_json 4 execute_python '{"script":"import os\nprint(open(\"data.txt\").read(), os.getcwd())"}')
EOF
	jqe "$(response 2)" '.result.structuredContent.stdout == "kept"'
	jqe "$(response 3)" '.result.structuredContent.stderr | test("NameError")'
	jqe "$(response 4)" '.result.structuredContent.stdout == "kept /workspace\n"'
	# One sandbox served all four calls.
	[ "$(printf '%s\n' "$output" | jq -r 'select(.id != "init") | .result.structuredContent.sandbox_id' | sort -u | wc -l)" -eq 1 ]
}

@test "timeout: exit 124, output so far, and every process of the call is killed, setsid daemons too" {
	marker="sbx-timeout-$$-$RANDOM"
	s=$(sleeper "$marker")
	tool execute_bash_commands "$(bash_args "echo start; setsid $s & ($s &); nohup $s >/dev/null 2>&1 & sleep 0.3; ps -eo args | grep -c '^bash -c sleep 300'; sleep 300" 2)"
	# Three sleepers were running when the timeout hit.
	sc '.timed_out == true and .exit_code == 124 and .stdout == "start\n3\n"'
	sc '.duration_ms >= 2000 and .duration_ms < 6000'
	jqe "$result" '.isError == true and (.content[0].text | test("timed out"))'
	[ "$(host_procs "$marker")" -eq 0 ]
}

@test "a call's background processes end with the call, even when it succeeds" {
	marker="sbx-bg-$$-$RANDOM"
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands "$(bash_args "setsid $(sleeper "$marker") & disown; echo started")")
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"ps -eo pid,args | grep -c \"[s]leep 300\" || true"}')
EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "started\n" and .result.structuredContent.exit_code == 0'
	jqe "$(response 2)" '.result.structuredContent.stdout == "0\n"'
	[ "$(host_procs "$marker")" -eq 0 ]
}

@test "per-call timeout_s above --max-timeout is refused with a clear error" {
	tool execute_bash_commands '{"code":"true","timeout_s":10}' --max-timeout 5
	jqe "$result" '.isError == true and (.content[0].text | test("timeout_s: must be at most 5"))'
}

@test "SANDBOX_TIMEOUT sets the default timeout; the flag wins over it" {
	SANDBOX_TIMEOUT=1 tool execute_bash_commands '{"code":"sleep 5"}'
	sc '.timed_out == true'
	SANDBOX_TIMEOUT=1 tool execute_bash_commands '{"code":"sleep 1.5; echo done"}' --timeout 10
	sc '.timed_out == false and .stdout == "done\n"'
}

@test "output cap: head and tail kept, full text spilled into the workspace" {
	mcp_session --output-cap 4K <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo FIRST; seq 1 200000; echo LAST; echo small >&2"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"wc -c < .sandbox/output/call-1.stdout; tail -1 .sandbox/output/call-1.stdout; ls .sandbox/output"}')
EOF
	r=$(response 1)
	full=$(( $(seq 1 200000 | wc -c) + 11 ))
	jqe "$r" ".result.structuredContent.truncated == {stdout: true, stderr: false, stdout_bytes: $full, stderr_bytes: 6, stdout_file: \"/workspace/.sandbox/output/call-1.stdout\", stderr_file: null, stdout_file_error: null, stderr_file_error: null}"
	jqe "$r" '.result.structuredContent.stdout | startswith("FIRST\n1\n2\n") and endswith("200000\nLAST\n") and test("bytes left out here; the full output is in /workspace/.sandbox/output/call-1.stdout")'
	jqe "$r" '(.result.structuredContent.stdout | length) < 4200 and .result.structuredContent.stderr == "small\n"'
	jqe "$(response 2)" ".result.structuredContent.stdout == \"$full\nLAST\ncall-1.stdout\n\""
}

@test "the server's memory stays bounded whatever the code prints" {
	SESSION_RUSAGE=1 tool execute_bash_commands '{"code":"head -c 400000000 /dev/zero | tr \"\\\\0\" x; echo"}' --output-cap 64K
	sc '.truncated.stdout == true and .truncated.stdout_bytes == 400000001'
	sc '(.stdout | length) <= 66000'
	# 400 MB went through; the server (and every process it waited for) peaked far below that.
	rss=$(printf '%s\n' "$output" | jq -r 'select(.maxrss_kb != null) | .maxrss_kb')
	echo "peak rss: $rss kB"
	[ "$rss" -lt 200000 ]
}

@test "a spill file stops at --spill-max" {
	mcp_session --output-cap 4K --spill-max 100K <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"head -c 1000000 /dev/zero"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"wc -c < .sandbox/output/call-1.stdout"}')
EOF
	jqe "$(response 1)" '.result.structuredContent.truncated.stdout_bytes == 1000000'
	jqe "$(response 2)" '.result.structuredContent.stdout == "102400\n"'
}

@test "non-UTF-8 output is decoded with replacement characters, NUL bytes kept" {
	tool execute_bash_commands '{"code":"printf \"a\\377b\\n\"; printf \"x\\0y\" >&2"}'
	sc '.stdout == "a\ufffdb\n" and .stderr == "x\u0000y" and .exit_code == 0'
}

@test "requirements install from the wheelhouse offline, persist, and are not reinstalled" {
	mcp_session --wheelhouse "$WHEELS" --network none <<EOF
$INIT
$(call_json 1 execute_python '{"script":"import sbxdemo; print(sbxdemo.VALUE)","requirements":["sbxdemo==1.0"]}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"python3 -c \"import sbxdemo; print(sbxdemo.VALUE)\"; ls .sandbox/packages"}')
{"wait": 2}
$(call_json 3 execute_python '{"script":"import sbxdemo; print(sbxdemo.__file__)","requirements":["sbxdemo==1.0"]}')
EOF
	jqe "$(response 1)" '.result.structuredContent.stdout == "sbxdemo 1.0\n" and .result.structuredContent.exit_code == 0'
	jqe "$(response 2)" '.result.structuredContent.stdout | startswith("sbxdemo 1.0\nsbxdemo\n")'
	jqe "$(response 3)" '.result.structuredContent.stdout == "/workspace/.sandbox/packages/sbxdemo/__init__.py\n"'
}

@test "requirements already installed in this sandbox are not installed again" {
	mcp_session --wheelhouse "$WHEELS" --network none <<EOF
$INIT
$(call_json 1 execute_python '{"script":"import sbxdemo","requirements":["sbxdemo==1.0"]}')
{"wait": 1}
{"sh": "rm $WHEELS/sbxdemo-1.0-py3-none-any.whl"}
$(call_json 2 execute_python '{"script":"import sbxdemo; print(sbxdemo.VALUE)","requirements":["sbxdemo==1.0"]}')
{"wait": 2}
$(call_json 3 execute_python '{"script":"print(3)","requirements":["sbxdemo==1.0","other-pkg"]}')
EOF
	jqe "$(response 1)" '.result.structuredContent.exit_code == 0'
	# Between calls 1 and 2 the wheel left the wheelhouse: only a skipped install lets call 2
	# succeed, and a list with a new requirement is installed again.
	jqe "$(response 2)" '.result.structuredContent.stdout == "sbxdemo 1.0\n"'
	jqe "$(response 3)" '.result.structuredContent.stderr | startswith("Failed to install requirements: ")'
}

@test "install failure: exit 1, stderr starts 'Failed to install requirements: ', script not run" {
	mcp_session --wheelhouse "$WHEELS" <<EOF
$INIT
$(call_json 1 execute_python '{"script":"open(\"ran.txt\",\"w\")","requirements":["no-such-package-xyz"]}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"ls ran.txt"}')
EOF
	r=$(response 1)
	jqe "$r" '.result.structuredContent.exit_code == 1 and .result.structuredContent.stdout == ""'
	jqe "$r" '.result.structuredContent.stderr | startswith("Failed to install requirements: ") and test("no-such-package-xyz")'
	jqe "$r" '.result.isError == true'
	jqe "$(response 2)" '.result.structuredContent.exit_code != 0'
}

@test "with --network none and no wheelhouse, installs are said to be off at once, without pip" {
	tool execute_python '{"script":"print(1)","requirements":["requests"]}' --network none
	sc '.exit_code == 1 and .stdout == "" and .stderr == "Failed to install requirements: package installs are off here (--network none, and no --wheelhouse to install from), so requests could not be installed; the script was not run"'
	sc '.duration_ms < 30000'
}

@test "policy install: paths and URLs are refused, names go to pip in the install sandbox, the code has no network" {
	mcp_session --network install <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"mkdir -p proj/pkg && echo x > proj/pkg/pyproject.toml"}')
{"wait": 1}
$(call_json 2 execute_python '{"script":"print(1)","requirements":["proj/pkg"]}')
$(call_json 3 execute_python '{"script":"print(1)","requirements":["x @ http://127.0.0.1:9/x.whl"]}')
$(call_json 4 execute_python '{"script":"print(1)","requirements":["./x-1.0-py3-none-any.whl"]}')
$(call_json 5 execute_python '{"script":"print(1)","requirements":["evil.tar.gz"]}')
$(call_json 6 execute_python '{"script":"print(1)","requirements":["sbxdemo[extra]>=1.0,<2; python_version > \"3\""],"timeout_s":3}')
$(call_json 7 execute_python '{"script":"import socket\nprint(sorted(i[1] for i in socket.if_nameindex()))"}')
EOF
	for id in 2 3 4 5; do
		jqe "$(response $id)" '.result.structuredContent.exit_code == 1 and (.result.structuredContent.stderr | startswith("Failed to install requirements: ") and test("is not allowed"))'
	done
	# A plain name passes the check and reaches pip (which finds no index here).
	jqe "$(response 6)" '.result.structuredContent.stderr | startswith("Failed to install requirements: ") and (test("is not allowed") | not)'
	jqe "$(response 7)" '.result.structuredContent.stdout == "[\u0027lo\u0027]\n"'
}

@test "cancelling the running call kills it at once; no response is sent for it" {
	marker="sbx-cancel-$$-$RANDOM"
	mcp_session <<EOF
$INIT
$(call_json 7 execute_bash_commands "$(bash_args "echo started; $(sleeper "$marker")")")
$(until_running "$marker")
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"test"}}
$(call_json 8 execute_bash_commands '{"code":"echo alive"}')
{"wait": 8}
EOF
	[ -z "$(response 7)" ]
	jqe "$(response 8)" '.result.structuredContent.stdout == "alive\n"'
	[ "$(host_procs "$marker")" -eq 0 ]
}

@test "cancelling a queued call drops it; the others still run in order" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"sleep 1; echo 1 >> order"}')
$(call_json 2 execute_bash_commands '{"code":"echo 2 >> order"}')
$(call_json 3 execute_bash_commands '{"code":"echo 3 >> order"}')
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}
{"wait": 3}
$(call_json 4 execute_bash_commands '{"code":"cat order"}')
EOF
	[ -z "$(response 2)" ]
	jqe "$(response 4)" '.result.structuredContent.stdout == "1\n3\n"'
}

@test "past the queue bound, a call gets an isError 'busy' result at once" {
	mcp_session --queue 1 <<EOF
$INIT
$(call_json 1 execute_bash_commands "{\"code\":\"sleep 3; : sbx-queue-$$\"}")
$(until_running "sbx-queue-$$")
$(call_json 2 execute_bash_commands '{"code":"echo queued"}')
$(call_json 3 execute_bash_commands '{"code":"echo refused"}')
{"wait": 3}
EOF
	jqe "$(response 3)" '.result.isError == true and (.result.content[0].text | test("busy"))'
	jqe "$(response 2)" '.result.structuredContent.stdout == "queued\n"'
	# The refusal came first, while call 1 was still running.
	[ "$(printf '%s\n' "$output" | jq -r 'select(.id != null and .id != "init") | .id' | head -1)" = 3 ]
}

@test "progress notifications about once a second, carrying the latest output line" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"for i in 1 2 3; do echo tick $i; sleep 1; done"}' '{"progressToken":"tok-1"}')
EOF
	n=$(printf '%s\n' "$output" | jq -c 'select(.method == "notifications/progress" and .params.progressToken == "tok-1")' | wc -l)
	[ "$n" -ge 2 ]
	[ "$n" -le 4 ]
	printf '%s\n' "$output" | jq -e -s '[.[] | select(.method == "notifications/progress") | .params] | (map(.progress) | . == (sort | unique)) and any(.message | test("^tick [12]$"))'
	jqe "$(response 1)" '.result.structuredContent.exit_code == 0'
}

@test "a response comes at least 100 ms after its call's last progress notification" {
	# The official TypeScript SDK handles a notification a step after the read that brought
	# it: read together with its response, a progress notification found its handler gone.
	# Call 1 ends about 50 ms after its second tick; the server says what gap it kept.
	mcp_session --log-level debug <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo a; sleep 2.05"}' '{"progressToken":"tok-g"}')
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"echo quick"}' '{"progressToken":"tok-q"}')
{"wait": 2}
EOF
	n=$(printf '%s\n' "$output" | jq -c 'select(.method == "notifications/progress" and .params.progressToken == "tok-g")' | wc -l)
	[ "$n" -ge 1 ]
	gaps=$(sed -n 's/.*debug: call \([0-9]*\): answered \([0-9]*\) ms after its last progress notification$/\1 \2/p' "$SERVER_LOG")
	echo "$gaps"
	# Only call 1 had progress, and its answer waited for the gap.
	[ "$(printf '%s\n' "$gaps" | grep -c .)" -eq 1 ]
	[ "$(echo "$gaps" | cut -d' ' -f1)" = 1 ]
	[ "$(echo "$gaps" | cut -d' ' -f2)" -ge 100 ]
	# And nothing of call 1 follows its response.
	last=$(printf '%s\n' "$output" | jq -s '[to_entries[] | select(.value.params.progressToken == "tok-g") | .key] | max')
	resp=$(printf '%s\n' "$output" | jq -s '[to_entries[] | select(.value.id == 1) | .key] | min')
	[ "$last" -lt "$resp" ]
	jqe "$(response 2)" '.result.structuredContent.stdout == "quick\n"'
}

@test "no progress notifications without a progress token" {
	tool execute_bash_commands '{"code":"sleep 1.5"}'
	! printf '%s\n' "$output" | grep -q notifications/progress
}

@test "idle timeout removes the sandbox; the next result says the workspace is fresh" {
	mcp_session --idle-timeout 1 <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo x > keep.txt"}')
{"wait": 1}
{"until": "! ls -d $SANDBOX_STATE_DIR/local-* >/dev/null 2>&1"}
$(call_json 2 execute_bash_commands '{"code":"ls keep.txt"}')
{"wait": 2}
$(call_json 3 execute_bash_commands '{"code":"true"}')
EOF
	jqe "$(response 2)" '.result.structuredContent.exit_code != 0 and (.result.structuredContent.notice | test("removed after 1 s without use"))'
	jqe "$(response 2)" '.result.content[0].text | test("notice: ")'
	jqe "$(response 3)" '.result.structuredContent.notice == null'
	a=$(response 1 | jq -r .result.structuredContent.sandbox_id)
	b=$(response 2 | jq -r .result.structuredContent.sandbox_id)
	[ "$a" != "$b" ]
	grep -q "removed after 1 s unused" "$SERVER_LOG"
}

@test "cleanup_sandbox destroys the workspace on the host; the next call gets a new one" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo x > f.txt"}')
{"wait": 1}
$(call_json 2 cleanup_sandbox '{}')
{"wait": 2}
$(call_json 3 cleanup_sandbox '{}')
{"wait": 3}
$(call_json 4 execute_bash_commands '{"code":"ls"}')
EOF
	id1=$(response 1 | jq -r .result.structuredContent.sandbox_id)
	jqe "$(response 2)" ".result.structuredContent == {removed: true, backend: \"local\", sandbox_id: \"$id1\", error: null} and .result.isError != true"
	jqe "$(response 3)" '.result.structuredContent.removed == false'
	jqe "$(response 4)" ".result.structuredContent.stdout == \"\" and .result.structuredContent.sandbox_id != \"$id1\""
	[ ! -e "$SANDBOX_STATE_DIR/$id1" ]
}

@test "bad arguments are isError results, never protocol errors or crashes" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_python '{}')
$(call_json 2 execute_python '{"script":7}')
$(call_json 3 execute_python '{"script":"x","requirements":["--index-url=http://evil"]}')
$(call_json 4 execute_bash_commands '{"code":"true","timeout_s":-1}')
$(call_json 5 execute_bash_commands '{"code":"true","extra":1}')
$(call_json 6 execute_bash_commands '{"code":"a\u0000b"}')
$(call_json 7 cleanup_sandbox '{"x":1}')
$(call_json 8 execute_bash_commands '{"code":"echo still fine"}')
$(call_json 9 execute_python '{"script":"x","requirements":["foo #\u0000\n--index-url http://127.0.0.1:9/simple"]}')
$(call_json 10 execute_python '{"script":"print(1)\u0000print(2)"}')
EOF
	jqe "$(response 1)" '.result.isError == true and (.result.content[0].text | test("script: is required"))'
	jqe "$(response 2)" '.result.isError == true and (.result.content[0].text | test("script: must be a string"))'
	jqe "$(response 3)" '.result.isError == true and (.result.content[0].text | test("requirements\\[0\\]: must be one pip requirement"))'
	jqe "$(response 4)" '.result.isError == true and (.result.content[0].text | test("timeout_s: must be above 0"))'
	jqe "$(response 5)" '.result.isError == true and (.result.content[0].text | test("extra: is not a known argument"))'
	jqe "$(response 6)" '.result.isError == true and (.result.content[0].text | test("NUL"))'
	jqe "$(response 7)" '.result.isError == true'
	jqe "$(response 8)" '.result.structuredContent.stdout == "still fine\n"'
	jqe "$(response 9)" '.result.isError == true and (.result.content[0].text | test("requirements: contains a NUL character"))'
	jqe "$(response 10)" '.result.isError == true and (.result.content[0].text | test("script: contains a NUL character"))'
}

@test "inputs: files (any bytes), env and args reach the code; planted links and FIFOs are replaced, never followed" {
	inputs_run local
	inputs_assert
}

@test "files out and resources, from the official SDK client: an image, every byte through collect, hostile outputs, paged resources" {
	sdk_files "$SANDBOX_MCP" --backend local
}

@test "collect: paths that escape the workspace, contain NUL or are too many are refused before the call runs; the files part keeps the text whole" {
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code": "touch ran1", "collect": ["../etc/passwd"]}')
$(call_json 2 execute_bash_commands '{"code": "touch ran2", "collect": ["/etc/passwd"]}')
$(call_json 3 execute_bash_commands '{"code": "touch ran3", "collect": ["a\u0000b"]}')
$(call_json 4 execute_bash_commands "$(jq -cn '{code: "touch ran4", collect: [range(21) | tostring]}')")
$(call_json 5 execute_bash_commands '{"code": "ls ran* 2>/dev/null | wc -l; mkdir -p .sandbox && echo x > .sandbox/mine", "collect": [".sandbox/mine"]}')
$(call_json 6 execute_bash_commands '{"code": "printf \"a\\0b\"; mkdir -p outputs; echo x > outputs/n.txt"}')
EOF
	text() { response "$1" | jq -r '"\(.result.isError) \(.result.content[0].text)"'; }
	[[ "$(text 1)" == "true Invalid arguments for execute_bash_commands: collect[0]: the path must not contain \".\" or \"..\""* ]]
	[[ "$(text 2)" == "true Invalid arguments for execute_bash_commands: collect[0]: the path must be relative to /workspace"* ]]
	[[ "$(text 3)" == "true Invalid arguments for execute_bash_commands: collect: contains a NUL character"* ]]
	[[ "$(text 4)" == "true Invalid arguments for execute_bash_commands: collect: has more than 20 items"* ]]
	# None of them ran; a read-only path in the server's own folder may be collected.
	jqe "$(response 5)" '.result.structuredContent.stdout == "0\n" and .result.structuredContent.artifacts == [
		{path: ".sandbox/mine", uri: "sandbox://workspace/.sandbox/mine", size: 2, mime_type: "text/plain",
		 shown: "text", note: null, text: "x\n"}]'
	# The files part follows a text block that holds a NUL byte, whole.
	jqe "$(response 6)" '.result.content[0].text | endswith("--- stdout ---\na\u0000b\n--- stderr: empty ---\n--- files ---\noutputs/n.txt (text/plain, 2 bytes): its text follows\nx\n")'
}

@test "files out: a file the previous call wrote is not returned again by a call right after it" {
	script=$(
		echo "$INIT"
		for i in 1 2 3 4 5; do
			call_json $((2 * i)) execute_bash_commands "{\"code\": \"mkdir -p outputs; echo $i > outputs/a.txt\"}"
			echo "{\"wait\": $((2 * i))}"
			call_json $((2 * i + 1)) execute_bash_commands '{"code": "true"}'
			echo "{\"wait\": $((2 * i + 1))}"
		done
	)
	mcp_session <<<"$script"
	for i in 1 2 3 4 5; do
		jqe "$(response $((2 * i)))" '.result.structuredContent.artifacts | length == 1 and .[0].text == "'$i'\n"'
		jqe "$(response $((2 * i + 1)))" '.result.structuredContent | has("artifacts") | not'
	done
}

@test "files out: a file with no room inline is linked and the next one still fits; a name's control bytes are escaped in the text" {
	# --result-max 8K leaves 2 KiB for files: a 3 KiB binary is linked, not inlined, and
	# the small text after it in path order is still shown inline.
	tool execute_bash_commands '{"code": "mkdir -p outputs; head -c 3000 /dev/zero > outputs/a.bin; printf hi > \"outputs/b\nc.txt\""}' --result-max 8K
	sc '[.artifacts[] | [.path, .shown]] == [["outputs/a.bin", "link"], ["outputs/b\nc.txt", "text"]]'
	sc '.artifacts[0].note | test("no room")'
	text=$(jq -r '.content[0].text' <<<"$result")
	[[ "$text" == *'outputs/b\nc.txt (text/plain, 2 bytes): its text follows'* ]]
	[[ "$text" != *"more file"* ]]
}

@test "resources/list: names resources/read would refuse are left out and counted; a page stays small whatever the names" {
	ws="$BATS_TEST_TMPDIR/ws"
	long=$(printf 'n%.0s' $(seq 200))
	code="printf x > \$'bad\nname'; for i in \$(seq 1 60); do d=$long/$long/$long/$long; mkdir -p \$d; printf x > \$d/f\$i; done; printf x > ok.txt"
	mcp_session --workspace "$ws" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")" \
		'{"wait": 1}' '{"jsonrpc":"2.0","id":2,"method":"resources/list"}')"
	page=$(response 2)
	# 60 names of 800 bytes (their URIs too) do not fit one page of 64 KiB.
	jqe "$page" '(.result.resources | length) < 61 and (.result.nextCursor | type == "string") and (.result | has("_meta") | not)'
	[ "$(printf '%s' "$page" | wc -c)" -lt 140000 ]
	cursor=$(jq -r '.result.nextCursor' <<<"$page")
	mcp_session --workspace "$ws" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/list\",\"params\":{\"cursor\":\"$cursor\"}}")"
	# The rest, the name with a newline left out, and the last page says so.
	all=$(jq -c --argjson p "$page" '$p.result.resources + .result.resources | map(.name)' <<<"$(response 2)")
	jqe "$all" 'length == 61 and (map(test("\n")) | any | not) and index("ok.txt") != null'
	jqe "$(response 2)" '(.result | has("nextCursor") | not) and (.result._meta["sandbox-mcp/partial"] | test("^1 file with control bytes"))'
}

@test "resources/list: pages name each file once while files come and go between them; a cursor the server did not make gets -32602" {
	helper="$REPO_DIR/build/test-helper"
	[ -x "$helper" ] || skip_or_fail "build/test-helper is missing (make)"
	list() { jq -cn --argjson id "$1" --arg c "$2" '{jsonrpc: "2.0", id: $id, method: "resources/list"} + (if $c == "" then {} else {params: {cursor: $c}} end)'; }
	c100=$("$helper" cursor make f100)
	c200=$("$helper" cursor make f200)
	forged=$("$helper" cursor make f100 | sed 's/ZjEwMA==$/ZjEwMQ==/')
	mcp_session <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_bash_commands '{"code": "for i in $(seq -w 1 250); do printf x > f$i; done"}')" '{"wait": 1}' \
		"$(list 2 "")" '{"wait": 2}' "$(list 3 "$c100")" '{"wait": 3}' \
		"$(call_json 4 execute_bash_commands '{"code": "rm f201 f202 f050; printf y > e1; printf y > h1"}')" '{"wait": 4}' \
		"$(list 5 "$c200")" '{"wait": 5}' \
		"$(list 6 100)" "$(list 7 "$forged")" "$(list 8 "a0000")" '{"jsonrpc":"2.0","id":9,"method":"resources/list","params":{"cursor":7}}')"
	# Pages of 100 in path order; each cursor names where its page stopped.
	jqe "$(response 2)" "(.result.resources | length) == 100 and .result.resources[0].name == \"f001\" and .result.nextCursor == \"$c100\""
	jqe "$(response 3)" "(.result.resources | length) == 100 and .result.resources[0].name == \"f101\" and .result.nextCursor == \"$c200\""
	# After the call: f050 was listed before it went, f201 and f202 went before they were
	# reached, e1 sorts before where the listing stands, h1 after it.
	all=$(printf '%s\n' "$(response 2)" "$(response 3)" "$(response 5)" | jq -sc 'map(.result.resources[].name)')
	want=$(jq -cn '[range(1; 251) | tostring | ("f" + ("00" + . | .[-3:]))] - ["f201", "f202"] + ["h1"]')
	[ "$all" = "$want" ]
	jqe "$(response 5)" '.result | has("nextCursor") | not'
	for id in 6 7 8 9; do
		jqe "$(response "$id")" '.error.code == -32602 and (.error.message | test("cursor"))'
	done
}

@test "resources: list_changed follows the response of the call that changed the tree, and its batch's whole array" {
	# The batch's first call changes the tree; its second, run after it, leaves it.
	batch=$(jq -cn --argjson a "$(call_json 3 execute_bash_commands '{"code": "echo b > b.txt"}')" \
		--argjson b "$(call_json 4 execute_bash_commands '{"code": "true"}')" '[$a, $b]')
	# Batches are of 2025-03-26, whose clients have list_changed too.
	init=${INIT/2025-06-18/2025-03-26}
	mcp_session <<<"$(printf '%s\n' "$init" "$INITIALIZED" '{"jsonrpc":"2.0","id":1,"method":"resources/list"}' '{"wait": 1}' \
		"$(call_json 2 execute_bash_commands '{"code": "echo a > a.txt"}')" '{"wait": 2}' '{"wait_line": "list_changed"}' "$batch")"
	# The lines in order: the call's response, a list_changed, the batch's array, a list_changed.
	order=$(printf '%s\n' "$output" | jq -r 'if type == "array" then "batch" elif .id == 2 then "call" elif .method == "notifications/resources/list_changed" then "changed" else empty end' | tr '\n' ' ')
	[ "$order" = "call changed batch changed " ]
}

@test "inputs: the limits of files, env and args are refused with the limit named" {
	head -c 4500000 /dev/zero | tr '\0' a >"$BATS_TEST_TMPDIR/big"
	many=$(jq -cn '[range(101)] | map({key: "f\(.)", value: "x"}) | from_entries')
	long=$(printf 'd/%.0s' $(seq 600))x
	mcp_session <<EOF
$INIT
$(jq -cn --rawfile b "$BATS_TEST_TMPDIR/big" '{jsonrpc: "2.0", id: 1, method: "tools/call", params: {name: "execute_bash_commands", arguments: {code: "true", files: {a: $b, b: $b}}}}')
$(call_json 2 execute_bash_commands "$(jq -cn --argjson m "$many" '{code: "true", files: $m}')")
$(call_json 3 execute_bash_commands "$(jq -cn --arg p "$long" '{code: "true", files: {($p): "x"}}')")
$(call_json 4 execute_bash_commands '{"code": "true", "files": {"a\u0000b": "x"}}' | sed 's/"id":4/"id":null/')
$(call_json 5 execute_bash_commands '{"code": "true", "files": {"a": {"base64": "!!!!"}}}')
$(call_json 6 execute_bash_commands '{"code": "true", "files": {"a": {"text": "x"}}}')
$(call_json 7 execute_bash_commands '{"code": "true", "env": {"1X": "y"}}')
$(call_json 8 execute_bash_commands '{"code": "true", "env": {"PIP_INDEX_URL": "http://evil"}}')
$(call_json 9 execute_python "$(jq -cn '{script: "pass", args: [range(257) | tostring]}')")
$(call_json 10 execute_python "$(jq -cn --arg b "$(head -c 30000 /dev/zero | tr '\0' a)" '{script: "pass", args: [$b, $b, $b]}')")
$(call_json 11 execute_bash_commands '{"code": "true", "args": ["x"]}')
$(call_json 12 execute_bash_commands '{"code": "true", "files": {"/etc/passwd": "x"}}')
$(call_json 13 execute_bash_commands '{"code": "echo $V; cat a", "env": {"V": "ok"}, "files": {"a": "fine\n"}}')
$(call_json 14 execute_bash_commands '{"code": "true", "files": {"../x": "x"}}')
$(call_json 15 execute_bash_commands '{"code": "true", "env": {"http_proxy": "http://p:3128"}}')
$(call_json 16 execute_bash_commands '{"code": "true", "env": {"HOME": "/x"}}')
EOF
	text() { response "$1" | jq -r '"\(.result.isError) \(.result.content[0].text)"'; }
	[[ "$(text 1)" == true*"files: the files add up to more than 8 MiB"* ]]
	[[ "$(text 2)" == true*"files: has more than 100 entries"* ]]
	[[ "$(text 3)" == true*"is longer than 1024 characters"* ]]
	# A NUL in a key cannot be parsed at all (JSON parsers keep keys as C strings).
	jqe "$(response null)" '.error.code == -32700 and (.error.message | test("NUL byte in object key"))'
	# A name the caller chose is quoted, so that a path such as ../x reads as itself.
	[[ "$(text 5)" == true*'files["a"].base64: is not valid base64'* ]]
	[[ "$(text 6)" == true*'files["a"].base64: is required'* ]]
	[[ "$(text 7)" == true*'env["1X"]: must be a variable name'* ]]
	[[ "$(text 8)" == true*'env["PIP_INDEX_URL"]: is a pip setting, which a call may not set'* ]]
	[[ "$(text 9)" == true*"args: has more than 256 items"* ]]
	[[ "$(text 10)" == true*"args: the arguments add up to more than 64 KiB"* ]]
	[[ "$(text 11)" == true*"args: is not a known argument"* ]]
	[[ "$(text 12)" == true*'files["/etc/passwd"]: the path must be relative to /workspace'* ]]
	[[ "$(text 14)" == true*'files["../x"]: the path '* ]]
	# The sandbox does not set http_proxy for the code: it is refused for what it is.
	[[ "$(text 15)" == true*'env["http_proxy"]: is a proxy variable, which a call may not set: the network the code may reach is the server'"'"'s --network policy alone'* ]]
	[[ "$(text 16)" == true*'env["HOME"]: is set by the sandbox and cannot be changed'* ]]
	jqe "$(response 13)" '.result.structuredContent.stdout == "ok\nfine\n"'
}

@test "a result whose texts are not valid UTF-8 is still answered, repaired" {
	# A state folder whose name is not UTF-8, fine at start-up and replaced by a file before
	# the first call: the call's error names it. The two are exchanged in one step
	# (renameat2's RENAME_EXCHANGE): a server that makes its state folder where there is none
	# (its start-up reaping, say) never finds a moment without one.
	export SANDBOX_STATE_DIR="$BATS_TEST_TMPDIR/"$'\xff\xfe'
	mkdir -m 700 "$SANDBOX_STATE_DIR"
	cat >"$BATS_TEST_TMPDIR/swap.py" <<'PY'
import ctypes, os
d = os.environb[b"SANDBOX_STATE_DIR"]
open(d + b".file", "wb").close()
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, d + b".file", -100, d, 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
    raise OSError(ctypes.get_errno(), "renameat2")
PY
	gone=$(jq -cn --arg py "$BATS_TEST_TMPDIR/swap.py" '{sh: ("python3 \"" + $py + "\" && [ -f \"$SANDBOX_STATE_DIR\" ]")}')
	mcp_session --no-sandbox-ahead <<<"$(printf '%s\n' "$INIT" '{"wait": "init"}' "$INITIALIZED" "$gone" \
		"$(call_json 1 execute_bash_commands '{"code":"true"}')")"
	result=$(response 1 | jq -c .result)
	sc '.exit_code == 1 and (.error | test("\ufffd")) and (.stderr | startswith("Failed to initialize sandbox engine: "))'
}

@test "no backend: exit 1 and stderr 'Failed to initialize sandbox engine: ' with each backend's reason" {
	command -v unshare >/dev/null || skip_or_fail "unshare(1) is missing"
	# A user namespace whose own user-namespace quota is 0: the local backend cannot start.
	run unshare --user --map-root-user sh -c 'echo 0 > /proc/sys/user/max_user_namespaces && echo ok'
	[ "$output" = ok ] || skip_or_fail "cannot lower user.max_user_namespaces in a child namespace here"
	run env SANDBOX_BACKEND=auto DAYTONA_API_KEY= DOCKER_HOST=unix:///nonexistent/docker.sock \
		python3 "$SESSION" --stderr "$SERVER_LOG" -- unshare --user --map-root-user sh -c \
		'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0"' "$SANDBOX_MCP" \
		<<<"$(printf '%s\n%s\n' "$INIT" "$(call_json 1 execute_bash_commands '{"code":"true"}')")"
	[ "$status" -eq 0 ]
	res 1
	sc '.exit_code == 1 and .backend == null and .sandbox_id == null'
	# The backends set up here (DOCKER_HOST names an engine) lead; those that are not, follow.
	sc '.stderr | startswith("Failed to initialize sandbox engine: docker: ")'
	sc '.stderr | test("; local: user namespaces are disabled")'
	sc '.stderr | endswith("; daytona: DAYTONA_API_KEY is not set; kubernetes: not configured (--kube-namespace)")'
	sc '.error | startswith("Failed to initialize sandbox engine: ")'
	jqe "$result" '.isError == true'
}

@test "auto logs why it passed over each backend, also when the sandbox is made ahead, and the call says so of one set up here" {
	# The call waits until the sandbox was made ahead.
	SANDBOX_BACKEND=auto DAYTONA_API_KEY= DOCKER_HOST=unix:///nonexistent/docker.sock mcp_session <<-EOF
		$INIT
		$INITIALIZED
		{"until": "grep -q 'made ahead on the local backend' $SERVER_LOG"}
		$(call_json 1 execute_bash_commands '{"code":"true"}')
	EOF
	result=$(response 1 | jq -c .result)
	grep -q 'info: backend auto: passed over daytona: DAYTONA_API_KEY is not set' "$SERVER_LOG"
	grep -q 'warning: backend auto: passed over docker: .*/nonexistent/docker.sock' "$SERVER_LOG"
	# DOCKER_HOST is the user's: the call learns its code ran locally. No key: Daytona is not named.
	sc '.exit_code == 0 and .backend == "local"'
	sc '.notice | test("^--backend auto passed over what is set up here [(]docker: no Docker engine socket at /nonexistent/docker.sock.*[)]; this call ran on the local backend instead[.]$")'
	sc '.notice | contains("daytona") | not'
}

@test "a named backend that cannot start says why and does not fall back" {
	DAYTONA_API_KEY= tool execute_bash_commands '{"code":"true"}' --backend daytona
	sc '.exit_code == 1 and .stderr == "Failed to initialize sandbox engine: daytona: DAYTONA_API_KEY is not set"'
	sc '.backend == null'
	jqe "$result" '.isError == true'
}

# shutdown_case STEP [SERVER ARGS...]
shutdown_case() {
	local step=$1
	shift
	marker="sbx-shutdown-$$-$RANDOM"
	mcp_session "$@" <<EOF
$INIT
$(call_json 1 execute_bash_commands "$(bash_args "echo x > f; setsid $(sleeper "$marker") & $(sleeper "$marker")")")
$(until_running "$marker")
$step
{"expect_exit": 5}
EOF
	exit_line=$(printf '%s\n' "$output" | jq -c 'select(.exit != null)')
	jqe "$exit_line" '.exit == 0 and .exit_after_ms < 2000'
	[ "$(host_procs "$marker")" -eq 0 ]
	[ -z "$(sandbox_dirs)" ]
}

@test "shutdown on stdin EOF within 2 s with --shutdown-budget 0: call killed, sandbox and workspace removed" {
	shutdown_case '{"close": true}' --shutdown-budget 0
}

@test "shutdown on SIGTERM within 2 s" {
	shutdown_case '{"signal": "TERM"}'
}

@test "shutdown on SIGINT within 2 s" {
	shutdown_case '{"signal": "INT"}'
}

@test "--keep keeps the workspace at shutdown" {
	tool execute_bash_commands '{"code":"echo kept > k.txt"}' --keep
	d=$(sandbox_dirs)
	[ -n "$d" ]
	[ "$(cat "$d/workspace/k.txt")" = kept ]
	grep -q "kept the workspace" "$SERVER_LOG"
}

# Not root, what the server bound into the sandbox is in a folder on /dev/shm: it goes at
# shutdown, the kept workspace stays.
@test "not root: --keep keeps the workspace at shutdown, and nothing on /dev/shm" {
	unprivileged_server
	tool execute_bash_commands '{"code":"echo kept > k.txt"}' --keep
	d=$(sandbox_dirs)
	[ -n "$d" ]
	[ "$(cat "$d/workspace/k.txt")" = kept ]
	grep -q "kept the workspace" "$SERVER_LOG"
	[ ! -e "$d/host" ]
	no_shm_left
	unprivileged_cleanup
}

@test "a killed server's sandbox dies with it and its folder is removed by the next server" {
	marker="sbx-crash-$$-$RANDOM"
	# stalls on purpose: the session stays open while the test kills its server
	script=$(printf '%s\n%s\n{"sleep": 60}\n' "$INIT" "$(call_json 1 execute_bash_commands "$(bash_args "$(sleeper "$marker")")")")
	python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$BATS_TEST_TMPDIR/pid" -- "$SANDBOX_MCP" \
		>/dev/null 2>&1 <<<"$script" &
	eventually 60 marker_procs "$marker"
	old=$(sandbox_dirs)
	[ -n "$old" ]
	kill -9 "$(cat "$BATS_TEST_TMPDIR/pid")"
	eventually 30 no_marker_procs "$marker"
	[ -d "$old" ]
	# The next server removes it at start-up, before any call.
	mcp_session <<<"$INIT"
	[ ! -e "$old" ]
	grep -q "left by a server that is gone" "$SERVER_LOG"
	# ...and the dead server's cgroups too.
	[ -z "$(find /sys/fs/cgroup -maxdepth 4 -name "sandbox-mcp-$(cat "$BATS_TEST_TMPDIR/pid")-*" 2>/dev/null)" ]
	kill %1 2>/dev/null || true
}

no_live_processes() { # UID
	[ -z "$(ps -e -o uid=,stat=,args= | awk -v u="$1" '$1 == u && $2 !~ /^Z/')" ]
}

# Not root, the workspace's tmpfs lives in a holder process of its own (ps names it): it dies
# with a server killed with SIGKILL, as the sandbox does.
@test "not root: a killed server's sandbox and its workspace's holder die with it" {
	unprivileged_server
	marker="sbx-crash-$$-$RANDOM"
	# stalls on purpose: the session stays open while the test kills its server
	script=$(printf '%s\n%s\n{"sleep": 60}\n' "$INIT" "$(call_json 1 execute_bash_commands "$(bash_args "$(sleeper "$marker")")")")
	python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$BATS_TEST_TMPDIR/pid" -- "$SANDBOX_MCP" \
		>/dev/null 2>&1 <<<"$script" &
	eventually 60 marker_procs "$marker"
	sandbox_processes "$UNPRIV_UID" | grep -q "sandbox-mcp: the workspace's tmpfs of local-[0-9a-f]*$"
	# Its files bound into the sandbox are in a folder of its own on /dev/shm.
	shm=$(shm_folders)
	[ -n "$shm" ]
	kill -9 "$(cat "$BATS_TEST_TMPDIR/pid")"
	# Dead: at most zombies, for whatever adopted them to reap.
	eventually 5 no_live_processes "$UNPRIV_UID"
	kill %1 2>/dev/null || true
	# The next server removes the dead one's folder at start-up, the one on /dev/shm with it.
	[ -d "$shm" ]
	mcp_session <<<"$INIT"
	grep -q "left by a server that is gone" "$SERVER_LOG"
	no_shm_left
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	unprivileged_cleanup
}

@test "the unprivileged path: a non-root server runs calls in its own sandbox" {
	unprivileged_user || skip_or_fail "cannot create a test user"
	command -v setpriv >/dev/null || skip_or_fail "setpriv(1) is missing"
	# The system's python3: root's may be a per-user shim (pyenv) the test user cannot run.
	[ -x /usr/bin/python3 ] || skip_or_fail "/usr/bin/python3 is missing"
	dir=$(mktemp -d /tmp/sbx-unpriv.XXXXXX)
	# Everything the test user runs is copied where it may read it: the checkout may be in a
	# folder other users cannot enter (a clone under a mktemp -d folder, /root).
	mkdir -p "$dir/tests/lib" "$dir/schemas"
	cp "$SESSION" "$dir/tests/lib/" && cp "$REPO_DIR"/schemas/*.json "$dir/schemas/" && cp "$SANDBOX_MCP" "$dir/sandbox-mcp"
	chmod -R a+rX "$dir" && chown "$UNPRIV_USER:" "$dir"
	run setpriv --reuid="$UNPRIV_USER" --regid="$UNPRIV_USER" --clear-groups env SANDBOX_STATE_DIR="$dir/state" HOME=/nonexistent \
		/usr/bin/python3 "$dir/tests/lib/session.py" --stderr "$dir/log" -- "$dir/sandbox-mcp" \
		<<<"$(printf '%s\n%s\n' "$INIT" "$(call_json 1 execute_bash_commands '{"code":"id -u; grep CapEff /proc/self/status; echo hi > f; cat f"}')")"
	[ "$status" -eq 0 ] || { cat "$dir/log"; false; }
	result=$(response 1 | jq -c .result)
	# Without root there is no image to make: the workspace is a tmpfs of the quota.
	run setpriv --reuid="$UNPRIV_USER" --regid="$UNPRIV_USER" --clear-groups env SANDBOX_STATE_DIR="$dir/state" HOME=/nonexistent \
		"$dir/sandbox-mcp" --check --backend local
	rm -rf "$dir"
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"disk        256 MiB    the workspace is a tmpfs of its own (memory, not disk; at most half of --memory)"* ]]
	sc '.stdout == "1000\nCapEff:\t0000000000000000\nhi\n" and .exit_code == 0'
}

@test "ps shows what the server is doing: idle with a sandbox made ahead, the running call, idle with its sandbox" {
	local t="$BATS_TEST_TMPDIR/title.sh"
	printf 'tr "\\000" " " </proc/$(cat %s)/cmdline\n' "$BATS_TEST_TMPDIR/pid" >"$t"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$BATS_TEST_TMPDIR/pid" -- "$SANDBOX_MCP" <<EOF2
$INIT
{"until": "sh $t | grep -q '^sandbox-mcp: idle, sandbox local-[0-9a-f]* made ahead'"}
$(call_json 1 execute_bash_commands '{"code":"sleep 60","timeout_s":5}')
{"until": "sh $t | grep -q '^sandbox-mcp: running call 1 (execute_bash_commands)'"}
{"wait": 1}
{"until": "sh $t | grep -qE '^sandbox-mcp: idle, sandbox local-[0-9a-f]+ *$'"}
EOF2
	echo "$output"
	[ "$status" -eq 0 ]
	jqe "$(response 1)" '.result.structuredContent.timed_out'
}
