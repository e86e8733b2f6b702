#!/usr/bin/env bats
# Isolation: attacks from code running in the sandbox, each asserting the safe outcome.
# Classes: resource abuse, the file system outside, other processes and the kernel's surface,
# the network, leaked fds and environment, and processes left behind on the host.
# Every test drives the real server (as root, local backend) with small limits.
#
# The same cases run twice: from this file, with the local sandbox as this machine makes it
# (in a user namespace), and from tests/isolation-chroot.bats, a link to this file, with the
# server in a chroot (lib/chroot-root.sh), where the kernel refuses user namespaces and root
# makes the sandbox without one. The promises are the same; only the uid the code has inside
# differs (1000 in a user namespace, the host uid --sandbox-uid otherwise).

load lib/helpers

FIXTURES="$TESTS_DIR/fixtures/isolation"
ISO_MODE=userns
[ "$(basename "$BATS_TEST_FILENAME")" = isolation-chroot.bats ] && ISO_MODE=chroot

setup_file() {
	[ "$ISO_MODE" = chroot ] || return 0
	if [ "$(id -u)" -ne 0 ]; then
		export ISO_SKIP="running the server in a chroot needs root"
		return 0
	fi
	printf '#!/bin/sh\nexec %s %s "$@"\n' "$TESTS_DIR/lib/chroot-root.sh" "$SANDBOX_MCP" >"$BATS_FILE_TMPDIR/sandbox-mcp"
	chmod 755 "$BATS_FILE_TMPDIR/sandbox-mcp"
	export SANDBOX_MCP="$BATS_FILE_TMPDIR/sandbox-mcp"
}

# inner_uid [SANDBOX_UID]: the uid the code has inside the sandbox.
inner_uid() {
	if [ "$ISO_MODE" = chroot ]; then echo "${1:-65534}"; else echo 1000; fi
}

setup() {
	[ -z "${ISO_SKIP:-}" ] || skip_or_fail "$ISO_SKIP"
	common_setup
	unset SANDBOX_MEMORY SANDBOX_CPUS SANDBOX_PIDS SANDBOX_OPEN_FILES SANDBOX_FILE_SIZE SANDBOX_TMP_SIZE \
		SANDBOX_SPILL_MAX SANDBOX_UID SANDBOX_PYTHON SANDBOX_LOG_LEVEL
	TAG="iso$$x${BATS_TEST_NUMBER}x$RANDOM"
	BG_PIDS=()
	HOST_PATHS=()
}

teardown() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	for p in "${HOST_PATHS[@]}"; do
		rm -rf -- "$p"
	done
}

# ------------------------------------------------------------------ helpers of this file

# calls [SERVER ARGS...] <<<"REQUEST LINES": one session running the requests one after the
# other (each waits for the answer of the one before), then closing stdin; the server must
# then exit 0 within 20 s (it stayed healthy whatever the code did).
calls() {
	local reqs script
	reqs=$(cat)
	script=$(printf '%s\n' "$reqs" | jq -c 'if type == "object" and .id != null then ., {wait: .id} else . end')
	mcp_session "$@" <<<"$(printf '%s\n%s\n%s\n{"close":true}\n{"expect_exit":20}\n' "$INIT" "$INITIALIZED" "$script")" || return 1
	local ex
	ex=$(printf '%s\n' "$output" | jq -c 'select(type == "object" and has("exit_after_ms"))')
	jqe "$ex" '.exit == 0' || { echo "the server did not exit cleanly; its log:" >&2; tail -20 "$SERVER_LOG" >&2; return 1; }
}

# val FILTER: a raw value of the structuredContent of $result.
val() {
	printf '%s' "$result" | jq -r ".structuredContent | $1"
}

# bash_call ID CODE [TIMEOUT_S] / py_call ID SCRIPT [TIMEOUT_S] [REQUIREMENTS_JSON]: request lines.
bash_call() {
	call_json "$1" execute_bash_commands \
		"$(jq -cn --arg c "$2" --argjson t "${3:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)')"
}
py_call() {
	call_json "$1" execute_python \
		"$(jq -cn --arg s "$2" --argjson t "${3:-null}" --argjson r "${4:-null}" \
			'{script: $s} + (if $t then {timeout_s: $t} else {} end) + (if $r then {requirements: $r} else {} end)')"
}

# expect_stdout TEXT: the stdout of $result is exactly TEXT (plus a final newline).
expect_stdout() {
	local got
	got=$(val .stdout)
	if [ "$got" != "$1" ]; then
		echo "stdout differs; expected:" >&2
		printf '%s\n' "$1" >&2
		echo "--- got:" >&2
		printf '%s\n' "$got" >&2
		echo "--- stderr:" >&2
		val .stderr >&2
		return 1
	fi
}

# refute_match TEXT ERE: fails, showing the lines, when a line of TEXT matches ERE.
refute_match() {
	local hits
	hits=$(printf '%s\n' "$1" | grep -E -- "$2" || true)
	if [ -n "$hits" ]; then
		echo "unexpected lines (matching $2):" >&2
		printf '%s\n' "$hits" >&2
		return 1
	fi
}

need_x86_64() {
	[ "$(uname -m)" = x86_64 ] || skip_or_fail "the raw syscall numbers of this test are x86_64's (this is $(uname -m))"
}

# start_listener: the host bait (fixtures/isolation/listener.py) on 127.0.0.1 and @isolation-$TAG;
# sets PORT and LISTEN_DIR, and checks from the host that it answers (two log lines).
start_listener() {
	LISTEN_DIR="$BATS_TEST_TMPDIR/listener"
	mkdir -p "$LISTEN_DIR"
	python3 "$FIXTURES/listener.py" "$LISTEN_DIR" "$TAG" &
	BG_PIDS+=($!)
	local i
	for i in $(seq 100); do
		[ -s "$LISTEN_DIR/port" ] && break
		sleep 0.1
	done
	PORT=$(cat "$LISTEN_DIR/port")
	[ -n "$PORT" ]
	python3 - "$PORT" "$TAG" <<-'PY'
		import socket, sys
		s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
		s.sendall(b"host-check\n"); s.recv(100); s.close()
		u = socket.socket(socket.AF_UNIX)
		u.connect("\0isolation-" + sys.argv[2])
		u.sendall(b"host-check\n"); u.recv(100); u.close()
	PY
	for i in $(seq 50); do
		[ "$(wc -l <"$LISTEN_DIR/log" 2>/dev/null)" = 2 ] && return 0
		sleep 0.1
	done
	echo "the host listener does not work" >&2
	return 1
}

# listener_untouched: nothing but the host's own check ever reached the listener.
listener_untouched() {
	sleep 0.5 # a connection just accepted is logged at once, but let a late one land
	local log
	log=$(cat "$LISTEN_DIR/log")
	if [ "$log" != $'tcp host-check\nunix host-check' ]; then
		echo "the host's listener was reached from the sandbox:" >&2
		printf '%s\n' "$log" >&2
		return 1
	fi
}

# Python run before each Python probe: raw system calls and errno names.
PRELUDE='
import ctypes, errno, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def raw(nr, *args):
    """a raw system call: (result, errno name or None)"""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a & 0xffffffffffffffff) for a in args])
    return r, (errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if r < 0 else None)
def sysc(nr, *args):
    r, e = raw(nr, *args)
    return e or "ok"
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def addr(buf):
    return ctypes.addressof(buf)
'

# Python that prints the other processes of the sandbox (all but PID 1 and itself): "[]" when none.
LIST_OTHERS='
import os
others = []
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) not in (1, os.getpid()):
        try:
            others.append(p + ":" + open("/proc/%s/cmdline" % p).read().replace("\0", " ").strip())
        except OSError:
            others.append(p)
print(sorted(others))
'

# ------------------------------------------------------------------ 1. resource abuse

@test "resource: a fork bomb is stopped by --pids (EAGAIN); the sandbox and the server stay healthy" {
	local bomb='
import errno, os, time
n, err = 0, None
while n < 1000:
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(n, err)'
	calls --pids 32 --timeout 10 <<<"$(py_call 1 "$bomb"; bash_call 2 'b() { b | b & }; b; sleep 2; echo main-done' 8; py_call 3 "$LIST_OTHERS")"
	res 1
	sc '.exit_code == 0 and .timed_out == false'
	sc '.stdout | test("^[0-9]+ EAGAIN\n$")'
	local n id
	n=$(val '.stdout | split(" ")[0]')
	[ "$n" -ge 1 ]
	[ "$n" -lt 32 ]
	id=$(val .sandbox_id)
	# The shell fork bomb: answered within its timeout, however it ended.
	res 2
	sc '.error == null and .duration_ms < 12000'
	# Nothing of either bomb is left, and it is still the same sandbox.
	res 3
	sc ".exit_code == 0 and .stdout == \"[]\n\" and .sandbox_id == \"$id\" and .notice == null"
}

@test "resource: a memory hog is killed by --memory (exit 137); the sandbox and the server stay healthy" {
	local hog='
chunks = []
for i in range(64):
    chunks.append(b"x" * (8 << 20))
    print(i, flush=True)
print("survived 512M")'
	calls --memory 64M --timeout 20 <<<"$(py_call 1 "$hog"; bash_call 2 'echo alive')"
	res 1
	sc '.exit_code == 137 and .timed_out == false'
	sc '.stdout | contains("survived") | not'
	local id
	id=$(val .sandbox_id)
	res 2
	sc ".exit_code == 0 and .stdout == \"alive\n\" and .sandbox_id == \"$id\" and .notice == null"
}

@test "resource: filling /tmp and /dev/shm stops at --tmp-size with ENOSPC" {
	local fill='
import errno, os
def fill(d):
    total = 0
    try:
        for i in range(100):
            with open("%s/fill%d" % (d, i), "wb") as f:
                for j in range(4):
                    f.write(b"x" * (256 << 10))
                    total += 256 << 10
    except OSError as e:
        return errno.errorcode[e.errno], total
    return "no-error", total
for d in ("/tmp", "/dev/shm"):
    err, total = fill(d)
    st = os.statvfs(d)
    print(d, err, total <= (4 << 20), (st.f_blocks - st.f_bfree) * st.f_frsize <= (4 << 20))'
	calls --tmp-size 4M <<<"$(py_call 1 "$fill")"
	res 1
	sc '.exit_code == 0'
	expect_stdout $'/tmp ENOSPC True True\n/dev/shm ENOSPC True True'
}

@test "resource: writing past --file-size fails (SIGXFSZ, exit 153, in bash; EFBIG in Python)" {
	local py='
import errno, os
f = open("/workspace/big2", "wb", buffering=0)
try:
    f.write(b"x" * (1 << 20))
    f.write(b"y")
    print("wrote past the limit")
except OSError as e:
    print(errno.errorcode[e.errno])
print(os.path.getsize("/workspace/big2"))'
	calls --file-size 1M <<<"$(bash_call 1 'head -c 3000000 /dev/zero > /workspace/big; echo "rc=$?"; stat -c %s /workspace/big
head -c 3000000 /dev/zero > /tmp/big; echo "rc=$?"; stat -c %s /tmp/big'; py_call 2 "$py")"
	res 1
	expect_stdout $'rc=153\n1048576\nrc=153\n1048576'
	res 2
	expect_stdout $'EFBIG\n1048576'
}

@test "resource: opening more than --open-files files fails with EMFILE" {
	local py='
import errno
fds = []
err = None
for i in range(5000):
    try:
        fds.append(open("/dev/null"))
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
print(err, len(fds) <= 64)'
	calls --open-files 64 <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout 'EMFILE True'
}

@test "resource: a CPU burn (ignoring signals, with a background burner) ends at the call's timeout" {
	calls --timeout 10 <<<"$(bash_call 1 'trap "" TERM INT HUP XCPU; (trap "" TERM INT HUP XCPU; while :; do :; done) & while :; do :; done' 2; py_call 2 "$LIST_OTHERS")"
	res 1
	sc '.timed_out == true and .exit_code == 124'
	sc '.duration_ms >= 1900 and .duration_ms < 8000'
	local id
	id=$(val .sandbox_id)
	res 2
	sc ".exit_code == 0 and .stdout == \"[]\n\" and .sandbox_id == \"$id\""
}

@test "resource: huge output is bounded in the result (cap), flagged truncated, and the spill files are capped" {
	calls --output-cap 4K --spill-max 64K <<<"$(bash_call 1 "head -c 20000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2"
		bash_call 2 'for f in /workspace/.sandbox/output/*; do echo "$f $(stat -c %s "$f")"; done')"
	res 1
	sc '.exit_code == 0'
	sc '.truncated.stdout == true and .truncated.stdout_bytes == 20000000'
	sc '.truncated.stderr == true and .truncated.stderr_bytes == 3000000'
	sc '(.stdout | length) <= 4096 + 300 and (.stderr | length) <= 4096 + 300'
	# The whole response line stays small.
	local line f1 f2
	line=$(response 1)
	[ "${#line}" -lt 32768 ] || { echo "the response is ${#line} bytes" >&2; return 1; }
	# The spill files in the workspace stop at --spill-max.
	f1=$(val .truncated.stdout_file)
	f2=$(val .truncated.stderr_file)
	[ "$f1" != null ]
	[ "$f2" != null ]
	res 2
	expect_stdout "$f2 65536
$f1 65536"
}

# ------------------------------------------------------------------ 2. the file system outside

@test "fs: host secrets are not there: /etc/shadow, /etc/sudoers, /root, /home, /run, /sys, a host /tmp file" {
	[ -e /etc/shadow ] || skip_or_fail "this host has no /etc/shadow to hide"
	local marker="/tmp/isolation-secret-$TAG"
	echo "TOPSECRET-$TAG" >"$marker"
	chmod 644 "$marker"
	HOST_PATHS+=("$marker")
	local code='
for p in /etc/shadow /etc/gshadow /etc/shadow- /etc/sudoers /etc/sudoers.d /etc/ssh /root/.bashrc /root/.ssh /home/* \
	/run /var /sys /boot /mnt /opt /srv /media /lost+found @MARKER@ /proc/self/root@MARKER@; do
	if [ -e "$p" ] || [ -L "$p" ]; then echo "visible: $p"; fi
done
for d in /root /home /etc/ssl/private; do
	if [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ]; then echo "readable and not empty: $d"; fi
done
[ -z "$(ls -A /tmp)$(ls -A /dev/shm)" ] || echo "not empty: /tmp or /dev/shm: $(ls -A /tmp /dev/shm | tr "\n" " ")"
grep -rls "TOPSECRET" /tmp /dev/shm /workspace /etc 2>/dev/null | sed "s/^/secret in: /"
users=$(cut -d: -f1 /etc/passwd | tr "\n" " ")
case "$users" in "root sandbox nobody "|"root sandbox ") ;; *) echo "passwd has: $users" ;; esac
echo end'
	calls <<<"$(bash_call 1 "${code//@MARKER@/$marker}")"
	res 1
	expect_stdout end
}

@test "fs: writing to /usr, /etc and / fails (read-only) and changes nothing on the host" {
	# Host files the sandbox user owns: only the read-only mount stands in the way (EROFS).
	local dir="/usr/share/isolation-$TAG"
	mkdir "$dir"
	echo original >"$dir/owned"
	chown -R 65534:65534 "$dir"
	HOST_PATHS+=("$dir" "/usr/isolation-$TAG" "/etc/isolation-$TAG" "/isolation-$TAG")
	local sums_before
	sums_before=$(sha256sum /etc/os-release /etc/hosts /etc/passwd "$dir/owned"; stat -c '%a %u' "$dir" "$dir/owned")
	local py="$PRELUDE"'
D = "@DIR@"
T = "@TAG@"
ops = [
    ("create-/usr/x", lambda: open("/usr/isolation-" + T, "w")),
    ("create-/etc/x", lambda: open("/etc/isolation-" + T, "w")),
    ("create-/x", lambda: open("/isolation-" + T, "w")),
    ("mkdir-/usr/x", lambda: os.mkdir("/usr/isolation-" + T)),
    ("append-/etc/passwd", lambda: open("/etc/passwd", "a")),
    ("append-/etc/hosts", lambda: open("/etc/hosts", "a")),
    ("append-/etc/os-release", lambda: open("/etc/os-release", "a")),
    ("rename-/etc/hosts", lambda: os.rename("/etc/hosts", "/etc/hosts.x")),
    ("unlink-/usr/bin/env", lambda: os.unlink("/usr/bin/env")),
]
owned = [
    ("append-owned", lambda: open(D + "/owned", "a")),
    ("create-in-owned-dir", lambda: open(D + "/new", "w")),
    ("chmod-owned", lambda: os.chmod(D + "/owned", 0o777)),
    ("unlink-owned", lambda: os.unlink(D + "/owned")),
    ("utime-owned", lambda: os.utime(D + "/owned")),
]
for name, fn in ops:
    print(name, attempt(fn))
for name, fn in owned:
    print(name, attempt(fn))
'
	py=${py//@DIR@/$dir}
	calls --sandbox-uid 65534 <<<"$(py_call 1 "${py//@TAG@/$TAG}")"
	res 1
	sc '.exit_code == 0'
	# Every attempt failed with a read-only or permission error...
	sc '.stdout | split("\n") | map(select(. != "")) | length == 14 and all(test("^[-/a-z.]+ (EROFS|EACCES)$"))'
	# ... and on files the sandbox user owns, with EROFS: the mount is read-only.
	sc '.stdout | split("\n") | map(select(test("owned"))) | length == 5 and all(test(" EROFS$"))'
	# Nothing changed on the host.
	[ ! -e "/usr/isolation-$TAG" ]
	[ ! -e "/etc/isolation-$TAG" ]
	[ ! -e "/isolation-$TAG" ]
	[ ! -e "$dir/new" ]
	[ -e /usr/bin/env ]
	[ "$(sha256sum /etc/os-release /etc/hosts /etc/passwd "$dir/owned"; stat -c '%a %u' "$dir" "$dir/owned")" = "$sums_before" ]
}

@test "fs: /proc/1/root, /proc/self/root, /proc/1/cwd and .. lead nowhere outside the sandbox" {
	local marker="/tmp/isolation-secret-$TAG"
	echo "TOPSECRET-$TAG" >"$marker"
	chmod 644 "$marker"
	HOST_PATHS+=("$marker")
	local py="$PRELUDE"'
M = "@MARKER@"
checks = [
    ("listdir-/proc/1/root", lambda: os.listdir("/proc/1/root")),
    ("open-/proc/1/root/etc/shadow", lambda: open("/proc/1/root/etc/shadow")),
    ("open-/proc/1/root/marker", lambda: open("/proc/1/root" + M)),
    ("listdir-/proc/1/cwd", lambda: os.listdir("/proc/1/cwd")),
    ("open-/proc/1/exe", lambda: open("/proc/1/exe", "rb")),
    ("open-/proc/self/root/etc/shadow", lambda: open("/proc/self/root/etc/shadow")),
    ("open-/proc/self/root/marker", lambda: open("/proc/self/root" + M)),
    ("open-dotdot/etc/shadow", lambda: open("/workspace/../../../../etc/shadow")),
    ("open-dotdot/marker", lambda: open("/workspace/../../../.." + M)),
]
for name, fn in checks:
    print(name, attempt(fn))
print("self-root", os.readlink("/proc/self/root"), sorted(os.listdir("/proc/self/root")) == sorted(os.listdir("/")))
print("dotdot", sorted(os.listdir("/workspace/../..")) == sorted(os.listdir("/")))
'
	calls <<<"$(py_call 1 "${py//@MARKER@/$marker}")"
	res 1
	expect_stdout "listdir-/proc/1/root EACCES
open-/proc/1/root/etc/shadow EACCES
open-/proc/1/root/marker EACCES
listdir-/proc/1/cwd EACCES
open-/proc/1/exe EACCES
open-/proc/self/root/etc/shadow ENOENT
open-/proc/self/root/marker ENOENT
open-dotdot/etc/shadow ENOENT
open-dotdot/marker ENOENT
self-root / True
dotdot True"
}

@test "fs: symlinks and hard links in the workspace resolve inside the sandbox; host files stay unchanged" {
	local victim="$BATS_TEST_TMPDIR/victim"
	mkdir -p "$victim/sub"
	echo original >"$victim/file"
	chmod -R a+rwX "$victim"
	local before
	before=$(sha256sum /etc/passwd /etc/hosts /etc/os-release)
	local py="$PRELUDE"'
V = "@VICTIM@"
os.chdir("/workspace")
os.symlink("/etc/passwd", "pw")
os.symlink("/", "rootlink")
os.symlink(V, "victimdir")
os.symlink(V + "/file", "victimfile")
print("append-pw", attempt(lambda: open("pw", "a").write("pwned\n")))
print("write-victimfile", attempt(lambda: open("victimfile", "w").write("pwned\n")))
print("create-in-victimdir", attempt(lambda: open("victimdir/new", "w")))
print("read-rootlink-shadow", attempt(lambda: open("rootlink/etc/shadow").read()))
print("hardlink-/usr/bin/env", attempt(lambda: os.link("/usr/bin/env", "hl1")))
print("hardlink-/etc/os-release", attempt(lambda: os.link("/etc/os-release", "hl2")))
# Traps for what the server and the agent write into the workspace later: spill files, task.py.
os.makedirs(".sandbox/output", exist_ok=True)
for i in range(1, 10):
    for s in ("stdout", "stderr"):
        os.symlink(V + "/file", ".sandbox/output/call-%d.%s" % (i, s))
os.replace(".sandbox/task.py", ".sandbox/task.py.orig")
os.symlink(V + "/file", ".sandbox/task.py")
'
	calls --keep --output-cap 4K <<<"$(py_call 1 "${py//@VICTIM@/$victim}"; bash_call 2 "head -c 100000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2"; py_call 3 'print("pwned")'; bash_call 4 'cut -d: -f1 /etc/passwd | tr "\\n" " "')"
	res 1
	sc '.stdout | test("^append-pw (EACCES|EROFS)\n")'
	sc '.stdout | split("\n") | .[1:6] == ["write-victimfile ENOENT", "create-in-victimdir ENOENT", "read-rootlink-shadow ENOENT", "hardlink-/usr/bin/env EXDEV", "hardlink-/etc/os-release EXDEV"]'
	res 2
	sc '.truncated.stdout == true'
	# The sandbox's /etc/passwd names only its own users (nobody is left out when the sandbox
	# user is uid 65534).
	res 4
	sc '.stdout | test("^root sandbox (nobody )?$")'
	# The host side: the victim, host /etc and the sandbox's own /etc files are untouched.
	[ "$(cat "$victim/file")" = original ]
	[ "$(ls -A "$victim" | tr '\n' ' ')" = "file sub " ]
	[ "$(sha256sum /etc/passwd /etc/hosts /etc/os-release)" = "$before" ]
	local sb ws
	sb=$(echo "$SANDBOX_STATE_DIR"/local-*)
	ws="$sb/workspace"
	[ -d "$ws" ] || { echo "no kept workspace in $SANDBOX_STATE_DIR" >&2; return 1; }
	# The links the code made are still links (nothing replaced them by following them); those
	# planted where the sandbox writes its own files were replaced by the files, not written
	# through (the victim is untouched, above).
	[ -L "$ws/pw" ]
	[ "$(readlink "$ws/pw")" = /etc/passwd ]
	[ -L "$ws/victimfile" ]
	[ -f "$ws/.sandbox/task.py" ]
	[ ! -L "$ws/.sandbox/task.py" ]
	[ -f "$ws/.sandbox/output/call-2.stdout" ]
	[ ! -L "$ws/.sandbox/output/call-2.stdout" ]
}

@test "fs: cleanup_sandbox and shutdown remove the workspace without following its symlinks" {
	local victim="$BATS_TEST_TMPDIR/victim"
	mkdir -p "$victim/sub"
	echo original >"$victim/file"
	echo original >"$victim/sub/file"
	chmod -R a+rwX "$victim"
	local plant='cd /workspace && ln -s @VICTIM@ v && ln -s @VICTIM@/file f && mkdir -p d/e && ln -s @VICTIM@ d/e/v && ln -s @VICTIM@/sub d/s && chmod 000 d/e && echo planted'
	plant=${plant//@VICTIM@/$victim}
	calls <<<"$(bash_call 1 "$plant"; call_json 2 cleanup_sandbox '{}'; bash_call 3 "$plant")"
	res 1
	expect_stdout planted
	res 2
	jqe "$result" '.structuredContent.removed == true'
	res 3
	expect_stdout planted
	[ "$(cat "$victim/file")" = original ]
	[ "$(cat "$victim/sub/file")" = original ]
	[ "$(cd "$victim" && find . | sort | tr '\n' ' ')" = ". ./file ./sub ./sub/file " ]
	# Both sandboxes are gone from the state folder.
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ] || { ls -la "$SANDBOX_STATE_DIR" >&2; return 1; }
}

@test "fs: mount, umount, bind mounts and new mount namespaces fail; the mount table stays the same" {
	need_x86_64
	local code='
before=$(md5sum < /proc/self/mountinfo)
mount -t tmpfs none /workspace 2>/dev/null; echo "mount=$?"
mount --bind /usr /workspace 2>/dev/null; echo "bind=$?"
umount /tmp 2>/dev/null; echo "umount=$?"
umount -l /workspace 2>/dev/null; echo "umount-l=$?"
unshare -rm true 2>/dev/null; echo "unshare=$?"
[ "$before" = "$(md5sum < /proc/self/mountinfo)" ] && echo "mountinfo unchanged"'
	local py="$PRELUDE"'
src = ctypes.create_string_buffer(b"none"); dst = ctypes.create_string_buffer(b"/workspace")
fs = ctypes.create_string_buffer(b"tmpfs")
print("mount", sysc(165, addr(src), addr(dst), addr(fs), 0, 0))
print("mount-bind", sysc(165, addr(ctypes.create_string_buffer(b"/usr")), addr(dst), 0, 0x1000, 0))
print("umount2", sysc(166, addr(ctypes.create_string_buffer(b"/tmp")), 2))
print("pivot_root", sysc(155, addr(dst), addr(dst)))
print("chroot", sysc(161, addr(dst)))
print("fsopen", sysc(430, addr(fs), 0))
print("open_tree", sysc(428, 0xffffff9c, addr(ctypes.create_string_buffer(b"/usr")), 1))
print("move_mount", sysc(429, 0xffffff9c, addr(dst), 0xffffff9c, addr(dst), 0))
print("mount_setattr", sysc(442, 0xffffff9c, addr(dst), 0, 0, 0))
'
	calls <<<"$(bash_call 1 "$code"; py_call 2 "$py")"
	res 1
	sc '.stdout | test("^mount=[1-9][0-9]*\nbind=[1-9][0-9]*\numount=[1-9][0-9]*\numount-l=[1-9][0-9]*\nunshare=[1-9][0-9]*\nmountinfo unchanged\n$")'
	res 2
	expect_stdout "mount EPERM
mount-bind EPERM
umount2 EPERM
pivot_root EPERM
chroot EPERM
fsopen EPERM
open_tree EPERM
move_mount EPERM
mount_setattr EPERM"
}

# ------------------------------------------------------------------ 3. other processes and the kernel

@test "proc: only the sandbox's own processes are visible: not the server, not a host process" {
	bash -c "exec -a isolation-marker-$TAG sleep 120" &
	local mpid=$!
	BG_PIDS+=("$mpid")
	local i
	for i in $(seq 50); do
		ps -e -o args= | grep -q "^isolation-marker-$TAG" && break
		sleep 0.1
	done
	ps -e -o args= | grep -q "^isolation-marker-$TAG" || { echo "the host marker process did not start" >&2; return 1; }
	local py='
import json, os
procs = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            procs[p] = open("/proc/%s/cmdline" % p).read().replace("\0", " ").strip()
        except OSError:
            procs[p] = "?"
print(json.dumps({"me": os.getpid(), "procs": procs, "marker_pid_exists": os.path.exists("/proc/@MPID@")}))'
	calls <<<"$(py_call 1 "${py//@MPID@/$mpid}")"
	res 1
	sc '.exit_code == 0'
	local v
	v=$(val .stdout)
	jqe "$v" '.procs | length == 2'
	jqe "$v" '.procs["1"] == "sandbox-agent --fd 3"'
	jqe "$v" '.procs[.me | tostring] | test("python3")'
	jqe "$v" '[.procs[]] | map(select(test("isolation-marker|sandbox-mcp|session.py|bats|sleep"))) == []'
	# A host pid means nothing inside (only if the sandbox made that many processes itself).
	[ "$mpid" -le 10 ] || jqe "$v" '.marker_pid_exists == false'
}

@test "proc: signals to the agent (PID 1), kill -1 and SIGSTOP do not break the sandbox; the next call works" {
	local signals='for s in TERM INT HUP QUIT ABRT SEGV BUS USR1 USR2 PIPE ALRM CHLD CONT TSTP STOP KILL; do kill -s $s 1 || echo "kill -$s 1 failed"; done; echo sent'
	calls --timeout 10 <<<"$(bash_call 1 "$signals"; bash_call 2 'sleep 100 & kill -KILL -1; wait $!; echo "sleep ended: $?"'; py_call 3 "$LIST_OTHERS")"
	res 1
	sc '.exit_code == 0 and .timed_out == false'
	expect_stdout sent
	local id
	id=$(val .sandbox_id)
	res 2
	sc '.exit_code == 0 and .timed_out == false'
	expect_stdout 'sleep ended: 137'
	res 3
	sc ".exit_code == 0 and .stdout == \"[]\n\" and .sandbox_id == \"$id\" and .notice == null"
}

@test "kernel: ptrace, process_vm_readv/writev, kcmp and pidfd_getfd on another process fail with EPERM" {
	need_x86_64
	local py="$PRELUDE"'
buf = ctypes.create_string_buffer(b"secret-of-the-child", 32)
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = iovec(addr(buf), 16)
remote = iovec(addr(buf), 16)   # the same address in the forked child
print("process_vm_readv", sysc(310, child, addr(local), 1, addr(remote), 1, 0))
print("process_vm_writev", sysc(311, child, addr(local), 1, addr(remote), 1, 0))
print("ptrace-attach-child", sysc(101, 16, child, 0, 0))
print("ptrace-seize-1", sysc(101, 0x4206, 1, 0, 0))
print("ptrace-traceme", sysc(101, 0, 0, 0, 0))
print("kcmp", sysc(312, os.getpid(), child, 0, 0, 0))
pidfd, e = raw(434, child, 0)      # pidfd_open is allowed ...
print("pidfd_open", e or "ok")
print("pidfd_getfd", sysc(438, pidfd, 1, 0))   # ... taking an fd through it is not
print("open-/proc/1/mem", attempt(lambda: open("/proc/1/mem", "rb")))
print("read-/proc/1/environ", attempt(lambda: open("/proc/1/environ", "rb").read()))
os.kill(child, 9)
'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout "process_vm_readv EPERM
process_vm_writev EPERM
ptrace-attach-child EPERM
ptrace-seize-1 EPERM
ptrace-traceme EPERM
kcmp EPERM
pidfd_open ok
pidfd_getfd EPERM
open-/proc/1/mem EACCES
read-/proc/1/environ EACCES"
}

@test "kernel: new namespaces are denied: unshare and clone with CLONE_NEW* (EPERM), setns (EPERM), clone3 (ENOSYS)" {
	need_x86_64
	local py="$PRELUDE"'
flags = [("NEWNS", 0x20000), ("NEWCGROUP", 0x2000000), ("NEWUTS", 0x4000000), ("NEWIPC", 0x8000000),
         ("NEWUSER", 0x10000000), ("NEWPID", 0x20000000), ("NEWNET", 0x40000000), ("NEWTIME", 0x80)]
for name, f in flags:
    print("unshare", name, sysc(272, f))
for name, f in flags:
    r, e = raw(56, f | 17, 0, 0, 0, 0)     # clone(flags | SIGCHLD), like fork
    if r == 0:
        os._exit(0)
    if r > 0:
        os.waitpid(r, 0)
    print("clone", name, e or "ok")
fd = os.open("/proc/self/ns/user", os.O_RDONLY)
print("setns", sysc(308, fd, 0))
args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)
print("clone3", sysc(435, addr(args), 88))
pid = os.fork()               # a plain fork (clone without CLONE_NEW*) still works
if pid == 0:
    os._exit(7)
print("fork", os.waitpid(pid, 0)[1] >> 8)
'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout "unshare NEWNS EPERM
unshare NEWCGROUP EPERM
unshare NEWUTS EPERM
unshare NEWIPC EPERM
unshare NEWUSER EPERM
unshare NEWPID EPERM
unshare NEWNET EPERM
unshare NEWTIME EPERM
clone NEWNS EPERM
clone NEWCGROUP EPERM
clone NEWUTS EPERM
clone NEWIPC EPERM
clone NEWUSER EPERM
clone NEWPID EPERM
clone NEWNET EPERM
clone NEWTIME EPERM
setns EPERM
clone3 ENOSYS
fork 7"
}

@test "kernel: keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd and io_uring fail with EPERM" {
	need_x86_64
	local py="$PRELUDE"'
user = ctypes.create_string_buffer(b"user"); desc = ctypes.create_string_buffer(b"isolation")
payload = ctypes.create_string_buffer(b"x")
params = ctypes.create_string_buffer(120)
attr = ctypes.create_string_buffer(128)
print("keyctl", sysc(250, 0, 0xfffffffd, 0))            # KEYCTL_GET_KEYRING_ID of the session keyring
print("add_key", sysc(248, addr(user), addr(desc), addr(payload), 1, 0xfffffffd))
print("request_key", sysc(249, addr(user), addr(desc), 0, 0))
print("bpf", sysc(321, 0, addr(attr), 128))
print("perf_event_open", sysc(298, addr(attr), 0, 0xffffffff, 0xffffffff, 0))
print("userfaultfd", sysc(323, 0))
print("io_uring_setup", sysc(425, 4, addr(params)))
print("io_uring_enter", sysc(426, 0, 0, 0, 0, 0, 0))
print("io_uring_register", sysc(427, 0, 0, 0, 0))
'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout "keyctl EPERM
add_key EPERM
request_key EPERM
bpf EPERM
perf_event_open EPERM
userfaultfd EPERM
io_uring_setup EPERM
io_uring_enter EPERM
io_uring_register EPERM"
}

@test "kernel: TIOCSTI and TIOCLINUX ioctls fail with EPERM, also with high bits set" {
	need_x86_64
	local py="$PRELUDE"'
c = ctypes.create_string_buffer(b"x")
for fd in (0, 1):
    print(fd, "TIOCSTI", sysc(16, fd, 0x5412, addr(c)))
    print(fd, "TIOCSTI-high-bits", sysc(16, fd, 0xdead00005412, addr(c)))
    print(fd, "TIOCLINUX", sysc(16, fd, 0x541C, addr(c)))
    print(fd, "TIOCGWINSZ", sysc(16, fd, 0x5413, addr(ctypes.create_string_buffer(8))))   # allowed: not a tty
'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout "0 TIOCSTI EPERM
0 TIOCSTI-high-bits EPERM
0 TIOCLINUX EPERM
0 TIOCGWINSZ ENOTTY
1 TIOCSTI EPERM
1 TIOCSTI-high-bits EPERM
1 TIOCLINUX EPERM
1 TIOCGWINSZ ENOTTY"
}

@test "kernel: x32 system calls kill the process with SIGSYS (159 in bash, -31 in Python)" {
	need_x86_64
	local x32='import ctypes; ctypes.CDLL(None).syscall(39 | 0x40000000); print("x32 getpid survived")'
	local py='
import subprocess, sys
for nr in (39, 165, 272):     # getpid, mount, unshare through the x32 ABI
    p = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL(None).syscall(%d | 0x40000000); print(1)" % nr],
                       capture_output=True, text=True)
    print(nr, p.returncode, repr(p.stdout))'
	calls <<<"$(bash_call 1 "python3 -c '$x32'; echo \"rc=\$?\""; py_call 2 "$py")"
	res 1
	expect_stdout 'rc=159'
	res 2
	expect_stdout $'39 -31 \'\'\n165 -31 \'\'\n272 -31 \'\''
}

@test "kernel: i386 system calls (int 0x80) kill the process with SIGSYS" {
	need_x86_64
	local i386='
import ctypes, mmap
code = bytes([0xb8, 0x14, 0, 0, 0, 0xcd, 0x80, 0xc3])   # mov eax, 20 (i386 getpid); int 0x80; ret
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("i386 getpid returned", f())'
	local py="
import subprocess, sys
p = subprocess.run([sys.executable, '-c', '''$i386'''], capture_output=True, text=True)
print(p.returncode, repr(p.stdout))"
	calls <<<"$(py_call 1 "$py")"
	res 1
	run python3 -c "$i386"
	if [[ "$output" == "i386 getpid returned "[0-9]* ]]; then
		# The kernel runs i386 system calls: in the sandbox the filter kills the caller.
		expect_stdout "-31 ''"
	else
		# No IA32 emulation here (the host's own run died too): no i386 system call can be
		# made at all; in the sandbox too the code dies by a signal before any returns.
		sc '.stdout | test("^-[0-9]+ \u0027\u0027\n$")'
	fi
}

@test "kernel: module loading, kexec, reboot, clock and hostname changes fail with EPERM; the host's hostname is unchanged" {
	need_x86_64
	local host_name
	host_name=$(hostname)
	local py="$PRELUDE"'
empty = ctypes.create_string_buffer(b"")
loop = ctypes.create_string_buffer(b"loop")
nullfd = os.open("/dev/null", os.O_RDONLY)
name = ctypes.create_string_buffer(b"isolation-evil")
print("init_module", sysc(175, addr(empty), 0, addr(empty)))
print("finit_module", sysc(313, nullfd, addr(empty), 0))
print("delete_module", sysc(176, addr(loop), 0o4000))
print("kexec_load", sysc(246, 0, 0, 0, 0))
print("kexec_file_load", sysc(320, nullfd, nullfd, 0, 0, 0))
print("reboot", sysc(169, 0, 0, 0, 0))
print("syslog", sysc(103, 3, addr(ctypes.create_string_buffer(64)), 64))
print("settimeofday", sysc(164, 0, 0))
print("clock_settime", sysc(227, 0, 0))
print("adjtimex", sysc(159, 0))
print("sethostname", sysc(170, addr(name), 14))
print("setdomainname", sysc(171, addr(name), 14))
print("acct", sysc(163, 0))
print("swapoff", sysc(168, addr(loop)))
print("personality-ADDR_NO_RANDOMIZE", sysc(135, 0x0040000))
print("personality-READ_IMPLIES_EXEC", sysc(135, 0x0400000))
print("personality-PER_LINUX", sysc(135, 0))      # allowed: the filter looks at those two flags only
'
	calls <<<"$(py_call 1 "$py"; bash_call 2 'hostname isolation-evil 2>/dev/null; echo "rc=$?"; hostname')"
	res 1
	expect_stdout "init_module EPERM
finit_module EPERM
delete_module EPERM
kexec_load EPERM
kexec_file_load EPERM
reboot EPERM
syslog EPERM
settimeofday EPERM
clock_settime EPERM
adjtimex EPERM
sethostname EPERM
setdomainname EPERM
acct EPERM
swapoff EPERM
personality-ADDR_NO_RANDOMIZE EPERM
personality-READ_IMPLIES_EXEC EPERM
personality-PER_LINUX ok"
	res 2
	expect_stdout $'rc=1\nsandbox'
	[ "$(hostname)" = "$host_name" ]
}

@test "kernel: the code runs as the unprivileged sandbox user without capabilities, with NoNewPrivs 1 and Seccomp 2; setuid(0) fails" {
	local code='id -u; id -g; id -G
grep -E "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status | tr "\t" " "
python3 -c "import os; os.setuid(0)" 2>/dev/null; echo "setuid=$?"
python3 -c "import os; os.setgroups([0])" 2>/dev/null; echo "setgroups=$?"'
	calls <<<"$(bash_call 1 "$code")"
	res 1
	local u
	u=$(inner_uid)
	expect_stdout "$u
$u
$u
CapInh: 0000000000000000
CapPrm: 0000000000000000
CapEff: 0000000000000000
CapBnd: 0000000000000000
CapAmb: 0000000000000000
NoNewPrivs: 1
Seccomp: 2
setuid=1
setgroups=1"
}

# ------------------------------------------------------------------ 4. network

@test "net: only the loopback interface and no route out: the internet, metadata and the host's own addresses are unreachable" {
	local targets="1.1.1.1 8.8.8.8 169.254.169.254 10.0.2.2 192.168.1.1 $(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v ':' | tr '\n' ' ')"
	local py="$PRELUDE"'
print("interfaces", sorted(n for _, n in socket.if_nameindex()))
print("ipv4 routes", len(open("/proc/net/route").read().strip().split("\n")) - 1)
print("ipv6 routes off lo", [l for l in open("/proc/net/ipv6_route").read().split("\n") if l and not l.endswith(" lo")])
res = set()
for host in "@TARGETS@".split():
    s = socket.socket(); s.settimeout(3)
    res.add(attempt(lambda: s.connect((host, 80))))
for host in ("2606:4700:4700::1111", "2001:4860:4860::8888"):
    s = socket.socket(socket.AF_INET6); s.settimeout(3)
    res.add(attempt(lambda: s.connect((host, 443))))
print("connect", sorted(res))
'
	calls <<<"$(py_call 1 "${py//@TARGETS@/$targets}")"
	res 1
	expect_stdout "interfaces ['lo']
ipv4 routes 0
ipv6 routes off lo []
connect ['ENETUNREACH']"
}

@test "net: a TCP listener on the host's 127.0.0.1 and a host abstract unix socket are unreachable (ECONNREFUSED)" {
	start_listener
	local py="$PRELUDE"'
s = socket.socket(); s.settimeout(3)
print("tcp-127.0.0.1", attempt(lambda: s.connect(("127.0.0.1", @PORT@))))
s = socket.socket(); s.settimeout(3)
print("tcp-localhost", attempt(lambda: s.connect(("localhost", @PORT@))))
s = socket.socket(socket.AF_INET6); s.settimeout(3)
print("tcp-::ffff:127.0.0.1", attempt(lambda: s.connect(("::ffff:127.0.0.1", @PORT@))))
u = socket.socket(socket.AF_UNIX)
print("abstract-unix", attempt(lambda: u.connect("\0isolation-@TAG@")))
'
	py=${py//@PORT@/$PORT}
	calls <<<"$(py_call 1 "${py//@TAG@/$TAG}"; bash_call 2 "( exec 3<>/dev/tcp/127.0.0.1/$PORT ) 2>/dev/null && echo connected || echo refused")"
	res 1
	expect_stdout "tcp-127.0.0.1 ECONNREFUSED
tcp-localhost ECONNREFUSED
tcp-::ffff:127.0.0.1 ECONNREFUSED
abstract-unix ECONNREFUSED"
	res 2
	expect_stdout refused
	listener_untouched
}

@test "net: DNS fails: no resolv.conf, name lookups fail, port 53 of public and host resolvers unreachable" {
	local servers="8.8.8.8 1.1.1.1 $(awk '$1 == "nameserver" && $2 !~ /:/ {print $2}' /etc/resolv.conf 2>/dev/null | tr '\n' ' ')"
	local py="$PRELUDE"'
print("resolv.conf", os.path.exists("/etc/resolv.conf"))
try:
    socket.getaddrinfo("example.com", 80)
    print("example.com resolved")
except socket.gaierror:
    print("example.com gaierror")
print("localhost", socket.getaddrinfo("localhost", 80, socket.AF_INET)[0][4][0])
query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
res = set()
for ns in "@SERVERS@".split():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(2)
    def ask():
        u.connect((ns, 53)); u.send(query); u.recv(512)
    r = attempt(ask)
    res.add("answer" if r == "ok" else r)
print("udp-53", sorted(res) if res <= {"ENETUNREACH", "ECONNREFUSED"} else res)
'
	calls <<<"$(py_call 1 "${py//@SERVERS@/$servers}" 20; bash_call 2 'getent hosts example.com; echo "rc=$?"')"
	res 1
	sc '.stdout | test("^resolv.conf False\nexample.com gaierror\nlocalhost 127.0.0.1\nudp-53 \\[(.ECONNREFUSED., )?.ENETUNREACH.\\]\n$")'
	res 2
	expect_stdout 'rc=2'
}

@test "net: packet and raw sockets are denied (AF_PACKET EAFNOSUPPORT, SOCK_RAW EPERM), as are other families" {
	need_x86_64
	local py="$PRELUDE"'
def sock(f, t, p=0):
    return attempt(lambda: socket.socket(f, t, p).close())
print("AF_PACKET-RAW", sock(17, socket.SOCK_RAW, 0x0300))
print("AF_PACKET-DGRAM", sock(17, socket.SOCK_DGRAM, 0x0300))
print("AF_PACKET-high-bits", sysc(41, (1 << 32) | 17, 3, 0x0300))
print("AF_INET-RAW-ICMP", sock(socket.AF_INET, socket.SOCK_RAW, 1))
print("AF_INET-RAW-RAW", sock(socket.AF_INET, socket.SOCK_RAW, 255))
print("AF_INET6-RAW-ICMPV6", sock(socket.AF_INET6, socket.SOCK_RAW, 58))
others = {"AF_IPX": 4, "AF_APPLETALK": 5, "AF_X25": 9, "AF_KEY": 15, "AF_RDS": 21, "AF_CAN": 29, "AF_TIPC": 30,
          "AF_BLUETOOTH": 31, "AF_ALG": 38, "AF_NFC": 39, "AF_VSOCK": 40, "AF_QIPCRTR": 42, "AF_XDP": 44, "255": 255}
print("others", sorted({n: sysc(41, f, 2, 0) for n, f in others.items()}.values()) == ["EAFNOSUPPORT"] * len(others))
print("AF_INET-STREAM", sock(socket.AF_INET, socket.SOCK_STREAM))
print("AF_UNIX-STREAM", sock(socket.AF_UNIX, socket.SOCK_STREAM))
'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout "AF_PACKET-RAW EAFNOSUPPORT
AF_PACKET-DGRAM EAFNOSUPPORT
AF_PACKET-high-bits EAFNOSUPPORT
AF_INET-RAW-ICMP EPERM
AF_INET-RAW-RAW EPERM
AF_INET6-RAW-ICMPV6 EPERM
others True
AF_INET-STREAM ok
AF_UNIX-STREAM ok"
}

@test "net: loopback inside the sandbox works (a server and a client of one call talk over 127.0.0.1 and ::1)" {
	local py='
import socket, threading
def serve(srv):
    c, _ = srv.accept()
    c.sendall(b"pong:" + c.recv(10))
    c.close()
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    srv = socket.socket(fam); srv.bind((host, 0)); srv.listen(1)
    t = threading.Thread(target=serve, args=(srv,)); t.start()
    c = socket.create_connection((host, srv.getsockname()[1]), timeout=5)
    c.sendall(b"ping"); print(host, c.recv(20).decode()); t.join()'
	calls <<<"$(py_call 1 "$py")"
	res 1
	expect_stdout $'127.0.0.1 pong:ping\n::1 pong:ping'
}

@test "net: code planted in the workspace (sitecustomize.py) cannot reach the host's 127.0.0.1 during a package install" {
	/usr/bin/python3 -m pip --version >/dev/null 2>&1 || skip_or_fail "no pip for /usr/bin/python3 here"
	start_listener
	local plant='
import os
os.makedirs("/workspace/.sandbox/packages", exist_ok=True)
with open("/workspace/.sandbox/packages/sitecustomize.py", "w") as f:
    f.write("""
import socket
for target in ((socket.AF_INET, ("127.0.0.1", @PORT@)), (socket.AF_UNIX, "\\0isolation-@TAG@")):
    try:
        s = socket.socket(target[0]); s.settimeout(2); s.connect(target[1]); s.sendall(b"from-sitecustomize\\n"); s.recv(100)
    except OSError:
        pass
""")
print("planted")'
	plant=${plant//@PORT@/$PORT}
	calls --network install --timeout 30 <<<"$(py_call 1 "${plant//@TAG@/$TAG}"; py_call 2 'print("ran")' 30 '["/workspace/no-such-package"]')"
	res 1
	expect_stdout planted
	# The install step did run (and failed: there is no such package) ...
	res 2
	sc '.stderr | contains("Failed to install requirements")'
	# ... and the planted code it started never reached the host.
	listener_untouched
}

@test "net: a requirement naming a URL on the host's 127.0.0.1 does not reach the host's listener" {
	/usr/bin/python3 -m pip --version >/dev/null 2>&1 || skip_or_fail "no pip for /usr/bin/python3 here"
	start_listener
	calls --network install --timeout 30 <<<"$(py_call 1 'print("ran")' 30 "[\"isolationprobe @ http://127.0.0.1:$PORT/isolationprobe-1.0-py3-none-any.whl\"]")"
	res 1
	sc '.stderr | contains("Failed to install requirements")'
	listener_untouched
}

# ------------------------------------------------------------------ 5. leaked fds and environment

# A wrapper that starts the server with fds and secrets in its environment, as a careless host would.
# host_look UID COMMAND...: waits until the code in the sandbox of host uid UID has made
# /workspace/ready, runs COMMAND (what the host sees while that code waits), then makes
# /workspace/go. The workspace is reached through the agent's root (/proc/PID/root), which holds
# whatever mount namespace the server runs in (in the chroot mode, one of its own, where the
# workspace image is mounted out of the host's sight).
host_look() {
	local uid=$1 p ws= i
	shift
	for i in $(seq 300); do
		for p in $(ps -e -o uid=,pid=,args= | awk -v u="$uid" '$1 == u && $3 == "sandbox-agent" {print $2}'); do
			[ -e "/proc/$p/root/workspace/ready" ] && ws=/proc/$p/root/workspace
		done
		[ -n "$ws" ] && break
		sleep 0.1
	done
	"$@"
	[ -n "$ws" ] && touch "$ws/go"
}

make_leaky_wrapper() {
	SECRET_FILE="$BATS_TEST_TMPDIR/secret-file"
	SECRET_DIR="$BATS_TEST_TMPDIR/secret-dir"
	mkdir -p "$SECRET_DIR"
	echo "TOPSECRET-FD-$TAG" >"$SECRET_FILE"
	echo "TOPSECRET-DIR-$TAG" >"$SECRET_DIR/inside"
	cat >"$BATS_TEST_TMPDIR/leaky-server" <<-EOF
		#!/bin/bash
		exec 7<"$SECRET_FILE" 8<"$SECRET_DIR" 9>>"$BATS_TEST_TMPDIR/fd9-log"
		export DAYTONA_API_KEY=sk-test-secret-$TAG SANDBOX_TEST_SECRET=s3cr3t-$TAG AWS_SECRET_ACCESS_KEY=aws-$TAG
		readlink /proc/\$\$/fd/7 /proc/\$\$/fd/8 >"$BATS_TEST_TMPDIR/wrapper-proof"
		exec "$SANDBOX_MCP" "\$@"
	EOF
	chmod +x "$BATS_TEST_TMPDIR/leaky-server"
	REAL_MCP=$SANDBOX_MCP
	SANDBOX_MCP="$BATS_TEST_TMPDIR/leaky-server"
}

@test "leak: only fds 0-2 reach the code, even when the server has other fds open (file, folder)" {
	make_leaky_wrapper
	# Into a file, not a pipe: the shell holds a pipe's two ends until it has started both sides,
	# and an ls quick enough would list them.
	local code='ls /proc/$$/fd > /tmp/fds; tr "\n" " " < /tmp/fds; echo
readlink /proc/$$/fd/0; readlink /proc/$$/fd/1 | cut -d: -f1; readlink /proc/$$/fd/2 | cut -d: -f1
cat <&7 2>/dev/null; echo "fd7=$?"
ls /proc/self/fd/8/ 2>/dev/null; echo "fd8=$?"
ls /proc/1/fd 2>/dev/null | tr "\n" " "; echo "agent-fds=${PIPESTATUS[0]}"
python3 -c "
import os
fds = []
for fd in range(4096):
    try:
        os.fstat(fd); fds.append(fd)
    except OSError:
        pass
print(\"python\", fds)"'
	calls <<<"$(bash_call 1 "$code")"
	SANDBOX_MCP=$REAL_MCP
	[ "$(cat "$BATS_TEST_TMPDIR/wrapper-proof")" = "$SECRET_FILE"$'\n'"$SECRET_DIR" ]
	res 1
	expect_stdout "0 1 2 
/dev/null
pipe
pipe
fd7=1
fd8=2
agent-fds=2
python [0, 1, 2]"
	refute_match "$output" TOPSECRET
}

@test "leak: the server's environment (DAYTONA_API_KEY, SANDBOX_TEST_SECRET, ...) is not visible in the sandbox" {
	make_leaky_wrapper
	local py='
import os
print(sorted(os.environ))
found = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if b"secret" in open("/proc/%s/environ" % p, "rb").read().lower():
                found.append(p)
        except OSError as e:
            pass
print("environ with secrets", found)
try:
    open("/proc/1/environ", "rb").read()
    print("agent environ readable")
except PermissionError:
    print("agent environ EACCES")'
	calls <<<"$(py_call 1 "$py"; bash_call 2 'env | grep -ci -e daytona -e secret -e "^SANDBOX_" -e aws; echo "rc=${PIPESTATUS[1]}"')"
	SANDBOX_MCP=$REAL_MCP
	grep -q "^$SECRET_FILE\$" "$BATS_TEST_TMPDIR/wrapper-proof"
	res 1
	expect_stdout "['HOME', 'LANG', 'LOGNAME', 'MPLBACKEND', 'PATH', 'PIP_CACHE_DIR', 'PIP_DISABLE_PIP_VERSION_CHECK', 'PIP_NO_INPUT', 'PIP_ROOT_USER_ACTION', 'PYTHONPATH', 'PYTHONUNBUFFERED', 'SHELL', 'TERM', 'TMPDIR', 'USER']
environ with secrets []
agent environ EACCES"
	res 2
	expect_stdout $'0\nrc=1'
	refute_match "$output" "sk-test-secret|s3cr3t-$TAG|aws-$TAG"
}

@test "leak: seen from the host, the sandbox's agent (PID 1) holds no fd and no variable of the server's" {
	local uid
	uid=$(free_uid) || skip_or_fail "no free uid for the sandbox user"
	make_leaky_wrapper
	local view="$BATS_TEST_TMPDIR/agent-view"
	# While call 1 waits in the sandbox, the host looks at the agent's fds and environment.
	agent_view() {
		local p fd
		for p in $(ps -e -o uid=,pid=,args= | awk -v u="$uid" '$1 == u && $3 == "sandbox-agent" {print $2}'); do
			echo "agent $p"
			for fd in /proc/"$p"/fd/*; do echo "fd ${fd##*/} $(readlink "$fd")"; done
			echo "environ [$(tr '\0' ' ' <"/proc/$p/environ")]"
		done >"$view"
	}
	host_look "$uid" agent_view &
	local watcher=$!
	BG_PIDS+=("$watcher")
	calls --sandbox-uid "$uid" --timeout 40 <<<"$(bash_call 1 'touch /workspace/ready; for i in $(seq 300); do [ -e /workspace/go ] && break; sleep 0.1; done; [ -e /workspace/go ] && echo go')"
	SANDBOX_MCP=$REAL_MCP
	wait "$watcher" || true
	res 1
	expect_stdout go
	cat "$view" >&2
	grep -q '^agent [0-9]' "$view"
	grep -q '^environ \[\]$' "$view"
	# No fd of the server's: neither the wrapper's file (7) and folder (8) nor anything of the host's files.
	# fds 0-2 are /dev/null and the server's stderr; anything else must be the agent's own
	# (its control socket, signalfd, the call's pipes), never a host file or folder.
	refute_match "$(grep -E '^fd ([3-9]|[1-9][0-9]+) ' "$view" | grep -v -E ' (socket|pipe|anon_inode):' || true)" .
}

@test "leak: after setsid daemons and background processes nothing is left, in the sandbox or on the host" {
	local uid
	uid=$(free_uid) || skip_or_fail "no free uid for the sandbox user"
	[ -z "$(sandbox_processes "$uid")" ]
	local code='
setsid sleep 300 &
nohup sleep 301 >/dev/null 2>&1 &
(trap "" HUP TERM INT; exec sleep 302) & disown
setsid -f sleep 303 </dev/null >/dev/null 2>&1
python3 -c "
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
for fd in (0, 1, 2): os.close(fd)
time.sleep(304)"
sleep 0.5
pgrep -c -x sleep
pgrep -c -f "^python3 -c"'
	local view="$BATS_TEST_TMPDIR/host-view"
	# While call 2 waits in the sandbox, the host lists the processes of the sandbox's uid.
	host_view() { sandbox_processes "$uid" >"$view"; }
	host_look "$uid" host_view &
	local watcher=$!
	BG_PIDS+=("$watcher")
	calls --sandbox-uid "$uid" --timeout 40 <<<"$(bash_call 1 "$code"; bash_call 2 'touch /workspace/ready; for i in $(seq 300); do [ -e /workspace/go ] && break; sleep 0.1; done; [ -e /workspace/go ] && echo go'; py_call 3 "$LIST_OTHERS")"
	wait "$watcher" || true
	res 1
	# Four sleeps and the Python daemon (the interpreter started ahead for the next call,
	# python3 /proc/self/fd/..., is not one of them).
	expect_stdout $'4\n1'
	res 2
	expect_stdout go
	res 3
	expect_stdout '[]'
	cat "$view" >&2
	grep -q 'sandbox-agent' "$view"
	refute_match "$(cat "$view")" 'sleep 30[0-4]|python3 -c'
	# After the session: nothing at all of the sandbox's uid, and no sandbox folder.
	eventually 5 no_sandbox_processes "$uid" || { sandbox_processes "$uid" >&2; return 1; }
	[ -z "$(ls -A "$SANDBOX_STATE_DIR")" ]
}

@test "kernel: the sandbox's cgroup namespace is rooted at its own cgroups (no host cgroup paths)" {
	tool execute_bash_commands '{"code":"cut -d: -f3 /proc/self/cgroup | sort -u"}'
	sc '.stdout == "/\n" and .exit_code == 0'
}

@test "mode: --check says how the sandbox is made here, with or without a user namespace" {
	run "$SANDBOX_MCP" --check --backend local
	echo "$output"
	[ "$status" -eq 0 ]
	if [ "$ISO_MODE" = chroot ]; then
		[[ "$output" == *"isolation   mount, pid, ipc, uts, cgroup, network namespaces"* ]]
		[[ "$output" == *"mode        no user namespace (refused here: "* ]]
		[[ "$output" == *"user        sandbox (uid 65534 inside, host uid 65534)"* ]]
	else
		[[ "$output" == *"isolation   user, mount, pid, ipc, uts, cgroup, network namespaces"* ]]
		[[ "$output" != *"no user namespace"* ]]
	fi
}
