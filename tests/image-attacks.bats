# Attacks on the containerised server (Dockerfile, `docker run -i` with the engine's socket bound
# in) and on what it binds into its sandboxes: the engine's socket is the keys to the host, and
# no sandbox may reach it, nor a host folder the user did not name. Each test is one attack
# that must fail. The image is built as tests/image.bats builds it (the `prebuilt` target; its
# layers are cached, so this is quick after image.bats).
# suite: uses docker
load lib/helpers
load lib/image
bats_require_minimum_version 1.5.0

SBX_IMAGE=sandbox-mcp-test:latest
BASE=debian:bookworm-slim

setup_file() {
	export DK_ENV="$BATS_FILE_TMPDIR/engine.env" IMG="sandbox-mcp-imageattack:$$"
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
	# The server's command; docker run's further options come from the file $RUN_ARGS, one a
	# line (names with blanks stay whole). Each run's container id lands in CIDS.
	export CIDS="$BATS_FILE_TMPDIR/cids" SERVER="$BATS_FILE_TMPDIR/server"
	mkdir -p "$CIDS"
	cat >"$SERVER" <<SH
#!/bin/bash
extra=()
[ -n "\${RUN_ARGS:-}" ] && mapfile -t extra <"\$RUN_ARGS"
exec docker run -i --rm --cidfile "$CIDS/\$(date +%s%N).\$\$" -v "$DK_SOCK:/var/run/docker.sock" "\${extra[@]}" \
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
	export RUN_ARGS="$BATS_TEST_TMPDIR/run-args"
	: >"$RUN_ARGS"
}

teardown() {
	local v
	for v in ${VOLS:-}; do docker volume rm -f "$v" >/dev/null 2>&1 || true; done
	return 0
}

# What the servers of this test left on the engine, and their containers still there.
nothing_left() {
	local f id
	for f in "$CIDS"/*; do
		[ -s "$f" ] || continue
		id=$(cat "$f")
		[ -z "$(docker ps -aq --filter "label=sandbox-mcp.container=$id")" ] || return 1
		[ -z "$(docker volume ls -q --filter "label=sandbox-mcp.container=$id")" ] || return 1
		[ -z "$(docker ps -aq --no-trunc --filter "id=$id")" ] || return 1
	done
	return 0
}

# What nothing_left found left, on stderr.
say_left() {
	local f id
	for f in "$CIDS"/*; do
		[ -s "$f" ] || continue
		id=$(cat "$f")
		echo "left of server ${id:0:12}: containers $(docker ps -aq --filter "label=sandbox-mcp.container=$id" | tr '\n' ' ')" \
			"volumes $(docker volume ls -q --filter "label=sandbox-mcp.container=$id" | tr '\n' ' ')" \
			"itself $(docker ps -aq --filter "id=$id")" >&2
	done
	tail -5 "$SERVER_LOG" >&2
}

# all_removed: what the servers of the test made is gone, removed at their shutdown. Where an
# engine too slow for the shutdown's 2 s bound, or one that refused a removal, kept a server
# from removing it all (the server says so), a later server's start-up removes the rest, as a
# --check run does (doc/backends.md): that too is checked, never skipped.
all_removed() {
	eventually 20 nothing_left && return 0
	say_left
	grep -q "did not stop in time; exiting anyway\|could not remove" "$SERVER_LOG" || return 1
	"$SERVER" --check </dev/null >/dev/null 2>&1
	eventually 20 nothing_left
}

# run_arg ARG...: more options of docker run for the server's container.
run_arg() { printf '%s\n' "$@" >>"$RUN_ARGS"; }

# one_call CODE [SERVER ARGS...]: one execute_bash_commands call through the image; $result.
one_call() {
	local code=$1
	shift
	SANDBOX_MCP="$SERVER" mcp_session "$@" <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")")"
	res 1
}

# The server started on a fifo (fd 7 writes to it, $OUT collects): for calls one at a time.
start_server() {
	local fifo="$BATS_TEST_TMPDIR/in"
	OUT="$BATS_TEST_TMPDIR/out"
	mkfifo "$fifo"
	"$SERVER" "$@" <"$fifo" >"$OUT" 2>"$SERVER_LOG" &
	SERVER_PID=$!
	exec 7>"$fifo"
	printf '%s\n%s\n' "$INIT" "$INITIALIZED" >&7
}

# call ID CODE: one execute_bash_commands call on the started server; $result once answered.
call() {
	local id=$1
	printf '%s\n' "$(call_json "$id" execute_bash_commands "$(jq -cn --arg c "$2" '{code: $c}')")" >&7
	answered() { grep -q "\"id\":$id[,}]" "$OUT"; }
	eventually 90 answered
	result=$(grep "\"id\":$id[,}]" "$OUT" | jq -c .result)
}

stop_server() {
	exec 7>&-
	wait "$SERVER_PID" || true
}

# The sandbox containers now running of the first server's container this test started.
sandboxes_of() {
	local first
	first=$(find "$CIDS" -type f | sort | head -1)
	docker ps -q --filter "label=sandbox-mcp.container=$(cat "$first")"
}

# A bind of the server's container that lies below the folder named hides, in the server's
# view, what the engine's host has there: the server's look for the engine's socket sees the
# stand-in, while the sandbox gets the engine's host's folder, socket and all.
@test "attack: a nested bind that hides the engine's socket from the server does not smuggle the socket into a sandbox" {
	local decoy="$BATS_TEST_TMPDIR/decoy"
	: >"$decoy"
	run_arg -v "$(dirname "$DK_SOCK"):/data" -v "$decoy:/data/$(basename "$DK_SOCK")"
	refused_at_start --mount /data:/mnt/x
	[[ "$stderr" == *"--mount /data"*"mount of its own below"* ]]
}

# The workspace and a --mount that are the same host folders through two binds of the server's
# container: the sandbox's code re-points the --mount's host path (a name in its workspace) at
# any host folder, which the engine follows when it makes the next sandbox.
@test "attack: a --mount whose host folder lies in the workspace's, through another bind, is refused at start-up before the code can re-point it" {
	local ws="$BATS_TEST_TMPDIR/ws" secret="$BATS_TEST_TMPDIR/secret"
	mkdir -p "$ws/data" "$ws/.sandbox" "$secret"
	echo the-host-secret >"$secret/secret.txt"
	run_arg -v "$ws:/work" -v "$ws/data:/data"
	refused_at_start --workspace /work --mount /data:/mnt/data
	[[ "$stderr" == *"--mount /data lies in the folder of --workspace /work"* ]]
	[ -d "$ws/data" ] && [ ! -L "$ws/data" ]
}

# A named volume whose folder is the engine's socket's (the local driver binds any host folder)
# is, to the server, a folder that holds the socket.
@test "attack: a --mount on a volume of the docker run line that binds the socket's folder is refused" {
	local vol="sbx-imageattack-sock-$$-$BATS_TEST_NUMBER"
	VOLS=$vol
	docker volume create --opt type=none --opt o=bind --opt device="$(dirname "$DK_SOCK")" "$vol" >/dev/null
	run_arg -v "$vol:/data"
	refused_at_start --mount /data:/mnt/x
	[[ "$stderr" == *"--mount /data holds the container engine's socket"* ]]
}

# A folder below a named volume's top: the engine mounts a volume whole, so the sandbox would
# get more than was named; it is refused, not widened.
@test "attack: a --mount below a named volume's top is refused, not widened to the whole volume" {
	local vol="sbx-imageattack-sub-$$-$BATS_TEST_NUMBER"
	VOLS=$vol
	docker volume create "$vol" >/dev/null
	docker run --rm --entrypoint mkdir -v "$vol:/v" "$IMG" /v/sub
	run_arg -v "$vol:/data"
	refused_at_start --mount /data/sub:/mnt/x
	[[ "$stderr" == *"--mount /data/sub is a folder of this server's own file system"* ]]
}

# A bind of the whole host: the folder named below it is bound from the same host path, and
# the bind itself (which holds the socket and has the host's mounts below it) is refused.
@test "attack: under a bind of the host's /, the sandbox gets exactly the folder named; the bind itself is refused" {
	local data="$BATS_TEST_TMPDIR/d a t a"
	mkdir -p "$data" && echo inside >"$data/in.txt"
	run_arg -v "/:/host:ro"
	one_call 'cat "/mnt/x/in.txt"; ls /mnt/x' --mount "/host$data:/mnt/x"
	sc '.exit_code == 0 and .stdout == "inside\nin.txt\n"'
	all_removed
	refused_at_start --mount /host:/mnt/x
	[[ "$stderr" == *"--mount /host "* ]]
}

# A mount point with blanks, named on the docker run line and to the server: the engine's
# path is the host's folder with its blanks, not another folder.
@test "attack: a bind whose names hold blanks maps to that very folder of the engine's host" {
	local data="$BATS_TEST_TMPDIR/my data"
	mkdir -p "$data" "$BATS_TEST_TMPDIR/my" && echo right >"$data/f" && echo wrong >"$BATS_TEST_TMPDIR/my/f"
	run_arg -v "$data:/in side"
	one_call 'cat /mnt/x/f' --mount "/in side:/mnt/x"
	sc '.exit_code == 0 and .stdout == "right\n"'
	all_removed
}

# A rw --mount that holds another --mount's folder: the code re-points the inner one.
@test "attack: a --mount inside a writable --mount, through another bind, is refused" {
	local outer="$BATS_TEST_TMPDIR/outer"
	mkdir -p "$outer/inner"
	run_arg -v "$outer:/o" -v "$outer/inner:/i"
	refused_at_start --mount /o:/mnt/o:rw --mount /i:/mnt/i
	[[ "$stderr" == *"--mount /i lies in the folder of --mount /o"* ]]
}

# The start-up sweep of a second server (on the host or in a container) leaves a live
# containerised server's sandbox alone.
@test "attack: another server's start-up sweep does not remove a live containerised server's sandbox" {
	start_server
	call 1 'echo one'
	printf '%s' "$result" | jq -e '.structuredContent.stdout == "one\n"' >/dev/null
	local sb id
	sb=$(printf '%s' "$result" | jq -r .structuredContent.sandbox_id)
	id=$(sandboxes_of)
	[ -n "$id" ]
	run "$SERVER" --check </dev/null
	[ "$status" -eq 0 ]
	run "$SANDBOX_MCP" --backend docker --image "$SBX_IMAGE" --check </dev/null
	[ "$status" -eq 0 ]
	[ "$(sandboxes_of)" = "$id" ]
	call 2 'echo two'
	printf '%s' "$result" | jq -e --arg sb "$sb" '.structuredContent.stdout == "two\n" and .structuredContent.sandbox_id == $sb' >/dev/null
	stop_server
	all_removed
}

# --gpu on the local backend, on a stand-in NVIDIA driver's /dev (tests/lib/fakegpu.sh, root
# only): the sandbox gets the driver's character nodes and folders alone; a /dev/nvidiaN or
# /dev/nvidia-modeset that is a link (to a disk's node) is not followed, and nothing else of
# /dev comes along; the sandbox can neither make a node nor change one's mode.
@test "attack: --gpu on the local backend binds the driver's nodes alone, never a link's target or another device" {
	[ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null || skip_or_fail "needs root and unshare"
	local code
	code='cd /dev; for f in * */*; do if [ ! -L "$f" ] && { [ -c "$f" ] || [ -b "$f" ]; }; then printf "%s " "$f"; fi; done; echo
ls -d nvidia1 nvidia-modeset sda 2>&1 | grep -c "No such"
mknod /dev/shm/x b 8 0 2>/dev/null || echo no-mknod
chmod 666 nvidia-caps/nvidia-cap1 2>/dev/null || echo no-chmod'
	SANDBOX_MCP="$TESTS_DIR/lib/fakegpu.sh" mcp_session "$SANDBOX_MCP" --backend local --gpu <<<"$(printf '%s\n%s\n%s\n' \
		"$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands "$(jq -cn --arg c "$code" '{code: $c}')")")"
	res 1
	sc '.exit_code == 0'
	sc '.stdout == "full null nvidia-uvm nvidia0 nvidiactl random urandom zero dri/renderD128 nvidia-caps/nvidia-cap1 \n3\nno-mknod\nno-chmod\n"'
}

# The one archive the server uploads goes into a volume of its own, new for each server, which
# the sandboxes mount read-only: the code cannot plant a link or file where the next server
# (or the next sandbox) uploads, nor change the agent.
@test "attack: the sandbox cannot write where the server uploads the agent, nor change the agent" {
	one_call 'cd /.sandbox-mcp; ln -s / l 2>&1 | grep -c "Read-only"; rm -f sandbox-agent 2>&1 | grep -c "Read-only"; echo x >>sandbox-agent 2>/dev/null || echo no-write; stat -c "%a %u %U" sandbox-agent; ls'
	sc '.exit_code == 0'
	sc '.stdout == "1\n1\nno-write\n555 0 root\nsandbox-agent\n"'
	all_removed
}

# A server on the host whose folders the engine does not see (a mount namespace of its own,
# tests/lib/apart.sh) has no container's binds to map: a --mount is refused, never bound by the
# host path that happens to match.
@test "attack: a host server apart from the engine's file system binds no --mount by a path the engine would resolve" {
	[ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null || skip_or_fail "needs root and unshare"
	local data="$BATS_TEST_TMPDIR/data"
	mkdir -p "$data" && echo host-side >"$data/f"
	SANDBOX_MCP="$TESTS_DIR/lib/apart.sh" mcp_session "$SANDBOX_MCP" --backend docker --image "$SBX_IMAGE" --mount "$data:/mnt/x" \
		<<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" "$(call_json 1 execute_bash_commands '{"code":"cat /mnt/x/f"}')")"
	res 1
	sc '.exit_code == 1 and .stdout == ""'
	sc '.stderr | test("--mount .*data is a folder of this server.s own file system")'
}

# The engine's socket itself, bound into the server's container, named as a folder.
@test "attack: the engine's socket named as --mount, --wheelhouse or --workspace is refused at start-up" {
	local a
	for a in "--mount=/var/run/docker.sock:/mnt/x" "--wheelhouse=/var/run/docker.sock" "--workspace=/var/run/docker.sock"; do
		run "$SERVER" "$a" </dev/null
		[ "$status" -eq 2 ]
		[[ "$output" == *"/var/run/docker.sock"*"ot a "*"irectory"* || "$output" == *"/var/run/docker.sock is not a folder"* ]]
	done
	all_removed
}

# Two containerised servers on one named volume as --workspace: the second is refused, not
# given the first one's live workspace.
@test "attack: a second containerised server on a live server's workspace volume is refused" {
	local vol="sbx-imageattack-ws-$$-$BATS_TEST_NUMBER"
	VOLS=$vol
	docker volume create "$vol" >/dev/null
	run_arg -v "$vol:/work"
	start_server --workspace /work
	call 1 'echo first > mine; echo ok'
	printf '%s' "$result" | jq -e '.structuredContent.stdout == "ok\n"' >/dev/null
	one_call 'cat mine; echo second > mine' --workspace /work
	sc '.exit_code == 1 and .stdout == ""'
	sc '.stderr | test("another sandbox-mcp server")'
	call 2 'cat mine'
	printf '%s' "$result" | jq -e '.structuredContent.stdout == "first\n"' >/dev/null
	stop_server
	all_removed
}

# The install step runs what the package index serves: it sees no --mount folder, and, as the
# server's proxy cannot reach it here, no network at all (the engine's would hold the engine's
# own address). Its container is inspected as the engine makes it.
@test "attack: the containerised server's install step has no network and sees no --mount folder" {
	mkdir -p "$BATS_TEST_TMPDIR/data"
	run_arg -v "$BATS_TEST_TMPDIR/data:/data"
	local seen="$BATS_TEST_TMPDIR/seen"
	: >"$seen"
	# The watcher holds none of bats' descriptors, and its docker events is killed by its pid.
	{
		docker events --filter type=container --filter event=create --filter label=sandbox-mcp.role=install \
			--format '{{.ID}}' &
		echo $! >"$BATS_TEST_TMPDIR/events.pid"
		wait
	} 3>&- 2>/dev/null | while read -r c; do
		docker inspect "$c" --format '{{.HostConfig.NetworkMode}} {{index .Config.Labels "sandbox-mcp.role"}}{{range .Mounts}} {{.Destination}}{{end}}' >>"$seen" 2>&1
	done 3>&- &
	start_server --mount /data:/mnt/data --index-url http://192.0.2.1/simple
	printf '%s\n' "$(call_json 1 execute_python '{"script":"print(1)","requirements":["requests"]}')" >&7
	answered() { grep -q '"id":1[,}]' "$OUT"; }
	eventually 90 answered
	stop_server
	kill "$(cat "$BATS_TEST_TMPDIR/events.pid")" 2>/dev/null || true
	wait
	cat "$seen"
	grep -q 'gives the install step no network' "$OUT"
	[[ "$(head -1 "$seen")" == "none install "* ]]
	[[ "$(head -1 "$seen")" == *" /workspace"* && "$(head -1 "$seen")" != *"/mnt/data"* ]]
	all_removed
}
