#include "call.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "artifacts.h"
#include "../base/clock.h"
#include "inputs.h"
#include "../base/log.h"
#include "output.h"
#include "requirements.h"
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

/*
 * The install step's environment: no PYTHONPATH and no pip configuration, so that nothing the
 * workspace holds (a planted sitecustomize.py, a pip.conf under $HOME) runs or steers pip while
 * the step may have the network. Its temporary files go to the workspace, not the sandbox's
 * small /tmp: pip unpacks a whole package there before moving it into place.
 */
static const char *const install_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"LANG=C.UTF-8",
	"TMPDIR=" TOOLS_TMP,
	"PIP_CONFIG_FILE=/dev/null",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
	"PIP_NO_INPUT=1",
	"PIP_ROOT_USER_ACTION=ignore",
	NULL,
};

/* ------------------------------------------------------------ output capture */

struct collect {
	struct output out[2];
	struct tool_call *tc;
};

static void collect_output(void *ctx, int stream, const char *buf, size_t len)
{
	struct collect *c = ctx;
	if ((stream == 1 || stream == 2) && buf)
		output_add(&c->out[stream - 1], buf, len);
	else if (stream == 1 || stream == 2)
		output_skip(&c->out[stream - 1], len);
	if (c->tc->on_output)
		c->tc->on_output(c->tc->ctx, stream, buf, len);
}

static int collect_init(struct collect *c, struct tool_call *tc, size_t cap)
{
	c->tc = tc;
	if (output_init(&c->out[0], cap) < 0)
		return -1;
	if (output_init(&c->out[1], cap) < 0) {
		output_free(&c->out[0]);
		return -1;
	}
	return 0;
}

static void collect_free(struct collect *c)
{
	output_free(&c->out[0]);
	output_free(&c->out[1]);
}

/* ------------------------------------------------------------ results */

/* What every result of one call shares. */
struct call_ctx {
	struct sandbox *sb;
	struct tool_call *tc;
	const struct config *cfg;
	int64_t t0, deadline;
	double timeout;
	char notice[SANDBOX_NOTICE_MAX];
};

static void facts_init(struct result_facts *f, const struct call_ctx *c)
{
	memset(f, 0, sizeof *f);
	f->timeout_s = c->timeout;
	f->duration_ms = clock_ms() - c->t0;
	f->backend = sandbox_backend(c->sb);
	f->sandbox_id = sandbox_id(c->sb);
	f->notice = c->notice[0] ? c->notice : NULL;
}

/* A result for a call that never reached the program (no sandbox, install failure, ...):
 * stderr_text is its stderr; error (may be NULL) why the sandbox could not run the code. */
static json_t *early_result(const struct call_ctx *c, int exit_code, const char *stderr_text, const char *error,
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
static json_t *run_result(struct call_ctx *c, const struct run_res *rs, struct collect *col, const char *spill)
{
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

/* ------------------------------------------------------------ the install step */

/* True when every requirement asked for was installed in this sandbox before. */
static bool all_installed(struct sandbox *sb, const json_t *reqs)
{
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) if (!json_object_get(sb->installed, json_string_value(r))) return false;
	return true;
}

/* The install step failed: its result, with pip's own words. */
static json_t *install_failed(struct call_ctx *c, const struct run_res *rs, struct collect *col)
{
	size_t ol = 0, el = 0;
	char *out = output_text(&col->out[0], NULL, &ol), *err = output_text(&col->out[1], NULL, &el);
	const char *pip = err && el ? err : out ? out : "";
	size_t n = strlen(pip) + 128;
	char *msg = malloc(n);
	json_t *r = NULL;
	if (msg) {
		if (rs->timed_out)
			snprintf(msg, n, "Failed to install requirements: timed out after %g s\n%s", c->timeout, pip);
		else
			snprintf(msg, n, "Failed to install requirements: %s", pip);
		r = early_result(c, rs->timed_out ? 124 : 1, msg, NULL, rs->timed_out);
	}
	free(msg);
	free(out);
	free(err);
	return r;
}

/* Installs requirements. NULL when done (or nothing to do); else the result to return (new
 * ref), or NULL with tc->cancelled set. */
static json_t *install(struct call_ctx *c, const json_t *reqs)
{
	const struct config *cfg = c->cfg;
	if (!json_array_size(reqs) || all_installed(c->sb, reqs))
		return NULL;
	bool offline = cfg->wheelhouse[0] || cfg->network == NET_NONE;
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) {
		char why[300], msg[800];
		if (req_check(json_string_value(r), json_string_length(r), !offline, why, sizeof why) < 0) {
			snprintf(msg, sizeof msg, "Failed to install requirements: '%.300s' is not allowed: %s",
				 json_string_value(r), why);
			return early_result(c, 1, msg, NULL, false);
		}
	}
	const char **argv = calloc(json_array_size(reqs) + 24, sizeof *argv);
	if (!argv)
		return early_result(c, 1, "Failed to install requirements: out of memory", "out of memory", false);
	size_t a = 0;
	static const char *const fixed[] = {"-I", "-m", "pip", "install", "--no-warn-script-location", "--upgrade",
					    "--no-cache-dir", "--target", TOOLS_PACKAGES};
	argv[a++] = cfg->python;
	for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++)
		argv[a++] = fixed[k];
	char trusted[300];
	if (offline) {
		argv[a++] = "--no-index";
	} else {
		argv[a++] = "--only-binary";
		argv[a++] = ":all:";
		argv[a++] = "--index-url";
		argv[a++] = cfg->index_url;
		/* pip ignores a plain-HTTP index unless told to trust its host. */
		if (!strncasecmp(cfg->index_url, "http://", 7)) {
			snprintf(trusted, sizeof trusted, "%.*s", (int)strcspn(cfg->index_url + 7, "/?#"), cfg->index_url + 7);
			argv[a++] = "--trusted-host";
			argv[a++] = trusted;
		}
	}
	if (cfg->wheelhouse[0]) {
		argv[a++] = "--find-links";
		argv[a++] = "/wheelhouse";
	}
	/* Each requirement one argument, after "--": nothing can re-split it or make it an option. */
	argv[a++] = "--";
	json_array_foreach(reqs, i, r) argv[a++] = json_string_value(r);
	argv[a] = NULL;

	struct collect col;
	if (collect_init(&col, c->tc, cfg->output_cap) < 0) {
		free(argv);
		return early_result(c, 1, "Failed to install requirements: out of memory", "out of memory", false);
	}
	/* Makes the folder of pip's temporary files; its contents say what it is. */
	static const char keep[] = "Temporary files of package installs; removed with the sandbox.\n";
	struct run_file f = {TOOLS_TMP "/README", keep, sizeof keep - 1, 0644};
	/* Not in the workspace: a name must never resolve to a folder the code made there. */
	struct run_req rq = {.argv = argv, .env = install_env, .cwd = "/tmp", .files = &f, .nfiles = 1,
			     .network = !offline, .deadline_ms = c->deadline, .cancel_fd = c->tc->cancel_fd,
			     .cap = cfg->output_cap, .on_output = collect_output, .ctx = &col};
	struct run_res rs;
	struct err e = {""};
	int rc = sandbox_run(c->sb, &rq, &rs, c->notice, &e);
	free(argv);
	json_t *res = NULL;
	if (rc < 0) {
		char msg[sizeof e.msg + 64];
		snprintf(msg, sizeof msg, "Failed to install requirements: %s", e.msg);
		res = early_result(c, 1, msg, e.msg, false);
	} else if (rs.cancelled) {
		c->tc->cancelled = true;
	} else if (rs.exit_code != 0 || rs.timed_out) {
		res = install_failed(c, &rs, &col);
	} else {
		json_array_foreach(reqs, i, r) json_object_set_new(c->sb->installed, json_string_value(r), json_true());
	}
	collect_free(&col);
	return res;
}

/* ------------------------------------------------------------ execute */

int call_check(const json_t *args, struct err *e)
{
	return inputs_check(args, call_env, e);
}

json_t *call_execute(struct sandbox *sb, struct tool_call *tc, const struct config *cfg)
{
	struct call_ctx c = {.sb = sb, .tc = tc, .cfg = cfg, .t0 = clock_ms()};
	const json_t *targ = json_object_get(tc->args, "timeout_s");
	c.timeout = targ ? json_number_value(targ) : cfg->timeout_s;
	c.deadline = c.t0 + (int64_t)ceil(c.timeout * 1000);
	struct err e = {""};

	int rc = sandbox_ensure(sb, tc->cancel_fd, c.notice, &e);
	if (rc == BACKEND_CANCELLED) {
		tc->cancelled = true;
		return NULL;
	}
	if (rc < 0)
		return early_result(&c, 1, e.msg, e.msg, false);

	bool py = tc->tool == TOOL_PYTHON;
	if (py) {
		json_t *res = install(&c, json_object_get(tc->args, "requirements"));
		if (res || tc->cancelled)
			return res;
	}
	struct inputs in = {0};
	if (inputs_build(tc->args, call_env, &in, &e) < 0) {
		inputs_free(&in);
		return early_result(&c, 1, e.msg, e.msg, false);
	}
	/* The program: the script (or long bash code) goes last among the files. */
	struct run_file *file = &in.files[in.nfiles];
	const char **argv = calloc(in.nargs + 4, sizeof *argv);
	const json_t *src = json_object_get(tc->args, py ? "script" : "code");
	if (!argv) {
		inputs_free(&in);
		return early_result(&c, 1, "out of memory", "out of memory", false);
	}
	if (py) {
		*file = (struct run_file){TOOLS_SCRIPT, json_string_value(src), json_string_length(src), 0644};
		argv[0] = cfg->python;
		argv[1] = TOOLS_SCRIPT;
		memcpy(argv + 2, in.args, in.nargs * sizeof *argv);
	} else if (json_string_length(src) > CODE_ARG_MAX) {
		/* Too long for one argument: the shell reads it from a file instead. */
		*file = (struct run_file){TOOLS_SHELL_SCRIPT, json_string_value(src), json_string_length(src), 0644};
		argv[0] = "/bin/bash";
		argv[1] = "-c";
		argv[2] = ". " TOOLS_SHELL_SCRIPT;
	} else {
		argv[0] = "/bin/bash";
		argv[1] = "-c";
		argv[2] = json_string_value(src);
	}
	size_t nfiles = in.nfiles + (file->path != NULL);
	char spill[128];
	snprintf(spill, sizeof spill, TOOLS_OUTPUT "/call-%lu", tc->seq);
	struct collect col;
	if (collect_init(&col, tc, cfg->output_cap) < 0) {
		free(argv);
		inputs_free(&in);
		return early_result(&c, 1, "out of memory", "out of memory", false);
	}
	struct run_req rq = {.argv = argv, .env = in.env, .cwd = WORKSPACE, .files = nfiles ? in.files : NULL,
			     .nfiles = nfiles, .sh_fallback = !py, .deadline_ms = c.deadline,
			     .cancel_fd = tc->cancel_fd, .cap = cfg->output_cap, .spill_prefix = spill,
			     .changes_in = WORKSPACE "/" ARTIFACTS_DIR,
			     .on_output = collect_output, .ctx = &col};
	struct run_res rs;
	rc = sandbox_run(sb, &rq, &rs, c.notice, &e);
	json_t *res = NULL;
	if (rc < 0) {
		/* A full workspace refuses the script file: say how to get out of it. */
		size_t l = strlen(e.msg);
		if (nfiles && strstr(e.msg, strerror(ENOSPC)))
			snprintf(e.msg + l, sizeof e.msg - l, " (the workspace is full: remove files with "
				 "execute_bash_commands, which needs no room for short code, or call cleanup_sandbox)");
		res = early_result(&c, 1, e.msg, e.msg, false);
	} else if (rs.cancelled) {
		tc->cancelled = true;
	} else {
		res = run_result(&c, &rs, &col, spill);
	}
	collect_free(&col);
	free(argv);
	inputs_free(&in);
	return res;
}

/* ------------------------------------------------------------ cleanup */

/* A JSON string of s, repaired to valid UTF-8 (paths may hold anything). */
static json_t *clean_string(const char *s)
{
	size_t n;
	char *clean = utf8_sanitize(s, strlen(s), &n);
	json_t *j = clean ? json_stringn(clean, n) : NULL;
	free(clean);
	return j;
}

static json_t *text_result(const char *text, bool is_error)
{
	/* Texts may quote anything, cut inside a character: repair them so the result exists. */
	size_t n;
	char *clean = utf8_sanitize(text, strlen(text), &n);
	json_t *r = json_pack("{s:[{s:s, s:s%}]}", "content", "type", "text", "text", clean ? clean : "error",
			      clean ? n : 5);
	free(clean);
	if (r && is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}

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
	json_t *r = text_result(text, rc < 0);
	json_t *sc = json_pack("{s:b, s:o, s:o, s:o}", "removed", removed, "backend",
			       removed ? json_string(backend) : json_null(), "sandbox_id",
			       removed ? json_string(id) : json_null(), "error",
			       rc < 0 ? clean_string(e.msg) : json_null());
	if (!r || !sc) {
		json_decref(r);
		json_decref(sc);
		return NULL;
	}
	json_object_set_new(r, "structuredContent", sc);
	return r;
}
