/*
 * The sandbox's life: the backend is chosen and the sandbox made at the first call (auto tries
 * each backend of backend_table in order, logging why each one that fails was skipped), kept
 * until cleanup, idle timeout, its death or shutdown, and made anew by the next call.
 *
 * Made ahead: on a backend whose sandboxes cost the host only a moment (backend_ops.ahead), the
 * engine makes the sandbox between calls before the first call and after a cleanup, so that the
 * call finds it ready. Until a call uses it, such a sandbox is nobody's: cleanup_sandbox reports
 * none, idle removal and its death are silent, and shutdown removes it whatever --keep says. It
 * is not made with --workspace (the host folder is taken only for a call), nor again after an
 * idle removal (the client went quiet) or after one made ahead went unused.
 *
 * Notices: when a sandbox goes away under a session (idle removal, a crash, its workspace
 * removed on the host), the call that runs in the new sandbox that replaces it gets a notice
 * saying its workspace is new; the call during which a sandbox died gets an error instead.
 * Used by the engine's worker thread only.
 */
#ifndef SANDBOX_SANDBOX_H
#define SANDBOX_SANDBOX_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../../backends/backend.h"
#include "../base/config.h"
#include "../base/err.h"

#define SANDBOX_NOTICE_MAX 1024
#define SANDBOX_SESSIONS_MAX 64

struct sandbox {
	const struct config *cfg;     /* borrowed */
	struct backend *b;            /* NULL when there is no sandbox */
	char pending[SANDBOX_NOTICE_MAX]; /* for the call that makes the next sandbox; "" for none */
	int64_t last_used;            /* monotonic ms */
	bool used;                    /* a call ran in it (false: made ahead, unused so far) */
	bool ahead_made;              /* one was made ahead since the last call or cleanup */
	json_t *installed;            /* requirements installed in this sandbox: object used as a set */
	json_t *outputs_seen;         /* outputs/ as the last call left it: path -> "ctime:size" (artifacts.c) */
	bool in_call;                 /* between sandbox_call_begin and sandbox_call_end */
	int64_t checked_at;           /* in_call: when the sandbox was last found alive in this call
	                               * (monotonic ms; 0: not yet) */
	/* What sandbox_process, on another thread, may use: the backend while it is there, under
	 * side_mu, which its removal takes first. */
	pthread_mutex_t side_mu;
	struct backend *side;
	/* Python sessions: their names and the background processes they run as; under side_mu,
	 * emptied with the sandbox. */
	struct { char name[72]; unsigned id; } sessions[SANDBOX_SESSIONS_MAX];
};

void sandbox_init(struct sandbox *s, const struct config *cfg);

/* The fewest open files (RLIMIT_NOFILE) the server works with: a sandbox's making takes about
 * 25 at once, and the install step's proxy, sessions and background processes more. */
#define SANDBOX_MIN_FDS 64

/* At start-up: where the soft open files limit is below SANDBOX_MIN_FDS, raises it to the hard
 * one (1024 at most). 0, or -1 with e naming the limit when the hard one is below it. */
int sandbox_fd_limit(struct err *e);

/* Removes what servers that died left behind (every backend's reap). */
void sandbox_reap_leftovers(const struct config *cfg);

/* Makes the sandbox if there is none (or the one there turns out dead). A pending notice goes
 * to `notice` (SANDBOX_NOTICE_MAX bytes) when this made a new sandbox. 0; BACKEND_CANCELLED when
 * cancel_fd turned readable while a sandbox was being made; -1 with e reading
 * "Failed to initialize sandbox engine: <backend>: <reason>; ...". */
int sandbox_ensure(struct sandbox *s, int cancel_fd, char *notice, struct err *e);

/* A tool call begins and ends. Within one, a sandbox found alive (its agent there, its
 * workspace not removed on the host) is not checked again by the steps that follow within
 * SANDBOX_CHECK_FRESH_MS: a warm call checks once instead of three times (each check is a few
 * system calls). A step meets a sandbox lost since as BACKEND_LOST, as it meets one lost during
 * a step; a step after a long one (an install, a long run) checks again. */
#define SANDBOX_CHECK_FRESH_MS 100
void sandbox_call_begin(struct sandbox *s);
void sandbox_call_end(struct sandbox *s);

/* Between calls: whether a sandbox may be made ahead now (none is there, and none was made
 * ahead since the last call or cleanup); then sandbox_prepare makes it where the backend that
 * call would get allows it (see above), leaving a failure for that call to meet, and runs prime
 * in it (NULL: nothing) for what a first call would otherwise wait for, its outcome ignored,
 * unless call_fd is readable by then (a call came while it was made: it is not kept waiting for
 * what it would start itself). 0 when one is there now, 1 when none was made,
 * BACKEND_CANCELLED when cancel_fd turned readable. */
bool sandbox_ahead_due(const struct sandbox *s);
int sandbox_prepare(struct sandbox *s, int cancel_fd, const struct run_req *prime, int call_fd);

/* Runs on the sandbox (see backend.h). A sandbox found dead is removed: when the program had
 * surely not started (rs->started false) the call is retried once on a fresh sandbox and
 * `notice` says so; else it fails (e says the sandbox stopped) and the next call's notice will. */
int sandbox_run(struct sandbox *s, const struct run_req *rq, struct run_res *rs, char *notice, struct err *e);

/* Writes one file into the sandbox between calls (see backend.h's put). */
int sandbox_put(struct sandbox *s, const struct run_file *f, struct err *e);

/* Lists and reads the sandbox between calls (see backend.h's list and get). With no sandbox,
 * a list is empty and a file is ENOENT, unless --workspace holds files from before: then the
 * sandbox is made. A sandbox found dead, before the read or by it, is removed as by
 * sandbox_check, and the read is done again: on the sandbox --workspace makes, or on none. */
int sandbox_list(struct sandbox *s, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e);
int sandbox_get(struct sandbox *s, const char *path, size_t max, struct ws_file *out, struct err *e);
/* sandbox_list, after which the sandbox watches the folders it walked where it can
 * (backend_list_watch); and whether anything under them changed since, at a cost that does
 * not grow with the tree: a WS_CHANGES_* state (WS_CHANGES_UNKNOWN with no sandbox, a lost
 * one, which is removed as by sandbox_check, or no watch: list again to know). */
int sandbox_list_watch(struct sandbox *s, const char *dir, const char *skip, size_t max, struct ws_list *out,
		       struct err *e);
int sandbox_changes(struct sandbox *s);

/* Destroys the sandbox; its name and id go to the buffers. 0 when there was none, 1 when it
 * was removed entirely, -1 when it was removed but something of it could not be (e says what). */
int sandbox_cleanup(struct sandbox *s, char *backend, size_t bn, char *id, size_t idn, struct err *e);

/* Between calls, once the call before is answered: the backend starts what it keeps off a
 * call's path (backend.h's settle). */
void sandbox_settle(struct sandbox *s);
/* Between calls: an fd that turns readable when the sandbox may have died, or -1. */
int sandbox_watch_fd(const struct sandbox *s);
/* Between calls: removes the sandbox if it died, leaving a notice for the next call. */
void sandbox_check(struct sandbox *s);

/* Monotonic ms at which the sandbox counts as idle, or -1. */
int64_t sandbox_idle_deadline(const struct sandbox *s);
/* Removes an idle sandbox and leaves a notice for the next call. */
void sandbox_idle_expire(struct sandbox *s);

/* Background processes (backend.h's process), from any one thread besides the worker, at the
 * same time as it: with no sandbox, a list is empty and anything else fails (-1, e says
 * why). 0, -1, BACKEND_LOST. */
int sandbox_process(struct sandbox *s, const struct proc_req *rq, struct proc_res *rs, struct err *e);

/* Python sessions (any thread): the background process that session name runs as (0: none);
 * set one (id 0 removes it; -1 when SANDBOX_SESSIONS_MAX are set); how many there are; the
 * name of the one that process id is, copied to buf (n bytes; "" when none). */
unsigned sandbox_session_find(struct sandbox *s, const char *name);
int sandbox_session_set(struct sandbox *s, const char *name, unsigned id);
size_t sandbox_session_count(struct sandbox *s);
void sandbox_session_name(struct sandbox *s, unsigned id, char *buf, size_t n);

/* Whether the sandbox there runs background processes (worker thread). */
bool sandbox_has_process(const struct sandbox *s);

/* Shutdown: destroys the sandbox (keeps the workspace when cfg->keep). */
void sandbox_shutdown(struct sandbox *s);

const char *sandbox_backend(const struct sandbox *s);  /* borrowed; NULL when none */
const char *sandbox_id(const struct sandbox *s);       /* borrowed; NULL when none */
bool sandbox_made_ahead(const struct sandbox *s);      /* there is one, and no call used it yet */

/* --check: tries every backend here, prints what works and which limits hold. 0 if one works. */
int sandbox_check_all(const struct config *cfg, FILE *f);

#endif
