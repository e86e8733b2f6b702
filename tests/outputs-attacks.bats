# What the sandbox's code can make of the listing and small files that come with a call's end
# (AG_OUTPUTS; on Daytona the runner's "out"): nothing outside the workspace is read, nothing
# blocks, what the server answers is what a request would say now, and the server keeps serving.
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
teardown() { unprivileged_teardown; }

bash_call() { # ID CODE [TIMEOUT_S]
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" --argjson t "${3:-null}" '{code: $c} + (if $t then {timeout_s: $t} else {} end)')"
}

read_json() { # ID PATH-IN-WORKSPACE
	jq -cn --argjson id "$1" --arg u "sandbox://workspace/$2" '{jsonrpc: "2.0", id: $id, method: "resources/read", params: {uri: $u}}'
}

# A call that times out with a tree of many folders in outputs/ (TOP x 331: 100k by default;
# a sandbox of a server that is not root has 32768 inodes): the walk that makes the listing
# which comes with its end must not take the sandbox for one that does not stop.
timeout_tree_case() { # BACKEND [TOP]
	local top=${2:-300}
	with_backend "$1"
	mcp_session <<EOF
$INIT
$(bash_call 1 'mkdir -p outputs; cd outputs; python3 -c "
import os
for i in range('"$top"'):
    d = \"d%03d\" % i
    os.mkdir(d)
    for j in range(330):
        os.mkdir(\"%s/%03d\" % (d, j))
" && echo made' 100)
{"wait": 1}
$(bash_call 2 'sleep 100' 2)
{"wait": 2}
$(bash_call 3 'sleep 1.5; echo ended' 2)
{"wait": 3}
$(bash_call 4 'echo alive; ls outputs | wc -l')
{"wait": 4}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "made\n"'
	res 2
	sc '.exit_code == 124 and .error == null'
	# Ended by itself just before its deadline, the walk past it: killed or not, the sandbox stays.
	res 3
	sc '(.exit_code == 0 or .exit_code == 124) and .error == null'
	# The listing asked for after a killed call has a request's 10 s, which 100k folders may
	# pass on a loaded machine (the sandbox then goes, as it did before): not asserted here.
	res 4
	sc '.stdout | startswith("alive\n")'
}

@test "local: a call timed out with 100k folders in outputs/ keeps its sandbox" { timeout_tree_case local; }
@test "docker: a call timed out with 100k folders in outputs/ keeps its sandbox" { timeout_tree_case docker; }
@test "daytona: a call timed out with 100k folders in outputs/ keeps its sandbox" { timeout_tree_case daytona; }
# The walk of outputs/ made slow (the test server's walk_delay_ms: 0.3 s a folder, 24 s for
# this one), as a large folder on a loaded machine makes it: the call that timed out still
# answers with its end and keeps its sandbox (its stop waits for no walk, and the listing that
# comes with its end is cut short at its time bound, saying so), and the next call runs.
@test "daytona: a call timed out while the walk of outputs/ is slow keeps its sandbox" {
	with_backend daytona
	local slow
	slow=$(printf 'curl -sf -X POST -H %q --data %q %q >/dev/null' 'Content-Type: application/json' \
		'{"walk_delay_ms": 300}' "$DT_URL/_control")
	mcp_session <<EOF
$INIT
$(bash_call 1 'mkdir -p outputs && cd outputs && for i in $(seq 80); do mkdir d$i; done && echo made')
{"wait": 1}
$(jq -cn --arg c "$slow" '{sh: $c}')
$(bash_call 2 'sleep 100' 2)
{"wait": 2}
$(bash_call 3 'echo alive')
{"wait": 3}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "made\n"'
	res 2
	sc '.exit_code == 124 and .error == null'
	# Cut short by time, not by size (80 folders, no file): the closing line says so.
	[[ "$(response 2)" == *"or took too long to walk: only part of it was looked at"* ]]
	res 3
	sc '.exit_code == 0 and .stdout == "alive\n"'
}

@test "local, not root: a call timed out with 100k folders in outputs/ keeps its sandbox" {
	unprivileged_server
	timeout_tree_case local 90
	unprivileged_cleanup
}

# Links, a FIFO, a socket and a symlinked folder planted in outputs/, and a call after that
# makes outputs/ itself a symlink: nothing is followed, opened or blocked on, and nothing of
# what they point at (/etc/passwd, the agent's own /proc) comes back, then or on a read.
links_case() {
	with_backend "$1"
	local plant='mkdir -p outputs && cd outputs && echo plain > a.txt &&
ln -s /etc/passwd l-passwd && ln -s /proc/self/environ l-environ && ln -s /proc/1/root/etc/passwd l-root &&
ln -s /etc l-dir && mkdir sub && ln -s /etc/passwd sub/l && mkfifo fifo &&
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")"'
	SESSION_TIMEOUT=60 mcp_session <<EOF
$INIT
$(bash_call 1 "$plant")
{"wait": 1}
$(bash_call 4 "$sizes")
{"wait": 4}
$(read_json 2 outputs/l-passwd)
{"wait": 2}
$(read_json 3 outputs/fifo)
{"wait": 3}
$(bash_call 4 'rm -rf outputs && ln -s /etc outputs')
{"wait": 4}
$(read_json 5 outputs/passwd)
{"wait": 5}
$(bash_call 6 'rm outputs && ln -s /proc/self/cwd outputs')
{"wait": 6}
$(bash_call 7 'rm outputs && mkdir outputs && ln -s /proc/1/root outputs/root && echo x > outputs/x.txt')
{"wait": 7}
EOF
	res 1
	sc '[.artifacts[] | [.path, .shown]] == [["outputs/a.txt", "text"], ["outputs/fifo", "none"], ["outputs/l-dir", "none"],
		["outputs/l-environ", "none"], ["outputs/l-passwd", "none"], ["outputs/l-root", "none"], ["outputs/sock", "none"],
		["outputs/sub/l", "none"]]'
	sc '[.artifacts[] | select(.path | test("/l")) | .note | test("symlink")] | all'
	[[ "$output" != *root:x:0* ]]
	[[ "$output" != *PATH=* ]]
	response 2 | jq -e '.error != null or (.result.contents[0].text // "" | test("root:") | not)' >/dev/null
	response 3 | jq -e '.error != null or (.result.contents[0].text // "" | . == "")' >/dev/null
	res 4
	sc '.artifacts == null or (.artifacts | length) == 0'
	response 5 | jq -e '.error != null' >/dev/null
	res 6
	sc '.artifacts == null or (.artifacts | length) == 0'
	res 7
	sc '[.artifacts[] | [.path, .shown]] == [["outputs/root", "none"], ["outputs/x.txt", "text"]]'
}

@test "local: links, FIFOs and sockets in outputs/, or outputs/ a link, read nothing outside" { links_case local; }
@test "docker: links, FIFOs and sockets in outputs/, or outputs/ a link, read nothing outside" { links_case docker; }
@test "daytona: links, FIFOs and sockets in outputs/, or outputs/ a link, read nothing outside" { links_case daytona; }
@test "local, not root: links, FIFOs and sockets in outputs/, or outputs/ a link, read nothing outside" {
	unprivileged_server
	links_case local
	unprivileged_cleanup
}
@test "docker, not root: links, FIFOs and sockets in outputs/, or outputs/ a link, read nothing outside" {
	[ -z "${DK_SKIP:-}" ] || skip_or_fail "$DK_SKIP"
	unprivileged_server
	unprivileged_docker
	links_case docker
	unprivileged_cleanup
}

# What came with one call's end answers nothing after it: a read between calls, the next call's
# outputs (a file rewritten, one removed, one that now is a symlink), a killed call's, and what
# follows cleanup_sandbox read the workspace as it is then.
stale_case() {
	with_backend "$1"
	SESSION_TIMEOUT=60 mcp_session <<EOF
$INIT
$(bash_call 1 'mkdir -p outputs && echo one > outputs/a.txt && echo bee > outputs/b.txt && echo cee > outputs/c.txt')
{"wait": 1}
$(read_json 2 outputs/a.txt)
{"wait": 2}
$(bash_call 3 'echo two > outputs/a.txt && rm outputs/b.txt && rm outputs/c.txt && ln -s a.txt outputs/c.txt')
{"wait": 3}
$(read_json 4 outputs/a.txt)
{"wait": 4}
$(read_json 5 outputs/b.txt)
{"wait": 5}
$(read_json 6 outputs/c.txt)
{"wait": 6}
$(bash_call 7 'echo three > outputs/a.txt; sleep 100' 2)
{"wait": 7}
$(read_json 8 outputs/a.txt)
{"wait": 8}
$(call_json 9 cleanup_sandbox '{}')
{"wait": 9}
$(read_json 10 outputs/a.txt)
{"wait": 10}
$(bash_call 11 'mkdir -p outputs && echo four > outputs/d.txt')
{"wait": 11}
EOF
	res 1
	sc '[.artifacts[] | [.path, .text]] == [["outputs/a.txt", "one\n"], ["outputs/b.txt", "bee\n"], ["outputs/c.txt", "cee\n"]]'
	response 2 | jq -e '.result.contents[0].text == "one\n"' >/dev/null
	res 3
	sc '[.artifacts[] | [.path, .shown]] == [["outputs/a.txt", "text"], ["outputs/c.txt", "none"]]'
	sc '.artifacts[0].text == "two\n"'
	response 4 | jq -e '.result.contents[0].text == "two\n"' >/dev/null
	response 5 | jq -e '.error != null' >/dev/null
	response 6 | jq -e '.error != null or (.result.contents[0].text // "" | . != "cee\n")' >/dev/null
	res 7
	sc '.exit_code == 124 and ([.artifacts[] | [.path, .text]] == [["outputs/a.txt", "three\n"]])'
	response 8 | jq -e '.result.contents[0].text == "three\n"' >/dev/null
	res 9
	response 10 | jq -e '.error != null' >/dev/null
	res 11
	sc '[.artifacts[] | [.path, .text]] == [["outputs/d.txt", "four\n"]]'
}

@test "local: nothing that came with a call's end answers after it" { stale_case local; }
@test "docker: nothing that came with a call's end answers after it" { stale_case docker; }
@test "daytona: nothing that came with a call's end answers after it" { stale_case daytona; }
@test "local, not root: nothing that came with a call's end answers after it" {
	unprivileged_server
	stale_case local
	unprivileged_cleanup
}

# Names with a newline or not UTF-8, a path of 2 KiB, files at and past the 64 KiB that come
# with a call's end, sparse ones, then 100k files: each answered as a read would, and the
# server keeps serving.
names_case() {
	with_backend "$1"
	local plant='mkdir -p outputs && cd outputs && printf "nl\n" > "$(printf "new\nline.txt")" &&
printf "latin\n" > "$(printf "caf\351.txt")" &&
d=$(python3 -c "print(\"/\".join([\"d\" * 200] * 10))") && mkdir -p "$d" && echo deep > "$d/f.txt"'
	local sizes='cd outputs && head -c 65536 /dev/zero | tr "\0" a > at64k.txt && head -c 65537 /dev/zero | tr "\0" b > over64k.txt &&
truncate -s 900M sparse.bin && truncate -s 60000 sparse-small.bin'
	SESSION_TIMEOUT=90 mcp_session <<EOF
$INIT
$(bash_call 1 "$plant")
{"wait": 1}
$(bash_call 4 "$sizes")
{"wait": 4}
$(bash_call 2 'mkdir -p outputs/many && cd outputs/many && python3 -c "
for i in range(100000):
    open(\"f%06d\" % i, \"w\").close()
"' 60)
{"wait": 2}
$(bash_call 3 'echo alive; ls outputs/many | wc -l')
{"wait": 3}
EOF
	res 1
	sc '(.artifacts | length) == 3'
	sc '[.artifacts[] | select(.path == "outputs/new\nline.txt") | .text] == ["nl\n"]'
	sc '[.artifacts[] | select(.path | endswith("/f.txt")) | .text] == ["deep\n"]'
	sc '[.artifacts[] | select(.path | test("^outputs/caf")) | .size] == [6]'
	res 4
	sc '(.artifacts | length) == 4'
	sc '[.artifacts[] | select(.path == "outputs/at64k.txt" or .path == "outputs/over64k.txt") | .size] == [65536, 65537]'
	sc '[.artifacts[] | select(.path | test("sparse")) | .size] == [60000, 943718400]'
	res 2
	sc '.exit_code == 0 and .error == null and (.artifacts | length) <= 20'
	res 3
	sc '.stdout == "alive\n100000\n"'
}

@test "local: odd names, 64 KiB bounds, sparse files and 100k files in outputs/" { names_case local; }
@test "docker: odd names, 64 KiB bounds, sparse files and 100k files in outputs/" { names_case docker; }
@test "daytona: odd names, 64 KiB bounds, sparse files and 100k files in outputs/" { names_case daytona; }

# The agent lives in the sandbox, beside the code: what it sends with a call's end is checked
# as untrusted (counts past the frame or past what was asked, lengths that run past the frame, a
# file past 64 KiB or past its size, bytes of a FIFO, a NUL in a name). A malformed one ends the
# connection (the sandbox is taken for lost) and answers nothing.
lying_frame() { # KIND: an AG_OUTPUTS frame, in hex, into $BATS_TEST_TMPDIR/KIND.hex
	python3 - "$1" "$REPO_DIR" >"$BATS_TEST_TMPDIR/$1.hex" <<'PYEOF'
import os, re, struct, sys
# The frame's type, as agent/proto.h numbers it.
with open(os.path.join(sys.argv[2], 'agent', 'proto.h')) as f:
    AG_OUTPUTS = int(re.search(r'\bAG_OUTPUTS = (\d+)', f.read()).group(1))
def u32(v): return struct.pack('<I', v & 0xffffffff)
def u64(v): return struct.pack('<Q', v)
def s(b): return u32(len(b)) + b
def frame(payload): return (u32(len(payload) + 1) + bytes([AG_OUTPUTS]) + payload).hex()
def entry(name): return s(name) + u64(5) + u64(0) + u64(0) + u32(0o100644)
def fil(name, data, mode=0o100644, size=None):
    return s(name) + u32(0) + u32(mode) + u64(len(data) if size is None else size) + s(data)
k = sys.argv[1]
none = u32(0) + u32(0)  # an empty listing
print({
    'good': frame(u32(0) + u32(1) + entry(b'a') + u32(1) + fil(b'a', b'hello')),
    'count': frame(u32(0) + u32(0xffffffff) + entry(b'a')),
    'over': frame(u32(0) + u32(1001) + b''.join(entry(b'n%d' % i) for i in range(1001)) + u32(0)),
    'files': frame(none + u32(65) + b''.join(fil(b'f%d' % i, b'') for i in range(65))),
    'manyfiles': frame(none + u32(0xffffffff)),
    'strlen': frame(none + u32(1) + u32(0xffffffff) + b'a'),
    'datalen': frame(none + u32(1) + s(b'a') + u32(0) + u32(0o100644) + u64(5) + u32(0xfffffffe) + b'hello'),
    'big': frame(none + u32(1) + fil(b'a', b'x' * 65537, size=1 << 40)),
    'longer': frame(none + u32(1) + fil(b'a', b'xyz', size=2)),
    'fifo': frame(none + u32(1) + fil(b'a', b'xyz', mode=0o010644)),
    'nul': frame(none + u32(1) + fil(b'a\0b', b'')),
    'empty': frame(none + u32(1) + fil(b'', b'')),
    'short': frame(none + u32(1) + s(b'a') + u32(0)),
}[k])
PYEOF
}

@test "a lying agent's listing and files with a call's end are checked, never taken on trust" {
	local k
	lying_frame good
	run "$REPO_DIR/build/test-helper" lying-agent "@$BATS_TEST_TMPDIR/good.hex"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'run 0 \nlist 1\nget 0 5 hello')" ]
	for k in count over files manyfiles strlen datalen big longer fifo nul empty short; do
		lying_frame "$k"
		run "$REPO_DIR/build/test-helper" lying-agent "@$BATS_TEST_TMPDIR/$k.hex"
		[ "$status" -eq 0 ] || { echo "$k: status $status" >&2; return 1; }
		[ "$output" = "run -2 the sandbox agent sent a malformed list" ] || { echo "$k: $output" >&2; return 1; }
	done
}

# The largest "out" an honest runner can send (1000 names of ~4 KiB, 20 changed files of 64 KiB)
# fits the bound of the answer that brings it, which is no larger than that.
@test "daytona: the largest outputs/ listing and files come with a call's end" {
	with_backend daytona
	SESSION_TIMEOUT=90 mcp_session <<EOF
$INIT
$(bash_call 1 'mkdir -p outputs && cd outputs && python3 -c "
import os
d = \"/\".join([\"d\" * 250] * 15)
os.makedirs(d)
for i in range(20):
    open(\"a%02d.txt\" % i, \"w\").write(\"x\" * 65536)
for i in range(1000):
    open(\"%s/%s%04d\" % (d, \"f\" * 180, i), \"w\").close()
"' 60)
{"wait": 1}
$(bash_call 2 'echo alive')
{"wait": 2}
EOF
	res 1
	sc '.exit_code == 0 and .error == null'
	sc 'any(.artifacts[]; .path == "outputs/a00.txt")'
	local id
	id=$(printf '%s' "$result" | jq -r '.structuredContent.sandbox_id')
	res 2
	sc '.stdout == "alive\n"'
	[ "$(printf '%s' "$result" | jq -r '.structuredContent.sandbox_id')" = "$id" ]
}
