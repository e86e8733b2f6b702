# For bats files that run cases on the Docker backend too: load after lib/helpers.
#   docker_setup_file / docker_teardown_file   in setup_file / teardown_file
#   with_backend local|docker                  sets SANDBOX_BACKEND (and the image) for a case;
#                                              docker fails under CI (skips elsewhere) when no
#                                              engine could be had, with the reason
# An engine that answers is used (DOCKER_HOST, /var/run/docker.sock); else, as root, Debian's
# dockerd is started in a temp folder (lib/docker-engine.sh) and the test image is built
# without a registry (backends/docker/test-image.sh, cached).

TEST_IMAGE=sandbox-mcp-test:latest

docker_setup_file() {
	export DK_ENV="$BATS_FILE_TMPDIR/engine.env"
	local out
	if ! out=$("$TESTS_DIR/lib/docker-engine.sh" up "$DK_ENV" 2>&1); then
		export DK_SKIP="no Docker engine here: $out"
		return 0
	fi
	# shellcheck disable=SC1090
	. "$DK_ENV"
	export DOCKER_HOST OWN_DIR="${OWN_DIR:-}"
	if ! out=$("$REPO_DIR/backends/docker/test-image.sh" "$TEST_IMAGE" 2>&1); then
		export DK_SKIP="the test image could not be built: $out"
	fi
	return 0
}

docker_teardown_file() {
	[ -n "${DK_ENV:-}" ] && [ -f "$DK_ENV" ] && "$TESTS_DIR/lib/docker-engine.sh" down "$DK_ENV"
	return 0
}

with_backend() {
	if [ "$1" = daytona ]; then
		with_daytona
		return
	fi
	if [ "$1" = docker ]; then
		[ -z "${DK_SKIP:-}" ] || skip_or_fail "$DK_SKIP"
		export SANDBOX_BACKEND=docker SANDBOX_IMAGE="$TEST_IMAGE"
	else
		export SANDBOX_BACKEND=local
		unset SANDBOX_IMAGE
	fi
}
