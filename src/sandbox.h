/*
 * The sandbox's life: the backend is chosen and the sandbox made at the first call (auto tries
 * each backend of backend_table in order, logging why each one that fails was skipped), kept
 * until cleanup, idle timeout or shutdown, and made anew by the next call. When a sandbox
 * disappears under a session (idle removal, a crash), the next result carries a notice.
 * Used by the engine's worker thread only.
 */
#ifndef SANDBOX_SANDBOX_H
#define SANDBOX_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../backends/backend.h"
#include "config.h"
#include "err.h"

struct sandbox {
	const struct config *cfg;     /* borrowed */
	struct backend *b;            /* NULL when there is no sandbox */
	char notice[512];             /* for the next result; "" for none */
	int64_t last_used;            /* monotonic ms */
	json_t *installed;            /* requirements installed in this sandbox: object used as a set */
};

void sandbox_init(struct sandbox *s, const struct config *cfg);

/* Makes the sandbox if there is none. On failure e reads
 * "Failed to initialize sandbox engine: <backend>: <reason>; ...". */
int sandbox_ensure(struct sandbox *s, struct err *e);

/* Runs on the sandbox (see backend.h). A sandbox found dead is removed: when the program had
 * surely not started (rs->started false) the call is retried once on a fresh sandbox, else it
 * fails and the next call gets a fresh one, with a notice either way. */
int sandbox_run(struct sandbox *s, const struct run_req *rq, struct run_res *rs, struct err *e);

/* Destroys the sandbox; its name and id go to the buffers. 0 when there was none, 1 when it
 * was removed entirely, -1 when it was removed but something of it could not be (e says what). */
int sandbox_cleanup(struct sandbox *s, char *backend, size_t bn, char *id, size_t idn, struct err *e);

/* Monotonic ms at which the sandbox counts as idle, or -1. */
int64_t sandbox_idle_deadline(const struct sandbox *s);
/* Removes an idle sandbox and leaves a notice for the next call. */
void sandbox_idle_expire(struct sandbox *s);

/* Shutdown: destroys the sandbox (keeps the workspace when cfg->keep). */
void sandbox_shutdown(struct sandbox *s);

const char *sandbox_backend(const struct sandbox *s);  /* borrowed; NULL when none */
const char *sandbox_id(const struct sandbox *s);       /* borrowed; NULL when none */

/* Moves the pending notice into buf ("" if none). */
void sandbox_take_notice(struct sandbox *s, char *buf, size_t n);

/* --check: tries every backend here, prints what works and which limits hold. 0 if one works. */
int sandbox_check(const struct config *cfg, FILE *f);

#endif
