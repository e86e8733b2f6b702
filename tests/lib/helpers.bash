# Shared by every bats file: load with `load lib/helpers`.
# The binary under test is $SANDBOX_MCP (default: build/sandbox-mcp of this checkout).

TESTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$TESTS_DIR/.." && pwd)
: "${SANDBOX_MCP:=$REPO_DIR/build/sandbox-mcp}"
SESSION="$TESTS_DIR/lib/session.py"
# The official MCP TypeScript SDK client checking the tools' contract (tests/mcp-check/run).
MCP_CHECK="$TESTS_DIR/mcp-check/run"
INIT='{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bats","version":"1"}}}'
INITIALIZED='{"jsonrpc":"2.0","method":"notifications/initialized"}'

# Every test gets its own state folder, so leftovers of one never meet another.
common_setup() {
	export SANDBOX_STATE_DIR="$BATS_TEST_TMPDIR/state"
	mkdir -p -m 700 "$SANDBOX_STATE_DIR"
	SERVER_LOG="$BATS_TEST_TMPDIR/server.log"
	: > "$SERVER_LOG"
	# The generic suites test the local backend whatever engines or keys this machine has;
	# docker.bats and daytona.bats choose their own backend.
	export SANDBOX_BACKEND=local
	unset SANDBOX_UID SANDBOX_TIMEOUT SANDBOX_MAX_TIMEOUT SANDBOX_OUTPUT_CAP SANDBOX_NETWORK \
		SANDBOX_WHEELHOUSE SANDBOX_IDLE_TIMEOUT SANDBOX_QUEUE SANDBOX_MAX_MESSAGE SANDBOX_KEEP SANDBOX_SHUTDOWN_BUDGET \
		SANDBOX_WORKSPACE SANDBOX_MOUNT
}

setup() { common_setup; }

# A test that cannot run here: skipped with its reason, or failed when skips are not allowed (CI).
skip_or_fail() {
	if [ -n "${SANDBOX_TEST_NO_SKIP:-}${CI:-}" ]; then
		echo "cannot run here: $*" >&2
		return 1
	fi
	skip "$*"
}

# mcp_session [SERVER ARGS...] < script (a redirection, not a pipe: $output must stay visible): runs a session (see lib/session.py); the server's
# stdout lines land in $output, its stderr in $SERVER_LOG. Fails when stdout had a non-JSON line.
mcp_session() {
	run python3 "$SESSION" --stderr "$SERVER_LOG" --timeout "${SESSION_TIMEOUT:-120}" ${SESSION_RUSAGE:+--rusage} -- "$SANDBOX_MCP" "$@"
	if [ "$status" -ne 0 ]; then
		echo "session failed ($status); stdout:" >&2
		printf '%s\n' "$output" >&2
		echo "--- server stderr:" >&2
		tail -20 "$SERVER_LOG" >&2
		return 1
	fi
}

# response ID: the response with that id (a JSON string id is given with its quotes: '"a"').
response() {
	printf '%s\n' "$output" | jq -c --argjson id "$1" 'select(type == "object" and .id == $id)' | head -1
}

# call_json ID TOOL ARGS_JSON [META_JSON]: a tools/call request line.
call_json() {
	local meta=${4:-null}
	jq -cn --argjson id "$1" --arg name "$2" --argjson args "$3" --argjson meta "$meta" \
		'{jsonrpc:"2.0", id:$id, method:"tools/call", params:({name:$name, arguments:$args} + (if $meta then {_meta:$meta} else {} end))}'
}

# tool TOOL ARGS_JSON [SERVER ARGS...]: one call in a fresh session; $result holds the result object.
tool() {
	local name=$1 args=$2
	shift 2
	mcp_session "$@" <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 "$name" "$args")")"
	result=$(response 1 | jq -c '.result')
	[ -n "$result" ] && [ "$result" != null ]
}

# res ID: $result := the result of the response with that id; fails when there is none.
res() {
	result=$(response "$1" | jq -c '.result')
	if [ -z "$result" ] || [ "$result" = null ]; then
		echo "no result for id $1; output:" >&2
		printf '%s\n' "$output" >&2
		return 1
	fi
}

# sc FILTER: jq -e FILTER over the structuredContent of $result.
sc() {
	printf '%s' "$result" | jq -e ".structuredContent | $1" >/dev/null || {
		echo "structuredContent does not satisfy: $1" >&2
		printf '%s' "$result" | jq '.structuredContent' >&2
		return 1
	}
}

# jqe JSON FILTER: jq -e, printing the JSON when it does not hold; empty JSON never holds (jq -e
# passes on no input at all).
jqe() {
	[ -n "${1//[[:space:]]/}" ] || {
		echo "does not satisfy: $2: no JSON given" >&2
		return 1
	}
	printf '%s' "$1" | jq -e "$2" >/dev/null || {
		echo "does not satisfy: $2" >&2
		printf '%s\n' "$1" >&2
		return 1
	}
}

# sandbox_processes [UID]: the processes running as the sandbox's host uid (default 65534),
# whichever server made them: a test that counts them runs its server with a uid of its own
# (free_uid), since other servers on this machine may use 65534 meanwhile.
sandbox_processes() {
	ps -e -o uid=,pid=,args= | awk -v u="${1:-65534}" '$1 == u {print}'
}

# free_uid: a uid no process on the host runs as, for a test's server to run its sandboxes as
# (--sandbox-uid, SANDBOX_UID) when the test looks for the sandboxes' processes: the user's own
# servers (as root, uid 65534) and tests running beside this one keep theirs. Random, so that two
# tests that run at once do not pick the same one.
free_uid() {
	local u i
	for i in $(seq 50); do
		u=$((200000 + (RANDOM * 32768 + RANDOM) % 800000))
		if ! ps -e -o uid= | awk -v u="$u" '$1 == u {found=1} END {exit !found}'; then
			echo "$u"
			return 0
		fi
	done
	return 1
}

# our_containers [DOCKER PS ARGS...], our_volumes: the Docker containers (ids, any state) and
# volumes that servers of this test made, by their labels (lib/ours.py): those of another
# server on this machine that is running, say the user's own, are not ours. Inside a session
# script, a step finds its server's with --filter label=sandbox-mcp.pid=$SERVER_PID.
our_containers() {
	python3 "$TESTS_DIR/lib/ours.py" containers "$@"
}
our_volumes() {
	python3 "$TESTS_DIR/lib/ours.py" volumes
}

# unprivileged_user: claims one of the test users sbxtest0 ... sbxtest15 (made when missing) for
# this test, so that no other test running at once, in this suite or another checkout's, uses
# it: whatever runs as it (processes, folders on /dev/shm) is this test's. The claim is a lock
# this test's shell holds (on /run/lock/sandbox-mcp-test-user.N) until it ends. Sets UNPRIV_USER.
unprivileged_user() {
	local i lockdir=/run/lock
	[ -d "$lockdir" ] && [ -w "$lockdir" ] || lockdir=/tmp
	for i in $(seq 0 15); do
		# Read-only: the servers the test starts inherit it.
		: >>"$lockdir/sandbox-mcp-test-user.$i" && exec {UNPRIV_LOCK}<"$lockdir/sandbox-mcp-test-user.$i" || continue
		if flock -n "$UNPRIV_LOCK"; then
			UNPRIV_USER=sbxtest$i
			id "$UNPRIV_USER" >/dev/null 2>&1 ||
				useradd -M -d /nonexistent -s /usr/sbin/nologin "$UNPRIV_USER" 2>/dev/null || return 1
			return 0
		fi
		exec {UNPRIV_LOCK}>&-
	done
	return 1
}

# few_fds_server N: SANDBOX_MCP becomes a wrapper that runs the server (as SANDBOX_MCP was)
# under an open-files limit of N, soft and hard.
few_fds_server() {
	command -v prlimit >/dev/null || skip_or_fail "needs prlimit (util-linux)"
	cat >"$BATS_TEST_TMPDIR/few-fds" <<WRAP
#!/bin/sh
exec prlimit --nofile=$1 -- "$SANDBOX_MCP" "\$@"
WRAP
	chmod +x "$BATS_TEST_TMPDIR/few-fds"
	SANDBOX_MCP="$BATS_TEST_TMPDIR/few-fds"
}

# unprivileged_server: this test's server runs as an unprivileged user of its own (UNPRIV_USER,
# see unprivileged_user): SANDBOX_MCP becomes a wrapper that starts it so, on a state folder of that user's.
# The binary is copied where the user may read it (the checkout may be in a folder others cannot
# enter); unprivileged_cleanup removes the copy. UNPRIV_UID is the user's uid. With
# UNPRIV_WITHOUT=CALL[,CALL] set, the server runs under `test-helper without` those calls.
unprivileged_server() {
	unprivileged_user || skip_or_fail "cannot create a test user"
	command -v setpriv >/dev/null || skip_or_fail "setpriv(1) is missing"
	UNPRIV_DIR=$(mktemp -d /tmp/sbx-unpriv.XXXXXX)
	cp "$SANDBOX_MCP" "$UNPRIV_DIR/sandbox-mcp" && cp "$REPO_DIR/build/test-helper" "$UNPRIV_DIR/test-helper"
	mkdir -m 700 "$UNPRIV_DIR/state"
	cat >"$UNPRIV_DIR/run" <<-EOF
		#!/bin/sh
		set -- "$UNPRIV_DIR/sandbox-mcp" "\$@"
		[ -z "\$UNPRIV_WITHOUT" ] || set -- "$UNPRIV_DIR/test-helper" without "\$UNPRIV_WITHOUT" -- "\$@"
		[ -z "\$UNPRIV_DOCKER_HOST" ] || export DOCKER_HOST="\$UNPRIV_DOCKER_HOST"
		exec setpriv --reuid=$UNPRIV_USER --regid=$UNPRIV_USER --clear-groups env HOME=/nonexistent "\$@"
	EOF
	chmod -R a+rX "$UNPRIV_DIR" && chmod a+x "$UNPRIV_DIR/run" && chown "$UNPRIV_USER:" "$UNPRIV_DIR" "$UNPRIV_DIR/state"
	UNPRIV_UID=$(id -u "$UNPRIV_USER")
	export SANDBOX_MCP="$UNPRIV_DIR/run" SANDBOX_STATE_DIR="$UNPRIV_DIR/state" UNPRIV_UID UNPRIV_USER
}

# unprivileged_docker [FAULT]: after unprivileged_server, lets that server reach the Docker engine of
# DOCKER_HOST through a relay on a socket of the test user's (lib/sock-relay.py), as a user in
# the engine's group would; the engine and its socket stay as they are. The tests' own docker
# commands keep DOCKER_HOST. FAULT: see sock-relay.py; what the relay says is in
# $UNPRIV_DIR/relay.log.
unprivileged_docker() {
	python3 "$TESTS_DIR/lib/sock-relay.py" "$UNPRIV_DIR/docker.sock" "${DOCKER_HOST#unix://}" "$UNPRIV_USER" "$@" \
		2>"$UNPRIV_DIR/relay.log" 3>&- &
	UNPRIV_RELAY=$!
	eventually 10 test -S "$UNPRIV_DIR/docker.sock"
	export UNPRIV_DOCKER_HOST="unix://$UNPRIV_DIR/docker.sock"
}

# shm_folders: the test user's servers' folders on /dev/shm, where one that is not root keeps the
# files it binds into its sandboxes (hostdir.h), one per line.
shm_folders() {
	[ -n "${UNPRIV_USER:-}" ] || return 0
	find /dev/shm -maxdepth 1 -name 'sandbox-mcp-*' -user "$UNPRIV_USER"
}

# no_shm_left: no server of the test user left a folder on /dev/shm.
no_shm_left() {
	local left
	left=$(shm_folders)
	[ -z "$left" ] || {
		echo "left on /dev/shm: $left" >&2
		return 1
	}
}

unprivileged_cleanup() {
	if [ -n "${UNPRIV_RELAY:-}" ]; then
		kill "$UNPRIV_RELAY" 2>/dev/null
		wait "$UNPRIV_RELAY" 2>/dev/null || true # ended by the kill
		unset UNPRIV_RELAY UNPRIV_DOCKER_HOST
	fi
	[ -z "${UNPRIV_DIR:-}" ] || rm -rf "$UNPRIV_DIR"
	unset UNPRIV_DIR
	# What a failed test's server left, so that the next test starts clean.
	shm_folders | xargs -r rm -rf
}

# unprivileged_teardown: in a file's teardown, for a test that failed before its own
# unprivileged_cleanup: its relay and copies go too.
unprivileged_teardown() {
	[ -z "${UNPRIV_DIR:-}" ] || unprivileged_cleanup
}

# eventually SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds; fails (with the
# command named on stderr) when SECONDS pass first. What a test waits for is a condition,
# never a fixed time.
eventually() {
	local deadline=$(($(date +%s%N) + ${1%.*} * 1000000000))
	shift
	until "$@"; do
		if [ "$(date +%s%N)" -ge "$deadline" ]; then
			echo "still false after the wait: $*" >&2
			return 1
		fi
		sleep 0.1
	done
}

# no_process_matching ERE: true when no process's command line matches (the caller's
# grep excluded).
no_process_matching() {
	! ps -e -o pid=,args= | awk -v me="$$" '$1 != me' | grep -v -e ' grep ' -e 'no_process_matching' | grep -qE "$1"
}

# answer_order ID...: the ids among ID... whose responses are in $output, in the order they
# came, one space between (how a test says which call was answered first).
answer_order() {
	printf '%s\n' "$output" | jq -c --argjson ids "$(printf '%s\n' "$@" | jq -sc .)" \
		'select(type == "object" and (.id as $i | any($ids[]; . == $i))) | .id' | paste -sd' '
}

# until_running MARKER: a session step (see lib/session.py) that waits until a process whose
# command line holds MARKER, as literal text, runs on this host. The pattern brackets the
# marker's first character, so the waiting shell's own command line never matches it, and
# escapes the rest: an unescaped dot in "76.5" also matched "76a5" in a container's id.
until_running() {
	local rest
	rest=$(printf '%s' "${1:1}" | sed 's/[][\\.^$*+?(){}|]/\\&/g')
	printf '%s\n' "$(jq -cn --arg c "pgrep -f '[${1:0:1}]$rest' >/dev/null" '{until: $c}')"
}

# no_sandbox_processes [UID]: true when no process runs as the sandbox's host uid.
no_sandbox_processes() {
	[ -z "$(sandbox_processes "$@")" ]
}

# sdk_files SERVER [ARGS...]: files out and the workspace as resources, checked with the official
# MCP TypeScript SDK client (tests/sdk-files); passes when all of its checks do.
sdk_files() {
	command -v npm >/dev/null || skip_or_fail "npm is needed to install the MCP SDK (scripts/deps.sh test installs it)"
	run "$REPO_DIR/tests/sdk-files/run" "$@"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 7 ]
}
