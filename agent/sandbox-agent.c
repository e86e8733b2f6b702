/*
 * sandbox-agent: the process starter inside a sandbox.
 *
 * It runs as PID 1 of the sandbox's PID namespace (the local sandbox's, or a container's),
 * as the sandbox's unprivileged user, and serves one server over one stream socket (see
 * proto.h). For each call it forks the program with a clean environment, only fds 0-2 and
 * the call's rlimits, streams stdout and stderr back as they come, and when the program ends,
 * or the server says kill, it kills every other process of the namespace: being PID 1,
 * kill(-1, SIGKILL) reaches all of them, setsid daemons included, and orphans are reparented
 * to it, so waiting until ECHILD proves nothing of the call is left.
 *
 * The agent is static and uses nothing but libc so that the same binary runs in any sandbox
 * (mounted read-only into containers). It never installs signal handlers: all signals are
 * blocked and SIGCHLD is read through a signalfd, so code in the sandbox cannot disturb it,
 * and it is not dumpable, so code running as the same user cannot ptrace it or read its memory.
 *
 * Usage: sandbox-agent --fd N           serve the socket N, exit when it closes
 *        sandbox-agent --connect PATH   connect to the server's unix socket PATH and serve that
 *                                       connection until it closes
 *        sandbox-agent --stdio          serve the server's frames on stdin, answer on stdout
 *                                       (a container's attached stdio, where the server is on
 *                                       another file system than the engine), until stdin ends
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define CHUNK 65536
/* The most a call's end spends walking its outputs folder for AG_OUTPUTS (outputs_frame). */
#define OUTPUTS_WALK_MS 500

struct stream {
	int fd;                 /* read end of the pipe, -1 when closed */
	uint64_t bytes;         /* everything read so far */
	unsigned char *head;    /* first `cap` bytes, kept until a spill file is needed */
	size_t head_len;
	int spill_fd;           /* -1 until the stream passes the cap */
	uint64_t spilled;       /* bytes written to the spill file */
	int spill_errno;        /* why the spill file could not be written; 0 when it could */
	int spill_cut;
};

struct call {
	pid_t pid;              /* 0 when no call runs */
	int status, reaped, killed, exec_fail, prestarted, kept_code;
	int looked, early;      /* its interpreter said it exits: looked at; it was past its code */
	uint64_t started_ns;    /* CLOCK_REALTIME_COARSE just before the fork */
	uint64_t cap, spill_max;
	char spill_prefix[4096];
	struct stream s[2];
	/* AG_RUN_OUTPUTS: what comes with the call's end (proto.h's AG_OUTPUTS); out_dir "": none */
	char out_dir[4096];
	uint32_t out_max, out_files;
	uint64_t file_max;
	/* a background call (AG_RUN_BACKGROUND) */
	int bg, in_w;           /* in_w: its stdin's write end, -1 when none */
	long detach_ms;         /* monotonic: when it becomes a background process */
	uint64_t bg_timeout_ms;
	char label[256];
};

static int ctl = -1;
static int ctl_out = -1; /* where frames go: ctl, or stdout's copy with --stdio */
static int sigfd = -1;
static int filter_installed;
/* No call yet: every fd "none" (-1), never 0. */
static struct call call = {.s = {{.fd = -1, .spill_fd = -1}, {.fd = -1, .spill_fd = -1}}, .in_w = -1};
/* The end of a call spared background processes' sessions: what they left may still run, so
 * no prestarted interpreter is started until a call's end kills everything again. */
static int spared;
static int passed_fd = -1;    /* an fd that came with the frame being read (AG_CHANNEL) */
static bool on_stdio;         /* the link is stdin and stdout (--stdio) */
static bool muxed;            /* ... in chunks since AG_MUX (mux.c) */
static int mux_chan = -1;     /* the channel's stream until AG_CHANNEL takes it */
/* A call's interpreter answered for as it exited (AG_EXIT_EARLY), not reaped yet; 0 when none.
 * It runs nothing more, but it is waited for before anything else starts. */
static pid_t exiting;
/* The relay (relay_start): its listening socket on relay_port, -1 when none, and its process,
 * 0 when none; it hands connections over to the proxy's socket relay_path. */
static int relay_ls = -1;
static pid_t relay_pid;
static uint16_t relay_port;
static char relay_path[sizeof ((struct sockaddr_un *)0)->sun_path];
static bool relay_take; /* AG_RUN_RELAY_TAKE: relay_path names the takers' socket, relay_tl */
static int relay_tl = -1;
struct ag_buf out;
static unsigned tmp_seq;

static void die(const char *what)
{
	dprintf(2, "sandbox-agent: %s: %s\n", what, strerror(errno));
	_exit(1);
}

/* Sending fails only when the server is gone; the caller's loop notices on its next read. */
void send_frame(void)
{
	if (ag_frame_end(&out) == 0)
		(void)ag_write_full(ctl_out, out.p, out.len);
}

void send_simple(uint8_t type, const char *text)
{
	ag_frame_begin(&out, type);
	if (text)
		ag_put(&out, text, strlen(text));
	send_frame();
}

void send_errno(const char *what, int err)
{
	char msg[512];
	snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
	send_simple(AG_ERR, msg);
}

/*
 * Opens the folder that is to hold path (absolute), walking down from / one name at a time
 * without following a symlink and making the folders that are missing (mode 0755): code can
 * plant a symlink anywhere in the workspace, and a file put there must never land outside the
 * folder its path names. Returns an O_PATH fd of the folder and points *base at the last name;
 * -1 with errno set (ELOOP: a name on the way is a symlink; ENOTDIR: it is not a folder).
 * With create 0 nothing is made: a missing folder is ENOENT.
 */
static int open_parent(const char *path, const char **base, int create)
{
	/* The agent's root, opened once: the agent never changes it, and each call's listing of its
	 * outputs starts here (two system calls less on a call's way). Close-on-exec: no call's
	 * program holds it. */
	static int root = -1;
	if (root < 0)
		root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -1;
	char tmp[4096];
	size_t n = strlen(path);
	if (path[0] != '/' || n >= sizeof tmp) {
		errno = n >= sizeof tmp ? ENAMETOOLONG : EINVAL;
		return -1;
	}
	memcpy(tmp, path, n + 1);
	char *last = strrchr(tmp, '/');
	*base = path + (last - tmp) + 1;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, "..")) {
		errno = EISDIR;
		return -1;
	}
	*last = '\0';
	if (last == tmp)
		tmp[1] = '\0'; /* the parent is / itself */
	int dfd = root;
	for (char *s = tmp + 1, *next; dfd >= 0 && s && *s; s = next) {
		if ((next = strchr(s, '/')))
			*next++ = '\0';
		if (!*s || !strcmp(s, "."))
			continue;
		if (!strcmp(s, "..")) {
			if (dfd != root)
				close(dfd);
			errno = EINVAL;
			return -1;
		}
		int fd = openat(dfd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create && (mkdirat(dfd, s, 0755) == 0 || errno == EEXIST))
			fd = openat(dfd, s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 && errno == ENOTDIR && fstatat(dfd, s, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			errno = ELOOP; /* O_PATH opened the link itself, which is no folder */
		int err = errno;
		if (dfd != root)
			close(dfd);
		errno = err;
		dfd = fd;
	}
	/* The caller closes what it gets: the root itself, as a copy. */
	return dfd == root ? fcntl(root, F_DUPFD_CLOEXEC, 0) : dfd;
}

/*
 * Creates path anew, as a fresh file renamed over whatever is there: a FIFO, a symlink or a
 * file the code planted is replaced, never opened (opening a FIFO for writing would block until
 * someone reads it), and no symlink on the way is followed (open_parent). Returns the open fd
 * (write-only), or -1 with errno set.
 */
int create_fresh(const char *path, unsigned mode)
{
	const char *base;
	char tmp[300];
	int n = snprintf(tmp, sizeof tmp, ".sandbox-agent-%u-%u.tmp", (unsigned)getpid(), tmp_seq++);
	if (n < 0 || (size_t)n >= sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int dfd = open_parent(path, &base, 1);
	if (dfd < 0)
		return -1;
	/* Permission bits alone: nothing written into the workspace, a host folder, is set-id. */
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode & 0777);
	if (fd >= 0 && (fchmod(fd, mode & 0777) < 0 || renameat(dfd, tmp, dfd, base) < 0)) {
		int err = errno;
		close(fd);
		unlinkat(dfd, tmp, 0);
		errno = err;
		fd = -1;
	}
	int err = errno;
	close(dfd);
	errno = err;
	return fd;
}

/* Why a put failed, in words a user can act on. */
static void send_put_errno(const char *path, int err)
{
	char msg[512];
	if (err == ELOOP)
		snprintf(msg, sizeof msg, "%.400s: a name on its way is a symlink, which is not followed", path);
	else if (err == ENOTDIR)
		snprintf(msg, sizeof msg, "%.400s: a name on its way is not a folder", path);
	else
		snprintf(msg, sizeof msg, "%.400s: %s", path, strerror(err));
	send_simple(AG_ERR, msg);
}

static int64_t ts_ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Copies a str field into buf (n bytes, terminated). 0, or -1 when it does not fit. */
int get_str(struct ag_cur *c, char *buf, size_t n)
{
	size_t len;
	const char *s = ag_get_str(c, &len);
	if (c->bad || len >= n || memchr(s, 0, len))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

/*
 * Creates a temporary file beside path (in the folder open_parent opens, made as needed) and
 * writes data into it whole: the first half of a replacement (put_commit renames it over
 * path). *dfd gets the folder (O_PATH), tmp the temporary name. 0, or -1 with errno set and
 * nothing left behind (*dfd -1).
 */
static int put_stage(const char *path, unsigned mode, const void *data, size_t len, int *dfd, const char **base,
		     char *tmp, size_t tmpn)
{
	int fd, err, n = snprintf(tmp, tmpn, ".sandbox-agent-%u-%u.tmp", (unsigned)getpid(), tmp_seq++);
	if (n < 0 || (size_t)n >= tmpn) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((*dfd = open_parent(path, base, 1)) < 0)
		return -1;
	struct stat st;
	/* rename() cannot put a file over a folder: found now, before anything is replaced. */
	if (fstatat(*dfd, *base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
		errno = EISDIR;
		goto fail_dir;
	}
	fd = openat(*dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode & 0777);
	if (fd < 0)
		goto fail_dir;
	int bad = fchmod(fd, mode & 0777) < 0 || ag_write_full(fd, data, len) < 0;
	err = errno;
	/* close() reports what a delayed write could not store (NFS, quotas): checked too. */
	if (close(fd) < 0 && !bad) {
		bad = 1;
		err = errno;
	}
	if (!bad)
		return 0;
	unlinkat(*dfd, tmp, 0);
	errno = err;
fail_dir:
	err = errno;
	close(*dfd);
	*dfd = -1;
	errno = err;
	return -1;
}

/* How much of the folder that holds path exists now: the length of its longest leading part
 * of whole names that opens as a folder, following no symlink. What a put makes lies past it. */
static size_t existing_part(const char *path)
{
	char tmp[4096];
	const char *base;
	size_t n = strlen(path);
	if (n >= sizeof tmp)
		return n;
	memcpy(tmp, path, n + 1);
	for (char *slash; (slash = strrchr(tmp, '/')) && slash != tmp; *slash = '\0') {
		int fd = open_parent(tmp, &base, 0);
		if (fd >= 0) {
			close(fd);
			return (size_t)(slash - tmp);
		}
		if (errno != ENOENT)
			break;
	}
	return n; /* nothing to undo */
}

/* Removes the folders of path's folder past its first `keep` bytes, deepest first, while they
 * are empty: what a failed put made on its way. */
static void unmake_folders(const char *path, size_t keep)
{
	char tmp[4096];
	const char *base;
	size_t n = strlen(path);
	if (n >= sizeof tmp)
		return;
	memcpy(tmp, path, n + 1);
	for (char *slash; (slash = strrchr(tmp, '/')) && (size_t)(slash - tmp) > keep;) {
		*slash = '\0';
		int dfd = open_parent(tmp, &base, 0);
		if (dfd < 0 || unlinkat(dfd, base, AT_REMOVEDIR) < 0) {
			if (dfd >= 0)
				close(dfd);
			return;
		}
		close(dfd);
	}
}

/*
 * AG_PUT: every file of the batch is written whole under a temporary name first, and only
 * when all of them are are they renamed into place; a batch that fails (a full disk: ENOSPC,
 * a folder in the way) removes its temporary files and the folders it made, and changes none
 * of the files it names.
 */
static void do_put(struct ag_cur *c)
{
	struct staged {
		uint32_t mode;
		const void *data;
		size_t len;
		char path[4096];
		const char *base;   /* in path */
		int dfd;            /* -1 until staged */
		char tmp[64];
		size_t existed;     /* existing_part of path before it was staged */
	} *v = NULL;
	uint32_t n = ag_get_u32(c), done = 0;
	int ok = 0;
	if (c->bad || n == 0 || n > AG_PUT_FILES || !(v = calloc(n, sizeof *v))) {
		send_simple(AG_ERR, c->bad || n == 0 || n > AG_PUT_FILES ? "bad PUT" : "writing files: out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		v[i].dfd = -1, v[i].existed = (size_t)-1; /* not staged: nothing to undo */
	for (uint32_t i = 0; i < n; i++) {
		v[i].mode = ag_get_u32(c);
		if (get_str(c, v[i].path, sizeof v[i].path) < 0 || !v[i].path[0]) {
			send_simple(AG_ERR, "bad PUT");
			goto out;
		}
		size_t dl;
		v[i].data = ag_get_str(c, &dl);
		v[i].len = dl;
		if (c->bad) {
			send_simple(AG_ERR, "bad PUT");
			goto out;
		}
	}
	for (; done < n; done++) {
		struct staged *s = &v[done];
		s->existed = existing_part(s->path);
		if (put_stage(s->path, s->mode, s->data, s->len, &s->dfd, &s->base, s->tmp, sizeof s->tmp) < 0) {
			send_put_errno(s->path, errno);
			goto out;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		if (renameat(v[i].dfd, v[i].tmp, v[i].dfd, v[i].base) < 0) {
			/* Not expected once every file is written and no folder is in the way. */
			send_put_errno(v[i].path, errno);
			goto out;
		}
		v[i].tmp[0] = '\0';
	}
	ok = 1;
	send_simple(AG_OK, NULL);
out:
	for (uint32_t i = 0; i < n; i++) {
		if (v[i].dfd < 0)
			continue;
		if (v[i].tmp[0])
			unlinkat(v[i].dfd, v[i].tmp, 0);
		close(v[i].dfd);
	}
	/* Deepest last-made first: a folder two files of the batch share is empty only then. */
	for (uint32_t i = done + 1; !ok && i-- > 0;)
		if (i < n && v[i].existed < strlen(v[i].path))
			unmake_folders(v[i].path, v[i].existed);
	free(v);
}

/*
 * AG_LIST: walks dir depth first with one open folder per level, following no symlink (a
 * symlink is listed as what it is), and lists every name that is not a folder. Between calls
 * only: nothing else in the sandbox runs, but the code may have left any shape behind (a chain
 * thousands of folders deep, a FIFO), so depth, count and size are bounded and nothing is
 * opened but folders.
 */
struct walk {
	DIR *stack[AG_LIST_DEPTH];
	size_t plen[AG_LIST_DEPTH]; /* length of rel while in that folder */
	char rel[4096];             /* the current name, relative to the listed folder */
	int depth;
	uint32_t max, count, visited, flags;
	char skip[256];             /* a name at the top left out, "" for none */
	int64_t until_ns;           /* CLOCK_MONOTONIC past which the walk stops (0: none) */
	int watch;                  /* each folder walked is watched (watch.c) */
	int late;                   /* it stopped so: the listing is not whole */
};

static void walk_close(struct walk *w)
{
	while (w->depth >= 0)
		closedir(w->stack[w->depth--]);
}

/* Into the folder name (of the current one): 0, or -1 when it is not walked (too deep, or it
 * cannot be opened; the list says so). */
static int walk_enter(struct walk *w, const char *name, size_t rel_len)
{
	if (w->depth + 1 >= AG_LIST_DEPTH) {
		w->flags |= AG_LIST_SKIPPED;
		return -1;
	}
	int cfd = openat(dirfd(w->stack[w->depth]), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *cd = cfd < 0 ? NULL : fdopendir(cfd);
	if (!cd) {
		if (cfd >= 0)
			close(cfd);
		w->flags |= AG_LIST_SKIPPED;
		return -1;
	}
	w->stack[++w->depth] = cd;
	w->plen[w->depth] = rel_len;
	if (w->watch)
		watch_folder(cfd, 0);
	return 0;
}

/* One name of the current folder: walked into, listed, or the end of the walk (1). */
static int walk_name(struct walk *w, const char *name)
{
	if (++w->visited > AG_LIST_VISIT) {
		/* A tree of many folders and few files: stop in good time, not at the server's
		 * patience, which would take the sandbox for dead. */
		w->flags |= AG_LIST_TRUNCATED;
		return 1;
	}
	if (w->until_ns && w->visited % 256 == 0) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (ts_ns(now) >= w->until_ns) {
			w->late = 1;
			return 1;
		}
	}
	size_t nl = strlen(name), at = w->plen[w->depth];
	if (at + nl + 2 >= sizeof w->rel) {
		w->flags |= AG_LIST_SKIPPED;
		return 0;
	}
	if (at)
		w->rel[at++] = '/';
	memcpy(w->rel + at, name, nl + 1);
	struct stat st;
	if (fstatat(dirfd(w->stack[w->depth]), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone since readdir */
	if (S_ISDIR(st.st_mode)) {
		walk_enter(w, name, at + nl);
		return 0;
	}
	if (w->count >= w->max || out.len + at + nl + 64 > AG_LIST_BYTES) {
		w->flags |= AG_LIST_TRUNCATED;
		return 1;
	}
	ag_put_str(&out, w->rel, at + nl);
	ag_put_u64(&out, (uint64_t)st.st_size);
	ag_put_u64(&out, (uint64_t)ts_ns(st.st_mtim));
	ag_put_u64(&out, (uint64_t)ts_ns(st.st_ctim));
	ag_put_u32(&out, (uint32_t)st.st_mode);
	w->count++;
	return 0;
}

/* Walks the open folder fd (taken) into the answer. */
static void walk_all(struct walk *w, int fd)
{
	w->depth = 0;
	w->plen[0] = 0;
	if (!(w->stack[0] = fdopendir(fd))) {
		close(fd);
		w->flags |= AG_LIST_SKIPPED;
		return;
	}
	if (w->watch)
		watch_folder(fd, 1);
	while (w->depth >= 0) {
		errno = 0;
		struct dirent *d = readdir(w->stack[w->depth]);
		if (!d) {
			if (errno)
				w->flags |= AG_LIST_SKIPPED;
			closedir(w->stack[w->depth--]);
		} else if (strcmp(d->d_name, ".") && strcmp(d->d_name, "..") &&
			   (w->depth || strcmp(d->d_name, w->skip)) && walk_name(w, d->d_name)) {
			walk_close(w);
		}
	}
}

/* Appends AG_ENTRIES' payload for path (at most max names, skip left out at the top) to the
 * frame under way. until_ns not 0: a walk still under way then stops, and -1 is returned (the
 * payload is not whole); else 0. watch: the folders walked are watched from now on. */
static int list_into(const char *path, uint32_t max, const char *skip, int64_t until_ns, int watch)
{
	static struct walk w;
	memset(&w, 0, sizeof w);
	w.max = max;
	w.until_ns = until_ns;
	w.watch = watch;
	if (watch)
		watch_begin(skip);
	snprintf(w.skip, sizeof w.skip, "%s", skip);
	size_t at = out.len;
	ag_put_u32(&out, 0); /* flags, filled in below */
	ag_put_u32(&out, 0); /* count */
	const char *base;
	int pfd = open_parent(path, &base, 0);
	int fd = pfd < 0 ? -1 : openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd >= 0)
		close(pfd);
	/* Nothing there (or not a folder): an empty list, as for an empty folder. */
	if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
		w.flags |= AG_LIST_SKIPPED;
	if (fd >= 0)
		walk_all(&w, fd);
	if (out.oom)
		return 0;
	for (int i = 0; i < 4; i++) {
		out.p[at + i] = (unsigned char)(w.flags >> (8 * i));
		out.p[at + 4 + i] = (unsigned char)(w.count >> (8 * i));
	}
	return w.late ? -1 : 0;
}

/* AG_LIST, and AG_WATCH (watch: 1). */
static void do_list(struct ag_cur *c, int watch)
{
	char path[4096], skip[256];
	uint32_t max = ag_get_u32(c);
	if (get_str(c, path, sizeof path) < 0 || !path[0] || get_str(c, skip, sizeof skip) < 0) {
		send_simple(AG_ERR, "bad LIST");
		return;
	}
	if (call.pid) {
		send_simple(AG_ERR, "a call is running");
		return;
	}
	ag_frame_begin(&out, AG_ENTRIES);
	list_into(path, max, skip, 0, watch);
	if (out.oom) {
		send_errno("listing", ENOMEM);
		return;
	}
	send_frame();
}

/* AG_GET: reads the first max bytes of a regular file, following no symlink and opening
 * nothing that could block (a FIFO is only stat'ed). */
/* Appends AG_DATA's payload for path's first max bytes to the frame under way; with_len: the
 * bytes as a str (their length first). */
static void get_into(const char *path, uint64_t max, int with_len)
{
	int err = 0, fd = -1;
	struct stat st = {0};
	const char *base;
	int dfd = open_parent(path, &base, 0);
	if (dfd < 0)
		err = errno;
	else if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		err = errno;
	else if (S_ISLNK(st.st_mode))
		err = ELOOP;
	else if (S_ISREG(st.st_mode)) {
		fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0)
			err = errno;
		else if (!S_ISREG(st.st_mode)) {
			close(fd); /* swapped since the stat: say what it is now, read nothing */
			fd = -1;
		}
	}
	if (dfd >= 0)
		close(dfd);
	ag_put_u32(&out, (uint32_t)err);
	ag_put_u32(&out, err ? 0 : (uint32_t)st.st_mode);
	ag_put_u64(&out, err ? 0 : (uint64_t)st.st_size);
	size_t len_at = out.len;
	if (with_len)
		ag_put_u32(&out, 0);
	if (fd >= 0) {
		uint64_t want = (uint64_t)st.st_size < max ? (uint64_t)st.st_size : max;
		size_t at = out.len;
		ag_put(&out, NULL, (size_t)want); /* room, filled by read */
		size_t got = 0;
		while (!out.oom && got < want) {
			ssize_t r = read(fd, out.p + at + got, (size_t)(want - got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break; /* shrank meanwhile: send what there is */
			got += (size_t)r;
		}
		if (!out.oom)
			out.len = at + got;
		close(fd);
		if (with_len && !out.oom)
			for (int i = 0; i < 4; i++)
				out.p[len_at + i] = (unsigned char)((uint32_t)got >> (8 * i));
	}
}

/* AG_GET: reads the first max bytes of a regular file, following no symlink and opening
 * nothing that could block (a FIFO is only stat'ed). */
static void do_get(struct ag_cur *c)
{
	uint64_t max = ag_get_u64(c);
	size_t n;
	const char *p = ag_get_str(c, &n);
	char path[4096];
	if (c->bad || n == 0 || n >= sizeof path || memchr(p, 0, n) || max > AG_MAX_FRAME - 64) {
		send_simple(AG_ERR, "bad GET");
		return;
	}
	if (call.pid) {
		send_simple(AG_ERR, "a call is running");
		return;
	}
	memcpy(path, p, n);
	path[n] = '\0';
	ag_frame_begin(&out, AG_DATA);
	get_into(path, max, 0);
	if (out.oom) {
		send_errno("reading", ENOMEM);
		return;
	}
	send_frame();
}

/* One listed name that may come with the call's end: where its name is in the frame. */
struct pick {
	const char *name;
	uint32_t len;
};

static int by_name(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;
	int c = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* AG_OUTPUTS (proto.h), the call's processes gone: the listing of out_dir, then the first
 * out_files (by name) of the names there the call may have changed, but regular files over
 * file_max, each read as AG_GET reads one (a symlink not followed, a FIFO only stat'ed). None
 * when memory runs out, it passes a frame's bound, or the walk takes more than OUTPUTS_WALK_MS
 * (AG_EXIT must come within the server's patience for a call it kills, and a tree of 100k
 * folders takes seconds): the server then asks as without, with the patience of a request.
 * 1 with the frame whole in `out`, unsent (AG_EXIT goes in the same write), or 0 with `out`
 * empty. */
static int outputs_frame(void)
{
	static struct pick picks[AG_LIST_VISIT < 4096 ? AG_LIST_VISIT : 4096];
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ag_frame_begin(&out, AG_OUTPUTS);
	if (list_into(call.out_dir, call.out_max, "", ts_ns(t0) + OUTPUTS_WALK_MS * 1000000ll, 0) < 0 || out.oom)
		goto oom;
	struct ag_cur c = {out.p + 5, out.len - 5, 0};
	(void)ag_get_u32(&c);
	uint32_t n = ag_get_u32(&c), np = 0;
	for (uint32_t i = 0; i < n && !c.bad; i++) {
		size_t pl;
		const char *p = ag_get_str(&c, &pl);
		uint64_t size = ag_get_u64(&c);
		(void)ag_get_u64(&c);
		uint64_t ctime = ag_get_u64(&c);
		uint32_t mode = ag_get_u32(&c);
		if (!c.bad && (!S_ISREG(mode) || size <= call.file_max) && ctime >= call.started_ns &&
		    np < sizeof picks / sizeof *picks)
			picks[np++] = (struct pick){p, (uint32_t)pl};
	}
	qsort(picks, np, sizeof *picks, by_name);
	if (np > call.out_files)
		np = call.out_files;
	/* The names point into the frame, which grows (and may move): copied out one by one. */
	static char names[AG_OUTPUTS_FILES][4096];
	for (uint32_t i = 0; i < np; i++) {
		uint32_t l = picks[i].len < 4095 ? picks[i].len : 4095;
		memcpy(names[i], picks[i].name, l);
		names[i][l] = '\0';
	}
	ag_put_u32(&out, np);
	size_t dl = strlen(call.out_dir);
	for (uint32_t i = 0; i < np && !out.oom; i++) {
		char path[4096];
		size_t nl = strlen(names[i]);
		ag_put_str(&out, names[i], nl);
		if (dl + 1 + nl >= sizeof path) {
			/* A path AG_GET would refuse: said as too long, read by nothing. */
			ag_put_u32(&out, ENAMETOOLONG);
			ag_put_u32(&out, 0);
			ag_put_u64(&out, 0);
			ag_put_u32(&out, 0);
			continue;
		}
		memcpy(path, call.out_dir, dl);
		path[dl] = '/';
		memcpy(path + dl + 1, names[i], nl + 1);
		get_into(path, call.file_max, 1);
	}
	if (out.oom || ag_frame_end(&out) < 0)
		goto oom;
	return 1;
oom:
	/* Nothing, then: the server lists and reads as it would without. */
	out.len = 0;
	out.oom = 0;
	return 0;
}

static void do_filter(struct ag_cur *c)
{
	if (filter_installed) {
		send_simple(AG_OK, NULL);
		return;
	}
	if (c->left == 0 || c->left % sizeof(struct sock_filter) || c->left / sizeof(struct sock_filter) > 65535) {
		send_simple(AG_ERR, "bad FILTER");
		return;
	}
	/* The payload is not aligned for struct sock_filter; copy it. */
	struct sock_filter *f = malloc(c->left);
	if (!f) {
		send_errno("filter", ENOMEM);
		return;
	}
	memcpy(f, c->p, c->left);
	struct sock_fprog prog = {.len = (unsigned short)(c->left / sizeof *f), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
		int err = errno;
		free(f);
		send_errno("seccomp", err);
		return;
	}
	free(f);
	filter_installed = 1;
	send_simple(AG_OK, NULL);
}

/* The signals whose action the agent found other than the default as it started (ignored by
 * whatever started it); the agent changes none itself (it blocks them all and reads SIGCHLD
 * and SIGUSR1 through a signalfd), so these are the only ones a child must set back. */
static unsigned long long not_default; /* bit s - 1 for signal s: sigaddset refuses 32 and 33 */

/* The kernel's own struct sigaction (x86-64, arm64 and the generic layout): the C library's
 * sigaction refuses the signals it keeps for its threads (glibc's 32 and 33), yet a runtime may
 * leave them ignored, and an ignored signal crosses every exec. */
struct k_sigaction {
	unsigned long handler, flags, restorer, mask;
};

/* sig's handler as the kernel holds it (SIG_DFL 0, SIG_IGN 1, else a function): 0 or -1. */
static int raw_handler(int sig, unsigned long *h)
{
	struct k_sigaction old;
	if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof old.mask) < 0)
		return -1;
	*h = old.handler;
	return 0;
}

void note_signals(void)
{
	not_default = 0;
	for (int s = 1; s < NSIG && s <= 64; s++) {
		struct sigaction old;
		unsigned long h;
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		if (sigaction(s, NULL, &old) == 0 ? old.sa_handler != SIG_DFL : raw_handler(s, &h) == 0 && h != 0)
			not_default |= 1ull << (s - 1);
	}
}

/* Every signal back to its default action, none blocked: the code starts as if from a fresh
 * login, whatever the processes before it ignored (an ignored SIGPIPE would turn `yes | head -1`
 * into "Broken pipe" errors) or blocked. Only the ones note_signals found set otherwise need a
 * syscall: the rest are at their default in the agent already, so in its child. Writes nothing
 * but its own stack (a child that shares the agent's memory calls it). Async-signal-safe. */
void reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	struct k_sigaction dfl = {0, 0, 0, 0};
	for (int s = 1; s < NSIG && s <= 64; s++)
		if ((not_default >> (s - 1) & 1) && sigaction(s, &sa, NULL) < 0)
			syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask); /* the C library's own */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* ---------------------------------------------------------------- the relay */

/* Moves what `from` has (a read's worth) to `to`, through the pipe p in the kernel (splice),
 * or through buf when p[0] < 0: the count, 0 at the end of `from`, -1 when `to` takes no more,
 * -2 when the kernel cannot splice these two (nothing moved). */
static ssize_t relay_move(int from, int to, const int p[2], unsigned char *buf, size_t n)
{
	if (p[0] < 0) {
		ssize_t r;
		do
			r = read(from, buf, n);
		while (r < 0 && errno == EINTR);
		if (r <= 0)
			return 0;
		return ag_write_full(to, buf, (size_t)r) < 0 ? -1 : r;
	}
	ssize_t r;
	do
		r = splice(from, NULL, p[1], NULL, 4 * n, SPLICE_F_MOVE);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM))
		return -2;
	if (r <= 0)
		return 0;
	for (ssize_t left = r; left > 0;) {
		ssize_t w = splice(p[0], NULL, to, NULL, (size_t)left, SPLICE_F_MOVE);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		left -= w;
	}
	return r;
}

/* Copies both ways between a and b until both are done: in the kernel (a pipe a way, splice)
 * where it can, else through a buffer. */
static void relay_splice(int a, int b)
{
	static unsigned char buf[CHUNK];
	int pipes[2][2] = {{-1, -1}, {-1, -1}};
	for (int i = 0; i < 2; i++)
		if (pipe2(pipes[i], O_CLOEXEC) == 0)
			(void)fcntl(pipes[i][0], F_SETPIPE_SZ, 1 << 18); /* fewer, larger moves where allowed */
	int open_a = 1, open_b = 1;
	while (open_a || open_b) {
		struct pollfd p[2] = {{open_a ? a : -1, POLLIN, 0}, {open_b ? b : -1, POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			int from = i ? b : a, to = i ? a : b;
			ssize_t r = relay_move(from, to, pipes[i], buf, sizeof buf);
			if (r == -2) {
				close(pipes[i][0]);
				close(pipes[i][1]);
				pipes[i][0] = pipes[i][1] = -1;
				r = relay_move(from, to, pipes[i], buf, sizeof buf);
			}
			if (r == 0) {
				shutdown(to, SHUT_WR);
				if (i)
					open_b = 0;
				else
					open_a = 0;
			} else if (r < 0) {
				/* `to` takes no more (a proxy that refused the connection closed it): this
				 * way is done, and what `to` still has to say (the refusal) goes on. */
				shutdown(from, SHUT_RD);
				if (i)
					open_b = 0;
				else
					open_a = 0;
			}
		}
	}
}

/* Hands connection c over to the server's proxy on u: one byte 0 with c as SCM_RIGHTS
 * (backends/agenthost/proxy.h), so that the proxy serves the code's socket itself. 0 when
 * sent. */
static int hand_over(int u, int c)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	memset(&cm, 0, sizeof cm);
	char zero = 0;
	struct iovec iov = {&zero, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &c, sizeof c);
	ssize_t r;
	do
		r = sendmsg(u, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r == 1 ? 0 : -1;
}

/*
 * For the calls: a process that takes TCP connections on 127.0.0.1:port and hands each over to
 * the server's proxy on the unix socket path (hand_over), which then serves the code's socket
 * itself; where it cannot, a process per connection carries the bytes. The listening socket is made before the
 * call starts (relay_listen), so no connection of the call can come too early: it waits in
 * the backlog; the process is started once the call is (relay_start), so that a prestarted
 * interpreter finds itself alone when it takes the call. It is one more process of the
 * sandbox: it ends with the call, as they all do. Where a call's end spares background
 * processes, whose code may still connect, the agent, which keeps the listening socket, then
 * closes unread what waits in its backlog and starts a new relay on it (relay_renew): nothing
 * the call's code left, stopped or queued outlives the call's narrowing of the list, and the
 * calls after it use that relay. It holds no descriptor but its listener (close_all_but): no
 * pipe of a call or a background process stays open through it.
 */
static int relay_listen(uint16_t port)
{
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
	int one = 1;
	if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 64) < 0) {
		int err = errno;
		if (ls >= 0)
			close(ls);
		errno = err;
		return -1;
	}
	return ls;
}

/* Closes every descriptor from 3 up but keep (>= 3) and keep2 (>= 3, or -1). */
static void close_all_but(int keep, int keep2)
{
	int lo = keep2 >= 0 && keep2 < keep ? keep2 : keep, hi = keep2 >= 0 && keep2 > keep ? keep2 : keep;
#ifdef SYS_close_range
	if ((lo == 3 || syscall(SYS_close_range, 3u, (unsigned)lo - 1, 0u) == 0) &&
	    (hi <= lo + 1 || syscall(SYS_close_range, (unsigned)lo + 1, (unsigned)hi - 1, 0u) == 0) &&
	    syscall(SYS_close_range, (unsigned)hi + 1, ~0u, 0u) == 0)
		return;
#endif
	/* Without close_range (before Linux 5.9, or filtered): those /proc lists, read whole
	 * first, as closing while reading would change the list. */
	int fds[1024], n = 0, more = 1;
	while (more) {
		DIR *d = opendir("/proc/self/fd");
		if (!d) {
			for (int fd = 3; fd < 65536; fd++)
				if (fd != lo && fd != hi)
					close(fd);
			return;
		}
		int dfd = dirfd(d);
		struct dirent *e;
		n = 0;
		more = 0;
		while ((e = readdir(d))) {
			int fd = atoi(e->d_name);
			if (fd < 3 || fd == lo || fd == hi || fd == dfd || e->d_name[0] < '0' || e->d_name[0] > '9')
				continue;
			if (n == (int)(sizeof fds / sizeof fds[0])) {
				more = 1;
				break;
			}
			fds[n++] = fd;
		}
		closedir(d);
		for (int i = 0; i < n; i++)
			close(fds[i]);
	}
}

/* An abstract unix socket's address for name ("@" and its name, which the server draws anew
 * for each step): its length, or 0 when name is no such name. (The takers, the server's, are
 * Python from the sandbox's read-only root: backends/kubernetes/knet.c.) */
static socklen_t take_addr(const char *name, struct sockaddr_un *su)
{
	size_t n = strlen(name);
	memset(su, 0, sizeof *su);
	su->sun_family = AF_UNIX;
	if (n < 2 || name[0] != '@' || n > sizeof su->sun_path)
		return 0;
	memcpy(su->sun_path + 1, name + 1, n - 1);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
}

/* AG_RUN_RELAY_TAKE: the takers' listening socket, an abstract one of the sandbox's network
 * namespace: no file to leave behind or to have replaced, and out of reach of the code's
 * background processes, whose Landlock domain scopes abstract sockets. What a taker gets, the
 * code could reach itself (the relay's port). -1 with errno when it cannot be made. */
static int take_listen(const char *name)
{
	struct sockaddr_un su;
	socklen_t len = take_addr(name, &su);
	if (!len)
		return errno = EINVAL, -1;
	int t = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (t >= 0 && (bind(t, (struct sockaddr *)&su, len) < 0 || listen(t, 16) < 0)) {
		int err = errno;
		close(t);
		errno = err;
		t = -1;
	}
	return t;
}

/* Hands connection c to the next taker on the listener t that takes it (one whose connection
 * ended first is skipped); waits for one as long as it takes: meanwhile, later connections
 * wait in the backlog. */
static void give_to_taker(int t, int c)
{
	for (;;) {
		int k = accept4(t, NULL, NULL, SOCK_CLOEXEC);
		if (k < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				poll(NULL, 0, 100);
			else if (errno != EINTR && errno != ECONNABORTED)
				_exit(1);
			continue;
		}
		int sent = hand_over(k, c);
		close(k);
		if (sent == 0)
			return;
	}
}

/* Starts the relay's process on relay_ls: relay_pid (0 when fork failed). */
static void relay_start(void)
{
	pid_t pid = fork();
	if (pid != 0) {
		relay_pid = pid > 0 ? pid : 0;
		return;
	}
	int ls = relay_ls, tl = relay_tl;
	if (ls < 3) {
		int moved = fcntl(ls, F_DUPFD_CLOEXEC, 3);
		if (moved < 0)
			_exit(1);
		close(ls);
		ls = moved;
	}
	if (tl >= 0 && tl < 3) {
		int moved = fcntl(tl, F_DUPFD_CLOEXEC, 3);
		if (moved < 0)
			_exit(1);
		close(tl);
		tl = moved;
	}
	/* The link, wherever it is (a descriptor the agent was given may be below 3), and every
	 * other descriptor of the agent's. */
	if (ctl >= 0 && ctl < 3)
		close(ctl);
	if (ctl_out >= 0 && ctl_out < 3)
		close(ctl_out);
	close_all_but(ls, tl);
	signal(SIGCHLD, SIG_IGN); /* connection processes are reaped by the kernel */
	signal(SIGPIPE, SIG_IGN); /* a side that closed is a failed write, not the end of the other */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int takers = tl;
	for (;;) {
		/* The listener is non-blocking (the agent drains it): wait for a connection. */
		poll(&(struct pollfd){ls, POLLIN, 0}, 1, -1);
		int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN || errno == EWOULDBLOCK)
				continue;
			/* Out of descriptors or memory for now: the connection waits in the backlog. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				poll(NULL, 0, 100);
				continue;
			}
			_exit(1);
		}
		if (takers >= 0) {
			give_to_taker(takers, c);
			close(c);
			continue;
		}
		struct sockaddr_un su = {.sun_family = AF_UNIX};
		int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		snprintf(su.sun_path, sizeof su.sun_path, "%s", relay_path);
		bool up = u >= 0 && connect(u, (struct sockaddr *)&su, sizeof su) == 0;
		if (up && hand_over(u, c) < 0 && fork() == 0) {
			/* Not handed over (sendmsg refused): the bytes go through a process of ours. */
			close(ls);
			relay_splice(c, u);
			_exit(0);
		}
		close(c);
		if (u >= 0)
			close(u);
	}
}

/* Ends the relay's process, if it runs, and reaps it. */
static void relay_kill(void)
{
	if (relay_pid <= 0)
		return;
	kill(relay_pid, SIGKILL);
	while (waitpid(relay_pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	relay_pid = 0;
}

/* No relay: its process ends and its listeners close. */
static void relay_close(void)
{
	relay_kill();
	if (relay_tl >= 0)
		close(relay_tl);
	relay_tl = -1;
	if (relay_ls >= 0)
		close(relay_ls);
	relay_ls = -1;
}

/* After a call's end that spared background processes (its relay was killed with the rest):
 * what waits in the listener's backlog is closed unread, and a new relay serves what comes
 * next. */
static void relay_renew(void)
{
	if (relay_ls < 0)
		return;
	/* The install step's relay serves the step alone. */
	if (relay_take) {
		relay_close();
		return;
	}
	relay_kill();
	for (int c; (c = accept4(relay_ls, NULL, NULL, SOCK_CLOEXEC)) >= 0 || errno == EINTR || errno == ECONNABORTED;)
		if (c >= 0)
			close(c);
	relay_start();
}

void exec_path(const char *file, char *const argv[], char *const envp[])
{
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return;
	}
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	int saw_eacces = 0;
	char buf[4096];
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dl = (size_t)(end - p);
		if (dl + 1 + strlen(file) + 1 <= sizeof buf) {
			memcpy(buf, dl ? p : ".", dl ? dl : 1);
			size_t off = dl ? dl : 1;
			buf[off] = '/';
			strcpy(buf + off + 1, file);
			execve(buf, argv, envp);
			if (errno == EACCES)
				saw_eacces = 1;
		}
		if (!*end)
			break;
		p = end;
	}
	errno = saw_eacces ? EACCES : ENOENT;
}

static void stream_reset(struct stream *s, int fd)
{
	s->fd = fd;
	s->bytes = 0;
	s->head_len = 0;
	s->spill_fd = -1;
	s->spilled = 0;
	s->spill_errno = s->spill_cut = 0;
}

static void spill_write(struct stream *s, const void *d, size_t n)
{
	if (s->spill_fd < 0)
		return;
	if (s->spilled + n > call.spill_max) {
		n = (size_t)(call.spill_max - s->spilled);
		s->spill_cut = 1;
	}
	if (n && ag_write_full(s->spill_fd, d, n) < 0) {
		s->spill_errno = errno ? errno : EIO;
		close(s->spill_fd);
		s->spill_fd = -1;
		return;
	}
	s->spilled += n;
}

/* Keeps what the spill file needs: the head until the cap, then the file itself. */
static void stream_keep(int idx, const unsigned char *d, size_t n)
{
	struct stream *s = &call.s[idx];
	s->bytes += n;
	if (!call.spill_prefix[0])
		return;
	if (s->spill_fd < 0 && !s->spill_errno && s->bytes > call.cap) {
		char path[4200];
		snprintf(path, sizeof path, "%s.%s", call.spill_prefix, idx ? "stderr" : "stdout");
		s->spill_fd = create_fresh(path, 0644);
		if (s->spill_fd < 0) {
			s->spill_errno = errno ? errno : EIO;
		} else {
			spill_write(s, s->head, s->head_len);
			spill_write(s, d, n);
		}
		free(s->head);
		s->head = NULL;
		s->head_len = 0;
		return;
	}
	if (s->spill_fd >= 0) {
		spill_write(s, d, n);
		return;
	}
	if (s->spill_errno)
		return;
	if (!s->head) {
		s->head = malloc(call.cap ? call.cap : 1);
		if (!s->head) {
			s->spill_errno = ENOMEM;
			return;
		}
	}
	memcpy(s->head + s->head_len, d, n);
	s->head_len += n;
}

/* Reads what is there; returns -1 at EOF. */
static int stream_pump(int idx)
{
	static unsigned char buf[CHUNK];
	struct stream *s = &call.s[idx];
	ssize_t r = read(s->fd, buf, sizeof buf);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0) {
		close(s->fd);
		s->fd = -1;
		return -1;
	}
	ag_frame_begin(&out, AG_OUT);
	ag_put_u8(&out, (uint8_t)(idx + 1));
	ag_put(&out, buf, (size_t)r);
	send_frame();
	stream_keep(idx, buf, (size_t)r);
	return 0;
}

/* A child of ours was reaped: the call's program, or the prestarted interpreter. */
static void note_reaped(pid_t p, int st)
{
	if (p == exiting)
		exiting = 0;
	if (p == relay_pid)
		relay_pid = 0;
	if (p == call.pid && !call.reaped) {
		call.status = st;
		call.reaped = 1;
	}
	if (!bg_reaped(p, st))
		prestart_reaped(p, st);
}

/* Kills every process but those of the background processes' sessions, and reaps what of
 * them is ours, until none is left: a process killed cannot fork, so each round sees only what
 * the one before missed. 0, or -1 when they kept coming (then nothing was spared). */
static int kill_sparing(void)
{
	for (int round = 0; round < 500; round++) {
		int st, left = 0;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG | __WALL)) > 0)
			note_reaped(p, st);
		DIR *d = opendir("/proc");
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char *end, state = 0;
			pid_t ppid = 0;
			long q = strtol(e->d_name, &end, 10);
			if (*end || q <= 1)
				continue;
			pid_t sid = proc_session((pid_t)q, &state, &ppid);
			if (sid < 0 || bg_spared(sid))
				continue;
			/* A zombie waits for its parent: ours are reaped above, another's goes with it. */
			if (state == 'Z' && ppid != 1)
				continue;
			kill((pid_t)q, SIGKILL);
			left++;
		}
		if (!d)
			return -1;
		closedir(d);
		if (!left)
			return 0;
		poll(NULL, 0, 2);
	}
	return -1;
}

/* Kills every process of the namespace but us (and a prestarted interpreter that can be trusted
 * to have stayed apart from the code: it does the killing then; and, with spare, the
 * background processes' sessions) and reaps them all. */
static void kill_all_but(int spare)
{
	if (spare && bg_live()) {
		spared = 1;
		if (kill_sparing() == 0) {
			relay_renew();
			return;
		}
		bg_end_all();
	}
	if (!bg_live() && prestart_kill_others(note_reaped) == 0) {
		relay_close();
		return;
	}
	spared = 0;
	for (;;) {
		kill(-1, SIGKILL);
		int st;
		pid_t p = waitpid(-1, &st, __WALL);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: nothing is left */
		}
		note_reaped(p, st);
	}
	relay_close();
}

static void kill_all(void)
{
	kill_all_but(1);
}

/* The call's interpreter says it exits, its streams flushed (prestart.py): when the kernel
 * shows it past its code, and nothing else runs, the call is over, with the status the kernel
 * holds for it. Looked at once a call: code can send this signal too, early, and gains nothing. */
static void exit_said(pid_t from)
{
	int st;
	if (!call.pid || from != call.pid || !call.prestarted || call.reaped || call.looked || call.bg ||
	    bg_live() || spared)
		return;
	call.looked = 1;
	if (prestart_exited(call.pid, &st) == 0) {
		call.status = st;
		call.reaped = call.early = 1;
		exiting = call.pid;
	}
}

/* Reaps the interpreter of a call answered as it exited: it is past its code, so the wait is
 * the kernel's freeing of its memory. */
static void reap_exiting(void)
{
	int st;
	while (exiting > 0) {
		pid_t p = waitpid(exiting, &st, __WALL);
		if (p == exiting)
			note_reaped(p, st);
		else if (p < 0 && errno != EINTR)
			exiting = 0;
	}
}

static void reap(void)
{
	/* Several at a time: a read that does not fill the array has taken all there was, and the
	 * next would find none (one system call less on a call's way). */
	struct signalfd_siginfo si[8];
	for (;;) {
		ssize_t r = read(sigfd, si, sizeof si);
		if (r < (ssize_t)sizeof *si)
			break;
		for (size_t i = 0; i < (size_t)r / sizeof *si; i++)
			if (si[i].ssi_signo == SIGUSR1)
				exit_said((pid_t)si[i].ssi_pid);
		if ((size_t)r < sizeof si)
			break;
	}
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG | __WALL)) > 0)
		note_reaped(p, st);
}

static void finish_call(void)
{
	/* Answered as it exited: nothing else runs (prestart_exited), and it writes no more, but
	 * holds its pipes until the kernel has freed its memory. What it wrote is in them. */
	if (!call.early)
		kill_all();
	/* Every writer is dead now, so the pipes end: drain what is buffered. Bounded all the
	 * same: a write end that lives on elsewhere (sent over a socket) must not hold us. */
	for (int i = 0; i < 2; i++) {
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (call.s[i].fd >= 0) {
			struct pollfd pf = {call.s[i].fd, POLLIN, 0};
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			long left = 500 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
			if (left <= 0 || poll(&pf, 1, call.early ? 0 : (int)left) <= 0) {
				close(call.s[i].fd);
				call.s[i].fd = -1;
				break;
			}
			stream_pump(i);
		}
	}
	uint32_t flags = 0;
	if (call.killed)
		flags |= AG_EXIT_KILLED;
	if (call.exec_fail)
		flags |= AG_EXIT_EXEC_FAIL;
	if (call.prestarted)
		flags |= AG_EXIT_PRESTARTED;
	if (call.kept_code)
		flags |= AG_EXIT_KEPT_CODE;
	if (call.early)
		flags |= AG_EXIT_EARLY;
	for (int i = 0; i < 2; i++) {
		struct stream *s = &call.s[i];
		if (s->spill_fd >= 0) {
			if (close(s->spill_fd) < 0)
				s->spill_errno = errno ? errno : EIO;
			else
				flags |= i ? AG_EXIT_SPILL_ERR : AG_EXIT_SPILL_OUT;
			s->spill_fd = -1;
		}
		if (s->spill_cut)
			flags |= AG_EXIT_SPILL_CUT;
		free(s->head);
		s->head = NULL;
	}
	/* A killed call's end is awaited for a short while only: its listing is asked for after. */
	size_t at = call.out_dir[0] && !call.killed && outputs_frame() ? out.len : 0;
	call.out_dir[0] = '\0';
	/* AG_EXIT after AG_OUTPUTS in the same buffer, sent in one write: the server reads the
	 * call's end in one wake-up. */
	out.len = at;
	out.oom = 0;
	ag_put_u32(&out, 0);
	ag_put_u8(&out, AG_EXIT);
	ag_put_u32(&out, (uint32_t)call.status);
	ag_put_u32(&out, flags);
	ag_put_u64(&out, call.s[0].bytes);
	ag_put_u64(&out, call.s[1].bytes);
	ag_put_u32(&out, (uint32_t)call.s[0].spill_errno);
	ag_put_u32(&out, (uint32_t)call.s[1].spill_errno);
	ag_put_u64(&out, call.started_ns);
	if (!out.oom) {
		uint32_t n = (uint32_t)(out.len - at - 4);
		for (int i = 0; i < 4; i++)
			out.p[at + (size_t)i] = (unsigned char)(n >> (8 * i));
		(void)ag_write_full(ctl_out, out.p, out.len);
	} else if (at) {
		(void)ag_write_full(ctl_out, out.p, at); /* as before: the end cannot be said */
	}
	call.pid = 0;
	call.looked = call.early = 0;
	if (call.in_w >= 0)
		close(call.in_w);
	call.in_w = -1;
}

/* A background call that outlived its wait: it goes on as a background process. */
static void detach_call(void)
{
	struct bg_stream s[2];
	for (int i = 0; i < 2; i++) {
		struct stream *t = &call.s[i];
		s[i] = (struct bg_stream){.fd = t->fd, .bytes = t->bytes, .file_fd = t->spill_fd, .file_len = t->spilled,
					  .file_errno = t->spill_errno, .cut = t->spill_cut};
	}
	prestart_end("a background process runs");
	uint32_t id = bg_adopt(call.pid, call.in_w, s, call.started_ns, call.cap, call.spill_max, call.spill_prefix,
			       call.bg_timeout_ms, call.label);
	if (!id) { /* cannot happen: the run was refused when too many ran */
		call.killed = 1;
		finish_call();
		return;
	}
	for (int i = 0; i < 2; i++) {
		free(call.s[i].head);
		call.s[i].head = NULL;
		call.s[i].fd = call.s[i].spill_fd = -1;
	}
	ag_frame_begin(&out, AG_DETACHED);
	ag_put_u32(&out, id);
	ag_put_u64(&out, call.started_ns);
	ag_put_u64(&out, call.s[0].bytes);
	ag_put_u64(&out, call.s[1].bytes);
	send_frame();
	call.pid = 0;
	call.bg = 0;
	call.in_w = -1;
	call.out_dir[0] = '\0'; /* its outputs/ are listed when the server asks */
}


/* Reads the count and the strings of one list (argv or envp) into the spec's block. */
static int get_list(struct ag_cur *c, char **list, char **bp, int need_one)
{
	uint32_t cnt = ag_get_u32(c);
	if (c->bad || cnt > MAX_ARGS || (need_one && cnt == 0))
		return -1;
	for (uint32_t i = 0; i < cnt; i++) {
		size_t n;
		const char *s = ag_get_str(c, &n);
		if (c->bad || memchr(s, 0, n))
			return -1;
		memcpy(*bp, s, n);
		(*bp)[n] = '\0';
		list[i] = *bp;
		*bp += n + 1;
	}
	list[cnt] = NULL;
	return 0;
}

/* Parses AG_RUN into sp (and the call's cap and spill settings). 0, or -1 (bad, or ENOMEM in
 * errno). */
static int parse_run(struct ag_cur *c, struct run_spec *sp)
{
	sp->flags = ag_get_u32(c);
	call.cap = ag_get_u64(c);
	call.spill_max = ag_get_u64(c);
	if (get_str(c, sp->cwd, sizeof sp->cwd) < 0 || get_str(c, call.spill_prefix, sizeof call.spill_prefix) < 0)
		return errno = 0, -1;
	sp->relay_port = ag_get_u32(c);
	if (get_str(c, sp->relay_sock, sizeof sp->relay_sock) < 0 || sp->relay_port > 65535)
		return errno = 0, -1;
	sp->nrl = ag_get_u32(c);
	if (sp->nrl > MAX_RLIMITS)
		return errno = 0, -1;
	for (uint32_t i = 0; i < sp->nrl; i++) {
		sp->rl[i].res = ag_get_u32(c);
		sp->rl[i].lim = ag_get_u64(c);
	}
	/* Every string's terminator fits in the room of its length field. */
	if (!(sp->block = malloc(c->left + 2 * MAX_ARGS + 16)))
		return errno = ENOMEM, -1;
	char *bp = sp->block;
	errno = 0;
	if (get_list(c, sp->argv, &bp, 1) < 0 || get_list(c, sp->envp, &bp, 0) < 0)
		return -1;
	call.out_dir[0] = '\0';
	if (sp->flags & AG_RUN_OUTPUTS) {
		call.out_max = ag_get_u32(c);
		if (get_str(c, call.out_dir, sizeof call.out_dir) < 0 || !call.out_dir[0])
			return call.out_dir[0] = '\0', -1;
		call.out_files = ag_get_u32(c);
		call.file_max = ag_get_u64(c);
		if (c->bad || call.out_files > AG_OUTPUTS_FILES || call.file_max > AG_OUTPUTS_FILE_MAX)
			return call.out_dir[0] = '\0', -1;
	}
	return 0;
}

/* The call's program, in the forked child: signals reset, a session of its own, /dev/null,
 * the two pipes, no other fd, the call's rlimits and folder. Reports a failure to start in
 * *shared (the agent's memory, a child of clone(CLONE_VM)) or, forked, through px
 * (close-on-exec), and exits 127. Async-signal-safe. */
/*
 * A background process runs beside later calls, as the same user in the same PID namespace:
 * unconfined, it could read a later call's environment and memory maps through /proc, write
 * into its output pipes through /proc/PID/fd, or stop or kill it. A Landlock domain of its own,
 * which its children inherit, keeps it to itself: the kernel refuses a process in a domain any
 * ptrace-mode access (/proc/PID/environ, fd, mem, ...) to a process outside it, and with the
 * scopes of ABI 6 any signal to one and any connect to its abstract unix sockets. The headers
 * may predate ABI 6: the ABI's own layout, which the kernel keeps.
 */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION 1u
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET 1ull
#define LL_SCOPE_SIGNAL 2ull
#define LL_ABI_SCOPES 6
struct ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

/* Whether background processes can be confined (the Landlock ABI has scopes). */
static int confine_possible(void)
{
	static int known = -1; /* the kernel's answer does not change */
	if (known < 0)
		known = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION) >= LL_ABI_SCOPES;
	return known;
}

/* Confines the calling process (a background process, before exec): 0, or -1 with errno set.
 * Async-signal-safe. */
static int confine_background(void)
{
	struct ll_ruleset_attr a = {0, 0, LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL};
	int fd = (int)syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
	if (fd < 0)
		return -1;
	int r = (int)syscall(SYS_landlock_restrict_self, fd, 0);
	int err = errno;
	close(fd);
	errno = err;
	return r;
}

static void child_exec(const struct run_spec *sp, char *const *sh_argv, int devnull, int outw, int errw, int px,
		       volatile int *shared)
/* devnull: what becomes stdin (/dev/null, or a background call's pipe); sh_argv: what runs
 * /bin/sh when argv[0] is missing (AG_RUN_SH_FALLBACK), NULL when not asked for */
{
	reset_signals();
	setsid();
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(outw, 1) < 0 || dup2(errw, 2) < 0)
		goto fail;
	/* Only 0-2 cross exec; px stays open until exec succeeds, then closes itself. */
	if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
		for (int fd = 3; fd < 65536; fd++)
			if (fd != px)
				close(fd);
	}
	for (uint32_t i = 0; i < sp->nrl; i++) {
		struct rlimit r = {sp->rl[i].lim, sp->rl[i].lim};
		if (setrlimit((int)sp->rl[i].res, &r) < 0)
			goto fail;
	}
	if (chdir(sp->cwd) < 0)
		goto fail;
	if ((sp->flags & AG_RUN_BACKGROUND) && confine_background() < 0)
		goto fail;
	exec_path(sp->argv[0], sp->argv, sp->envp);
	if (errno == ENOENT && sh_argv)
		execve("/bin/sh", sh_argv, sp->envp);
fail:;
	int err = errno;
	if (shared)
		*shared = err;
	else
		(void)!write(px, &err, sizeof err);
	_exit(127);
}

/* A program that could not be started: its reason on stderr, as a shell would say it. */
static void say_exec_failed(const char *prog, int err)
{
	char msg[512];
	int len = snprintf(msg, sizeof msg, "sandbox: cannot run %s: %s\n", prog, strerror(err));
	ag_frame_begin(&out, AG_OUT);
	ag_put_u8(&out, 2);
	ag_put(&out, msg, (size_t)len);
	send_frame();
	call.s[1].bytes += (uint64_t)len;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
}

/*
 * The call's process is started as posix_spawn starts one: clone(CLONE_VM | CLONE_VFORK) on a
 * stack of its own, so no copy of the agent's page tables is made and torn down again at the
 * exec (a fork's cost grows with the agent's memory). The child shares the agent's memory
 * until its exec, and the agent is suspended until then, so child_exec and all it calls must
 * be async-signal-safe and write nothing but their own stack, errno (which the agent does not
 * read past the clone) and the exec report (spawn_args.err, read once the clone returns): no
 * malloc, no stdio, no lock. No handler can run in it: the agent installs none, and
 * reset_signals sets back every disposition the agent started with before it unblocks a
 * signal. Its fds, folder, rlimits, session, credentials and seccomp filter are its own (no
 * CLONE_FILES, CLONE_FS, CLONE_THREAD), changed by it alone.
 */
#define SPAWN_STACK (256 * 1024)

struct spawn_args {
	const struct run_spec *sp;
	char *const *sh_argv;
	int devnull, outw, errw, px;
	volatile int err; /* why the exec failed, written by a child of clone; 0: it did not */
};

static int spawn_child(void *arg)
{
	struct spawn_args *a = arg;
	child_exec(a->sp, a->sh_argv, a->devnull, a->outw, a->errw, a->px, a->px < 0 ? &a->err : NULL);
	return 127;
}

/* The child's stack, made once (a guard page under it): its top, or NULL when it cannot be
 * (the call is then forked). */
static void *spawn_stack(void)
{
	static char *top;
	if (!top) {
		long page = sysconf(_SC_PAGESIZE);
		char *p = mmap(NULL, SPAWN_STACK + (size_t)page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (mprotect(p, (size_t)page, PROT_NONE) < 0) {
			munmap(p, SPAWN_STACK + (size_t)page);
			return NULL;
		}
		top = p + page + SPAWN_STACK;
	}
	return top;
}

/* Starts the program of sp with stdout, stderr and its exec report on pipes. The child's pid,
 * or -1 with errno set and *what naming the step (nothing left open). */
static pid_t spawn_call(struct run_spec *sp, int po[2], int pe[2], int in_r, int *exec_err, const char **what)
{
	/* argv with /bin/sh first, made here: the child may not write the agent's memory. */
	static char *sh_argv[MAX_ARGS + 2];
	int px[2] = {-1, -1};
	po[0] = po[1] = pe[0] = pe[1] = -1;
	*what = "pipe";
	/* A child of clone(CLONE_VM) reports a failed exec in the agent's memory; a forked one
	 * (no stack for clone) through a pipe. */
	void *stack = spawn_stack();
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || (!stack && pipe2(px, O_CLOEXEC) < 0)) {
		int err = errno;
		close_pair(po);
		close_pair(pe);
		close_pair(px);
		errno = err;
		return -1;
	}
	if (sp->flags & AG_RUN_SH_FALLBACK) {
		size_t n = 0;
		while (sp->argv[n])
			n++;
		memcpy(sh_argv, sp->argv, (n + 1) * sizeof *sh_argv);
		sh_argv[0] = "/bin/sh";
	}
	/* Opened for each call: flags or a lock a call sets on its stdin go with it. */
	int devnull = in_r >= 0 ? dup(in_r) : open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct spawn_args a = {sp, sp->flags & AG_RUN_SH_FALLBACK ? sh_argv : NULL, devnull, po[1], pe[1], px[1], 0};
	/* Coarse, as file times are: whatever the program changes has a ctime at or after it. */
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME_COARSE, &t0);
	call.started_ns = (uint64_t)ts_ns(t0);
	*what = "fork";
	pid_t pid = stack ? clone(spawn_child, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a) : fork();
	if (pid == 0) /* forked */
		spawn_child(&a);
	int err = errno;
	if (devnull >= 0)
		close(devnull);
	close(po[1]);
	close(pe[1]);
	if (px[1] >= 0)
		close(px[1]);
	po[1] = pe[1] = -1;
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		if (px[0] >= 0)
			close(px[0]);
		errno = err;
		return -1;
	}
	if (px[0] < 0) {
		/* The agent ran again only once the child had exec'd or exited. */
		*exec_err = a.err;
		return pid;
	}
	ssize_t r;
	do
		r = read(px[0], exec_err, sizeof *exec_err);
	while (r < 0 && errno == EINTR);
	close(px[0]);
	if (r != (ssize_t)sizeof *exec_err)
		*exec_err = 0;
	return pid;
}

/* A call in the prestarted interpreter, with stdout and stderr on pipes: its pid, or -1
 * (nothing left open) when it cannot (the call is then started plainly). */
static pid_t spawn_prestarted(struct run_spec *sp, int po[2], int pe[2])
{
	po[0] = po[1] = pe[0] = pe[1] = -1;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		close_pair(po);
		close_pair(pe);
		return -1;
	}
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME_COARSE, &t0);
	call.started_ns = (uint64_t)ts_ns(t0);
	pid_t pid = prestart_run(sp, po[1], pe[1]);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		po[0] = pe[0] = -1;
	}
	return pid;
}

static void do_run(struct ag_cur *c)
{
	static struct run_spec sp;
	free(sp.block);
	memset(&sp, 0, sizeof sp);
	if (call.pid) {
		send_simple(AG_ERR, "a call is already running");
		return;
	}
	reap_exiting();
	if (parse_run(c, &sp) < 0) {
		if (errno)
			send_errno("run", errno);
		else
			send_simple(AG_ERR, "bad RUN");
		return;
	}
	call.bg = (sp.flags & AG_RUN_BACKGROUND) != 0;
	int in[2] = {-1, -1};
	if (call.bg) {
		uint32_t wait_ms = ag_get_u32(c);
		call.bg_timeout_ms = ag_get_u64(c);
		uint32_t max_live = ag_get_u32(c);
		if (get_str(c, call.label, sizeof call.label) < 0 || c->bad) {
			send_simple(AG_ERR, "bad RUN");
			return;
		}
		if (bg_live() >= max_live || bg_live() >= AG_BG_MAX) {
			char m[160];
			snprintf(m, sizeof m, "at most %u background processes may run at once: end one first (process "
				 "with signal)", max_live < AG_BG_MAX ? max_live : AG_BG_MAX);
			send_simple(AG_ERR, m);
			return;
		}
		if (!confine_possible()) {
			send_simple(AG_ERR, "background processes need Landlock with scopes (Linux 6.12 or later, "
					    "Landlock enabled) to keep them from later calls; this sandbox has none");
			return;
		}
		if (pipe2(in, O_CLOEXEC) < 0) {
			send_errno("pipe", errno);
			return;
		}
		fcntl(in[1], F_SETFL, O_NONBLOCK);
		call.detach_ms = mono_ms() + (long)wait_ms;
		/* A prestarted interpreter is handed calls only when alone: none is kept while
		 * background processes run. */
		sp.flags &= ~AG_RUN_PRESTART;
	}
	/* The relay a call's end renewed beside background processes serves this call, if it
	 * still runs (else a new one starts with the call); one for another socket goes. */
	bool take = (sp.flags & AG_RUN_RELAY_TAKE) != 0;
	if (sp.relay_port && relay_ls >= 0 &&
	    (relay_port != sp.relay_port || strcmp(relay_path, sp.relay_sock) || relay_take != take))
		relay_close();
	if (relay_pid > 0) {
		int rst;
		pid_t rp = waitpid(relay_pid, &rst, WNOHANG | __WALL);
		if (rp == relay_pid)
			note_reaped(rp, rst);
		else if (rp < 0 && errno == ECHILD)
			relay_pid = 0;
	}
	if (sp.relay_port && relay_ls < 0) {
		const char *rwhat = "the relay to the server's proxy";
		relay_ls = relay_listen((uint16_t)sp.relay_port);
		if (relay_ls >= 0 && take && (relay_tl = take_listen(sp.relay_sock)) < 0) {
			int err = errno;
			close(relay_ls);
			relay_ls = -1;
			errno = err;
			rwhat = "the relay's socket for the server's takers";
		}
		if (relay_ls < 0) {
			send_errno(rwhat, errno);
			if (in[0] >= 0)
				close(in[0]);
			if (in[1] >= 0)
				close(in[1]);
			return;
		}
		relay_port = (uint16_t)sp.relay_port;
		snprintf(relay_path, sizeof relay_path, "%s", sp.relay_sock);
		relay_take = take;
	}
	int po[2], pe[2], exec_err = 0;
	const char *what;
	/* No code runs beside an interpreter that could still be written into. */
	prestart_settle(sp.flags & AG_RUN_PRESTART);
	pid_t pid = sp.flags & AG_RUN_PRESTART ? spawn_prestarted(&sp, po, pe) : -1;
	call.prestarted = pid > 0;
	call.kept_code = pid > 0 && prestart_from_code();
	if (pid < 0)
		pid = spawn_call(&sp, po, pe, in[0], &exec_err, &what);
	if (in[0] >= 0)
		close(in[0]);
	if (pid < 0) {
		int err = errno;
		/* Outside a call, a relay serves background processes only. */
		if (!bg_live())
			relay_close();
		if (in[1] >= 0)
			close(in[1]);
		send_errno(what, err);
		return;
	}
	if (sp.relay_port && !relay_pid)
		relay_start();
	call.in_w = in[1];
	call.pid = pid;
	call.status = 0;
	call.reaped = call.killed = 0;
	call.looked = call.early = 0;
	call.exec_fail = exec_err != 0;
	stream_reset(&call.s[0], po[0]);
	stream_reset(&call.s[1], pe[0]);
	fcntl(po[0], F_SETFL, O_NONBLOCK);
	fcntl(pe[0], F_SETFL, O_NONBLOCK);
	if (call.exec_fail)
		say_exec_failed(sp.argv[0], exec_err);
}

/* Reads a frame's header, taking the fd that may come with it (passed_fd). 1, or <= 0 as
 * ag_read_full. */
static int read_header(unsigned char hdr[4])
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {hdr, 4};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t r;
	do
		r = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	/* With --stdio the link is a pipe: no fd can come with a frame there. */
	if (r < 0 && errno == ENOTSOCK)
		return ag_read_full(ctl, hdr, 4) > 0 ? 1 : -1;
	if (r <= 0)
		return r < 0 ? -1 : 0;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int fd;
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
		if (passed_fd >= 0)
			close(passed_fd);
		passed_fd = fd;
	}
	return r == 4 ? 1 : ag_read_full(ctl, hdr + r, 4 - (size_t)r) > 0 ? 1 : -1;
}

/* Reads and handles one frame; returns -1 when the server is gone. */
static int handle_frame(void)
{
	static unsigned char *buf;
	unsigned char hdr[4];
	if (read_header(hdr) <= 0)
		return -1;
	uint32_t n = ag_le32(hdr);
	if (n == 0 || n > AG_MAX_FRAME)
		return -1;
	free(buf);
	buf = malloc(n);
	if (!buf || ag_read_full(ctl, buf, n) <= 0)
		return -1;
	struct ag_cur c = {buf + 1, n - 1, 0};
	switch (buf[0]) {
	case AG_FILTER:
		do_filter(&c);
		break;
	case AG_PUT:
		do_put(&c);
		break;
	case AG_RUN:
		do_run(&c);
		break;
	case AG_LIST:
	case AG_WATCH:
		do_list(&c, buf[0] == AG_WATCH);
		break;
	case AG_CHANGES:
		ag_frame_begin(&out, AG_CHANGES);
		ag_put_u32(&out, (uint32_t)watch_state());
		send_frame();
		break;
	case AG_GET:
		do_get(&c);
		break;
	case AG_KILL:
		if (call.pid) {
			call.killed = 1;
			kill_all();
		}
		break;
	case AG_PRESTART:
		prestart_configure(&c);
		break;
	case AG_PREINFO:
		prestart_info();
		break;
	case AG_SETTLE:
		if (!call.pid && !bg_live() && !spared)
			prestart_between_calls();
		break;
	case AG_MUX: {
		int fds[AG_MUX_STREAMS];
		if (!on_stdio || muxed) {
			send_simple(AG_ERR, muxed ? "the link is in chunks already" : "not on a stdio link");
			break;
		}
		if (mux_prepare(ctl, ctl_out, fds) < 0) {
			send_errno("the link's streams", errno);
			break;
		}
		/* The last frame as the link was; the server sends nothing more until it came. */
		send_simple(AG_OK, NULL);
		if (mux_go() < 0)
			die("the link's streams");
		muxed = true;
		ctl = ctl_out = fds[0];
		mux_chan = fds[1];
		break;
	}
	case AG_CHANNEL:
		if (passed_fd < 0 && mux_chan >= 0) {
			passed_fd = mux_chan;
			mux_chan = -1;
		}
		if (passed_fd < 0) {
			send_simple(AG_ERR, "no channel came");
			break;
		}
		bg_channel(passed_fd);
		passed_fd = -1;
		send_simple(AG_OK, NULL);
		break;
	default:
		send_simple(AG_ERR, "unknown frame");
	}
	return 0;
}

/* Serves one connection until it closes. A call still running then is killed. */
static void serve(void)
{
	ag_frame_begin(&out, AG_HELLO);
	ag_put_u32(&out, AG_VERSION);
	send_frame();
	for (;;) {
		/* The prestarted interpreter is heard only between calls: one that became ready while
		 * code ran beside it may have read what that code was changing, and is not trusted
		 * (prestart_settle ends one not ready before a call that is not its own). */
		struct pollfd p[5 + 2 * (AG_BG_MAX + AG_BG_ENDED) + 1] = {
			{ctl, POLLIN, 0}, {sigfd, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0},
			{call.pid ? -1 : prestart_fd(), POLLIN, 0}};
		if (call.pid) {
			p[2].fd = call.s[0].fd;
			p[3].fd = call.s[1].fd;
		}
		int nb = bg_watch(p + 5, (int)(sizeof p / sizeof p[0]) - 5);
		long t = bg_next_ms();
		if (call.pid && call.bg) {
			long left = call.detach_ms - mono_ms();
			left = left < 0 ? 0 : left;
			t = t < 0 || left < t ? left : t;
		}
		if (poll(p, 5 + (nb > 0 ? (nfds_t)nb : 0), (int)t) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		bg_ready(p + 5, nb);
		if (p[0].revents) {
			if (handle_frame() < 0)
				break;
		}
		for (int i = 0; i < 2; i++)
			if (call.pid && p[2 + i].revents && call.s[i].fd >= 0)
				stream_pump(i);
		if (p[1].revents)
			reap();
		if (p[4].fd >= 0 && p[4].revents)
			prestart_readable();
		if (call.pid && call.reaped)
			finish_call();
		else if (call.pid && call.bg && mono_ms() >= call.detach_ms)
			detach_call();
		bg_expire();
		/* What an ended one left in other sessions goes now, as at a call's end, so that
		 * nothing of it outlives it: at once when no call runs, else with that call's end
		 * (a background call in its wait included: the look waits for its detach). */
		if (!call.pid && bg_take_ended())
			kill_all();
	}
	if (call.pid) {
		call.killed = 1;
		finish_call();
	}
	bg_end_all();
	if (ctl_out != ctl)
		close(ctl_out);
	close(ctl);
	ctl = ctl_out = -1;
}

int main(int argc, char **argv)
{
	const char *connect_path = NULL;
	bool stdio = false;
	if (argc == 3 && strcmp(argv[1], "--fd") == 0) {
		ctl = atoi(argv[2]);
	} else if (argc == 3 && strcmp(argv[1], "--connect") == 0) {
		connect_path = argv[2];
	} else if (argc == 2 && strcmp(argv[1], "--stdio") == 0) {
		stdio = true;
	} else {
		fprintf(stderr, "usage: sandbox-agent --fd N | --connect PATH | --stdio\n");
		return 2;
	}
	/* kill(-1) from anything but PID 1 of its own namespace would reach far too much. */
	if (getpid() != 1) {
		fprintf(stderr, "sandbox-agent: must run as PID 1 of a PID namespace\n");
		return 2;
	}
	note_signals();
	sigset_t all;
	sigfillset(&all);
	if (sigprocmask(SIG_BLOCK, &all, NULL) < 0)
		die("sigprocmask");
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigaddset(&chld, SIGUSR1); /* a call's interpreter exits (exit_said) */
	sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sigfd < 0)
		die("signalfd");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		die("prctl");

	if (stdio) {
		on_stdio = true;
		/* The link moves off fds 0 and 1, which become /dev/null: nothing the agent starts
		 * inherits it (each call's fds 0-2 are set anew anyway). */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		ctl = fcntl(0, F_DUPFD_CLOEXEC, 3);
		ctl_out = fcntl(1, F_DUPFD_CLOEXEC, 3);
		if (null < 0 || ctl < 0 || ctl_out < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0)
			die("stdio");
		close(null);
		serve();
		kill_all();
		return 0;
	}
	ctl_out = ctl;
	if (!connect_path) {
		if (fcntl(ctl, F_SETFD, FD_CLOEXEC) < 0)
			die("control fd");
		serve();
		kill_all_but(0);
		return 0;
	}
	/* The server listens there, on a folder bound read-only, and takes this one connection
	 * before any code of the sandbox runs; then it closes the socket and removes its file. */
	ctl = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (ctl < 0 || strlen(connect_path) >= sizeof sa.sun_path)
		die("socket");
	strcpy(sa.sun_path, connect_path);
	while (connect(ctl, (struct sockaddr *)&sa, sizeof sa) < 0)
		if (errno != EINTR)
			die(connect_path);
	ctl_out = ctl;
	serve();
	kill_all_but(0);
	return 0;
}
