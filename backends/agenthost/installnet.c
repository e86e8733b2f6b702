#include "installnet.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostdir.h"

#define PROXY_URL "http://127.0.0.1:3128"

/* pip (and anything else the step runs) reads these; NO_PROXY empty: nothing goes around. */
static const char *const proxy_vars[] = {
	"HTTP_PROXY=" PROXY_URL, "HTTPS_PROXY=" PROXY_URL, "http_proxy=" PROXY_URL, "https_proxy=" PROXY_URL,
	"NO_PROXY=", "no_proxy=",
};

/* The proxy for pol in a new folder <sandbox_dir>/<name>. */
static int open_dir(struct installnet *n, const struct netpolicy *pol, enum proxy_for who, const char *name,
		    const char *sandbox_dir, uid_t uid, struct err *e)
{
	memset(n, 0, sizeof *n);
	n->dir_fd = -1;
	if (hostdir_path(n->dir, sizeof n->dir, "%s/%s", sandbox_dir, name) < 0)
		return err_set(e, "the state folder's path is too long");
	if (mkdir(n->dir, 0711) < 0 && errno != EEXIST) {
		err_sys(e, "creating %s", n->dir);
		n->dir[0] = '\0';
		return -1;
	}
	/* The socket's path goes through the folder's fd: a long state folder cannot overflow
	 * sun_path. The sandbox's user only needs to enter the folder. */
	char sock[64];
	n->dir_fd = open(n->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (n->dir_fd < 0 || chown(n->dir, uid, (gid_t)-1) < 0) {
		err_sys(e, "%s", n->dir);
		goto fail;
	}
	installnet_socket(n, sock, sizeof sock);
	if (proxy_start(&n->px, sock, pol, who, e) < 0)
		goto fail;
	return 0;
fail:
	installnet_close(n);
	return -1;
}

const char **installnet_env_of(const char *const *env)
{
	size_t c = 0;
	while (env && env[c])
		c++;
	size_t nv = sizeof proxy_vars / sizeof proxy_vars[0];
	const char **out = calloc(c + nv + 1, sizeof *out);
	if (!out)
		return NULL;
	if (c)
		memcpy(out, env, c * sizeof *env);
	memcpy(out + c, proxy_vars, sizeof proxy_vars);
	return out;
}

int installnet_open(struct installnet *n, const struct config *cfg, const char *sandbox_dir, uid_t uid,
		    const char *const *env, struct err *e)
{
	struct netpolicy pol;
	memset(n, 0, sizeof *n);
	n->dir_fd = -1;
	if (netpolicy_for_index(&pol, cfg->index_url, cfg->index_hosts, e) < 0)
		return -1;
	if (open_dir(n, &pol, PROXY_INSTALL, "proxy", sandbox_dir, uid, e) < 0)
		return -1;
	if (!(n->env = installnet_env_of(env))) {
		err_set(e, "out of memory");
		installnet_close(n);
		return -1;
	}
	return 0;
}

int installnet_open_code(struct installnet *n, const struct netpolicy *pol, const char *sandbox_dir, uid_t uid,
			 struct err *e)
{
	return open_dir(n, pol, PROXY_CODE, "netproxy", sandbox_dir, uid, e);
}

const char *const *installnet_env(const struct installnet *n)
{
	return n->env;
}

void installnet_socket(const struct installnet *n, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d/proxy.sock", n->dir_fd);
}

void installnet_limits(const struct installnet *n, struct agentlink_limits *lim)
{
	(void)n;
	lim->relay_port = INSTALLNET_PORT;
	lim->relay_socket = INSTALLNET_SOCKET;
}

void installnet_close(struct installnet *n)
{
	proxy_stop(n->px);
	n->px = NULL;
	if (n->dir_fd >= 0)
		close(n->dir_fd);
	n->dir_fd = -1;
	if (n->dir[0])
		rmdir(n->dir);
	n->dir[0] = '\0';
	free(n->env);
	n->env = NULL;
}

const char *installnet_describe(const struct config *cfg, const char *shared, char *buf, size_t n)
{
	char code[sizeof cfg->allow_hosts + 320] = "none (loopback only)";
	struct netpolicy pol;
	struct err e = {""};
	if (cfg->allow_hosts[0] && netpolicy_parse_allow(&pol, cfg->allow_hosts, &e) == 0) {
		char list[sizeof cfg->allow_hosts + 64];
		snprintf(code, sizeof code, "the code reaches only %.4000s (by name, through the server's filtering proxy)",
			 netpolicy_describe(&pol, list, sizeof list));
	}
	if (cfg->network == NET_ALL)
		snprintf(buf, n, "%s (--network all), package installs too", shared);
	else if (cfg->network == NET_NONE)
		snprintf(buf, n, "none (loopback only); package installs %s",
			 cfg->wheelhouse[0] ? "from the wheelhouse alone" : "refused");
	else if (cfg->wheelhouse[0])
		snprintf(buf, n, "%s; package installs from the wheelhouse alone, with no network", code);
	else
		snprintf(buf, n, "%s; the install step reaches only the package index %s%s%s, "
			 "through the server's filtering proxy",
			 code, cfg->index_url, cfg->index_hosts[0] ? " and " : "", cfg->index_hosts);
	return buf;
}
