/*
 * Background processes of the sandbox (agent.h): calls that outlived their wait, read, fed and
 * signalled through the channel (proto.h) while calls run on the main connection. Their output
 * is drained as it comes, so that a program never blocks on a full pipe: per stream the first
 * `cap` bytes since the last read are kept in memory, and past that everything goes to the
 * stream's spill file in the workspace too, up to spill_max.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define SLOTS (AG_BG_MAX + AG_BG_ENDED)
/* A read answers with both streams' kept bytes in one frame, which must fit AG_MAX_FRAME with
 * room for the rest of the entry: past this, a stream's bytes go to its file only. */
#define KEEP_MAX ((AG_MAX_FRAME - (64u << 10)) / 2)

struct bg_out {
	struct bg_stream s;
	unsigned char *buf;     /* unread, at most cap bytes */
	size_t len;
	uint64_t from;          /* the stream's byte at buf[0] */
	uint64_t file_start;    /* the stream's byte at the file's start */
};

struct bg {
	uint32_t id;            /* 0: a free slot */
	pid_t pid;              /* the session's leader; 0 once reaped */
	int running, status, timed_out;
	int in_fd;              /* its stdin's write end, -1 once closed */
	uint64_t started_ns, cap, spill_max;
	long start_ms, end_ms, deadline_ms;
	uint64_t ended_seq;     /* the order they ended in */
	char prefix[4096];
	char label[256];
	struct bg_out o[2];
};

static struct bg slots[SLOTS];
static uint32_t next_id = 1;
static uint64_t ended_seq;
static int unswept;     /* one ended since the last bg_take_ended */
static int chan = -1;
static struct ag_buf cout;

long mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

pid_t proc_session(pid_t p, char *state, pid_t *ppid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)p);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	const char *q = strrchr(buf, ')');
	int pp, pg, sid;
	char st;
	if (!q || sscanf(q + 1, " %c %d %d %d", &st, &pp, &pg, &sid) != 4)
		return -1;
	if (state)
		*state = st;
	if (ppid)
		*ppid = pp;
	return sid;
}

/* SIGKILL to every process of session sid. */
static void kill_session(pid_t sid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 1)
			continue;
		if (proc_session((pid_t)p, NULL, NULL) == sid)
			kill((pid_t)p, SIGKILL);
	}
	if (d)
		closedir(d);
}

static void out_close(struct bg_out *o)
{
	if (o->s.fd >= 0)
		close(o->s.fd);
	if (o->s.file_fd >= 0)
		close(o->s.file_fd);
	o->s.fd = o->s.file_fd = -1;
	free(o->buf);
	o->buf = NULL;
	o->len = 0;
}

static void forget(struct bg *b)
{
	for (int i = 0; i < 2; i++)
		out_close(&b->o[i]);
	if (b->in_fd >= 0)
		close(b->in_fd);
	memset(b, 0, sizeof *b);
	b->in_fd = -1;
	b->o[0].s.fd = b->o[0].s.file_fd = b->o[1].s.fd = b->o[1].s.file_fd = -1;
}

static void file_write(struct bg *b, struct bg_out *o, const void *d, size_t n)
{
	if (o->s.file_fd < 0)
		return;
	if (o->s.file_len + n > b->spill_max) {
		n = (size_t)(b->spill_max - o->s.file_len);
		o->s.cut = 1;
	}
	if (n && ag_write_full(o->s.file_fd, d, n) < 0) {
		o->s.file_errno = errno ? errno : EIO;
		close(o->s.file_fd);
		o->s.file_fd = -1;
		return;
	}
	o->s.file_len += n;
}

/* Keeps n bytes the program wrote on stream idx. */
static void keep(struct bg *b, int idx, const unsigned char *d, size_t n)
{
	struct bg_out *o = &b->o[idx];
	o->s.bytes += n;
	if (o->s.file_fd < 0 && !o->s.file_errno && !o->s.file_len && o->len + n > b->cap) {
		char path[4200];
		snprintf(path, sizeof path, "%s.%s", b->prefix, idx ? "stderr" : "stdout");
		errno = ENOENT;
		o->s.file_fd = b->prefix[0] ? create_fresh(path, 0644) : -1;
		if (o->s.file_fd < 0) {
			o->s.file_errno = errno ? errno : EIO;
		} else {
			o->file_start = o->from;
			file_write(b, o, o->buf, o->len);
		}
	}
	file_write(b, o, d, n);
	size_t room = o->len < b->cap ? (size_t)(b->cap - o->len) : 0, take = n < room ? n : room;
	if (!take)
		return;
	if (!o->buf && !(o->buf = malloc(b->cap)))
		return;
	memcpy(o->buf + o->len, d, take);
	o->len += take;
}

static void pump(struct bg *b, int idx)
{
	static unsigned char buf[65536];
	struct bg_out *o = &b->o[idx];
	ssize_t r = read(o->s.fd, buf, sizeof buf);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		close(o->s.fd);
		o->s.fd = -1;
		return;
	}
	keep(b, idx, buf, (size_t)r);
}

uint32_t bg_adopt(pid_t pid, int in_fd, const struct bg_stream s[2], uint64_t started_ns, uint64_t cap,
		  uint64_t spill_max, const char *prefix, uint64_t timeout_ms, const char *label)
{
	struct bg *b = NULL;
	for (unsigned i = 0; i < SLOTS && !b; i++)
		if (!slots[i].id)
			b = &slots[i];
	if (!b) {
		/* Room for an ended one's slot: the oldest ended goes. */
		struct bg *old = NULL;
		for (unsigned i = 0; i < SLOTS; i++)
			if (!slots[i].running && (!old || slots[i].ended_seq < old->ended_seq))
				old = &slots[i];
		if (!old)
			return 0;
		forget(old);
		b = old;
	}
	memset(b, 0, sizeof *b);
	b->id = next_id++;
	b->pid = pid;
	b->running = 1;
	b->in_fd = in_fd;
	b->started_ns = started_ns;
	b->cap = cap < KEEP_MAX ? cap : KEEP_MAX;
	b->spill_max = spill_max;
	/* Its life counts from its start, the call's, not from now. */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME_COARSE, &rt);
	int64_t since = ((int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - (int64_t)started_ns) / 1000000;
	b->start_ms = mono_ms() - (since > 0 ? (long)since : 0);
	b->deadline_ms = timeout_ms > (uint64_t)1 << 40 ? 0 : mono_ms() + (long)timeout_ms;
	snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
	snprintf(b->label, sizeof b->label, "%s", label);
	for (int i = 0; i < 2; i++) {
		b->o[i].s = s[i];
		b->o[i].from = s[i].bytes;
		b->o[i].file_start = 0;
	}
	return b->id;
}

unsigned bg_live(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < SLOTS; i++)
		n += slots[i].id && slots[i].running;
	return n;
}

void bg_channel(int fd)
{
	if (chan >= 0)
		close(chan);
	chan = fd;
}

int bg_watch(struct pollfd *p, int max)
{
	int n = 0;
	if (chan >= 0 && n < max)
		p[n++] = (struct pollfd){chan, POLLIN, 0};
	for (unsigned i = 0; i < SLOTS; i++)
		for (int k = 0; k < 2 && slots[i].id; k++)
			if (slots[i].o[k].s.fd >= 0 && n < max)
				p[n++] = (struct pollfd){slots[i].o[k].s.fd, POLLIN, 0};
	return n;
}

/* The ended ones past AG_BG_ENDED go, oldest first. */
static void trim_ended(void)
{
	for (;;) {
		unsigned n = 0;
		struct bg *old = NULL;
		for (unsigned i = 0; i < SLOTS; i++) {
			if (!slots[i].id || slots[i].running)
				continue;
			n++;
			if (!old || slots[i].ended_seq < old->ended_seq)
				old = &slots[i];
		}
		if (n <= AG_BG_ENDED)
			return;
		forget(old);
	}
}

static void ended(struct bg *b, int status)
{
	b->running = 0;
	b->status = status;
	b->end_ms = mono_ms();
	b->ended_seq = ++ended_seq;
	/* What it left in its session goes with it. */
	kill_session(b->pid);
	b->pid = 0;
	unswept = 1;
	trim_ended();
}

int bg_reaped(pid_t p, int status)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].id && slots[i].running && slots[i].pid == p) {
			ended(&slots[i], status);
			return 1;
		}
	return 0;
}

int bg_spared(pid_t sid)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].id && slots[i].running && slots[i].pid == sid)
			return 1;
	return 0;
}

int bg_next_ms(void)
{
	long now = mono_ms(), best = -1;
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].id && slots[i].running && slots[i].deadline_ms) {
			long left = slots[i].deadline_ms - now;
			if (left < 0)
				left = 0;
			if (best < 0 || left < best)
				best = left;
		}
	return best > 1000000 ? 1000000 : (int)best;
}

void bg_expire(void)
{
	long now = mono_ms();
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].id && slots[i].running && slots[i].deadline_ms && now >= slots[i].deadline_ms) {
			slots[i].timed_out = 1;
			kill_session(slots[i].pid); /* its leader is reaped through SIGCHLD */
			slots[i].deadline_ms = 0;
		}
}

int bg_take_ended(void)
{
	int u = unswept;
	unswept = 0;
	return u;
}

void bg_end_all(void)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (slots[i].id) {
			if (slots[i].running)
				kill_session(slots[i].pid);
			forget(&slots[i]);
		}
}

/* ------------------------------------------------------------ the channel */

static void chan_send(void)
{
	if (ag_frame_end(&cout) == 0 && chan >= 0 && ag_write_full(chan, cout.p, cout.len) < 0) {
		close(chan);
		chan = -1;
	}
}

static void chan_simple(uint8_t type, const char *text)
{
	ag_frame_begin(&cout, type);
	if (text)
		ag_put(&cout, text, strlen(text));
	chan_send();
}

static struct bg *find(uint32_t id)
{
	for (unsigned i = 0; i < SLOTS && id; i++)
		if (slots[i].id == id)
			return &slots[i];
	return NULL;
}

static void put_entry(struct bg *b, int with_data)
{
	uint32_t flags = (b->running ? AG_BG_RUNNING : 0) | (b->timed_out ? AG_BG_TIMED_OUT : 0) |
			 (b->in_fd < 0 ? AG_BG_INPUT_CLOSED : 0);
	for (int i = 0; i < 2; i++) {
		if (b->o[i].s.file_fd >= 0 || b->o[i].s.file_len)
			flags |= i ? AG_BG_FILE_ERR : AG_BG_FILE_OUT;
		if (b->o[i].s.cut)
			flags |= AG_BG_CUT;
	}
	long end = b->running ? mono_ms() : b->end_ms;
	ag_put_u32(&cout, b->id);
	ag_put_u32(&cout, flags);
	ag_put_u32(&cout, (uint32_t)b->status);
	ag_put_u64(&cout, b->started_ns);
	ag_put_u64(&cout, (uint64_t)(end - b->start_ms));
	ag_put_str(&cout, b->label, strlen(b->label));
	ag_put_str(&cout, b->prefix, strlen(b->prefix));
	for (int i = 0; i < 2; i++) {
		struct bg_out *o = &b->o[i];
		ag_put_u64(&cout, o->s.bytes);
		ag_put_u64(&cout, o->from);
		ag_put_u64(&cout, o->file_start);
		ag_put_u32(&cout, (uint32_t)o->s.file_errno);
		ag_put_str(&cout, with_data ? (const char *)o->buf : "", with_data ? o->len : 0);
		if (with_data) {
			o->from = o->s.bytes;
			o->len = 0;
		}
	}
}

static void do_read(struct ag_cur *c)
{
	struct bg *b = find(ag_get_u32(c));
	if (c->bad || !b) {
		chan_simple(AG_ERR, "no such background process");
		return;
	}
	/* What is already in its pipes belongs to this read. */
	for (int i = 0; i < 2; i++) {
		struct pollfd p = {b->o[i].s.fd, POLLIN, 0};
		for (int k = 0; k < 64 && b->o[i].s.fd >= 0 && poll(&p, 1, 0) > 0; k++)
			pump(b, i);
	}
	ag_frame_begin(&cout, AG_BG_INFO);
	ag_put_u32(&cout, 1);
	put_entry(b, 1);
	chan_send();
	if (!b->running)
		forget(b);
}

static void do_input(struct ag_cur *c)
{
	struct bg *b = find(ag_get_u32(c));
	uint32_t close_it = ag_get_u32(c);
	if (c->bad || !b) {
		chan_simple(AG_ERR, "no such background process");
		return;
	}
	if (b->in_fd < 0 && (c->left || !close_it)) {
		chan_simple(AG_ERR, b->running ? "its input is closed" : "it has ended");
		return;
	}
	size_t done = 0;
	while (done < c->left) {
		ssize_t w = write(b->in_fd, c->p + done, c->left - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* EAGAIN: it does not read; EPIPE: it closed its end */
		done += (size_t)w;
	}
	if (close_it && b->in_fd >= 0) {
		close(b->in_fd);
		b->in_fd = -1;
	}
	ag_frame_begin(&cout, AG_OK);
	ag_put_u32(&cout, (uint32_t)done);
	chan_send();
}

static void do_signal(struct ag_cur *c)
{
	struct bg *b = find(ag_get_u32(c));
	uint32_t sig = ag_get_u32(c);
	if (c->bad || !b || sig == 0 || sig >= 32) {
		chan_simple(AG_ERR, b || c->bad ? "bad signal" : "no such background process");
		return;
	}
	if (!b->running) {
		chan_simple(AG_ERR, "it has ended");
		return;
	}
	if (kill(-b->pid, (int)sig) < 0 && kill(b->pid, (int)sig) < 0) {
		char m[200];
		snprintf(m, sizeof m, "signal: %s", strerror(errno));
		chan_simple(AG_ERR, m);
		return;
	}
	ag_frame_begin(&cout, AG_OK);
	chan_send();
}

/* One request of the channel: read whole, answered at once. */
static void chan_frame(void)
{
	static unsigned char *buf;
	unsigned char hdr[4];
	if (ag_read_full(chan, hdr, 4) <= 0)
		goto gone;
	uint32_t n = ag_le32(hdr);
	if (n == 0 || n > AG_MAX_FRAME)
		goto gone;
	free(buf);
	buf = malloc(n);
	if (!buf || ag_read_full(chan, buf, n) <= 0)
		goto gone;
	struct ag_cur c = {buf + 1, n - 1, 0};
	switch (buf[0]) {
	case AG_BG_LIST: {
		ag_frame_begin(&cout, AG_BG_INFO);
		uint32_t cnt = 0;
		for (unsigned i = 0; i < SLOTS; i++)
			cnt += slots[i].id != 0;
		ag_put_u32(&cout, cnt);
		for (unsigned i = 0; i < SLOTS; i++)
			if (slots[i].id)
				put_entry(&slots[i], 0);
		chan_send();
		break;
	}
	case AG_BG_READ:
		do_read(&c);
		break;
	case AG_BG_INPUT:
		do_input(&c);
		break;
	case AG_BG_SIGNAL:
		do_signal(&c);
		break;
	default:
		chan_simple(AG_ERR, "unknown frame");
	}
	return;
gone:
	close(chan);
	chan = -1;
}

void bg_ready(const struct pollfd *p, int n)
{
	for (int k = 0; k < n; k++) {
		if (!p[k].revents)
			continue;
		if (p[k].fd == chan) {
			chan_frame();
			continue;
		}
		for (unsigned i = 0; i < SLOTS; i++)
			for (int s = 0; s < 2 && slots[i].id; s++)
				if (slots[i].o[s].s.fd == p[k].fd)
					pump(&slots[i], s);
	}
}
