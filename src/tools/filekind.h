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

/* The media type the name's extension stands for, or NULL. */
const char *filekind_by_name(const char *path);

/* Valid UTF-8 without NUL. */
bool filekind_is_text(const unsigned char *d, size_t n);

#endif
