#include "wheelhouse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sdist_ext[] = {".tar.gz", ".tar.bz2", ".tar.xz", ".zip", ".tgz"};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n > m && !strcmp(s + n - m, suffix);
}

/* "name version" of a distribution file name, or -1 when it is not one. */
static int parse(const char *file, char *out, size_t n)
{
	char stem[256];
	if (ends_with(file, ".whl")) {
		/* {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl */
		const char *d1 = strchr(file, '-'), *d2 = d1 ? strchr(d1 + 1, '-') : NULL;
		if (!d1 || !d2 || d1 == file)
			return -1;
		snprintf(out, n, "%.*s %.*s", (int)(d1 - file), file, (int)(d2 - d1 - 1), d1 + 1);
		return 0;
	}
	for (size_t i = 0; i < sizeof sdist_ext / sizeof sdist_ext[0]; i++) {
		if (!ends_with(file, sdist_ext[i]))
			continue;
		size_t l = strlen(file) - strlen(sdist_ext[i]);
		if (l >= sizeof stem)
			return -1;
		memcpy(stem, file, l);
		stem[l] = '\0';
		char *d = strrchr(stem, '-');
		if (!d || d == stem)
			return -1;
		*d = '\0';
		snprintf(out, n, "%s %s", stem, d + 1);
		return 0;
	}
	return -1;
}

/* May uid read (and, for folders, search) what st describes? */
static bool readable_by(const struct stat *st, uid_t uid)
{
	mode_t want = S_ISDIR(st->st_mode) ? 05 : 04;
	if (st->st_uid == uid)
		return ((st->st_mode >> 6) & want) == want;
	return (st->st_mode & want) == want; /* the sandbox user is in no group of the host */
}

int wheelhouse_check(const char *dir, uid_t sandbox_uid, struct err *e)
{
	bool as_root = geteuid() == 0;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "--wheelhouse %s", dir);
	struct stat st;
	DIR *d = fstat(fd, &st) == 0 ? fdopendir(fd) : NULL;
	if (!d) {
		err_sys(e, "--wheelhouse %s", dir);
		close(fd);
		return -1;
	}
	int rc = 0;
	size_t found = 0;
	if (as_root && !readable_by(&st, sandbox_uid)) {
		rc = err_set(e, "--wheelhouse %s: the sandbox user (host uid %u) cannot read this folder; make it "
				"readable (chmod -R o+rX %s)", dir, (unsigned)sandbox_uid, dir);
		goto out;
	}
	if (!as_root && access(dir, R_OK | X_OK) < 0) {
		rc = err_sys(e, "--wheelhouse %s", dir);
		goto out;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		char what[300];
		if (parse(de->d_name, what, sizeof what) < 0)
			continue;
		struct stat fs;
		if (fstatat(dirfd(d), de->d_name, &fs, 0) < 0 || !S_ISREG(fs.st_mode))
			continue;
		if (as_root ? !readable_by(&fs, sandbox_uid) : faccessat(dirfd(d), de->d_name, R_OK, 0) < 0) {
			rc = err_set(e, "--wheelhouse %s: the sandbox user (host uid %u) cannot read %s; make it readable "
					"(chmod -R o+rX %s)", dir, (unsigned)(as_root ? sandbox_uid : geteuid()), de->d_name, dir);
			goto out;
		}
		found++;
	}
	if (!found)
		rc = err_set(e, "--wheelhouse %s holds no wheels or source archives (fill it with pip download "
				"--only-binary=:all: -d %s PACKAGE...)", dir, dir);
out:
	closedir(d);
	return rc;
}

static int cmp(const void *a, const void *b)
{
	return strcasecmp(*(char *const *)a, *(char *const *)b);
}

char *wheelhouse_list(const char *dir, size_t max)
{
	DIR *d = opendir(dir);
	char **items = NULL, *out = NULL;
	size_t n = 0, cap = 0, len = 1;
	if (!d)
		return strdup("");
	struct dirent *de;
	while ((de = readdir(d))) {
		char what[300];
		if (parse(de->d_name, what, sizeof what) < 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			char **ni = reallocarray(items, nc, sizeof *ni);
			if (!ni)
				goto out;
			items = ni;
			cap = nc;
		}
		if (!(items[n] = strdup(what)))
			goto out;
		len += strlen(items[n]) + 2;
		n++;
	}
	qsort(items, n, sizeof *items, cmp);
	/* Two wheels of one release (several platforms) are one entry. */
	size_t u = 0;
	for (size_t i = 0; i < n; i++) {
		if (u && !strcmp(items[u - 1], items[i])) {
			free(items[i]);
			continue;
		}
		items[u++] = items[i];
	}
	n = u;
	out = malloc(len + 32);
	if (!out)
		goto out;
	out[0] = '\0';
	size_t o = 0;
	for (size_t i = 0; i < n && i < max; i++)
		o += (size_t)snprintf(out + o, len + 32 - o, "%s%s", i ? ", " : "", items[i]);
	if (n > max)
		snprintf(out + o, len + 32 - o, " and %zu more", n - max);
out:
	for (size_t i = 0; i < n; i++)
		free(items[i]);
	free(items);
	closedir(d);
	return out;
}
