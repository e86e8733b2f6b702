#include "inputs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../base/base64.h"
#include "schema.h"
#include "tools.h"

/* ------------------------------------------------------------ checks */

const char *inputs_path_problem(const char *p, bool reading)
{
	size_t n = strlen(p);
	if (n == 0)
		return "must not be empty";
	if (n > INPUTS_PATH_MAX)
		return "is longer than 1024 bytes";
	if (p[0] == '/')
		return "must be relative to /workspace";
	for (const char *s = p; *s;) {
		size_t l = strcspn(s, "/");
		if (l == 0)
			return "must not contain an empty name (\"//\" or a trailing \"/\")";
		if ((l == 1 && s[0] == '.') || (l == 2 && s[0] == '.' && s[1] == '.'))
			return "must not contain \".\" or \"..\"";
		if (l > 255)
			return "has a name longer than 255 bytes";
		for (size_t i = 0; i < l; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return "must not contain control characters";
		s += l;
		if (*s == '/' && !s[1])
			return "must not contain an empty name (\"//\" or a trailing \"/\")";
		if (*s)
			s++;
	}
	if (!reading && !strncmp(p, ".sandbox", 8) && (!p[8] || p[8] == '/'))
		return "is in .sandbox, the server's own folder";
	return NULL;
}

/* The decoded size of one files entry (checked by the schema to be a string or {base64}), or
 * -1 when its base64 is bad. */
static long file_size(const json_t *v)
{
	if (json_is_string(v))
		return (long)json_string_length(v);
	const json_t *b = json_object_get(v, "base64");
	return b64_decode(json_string_value(b), json_string_length(b), NULL);
}

static int check_files(const json_t *files, struct err *e)
{
	const char *k;
	json_t *v;
	size_t total = 0;
	json_object_foreach((json_t *)files, k, v) {
		const char *why = inputs_path_problem(k, false);
		char name[320];
		schema_entry_name(name, sizeof name, "files", k, true);
		if (why)
			return err_set(e, "%s: the path %s", name, why);
		long n = file_size(v);
		if (n < 0)
			return err_set(e, "%s.base64: is not valid base64", name);
		total += (size_t)n;
		if (total > INPUTS_FILE_BYTES)
			return err_set(e, "files: the files add up to more than 8 MiB (the limit for all files of "
					  "one call); write larger data in several calls");
	}
	return 0;
}

/* Why the call may not set this variable, or NULL: one the sandbox sets itself, or one that
 * steers pip or a proxy (the network policy rests on them), each said as it is. */
static const char *env_reserved(const char *name, const char *const *base_env)
{
	static const char *const proxies[] = {"http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy"};
	size_t n = strlen(name);
	for (const char *const *b = base_env; *b; b++)
		if (!strncmp(*b, name, n) && (*b)[n] == '=')
			return "is set by the sandbox and cannot be changed (PATH, HOME, PYTHONPATH, TMPDIR, LANG, TERM, "
			       "USER, LOGNAME, SHELL, MPLBACKEND, PYTHONUNBUFFERED)";
	for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++)
		if (!strcasecmp(name, proxies[i]))
			return "is a proxy variable, which a call may not set: the network the code may reach is the "
			       "server's --network policy alone";
	return !strncmp(name, "PIP_", 4) ? "is a pip setting, which a call may not set: package installs follow "
					   "the server's --index-url and --wheelhouse alone"
					 : NULL;
}

static int check_env(const json_t *env, const char *const *base_env, struct err *e)
{
	const char *k;
	json_t *v;
	size_t total = 0;
	json_object_foreach((json_t *)env, k, v) {
		char name[320];
		const char *why = env_reserved(k, base_env);
		if (why)
			return err_set(e, "%s: %s", schema_entry_name(name, sizeof name, "env", k, true), why);
		total += strlen(k) + 1 + json_string_length(v);
		if (total > INPUTS_ENV_BYTES)
			return err_set(e, "env: the variables add up to more than 64 KiB");
	}
	return 0;
}

static int check_args(const json_t *args, struct err *e)
{
	size_t i, total = 0;
	json_t *v;
	json_array_foreach(args, i, v) {
		total += json_string_length(v) + 1;
		if (total > INPUTS_ARGS_BYTES)
			return err_set(e, "args: the arguments add up to more than 64 KiB");
	}
	return 0;
}

int inputs_check(const json_t *args, const char *const *base_env, struct err *e)
{
	const json_t *f = json_object_get(args, "files"), *env = json_object_get(args, "env"),
		     *a = json_object_get(args, "args");
	if (f && check_files(f, e) < 0)
		return -1;
	if (env && check_env(env, base_env, e) < 0)
		return -1;
	if (a && check_args(a, e) < 0)
		return -1;
	size_t i;
	const json_t *c;
	json_array_foreach(json_object_get(args, "collect"), i, c) {
		const char *p = json_string_value(c);
		const char *why = strlen(p) != json_string_length(c) ? "must not contain NUL" : inputs_path_problem(p, true);
		if (why)
			return err_set(e, "collect[%zu]: the path %s", i, why);
	}
	return 0;
}

/* ------------------------------------------------------------ building */

static void *own(struct inputs *in, void *p)
{
	if (p)
		in->owned[in->nowned++] = p;
	return p;
}

static int build_files(const json_t *files, struct inputs *in)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)files, k, v) {
		struct run_file *f = &in->files[in->nfiles];
		char *path = own(in, malloc(strlen(WORKSPACE) + strlen(k) + 2));
		if (!path)
			return -1;
		sprintf(path, "%s/%s", WORKSPACE, k);
		*f = (struct run_file){.path = path, .mode = 0644};
		if (json_is_string(v)) {
			f->data = json_string_value(v);
			f->len = json_string_length(v);
		} else {
			const json_t *b = json_object_get(v, "base64");
			unsigned char *d = own(in, malloc(json_string_length(b) / 4 * 3 + 4));
			long n = d ? b64_decode(json_string_value(b), json_string_length(b), d) : -1;
			if (n < 0)
				return -1;
			f->data = d;
			f->len = (size_t)n;
		}
		in->nfiles++;
	}
	return 0;
}

static int build_env(const json_t *env, const char *const *base_env, struct inputs *in)
{
	size_t nb = 0, o = 0;
	while (base_env[nb])
		nb++;
	in->env = own(in, calloc(nb + json_object_size(env) + 1, sizeof *in->env));
	if (!in->env)
		return -1;
	for (size_t i = 0; i < nb; i++)
		in->env[o++] = base_env[i];
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)env, k, v) {
		char *kv = own(in, malloc(strlen(k) + json_string_length(v) + 2));
		if (!kv)
			return -1;
		sprintf(kv, "%s=%s", k, json_string_value(v));
		in->env[o++] = kv;
	}
	return 0;
}

int inputs_build(const json_t *args, const char *const *base_env, struct inputs *in, struct err *e)
{
	const json_t *f = json_object_get(args, "files"), *env = json_object_get(args, "env"),
		     *a = json_object_get(args, "args");
	/* At most: each file's path and data, the env array and each variable, the args array. */
	size_t nown = 2 * json_object_size(f) + 1 + json_object_size(env) + 2;
	in->owned = calloc(nown, sizeof *in->owned);
	if (!in->owned)
		return err_set(e, "out of memory");
	in->files = own(in, calloc(json_object_size(f) + 1, sizeof *in->files));
	in->args = own(in, calloc(json_array_size(a) + 1, sizeof *in->args));
	if (!in->files || !in->args || build_files(f, in) < 0 || build_env(env, base_env, in) < 0)
		return err_set(e, "out of memory");
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v) in->args[in->nargs++] = json_string_value(v);
	return 0;
}

void inputs_free(struct inputs *in)
{
	for (size_t i = 0; i < in->nowned; i++)
		free(in->owned[i]);
	free(in->owned);
	memset(in, 0, sizeof *in);
}
