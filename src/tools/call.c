#include "call.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "artifacts.h"
#include "../../backends/run/netpolicy.h"
#include "../base/clock.h"
#include "inputs.h"
#include "../base/log.h"
#include "output.h"
#include "install.h"
#include "result.h"

/* Bash code longer than this goes through a file: one exec argument holds at most 128 KiB. */
#define CODE_ARG_MAX (120u * 1024)

/* The environment of every call: nothing of the server's own. */
static const char *const call_env[] = {
	"PATH=" TOOLS_PACKAGES "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=" WORKSPACE,
	"USER=sandbox",
	"LOGNAME=sandbox",
	"SHELL=/bin/bash",
	"LANG=C.UTF-8",
	"TERM=dumb",
	"TMPDIR=/tmp",
	"PYTHONPATH=" TOOLS_PACKAGES,
	"PYTHONUNBUFFERED=1",
	"PIP_CACHE_DIR=/tmp/pip-cache",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
	"PIP_NO_INPUT=1",
	"PIP_ROOT_USER_ACTION=ignore",
	"MPLBACKEND=Agg",
	NULL,
};

const char *const *call_env_base(void)
{
	return call_env;
}

/* ------------------------------------------------------------ results */

static void facts_init(struct result_facts *f, const struct call_ctx *c)
{
	memset(f, 0, sizeof *f);
	f->timeout_s = c->timeout;
	f->duration_ms = clock_ms() - c->t0;
	f->backend = sandbox_backend(c->sb);
	f->sandbox_id = sandbox_id(c->sb);
	f->notice = c->notice[0] ? c->notice : NULL;
}

void call_add_notice(struct call_ctx *c, const char *notice)
{
	size_t l = strlen(c->notice);
	if (notice[0])
		snprintf(c->notice + l, sizeof c->notice - l, "%s%s", l ? " " : "", notice);
}

json_t *call_early_result(const struct call_ctx *c, int exit_code, const char *stderr_text, const char *error,
			  bool timed_out)
{
	struct result_facts f;
	facts_init(&f, c);
	f.exit_code = exit_code;
	f.timed_out = timed_out;
	f.error = error;
	f.s[1].raw = stderr_text;
	f.s[1].raw_len = strlen(stderr_text);
	return result_execution(&f, c->cfg->result_max, NULL);
}

/* Adds the call's files (artifacts.h) to its result r: the text block may hold NUL bytes, so
 * it is copied by length. */
static json_t *add_artifacts(json_t *r, struct artifacts *a)
{
	if (!r || (!a->list && !a->text))
		return r;
	static const char head[] = "--- files ---\n";
	json_t *content = json_object_get(r, "content");
	json_t *first = json_array_get(content, 0);
	json_t *tj = json_object_get(first, "text");
	const char *t = json_string_value(tj);
	size_t tl = t ? json_string_length(tj) : 0, al = a->text ? strlen(a->text) : 0, o = 0;
	char *nt = malloc(tl + al + sizeof head + 1);
	if (!nt) {
		json_decref(r);
		return NULL;
	}
	if (tl)
		memcpy(nt, t, tl);
	o = tl;
	if (tl && t[tl - 1] != '\n')
		nt[o++] = '\n';
	memcpy(nt + o, head, sizeof head - 1);
	o += sizeof head - 1;
	if (al)
		memcpy(nt + o, a->text, al);
	json_object_set_new(first, "text", json_stringn(nt, o + al));
	free(nt);
	if (a->list)
		json_object_set(json_object_get(r, "structuredContent"), "artifacts", a->list);
	if (a->blocks)
		json_array_extend(content, a->blocks);
	return r;
}

/*
 * The result of a program that ran. A stream the result cannot show whole has its full text
 * in the workspace: the sandbox saved it when it passed the capture cap; one that is cut only
 * for the result's size is saved here, through the sandbox.
 */
static json_t *run_result(struct call_ctx *c, const struct run_res *rs, struct capture *col, const char *spill)
{
	char pid[32];
	snprintf(pid, sizeof pid, "bg-%u", rs->bg_id);
	char files[2][160], why[2][sizeof(struct err)];
	/* The call's files first: what they take of the result's size is not the streams'. */
	size_t max = c->cfg->result_max;
	struct artifacts art = {0};
	if (max >= 2 * RESULT_MIN &&
	    artifacts_collect(c->sb, json_object_get(c->tc->args, "collect"), rs->started_ns, rs->changed, max / 4,
			      c->tc->links, &art) < 0)
		return NULL;
	max -= art.cost;
	struct result_facts f;
	facts_init(&f, c);
	f.exit_code = rs->exit_code;
	f.timed_out = rs->timed_out;
	f.oom_killed = rs->oom_killed;
	f.memory_limit = rs->memory_limit;
	f.process_id = rs->bg_id ? pid : NULL;
	for (int i = 0; i < 2; i++) {
		f.s[i].out = &col->out[i];
		snprintf(files[i], sizeof files[i], "%s.%s", spill, i ? "stderr" : "stdout");
		if (rs->spill_errno[i])
			f.s[i].file_error = strerror(rs->spill_errno[i]);
		else
			f.s[i].file = files[i]; /* saved by the sandbox, or to be saved below if needed */
	}
	bool cut[2];
	json_t *r = result_execution(&f, max, cut);
	bool again = false;
	for (int i = 0; r && i < 2; i++) {
		if (!cut[i] || rs->spilled[i] || !f.s[i].file)
			continue;
		struct output_view v;
		output_view(&col->out[i], &v);
		struct run_file rf = {files[i], v.head, v.head_len, 0644};
		struct err e = {""};
		if (v.cut || sandbox_put(c->sb, &rf, &e) < 0) {
			/* v.cut: the sandbox should have saved it and did not say why not. */
			snprintf(why[i], sizeof why[i], "%s", v.cut ? "the sandbox did not save it" : e.msg);
			f.s[i].file = NULL;
			f.s[i].file_error = why[i];
			again = true;
		}
	}
	if (again) {
		json_decref(r);
		r = result_execution(&f, max, NULL);
	}
	r = add_artifacts(r, &art);
	artifacts_free(&art);
	return r;
}

/* ------------------------------------------------------------ execute */

int call_check(const json_t *args, struct err *e)
{
	return inputs_check(args, call_env, e);
}

/* The program a call runs: its argv (*argv, caller frees) and, as in's last file, the script
 * (or bash code too long for one argument). in->nfiles counts it. 0, or -1 when out of memory. */
static int program(const struct tool_call *tc, const struct config *cfg, struct inputs *in, const char ***argv)
{
	bool py = tc->tool == TOOL_PYTHON;
	const json_t *src = json_object_get(tc->args, py ? "script" : "code");
	const char *code = json_string_value(src);
	size_t len = json_string_length(src);
	const char **v = *argv = calloc(in->nargs + 4, sizeof *v);
	if (!v)
		return -1;
	if (py) {
		in->files[in->nfiles++] = (struct run_file){TOOLS_SCRIPT, code, len, 0644};
		v[0] = cfg->python;
		v[1] = TOOLS_SCRIPT;
		memcpy(v + 2, in->args, in->nargs * sizeof *v);
		return 0;
	}
	v[0] = "/bin/bash";
	v[1] = "-c";
	v[2] = code;
	if (len > CODE_ARG_MAX) {
		/* Too long for one argument: the shell reads it from a file instead. */
		in->files[in->nfiles++] = (struct run_file){TOOLS_SHELL_SCRIPT, code, len, 0644};
		v[2] = ". " TOOLS_SHELL_SCRIPT;
	}
	return 0;
}

/* Whether an execute_python call may run in an interpreter started ahead of it (run.h's
 * prestart) with call_env: not when the call's own env could change how Python or a preloaded
 * module starts (with preloads, any variable could), or replaces a variable of call_env. */
static bool prestart_ok(const struct tool_call *tc, const struct config *cfg)
{
	static const char *const starts[] = {"PYTHON", "LC_", "LANG", "TZ", "GLIBC_", "MALLOC_", "LD_", NULL};
	const json_t *env = json_object_get(tc->args, "env");
	const char *k;
	json_t *v;
	if (tc->tool != TOOL_PYTHON || !cfg->python_prestart)
		return false;
	if (json_object_size(env) && cfg->python_preload[0])
		return false;
	json_object_foreach((json_t *)env, k, v) {
		for (int i = 0; starts[i]; i++)
			if (!strncmp(k, starts[i], strlen(starts[i])))
				return false;
		for (int i = 0; call_env[i]; i++)
			if (!strncmp(call_env[i], k, strlen(k)) && call_env[i][strlen(k)] == '=')
				return false;
	}
	return true;
}

/* A call's `network`, against --allow-hosts. 0, or -1 with e set. */
static int check_network(const struct config *cfg, const char *call, struct err *e)
{
	struct netpolicy all, narrow;
	if (netpolicy_parse_allow(&all, cfg->allow_hosts, e) < 0)
		return -1;
	return netpolicy_narrow(&narrow, &all, call, e);
}

/* Runs the program on the sandbox and makes its result (NULL: cancelled, or out of memory). */
static json_t *run_program(struct call_ctx *c, struct inputs *in, const char *const *argv)
{
	const struct config *cfg = c->cfg;
	struct tool_call *tc = c->tc;
	char spill[128];
	snprintf(spill, sizeof spill, TOOLS_OUTPUT "/call-%lu", tc->seq);
	struct capture col;
	if (capture_init(&col, cfg->output_cap, tc->on_output, tc->ctx) < 0)
		return call_early_result(c, 1, "out of memory", "out of memory", false);
	struct run_req rq = {.argv = argv, .env = in->env, .cwd = WORKSPACE, .files = in->nfiles ? in->files : NULL,
			     .nfiles = in->nfiles, .sh_fallback = tc->tool != TOOL_PYTHON, .deadline_ms = c->deadline,
			     .cancel_fd = tc->cancel_fd, .cap = cfg->output_cap, .spill_prefix = spill,
			     .changes_in = WORKSPACE "/" ARTIFACTS_DIR, .changes_list_max = ARTIFACTS_SCAN_MAX,
			     .changes_files = ARTIFACTS_MAX, .changes_file_max = ARTIFACTS_PREFETCH_MAX,
			     .on_output = capture_add, .ctx = &col,
			     .prestart = prestart_ok(tc, cfg), .prestart_env = call_env, .allow = c->allow};
	char label[128];
	if (json_is_true(json_object_get(tc->args, "background"))) {
		const json_t *w = json_object_get(tc->args, "wait_s");
		int64_t now = clock_ms(), wait_ms = (int64_t)ceil((w ? json_number_value(w) : 1.0) * 1000);
		const char *code = json_string_value(json_object_get(tc->args, tc->tool == TOOL_PYTHON ? "script" : "code"));
		size_t ll = strcspn(code, "\n");
		snprintf(label, sizeof label, "%s: %.*s%s", tc->tool == TOOL_PYTHON ? "python" : "bash", (int)(ll > 100 ? 100 : ll),
			 code, ll > 100 || code[ll] ? " ..." : "");
		rq.background = true;
		rq.prestart = false;
		rq.bg_wait_ms = wait_ms;
		rq.bg_timeout_ms = c->deadline > now ? (uint64_t)(c->deadline - now) : 0;
		rq.bg_max = (unsigned)cfg->max_background;
		rq.bg_label = label;
		/* The call itself ends with the wait, or soon after: the process's timeout is the agent's. */
		if (now + wait_ms + 10000 < rq.deadline_ms)
			rq.deadline_ms = now + wait_ms + 10000;
		rq.cap = tools_bg_cap(cfg); /* what each read of it returns at most */
	}
	struct run_res rs = {0};
	struct err e = {""};
	json_t *res = NULL;
	int rc = sandbox_run(c->sb, &rq, &rs, c->notice, &e);
	call_add_notice(c, rs.notice);
	if (rc < 0) {
		/* A full workspace refuses the script file: say how to get out of it. */
		size_t l = strlen(e.msg);
		if (in->nfiles && strstr(e.msg, strerror(ENOSPC)))
			snprintf(e.msg + l, sizeof e.msg - l, " (the workspace is full: remove files with "
				 "execute_bash_commands, which needs no room for short code, or call cleanup_sandbox)");
		res = call_early_result(c, 1, e.msg, e.msg, false);
	} else if (rs.cancelled) {
		tc->cancelled = true;
	} else {
		if (rs.prestarted)
			log_msg(LOG_DEBUG, "call %lu ran in an interpreter started ahead", tc->seq);
		if (rs.kept_code)
			log_msg(LOG_DEBUG, "call %lu: its interpreter loaded its starter as compiled by one before", tc->seq);
		if (rs.exited_early)
			log_msg(LOG_DEBUG, "call %lu was answered as its interpreter exited", tc->seq);
		res = run_result(c, &rs, &col, spill);
	}
	capture_free(&col);
	return res;
}

void call_prepare(struct sandbox *sb, const struct config *cfg, int cancel_fd, int call_fd)
{
	/* `true` takes the script path as an argument it ignores: what the interpreter started
	 * after it needs to know (run.h's prestart). */
	static const char *const argv[] = {"true", TOOLS_SCRIPT, NULL};
	struct run_req rq = {.argv = argv, .env = call_env, .cwd = WORKSPACE, .cancel_fd = cancel_fd, .cap = 4096,
			     .deadline_ms = clock_ms() + 10000, .prestart = cfg->python_prestart,
			     .prestart_env = call_env};
	(void)sandbox_prepare(sb, cancel_fd, &rq, call_fd);
}

json_t *call_execute(struct sandbox *sb, struct tool_call *tc, const struct config *cfg)
{
	struct call_ctx c = {.sb = sb, .tc = tc, .cfg = cfg, .t0 = clock_ms()};
	const json_t *targ = json_object_get(tc->args, "timeout_s");
	bool bg = json_is_true(json_object_get(tc->args, "background"));
	bool session = json_object_get(tc->args, "session") != NULL;
	c.timeout = targ ? json_number_value(targ) : bg ? cfg->bg_timeout_s : cfg->timeout_s;
	c.deadline = c.t0 + (int64_t)ceil(c.timeout * 1000);
	struct err e = {""};
	const char *allow = json_string_value(json_object_get(tc->args, "network"));
	if (allow && check_network(cfg, allow, &e) < 0)
		return call_early_result(&c, 1, e.msg, e.msg, false);
	/* A narrowing holds while its call runs; code that outlives the call would outlive it too
	 * (between calls the proxy serves the whole list), so no such code may start under one. */
	if (allow && cfg->allow_hosts[0] && (bg || session)) {
		snprintf(e.msg, sizeof e.msg, "network: a %s outlives its call, and what outlives a call reaches the "
			 "sandbox's whole --allow-hosts list between calls: narrow only a call that ends with its code "
			 "(without %s), or leave network out", bg ? "background process" : "session",
			 bg ? "background" : "session");
		return call_early_result(&c, 1, e.msg, e.msg, false);
	}
	c.allow = allow;

	int rc = sandbox_ensure(sb, tc->cancel_fd, c.notice, &e);
	if (rc == BACKEND_CANCELLED) {
		tc->cancelled = true;
		return NULL;
	}
	if (rc < 0)
		return call_early_result(&c, 1, e.msg, e.msg, false);
	if ((bg || session) && !sandbox_has_process(sb)) {
		snprintf(e.msg, sizeof e.msg, "%s: the %s backend runs no %s: run the code without it",
			 bg ? "background" : "session", sandbox_backend(sb), bg ? "background processes" : "sessions");
		return call_early_result(&c, 1, e.msg, e.msg, false);
	}
	if (tc->tool == TOOL_PYTHON) {
		json_t *res = install_requirements(&c, json_object_get(tc->args, "requirements"));
		if (res || tc->cancelled)
			return res;
	}
	struct inputs in = {0};
	const char **argv = NULL;
	json_t *res;
	if (inputs_build(tc->args, call_env, &in, &e) < 0)
		res = call_early_result(&c, 1, e.msg, e.msg, false);
	else if (session)
		res = session_run(&c, &in);
	else if (program(tc, cfg, &in, &argv) < 0)
		res = call_early_result(&c, 1, "out of memory", "out of memory", false);
	else
		res = run_program(&c, &in, argv);
	free(argv);
	inputs_free(&in);
	return res;
}

/* ------------------------------------------------------------ cleanup */

json_t *call_cleanup(struct sandbox *sb)
{
	char backend[32], id[64], text[sizeof(struct err) + 256];
	struct err e = {""};
	int rc = sandbox_cleanup(sb, backend, sizeof backend, id, sizeof id, &e);
	bool removed = rc != 0;
	if (rc > 0)
		snprintf(text, sizeof text,
			 "Removed sandbox %s (%s) and its workspace. The next call starts a new, empty sandbox.", id, backend);
	else if (rc < 0)
		snprintf(text, sizeof text,
			 "Stopped sandbox %s (%s), but not all of it could be removed: %s. The next call starts a new, "
			 "empty sandbox.", id, backend, e.msg);
	else
		snprintf(text, sizeof text, "There was no sandbox to remove. The next call starts a new, empty sandbox.");
	json_t *r = result_text(text, rc < 0);
	json_t *sc = json_pack("{s:b, s:o, s:o, s:o}", "removed", removed, "backend",
			       removed ? json_string(backend) : json_null(), "sandbox_id",
			       removed ? json_string(id) : json_null(), "error",
			       rc < 0 ? utf8_json_string(e.msg, strlen(e.msg)) : json_null());
	if (!r || !sc) {
		json_decref(r);
		json_decref(sc);
		return NULL;
	}
	json_object_set_new(r, "structuredContent", sc);
	return r;
}
