# What code in the sandbox sees and what it cannot do to the sandbox's own machinery: signals,
# files it plants where the sandbox writes, spill failures, out-of-memory kills, removal of
# whatever it leaves. Each case runs on the local backend, on Docker, and where it applies on
# the Daytona test server.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/daytona-setup

setup_file() {
	docker_setup_file
	daytona_setup_file
}
teardown_file() {
	docker_teardown_file
	daytona_teardown_file
}

bash_call() { # ID CODE [TIMEOUT]
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" --argjson t "${3:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)')"
}

py_call() { # ID SCRIPT [TIMEOUT]
	call_json "$1" execute_python "$(jq -cn --arg s "$2" --argjson t "${3:-null}" '{script: $s} + (if $t then {timeout_s: $t} else {} end)')"
}

# ---------------------------------------------------------------- signals

signals_case() {
	with_backend "$1"
	tool execute_bash_commands '{"code":"yes | head -1; grep -E \"^Sig(Blk|Ign)\" /proc/self/status"}'
	sc '.exit_code == 0 and .stderr == "" and .stdout == "y\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"'
	# A child of Python sees them as a plain `python3 task.py` gives them (CPython ignores
	# SIGPIPE for itself and restores it for what it starts).
	tool execute_python '{"script":"import subprocess\nprint(subprocess.run([\"sh\", \"-c\", \"yes | head -1\"], capture_output=True).stderr)"}'
	sc '.exit_code == 0 and .stdout == "b'"''"'\n"'
}

@test "local: the code starts with every signal at its default and none blocked (no 'Broken pipe')" { signals_case local; }
@test "docker: the code starts with every signal at its default and none blocked (no 'Broken pipe')" { signals_case docker; }
@test "daytona: the code starts with every signal at its default and none blocked (no 'Broken pipe')" { signals_case daytona; }

# ---------------------------------------------------------------- planted files

fifo_script_case() {
	with_backend "$1"
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo marker > m; mkdir -p .sandbox; rm -f .sandbox/task.py; mkfifo .sandbox/task.py; ls -l .sandbox/task.py')
{"wait": 1}
$(py_call 2 'print("ok")' 20)
{"wait": 2}
$(bash_call 3 'cat m; [ -f .sandbox/task.py ] && [ ! -p .sandbox/task.py ] && echo regular')
EOF
	res 1
	sc '.exit_code == 0 and (.stdout | startswith("p"))'
	id=$(printf '%s' "$result" | jq -r .structuredContent.sandbox_id)
	res 2
	# A call held on the FIFO would run to its timeout (20 s) and end with 124.
	sc ".exit_code == 0 and .timed_out == false and .stdout == \"ok\n\" and .duration_ms < 15000 and .sandbox_id == \"$id\""
	res 3
	sc ".stdout == \"marker\nregular\n\" and .sandbox_id == \"$id\""
}

@test "local: a FIFO planted at the script's path neither blocks the call nor costs the workspace" { fifo_script_case local; }
@test "docker: a FIFO planted at the script's path neither blocks the call nor costs the workspace" { fifo_script_case docker; }
@test "daytona: a FIFO planted at the script's path neither blocks the call nor costs the workspace" { fifo_script_case daytona; }

planted_spill_case() {
	with_backend "$1"
	mcp_session --output-cap 4K <<EOF
$INIT
$(bash_call 1 'mkdir -p .sandbox/output; echo victim > v; mkfifo .sandbox/output/call-2.stdout; ln -s ../../v .sandbox/output/call-2.stderr')
{"wait": 1}
$(bash_call 2 'seq 1 20000; seq 1 20000 >&2' 3)
{"wait": 2}
$(bash_call 3 'cat v; wc -c < .sandbox/output/call-2.stdout; wc -c < .sandbox/output/call-2.stderr; [ -L .sandbox/output/call-2.stderr ] || echo replaced')
EOF
	res 2
	n=$(seq 1 20000 | wc -c)
	sc ".exit_code == 0 and .duration_ms < 3000 and .truncated.stdout_file == \"/workspace/.sandbox/output/call-2.stdout\" and .truncated.stderr_bytes == $n"
	res 3
	sc ".stdout == \"victim\n$n\n$n\nreplaced\n\""
}

@test "local: a FIFO or symlink planted at a spill file's path is replaced, never opened or followed" { planted_spill_case local; }
@test "docker: a FIFO or symlink planted at a spill file's path is replaced, never opened or followed" { planted_spill_case docker; }
@test "daytona: a FIFO or symlink planted at a spill file's path is replaced, never opened or followed" { planted_spill_case daytona; }

spill_failure_case() {
	with_backend "$1"
	mcp_session --output-cap 4K <<EOF
$INIT
$(bash_call 1 'mkdir -p .sandbox/output/call-2.stdout/in-the-way')
{"wait": 1}
$(bash_call 2 'seq 1 20000')
EOF
	res 2
	sc '.exit_code == 0 and .truncated.stdout and .truncated.stdout_file == null and (.truncated.stdout_file_error | test("Is a directory"))'
	jqe "$result" '.content[0].text | test("the full text could not be saved: .*Is a directory")'
}

@test "local: a cut stream whose full text cannot be saved says why" { spill_failure_case local; }
@test "docker: a cut stream whose full text cannot be saved says why" { spill_failure_case docker; }
@test "daytona: a cut stream whose full text cannot be saved says why" { spill_failure_case daytona; }

# ---------------------------------------------------------------- removal

# Code that makes every shape it can: a 5000-level folder chain holding 20 MiB, folders without
# read or search rights, links (to files and folders outside the sandbox's folder, which must
# survive), a FIFO, a socket, hard links, long names.
TORTURE='import os, socket
os.makedirs("t", exist_ok=True)
os.chdir("t")
for i in range(5000):
    os.mkdir("d")
    os.chdir("d")
    if i % 5 == 0:
        with open("f", "wb") as f:
            f.write(b"x" * 20971)
os.chdir("/workspace/t")
for name, mode in (("noread", 0o300), ("nosearch", 0o600), ("nothing", 0o000)):
    os.makedirs(name + "/inner/deeper")
    open(name + "/inner/deeper/f", "w").write("x")
    os.chmod(name + "/inner", mode)
    os.chmod(name, mode)
os.symlink(OUTSIDE + "/keep", "link-to-file")
os.symlink(OUTSIDE, "link-to-folder")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX); s.bind("sock")
open("hard", "w").write("h"); os.link("hard", "hard2")
open("n" * 250, "w").write("long")
print("made")'

removal_case() {
	with_backend "$1"
	local outside="$BATS_TEST_TMPDIR/outside"
	mkdir -p "$outside/sub"
	echo keep > "$outside/keep"
	echo keep > "$outside/sub/keep"
	chmod -R o+rX "$BATS_TEST_TMPDIR"
	script="OUTSIDE = \"$outside\"
$TORTURE"
	# The workspace as a plain folder (as for a server that is not root): as root it is an
	# image, and the whole tree goes with the image's file.
	SESSION_TIMEOUT=300 mcp_session --workspace-size 0 <<EOF
$INIT
$(py_call 1 "$script" 200)
{"wait": 1}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cleanup_sandbox","arguments":{}}}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "made\n"'
	jqe "$(response 2)" '.result.structuredContent.removed == true and .result.structuredContent.error == null and .result.isError != true'
	# Nothing of the sandbox is left on the host; what its links pointed at is untouched.
	[ -z "$(find "$SANDBOX_STATE_DIR" -mindepth 1 -maxdepth 1 -name "$1-*")" ]
	[ "$(cat "$outside/keep" "$outside/sub/keep")" = "$(printf 'keep\nkeep')" ]
}

@test "local: cleanup removes any tree the code can make, 5000 levels deep included, and follows no link" { removal_case local; }
@test "docker: cleanup removes any tree the code can make, 5000 levels deep included, and follows no link" { removal_case docker; }

removal_failure_case() {
	with_backend "$1"
	command -v chattr >/dev/null || skip_or_fail "needs chattr (e2fsprogs)"
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make a file immutable"
	# A plain folder (as for a server that is not root): an image goes whole, whatever is in it.
	mcp_session --workspace-size 0 <<EOF
$INIT
$(bash_call 1 'echo stuck > stuck; echo made')
{"wait": 1}
{"sh": "chattr +i $SANDBOX_STATE_DIR/$1-*/workspace/stuck"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"cleanup_sandbox","arguments":{}}}
{"wait": 2}
{"sh": "chattr -i $SANDBOX_STATE_DIR/$1-*/workspace/stuck"}
$(bash_call 3 'ls; echo fresh')
EOF
	jqe "$(response 2)" '.result.structuredContent.removed == true and .result.isError == true and (.result.structuredContent.error | test("could not remove .*Operation not permitted"))'
	jqe "$(response 2)" '.result.content[0].text | test("not all of it could be removed")'
	res 3
	sc '.exit_code == 0 and .stdout == "fresh\n"'
	# What was left is removed by the next server, at its start.
	[ -n "$(ls -A "$SANDBOX_STATE_DIR")" ]
	mcp_session <<<"$INIT"
	grep -q "left by a server that is gone" "$SERVER_LOG"
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
}

@test "local: a cleanup that cannot remove everything says so instead of claiming it did" { removal_failure_case local; }
@test "docker: a cleanup that cannot remove everything says so instead of claiming it did" { removal_failure_case docker; }

# ---------------------------------------------------------------- workspace quota

quota_case() {
	local kind="the workspace is an ext4 image of its own, its blocks reserved on the host (loop device)" fs=ext4
	with_backend "${1%-unprivileged}"
	if [ "$1" = local-unprivileged ]; then
		unprivileged_server
		kind="the workspace is a tmpfs of its own (memory, not disk)" fs=tmpfs
	elif [ "$1" = docker-unprivileged ]; then
		unprivileged_server
		unprivileged_docker
		kind="the workspace is a tmpfs volume of its own (memory, not disk)" fs=tmpfs
	else
		[ "$(id -u)" -eq 0 ] || skip_or_fail "the workspace quota on the host's disk needs the server to be root"
	fi
	run "$SANDBOX_MCP" --backend "${1%-unprivileged}" --check --workspace-size 32M
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"disk        32 MiB     $kind: the code gets ENOSPC when it is full"* ]]
	mcp_session --workspace-size 32M <<EOF
$INIT
$(bash_call 1 'head -c 64M /dev/zero > big; echo "head=$?"; df -k --output=size,avail /workspace | tail -1')
$(py_call 2 'print("py")')
$(bash_call 3 'rm big; echo freed')
$(py_call 4 'print("py again")')
$(bash_call 5 "awk '\$5 == \"/workspace\" { for (i = 6; i < NF; i++) if (\$i == \"-\") print \$(i + 1) }' /proc/self/mountinfo; grep -c -F '$SANDBOX_STATE_DIR' /proc/self/mountinfo; awk '\$5 == \"/workspace\" { print \$4 }' /proc/self/mountinfo; awk '\$5 == \"/.sandbox-agent\" { print \$4 }' /proc/self/mountinfo")
EOF
	# The code gets ENOSPC at the quota: the file system is 32 MiB (less its own tables), full
	# (under 1 MiB left).
	res 1
	sc '.exit_code == 0 and (.stdout | test("^head=1\n +(3[0-2]|2[0-9])[0-9]{3} +[0-9]{1,3}\n$")) and (.stderr | test("No space left on device"))'
	# The script file of a Python call finds no room: the result says how to get out of it.
	res 2
	sc '.exit_code == 1 and (.error | test("No space left on device.*the workspace is full: remove files"))'
	res 3
	sc '.exit_code == 0 and .stdout == "freed\n"'
	res 4
	sc '.exit_code == 0 and .stdout == "py again\n" and .notice == null'
	# /workspace is that file system, whole (its mount's root is the file system's own: no path
	# of the host's shows, whatever file system the state folder lies on), and the sandbox's
	# mount table names no path of the state folder. A Docker sandbox's agent is bound from a
	# tmpfs of the sandbox's own as root; without root, from a folder of its own on /dev/shm,
	# which names that folder alone.
	res 5
	case $1 in
	docker) sc ".stdout == \"$fs\n0\n/\n/sandbox-agent\n\"" ;;
	docker-unprivileged) sc ".stdout | test(\"^$fs\n0\n/\n/sandbox-mcp-[0-9a-f]{18}/sandbox-agent\n$\")" ;;
	*) sc ".stdout == \"$fs\n0\n/\n\"" ;;
	esac
	# Nothing is left mounted, attached or running once the server is gone.
	no_shm_left
	[ -z "$(grep -F "$SANDBOX_STATE_DIR" /proc/self/mountinfo)" ]
	run grep -sF "$SANDBOX_STATE_DIR" /sys/block/loop*/loop/backing_file
	[ "$status" -ne 0 ]
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	if [ "${1%-unprivileged}" = docker ]; then
		[ -z "$(our_containers)" ]
		[ -z "$(our_volumes)" ]
	fi
	if [ "$1" != "${1%-unprivileged}" ]; then
		no_sandbox_processes "$UNPRIV_UID"
		unprivileged_cleanup
	fi
}

@test "local: the workspace quota gives the code ENOSPC, the next call works, nothing is left" { quota_case local; }
@test "docker: the workspace quota gives the code ENOSPC, the next call works, nothing is left" { quota_case docker; }

# A full workspace and a `files` batch whose last file does not fit: the call fails saying the
# workspace is full, and changes none of its files (those that fit included): each old file
# stays byte for byte, and no temporary file, nor a folder made for the batch, is left. On Daytona the test server gives
# the sandbox a disk of 32 MiB (server.py's "disk").
files_full_case() {
	with_backend "$1"
	local size=()
	if [ "$1" = daytona ]; then
		daytona_control '{"disk": 33554432}' | jq -e '.disk == 33554432' >/dev/null ||
			skip_or_fail "the Daytona test server cannot give a sandbox a disk of its own here (it needs root)"
	else
		[ "$(id -u)" -eq 0 ] || skip_or_fail "the workspace quota on the host's disk needs the server to be root"
		size=(--workspace-size 32M)
	fi
	# Full, then 16 KiB freed: room for a small file, not for 30,000 bytes (which on Daytona go
	# in the call's request, to the runner: a larger batch would go by bulk upload first).
	local fill='printf old-a > a.txt; printf old-b > b.txt; head -c 64M /dev/zero > big 2>/dev/null; truncate -s -16K big; echo filled'
	local files
	head -c 30000 /dev/zero | tr '\0' x >"$BATS_TEST_TMPDIR/b"
	files=$(jq -cn --rawfile b "$BATS_TEST_TMPDIR/b" '{jsonrpc: "2.0", id: 2, method: "tools/call", params: {name:
		"execute_bash_commands", arguments: {code: "echo ran", files: {"a.txt": "new-a", "new/deep/c.txt": "c", "b.txt": $b}}}}')
	mcp_session "${size[@]}" <<EOF
$INIT
$(bash_call 1 "$fill")
$files
$(bash_call 3 'cat a.txt; echo; cat b.txt; echo; ls -A | grep -c "\.tmp$"; ls -A')
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "filled\n"'
	res 2
	sc '.exit_code == 1 and .stdout == "" and (.error | test("b\\.txt: No space left on device.*the workspace is full: remove files"))'
	res 3
	sc '.stdout == "old-a\nold-b\n0\na.txt\nb.txt\nbig\n"'
}

@test "local: a files batch that does not fit a full workspace fails and changes none of its files" { files_full_case local; }
@test "docker: a files batch that does not fit a full workspace fails and changes none of its files" { files_full_case docker; }
@test "daytona: a files batch that does not fit a full workspace fails and changes none of its files" { files_full_case daytona; }

# The workspace image's file system is made by mkfs.ext4 once and copied after, from a template
# in /run/sandbox-mcp. template_server SETUP: $SANDBOX_MCP becomes a wrapper that starts the
# server in a mount namespace of its own where that folder is an empty tmpfs (root's, 0700),
# SETUP (shell) has run in it, and mkfs.ext4 notes each run in $BATS_TEST_TMPDIR/mkfs.log.
template_server() {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "the workspace image needs the server to be root"
	mkfs=$(command -v mkfs.ext4) || skip_or_fail "needs mkfs.ext4 (e2fsprogs)"
	# The real one, copied under its own name (mke2fs chooses the file system by it).
	mkdir -p "$BATS_TEST_TMPDIR/real" && cp "$mkfs" "$BATS_TEST_TMPDIR/real/mkfs.ext4"
	cat >"$BATS_TEST_TMPDIR/mkfs" <<-EOF
		#!/bin/sh
		echo run >> "$BATS_TEST_TMPDIR/mkfs.log"
		exec "$BATS_TEST_TMPDIR/real/mkfs.ext4" "\$@"
	EOF
	printf '%s\n' "$1" >"$BATS_TEST_TMPDIR/setup"
	cat >"$BATS_TEST_TMPDIR/server" <<-EOF
		#!/bin/sh
		exec unshare -m --propagation private sh -ec 'mkdir -p /run/sandbox-mcp && mount -t tmpfs -o mode=0700 tmpfs /run/sandbox-mcp && mount --bind "$BATS_TEST_TMPDIR/mkfs" "$mkfs" && . "$BATS_TEST_TMPDIR/setup" && exec "\$@"' sh "$REAL_SANDBOX_MCP" "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/mkfs" "$BATS_TEST_TMPDIR/server"
	rm -f "$BATS_TEST_TMPDIR/mkfs.log"
}

mkfs_runs() { cat "$BATS_TEST_TMPDIR/mkfs.log" 2>/dev/null | wc -l; }

@test "local: the workspace's file system is made once and copied after; the copy is whole and keeps the quota" {
	REAL_SANDBOX_MCP=$SANDBOX_MCP
	template_server 'true'
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session --workspace-size 32M <<EOF
$INIT
$(bash_call 1 'echo one > f; cat f')
$(call_json 2 cleanup_sandbox '{}')
$(bash_call 3 'ls -A; stat -c "%u:%g %a" .; head -c 64M /dev/zero > big; echo "head=$?"; df -k --output=size /workspace | tail -1; rm big; echo two > g; cat g')
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "one\n"'
	# A fresh workspace, the sandbox user's, 32 MiB, full at the quota.
	res 3
	sc '.exit_code == 0 and (.stdout | test("^1000:1000 755\nhead=1\n +(3[0-2]|2[0-9])[0-9]{3}\ntwo\n$")) and (.stderr | test("No space left on device"))'
	# Two sandboxes, one mkfs.
	[ "$(mkfs_runs)" -eq 1 ]
}

# A template is parsed by the kernel as root: one that anybody but root could have written is
# never used (each here is zeros: used, it would not mount, and the workspace would go without
# its quota).
@test "local: a workspace template that anybody but root may write is not used" {
	REAL_SANDBOX_MCP=$SANDBOX_MCP
	local img=/run/sandbox-mcp/ext4-v1-33554432-65534-65534.img
	for setup in "chmod 0777 /run/sandbox-mcp; truncate -s 32M $img; chmod 0600 $img" \
		"truncate -s 32M $img; chmod 0666 $img" \
		"truncate -s 32M $img; chmod 0600 $img; chown 65534 $img"; do
		template_server "$setup"
		SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session --workspace-size 32M <<-EOF
			$INIT
			$(bash_call 1 'echo ok; df -k --output=size /workspace | tail -1')
			$(call_json 2 cleanup_sandbox '{}')
			$(bash_call 3 'echo ok again; df -k --output=size /workspace | tail -1')
		EOF
		# Each workspace is a 32 MiB file system of its own, made by mkfs.
		res 1
		sc '.exit_code == 0 and (.stdout | test("^ok\n +(3[0-2]|2[0-9])[0-9]{3}\n$"))'
		res 3
		sc '.exit_code == 0 and (.stdout | test("^ok again\n +(3[0-2]|2[0-9])[0-9]{3}\n$"))'
		[ "$(mkfs_runs)" -eq 2 ] || { echo "$setup: mkfs ran $(mkfs_runs) times" >&2; return 1; }
	done
}
@test "local, not root: the workspace quota (a tmpfs) gives the code ENOSPC, the next call works, nothing is left" {
	quota_case local-unprivileged
}
@test "docker, not root: the workspace quota (a tmpfs volume) gives the code ENOSPC, the next call works, nothing is left" {
	quota_case docker-unprivileged
}

# Where /dev/shm is no place for the files bound into a sandbox (here: a tmpfs where programs may
# not run, in a mount namespace of the server's own), they stay in the state folder; calls work,
# and the log says why the mount table names the state folder.
shm_unusable_case() {
	with_backend "${1%-unprivileged}"
	unprivileged_server
	[ "$1" != docker-unprivileged ] || unprivileged_docker
	cat >"$UNPRIV_DIR/run-noexec-shm" <<-EOF
		#!/bin/sh
		exec unshare -m --propagation private sh -c 'mount -t tmpfs -o noexec,size=1m tmpfs /dev/shm && exec "\$@"' sh "$UNPRIV_DIR/run" "\$@"
	EOF
	chmod +x "$UNPRIV_DIR/run-noexec-shm"
	SANDBOX_MCP="$UNPRIV_DIR/run-noexec-shm" mcp_session --log-level info <<EOF
$INIT
$(bash_call 1 "echo hi; grep -c -F '$SANDBOX_STATE_DIR' /proc/self/mountinfo; true")
EOF
	res 1
	if [ "$1" = docker-unprivileged ]; then
		sc '.exit_code == 0 and (.stdout | test("^hi\n[1-9]\n$"))'
	else
		sc '.exit_code == 0 and .stdout == "hi\n0\n"'
	fi
	grep -qF "the files bound into sandboxes are in the state folder, whose path their mount table shows: /dev/shm is not a tmpfs where programs may run" "$SERVER_LOG"
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	no_shm_left
	unprivileged_cleanup
}
@test "local, not root, /dev/shm unusable: the bound files stay in the state folder, calls work" {
	shm_unusable_case local-unprivileged
}
@test "docker, not root, /dev/shm unusable: the bound files stay in the state folder, calls work" {
	shm_unusable_case docker-unprivileged
}

# An engine that sees another /dev/shm than the server's (the relay answers a bind from there as
# the engine answers a path it does not have): the files go to the sandbox's folder, and the
# sandbox is made all the same.
@test "docker, not root, an engine that does not see the server's /dev/shm: the bound files go to the state folder, calls work" {
	with_backend docker
	unprivileged_server
	unprivileged_docker other-shm
	mcp_session <<EOF
$INIT
$(bash_call 1 "echo hi; grep -c -F '$SANDBOX_STATE_DIR' /proc/self/mountinfo; true")
EOF
	res 1
	sc '.exit_code == 0 and (.stdout | test("^hi\n[1-9]\n$"))'
	grep -qE "the container engine does not see /dev/shm/sandbox-mcp-[0-9a-f]{18} as this server does \(.*bind source path does not exist" "$SERVER_LOG"
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	no_shm_left
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
	unprivileged_cleanup
}

# A holder that dies takes the workspace from any instance made after: the sandbox is found
# lost before the next call, which runs in a new one and says so.
@test "local, not root: a workspace holder that dies is noticed; the next call runs in a new sandbox" {
	with_backend local
	unprivileged_server
	mcp_session <<EOF
$INIT
$(bash_call 1 'echo hi > f; cat f')
{"wait": 1}
{"until": "pkill -9 -u $UNPRIV_USER -f \"^sandbox-mcp: the workspace's tmpfs of\"; ! pgrep -u $UNPRIV_USER -f \"^sandbox-mcp: the workspace's tmpfs of\""}
$(bash_call 2 'ls')
$(bash_call 3 'echo again > f; cat f')
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "hi\n"'
	id=$(printf '%s' "$result" | jq -r .structuredContent.sandbox_id)
	res 2
	sc ".exit_code == 0 and .stdout == \"\" and .notice != null and .sandbox_id != \"$id\""
	res 3
	sc '.exit_code == 0 and .stdout == "again\n"'
	grep -qF "the process holding its workspace's tmpfs died" "$SERVER_LOG"
	no_sandbox_processes "$UNPRIV_UID"
	unprivileged_cleanup
}

# Where the kernel or a policy refuses what the tmpfs needs, before any sandbox is made on it
# (open_tree) or in the first one (move_mount), the sandbox is made on its plain folder: the
# calls work, and --check and the log say that the quota is not enforced, and why.
quota_refused_case() { # local CALLS WHY | docker FAULT WHY: CALLS refused, or the engine's FAULT
	with_backend "$1"
	unprivileged_server
	if [ "$1" = docker ]; then
		unprivileged_docker "$2"
		[ "$2" != taken-volume ] || docker volume create --label other=1 sbx-test-taken
	else
		export UNPRIV_WITHOUT=$2
	fi
	run "$SANDBOX_MCP" --backend "$1" --check --workspace-size 32M
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"disk        32 MiB     NOT enforced: the server is not root, and $3"* ]]
	mcp_session --workspace-size 32M <<EOF
$INIT
$(bash_call 1 'echo hi > f; cat f')
$(py_call 2 'print(open("f").read(), end="")')
EOF
	for id in 1 2; do
		res $id
		sc '.exit_code == 0 and .stdout == "hi\n" and .notice == null'
	done
	grep -qF "the workspace quota is not enforced: " "$SERVER_LOG"
	grep -qF "$3" "$SERVER_LOG"
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
	if [ "$1" = docker ]; then
		[ -z "$(our_containers)" ]
		[ -z "$(our_volumes)" ]
	fi
	if [ "$2" = taken-volume ]; then
		# The volume that is not the sandbox's is left as it was.
		[ "$(docker volume inspect -f '{{json .Labels}}' sbx-test-taken)" = '{"other":"1"}' ]
		docker volume rm sbx-test-taken
	fi
	no_sandbox_processes "$UNPRIV_UID"
	unprivileged_cleanup
}

@test "local, not root: where open_tree is refused, the sandbox is made without the quota and says why" {
	quota_refused_case local open_tree "copying the workspace's mount: open_tree: Function not implemented"
}
@test "local, not root: where move_mount is refused, the sandbox is made without the quota and says why" {
	quota_refused_case local move_mount "building the sandbox failed while mounting /workspace: Function not implemented"
}
@test "docker, not root: where the engine refuses the workspace's volume, the sandbox is made without the quota and says why" {
	quota_refused_case docker refuse-volume "the engine refused to make the workspace's volume: volumes are refused here"
}
@test "docker, not root: where the engine cannot mount the workspace's volume, the sandbox is made without the quota and says why" {
	quota_refused_case docker bad-volume "the engine could not mount the workspace's tmpfs volume: invalid argument (HTTP 500)"
}
@test "docker, not root: where the engine answers with a volume of that name that is not the sandbox's, it is left alone and the sandbox is made without the quota" {
	quota_refused_case docker taken-volume "the engine already has a volume named sandbox-mcp-docker-"
}
@test "docker, not root: where the answer to the volume's making is lost, the volume it made is removed and the sandbox is made without the quota" {
	quota_refused_case docker lost-volume "the Docker engine at unix://"
}

# ---------------------------------------------------------------- out of memory

# On cgroup v1 a sandbox's first process moves itself into the sandbox's cgroups (no lock for
# the server to wait for): the code is in them, every controller's, and the server ends where it
# started. On cgroup v1 only: on v2 the server moves itself into a leaf of its cgroup by design.
@test "local, cgroup v1: the code is in its sandbox's cgroups; the server stays in the cgroups it started in" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make cgroups"
	grep -qE "^[0-9]+:([^:]*,)?memory:" /proc/self/cgroup || skip_or_fail "no cgroup v1 memory hierarchy here"
	pidf="$BATS_TEST_TMPDIR/server.pid"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 60 -- "$SANDBOX_MCP" --memory 64M <<EOF
$INIT
$(bash_call 1 'echo one')
{"wait": 1}
$(call_json 2 cleanup_sandbox '{}')
{"wait": 2}
$(py_call 3 'x = bytearray(400 * 1024 * 1024)')
{"wait": 3}
$(bash_call 4 'exec sleep 30')
{"until": "for c in \$(grep -lsx sleep /proc/[0-9]*/comm); do grep -qs \"sandbox-mcp-\$SERVER_PID-\" \"\${c%comm}cgroup\" && exit 0; done; exit 1"}
{"sh": "grep -ls \"sandbox-mcp-\$(cat $pidf)-\" /proc/[0-9]*/cgroup > $BATS_TEST_TMPDIR/procs; for f in \$(cat $BATS_TEST_TMPDIR/procs); do cat \$f; done > $BATS_TEST_TMPDIR/code"}
{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}
{"wait": 3}
{"sh": "cat /proc/\$(cat $pidf)/cgroup > $BATS_TEST_TMPDIR/server; cat /proc/self/cgroup > $BATS_TEST_TMPDIR/here"}
EOF
	[ "$status" -eq 0 ]
	res 1
	sc '.stdout == "one\n"'
	res 3
	sc '.oom_killed == true'
	diff "$BATS_TEST_TMPDIR/here" "$BATS_TEST_TMPDIR/server"
	# Every process of the sandbox (its agent, the first, and the code) is in the sandbox's
	# memory, pids and cpu cgroups.
	local pid n
	pid=$(cat "$pidf")
	n=$(wc -l <"$BATS_TEST_TMPDIR/procs")
	cat "$BATS_TEST_TMPDIR/code" >&2
	[ "$n" -ge 2 ]
	[ "$(grep -cE "^[0-9]+:([^:]*,)?memory(,[^:]*)?:.*/sandbox-mcp-$pid-local-" "$BATS_TEST_TMPDIR/code")" -eq "$n" ]
	[ "$(grep -cE "^[0-9]+:([^:]*,)?pids(,[^:]*)?:.*/sandbox-mcp-$pid-local-" "$BATS_TEST_TMPDIR/code")" -eq "$n" ]
	[ "$(grep -cE "^[0-9]+:([^:]*,)?cpu(,[^:]*)?:.*/sandbox-mcp-$pid-local-" "$BATS_TEST_TMPDIR/code")" -eq "$n" ]
}

oom_case() {
	with_backend "$1"
	mcp_session --memory 64M <<EOF
$INIT
$(py_call 1 'x = bytearray(400 * 1024 * 1024)
print("survived")')
{"wait": 1}
$(bash_call 2 'kill -KILL $$')
EOF
	res 1
	sc '.exit_code == 137 and .oom_killed == true'
	jqe "$result" '.content[0].text | test("killed: out of memory: .*64 MiB, --memory")'
	# A SIGKILL from anything else is not reported as out of memory.
	res 2
	sc '.exit_code == 137 and .oom_killed == false'
}

@test "local: an out-of-memory kill says so, with the limit" {
	grep -qE "^[0-9]+:([^:]*,)?memory:|^0::" /proc/self/cgroup || skip_or_fail "no memory cgroup here"
	oom_case local
}
@test "docker: an out-of-memory kill says so, with the limit" { oom_case docker; }
@test "daytona: an out-of-memory kill says so, with the limit (the test server gives the sandbox a memory cgroup)" {
	[ "$(id -u)" -eq 0 ] && [ -d /sys/fs/cgroup/memory ] || skip_or_fail "the test server needs root and cgroup v1 for a memory cgroup"
	DT_MEMORY=67108864 oom_case daytona
}

# ---------------------------------------------------------------- a kernel without mount_setattr or execveat

teardown() {
	umount "$BATS_TEST_TMPDIR/m/sub" 2>/dev/null || true
	unprivileged_teardown
}

# valgrind has neither mount_setattr nor a usable execveat, and a seccomp policy around the
# server may refuse them: the local sandbox then seals its mounts with one remount each, found
# by mount ID, and starts the agent through /proc. The code must see the very same mount table,
# options included: a submount of a read-only --mount folder read-only too, its nosymfollow
# and strictatime kept; and so when the state folder is named with "//" through a symlink.
@test "local: without mount_setattr and execveat, the sandbox's mounts are sealed the same" {
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to mount a tmpfs inside the --mount folder"
	mkdir -p "$BATS_TEST_TMPDIR/m/sub"
	mount -t tmpfs -o size=1m,nosymfollow,strictatime,nodiratime tmpfs "$BATS_TEST_TMPDIR/m/sub"
	echo inside > "$BATS_TEST_TMPDIR/m/sub/f"
	ln -s f "$BATS_TEST_TMPDIR/m/sub/l"
	local args real=$SANDBOX_MCP
	args=$(jq -cn --arg c 'awk '"'"'{print $5, $6}'"'"' /proc/self/mountinfo | sort
for f in /x /usr/x /etc/x /mnt/m/x /mnt/m/sub/x; do touch $f 2>/dev/null && echo "wrote $f"; done
cat /mnt/m/sub/l 2>/dev/null && echo "followed"; cat /mnt/m/sub/f; echo ok > w && cat w' '{code: $c}')
	tool execute_bash_commands "$args" --mount "$BATS_TEST_TMPDIR/m:/mnt/m"
	sc '.exit_code == 0 and (.stdout | test("\n/mnt/m/sub ro,nosuid,nodev,nodiratime,nosymfollow\n"))'
	local normal
	normal=$(printf '%s' "$result" | jq -r .structuredContent.stdout)
	SANDBOX_MCP="$REPO_DIR/build/test-helper" tool execute_bash_commands "$args" \
		without mount_setattr,execveat -- "$real" --mount "$BATS_TEST_TMPDIR/m:/mnt/m"
	sc '.exit_code == 0 and (.stdout | contains("wrote") or contains("followed") | not) and (.stdout | endswith("inside\nok\n"))'
	sc '.stdout | test("\n/mnt/m/sub ro,nosuid,nodev,nodiratime,nosymfollow\n") and test("\n/usr ro,") and test("^/ ro,nosuid,nodev")'
	[ "$(printf '%s' "$result" | jq -r .structuredContent.stdout)" = "$normal" ]
	# The same with the state folder named through a symlink, with "//".
	ln -s "$BATS_TEST_TMPDIR" "$BATS_TEST_TMPDIR/link"
	mkdir -m 700 "$BATS_TEST_TMPDIR/state2"
	SANDBOX_STATE_DIR="$BATS_TEST_TMPDIR/link//state2/" SANDBOX_MCP="$REPO_DIR/build/test-helper" tool execute_bash_commands "$args" \
		without mount_setattr,execveat -- "$real" --mount "$BATS_TEST_TMPDIR/m:/mnt/m"
	[ "$(printf '%s' "$result" | jq -r .structuredContent.stdout)" = "$normal" ]
}
