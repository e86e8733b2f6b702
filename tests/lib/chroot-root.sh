#!/bin/sh
# chroot-root.sh COMMAND [ARGS...]: runs COMMAND as root in a chroot of this machine's own root
# (a recursive bind of / in a mount namespace of its own, so every file is where it was), where
# the kernel refuses user namespaces to the chrooted process. This is how the tests get a root
# that has no user namespaces, as in a chroot or a container. Needs root; execs COMMAND (its pid
# is this script's).
set -eu
dir=/tmp/sandbox-mcp-test-chroot
mkdir -p "$dir"
exec unshare --mount --propagation private sh -c 'mount --rbind / "$0" && exec chroot "$0" "$@"' "$dir" "$@"
