#include "wsholder.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/base/title.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

/* How long the holder may take to mount, or to answer. */
#define HOLDER_TIMEOUT_MS 10000

enum { H_GO = 1, H_PRIVATE, H_MOUNT, H_FDS, H_CLONE, H_PIVOT };

/* The holder's report: the step that failed (0: none) and its errno. */
struct holder_msg {
	int step, err;
};

/* Everything the holder needs, prepared before clone. */
struct holder_args {
	const char *dir;
	char opts[128];
	int sock;
	pid_t parent;
};

static void holder_fail(int sock, int step) __attribute__((noreturn));

static void holder_fail(int sock, int step)
{
	struct holder_msg m = {step, errno};
	(void)!send(sock, &m, sizeof m, MSG_NOSIGNAL);
	_exit(1);
}

/* Reports step's failure (errno), or success (step 0) with fd when it is one. */
static void holder_send(int sock, int step, int fd)
{
	struct holder_msg m = {step, step ? errno : 0};
	struct iovec io = {&m, sizeof m};
	union {
		struct cmsghdr h;
		char c[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = {.msg_iov = &io, .msg_iovlen = 1};
	if (fd >= 0) {
		msg.msg_control = u.c;
		msg.msg_controllen = sizeof u.c;
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	(void)!sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* The holder: a raw clone of a threaded server, so system calls only, on prepared data. */
static void holder_main(const struct holder_args *a) __attribute__((noreturn));

static void holder_main(const struct holder_args *a)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != a->parent)
		_exit(1);
	/* Nothing of the server's stays open here but the socket. */
	if ((a->sock > 0 && close_range(0, (unsigned)a->sock - 1, 0) < 0) || close_range((unsigned)a->sock + 1, ~0U, 0) < 0)
		holder_fail(a->sock, H_FDS);
	char c;
	if (read(a->sock, &c, 1) != 1) /* the id maps are written */
		holder_fail(a->sock, H_GO);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		holder_fail(a->sock, H_PRIVATE);
	if (mount("tmpfs", a->dir, "tmpfs", MS_NOSUID | MS_NODEV, a->opts) < 0)
		holder_fail(a->sock, H_MOUNT);
	/* The tmpfs becomes this namespace's only mount: the copy of the host's mounts would keep
	 * every file system of the host busy (an unmounted disk, another sandbox's image) while the
	 * holder lives. */
	if (chdir(a->dir) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		holder_fail(a->sock, H_PIVOT);
	holder_send(a->sock, 0, -1);
	for (;;) {
		ssize_t n = read(a->sock, &c, 1);
		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0);
		if (n < 0)
			continue;
		int fd = (int)syscall(SYS_open_tree, AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		holder_send(a->sock, fd < 0 ? H_CLONE : 0, fd);
		if (fd >= 0)
			close(fd);
	}
}

void wsholder_init(struct wsholder *w)
{
	w->pid = 0;
	w->sock = -1;
}

bool wsholder_on(const struct wsholder *w)
{
	return w->pid > 0;
}

bool wsholder_gone(struct wsholder *w)
{
	if (w->pid <= 0 || waitpid(w->pid, NULL, WNOHANG | __WALL) != w->pid)
		return false;
	w->pid = 0;
	wsholder_stop(w);
	return true;
}

/* The holder's next message and the fd it carries (-1 when none). 0, or -1 with e set. */
static int holder_recv(struct wsholder *w, const char *what, int *fd, struct err *e)
{
	struct holder_msg m;
	struct iovec io = {&m, sizeof m};
	union {
		struct cmsghdr h;
		char c[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.c, .msg_controllen = sizeof u.c};
	struct pollfd pf = {w->sock, POLLIN, 0};
	int pr;
	ssize_t n;
	*fd = -1;
	while ((pr = poll(&pf, 1, HOLDER_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (pr <= 0) {
		/* A late answer would be taken for the next question's: no holder from now on. */
		wsholder_stop(w);
		return err_set(e, "%s: the workspace's holder did not answer in %d s", what, HOLDER_TIMEOUT_MS / 1000);
	}
	while ((n = recvmsg(w->sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(fd, CMSG_DATA(c), sizeof *fd);
	if (n != (ssize_t)sizeof m) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return err_set(e, "%s: the workspace's holder is gone", what);
	}
	if (m.step) {
		static const char *const steps[] = {"", "waiting for its id maps", "making its mounts private", "mount",
						    "close_range", "open_tree", "pivot_root"};
		errno = m.err;
		return err_sys(e, "%s: %s", what, m.step > 0 && m.step <= H_PIVOT ? steps[m.step] : "?");
	}
	return 0;
}

int wsholder_start(struct wsholder *w, const char *name, const char *dir, uint64_t bytes, unsigned uid, unsigned gid,
		   wsholder_map_fn map, void *ctx, struct err *e)
{
	int sv[2];
	wsholder_init(w);
	struct holder_args a = {.dir = dir, .parent = getpid()};
	uint64_t inodes = bytes / 8192 > 1024 ? bytes / 8192 : 1024;
	snprintf(a.opts, sizeof a.opts, "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u", (unsigned long long)bytes,
		 (unsigned long long)inodes, uid, gid);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, "socketpair");
	a.sock = sv[1];
	title_before_clone("the workspace's tmpfs of %s", name);
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0)
		holder_main(&a);
	title_after_clone();
	close(sv[1]);
	w->sock = sv[0];
	if (pid < 0) {
		err_sys(e, "making the workspace's user namespace");
		wsholder_stop(w);
		return -1;
	}
	w->pid = pid;
	int fd, rc = map(ctx, pid, e);
	if (rc == 0 && write(w->sock, "x", 1) != 1)
		rc = err_sys(e, "starting the workspace's holder");
	if (rc == 0)
		rc = holder_recv(w, "making the workspace's tmpfs", &fd, e);
	/* A first copy, so that a kernel or a policy that refuses open_tree shows now, before any
	 * sandbox is made on it. */
	if (rc == 0 && (fd = wsholder_mount(w, e)) >= 0)
		close(fd);
	else if (rc == 0)
		rc = -1;
	if (rc < 0)
		wsholder_stop(w);
	return rc;
}

int wsholder_mount(struct wsholder *w, struct err *e)
{
	int fd;
	if (w->sock < 0)
		return err_set(e, "the workspace's holder is gone");
	if (send(w->sock, "x", 1, MSG_NOSIGNAL) != 1)
		return err_sys(e, "asking for the workspace's mount");
	if (holder_recv(w, "copying the workspace's mount", &fd, e) < 0)
		return -1;
	if (fd < 0)
		return err_set(e, "copying the workspace's mount: no mount came");
	return fd;
}

void wsholder_stop(struct wsholder *w)
{
	if (w->sock >= 0)
		close(w->sock);
	if (w->pid > 0) {
		kill(w->pid, SIGKILL);
		while (waitpid(w->pid, NULL, __WALL) < 0 && errno == EINTR)
			;
	}
	wsholder_init(w);
}
