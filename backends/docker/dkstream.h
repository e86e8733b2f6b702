/*
 * What the Engine API carries besides JSON, on connections of their own to the engine's socket
 * (the backends' HTTP client speaks JSON only): a tar stream put into a container, and a
 * container's attached stdin and stdout. They serve a server whose file system is not the
 * engine's (the server in a container of its own, the engine's socket bound in): nothing then
 * reaches a sandbox through a host path.
 *
 * Every wait is bounded by timeout_ms; every answer header is bounded (DKSTREAM_HEAD_MAX).
 */
#ifndef SANDBOX_DOCKER_DKSTREAM_H
#define SANDBOX_DOCKER_DKSTREAM_H

#include <stddef.h>

#include "../../src/base/err.h"
#include "dkapi.h"

#define DKSTREAM_HEAD_MAX 8192

/* A tar stream (ustar) built in memory: regular files only, at the archive's top level. */
struct dktar {
	unsigned char *p; /* owned */
	size_t len, cap;
};

/* Adds the file `name` (one path segment of [A-Za-z0-9._-], at most 99 bytes, not "." or
 * ".."), owned by root, of mode (permission bits only). 0, or -1 with e set. */
int dktar_file(struct dktar *t, const char *name, const void *data, size_t n, unsigned mode, struct err *e);

/* Ends the stream (two zero blocks). 0, or -1 with e set. */
int dktar_end(struct dktar *t, struct err *e);

void dktar_free(struct dktar *t);

/* PUT /containers/{id}/archive?path=dir with t's stream: the engine unpacks it there. 0, or -1
 * with e saying the engine's reason. */
int dkstream_put(struct dkapi *d, const char *id, const char *dir, const struct dktar *t, long timeout_ms,
		 struct err *e);

/* POST /containers/{id}/attach for stdin and stdout, stream=1, on a container made with
 * OpenStdin and no TTY, before it starts: the connected socket the engine hands over (caller
 * closes; blocking, close-on-exec), or -1 with e set. What is written to it reaches the
 * container's stdin; what is read from it is the container's stdout in the engine's 8-byte
 * stream frames (agentlink_open_mux). Closing it ends the container's stdin. */
int dkstream_attach(struct dkapi *d, const char *id, long timeout_ms, struct err *e);

#endif
