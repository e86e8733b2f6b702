/* One call in a Daytona sandbox (see dtcall.h). */
#include "dtcall.h"

#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/base64.h"
#include "../../src/base/buf.h"
#include "../../src/base/clock.h"
#include "../../src/base/log.h"
#include "runner.h"

#define RUN_WAIT_MS 2000           /* longest a go or poll waits in the sandbox */
#define KILL_WAIT_MS 5000          /* for the runner to stop a call once asked */
#define KILL_GRACE_MS 5000         /* past the deadline, before the server asks */
#define POLL_CHUNK (1u << 20)      /* bytes of each stream one answer may carry */
#define POLL_BODY (4 * POLL_CHUNK) /* base64 of two chunks, JSON, twice-escaped */
/* The execute's own timeout, beyond the runner's wait: its start, a sweep (3 s at most). */
#define EXEC_SLACK_S 15
/* And with a workspace sync: a walk of the workspace, the copies of its larger files. */
#define SYNC_SLACK_S 45

struct dtcall {
	const struct dtcall_exec *x;
	const struct dtcall_req *cr;
	const struct run_req *rq;
	struct run_res *rs;
	uint64_t fed[2];           /* bytes of each stream fed to rq->on_output */
	json_t *done;              /* the runner's status, once the call has ended; owned */
	bool swept;                /* the sweep said nothing of the call is left */
	bool got;                  /* the last answer brought output */
};

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* How long a go or poll waits in the sandbox: a background run's wait ends at its own time. */
static int wait_ms(const struct dtcall *c)
{
	if (!c->cr->bg)
		return RUN_WAIT_MS;
	int64_t left = c->cr->bg->until_ms - clock_ms();
	return left <= 0 ? 0 : left > RUN_WAIT_MS ? RUN_WAIT_MS : (int)left;
}

static size_t count(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* The go request's command (runner.h). Caller frees; NULL when out of memory. */
static char *go_command(const struct dtcall *c)
{
	const struct dtcall_req *cr = c->cr;
	const struct run_req *rq = c->rq;
	struct buf b = {0};
	int64_t left = rq->deadline_ms - clock_ms();
	runner_cmd(&b, cr->python, "go");
	runner_word(&b, cr->dir);
	buf_fmt(&b, " %d %u", wait_ms(c), POLL_CHUNK);
	runner_word(&b, cr->keep);
	runner_word(&b, cr->sync ? cr->sync : "-");
	if (cr->bg) /* its own timeout, from its start: the call's deadline bounds only the wait */
		left = rq->bg_timeout_ms > (uint64_t)1 << 40 ? (int64_t)1 << 40 : (int64_t)rq->bg_timeout_ms;
	buf_fmt(&b, " %llu %llu %lld", (unsigned long long)rq->cap, (unsigned long long)cr->spill_max,
		(long long)(left > 1 ? left : 1));
	runner_word(&b, rq->spill_prefix ? rq->spill_prefix : "");
	buf_fmt(&b, " %d", (rq->sh_fallback ? 1 : 0) | (cr->bg ? 2 : 0));
	runner_word(&b, rq->cwd ? rq->cwd : WORKSPACE);
	runner_word(&b, rq->changes_in ? rq->changes_in : "");
	buf_fmt(&b, " %zu", rq->nfiles);
	for (size_t i = 0; i < rq->nfiles; i++) {
		if (cr->uploaded)
			buf_fmt(&b, " %s/put-%zu", cr->dir, i);
		else
			buf_str(&b, " -");
		runner_word(&b, rq->files[i].path);
		buf_fmt(&b, " %o", rq->files[i].mode & 07777);
	}
	buf_fmt(&b, " %zu", count(rq->env));
	for (size_t i = 0; rq->env && rq->env[i]; i++)
		runner_word(&b, rq->env[i]);
	buf_str(&b, " --");
	for (size_t i = 0; rq->argv[i]; i++)
		runner_word(&b, rq->argv[i]);
	(cr->sync ? runner_end_ws : runner_end)(&b, NULL, rq->files, cr->uploaded ? 0 : rq->nfiles);
	return buf_take(&b, NULL);
}

/* A poll or kill request's command. Caller frees; NULL when out of memory. */
static char *wait_command(const struct dtcall *c, const char *mode)
{
	struct buf b = {0};
	bool kill = !strcmp(mode, "kill");
	runner_cmd(&b, c->cr->python, mode);
	runner_word(&b, c->cr->dir);
	buf_fmt(&b, " %d %u", kill ? KILL_WAIT_MS : wait_ms(c), POLL_CHUNK);
	runner_word(&b, c->cr->keep);
	runner_word(&b, c->cr->sync ? c->cr->sync : "-");
	buf_fmt(&b, " %llu %llu", (unsigned long long)c->fed[0], (unsigned long long)c->fed[1]);
	if (!kill)
		buf_fmt(&b, " %d", c->swept ? 1 : 0);
	(c->cr->sync ? runner_end_ws : runner_end)(&b, NULL, NULL, 0);
	return buf_take(&b, NULL);
}

/* Counts n bytes the runner dropped between the head and the tail window (only ever past the
 * cap). The number comes from inside the sandbox: counting costs the same whatever it is. */
static void feed_gap(const struct run_req *rq, int stream, uint64_t n)
{
	if (n && rq->on_output)
		rq->on_output(rq->ctx, stream, NULL, (size_t)n);
}

/* Feeds the output an answer brought ("s": a chunk of each stream from its offset). */
static void feed(struct dtcall *c, const json_t *s)
{
	c->got = false;
	for (int i = 0; i < 2; i++) {
		json_t *ch = json_array_get(s, (size_t)i);
		json_t *off = json_object_get(ch, "off");
		const char *data = json_str(ch, "data");
		if (!json_is_integer(off) || !data || json_integer_value(off) < 0)
			continue;
		uint64_t o = (uint64_t)json_integer_value(off);
		size_t dl = strlen(data);
		if (o < c->fed[i] || !dl)
			continue;
		unsigned char *buf = malloc(dl / 4 * 3 + 3);
		long n = buf ? b64_decode(data, dl, buf) : -1;
		if (n > 0) {
			feed_gap(c->rq, i + 1, o - c->fed[i]);
			if (c->rq->on_output)
				c->rq->on_output(c->rq->ctx, i + 1, (const char *)buf, (size_t)n);
			c->fed[i] = o + (uint64_t)n;
			c->got = true;
		}
		free(buf);
	}
}

/* Takes in the runner's answer: output, the end, the sweep's word. 0, -1 or BACKEND_LOST. */
static int answer(struct dtcall *c, char *out, int code, struct err *e)
{
	json_t *j = code == 0 ? json_loads(out, 0, NULL) : NULL;
	if (!json_is_object(j)) {
		size_t n = strlen(out);
		while (n && out[n - 1] == '\n')
			out[--n] = '\0';
		json_decref(j);
		return err_set(e, "the call runner in the sandbox failed: %.300s", *out ? out : "no answer");
	}
	feed(c, json_object_get(j, "s"));
	json_t *done = json_object_get(j, "done"), *sw = json_object_get(j, "sweep");
	json_t *ws = json_object_get(j, "ws");
	if (json_is_object(done) && !c->done)
		c->done = json_incref(done);
	const char *kp = json_str(j, "keeper");
	if (kp && c->cr->bg && strlen(kp) < sizeof c->cr->bg->keeper && strspn(kp, "0123456789:") == strlen(kp))
		snprintf(c->cr->bg->keeper, sizeof c->cr->bg->keeper, "%s", kp);
	json_t *o = json_object_get(j, "out");
	if (json_is_object(o) && c->cr->out) {
		json_decref(*c->cr->out);
		*c->cr->out = json_incref(o);
	}
	if (json_is_object(ws) && c->cr->ws) {
		json_decref(*c->cr->ws);
		*c->cr->ws = json_incref(ws);
	}
	int rc = 0;
	if (json_is_object(sw)) {
		const char *msg = json_str(sw, "msg");
		if (json_is_true(json_object_get(sw, "ok"))) {
			c->swept = true;
			log_msg(LOG_DEBUG, "daytona: %s", msg ? msg : "swept");
		} else {
			err_clear(e);
			err_set(e, "the call's processes could not all be killed (%.200s); the sandbox is dropped",
				msg ? msg : "no word");
			rc = BACKEND_LOST;
		}
	}
	json_decref(j);
	return rc;
}

/* One request of the call (go, poll or kill), abandoned when cancel_fd turns readable. */
static int ask(struct dtcall *c, const char *mode, int cancel_fd, struct err *e)
{
	bool go = !strcmp(mode, "go");
	char *cmd = go ? go_command(c) : wait_command(c, mode), *out = NULL;
	if (!cmd)
		return err_set(e, "out of memory");
	int wait_s = (!strcmp(mode, "kill") ? KILL_WAIT_MS : RUN_WAIT_MS) / 1000;
	int code = -1;
	int rc = c->x->run(c->x->ctx, cmd, wait_s + EXEC_SLACK_S + (c->cr->sync ? SYNC_SLACK_S : 0),
			   POLL_BODY + (c->cr->sync ? c->cr->ws_body : 0) + (c->cr->out ? DTCALL_OUT_BODY : 0), cancel_fd,
			   &out, &code, e);
	free(cmd);
	if (rc == 0)
		rc = answer(c, out, code, e);
	free(out);
	return rc;
}

/* Stops the call and sweeps: kill, once more when its answer is not the runner's (a runner of
 * an abandoned request may have ended it). 0, or BACKEND_LOST: nothing says the call is over. */
static int stop(struct dtcall *c, struct err *e)
{
	struct err ke = {""};
	int rc = ask(c, "kill", -1, &ke);
	if (rc == -1) {
		err_clear(&ke);
		rc = ask(c, "kill", -1, &ke);
	}
	if (rc == 0 && !c->swept)
		rc = err_set(&ke, "no word from the sweep");
	if (rc == 0)
		return 0;
	err_clear(e);
	err_set(e, "%s%s", ke.msg, rc == BACKEND_LOST ? "" : "; the call could not be ended, the sandbox is dropped");
	return BACKEND_LOST;
}

/* Whether the call is over for the server: ended, its output all in (or no longer wanted). */
static bool finished(struct dtcall *c)
{
	if (!c->done)
		return false;
	json_t *bytes = json_object_get(c->done, "bytes");
	bool all = true;
	for (int i = 0; i < 2; i++)
		all = all && c->fed[i] >= (uint64_t)json_integer_value(json_array_get(bytes, (size_t)i));
	if (all || c->rs->cancelled || json_str(c->done, "error"))
		return true;
	if (c->got)
		return false;
	/* Bytes counted but no longer in the window (only ever past the cap). */
	for (int i = 0; i < 2; i++) {
		uint64_t n = (uint64_t)json_integer_value(json_array_get(bytes, (size_t)i));
		if (c->fed[i] < n) {
			feed_gap(c->rq, i + 1, n - c->fed[i]);
			c->fed[i] = n;
		}
	}
	return true;
}

static bool cancel_pending(const struct run_req *rq)
{
	struct pollfd p = {rq->cancel_fd, POLLIN, 0};
	return rq->cancel_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* The run's result, from the runner's status. */
static void read_status(const struct run_req *rq, const json_t *done, struct run_res *rs)
{
	json_t *bytes = json_object_get(done, "bytes"), *sp = json_object_get(done, "spilled");
	json_t *se = json_object_get(done, "spill_errno");
	for (int i = 0; i < 2; i++) {
		json_int_t n = json_integer_value(json_array_get(bytes, (size_t)i));
		rs->bytes[i] = n > 0 ? (uint64_t)n : 0;
		rs->spilled[i] = rq->spill_prefix && json_is_true(json_array_get(sp, (size_t)i));
		rs->spill_errno[i] = (int)json_integer_value(json_array_get(se, (size_t)i));
	}
	rs->spill_cut = json_is_true(json_object_get(done, "spill_cut"));
	if (json_is_true(json_object_get(done, "oom_killed"))) {
		rs->oom_killed = true;
		json_int_t lim = json_integer_value(json_object_get(done, "memory_limit"));
		rs->memory_limit = lim > 0 ? (uint64_t)lim : 0;
	}
	rs->started_ns = json_integer_value(json_object_get(done, "started_ns"));
	json_t *ch = json_object_get(done, "changed");
	if (json_is_boolean(ch))
		rs->changed = json_is_true(ch);
	json_t *ec = json_object_get(done, "exit_code");
	if (json_is_true(json_object_get(done, "timed_out")))
		rs->timed_out = true;
	rs->exit_code = rs->timed_out ? 124 : json_is_integer(ec) ? (int)json_integer_value(ec) : 1;
}

/* Requests until the call is over: poll while it runs, kill on cancellation or far past the
 * deadline. 0, DTCALL_CANCELLED, -1 or BACKEND_LOST. */
static int follow(struct dtcall *c, struct err *e)
{
	const struct run_req *rq = c->rq;
	int rc = ask(c, "go", rq->cancel_fd, e);
	while (rc == 0 && !finished(c)) {
		if (c->cr->bg && !c->done && c->cr->bg->keeper[0] && clock_ms() >= c->cr->bg->until_ms) {
			c->cr->bg->detached = true; /* it goes on by itself: no request while it runs */
			return 0;
		}
		if (cancel_pending(rq))
			rc = DTCALL_CANCELLED;
		else if (c->done)
			rc = ask(c, "poll", -1, e); /* output left over: answered at once */
		else if (clock_ms() >= rq->deadline_ms + KILL_GRACE_MS) {
			c->rs->timed_out = true;
			rc = stop(c, e);
		} else
			rc = ask(c, "poll", rq->cancel_fd, e);
	}
	return rc;
}

int dtcall_run(const struct dtcall_exec *x, const struct dtcall_req *cr, const struct run_req *rq,
	       struct run_res *rs, struct err *e)
{
	struct dtcall c = {.x = x, .cr = cr, .rq = rq, .rs = rs};
	rs->started = true; /* from here on the command may run: never repeat it */
	int rc = follow(&c, e);
	if (rc == 0 && cr->bg && cr->bg->detached) {
		for (int i = 0; i < 2; i++)
			rs->bytes[i] = c.fed[i];
		return 0;
	}
	if (rc == DTCALL_CANCELLED) {
		rs->cancelled = true;
		rc = c.swept ? 0 : stop(&c, e);
	} else if (rc == -1 || (rc == 0 && !c.swept)) {
		/* Nothing the call started may outlive it: stop it, if it runs, and sweep. */
		struct err se = {""};
		if (stop(&c, &se) == BACKEND_LOST) {
			err_clear(e);
			err_set(e, "%s", se.msg);
			rc = BACKEND_LOST;
		}
	}
	const char *why = rc == 0 && !rs->cancelled ? json_str(c.done, "error") : NULL;
	if (why)
		rc = err_set(e, "%s", why);
	else if (rc == 0 && !rs->cancelled)
		read_status(rq, c.done, rs);
	json_decref(c.done);
	return rc;
}
