/*
 * The backend contract. A backend makes one sandbox (a workspace plus a place to run
 * processes in it) and runs calls there. Every backend sits behind the same small ops table;
 * callers use backend_*() and never a backend's insides. State lives in the backend's private
 * struct (ops->priv_size bytes, zeroed, owned by struct backend), never in globals.
 *
 * What a run asks and answers (struct run_req, run_res, ...) is in run/run.h.
 */
#ifndef SANDBOX_BACKEND_H
#define SANDBOX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../src/base/config.h"
#include "../src/base/err.h"
#include "../src/base/opt.h"
#include "agenthost/agenthost.h"
#include "run/run.h"

struct backend;

struct backend_ops {
	const char *name;
	size_t priv_size;
	/* A backend built on the agent host (agenthost.h) names its home here: its private struct
	 * then begins with a struct agenthost, which backend_new sets up, and every op of start,
	 * run, put, list, get, settle, watch_fd, process, check, destroy and report it leaves NULL is the
	 * agent host's. NULL for the others. */
	const struct agenthost_home *home;
	bool workspace_dir;          /* --workspace is the workspace (else: said in its report) */
	/* --workspace names a store of the backend's own (a PersistentVolumeClaim), not a host
	 * folder: where this backend is the one that runs (backend_first), cfg->workspace_claim is
	 * set and opts_check checks the name; no host folder is taken. */
	bool workspace_claim;
	/* A sandbox here costs the host a moment and nothing more: one is made ahead of the first
	 * call and after cleanup_sandbox (sandbox.h), so that the call does not wait for it. */
	bool ahead;
	/* Whether the backend could be tried here at all, from the configuration and the
	 * environment alone, where its probe would reach the network: a sandbox is made ahead on a
	 * backend that auto tries after it only when it is not. May be NULL (probe is local). */
	bool (*present)(const struct config *cfg);
	/* The backend's own options (opt.h): fields of its options struct, opts_size bytes, read
	 * with the server's options and given to each instance as b->opts. None: NULL, 0, 0. */
	const struct opt *opts;
	size_t nopts, opts_size;
	/* Checks the backend's options once everything is read. 0, or -1 with e set. May be NULL. */
	int (*opts_check)(const void *opts, const struct config *cfg, struct err *e);
	/* For --help: a line "  NAME  what it is" for each variable the backend reads besides its
	 * options, or NULL. */
	const char *env_help;
	/* At start-up, when this backend is named (--backend), or is the one auto tries first (the
	 * first in table.h's order that present does not rule out): refuses what of the
	 * configuration it can know to be wrong before any sandbox is made, so that the server does
	 * not start only for every call to fail. Waits on nothing for long: what it cannot tell
	 * within a few seconds is left to the call. 0, or -1 with e set. May be NULL. */
	int (*startup_check)(const struct config *cfg, struct err *e);
	/* Called once, first, on the zeroed private struct: sets every "none" value that is not
	 * zero (fds to -1), so that destroy is safe whatever fails later. May be NULL. */
	void (*init)(struct backend *b);
	/* Usable here? Cheap, makes nothing; e says why not. -1 when it should work but does not,
	 * BACKEND_ABSENT when it is simply not set up here (auto passes over it quietly). */
	int (*probe)(struct backend *b, struct err *e);
	/* Makes the sandbox and sets b->sandbox_id. 0, -1 (e says why), or BACKEND_CANCELLED as
	 * soon as cancel_fd (-1: none) turns readable, within a second, having left nothing behind. */
	int (*start)(struct backend *b, int cancel_fd, struct err *e);
	/* Runs one call to its end. 0 (see rs), -1 (e says why), BACKEND_LOST. */
	int (*run)(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e);
	/* Writes one file into the sandbox, as its user, between calls. 0, -1, BACKEND_LOST. */
	int (*put)(struct backend *b, const struct run_file *f, struct err *e);
	/* Between calls: lists what lies under dir (absolute, in the sandbox) but in its entry
	 * named skip (NULL: none), walking folders to WS_LIST_DEPTH levels and following no
	 * symlink; at most max entries. A missing dir lists empty. 0, -1, BACKEND_LOST. */
	int (*list)(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		    struct err *e);
	/* Between calls: reads the first max bytes of the regular file path (absolute), following
	 * no symlink and opening nothing that can block; out->err says why a path has no data.
	 * 0, -1, BACKEND_LOST. */
	int (*get)(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e);
	/* Between calls, once the call before is answered (or a sandbox made ahead is primed):
	 * starts what the backend keeps off a call's path, such as the next call's interpreter, so
	 * that it takes no CPU from the answer. Never fails (a sandbox that died is found by
	 * check). May be NULL. */
	void (*settle)(struct backend *b);
	/* Between calls: an fd that turns readable when the sandbox may have died (then call
	 * check), or -1. May be NULL. */
	int (*watch_fd)(const struct backend *b);
	/* Between calls: is the sandbox still whole (its processes, its workspace)? 0, or
	 * BACKEND_LOST with the reason in e; what died is reaped. May be NULL. */
	int (*check)(struct backend *b, struct err *e);
	/* Removes the sandbox and everything it made; the workspace as `how` says. Idempotent.
	 * 0, or -1 with e naming what could not be removed. */
	int (*destroy)(struct backend *b, enum backend_end how, struct err *e);
	/* Background processes (run.h's proc_req): lists, reads, feeds or signals them. Called on
	 * another thread than every other op and at the same time as them, but never at the same
	 * time as destroy (sandbox.c holds them apart). 0, -1 (e says why), BACKEND_LOST. NULL: the
	 * backend has none (a run asking for one is refused before it is made). */
	int (*process)(struct backend *b, const struct proc_req *rq, struct proc_res *rs, struct err *e);
	/* For --check: one line per limit, saying whether and how it is enforced here. */
	void (*report)(struct backend *b, FILE *f);
	/* Removes what servers that died left behind (sandboxes, folders, cgroups). Called once
	 * at start-up, with no sandbox made; may be NULL. */
	void (*reap)(const struct config *cfg);
	/* At the server's end (and --check's), once its sandboxes are gone: removes what the backend
	 * kept for all of them (reap made it, or a sandbox). May be NULL. */
	void (*shutdown)(const struct config *cfg);
};

struct backend {
	const struct backend_ops *ops;
	const struct config *cfg;    /* borrowed, outlives the backend */
	const void *opts;            /* the backend's own options, borrowed from cfg */
	void *priv;
	bool started;
	bool checking;               /* for --check: fetch nothing (start says BACKEND_WOULD_FETCH) */
	char sandbox_id[64];
};

/* The backends in auto's order of preference (table.h). NULL-terminated. */
extern const struct backend_ops *const backend_table[];

/* Where ops is in backend_table (its options are cfg->backend_opts[that]), or -1. */
int backend_index(const struct backend_ops *ops);

/* Looks a backend up by name; NULL if unknown. */
const struct backend_ops *backend_find(const char *name);

/* At start-up: refuses a configuration the backends that may run (the one named, or every one
 * auto may try) can know to be wrong: a state folder they cannot use, and what the startup_check
 * of the backend named, or of the one auto tries first, finds. 0, or -1 with e set (one line,
 * naming the option). */
int backend_config_check(const struct config *cfg, struct err *e);

/* The backend the configuration runs on first: the one named, or the one auto tries first (the
 * first in table.h's order that present does not rule out). NULL: an unknown name. */
const struct backend_ops *backend_first(const struct config *cfg);

/* Caller frees with backend_free. */
int backend_new(struct backend **out, const struct backend_ops *ops, const struct config *cfg, struct err *e);
int backend_probe(struct backend *b, struct err *e);
int backend_start(struct backend *b, int cancel_fd, struct err *e);
int backend_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e);
int backend_put(struct backend *b, const struct run_file *f, struct err *e);
int backend_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		 struct err *e);
int backend_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e);
/* The list op, after which the sandbox watches the folders it walked, when it can (the agent
 * host's: proto.h's AG_WATCH; a backend with a list op of its own lists without a watch); and
 * whether anything under them changed since: a WS_CHANGES_* state (WS_CHANGES_UNKNOWN where
 * nothing watches), -1 or BACKEND_LOST. */
int backend_list_watch(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		       struct err *e);
int backend_changes(struct backend *b, struct err *e);
void backend_settle(struct backend *b);
/* -1 when the backend has nothing to watch. */
int backend_watch_fd(const struct backend *b);
/* Whether the backend runs background processes (its process op, or the agent host's). */
bool backend_has_process(const struct backend *b);
/* -1 with e set when the backend has no background processes. */
int backend_process(struct backend *b, const struct proc_req *rq, struct proc_res *rs, struct err *e);
/* 0 when whole (or nothing to check), BACKEND_LOST. */
int backend_check(struct backend *b, struct err *e);
/* 0, or -1 with e naming what could not be removed (the backend is closed either way). */
int backend_destroy(struct backend *b, enum backend_end how, struct err *e);
void backend_report(struct backend *b, FILE *f);
/* Runs every backend's reap op. */
void backend_reap_all(const struct config *cfg);
/* Runs every backend's shutdown op. */
void backend_shutdown_all(const struct config *cfg);
/* Destroys (as at shutdown) and frees; NULL is fine. */
void backend_free(struct backend *b);

#endif
