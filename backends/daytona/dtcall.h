/*
 * One call in a Daytona sandbox: the server's side of the call runner (runner.h), that is the
 * toolbox requests a run makes and what their answers mean. Every request is one synchronous
 * `process/execute` of the runner:
 *
 *   go    starts the call and waits in the sandbox until it ends (then the runner sweeps and
 *         the answer brings the output, the end and the sweep's word), or at most RUN_WAIT_MS,
 *         or 0.25 s once output has come (so progress keeps flowing). A short call costs this
 *         one request.
 *   poll  the same wait again, as long as the call runs; and at once for output left over
 *         (at most POLL_CHUNK bytes of each stream come in one answer).
 *   kill  when the call is cancelled (the request in flight is abandoned at once: its waiting
 *         runner is ended by the next request), when it outlives its deadline by KILL_GRACE_MS
 *         (a backstop: the runner keeps the deadline itself), and after any failure: it stops
 *         the call, waits for its end and sweeps.
 *
 * A call is over only with the sweep's word that nothing of it is left in the sandbox; when
 * that word cannot be had, the sandbox is dropped (BACKEND_LOST).
 */
#ifndef SANDBOX_DAYTONA_DTCALL_H
#define SANDBOX_DAYTONA_DTCALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"
#include "../run/run.h"

/* A request was abandoned because the cancel fd turned readable. */
#define DTCALL_CANCELLED 1

/* How a call reaches its sandbox: the backend's synchronous execute. */
struct dtcall_exec {
	/* Runs cmd with process/execute (timeout_s in the sandbox; the request a little longer),
	 * abandoning it at once when cancel_fd (>= 0) turns readable. 0 with *out (caller frees)
	 * the combined output and *code its exit code, DTCALL_CANCELLED, or -1 / BACKEND_LOST
	 * with e set. */
	int (*run)(void *ctx, const char *cmd, int timeout_s, size_t max_body, int cancel_fd, char **out,
		   int *code, struct err *e);
	void *ctx;
};

struct dtcall_req {
	const char *python;          /* the sandbox's python; borrowed */
	const char *keep;            /* the sandbox's own processes ("PID:START,..."), which a
	                              * sweep spares; borrowed */
	const char *dir;             /* the call's folder: RUN_DIR/<unguessable name> */
	bool uploaded;               /* the files are in dir as put-N already; else they go in
	                              * the go request */
	uint64_t spill_max;          /* --spill-max */
	/* The runner's SYNC word (runner.h; NULL: none): with it, the answer that brings the
	 * sweep's word also brings what the call changed in the workspace, which goes to *ws (a
	 * new reference; a later one replaces it: the runner took its listing again), and answers
	 * may be ws_body bytes larger. */
	const char *sync;
	json_t **ws;
	size_t ws_body;
	/* Where the runner's "out" goes (runner.h: rq->changes_in's listing and its changed small
	 * files, with the sweep's word), a new reference; NULL: not taken, and answers are no
	 * larger for it. */
	json_t **out;
	/* A background run (rq->background; NULL: none): the wait ends at until_ms; a program
	 * still running then is left running (detached, and not swept), and keeper gets its
	 * keeper's "PID:START" as go found it (runner.h), which later sweeps spare with all its
	 * descendants. */
	struct dtcall_bg {
		int64_t until_ms;
		bool detached;
		char keeper[64];
	} *bg;
};

/* How much larger an answer that brings "out" may be: what an honest runner can say, 1000 names
 * of at most 4,095 bytes (5,460 in base64, with their numbers: under 8 KiB each) and 20 files of
 * 64 KiB with their names (under 128 KiB each in base64), room for escaping included. Not a
 * listing query's 64 MiB: the code may forge the answer, which is parsed whole, and crafted
 * JSON takes ~46 times its size in memory. */
#define DTCALL_OUT_BODY (1000u * (8u << 10) + 20u * (128u << 10))

/* Runs rq in the sandbox, feeding rq->on_output as output comes. 0 with rs filled (a
 * cancelled call: rs->cancelled, the call stopped and swept), -1 with e set (the call failed,
 * the sandbox is fine), or BACKEND_LOST. rs->started is set before the first request. */
int dtcall_run(const struct dtcall_exec *x, const struct dtcall_req *cr, const struct run_req *rq,
	       struct run_res *rs, struct err *e);

#endif
