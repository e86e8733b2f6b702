# The container image (Dockerfile) on a real engine: `docker run -i` with the engine's socket
# bound in is a working MCP server whose sandboxes are sibling containers, driven by the
# official MCP SDK client (tests/mcp-check, tests/sdk-files); nothing of it is left on the
# engine after it exits or is killed; no sandbox can reach the engine.
#
# No registry answers here: the image is built from the Dockerfile's `prebuilt` target (the
# server binary under test, packed into the runtime stage) on a base that test-image.sh
# imports from a debootstrap root under the Dockerfile's base name when the engine lacks it.
# The full multi-stage build (`make image`) is the same runtime stage fed by the build stage.
# The sandboxes use the test image (backends/docker/test-image.sh).
# suite: uses docker
load lib/helpers
load lib/inspector
load lib/image
bats_require_minimum_version 1.5.0

SBX_IMAGE=sandbox-mcp-test:latest
BASE=debian:bookworm-slim

setup_file() {
	export DK_ENV="$BATS_FILE_TMPDIR/engine.env" IMG="sandbox-mcp-imagetest:$$"
	local out ctx bin
	if ! out=$("$TESTS_DIR/lib/docker-engine.sh" up "$DK_ENV" 2>&1); then
		export IMG_SKIP="no Docker engine here: $out"
		return 0
	fi
	# shellcheck disable=SC1090
	. "$DK_ENV"
	export DOCKER_HOST OWN_DIR="${OWN_DIR:-}"
	export DK_SOCK=${DOCKER_HOST#unix://}
	if ! out=$("$REPO_DIR/backends/docker/test-image.sh" "$SBX_IMAGE" 2>&1) ||
		! out=$("$REPO_DIR/backends/docker/test-image.sh" "$BASE" libjansson4,libseccomp2,libbsd0,libcurl4,ca-certificates 2>&1); then
		export IMG_SKIP="the test images could not be built: $out"
		return 0
	fi
	# The binary under test, unless it needs a sanitizer's runtime, which the image has not.
	bin=$SANDBOX_MCP
	if ldd "$bin" | grep -q 'libasan\|libubsan'; then
		# A plain build of the same source beside it (SANITIZE may be in the environment).
		env -u SANITIZE make -C "$REPO_DIR" -s -j2 SANITIZE= BUILD="$BATS_FILE_TMPDIR/plain" >/dev/null
		bin=$BATS_FILE_TMPDIR/plain/sandbox-mcp
	fi
	ctx="$BATS_FILE_TMPDIR/context"
	mkdir -p "$ctx/build"
	cp "$REPO_DIR/Dockerfile" "$ctx/"
	cp "$bin" "$ctx/build/sandbox-mcp"
	if ! out=$(docker build -q --target prebuilt -t "$IMG" "$ctx" 2>&1); then
		export IMG_SKIP="the image could not be built: $out"
		return 0
	fi
	# The server's command, as a host runs it; each run's container id lands in CIDS.
	export CIDS="$BATS_FILE_TMPDIR/cids" SERVER="$BATS_FILE_TMPDIR/server"
	mkdir -p "$CIDS"
	cat >"$SERVER" <<SH
#!/bin/sh
# DOCKER_ARGS: more of docker run's options (split on blanks). The engine is named here: a
# host may start this with an environment of its own (the Inspector passes on few variables).
export DOCKER_HOST="$DOCKER_HOST"
exec docker run -i --rm --cidfile "$CIDS/\$(date +%s%N).\$\$" -v "$DK_SOCK:/var/run/docker.sock" \${DOCKER_ARGS:-} \
	"$IMG" --backend docker --image "$SBX_IMAGE" "\$@"
SH
	chmod +x "$SERVER"
}

teardown_file() {
	[ -n "${IMG:-}" ] && docker image rm -f "$IMG" >/dev/null 2>&1
	[ -n "${DK_ENV:-}" ] && [ -f "$DK_ENV" ] && "$TESTS_DIR/lib/docker-engine.sh" down "$DK_ENV"
	return 0
}

setup() {
	common_setup
	[ -z "${IMG_SKIP:-}" ] || skip_or_fail "$IMG_SKIP"
	rm -f "$CIDS"/*
}

# What the servers of this test (their containers, by id) left on the engine: containers and
# volumes labelled with their container.
left_on_engine() {
	local f id
	for f in "$CIDS"/*; do
		[ -s "$f" ] || continue
		id=$(cat "$f")
		docker ps -aq --filter "label=sandbox-mcp.container=$id"
		docker volume ls -q --filter "label=sandbox-mcp.container=$id"
	done
}

# The servers' containers still there.
servers_left() {
	local f
	for f in "$CIDS"/*; do
		[ -s "$f" ] && docker ps -aq --no-trunc --filter "id=$(cat "$f")"
	done
	return 0
}

nothing_left() {
	[ -z "$(left_on_engine)" ] && [ -z "$(servers_left)" ]
}

@test "image: mcp-check (official SDK client) passes every check against docker run -i, background processes and sessions included; nothing is left on the engine" {
	command -v node >/dev/null && command -v npm >/dev/null || skip_or_fail "node and npm are needed"
	run env MCP_CHECK_SECRET=leak-me "$MCP_CHECK" "$SERVER"
	printf '%s\n' "$output"
	[ "$status" -ne 2 ] || skip_or_fail "npm could not install the MCP SDK"
	[ "$status" -eq 0 ]
	[[ "$output" =~ (^|$'\n')([0-9]+)\ passed,\ 0\ failed$ ]]
	[ "${BASH_REMATCH[2]}" -ge 15 ]
	[[ "$output" == *"ok   background_process"* ]]
	[[ "$output" == *"ok   python_session"* ]]
	[ -n "$(ls "$CIDS")" ]
	eventually 20 nothing_left
}

@test "image: the MCP Inspector CLI lists the tools and runs a call through docker run -i, in each protocol era" {
	inspector_cli
	local era
	for era in legacy auto modern; do
		SANDBOX_MCP="$SERVER" era_check "$era"
	done
	# The last era's requests named 2026-07-28, and every result said so back.
	jq -e -s 'map(select(.result != null)) | length >= 4 and all(.result.resultType == "complete")' "$WIRE.out" >/dev/null
	eventually 20 nothing_left
}

@test "image: files in and out and resources, from the official SDK client (tests/sdk-files)" {
	sdk_files "$SERVER"
	eventually 20 nothing_left
}

@test "image: --check from the image says the docker backend works, with its sandboxes apart" {
	run "$SERVER" --check </dev/null
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"docker   ok"* ]]
	eventually 20 nothing_left
}

# The engine's socket is the keys to the host: a sandbox finds no socket, no bind of the
# server's, and no network to reach the engine over TCP (as Docker Desktop's 192.168.65.7:2375
# was, CVE-2025-9074).
@test "image: a sandbox of the containerised server cannot reach the engine: no socket, no route" {
	local code
	code=$(cat <<'PY'
import os, socket
print("sockets", [os.path.join(d, f) for d, _, fs in os.walk("/") if not d.startswith(("/proc", "/sys"))
      for f in fs if os.path.exists(os.path.join(d, f)) and __import__("stat").S_ISSOCK(os.lstat(os.path.join(d, f)).st_mode)])
print("docker.sock", [p for p in ("/var/run/docker.sock", "/run/docker.sock") if os.path.lexists(p)])
print("routes", open("/proc/net/route").read().count("\n") - 1)
print("ifaces", sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [])
for host, port in (("172.17.0.1", 2375), ("192.168.65.7", 2375), ("host.docker.internal", 2375)):
    try:
        socket.create_connection((host, port), timeout=2)
        print("reached", host)
    except OSError as e:
        print("unreachable", host, type(e).__name__)
PY
)
	SANDBOX_MCP="$SERVER" mcp_session <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_python "$(jq -cn --arg s "$code" '{script: $s}')")")"
	res 1
	printf '%s' "$result" | jq -r .structuredContent.stdout
	sc '.exit_code == 0'
	sc '.stdout | test("^sockets \\[\\]\n")'
	sc '.stdout | test("\ndocker.sock \\[\\]\n")'
	sc '.stdout | test("\nroutes 0\n")'
	sc '[.stdout | scan("unreachable")] | length == 3'
	sc '.stdout | test("reached") | not'
	eventually 20 nothing_left
}

@test "image: docker kill of the server's container: its sandbox stops; the next server removes what it left" {
	local fifo="$BATS_TEST_TMPDIR/in" out="$BATS_TEST_TMPDIR/out" pid cid
	mkfifo "$fifo"
	"$SERVER" <"$fifo" >"$out" 2>"$SERVER_LOG" &
	pid=$!
	exec 7>"$fifo"
	printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands '{"code":"echo x > f; echo made"}')" >&7
	answered() { grep -q '"id":1' "$out"; }
	eventually 60 answered
	grep '"id":1' "$out" | jq -e '.result.structuredContent.stdout == "made\n"' >/dev/null
	cid=$(cat "$CIDS"/*)
	[ -n "$(docker ps -aq --filter "label=sandbox-mcp.container=$cid")" ]
	docker kill "$cid" >/dev/null
	exec 7>&-
	wait "$pid" || true
	# Its sandbox's agent read the end of its stdin and ended.
	none_running() { [ -z "$(docker ps -q --filter "label=sandbox-mcp.container=$cid")" ]; }
	eventually 20 none_running
	[ -n "$(left_on_engine)" ]
	run "$SERVER" --check </dev/null
	[ "$status" -eq 0 ]
	eventually 20 nothing_left
}

# one_call CODE [SERVER ARGS...]: one execute_bash_commands call through the image; $result.
one_call() {
	local code=$1
	shift
	SANDBOX_MCP="$SERVER" mcp_session "$@" <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")")"
	res 1
}

@test "image: --workspace on a named volume of the docker run line keeps its files across a restart of the server's container" {
	local vol="sbx-imagetest-ws-$$-$BATS_TEST_NUMBER"
	DOCKER_ARGS="-v $vol:/work" one_call 'echo kept > notes.txt; ls' --workspace /work
	sc '.exit_code == 0 and .stdout == "notes.txt\n"'
	eventually 20 nothing_left
	DOCKER_ARGS="-v $vol:/work" one_call 'cat notes.txt' --workspace /work
	docker volume rm "$vol" >/dev/null
	sc '.exit_code == 0 and .stdout == "kept\n"'
	eventually 20 nothing_left
}

@test "image: --workspace and --mount on binds of the docker run line are the engine's host's folders" {
	mkdir -p "$BATS_TEST_TMPDIR/ws" "$BATS_TEST_TMPDIR/data"
	echo input >"$BATS_TEST_TMPDIR/data/in.txt"
	DOCKER_ARGS="-v $BATS_TEST_TMPDIR/ws:/work -v $BATS_TEST_TMPDIR/data:/data" \
		one_call 'cat /mnt/data/in.txt; echo out > result.txt; echo no > /mnt/data/x 2>&1' --workspace /work --mount /data:/mnt/data
	sc '.stdout == "input\n" and (.stderr | test("Read-only file system"))'
	[ "$(cat "$BATS_TEST_TMPDIR/ws/result.txt")" = out ]
	[ ! -e "$BATS_TEST_TMPDIR/data/x" ]
	eventually 20 nothing_left
	# A --workspace not made yet, in a bind: the start-up check takes it, the first call makes it.
	DOCKER_ARGS="-v $BATS_TEST_TMPDIR/ws:/work" one_call 'echo new > f' --workspace /work/new
	sc '.exit_code == 0'
	[ "$(cat "$BATS_TEST_TMPDIR/ws/new/f")" = new ]
	eventually 20 nothing_left
}

@test "image: a --workspace the engine cannot see, or a --mount that holds the engine's socket, is refused at start-up saying what to type" {
	refused_at_start --workspace /srv/ws
	[[ "$stderr" == "sandbox-mcp: --workspace /srv/ws is a folder of this server's own file system"* ]]
	[[ "$stderr" == *"docker run -v /path/on/the/host:/srv/ws (or -v VOLUME:/srv/ws) ... --workspace /srv/ws" ]]
	# auto, with no Daytona key, tries Docker first: the same.
	refused_at_start --backend auto --mount /srv:/mnt/x
	[[ "$stderr" == *"--mount /srv is a folder of this server's own file system"*"docker run -v /path/on/the/host:/srv"* ]]
	DOCKER_ARGS="-v $(dirname "$DK_SOCK"):/hostrun" refused_at_start --mount /hostrun:/mnt/x
	[[ "$stderr" == *"--mount /hostrun holds the container engine's socket"* ]]
	# --check says the same, as it says every start-up refusal.
	refused_at_start --check --workspace /srv/ws
	[[ "$stderr" == *"--workspace /srv/ws is a folder of this server's own file system"* ]]
}

# play_example FILE: the one server of a host configuration in examples/container/, started as
# the host would (its command is the docker CLI, its env block the CLI's environment), with
# this test's image in place of sandbox-mcp:latest and the sandboxes' test image: tools/list
# and one call. $output holds the session's.
play_example() {
	local f=$1 cmd
	local -a args env
	cmd=$(jq -r '(.mcpServers // .servers)[] | .command' "$f")
	[ "$(basename "$cmd")" = docker ]
	mapfile -t args < <(jq -r '(.mcpServers // .servers)[] | .args[]' "$f")
	mapfile -t env < <(jq -r '(.mcpServers // .servers)[] | .env // {} | to_entries[] | "\(.key)=\(.value)"' "$f")
	local i new=()
	for ((i = 0; i < ${#args[@]}; i++)); do
		case ${args[i]} in
		sandbox-mcp:latest) new+=(--cidfile "$CIDS/$(date +%s%N)" -e "SANDBOX_IMAGE=$SBX_IMAGE" "$IMG") ;;
		/var/run/docker.sock:/var/run/docker.sock) new+=("$DK_SOCK:/var/run/docker.sock") ;;
		sandbox-mcp-workspace:*) new+=("$EX_VOL:${args[i]#*:}") ;;
		*) new+=("${args[i]}") ;;
		esac
	done
	run env "${env[@]}" python3 "$SESSION" --stderr "$SERVER_LOG" --timeout 120 -- docker "${new[@]}" <<<"$(printf '%s\n' \
		"$INIT" "$INITIALIZED" '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' \
		"$(call_json 3 execute_bash_commands '{"code":"echo from $(hostname); ls -d /workspace"}')")"
	[ "$status" -eq 0 ] || { echo "$f: session failed ($status): $output" >&2; tail -5 "$SERVER_LOG" >&2; return 1; }
}

@test "examples: the container configurations (Claude Desktop on macOS and Windows, Cursor, VS Code, Claude Code) start the image" {
	local f n=0
	export EX_VOL="sbx-imagetest-ex-$$"
	for f in "$REPO_DIR"/examples/container/*.json; do
		n=$((n + 1))
		play_example "$f"
		# SANDBOX_TIMEOUT=120 of the env block reached the server: tools/list describes it.
		response 2 | jq -e '.result.tools[] | select(.name == "execute_python") | .description | test("Limits: 120 s per call")' >/dev/null
		res 3
		sc '.exit_code == 0 and .stdout == "from sandbox\n/workspace\n" and .backend == "docker"'
	done
	docker volume rm "$EX_VOL" >/dev/null 2>&1 || true
	[ "$n" -eq 4 ]
	jq -e '.mcpServers.sandbox.command == "/usr/local/bin/docker"' "$REPO_DIR/examples/container/claude_desktop_config.macos.json"
	jq -e '.servers.sandbox.type == "stdio"' "$REPO_DIR/examples/container/vscode-mcp.json"
	run sh "$REPO_DIR/examples/container/claude-code.sh"
	[ "$output" = "claude mcp add --transport stdio --scope user sandbox -- docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock sandbox-mcp:latest" ]
	eventually 20 nothing_left
}

@test "image: a folder named through a link or .. that leads out of the container's binds is refused at start-up, not bound from the engine's host" {
	mkdir -p "$BATS_TEST_TMPDIR/data"
	ln -s /etc "$BATS_TEST_TMPDIR/data/link"
	DOCKER_ARGS="-v $BATS_TEST_TMPDIR/data:/data" refused_at_start --mount /data/link:/mnt/x
	[[ "$stderr" == *"--mount /etc is a folder of this server's own file system"* ]]
	mkdir -p "$BATS_TEST_TMPDIR/ws"
	DOCKER_ARGS="-v $BATS_TEST_TMPDIR/data:/data" refused_at_start --workspace /data/../ws
	[[ "$stderr" == *"--workspace /data/../ws is a folder of this server's own file system"* ]]
}
