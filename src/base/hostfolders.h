/*
 * The host folders a sandbox is shown (--mount, --workspace, --wheelhouse), checked once at
 * start-up, the same way on every backend, before any sandbox is made:
 *
 * - none holds, or is in, the state folder (every sandbox's workspace and the server's
 *   sockets) or /dev/shm (where servers that are not root keep what they bind into sandboxes);
 * - none lies in another that the code may write (a :rw mount, the --workspace folder): there
 *   the code could put a symlink in its place, and the next sandbox would bind the link's
 *   target. Being the same folder is not lying in it (the code cannot replace a mount's root).
 *
 * "In" is judged by path and by identity: a folder is in another when one of the folders on
 * its resolved path is that other folder (same device and inode), so a second path to the
 * same folder (a bind mount on the host) does not hide it. A folder that does not exist yet
 * (the --workspace folder, the state folder) is judged by its nearest existing parent.
 */
#ifndef SANDBOX_HOSTFOLDERS_H
#define SANDBOX_HOSTFOLDERS_H

#include <stddef.h>

#include "config.h"
#include "err.h"

/* Where the /dev/shm folders of servers that are not root are (hostdir.h). */
#define HOSTFOLDERS_SHM "/dev/shm"
#define HOSTFOLDERS_SHM_PREFIX HOSTFOLDERS_SHM "/sandbox-mcp-"

/* The state folder's path: --state-dir, or $TMPDIR/sandbox-mcp-UID (/tmp without TMPDIR).
 * 0, or -1 when it does not fit in n bytes. */
int hostfolders_state(const struct config *cfg, char *out, size_t n);

/* Checks the host folders of cfg as above; --wheelhouse is made its resolved path, and its
 * identity (device, inode) is recorded, as mountspec_parse records each --mount's. 0, or -1
 * with e set to one line naming the option, the folder and the reason. */
int hostfolders_check(struct config *cfg, struct err *e);

#endif
