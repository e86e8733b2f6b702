/*
 * The local sandbox's root and its first process: a plan made before clone (every path,
 * mount and file, in an arena), and the child that carries it out. Between clone and exec the
 * child runs in a copy of a multithreaded process, so it only makes system calls on data
 * prepared beforehand, as git's run-command does.
 *
 * The root is a tmpfs the child mounts and fills itself (mount points, links, the generated
 * /etc files), with /usr and a chosen /etc bound read-only into it, and tmpfs /tmp and
 * /dev/shm. A tmpfs of its own, not a host folder: a bind mount shows its source's path in
 * /proc/self/mountinfo, and nothing of the host's paths is to be seen inside.
 */
#include "plan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agenthost/agenthost.h"
#include "../agenthost/hostdir.h"
#include "../agenthost/installnet.h"
#include "remount.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
struct mount_attr {
	__u64 attr_set, attr_clr, propagation, userns_fd;
};
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* ---------------------------------------------------------------- plan building */

const char *plan_str(struct plan *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(p->arena + p->used, ARENA - p->used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= ARENA - p->used)
		return NULL;
	const char *s = p->arena + p->used;
	p->used += (size_t)n + 1;
	return s;
}

static struct op *plan_op(struct plan *p, enum op_kind kind, const char *src, const char *dst)
{
	if (p->nops >= MAX_OPS || !dst)
		return NULL;
	struct op *o = &p->ops[p->nops++];
	memset(o, 0, sizeof *o);
	o->kind = kind;
	o->src = src;
	o->dst = dst;
	return o;
}

/* A making step: a folder, an empty file (a mount point) or one with text, a symlink. */
static int plan_make(struct plan *p, enum op_kind kind, const char *dst, const char *src_or_text)
{
	if (p->nmakes >= MAX_MAKES || !dst)
		return -1;
	struct op *o = &p->makes[p->nmakes++];
	memset(o, 0, sizeof *o);
	o->kind = kind;
	o->dst = dst;
	if (kind == OP_SYMLINK)
		o->src = src_or_text;
	else
		o->data = src_or_text;
	return 0;
}

static int plan_mount(struct plan *p, const char *src, const char *dst, const char *fstype,
		      unsigned long flags, const char *data)
{
	struct op *o = plan_op(p, OP_MOUNT, src, dst);
	if (!o)
		return -1;
	o->fstype = fstype;
	o->flags = flags;
	o->data = data;
	return 0;
}

static int plan_setattr(struct plan *p, const char *dst, unsigned long attrs, bool recursive)
{
	struct op *o = plan_op(p, OP_SETATTR, NULL, dst);
	if (!o)
		return -1;
	o->flags = attrs;
	o->recursive = recursive;
	return 0;
}

/* Makes the last step a verified bind of the folder dev:ino (see struct op). */
static void plan_verify_last(struct plan *p, dev_t dev, ino_t ino)
{
	struct op *o = &p->ops[p->nops - 1];
	o->verify = true;
	o->dev = dev;
	o->ino = ino;
}

/* Binds a host path at `inside` under the root, making its mount point first (in the child,
 * in the root's tmpfs). Missing host paths are skipped. */
static int plan_bind(struct plan *p, const char *host, const char *inside, bool optional)
{
	struct stat st;
	if (stat(host, &st) < 0)
		return 0;
	const char *dst = plan_str(p, "%s%s", p->root, inside);
	const char *src = plan_str(p, "%s", host);
	if (!dst || !src || plan_make(p, S_ISDIR(st.st_mode) ? OP_MKDIR : OP_MKFILE, dst, NULL) < 0)
		return -1;
	struct op *o = plan_op(p, OP_MOUNT, src, dst);
	if (!o)
		return -1;
	o->flags = MS_BIND | MS_REC;
	o->optional = optional;
	return 0;
}

/* Host /etc entries the sandbox sees (read-only). Nothing secret: no shadow, no ssh, no sudo. */
static const char *const etc_allow[] = {
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "alternatives", "ssl",
	"ca-certificates", "ca-certificates.conf", "pki", "mime.types", "python3", "python3.11",
	"python3.12", "python3.13", "bash.bashrc", "profile", "inputrc", "protocols", "services",
	"os-release", "debian_version", "gai.conf", "host.conf", "nsswitch.conf", "fonts",
	"matplotlibrc", "magic", "locale.alias", "locale.conf", "environment",
};

/* The sandbox's own /etc files: users and groups that say what the code really is, no more. */
static int plan_etc(struct plan *p)
{
	const char *R = p->root;
	const char *passwd = plan_str(p,
				      "root:x:0:0:root:/root:/usr/sbin/nologin\n"
				      "sandbox:x:%u:%u:sandbox:/workspace:/bin/bash\n%s",
				      (unsigned)p->uid, (unsigned)p->gid,
				      p->uid == 65534 ? "" : "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	const char *group = plan_str(p, "root:x:0:\nsandbox:x:%u:\n%s", (unsigned)p->gid,
				     p->gid == 65534 ? "" : "nogroup:x:65534:\n");
	const char *files[][2] = {
		{"passwd", passwd},
		{"group", group},
		{"hosts", AGENTHOST_ETC_HOSTS},
		{"hostname", AGENTHOST_HOSTNAME "\n"},
	};
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (!files[i][1] || plan_make(p, OP_MKFILE, plan_str(p, "%s/etc/%s", R, files[i][0]), files[i][1]) < 0)
			return -1;
	return 0;
}

/* The read-only part: the root itself, /usr, the top-level links, a chosen /etc. */
static int plan_build(struct plan *p, bool net, bool run)
{
	const char *R = p->root;
	static const char *const dirs[] = {"/usr", "/etc", "/workspace", "/tmp", "/proc", "/dev", "/dev/shm"};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
		if (plan_make(p, OP_MKDIR, plan_str(p, "%s%s", R, dirs[i]), NULL) < 0)
			return -1;
	/* /run only where something is mounted there (the install step's way to the proxy). */
	if (run && plan_make(p, OP_MKDIR, plan_str(p, "%s/run", R), NULL) < 0)
		return -1;
	static const char *const links[][2] = {{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
					       {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}};
	for (size_t i = 0; i < 4; i++)
		if (plan_make(p, OP_SYMLINK, plan_str(p, "%s/dev/%s", R, links[i][1]), links[i][0]) < 0)
			return -1;
	if (plan_etc(p) < 0)
		return -1;
	/* The top-level links of a merged-/usr system, or bind mounts where they are folders. */
	static const char *const top[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) {
		struct stat st;
		char target[PATH_MAX], d[PATH_MAX];
		if (lstat(top[i], &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			ssize_t n = readlink(top[i], target, sizeof target - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (hostdir_path(d, sizeof d, "%s%s", R, top[i]) < 0 ||
			    plan_make(p, OP_SYMLINK, plan_str(p, "%s", d), plan_str(p, "%s", target)) < 0)
				return -1;
		} else if (S_ISDIR(st.st_mode) && plan_bind(p, top[i], top[i], false) < 0) {
			return -1;
		}
	}
	if (plan_mount(p, "/usr", plan_str(p, "%s/usr", R), NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	for (size_t i = 0; i < sizeof etc_allow / sizeof etc_allow[0]; i++) {
		char host[PATH_MAX];
		hostdir_path(host, sizeof host, "/etc/%s", etc_allow[i]);
		if (plan_bind(p, host, host, true) < 0)
			return -1;
	}
	if (net && plan_bind(p, "/etc/resolv.conf", "/etc/resolv.conf", true) < 0)
		return -1;
	return 0;
}

/* The --mount folders: their mount points, made in the root's tmpfs (/mnt and below). */
static int plan_mount_points(struct plan *p, const struct mountspec *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (const char *s = m[i].inside + 1;; s++) {
			s = strchr(s, '/');
			size_t len = s ? (size_t)(s - m[i].inside) : strlen(m[i].inside);
			if (plan_make(p, OP_MKDIR, plan_str(p, "%s%.*s", p->root, (int)len, m[i].inside), NULL) < 0)
				return -1;
			if (!s)
				break;
		}
	return 0;
}

/* The --mount folders, bound after the seal: read-only unless rw, never suid or devices. */
static int plan_user_mounts(struct plan *p, const struct mountspec *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *dst = plan_str(p, "%s%s", p->root, m[i].inside);
		if (plan_mount(p, plan_str(p, "%s", m[i].host), dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -1;
		plan_verify_last(p, m[i].dev, m[i].ino);
		if (plan_setattr(p, dst, (m[i].rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
			return -1;
	}
	return 0;
}

/* Seals the read-only part, then adds the device nodes and the writable mounts. proxy_dir: the
 * install step's way to the server's proxy (installnet.h), or NULL. */
static int plan_finish(struct plan *p, const char *ws, int ws_fd, const char *wheelhouse, dev_t wh_dev, ino_t wh_ino,
		       uint64_t tmp_size, const char *proxy_dir)
{
	const char *R = p->root;
	size_t before = p->nops;
	if (*wheelhouse && plan_bind(p, wheelhouse, "/wheelhouse", false) < 0)
		return -1;
	if (p->nops > before)
		plan_verify_last(p, wh_dev, wh_ino);
	if (proxy_dir && plan_bind(p, proxy_dir, INSTALLNET_DIR, false) < 0)
		return -1;
	if (plan_setattr(p, R, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
		return -1;
	/* A few harmless device nodes, bound from the host (a user namespace cannot mknod). */
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		char host[64];
		snprintf(host, sizeof host, "/dev/%s", nodes[i]);
		if (plan_bind(p, host, host, false) < 0)
			return -1;
	}
	const char *tmpopt = plan_str(p, "size=%llu,mode=1777", (unsigned long long)tmp_size);
	if (plan_mount(p, "tmpfs", plan_str(p, "%s/dev/shm", R), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, tmpopt) < 0)
		return -1;
	const char *wsd = plan_str(p, "%s/workspace", R);
	p->ws_step = -1;
	p->ws_bind = -1;
	if (ws_fd >= 0) {
		struct op *o = plan_op(p, OP_MOVE, NULL, wsd);
		if (!o)
			return -1;
		o->fd = ws_fd;
		p->ws_step = (int)(o - p->ops);
	} else if (plan_mount(p, plan_str(p, "%s", ws), wsd, NULL, MS_BIND, NULL) < 0) {
		return -1;
	} else {
		p->ws_bind = (int)(p->nops - 1);
	}
	if (plan_setattr(p, wsd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
		return -1;
	if (plan_mount(p, "tmpfs", plan_str(p, "%s/tmp", R), "tmpfs", MS_NOSUID | MS_NODEV, tmpopt) < 0)
		return -1;
	if (plan_mount(p, "proc", plan_str(p, "%s/proc", R), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	return 0;
}

int plan_fill(struct plan *p, const struct config *cfg, const char *ws, int ws_fd, bool net, const char *proxy_dir,
	      bool install)
{
	/* The install step sees no --mount folder: it has no need of one, and it runs code from
	 * the package index. */
	size_t nmounts = install ? 0 : cfg->mounts.n;
	if (!p->root_opts || plan_build(p, net, proxy_dir != NULL) < 0 ||
	    plan_mount_points(p, cfg->mounts.v, nmounts) < 0 ||
	    plan_finish(p, ws, ws_fd, cfg->wheelhouse, cfg->wheelhouse_dev, cfg->wheelhouse_ino, cfg->tmp_size, proxy_dir) < 0 ||
	    plan_user_mounts(p, cfg->mounts.v, nmounts) < 0)
		return -1;
	return 0;
}

int plan_devices(struct plan *p, const char (*paths)[64], size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (plan_bind(p, paths[i], paths[i], false) < 0)
			return -1;
	return 0;
}

void plan_verify_ws(struct plan *p, dev_t dev, ino_t ino)
{
	if (p->ws_bind >= 0) {
		p->ops[p->ws_bind].verify = true;
		p->ops[p->ws_bind].dev = dev;
		p->ops[p->ws_bind].ino = ino;
	}
}

/* ---------------------------------------------------------------- the child */

static void child_fail(const struct plan *p, int step) __attribute__((noreturn));

static void child_fail(const struct plan *p, int step)
{
	struct child_err ce = {step, errno};
	(void)!write(p->err_fd, &ce, sizeof ce);
	_exit(127);
}

/* Has the server died? Its pidfd is readable then. Where there is none, it cannot be told. */
static bool server_gone(const struct plan *p)
{
	struct pollfd pf = {p->server_fd, POLLIN, 0};
	return p->server_fd >= 0 && poll(&pf, 1, 0) > 0;
}

/* A making step, its path taken relative to the root (skip: the root's length and its '/'). */
static int run_make(const struct op *o, size_t skip)
{
	const char *dst = o->dst + skip;
	if (o->kind == OP_MKDIR)
		return mkdir(dst, 0755) < 0 && errno != EEXIST ? -1 : 0;
	if (o->kind == OP_SYMLINK)
		return symlink(o->src, dst);
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	size_t n = o->data ? strlen(o->data) : 0;
	ssize_t w = n ? write(fd, o->data, n) : 0;
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

/*
 * Fills the root's tmpfs, from inside it by relative paths (the sandbox user may not pass the
 * state folder). Where the files are to be made as the sandbox user (p->fsuid), a process of
 * its own makes them: an fsuid that is not mapped here could not be set back afterwards.
 */
static int run_makes(const struct plan *p)
{
	size_t rl = strlen(p->root) + 1;
	for (size_t i = 0; i < p->nmakes; i++)
		if (run_make(&p->makes[i], rl) < 0)
			return -1;
	return 0;
}

static int make_root(const struct plan *p)
{
	if (!p->fsuid)
		return run_makes(p);
	/* Not glibc's fork(): this process is a raw clone of a threaded server, whose malloc
	 * locks may have been held by another thread at that moment; fork() takes them first and
	 * would wait forever. The child makes only system calls. */
	pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* setfsuid reports the previous id, not failure: a bad id shows as EACCES below. */
		syscall(SYS_setfsgid, p->gid);
		syscall(SYS_setfsuid, p->uid);
		_exit(run_makes(p) < 0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	errno = EACCES;
	return -1;
}

static int run_op(const struct op *o)
{
	if (o->kind == OP_MOUNT) {
		if (mount(o->src, o->dst, o->fstype, o->flags, o->data) < 0)
			return -1;
		/* What was bound is checked, not the path it was bound by: the path may have been
		 * re-pointed since start-up, what is mounted on dst now can no longer change. */
		struct stat st;
		if (o->verify && (stat(o->dst, &st) < 0 || st.st_dev != o->dev || st.st_ino != o->ino)) {
			errno = ESTALE;
			return -1;
		}
		return 0;
	}
	if (o->kind == OP_MOVE)
		return (int)syscall(SYS_move_mount, o->fd, "", AT_FDCWD, o->dst, MOVE_MOUNT_F_EMPTY_PATH);
	struct mount_attr a = {.attr_set = o->flags};
	if (syscall(SYS_mount_setattr, AT_FDCWD, o->dst, o->recursive ? AT_RECURSIVE : 0, &a, sizeof a) == 0)
		return 0;
	return errno == ENOSYS ? remount_attrs(o->dst, o->flags, o->recursive) : -1;
}

/* Runs in the cloned child. Only system calls on prepared data. Never returns. */
/* Builds the root: cgroup namespace, hostname, the root's tmpfs filled and mounted on, and
 * loopback up where the sandbox has a network of its own. */
static void build_root(const struct plan *p)
{
	/* Into the sandbox's cgroups before anything else, where we move ourselves; else the
	 * server has moved us. */
	if (cgroup_join_self(p->cg_fd) < 0)
		child_fail(p, STEP_CGROUP);
	/* Now, not at clone: the sandbox's cgroups become the root of what the sandbox sees. */
	if (syscall(SYS_unshare, CLONE_NEWCGROUP) < 0)
		child_fail(p, STEP_CGROUPNS);
	if (sethostname(AGENTHOST_HOSTNAME, strlen(AGENTHOST_HOSTNAME)) < 0)
		child_fail(p, STEP_HOSTNAME);
	/* A root of its own, private to this namespace: a tmpfs on the empty folder p->root. */
	if (mount(NULL, "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", p->root, "tmpfs", MS_NOSUID | MS_NODEV, p->root_opts) < 0 || chdir(p->root) < 0)
		child_fail(p, STEP_ROOT);
	if (make_root(p) < 0)
		child_fail(p, STEP_MAKE);
	for (size_t i = 0; i < p->nops; i++)
		if (run_op(&p->ops[i]) < 0 && !p->ops[i].optional)
			child_fail(p, (int)i);
	if (p->new_net) {
		struct ifreq ifr = p->lo;
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
			child_fail(p, STEP_LO);
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			child_fail(p, STEP_LO);
		close(s);
	}
}

/* Makes the built root the root. */
static void enter_root(const struct plan *p)
{
	if (chdir(p->root) < 0)
		child_fail(p, STEP_PIVOT);
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
			child_fail(p, STEP_PIVOT);
	} else if (errno == EINVAL) {
		/* A root that is no mount point of this namespace (a plain chroot): move the new root
		 * over it. The old one stays below, out of reach: chroot needs a capability the
		 * code will not have. */
		if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 || chdir("/") < 0)
			child_fail(p, STEP_PIVOT);
	} else {
		child_fail(p, STEP_PIVOT);
	}
}

/* Drops every capability for good and becomes the sandbox user, with no_new_privs. */
static void become_user(const struct plan *p)
{
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			child_fail(p, STEP_IDS);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		child_fail(p, STEP_IDS);
	/* Raw system calls: libc's set*id wrappers would try to reach the threads of the process
	 * this child was copied from. */
	if (p->setgroups && syscall(SYS_setgroups, 0, NULL) < 0)
		child_fail(p, STEP_IDS);
	if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0 || syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
		child_fail(p, STEP_IDS);
	/* Leaving uid 0 cleared the permitted and effective sets; the inheritable one too. */
	struct __user_cap_header_struct ch = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct cd[2];
	memset(cd, 0, sizeof cd);
	if (syscall(SYS_capset, &ch, cd) < 0)
		child_fail(p, STEP_CAPS);
	/* After the credential change: commit_creds clears the parent-death signal. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(p, STEP_PRCTL);
	if (server_gone(p))
		_exit(127);
}

/* Executes the agent with /dev/null, /dev/null, /dev/null and its socket: nothing of the
 * server's, not even an fd the server inherited without close-on-exec. */
static void exec_agent(const struct plan *p) __attribute__((noreturn));

static void exec_agent(const struct plan *p)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p->ctl_fd, 3) < 0 ||
	    close_range(4, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(p, STEP_FDS);
	/* stderr last: a failure above is still reported through err_fd. */
	if (dup2(null, 2) < 0)
		child_fail(p, STEP_FDS);
	/* The agent starts with default signal actions, not the server's (it ignores SIGPIPE):
	 * ignored signals stay ignored across exec, down to the code. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	syscall(SYS_execveat, p->agent_fd, "", p->argv, (char *const[]){NULL}, AT_EMPTY_PATH);
	/* Where execveat is refused (a seccomp policy around the server) or cannot name a memfd
	 * (valgrind looks the fd's path up, and a memfd has none): the same memfd through the
	 * sandbox's /proc, whose noexec does not apply to the file a magic link names. */
	if (errno == ENOSYS || errno == ENOENT)
		execve(p->agent_path, p->argv, (char *const[]){NULL});
	child_fail(p, STEP_EXEC);
}

void plan_child(const struct plan *p)
{
	char c;
	/* A server killed from here on must take this child with it: nothing else would (it holds
	 * the sync pipe's write end itself, so it would wait forever), and what it holds of the
	 * sandbox (its folder's lock, the mounts in its namespace) would stay for good. */
	if (p->lock_fd >= 0)
		close(p->lock_fd);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || server_gone(p))
		_exit(127);
	if (read(p->sync_fd, &c, 1) != 1)
		child_fail(p, STEP_SYNC);
	build_root(p);
	enter_root(p);
	become_user(p);
	exec_agent(p);
}

const char *plan_step_name(const struct plan *p, int step, int err, char *buf, size_t n)
{
	switch (step) {
	case STEP_SYNC: return "waiting for the server";
	case STEP_HOSTNAME: return "setting the hostname";
	case STEP_LO: return "bringing up loopback";
	case STEP_PIVOT: return "switching to the sandbox root";
	case STEP_IDS: return "dropping privileges";
	case STEP_PRCTL: return "setting no_new_privs";
	case STEP_FDS: return "setting up file descriptors";
	case STEP_EXEC: return "starting sandbox-agent";
	case STEP_CGROUPNS: return "making the cgroup namespace";
	case STEP_CGROUP: return "joining the sandbox's cgroups";
	case STEP_CAPS: return "dropping capabilities";
	case STEP_ROOT: return "mounting the sandbox's root";
	case STEP_MAKE: return "filling the sandbox's root";
	}
	if (step >= 0 && (size_t)step < p->nops) {
		const struct op *o = &p->ops[step];
		size_t rl = strlen(p->root);
		const char *in = strncmp(o->dst, p->root, rl) ? o->dst : o->dst + rl; /* as seen inside */
		const char *verb = o->kind == OP_SETATTR ? "sealing" : "mounting";
		if (o->verify && err == ESTALE)
			snprintf(buf, n, "binding %s, whose host folder %s is no longer the folder checked at start-up "
				 "(it was replaced, or renamed and something put in its place)", in, o->src);
		else
			snprintf(buf, n, "%s %s", verb, *in ? in : "the root");
		return buf;
	}
	return "setting up";
}
