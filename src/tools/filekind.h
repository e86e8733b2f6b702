/*
 * What a file is, for returning it: its media type by name or by its first bytes, and
 * whether its bytes are text.
 */
#ifndef SANDBOX_FILEKIND_H
#define SANDBOX_FILEKIND_H

#include <stdbool.h>
#include <stddef.h>

/* "image/png", "image/jpeg", "image/gif" or "image/webp" when the first bytes say so, else NULL. */
const char *filekind_image(const unsigned char *d, size_t n);

/* The bytes filekind_mime looks at: a file's first ones (all of a shorter file). */
#define FILEKIND_SNIFF 512

/* The one media type of a file, wherever the server names it (a tool result's files,
 * resources/list, resources/read), from its name and its first n bytes d (FILEKIND_SNIFF, or
 * the whole file when shorter; more: the file goes on past them): the image type its bytes
 * tell (filekind_image); else the type its name's extension stands for; else "text/plain" when
 * those bytes are UTF-8 without NUL (a character cut at their end counts), else
 * "application/octet-stream". Never NULL; the same file always gets the same. */
const char *filekind_mime(const char *path, const unsigned char *d, size_t n, bool more);

/* Valid UTF-8 without NUL. */
bool filekind_is_text(const unsigned char *d, size_t n);

#endif
