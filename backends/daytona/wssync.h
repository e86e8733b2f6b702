/*
 * --workspace DIR on Daytona: a cloud sandbox cannot see a host folder, so the backend keeps
 * DIR and the sandbox's /workspace in step.
 *
 *  - When the sandbox is made, DIR is taken and locked as on every backend (wsdir.h: the same
 *    rules and messages), and its files are copied in before any code runs (wsseed.h).
 *  - After every call, before its result: the call runner, once the call has ended and been
 *    swept, compares the workspace with the listing the server last took in and says what
 *    changed, in the answer it sends anyway (runner.h's SYNC): removals, new folders, new and
 *    changed files, small ones inline, larger ones linked into the runner's state folder for
 *    the toolbox's bulk download (one request per WS_BATCH_BYTES). wssync_apply writes all of
 *    it below DIR's fd (beneath.h: no symlink followed, nothing outside DIR, no FIFO or device
 *    opened, each file renamed into place whole), so a SIGKILL of the server after a result
 *    loses nothing. A warm call that changes no large file stays one request.
 *  - The server names the listing DIR matches (gen): when an answer is lost or a download
 *    fails, the next call compares with the same listing and brings the changes again.
 *
 * Not copied back: symlinks and special files made in the sandbox; past a call's bounds
 * (WS_SYNC_*), what is left for the next call (the result's notice says so); a file larger than
 * WS_SYNC_BYTES, or one that cannot be read (said once, until it changes). The folder's own
 * WSDIR_MARK is never removed or replaced.
 */
#ifndef SANDBOX_DAYTONA_WSSYNC_H
#define SANDBOX_DAYTONA_WSSYNC_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../src/base/err.h"
#include "rest.h"

#define WS_SYNC_ITEMS 5000             /* files written and folders made, per call */
#define WS_SYNC_REMOVALS 20000         /* names removed, per call */
#define WS_SYNC_BYTES (64ull << 20)    /* bytes of files, per call */
#define WS_SYNC_INLINE (256u << 10)    /* of which in the call's own answer */
#define WS_BATCH_BYTES (16u << 20)     /* one bulk download (a larger file goes alone) */
#define WS_BATCH_FILES 256
/* How much larger a call's answers may be: inline files as base64, and names (the runner
 * keeps them within 4 MiB). */
#define WS_BODY ((WS_SYNC_INLINE / 3 * 4) + (5u << 20))

/* How the sync reaches the sandbox: the backend's requests. Each returns 0, -1 or BACKEND_LOST
 * with e set. */
struct wssync_io {
	/* One bulk upload. */
	int (*upload)(void *ctx, const struct rest_file *parts, size_t n, struct err *e);
	/* One bulk download of paths: *body (caller frees) and *len, the multipart answer. */
	int (*download)(void *ctx, const char *const *paths, size_t n, size_t max_body, char **body, size_t *len,
			struct err *e);
	/* One command (a runner's: runner.h): *out (caller frees) and *code. */
	int (*exec)(void *ctx, const char *cmd, int timeout_s, char **out, int *code, struct err *e);
	void *ctx;
	const char *python;           /* the sandbox's python; borrowed */
};

struct wssync {
	int fd;                       /* DIR, locked while the sandbox lives; -1 when none */
	char dir[PATH_MAX];           /* its real path */
	char state[128];              /* the runner's state folder in the sandbox */
	unsigned long long gen;       /* the runner's listing DIR matches */
	struct wssync_seed {          /* what the copy into the sandbox took and left */
		size_t files, skipped, left;
		uint64_t bytes, left_bytes;
	} seed;
	char pending[320];            /* for the first call's notice; "" for none */
};

/* An empty one: no folder, fd -1. */
void wssync_init(struct wssync *w);

/* Takes DIR (wsdir_take, as the server's own user), the runner to keep its state in the
 * sandbox folder state. 0, or -1 with e set (w stays empty). */
int wssync_take(struct wssync *w, const char *path, const char *state, struct err *e);

/* The runner's SYNC word for a call (runner.h) into buf. */
void wssync_word(const struct wssync *w, char *buf, size_t n);

/* Takes in the runner's word on what a call changed (ws: its "ws" object): writes it into DIR,
 * fetching larger files. Anything left out is said in notice (n bytes, "" when nothing was).
 * 0 when DIR matches the runner's new listing (less what a notice names), -1 or BACKEND_LOST
 * (a download failed: the next call brings the changes again), e set. */
int wssync_apply(struct wssync *w, const json_t *ws, const struct wssync_io *io, char *notice, size_t n,
		 struct err *e);

/* Whether DIR was removed (or replaced) on the host since it was taken. */
bool wssync_removed(const struct wssync *w);

/* cleanup_sandbox: empties DIR (it stays marked a workspace). 0, or -1 with e set. */
int wssync_clear(struct wssync *w, struct err *e);

/* Unlocks DIR and forgets it (its files stay). Idempotent. */
void wssync_release(struct wssync *w);

/* The --check lines of the workspace. */
void wssync_report(const struct wssync *w, FILE *f);

#endif
