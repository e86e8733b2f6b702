# Sandboxes made ahead of need (--sandbox-ahead, the default on the local backend): the server
# makes the sandbox as it starts and after a cleanup, so the first call finds it ready, primed
# with an interpreter started ahead; until a call uses it, it is nobody's (cleanup reports none,
# its idle removal is silent, shutdown removes it whatever --keep says); none is made after an
# idle removal, with --workspace, or with --no-sandbox-ahead.
load lib/helpers
load lib/prestart
bats_require_minimum_version 1.5.0

# made_ahead: the ids of the sandboxes the server made ahead, in order.
made_ahead() {
	sed -n 's/.*info: sandbox \(local-[0-9a-f]*\) made ahead on the local backend$/\1/p' "$SERVER_LOG"
}

# A test that holds mkfs (below) lets it go whatever happened.
teardown() {
	: >"$BATS_TEST_TMPDIR/go"
}

until_made_ahead() { # N: waits until N sandboxes were made ahead
	printf '{"until": "[ $(grep -c \\"made ahead on the local backend\\" %s) -ge %d ]"}\n' "$SERVER_LOG" "$1"
}

@test "ahead: the first call finds its sandbox made and its interpreter started; nothing is made during the call" {
	mcp_session --log-level debug <<-EOF
		$INIT
		$(until_made_ahead 1)
		$(py_call 1 'print("first")')
	EOF
	local id
	id=$(made_ahead)
	[ -n "$id" ]
	res 1
	sc ".stdout == \"first\n\" and .sandbox_id == \"$id\" and .notice == null"
	[ "$(prestarted)" = 1 ]
	run ! grep -q 'started on the local backend' "$SERVER_LOG"
}

# A call that comes while the sandbox is made waits for the sandbox alone: not for the `true`
# run and the interpreter started ahead that would prime it for a later call. The workspace's
# mkfs is held (a wrapper bound over it, in a mount namespace of the server's own, where no
# template of the file system spares running it) until the server has taken the call.
@test "ahead: a call that comes while the sandbox is made waits for it, not for its priming" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to hold the workspace's mkfs"
	mkfs=$(command -v mkfs.ext4) || skip_or_fail "needs mkfs.ext4 (e2fsprogs)"
	# The real one, copied under its own name (mke2fs chooses the file system by it).
	mkdir "$BATS_TEST_TMPDIR/real" && cp "$mkfs" "$BATS_TEST_TMPDIR/real/mkfs.ext4"
	cat >"$BATS_TEST_TMPDIR/mkfs" <<-EOF
		#!/bin/sh
		: > "$BATS_TEST_TMPDIR/held"
		while [ ! -e "$BATS_TEST_TMPDIR/go" ]; do sleep 0.02; done
		exec "$BATS_TEST_TMPDIR/real/mkfs.ext4" "\$@"
	EOF
	cat >"$BATS_TEST_TMPDIR/server" <<-EOF
		#!/bin/sh
		exec unshare -m --propagation private sh -c 'mkdir -p /run/sandbox-mcp && mount -t tmpfs -o mode=0700 tmpfs /run/sandbox-mcp && mount --bind "$BATS_TEST_TMPDIR/mkfs" "$mkfs" && exec "\$@"' sh "$SANDBOX_MCP" "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/mkfs" "$BATS_TEST_TMPDIR/server"
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session --log-level debug <<-EOF
		$INIT
		{"until": "[ -e $BATS_TEST_TMPDIR/held ]"}
		$(py_call 1 'print("first")')
		{"until": "grep -q 'came while the sandbox is made ahead' $SERVER_LOG"}
		{"sh": ": > $BATS_TEST_TMPDIR/go"}
		{"wait": 1}
		$(py_call 2 'print("second")')
	EOF
	local id
	id=$(made_ahead)
	[ -n "$id" ]
	res 1
	sc ".stdout == \"first\n\" and .notice == null and .sandbox_id == \"$id\""
	res 2
	sc '.stdout == "second\n"'
	# 1 ran in a plain start; 2 in the interpreter started after 1.
	[ "$(prestarted)" = 2 ]
	run ! grep -q 'started on the local backend' "$SERVER_LOG"
}

@test "ahead: a server that gets no call leaves nothing behind, --keep or not" {
	SANDBOX_UID=$(free_uid) || skip_or_fail "no free uid for the sandbox user"
	export SANDBOX_UID
	for keep in --no-keep --keep; do
		: >"$SERVER_LOG"
		mcp_session "$keep" <<-EOF
			$INIT
			$(until_made_ahead 1)
		EOF
		[ -n "$(made_ahead)" ]
		[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1)" ] || { ls -la "$SANDBOX_STATE_DIR" >&2; return 1; }
	done
	eventually 5 no_sandbox_processes "$SANDBOX_UID"
}

@test "ahead: cleanup reports none for a sandbox no call used; one is made again after a cleanup, none after an idle removal" {
	mcp_session --idle-timeout 2 <<-EOF
		$INIT
		$(until_made_ahead 1)
		$(call_json 1 cleanup_sandbox '{}')
		{"wait": 1}
		$(until_made_ahead 2)
		$(call_json 2 execute_bash_commands '{"code":"echo in-b"}')
		{"wait": 2}
		$(call_json 3 cleanup_sandbox '{}')
		{"wait": 3}
		$(until_made_ahead 3)
		{"until": "grep -q 'removed after 2 s unused' $SERVER_LOG"}
		$(call_json 4 execute_bash_commands '{"code":"echo in-d"}')
	EOF
	local ids
	mapfile -t ids < <(made_ahead)
	[ "${#ids[@]}" -eq 3 ]
	# 1: the first one was nobody's; removed all the same, and another made in its place.
	jqe "$(response 1)" '.result.structuredContent.removed == false'
	[ "${ids[0]}" != "${ids[1]}" ]
	[ ! -e "$SANDBOX_STATE_DIR/${ids[0]}" ]
	# 2 ran in the second; 3 removed it; the third, unused, went idle silently.
	jqe "$(response 2)" ".result.structuredContent.sandbox_id == \"${ids[1]}\" and .result.structuredContent.stdout == \"in-b\n\""
	jqe "$(response 3)" ".result.structuredContent.removed == true and .result.structuredContent.sandbox_id == \"${ids[1]}\""
	# 4: none was made ahead after the idle removal: this call made its own, with no notice.
	jqe "$(response 4)" ".result.structuredContent.stdout == \"in-d\n\" and .result.structuredContent.notice == null
		and .result.structuredContent.sandbox_id != \"${ids[2]}\""
	[ "$(grep -c 'started on the local backend' "$SERVER_LOG")" -eq 1 ]
}

@test "ahead: none with --no-sandbox-ahead or --workspace; each call makes its own" {
	for opt in --no-sandbox-ahead "--workspace=$BATS_TEST_TMPDIR/ws"; do
		: >"$SERVER_LOG"
		mcp_session "$opt" <<-EOF
			$INIT
			$(call_json 1 execute_bash_commands '{"code":"echo one"}')
			{"wait": 1}
			$(call_json 2 cleanup_sandbox '{}')
			{"wait": 2}
			$(call_json 3 execute_bash_commands '{"code":"echo three"}')
		EOF
		jqe "$(response 3)" '.result.structuredContent.stdout == "three\n"'
		[ "$(grep -c 'started on the local backend' "$SERVER_LOG")" -eq 2 ]
		[ -z "$(made_ahead)" ]
	done
}
