# --workspace DIR on the Daytona backend, against the loopback Daytona test server: the cloud
# sandbox cannot see DIR, so the backend copies it in when it makes the sandbox and copies every
# call's changes back before the call's result (backends/daytona/wssync.h). workspace.bats has
# the same results on the local backend.
load lib/helpers
load lib/daytona-setup
load lib/daytona-log
bats_require_minimum_version 1.5.0

setup_file() {
	daytona_setup_file
}

teardown_file() {
	daytona_teardown_file
}

setup() {
	common_setup
	with_daytona
	WS="$BATS_TEST_TMPDIR/ws"
}

bash_call() {
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')"
}

stdout_of() {
	response "$1" | jq -r '.result.structuredContent.stdout'
}

# sh_step COMMAND: a session step that runs COMMAND on this host (see lib/session.py).
sh_step() {
	jq -cn --arg c "$1" '{sh: $c}'
}

live_sandboxes() {
	daytona_control '{}' | jq '.sandboxes | length'
}

@test "--workspace on Daytona: the folder's files are in the first call; a call's new, changed and removed files are in it right after its result, byte-exact" {
	mkdir -p "$WS/.sandbox" "$WS/sub" "$WS/empty"
	printf 'from the host\n' >"$WS/sub/in.txt"
	printf '#!/bin/sh\necho ran\n' >"$WS/run.sh"
	chmod 755 "$WS/run.sh"
	head -c 200000 /dev/urandom >"$WS/old.bin"
	oldsum=$(md5sum <"$WS/old.bin")
	snap="$BATS_TEST_TMPDIR/after"
	# The second call writes a file of every byte value (inline in the answer), a 3 MB one (by
	# bulk download), changes a file, removes one, and makes folders; the folder is copied
	# aside as soon as its result has come.
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'cat sub/in.txt; ./run.sh; [ -d empty ] && echo empty; md5sum <old.bin')
$(call_json 2 execute_python '{"script":"import os, hashlib\nopen(\"all.bin\", \"wb\").write(bytes(range(256)) * 4)\nbig = os.urandom(3000000)\nos.makedirs(\"new/deep\")\nopen(\"new/deep/big.bin\", \"wb\").write(big)\nos.makedirs(\"made/empty\")\nopen(\"sub/in.txt\", \"a\").write(\"and the sandbox\\n\")\nos.remove(\"old.bin\")\nprint(hashlib.md5(big).hexdigest())"}')
{"wait": 2}
$(sh_step "cp -a '$WS' '$snap'")
EOF
	[ "$(stdout_of 1)" = "$(printf 'from the host\nran\nempty\n%s' "$oldsum")" ]
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and .notice == null'
	python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)' | cmp - "$snap/all.bin"
	[ "$(md5sum <"$snap/new/deep/big.bin" | cut -d' ' -f1)" = "$(stdout_of 2)" ]
	[ "$(cat "$snap/sub/in.txt")" = "$(printf 'from the host\nand the sandbox')" ]
	[ ! -e "$snap/old.bin" ]
	[ -d "$snap/made/empty" ]
	[ "$(stat -c %a "$snap/run.sh")" = 755 ]
	# Nothing but the files is left in the folder: no temporary name.
	[ -z "$(find "$snap" -name '.sandbox-mcp-*')" ]
}

@test "--workspace on Daytona: a files batch that does not fit the sandbox's full disk changes none of the folder's files" {
	daytona_control '{"disk": 33554432}' | jq -e '.disk == 33554432' >/dev/null ||
		skip_or_fail "the Daytona test server cannot give a sandbox a disk of its own here (it needs root)"
	mkdir -p "$WS/.sandbox"
	printf old-a >"$WS/a.txt"
	printf old-b >"$WS/b.txt"
	head -c 30000 /dev/zero | tr '\0' x >"$BATS_TEST_TMPDIR/b"
	snap="$BATS_TEST_TMPDIR/after"
	mcp_session --workspace "$WS" <<EOF
$INIT
$(bash_call 1 'head -c 64M /dev/zero > big 2>/dev/null; truncate -s -16K big; echo filled')
$(jq -cn --rawfile b "$BATS_TEST_TMPDIR/b" '{jsonrpc: "2.0", id: 2, method: "tools/call", params: {name:
	"execute_bash_commands", arguments: {code: "echo ran", files: {"a.txt": "new-a", "b.txt": $b}}}}')
{"wait": 2}
$(sh_step "cp -a '$WS' '$snap'")
EOF
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 1 and (.error | test("b\\.txt: No space left on device"))'
	[ "$(cat "$snap/a.txt")" = old-a ]
	[ "$(cat "$snap/b.txt")" = old-b ]
	[ -z "$(find "$snap" -name '*.tmp')" ]
}

@test "--workspace on Daytona: files survive a SIGKILL of the server and a restart; cleanup_sandbox empties the folder" {
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'echo kept > k.txt; mkdir -p d/e; echo deep > d/e/f.txt')
{"wait": 1}
{"signal": "KILL"}
{"expect_exit": 10}
EOF
	[ "$(cat "$WS/k.txt")" = kept ]
	[ "$(cat "$WS/d/e/f.txt")" = deep ]
	# A second server on the same folder: the files are there; cleanup empties the folder, and
	# the next call starts from it empty.
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'cat k.txt d/e/f.txt')
$(call_json 2 cleanup_sandbox '{}')
{"wait": 2}
$(sh_step "find '$WS' -mindepth 1 | sort >'$BATS_TEST_TMPDIR/after-cleanup'")
$(bash_call 3 'ls -A')
EOF
	[ "$(stdout_of 1)" = $'kept\ndeep' ]
	jqe "$(response 2)" '.result.structuredContent.removed == true'
	[ "$(cat "$BATS_TEST_TMPDIR/after-cleanup")" = "$WS/.sandbox" ]
	[ "$(stdout_of 3)" = .sandbox ]
	[ -z "$(find "$WS" -mindepth 1 -not -path "$WS/.sandbox")" ]
	# The killed server's sandbox was deleted by the next one; that one's at its exit.
	[ "$(live_sandboxes)" -eq 0 ]
}

@test "--workspace on Daytona: symlinks and FIFOs, in the sandbox or planted in the folder, never lead a write out of it or block" {
	out="$BATS_TEST_TMPDIR/outside"
	mkdir -p "$out"
	echo secret >"$out/secret"
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'mkdir sub; echo one > sub/x')
{"wait": 1}
$(sh_step "rm -r '$WS/sub' && ln -s '$out' '$WS/sub' && mkfifo '$WS/fifo2'")
$(bash_call 2 "echo two > sub/x; echo three > fifo2; ln -s '$out/secret' link; ln -s '$out' dir; mkfifo fifo; mknod -m 600 null c 1 3 2>/dev/null; echo done")
EOF
	[ "$(stdout_of 2)" = done ]
	jqe "$(response 2)" '.result.structuredContent | .duration_ms < 30000
		and (.notice | test("Names that could not be written into the --workspace folder: 1 \\(sub/x: Too many levels of symbolic links\\)"))'
	# Nothing outside the folder was written, and what the sandbox made as links, FIFOs and
	# devices is not in the folder; the host's FIFO was replaced by the file, never opened.
	[ "$(ls "$out")" = secret ]
	[ "$(cat "$out/secret")" = secret ]
	[ -L "$WS/sub" ]
	[ ! -e "$WS/link" ]
	[ ! -L "$WS/link" ]
	[ ! -L "$WS/dir" ]
	[ ! -e "$WS/fifo" ]
	[ ! -e "$WS/null" ]
	[ -f "$WS/fifo2" ]
	[ "$(cat "$WS/fifo2")" = three ]
}

@test "--workspace on Daytona: a warm call that changes nothing or a small file is one request; a larger file adds one bulk download" {
	log="$BATS_TEST_TMPDIR/log"
	clear="curl -sf -d '{\"clear_log\": true}' '$DT_URL/_control' >/dev/null"
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'echo first > first.txt')
{"wait": 1}
$(sh_step "$clear")
$(bash_call 2 'true')
{"wait": 2}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.2' && $clear")
$(call_json 3 execute_python '{"script":"open(\"small.txt\", \"w\").write(\"small\\n\")"}')
{"wait": 3}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.3' && $clear")
$(bash_call 4 'head -c 300000 /dev/urandom > large.bin; md5sum < large.bin')
{"wait": 4}
$(sh_step "curl -sf '$DT_URL/_control' >'$log.4'")
$(bash_call 5 'stat -c %h large.bin')
EOF
	id=$(response 2 | jq -r '.result.structuredContent.sandbox_id')
	exec="{method: \"POST\", path: \"/toolbox/$id/process/execute\"}"
	# Each one request (but the runner's polls of a call that ran long: a loaded machine).
	jqe "$(cat "$log.2")" "[.requests | $DT_UNPOLLED | .[] | {method, path}] == [$exec]"
	jqe "$(cat "$log.3")" "[.requests | $DT_UNPOLLED | .[] | {method, path}] == [$exec]"
	jqe "$(cat "$log.4")" "[.requests | $DT_UNPOLLED | .[] | {method, path}] == [$exec, {method: \"POST\", path: \"/toolbox/$id/files/bulk-download\"}]"
	[ "$(cat "$WS/small.txt")" = small ]
	[ "$(md5sum <"$WS/large.bin")" = "$(stdout_of 4)" ]
	# The copy the server fetched is gone before the next call starts: the file has one link.
	[ "$(stdout_of 5)" = 1 ]
}

@test "--workspace on Daytona: when fetching a call's files fails, the notice says so and the next call brings them" {
	# The sandbox's next bulk download answers 500.
	cat >"$BATS_TEST_TMPDIR/fail.sh" <<-SH
		id=\$(curl -sf '$DT_URL/_control' | jq -r '.sandboxes | keys[0]')
		curl -sf -d "{\"fail\": \"500\", \"count\": 1, \"path\": \"/toolbox/\$id/files/bulk-download\"}" '$DT_URL/_control' >/dev/null
	SH
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'true')
{"wait": 1}
$(sh_step "sh '$BATS_TEST_TMPDIR/fail.sh'")
$(bash_call 2 'head -c 300000 /dev/urandom > large.bin; echo small > small.txt; md5sum < large.bin')
{"wait": 2}
$(sh_step "ls -A '$WS' >'$BATS_TEST_TMPDIR/after2'")
$(bash_call 3 'true')
EOF
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and (.notice
		| test("^Copying this call.s changes back to the --workspace folder failed \\(.*HTTP 500.*\\); the next call copies them\\.$"))'
	# The small file came inline; the large one waits for the next call.
	[ "$(cat "$BATS_TEST_TMPDIR/after2")" = $'.sandbox\nsmall.txt' ]
	jqe "$(response 3)" '.result.structuredContent.notice == null'
	[ "$(md5sum <"$WS/large.bin")" = "$(stdout_of 2)" ]
	[ "$(cat "$WS/small.txt")" = small ]
}

@test "--workspace on Daytona: idle removal keeps the folder, and the next sandbox has its files" {
	mcp_session --workspace "$WS" --idle-timeout 0.3 <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'echo kept > k.txt')
{"wait": 1}
{"until": "grep -q 'removed after' '$SERVER_LOG'"}
$(bash_call 2 'cat k.txt')
EOF
	[ "$(stdout_of 2)" = kept ]
	jqe "$(response 2)" '.result.structuredContent.notice | test("same --workspace folder")'
}

@test "--workspace on Daytona: a folder of the user's is never taken, nor one another server holds, and no sandbox is made for them" {
	mkdir -p "$WS"
	echo mine >"$WS/notes.txt"
	# Refused at start-up, before any sandbox is asked for.
	run "$SANDBOX_MCP" --workspace "$WS" </dev/null
	[ "$status" -eq 2 ] && [[ "$output" == *"holds files but is not a workspace"* ]]
	[ "$(cat "$WS/notes.txt")" = mine ]
	[ "$(daytona_control '{}' | jq '[.requests[] | select(.method == "POST" and .path == "/api/sandbox")] | length')" -eq 0 ]
	rm "$WS/notes.txt"
	printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 9 ls)" >"$BATS_TEST_TMPDIR/second.in"
	second=$(jq -cn --arg c "python3 '$SESSION' -- '$SANDBOX_MCP' --workspace '$WS' <'$BATS_TEST_TMPDIR/second.in' >'$BATS_TEST_TMPDIR/second.out'" '{sh: $c}')
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 'echo first > f.txt')
{"wait": 1}
$second
EOF
	jqe "$(jq -c 'select(.id == 9)' "$BATS_TEST_TMPDIR/second.out")" '.result.isError == true and (.result.structuredContent.error | test("in use by another sandbox-mcp server"))'
	[ "$(cat "$WS/f.txt")" = first ]
}

@test "--workspace on Daytona: what is past the bounds is said in the call's notice, and what the copy in left out in the first call's" {
	mkdir -p "$WS/.sandbox"
	ln -s /etc/passwd "$WS/hostlink"
	mcp_session --workspace "$WS" <<EOF
$INIT
$INITIALIZED
$(bash_call 1 '[ -e hostlink ] || echo nolink; truncate -s 70M huge.bin; echo small > small.txt')
EOF
	[ "$(stdout_of 1)" = nolink ]
	jqe "$(response 1)" '.result.structuredContent.notice | test("Skipped in the --workspace folder \\(symlinks, special files, names the toolbox cannot carry\\): 1\\.")
		and test("huge.bin \\(70 MiB\\) is not copied back to the --workspace folder: a call copies at most 64 MiB")'
	[ ! -e "$WS/huge.bin" ]
	[ "$(cat "$WS/small.txt")" = small ]
}
