/*
 * Writing below a host folder without ever leaving it, whatever lies in it: every path is
 * relative to the folder's fd and walked one name at a time, never following a symlink (a
 * symlink on the way is ELOOP, anything else that is not a folder ENOTDIR), and a path with an
 * empty, "." or ".." name, or a leading '/', is refused (EINVAL). A file is written under a
 * temporary name in its folder and renamed over its name, so whatever was at the name (a FIFO,
 * a device, a symlink) is replaced, never opened, and a reader never sees half a file.
 *
 * For a folder whose contents come from a sandbox (Daytona's copy of a --workspace folder):
 * the names are the sandbox's, and nothing the sandbox or anyone else left in the folder can
 * turn a write into one outside it.
 */
#ifndef SANDBOX_BENEATH_H
#define SANDBOX_BENEATH_H

#include <stdbool.h>
#include <stddef.h>

/* The temporary names' prefix: a file of this name was left by a write cut short. */
#define BENEATH_TMP_PREFIX ".sandbox-mcp-write-"

/* Whether rel is a plain relative path: names split by single '/', none "", "." or "..",
 * shorter than PATH_MAX. */
bool beneath_plain(const char *rel);

/* Makes the folder rel of mode (and the folders missing on its way, 0755); one already there
 * is left as it is. 0, or -1 with errno (EEXIST: something that is not a folder is there). */
int beneath_mkdir(int dirfd, const char *rel, unsigned mode);

/* Writes len bytes of data as the file rel, of mode (permission bits alone), replacing whatever
 * was at the name but a folder (EISDIR); missing folders on its way are made (0755). 0, or -1
 * with errno (nothing of the new file is left then). */
int beneath_write(int dirfd, const char *rel, const void *data, size_t len, unsigned mode);

/* Removes rel, a file, a symlink (not what it points at) or an empty folder. 0 (when nothing
 * is there too), or -1 with errno (ENOTEMPTY: a folder that still holds something). */
int beneath_remove(int dirfd, const char *rel);

#endif
