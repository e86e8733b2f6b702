#include "hostdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "tree.h"

int hostdir_path(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

int hostdir_state(const struct config *cfg, char *out, size_t n, struct err *e)
{
	const char *t = getenv("TMPDIR");
	if ((cfg->state_dir[0] ? hostdir_path(out, n, "%s", cfg->state_dir)
			       : hostdir_path(out, n, "%s/sandbox-mcp-%u", t && *t ? t : "/tmp", (unsigned)geteuid())) < 0 ||
	    strlen(out) > PATH_MAX - 256)
		return err_set(e, "the state folder's path is too long");
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return err_sys(e, "creating %s", out);
	struct stat st;
	if (lstat(out, &st) < 0)
		return err_sys(e, "%s", out);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return err_set(e, "%s must be a folder owned by uid %u and writable by it alone", out,
			       (unsigned)geteuid());
	return 0;
}

int hostdir_make(const char *state, const char *name, char *out, size_t n, int *lock_fd, struct err *e)
{
	char tmp[PATH_MAX], lock[PATH_MAX + 8];
	*lock_fd = -1;
	if (hostdir_path(tmp, sizeof tmp, "%s/new-%s", state, name) < 0 ||
	    hostdir_path(out, n, "%s/%s", state, name) < 0 || hostdir_path(lock, sizeof lock, "%s/lock", tmp) < 0)
		return err_set(e, "the state folder's path is too long");
	if (mkdir(tmp, 0700) < 0)
		return err_sys(e, "creating %s", tmp);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || rename(tmp, out) < 0) {
		err_sys(e, "locking %s", out);
		if (fd >= 0)
			close(fd);
		unlink(lock);
		rmdir(tmp);
		return -1;
	}
	*lock_fd = fd;
	return 0;
}

void hostdir_keep(const char *dir)
{
	char path[PATH_MAX + 8];
	if (hostdir_path(path, sizeof path, "%s/kept", dir) < 0)
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0)
		close(fd);
}

void hostdir_reap(const char *state, const char *prefix)
{
	DIR *d = opendir(state);
	if (!d)
		return;
	size_t pl = strlen(prefix);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, pl) != 0)
			continue;
		char path[PATH_MAX];
		if (hostdir_path(path, sizeof path, "%s/%s/kept", state, de->d_name) < 0 || access(path, F_OK) == 0)
			continue;
		hostdir_path(path, sizeof path, "%s/%s/lock", state, de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			continue; /* a live server's */
		}
		hostdir_path(path, sizeof path, "%s/%s", state, de->d_name);
		if (tree_remove(path) == 0)
			log_msg(LOG_INFO, "removed %s, left by a server that is gone", path);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
}
