/*
 * Reading a host folder into memory, for backends that copy a --mount folder into the
 * sandbox rather than show it: regular files only (symlinks, devices and FIFOs are skipped
 * and counted, never followed or opened), within limits of count and bytes.
 */
#ifndef SANDBOX_HOSTTREE_H
#define SANDBOX_HOSTTREE_H

#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"

#define HOSTTREE_DEPTH 64

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

/* Reads every regular file under dir. 0, or -1 with e set (past max_files or max_bytes, or
 * an unreadable entry), t then empty. */
int hosttree_read(const char *dir, size_t max_files, uint64_t max_bytes, struct hosttree *t, struct err *e);

void hosttree_free(struct hosttree *t);

#endif
