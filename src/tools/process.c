/*
 * The process tool (tools.h): background processes listed, read, fed and signalled through the
 * sandbox (sandbox_process), on a thread of its own beside the calls.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "../base/buf.h"
#include "../base/clock.h"
#include "../base/utf8.h"
#include "call.h"
#include "result.h"
#include "tools.h"

#define POLL_MS 50 /* how often a wait asks again */

static const struct { const char *name; int sig; } signals[] = {
	{"INT", SIGINT}, {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"HUP", SIGHUP}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
};

__attribute__((format(printf, 1, 2))) static json_t *fail(const char *fmt, ...)
{
	char msg[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	json_t *r = result_text(msg, true);
	json_t *sc = json_pack("{s:o}", "error", utf8_json_string(msg, strlen(msg)));
	if (r && sc)
		json_object_set_new(r, "structuredContent", sc);
	else
		json_decref(sc);
	return r;
}

static int exit_code(const struct proc_info *p)
{
	if (p->timed_out)
		return 124;
	if (WIFEXITED(p->status))
		return WEXITSTATUS(p->status);
	if (WIFSIGNALED(p->status))
		return 128 + WTERMSIG(p->status);
	return 1;
}

static json_t *list_result(struct sandbox *sb, const struct proc_res *rs)
{
	struct buf b = {0};
	json_t *arr = json_array();
	if (!rs->n)
		buf_str(&b, "No background process runs or has output left to read.\n");
	for (size_t i = 0; i < rs->n; i++) {
		const struct proc_info *p = &rs->v[i];
		char id[32], when[64] = "?";
		snprintf(id, sizeof id, "bg-%u", p->id);
		time_t t = (time_t)(p->started_ns / 1000000000);
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		char state[64];
		if (p->running)
			snprintf(state, sizeof state, "running");
		else
			snprintf(state, sizeof state, "ended, exit code %d%s", exit_code(p), p->timed_out ? " (timed out)" : "");
		char line[600];
		snprintf(line, sizeof line, "%s  %s  started %s, %llu ms; stdout %llu bytes, stderr %llu bytes  %s\n", id,
			 state, when, (unsigned long long)p->duration_ms, (unsigned long long)p->s[0].bytes,
			 (unsigned long long)p->s[1].bytes, p->label);
		buf_str(&b, line);
		char sess[72];
		sandbox_session_name(sb, p->id, sess, sizeof sess);
		json_array_append_new(arr, json_pack("{s:s, s:b, s:o, s:s, s:s, s:I, s:I, s:I}", "process_id", id, "running",
						     p->running, "exit_code", p->running ? json_null() : json_integer(exit_code(p)),
						     "command", p->label, "started", when, "duration_ms",
						     (json_int_t)p->duration_ms, "stdout_bytes", (json_int_t)p->s[0].bytes,
						     "stderr_bytes", (json_int_t)p->s[1].bytes));
		if (*sess)
			json_object_set_new(json_array_get(arr, json_array_size(arr) - 1), "session", json_string(sess));
	}
	json_t *r = b.p && !b.oom ? result_text(b.p, false) : NULL;
	buf_free(&b);
	json_t *sc = json_pack("{s:o, s:o}", "processes", arr, "process_id", json_null());
	if (!r || !sc) {
		json_decref(r);
		json_decref(sc);
		return NULL;
	}
	json_object_set_new(r, "structuredContent", sc);
	return r;
}

static json_t *read_result(const char *id, const struct proc_info *p, const char *prefix, long written, bool bodies,
			   bool cut)
{
	static const char *const names[2] = {"stdout", "stderr"};
	struct buf b = {0};
	char line[4400]; /* room for a file name (file[i] below) and its words */
	if (p->running)
		snprintf(line, sizeof line, "%s: running (%llu ms so far)\n", id, (unsigned long long)p->duration_ms);
	else if (p->timed_out)
		snprintf(line, sizeof line, "%s: timed out after %llu ms: its processes were killed; exit_code: 124\n", id,
			 (unsigned long long)p->duration_ms);
	else
		snprintf(line, sizeof line, "%s: ended, exit_code: %d (%llu ms)\n", id, exit_code(p),
			 (unsigned long long)p->duration_ms);
	buf_str(&b, line);
	if (written >= 0) {
		snprintf(line, sizeof line, "input: %ld bytes written%s\n", written, p->input_closed ? ", input closed" : "");
		buf_str(&b, line);
	}
	json_t *sc = json_object();
	char file[2][4200];
	for (int i = 0; i < 2; i++) {
		size_t cl;
		char *clean = utf8_sanitize(p->s[i].data, p->s[i].len, &cl);
		uint64_t skipped = p->s[i].bytes - p->s[i].from - p->s[i].len;
		snprintf(file[i], sizeof file[i], "%s.%s", prefix, names[i]);
		if (!cl) {
			snprintf(line, sizeof line, "--- %s: nothing new ---\n", names[i]);
			buf_str(&b, line);
		} else if (!bodies) {
			snprintf(line, sizeof line, "--- %s: %zu bytes, in structuredContent.%s (too large to show twice)%s ---\n",
				 names[i], cl, names[i], cut ? ", cut to fit the result" : "");
			buf_str(&b, line);
		} else {
			snprintf(line, sizeof line, "--- %s ---\n", names[i]);
			buf_str(&b, line);
			buf_add(&b, clean, cl);
			if (clean[cl - 1] != '\n')
				buf_str(&b, "\n");
		}
		const char *fname = file[i];
		if (skipped && p->s[i].file)
			snprintf(line, sizeof line, "(%s: %llu more bytes are only in %.4200s, from its byte %llu)\n", names[i],
				 (unsigned long long)skipped, fname,
				 (unsigned long long)(p->s[i].from + p->s[i].len - p->s[i].file_start));
		else if (skipped)
			snprintf(line, sizeof line, "(%s: %llu more bytes could not be kept%s%s)\n", names[i],
				 (unsigned long long)skipped, p->s[i].file_errno ? ": " : "",
				 p->s[i].file_errno ? strerror(p->s[i].file_errno) : "");
		if (skipped)
			buf_str(&b, line);
		char k[32];
		json_object_set_new(sc, names[i], json_stringn(clean ? clean : "", clean ? cl : 0));
		snprintf(k, sizeof k, "%s_bytes", names[i]);
		json_object_set_new(sc, k, json_integer((json_int_t)p->s[i].bytes));
		snprintf(k, sizeof k, "%s_skipped", names[i]);
		json_object_set_new(sc, k, json_integer((json_int_t)skipped));
		snprintf(k, sizeof k, "%s_file", names[i]);
		json_object_set_new(sc, k, p->s[i].file ? json_string(file[i]) : json_null());
		free(clean);
	}
	json_object_set_new(sc, "process_id", json_string(id));
	json_object_set_new(sc, "running", json_boolean(p->running));
	json_object_set_new(sc, "exit_code", p->running ? json_null() : json_integer(exit_code(p)));
	json_object_set_new(sc, "timed_out", json_boolean(p->timed_out));
	json_object_set_new(sc, "duration_ms", json_integer((json_int_t)p->duration_ms));
	json_object_set_new(sc, "error", json_null());
	if (written >= 0)
		json_object_set_new(sc, "input_written", json_integer(written));
	json_t *r = b.p && !b.oom ? result_text(b.p, false) : NULL;
	buf_free(&b);
	if (!r) {
		json_decref(sc);
		return NULL;
	}
	json_object_set_new(r, "structuredContent", sc);
	return r;
}

json_t *process_run(struct sandbox *sb, const json_t *args, size_t result_max)
{
	const char *id = json_string_value(json_object_get(args, "process_id"));
	const char *input = json_string_value(json_object_get(args, "input"));
	const char *sig = json_string_value(json_object_get(args, "signal"));
	bool close_input = json_is_true(json_object_get(args, "close_input"));
	const json_t *w = json_object_get(args, "wait_s");
	struct err e = {""};
	struct proc_res rs;
	if (!id) {
		if (input || sig || close_input)
			return fail("process: input, close_input and signal need a process_id");
		struct proc_req rq = {.op = PROC_LIST};
		if (sandbox_process(sb, &rq, &rs, &e) < 0)
			return fail("process: %s", e.msg);
		json_t *r = list_result(sb, &rs);
		proc_res_free(&rs);
		return r;
	}
	char *end = "";
	unsigned long n = strncmp(id, "bg-", 3) ? sandbox_session_find(sb, id) : strtoul(id + 3, &end, 10);
	if (!n || *end || n > 0xffffffffUL)
		return fail("process: no background process %.64s (ids look like bg-1; call process without process_id "
			    "to list them)", id);
	long written = -1;
	if (input || close_input) {
		struct proc_req rq = {.op = PROC_INPUT, .id = (unsigned)n, .input = input, .len = input ? json_string_length(json_object_get(args, "input")) : 0,
				      .close_input = close_input};
		if (sandbox_process(sb, &rq, &rs, &e) < 0)
			return fail("process %s: input: %s", id, e.msg);
		written = (long)rs.written;
		proc_res_free(&rs);
	}
	if (sig) {
		struct proc_req rq = {.op = PROC_SIGNAL, .id = (unsigned)n};
		for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
			if (!strcmp(sig, signals[i].name))
				rq.sig = signals[i].sig;
		if (sandbox_process(sb, &rq, &rs, &e) < 0)
			return fail("process %s: signal: %s", id, e.msg);
		proc_res_free(&rs);
	}
	/* The wait ends with the first new output or the end: asked again every POLL_MS. */
	int64_t until = clock_ms() + (int64_t)ceil((w ? json_number_value(w) : 0) * 1000);
	struct proc_req rq = {.op = PROC_READ, .id = (unsigned)n};
	for (;;) {
		int rc = sandbox_process(sb, &rq, &rs, &e);
		if (rc < 0)
			return fail("process %s: %s", id, e.msg);
		if (rs.n != 1) {
			proc_res_free(&rs);
			return fail("process %s: the sandbox gave no answer", id);
		}
		const struct proc_info *p = &rs.v[0];
		bool news = p->s[0].len || p->s[1].len || p->s[0].bytes > p->s[0].from || p->s[1].bytes > p->s[1].from;
		if (!p->running || news || clock_ms() >= until)
			break;
		proc_res_free(&rs);
		clock_sleep_ms(POLL_MS);
	}
	/* Within --result-max: the streams' text is shown once, or, where even that is too large
	 * (output that JSON escapes six-fold), cut. */
	struct proc_info *p = &rs.v[0];
	json_t *r = read_result(id, p, p->prefix, written, true, false);
	if (r && json_dumpb(r, NULL, 0, JSON_COMPACT) > result_max) {
		json_decref(r);
		r = read_result(id, p, p->prefix, written, false, false);
	}
	if (r && json_dumpb(r, NULL, 0, JSON_COMPACT) > result_max) {
		json_decref(r);
		size_t keep = result_max > 4096 ? (result_max - 4096) / 12 : 0;
		for (int i = 0; i < 2; i++)
			if (p->s[i].len > keep)
				p->s[i].len = keep;
		r = read_result(id, p, p->prefix, written, false, true);
	}
	proc_res_free(&rs);
	return r;
}
