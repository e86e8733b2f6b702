/*
 * The backend contract. A backend makes one sandbox (a workspace plus a place to run
 * processes in it) and runs calls there. Every backend sits behind the same small ops table;
 * callers use backend_*() and never a backend's insides. State lives in the backend's private
 * struct (ops->priv_size bytes, zeroed, owned by struct backend), never in globals.
 *
 * Paths in requests are paths inside the sandbox: the workspace is /workspace on every backend.
 */
#ifndef SANDBOX_BACKEND_H
#define SANDBOX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../src/base/clock.h"
#include "../src/base/config.h"
#include "../src/base/err.h"

#define WORKSPACE "/workspace"

/* Return codes of start and run besides 0 and -1 (-1: this call failed, the sandbox is fine). */
#define BACKEND_LOST (-2) /* the sandbox is gone or broken: destroy it; a new one may be started */
#define BACKEND_ABSENT (-3) /* probe: the backend is not set up here at all (no key, no engine) */
#define BACKEND_CANCELLED (-4) /* start: the call that needed the sandbox was cancelled */

struct run_file {
	const char *path;  /* absolute, inside the sandbox */
	const void *data;  /* borrowed */
	size_t len;
	unsigned mode;
};

struct run_req {
	const char *const *argv;     /* argv[0] found on the sandbox's PATH */
	const char *const *env;      /* the whole environment of the program */
	const char *cwd;
	const struct run_file *files;/* written before the program starts */
	size_t nfiles;
	bool network;                /* this step may use the network (package installs) */
	bool sh_fallback;            /* argv[0] missing: run /bin/sh with the same arguments */
	int64_t deadline_ms;         /* monotonic ms (clock_ms()); past it the tree is killed */
	int cancel_fd;               /* readable once the call is cancelled; -1 for none */
	uint64_t cap;                /* per stream: past it, the full text is spilled */
	const char *spill_prefix;    /* in-sandbox path prefix of spill files, NULL for none */
	const char *changes_in;      /* a folder: rs->changed may say whether anything under it
	                              * changed during the run (NULL: none) */
	/* Output as it comes, in order per stream (1 stdout, 2 stderr). Called on the run's thread.
	 * buf NULL: len bytes passed that the backend did not keep (only ever past the cap). */
	void (*on_output)(void *ctx, int stream, const char *buf, size_t len);
	void *ctx;
};

struct run_res {
	bool started;                /* the program may have started: the call must not be repeated */
	int exit_code;               /* 124 on timeout, 128+n when killed by signal n */
	bool timed_out, cancelled;
	bool oom_killed;             /* the out-of-memory killer ended a process of the call */
	uint64_t memory_limit;       /* with oom_killed: the limit that was hit, bytes; 0 unknown */
	uint64_t bytes[2];           /* full byte counts of stdout and stderr */
	bool spilled[2];             /* <spill_prefix>.stdout / .stderr hold the full text */
	int spill_errno[2];          /* past the cap, the spill file could not be written: why */
	bool spill_cut;              /* a spill file stopped at --spill-max */
	int64_t started_ns;          /* the sandbox's wall clock when the program started, as file
	                              * times count (what it changed has a ctime at or after it);
	                              * 0 when unknown */
	int changed;                 /* under rq->changes_in: 1 something changed, 0 nothing did,
	                              * -1 not known (look); a backend that lists cheaply says -1 */
};

/* What lies under a listed folder: every name but folders (which are walked). */
struct ws_entry {
	char *path;                  /* relative to the listed folder; owned */
	uint64_t size;
	int64_t mtime_ns, ctime_ns;  /* the sandbox's wall clock */
	unsigned mode;               /* st_mode: the type and permission bits */
};

struct ws_list {
	struct ws_entry *v;          /* owned; free with ws_list_free */
	size_t n;
	bool truncated;              /* there was more than the list holds */
	bool skipped;                /* a folder too deep (WS_LIST_DEPTH) or unreadable was not walked */
};

#define WS_LIST_DEPTH 64

/* One file read from the sandbox. */
struct ws_file {
	int err;                     /* 0, or why it cannot be read: ENOENT nothing there, ELOOP a
	                              * symlink on the way or at the path, ENOTDIR ... */
	unsigned mode;               /* st_mode (what it is: only a regular file has data) */
	uint64_t size;               /* the whole file's size */
	unsigned char *data;         /* its first len bytes; owned; free with ws_file_free */
	size_t len;
};

void ws_list_free(struct ws_list *l);
void ws_file_free(struct ws_file *f);

struct backend;

/* Why a sandbox ends: what becomes of its workspace depends on it. */
enum backend_end {
	BACKEND_END_DROP,      /* idle, died, failed to start: removed (a --workspace folder stays) */
	BACKEND_END_CLEANUP,   /* cleanup_sandbox: removed, a --workspace folder emptied */
	BACKEND_END_SHUTDOWN,  /* the server stops: as DROP, or kept with --keep */
};

struct backend_ops {
	const char *name;
	size_t priv_size;
	bool workspace_dir;          /* --workspace is the workspace (else: said in its report) */
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
	/* Between calls: an fd that turns readable when the sandbox may have died (then call
	 * check), or -1. May be NULL. */
	int (*watch_fd)(const struct backend *b);
	/* Between calls: is the sandbox still whole (its processes, its workspace)? 0, or
	 * BACKEND_LOST with the reason in e; what died is reaped. May be NULL. */
	int (*check)(struct backend *b, struct err *e);
	/* Removes the sandbox and everything it made; the workspace as `how` says. Idempotent.
	 * 0, or -1 with e naming what could not be removed. */
	int (*destroy)(struct backend *b, enum backend_end how, struct err *e);
	/* For --check: one line per limit, saying whether and how it is enforced here. */
	void (*report)(struct backend *b, FILE *f);
	/* Removes what servers that died left behind (sandboxes, folders, cgroups). Called once
	 * at start-up, with no sandbox made; may be NULL. */
	void (*reap)(const struct config *cfg);
};

struct backend {
	const struct backend_ops *ops;
	const struct config *cfg;    /* borrowed, outlives the backend */
	void *priv;
	bool started;
	char sandbox_id[64];
};

/* The backends in auto's order of preference. NULL-terminated. */
extern const struct backend_ops *const backend_table[];

/* Looks a backend up by name; NULL if unknown. */
const struct backend_ops *backend_find(const char *name);

/* Caller frees with backend_free. */
int backend_new(struct backend **out, const struct backend_ops *ops, const struct config *cfg, struct err *e);
int backend_probe(struct backend *b, struct err *e);
int backend_start(struct backend *b, int cancel_fd, struct err *e);
int backend_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e);
int backend_put(struct backend *b, const struct run_file *f, struct err *e);
int backend_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		 struct err *e);
int backend_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e);
/* -1 when the backend has nothing to watch. */
int backend_watch_fd(const struct backend *b);
/* 0 when whole (or nothing to check), BACKEND_LOST. */
int backend_check(struct backend *b, struct err *e);
/* 0, or -1 with e naming what could not be removed (the backend is closed either way). */
int backend_destroy(struct backend *b, enum backend_end how, struct err *e);
void backend_report(struct backend *b, FILE *f);
/* Runs every backend's reap op. */
void backend_reap_all(const struct config *cfg);
/* Destroys (as at shutdown) and frees; NULL is fine. */
void backend_free(struct backend *b);

#endif
