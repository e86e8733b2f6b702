# Failure paths of the server and its backends: whatever fails, the server keeps serving.
load lib/helpers

# A copy of the binary that any user may run, wherever the checkout is.
public_binary() {
	PUB=$(mktemp -d /tmp/sbx-faults.XXXXXX)
	chmod 755 "$PUB"
	cp "$SANDBOX_MCP" "$PUB/sandbox-mcp"
	chmod 755 "$PUB/sandbox-mcp"
}

teardown() {
	[ -z "${PUB:-}" ] || rm -rf "$PUB"
	unprivileged_teardown
}

@test "no sandbox can be made (no user namespaces, not root): every call gets the reason, ping still answered" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to run a server without user namespaces"
	public_binary
	mkdir -m 700 "$PUB/state"
	chown 65534:65534 "$PUB/state"
	export SANDBOX_STATE_DIR="$PUB/state"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 30 -- \
		python3 "$TESTS_DIR/lib/no-userns.py" --uid 65534 -- "$PUB/sandbox-mcp" <<EOF2
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code":"echo one"}')
{"wait": 1}
{"jsonrpc":"2.0","id":"p1","method":"ping"}
{"wait": "p1"}
$(call_json 2 execute_python '{"script":"print(2)"}')
{"wait": 2}
{"jsonrpc":"2.0","id":"p2","method":"ping"}
{"jsonrpc":"2.0","id":"l","method":"tools/list"}
EOF2
	[ "$status" -eq 0 ]
	for id in 1 2; do
		res $id
		sc '.exit_code == 1 and .backend == null and (.error | startswith("Failed to initialize sandbox engine: local: "))'
	done
	jqe "$(response '"p1"')" '.result == {}'
	jqe "$(response '"p2"')" '.result == {}'
	jqe "$(response '"l"')" '.result.tools | length == 4'
	# It stopped because stdin closed at the end, not before.
	grep -q "shutting down: stdin closed" "$SERVER_LOG"
}

@test "as root in a plain chroot (its root no mount point): --check says why and how to fix it, and the fix works" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root"
	command -v unshare >/dev/null || skip_or_fail "unshare(1) is missing"
	# A chroot whose root is a folder on a tmpfs, with the host's /usr, /etc, /proc and /dev;
	# $3 (1 or 0) makes that folder a mount point first, as the message says.
	plain_chroot='mount -t tmpfs tmpfs "$1" && mkdir -p "$1/r/usr" "$1/r/etc" "$1/r/proc" "$1/r/dev" "$1/r/tmp" &&
		for d in usr etc proc dev; do mount --rbind "/$d" "$1/r/$d" || exit 9; done &&
		for l in bin lib lib64 sbin; do ln -s "usr/$l" "$1/r/$l"; done && cp "$2" "$1/r/sandbox-mcp" &&
		{ [ "$3" = 0 ] || mount --rbind "$1/r" "$1/r"; } &&
		exec chroot "$1/r" /usr/bin/env SANDBOX_STATE_DIR=/tmp/state /sandbox-mcp --check --backend local'
	mkdir -p "$BATS_TEST_TMPDIR/plain"
	run unshare -m --propagation private sh -c "$plain_chroot" sh "$BATS_TEST_TMPDIR/plain" "$SANDBOX_MCP" 0
	printf '%s\n' "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"the root here is not a mount point (a plain chroot?): make the chroot's folder one before entering it (mount --rbind DIR DIR)"* ]]
	run unshare -m --propagation private sh -c "$plain_chroot" sh "$BATS_TEST_TMPDIR/plain" "$SANDBOX_MCP" 1
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"local    ok"* && "$output" == *"mode        no user namespace"* ]]
}

@test "a sandbox made ahead while the reader and writer threads allocate never deadlocks (40 fresh servers)" {
	# The sandbox's first process is a raw clone of the threaded server: a glibc fork() in it
	# waited forever on a malloc lock another thread held at the clone (3 servers of 40 here).
	SANDBOX_UID=$(free_uid) || skip_or_fail "no free uid for the sandbox user"
	export SANDBOX_UID
	run python3 "$TESTS_DIR/lib/flood.py" "$SANDBOX_MCP" 40
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(tail -1 <<<"$output")" = "answered 40 of 40" ]
	eventually 10 no_sandbox_processes "$SANDBOX_UID"
}

@test "a client that stops reading stdout cannot keep the server from shutting down within 2 s" {
	for how in TERM INT eof; do
		run python3 "$TESTS_DIR/lib/stalled-client.py" "$how" -- "$SANDBOX_MCP" --output-cap 1M --result-max 2M
		echo "$how: $output"
		[ "$status" -eq 0 ]
		jqe "${lines[${#lines[@]}-1]}" '.exit == 0 and .exit_after_ms < 2000'
	done
}

@test "a client that reads nothing for a long time still has its requests read and answered" {
	run python3 "$TESTS_DIR/lib/stalled-client.py" pings -- "$SANDBOX_MCP" --output-cap 1M --result-max 2M
	echo "$output"
	[ "$status" -eq 0 ]
	jqe "${lines[${#lines[@]}-1]}" '.pings_answered == 5000 and .call_answered'
}

@test "EOF: a client that reads slowly, but goes on reading, gets every answer queued for it" {
	run python3 "$TESTS_DIR/lib/stalled-client.py" slow -- "$SANDBOX_MCP" --output-cap 1M --result-max 2M
	echo "$output"
	[ "$status" -eq 0 ]
	# Its reads take seconds, far past the last flush's 250 ms.
	jqe "${lines[${#lines[@]}-1]}" '.pings_answered == 3 and .call_answered and .read_s > 1'
}

# The sandbox's init (sandbox-agent) as a child of the server whose pid is in file $1.
agent_of() {
	pgrep -P "$(cat "$1")" | head -1
}

@test "an agent killed between calls is reaped at once; the next call says its workspace is new" {
	pidf="$BATS_TEST_TMPDIR/server.pid"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo keep > f; echo one"}')
{"wait": 1}
{"sh": "kill -KILL \$(pgrep -P \$(cat $pidf))"}
{"sh": "for i in \$(seq 200); do ps --ppid \$(cat $pidf) -o stat= | grep -q Z || exit 0; sleep 0.05; done; echo 'the dead agent stays a zombie' >&2; exit 1"}
$(call_json 2 execute_bash_commands '{"code":"ls; echo two"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	result=$(response 1 | jq -c .result)
	id1=$(printf '%s' "$result" | jq -r .structuredContent.sandbox_id)
	res 2
	sc ".exit_code == 0 and .stdout == \"two\n\" and .sandbox_id != \"$id1\""
	sc ".notice | test(\"previous sandbox \\\\($id1\\\\) stopped unexpectedly\")"
}

@test "--workspace: a sandbox lost between calls and replaced to answer resources/list leaves its notice to the next call" {
	pidf="$BATS_TEST_TMPDIR/server.pid"
	mkdir "$BATS_TEST_TMPDIR/ws"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" \
		--workspace "$BATS_TEST_TMPDIR/ws" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo keep > f; echo one"}')
{"wait": 1}
{"sh": "kill -KILL \$(pgrep -P \$(cat $pidf))"}
{"sh": "for i in \$(seq 200); do ps --ppid \$(cat $pidf) -o stat= | grep -q Z || exit 0; sleep 0.05; done; echo 'the dead agent stays a zombie' >&2; exit 1"}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
{"wait": 2}
$(call_json 3 execute_bash_commands '{"code":"cat f; echo three"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	id1=$(response 1 | jq -r .result.structuredContent.sandbox_id)
	jqe "$(response 2)" '[.result.resources[].name] | index("f") != null'
	res 3
	sc ".exit_code == 0 and .stdout == \"keep\nthree\n\" and .sandbox_id != \"$id1\""
	sc ".notice | test(\"previous sandbox \\\\($id1\\\\) stopped unexpectedly\")"
}

@test "a sandbox that dies during a call: that call gets the error, the next one the notice" {
	pidf="$BATS_TEST_TMPDIR/server.pid"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo started; sleep 30"}' '{"progressToken":"t"}')
{"wait_line": "\"message\":\"started\""}
{"sh": "kill -KILL \$(pgrep -P \$(cat $pidf))"}
{"wait": 1}
$(call_json 2 execute_bash_commands '{"code":"echo two"}')
EOF
	echo "$output"
	[ "$status" -eq 0 ]
	res 1
	sc '.exit_code == 1 and (.error | test("stopped unexpectedly")) and .notice == null'
	res 2
	sc '.exit_code == 0 and .stdout == "two\n" and (.notice | test("stopped unexpectedly during the previous call"))'
}

@test "a workspace removed on the host between calls is noticed: a fresh sandbox, and a notice" {
	# As root the workspace is an image mounted on its folder: rm empties it and fails only
	# to remove the mount point itself; everything else goes (the lock file too).
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo keep > f; echo one"}')
{"wait": 1}
{"sh": "rm -rf $SANDBOX_STATE_DIR/local-* 2>/dev/null; [ ! -e $SANDBOX_STATE_DIR/local-*/lock ]"}
$(call_json 2 execute_bash_commands '{"code":"ls; echo two"}')
$(call_json 3 execute_bash_commands '{"code":"echo three > g; cat g"}')
EOF
	res 2
	sc '.exit_code == 0 and .stdout == "two\n" and (.notice | test("removed on the host"))'
	res 3
	sc '.exit_code == 0 and .stdout == "three\n" and .notice == null'
}

# Not root, what is bound into the sandbox is in a folder on /dev/shm, which can go on its own
# (logind's RemoveIPC removes a user's files there when the user's last session ends).
@test "not root: the sandbox's folder on /dev/shm removed between calls is noticed: a fresh sandbox, and a notice" {
	unprivileged_server
	mcp_session <<EOF
$INIT
$(call_json 1 execute_bash_commands '{"code":"echo one"}')
{"wait": 1}
{"sh": "find /dev/shm -maxdepth 1 -name 'sandbox-mcp-*' -user $UNPRIV_USER -exec rm -rf {} + ; [ -z \"\$(find /dev/shm -maxdepth 1 -name 'sandbox-mcp-*' -user $UNPRIV_USER)\" ]"}
$(call_json 2 execute_bash_commands '{"code":"echo two"}')
$(call_json 3 execute_bash_commands '{"code":"echo three"}')
EOF
	res 2
	sc '.exit_code == 0 and .stdout == "two\n" and (.notice | test("of what is bound into it, was removed on the host"))'
	res 3
	sc '.exit_code == 0 and .stdout == "three\n" and .notice == null'
	no_shm_left
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	unprivileged_cleanup
}

@test "progress is never sent after its call's response, nor after a cancellation" {
	script="$INIT"
	for i in $(seq 1 12); do
		script+=$'\n'"$(call_json "$i" execute_bash_commands '{"code":"sleep 1.0$RANDOM; echo x"}' "{\"progressToken\":\"t$i\"}")"
	done
	script+=$'\n'"$(call_json 99 execute_bash_commands '{"code":"echo started; sleep 30"}' '{"progressToken":"c"}')"
	script+=$'\n''{"wait_line": "\"progressToken\":\"c\""}'
	script+=$'\n''{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}'
	script+=$'\n''{"jsonrpc":"2.0","id":"p","method":"ping"}'
	script+=$'\n''{"wait": "p"}'
	script+=$'\n''{"jsonrpc":"2.0","id":"p2","method":"ping"}'
	SESSION_TIMEOUT=90 mcp_session <<<"$script"
	# For every call, no progress line carrying its token comes after its response line.
	run python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.stdin if l.strip()]
done = {}
for n, m in enumerate(lines):
    if m.get("id") in range(1, 13) and "result" in m:
        done["t%d" % m["id"]] = n
    if m.get("id") == "p":
        done["c"] = n
for n, m in enumerate(lines):
    if m.get("method") == "notifications/progress":
        tok = m["params"]["progressToken"]
        if tok in done and n > done[tok]:
            sys.exit("progress for %s after its end (line %d > %d)" % (tok, n, done[tok]))
print("ok", len(done))
' <<<"$output"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "ok 13" ]
}

@test "a non-blocking stdout or stdin (a pipe or a socket the parent shares) is waited on, not taken for a client gone: 400 of 400 answers" {
	for how in pipe socket; do
		run python3 "$TESTS_DIR/lib/nonblock-client.py" "$how" 400 -- "$SANDBOX_MCP"
		echo "$how: $output"
		[ "$status" -eq 0 ]
		jqe "${lines[${#lines[@]}-1]}" '.answered == 400 and .exit == 0'
	done
}

@test "answers written at once and answers queued behind a slow reader keep their order and are whole: pipes and sockets, blocking or not" {
	# Pings (answers of some 40 bytes) between tools/list answers (some 15 KB), on descriptors
	# left blocking, as most clients leave them, and non-blocking: every answer whole and in the
	# order of the requests. How many short ones go at once, by the thread that reads, depends on
	# when the queue empties; unit.bats's writer case drives that path for certain.
	for how in pipe socket; do
		for mode in blocking nonblocking; do
			run python3 "$TESTS_DIR/lib/nonblock-client.py" "$how" 400 "$mode" mixed -- "$SANDBOX_MCP"
			echo "$how $mode: $output"
			[ "$status" -eq 0 ]
			jqe "${lines[${#lines[@]}-1]}" '.answered == 400 and .in_order == true and .exit == 0'
		done
	done
}

@test "a client that closes its end of stdout while the server is idle is noticed: shutdown within 2 s" {
	# stdout a pipe (its reader closes it) or a socket (its peer closes it); stdin, a pipe, stays open.
	for how in pipe socket; do
		: >"$SERVER_LOG"
		run python3 - "$SANDBOX_MCP" "$SERVER_LOG" "$how" <<-'EOF'
			import json, socket, subprocess, sys, time
			if sys.argv[3] == "pipe":
			    srv = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(sys.argv[2], "ab"))
			    out = srv.stdout
			else:
			    mine, theirs = socket.socketpair()
			    srv = subprocess.Popen([sys.argv[1]], stdin=subprocess.PIPE, stdout=theirs.fileno(), stderr=open(sys.argv[2], "ab"))
			    theirs.close()
			    out = mine.makefile("rb")
			srv.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
			srv.stdin.flush()
			assert json.loads(out.readline())["id"] == 1
			out.close()  # stdin stays open: only stdout says the client is gone
			if sys.argv[3] == "socket":
			    mine.close()
			t0 = time.monotonic()
			try:
			    code = srv.wait(timeout=10)
			except subprocess.TimeoutExpired:
			    srv.kill()
			    code = "still running after 10 s"
			print(json.dumps({"exit": code, "exit_after_ms": int((time.monotonic() - t0) * 1000)}))
		EOF
		echo "$how: $output"
		[ "$status" -eq 0 ]
		jqe "$output" '.exit == 0 and .exit_after_ms < 2000'
		grep -q 'shutting down: stdout closed' "$SERVER_LOG"
	done
}

@test "a pipe of requests gets every answer, in order: EOF waits for what was read (within the shutdown budget)" {
	local calls t0 ms
	calls=$(printf '%s\n' "$INIT" \
		"$(call_json 1 execute_bash_commands '{"code":"echo bash-ran"}')" \
		"$(call_json 2 execute_python '{"script":"print(6 * 7)"}')" \
		"$(call_json 3 execute_bash_commands '{"code":"echo kept > note.txt"}')" \
		"$(call_json 4 execute_python '{"script":"print(open(\"note.txt\").read().strip())"}')" \
		'{"jsonrpc":"2.0","id":5,"method":"resources/list"}')
	t0=$(date +%s%N)
	run bash -c 'printf "%s\n" "$1" | "$2" 2>>"$3"' _ "$calls" "$SANDBOX_MCP" "$SERVER_LOG"
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "$output" | cut -c1-200
	[ "$status" -eq 0 ]
	# Within the default budget (10 s), and every line of stdout is JSON.
	[ "$ms" -lt 10000 ]
	printf '%s\n' "$output" | jq -e -s 'map(select(.id != null) | .id) == ["init", 1, 2, 3, 4, 5]' >/dev/null
	jqe "$(response 1)" '.result.structuredContent.stdout == "bash-ran\n"'
	jqe "$(response 2)" '.result.structuredContent.stdout == "42\n"'
	jqe "$(response 3)" '.result.structuredContent.exit_code == 0'
	jqe "$(response 4)" '.result.structuredContent.stdout == "kept\n"'
	jqe "$(response 5)" '[.result.resources[].uri] == ["sandbox://workspace/note.txt"]'
	grep -q 'shutting down: stdin closed, every request read answered' "$SERVER_LOG"
}

@test "EOF: a call that runs past the shutdown budget is killed, logged and not answered; exit within the budget + 2 s" {
	local calls t0 ms marker="sbx-budget-$$-$RANDOM"
	calls=$(printf '%s\n' "$INIT" \
		"$(call_json 1 execute_bash_commands "{\"code\":\"sleep 30; : $marker\"}")" \
		'{"jsonrpc":"2.0","id":"after","method":"resources/list"}')
	t0=$(date +%s%N)
	run bash -c 'printf "%s\n" "$1" | "$2" --shutdown-budget 2 2>>"$3"' _ "$calls" "$SANDBOX_MCP" "$SERVER_LOG"
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "$output" | cut -c1-200
	cat "$SERVER_LOG"
	[ "$status" -eq 0 ]
	[ "$ms" -ge 2000 ]
	[ "$ms" -lt 4000 ]
	printf '%s\n' "$output" | jq -e -s 'map(select(.id != null) | .id) == ["init"]' >/dev/null
	grep -q 'shutting down: stdin closed, and the shutdown budget is spent' "$SERVER_LOG"
	grep -qF 'shutting down: request 1 (tools/call execute_bash_commands) not answered: it was still running' "$SERVER_LOG"
	grep -qF 'shutting down: request "after" (resources/list) not answered: it had not started' "$SERVER_LOG"
	no_process_matching "$marker"
}

@test "EOF: a batch that runs past the shutdown budget is answered once, with the members done; big ids logged as sent" {
	local init calls t0 ms
	init=$(jq -c '.params.protocolVersion = "2025-03-26"' <<<"$INIT")
	calls=$(printf '%s\n' "$init" '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
		"[$(call_json 1 execute_bash_commands '{"code":"echo a"}'),$(call_json 2 execute_bash_commands '{"code":"sleep 30"}'),{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"tools/call\",\"params\":{\"name\":\"execute_bash_commands\",\"arguments\":{\"code\":\"echo c\"}}}]")
	t0=$(date +%s%N)
	run bash -c 'printf "%s\n" "$1" | "$2" --shutdown-budget 5 2>>"$3"' _ "$calls" "$SANDBOX_MCP" "$SERVER_LOG"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$status" -eq 0 ]
	# Member 1 (a sandbox made ahead, then echo) has the budget to finish; all ends by budget + 2 s.
	[ "$ms" -lt 7000 ]
	# Two lines: the initialize answer, and one array for the batch, with ids 1 and 3 alone.
	[ "$(printf '%s\n' "$output" | wc -l)" -eq 2 ]
	printf '%s\n' "$output" | sed -n 2p | jq -e '[.[].id] | sort == [1, 3]' >/dev/null
	grep -qF 'shutting down: request 2 (tools/call execute_bash_commands) not answered: it was still running' "$SERVER_LOG"
	grep -qF 'shutting down: request 99999999999999999999 (tools/call execute_bash_commands) not answered: it had not started' "$SERVER_LOG"
}
