/*
 * The workspace quota where no image can be mounted on the host (the server is not root, or
 * the host has no loop devices): the workspace is a tmpfs of the quota, which a user namespace
 * of the server's may mount. A holder process keeps it mounted in a mount namespace of its own;
 * each instance of the sandbox gets a copy of that mount (open_tree) and moves it onto its
 * /workspace, so every instance sees the same files. Nothing is written to the host's disk,
 * and the sandbox's mountinfo names no host path.
 *
 * The holder is a clone of the server that makes only system calls; it dies with the thread
 * that made it (parent-death signal) and with wsholder_stop.
 */
#ifndef SANDBOX_LOCAL_WSHOLDER_H
#define SANDBOX_LOCAL_WSHOLDER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/err.h"

struct wsholder {
	pid_t pid;   /* the holder; 0 when none */
	int sock;    /* to it; -1 when none */
};

/* Writes the id maps of the new user namespace of pid (the same as an instance's). */
typedef int (*wsholder_map_fn)(void *ctx, pid_t pid, struct err *e);

/* No holder. */
void wsholder_init(struct wsholder *w);

/* Starts a holder (`ps` shows it as the workspace's tmpfs of the sandbox `name`) whose tmpfs
 * of `bytes` (one inode per 8 KiB, as the image has) is owned by uid:gid as the sandbox sees
 * them. It is mounted on dir (an empty folder of the sandbox's; the host's stays empty), then
 * made the holder's root and only mount. 0, or -1 with e set and nothing left. */
int wsholder_start(struct wsholder *w, const char *name, const char *dir, uint64_t bytes, unsigned uid, unsigned gid,
		   wsholder_map_fn map, void *ctx, struct err *e);

/* Whether a holder runs (or ran and has not been found gone yet). */
bool wsholder_on(const struct wsholder *w);

/* Whether the holder died (it is reaped then, and w is empty): the instances that have the
 * workspace mounted keep it, but no new one can have it. */
bool wsholder_gone(struct wsholder *w);

/* A detached copy of the workspace's mount, for move_mount(2): an fd the caller closes
 * (close-on-exec), or -1 with e set. */
int wsholder_mount(struct wsholder *w, struct err *e);

/* Ends the holder (the tmpfs goes with the last instance that has it mounted). Idempotent. */
void wsholder_stop(struct wsholder *w);

#endif
