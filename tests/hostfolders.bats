# The host folders a sandbox is shown (--mount, --workspace, --wheelhouse): checked once at
# start-up on every backend (none in the state folder or /dev/shm, none in a folder the code may
# write), bound only while each is still the folder checked then, and never left holding a
# set-id file or folder or a file capability, as root and not, on the local and Docker backends.
# suite: uses docker
load lib/helpers
load lib/docker-setup
load lib/daytona-setup
bats_require_minimum_version 1.5.0

setup_file() {
	docker_setup_file
	daytona_setup_file
}

teardown_file() {
	daytona_teardown_file
	docker_teardown_file
}

setup() {
	common_setup
	# Resolved: the server names folders by their resolved paths.
	T=$(realpath "$BATS_TEST_TMPDIR")
	chmod 755 "$T"
}

# as BACKEND[-unprivileged]: the backend, and the server as the test user when asked; then the
# folders of a case in $T, where the sandbox user and the test user may reach them.
as() {
	with_backend "${1%-unprivileged}"
	if [ "$1" != "${1%-unprivileged}" ]; then
		unprivileged_server
		T="$(realpath "$UNPRIV_DIR")/t"
		mkdir -m 755 "$T"
	fi
	[ "$1" != docker-unprivileged ] || unprivileged_docker
	mkdir -p "$T/data" "$T/secret" "$T/wh"
	echo mine >"$T/data/mine.txt"
	echo secret >"$T/secret/secret.txt"
	python3 "$TESTS_DIR/lib/make_wheel.py" "$T/wh" okpkg 1.0
	chmod -R a+rX "$T/data" "$T/secret" "$T/wh"
}

teardown() {
	unprivileged_teardown
}

bash_call() {
	call_json "$1" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')"
}

stdout_of() {
	response "$1" | jq -r '.result.structuredContent.stdout'
}

# refused_at_start MESSAGE_ERE ARGS...: the server, started with ARGS, exits 2 at once with one
# line on stderr that matches.
refused_at_start() {
	local want=$1
	shift
	run "$SANDBOX_MCP" "$@" </dev/null
	[ "$status" -eq 2 ] || {
		echo "not refused (exit $status): $*" >&2
		printf '%s\n' "$output" >&2
		return 1
	}
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" =~ ^sandbox-mcp:\ $want ]] || {
		echo "unexpected: ${lines[0]}" >&2
		return 1
	}
}

# The refusals, on each backend: they come before any backend is started.
startup_case() {
	as "$1"
	local A="$T/a" nested="a folder the code may write"
	mkdir -p "$A/in" "$A/wh"
	refused_at_start "--mount /mnt/in: the host folder $A/in is in $A, $nested \(--mount /mnt/a\)" \
		--mount "$A:/mnt/a:rw" --mount "$A/in:/mnt/in"
	refused_at_start "--wheelhouse: the host folder $A/wh is in $A, $nested" --mount "$A:/mnt/a:rw" --wheelhouse "$A/wh"
	refused_at_start "--workspace: the host folder $A/ws is in $A, $nested" --mount "$A:/mnt/a:rw" --workspace "$A/ws"
	# $A is a workspace already (its .sandbox folder), so that nothing but the nesting is at fault.
	mkdir "$A/.sandbox"
	refused_at_start "--mount /mnt/in: the host folder $A/in is in $A, $nested \(--workspace\)" \
		--workspace "$A" --mount "$A/in:/mnt/in"
	# A second path to the same folder does not hide it: a symlink, and a bind mount on the host.
	ln -s "$A" "$T/alias"
	refused_at_start "--mount /mnt/in: the host folder $A/in is in $A" --mount "$T/alias:/mnt/a:rw" --mount "$A/in:/mnt/in"
	if [ "$(id -u)" -eq 0 ]; then
		mkdir "$T/bound"
		mount --bind "$A" "$T/bound"
		run "$SANDBOX_MCP" --mount "$T/bound/in:/mnt/in" --mount "$A:/mnt/a:rw" </dev/null
		umount "$T/bound"
		[ "$status" -eq 2 ]
		[[ "$output" == "sandbox-mcp: --mount /mnt/in: the host folder $T/bound/in is in $A, $nested"* ]]
	fi
	# The state folder, /dev/shm and what holds them: never shown, whatever the backend.
	refused_at_start "--mount /mnt/up: the host folder $T holds, or is in, the state folder $(realpath "$SANDBOX_STATE_DIR"), which the code must not see" \
		--mount "$T:/mnt/up"
	refused_at_start "--mount /mnt/st: the host folder $(realpath "$SANDBOX_STATE_DIR") holds, or is in, the state folder" \
		--mount "$SANDBOX_STATE_DIR:/mnt/st"
	refused_at_start "--wheelhouse: the host folder $T holds, or is in, the state folder" --wheelhouse "$T"
	for spec in /dev/shm:/mnt/shm /dev:/mnt/dev; do
		refused_at_start "--mount /mnt/[a-z]+: the host folder /dev(/shm)? holds, or is in, /dev/shm, where the files bound into sandboxes are" \
			--mount "$spec"
	done
	# --check says the same.
	run "$SANDBOX_MCP" --check --mount "$SANDBOX_STATE_DIR:/mnt/st"
	[ "$status" -eq 2 ]
	[[ "$output" == *"holds, or is in, the state folder"* ]]
	# Neither a folder the same as a writable one, nor a writable one in a read-only one, can be
	# re-pointed by the code: both are taken.
	run "$SANDBOX_MCP" --check --mount "$A:/mnt/a:rw" --mount "$A:/mnt/b"
	[ "$status" -ne 2 ]
	run "$SANDBOX_MCP" --check --mount "$A/in:/mnt/a:rw" --mount "$A:/mnt/b"
	[ "$status" -ne 2 ]
}

@test "start-up: local: no host folder in a writable one, in or holding the state folder or /dev/shm (exit 2, one line)" {
	startup_case local
}

@test "start-up: docker: no host folder in a writable one, in or holding the state folder or /dev/shm (exit 2, one line)" {
	startup_case docker
}

@test "start-up: daytona: no host folder in a writable one, in or holding the state folder or /dev/shm (exit 2, one line)" {
	startup_case daytona
}

# The attack the nesting refusal stops: the code replaces a folder that another --mount binds
# with a symlink, and the next sandbox (after cleanup_sandbox) would bind the link's target.
@test "a --mount in a :rw one cannot be redirected by the code to another host folder: the server refuses it at start" {
	as local
	local A="$T/a"
	mkdir -p "$A/in"
	chmod -R 777 "$A"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 60 -- "$SANDBOX_MCP" --mount "$A:/mnt/a:rw" --mount "$A/in:/mnt/in" \
		<<<"$(printf '%s\n' "$INIT" "$INITIALIZED" "$(bash_call 1 "rm -rf /mnt/a/in && ln -s '$T/secret' /mnt/a/in")" \
			"$(call_json 2 cleanup_sandbox '{}')" "$(bash_call 3 'ls /mnt/in')")"
	[[ "$output" != *secret.txt* ]]
	[ ! -L "$A/in" ]
	grep -q "^sandbox-mcp: --mount /mnt/in: the host folder $A/in is in $A, a folder the code may write" "$SERVER_LOG"
}

# A host folder replaced after start-up (renamed, a symlink or another folder put in its place)
# is not bound: the next sandbox fails with the reason, and the server keeps serving. Each swap
# is made before the sandbox that must see it can be made (cleanup_sandbox makes one ahead at
# once), and the second one before the first is undone, so no sandbox is ever made in between.
redirect_case() {
	as "$1"
	local D="$T/data" W="$T/wh"
	mcp_session --mount "$D:/mnt/d" --wheelhouse "$W" <<-EOF
		$INIT
		$INITIALIZED
		$(bash_call 1 'ls /mnt/d /wheelhouse')
		{"wait": 1}
		{"sh": "mv '$D' '$D.old' && ln -s '$T/secret' '$D'"}
		$(call_json 2 cleanup_sandbox '{}')
		$(bash_call 3 'ls /mnt/d')
		{"wait": 3}
		{"sh": "mv '$W' '$W.old' && mkdir '$W' && cp '$T/secret/secret.txt' '$W/okpkg-1.0-py3-none-any.whl' && chmod -R a+rX '$W' && rm '$D' && mv '$D.old' '$D'"}
		$(bash_call 4 'ls /wheelhouse')
		{"wait": 4}
		{"sh": "rm -r '$W' && mv '$W.old' '$W'"}
		$(bash_call 5 'ls /mnt/d /wheelhouse')
	EOF
	[ "$(stdout_of 1)" = $'/mnt/d:\nmine.txt\n\n/wheelhouse:\nokpkg-1.0-py3-none-any.whl' ]
	jqe "$(response 3)" '.result.isError == true and (.result.structuredContent.error | test("/mnt/d.*no longer the folder checked at start-up"))'
	jqe "$(response 3)" '.result.structuredContent.stdout | test("secret") | not'
	jqe "$(response 4)" '.result.isError == true and (.result.structuredContent.error | test("no longer the folder checked at start-up"))'
	# Once the folders are back, sandboxes are made again.
	[ "$(stdout_of 5)" = "$(stdout_of 1)" ]
}

@test "redirect: local: a host folder replaced after start-up is not bound" {
	redirect_case local
}

@test "redirect: local, not root: a host folder replaced after start-up is not bound" {
	redirect_case local-unprivileged
}

@test "redirect: docker: a host folder replaced after start-up is not bound" {
	redirect_case docker
}

@test "redirect: docker, not root: a host folder replaced after start-up is not bound" {
	redirect_case docker-unprivileged
}

# The same as a race: the folder is swapped with a symlink and back as fast as the host can while
# sandboxes are made one after another; none ever shows the link's target.
race_case() {
	as "$1"
	local D="$T/data" i
	local script="$INIT"$'\n'"$INITIALIZED"$'\n'"$(bash_call 1 'ls /mnt/d')"$'\n''{"wait": 1}'
	# The flipper starts once the server has checked the folder.
	script+=$'\n'"$(jq -cn --arg c "python3 '$TESTS_DIR/hostfolders/flip.py' '$D' '$T/secret' '$T/stop' </dev/null >/dev/null 2>&1 & echo \$! >'$T/flipper'" '{sh: $c}')"
	for i in $(seq 2 13); do
		script+=$'\n'"$(call_json "$((100 + i))" cleanup_sandbox '{}')"$'\n'"$(bash_call "$i" 'ls /mnt/d')"$'\n'"{\"wait\": $i}"
	done
	mcp_session --no-sandbox-ahead --mount "$D:/mnt/d" <<<"$script"
	touch "$T/stop"
	eventually 10 flipper_gone
	[ -d "$D" ] && [ ! -L "$D" ]
	[ "$(stdout_of 1)" = mine.txt ]
	local seen=0
	for i in $(seq 2 13); do
		jqe "$(response "$i")" '.result.structuredContent.stdout | test("secret") | not'
		[ "$(stdout_of "$i")" != mine.txt ] || seen=$((seen + 1))
	done
	echo "$seen of 12 sandboxes bound the folder"
}

flipper_gone() {
	! kill -0 "$(cat "$T/flipper")" 2>/dev/null
}

@test "race: local: a host folder swapped with a symlink while sandboxes are made never binds the link's target" {
	race_case local
}

@test "race: docker: a host folder swapped with a symlink while sandboxes are made never binds the link's target" {
	race_case docker
}

# Daytona copies a --mount folder in when it makes a sandbox: only while it is the folder checked.
@test "redirect: daytona: a host folder replaced after start-up is not copied in" {
	as daytona
	local D="$T/data"
	mcp_session --mount "$D:/mnt/d" <<-EOF
		$INIT
		$INITIALIZED
		$(bash_call 1 'ls /mnt/d')
		{"wait": 1}
		{"sh": "mv '$D' '$D.old' && ln -s '$T/secret' '$D'"}
		$(call_json 2 cleanup_sandbox '{}')
		$(bash_call 3 'ls /mnt/d')
		{"wait": 3}
		{"sh": "rm '$D' && mv '$D.old' '$D'"}
		$(bash_call 4 'ls /mnt/d')
	EOF
	[ "$(stdout_of 1)" = mine.txt ]
	jqe "$(response 3)" '.result.isError == true and (.result.structuredContent.error | test("--mount /mnt/d: the host folder .* is no longer the folder checked at start-up"))'
	jqe "$(response 3)" '.result.structuredContent.stdout | test("secret") | not'
	[ "$(stdout_of 4)" = mine.txt ]
}

# Code that tries every way to leave something set-id, or a file capability, in a :rw mount and
# in a --workspace folder (made in a set-gid folder: it would pass the bit on to every folder
# made in it) leaves nothing of the kind on the host.
setid_case() {
	[ "$(uname -m)" = x86_64 ] || skip_or_fail "the probe (tests/hostfolders/setid.py) uses x86_64 system call numbers"
	as "$1"
	local OUT="$T/out" WS="$T/sgid/ws"
	mkdir -m 777 "$OUT" "$T/sgid"
	chmod 2777 "$T/sgid"
	local script
	script=$(printf 'DIRS = ["/workspace", "/mnt/out"]\n%s' "$(cat "$TESTS_DIR/hostfolders/setid.py")")
	mcp_session --workspace "$WS" --mount "$OUT:/mnt/out:rw" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_python "$(jq -cn --arg s "$script" '{script: $s, timeout_s: 120}')")")"
	res 1
	printf '%s' "$result" | jq -r '.structuredContent.stdout, .structuredContent.stderr'
	sc '.stdout | endswith("done\n")'
	# On the host: the probe's files are there, and nothing is set-id or has a capability.
	[ -e "$WS/f4755" ] && [ -e "$OUT/f4755" ] && [ -d "$WS/plain" ] && [ -d "$OUT/plain" ]
	local found
	found=$(find "$WS" "$OUT" -perm /6000)
	[ -z "$found" ] || { echo "set-id on the host: $found"; false; }
	found=$(python3 - "$WS" "$OUT" <<-'EOF'
		import os, sys
		for top in sys.argv[1:]:
		    for root, dirs, files in os.walk(top):
		        for n in dirs + files:
		            p = os.path.join(root, n)
		            try:
		                os.getxattr(p, "security.capability", follow_symlinks=False)
		                print(p)
		            except OSError:
		                pass
	EOF
	)
	[ -z "$found" ] || { echo "file capability on the host: $found"; false; }
	# Each call was made, in each folder, and refused.
	for call in chmod fchmod fchmodat fchmodat2 open openat creat mkdir mkdirat mknod mknodat; do
		[ "$(grep -c "^$call 0o[246]755 EPERM$" <<<"$(stdout_of 1)")" -eq 6 ] || { echo "$call not refused 6 times"; false; }
	done
	[ "$(grep -c '^openat2 0o[246]755 ENOSYS$' <<<"$(stdout_of 1)")" -eq 6 ]
	[ "$(grep -c '^tmpfile 0o[246]755 EPERM$' <<<"$(stdout_of 1)")" -eq 6 ]
	[ "$(grep -c '^plain-open 0o[246]755 ok$' <<<"$(stdout_of 1)")" -eq 6 ]
	[ "$(grep -cE '^(f|l)?setxattr(at)? 0o0 (EPERM|EOPNOTSUPP|ENOTSUP)$' <<<"$(stdout_of 1)")" -eq 8 ]
	# --check says so.
	run "$SANDBOX_MCP" --check --mount "$OUT:/mnt/out:rw"
	[ "$status" -eq 0 ]
	[[ "$output" == *"host folders: each bound only while it is the folder checked at start-up; the code can leave no set-id file or folder, nor a file capability, in them"* ]]
}

@test "set-id: local: nothing set-id or with a file capability reaches a host folder" {
	setid_case local
}

@test "set-id: local, not root: nothing set-id or with a file capability reaches a host folder" {
	setid_case local-unprivileged
}

@test "set-id: docker: nothing set-id or with a file capability reaches a host folder" {
	setid_case docker
}

@test "set-id: docker, not root: nothing set-id or with a file capability reaches a host folder" {
	setid_case docker-unprivileged
}

# Daytona's sandbox is no host folder: what comes back into the --workspace folder carries the
# permission bits alone.
@test "set-id: daytona: what a call leaves in the cloud sandbox comes back into the --workspace folder without set-id bits" {
	as daytona
	local WS="$T/ws"
	mcp_session --workspace "$WS" <<<"$(printf '%s\n' "$INIT" "$INITIALIZED" \
		"$(bash_call 1 'echo x > f && chmod 6755 f && mkdir d && chmod 2755 d && echo x > d/g && chmod 4755 d/g && stat -c %a f d d/g')")"
	[ "$(stdout_of 1)" = $'6755\n2755\n4755' ]
	[ -f "$WS/f" ] && [ -f "$WS/d/g" ]
	[ -z "$(find "$WS" -perm /6000)" ]
}
