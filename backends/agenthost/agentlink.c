#include "agentlink.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../agent/proto.h"
#include "../../src/base/clock.h"
#include "../../src/base/log.h"

/* How long an agent may take to answer anything but a running call. */
#define ANSWER_MS 10000
/* How long the tree may take to die after a kill before the sandbox counts as broken. */
#define KILL_GRACE_MS 2000

struct frame {
	uint8_t type;
	unsigned char *data; /* borrowed from the link's buffer until the next read */
	size_t len;
};

static int send_all(struct agentlink *l, const void *buf, size_t n, struct err *e)
{
	const unsigned char *p = buf;
	while (n) {
		ssize_t r = send(l->fd, p, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err_sys(e, "sandbox agent connection");
			return BACKEND_LOST;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* What came with a run's end (proto.h's AG_OUTPUTS). */
struct agentlink_cache {
	char *dir;                 /* the listed folder */
	size_t max;                /* the names it was listed for */
	struct ws_list list;
	size_t n;
	struct cached_file {
		char *path;        /* dir/name */
		struct ws_file f;  /* as AG_GET with file_max answered */
	} *files;
	size_t file_max;
};

void agentlink_forget(struct agentlink *l)
{
	struct agentlink_cache *c = l->cache;
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->files[i].path);
		ws_file_free(&c->files[i].f);
	}
	free(c->files);
	ws_list_free(&c->list);
	free(c->dir);
	free(c);
	l->cache = NULL;
}

static int send_frame(struct agentlink *l, struct ag_buf *b, struct err *e)
{
	if (ag_frame_end(b) < 0)
		return err_set(e, "request too large for the sandbox agent");
	/* What a request may change is read anew: only a list or a read leaves the cache. */
	if (b->p[4] != AG_LIST && b->p[4] != AG_GET && b->p[4] != AG_WATCH && b->p[4] != AG_CHANGES)
		agentlink_forget(l);
	log_msg(LOG_DEBUG, "sandbox agent request %u", b->p[4]);
	return send_all(l, b->p, b->len, e);
}

/* How much one read of the link may take ahead of the frame being read. */
#define AHEAD_MAX 16384

/* Whether frames (or part of one) were read already: fd's poll does not see them. */
static bool ahead(const struct agentlink *l)
{
	return l->ahead_at < l->ahead_len;
}

/* Waits until fd is readable or deadline (monotonic ms; <0: none); 0 ready, 1 timeout. */
static int wait_readable(int fd, int64_t deadline)
{
	for (;;) {
		int t = -1;
		if (deadline >= 0) {
			int64_t left = deadline - clock_ms();
			if (left <= 0)
				return 1;
			t = left > 1000000 ? 1000000 : (int)left;
		}
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, t);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return 0; /* let the read report it */
	}
}

static int read_raw(struct agentlink *l, void *buf, size_t n, int64_t deadline, struct err *e)
{
	unsigned char *p = buf;
	int fd = l->fd;
	l->reset = 0;
	if (ahead(l)) {
		size_t k = l->ahead_len - l->ahead_at < n ? l->ahead_len - l->ahead_at : n;
		memcpy(p, l->ahead + l->ahead_at, k);
		l->ahead_at += k;
		p += k;
		n -= k;
	}
	/* What is there already is taken without a poll first: the frames of a run's end come in
	 * one write, and each poll is one more system call on a call's way. Only an empty socket is
	 * polled; a link that is not a socket (ENOTSOCK) is polled before each read. */
	bool empty = false;
	while (n) {
		if ((empty || l->not_sock) && wait_readable(fd, deadline)) {
			err_set(e, "the sandbox agent stopped answering");
			return BACKEND_LOST;
		}
		/* Short reads go through the read-ahead buffer, so that what follows them in the
		 * same write is taken by the same system call; long ones go straight to buf. */
		bool via = n < AHEAD_MAX && !l->mux;
		/* Nothing is read without it, but a request may be on its way, whose answer would
		 * then be taken as the next one's: the link is lost, as at any failed read. */
		if (via && !l->ahead && !(l->ahead = malloc(AHEAD_MAX))) {
			err_set(e, "out of memory");
			return BACKEND_LOST;
		}
		void *to = via ? l->ahead : p;
		size_t want = via ? AHEAD_MAX : n;
		ssize_t r = l->not_sock ? read(fd, to, want) : recv(fd, to, want, MSG_DONTWAIT);
		if (r < 0 && errno == ENOTSOCK && !l->not_sock) {
			l->not_sock = true;
			continue;
		}
		empty = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
		if (empty || (r < 0 && errno == EINTR))
			continue;
		if (r <= 0) {
			l->reset = r < 0 && errno == ECONNRESET;
			if (r == 0)
				err_set(e, "the sandbox ended unexpectedly");
			else
				err_sys(e, "reading from the sandbox agent");
			return BACKEND_LOST;
		}
		size_t k = (size_t)r;
		if (via) {
			l->ahead_at = k < n ? k : n;
			l->ahead_len = k;
			memcpy(p, l->ahead, l->ahead_at);
			k = l->ahead_at;
		}
		p += k;
		n -= k;
	}
	return 0;
}

/* Reads n bytes of what the agent sent: on a multiplexed link, the payload of the engine's
 * stdout frames (8 bytes each: stream 1, three zero bytes, the length big-endian). */
static int read_all(struct agentlink *l, void *buf, size_t n, int64_t deadline, struct err *e)
{
	unsigned char *p = buf;
	if (!l->mux)
		return read_raw(l, buf, n, deadline, e);
	while (n) {
		if (l->mux_left == 0) {
			unsigned char h[8];
			int rc = read_raw(l, h, sizeof h, deadline, e);
			if (rc)
				return rc;
			if (h[0] != 1 || h[1] || h[2] || h[3]) {
				err_set(e, "the container engine sent a malformed stream frame");
				return BACKEND_LOST;
			}
			l->mux_left = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
			continue;
		}
		size_t k = n < l->mux_left ? n : l->mux_left;
		int rc = read_raw(l, p, k, deadline, e);
		if (rc)
			return rc;
		p += k;
		n -= k;
		l->mux_left -= (uint32_t)k;
	}
	return 0;
}

/* Reads one whole frame into the link's buffer. */
static int read_frame(struct agentlink *l, struct frame *fr, int64_t deadline, struct err *e)
{
	unsigned char hdr[5];
	int rc = read_all(l, hdr, 5, deadline, e);
	if (rc)
		return rc;
	uint32_t n = ag_le32(hdr);
	if (n == 0 || n > AG_MAX_FRAME) {
		err_set(e, "the sandbox agent sent a malformed frame");
		return BACKEND_LOST;
	}
	fr->type = hdr[4];
	fr->len = n - 1;
	if (fr->len + 1 > l->rcap) {
		unsigned char *nb = realloc(l->rbuf, fr->len + 1);
		if (!nb)
			return err_set(e, "out of memory");
		l->rbuf = nb;
		l->rcap = fr->len + 1;
	}
	fr->data = l->rbuf;
	/* A frame once begun arrives whole: allow the usual answer time for its rest. */
	rc = read_all(l, fr->data, fr->len, clock_ms() + ANSWER_MS, e);
	if (rc)
		return rc;
	fr->data[fr->len] = '\0';
	return 0;
}

/* Waits for AG_OK; AG_ERR becomes -1 with its text. */
static int expect_ok(struct agentlink *l, const char *what, struct err *e)
{
	struct frame fr;
	int rc = read_frame(l, &fr, clock_ms() + ANSWER_MS, e);
	if (rc)
		return rc;
	if (fr.type == AG_OK)
		rc = 0;
	else if (fr.type == AG_ERR)
		rc = err_set(e, "%s: %s", what, (char *)fr.data);
	else
		rc = err_set(e, "%s: unexpected answer from the sandbox agent", what);
	return rc;
}

int agentlink_open(struct agentlink *l, int fd, int timeout_ms, struct err *e)
{
	return agentlink_open_mux(l, fd, false, timeout_ms, e);
}

int agentlink_open_mux(struct agentlink *l, int fd, bool mux, int timeout_ms, struct err *e)
{
	l->fd = fd;
	l->rbuf = NULL;
	l->rcap = 0;
	l->reset = 0;
	l->cache = NULL;
	l->mux = mux;
	l->mux_left = 0;
	l->not_sock = false;
	l->ahead = NULL;
	l->ahead_at = l->ahead_len = 0;
	struct frame fr;
	int rc = read_frame(l, &fr, clock_ms() + timeout_ms, e);
	if (rc)
		return rc;
	uint32_t v = fr.len >= 4 ? ag_le32(fr.data) : 0;
	if (fr.type != AG_HELLO || v != AG_VERSION) {
		err_set(e, "the sandbox agent speaks another protocol (got %u, want %u)", v, AG_VERSION);
		return BACKEND_LOST;
	}
	return 0;
}

int agentlink_mux(struct agentlink *l, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_MUX);
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc ? rc : expect_ok(l, "cutting the agent's stream into chunks", e);
}

int agentlink_mux_relay(struct agentlink *l, struct stdiorelay *r, int *chan_fd, struct err *e)
{
	int rc = agentlink_mux(l, e);
	if (rc)
		return rc;
	if ((l->mux && l->mux_left) || ahead(l)) {
		err_set(e, "the container engine's frame held more than the agent's answer");
		return BACKEND_LOST;
	}
	int fds[AG_MUX_STREAMS];
	if (stdiorelay_start(r, l->fd, fds, e) < 0) {
		l->fd = -1;
		return BACKEND_LOST;
	}
	l->fd = fds[0];
	l->mux = false;
	*chan_fd = fds[1];
	return 0;
}

int agentlink_filter(struct agentlink *l, const void *bpf, size_t len, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_FILTER);
	ag_put(&b, bpf, len);
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc ? rc : expect_ok(l, "installing the seccomp filter", e);
}

int agentlink_put(struct agentlink *l, const struct run_file *f, size_t n, struct err *e)
{
	if (n == 0)
		return 0;
	if (n > AG_PUT_FILES)
		return err_set(e, "writing files into the sandbox: more than %u in one call", AG_PUT_FILES);
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_PUT);
	ag_put_u32(&b, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		ag_put_u32(&b, f[i].mode);
		ag_put_str(&b, f[i].path, strlen(f[i].path));
		ag_put_str(&b, f[i].data, f[i].len);
	}
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc ? rc : expect_ok(l, "writing a file into the sandbox", e);
}

/* Waits for the answer of type `want` to a request; AG_ERR becomes -1 with its text. */
static int expect(struct agentlink *l, uint8_t want, struct frame *fr, const char *what, struct err *e)
{
	int rc = read_frame(l, fr, clock_ms() + ANSWER_MS, e);
	if (rc)
		return rc;
	if (fr->type == want)
		return 0;
	if (fr->type == AG_ERR)
		return err_set(e, "%s: %s", what, (char *)fr->data);
	err_set(e, "%s: unexpected answer from the sandbox agent", what);
	return BACKEND_LOST;
}

/* AG_ENTRIES' payload at c into out (at most max names). 0, or -1 malformed, or -2 out of
 * memory; out is empty then. */
static int parse_entries(struct ag_cur *c, size_t len, size_t max, struct ws_list *out)
{
	uint32_t flags = ag_get_u32(c), n = ag_get_u32(c);
	*out = (struct ws_list){0};
	if (c->bad || n > max || n > len / 32)
		return -1;
	out->v = calloc(n ? n : 1, sizeof *out->v);
	if (!out->v)
		return -2;
	out->truncated = flags & AG_LIST_TRUNCATED;
	out->skipped = flags & AG_LIST_SKIPPED;
	for (uint32_t i = 0; i < n; i++) {
		size_t pl;
		const char *p = ag_get_str(c, &pl);
		struct ws_entry *w = &out->v[i];
		w->size = ag_get_u64(c);
		w->mtime_ns = (int64_t)ag_get_u64(c);
		w->ctime_ns = (int64_t)ag_get_u64(c);
		w->mode = ag_get_u32(c);
		if (c->bad || !pl || memchr(p, 0, pl)) {
			ws_list_free(out);
			return -1;
		}
		if (!(w->path = strndup(p, pl))) {
			ws_list_free(out);
			return -2;
		}
		out->n++;
	}
	return 0;
}

/* A copy of the cached listing, when it is the one asked for: 1, 0 when it is not, -1 out of
 * memory. */
static int cached_list(const struct agentlink *l, const char *dir, const char *skip, size_t max, struct ws_list *out)
{
	const struct agentlink_cache *c = l->cache;
	if (!c || (skip && *skip) || max != c->max || strcmp(dir, c->dir))
		return 0;
	out->v = calloc(c->list.n ? c->list.n : 1, sizeof *out->v);
	if (!out->v)
		return -1;
	out->truncated = c->list.truncated;
	out->skipped = c->list.skipped;
	for (size_t i = 0; i < c->list.n; i++) {
		out->v[i] = c->list.v[i];
		if (!(out->v[i].path = strdup(c->list.v[i].path))) {
			ws_list_free(out);
			return -1;
		}
		out->n++;
	}
	return 1;
}

/* AG_LIST, or AG_WATCH (type). */
static int list_as(struct agentlink *l, uint8_t type, const char *dir, const char *skip, size_t max,
		   struct ws_list *out, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, type);
	ag_put_u32(&b, max > UINT32_MAX ? UINT32_MAX : (uint32_t)max);
	ag_put_str(&b, dir, strlen(dir));
	ag_put_str(&b, skip ? skip : "", skip ? strlen(skip) : 0);
	int rc = send_frame(l, &b, e);
	free(b.p);
	struct frame fr;
	if (rc || (rc = expect(l, AG_ENTRIES, &fr, "listing the workspace", e)))
		return rc;
	struct ag_cur c = {fr.data, fr.len, 0};
	rc = parse_entries(&c, fr.len, max, out);
	if (rc == -2)
		return err_set(e, "out of memory");
	if (rc < 0) {
		err_set(e, "the sandbox agent sent a malformed list");
		return BACKEND_LOST;
	}
	return 0;
}

int agentlink_list(struct agentlink *l, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	*out = (struct ws_list){0};
	int hit = cached_list(l, dir, skip, max, out);
	if (hit)
		return hit < 0 ? err_set(e, "out of memory") : 0;
	return list_as(l, AG_LIST, dir, skip, max, out, e);
}

int agentlink_list_watch(struct agentlink *l, const char *dir, const char *skip, size_t max, struct ws_list *out,
			 struct err *e)
{
	*out = (struct ws_list){0};
	return list_as(l, AG_WATCH, dir, skip, max, out, e);
}

int agentlink_changes(struct agentlink *l, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_CHANGES);
	int rc = send_frame(l, &b, e);
	free(b.p);
	struct frame fr;
	if (rc || (rc = expect(l, AG_CHANGES, &fr, "asking what changed", e)))
		return rc;
	struct ag_cur c = {fr.data, fr.len, 0};
	uint32_t state = ag_get_u32(&c);
	if (c.bad || c.left || state > AG_CHANGES_UNKNOWN) {
		err_set(e, "the sandbox agent sent a malformed answer to what changed");
		return BACKEND_LOST;
	}
	return (int)state;
}

/* AG_OUTPUTS' payload into a new cache for the listing of dir (max names) and files of at most
 * file_max bytes. 0, or -1 malformed (BACKEND_LOST), or -2 out of memory (nothing cached). */
static int take_outputs(struct agentlink *l, const struct frame *fr, const char *dir, size_t max, size_t file_max)
{
	agentlink_forget(l);
	struct agentlink_cache *k = calloc(1, sizeof *k);
	if (!k || !(k->dir = strdup(dir))) {
		free(k);
		return -2;
	}
	k->max = max;
	k->file_max = file_max;
	l->cache = k;
	struct ag_cur c = {fr->data, fr->len, 0};
	int rc = parse_entries(&c, fr->len, max, &k->list);
	uint32_t m = rc == 0 ? ag_get_u32(&c) : 0;
	if (rc == 0 && (c.bad || m > AG_OUTPUTS_FILES))
		rc = -1;
	if (rc == 0 && m && !(k->files = calloc(m, sizeof *k->files)))
		rc = -2;
	for (uint32_t i = 0; rc == 0 && i < m; i++) {
		size_t nl, dl;
		const char *name = ag_get_str(&c, &nl);
		struct ws_file *f = &k->files[i].f;
		f->err = (int)ag_get_u32(&c);
		f->mode = ag_get_u32(&c);
		f->size = ag_get_u64(&c);
		const char *data = ag_get_str(&c, &dl);
		if (c.bad || !nl || memchr(name, 0, nl) || dl > file_max || dl > f->size || (dl && (f->err || !S_ISREG(f->mode)))) {
			rc = -1;
			break;
		}
		if (asprintf(&k->files[i].path, "%s/%.*s", dir, (int)nl, name) < 0) {
			k->files[i].path = NULL;
			rc = -2;
			break;
		}
		k->n++;
		if (!(f->data = malloc(dl + 1))) {
			rc = -2;
			break;
		}
		memcpy(f->data, data, dl);
		f->data[dl] = '\0';
		f->len = dl;
	}
	if (rc < 0)
		agentlink_forget(l);
	return rc;
}

/* A copy of a cached file's answer to AG_GET path max, when the cache holds it: 1, 0 when it
 * does not, -1 out of memory. */
static int cached_get(const struct agentlink *l, const char *path, size_t max, struct ws_file *out)
{
	const struct agentlink_cache *c = l->cache;
	for (size_t i = 0; c && i < c->n; i++) {
		const struct ws_file *f = &c->files[i].f;
		if (strcmp(c->files[i].path, path))
			continue;
		/* Read up to file_max: the same answer when that was the whole file or max is less. */
		if (f->len != f->size && max > f->len)
			return 0;
		*out = *f;
		out->len = max < f->len ? max : f->len;
		if (!(out->data = malloc(out->len + 1))) {
			*out = (struct ws_file){0};
			return -1;
		}
		memcpy(out->data, f->data, out->len);
		out->data[out->len] = '\0';
		return 1;
	}
	return 0;
}

int agentlink_get(struct agentlink *l, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	*out = (struct ws_file){0};
	int hit = cached_get(l, path, max, out);
	if (hit)
		return hit < 0 ? err_set(e, "out of memory") : 0;
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_GET);
	ag_put_u64(&b, max);
	ag_put_str(&b, path, strlen(path));
	int rc = send_frame(l, &b, e);
	free(b.p);
	struct frame fr;
	if (rc || (rc = expect(l, AG_DATA, &fr, "reading a file in the sandbox", e)))
		return rc;
	if (fr.len < 16 || fr.len - 16 > max) {
		err_set(e, "the sandbox agent sent a malformed file");
		return BACKEND_LOST;
	}
	struct ag_cur c = {fr.data, fr.len, 0};
	out->err = (int)ag_get_u32(&c);
	out->mode = ag_get_u32(&c);
	out->size = ag_get_u64(&c);
	out->len = c.left;
	out->data = malloc(out->len + 1);
	if (!out->data)
		return err_set(e, "out of memory");
	memcpy(out->data, c.p, out->len);
	out->data[out->len] = '\0';
	return 0;
}

static size_t count(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

/* A list of strings as the agent reads one: the count, then each. */
static void put_list(struct ag_buf *b, const char *const *v)
{
	size_t n = count(v);
	ag_put_u32(b, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		ag_put_str(b, v[i], strlen(v[i]));
}

/* The run's end brings back changes_in's listing (AG_RUN_OUTPUTS). */
static bool outputs_wanted(const struct run_req *rq)
{
	return rq->changes_in && *rq->changes_in && rq->changes_list_max && rq->changes_list_max <= UINT32_MAX &&
	       strlen(rq->changes_in) < 4096;
}

static int send_run(struct agentlink *l, const struct run_req *rq, const struct agentlink_limits *lim, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_RUN);
	bool outputs = outputs_wanted(rq);
	ag_put_u32(&b, (rq->sh_fallback ? AG_RUN_SH_FALLBACK : 0) | (rq->prestart ? AG_RUN_PRESTART : 0) |
			       (outputs ? AG_RUN_OUTPUTS : 0) | (rq->background ? AG_RUN_BACKGROUND : 0) |
			       (lim->relay_port && lim->relay_take ? AG_RUN_RELAY_TAKE : 0));
	ag_put_u64(&b, rq->cap);
	ag_put_u64(&b, lim->spill_max);
	ag_put_str(&b, rq->cwd, strlen(rq->cwd));
	const char *sp = rq->spill_prefix ? rq->spill_prefix : "";
	ag_put_str(&b, sp, strlen(sp));
	ag_put_u32(&b, lim->relay_port);
	const char *rs = lim->relay_socket ? lim->relay_socket : "";
	ag_put_str(&b, rs, strlen(rs));
	struct { uint32_t res; uint64_t v; } rl[6];
	uint32_t n = 0;
	rl[n].res = RLIMIT_NOFILE, rl[n++].v = lim->open_files;
	rl[n].res = RLIMIT_FSIZE, rl[n++].v = lim->file_size;
	rl[n].res = RLIMIT_CPU, rl[n++].v = lim->cpu_s;
	rl[n].res = RLIMIT_CORE, rl[n++].v = 0;
	if (lim->nproc)
		rl[n].res = RLIMIT_NPROC, rl[n++].v = lim->nproc;
	if (lim->as)
		rl[n].res = RLIMIT_AS, rl[n++].v = lim->as;
	ag_put_u32(&b, n);
	for (uint32_t i = 0; i < n; i++) {
		ag_put_u32(&b, rl[i].res);
		ag_put_u64(&b, rl[i].v);
	}
	put_list(&b, rq->argv);
	put_list(&b, rq->env);
	if (outputs) {
		ag_put_u32(&b, (uint32_t)rq->changes_list_max);
		ag_put_str(&b, rq->changes_in, strlen(rq->changes_in));
		ag_put_u32(&b, (uint32_t)(rq->changes_files < AG_OUTPUTS_FILES ? rq->changes_files : AG_OUTPUTS_FILES));
		ag_put_u64(&b, rq->changes_file_max < AG_OUTPUTS_FILE_MAX ? rq->changes_file_max : AG_OUTPUTS_FILE_MAX);
	}
	if (rq->background) {
		const char *lb = rq->bg_label ? rq->bg_label : "";
		ag_put_u32(&b, rq->bg_wait_ms < 0 ? 0 : rq->bg_wait_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)rq->bg_wait_ms);
		ag_put_u64(&b, rq->bg_timeout_ms);
		ag_put_u32(&b, rq->bg_max);
		ag_put_str(&b, lb, strlen(lb));
	}
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc;
}

static int send_kill(struct agentlink *l, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_KILL);
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc;
}

int agentlink_run(struct agentlink *l, const struct run_req *rq, const struct agentlink_limits *lim,
		  struct run_res *rs, struct err *e)
{
	return agentlink_run_until(l, rq, lim, -1, -1, rs, e);
}

int agentlink_run_until(struct agentlink *l, const struct run_req *rq, const struct agentlink_limits *lim,
			int stop_fd, int stop_fd2, struct run_res *rs, struct err *e)
{
	int rc;
	/* One batch: a call whose files cannot all be written changes none of them. */
	if ((rc = agentlink_put(l, rq->files, rq->nfiles, e)))
		return rc;
	if ((rc = send_run(l, rq, lim, e)))
		return rc;
	rs->started = true;
	bool heard = false;   /* a frame came after the run request */
	int64_t kill_by = -1; /* once killed: when the agent must have answered */
	for (;;) {
		/* Once killed, only the agent's answer is waited for. */
		struct pollfd p[4] = {{l->fd, POLLIN, 0}, {kill_by < 0 ? rq->cancel_fd : -1, POLLIN, 0},
				      {kill_by < 0 ? stop_fd : -1, POLLIN, 0}, {kill_by < 0 ? stop_fd2 : -1, POLLIN, 0}};
		int64_t now = clock_ms(), until = kill_by >= 0 ? kill_by : rq->deadline_ms;
		int t = until - now <= 0 ? 0 : (until - now > 1000000 ? 1000000 : (int)(until - now));
		/* A frame read ahead is taken before anything else is looked at, as one waiting in
		 * the socket would be. */
		int r = ahead(l) ? (p[0].revents = POLLIN, 1) : poll(p, 4, t);
		if (r < 0 && errno != EINTR)
			return err_sys(e, "poll");
		if (r > 0 && p[0].revents) {
			struct frame fr;
			if ((rc = read_frame(l, &fr, clock_ms() + ANSWER_MS, e))) {
				/* Reset with nothing heard and nothing sent since the run request: it
				 * was among what the agent left unread (one that read it and ended
				 * leaves none, and its end reads as end-of-file). */
				if (l->reset && !heard && kill_by < 0)
					rs->started = false;
				return rc;
			}
			heard = true;
			if (fr.type == AG_OUT && fr.len >= 1) {
				/* Counted as it comes, so a run cut short still says what it printed. */
				if (fr.data[0] == 1 || fr.data[0] == 2)
					rs->bytes[fr.data[0] - 1] += fr.len - 1;
				if (rq->on_output)
					rq->on_output(rq->ctx, fr.data[0], (char *)fr.data + 1, fr.len - 1);
			} else if (fr.type == AG_OUTPUTS && outputs_wanted(rq)) {
				size_t fm = rq->changes_file_max < AG_OUTPUTS_FILE_MAX ? rq->changes_file_max
											: AG_OUTPUTS_FILE_MAX;
				if (take_outputs(l, &fr, rq->changes_in, rq->changes_list_max, fm) == -1) {
					err_set(e, "the sandbox agent sent a malformed list");
					return BACKEND_LOST;
				}
			} else if (fr.type == AG_EXIT && fr.len >= 40) {
				int status = (int)ag_le32(fr.data);
				uint32_t flags = ag_le32(fr.data + 4);
				struct ag_cur c = {fr.data + 8, 32, 0};
				rs->bytes[0] = ag_get_u64(&c);
				rs->bytes[1] = ag_get_u64(&c);
				rs->spill_errno[0] = (int)ag_get_u32(&c);
				rs->spill_errno[1] = (int)ag_get_u32(&c);
				rs->started_ns = (int64_t)ag_get_u64(&c);
				rs->spilled[0] = flags & AG_EXIT_SPILL_OUT;
				rs->spilled[1] = flags & AG_EXIT_SPILL_ERR;
				rs->spill_cut = flags & AG_EXIT_SPILL_CUT;
				rs->prestarted = flags & AG_EXIT_PRESTARTED;
				rs->exited_early = flags & AG_EXIT_EARLY;
				rs->kept_code = flags & AG_EXIT_KEPT_CODE;
				if (rs->timed_out)
					rs->exit_code = 124;
				else if (WIFEXITED(status))
					rs->exit_code = WEXITSTATUS(status);
				else if (WIFSIGNALED(status))
					rs->exit_code = 128 + WTERMSIG(status);
				else
					rs->exit_code = 1;
				return 0;
			} else if (fr.type == AG_DETACHED && fr.len >= 28 && rq->background) {
				struct ag_cur c = {fr.data, fr.len, 0};
				rs->bg_id = ag_get_u32(&c);
				rs->started_ns = (int64_t)ag_get_u64(&c);
				rs->bytes[0] = ag_get_u64(&c);
				rs->bytes[1] = ag_get_u64(&c);
				return 0;
			} else if (fr.type == AG_ERR) {
				return err_set(e, "%s", (char *)fr.data);
			}
			continue;
		}
		if (kill_by >= 0) {
			if (clock_ms() >= kill_by) {
				err_set(e, "the sandbox did not stop the call within %d ms", KILL_GRACE_MS);
				return BACKEND_LOST;
			}
			continue;
		}
		bool cancelled = r > 0 && p[1].fd >= 0 && p[1].revents;
		bool stopped = !cancelled && r > 0 && ((p[2].fd >= 0 && p[2].revents) || (p[3].fd >= 0 && p[3].revents));
		if (cancelled || stopped || clock_ms() >= rq->deadline_ms) {
			if (cancelled)
				rs->cancelled = true;
			else if (stopped)
				rs->stopped = true;
			else
				rs->timed_out = true;
			if ((rc = send_kill(l, e)))
				return rc;
			kill_by = clock_ms() + KILL_GRACE_MS;
		}
	}
}

int agentlink_prestart(struct agentlink *l, const struct agentlink_prestart *ps, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_PRESTART);
	ag_put_str(&b, ps->python, strlen(ps->python));
	put_list(&b, ps->env);
	ag_put_str(&b, ps->source, ps->source_len);
	ag_put_str(&b, ps->script, strlen(ps->script));
	ag_put_str(&b, ps->modules, strlen(ps->modules));
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc ? rc : expect_ok(l, "configuring the prestarted Python interpreter", e);
}

int agentlink_settle(struct agentlink *l, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_SETTLE);
	int rc = send_frame(l, &b, e);
	free(b.p);
	return rc ? -1 : 0;
}

int agentlink_preinfo(struct agentlink *l, unsigned *phase, unsigned *ready_ms, char *text, size_t n, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_PREINFO);
	int rc = send_frame(l, &b, e);
	free(b.p);
	struct frame fr;
	if (rc || (rc = expect(l, AG_PREINFO, &fr, "asking for the prestarted Python interpreter", e)))
		return rc;
	struct ag_cur c = {fr.data, fr.len, 0};
	size_t tl;
	*phase = ag_get_u32(&c);
	*ready_ms = ag_get_u32(&c);
	const char *t = ag_get_str(&c, &tl);
	if (c.bad)
		return err_set(e, "the sandbox agent sent a malformed answer"), BACKEND_LOST;
	snprintf(text, n, "%.*s", (int)tl, t);
	return 0;
}

void agentlink_report_limits(const struct config *cfg, uint64_t open_files_max, FILE *f)
{
	char sz[32];
	if (open_files_max && open_files_max < cfg->open_files)
		fprintf(f, "    open files  %-10llu rlimit (RLIMIT_NOFILE): the server's hard limit, below --open-files %llu\n",
			(unsigned long long)open_files_max, (unsigned long long)cfg->open_files);
	else
		fprintf(f, "    open files  %-10llu rlimit (RLIMIT_NOFILE)\n", (unsigned long long)cfg->open_files);
	fprintf(f, "    file size   %-10s rlimit (RLIMIT_FSIZE)\n", config_fmt_size(cfg->file_size, sz, sizeof sz));
	fprintf(f, "    cpu time    %-10s rlimit (RLIMIT_CPU), the call's timeout\n", "per call");
	fprintf(f, "    /tmp        %-10s tmpfs size\n", config_fmt_size(cfg->tmp_size, sz, sizeof sz));
	if (cfg->max_background)
		fprintf(f, "    background  %-10llu at once (--max-background), each until its timeout_s (default %g s, at most "
			   "%g s), in the sandbox's memory, process and filter limits\n",
			(unsigned long long)cfg->max_background, cfg->bg_timeout_s, cfg->bg_max_timeout_s);
	else
		fprintf(f, "    background  %-10s (--max-background 0)\n", "none");
}

bool agentlink_ended(const struct agentlink *l)
{
	struct pollfd p = {l->fd, POLLIN | POLLRDHUP, 0};
	return l->fd >= 0 && (ahead(l) || poll(&p, 1, 0) > 0);
}

void agentlink_close(struct agentlink *l)
{
	agentlink_forget(l);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	free(l->rbuf);
	l->rbuf = NULL;
	l->rcap = 0;
	free(l->ahead);
	l->ahead = NULL;
	l->ahead_at = l->ahead_len = 0;
}

int agentlink_channel(struct agentlink *l, struct agentlink *ch, struct err *e)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, "socketpair");
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_CHANNEL);
	(void)ag_frame_end(&b);
	char cbuf[CMSG_SPACE(sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {b.p, b.len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &sv[1], sizeof(int));
	ssize_t w;
	do
		w = b.oom ? -1 : sendmsg(l->fd, &m, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	free(b.p);
	close(sv[1]);
	if (w != (ssize_t)iov.iov_len) {
		close(sv[0]);
		err_sys(e, "sandbox agent connection");
		return BACKEND_LOST;
	}
	int rc = expect_ok(l, "opening the background processes' channel", e);
	if (rc) {
		close(sv[0]);
		return rc;
	}
	*ch = (struct agentlink){.fd = sv[0]};
	return 0;
}

int agentlink_channel_inband(struct agentlink *l, struct agentlink *ch, int fd, struct err *e)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_CHANNEL);
	int rc = send_frame(l, &b, e);
	free(b.p);
	if (!rc)
		rc = expect_ok(l, "opening the background processes' channel", e);
	if (rc) {
		close(fd);
		return rc;
	}
	*ch = (struct agentlink){.fd = fd};
	return 0;
}

/* One entry of AG_BG_INFO into pi. 0, or -1 when malformed. */
static int get_entry(struct ag_cur *c, struct proc_info *pi)
{
	size_t ll;
	pi->id = ag_get_u32(c);
	uint32_t flags = ag_get_u32(c);
	pi->status = (int)ag_get_u32(c);
	pi->started_ns = (int64_t)ag_get_u64(c);
	pi->duration_ms = ag_get_u64(c);
	const char *lb = ag_get_str(c, &ll);
	if (c->bad)
		return -1;
	snprintf(pi->label, sizeof pi->label, "%.*s", (int)ll, lb);
	lb = ag_get_str(c, &ll);
	if (c->bad)
		return -1;
	snprintf(pi->prefix, sizeof pi->prefix, "%.*s", (int)ll, lb);
	pi->running = flags & AG_BG_RUNNING;
	pi->timed_out = flags & AG_BG_TIMED_OUT;
	pi->input_closed = flags & AG_BG_INPUT_CLOSED;
	pi->cut = flags & AG_BG_CUT;
	for (int i = 0; i < 2; i++) {
		size_t dl;
		pi->s[i].bytes = ag_get_u64(c);
		pi->s[i].from = ag_get_u64(c);
		pi->s[i].file_start = ag_get_u64(c);
		pi->s[i].file_errno = (int)ag_get_u32(c);
		pi->s[i].file = flags & (i ? AG_BG_FILE_ERR : AG_BG_FILE_OUT);
		const char *d = ag_get_str(c, &dl);
		if (c->bad)
			return -1;
		if (!(pi->s[i].data = malloc(dl + 1)))
			return -1;
		memcpy(pi->s[i].data, d, dl);
		pi->s[i].data[dl] = '\0';
		pi->s[i].len = dl;
	}
	return 0;
}

int agentlink_process(struct agentlink *ch, const struct proc_req *rq, struct proc_res *rs, struct err *e)
{
	*rs = (struct proc_res){0};
	if (ch->fd < 0)
		return err_set(e, "the sandbox has no channel for background processes"), BACKEND_LOST;
	struct ag_buf b = {0};
	static const uint8_t types[] = {AG_BG_LIST, AG_BG_READ, AG_BG_INPUT, AG_BG_SIGNAL};
	ag_frame_begin(&b, types[rq->op]);
	if (rq->op != PROC_LIST)
		ag_put_u32(&b, rq->id);
	if (rq->op == PROC_INPUT) {
		ag_put_u32(&b, rq->close_input);
		ag_put(&b, rq->input, rq->len);
	}
	if (rq->op == PROC_SIGNAL)
		ag_put_u32(&b, (uint32_t)rq->sig);
	int rc = send_frame(ch, &b, e);
	free(b.p);
	if (rc)
		return rc == -1 ? -1 : BACKEND_LOST;
	struct frame fr;
	bool info = rq->op == PROC_LIST || rq->op == PROC_READ;
	if ((rc = expect(ch, info ? AG_BG_INFO : AG_OK, &fr, "background process", e)))
		return rc;
	struct ag_cur c = {fr.data, fr.len, 0};
	if (!info) {
		rs->written = rq->op == PROC_INPUT ? ag_get_u32(&c) : 0;
		return 0;
	}
	uint32_t n = ag_get_u32(&c);
	if (c.bad || n > AG_BG_MAX + AG_BG_ENDED)
		goto bad;
	if (!(rs->v = calloc(n ? n : 1, sizeof *rs->v)))
		return err_set(e, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		rs->n++;
		if (get_entry(&c, &rs->v[i]) < 0)
			goto bad;
	}
	return 0;
bad:
	proc_res_free(rs);
	err_set(e, "the sandbox agent sent a malformed answer");
	return BACKEND_LOST;
}
