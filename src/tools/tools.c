#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "call.h"
#include "../base/log.h"
#include "../base/utf8.h"
#include "result.h"
#include "schema.h"
#include "wheelhouse.h"

static const char *const tool_names[TOOL_COUNT] = {"execute_python", "execute_bash_commands", "cleanup_sandbox",
						   "process"};

uint64_t tools_bg_cap(const struct config *cfg)
{
	/* Each stream is in a result twice (its text block and structuredContent). */
	return cfg->output_cap < cfg->result_max / 8 ? cfg->output_cap : cfg->result_max / 8;
}

static struct {
	const struct config *cfg;
	json_t *listing;              /* the tools/list array */
	json_t *input[TOOL_COUNT];    /* input schemas, borrowed from listing */
} T;

/* Where packages come from and what the code may reach, as the descriptions say it. Caller
 * frees. With a wheelhouse, installs never use a network, whatever --network says. */
static char *network_text(const struct config *cfg)
{
	char *list = cfg->wheelhouse[0] ? wheelhouse_list(cfg->wheelhouse, 40) : NULL;
	char allowed[sizeof cfg->allow_hosts + 320];
	const char *code = cfg->network == NET_ALL ? "the code may use the network" : "none for the code";
	if (cfg->allow_hosts[0] && cfg->network == NET_INSTALL) {
		snprintf(allowed, sizeof allowed, "the code reaches only these hosts (--allow-hosts: %s), by HTTP(S) through "
			 "the proxy its HTTP_PROXY/HTTPS_PROXY variables name, and nothing else (no DNS, no other route); on "
			 "Daytona the rule is by address: the addresses the names had when the sandbox was made, on any port",
			 cfg->allow_hosts);
		code = allowed;
	}
	size_t n = (list ? strlen(list) : 0) + strlen(code) + 256;
	char *t = malloc(n);
	if (t && list)
		snprintf(t, n, "%s; requirements install only from the server's wheelhouse, with no network (it "
			       "has: %s)", code, *list ? list : "nothing");
	else if (t && cfg->network == NET_NONE)
		snprintf(t, n, "none, and requirements cannot be installed (no network and no wheelhouse): use "
			       "the packages already there");
	else if (t)
		snprintf(t, n, "%s; requirements are installed from the package index, by a separate install step "
			       "that alone may reach it", code);
	free(list);
	return t;
}

/* Replaces each {key} of the description with the configured value. Caller frees. */
static char *fill_description(const char *tmpl, const struct config *cfg)
{
	char timeout[32], max_timeout[32], memory[32], cap[32], result[32], bg_cap[32], bg_max[32], bg_t[32],
		bg_mt[32];
	config_fmt_size(tools_bg_cap(cfg), bg_cap, sizeof bg_cap);
	snprintf(bg_max, sizeof bg_max, "%llu", (unsigned long long)cfg->max_background);
	char sess_max[32];
	snprintf(sess_max, sizeof sess_max, "%llu", (unsigned long long)cfg->max_sessions);
	snprintf(bg_t, sizeof bg_t, "%g", cfg->bg_timeout_s);
	snprintf(bg_mt, sizeof bg_mt, "%g", cfg->bg_max_timeout_s);
	snprintf(timeout, sizeof timeout, "%g", cfg->timeout_s);
	snprintf(max_timeout, sizeof max_timeout, "%g", cfg->max_timeout_s);
	config_fmt_size(cfg->memory, memory, sizeof memory);
	config_fmt_size(cfg->output_cap, cap, sizeof cap);
	config_fmt_size(cfg->result_max, result, sizeof result);
	char *network = network_text(cfg);
	if (!network)
		return NULL;
	const char *keys[][2] = {{"{timeout}", timeout}, {"{max_timeout}", max_timeout}, {"{memory}", memory},
				 {"{output_cap}", cap}, {"{result_max}", result}, {"{network}", network},
				 {"{bg_cap}", bg_cap}, {"{max_background}", bg_max}, {"{bg_timeout}", bg_t},
				 {"{bg_max_timeout}", bg_mt}, {"{max_sessions}", sess_max}};
	size_t n = strlen(tmpl) + strlen(network) + 1024;
	char *out = malloc(n);
	if (!out) {
		free(network);
		return NULL;
	}
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
	free(network);
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

const char *tools_name(int tool)
{
	return tool >= 0 && tool < TOOL_COUNT ? tool_names[tool] : "?";
}

const char *tools_names(void)
{
	return "execute_python, execute_bash_commands, cleanup_sandbox, process";
}

/* What to add to a schema error: the arguments the tool takes, and where a misplaced program
 * belongs (models mix up `script` and `code`). */
static void argument_hint(int tool, const json_t *args, char *out, size_t n)
{
	size_t o = (size_t)snprintf(out, n, " (%s takes ", tool_names[tool]);
	const char *k;
	json_t *v;
	int i = 0;
	json_object_foreach(json_object_get(T.input[tool], "properties"), k, v) {
		if (o < n)
			o += (size_t)snprintf(out + o, n - o, "%s%s", i++ ? ", " : "", k);
	}
	if (!i && o < n)
		o += (size_t)snprintf(out + o, n - o, "no arguments");
	if (tool == TOOL_PYTHON && json_object_get(args, "code") && o < n)
		o += (size_t)snprintf(out + o, n - o, "; the Python source goes in `script`");
	if (tool == TOOL_BASH && json_object_get(args, "script") && o < n)
		o += (size_t)snprintf(out + o, n - o, "; the shell commands go in `code`");
	if (o < n)
		snprintf(out + o, n - o, ")");
}

int tools_check(int tool, const json_t *args, json_t **why)
{
	struct err e = {""};
	char msg[sizeof e.msg + 512] = "", hint[400];
	const json_t *t = json_object_get(args, "timeout_s");
	const char *nul = find_nul(args, "arguments");
	*why = NULL;
	if (nul) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: %.200s: contains a NUL character", tool_names[tool], nul);
	} else if (schema_validate(T.input[tool], args, "", &e) < 0) {
		argument_hint(tool, args, hint, sizeof hint);
		snprintf(msg, sizeof msg, "Invalid arguments for %s: %s%s", tool_names[tool], e.msg, hint);
	} else if (tool != TOOL_CLEANUP && tool != TOOL_PROCESS && call_check(args, &e) < 0) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: %s", tool_names[tool], e.msg);
	} else if (json_object_get(args, "session") && json_is_true(json_object_get(args, "background"))) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: session and background do not go together",
			 tool_names[tool]);
	} else if (json_object_get(args, "session") && T.cfg->max_sessions == 0) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: session: this server keeps no sessions (--max-sessions 0)",
			 tool_names[tool]);
	} else if (json_is_true(json_object_get(args, "background")) && T.cfg->max_background == 0) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: background: this server runs no background processes "
			 "(--max-background 0)", tool_names[tool]);
	} else if (json_is_true(json_object_get(args, "background"))) {
		if (t && json_number_value(t) > T.cfg->bg_max_timeout_s)
			snprintf(msg, sizeof msg, "Invalid arguments for %s: timeout_s: must be at most %g for a background "
				 "process (the server's --max-background-timeout)", tool_names[tool], T.cfg->bg_max_timeout_s);
	} else if (t && json_number_value(t) > T.cfg->max_timeout_s) {
		snprintf(msg, sizeof msg, "Invalid arguments for %s: timeout_s: must be at most %g (the server's --max-timeout)",
			 tool_names[tool], T.cfg->max_timeout_s);
	}
	if (!msg[0])
		return 0;
	*why = result_text(msg, true);
	return -1;
}

void tools_prepare(struct sandbox *sb, int cancel_fd, int call_fd)
{
	call_prepare(sb, T.cfg, cancel_fd, call_fd);
}

json_t *tools_process(struct sandbox *sb, const json_t *args)
{
	return process_run(sb, args, T.cfg->result_max);
}

json_t *tools_run(struct sandbox *sb, struct tool_call *tc)
{
	tc->cancelled = false;
	if (tc->tool == TOOL_CLEANUP)
		return call_cleanup(sb);
	if (tc->tool == TOOL_PROCESS) /* one that came the worker's way all the same */
		return tools_process(sb, tc->args);
	sandbox_call_begin(sb);
	json_t *r = call_execute(sb, tc, T.cfg);
	sandbox_call_end(sb);
	return r;
}
