/* --workspace DIR on Daytona: the host folder kept in step with the sandbox's (see wssync.h). */
#include "wssync.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/base/base64.h"
#include "../../src/base/buf.h"
#include "../../src/base/config.h"
#include "../../src/base/log.h"
#include "../hostfs/beneath.h"
#include "../hostfs/wsdir.h"
#include "../run/run.h"
#include "multipart.h"
#include "wsseed.h"

void wssync_init(struct wssync *w)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
}

int wssync_take(struct wssync *w, const char *path, const char *state, struct err *e)
{
	wssync_release(w);
	wssync_init(w);
	int fd = wsdir_take(path, geteuid(), getegid(), w->dir, sizeof w->dir, e);
	if (fd < 0) {
		wssync_init(w);
		return -1;
	}
	w->fd = fd;
	snprintf(w->state, sizeof w->state, "%s", state);
	return 0;
}

void wssync_word(const struct wssync *w, char *buf, size_t n)
{
	snprintf(buf, n, "%llu:%u:%llu:%u:%u:" WORKSPACE ":%s", w->gen, WS_SYNC_ITEMS, WS_SYNC_BYTES, WS_SYNC_INLINE,
		 WS_SYNC_REMOVALS, w->state);
}

/* What one apply did to DIR. */
struct applied {
	size_t written, made, removed;
	size_t failed;             /* names that could not be written, made or removed */
	char first[300];           /* the first such failure */
};

static void failed(struct applied *a, const char *rel, int err)
{
	if (!a->failed++)
		snprintf(a->first, sizeof a->first, "%.200s: %s", rel, strerror(err));
}

/* A name the runner sent (base64 of the path's bytes, below the workspace), decoded into out
 * (PATH_MAX bytes). Whether it is a plain relative path (beneath.h) with no NUL. */
static bool name_of(const json_t *b, char *out)
{
	const char *s = json_string_value(b);
	size_t n = s ? strlen(s) : 0;
	if (!n || n / 4 * 3 + 3 > PATH_MAX)
		return false;
	long got = b64_decode(s, n, (unsigned char *)out);
	if (got <= 0 || got >= PATH_MAX || memchr(out, 0, (size_t)got))
		return false;
	out[got] = '\0';
	return beneath_plain(out);
}

static void remove_names(struct wssync *w, const json_t *rm, struct applied *a)
{
	size_t i;
	const json_t *b;
	char rel[PATH_MAX];
	json_array_foreach(rm, i, b) {
		if (!name_of(b, rel)) {
			failed(a, "a name the host cannot take", EINVAL);
		} else if (!strcmp(rel, WSDIR_MARK)) {
			continue; /* the folder stays a workspace */
		} else if (beneath_remove(w->fd, rel) == 0) {
			a->removed++;
		} else if (errno != ENOTEMPTY && errno != ENOTDIR && errno != ELOOP) {
			/* A folder still holding what the sandbox never had, or a name on the way that
			 * is not a folder of the sandbox's: nothing of the sandbox's is left there. */
			failed(a, rel, errno);
		}
	}
}

static void make_folders(struct wssync *w, const json_t *mk, struct applied *a)
{
	size_t i;
	const json_t *x;
	char rel[PATH_MAX];
	json_array_foreach(mk, i, x) {
		unsigned mode = (unsigned)json_integer_value(json_array_get(x, 1));
		if (!name_of(json_array_get(x, 0), rel))
			failed(a, "a name the host cannot take", EINVAL);
		else if (beneath_mkdir(w->fd, rel, (mode & 0777) | 0700) == 0)
			a->made++;
		else
			failed(a, rel, errno);
	}
}

/* Writes one file of the runner's "put" list, x = [name, mode, size, data], with data. */
static void write_file(struct wssync *w, const json_t *x, const void *data, size_t len, struct applied *a)
{
	char rel[PATH_MAX];
	unsigned mode = (unsigned)json_integer_value(json_array_get(x, 1));
	if (!name_of(json_array_get(x, 0), rel))
		failed(a, "a name the host cannot take", EINVAL);
	else if (!strcmp(rel, WSDIR_MARK))
		failed(a, rel, EISDIR); /* the marker stays a folder */
	else if (beneath_write(w->fd, rel, data, len, mode & 0777) == 0)
		a->written++;
	else
		failed(a, rel, errno);
}

/* One bulk download's files, as its answer's parts come. */
struct batch {
	struct wssync *w;
	const json_t *put;
	const size_t *idx;         /* the files' places in put */
	char **paths;              /* their copies in the sandbox */
	bool *got;
	size_t k;
	struct applied *a;
};

static int take_part(void *ctx, const struct multipart_part *p)
{
	struct batch *t = ctx;
	if (strcmp(p->name, "file"))
		return 0; /* an error part: its file is missing, which the caller says */
	for (size_t j = 0; j < t->k; j++)
		if (!t->got[j] && !strcmp(p->filename, t->paths[j])) {
			t->got[j] = true;
			write_file(t->w, json_array_get(t->put, t->idx[j]), p->data, p->len, t->a);
			break;
		}
	return 0;
}

/* Downloads the files put[idx[0..k)] (copied into the runner's state folder) in one request
 * and writes them. 0, -1 or BACKEND_LOST. */
static int fetch(struct wssync *w, const json_t *put, const size_t *idx, size_t k, const struct wssync_io *io,
		 struct applied *a, struct err *e)
{
	struct batch t = {w, put, idx, calloc(k, sizeof(char *)), calloc(k, sizeof(bool)), k, a};
	size_t max = 64u << 10;
	int rc = t.paths && t.got ? 0 : err_set(e, "out of memory");
	for (size_t j = 0; rc == 0 && j < k; j++) {
		max += (size_t)json_integer_value(json_array_get(json_array_get(put, idx[j]), 2)) + 4096;
		if (asprintf(&t.paths[j], "%s/out/%zu", w->state, idx[j]) < 0) {
			t.paths[j] = NULL;
			rc = err_set(e, "out of memory");
		}
	}
	char *body = NULL;
	size_t len = 0;
	if (rc == 0)
		rc = io->download(io->ctx, (const char *const *)t.paths, k, max, &body, &len, e);
	if (rc == 0 && multipart_each(body, len, take_part, &t) < 0)
		rc = err_set(e, "the bulk download's answer is malformed");
	for (size_t j = 0; rc == 0 && j < k; j++)
		if (!t.got[j])
			rc = err_set(e, "the bulk download did not bring %s", t.paths[j]);
	for (size_t j = 0; t.paths && j < k; j++)
		free(t.paths[j]);
	free(t.paths);
	free(t.got);
	free(body);
	return rc;
}

/* Writes the runner's "put" list: inline files at once, the others by bulk download, in
 * batches of WS_BATCH_BYTES and WS_BATCH_FILES. 0, -1 or BACKEND_LOST (a download failed). */
static int write_files(struct wssync *w, const json_t *put, const struct wssync_io *io, struct applied *a,
		       struct err *e)
{
	size_t n = json_array_size(put), k = 0, *idx = calloc(n ? n : 1, sizeof *idx);
	uint64_t bytes = 0;
	int rc = idx ? 0 : err_set(e, "out of memory");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const json_t *x = json_array_get(put, i);
		const char *d = json_string_value(json_array_get(x, 3));
		uint64_t size = (uint64_t)json_integer_value(json_array_get(x, 2));
		if (d) {
			size_t dl = strlen(d);
			unsigned char *data = malloc(dl / 4 * 3 + 3);
			long got = data ? b64_decode(d, dl, data) : -1;
			if (got >= 0)
				write_file(w, x, data, (size_t)got, a);
			else
				rc = err_set(e, data ? "the call runner sent a malformed file" : "out of memory");
			free(data);
			continue;
		}
		if (k && (k == WS_BATCH_FILES || bytes + size > WS_BATCH_BYTES)) {
			rc = fetch(w, put, idx, k, io, a, e);
			k = 0;
			bytes = 0;
		}
		idx[k++] = i;
		bytes += size;
	}
	if (rc == 0 && k)
		rc = fetch(w, put, idx, k, io, a, e);
	free(idx);
	return rc;
}

/* The notice of what an apply left out (rc: how its downloads went). */
static void describe(const json_t *ws, const struct applied *a, int rc, const struct err *e, char *notice,
		     size_t n)
{
	struct buf b = {0};
	char s1[32], s2[32];
	const json_t *left = json_object_get(ws, "left"), *big = json_object_get(ws, "big");
	json_int_t nleft = json_integer_value(json_array_get(left, 0));
	json_int_t nunread = json_integer_value(json_object_get(ws, "unread"));
	if (rc)
		buf_fmt(&b, "Copying this call's changes back to the --workspace folder failed (%.300s)%s ", e->msg,
			rc == BACKEND_LOST ? ": the sandbox is gone, and those changes with it."
					   : "; the next call copies them.");
	if (nleft > 0)
		buf_fmt(&b, "%lld change%s in the workspace (%s) %s not in the --workspace folder yet: a call copies "
			    "back at most %u files and folders, %u removals and %s; the next call copies %s. ",
			(long long)nleft, nleft == 1 ? "" : "s",
			config_fmt_size((uint64_t)json_integer_value(json_array_get(left, 1)), s1, sizeof s1),
			nleft == 1 ? "is" : "are",
			WS_SYNC_ITEMS, WS_SYNC_REMOVALS, config_fmt_size(WS_SYNC_BYTES, s2, sizeof s2), nleft == 1 ? "it" : "them");
	if (json_array_size(big)) {
		char rel[PATH_MAX];
		const json_t *x = json_array_get(big, 0);
		if (!name_of(json_array_get(x, 0), rel))
			snprintf(rel, sizeof rel, "a file");
		buf_fmt(&b, "%.100s (%s)%s is not copied back to the --workspace folder: a call copies at most %s. ", rel,
			config_fmt_size((uint64_t)json_integer_value(json_array_get(x, 1)), s1, sizeof s1),
			json_array_size(big) > 1 ? " and more files" : "", config_fmt_size(WS_SYNC_BYTES, s2, sizeof s2));
	}
	if (nunread > 0)
		buf_fmt(&b, "Files of the workspace that could not be read, so not copied back: %lld. ", (long long)nunread);
	if (a->failed)
		buf_fmt(&b, "Names that could not be written into the --workspace folder: %zu (%.150s). ", a->failed, a->first);
	if (json_is_true(json_object_get(ws, "cut")))
		buf_fmt(&b, "The workspace holds more names than a call compares: removals are not copied back. ");
	char *t = buf_take(&b, NULL);
	size_t l = t ? strlen(t) : 0;
	while (l && t[l - 1] == ' ')
		l--;
	snprintf(notice, n, "%.*s", (int)l, t ? t : "");
	free(t);
}

int wssync_apply(struct wssync *w, const json_t *ws, const struct wssync_io *io, char *notice, size_t n,
		 struct err *e)
{
	notice[0] = '\0';
	if (w->fd < 0 || !json_is_object(ws))
		return 0;
	const char *why = json_string_value(json_object_get(ws, "error"));
	json_t *gen = json_object_get(ws, "gen");
	if (why || !json_is_integer(gen) || json_integer_value(gen) < 0) {
		err_set(e, "the call runner could not compare the workspace: %.300s", why ? why : "no listing");
		snprintf(notice, n, "This call's changes were not copied back to the --workspace folder (%s); the next "
				    "call copies them.", e->msg);
		return -1;
	}
	struct applied a = {0};
	remove_names(w, json_object_get(ws, "rm"), &a);
	make_folders(w, json_object_get(ws, "mk"), &a);
	int rc = write_files(w, json_object_get(ws, "put"), io, &a, e);
	if (rc == 0)
		w->gen = (unsigned long long)json_integer_value(gen);
	describe(ws, &a, rc, e, notice, n);
	log_msg(LOG_DEBUG, "daytona: --workspace: %zu files written, %zu folders made, %zu names removed%s%s",
		a.written, a.made, a.removed, notice[0] ? "; " : "", notice);
	return rc;
}

bool wssync_removed(const struct wssync *w)
{
	struct stat now, held;
	return w->fd >= 0 && (fstat(w->fd, &held) < 0 || stat(w->dir, &now) < 0 || now.st_dev != held.st_dev ||
			      now.st_ino != held.st_ino);
}

int wssync_clear(struct wssync *w, struct err *e)
{
	if (w->fd >= 0 && wsdir_clear(w->fd) < 0)
		return err_sys(e, "could not empty the workspace %s", w->dir);
	return 0;
}

void wssync_release(struct wssync *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

void wssync_report(const struct wssync *w, FILE *f)
{
	char s1[32], s2[32], s3[32];
	if (w->fd < 0)
		return;
	fprintf(f, "    workspace   /workspace in the cloud sandbox, kept in step with --workspace %s (across\n"
		   "                restarts, crashes and idle removal; cleanup_sandbox empties it):\n"
		   "                in    when the sandbox is made: %zu file%s, %s (at most %u files and %s; past them,\n"
		   "                      %zu left in the folder; skipped: %zu symlinks, special files, unusual names)\n"
		   "                back  after every call, before its result: new and changed files, new folders,\n"
		   "                      removals (at most %u files and folders, %u removals and %s a call;\n"
		   "                      not symlinks or special files)\n",
		w->dir, w->seed.files, w->seed.files == 1 ? "" : "s", config_fmt_size(w->seed.bytes, s1, sizeof s1), WS_SEED_FILES,
		config_fmt_size(WS_SEED_BYTES, s2, sizeof s2), w->seed.left, w->seed.skipped, WS_SYNC_ITEMS,
		WS_SYNC_REMOVALS, config_fmt_size(WS_SYNC_BYTES, s3, sizeof s3));
}
