# notifications/resources/list_changed on the local backend: what a client that listed the
# resources is told after each call, what it costs, and trees made to make it cost more.
# docker.bats runs the scenario in a container.
load lib/helpers
load lib/changes

setup() {
	common_setup
	WS="$BATS_TEST_TMPDIR/ws"
}

teardown() {
	unprivileged_teardown
}

@test "list_changed after a call that adds, removes, rewrites or moves a file, or after a change from outside between calls; none after one that changes nothing" {
	changes_scenario "$WS"
}

@test "after a listing, a call that changes nothing walks no tree, even of 100,000 files; removing them is told" {
	mcp_session --log-level debug <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'mkdir big && cd big && seq 100000 | sed "s/^/f/" | xargs touch')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'true')
$(changes_call 4 'true')
$(changes_call 5 'true')
$(changes_fence 100)
$(changes_snapshot "$BATS_TEST_TMPDIR/log")
$(changes_call 6 'rm -r big')
$(changes_call 7 'true')
$(changes_fence 101)
EOF
	# The listing's walk and none after it, until a call changed the tree.
	[ "$(changes_walks "$BATS_TEST_TMPDIR/log")" -eq 1 ]
	jqe "$(response 2)" '(.result.resources | length) == 100 and (.result | has("nextCursor"))'
	[ "$(changes_order)" = "1 2 3 4 5 6 changed 7 " ]
}

@test "a tree made to cost (symlink loops, a FIFO, odd names, 200 folders deep, more folders than the watch takes): calls end, changes are told, none is made up" {
	SESSION_TIMEOUT=100 mcp_session --log-level debug <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'ln -s loop loop; ln -s . self; ln -s / root; mkfifo fifo; touch "$(printf "odd\001name")" "$(printf "nl\nname")" "$(printf "\377\376bad")"; mkdir -p "$(printf "x%.0s/" $(seq 200))"; mkdir many && cd many && seq 9000 | xargs mkdir')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'true')
$(changes_call 4 'touch many/9000/f')
$(changes_call 5 'touch /tmp/outside root/tmp/outside2 fifo')
$(changes_call 6 'touch "$(printf "x%.0s/" $(seq 100))deeper-than-listed"')
$(changes_call 7 'rm -r many')
$(changes_fence 100)
$(changes_snapshot "$BATS_TEST_TMPDIR/log")
$(changes_call 8 'true')
$(changes_call 9 'touch "$(printf "x%.0s/" $(seq 10))f"')
$(changes_fence 101)
EOF
	[ "$(changes_order)" = "1 2 3 4 changed 5 6 7 changed 8 9 changed " ]
	# Past the folders the watch takes, each call walks (the listing, then calls 3 to 7); with
	# fewer, the watch answers again: no walk for call 8, one for 9.
	[ "$(changes_walks "$BATS_TEST_TMPDIR/log")" -eq 6 ]
	[ "$(changes_walks)" -eq $(($(changes_walks "$BATS_TEST_TMPDIR/log") + 1)) ]
	# No call took long for the tree (each call's own duration, as it says).
	jqe "$(printf '%s\n' "$output" | jq -s '[.[] | select(.id == 3 or .id == 5 or .id == 8) | .result.structuredContent.duration_ms]')" 'length == 3 and all(. < 5000)'
}

@test "a lying agent's answer to what changed is checked: a state it does not know, a short or a long answer are refused as from a lost sandbox" {
	local h
	for h in 00000000:0 01000000:1 02000000:2; do
		LYING_CHANGES=${h%:*} run "$REPO_DIR/build/test-helper" lying-agent
		[ "$status" -eq 0 ] && [ "${lines[-1]}" = "changes ${h#*:} " ] || { echo "$h: $output" >&2; return 1; }
	done
	for h in 03000000 ffffffff "" 0000 0000000000; do
		LYING_CHANGES=$h run "$REPO_DIR/build/test-helper" lying-agent
		[ "$status" -eq 0 ] && [ "${lines[-1]}" = "changes -2 the sandbox agent sent a malformed answer to what changed" ] || { echo "$h: $output" >&2; return 1; }
	done
}

@test "not root: after a listing, a call that changes nothing walks no tree; one that adds a file is told" {
	unprivileged_server
	mcp_session --log-level debug <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'mkdir -p d/e && touch d/e/a')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'true')
$(changes_call 4 'touch d/e/b')
$(changes_call 5 'true')
$(changes_fence 100)
EOF
	[ "$(changes_order)" = "1 2 3 4 changed 5 " ]
	# The listing's walk and the one after call 4.
	[ "$(changes_walks)" -eq 2 ]
}

# The background process's change is one system call (an empty file made by `: >`): a file
# written with `echo >` is two changes (made empty, then written), which a call's end can see
# apart, each told.
@test "a background process's change between calls is told once, after the call that follows it; the next call, with nothing changed, tells none" {
	mcp_session <<EOF
$INIT
$INITIALIZED
$(call_json 1 execute_bash_commands '{"code": "until [ -e /tmp/go ]; do sleep 0.05; done; : > bg.txt", "background": true, "wait_s": 0.1}')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
$(changes_call 3 'touch /tmp/go')
$(changes_call 4 'for i in $(seq 200); do [ -e bg.txt ] && exit 0; sleep 0.05; done; exit 1')
$(changes_call 5 'true')
$(changes_fence 100)
EOF
	jqe "$(response 1)" '.result.structuredContent.running == true'
	jqe "$(response 4)" '.result.structuredContent.exit_code == 0'
	order=$(changes_order)
	[ "$order" = "1 2 3 changed 4 5 " ] || [ "$order" = "1 2 3 4 changed 5 " ] || { echo "order: $order" >&2; return 1; }
}

@test "a sandbox removed when idle: the call in the new one, whose workspace is empty, is followed by list_changed" {
	local gone
	gone=$(jq -cn --arg d "$SANDBOX_STATE_DIR" '{until: "! ls -d \($d)/local-* >/dev/null 2>&1"}')
	mcp_session --idle-timeout 0.5 <<EOF
$INIT
$INITIALIZED
$(changes_call 1 'touch a b')
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"resources/list"}
{"wait": 2}
$gone
$(changes_call 3 'true')
$(changes_call 4 'true')
$(changes_fence 100)
EOF
	jqe "$(response 3)" '.result.structuredContent.notice | test("empty workspace")'
	[ "$(changes_order)" = "1 2 3 changed 4 " ]
}
