/*
 * The workspace's files as MCP resources: sandbox://workspace/PATH, PATH relative to
 * /workspace with every byte but letters, digits, "-._~" and "/" percent-encoded.
 */
#ifndef SANDBOX_WSURI_H
#define SANDBOX_WSURI_H

#include <stddef.h>

#define WSURI_PREFIX "sandbox://workspace/"

/* The URI of a workspace path. Caller frees; NULL when out of memory. */
char *wsuri_from_path(const char *rel);

/* The workspace path a URI names (decoded, NUL-terminated in out, n bytes). 0, or -1 when the
 * URI is not sandbox://workspace/..., has a bad or NUL escape, or is longer than out. */
int wsuri_to_path(const char *uri, char *out, size_t n);

#endif
