/*
 * The copy of a --workspace folder into a new Daytona sandbox (wssync.h), made before any code
 * runs there: the folder's regular files go up by bulk upload (WS_SEED_BATCH_* a request), at
 * most WS_SEED_FILES and WS_SEED_BYTES in all; then one `wsprep` of the call runner makes the
 * empty folders, gives files and folders their modes, and takes the listing the first call's
 * sync compares with. What lies past the bounds, symlinks, special files and names the toolbox
 * cannot carry stay in the folder alone, the code never sees them: counted in w->seed and said
 * in w->pending, for the first call's notice. A file a write of the sync left half made
 * (BENEATH_TMP_PREFIX) is removed, not copied.
 */
#ifndef SANDBOX_DAYTONA_WSSEED_H
#define SANDBOX_DAYTONA_WSSEED_H

#include "../../src/base/err.h"
#include "wssync.h"

#define WS_SEED_FILES 10000
#define WS_SEED_BYTES (256ull << 20)
#define WS_SEED_BATCH_FILES 1000
#define WS_SEED_BATCH_BYTES (8u << 20)

/* Copies w's folder into the sandbox's workspace. 0, -1 or BACKEND_LOST with e set. */
int wsseed_run(struct wssync *w, const struct wssync_io *io, struct err *e);

#endif
