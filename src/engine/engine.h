/*
 * The engine runs tool calls strictly one at a time, in arrival order, on one worker thread,
 * while the reader thread stays free to answer pings, take cancellations and queue more calls
 * (up to --queue waiting). It owns the sandbox (only the worker touches it), removes it when
 * idle and at shutdown, and between calls notices at once when it died.
 *
 * Nothing about a request is sent after its response, and nothing at all after the client
 * cancelled it.
 */
#ifndef SANDBOX_ENGINE_H
#define SANDBOX_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../base/config.h"
#include "../protocol/era.h"
#include "../base/err.h"
#include "../protocol/rpc.h"

struct engine;

enum job_kind {
	JOB_TOOL,                  /* tools/call */
	JOB_RESOURCES_LIST,        /* resources/list: args are its params */
	JOB_RESOURCES_READ,        /* resources/read: args are its params */
};

struct job {
	enum job_kind kind;
	json_t *id;                /* the request id, owned */
	struct rpc_batch *batch;   /* where the response goes; NULL: straight out */
	int tool;                  /* enum tool_id */
	json_t *args;              /* owned */
	json_t *progress_token;    /* owned; NULL when the client asked for no progress */
	struct era era;            /* how the request was read, and how its result and logs go out */
	bool cancelled;            /* the client cancelled it while it ran: nothing more is sent */
	struct job *next;
};

/* Starts the worker. Caller stops it with engine_stop. */
int engine_start(struct engine **out, const struct config *cfg, struct err *e);

/* Queues a call (or a resources request: it reads the sandbox, so it waits its turn); takes
 * the job on success. -1 when the queue is full (job not taken). Once a client listed the
 * resources, a call that changes the listed tree is followed by
 * notifications/resources/list_changed (legacy sessions: the modern revision has no session
 * to send it in). */
int engine_submit(struct engine *g, struct job *j);

/* notifications/cancelled: kills the running call with that id or drops it from the queue.
 * No response is sent for it. Unknown ids are ignored. */
void engine_cancel(struct engine *g, const json_t *request_id);

/* Called by the reader at least every 250 ms: sends progress for the running call. */
void engine_tick(struct engine *g);

/* Kills the running call, drops the queue, removes the sandbox and joins the worker, all
 * within deadline_ms (monotonic); returns -1 if the worker did not finish in time. */
int engine_stop(struct engine *g, int64_t deadline_ms);

void job_free(struct job *j);

#endif
