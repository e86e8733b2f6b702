/*
 * Python sessions (call.h's session_run): one interpreter per name, running agent/session.py
 * as a background process of the sandbox (tools.h's process). A call writes its cell, its
 * request and its files in one batch, wakes the interpreter with a line on its stdin, and reads
 * its output through the process requests until the cell's result file appears.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "../base/clock.h"
#include "../base/embed.h"
#include "../base/jsonw.h"
#include "../base/log.h"
#include "call.h"
#include "inputs.h"
#include "output.h"
#include "result.h"

#include <poll.h>

#define POLL_MIN_US 200        /* a cell's end is looked for this soon after its start, */
#define POLL_MAX_US 5000       /* then twice as late each time, up to this */
#define INTERRUPT_MS 1000      /* a cell interrupted at its timeout has this long to stop */

/* Reads what the session wrote since the last read into col. 1 running, 0 ended (*status
 * set), -1 when it cannot be asked (e set). */
static int drain(struct sandbox *sb, unsigned id, struct capture *col, int *status, bool *timed_out, struct err *e)
{
	struct proc_req rq = {.op = PROC_READ, .id = id};
	struct proc_res rs;
	if (sandbox_process(sb, &rq, &rs, e) < 0 || rs.n != 1) {
		proc_res_free(&rs);
		return -1;
	}
	const struct proc_info *p = &rs.v[0];
	for (int i = 0; i < 2; i++) {
		if (p->s[i].len)
			capture_add(col, i + 1, p->s[i].data, p->s[i].len);
		uint64_t skipped = p->s[i].bytes - p->s[i].from - p->s[i].len;
		if (skipped) {
			char note[600];
			int n = snprintf(note, sizeof note, "\n(%llu bytes of the session's %s are only in %s.%s)\n",
					 (unsigned long long)skipped, i ? "stderr" : "stdout", p->prefix, i ? "stderr" : "stdout");
			capture_add(col, i + 1, note, (size_t)n);
		}
	}
	int rc = p->running ? 1 : 0;
	*status = p->status;
	*timed_out = p->timed_out;
	proc_res_free(&rs);
	return rc;
}

static bool poll_readable(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};
	return poll(&p, 1, 0) > 0;
}

static void describe_end(int status, bool timed_out, char *buf, size_t n)
{
	if (timed_out)
		snprintf(buf, n, "it ran past --max-background-timeout");
	else if (WIFSIGNALED(status))
		snprintf(buf, n, "its interpreter was killed by signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGKILL ? " (by the process tool, or out of memory)" : "");
	else
		snprintf(buf, n, "its interpreter exited with %d", WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* Starts the session's interpreter: its id, or 0 with e set. */
static unsigned start(struct call_ctx *c, const char *name, struct err *e)
{
	size_t sl;
	const char *src = (const char *)embed_find("agent/session.py", &sl);
	if (!src)
		return err_set(e, "agent/session.py is not in this build"), 0;
	char *code = strndup(src, sl), label[128], spill[160];
	if (!code)
		return err_set(e, "out of memory"), 0;
	const char *argv[] = {c->cfg->python, "-c", code, NULL};
	snprintf(label, sizeof label, "python session %s", name);
	snprintf(spill, sizeof spill, TOOLS_OUTPUT "/session-%s", name);
	struct run_req rq = {.argv = argv, .env = call_env_base(), .cwd = WORKSPACE, .deadline_ms = clock_ms() + 30000,
			     .cancel_fd = c->tc->cancel_fd, .cap = tools_bg_cap(c->cfg), .spill_prefix = spill,
			     .background = true, .bg_wait_ms = 0,
			     .bg_timeout_ms = (uint64_t)(c->cfg->bg_max_timeout_s * 1000),
			     .bg_max = (unsigned)(c->cfg->max_background + c->cfg->max_sessions), .bg_label = label};
	struct run_res rs = {0};
	int rc = sandbox_run(c->sb, &rq, &rs, c->notice, e);
	free(code);
	if (rc < 0)
		return 0;
	if (!rs.bg_id)
		return err_set(e, "the session's interpreter ended as it started (exit code %d)", rs.exit_code), 0;
	return rs.bg_id;
}

json_t *session_run(struct call_ctx *c, struct inputs *in)
{
	const char *name = json_string_value(json_object_get(c->tc->args, "session"));
	struct err e = {""};
	char cell[160], req[160], result[160], msg[sizeof e.msg + 200];
	snprintf(cell, sizeof cell, TOOLS_DIR "/session-%s.py", name);
	snprintf(req, sizeof req, TOOLS_DIR "/session-%s.json", name);
	snprintf(result, sizeof result, TOOLS_DIR "/session-%s.result-%lu", name, c->tc->seq);
	unsigned id = sandbox_session_find(c->sb, name);
	if (!id && sandbox_session_count(c->sb) >= c->cfg->max_sessions) {
		snprintf(msg, sizeof msg, "session: at most %llu sessions may live at once (--max-sessions): end one with "
			 "the process tool's signal KILL", (unsigned long long)c->cfg->max_sessions);
		return call_early_result(c, 1, msg, msg, false);
	}
	/* The cell, its request and the call's files, in one batch, before anything runs. */
	json_t *env = json_object_get(c->tc->args, "env"), *args = json_object_get(c->tc->args, "args");
	json_t *rj = json_pack("{s:s, s:s, s:o, s:o}", "cell", cell, "result", result, "env",
			       env ? json_incref(env) : json_object(), "args", args ? json_incref(args) : json_array());
	char *rtext = rj ? json_dumps(rj, JSON_COMPACT) : NULL;
	json_decref(rj);
	struct run_file *files = calloc(in->nfiles + 2, sizeof *files);
	if (!rtext || !files) {
		free(rtext);
		free(files);
		return call_early_result(c, 1, "out of memory", "out of memory", false);
	}
	const json_t *script = json_object_get(c->tc->args, "script");
	memcpy(files, in->files, in->nfiles * sizeof *files);
	files[in->nfiles] = (struct run_file){cell, json_string_value(script), json_string_length(script), 0644};
	files[in->nfiles + 1] = (struct run_file){req, rtext, strlen(rtext), 0644};
	static const char *const true_argv[] = {"true", NULL};
	struct run_req wr = {.argv = true_argv, .env = in->env, .cwd = WORKSPACE, .files = files, .nfiles = in->nfiles + 2,
			     .deadline_ms = c->deadline, .cancel_fd = c->tc->cancel_fd, .cap = 4096};
	struct run_res wrs = {0};
	int rc = sandbox_run(c->sb, &wr, &wrs, c->notice, &e);
	free(rtext);
	free(files);
	if (rc < 0)
		return call_early_result(c, 1, e.msg, e.msg, false);
	if (wrs.cancelled) {
		c->tc->cancelled = true;
		return NULL;
	}
	/* A session whose interpreter ended is started anew; the call says its state was lost. */
	char line[200];
	snprintf(line, sizeof line, "%s\n", req);
	struct proc_req in_rq = {.op = PROC_INPUT, .input = line, .len = strlen(line)};
	struct proc_res prs;
	bool fresh = false;
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!id) {
			if (!(id = start(c, name, &e)))
				return call_early_result(c, 1, e.msg, e.msg, false);
			if (sandbox_session_set(c->sb, name, id) < 0)
				log_msg(LOG_WARNING, "session %s: no room to remember it", name);
			fresh = true;
		}
		in_rq.id = id;
		rc = sandbox_process(c->sb, &in_rq, &prs, &e);
		size_t written = prs.written;
		proc_res_free(&prs);
		if (rc == 0 && written == in_rq.len)
			break;
		if (!fresh) {
			char notice[300];
			snprintf(notice, sizeof notice, "Session %s had ended: this call ran in a new one (the names, imports "
				 "and objects of the old one are lost).", name);
			call_add_notice(c, notice);
		}
		sandbox_session_set(c->sb, name, 0);
		id = 0;
		if (fresh)
			return call_early_result(c, 1, "the session's interpreter does not read its input",
						 "the session's interpreter does not read its input", false);
	}
	struct capture col;
	if (capture_init(&col, c->cfg->output_cap, c->tc->on_output, c->tc->ctx) < 0)
		return call_early_result(c, 1, "out of memory", "out of memory", false);
	int status = 0, running = 1;
	bool timed_out = false, bg_timed_out = false, interrupted = false, lost = false;
	int64_t kill_at = -1;
	struct ws_file rf = {0};
	char lost_why[200] = "";
	long poll_us = POLL_MIN_US;
	for (;;) {
		running = drain(c->sb, id, &col, &status, &bg_timed_out, &e);
		ws_file_free(&rf);
		if (sandbox_get(c->sb, result, 64 * 1024, &rf, &e) == 0 && rf.err == 0 && rf.data) {
			running = drain(c->sb, id, &col, &status, &bg_timed_out, &e) < 0 ? running : 1;
			break;
		}
		if (running <= 0) {
			if (running == 0)
				describe_end(status, bg_timed_out, lost_why, sizeof lost_why);
			else
				snprintf(lost_why, sizeof lost_why, "%s", e.msg);
			lost = true;
			break;
		}
		int64_t now = clock_ms();
		bool cancelled = c->tc->cancel_fd >= 0 && poll_readable(c->tc->cancel_fd);
		if (!interrupted && (now >= c->deadline || cancelled)) {
			/* KeyboardInterrupt first; a cell that does not stop within a second takes the
			 * session with it. */
			struct proc_req sig = {.op = PROC_SIGNAL, .id = id, .sig = SIGINT};
			sandbox_process(c->sb, &sig, &prs, &e);
			proc_res_free(&prs);
			interrupted = true;
			timed_out = !cancelled;
			if (cancelled)
				c->tc->cancelled = true;
			kill_at = now + INTERRUPT_MS;
		} else if (interrupted && now >= kill_at) {
			struct proc_req sig = {.op = PROC_SIGNAL, .id = id, .sig = SIGKILL};
			sandbox_process(c->sb, &sig, &prs, &e);
			proc_res_free(&prs);
			snprintf(lost_why, sizeof lost_why, "it did not stop within %d ms of its interrupt and was killed",
				 INTERRUPT_MS);
			lost = true;
			break;
		}
		nanosleep(&(struct timespec){0, poll_us * 1000}, NULL);
		poll_us = poll_us * 2 < POLL_MAX_US ? poll_us * 2 : POLL_MAX_US;
	}
	json_t *res = NULL;
	if (c->tc->cancelled) {
		if (lost)
			sandbox_session_set(c->sb, name, 0);
		goto out;
	}
	json_t *outcome = lost ? NULL : json_loadb((const char *)rf.data, rf.len, 0, NULL);
	bool error = lost || json_is_true(json_object_get(outcome, "error"));
	const char *value = json_string_value(json_object_get(outcome, "value"));
	char vbuf[2048];
	size_t vmax = c->cfg->result_max / 16 < sizeof vbuf ? c->cfg->result_max / 16 : sizeof vbuf;
	if (value && strlen(value) >= vmax) {
		snprintf(vbuf, vmax, "%s", value);
		snprintf(vbuf + vmax - 20, 20, "... (cut)");
		value = vbuf;
	}
	if (timed_out && !lost)
		call_add_notice(c, "The cell was interrupted at its timeout (KeyboardInterrupt): the session lives on, with "
				   "what the cell did until then.");
	if (lost) {
		sandbox_session_set(c->sb, name, 0);
		snprintf(msg, sizeof msg, "session %s ended: %s; its state (names, imports, objects) is lost, and its next "
			 "call starts a new one", name, lost_why);
	}
	struct result_facts f;
	memset(&f, 0, sizeof f);
	f.timeout_s = c->timeout;
	f.duration_ms = clock_ms() - c->t0;
	f.backend = sandbox_backend(c->sb);
	f.sandbox_id = sandbox_id(c->sb);
	f.notice = c->notice[0] ? c->notice : NULL;
	f.exit_code = timed_out ? 124 : lost && WIFSIGNALED(status) ? 128 + WTERMSIG(status) : error ? 1 : 0;
	f.timed_out = timed_out;
	f.error = lost ? msg : NULL;
	f.session = name;
	f.value = value;
	for (int i = 0; i < 2; i++)
		f.s[i].out = &col.out[i];
	res = result_execution(&f, c->cfg->result_max, NULL);
	json_decref(outcome);
out:
	ws_file_free(&rf);
	capture_free(&col);
	return res;
}
