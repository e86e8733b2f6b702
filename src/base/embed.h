/*
 * Files compiled into the binary at build time (the Makefile's EMBEDDED: the tools' schemas,
 * the Daytona backend's in-sandbox programs), found by their path in the source tree.
 */
#ifndef SANDBOX_EMBED_H
#define SANDBOX_EMBED_H

#include <stddef.h>

/* The file's bytes (borrowed, static; not NUL-terminated) and *len, or NULL when the build
 * has no file of that name. */
const unsigned char *embed_find(const char *name, size_t *len);

#endif
