/* The copy of a --workspace folder into a new Daytona sandbox (see wsseed.h). */
#include "wsseed.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/base/base64.h"
#include "../../src/base/buf.h"
#include "../../src/base/config.h"
#include "../hostfs/beneath.h"
#include "../run/run.h"
#include "hosttree.h"
#include "runner.h"

/* A manifest larger than this goes up as a file, not in the command (runner.h). */
#define MANIFEST_INLINE (128u << 10)

struct seeding {
	struct wssync *w;
	const struct wssync_io *io;
	struct rest_file *parts;   /* the batch being made; paths and data owned */
	size_t n;
	uint64_t batch;
	json_t *dirs, *files;      /* the manifest: folders, and files whose mode is not 0644 */
};

/* Uploads the batch (unless !send) and empties it. 0, -1 or BACKEND_LOST. */
static int flush(struct seeding *s, bool send, struct err *e)
{
	int rc = s->n && send ? s->io->upload(s->io->ctx, s->parts, s->n, e) : 0;
	for (size_t i = 0; i < s->n; i++) {
		free((char *)s->parts[i].path);
		free((void *)s->parts[i].data);
	}
	s->n = 0;
	s->batch = 0;
	return rc;
}

/* Adds [base64 of rel, mode] to a manifest list. 0, or -1 when out of memory. */
static int add_entry(json_t *list, const char *rel, unsigned mode)
{
	char *b = b64_encode(rel, strlen(rel), NULL);
	int rc = b ? json_array_append_new(list, json_pack("[s, i]", b, (int)(mode & 07777))) : -1;
	free(b);
	return rc;
}

static int seed_file(void *ctx, int dirfd, const char *name, const char *rel, int fd, const struct stat *st,
		     struct err *e)
{
	struct seeding *s = ctx;
	struct wssync_seed *c = &s->w->seed;
	uint64_t size = (uint64_t)st->st_size;
	if (!strncmp(name, BENEATH_TMP_PREFIX, strlen(BENEATH_TMP_PREFIX))) {
		(void)unlinkat(dirfd, name, 0);
		return 0;
	}
	if (!rest_name_ok(rel)) {
		c->skipped++;
		return 0;
	}
	if (c->files >= WS_SEED_FILES || size > WS_SEED_BYTES - c->bytes) {
		c->left++;
		c->left_bytes += size;
		return 0;
	}
	unsigned char *data;
	size_t got;
	char *path;
	if (hosttree_slurp(fd, (size_t)size, &data, &got, e) < 0)
		return -1;
	if (asprintf(&path, "%s/%s", WORKSPACE, rel) < 0) {
		free(data);
		return err_set(e, "out of memory");
	}
	s->parts[s->n++] = (struct rest_file){path, data, got};
	c->files++;
	c->bytes += got;
	s->batch += got;
	if ((st->st_mode & 0777) != 0644 && add_entry(s->files, rel, st->st_mode) < 0)
		return err_set(e, "out of memory");
	return s->n == WS_SEED_BATCH_FILES || s->batch >= WS_SEED_BATCH_BYTES ? flush(s, true, e) : 0;
}

static int seed_dir(void *ctx, const char *rel, const struct stat *st, struct err *e)
{
	struct seeding *s = ctx;
	/* One the toolbox cannot name holds only what is skipped. */
	if (rest_name_ok(rel) && add_entry(s->dirs, rel, st->st_mode) < 0)
		return err_set(e, "out of memory");
	return 0;
}

/* Runs the runner's wsprep with the manifest (a data line, or uploaded first when large). */
static int prepare(struct seeding *s, struct err *e)
{
	json_t *m = json_pack("{s:O, s:O}", "dirs", s->dirs, "files", s->files);
	size_t len;
	char *text = m ? json_dumps(m, JSON_COMPACT) : NULL, *out = NULL, mpath[200];
	json_decref(m);
	if (!text)
		return err_set(e, "out of memory");
	len = strlen(text);
	bool up = len > MANIFEST_INLINE;
	snprintf(mpath, sizeof mpath, "%s/in.json", s->w->state);
	struct rest_file part = {mpath, text, len};
	int rc = up ? s->io->upload(s->io->ctx, &part, 1, e) : 0, code = -1;
	struct buf c = {0};
	runner_cmd(&c, s->io->python, "wsprep");
	runner_word(&c, WORKSPACE);
	runner_word(&c, s->w->state);
	runner_word(&c, up ? mpath : "-");
	struct run_file mf = {NULL, text, len, 0};
	runner_end_ws(&c, NULL, &mf, up ? 0 : 1);
	if (rc == 0)
		rc = c.oom ? err_set(e, "out of memory") : s->io->exec(s->io->ctx, c.p, 120, &out, &code, e);
	json_t *j = rc == 0 && code == 0 ? json_loads(out, 0, NULL) : NULL;
	if (rc == 0 && !json_is_true(json_object_get(j, "ok")))
		rc = err_set(e, "preparing the copy of the --workspace folder: %.300s", out && *out ? out : "no answer");
	json_decref(j);
	free(out);
	free(c.p);
	free(text);
	return rc;
}

/* The first call's notice of what the copy left out. */
static void describe(struct wssync *w)
{
	char s1[32], s2[32];
	struct buf b = {0};
	const struct wssync_seed *c = &w->seed;
	if (c->left)
		buf_fmt(&b, "%zu file%s (%s) of the --workspace folder %s not copied into the sandbox (at most %u files "
			    "and %s are); %s in the folder. ", c->left, c->left == 1 ? "" : "s",
			config_fmt_size(c->left_bytes, s1, sizeof s1), c->left == 1 ? "was" : "were", WS_SEED_FILES,
			config_fmt_size(WS_SEED_BYTES, s2, sizeof s2), c->left == 1 ? "it stays" : "they stay");
	if (c->skipped)
		buf_fmt(&b, "Skipped in the --workspace folder (symlinks, special files, names the toolbox cannot "
			    "carry): %zu. ", c->skipped);
	char *t = buf_take(&b, NULL);
	size_t l = t ? strlen(t) : 0;
	snprintf(w->pending, sizeof w->pending, "%.*s", (int)(l ? l - 1 : 0), t ? t : "");
	free(t);
}

int wsseed_run(struct wssync *w, const struct wssync_io *io, struct err *e)
{
	struct seeding s = {w, io, calloc(WS_SEED_BATCH_FILES, sizeof *s.parts), 0, 0, json_array(), json_array()};
	int rc = s.parts && s.dirs && s.files ? 0 : err_set(e, "out of memory");
	struct hosttree_visit v = {.file = seed_file, .dir = seed_dir, .ctx = &s};
	if (rc == 0)
		rc = hosttree_walk(w->fd, w->dir, &v, e);
	int frc = flush(&s, rc == 0, e);
	if (rc == 0)
		rc = frc;
	w->seed.skipped = v.skipped + w->seed.skipped;
	if (rc == 0)
		rc = prepare(&s, e);
	if (rc == 0)
		describe(w);
	json_decref(s.dirs);
	json_decref(s.files);
	free(s.parts);
	return rc;
}
