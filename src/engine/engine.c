#include "engine.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/clock.h"
#include "../base/jsonw.h"
#include "../tools/resources.h"
#include "../base/log.h"
#include "../base/title.h"
#include "../base/utf8.h"
#include "../sandbox/sandbox.h"
#include "../tools/tools.h"

#define LAST_MAX 240 /* bytes of recent output kept for progress messages */
/* A response waits this long after its call's last progress notification. The official
 * TypeScript SDK handles a notification a step after the read that brought it, and a response
 * at once: a progress notification read together with its response found its handler gone
 * ("unknown token"). Apart by this much, a client that keeps up reads them apart. */
#define PROGRESS_GAP_MS 100

struct engine {
	const struct config *cfg;
	pthread_t worker;
	pthread_mutex_t mu;
	pthread_cond_t cv;         /* the worker has finished */
	STAILQ_HEAD(, job) queue;
	size_t queued;
	struct job *running;
	int cancel_fd;             /* eventfd: written to cancel the running call */
	int wake_fd;               /* eventfd: written when the idle worker has something to do */
	/* Each is written and read under mu only (kick_set, drain_set): whether it holds a write not
	 * yet read, so that one that holds none is not read on a call's way. */
	bool cancel_set, wake_set;
	int drained_fd;            /* eventfd: written when the output has been written */
	const struct engine_output *output;
	int64_t settle_by;         /* the sandbox settles by then, or sooner once the output has been
	                            * written; 0: nothing to settle (the worker's alone) */
	bool stop;
	bool preparing;            /* the worker is making a sandbox ahead of the next call */
	bool done;                 /* the worker has finished */
	bool handling;             /* the worker took a job and has not freed it yet */
	unsigned long seq;
	struct sandbox sb;         /* the worker's alone */
	/* progress of the running call, under mu */
	char last[LAST_MAX];
	size_t last_len;
	int64_t next_progress_ms;
	int64_t progress_at;       /* when its last progress was handed over, or 0 */
	long progress_n;
	/* the worker's alone: the client listed the resources, and the tree's digest then */
	bool watch_tree;
	uint64_t tree_digest;
	struct resources_pager pager; /* the worker's alone: the listing being paged */
	/* The process tool's requests: answered in order by a thread of their own, never behind
	 * the queue of calls (tools.h's tools_process). Under mu. */
	pthread_t side;
	bool side_started;
	pthread_cond_t side_cv;
	STAILQ_HEAD(, job) side_queue;
	size_t side_queued;
};

static void *side_main(void *arg)
{
	struct engine *g = arg;
	pthread_mutex_lock(&g->mu);
	for (;;) {
		struct job *j = STAILQ_FIRST(&g->side_queue);
		if (!j && g->stop)
			break;
		if (!j) {
			pthread_cond_wait(&g->side_cv, &g->mu);
			continue;
		}
		STAILQ_REMOVE_HEAD(&g->side_queue, queue);
		g->side_queued--;
		bool stop = g->stop;
		pthread_mutex_unlock(&g->mu);
		if (stop) {
			j->reply->drop(j);
		} else {
			json_t *r = tools_process(&g->sb, j->args);
			if (r) {
				j->reply->result(j, r);
				j->reply->after(j, false);
			} else {
				j->reply->error(j, 0, "Internal error: the result could not be built");
			}
		}
		j->reply->free(j);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void on_output(void *ctx, int stream, const char *buf, size_t len)
{
	struct engine *g = ctx;
	(void)stream;
	if (!buf)
		return; /* bytes that passed unseen: nothing to show */
	pthread_mutex_lock(&g->mu);
	if (len >= LAST_MAX) {
		memcpy(g->last, buf + len - LAST_MAX, LAST_MAX);
		g->last_len = LAST_MAX;
	} else {
		size_t keep = g->last_len + len > LAST_MAX ? LAST_MAX - len : g->last_len;
		memmove(g->last, g->last + g->last_len - keep, keep);
		memcpy(g->last + keep, buf, len);
		g->last_len = keep + len;
	}
	pthread_mutex_unlock(&g->mu);
}

/* One read takes all that was written to an eventfd (none is EFD_SEMAPHORE). */
static void drain_eventfd(int fd)
{
	uint64_t v;
	(void)!read(fd, &v, sizeof v);
}

static void kick(int fd)
{
	uint64_t one = 1;
	(void)!write(fd, &one, sizeof one);
}

/* cancel_fd and wake_fd, with mu held. */
static void kick_set(int fd, bool *set)
{
	kick(fd);
	*set = true;
}

static void drain_set(int fd, bool *set)
{
	if (*set)
		drain_eventfd(fd);
	*set = false;
}

/* Where the server's lines go while a request runs: to the client at the level the request
 * asked for in its _meta (2026-07-28; none when it asked for none), or at the client's level
 * (legacy). Like progress, sent under mu only while that request runs and was not cancelled,
 * so nothing follows its response or its cancellation. */
static void job_log(void *ctx, int level, const char *msg)
{
	struct engine *g = ctx;
	pthread_mutex_lock(&g->mu);
	if (g->running && !g->running->cancelled)
		g->running->reply->log(g->running, level, msg);
	pthread_mutex_unlock(&g->mu);
}

/* resources/list and resources/read, between calls. */
static void run_resources(struct engine *g, struct job *j)
{
	int code = 0; /* an internal error */
	char msg[600] = "Internal error";
	json_t *r;
	if (j->kind == JOB_RESOURCES_LIST) {
		uint64_t d;
		r = resources_list_digest(&g->sb, &g->pager, j->args, &d, &code, msg, sizeof msg);
		if (r) {
			g->watch_tree = true;
			g->tree_digest = d;
		}
	} else {
		r = resources_read(&g->sb, j->args, &code, msg, sizeof msg);
	}
	pthread_mutex_lock(&g->mu);
	g->running = NULL;
	bool cancelled = j->cancelled;
	pthread_mutex_unlock(&g->mu);
	if (cancelled) {
		j->reply->drop(j);
		json_decref(r);
	} else if (r) {
		j->reply->result(j, r);
		j->reply->after(j, false);
	} else {
		j->reply->error(j, code, msg);
	}
}

/* After a call, for a client that listed the resources: did the listed tree change? */
static bool tree_changed(struct engine *g, const struct job *j)
{
	if (!g->watch_tree || !j->notes)
		return false;
	/* The walk, whose cost grows with the tree, only when the sandbox's watch cannot say. */
	if (!resources_maybe_changed(&g->sb))
		return false;
	uint64_t d = resources_digest(&g->sb);
	if (d == g->tree_digest)
		return false;
	g->tree_digest = d;
	return true;
}

/* What `ps` shows between jobs. */
static void title_idle(const struct engine *g)
{
	const char *id = sandbox_id(&g->sb);
	title_set("idle, %s%s%s", id ? "sandbox " : "no sandbox", id ? id : "",
		  sandbox_made_ahead(&g->sb) ? " made ahead" : "");
}

/* Makes a sandbox ahead of the next call (sandbox.h), with mu released: a job that comes
 * meanwhile waits for it, which is what it wants, but not for the priming (the job starts what
 * it needs itself); a stop cancels it. Called and returns with mu held. */
static void prepare(struct engine *g)
{
	g->preparing = true;
	drain_set(g->cancel_fd, &g->cancel_set);
	pthread_mutex_unlock(&g->mu);
	title_set("making a sandbox ahead of the next call");
	/* wake_fd turns readable when a job is submitted: it is drained only when idle. */
	tools_prepare(&g->sb, g->cancel_fd, g->wake_fd);
	title_idle(g);
	pthread_mutex_lock(&g->mu);
	g->preparing = false;
}

/* Holds a response until PROGRESS_GAP_MS have passed since its call's last progress. */
static void progress_gap(unsigned long seq, int64_t progress_at)
{
	clock_sleep_ms(progress_at + PROGRESS_GAP_MS - clock_ms());
	log_msg(LOG_DEBUG, "call %lu: answered %lld ms after its last progress notification", seq,
		(long long)(clock_ms() - progress_at));
}

static void run_job(struct engine *g, struct job *j)
{
	if (j->kind != JOB_TOOL) {
		title_set("reading the workspace (%s)", j->kind == JOB_RESOURCES_LIST ? "resources/list" : "resources/read");
		run_resources(g, j);
		return;
	}
	resources_pager_drop(&g->pager); /* the call may change the tree: later pages walk again */
	const char *id = sandbox_id(&g->sb);
	title_set("running call %lu (%s)%s%s", g->seq + 1, tools_name(j->tool), id ? " in " : "", id ? id : "");
	struct tool_call tc = {.tool = j->tool, .args = j->args, .cancel_fd = g->cancel_fd, .seq = ++g->seq,
			       .links = j->links, .on_output = on_output, .ctx = g};
	log_route_request(job_log, g, j->log_level);
	json_t *result = tools_run(&g->sb, &tc);
	/* The call is over. Progress is sent under mu only while `running` is this job, so once
	 * it is cleared nothing about the request can follow its response. */
	pthread_mutex_lock(&g->mu);
	g->running = NULL;
	bool cancelled = tc.cancelled || j->cancelled;
	int64_t progress_at = g->progress_at;
	pthread_mutex_unlock(&g->mu);
	log_route_request(NULL, NULL, LOG_OFF);
	if (cancelled) {
		log_local(LOG_INFO, "call %lu cancelled", tc.seq);
		j->reply->drop(j);
		json_decref(result);
		return;
	}
	if (progress_at)
		progress_gap(tc.seq, progress_at);
	if (!result) {
		log_msg(LOG_ERROR, "call %lu: the result could not be built", tc.seq);
		j->reply->error(j, 0, "Internal error: the result could not be built");
		return;
	}
	/* What the call changed is told after its response. */
	j->reply->result(j, result);
	j->reply->after(j, tree_changed(g, j));
}

/* Waits, with mu released, until a job or a stop may be there, the sandbox turns idle, or its
 * watch fd says it may have died; handles the last two. Called and returns with mu held. */
static void idle_wait(struct engine *g)
{
	int64_t idle = sandbox_idle_deadline(&g->sb);
	int wfd = sandbox_watch_fd(&g->sb);
	pthread_mutex_unlock(&g->mu);
	struct pollfd p[3] = {{g->wake_fd, POLLIN, 0}, {wfd, POLLIN, 0}, {g->settle_by ? g->drained_fd : -1, POLLIN, 0}};
	int64_t until = g->settle_by && (idle < 0 || g->settle_by < idle) ? g->settle_by : idle;
	int64_t left = until < 0 ? -1 : until - clock_ms();
	int r = poll(p, 3, left < 0 ? -1 : left > 3600000 ? 3600000 : (int)left);
	if (r > 0 && p[2].revents)
		drain_eventfd(g->drained_fd);
	if (r > 0 && wfd >= 0 && p[1].revents)
		sandbox_check(&g->sb); /* a sandbox that died is reaped now, not at the next call */
	if (idle >= 0 && clock_ms() >= idle)
		sandbox_idle_expire(&g->sb);
	title_idle(g);
	pthread_mutex_lock(&g->mu);
	/* Read under mu, where it is written: a kick that came after the poll is taken too, and
	 * what it was for is in the queue, which the caller looks at next. */
	if (r > 0 && p[0].revents)
		drain_set(g->wake_fd, &g->wake_set);
}

static void *worker_main(void *arg)
{
	struct engine *g = arg;
	/* Before anything else, what servers that died left behind goes. */
	sandbox_reap_leftovers(g->cfg);
	title_idle(g);
	pthread_mutex_lock(&g->mu);
	for (;;) {
		if (g->stop)
			break;
		struct job *j = STAILQ_FIRST(&g->queue);
		if (g->settle_by) {
			/* The last answer on its way: what the sandbox keeps off a call's path starts once
			 * the client has it, or at once for a call that waits. */
			if (!j && !g->output->drained() && clock_ms() < g->settle_by) {
				idle_wait(g);
				continue;
			}
			g->settle_by = 0;
			pthread_mutex_unlock(&g->mu);
			sandbox_settle(&g->sb);
			pthread_mutex_lock(&g->mu);
			continue;
		}
		if (!j && sandbox_ahead_due(&g->sb)) {
			prepare(g);
			continue;
		}
		if (!j) {
			idle_wait(g);
			continue;
		}
		STAILQ_REMOVE_HEAD(&g->queue, queue);
		g->queued--;
		g->handling = true;
		/* Its kick is spent (submits kick under mu): a sandbox made ahead after it sees only
		 * later requests on wake_fd. */
		if (!g->queued)
			drain_set(g->wake_fd, &g->wake_set);
		g->running = j;
		g->last_len = 0;
		g->progress_n = 0;
		g->progress_at = 0;
		g->next_progress_ms = clock_ms() + 1000;
		drain_set(g->cancel_fd, &g->cancel_set);
		pthread_mutex_unlock(&g->mu);

		run_job(g, j);
		j->reply->free(j);
		pthread_mutex_lock(&g->mu);
		g->handling = false;
		pthread_mutex_unlock(&g->mu);
		/* Its answer, if any, is on its way: the sandbox may start what waits for that, once
		 * the client has it. */
		if (g->output)
			g->settle_by = clock_ms() + SETTLE_WAIT_MS;
		else
			sandbox_settle(&g->sb);
		title_idle(g);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	title_set("shutting down");
	sandbox_shutdown(&g->sb);
	pthread_mutex_lock(&g->mu);
	g->done = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int engine_start(struct engine **out, const struct config *cfg, const struct engine_output *output, struct err *e)
{
	struct engine *g = calloc(1, sizeof *g);
	if (!g)
		return err_set(e, "out of memory");
	g->cfg = cfg;
	g->output = output;
	g->cancel_fd = g->wake_fd = g->drained_fd = -1;
	STAILQ_INIT(&g->queue);
	STAILQ_INIT(&g->side_queue);
	sandbox_init(&g->sb, cfg);
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &ca);
	pthread_cond_init(&g->side_cv, &ca);
	pthread_condattr_destroy(&ca);
	g->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g->drained_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int rc = g->cancel_fd < 0 || g->wake_fd < 0 || g->drained_fd < 0 ? errno
									 : pthread_create(&g->worker, NULL, worker_main, g);
	if (rc) {
		if (g->cancel_fd >= 0)
			close(g->cancel_fd);
		if (g->wake_fd >= 0)
			close(g->wake_fd);
		if (g->drained_fd >= 0)
			close(g->drained_fd);
		sandbox_shutdown(&g->sb);
		free(g);
		errno = rc;
		return err_sys(e, "starting the engine");
	}
	g->side_started = pthread_create(&g->side, NULL, side_main, g) == 0;
	*out = g;
	return 0;
}

void engine_output_drained(struct engine *g)
{
	kick(g->drained_fd);
}

int engine_submit(struct engine *g, struct job *j)
{
	pthread_mutex_lock(&g->mu);
	if (j->kind == JOB_TOOL && j->tool == TOOL_PROCESS && g->side_started) {
		if (g->stop || g->side_queued >= g->cfg->queue_max) {
			pthread_mutex_unlock(&g->mu);
			return -1;
		}
		STAILQ_INSERT_TAIL(&g->side_queue, j, queue);
		g->side_queued++;
		pthread_cond_signal(&g->side_cv);
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	if (g->stop || g->queued >= g->cfg->queue_max) {
		pthread_mutex_unlock(&g->mu);
		return -1;
	}
	STAILQ_INSERT_TAIL(&g->queue, j, queue);
	g->queued++;
	kick_set(g->wake_fd, &g->wake_set);
	if (g->preparing)
		log_msg(LOG_DEBUG, "a request came while the sandbox is made ahead: it waits for the sandbox, not for "
				   "its priming");
	pthread_mutex_unlock(&g->mu);
	return 0;
}

void engine_cancel(struct engine *g, const json_t *request_id)
{
	if (!request_id)
		return;
	struct job *dropped = NULL;
	pthread_mutex_lock(&g->mu);
	if (g->running && json_equal(g->running->id, request_id)) {
		/* From now on nothing more is sent about it, whatever the call still does. */
		g->running->cancelled = true;
		kick_set(g->cancel_fd, &g->cancel_set);
	} else {
		STAILQ_FOREACH(dropped, &g->queue, queue)
			if (json_equal(dropped->id, request_id))
				break;
		if (dropped) {
			STAILQ_REMOVE(&g->queue, dropped, job, queue);
			g->queued--;
		}
	}
	pthread_mutex_unlock(&g->mu);
	if (dropped) {
		log_local(LOG_INFO, "a queued call was cancelled before it ran");
		dropped->reply->drop(dropped);
		dropped->reply->free(dropped);
	}
}

/* The last non-empty line of recent output, shortened for a progress message. */
static void last_line(const char *buf, size_t len, char *out, size_t n)
{
	size_t end = len;
	while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start > 0 && buf[start - 1] != '\n')
		start--;
	size_t l = end - start, ol;
	if (l > 100)
		l = 100;
	char *clean = utf8_sanitize(buf + start, l, &ol);
	snprintf(out, n, "%s", clean ? clean : "");
	free(clean);
}

void engine_tick(struct engine *g)
{
	pthread_mutex_lock(&g->mu);
	struct job *j = g->running;
	if (j && !j->cancelled && j->progress && clock_ms() >= g->next_progress_ms) {
		g->next_progress_ms += 1000;
		char msg[400];
		last_line(g->last, g->last_len, msg, sizeof msg);
		/* Handed over under mu: see run_job. */
		j->reply->progress(j, ++g->progress_n, *msg ? msg : "running");
		g->progress_at = clock_ms();
	}
	pthread_mutex_unlock(&g->mu);
}

bool engine_pending(struct engine *g)
{
	pthread_mutex_lock(&g->mu);
	bool p = g->handling || g->queued || g->side_queued;
	pthread_mutex_unlock(&g->mu);
	return p;
}

/* Says in the log that j gets no answer: its id as the client sent it, and its method. */
static void log_unanswered(const struct job *j, const char *why)
{
	struct buf b = {0};
	jsonw_dump(j->id, &b);
	const char *method = j->kind == JOB_TOOL ? "tools/call" : j->kind == JOB_RESOURCES_LIST ? "resources/list"
											 : "resources/read";
	log_local(LOG_NOTICE, "shutting down: request %.200s (%s%s%s) not answered: %s", b.p && !b.oom ? b.p : "?",
		  method, j->kind == JOB_TOOL ? " " : "", j->kind == JOB_TOOL ? tools_name(j->tool) : "", why);
	buf_free(&b);
}

int engine_stop(struct engine *g, int64_t deadline_ms)
{
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	struct job *q = STAILQ_FIRST(&g->queue);
	STAILQ_INIT(&g->queue);
	g->queued = 0;
	if (g->running && !g->running->cancelled) {
		/* Whatever it does now, it is not answered: its result would come too late. */
		g->running->cancelled = true;
		log_unanswered(g->running, "it was still running");
	}
	if (g->running || g->preparing)
		kick_set(g->cancel_fd, &g->cancel_set);
	kick_set(g->wake_fd, &g->wake_set);
	pthread_cond_broadcast(&g->side_cv);
	pthread_mutex_unlock(&g->mu);
	while (q) {
		struct job *n = STAILQ_NEXT(q, queue);
		log_unanswered(q, "it had not started");
		q->reply->drop(q);
		q->reply->free(q);
		q = n;
	}
	int rc = 0;
	pthread_mutex_lock(&g->mu);
	while (!g->done) {
		if (clock_ms() >= deadline_ms) {
			rc = -1;
			break;
		}
		struct timespec ts = clock_at(deadline_ms);
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	if (rc == 0) {
		pthread_join(g->worker, NULL);
		if (g->side_started)
			pthread_join(g->side, NULL);
		pthread_cond_destroy(&g->side_cv);
		close(g->cancel_fd);
		close(g->wake_fd);
		close(g->drained_fd);
		pthread_mutex_destroy(&g->mu);
		pthread_cond_destroy(&g->cv);
		resources_pager_drop(&g->pager);
		free(g);
	}
	return rc;
}
