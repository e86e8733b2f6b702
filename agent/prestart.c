/*
 * The prestarted Python interpreter of this sandbox (agent.h, prestart.py): started by the agent
 * as a child of its own between calls, talked to over a socketpair, told to become the next
 * execute_python call or, at the end of another call, to kill every process but the agent and
 * itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define WAIT_DUMP_MS 2000    /* for a starting interpreter to make itself non-dumpable */
#define WAIT_ANSWER_MS 1000  /* for an answer to a call or a kill */
#define READY_MIN_MS 1000    /* a call waits at least this long for one that is not ready yet, */
#define READY_MAX_MS 10000   /* at most this, and otherwise four times what the last one took */
#define REAP_ROUNDS 500      /* of 2 ms, for what the kill left to be gone */
#define EXITED_WAIT_US 10000 /* for a call's interpreter that said it exits to be past its code */
#define PF_EXITING 0x4       /* the kernel's task flag (stat field 9): the task is in exit() */
#define CODE_MAX (1u << 20)  /* the largest code object of prestart.py's functions kept */
#define MAIN_MARK "\n# The call runs here"

enum phase { NONE = AG_PY_NONE, STARTING = AG_PY_STARTING, NODUMP = AG_PY_NODUMP, READY = AG_PY_READY };

static struct {
	int wanted;            /* the server configured it */
	char python[4096];
	char path[4096];       /* what it runs: /proc/self/fd/./.../4, as long as the call's script path */
	char **env;            /* its environment */
	char *args[3];         /* python path */
	size_t args_len;       /* their bytes, each with its terminator */
	char *source;          /* _PRELOAD = "MODULE,..." and prestart.py's main part (fd 4) */
	size_t source_len;
	char *lib;             /* the rest of prestart.py, its functions (fd 5, after 'S') */
	size_t lib_len;
	unsigned char *code;   /* those functions compiled (marshal), from one heard ready, or NULL */
	size_t code_len;
	unsigned char *pend;   /* what the one starting sent as that ('C'), kept once it is ready */
	size_t pend_len;
	bool from_code;        /* the one running was given code, not the source */
	char *block;           /* what env and source point into */
	pid_t pid;             /* 0 when none runs */
	int ctl;               /* -1 when none */
	enum phase phase;
	long started_ms;       /* when it was started */
	long ready_ms;         /* how long the last one took to be ready; 0 before one was */
	int failed;            /* ended before it was ready, in a row */
	int late;              /* not ready when a call waited for it, in a row */
	char said[1024];       /* its 'R' text (modules that failed), or why none runs */
} z = {.ctl = -1};

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

/* How a wait status ended it. */
static void describe(int st, char *buf, size_t n)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		snprintf(buf, n, "%.200s could not be started", z.python);
	else if (WIFEXITED(st))
		snprintf(buf, n, "it exited with %d", WEXITSTATUS(st));
	else
		snprintf(buf, n, "it was killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Ends it (a new one is started after the call); why: what PREINFO says, with how it ended
 * when it closed its socket (eof). keep_code: the end is not a failure of its own (a call that did
 * not ask for it), so what it was given (the functions' code) is kept for the next. */
static void end_it(const char *why, int eof, bool keep_code)
{
	char how[256] = "";
	int st, gone = 0;
	/* It closed its socket: it is on its way out, and how it ended says why. */
	for (int i = 0; z.pid > 0 && eof && !gone && i < 100; i++)
		if (!(gone = waitpid(z.pid, &st, WNOHANG | __WALL) == z.pid))
			poll(NULL, 0, 1);
	if (gone) {
		describe(st, how, sizeof how);
	} else if (z.pid > 0) {
		kill(z.pid, SIGKILL);
		while (waitpid(z.pid, NULL, __WALL) < 0 && errno == EINTR)
			;
	}
	if (z.ctl >= 0)
		close(z.ctl);
	/* One given the code that ends before it is ready, however that is heard (its socket's end
	 * here, or its reaping): the next compile the source again, and hand their own code. */
	if (!keep_code && (z.phase == STARTING || z.phase == NODUMP) && z.from_code) {
		free(z.code);
		z.code = NULL;
	}
	z.pid = 0;
	z.ctl = -1;
	z.phase = NONE;
	free(z.pend);
	z.pend = NULL;
	snprintf(z.said, sizeof z.said, "%s%s%s", why, *how ? ": " : "", how);
}

static void stop_eof(const char *why, int eof)
{
	end_it(why, eof, false);
}

static void stop(const char *why)
{
	stop_eof(why, 0);
}

/* Reads one frame of it, waiting until deadline (now_ms()). Its type; -2 when nothing came in
 * time; -3 when it stopped mid-frame until then; -1 when it closed or said something
 * malformed. The payload goes
 * to buf, terminated; a 'C' (its functions' code, up to CODE_MAX, only while it starts and
 * when none is kept) to z.pend instead. */
static int read_msg(long deadline, char *buf, size_t n, size_t *len)
{
	unsigned char hdr[5];
	size_t got = 0, want = sizeof hdr, bl = 0;
	char *const buf0 = buf;
	while (got < want) {
		struct pollfd p = {z.ctl, POLLIN, 0};
		long left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return got ? -3 : -2;
		ssize_t r = got < sizeof hdr ? read(z.ctl, hdr + got, sizeof hdr - got) : read(z.ctl, buf + bl, want - got);
		if (r <= 0)
			return -1;
		if (got >= sizeof hdr)
			bl += (size_t)r;
		got += (size_t)r;
		if (got == sizeof hdr) {
			uint32_t l = ag_le32(hdr);
			if (hdr[4] == 'C' && l > 1 && l - 1 <= CODE_MAX && z.phase == NODUMP && !z.code && !z.pend &&
			    !z.from_code) {
				if (!(z.pend = malloc(l)))
					return -1;
				buf = (char *)z.pend;
			} else if (l == 0 || l - 1 >= n) {
				return -1;
			}
			want = sizeof hdr + l - 1;
		}
	}
	buf[bl] = '\0';
	*len = bl;
	if (buf != buf0)
		z.pend_len = bl;
	return hdr[4];
}

/* In the child: the socket as fd 3, the pipes of the main part and of the functions as fds 4
 * and 5, /dev/null as 0-2, nothing else. */
static void start_child(int sock, int src, int lib)
{
	reset_signals();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int s = fcntl(sock, F_DUPFD_CLOEXEC, 10), r = fcntl(src, F_DUPFD_CLOEXEC, 10), l = fcntl(lib, F_DUPFD_CLOEXEC, 10);
	if (null < 0 || s < 0 || r < 0 || l < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
	    dup2(s, 3) < 0 || dup2(r, 4) < 0 || dup2(l, 5) < 0 || close_range(6, ~0U, CLOSE_RANGE_CLOEXEC) < 0 ||
	    chdir("/") < 0)
		_exit(127);
	exec_path(z.python, z.args, z.env);
	_exit(127);
}

/* A pipe holding what the first len bytes of p (after a tag byte) are, its read end in *rd;
 * all of it now, or -1: a pipe may hold as little as a page, and is grown to fit. */
static int filled_pipe(int *rd, char tag, const void *p, size_t len)
{
	int fd[2];
	if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	if (len + 1 > 65536 && fcntl(fd[1], F_SETPIPE_SZ, (int)(len + 1)) < 0)
		goto fail;
	struct iovec v[2] = {{&tag, tag ? 1 : 0}, {(void *)p, len}};
	if (writev(fd[1], v, 2) != (ssize_t)(v[0].iov_len + len))
		goto fail;
	close(fd[1]);
	*rd = fd[0];
	return 0;
fail:
	close(fd[0]);
	close(fd[1]);
	return -1;
}

static void start(void)
{
	int sv[2], src = -1, lib = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	/* The functions as the code object one before compiled ('M'), or their source ('S'). */
	bool from_code = z.code != NULL;
	int filled = filled_pipe(&src, 0, z.source, z.source_len) == 0;
	if (filled && from_code && filled_pipe(&lib, 'M', z.code, z.code_len) < 0) {
		/* Code no pipe of ours can hold (past what one may grow to unprivileged): forgotten,
		 * not tried before every call. */
		free(z.code);
		z.code = NULL;
		from_code = false;
	}
	if (filled && !from_code)
		filled = filled_pipe(&lib, 'S', z.lib, z.lib_len) == 0;
	pid_t pid = filled ? fork() : -1;
	if (pid == 0)
		start_child(sv[1], src, lib);
	close(sv[1]);
	if (src >= 0)
		close(src);
	if (lib >= 0)
		close(lib);
	if (pid < 0) {
		close(sv[0]);
		snprintf(z.said, sizeof z.said, "%s", filled ? "fork failed" : "its source did not fit a pipe");
		return;
	}
	z.from_code = from_code;
	z.pid = pid;
	z.ctl = sv[0];
	z.phase = STARTING;
	z.started_ms = now_ms();
	z.said[0] = '\0';
}

/* One that stopped mid-frame (t == -3) is not started again in this sandbox: one started as
 * ours writes each frame at once, and one that stalls there would hold up every call for as long
 * as the agent waits for a frame. Whether that was it. */
static bool stalled(int t)
{
	if (t != -3)
		return false;
	stop("the prestarted interpreter stopped in the middle of what it said: not used in this sandbox");
	z.wanted = 0;
	return true;
}

/* Takes what it said: 'D' (non-dumpable), 'R' (ready). -1 when it said something else. */
static int heard(int type, const char *payload)
{
	if (type == 'D' && z.phase == STARTING) {
		z.phase = NODUMP;
	} else if (type == 'C' && z.phase == NODUMP && z.pend) {
		/* kept once it says it is ready: heard then, it is trusted as its 'R' is */
	} else if (type == 'R' && z.phase == NODUMP) {
		z.phase = READY;
		z.ready_ms = now_ms() - z.started_ms;
		z.failed = 0;
		if (z.pend && !z.code) {
			z.code = z.pend;
			z.code_len = z.pend_len;
			z.pend = NULL;
		}
		snprintf(z.said, sizeof z.said, "%s", payload);
	} else {
		return -1;
	}
	return 0;
}

int prestart_fd(void)
{
	return z.phase == STARTING || z.phase == NODUMP ? z.ctl : -1;
}

void prestart_readable(void)
{
	char buf[1024];
	size_t len;
	if (prestart_fd() < 0)
		return; /* it was reaped since the poll */
	int t = read_msg(now_ms() + WAIT_ANSWER_MS, buf, sizeof buf, &len);
	if (!stalled(t) && (t < 0 || heard(t, buf) < 0))
		stop_eof("the prestarted interpreter ended while it started", t == -1);
}

void prestart_settle(bool for_python)
{
	char buf[1024];
	size_t len;
	if (!for_python) {
		/* A call that is not the interpreter's neither waits for it nor shares the CPU with its
		 * start: what it said before the call is heard now, and one ready is trusted through
		 * the call (heard no more until the call's end); one not ready is ended, and the next
		 * starts once the call is answered (AG_SETTLE). */
		while (z.phase == STARTING || z.phase == NODUMP) {
			struct pollfd p = {z.ctl, POLLIN, 0};
			if (poll(&p, 1, 0) <= 0)
				break;
			prestart_readable();
		}
		if (z.phase == STARTING || z.phase == NODUMP)
			end_it("", 0, true); /* not a failure of its own: its code is kept */
		return;
	}
	long until = now_ms() + WAIT_DUMP_MS;
	while (z.phase == STARTING) {
		int t = read_msg(until, buf, sizeof buf, &len);
		if (!stalled(t) && (t < 0 || heard(t, buf) < 0))
			stop("the prestarted interpreter did not start in time");
	}
	/* Not ready yet (started just after the call before, or importing modules): worth waiting
	 * for, as a plain start beside it would take longer than what it has left, unless it is
	 * stuck: then, past four times what the last one took (at least a second, for a loaded
	 * machine), it goes. */
	long wait = z.ready_ms ? 4 * z.ready_ms : READY_MAX_MS;
	wait = wait < READY_MIN_MS ? READY_MIN_MS : wait > READY_MAX_MS ? READY_MAX_MS : wait;
	until = z.started_ms + wait;
	while (z.phase == NODUMP) {
		int t = read_msg(until, buf, sizeof buf, &len);
		if (stalled(t)) {
			/* not used again */
		} else if (t == -2 && (!z.ready_ms || ++z.late >= 3)) {
			/* None ever was, or three in a row were late: its modules hang or take too long.
			 * Calls start plainly from now on. */
			stop("the prestarted interpreter was not ready in time, again: not used in this sandbox");
			z.wanted = 0;
		} else if (t == -2) {
			stop("the prestarted interpreter was not ready in time");
		} else if (t < 0 || heard(t, buf) < 0) {
			stop("the prestarted interpreter ended while it started");
		}
	}
	if (z.phase == READY)
		z.late = 0;
}

/* Copies the strs of a list into the block at *bp; the count first. */
static int take_list(struct ag_cur *c, char ***list, char **bp)
{
	uint32_t n = ag_get_u32(c);
	if (c->bad || n > MAX_ARGS || !(*list = calloc(n + 2, sizeof **list))) /* room for one more */
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		size_t l;
		const char *s = ag_get_str(c, &l);
		if (c->bad || memchr(s, 0, l))
			return -1;
		memcpy(*bp, s, l);
		(*bp)[l] = '\0';
		(*list)[i] = *bp;
		*bp += l + 1;
	}
	return 0;
}

/* The path of the source's pipe, padded with "./" (and a "/") to len bytes. */
static int padded_path(size_t len)
{
	static const char head[] = "/proc/self/fd/", odd[] = "/proc/self//fd/";
	if (len < sizeof odd || len >= sizeof z.path)
		return -1;
	const char *h = (len - (sizeof head - 1) - 1) % 2 ? odd : head;
	size_t hl = strlen(h);
	memcpy(z.path, h, hl);
	for (size_t i = hl; i + 1 < len; i += 2)
		memcpy(z.path + i, "./", 2);
	z.path[len - 1] = '4';
	z.path[len] = '\0';
	return 0;
}

/* Into the block at bp: a first line, _PRELOAD = "MODULES", and the source's main part (from
 * MAIN_MARK on), then the functions before it. */
static int take_source(char *bp, const char *src, size_t sl, const char *mods, size_t ml)
{
	const char *m = memchr(src, 0, sl) ? NULL : memmem(src, sl, MAIN_MARK, strlen(MAIN_MARK));
	if (!m)
		return -1;
	for (size_t i = 0; i < ml; i++)
		if (!mods[i] || !strchr(AG_MODULE_CHARS, mods[i]))
			return -1;
	size_t ll = (size_t)(m - src) + 1, mainl = sl - ll;
	z.source = bp;
	int n = sprintf(bp, "_PRELOAD = \"%.*s\"\n", (int)ml, mods);
	memcpy(bp + n, src + ll, mainl);
	z.source_len = (size_t)n + mainl;
	z.lib = bp + z.source_len;
	z.lib_len = ll;
	memcpy(z.lib, src, ll);
	return 0;
}

/* AG_PRESTART: str python, u32 envc, strs, str source, str script, str modules. */
void prestart_configure(struct ag_cur *c)
{
	free(z.env);
	free(z.block);
	free(z.code);
	z.env = NULL;
	z.code = NULL;
	z.wanted = 0;
	size_t sl, scl, ml;
	char *bp = z.block = malloc(c->left + 64);
	if (!bp || get_str(c, z.python, sizeof z.python) < 0 || take_list(c, &z.env, &bp) < 0) {
		send_simple(AG_ERR, "bad PRESTART");
		return;
	}
	/* It starts with no path that code can write into: no PYTHONPATH, and a user site folder
	 * that cannot exist, so that `site` finds nothing of the workspace's (sitecustomize, .pth
	 * files) and no module it imports comes from there; a call puts them back (prestart.py).
	 * Not with -S or -s, which the call's sys.flags would show. */
	size_t k = 0;
	for (size_t i = 0; z.env[i]; i++)
		if (strncmp(z.env[i], "PYTHONPATH=", 11) && strncmp(z.env[i], "PYTHONUSERBASE=", 15))
			z.env[k++] = z.env[i];
	z.env[k++] = "PYTHONUSERBASE=/dev/null/.local";
	z.env[k] = NULL;
	const char *src = ag_get_str(c, &sl);
	(void)ag_get_str(c, &scl);
	const char *mods = ag_get_str(c, &ml);
	if (c->bad || take_source(bp, src, sl, mods, ml) < 0 || padded_path(scl) < 0) {
		send_simple(AG_ERR, "bad PRESTART");
		return;
	}
	z.args[0] = z.python;
	z.args[1] = z.path;
	z.args[2] = NULL;
	z.args_len = strlen(z.python) + 1 + scl + 1;
	z.wanted = 1;
	send_simple(AG_OK, NULL);
}

static bool spoiled(void);
static int kill_rest(bool kill_them, pid_t spare);
static ssize_t read_proc(const char *name, char *buf, size_t n);
static ssize_t read_proc_of(pid_t pid, const char *name, char *buf, size_t n);

/* Why the interpreter is not as the agent started it, or NULL: it must be one thread that no
 * one stopped, and nothing but it and the agent may run in the sandbox (no process it started,
 * nothing left of a call), before a call is handed to it. */
static const char *not_alone(void)
{
	char buf[4096];
	if (spoiled())
		return "code stopped, killed, signalled, limited or reniced the prestarted interpreter";
	const char *t = read_proc("status", buf, sizeof buf) > 0 ? strstr(buf, "\nThreads:\t") : NULL;
	if (!t || strtol(t + 10, NULL, 10) != 1)
		return "the prestarted interpreter runs more than one thread";
	if (kill_rest(false, z.pid) != 0)
		return "a process runs beside the prestarted interpreter";
	return NULL;
}

/* The call request: the run spec's rlimits, cwd, argv and env. */
static int call_request(const struct run_spec *sp, struct ag_buf *b)
{
	ag_frame_begin(b, 'F');
	ag_put_u32(b, sp->nrl);
	for (uint32_t i = 0; i < sp->nrl; i++) {
		ag_put_u32(b, sp->rl[i].res);
		ag_put_u64(b, sp->rl[i].lim);
	}
	ag_put_str(b, sp->cwd, strlen(sp->cwd));
	char *const *lists[2] = {sp->argv, sp->envp};
	for (int l = 0; l < 2; l++) {
		uint32_t n = 0;
		while (lists[l][n])
			n++;
		ag_put_u32(b, n);
		for (uint32_t i = 0; i < n; i++)
			ag_put_str(b, lists[l][i], strlen(lists[l][i]));
	}
	return ag_frame_end(b);
}

/* Sends b with the two fds. 0, or -1. */
static int send_with_fds(const struct ag_buf *b, int fd1, int fd2)
{
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {b->p, b->len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
	int fds[2] = {fd1, fd2};
	memcpy(CMSG_DATA(cm), fds, sizeof fds);
	ssize_t w = sendmsg(z.ctl, &m, MSG_NOSIGNAL);
	if (w < 0 || (size_t)w != b->len)
		return -1;
	return 0;
}

pid_t prestart_run(const struct run_spec *sp, int outw, int errw)
{
	static const unsigned char go_frame[5] = {1, 0, 0, 0, 'G'};
	static struct ag_buf b;
	char buf[1024];
	size_t len, n = 0;
	for (char *const *a = sp->argv; *a; a++)
		n += strlen(*a) + 1;
	/* The call's command line is written over the interpreter's own: it must be as long. */
	if (z.phase != READY || n != z.args_len)
		return -1;
	const char *why = not_alone();
	if (why) {
		/* What it started goes with it, before the call starts plainly: nothing of the call
		 * runs yet, so every process but the agent is a stray. */
		stop(why);
		for (;;) {
			kill(-1, SIGKILL);
			if (waitpid(-1, NULL, __WALL) < 0 && errno != EINTR)
				break; /* ECHILD: nothing is left */
		}
		return -1;
	}
	if (call_request(sp, &b) < 0 || send_with_fds(&b, outw, errw) < 0) {
		stop("the prestarted interpreter could not be given a call");
		return -1;
	}
	/* It says it can take the call ('P'), then waits for 'G' before it runs anything of it: a
	 * call it does not answer in time is started plainly, after it was killed, and must not run
	 * in it too. Once 'G' is sent, the call is its, however late it is. */
	int t = read_msg(now_ms() + WAIT_ANSWER_MS, buf, sizeof buf, &len);
	if (t == 'P' && send(z.ctl, go_frame, sizeof go_frame, MSG_NOSIGNAL) == (ssize_t)sizeof go_frame) {
		/* It is the call now; the next one starts after it. */
		pid_t pid = z.pid;
		close(z.ctl);
		z.ctl = -1;
		z.pid = 0;
		z.phase = NONE;
		return pid;
	}
	/* 'S': a plain start would run or import something of the workspace's as it starts (a
	 * sitecustomize, a package over a module it holds, a user site folder). Else it is broken. */
	stop(t == 'S' ? "" : t == 'P' ? "the prestarted interpreter could not be told to run the call"
			 : "the prestarted interpreter failed a call");
	return -1;
}

/* Kills (when kill is set) what is left of the sandbox but us and spare; the number of
 * processes seen, alive or not yet reaped. */
static int kill_rest(bool kill_them, pid_t spare)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d))) {
		char *end;
		long p = strtol(e->d_name, &end, 10);
		if (*end || p <= 1 || p == spare)
			continue;
		if (kill_them)
			kill((pid_t)p, SIGKILL);
		n++;
	}
	if (d)
		closedir(d);
	return d ? n : -1;
}

/* Reads /proc/PID/NAME of the interpreter into buf (n bytes, terminated): its length, or -1. */
static ssize_t read_proc(const char *name, char *buf, size_t n)
{
	return read_proc_of(z.pid, name, buf, n);
}

static ssize_t read_proc_of(pid_t pid, const char *name, char *buf, size_t n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, buf, n - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[r > 0 ? r : 0] = '\0';
	return r;
}

/* Whether code stopped, killed, signalled, limited or reniced the interpreter, or is about to have: a
 * signal sent stays pending, SIGKILL and SIGSTOP until it is next scheduled, every other one
 * (blocked while it waits) until the call it becomes unblocks it, which would then get what code
 * of an earlier call sent. */
static bool spoiled(void)
{
	char buf[4096];
	if (read_proc("stat", buf, sizeof buf) > 0) {
		const char *paren = strrchr(buf, ')');
		if (paren && paren[1] == ' ' && paren[2] && strchr("TtZX", paren[2]))
			return true;
	}
	/* Its limits are the agent's, which it inherited: code may prlimit a process of its uid,
	 * and what it set would be the call's where the run spec does not set that limit, or keep
	 * the call from raising one it does. */
	for (int r = 0; r < RLIM_NLIMITS; r++) {
		struct rlimit mine, its;
		if (getrlimit(r, &mine) == 0 &&
		    (prlimit(z.pid, r, NULL, &its) < 0 || its.rlim_cur != mine.rlim_cur || its.rlim_max != mine.rlim_max))
			return true;
	}
	/* So are its priority, scheduling policy, CPUs and I/O priority, which code of its uid may
	 * set too (renice, chrt, taskset, ionice). */
	cpu_set_t mine_cpus, its_cpus;
	errno = 0;
	int its_nice = getpriority(PRIO_PROCESS, (id_t)z.pid);
	if ((its_nice == -1 && errno) || its_nice != getpriority(PRIO_PROCESS, 0) ||
	    sched_getscheduler(z.pid) != sched_getscheduler(0) ||
	    sched_getaffinity(z.pid, sizeof its_cpus, &its_cpus) < 0 ||
	    sched_getaffinity(0, sizeof mine_cpus, &mine_cpus) < 0 || !CPU_EQUAL(&its_cpus, &mine_cpus) ||
	    syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, z.pid) != syscall(SYS_ioprio_get, 1, 0))
		return true;
	if (read_proc("status", buf, sizeof buf) <= 0)
		return false;
	for (const char *k = buf; (k = strstr(k, "Pnd:\t")) != NULL; k += 5) {
		if (strtoull(k + 5, NULL, 16) != 0) /* SigPnd (the thread's) and ShdPnd (the process's) */
			return true;
	}
	return false;
}

/* Reaps every child of the agent that has ended: the interpreter (code may have killed it)
 * here, the others through reaped. */
static void reap_all(void (*reaped)(pid_t, int))
{
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
		if (p == z.pid)
			prestart_reaped(p, st);
		else
			reaped(p, st);
	}
}

int prestart_kill_others(void (*reaped)(pid_t, int))
{
	static const unsigned char kill_frame[5] = {1, 0, 0, 0, 'K'};
	char buf[64];
	size_t len;
	if (z.phase != READY)
		return -1;
	/* Most calls leave nothing: then there is nothing to kill. A look suffices, as nothing can
	 * appear behind it: a process left has an ancestor whose parent is this agent, which reaps
	 * nothing meanwhile, so that one stays in /proc, alive or not, until the look is over. */
	reap_all(reaped);
	if (z.phase == NONE)
		return -1; /* it was gone: the plain way */
	if (spoiled()) {
		stop("code stopped, killed, signalled, limited or reniced the prestarted interpreter");
		return -1;
	}
	if (kill_rest(false, z.pid) == 0)
		return 0;
	if (write(z.ctl, kill_frame, sizeof kill_frame) != (ssize_t)sizeof kill_frame ||
	    read_msg(now_ms() + WAIT_ANSWER_MS, buf, sizeof buf, &len) != 'k') {
		stop("the prestarted interpreter did not kill the call's processes");
		return -1;
	}
	for (int round = 0; round < REAP_ROUNDS; round++) {
		reap_all(reaped);
		if (!kill_rest(true, z.pid))
			return 0;
		poll(NULL, 0, 2);
	}
	stop("the call's processes outlived the prestarted interpreter's kill");
	return -1;
}

void prestart_reaped(pid_t p, int status)
{
	if (p <= 0 || p != z.pid)
		return;
	char how[200], why[256];
	describe(status, how, sizeof how);
	bool starting = z.phase != READY;
	snprintf(why, sizeof why, "the prestarted interpreter ended%s: %s", starting ? " while it started" : "", how);
	z.pid = 0;
	stop(why); /* one given the code that ended while it started: the next compile the source */
	/* One that cannot start (no such program, a broken Python) is not tried after every call. */
	if (starting && ++z.failed >= 3) {
		z.wanted = 0;
		snprintf(z.said, sizeof z.said, "%s before it was ready, 3 times: not tried again", why);
	}
}

bool prestart_from_code(void)
{
	return z.from_code;
}

void prestart_between_calls(void)
{
	if (z.wanted && z.pid == 0)
		start();
}

void prestart_info(void)
{
	ag_frame_begin(&out, AG_PREINFO);
	ag_put_u32(&out, z.wanted ? (uint32_t)z.phase : 0);
	ag_put_u32(&out, (uint32_t)z.ready_ms);
	ag_put_str(&out, z.said, strlen(z.said));
	send_frame();
}

void prestart_end(const char *why)
{
	if (z.pid)
		stop(why);
}

/* The real, effective and saved ids of a "Uid:" or "Gid:" line of a status file all id. */
static bool ids_are(const char *status, const char *key, unsigned long id)
{
	const char *k = strstr(status, key);
	if (!k)
		return false;
	char *p = (char *)k + strlen(key);
	for (int i = 0; i < 3; i++) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v != id)
			return false;
		p = end;
	}
	return true;
}

/* Whether p is in the kernel's exit, past its code for good: one thread, flagged exiting, and
 * without its memory (which the kernel drops only after it has taken the exit status). Its
 * wait status then, from its stat file; that field is the status only where the agent may
 * read it (its ids are the agent's), and 0 otherwise. 1 when so, 0 when not (yet), -1 when it
 * is gone or a zombie (waitpid has its status). */
static int past_code(pid_t p, int *status)
{
	char buf[1024], st[4096];
	if (read_proc_of(p, "stat", buf, sizeof buf) <= 0)
		return -1;
	const char *paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ' || !paren[2])
		return -1;
	if (paren[2] == 'Z' || paren[2] == 'X')
		return -1;
	/* The fields after the command, from field 3 (the state) on. */
	unsigned long long f[50];
	char *q = (char *)paren + 4;
	for (int i = 1; i < 50; i++) {
		char *end;
		f[i] = strtoull(q, &end, 10);
		if (end == q)
			return 0;
		q = end;
	}
	/* fields 9 (flags), 20 (threads), 23 (vsize) and 52 (exit_code) */
	if (!(f[9 - 3] & PF_EXITING) || f[20 - 3] != 1 || f[23 - 3] != 0)
		return 0;
	if (read_proc_of(p, "status", st, sizeof st) <= 0 || !ids_are(st, "\nUid:\t", geteuid()) ||
	    !ids_are(st, "\nGid:\t", getegid()))
		return 0;
	*status = (int)f[52 - 3];
	return 1;
}

int prestart_exited(pid_t p, int *status)
{
	if (z.pid)
		return -1;
	struct timespec nap = {0, 100000};
	for (long spent = 0; spent < EXITED_WAIT_US; spent += 100) {
		int r = past_code(p, status);
		if (r < 0)
			return -1;
		/* Nothing else may run: no process of the call outlives its answer. None can appear
		 * behind the look (p forks no more, and only the agent else could), and one that ends
		 * during it stays in /proc until the agent reaps it. */
		if (r > 0)
			return kill_rest(false, p) == 0 ? 0 : -1;
		nanosleep(&nap, NULL);
	}
	return -1;
}
