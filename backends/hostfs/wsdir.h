/*
 * A --workspace folder: a host folder that is a sandbox's workspace and outlives the sandbox,
 * on every backend (local and Docker bind it; Daytona keeps a copy in step with it).
 *
 * Because cleanup_sandbox empties it, a folder is taken only when it is new (it is made), empty,
 * or already a workspace (it holds the WSDIR_MARK folder every workspace gets): never a folder
 * of the user's. It is locked (flock on the folder's fd) while a sandbox uses it, so that two
 * servers never share one; the lock lives as long as the fd. It is never set-id: a set-gid bit
 * it got from its parent is cleared, so that folders made in it are not set-gid either.
 */
#ifndef SANDBOX_WSDIR_H
#define SANDBOX_WSDIR_H

#include <stddef.h>
#include <sys/types.h>

#include "../../src/base/err.h"

/* The folder every workspace holds (the server's own files: scripts, packages, spill files). */
#define WSDIR_MARK ".sandbox"

/* Takes the folder path (absolute; made 0755 when missing, its parent must exist): checked,
 * locked, made uid:gid's, its WSDIR_MARK made when new. Its real path goes to real (n bytes,
 * PATH_MAX for any path). The folder's fd (O_RDONLY | O_DIRECTORY, close-on-exec; the caller
 * owns it and holds the lock through it), or -1 with e set: "--workspace PATH is in use by
 * another sandbox-mcp server", "... holds files but is not a workspace ...", or why it could
 * not be made, opened or chowned. */
int wsdir_take(const char *path, uid_t uid, gid_t gid, char *real, size_t n, struct err *e);

/* At start-up: whether wsdir_take could take path, changing nothing. A missing folder whose
 * parent is a folder is fine (it will be made); else path must be a folder that is empty or
 * already a workspace. The lock is not looked at: a server may end in between. 0, or -1 with e
 * set ("--workspace PATH holds files but is not a workspace ..."). */
int wsdir_check(const char *path, struct err *e);

/* Empties the folder fd, and marks it a workspace again (an empty WSDIR_MARK, owned as the
 * folder is), so that it is still one when no sandbox uses it. 0, or -1 with errno (the first
 * failure; what could be removed is). */
int wsdir_clear(int fd);

#endif
