#include "mountspec.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Static_assert(MOUNT_HOST_MAX >= PATH_MAX, "realpath needs PATH_MAX bytes");

/* Names in SANDBOX: what a portable file name holds, nothing a shell or a URL would read. */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-' || c == '+' || c == '@'))
			return false;
	}
	return true;
}

static int inside_ok(const char *p, struct err *e)
{
	if (strncmp(p, "/mnt/", 5) != 0)
		return err_set(e, "the sandbox path '%s' must be under /mnt (like /mnt/project)", p);
	if (strlen(p) > MOUNT_INSIDE_MAX)
		return err_set(e, "the sandbox path is longer than %d bytes", MOUNT_INSIDE_MAX);
	int depth = 1;
	for (const char *s = p + 5;; depth++) {
		const char *slash = strchr(s, '/');
		size_t n = slash ? (size_t)(slash - s) : strlen(s);
		if (!name_ok(s, n))
			return err_set(e, "the sandbox path '%s' must be plain names (letters, digits, . _ - + @) "
					  "joined by single slashes, with no . or ..", p);
		if (depth > MOUNT_DEPTH_MAX)
			return err_set(e, "the sandbox path '%s' is more than %d folders below /mnt", p, MOUNT_DEPTH_MAX);
		if (!slash)
			return 0;
		s = slash + 1;
	}
}

int mountspec_parse(struct mountspec *m, const char *spec, struct err *e)
{
	memset(m, 0, sizeof *m);
	const char *c1 = strchr(spec, ':');
	if (!c1 || c1 == spec)
		return err_set(e, "'%s' is not HOST_DIR:SANDBOX_PATH[:rw]", spec);
	const char *c2 = strchr(c1 + 1, ':');
	if (c2 && strcmp(c2 + 1, "rw") && strcmp(c2 + 1, "ro"))
		return err_set(e, "'%s': the third part may be rw or ro alone", spec);
	m->rw = c2 && !strcmp(c2 + 1, "rw");
	size_t in = c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1);
	if (in > MOUNT_INSIDE_MAX)
		return err_set(e, "'%s': the sandbox path is longer than %d bytes", spec, MOUNT_INSIDE_MAX);
	memcpy(m->inside, c1 + 1, in);
	m->inside[in] = '\0';
	struct err ie = {""};
	if (inside_ok(m->inside, &ie) < 0)
		return err_set(e, "'%s': %s", spec, ie.msg);
	size_t hn = (size_t)(c1 - spec);
	char host[PATH_MAX];
	if (hn >= sizeof host)
		return err_set(e, "'%s': the host path is too long", spec);
	memcpy(host, spec, hn);
	host[hn] = '\0';
	if (host[0] != '/')
		return err_set(e, "'%s': the host folder must be an absolute path", spec);
	struct stat st;
	if (!realpath(host, m->host) || stat(m->host, &st) < 0)
		return err_set(e, "'%s': %s: %s", spec, host, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(e, "'%s': %s is not a folder", spec, host);
	m->dev = st.st_dev;
	m->ino = st.st_ino;
	return 0;
}

/* Is a the same path as b, or inside it? */
static bool within(const char *a, const char *b)
{
	size_t n = strlen(b);
	return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

int mountspec_check_set(const struct mountspec *v, size_t n, struct err *e)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (within(v[i].inside, v[j].inside) || within(v[j].inside, v[i].inside))
				return err_set(e, "--mount: %s and %s overlap: give each its own place", v[i].inside,
					       v[j].inside);
	return 0;
}
