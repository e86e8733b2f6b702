/*
 * --mount HOST:SANDBOX[:rw]: a host folder shown to the code, read-only unless :rw. SANDBOX
 * is a path under /mnt, so a mount never hides a part of the sandbox's own system, its
 * workspace or its /tmp, and means the same on every backend.
 */
#ifndef SANDBOX_MOUNTSPEC_H
#define SANDBOX_MOUNTSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "err.h"

#define MOUNTS_MAX 8
#define MOUNT_HOST_MAX 4096     /* PATH_MAX: realpath writes up to it */
#define MOUNT_INSIDE_MAX 200
#define MOUNT_DEPTH_MAX 8       /* names below /mnt */

struct mountspec {
	char host[MOUNT_HOST_MAX];        /* absolute, symlinks resolved when given */
	char inside[MOUNT_INSIDE_MAX + 1];/* /mnt/NAME[/NAME...] */
	bool rw;
	dev_t dev;                        /* which folder it is, as checked at start-up: it is */
	ino_t ino;                        /* bound only while it is still this one */
};

struct mountlist {
	struct mountspec v[MOUNTS_MAX];
	size_t n;
};

/* Parses and checks one spec (the host folder must exist). 0, or -1 with e saying why. */
int mountspec_parse(struct mountspec *m, const char *spec, struct err *e);

/* Checks a set: no two at the same place or one inside another. 0, or -1 with e set. */
int mountspec_check_set(const struct mountspec *v, size_t n, struct err *e);

#endif
