/*
 * The engine runs jobs (tool calls, and resources requests, which read the sandbox) strictly
 * one at a time, in arrival order, on one worker thread, while the reader thread stays free to
 * answer pings, take cancellations and queue more (up to --queue waiting). It owns the sandbox
 * (only the worker touches it), removes it when idle and at shutdown, and between calls
 * notices at once when it died.
 *
 * The engine knows nothing of the wire: a job's outcome goes back through the job_reply its
 * protocol gave it. Nothing about a job is sent after its response, and nothing at all after
 * the client cancelled it: progress and logs are handed over under the engine's lock, and only
 * while the job runs and is not cancelled.
 */
#ifndef SANDBOX_ENGINE_H
#define SANDBOX_ENGINE_H

#include <bsd/sys/queue.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../base/config.h"
#include "../base/err.h"

struct engine;
struct job;

enum job_kind {
	JOB_TOOL,                  /* tools/call */
	JOB_RESOURCES_LIST,        /* resources/list: args are its params */
	JOB_RESOURCES_READ,        /* resources/read: args are its params */
};

/* How a job's outcome goes back: the protocol's, called on the worker thread unless said. */
struct job_reply {
	/* The response: result (stolen). `after` follows once it is on its way. */
	void (*result)(struct job *j, json_t *result);
	/* changed: the call changed the workspace since the client listed it, so the client is
	 * told (notifications/resources/list_changed), after the response. */
	void (*after)(struct job *j, bool changed);
	/* It failed without a result: an error response (code 0: an internal error). */
	void (*error)(struct job *j, int code, const char *msg);
	/* It was cancelled (also from the reader thread): nothing is sent. */
	void (*drop)(struct job *j);
	/* While it runs, under the engine's lock: progress (n counts up from 1; msg is the latest
	 * line of output, or "running") and a log line at or above the level it asked for. */
	void (*progress)(struct job *j, long n, const char *msg);
	void (*log)(struct job *j, int level, const char *msg);
	/* Frees the job, with what the protocol keeps in it. */
	void (*free)(struct job *j);
};

/* A job, made by the protocol (usually inside a struct of its own) and taken by engine_submit. */
struct job {
	const struct job_reply *reply;
	enum job_kind kind;
	json_t *id;                /* the request's id, for engine_cancel; the protocol's */
	int tool;                  /* enum tool_id */
	json_t *args;              /* the protocol's; the worker reads it while the job runs */
	bool progress;             /* the client asked for progress */
	bool links;                /* the client takes resource_link content (tools.h) */
	bool notes;                /* the client can be told the workspace changed */
	int log_level;             /* its lines' level (log.h: a level, LOG_OFF, LOG_AS_CLIENT) */
	bool cancelled;            /* the client cancelled it while it ran: nothing more is sent */
	STAILQ_ENTRY(job) queue;
};

/* What the engine may know of the client's side of the wire: drained() is true once nothing
 * the protocol handed over waits to be written to the client, and the protocol calls
 * engine_output_drained (from any thread) each time that becomes so. */
struct engine_output {
	bool (*drained)(void);
};

/* Starts the worker. Caller stops it with engine_stop. With an output (NULL: none), what the
 * sandbox starts between calls (sandbox_settle: the next prestarted interpreter) waits, after a
 * call, until its answer has been written, SETTLE_WAIT_MS at most and not at all when another
 * call waits: a client taking in a large answer does not share its CPU with that start. */
int engine_start(struct engine **out, const struct config *cfg, const struct engine_output *output, struct err *e);
#define SETTLE_WAIT_MS 1000

/* Everything handed over has been written to the client (see struct engine_output). */
void engine_output_drained(struct engine *g);

/* Queues a job; takes it on success. -1 when the queue is full (the job is not taken). */
int engine_submit(struct engine *g, struct job *j);

/* notifications/cancelled: kills the running job with that id or drops it from the queue.
 * No response is sent for it. Unknown ids are ignored. */
void engine_cancel(struct engine *g, const json_t *request_id);

/* Called by the reader at least every 250 ms: sends progress for the running call. */
void engine_tick(struct engine *g);

/* True while a request handed over is queued, or runs and has not had its answer handed back
 * yet: what a shutdown on EOF waits for (within its budget) before engine_stop. */
bool engine_pending(struct engine *g);

/* Kills the running call, drops the queue, removes the sandbox and joins the worker, all
 * within deadline_ms (monotonic); returns -1 if the worker did not finish in time. Each request
 * that gets no answer so (the running one, the queued ones) is logged with its id and method,
 * one line each. */
int engine_stop(struct engine *g, int64_t deadline_ms);

#endif
