/*
 * Reading a host folder, for backends that copy a folder into the sandbox rather than show it
 * (a --mount folder, a --workspace folder): regular files only (symlinks, devices and FIFOs are
 * skipped and counted, never followed or opened), folders walked to HOSTTREE_DEPTH levels.
 */
#ifndef SANDBOX_HOSTTREE_H
#define SANDBOX_HOSTTREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../../src/base/err.h"

#define HOSTTREE_DEPTH 64

/* What a walk meets below the folder, in the order of its folders' entries. Each callback
 * returns 0 to go on, or -1 with e set to stop the walk. */
struct hosttree_visit {
	/* A regular file, rel its path below the folder, name its last name in the open folder
	 * dirfd; fd is the file, open read-only (O_NOFOLLOW, O_NONBLOCK), st what fstat said. */
	int (*file)(void *ctx, int dirfd, const char *name, const char *rel, int fd, const struct stat *st,
		    struct err *e);
	/* A folder, before what it holds. NULL: none wanted. */
	int (*dir)(void *ctx, const char *rel, const struct stat *st, struct err *e);
	void *ctx;
	size_t skipped;         /* counted by the walk: symlinks, special files, folders past
	                         * HOSTTREE_DEPTH, paths too long */
};

/* Walks the open folder dirfd (named top in messages). 0, or -1 with e set (a callback's
 * failure, or an entry that cannot be read). */
int hosttree_walk(int dirfd, const char *top, struct hosttree_visit *v, struct err *e);

struct hosttree_file {
	char *rel;              /* path below the folder; owned */
	unsigned char *data;    /* owned */
	size_t len;
	unsigned mode;          /* permission bits */
};

struct hosttree {
	struct hosttree_file *v;
	size_t n;
	uint64_t bytes;
	size_t skipped;         /* symlinks, special files, folders past HOSTTREE_DEPTH */
};

/* Reads every regular file under dir into memory; dir, once open, must be the folder dev:ino
 * (both 0: any). 0, or -1 with e set (another folder, past max_files or max_bytes, or an
 * unreadable entry), t then empty. */
int hosttree_read(const char *dir, dev_t dev, ino_t ino, size_t max_files, uint64_t max_bytes, struct hosttree *t,
		  struct err *e);

/* Reads the open file fd whole, at most len bytes (its size when it was opened: a file that
 * shrank is taken as it is read). Caller frees *data; 0, or -1 with e set. */
int hosttree_slurp(int fd, size_t len, unsigned char **data, size_t *got, struct err *e);

void hosttree_free(struct hosttree *t);

#endif
