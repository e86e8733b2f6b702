/*
 * Mounts the server makes on the host for a sandbox's folder, when it runs as root: the
 * workspace as an ext4 image of a fixed size on a loop device (the quota: the code gets
 * ENOSPC when it is full, and the host's disk is safe), and a small tmpfs for the files bound
 * into the sandbox. A bind mount of a mount's root shows no host path in the sandbox's
 * /proc/self/mountinfo, which a bind of a folder on the host's disk would.
 */
#ifndef SANDBOX_HOSTMOUNT_H
#define SANDBOX_HOSTMOUNT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/err.h"

/* Whether mounts can be tried here (root, loop devices, mkfs.ext4): 1, or 0 with the reason
 * in why. Trying may still fail (no mount rights); hostmount_image says why then. */
int hostmount_usable(char *why, size_t n);

/* Makes the file img of `bytes`, an ext4 file system in it whose root is dir's owner's
 * (uid:gid, mode 0755, empty), and mounts it on dir (nosuid, nodev) through a loop device that
 * goes away with the mount. Every block of img is reserved on the host (fallocate), so that the
 * code meets ENOSPC at the quota and never loses a write the host had no room for. The file
 * system is copied from a template in /run/sandbox-mcp that the first mkfs.ext4 for that size
 * and owner left there (hostmount.c says when one is used). 0; HOSTMOUNT_NO_ROOM with e set when
 * the host's file system cannot hold `bytes`; or -1 with e set. Nothing is left mounted or
 * made on failure. */
#define HOSTMOUNT_NO_ROOM (-2)
int hostmount_image(const char *img, const char *dir, uint64_t bytes, uid_t uid, gid_t gid, struct err *e);

/* Mounts a tmpfs of `bytes` on dir (mode 0700, root's; nosuid, nodev). */
int hostmount_tmpfs(const char *dir, uint64_t bytes, struct err *e);

/* Detaches whatever is mounted on dir. 0 (also when nothing is, or dir is gone), or -1 with
 * errno when a mount stays. */
int hostmount_release(const char *dir);

#endif
