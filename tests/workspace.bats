# --workspace DIR (a workspace kept in a host folder across restarts) and --mount (host folders
# the code sees under /mnt), on the local backend; docker.bats and daytona.bats hold theirs.
load lib/helpers

setup() {
	common_setup
	WS="$BATS_TEST_TMPDIR/ws"
	PROJ="$BATS_TEST_TMPDIR/proj"
	mkdir -p "$PROJ/sub"
	printf 'project file\n' >"$PROJ/sub/readme.txt"
	# The sandbox user must reach these folders wherever the checkout is (root: uid 65534).
	chmod 755 "$BATS_TEST_TMPDIR" "$PROJ" "$PROJ/sub"
	chmod 644 "$PROJ/sub/readme.txt"
}

bash_call() {
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')"
}

stdout_of() {
	response "$1" | jq -r '.result.structuredContent.stdout'
}

@test "--workspace: files stay across a restart and a SIGKILL of the server; cleanup_sandbox empties the folder" {
	mcp_session --workspace "$WS" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 'echo one > a.txt; mkdir -p d/e; echo two > d/e/b.txt')")"
	jqe "$(response 1)" '.result.structuredContent.exit_code == 0'
	[ "$(cat "$WS/a.txt")" = one ]
	# A server killed outright leaves the folder as it was, and the next server takes it.
	mcp_session --workspace "$WS" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 'echo three > c.txt')" '{"wait": 1}' '{"signal": "KILL"}' '{"expect_exit": 10}')"
	jqe "$(response 1)" '.result.structuredContent.exit_code == 0'
	mcp_session --workspace "$WS" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 'cat a.txt d/e/b.txt c.txt')" \
		"$(call_json 2 cleanup_sandbox '{}')" "$(bash_call 3 'ls -A')")"
	[ "$(stdout_of 1)" = $'one\ntwo\nthree' ]
	jqe "$(response 2)" '.result.structuredContent.removed == true'
	[ "$(stdout_of 3)" = .sandbox ]
	[ -d "$WS" ]
	[ -z "$(find "$WS" -mindepth 1 -not -path "$WS/.sandbox*")" ]
	# Nothing of the sandboxes is left in the state folder.
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1)" ]
}

@test "--workspace: idle removal keeps the files and the notice says so" {
	mcp_session --workspace "$WS" --idle-timeout 0.3 <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 'echo kept > k.txt')" \
		'{"wait": 1}' '{"until": "grep -q \"removed after\" '"$SERVER_LOG"'"}' "$(bash_call 2 'cat k.txt')")"
	[ "$(stdout_of 2)" = kept ]
	jqe "$(response 2)" '.result.structuredContent.notice | test("same --workspace folder")'
}

@test "--workspace: a folder of the user's is never taken (refused at start-up), nor one another server holds" {
	mkdir -p "$WS"
	echo mine >"$WS/notes.txt"
	run "$SANDBOX_MCP" --workspace "$WS" </dev/null
	[ "$status" -eq 2 ] && [[ "$output" == *"holds files but is not a workspace"* ]]
	[ "$(cat "$WS/notes.txt")" = mine ] && [ ! -e "$WS/.sandbox" ]
	rm "$WS/notes.txt"
	# One server holds it; a second one is refused while the first lives.
	printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 9 ls)" >"$BATS_TEST_TMPDIR/second.in"
	second=$(jq -cn --arg c "python3 '$SESSION' -- '$SANDBOX_MCP' --workspace '$WS' <'$BATS_TEST_TMPDIR/second.in' >'$BATS_TEST_TMPDIR/second.out'" '{sh: $c}')
	mcp_session --workspace "$WS" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 'echo first > f.txt')" '{"wait": 1}' "$second")"
	jqe "$(jq -c 'select(.id == 9)' "$BATS_TEST_TMPDIR/second.out")" '.result.isError == true and (.result.structuredContent.error | test("in use by another sandbox-mcp server"))'
	[ "$(cat "$WS/f.txt")" = first ]
}

@test "--mount: the code reads a host folder under /mnt, cannot write it unless :rw, and the host sees :rw writes" {
	out="$BATS_TEST_TMPDIR/out"
	mkdir -m 777 "$out"
	mcp_session --mount "$PROJ:/mnt/project" --mount "$out:/mnt/results/run1:rw" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"$(bash_call 1 'cat /mnt/project/sub/readme.txt; touch /mnt/project/new 2>&1 | grep -o "Read-only file system"; echo done > /mnt/results/run1/r.txt')" \
		"$(call_json 2 execute_python '{"script":"import os\nprint(sorted(os.listdir(\"/mnt/project\")))"}')")"
	[ "$(stdout_of 1)" = $'project file\nRead-only file system' ]
	[ "$(stdout_of 2)" = "['sub']" ]
	[ ! -e "$PROJ/new" ]
	[ "$(cat "$out/r.txt")" = done ]
}

@test "--mount: a bad spec is refused at start with the reason; so is one that shows the state folder or /dev/shm" {
	for spec in "$PROJ:/workspace/x" "$PROJ:/mnt/../etc" "$PROJ:/mnt/a b" "$PROJ" "relative:/mnt/x" \
		"$BATS_TEST_TMPDIR/missing:/mnt/x" "$PROJ:/mnt/x:rx" "$PROJ/sub/readme.txt:/mnt/x"; do
		run "$SANDBOX_MCP" --mount "$spec" --check
		[ "$status" -eq 2 ] || { echo "accepted: $spec"; false; }
		[[ "$output" == *"--mount"* ]]
	done
	run "$SANDBOX_MCP" --mount "$PROJ:/mnt/a" --mount "$PROJ:/mnt/a/b" --check
	[ "$status" -eq 2 ]
	[[ "$output" == *"overlap"* ]]
	# The environment's list takes ';' between specs; flags replace it.
	SANDBOX_MOUNT="$PROJ:/mnt/a;$PROJ:/mnt/b" run "$SANDBOX_MCP" --check
	[[ "$output" == *"mount       /mnt/a"* && "$output" == *"mount       /mnt/b"* ]]
	SANDBOX_MOUNT="$PROJ:/mnt/a" run "$SANDBOX_MCP" --mount "$PROJ:/mnt/c:rw" --check
	[[ "$output" != *"/mnt/a"* && "$output" == *"mount       /mnt/c: the host folder $PROJ, read-write"* ]]
	run "$SANDBOX_MCP" --mount "$BATS_TEST_TMPDIR:/mnt/up" </dev/null
	[ "$status" -eq 2 ]
	[ "$output" = "sandbox-mcp: --mount /mnt/up: the host folder $(realpath "$BATS_TEST_TMPDIR") holds, or is in, the state folder $(realpath "$SANDBOX_STATE_DIR"), which the code must not see" ]
	# Nor /dev/shm, where servers that are not root keep what they bind into sandboxes.
	mkdir -p /dev/shm/sandbox-mcp-test-mount
	for spec in /dev/shm:/mnt/shm /dev:/mnt/dev /dev/shm/sandbox-mcp-test-mount:/mnt/shm; do
		run "$SANDBOX_MCP" --mount "$spec" </dev/null
		[ "$status" -eq 2 ]
		[[ "$output" == "sandbox-mcp: --mount /mnt/"*" holds, or is in, /dev/shm, where the files bound into sandboxes are, which the code must not see" ]]
	done
	rmdir /dev/shm/sandbox-mcp-test-mount
}
