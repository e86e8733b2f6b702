#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool beneath_plain(const char *rel)
{
	size_t n = strlen(rel);
	if (!n || n >= PATH_MAX || rel[0] == '/')
		return false;
	for (const char *p = rel;;) {
		const char *s = strchr(p, '/');
		size_t k = s ? (size_t)(s - p) : strlen(p);
		if (!k || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.') || k > NAME_MAX)
			return false;
		if (!s)
			return true;
		p = s + 1;
	}
}

/* Opens the folder name in fd, without following a symlink; made (mode) when missing and
 * create. Its fd, or -1 with errno (ELOOP for a symlink, ENOTDIR for anything else). */
static int open_sub(int fd, const char *name, bool create, unsigned mode)
{
	int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int sub = openat(fd, name, flags);
	if (sub < 0 && errno == ENOENT && create) {
		if (mkdirat(fd, name, mode) < 0 && errno != EEXIST)
			return -1;
		sub = openat(fd, name, flags);
	}
	if (sub < 0 && errno == ENOTDIR) {
		/* O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR on some kernels: tell them apart. */
		struct stat st;
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			errno = ELOOP;
		else
			errno = ENOTDIR;
	}
	return sub;
}

/* The folder that holds rel's last name, walked down from dirfd (missing folders made, 0755,
 * when create), and that name, copied into last (NAME_MAX + 1 bytes). Its fd, or -1 with
 * errno. */
static int open_parent(int dirfd, const char *rel, bool create, char *last)
{
	if (!beneath_plain(rel)) {
		errno = EINVAL;
		return -1;
	}
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	const char *p = rel;
	for (const char *s; fd >= 0 && (s = strchr(p, '/')); p = s + 1) {
		char name[NAME_MAX + 1];
		memcpy(name, p, (size_t)(s - p));
		name[s - p] = '\0';
		int sub = open_sub(fd, name, create, 0755);
		int err = errno;
		close(fd);
		errno = err;
		fd = sub;
	}
	if (fd >= 0)
		snprintf(last, NAME_MAX + 1, "%s", p);
	return fd;
}

int beneath_mkdir(int dirfd, const char *rel, unsigned mode)
{
	char last[NAME_MAX + 1];
	int fd = open_parent(dirfd, rel, true, last);
	if (fd < 0)
		return -1;
	int sub = open_sub(fd, last, true, mode & 07777);
	int err = errno;
	close(fd);
	if (sub < 0) {
		errno = err == ENOTDIR || err == ELOOP ? EEXIST : err;
		return -1;
	}
	close(sub);
	return 0;
}

/* Writes all of data to fd. 0, or -1 with errno. */
static int write_all(int fd, const unsigned char *data, size_t len)
{
	while (len) {
		ssize_t k = write(fd, data, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		data += k;
		len -= (size_t)k;
	}
	return 0;
}

int beneath_write(int dirfd, const char *rel, const void *data, size_t len, unsigned mode)
{
	static unsigned long seq;
	char last[NAME_MAX + 1], tmp[80];
	int pfd = open_parent(dirfd, rel, true, last), fd = -1, err = 0;
	if (pfd < 0)
		return -1;
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		snprintf(tmp, sizeof tmp, BENEATH_TMP_PREFIX "%ld-%lu.tmp", (long)getpid(), seq++);
		fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		err = errno;
		close(pfd);
		errno = err;
		return -1;
	}
	if (write_all(fd, data, len) < 0 || fchmod(fd, mode & 0777) < 0)
		err = errno;
	if (close(fd) < 0 && !err)
		err = errno;
	if (!err && renameat(pfd, tmp, pfd, last) < 0)
		err = errno;
	if (err)
		(void)unlinkat(pfd, tmp, 0);
	close(pfd);
	errno = err;
	return err ? -1 : 0;
}

int beneath_remove(int dirfd, const char *rel)
{
	char last[NAME_MAX + 1];
	int fd = open_parent(dirfd, rel, false, last);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	int rc = unlinkat(fd, last, 0);
	if (rc < 0 && (errno == EISDIR || errno == EPERM))
		rc = unlinkat(fd, last, AT_REMOVEDIR);
	int err = errno;
	close(fd);
	if (rc < 0 && err == ENOENT)
		return 0;
	errno = err;
	return rc;
}
