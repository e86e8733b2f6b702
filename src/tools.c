#include "tools.h"

#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "output.h"
#include "schema.h"

static const char *const tool_names[TOOL_COUNT] = {"execute_python", "execute_bash_commands", "cleanup_sandbox"};

static struct {
	const struct config *cfg;
	json_t *listing;              /* the tools/list array */
	json_t *input[TOOL_COUNT];    /* input schemas, borrowed from listing */
} T;

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
 * the step may have the network.
 */
static const char *const install_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"LANG=C.UTF-8",
	"TMPDIR=/tmp",
	"PIP_CONFIG_FILE=/dev/null",
	"PIP_CACHE_DIR=/tmp/pip-cache",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
	"PIP_NO_INPUT=1",
	"PIP_ROOT_USER_ACTION=ignore",
	NULL,
};

/* Replaces each {key} of the description with the configured value. Caller frees. */
static char *fill_description(const char *tmpl, const struct config *cfg)
{
	char timeout[32], max_timeout[32], memory[32], cap[32];
	snprintf(timeout, sizeof timeout, "%g", cfg->timeout_s);
	snprintf(max_timeout, sizeof max_timeout, "%g", cfg->max_timeout_s);
	config_fmt_size(cfg->memory, memory, sizeof memory);
	config_fmt_size(cfg->output_cap, cap, sizeof cap);
	const char *network = cfg->network == NET_ALL ? "the code may use the network"
			      : cfg->network == NET_INSTALL ? "the code has none; only the package install step may use it"
			      : cfg->wheelhouse[0] ? "none; packages install from the server's wheelhouse only"
						   : "none, not even for package installs";
	const char *keys[][2] = {{"{timeout}", timeout}, {"{max_timeout}", max_timeout}, {"{memory}", memory},
				 {"{output_cap}", cap}, {"{network}", network}};
	size_t n = strlen(tmpl) + 1024;
	char *out = malloc(n);
	if (!out)
		return NULL;
	size_t o = 0;
	for (const char *p = tmpl; *p && o + 1 < n;) {
		size_t k;
		for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
			if (!strncmp(p, keys[k][0], strlen(keys[k][0])))
				break;
		if (k < sizeof keys / sizeof keys[0]) {
			o += (size_t)snprintf(out + o, n - o, "%s", keys[k][1]);
			p += strlen(keys[k][0]);
		} else {
			out[o++] = *p++;
		}
	}
	out[o < n ? o : n - 1] = '\0';
	return out;
}

int tools_init(const struct config *cfg, struct err *e)
{
	T.cfg = cfg;
	json_t *defs = schema_load("schemas/tools.json", e);
	if (!defs)
		return -1;
	T.listing = json_array();
	json_t *list = json_object_get(defs, "tools");
	size_t i;
	json_t *d;
	json_array_foreach(list, i, d) {
		const char *name = json_string_value(json_object_get(d, "name"));
		int id = tools_find(name ? name : "");
		char in[128], out[128];
		snprintf(in, sizeof in, "schemas/%s", json_string_value(json_object_get(d, "input")));
		snprintf(out, sizeof out, "schemas/%s", json_string_value(json_object_get(d, "output")));
		json_t *is = schema_load(in, e), *os = schema_load(out, e);
		char *desc = fill_description(json_string_value(json_object_get(d, "description")), cfg);
		if (id < 0 || !is || !os || !desc) {
			json_decref(is);
			json_decref(os);
			free(desc);
			json_decref(defs);
			return err_set(e, "schemas/tools.json: tool %s is incomplete", name ? name : "?");
		}
		T.input[id] = is;
		json_array_append_new(T.listing,
				      json_pack("{s:s, s:O, s:s, s:o, s:o, s:O}", "name", name, "title",
						json_object_get(d, "title"), "description", desc, "inputSchema", is,
						"outputSchema", os, "annotations", json_object_get(d, "annotations")));
		free(desc);
	}
	json_decref(defs);
	for (int t = 0; t < TOOL_COUNT; t++)
		if (!T.input[t])
			return err_set(e, "schemas/tools.json does not define %s", tool_names[t]);
	return 0;
}

void tools_free(void)
{
	json_decref(T.listing);
	memset(&T, 0, sizeof T);
}

json_t *tools_list(void)
{
	return json_incref(T.listing);
}

int tools_find(const char *name)
{
	for (int i = 0; i < TOOL_COUNT; i++)
		if (!strcmp(name, tool_names[i]))
			return i;
	return -1;
}

static json_t *text_result(const char *text, bool is_error)
{
	/* Texts may quote arguments cut inside a character: repair them so the result exists. */
	size_t n;
	char *clean = utf8_sanitize(text, strlen(text), &n);
	json_t *r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", clean ? clean : "error");
	free(clean);
	if (!r)
		return NULL;
	if (is_error)
		json_object_set_new(r, "isError", json_true());
	return r;
}

/* The name of the first string in v (keys included) holding a NUL character, or NULL. Text
 * with NUL cannot reach a program intact: a C string would end early. */
static const char *find_nul(const json_t *v, const char *name)
{
	size_t i;
	const char *k;
	json_t *x;
	if (json_is_string(v))
		return memchr(json_string_value(v), 0, json_string_length(v)) ? name : NULL;
	if (json_is_array(v))
		json_array_foreach(v, i, x) if (find_nul(x, name)) return name;
	if (json_is_object(v))
		json_object_foreach((json_t *)v, k, x) {
			/* A key with a NUL reads as a shorter key: refuse it too. */
			if (find_nul(x, k))
				return k;
		}
	return NULL;
}

int tools_check(int tool, const json_t *args, json_t **why)
{
	struct err e = {""};
	char msg[sizeof e.msg + 64] = "";
	const json_t *t = json_object_get(args, "timeout_s");
	const char *nul = find_nul(args, "arguments");
	*why = NULL;
	if (nul) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: %.200s: contains a NUL character", tool_names[tool], nul);
	} else if (schema_validate(T.input[tool], args, "", &e) < 0) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: %s", tool_names[tool], e.msg);
	} else if (t && json_number_value(t) > T.cfg->max_timeout_s) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: timeout_s: must be at most %g (the server's --max-timeout)",
			 tool_names[tool], T.cfg->max_timeout_s);
	}
	if (!msg[0])
		return 0;
	*why = text_result(msg, true);
	return -1;
}

/* ------------------------------------------------------------ running */

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

/* What a result says; strings borrowed. */
struct outcome {
	int exit_code;
	const char *out, *err;
	size_t out_len, err_len;
	bool timed_out;
	int64_t duration_ms;
	uint64_t bytes[2];
	bool cut[2];
	const char *file[2];
	const char *error;
	const char *notice;
};

static void add_stream_text(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		size_t nc = (*len + n + 1) * 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
}

/* The text block: what a model reads. */
static char *outcome_text(const struct outcome *o, const char *backend, const char *id, double timeout)
{
	char *t = NULL, line[1024];
	size_t len = 0, cap = 0;
	if (o->error && !backend)
		snprintf(line, sizeof line, "exit_code: %d (no sandbox)\n", o->exit_code);
	else
		snprintf(line, sizeof line, "exit_code: %d (%lld ms, %s sandbox %s)\n", o->exit_code,
			 (long long)o->duration_ms, backend ? backend : "no", id ? id : "-");
	add_stream_text(&t, &len, &cap, line);
	if (o->timed_out) {
		snprintf(line, sizeof line, "timed out after %g s: every process of the call was killed\n", timeout);
		add_stream_text(&t, &len, &cap, line);
	}
	if (o->notice) {
		snprintf(line, sizeof line, "notice: %s\n", o->notice);
		add_stream_text(&t, &len, &cap, line);
	}
	if (o->error) {
		add_stream_text(&t, &len, &cap, "error: ");
		add_stream_text(&t, &len, &cap, o->error);
		add_stream_text(&t, &len, &cap, "\n");
	}
	static const char *const names[2] = {"stdout", "stderr"};
	const char *texts[2] = {o->out, o->err};
	for (int i = 0; i < 2; i++) {
		if (!*texts[i]) {
			snprintf(line, sizeof line, "--- %s: empty ---\n", names[i]);
			add_stream_text(&t, &len, &cap, line);
			continue;
		}
		snprintf(line, sizeof line, "--- %s ---\n", names[i]);
		add_stream_text(&t, &len, &cap, line);
		add_stream_text(&t, &len, &cap, texts[i]);
		if (texts[i][strlen(texts[i]) - 1] != '\n')
			add_stream_text(&t, &len, &cap, "\n");
		if (o->cut[i]) {
			snprintf(line, sizeof line, "(%s was cut: %llu bytes in all%s%s)\n", names[i],
				 (unsigned long long)o->bytes[i], o->file[i] ? "; full text in " : "",
				 o->file[i] ? o->file[i] : "");
			add_stream_text(&t, &len, &cap, line);
		}
	}
	return t;
}

/* A JSON string of s, repaired to valid UTF-8 (errors and notices may quote anything cut
 * anywhere); null for NULL. */
static json_t *str_or_null(const char *s)
{
	if (!s)
		return json_null();
	size_t n;
	char *clean = utf8_sanitize(s, strlen(s), &n);
	json_t *j = clean ? json_stringn(clean, n) : NULL;
	free(clean);
	return j ? j : json_string("(text lost: out of memory)");
}

static json_t *outcome_result(const struct outcome *o, struct sandbox *sb, double timeout)
{
	const char *backend = o->error && !sandbox_backend(sb) ? NULL : sandbox_backend(sb);
	const char *id = backend ? sandbox_id(sb) : NULL;
	json_t *sc = json_pack("{s:i, s:s%, s:s%, s:b, s:I, s:{s:b, s:b, s:I, s:I, s:o, s:o}, s:o, s:o, s:o, s:o}",
			       "exit_code", o->exit_code, "stdout", o->out, o->out_len, "stderr", o->err, o->err_len, "timed_out", o->timed_out,
			       "duration_ms", (json_int_t)o->duration_ms, "truncated", "stdout", o->cut[0], "stderr",
			       o->cut[1], "stdout_bytes", (json_int_t)o->bytes[0], "stderr_bytes",
			       (json_int_t)o->bytes[1], "stdout_file", str_or_null(o->file[0]), "stderr_file",
			       str_or_null(o->file[1]), "backend", str_or_null(backend), "sandbox_id", str_or_null(id),
			       "error", str_or_null(o->error), "notice", str_or_null(o->notice));
	char *text = outcome_text(o, backend, id, timeout);
	json_t *r = json_pack("{s:[{s:s, s:o}], s:o}", "content", "type", "text", "text", str_or_null(text ? text : ""),
			      "structuredContent", sc);
	free(text);
	if (!r)
		return NULL;
	if (o->exit_code != 0 || o->timed_out || o->error)
		json_object_set_new(r, "isError", json_true());
	return r;
}

/* A result for a call that never reached the code (no sandbox, install failure, ...). */
static json_t *early_result(struct sandbox *sb, int exit_code, const char *stderr_text, const char *error,
			    const char *notice, int64_t t0, bool timed_out, double timeout)
{
	size_t n;
	char *clean = utf8_sanitize(stderr_text, strlen(stderr_text), &n);
	struct outcome o = {.exit_code = exit_code, .out = "", .err = clean ? clean : "", .error = error,
			    .notice = *notice ? notice : NULL, .duration_ms = clock_ms() - t0, .timed_out = timed_out};
	o.bytes[1] = n;
	o.err_len = clean ? n : 0;
	json_t *r = outcome_result(&o, sb, timeout);
	free(clean);
	return r;
}

/* A PEP 508 requirement made of a name, extras, version specifiers and a marker only. */
static bool plain_requirement(const char *q)
{
	static regex_t re;
	static bool compiled;
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&mu);
	if (!compiled)
		compiled = regcomp(&re,
				   "^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"       /* name */
				   " *(\\[ *[A-Za-z0-9._-]+( *, *[A-Za-z0-9._-]+)* *\\])?" /* extras */
				   " *((===|~=|==|!=|<=|>=|<|>) *[A-Za-z0-9.*+!_-]+"
				   "( *, *(===|~=|==|!=|<=|>=|<|>) *[A-Za-z0-9.*+!_-]+)*)?" /* versions */
				   " *(;[^/\\\\@#:]*)?$",                                 /* marker */
				   REG_EXTENDED | REG_NOSUB) == 0;
	bool ok = compiled && regexec(&re, q, 0, NULL, 0) == 0;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return false;
	/* pip takes a name that ends like an archive ("x.whl", "x.tar.gz") for a file. */
	static const char *const archive[] = {".whl", ".zip", ".tar", ".tgz", ".tbz", ".txz", ".tlz",
					      ".gz", ".bz2", ".xz", ".lz", ".lzma"};
	size_t n = strcspn(q, "[ ;<>=!~");
	for (size_t i = 0; i < sizeof archive / sizeof archive[0]; i++) {
		size_t al = strlen(archive[i]);
		if (n >= al && !strncasecmp(q + n - al, archive[i], al))
			return false;
	}
	return true;
}

/* True when every requirement asked for was installed in this sandbox before. */
static bool all_installed(struct sandbox *sb, const json_t *reqs)
{
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) if (!json_object_get(sb->installed, json_string_value(r))) return false;
	return true;
}

/* Installs requirements. NULL when done (or nothing to do); else the result to return (new
 * ref), or NULL with tc->cancelled set. */
static json_t *install(struct sandbox *sb, struct tool_call *tc, const json_t *reqs, int64_t t0, int64_t deadline,
		       double timeout, const char *notice)
{
	const struct config *cfg = T.cfg;
	if (!json_array_size(reqs) || all_installed(sb, reqs))
		return NULL;
	size_t total = 0;
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) total += json_string_length(r) + 1;
	char *txt = malloc(total + 1);
	if (!txt)
		return early_result(sb, 1, "Failed to install requirements: out of memory", "out of memory", notice, t0,
				    false, timeout);
	size_t o = 0;
	json_array_foreach(reqs, i, r) {
		memcpy(txt + o, json_string_value(r), json_string_length(r));
		o += json_string_length(r);
		txt[o++] = '\n';
	}
	struct run_file f = {TOOLS_REQUIREMENTS, txt, o, 0644};
	bool offline = cfg->wheelhouse[0] || cfg->network == NET_NONE;
	/* With the network reachable, only wheels install (no package's build code runs) and a
	 * requirement must be a plain PEP 508 name with extras, versions and markers: no URL (it
	 * could reach services on the host), no path (a folder in the workspace with a build
	 * backend would run it, with the network). */
	if (!offline) {
		json_array_foreach(reqs, i, r) {
			const char *q = json_string_value(r);
			if (!plain_requirement(q)) {
				char msg[800];
				snprintf(msg, sizeof msg,
					 "Failed to install requirements: '%.300s' is not allowed: when installs use the "
					 "network, give package names with optional extras, versions and markers "
					 "(e.g. \"requests[socks]>=2.31\"), not URLs or paths; local wheels install "
					 "with --network none or a wheelhouse", q);
				free(txt);
				return early_result(sb, 1, msg, NULL, notice, t0, false, timeout);
			}
		}
	}
	const char *argv[24];
	size_t a = 0;
	argv[a++] = cfg->python;
	argv[a++] = "-I";
	argv[a++] = "-m";
	argv[a++] = "pip";
	argv[a++] = "install";
	argv[a++] = "--no-warn-script-location";
	argv[a++] = "--upgrade";
	argv[a++] = "--target";
	argv[a++] = TOOLS_PACKAGES;
	if (offline) {
		argv[a++] = "--no-index";
	} else {
		argv[a++] = "--only-binary";
		argv[a++] = ":all:";
	}
	if (cfg->wheelhouse[0]) {
		argv[a++] = "--find-links";
		argv[a++] = "/wheelhouse";
	}
	argv[a++] = "-r";
	argv[a++] = TOOLS_REQUIREMENTS;
	argv[a] = NULL;

	struct collect c;
	if (collect_init(&c, tc, cfg->output_cap) < 0) {
		free(txt);
		return early_result(sb, 1, "Failed to install requirements: out of memory", "out of memory", notice, t0,
				    false, timeout);
	}
	/* Not in the workspace: a name must never resolve to a folder the code made there. */
	struct run_req rq = {.argv = argv, .env = install_env, .cwd = "/tmp", .files = &f, .nfiles = 1,
			     .network = !offline, .deadline_ms = deadline, .cancel_fd = tc->cancel_fd,
			     .cap = cfg->output_cap, .on_output = collect_output, .ctx = &c};
	struct run_res rs;
	struct err e = {""};
	int rc = sandbox_run(sb, &rq, &rs, &e);
	free(txt);
	json_t *res = NULL;
	if (rc < 0) {
		char msg[sizeof e.msg + 64];
		snprintf(msg, sizeof msg, "Failed to install requirements: %s", e.msg);
		res = early_result(sb, 1, msg, e.msg, notice, t0, false, timeout);
	} else if (rs.cancelled) {
		tc->cancelled = true;
	} else if (rs.exit_code != 0 || rs.timed_out) {
		size_t ol, el;
		char *out = output_text(&c.out[0], NULL, &ol), *err = output_text(&c.out[1], NULL, &el);
		const char *pip = err && el ? err : out ? out : "";
		char *msg = malloc(strlen(pip) + 128);
		if (msg) {
			if (rs.timed_out)
				sprintf(msg, "Failed to install requirements: timed out after %g s\n%s", timeout, pip);
			else
				sprintf(msg, "Failed to install requirements: %s", pip);
		}
		res = early_result(sb, rs.timed_out ? 124 : 1, msg ? msg : "Failed to install requirements", NULL, notice,
				   t0, rs.timed_out, timeout);
		free(msg);
		free(out);
		free(err);
	} else {
		json_array_foreach(reqs, i, r) json_object_set_new(sb->installed, json_string_value(r), json_true());
	}
	collect_free(&c);
	return res;
}

static json_t *execute(struct sandbox *sb, struct tool_call *tc)
{
	const struct config *cfg = T.cfg;
	int64_t t0 = clock_ms();
	const json_t *targ = json_object_get(tc->args, "timeout_s");
	double timeout = targ ? json_number_value(targ) : cfg->timeout_s;
	int64_t deadline = t0 + (int64_t)ceil(timeout * 1000);
	char notice[512];
	struct err e = {""};

	if (sandbox_ensure(sb, &e) < 0)
		return early_result(sb, 1, e.msg, e.msg, "", t0, false, timeout);
	sandbox_take_notice(sb, notice, sizeof notice);

	bool py = tc->tool == TOOL_PYTHON;
	if (py) {
		json_t *res = install(sb, tc, json_object_get(tc->args, "requirements"), t0, deadline, timeout, notice);
		if (res || tc->cancelled)
			return res;
	}
	struct run_file script = {0};
	const char *argv[4];
	if (py) {
		const json_t *s = json_object_get(tc->args, "script");
		script = (struct run_file){TOOLS_SCRIPT, json_string_value(s), json_string_length(s), 0644};
		argv[0] = cfg->python;
		argv[1] = TOOLS_SCRIPT;
		argv[2] = NULL;
	} else {
		argv[0] = "/bin/bash";
		argv[1] = "-c";
		argv[2] = json_string_value(json_object_get(tc->args, "code"));
		argv[3] = NULL;
	}
	char spill[128];
	snprintf(spill, sizeof spill, TOOLS_OUTPUT "/call-%lu", tc->seq);
	struct collect c;
	if (collect_init(&c, tc, cfg->output_cap) < 0)
		return early_result(sb, 1, "out of memory", "out of memory", notice, t0, false, timeout);
	struct run_req rq = {.argv = argv, .env = call_env, .cwd = WORKSPACE, .files = py ? &script : NULL,
			     .nfiles = py ? 1 : 0, .sh_fallback = !py, .deadline_ms = deadline,
			     .cancel_fd = tc->cancel_fd, .cap = cfg->output_cap, .spill_prefix = spill,
			     .on_output = collect_output, .ctx = &c};
	struct run_res rs;
	int rc = sandbox_run(sb, &rq, &rs, &e);
	if (!*notice)
		sandbox_take_notice(sb, notice, sizeof notice);
	json_t *res;
	if (rc < 0) {
		res = early_result(sb, 1, e.msg, e.msg, notice, t0, false, timeout);
	} else if (rs.cancelled) {
		tc->cancelled = true;
		res = NULL;
	} else {
		char files[2][160];
		struct outcome o = {.exit_code = rs.exit_code, .timed_out = rs.timed_out, .notice = *notice ? notice : NULL};
		for (int i = 0; i < 2; i++) {
			o.bytes[i] = rs.bytes[i];
			o.cut[i] = output_cut(&c.out[i]);
			if (rs.spilled[i]) {
				snprintf(files[i], sizeof files[i], "%s.%s", spill, i ? "stderr" : "stdout");
				o.file[i] = files[i];
			}
		}
		size_t ol, el;
		char *out = output_text(&c.out[0], o.file[0], &ol), *err = output_text(&c.out[1], o.file[1], &el);
		o.out = out ? out : "";
		o.err = err ? err : "";
		o.out_len = out ? ol : 0;
		o.err_len = err ? el : 0;
		o.duration_ms = clock_ms() - t0;
		res = outcome_result(&o, sb, timeout);
		free(out);
		free(err);
	}
	collect_free(&c);
	return res;
}

static json_t *cleanup(struct sandbox *sb)
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
	json_object_set_new(r, "structuredContent",
			    json_pack("{s:b, s:o, s:o, s:o}", "removed", removed, "backend",
				      removed ? json_string(backend) : json_null(), "sandbox_id",
				      removed ? json_string(id) : json_null(), "error", str_or_null(rc < 0 ? e.msg : NULL)));
	return r;
}

json_t *tools_run(struct sandbox *sb, struct tool_call *tc)
{
	tc->cancelled = false;
	if (tc->tool == TOOL_CLEANUP)
		return cleanup(sb);
	return execute(sb, tc);
}
