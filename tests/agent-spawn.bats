# How the agent starts a call's process (agent/sandbox-agent.c, spawn_call): a child that shares
# the agent's memory until its exec (clone with CLONE_VM | CLONE_VFORK). Driven directly over the
# agent's --stdio link (tests/lib/agent-direct.py), the agent as PID 1 of a PID namespace of its
# own, so that its own start can be set up as a runtime might leave it.
load lib/helpers
bats_require_minimum_version 1.5.0

AGENT="$(dirname "$SANDBOX_MCP")/sandbox-agent"

setup() {
	common_setup
	[ -x "$AGENT" ] || skip_or_fail "$AGENT is missing (make)"
	unshare --user --map-root-user --pid --fork --kill-child true 2>/dev/null ||
		skip_or_fail "no user and PID namespaces here (unshare)"
}

direct() { # RUN.json...: the agent's answers, one JSON line per call, then its own state
	run python3 "$REPO_DIR/tests/lib/agent-direct.py" "$AGENT" "$@"
	[ "$status" -eq 0 ]
}

@test "agent-spawn: signals the agent found ignored at its start are at their default in a call, none blocked" {
	direct --ignore SIGPIPE,SIGHUP,SIGUSR2,SIGTERM \
		'{"argv":["/bin/sh","-c","grep -E \"^Sig(Ign|Blk)\" /proc/self/status; yes | head -1"]}'
	jqe "${lines[0]}" '.status == 0 and .err == "" and .out == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\ny\n"'
}

@test "agent-spawn: the C library's own signals (32, 33), found ignored at the agent's start, are at their default in a call too" {
	# glibc's sigaction neither reads nor sets them, yet an ignored one crosses every exec.
	direct --ignore 32,33,SIGPIPE '{"argv":["/bin/sh","-c","grep -E \"^Sig(Ign|Blk)\" /proc/self/status"]}'
	jqe "${lines[0]}" '.status == 0 and .err == "" and .out == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"'
}

@test "agent-spawn: a call's rlimits, folder and failed exec change nothing of the agent's; the next call starts as before" {
	# RLIMIT_NOFILE (7) of 5 in a call would leave the agent, were it shared, no fd for the
	# next call's pipes; its folder /tmp would become the agent's.
	direct '{"argv":["/bin/sh","-c","ulimit -n; pwd"],"rlimits":[[7,5]],"cwd":"/tmp"}' \
		'{"argv":["/nonexistent-program"]}' \
		'{"argv":["/bin/sh","-c","ulimit -n; pwd; echo ok"],"cwd":"/proc"}'
	jqe "${lines[0]}" '.status == 0 and .out == "5\n/tmp\n"'
	jqe "${lines[1]}" '.status == 127 * 256 and .flags == 16 and .err == "sandbox: cannot run /nonexistent-program: No such file or directory\n"'
	jqe "${lines[2]}" '.status == 0 and (.out | test("^[0-9]+\n/proc\nok\n$")) and (.out | startswith("5\n") | not)'
	jqe "${lines[3]}" '.agent_cwd == .agent_cwd_before and .agent_cwd != "/proc" and .agent_nofile != "5"'
}

@test "agent-spawn: a missing program falls back to /bin/sh with the same arguments, and the call after runs its own argv" {
	# The fallback's argv is made by the agent before the child starts: the child writes nothing
	# of the agent's, so the next call's argv[0] is its own.
	direct '{"argv":["/nonexistent-script","-c","echo \"$0 $#\"","zero","one"],"flags":1}' \
		'{"argv":["/bin/sh","-c","echo \"$0\"","again"]}' \
		'{"argv":["/nonexistent-script","-c","echo no"]}'
	jqe "${lines[0]}" '.status == 0 and .flags == 0 and .out == "zero 1\n"'
	jqe "${lines[1]}" '.status == 0 and .out == "again\n"'
	jqe "${lines[2]}" '.status == 127 * 256 and .flags == 16'
}

@test "agent-spawn: many calls in a row each start and end whole (the child's stack is reused)" {
	local runs=() i
	for i in $(seq 1 40); do runs+=("{\"argv\":[\"/bin/echo\",\"call $i\"]}"); done
	direct "${runs[@]}"
	for i in $(seq 1 40); do
		jqe "${lines[i - 1]}" ".status == 0 and .out == \"call $i\n\""
	done
}

@test "agent-spawn: what a call sets on its stdin (/dev/null) ends with it: the next call's is opened anew" {
	# O_NONBLOCK belongs to the open file: a /dev/null kept for every call would carry it over.
	direct '{"argv":["/usr/bin/python3","-c","import os; os.set_blocking(0, False); print(os.get_blocking(0), os.readlink(\"/proc/self/fd/0\"))"]}' \
		'{"argv":["/usr/bin/python3","-c","import os; print(os.get_blocking(0), os.readlink(\"/proc/self/fd/0\"))"]}'
	jqe "${lines[0]}" '.status == 0 and .out == "False /dev/null\n"'
	jqe "${lines[1]}" '.status == 0 and .out == "True /dev/null\n"'
}
