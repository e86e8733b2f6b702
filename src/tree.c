#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_at(int parent, const char *name, int depth)
{
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	if (depth > 256) {
		errno = ELOOP;
		return -1;
	}
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		/* A folder made unreadable: open it up. Through an O_PATH handle checked to be a
		 * folder, never by name, which a symlink could have replaced in between. */
		int pfd = openat(parent, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (pfd >= 0 && fstat(pfd, &st) == 0 && S_ISDIR(st.st_mode)) {
			char proc[64];
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
			(void)chmod(proc, 0700);
		}
		if (pfd >= 0)
			close(pfd);
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	(void)fchmod(fd, 0700); /* so its entries can be removed */
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (remove_at(dirfd(d), de->d_name, depth + 1) < 0)
			rc = -1;
	}
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int tree_remove(const char *path)
{
	return remove_at(AT_FDCWD, path, 0);
}
