#!/bin/sh
# apart.sh PROGRAM [ARGS...]: runs PROGRAM in a mount namespace of its own in which
# $SANDBOX_STATE_DIR and /dev/shm are fresh tmpfs mounts that the container engine does not see,
# as a server in a container of its own (the engine's socket bound in) sees the engine: nothing
# of its folders exists on the engine's side. Needs root (unshare -m).
set -eu
: "${SANDBOX_STATE_DIR:?}"
exec unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs -o mode=0700 apart "$SANDBOX_STATE_DIR" &&
	mount -t tmpfs apart /dev/shm && exec "$@"' apart "$@"
