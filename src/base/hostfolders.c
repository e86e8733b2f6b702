#include "hostfolders.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hostfolders_state(const struct config *cfg, char *out, size_t n)
{
	const char *t = getenv("TMPDIR");
	int r = cfg->state_dir[0] ? snprintf(out, n, "%s", cfg->state_dir)
				  : snprintf(out, n, "%s/sandbox-mcp-%u", t && *t ? t : "/tmp", (unsigned)geteuid());
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

/* path with its symlinks resolved; where its end does not exist yet, its nearest existing
 * parent resolved and the rest as given. 0, or -1 (too long, or no parent can be resolved). */
static int resolve(const char *path, char *out)
{
	char head[PATH_MAX];
	if (snprintf(head, sizeof head, "%s", path) >= (int)sizeof head)
		return -1;
	for (;;) {
		if (realpath(head, out)) {
			size_t n = strlen(head), m = strlen(out);
			/* What realpath did not see: the rest of path, after head. */
			const char *rest = path + n;
			if (m == 1 && *rest == '/')
				m = 0; /* "/" and "/name": no double slash */
			if (m + strlen(rest) >= PATH_MAX)
				return -1;
			memcpy(out + m, rest, strlen(rest) + 1);
			return 0;
		}
		char *slash = strrchr(head, '/');
		if (errno != ENOENT || !slash || slash == head)
			return -1;
		*slash = '\0';
	}
}

/* Is the resolved path a the same as b, or inside it, by its names? */
static bool within(const char *a, const char *b)
{
	size_t n = strlen(b);
	if (n == 1 && b[0] == '/')
		return true;
	return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

/*
 * Is the resolved path a inside the resolved path b: by names, or one of the folders on a's
 * path (a itself too, when `same` counts) is b's folder? Strictly inside unless `same`.
 */
static bool inside(const char *a, const char *b, bool same)
{
	if (within(a, b) && (same || strcmp(a, b) != 0))
		return true;
	struct stat sb, sa;
	if (stat(b, &sb) < 0)
		return false;
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", a);
	if (!same) {
		char *slash = strrchr(p, '/');
		if (!slash)
			return false;
		slash[slash == p] = '\0';
	}
	for (;;) {
		if (stat(p, &sa) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino)
			return true;
		char *slash = strrchr(p, '/');
		if (!slash || !strcmp(p, "/"))
			return false;
		slash[slash == p] = '\0';
	}
}

/* One host folder the sandbox is shown. */
struct shown {
	char what[MOUNT_INSIDE_MAX + 16];  /* the option, for the message */
	char path[PATH_MAX];               /* resolved */
	bool writable;
};

/* A relative path made absolute, to the folder the server started in: the server uses it by
 * path later, from other folders. 0, or -1 when it does not fit in n bytes. */
static int absolute(char *p, size_t n)
{
	char cwd[PATH_MAX], abs[PATH_MAX];
	if (!p[0] || p[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof cwd) || snprintf(abs, sizeof abs, "%s/%s", cwd, p) >= (int)sizeof abs ||
	    strlen(abs) >= n)
		return -1;
	memcpy(p, abs, strlen(abs) + 1);
	return 0;
}

int hostfolders_check(struct config *cfg, struct err *e)
{
	static struct shown v[MOUNTS_MAX + 2];
	size_t n = 0;
	if (absolute(cfg->state_dir, sizeof cfg->state_dir) < 0)
		return err_set(e, "--state-dir %s: the path is too long", cfg->state_dir);
	for (size_t i = 0; i < cfg->mounts.n; i++) {
		snprintf(v[n].what, sizeof v[n].what, "--mount %s", cfg->mounts.v[i].inside);
		snprintf(v[n].path, sizeof v[n].path, "%s", cfg->mounts.v[i].host);
		v[n++].writable = cfg->mounts.v[i].rw;
	}
	if (cfg->wheelhouse[0]) {
		struct stat st;
		if (resolve(cfg->wheelhouse, v[n].path) < 0 || stat(v[n].path, &st) < 0)
			return err_sys(e, "--wheelhouse %s", cfg->wheelhouse);
		if (!S_ISDIR(st.st_mode))
			return err_set(e, "--wheelhouse %s is not a folder", cfg->wheelhouse);
		/* Bound as resolved now, and only while it is still this folder. */
		snprintf(cfg->wheelhouse, sizeof cfg->wheelhouse, "%s", v[n].path);
		cfg->wheelhouse_dev = st.st_dev;
		cfg->wheelhouse_ino = st.st_ino;
		snprintf(v[n].what, sizeof v[n].what, "--wheelhouse");
		v[n++].writable = false;
	}
	if (cfg->workspace_dir[0] && !cfg->workspace_claim) {
		if (resolve(cfg->workspace_dir, v[n].path) < 0)
			return err_sys(e, "--workspace %s", cfg->workspace_dir);
		snprintf(v[n].what, sizeof v[n].what, "--workspace");
		v[n++].writable = true;
	}
	char state[PATH_MAX], sd[PATH_MAX];
	if (hostfolders_state(cfg, state, sizeof state) < 0 || resolve(state, sd) < 0)
		return err_set(e, "the state folder's path is too long or cannot be resolved");
	for (size_t i = 0; i < n; i++) {
		const char *p = v[i].path;
		if (inside(p, sd, true) || inside(sd, p, true))
			return err_set(e, "%s: the host folder %s holds, or is in, the state folder %s, which the code must "
					  "not see", v[i].what, p, sd);
		if (inside(p, HOSTFOLDERS_SHM, true) || inside(HOSTFOLDERS_SHM, p, true))
			return err_set(e, "%s: the host folder %s holds, or is in, %s, where the files bound into "
					  "sandboxes are, which the code must not see", v[i].what, p, HOSTFOLDERS_SHM);
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			if (i != j && v[j].writable && inside(v[i].path, v[j].path, false))
				return err_set(e, "%s: the host folder %s is in %s, a folder the code may write (%s): the code "
						  "could put a symlink in its place and have another folder bound; give "
						  "folders that do not lie in one another", v[i].what, v[i].path, v[j].path,
					       v[j].what);
	return 0;
}
