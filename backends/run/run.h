/*
 * What the server asks of a sandbox and what it answers, the same on every backend: a run of
 * one program (struct run_req, run_res), a file written (run_file), the workspace listed and
 * read (ws_list, ws_file), and the codes a sandbox's operations return besides 0 and -1.
 *
 * Paths in requests are paths inside the sandbox: the workspace is /workspace on every backend.
 */
#ifndef SANDBOX_RUN_H
#define SANDBOX_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WORKSPACE "/workspace"

/* Return codes of start and run besides 0 and -1 (-1: this call failed, the sandbox is fine). */
#define BACKEND_LOST (-2) /* the sandbox is gone or broken: destroy it; a new one may be started */
#define BACKEND_ABSENT (-3) /* probe: the backend is not set up here at all (no key, no engine) */
#define BACKEND_CANCELLED (-4) /* start: the call that needed the sandbox was cancelled */
#define BACKEND_WOULD_FETCH (-5) /* start under --check (backend.checking): making the sandbox would
                                  * first fetch what --check does not (an image); e says what */

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
	const char *allow;           /* --allow-hosts narrowed for this call: "none", a list within it
	                              * (netpolicy_narrow), or NULL for the whole of it */
	bool sh_fallback;            /* argv[0] missing: run /bin/sh with the same arguments */
	/* argv is PYTHON SCRIPT ARGS..., and env prestart_env plus variables that do not change how
	 * Python starts: the backend may run it in an interpreter started ahead of the call with
	 * prestart_env (the agent's prestarted interpreter) rather than start python anew. */
	bool prestart;
	const char *const *prestart_env;
	int64_t deadline_ms;         /* monotonic ms (clock_ms()); past it the tree is killed */
	int cancel_fd;               /* readable once the call is cancelled; -1 for none */
	uint64_t cap;                /* per stream: past it, the full text is spilled */
	const char *spill_prefix;    /* in-sandbox path prefix of spill files, NULL for none */
	const char *changes_in;      /* a folder: rs->changed may say whether anything under it
	                              * changed during the run (NULL: none) */
	/* With changes_in: the backend may bring back with the run's end the listing of changes_in
	 * (at most changes_list_max names) and the first changes_files (by path) of the regular
	 * files there of at most changes_file_max bytes changed since the run started, so that the
	 * list and get of them that follow the run cost no round trip of their own (the answers are
	 * the same). 0: nothing comes back. */
	size_t changes_list_max, changes_files, changes_file_max;
	/* Output as it comes, in order per stream (1 stdout, 2 stderr). Called on the run's thread.
	 * buf NULL: len bytes passed that the backend did not keep (only ever past the cap). */
	void (*on_output)(void *ctx, int stream, const char *buf, size_t len);
	void *ctx;
	/* A background call (backend.h's process): when the program outlives bg_wait_ms it goes on
	 * as a background process (rs->bg_id), bound by bg_timeout_ms, refused when bg_max run
	 * already; bg_label names it in listings. deadline_ms bounds only the wait. */
	bool background;
	int64_t bg_wait_ms;
	uint64_t bg_timeout_ms;
	unsigned bg_max;
	const char *bg_label;
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
	bool prestarted;             /* the program ran in an interpreter started ahead (prestart) */
	bool exited_early;           /* answered as that interpreter exited, before its memory was freed */
	bool kept_code;              /* that interpreter loaded its starter's code as compiled before */
	int changed;                 /* under rq->changes_in: 1 something changed, 0 nothing did,
	                              * -1 not known (look); a backend that lists cheaply says -1 */
	bool stopped;                /* the backend ended it, knowing it could not succeed (see
	                              * unreachable) */
	char unreachable[300];       /* the install step: the package index host it could not
	                              * reach and why ("host:port: connection refused"); "" */
	char notice[768];            /* what the call's result should also say (what a --workspace
	                              * folder kept in step with the sandbox left out); "" for none */
	unsigned bg_id;              /* rq->background: the background process it became; 0: it ended */
};

/* A background process as the sandbox tells of it (backend.h's process). */
struct proc_info {
	unsigned id;
	bool running, timed_out, input_closed, cut;
	int status;                  /* wait status, once ended */
	int64_t started_ns;          /* the sandbox's wall clock */
	uint64_t duration_ms;
	char label[256];
	char prefix[256];            /* of its spill files: <prefix>.stdout, <prefix>.stderr */
	struct {
		uint64_t bytes;          /* all it wrote */
		uint64_t from;           /* the stream's byte where data starts */
		uint64_t file_start;     /* with file: the stream's byte where the file starts */
		bool file;               /* <prefix>.stdout/.stderr holds the stream from file_start */
		int file_errno;
		char *data;              /* owned; what it wrote since the last read */
		size_t len;
	} s[2];
};

enum proc_op { PROC_LIST, PROC_READ, PROC_INPUT, PROC_SIGNAL };

struct proc_req {
	enum proc_op op;
	unsigned id;
	const char *input;           /* PROC_INPUT: bytes to write, then close_input */
	size_t len;
	bool close_input;
	int sig;
};

struct proc_res {
	struct proc_info *v;         /* owned; free with proc_res_free */
	size_t n;
	size_t written;              /* PROC_INPUT */
};

void proc_res_free(struct proc_res *r);

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

/* Whether a watched tree changed since it was listed with a watch (backend_list_watch): */
#define WS_CHANGES_NONE 0      /* no: the listing is as it was */
#define WS_CHANGES_SOME 1      /* something under it may have: list it again to know */
#define WS_CHANGES_UNKNOWN 2   /* nothing says so: no watch, or not a whole one */

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

/* Why a sandbox ends: what becomes of its workspace depends on it. */
enum backend_end {
	BACKEND_END_DROP,      /* idle, died, failed to start: removed (a --workspace folder stays) */
	BACKEND_END_CLEANUP,   /* cleanup_sandbox: removed, a --workspace folder emptied */
	BACKEND_END_SHUTDOWN,  /* the server stops: as DROP, or kept with --keep */
};

#endif
