# The install step under the default policy (--network install): it reaches the package index
# and nothing else -- not the host's loopback, not a metadata address, not what an index page
# points at elsewhere -- on every backend. A test index runs on a network of its own
# (lib/test-index.bash); a listener on the host's loopback stands for the host's services.
# The test index's network routes 198.51.100.0/24 on the host (tests/lib/run.py).
# suite: uses docker
# suite: owns test-index
load lib/helpers
load lib/docker-setup
load lib/daytona-setup
load lib/test-index
load lib/prestart

setup_file() {
	docker_setup_file
	daytona_setup_file
}
teardown_file() {
	docker_teardown_file
	daytona_teardown_file
}

setup() {
	common_setup
	[ "$(id -u)" -eq 0 ] || skip_or_fail "needs root to make the test index's network"
	command -v ip >/dev/null || skip_or_fail "needs ip (iproute2)"
	index_fixture_up slowpkg ../../files/okpkg-1.0-py3-none-any.whl
}

teardown() {
	index_fixture_down
	unprivileged_teardown
	return 0
}

py_req() { # ID REQUIREMENT
	call_json "$1" execute_python "$(jq -cn --arg r "$2" '{script: "import okpkg; print(okpkg.VALUE)", requirements: [$r], timeout_s: 60}')"
}

index_case() {
	with_backend "$1"
	mcp_session --index-url "$INDEX_URL" <<EOF
$INIT
$(py_req 1 okpkg==1.0)
{"wait": 1}
$(py_req 2 evil-loopback)
{"wait": 2}
$(py_req 3 evil-metadata)
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	for id in 2 3; do
		res $id
		sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: "))'
	done
	# Nothing reached the host's loopback service.
	[ ! -e "$BATS_TEST_TMPDIR/host.port.count" ]
}

@test "local: the install step reaches the index, and not what an index page points at on the host" {
	index_case local
	grep -q "install step: refused .*127.0.0.1:$HOST_PORT" "$SERVER_LOG"
	grep -q "install step: refused .*169.254.169.254" "$SERVER_LOG"
}
@test "docker: the install step reaches the index, and not what an index page points at on the host" {
	index_case docker
	grep -q "install step: refused .*127.0.0.1:$HOST_PORT" "$SERVER_LOG"
}

# At the least open files limit the server takes (64, soft and hard), the install step's proxy
# sizes its connection slots to the descriptors left, and pip still gets through it, on the
# local backend (the relay's handover) and on Docker (the bind-mounted socket).
low_fd_case() {
	with_backend "$1"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 120 -- prlimit --nofile=64 "$SANDBOX_MCP" \
		--index-url "$INDEX_URL" <<-EOF
		$INIT
		$(py_req 1 okpkg==1.0)
		{"wait": 1}
		$(py_call 2 'import okpkg; print(okpkg.VALUE)')
	EOF
	echo "$output"
	[ "$status" -eq 0 ]
	for id in 1 2; do
		res $id
		sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	done
}
@test "local: at an open files limit of 64, the least the server takes, a call's install reaches the index" {
	low_fd_case local
}
@test "docker: at an open files limit of 64, the least the server takes, a call's install reaches the index" {
	low_fd_case docker
}

# An index the proxy cannot reach: a name that does not resolve (.invalid never does), and a
# port of the test index's address where nothing listens. The result says so, with the proxy's
# reason, at once (pip is stopped: its retries, seconds of backing off, are not waited for), and points to
# --wheelhouse; the script is not run.
unreachable_case() {
	with_backend "$1"
	mcp_session --index-url http://index.invalid/simple <<-EOF
		$INIT
		$(py_req 1 okpkg==1.0)
	EOF
	res 1
	sc '.exit_code == 1 and .stdout == "" and (.stderr | startswith("Failed to install requirements: the package index could not be reached (index.invalid:80: name resolution failed ("))'
	sc '(.stderr | contains("give --wheelhouse DIR")) and (.stderr | contains("so pip was stopped"))'
	# Stopped, not left to its 5 retries (a first one may be under way as the stop comes).
	sc '[.stderr | scan("Retrying")] | length <= 1'
	mcp_session --index-url "http://198.51.100.2:8081/simple" <<-EOF
		$INIT
		$(py_req 1 okpkg==1.0)
	EOF
	res 1
	sc '.exit_code == 1 and (.stderr | startswith("Failed to install requirements: the package index could not be reached (198.51.100.2:8081: connection refused)"))'
	sc '(.stderr | contains("so pip was stopped")) and ([.stderr | scan("Retrying")] | length <= 1)'
}

@test "local: an index that cannot be reached is said so at once, with the proxy's reason" {
	unreachable_case local
}
@test "docker: an index that cannot be reached is said so at once, with the proxy's reason" {
	unreachable_case docker
}

# A package installed by one call is imported by the next ones, whether their interpreter was
# started ahead of the install or after it.
installed_case() {
	with_backend "${1%-unprivileged}"
	[ "$1" = "${1%-unprivileged}" ] || unprivileged_server
	[ "$1" != docker-unprivileged ] || unprivileged_docker
	mcp_session --log-level debug --no-sandbox-ahead --index-url "$INDEX_URL" <<-EOF
		$INIT
		$(py_call 1 'print("before")')
		{"wait": 1}
		$(py_call 2 'import okpkg; print(okpkg.VALUE)' '{"requirements": ["okpkg==1.0"], "timeout_s": 60}')
		{"wait": 2}
		$(py_call 3 'import okpkg; print(okpkg.VALUE)')
		{"wait": 3}
		$(py_call 4 'import okpkg; print(okpkg.VALUE)')
	EOF
	# The interpreter ahead reads nothing of the workspace before a call (the packages folder is
	# put on its path at the call), so 2's, started before the install, serves it as well as 3's
	# and 4's, started after it.
	[ "$(prestarted | tr '\n' ' ')" = "2 3 4 " ]
	for id in 2 3 4; do
		res $id
		sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	done
}

@test "local: a package a call installs is imported by the next calls, started ahead or not" {
	installed_case local
}
# Not root, the workspace is a tmpfs that the install step's instance shares with the main one.
@test "local, not root: a package a call installs is imported by the next calls, started ahead or not" {
	installed_case local-unprivileged
	grep -qF "the workspace quota is 256 MiB: the workspace is a tmpfs of its own" "$SERVER_LOG"
	[ -z "$(grep -F "quota is not enforced" "$SERVER_LOG")" ]
	unprivileged_cleanup
}
@test "docker: a package a call installs is imported by the next calls, started ahead or not" {
	installed_case docker
}
# Not root, the workspace is a tmpfs volume of the engine's, which the install step's container
# shares with the main one.
@test "docker, not root: a package a call installs is imported by the next calls, started ahead or not" {
	installed_case docker-unprivileged
	grep -qF "the workspace quota is 256 MiB: the workspace is a tmpfs volume of its own" "$SERVER_LOG"
	[ -z "$(grep -F "quota is not enforced" "$SERVER_LOG")" ]
	[ -z "$(our_containers)" ]
	[ -z "$(our_volumes)" ]
	unprivileged_cleanup
}

@test "local: the install step has a network namespace of its own (no host loopback, no abstract sockets)" {
	with_backend local
	pidf="$BATS_TEST_TMPDIR/server.pid"
	run python3 "$SESSION" --stderr "$SERVER_LOG" --pidfile "$pidf" --timeout 120 -- "$SANDBOX_MCP" --index-url "$INDEX_URL" <<EOF
$INIT
$(py_req 1 slowpkg)
{"sh": "for i in \$(seq 300); do [ \$(pgrep -c -P \$(cat $pidf)) -ge 2 ] && break; sleep 0.05; done; for p in \$(pgrep -P \$(cat $pidf)); do readlink /proc/\$p/ns/net; done > $BATS_TEST_TMPDIR/netns; readlink /proc/self/ns/net > $BATS_TEST_TMPDIR/hostns"}
EOF
	[ "$status" -eq 0 ]
	cat "$BATS_TEST_TMPDIR/netns" "$BATS_TEST_TMPDIR/hostns"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/netns")" -eq 2 ]
	# Neither the code's sandbox nor the install step's shares the host's network namespace.
	run grep -cxF "$(cat "$BATS_TEST_TMPDIR/hostns")" "$BATS_TEST_TMPDIR/netns"
	[ "$output" = 0 ]
}

# Not root, the install step's way to the proxy is bound from a folder of the server's own on
# /dev/shm: its mount table names no path of the state folder either. Read from the host, during
# the install.
install_mounts_case() {
	with_backend "${1%-unprivileged}"
	unprivileged_server
	[ "$1" != docker-unprivileged ] || unprivileged_docker
	mcp_session --index-url "$INDEX_URL" <<EOF
$INIT
$(py_req 1 okpkg==1.0)
{"sh": "for i in \$(seq 600); do p=\$(pgrep -u $UNPRIV_UID -f -- '-m pip install' | head -1); [ -n \"\$p\" ] && cat /proc/\$p/mountinfo > $BATS_TEST_TMPDIR/mounts && [ -s $BATS_TEST_TMPDIR/mounts ] && exit 0; sleep 0.02; done; exit 1"}
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	cat "$BATS_TEST_TMPDIR/mounts"
	run grep -cF "$SANDBOX_STATE_DIR" "$BATS_TEST_TMPDIR/mounts"
	[ "$output" = 0 ]
	awk '$5 == "/run/sandbox-proxy" { print $4 }' "$BATS_TEST_TMPDIR/mounts" | grep -xE '/sandbox-mcp-[0-9a-f]{18}/[^/]+'
	no_shm_left
	unprivileged_cleanup
}

@test "local, not root: the install step's mount table names no path of the state folder" {
	install_mounts_case local-unprivileged
}
@test "docker, not root: the install step's mount table names no path of the state folder" {
	install_mounts_case docker-unprivileged
}

@test "docker: the install step's container has no network but its way to the proxy" {
	with_backend docker
	mcp_session --index-url "$INDEX_URL" <<EOF
$INIT
$(py_req 1 slowpkg)
{"sh": "for i in \$(seq 300); do c=\$(docker ps -q --filter label=sandbox-mcp.role=install --filter label=sandbox-mcp.pid=\$SERVER_PID); [ -n \"\$c\" ] && docker inspect \$c --format '{{.HostConfig.NetworkMode}}' > $BATS_TEST_TMPDIR/mode && exit 0; sleep 0.05; done; exit 1"}
EOF
	[ "$(cat "$BATS_TEST_TMPDIR/mode")" = none ]
}

@test "daytona: the install step opens the sandbox's network to the index's addresses alone, then blocks it" {
	with_backend daytona
	: > "$BATS_FILE_TMPDIR/daytona.log"
	mcp_session --index-url "$INDEX_URL" <<EOF
$INIT
$(py_req 1 okpkg==1.0)
EOF
	res 1
	sc '.exit_code == 0 and .stdout == "okpkg 1.0\n"'
	grep -a 'network-settings' "$BATS_FILE_TMPDIR/daytona.log"
	grep -aq 'network-settings .*"networkAllowList": "198.51.100.2/32", "networkBlockAll": false' "$BATS_FILE_TMPDIR/daytona.log"
	grep -a 'network-settings [0-9a-f-]*:' "$BATS_FILE_TMPDIR/daytona.log" | tail -1 | grep -q '{"networkBlockAll": true}'
}
