#include "hosttree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A regular file met by the walk: opened without following or blocking, and given on. */
static int visit_file(struct hosttree_visit *v, int dfd, const char *name, const char *rel, const char *top,
		      struct err *e)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		err_sys(e, "%s/%s", top, rel);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = 0;
	if (S_ISREG(st.st_mode))
		rc = v->file(v->ctx, dfd, name, rel, fd, &st, e);
	else
		v->skipped++; /* no longer a file: replaced while walked */
	close(fd);
	return rc;
}

static int walk_dir(struct hosttree_visit *v, int dfd, const char *top, const char *rel, int depth, struct err *e)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return err_sys(e, "%s/%s", top, rel);
	}
	rewinddir(d); /* the dup shares its offset with every earlier reading of dfd */
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char sub[4096];
		if (snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) >= (int)sizeof sub) {
			v->skipped++;
			continue;
		}
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = err_sys(e, "%s/%s", top, sub);
		} else if (S_ISREG(st.st_mode)) {
			rc = visit_file(v, dfd, de->d_name, sub, top, e);
		} else if (S_ISDIR(st.st_mode) && depth < HOSTTREE_DEPTH) {
			if (v->dir && (rc = v->dir(v->ctx, sub, &st, e)) < 0)
				break;
			int fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = fd < 0 ? err_sys(e, "%s/%s", top, sub) : walk_dir(v, fd, top, sub, depth + 1, e);
			if (fd >= 0)
				close(fd);
		} else {
			v->skipped++;
		}
	}
	closedir(d);
	return rc;
}

int hosttree_walk(int dirfd, const char *top, struct hosttree_visit *v, struct err *e)
{
	return walk_dir(v, dirfd, top, "", 0, e);
}

int hosttree_slurp(int fd, size_t len, unsigned char **data, size_t *got, struct err *e)
{
	*data = malloc(len ? len : 1);
	*got = 0;
	if (!*data)
		return err_set(e, "out of memory");
	while (*got < len) {
		ssize_t k = read(fd, *data + *got, len - *got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			free(*data);
			*data = NULL;
			return err_sys(e, "reading a file");
		}
		if (k == 0)
			break;
		*got += (size_t)k;
	}
	return 0;
}

struct reading {
	struct hosttree *t;
	size_t max_files;
	uint64_t max_bytes;
	const char *top;
};

static int add_file(void *ctx, int dirfd, const char *name, const char *rel, int fd, const struct stat *st,
		    struct err *e)
{
	(void)dirfd;
	(void)name;
	struct reading *r = ctx;
	struct hosttree *t = r->t;
	if (t->n >= r->max_files)
		return err_set(e, "%s holds more than %zu files", r->top, r->max_files);
	if ((uint64_t)st->st_size > r->max_bytes - t->bytes)
		return err_set(e, "%s holds more than %llu bytes", r->top, (unsigned long long)r->max_bytes);
	if (t->n % 64 == 0) {
		struct hosttree_file *v = reallocarray(t->v, t->n + 64, sizeof *v);
		if (!v)
			return err_set(e, "out of memory");
		t->v = v;
	}
	unsigned char *data;
	size_t got;
	char *dup_rel = strdup(rel);
	if (!dup_rel || hosttree_slurp(fd, (size_t)st->st_size, &data, &got, e) < 0) {
		free(dup_rel);
		return err_set(e, "out of memory");
	}
	t->v[t->n++] = (struct hosttree_file){dup_rel, data, got, st->st_mode & 07777};
	t->bytes += got;
	return 0;
}

int hosttree_read(const char *dir, dev_t dev, ino_t ino, size_t max_files, uint64_t max_bytes, struct hosttree *t,
		  struct err *e)
{
	memset(t, 0, sizeof *t);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "%s", dir);
	struct stat st;
	if ((dev || ino) && (fstat(fd, &st) < 0 || st.st_dev != dev || st.st_ino != ino)) {
		close(fd);
		return err_set(e, "the host folder %s is no longer the folder checked at start-up (it was replaced, or "
				  "renamed and something put in its place)", dir);
	}
	struct reading r = {t, max_files, max_bytes, dir};
	struct hosttree_visit v = {.file = add_file, .ctx = &r};
	int rc = hosttree_walk(fd, dir, &v, e);
	close(fd);
	t->skipped = v.skipped;
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
