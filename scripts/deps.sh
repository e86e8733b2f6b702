#!/bin/sh
# Installs what building and testing sandbox-mcp needs on Debian or Ubuntu, only what is
# missing (apt-get update runs once, and only when something must be installed).
# Usage: scripts/deps.sh [build|test]   (test also installs the test tools; default build)
set -eu
want="build-essential pkg-config libjansson-dev libseccomp-dev libcurl4-openssl-dev libbsd-dev python3 python3-pip"
[ "${1:-build}" = test ] && want="$want bats jq debootstrap clang libclang-rt-dev curl groff-base iproute2 procps python3-jsonschema e2fsprogs valgrind strace openssl"
missing=""
for p in $want; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || missing="$missing $p"
done
# Node.js and npm (for the official-SDK checks): any install will do (Debian's, NodeSource's,
# nvm's), so look for the commands; only when they are missing, take Debian's packages.
if [ "${1:-build}" = test ] && ! { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }; then
	missing="$missing nodejs npm"
fi
# A Docker engine and CLI (for tests/docker.bats): Debian's docker.io, unless dockerd and the
# docker CLI are already there (Docker's own docker-ce packages conflict with it).
if [ "${1:-build}" = test ] && ! { command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1; }; then
	missing="$missing docker.io"
fi
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "scripts/deps.sh: need root to install:$missing" >&2; exit 1; }
	SUDO=sudo
else
	SUDO=
fi
echo "installing:$missing" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
