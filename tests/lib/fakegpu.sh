#!/bin/sh
# fakegpu.sh PROGRAM ARGS...: PROGRAM in a mount namespace whose /dev is a tmpfs with the usual
# nodes and a stand-in NVIDIA driver's: nvidiactl, nvidia0, nvidia-uvm, nvidia-caps/, dri/; plus
# traps: /dev/nvidia1 a link to a disk's node, /dev/nvidia-modeset a link, a disk node sda.
set -eu
exec unshare -m sh -c '
mount --make-rprivate /
mount -t tmpfs -o mode=0755 fakedev /dev
mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/full c 1 7
mknod -m 666 /dev/random c 1 8; mknod -m 666 /dev/urandom c 1 9; mknod -m 666 /dev/tty c 5 0
mknod -m 660 /dev/sda b 8 0
mkdir /dev/shm /dev/pts && chmod 1777 /dev/shm && mount -t tmpfs shm /dev/shm
mknod -m 666 /dev/nvidiactl c 195 255
mknod -m 666 /dev/nvidia0 c 195 0
mknod -m 666 /dev/nvidia-uvm c 510 0
ln -s sda /dev/nvidia1
ln -s /dev/sda /dev/nvidia-modeset
mkdir /dev/nvidia-caps && mknod -m 400 /dev/nvidia-caps/nvidia-cap1 c 511 1
mkdir /dev/dri && mknod -m 666 /dev/dri/renderD128 c 226 128
ln -s /proc/self/fd /dev/fd
exec "$@"' fakedev "$@"
