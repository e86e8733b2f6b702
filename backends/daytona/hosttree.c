#include "hosttree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct walk {
	struct hosttree *t;
	size_t max_files;
	uint64_t max_bytes;
	const char *top;
	struct err *e;
};

static int add_file(struct walk *w, int dfd, const char *name, const char *rel, const struct stat *st)
{
	struct hosttree *t = w->t;
	if (t->n >= w->max_files)
		return err_set(w->e, "%s holds more than %zu files", w->top, w->max_files);
	if ((uint64_t)st->st_size > w->max_bytes - t->bytes)
		return err_set(w->e, "%s holds more than %llu bytes", w->top, (unsigned long long)w->max_bytes);
	if (t->n % 64 == 0) {
		struct hosttree_file *v = reallocarray(t->v, t->n + 64, sizeof *v);
		if (!v)
			return err_set(w->e, "out of memory");
		t->v = v;
	}
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat fs;
	if (fd < 0 || fstat(fd, &fs) < 0 || !S_ISREG(fs.st_mode)) {
		int err = fd < 0 ? errno : EINVAL;
		if (fd >= 0)
			close(fd);
		return err_set(w->e, "%s/%s: %s", w->top, rel, strerror(err));
	}
	size_t len = (size_t)fs.st_size;
	unsigned char *data = malloc(len ? len : 1);
	char *r = strdup(rel);
	size_t got = 0;
	while (data && got < len) {
		ssize_t k = read(fd, data + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (!data || !r) {
		free(data);
		free(r);
		return err_set(w->e, "out of memory");
	}
	/* A file that shrank while read is taken as it was read. */
	t->v[t->n++] = (struct hosttree_file){r, data, got, fs.st_mode & 07777};
	t->bytes += got;
	return 0;
}

static int walk_dir(struct walk *w, int dfd, const char *rel, int depth)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return err_sys(w->e, "%s/%s", w->top, rel);
	}
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char sub[4096];
		if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= (int)sizeof sub) {
			w->t->skipped++;
			continue;
		}
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = err_sys(w->e, "%s/%s", w->top, sub);
		} else if (S_ISREG(st.st_mode)) {
			rc = add_file(w, dfd, de->d_name, sub, &st);
		} else if (S_ISDIR(st.st_mode) && depth < HOSTTREE_DEPTH) {
			int fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = fd < 0 ? err_sys(w->e, "%s/%s", w->top, sub) : walk_dir(w, fd, sub, depth + 1);
			if (fd >= 0)
				close(fd);
		} else {
			w->t->skipped++;
		}
	}
	closedir(d);
	return rc;
}

int hosttree_read(const char *dir, size_t max_files, uint64_t max_bytes, struct hosttree *t, struct err *e)
{
	memset(t, 0, sizeof *t);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "%s", dir);
	struct walk w = {t, max_files, max_bytes, dir, e};
	int rc = walk_dir(&w, fd, "", 0);
	close(fd);
	if (rc < 0)
		hosttree_free(t);
	return rc;
}

void hosttree_free(struct hosttree *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].rel);
		free(t->v[i].data);
	}
	free(t->v);
	memset(t, 0, sizeof *t);
}
