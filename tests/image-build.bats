# The Dockerfile's full multi-stage build, offline: the build stage compiles the server from
# the sources (its compiler and -dev packages carried by a base that test-image.sh imports from
# a debootstrap root, under a name of its own, since no registry answers here), then the
# `runtime` image is an MCP server on the Docker backend, and the `local` image runs the local
# backend inside its container: refused under the engine's defaults, naming the options to
# add, and working with those two options alone.
# suite: uses docker
load lib/helpers
bats_require_minimum_version 1.5.0

SBX_IMAGE=sandbox-mcp-test:latest
BUILD_BASE=sandbox-mcp-buildbase:test
BUILD_PACKAGES=gcc,libc6-dev,make,pkg-config,libjansson-dev,libseccomp-dev,libcurl4-openssl-dev,libbsd-dev,libjansson4,libseccomp2,libbsd0,libcurl4,ca-certificates,python3

setup_file() {
	export DK_ENV="$BATS_FILE_TMPDIR/engine.env" TAG="$$"
	export IMG_RT="sandbox-mcp-buildtest:rt-$TAG" IMG_LOCAL="sandbox-mcp-buildtest:local-$TAG"
	local out ctx
	if ! out=$("$TESTS_DIR/lib/docker-engine.sh" up "$DK_ENV" 2>&1); then
		export IMG_SKIP="no Docker engine here: $out"
		return 0
	fi
	# shellcheck disable=SC1090
	. "$DK_ENV"
	export DOCKER_HOST OWN_DIR="${OWN_DIR:-}"
	export DK_SOCK=${DOCKER_HOST#unix://}
	if ! out=$("$REPO_DIR/backends/docker/test-image.sh" "$SBX_IMAGE" 2>&1) ||
		! out=$("$REPO_DIR/backends/docker/test-image.sh" "$BUILD_BASE" "$BUILD_PACKAGES" 2>&1); then
		export IMG_SKIP="the test images could not be built: $out"
		return 0
	fi
	# The context: the project's files (tracked, and new ones not ignored), as a clean clone has them.
	ctx="$BATS_FILE_TMPDIR/context"
	mkdir -p "$ctx"
	(cd "$REPO_DIR" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --no-recursion) | tar -C "$ctx" -xf -
	rm -rf "$ctx/build"
	if ! out=$(docker build -q --build-arg BASE="$BUILD_BASE" --target runtime -t "$IMG_RT" "$ctx" 2>&1) ||
		! out=$(docker build -q --build-arg BASE="$BUILD_BASE" --target local -t "$IMG_LOCAL" "$ctx" 2>&1); then
		export IMG_SKIP="the multi-stage build failed: $out"
		return 0
	fi
}

teardown_file() {
	[ -n "${IMG_RT:-}" ] && docker image rm -f "$IMG_RT" "$IMG_LOCAL" >/dev/null 2>&1
	[ -n "${DK_ENV:-}" ] && [ -f "$DK_ENV" ] && "$TESTS_DIR/lib/docker-engine.sh" down "$DK_ENV"
	return 0
}

setup() {
	common_setup
	[ -z "${IMG_SKIP:-}" ] || skip_or_fail "$IMG_SKIP"
}

# local_server FILE [DOCKER OPTIONS...]: FILE becomes a command that starts the local image
# with those options, as a host would.
local_server() {
	local f=$1
	shift
	printf '#!/bin/sh\nexec docker run -i --rm --label sandbox-mcp-buildtest=%s %s "%s" "$@"\n' "$TAG" "$*" "$IMG_LOCAL" >"$f"
	chmod +x "$f"
}

@test "image build: the multi-stage build compiled the server offline; the runtime image is an MCP server on the Docker backend" {
	# Compiled in the build stage: the context had no build/ folder to pack a binary from.
	[ ! -e "$BATS_FILE_TMPDIR/context/build" ]
	run docker run --rm --entrypoint /usr/local/bin/sandbox-mcp "$IMG_RT" --version
	[ "$status" -eq 0 ]
	[[ "$output" == "sandbox-mcp "* ]]
	printf '#!/bin/sh\nexec docker run -i --rm -v "%s:/var/run/docker.sock" "%s" --backend docker --image "%s" "$@"\n' \
		"$DK_SOCK" "$IMG_RT" "$SBX_IMAGE" >"$BATS_TEST_TMPDIR/server"
	chmod +x "$BATS_TEST_TMPDIR/server"
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_python '{"script":"import os; print(os.getuid(), 6 * 7)"}')")"
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .stdout == "65534 42\n" and .backend == "docker"'
}

@test "image build: the local image under the engine's defaults: refused at start-up and by --check, naming the options to add" {
	local_server "$BATS_TEST_TMPDIR/server"
	run "$BATS_TEST_TMPDIR/server" --check </dev/null
	printf '%s\n' "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"local    unavailable: cannot create user namespaces"*"in a container"*"--security-opt seccomp=unconfined --security-opt systempaths=unconfined"* ]]
	# seccomp alone: the masked /proc is named.
	local_server "$BATS_TEST_TMPDIR/server" --security-opt seccomp=unconfined
	run "$BATS_TEST_TMPDIR/server" --check </dev/null
	printf '%s\n' "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"a /proc of the sandbox's own cannot be mounted: the /proc here has paths masked"*"systempaths=unconfined"* ]]
	# And a server started so: the first call says why, as --check did.
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session <<<"$(printf '%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_bash_commands '{"code":"echo ran"}')")"
	jqe "$(response 1)" '(.result.isError == true and (.result.structuredContent.error | test("cannot be mounted.*systempaths=unconfined")))
		or (.error.message | test("systempaths=unconfined"))'
}

@test "image build: the local image with seccomp and systempaths unconfined runs calls in a user namespace of the container, isolated" {
	local_server "$BATS_TEST_TMPDIR/server" --security-opt seccomp=unconfined --security-opt systempaths=unconfined
	run "$BATS_TEST_TMPDIR/server" --check </dev/null
	printf '%s\n' "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"local    ok"* ]]
	local code
	code=$(cat <<'PY'
import os, socket
print("uid", os.getuid())
comms = [open("/proc/%s/comm" % p).read().strip() for p in os.listdir("/proc") if p.isdigit()]
print("server seen", "sandbox-mcp" in comms)
opened = []
for p, mode in (("/proc/kcore", "rb"), ("/proc/sysrq-trigger", "wb")):
    try:
        open(p, mode).close()
        opened.append(p)
    except OSError:
        pass
print("opened", opened)
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("net reached")
except OSError:
    print("net none")
open("kept.txt", "w").write("kept\n")
PY
)
	SANDBOX_MCP="$BATS_TEST_TMPDIR/server" mcp_session <<<"$(printf '%s\n%s\n%s\n%s\n' "$INIT" "$INITIALIZED" \
		"$(call_json 1 execute_python "$(jq -cn --arg s "$code" '{script: $s}')")" \
		"$(call_json 2 execute_bash_commands '{"code":"cat kept.txt; id -u"}')")"
	jqe "$(response 1)" '.result.structuredContent | .exit_code == 0 and .backend == "local"
		and (.stdout | test("^uid [1-9][0-9]*\nserver seen False\nopened \\[\\]\nnet none\n$"))'
	jqe "$(response 2)" '.result.structuredContent | .exit_code == 0 and (.stdout | startswith("kept\n"))'
}
