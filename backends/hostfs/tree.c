#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

/*
 * Sandboxed code can make a folder chain thousands of levels deep, far past what recursion, a
 * path or an fd per level allows. So depth is turned into breadth: every folder found inside
 * a folder being emptied is renamed up into the top folder under a fresh name, and emptied in
 * a later pass. Two folders are open at a time, whatever the shape; nothing is ever followed
 * (symlinks are removed as links), and folders the code made unreadable or unwritable are
 * opened up first through handles, never by name.
 */

/* Opens the folder name in parent, opening up its permissions if the code took them away.
 * -1 with errno when it is not a folder (or cannot be opened). */
static int open_dir(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		/* Through an O_PATH handle checked to be a folder, never by name, which a symlink
		 * could have replaced in between. */
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
	if (fd >= 0)
		(void)fchmod(fd, 0700); /* so its entries can be removed or moved out */
	return fd;
}

/* Moves the folder `name` of dir up into top under a fresh name. */
static int move_up(int dir, const char *name, int top, unsigned long *seq)
{
	for (int tries = 0; tries < 1000; tries++) {
		char fresh[64];
		snprintf(fresh, sizeof fresh, ".tree-remove-%lu", (*seq)++);
		if (renameat2(dir, name, top, fresh, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -1;
	}
	errno = EEXIST;
	return -1;
}

/* Empties one folder: files and links are removed, folders moved up into top (when fd is
 * top itself, its folders are left for the caller). *done counts what was removed or moved.
 * 0 when nothing but those folders is left, else -1 with errno (the first failure). */
static int empty_dir(int fd, int top, unsigned long *seq, unsigned long *done)
{
	int failed = 0;
	for (int pass = 0; pass < 4; pass++) {
		int dup_fd = dup(fd);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d) {
			if (dup_fd >= 0)
				close(dup_fd);
			return -1;
		}
		rewinddir(d);
		bool any = false;
		struct dirent *de;
		failed = 0;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (unlinkat(fd, de->d_name, 0) == 0) {
				any = true;
				(*done)++;
				continue;
			}
			if (errno == ENOENT)
				continue;
			if (fd == top && (errno == EISDIR || errno == EPERM))
				continue; /* a folder of the top itself: handled by the caller's loop */
			any = true;
			if ((errno == EISDIR || errno == EPERM) && move_up(fd, de->d_name, top, seq) == 0) {
				(*done)++;
				continue;
			}
			if (!failed)
				failed = errno;
		}
		closedir(d);
		if (!any)
			return 0;
		if (failed)
			break;
	}
	if (failed)
		errno = failed;
	return failed ? -1 : 0;
}

/* Removes everything inside top. 0, or -1 with errno when something stays. */
static int empty_top(int top)
{
	unsigned long seq = 0, done = 0;
	int err = 0;
	for (;;) {
		/* Files of the top go first; then each folder is emptied (its folders come up here)
		 * and removed, until none is left or a pass gets nothing done. */
		unsigned long before = done;
		err = 0;
		if (empty_dir(top, top, &seq, &done) < 0)
			err = errno;
		int dup_fd = dup(top);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d) {
			if (dup_fd >= 0)
				close(dup_fd);
			return -1;
		}
		rewinddir(d); /* the dup shares its offset with every earlier reading of top */
		bool any = false;
		struct dirent *de;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			any = true;
			int sub = open_dir(top, de->d_name);
			if (sub < 0) {
				if (unlinkat(top, de->d_name, 0) == 0)
					done++;
				else if (!err && errno != ENOENT)
					err = errno;
				continue;
			}
			if (empty_dir(sub, top, &seq, &done) < 0 && !err)
				err = errno;
			close(sub);
			if (unlinkat(top, de->d_name, AT_REMOVEDIR) == 0)
				done++;
			else if (!err && errno != ENOENT && errno != ENOTEMPTY)
				err = errno;
		}
		closedir(d);
		if (!any)
			return 0;
		if (done == before) {
			errno = err ? err : ENOTEMPTY;
			return -1;
		}
	}
}

int tree_empty(int dirfd)
{
	return empty_top(dirfd);
}

int tree_remove(const char *path)
{
	if (unlink(path) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	int top = open_dir(AT_FDCWD, path);
	if (top < 0)
		return -1;
	int rc = empty_top(top);
	int saved = errno;
	close(top);
	if (rc == 0 && rmdir(path) < 0 && errno != ENOENT)
		return -1;
	errno = saved;
	return rc;
}
