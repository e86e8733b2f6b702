#include "kcreds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../../src/base/base64.h"
#include "kyaml.h"

#define USE_INSTEAD "give the user a bearer token (token or tokenFile) or a client certificate " \
	"(client-certificate(-data) and client-key(-data)), e.g. a service account's token"

void kcreds_free(struct kcreds *c)
{
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	if (c->key)
		explicit_bzero(c->key, c->key_len);
	free(c->ca);
	free(c->token);
	free(c->cert);
	free(c->key);
	memset(c, 0, sizeof *c);
}

/* The regular file at path, whole, NUL-terminated (caller frees); *n its length. */
static char *read_file(const char *path, const char *what, size_t *n, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return err_sys(e, "%s %s", what, path), NULL;
	struct stat st;
	char *buf = NULL;
	if (fstat(fd, &st) < 0) {
		err_sys(e, "%s %s", what, path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)KCREDS_FILE_MAX) {
		err_set(e, "%s %s: %s", what, path, S_ISREG(st.st_mode) ? "too large" : "not a regular file");
		goto out;
	}
	if (!(buf = malloc(KCREDS_FILE_MAX + 1))) {
		err_set(e, "out of memory");
		goto out;
	}
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, KCREDS_FILE_MAX + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err_sys(e, "%s %s", what, path);
			free(buf);
			buf = NULL;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > KCREDS_FILE_MAX) {
			err_set(e, "%s %s: too large", what, path);
			free(buf);
			buf = NULL;
			goto out;
		}
	}
	buf[len] = '\0';
	*n = len;
out:
	close(fd);
	return buf;
}

/* A token as it goes in a header: surrounding white space off; nothing but visible ASCII. */
static int token_ok(char *t, const char *where, struct err *e)
{
	size_t l = strlen(t);
	while (l && strchr(" \t\r\n", t[l - 1]))
		t[--l] = '\0';
	size_t lead = strspn(t, " \t\r\n");
	memmove(t, t + lead, l - lead + 1);
	if (!t[0])
		return err_set(e, "%s: the token is empty", where);
	for (const char *p = t; *p; p++)
		if (*p <= ' ' || *p > '~')
			return err_set(e, "%s: the token holds a character a header cannot carry", where);
	return 0;
}

static int server_ok(struct kcreds *c, const char *s, const char *where, struct err *e)
{
	if (strncmp(s, "https://", 8))
		return err_set(e, "%s: the server %.200s is not https:// (plain HTTP would carry the credentials "
				  "in the clear)", where, s);
	size_t l = strlen(s);
	if (l >= sizeof c->server || l <= 8)
		return err_set(e, "%s: the server's URL is %s", where, l <= 8 ? "empty" : "too long");
	for (const char *p = s; *p; p++)
		if (*p <= ' ' || *p > '~' || *p == '#' || *p == '?')
			return err_set(e, "%s: the server %.200s is not a plain URL", where, s);
	snprintf(c->server, sizeof c->server, "%s", s);
	while (l > 8 && c->server[l - 1] == '/')
		c->server[--l] = '\0';
	return 0;
}

static int ns_ok(const char *ns, const char *where, struct err *e)
{
	size_t l = strlen(ns);
	bool good = l && l <= 63 && ns[0] != '-' && ns[l - 1] != '-';
	for (const char *p = ns; good && *p; p++)
		good = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-';
	return good ? 0 : err_set(e, "%s: the namespace '%.80s' is not a DNS label", where, ns);
}

/* ---------------------------------------------------------------- in-cluster */

static int in_cluster(struct kcreds *c, const char *sa_dir, struct err *e)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	const char *where = "the pod's service account";
	if (!port || !*port || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
		return err_set(e, "KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not a port");
	if (strspn(host, "0123456789abcdefABCDEF.:-") != strlen(host) || strlen(host) > 253)
		return err_set(e, "KUBERNETES_SERVICE_HOST is not an address");
	char url[300], path[PATH_MAX];
	snprintf(url, sizeof url, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
	if (server_ok(c, url, where, e) < 0)
		return -1;
	size_t n;
	snprintf(path, sizeof path, "%s/token", sa_dir);
	if (!(c->token = read_file(path, "the service account's token", &n, e)) || token_ok(c->token, where, e) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
	if (!(c->ca = read_file(path, "the service account's CA", &c->ca_len, e)))
		return -1;
	snprintf(path, sizeof path, "%s/namespace", sa_dir);
	char *ns = read_file(path, "the service account's namespace", &n, e);
	if (!ns)
		return -1;
	ns[strcspn(ns, " \t\r\n")] = '\0';
	int rc = ns_ok(ns, where, e);
	snprintf(c->ns, sizeof c->ns, "%s", ns);
	free(ns);
	if (rc == 0)
		snprintf(c->source, sizeof c->source, "in-cluster service account (%s)", sa_dir);
	return rc;
}

/* ---------------------------------------------------------------- kubeconfig */

/* The `inner` of the entry named name in the list doc[list] ([{name, inner: {...}}]). */
static json_t *named(json_t *doc, const char *list, const char *name, const char *inner)
{
	json_t *arr = json_object_get(doc, list), *it;
	size_t i;
	if (!json_is_array(arr))
		return NULL;
	json_array_foreach(arr, i, it) {
		json_t *n = json_object_get(it, "name");
		if (json_is_string(n) && !strcmp(json_string_value(n), name)) {
			json_t *v = json_object_get(it, inner);
			return json_is_object(v) ? v : NULL;
		}
	}
	return NULL;
}

static const char *str(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) && json_string_length(v) ? json_string_value(v) : NULL;
}

/* path relative to the kubeconfig's folder dir, as clientcmd resolves it. 0, or -1 (e set)
 * when it is too long. */
static int resolve(const char *dir, const char *path, char *out, size_t n, struct err *e)
{
	int r = path[0] == '/' ? snprintf(out, n, "%s", path) : snprintf(out, n, "%s/%s", dir, path);
	return r < 0 || (size_t)r >= n ? err_set(e, "the kubeconfig names a path too long: %.100s...", path) : 0;
}

/* obj[data_key] (base64) or the file obj[file_key]: the bytes, NUL-terminated (caller frees).
 * NULL with *n 0 and e untouched when neither is there. */
static char *material(json_t *obj, const char *data_key, const char *file_key, const char *dir, const char *what,
		      size_t *n, struct err *e)
{
	const char *data = str(obj, data_key), *file = str(obj, file_key);
	*n = 0;
	if (data && file)
		return err_set(e, "the kubeconfig gives both %s and %s", data_key, file_key), NULL;
	if (file) {
		char p[PATH_MAX];
		return resolve(dir, file, p, sizeof p, e) < 0 ? NULL : read_file(p, what, n, e);
	}
	if (!data)
		return NULL;
	size_t l = strlen(data);
	char *out = malloc(l / 4 * 3 + 4);
	if (!out)
		return err_set(e, "out of memory"), NULL;
	long got = b64_decode(data, l, (unsigned char *)out);
	if (got < 0) {
		free(out);
		return err_set(e, "the kubeconfig's %s is not base64", data_key), NULL;
	}
	out[got] = '\0';
	*n = (size_t)got;
	return out;
}

static bool truthy(json_t *v)
{
	return json_is_true(v) || (json_is_string(v) && !strcmp(json_string_value(v), "true"));
}

static int from_doc(struct kcreds *c, json_t *doc, const char *path, const char *context, struct err *e)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	if (!json_is_object(doc))
		return err_set(e, "kubeconfig %s: not a mapping", path);
	const char *ctx_name = context && *context ? context : str(doc, "current-context");
	if (!ctx_name)
		return err_set(e, "kubeconfig %s: no current-context (name one with --kube-context)", path);
	json_t *ctx = named(doc, "contexts", ctx_name, "context");
	if (!ctx)
		return err_set(e, "kubeconfig %s: no context '%.100s'", path, ctx_name);
	const char *cl_name = str(ctx, "cluster"), *user_name = str(ctx, "user");
	json_t *cl = cl_name ? named(doc, "clusters", cl_name, "cluster") : NULL;
	if (!cl)
		return err_set(e, "kubeconfig %s: context '%.100s' names no cluster that is there", path, ctx_name);
	json_t *user = user_name ? named(doc, "users", user_name, "user") : NULL;
	if (!user)
		return err_set(e, "kubeconfig %s: context '%.100s' names no user that is there", path, ctx_name);
	char where[PATH_MAX + 200];
	snprintf(where, sizeof where, "kubeconfig %s, context '%.100s'", path, ctx_name);
	if (json_object_get(user, "exec"))
		return err_set(e, "%s: user '%.100s' gets its credentials from an exec plugin (%.100s), which sandbox-mcp "
				  "does not run: %s", where, user_name,
			       str(json_object_get(user, "exec"), "command") ? str(json_object_get(user, "exec"), "command")
									     : "no command", USE_INSTEAD);
	if (json_object_get(user, "auth-provider"))
		return err_set(e, "%s: user '%.100s' gets its credentials from an auth provider, which sandbox-mcp does "
				  "not use: %s", where, user_name, USE_INSTEAD);
	if (str(user, "username") || str(user, "password"))
		return err_set(e, "%s: user '%.100s' uses basic auth, which sandbox-mcp does not send: %s", where,
			       user_name, USE_INSTEAD);
	if (truthy(json_object_get(cl, "insecure-skip-tls-verify")))
		return err_set(e, "%s: cluster '%.100s' sets insecure-skip-tls-verify: the server's certificate must be "
				  "checked (give certificate-authority or certificate-authority-data)", where, cl_name);
	const char *server = str(cl, "server");
	if (!server)
		return err_set(e, "%s: cluster '%.100s' has no server", where, cl_name);
	if (server_ok(c, server, where, e) < 0)
		return -1;
	c->ca = material(cl, "certificate-authority-data", "certificate-authority", dir, "the cluster's CA", &c->ca_len, e);
	if (!c->ca && e->msg[0])
		return -1;
	const char *tok = str(user, "token"), *tok_file = str(user, "tokenFile");
	if (tok && tok_file)
		return err_set(e, "%s: user '%.100s' gives both token and tokenFile", where, user_name);
	size_t n;
	if (tok && !(c->token = strdup(tok)))
		return err_set(e, "out of memory");
	if (tok_file) {
		char p[PATH_MAX];
		if (resolve(dir, tok_file, p, sizeof p, e) < 0 || !(c->token = read_file(p, "the user's tokenFile", &n, e)))
			return -1;
	}
	if (c->token && token_ok(c->token, where, e) < 0)
		return -1;
	c->cert = material(user, "client-certificate-data", "client-certificate", dir, "the client certificate",
			   &c->cert_len, e);
	if (!c->cert && e->msg[0])
		return -1;
	c->key = material(user, "client-key-data", "client-key", dir, "the client key", &c->key_len, e);
	if (!c->key && e->msg[0])
		return -1;
	if (!c->cert != !c->key)
		return err_set(e, "%s: user '%.100s' has a client %s without its %s", where, user_name,
			       c->cert ? "certificate" : "key", c->cert ? "key" : "certificate");
	if (!c->token && !c->cert)
		return err_set(e, "%s: user '%.100s' has no credentials: %s", where, user_name, USE_INSTEAD);
	const char *ns = str(ctx, "namespace");
	if (ns && ns_ok(ns, where, e) < 0)
		return -1;
	snprintf(c->ns, sizeof c->ns, "%s", ns ? ns : "default");
	snprintf(c->source, sizeof c->source, "kubeconfig %s, context %.100s", path, ctx_name);
	return 0;
}

int kcreds_from_kubeconfig(struct kcreds *c, const char *path, const char *context, struct err *e)
{
	memset(c, 0, sizeof *c);
	size_t n;
	char *text = read_file(path, "kubeconfig", &n, e);
	if (!text)
		return -1;
	struct err pe = {""};
	json_t *doc = kyaml_parse(text, n, &pe);
	explicit_bzero(text, n);
	free(text);
	if (!doc)
		return err_set(e, "kubeconfig %s: %s", path, pe.msg);
	int rc = from_doc(c, doc, path, context, e);
	json_decref(doc);
	if (rc < 0)
		kcreds_free(c);
	return rc;
}

int kcreds_load(struct kcreds *c, const char *context, const char *sa_dir, struct err *e)
{
	memset(c, 0, sizeof *c);
	const char *kc = getenv("KUBECONFIG");
	if (kc && *kc) {
		/* A list: the first file that is there. */
		char first[PATH_MAX] = "";
		for (const char *p = kc; *p;) {
			size_t l = strcspn(p, ":");
			if (l && l < sizeof first) {
				char cand[PATH_MAX];
				snprintf(cand, sizeof cand, "%.*s", (int)l, p);
				if (!first[0])
					snprintf(first, sizeof first, "%s", cand);
				if (access(cand, F_OK) == 0)
					return kcreds_from_kubeconfig(c, cand, context, e);
			}
			p += l + (p[l] == ':');
		}
		return err_set(e, "KUBECONFIG names no file that is there (%s)", first[0] ? first : kc);
	}
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	if (host && *host) {
		int rc = in_cluster(c, sa_dir, e);
		if (rc < 0)
			kcreds_free(c);
		return rc;
	}
	const char *home = getenv("HOME");
	if (!home || !*home)
		return err_set(e, "no KUBECONFIG, no in-cluster service account, and no HOME for ~/.kube/config");
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.kube/config", home);
	return kcreds_from_kubeconfig(c, path, context, e);
}
