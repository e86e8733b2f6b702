#include "wsdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tree.h"

/* Whether the open folder fd holds nothing. */
static bool dir_empty(int fd)
{
	int d = dup(fd);
	DIR *dir = d >= 0 ? fdopendir(d) : NULL;
	if (!dir) {
		if (d >= 0)
			close(d);
		return false;
	}
	rewinddir(dir);
	struct dirent *de;
	bool empty = true;
	while (empty && (de = readdir(dir)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(dir);
	return empty;
}

/* Why a folder of the user's is never taken: one text for start-up and for each sandbox. */
#define NOT_A_WORKSPACE "--workspace %s holds files but is not a workspace (it has no " WSDIR_MARK " folder), " \
	"and cleanup_sandbox would empty it: give a new or empty folder (--mount shows an existing folder to the code)"

int wsdir_check(const char *path, struct err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		char parent[PATH_MAX];
		const char *slash = strrchr(path, '/');
		size_t n = slash && slash != path ? (size_t)(slash - path) : 1;
		struct stat st;
		if (n >= sizeof parent)
			return err_set(e, "--workspace %s: the path is too long", path);
		memcpy(parent, path, n);
		parent[n] = '\0';
		if (stat(parent, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(e, "--workspace %s: its parent folder %s does not exist (the server makes the "
					  "workspace folder, not the folders above it)", path, parent);
		return 0;
	}
	if (fd < 0)
		return err_sys(e, "--workspace %s", path);
	struct stat st;
	bool ours = fstatat(fd, WSDIR_MARK, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
	bool empty = dir_empty(fd);
	close(fd);
	if (!ours && !empty)
		return err_set(e, NOT_A_WORKSPACE, path);
	return 0;
}

int wsdir_take(const char *path, uid_t uid, gid_t gid, char *real, size_t n, struct err *e)
{
	char buf[PATH_MAX];
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return err_sys(e, "--workspace: creating %s", path);
	if (!realpath(path, buf))
		return err_sys(e, "--workspace %s", path);
	if (strlen(buf) >= n)
		return err_set(e, "--workspace %s: the path is too long", path);
	memcpy(real, buf, strlen(buf) + 1);
	int fd = open(real, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "--workspace %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return err_set(e, "--workspace %s is in use by another sandbox-mcp server", path);
	}
	struct stat st;
	/* Never set-id: a folder made in a set-gid one is set-gid, and so would every folder the
	 * code makes in it be. */
	if (fstat(fd, &st) < 0 || ((st.st_mode & (S_ISUID | S_ISGID)) && fchmod(fd, st.st_mode & 01777) < 0)) {
		err_sys(e, "--workspace %s: clearing its set-id bits", path);
		close(fd);
		return -1;
	}
	bool ours = fstatat(fd, WSDIR_MARK, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
	if (ours && (st.st_mode & (S_ISUID | S_ISGID)) && fchmodat(fd, WSDIR_MARK, st.st_mode & 01777, 0) < 0) {
		err_sys(e, "--workspace %s: clearing the set-id bits of " WSDIR_MARK, path);
		close(fd);
		return -1;
	}
	if (!ours && !dir_empty(fd)) {
		close(fd);
		return err_set(e, NOT_A_WORKSPACE, path);
	}
	if ((!ours && (mkdirat(fd, WSDIR_MARK, 0755) < 0 ||
		       fchownat(fd, WSDIR_MARK, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)) ||
	    fchown(fd, uid, gid) < 0) {
		err_sys(e, "--workspace %s: making it the sandbox user's", path);
		close(fd);
		return -1;
	}
	return fd;
}

int wsdir_clear(int fd)
{
	int rc = tree_empty(fd), err = errno;
	struct stat st;
	if (mkdirat(fd, WSDIR_MARK, 0755) < 0 && errno != EEXIST) {
		if (rc == 0)
			err = errno;
		rc = -1;
	} else if (fstat(fd, &st) < 0 || fchownat(fd, WSDIR_MARK, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0) {
		if (rc == 0)
			err = errno;
		rc = -1;
	}
	errno = err;
	return rc;
}
