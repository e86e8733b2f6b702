#!/bin/sh
# Builds the Docker backend's test image, sandbox-mcp-test:latest (Debian bookworm minbase with
# python3, pip and bash), without any registry: debootstrap fetches Debian packages, and the
# root folder is imported into the engine as an image. The root folder's tarball is cached
# (default /var/cache/sandbox-mcp-test-image, else $TMPDIR) so later runs only import it.
#
# Usage: backends/docker/test-image.sh [IMAGE [PACKAGES]]   (default sandbox-mcp-test:latest, with
#        python3,python3-pip). With PACKAGES (comma-separated, "" for none), the root gets those
#        instead: `test-image.sh debian:bookworm-slim libjansson4,...` stands in for a base image
#        that no registry can give here (the Dockerfile's, for tests/image.bats).
# Environment: DOCKER_HOST (unix:// socket of the engine), SANDBOX_TEST_IMAGE_CACHE (cache
# folder), DEBIAN_MIRROR (default http://deb.debian.org/debian). Needs root, debootstrap and
# the docker CLI (Debian's docker.io).
set -eu
image=${1:-sandbox-mcp-test:latest}
include=${2-python3,python3-pip}
case $include in *[!a-z0-9.,+-]*) echo "test-image.sh: bad package list: $include" >&2; exit 2 ;; esac
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${SANDBOX_TEST_IMAGE_CACHE:-/var/cache/sandbox-mcp-test-image}
# Bump when the recipe changes, so a stale cached tarball is not reused.
recipe=1

if docker image inspect "$image" >/dev/null 2>&1; then
	exit 0
fi
if ! mkdir -p "$cache" 2>/dev/null || ! [ -w "$cache" ]; then
	cache=${TMPDIR:-/tmp}/sandbox-mcp-test-image
	mkdir -p "$cache"
fi
if [ "$include" = python3,python3-pip ]; then
	tarball=$cache/bookworm-python3-r$recipe.tar
else
	tarball=$cache/bookworm-$(printf '%s' "$include" | cksum | cut -d' ' -f1)-r$recipe.tar
fi
# One build at a time (test files that run at once may all ask for the image): the others wait,
# then find the image there.
exec 9>"$cache/.lock"
flock 9
if docker image inspect "$image" >/dev/null 2>&1; then
	exit 0
fi
if ! [ -s "$tarball" ]; then
	command -v debootstrap >/dev/null || { echo "test-image.sh: debootstrap is needed (apt-get install debootstrap)" >&2; exit 1; }
	root=$(mktemp -d "$cache/root.XXXXXX")
	trap 'rm -rf "$root"' EXIT
	echo "test-image.sh: debootstrap bookworm into $root (a few minutes, once)" >&2
	debootstrap --variant=minbase ${include:+--include="$include"} bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
		{ tail -20 "$cache/debootstrap.log" >&2; exit 1; }
	# Nothing of the build host's apt state or caches in the image.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
	tar -C "$root" --numeric-owner -cf "$tarball.part" .
	mv "$tarball.part" "$tarball"
fi
docker import -c 'CMD ["/bin/bash"]' "$tarball" "$image" >/dev/null
echo "test-image.sh: imported $image from $tarball" >&2
