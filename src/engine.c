#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "log.h"
#include "output.h"
#include "sandbox.h"
#include "tools.h"

#define LAST_MAX 240 /* bytes of recent output kept for progress messages */

struct engine {
	const struct config *cfg;
	pthread_t worker;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, *tail;
	size_t queued;
	struct job *running;
	int cancel_fd;             /* eventfd: written to cancel the running call */
	bool stop;
	bool done;                 /* the worker has finished */
	unsigned long seq;
	struct sandbox sb;
	/* progress of the running call, under mu */
	char last[LAST_MAX];
	size_t last_len;
	int64_t next_progress_ms;
	long progress_n;
};

void job_free(struct job *j)
{
	if (!j)
		return;
	json_decref(j->id);
	json_decref(j->args);
	json_decref(j->progress_token);
	free(j);
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

static void drain_eventfd(int fd)
{
	uint64_t v;
	while (read(fd, &v, sizeof v) == (ssize_t)sizeof v)
		;
}

static void run_job(struct engine *g, struct job *j)
{
	struct tool_call tc = {.tool = j->tool, .args = j->args, .cancel_fd = g->cancel_fd, .seq = ++g->seq,
			       .on_output = on_output, .ctx = g};
	json_t *result = tools_run(&g->sb, &tc);
	/* The call is over: no progress may follow its response. */
	pthread_mutex_lock(&g->mu);
	g->running = NULL;
	pthread_mutex_unlock(&g->mu);
	if (tc.cancelled) {
		log_msg(LOG_INFO, "call %lu cancelled", tc.seq);
		rpc_batch_drop(j->batch);
		json_decref(result);
		return;
	}
	if (!result) {
		log_msg(LOG_ERROR, "call %lu: the result could not be built", tc.seq);
		rpc_respond(j->batch, rpc_error(j->id, RPC_INTERNAL_ERROR, "Internal error: the result could not be built", NULL));
		return;
	}
	rpc_respond(j->batch, rpc_result(j->id, result));
}

static void *worker_main(void *arg)
{
	struct engine *g = arg;
	/* Before anything else, what servers that died left behind goes. */
	backend_reap_all(g->cfg);
	pthread_mutex_lock(&g->mu);
	for (;;) {
		while (!g->head && !g->stop) {
			int64_t idle = sandbox_idle_deadline(&g->sb);
			if (idle < 0) {
				pthread_cond_wait(&g->cv, &g->mu);
				continue;
			}
			int64_t now = clock_ms();
			if (now >= idle) {
				pthread_mutex_unlock(&g->mu);
				sandbox_idle_expire(&g->sb);
				pthread_mutex_lock(&g->mu);
				continue;
			}
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			int64_t ns = ts.tv_nsec + (idle - now) % 1000 * 1000000;
			ts.tv_sec += (idle - now) / 1000 + ns / 1000000000;
			ts.tv_nsec = ns % 1000000000;
			pthread_cond_timedwait(&g->cv, &g->mu, &ts);
		}
		if (g->stop)
			break;
		struct job *j = g->head;
		g->head = j->next;
		if (!g->head)
			g->tail = NULL;
		g->queued--;
		g->running = j;
		g->last_len = 0;
		g->progress_n = 0;
		g->next_progress_ms = clock_ms() + 1000;
		drain_eventfd(g->cancel_fd);
		pthread_mutex_unlock(&g->mu);

		run_job(g, j);
		job_free(j);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	sandbox_shutdown(&g->sb);
	pthread_mutex_lock(&g->mu);
	g->done = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int engine_start(struct engine **out, const struct config *cfg, struct err *e)
{
	struct engine *g = calloc(1, sizeof *g);
	if (!g)
		return err_set(e, "out of memory");
	g->cfg = cfg;
	sandbox_init(&g->sb, cfg);
	pthread_mutex_init(&g->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &ca);
	pthread_condattr_destroy(&ca);
	g->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->cancel_fd < 0) {
		free(g);
		return err_sys(e, "eventfd");
	}
	int rc = pthread_create(&g->worker, NULL, worker_main, g);
	if (rc) {
		close(g->cancel_fd);
		free(g);
		errno = rc;
		return err_sys(e, "pthread_create");
	}
	*out = g;
	return 0;
}

int engine_submit(struct engine *g, struct job *j)
{
	pthread_mutex_lock(&g->mu);
	if (g->stop || g->queued >= g->cfg->queue_max) {
		pthread_mutex_unlock(&g->mu);
		return -1;
	}
	j->next = NULL;
	if (g->tail)
		g->tail->next = j;
	else
		g->head = j;
	g->tail = j;
	g->queued++;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

static void kick_running(struct engine *g)
{
	uint64_t one = 1;
	(void)!write(g->cancel_fd, &one, sizeof one);
}

void engine_cancel(struct engine *g, const json_t *request_id)
{
	if (!request_id)
		return;
	struct job *dropped = NULL;
	pthread_mutex_lock(&g->mu);
	if (g->running && json_equal(g->running->id, request_id)) {
		kick_running(g);
	} else {
		for (struct job **pp = &g->head; *pp; pp = &(*pp)->next) {
			if (!json_equal((*pp)->id, request_id))
				continue;
			dropped = *pp;
			*pp = dropped->next;
			if (g->tail == dropped) {
				g->tail = NULL;
				for (struct job *k = g->head; k; k = k->next)
					g->tail = k;
			}
			g->queued--;
			break;
		}
	}
	pthread_mutex_unlock(&g->mu);
	if (dropped) {
		log_msg(LOG_INFO, "a queued call was cancelled before it ran");
		rpc_batch_drop(dropped->batch);
		job_free(dropped);
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
	if (!j || !j->progress_token || clock_ms() < g->next_progress_ms) {
		pthread_mutex_unlock(&g->mu);
		return;
	}
	g->next_progress_ms += 1000;
	long n = ++g->progress_n;
	char msg[400];
	last_line(g->last, g->last_len, msg, sizeof msg);
	json_t *params = json_pack("{s:O, s:I}", "progressToken", j->progress_token, "progress", (json_int_t)n);
	pthread_mutex_unlock(&g->mu);
	json_object_set_new(params, "message", json_string(*msg ? msg : "running"));
	rpc_notify("notifications/progress", params);
}

int engine_stop(struct engine *g, int64_t deadline_ms)
{
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	struct job *q = g->head;
	g->head = g->tail = NULL;
	g->queued = 0;
	if (g->running)
		kick_running(g);
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	while (q) {
		struct job *n = q->next;
		rpc_batch_drop(q->batch);
		job_free(q);
		q = n;
	}
	int rc = 0;
	pthread_mutex_lock(&g->mu);
	while (!g->done) {
		int64_t left = deadline_ms - clock_ms();
		if (left <= 0) {
			rc = -1;
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t ns = ts.tv_nsec + left % 1000 * 1000000;
		ts.tv_sec += left / 1000 + ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	pthread_mutex_unlock(&g->mu);
	if (rc == 0) {
		pthread_join(g->worker, NULL);
		close(g->cancel_fd);
		pthread_mutex_destroy(&g->mu);
		pthread_cond_destroy(&g->cv);
		free(g);
	}
	return rc;
}
