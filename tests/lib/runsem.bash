# The run-semantics scenario: how a program runs, the same on every backend whatever does the
# running (the agent on local and Docker, the call runner on Daytona): separate streams and exit
# codes, the output cap's head and tail and the spill files, the timeout and the killing of
# every process a call started, deaths by signal, default signal actions, stdin at EOF, bytes
# that are not UTF-8. A traceback is left out: the Daytona test server, a test double, runs the
# code in a folder of its own, which tracebacks name. Load after lib/helpers. runsem_run leaves
# the results in $runsem_res (sorted by id, without where they ran and how long they took);
# runsem_assert checks that they say what they should.

runsem_scenario() {
	echo "$INIT"
	echo "$INITIALIZED"
	local i=0 c
	while IFS= read -r c; do
		i=$((i + 1))
		case $c in
		py:*) call_json "$i" execute_python "$(jq -cn --arg s "$(printf '%b' "${c#py:}")" '{script: $s}')" ;;
		t1:*) call_json "$i" execute_bash_commands "$(jq -cn --arg c "${c#t1:}" '{code: $c, timeout_s: 2}')" ;;
		*) call_json "$i" execute_bash_commands "$(jq -cn --arg c "$c" '{code: $c}')" ;;
		esac
		echo "{\"wait\": $i}"
	done <<'EOF'
echo out; echo err >&2; exit 3
py:import sys\nprint("py")\nprint("e", file=sys.stderr)\nsys.exit(4)
head -c 5000 /dev/zero | tr '\0' a; echo; seq 1 400 >&2
wc -c < .sandbox/output/call-3.stdout; wc -c < .sandbox/output/call-3.stderr
seq 1 100000
t1:echo start; sleep 30
(sleep 300 &) ; setsid sleep 300 & nohup sleep 300 >/dev/null 2>&1 & echo started
for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && echo left; done; echo checked
kill -9 $$
kill -TERM $$
py:import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)
yes | head -n 2; echo "pipe ${PIPESTATUS[*]}"
trap -p; echo "mask $(grep SigBlk /proc/self/status | cut -f2) ign $(grep SigIgn /proc/self/status | cut -f2)"
cat; echo "stdin $?"
printf '\xff\xfeok\n'; printf 'x\x00y' >&2
nosuchcommand
EOF
}

# runsem_run BACKEND [SERVER ARGS...]
runsem_run() {
	local backend=$1
	shift
	SANDBOX_BACKEND=$backend SESSION_TIMEOUT=300 mcp_session --output-cap 1K "$@" < <(runsem_scenario)
	runsem_res=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and (.id | type) == "number")
		| {id, sc: (.result.structuredContent | del(.backend, .sandbox_id, .duration_ms)),
		   text: (.result.content[0].text | sub("^exit_code: (?<c>[0-9]+) [(][^)]*[)]"; "exit_code: \(.c)")),
		   isError: .result.isError}' | jq -sc 'sort_by(.id)')
}

runsem_assert() {
	jqe "$runsem_res" 'length == 16'
	jqe "$runsem_res" '.[0].sc | .exit_code == 3 and .stdout == "out\n" and .stderr == "err\n"'
	jqe "$runsem_res" '.[1].sc | .exit_code == 4 and .stdout == "py\n" and .stderr == "e\n"'
	jqe "$runsem_res" '.[2].sc.truncated | .stdout and .stderr and .stdout_bytes == 5001 and .stderr_bytes == 1492
		and .stdout_file == "/workspace/.sandbox/output/call-3.stdout"'
	jqe "$runsem_res" '.[3].sc.stdout == "5001\n1492\n"'
	jqe "$runsem_res" '.[4].sc | .truncated.stdout and (.stdout | startswith("1\n2\n3\n")) and (.stdout | endswith("99999\n100000\n"))'
	jqe "$runsem_res" '.[5].sc | .timed_out and .exit_code == 124 and .stdout == "start\n"'
	jqe "$runsem_res" '.[6].sc.stdout == "started\n" and .[7].sc.stdout == "checked\n"'
	jqe "$runsem_res" '.[8].sc.exit_code == 137 and .[9].sc.exit_code == 143 and .[10].sc.exit_code == 139'
	jqe "$runsem_res" '.[11].sc | .stdout == "y\ny\npipe 141 0\n" and .stderr == ""'
	jqe "$runsem_res" '.[12].sc.stdout == "mask 0000000000000000 ign 0000000000000000\n"'
	jqe "$runsem_res" '.[13].sc.stdout == "stdin 0\n"'
	jqe "$runsem_res" '.[14].sc | .stdout == "\ufffd\ufffdok\n" and .stderr == "x\u0000y"'
	jqe "$runsem_res" '.[15].sc | .exit_code == 127 and (.stderr | test("nosuchcommand: command not found"))'
}
