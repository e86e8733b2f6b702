# The local backend against what its host imposes or leaves behind: scheduling policies, file
# descriptor limits, a full state folder's disk, servers killed while they make a sandbox, and
# servers in other PID namespaces.
load lib/helpers

@test "local, under a real-time policy (chrt -f 10): calls work, and the code runs SCHED_OTHER" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to start a server under a real-time policy"
	chrt -f 10 true 2>/dev/null || skip_or_fail "the kernel refuses real-time policies here"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 -- chrt -f 10 "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"chrt -p $$; echo done"}')
$(call_json 2 execute_python '{"script":"import os; print(os.sched_getscheduler(0) == os.SCHED_OTHER)"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	res 1
	sc '.exit_code == 0 and (.stdout | test("policy: SCHED_OTHER\n")) and (.stdout | endswith("done\n"))'
	res 2
	sc '.exit_code == 0 and .stdout == "True\n"'
}
