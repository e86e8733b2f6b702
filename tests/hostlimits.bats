# The local backend against what its host imposes or leaves behind: scheduling policies, file
# descriptor limits, a full state folder's disk, servers killed while they make a sandbox, and
# servers in other PID namespaces.
load lib/helpers

# What a failed test's servers left under its state folder goes, so that the next starts clean.
teardown() {
	local bin p
	bin=$(readlink -f "$SANDBOX_MCP")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$bin" ] && [ -n "$(find "$p/fd" -lname "$SANDBOX_STATE_DIR/*" 2>/dev/null)" ] &&
			kill -KILL "${p#/proc/}" 2>/dev/null
	done
	awk -v s="$SANDBOX_STATE_DIR/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r umount -l
	[ -z "${SMALL:-}" ] || umount -l "$SMALL"
}

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

# What of this test's state folder is still there: its entries, the mounts and loop devices
# under it, and the processes of the binary under test that this test made (the servers killed,
# the sandboxes' first processes made from them). One line each; nothing when all is gone.
state_leftovers() {
	local bin
	bin=$(readlink -f "$SANDBOX_MCP")
	ls -A "$SANDBOX_STATE_DIR" | sed 's/^/entry /'
	awk -v s="$SANDBOX_STATE_DIR" 'index($5, s) == 1 {print "mount " $5}' /proc/self/mountinfo
	for f in /sys/block/loop*/loop/backing_file; do
		[ -r "$f" ] && grep -q "^$SANDBOX_STATE_DIR/" "$f" && echo "loop $f $(cat "$f")"
	done
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$bin" ] && of_this_test "${p#/proc/}" &&
			echo "process ${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
	done
	return 0
}

# of_this_test PID: a process of the binary under test that this test made: in this test's
# session (the servers it started), or a sandbox's first process (a PID namespace of its own)
# that no live server owns, which a killed server's death hands to init. Another file's servers,
# running at the same time, are in sessions of their own, and their sandboxes' first processes
# are their children.
of_this_test() {
	[ "$(awk '{ sub(/.*\) /, ""); print $4 }' "/proc/$1/stat" 2>/dev/null)" = "$(awk '{ sub(/.*\) /, ""); print $4 }' /proc/$$/stat)" ] ||
		{ [ "$(awk '$1 == "NSpid:" {print NF - 1}' "/proc/$1/status" 2>/dev/null)" = 2 ] && ! of_live_server "$1"; }
}

# of_live_server PID: whether an ancestor of PID runs the binary under test.
of_live_server() {
	local bin pid
	bin=$(readlink -f "$SANDBOX_MCP")
	pid=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$1/stat" 2>/dev/null)
	while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
		[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$bin" ] && return 0
		pid=$(awk '{ sub(/.*\) /, ""); print $2 }' "/proc/$pid/stat" 2>/dev/null)
	done
	return 1
}

# cgroups_of PID...: the cgroups that the servers of these pids made, wherever they are.
cgroups_of() {
	local pid
	for pid in "$@"; do
		find /sys/fs/cgroup -maxdepth 5 -type d -name "sandbox-mcp-$pid-*" 2>/dev/null
	done
}

nothing_left() {
	[ -z "$(state_leftovers)$(cgroups_of "$@")" ]
}

@test "servers killed at any point of making a sandbox leave nothing once the next server has started" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "as root the sandbox has mounts, a loop device and cgroups to leave"
	local fifo="$BATS_TEST_TMPDIR/in" pids=() i pid
	mkfifo "$fifo"
	# 40 servers, each killed a little later after its start than the one before (0 to 780 ms):
	# before, during and after the sandbox is made ahead and the first call runs in it.
	for i in $(seq 0 39); do
		"$SANDBOX_MCP" <"$fifo" >"$BATS_TEST_TMPDIR/out" 2>>"$SERVER_LOG" &
		pid=$!
		exec 6>"$fifo"
		printf '%s\n%s\n' "$INIT" "$(call_json 1 execute_bash_commands '{"code":"echo hi > f"}')" >&6
		sleep "$(awk -v i="$i" 'BEGIN {printf "%.2f", i * 0.02}')"
		# The last one once its call is answered, however slow the machine: a whole sandbox.
		[ "$i" -lt 39 ] || eventually 60 grep -q '"id":1' "$BATS_TEST_TMPDIR/out"
		kill -KILL "$pid"
		wait "$pid" || true # killed on purpose
		exec 6>&-
		pids+=("$pid")
	done
	# They left something (the last a whole sandbox) that only the next server on the folder removes.
	[ -n "$(ls -A "$SANDBOX_STATE_DIR")" ]
	mcp_session <<<"$INIT"
	eventually 30 nothing_left "${pids[@]}" || {
		state_leftovers
		cgroups_of "${pids[@]}"
		false
	}
}

# first_process_of PID: the sandbox's first process that the server PID cloned, before it
# executes the agent: a live child running the server's binary in a PID namespace of its own.
first_process_of() {
	local bin c
	bin=$(readlink -f "$SANDBOX_MCP")
	for c in $(pgrep -P "$1"); do
		[ "$(readlink "/proc/$c/exe" 2>/dev/null)" = "$bin" ] &&
			[ "$(awk '$1 == "NSpid:" {print NF - 1}' "/proc/$c/status" 2>/dev/null)" = 2 ] &&
			! grep -q '^State:.*Z' "/proc/$c/status" && echo "$c"
	done
	return 0
}

tracer_gone() {
	! kill -0 "$1" 2>/dev/null
}

has_first_process() {
	[ -n "$(first_process_of "$1")" ]
}

@test "a server killed between cloning the sandbox's first process and telling it to go leaves nothing" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "as root the sandbox has mounts, a loop device and cgroups to leave"
	command -v strace >/dev/null || skip_or_fail "strace(1) is needed to hold the server right after its clone"
	local fifo="$BATS_TEST_TMPDIR/in" pid tracer
	mkfifo "$fifo"
	# strace holds every clone(2) of the server for 3 s once it returns: the sandbox's first
	# process is made and waits for the server's go, which the server is killed before giving.
	strace -f -qq -o /dev/null -e trace=clone -e inject=clone:delay_exit=3000000 \
		"$SANDBOX_MCP" <"$fifo" >/dev/null 2>>"$SERVER_LOG" &
	tracer=$!
	exec 6>"$fifo"
	printf '%s\n%s\n' "$INIT" "$(call_json 1 execute_bash_commands '{"code":"echo hi"}')" >&6
	eventually 10 pgrep -P "$tracer" -x sandbox-mcp
	pid=$(pgrep -P "$tracer" -x sandbox-mcp)
	eventually 30 has_first_process "$pid"
	kill -KILL "$pid"
	# strace ends with its last tracee: the first process, unless it outlives its server.
	eventually 5 tracer_gone "$tracer" || kill -KILL "$tracer"
	wait "$tracer" || true # its tracee was killed
	exec 6>&-
	mcp_session <<<"$INIT"
	eventually 30 nothing_left "$pid" || {
		state_leftovers
		cgroups_of "$pid"
		false
	}
}

# A pid that no process has on this host (nor had lately): what a server in a PID namespace of
# its own may well be numbered there.
free_pid() {
	local p
	for _ in $(seq 50); do
		p=$((300000 + RANDOM * 8 + RANDOM % 8))
		[ "$p" -lt "$(cat /proc/sys/kernel/pid_max)" ] || p=$((p % 30000 + 1000))
		kill -0 "$p" 2>/dev/null || { echo "$p"; return 0; }
	done
	return 1
}

@test "a server in a PID namespace of its own keeps its sandbox when a server with another state folder starts" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make a PID namespace and cgroups"
	unshare -p -f --mount-proc true 2>/dev/null || skip_or_fail "unshare(1) cannot make a PID namespace here"
	local pid flag="$BATS_TEST_TMPDIR/second-started" other="$BATS_TEST_TMPDIR/other-state"
	pid=$(free_pid)
	mkdir -m 700 "$other"
	# A second server starts on the host, on another state folder, while the first's sandbox lives.
	printf '%s\n' "$INIT" >"$BATS_TEST_TMPDIR/init"
	second="SANDBOX_STATE_DIR='$other' python3 '$SESSION' --stderr '$BATS_TEST_TMPDIR/second.log' -- '$SANDBOX_MCP' \
<'$BATS_TEST_TMPDIR/init' >/dev/null && touch '$flag'"
	# The first server runs as pid $pid of its namespace, a pid that nothing has on the host; its
	# sandbox's cgroups are named with it.
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 120 -- unshare -p -f --mount-proc \
		bash -c 'echo $(($1 - 1)) > /proc/sys/kernel/ns_last_pid && ("$2")' - "$pid" "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo kept > f"}')
{"wait": 1}
{"sh": "find /sys/fs/cgroup -maxdepth 5 -name 'sandbox-mcp-$pid-local-*' | grep -q ."}
$(jq -cn --arg c "$second" '{sh: $c}')
$(call_json 2 execute_bash_commands '{"code":"cat f"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	[ -e "$flag" ]
	res 1
	sc '.exit_code == 0'
	id1=$(printf '%s' "$result" | jq -r .structuredContent.sandbox_id)
	res 2
	sc ".exit_code == 0 and .stdout == \"kept\n\" and .sandbox_id == \"$id1\" and .notice == null"
}

@test "a folder a server died making (its temporary name) is removed by the next server, never one being made" {
	local dead="$SANDBOX_STATE_DIR/new-local-0000dead" making="$SANDBOX_STATE_DIR/new-local-0000beef"
	mkdir "$dead" && : >"$dead/lock"
	mcp_session <<<"$INIT"
	[ ! -e "$dead" ]
	grep -q "removed $dead, left by a server that is gone" "$SERVER_LOG"
	# While a server makes one, it holds the state folder's lock shared: the folder stays.
	mkdir "$making"
	flock -s "$SANDBOX_STATE_DIR" python3 "$SESSION" --stderr "$SERVER_LOG" -- "$SANDBOX_MCP" <<<"$INIT" >/dev/null
	[ -d "$making" ]
}

@test "the install step's proxy out of descriptors (EMFILE) waits for one instead of spinning on accept" {
	local sock="$BATS_TEST_TMPDIR/proxy.sock" in="$BATS_TEST_TMPDIR/proxy.in" out="$BATS_TEST_TMPDIR/proxy.out" px
	mkfifo "$in"
	# 16 descriptors: a few connections fill them, the rest wait in the listener's backlog.
	prlimit --nofile=16 "$REPO_DIR/build/test-helper" proxy "$sock" pypi.org <"$in" >"$out" &
	px=$!
	exec 7>"$in"
	eventually 10 grep -q ready "$out"
	# 40 clients that connect and say nothing (each accepted one holds a descriptor for the
	# proxy's head timeout); the proxy's CPU time over the next second is measured meanwhile.
	run python3 - "$sock" "$px" <<'PY'
import os, socket, sys, time
def ticks(pid):
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
held = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    held.append(s)
time.sleep(0.2)
t0 = ticks(sys.argv[2])
time.sleep(1)
print(ticks(sys.argv[2]) - t0, os.sysconf("SC_CLK_TCK"))
PY
	echo "$output"
	exec 7>&-
	wait "$px"
	[ "$status" -eq 0 ]
	read -r used hz <<<"$output"
	# A spinning accept loop takes the whole second; waiting, next to nothing.
	[ "$used" -lt $((hz / 10)) ]
}

@test "an open files limit too small to work (20, 32, 63) is refused at start-up, naming it; nothing is made" {
	local n
	for n in 20 32 63; do
		run prlimit --nofile="$n" "$SANDBOX_MCP" <<<"$INIT"
		echo "$n: $output"
		[ "$status" -eq 2 ]
		[ "$output" = "sandbox-mcp: the open files limit is $n (ulimit -Hn): the server needs at least 64; raise it (ulimit -n 64, or LimitNOFILE= in a systemd unit)" ]
	done
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
}

@test "a small soft open files limit under a larger hard one is raised: calls work" {
	local n
	for n in 20 63; do
		run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 -- prlimit --nofile="$n:4096" "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"ulimit -n; echo hi"}')
EOF
		echo "$output"
		[ "$status" -eq 0 ]
		res 1
		sc '.exit_code == 0 and .stdout == "1024\nhi\n"'
	done
}

@test "a hard open files limit below --open-files: calls get the hard limit, and the log and --check say so" {
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 -- prlimit --nofile=256:512 "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"ulimit -n; echo hi"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	res 1
	sc '.exit_code == 0 and .stdout == "512\nhi\n"'
	grep -q "warning: the sandbox's calls may open 512 files, this server's hard limit (ulimit -Hn), not --open-files 1024" "$SERVER_LOG"
	run prlimit --nofile=256:512 "$SANDBOX_MCP" --check
	echo "$output"
	[[ "$output" == *"open files  512        rlimit (RLIMIT_NOFILE): the server's hard limit, below --open-files 1024"* ]]
}

# small_state SIZE: this test's state folder on a tmpfs of SIZE of its own (unmounted by teardown).
small_state() {
	SMALL="$BATS_TEST_TMPDIR/small"
	mkdir -p "$SMALL"
	mount -t tmpfs -o "size=$1" tmpfs "$SMALL" || skip_or_fail "cannot mount a tmpfs here"
	mkdir -m 700 "$SMALL/state"
	export SANDBOX_STATE_DIR="$SMALL/state"
}

@test "as root, a workspace image is reserved on the host: a full state folder costs the code no write it was told succeeded" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "the workspace is an image as root only"
	small_state 128m
	local py='import hashlib, os, sys
data = os.urandom(40 << 20)
with open("f", "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
# Read back past every cache: what the host holds of the image.
fd = os.open("f", os.O_RDONLY | os.O_DIRECT)
buf = bytearray()
m = __import__("mmap").mmap(-1, 1 << 20)
while True:
    n = os.readv(fd, [m])
    if n <= 0:
        break
    buf += m[:n]
print(hashlib.sha256(data).hexdigest() == hashlib.sha256(buf).hexdigest())'
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 120 -- "$SANDBOX_MCP" --workspace-size 64M <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"true"}')
{"wait": 1}
{"sh": "dd if=/dev/zero of=$SMALL/filler bs=1M 2>/dev/null; test \$(stat -fc %a $SMALL) -lt 8"}
$(call_json 2 execute_python "$(jq -cn --arg s "$py" '{script: $s}')")
$(call_json 3 execute_bash_commands '{"code":"dd if=/dev/zero of=g bs=1M count=40 2>&1; sync; echo synced $?"}')
$(call_json 4 execute_python "$(jq -cn '{script: "import hashlib; print(len(open(\"f\", \"rb\").read()) == 40 << 20)"}')")
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	res 2
	sc '.exit_code == 0 and .stdout == "True\n"'
	res 3
	sc '.stdout | test("No space left on device")'
	res 4
	sc '.exit_code == 0 and .stdout == "True\n"'
	grep -q "disk        64 MiB     the workspace is an ext4 image of its own, its blocks reserved on the host (loop device): the code gets ENOSPC when it is full" <(SANDBOX_WORKSPACE_SIZE=64M "$SANDBOX_MCP" --check)
}

@test "as root, a state folder without room for the workspace's image: the sandbox is refused, saying why; nothing is left" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "the workspace is an image as root only"
	small_state 48m
	tool execute_bash_commands '{"code":"echo hi"}' --workspace-size 64M
	sc '.exit_code == 1 and (.error | test("reserving the workspace.s 64 MiB \\(--workspace-size\\) on the state folder.s file system, which has [0-9]+ MiB free: No space left on device"))'
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
}
