/*
 * The local backend: a sandbox made from Linux namespaces, a minimal read-only root, a
 * seccomp filter, cgroups where the host delegates them and rlimits.
 *
 * A sandbox is one process tree. The server clones a child into new user, mount, PID, IPC,
 * UTS and cgroup namespaces (and a network namespace with only loopback unless the network
 * policy says otherwise). The child mounts the root, pivots into it, becomes the
 * unprivileged sandbox user with no capabilities and no_new_privs, and executes
 * sandbox-agent, which this binary carries and starts from a sealed memfd. The agent is PID 1
 * there: each call is one fork+exec by it, so a warm call never rebuilds anything, and when
 * the agent dies the kernel kills everything left in the namespace. The root is a tmpfs the
 * child fills itself (mount points, links, the generated /etc files), with /usr and a chosen
 * /etc bound read-only into it, and tmpfs /tmp and /dev/shm. A tmpfs of its own, not a host
 * folder: a bind mount shows its source's path in /proc/self/mountinfo, and nothing of the
 * host's paths is to be seen inside.
 *
 * Between clone and exec the child runs in a copy of a multithreaded process, so it only
 * makes system calls on data prepared beforehand (struct plan), as git's run-command does.
 *
 * Host side, a sandbox is a folder <state-dir>/local-<id> holding a lock (held while the
 * server lives, so a later server can tell a dead one's leftovers and remove them), the
 * workspace, and an empty folder the child mounts its root on.
 *
 * Where user namespaces are refused (a chroot, a container, the sysctl at 0) and the server
 * runs as root, the same without the user namespace: root may make the others itself, and the
 * child becomes the unprivileged sandbox user (--sandbox-uid) with no capabilities, under the
 * same filter, cgroups and rlimits.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "../backend.h"
#include "../../src/base/clock.h"
#include "../agenthost/agentlink.h"
#include "../agenthost/cgroup.h"
#include "../agenthost/filter.h"
#include "../agenthost/hostdir.h"
#include "../agenthost/installnet.h"
#include "../../src/base/log.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
struct mount_attr {
	__u64 attr_set, attr_clr, propagation, userns_fd;
};
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* The sandbox user, as seen inside. */
#define SBX_UID 1000
#define SBX_GID 1000

/* The agent, embedded at build time (see embed.S). */
extern const unsigned char agent_blob_start[], agent_blob_end[];

enum op_kind { OP_MOUNT, OP_SETATTR, OP_MKDIR, OP_MKFILE, OP_SYMLINK };

/* A step of the child. Making steps (OP_MKDIR, OP_MKFILE with data as its text, OP_SYMLINK
 * to src) fill the root's tmpfs first; mounting steps follow. */
struct op {
	enum op_kind kind;
	const char *src, *dst, *fstype, *data;
	unsigned long flags;   /* mount flags, or MOUNT_ATTR_* for OP_SETATTR */
	bool recursive;        /* OP_SETATTR */
	bool optional;         /* failure is not fatal (host file that may vanish) */
};

#define MAX_OPS 160
#define MAX_MAKES 120
#define ARENA 32768

/* Everything the child needs, prepared before clone. */
struct plan {
	struct op ops[MAX_OPS];
	size_t nops;
	struct op makes[MAX_MAKES];
	size_t nmakes;
	const char *root_opts; /* the root tmpfs's mount options */
	bool fsuid;            /* make the root's files as uid (root outside a user namespace
				* that does not map it cannot make inodes there) */
	char arena[ARENA];
	size_t used;
	const char *root;
	bool new_net;
	bool setgroups;        /* running as root: clear supplementary groups */
	uid_t uid;             /* what the code runs as, seen from inside */
	gid_t gid;
	struct ifreq lo;
	int sync_fd, err_fd, ctl_fd, agent_fd;
	char *const *argv;
};

/* What the child reports through err_fd when a step fails. */
struct child_err {
	int step;              /* index into ops, or a negative step below */
	int err;
};
enum { STEP_SYNC = -1, STEP_HOSTNAME = -2, STEP_LO = -3, STEP_PIVOT = -4, STEP_IDS = -5,
       STEP_PRCTL = -6, STEP_FDS = -7, STEP_EXEC = -8, STEP_CGROUPNS = -9, STEP_CAPS = -10, STEP_ROOT = -11,
       STEP_MAKE = -12 };

struct inst {
	pid_t pid;             /* the agent, PID 1 of the sandbox; 0 when none */
	struct agentlink link;
	struct cgroup cg;
};

struct local {
	char state[PATH_MAX];  /* the state folder */
	struct hostdir h;      /* this sandbox's folder and workspace */
	int agent_fd;          /* sealed memfd with the agent */
	struct filter filter;
	struct inst main;
	unsigned seq;
	bool userns;           /* a user namespace (else: root making the other namespaces alone) */
	char no_userns[300];   /* without one: why the kernel refused it */
	uid_t host_uid;        /* what the sandbox user is on the host */
	gid_t host_gid;
	bool as_root;
};

/* ---------------------------------------------------------------- plan building */

static const char *plan_str(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char *plan_str(struct plan *p, const char *fmt, ...)
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
		{"hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
		{"hostname", "sandbox\n"},
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
		if (plan_mount(p, plan_str(p, "%s", m[i].host), dst, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    plan_setattr(p, dst, (m[i].rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true) < 0)
			return -1;
	}
	return 0;
}

/* Seals the read-only part, then adds the device nodes and the writable mounts. proxy_dir: the
 * install step's way to the server's proxy (installnet.h), or NULL. */
static int plan_finish(struct plan *p, const char *ws, const char *wheelhouse, uint64_t tmp_size, const char *proxy_dir)
{
	const char *R = p->root;
	if (*wheelhouse && plan_bind(p, wheelhouse, "/wheelhouse", false) < 0)
		return -1;
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
	if (plan_mount(p, plan_str(p, "%s", ws), wsd, NULL, MS_BIND, NULL) < 0 ||
	    plan_setattr(p, wsd, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false) < 0)
		return -1;
	if (plan_mount(p, "tmpfs", plan_str(p, "%s/tmp", R), "tmpfs", MS_NOSUID | MS_NODEV, tmpopt) < 0)
		return -1;
	if (plan_mount(p, "proc", plan_str(p, "%s/proc", R), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	return 0;
}

/* ---------------------------------------------------------------- the child */

static void child_fail(const struct plan *p, int step)
{
	struct child_err ce = {step, errno};
	(void)!write(p->err_fd, &ce, sizeof ce);
	_exit(127);
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
	pid_t pid = fork();
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
	if (o->kind == OP_MOUNT)
		return mount(o->src, o->dst, o->fstype, o->flags, o->data);
	struct mount_attr a = {.attr_set = o->flags};
	return (int)syscall(SYS_mount_setattr, AT_FDCWD, o->dst, o->recursive ? AT_RECURSIVE : 0, &a, sizeof a);
}

/* Runs in the cloned child. Only system calls on prepared data. Never returns. */
static void child_main(const struct plan *p)
{
	char c;
	if (read(p->sync_fd, &c, 1) != 1)
		child_fail(p, STEP_SYNC);
	/* Now, not at clone: the server has moved us into the sandbox's cgroups, which thereby
	 * become the root of what the sandbox sees. */
	if (syscall(SYS_unshare, CLONE_NEWCGROUP) < 0)
		child_fail(p, STEP_CGROUPNS);
	if (sethostname("sandbox", 7) < 0)
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
	/* Drop every capability for good, then become the sandbox user. */
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
	/* The agent gets /dev/null, /dev/null, /dev/null and its socket: nothing of the server's,
	 * not even an fd the server inherited without close-on-exec. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(p->ctl_fd, 3) < 0 ||
	    syscall(SYS_close_range, 4, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
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
	child_fail(p, STEP_EXEC);
}

/* ---------------------------------------------------------------- host side */

static int write_str(const char *path, const char *s, struct err *e)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, "open %s", path);
	ssize_t n = write(fd, s, strlen(s));
	int saved = errno;
	close(fd);
	errno = saved;
	if (n != (ssize_t)strlen(s))
		return err_sys(e, "write %s", path);
	return 0;
}

static const char *step_name(const struct plan *p, int step, char *buf, size_t n)
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
	case STEP_CAPS: return "dropping capabilities";
	case STEP_ROOT: return "mounting the sandbox's root";
	case STEP_MAKE: return "filling the sandbox's root";
	}
	if (step >= 0 && (size_t)step < p->nops) {
		const struct op *o = &p->ops[step];
		snprintf(buf, n, "%s %s", o->kind == OP_MOUNT ? "mounting" : o->kind == OP_SETATTR ? "sealing" : "preparing",
			 o->dst + (strncmp(o->dst, p->root, strlen(p->root)) ? 0 : strlen(p->root)));
		return buf;
	}
	return "setting up";
}

static int agent_memfd(struct err *e)
{
	int fd = memfd_create("sandbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("sandbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_sys(e, "memfd_create");
	size_t len = (size_t)(agent_blob_end - agent_blob_start);
	const unsigned char *p = agent_blob_start;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n <= 0) {
			close(fd);
			return err_sys(e, "writing sandbox-agent");
		}
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, 0555) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		close(fd);
		return err_sys(e, "sealing sandbox-agent");
	}
	return fd;
}

static void inst_kill(struct inst *in)
{
	if (in->pid > 0) {
		kill(in->pid, SIGKILL);
		while (waitpid(in->pid, NULL, __WALL) < 0 && errno == EINTR)
			;
		in->pid = 0;
	}
	agentlink_close(&in->link);
	cgroup_destroy(&in->cg);
}

/* Maps the sandbox user of the child's user namespace to the host uid (nothing to do without
 * one: the child becomes that uid itself). */
static int map_ids(const struct local *L, pid_t pid, struct err *e)
{
	if (!L->userns)
		return 0;
	char path[64], map[64];
	snprintf(map, sizeof map, "%d %u 1\n", SBX_UID, (unsigned)L->host_uid);
	hostdir_path(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	if (write_str(path, map, e) < 0)
		return -1;
	if (!L->as_root) {
		hostdir_path(path, sizeof path, "/proc/%d/setgroups", (int)pid);
		if (write_str(path, "deny", e) < 0)
			return -1;
	}
	snprintf(map, sizeof map, "%d %u 1\n", SBX_GID, (unsigned)L->host_gid);
	hostdir_path(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	return write_str(path, map, e);
}

/* Starts a sandbox process tree on L's workspace; `net` shares the host's network. */
static int inst_spawn(struct backend *b, struct inst *in, bool net, const char *proxy_dir, struct err *e)
{
	struct local *L = b->priv;
	const struct config *cfg = b->cfg;
	int rc = -1, sv[2] = {-1, -1}, syncp[2] = {-1, -1}, errp[2] = {-1, -1};
	struct plan *p = calloc(1, sizeof *p);
	char root[PATH_MAX], name[96];
	memset(in, 0, sizeof *in);
	in->link.fd = -1;
	if (!p)
		return err_set(e, "out of memory");
	p->sync_fd = p->err_fd = p->ctl_fd = p->agent_fd = -1;
	hostdir_path(root, sizeof root, "%s/root", L->h.dir);
	p->root = root;
	p->new_net = !net;
	p->setgroups = L->as_root;
	p->uid = L->userns ? SBX_UID : L->host_uid;
	p->gid = L->userns ? SBX_GID : L->host_gid;
	/* In a user namespace the root's tmpfs is the sandbox user's (the one id mapped there);
	 * root, unmapped in it, makes the root's files as that user. */
	p->fsuid = L->userns && L->as_root;
	p->root_opts = plan_str(p, "size=4m,mode=0755,uid=%u,gid=%u", L->userns ? SBX_UID : 0, L->userns ? SBX_GID : 0);
	snprintf(p->lo.ifr_name, IFNAMSIZ, "lo");
	static char *const argv[] = {"sandbox-agent", "--fd", "3", NULL};
	p->argv = argv;
	/* The install step sees no --mount folder: it has no need of one, and it runs code from
	 * the package index. */
	size_t nmounts = proxy_dir ? 0 : cfg->mounts.n;
	if (!p->root_opts || plan_build(p, net, proxy_dir != NULL) < 0 || plan_mount_points(p, cfg->mounts.v, nmounts) < 0 ||
	    plan_finish(p, L->h.ws, cfg->wheelhouse, cfg->tmp_size, proxy_dir) < 0 ||
	    plan_user_mounts(p, cfg->mounts.v, nmounts) < 0) {
		err_set(e, "the sandbox's mount plan is too large");
		goto out;
	}
	/* The child's fds sit high so that dup2 onto 0, 1 and 3 cannot clobber one of them. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(syncp, O_CLOEXEC) < 0 ||
	    pipe2(errp, O_CLOEXEC) < 0) {
		err_sys(e, "socketpair/pipe");
		goto out;
	}
	p->sync_fd = fcntl(syncp[0], F_DUPFD_CLOEXEC, 64);
	p->err_fd = fcntl(errp[1], F_DUPFD_CLOEXEC, 64);
	p->ctl_fd = fcntl(sv[1], F_DUPFD_CLOEXEC, 64);
	p->agent_fd = fcntl(L->agent_fd, F_DUPFD_CLOEXEC, 64);
	if (p->sync_fd < 0 || p->err_fd < 0 || p->ctl_fd < 0 || p->agent_fd < 0) {
		err_sys(e, "dup");
		goto close_high;
	}
	snprintf(name, sizeof name, "sandbox-mcp-%d-%s-%u", (int)getpid(), b->sandbox_id, ++L->seq);
	cgroup_create(&in->cg, name, cfg->memory, cfg->pids, cfg->cpus);

	unsigned long flags = (L->userns ? CLONE_NEWUSER : 0) | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			      CLONE_NEWUTS | (net ? 0 : CLONE_NEWNET) | SIGCHLD;
	pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		err_sys(e, "creating the sandbox namespaces");
		goto close_high;
	}
	if (pid == 0)
		child_main(p);
	in->pid = pid;

	if (map_ids(L, pid, e) < 0 || cgroup_attach(&in->cg, pid, e) < 0)
		goto fail;
	if (write(syncp[1], "x", 1) != 1) {
		err_sys(e, "starting the sandbox");
		goto fail;
	}
	close(p->sync_fd); close(p->err_fd); close(p->ctl_fd); close(p->agent_fd);
	p->sync_fd = p->err_fd = p->ctl_fd = p->agent_fd = -1;
	close(errp[1]);
	errp[1] = -1;
	close(sv[1]);
	sv[1] = -1;
	struct child_err ce;
	ssize_t n;
	do
		n = read(errp[0], &ce, sizeof ce);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof ce) {
		char buf[PATH_MAX];
		err_set(e, "building the sandbox failed while %s: %s", step_name(p, ce.step, buf, sizeof buf),
			strerror(ce.err));
		goto fail;
	}
	int fd = sv[0];
	sv[0] = -1;
	if (agentlink_open(&in->link, fd, 10000, e) != 0 ||
	    agentlink_filter(&in->link, L->filter.bpf, L->filter.len, e) != 0)
		goto fail;
	rc = 0;
	goto out;
fail:
	inst_kill(in);
	goto out;
close_high:
	cgroup_destroy(&in->cg);
out:
	for (int *fdp = &p->sync_fd; fdp <= &p->agent_fd; fdp++)
		if (*fdp >= 0)
			close(*fdp);
	int fds[] = {sv[0], sv[1], syncp[0], syncp[1], errp[0], errp[1]};
	for (size_t i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(p);
	return rc;
}

/* ---------------------------------------------------------------- ops */

static int read_sysctl(const char *path)
{
	FILE *f = fopen(path, "re");
	int v = -1;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Can this process make a user namespace that may mount? 0, or -1 with why not and the fix. */
static int userns_probe(struct err *e)
{
	if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
		return err_set(e, "user namespaces are disabled (user.max_user_namespaces=0); "
				  "enable them: sysctl -w user.max_user_namespaces=15000");
	if (geteuid() != 0 && read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
		return err_set(e, "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0); "
				  "enable them: sysctl -w kernel.unprivileged_userns_clone=1");
	/* A real attempt: AppArmor may allow the namespace but take its capabilities away. */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return err_sys(e, "cannot create user namespaces");
	if (pid == 0)
		_exit(mount(NULL, "/", "none", MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : 1);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
			return err_set(e, "AppArmor restricts unprivileged user namespaces "
					  "(kernel.apparmor_restrict_unprivileged_userns=1); allow them for this "
					  "binary alone: install backends/local/apparmor.profile as "
					  "/etc/apparmor.d/sandbox-mcp (make install-apparmor)");
		return err_set(e, "user namespaces here get no mount rights");
	}
	return 0;
}

/* As root without a user namespace: can mount, PID, network, IPC and UTS namespaces be made,
 * and may the root be made private there? true, or false with the reason in why. */
static bool plain_namespaces(char *why, size_t n)
{
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
					       SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		snprintf(why, n, "as root without one, the other namespaces are refused too: %s", strerror(errno));
		return false;
	}
	if (pid == 0)
		_exit(mount(NULL, "/", "none", MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : errno == EINVAL ? 1 : 2);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return true;
	/* A plain chroot: its root is a folder, not a mount point, so the sandbox's mounts could not
	 * be kept from propagating to the host. */
	if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
		snprintf(why, n, "as root without one, the root here is not a mount point (a plain chroot?): make the "
				 "chroot's folder one before entering it (mount --rbind DIR DIR)");
	else
		snprintf(why, n, "as root without one, the root of a new mount namespace cannot be made private");
	return false;
}

/* Does uid exist in this process's user namespace (a root inside one may map only itself)? */
static bool uid_mapped(unsigned long uid)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	unsigned long inside, outside, count;
	bool found = false;
	while (f && !found && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3)
		found = uid >= inside && uid - inside < count;
	if (f)
		fclose(f);
	return found;
}

static int local_probe(struct backend *b, struct err *e)
{
	struct local *L = b->priv;
	struct err ue = {""};
	L->userns = userns_probe(&ue) == 0;
	if (L->userns)
		return 0;
	/* Root needs no user namespace to make the others, but a sandbox user to become. */
	char why[300];
	if (geteuid() != 0)
		return err_set(e, "%s", ue.msg);
	if (!plain_namespaces(why, sizeof why))
		return err_set(e, "%s; %s", ue.msg, why);
	if (!uid_mapped(b->cfg->sandbox_uid))
		return err_set(e, "%s; as root without one the code would run as uid %llu, which does not exist here",
			       ue.msg, (unsigned long long)b->cfg->sandbox_uid);
	snprintf(L->no_userns, sizeof L->no_userns, "%s", ue.msg);
	return 0;
}

static void local_init(struct backend *b)
{
	struct local *L = b->priv;
	hostdir_init(&L->h);
	L->agent_fd = -1;
	L->main.link.fd = -1;
}

static int local_start(struct backend *b, int cancel_fd, struct err *e)
{
	struct local *L = b->priv;
	const struct config *cfg = b->cfg;
	(void)cancel_fd; /* nothing here waits long enough to need it */
	L->as_root = geteuid() == 0;
	L->host_uid = L->as_root ? (uid_t)cfg->sandbox_uid : geteuid();
	L->host_gid = L->as_root ? (gid_t)cfg->sandbox_uid : getegid();
	if (hostdir_state(cfg, L->state, sizeof L->state, e) < 0)
		return -1;

	unsigned char rnd[4];
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		return err_sys(e, "getrandom");
	snprintf(b->sandbox_id, sizeof b->sandbox_id, "local-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	if (hostdir_open(&L->h, cfg, L->state, b->sandbox_id, L->host_uid, L->host_gid, e) < 0)
		return -1;
	char path[PATH_MAX + 32];
	hostdir_path(path, sizeof path, "%s/root", L->h.dir);
	if (mkdir(path, 0755) < 0)
		return err_sys(e, "creating %s", path);
	if (cfg->wheelhouse[0] && access(cfg->wheelhouse, R_OK | X_OK) < 0)
		return err_sys(e, "wheelhouse %s", cfg->wheelhouse);
	if (filter_build(&L->filter, e) < 0)
		return -1;
	if ((L->agent_fd = agent_memfd(e)) < 0)
		return -1;
	return inst_spawn(b, &L->main, cfg->network == NET_ALL, NULL, e);
}

static void call_limits(const struct backend *b, const struct inst *in, const struct run_req *rq,
			struct agentlink_limits *lim)
{
	const struct config *cfg = b->cfg;
	int64_t left = rq->deadline_ms - clock_ms();
	memset(lim, 0, sizeof *lim);
	lim->open_files = cfg->open_files;
	lim->file_size = cfg->file_size;
	lim->cpu_s = (uint64_t)(left > 0 ? left : 0) / 1000 + 2;
	lim->nproc = in->cg.on[CG_PIDS] ? 0 : cfg->pids;
	lim->as = in->cg.on[CG_MEMORY] ? 0 : cfg->memory;
	lim->spill_max = cfg->spill_max;
}

static int local_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	struct local *L = b->priv;
	struct agentlink_limits lim;
	if (L->main.pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	/* The install step alone reaches the package index: in a sandbox of its own on the same
	 * workspace, with a network namespace of its own (no host loopback, no abstract sockets)
	 * whose only way out is the server's proxy. */
	if (rq->network && b->cfg->network == NET_INSTALL) {
		struct installnet inet;
		struct inst net;
		if (installnet_open(&inet, b->cfg, L->h.host, L->host_uid, rq->env, e) < 0)
			return -1;
		int rc = inst_spawn(b, &net, false, inet.dir, e);
		if (rc == 0) {
			struct run_req step = *rq;
			step.env = installnet_env(&inet);
			call_limits(b, &net, rq, &lim);
			installnet_limits(&inet, &lim);
			rc = agentlink_run(&net.link, &step, &lim, rs, e);
			inst_kill(&net);
		}
		installnet_close(&inet);
		return rc == BACKEND_LOST ? -1 : rc;
	}
	call_limits(b, &L->main, rq, &lim);
	uint64_t oom_before = 0, oom_after = 0;
	bool counted = cgroup_oom_kills(&L->main.cg, &oom_before) == 0;
	int rc = agentlink_run(&L->main.link, rq, &lim, rs, e);
	if (rc == 0 && counted && cgroup_oom_kills(&L->main.cg, &oom_after) == 0 && oom_after > oom_before) {
		rs->oom_killed = true;
		rs->memory_limit = b->cfg->memory;
	}
	if (rc == BACKEND_LOST) {
		/* Tell a dead sandbox from a broken call: the agent's exit says which. */
		inst_kill(&L->main);
	}
	return rc;
}

static int local_put(struct backend *b, const struct run_file *f, struct err *e)
{
	struct local *L = b->priv;
	if (L->main.pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_put(&L->main.link, f, e);
}

static int local_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	struct local *L = b->priv;
	if (L->main.pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_list(&L->main.link, dir, skip, max, out, e);
}

static int local_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	struct local *L = b->priv;
	if (L->main.pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_get(&L->main.link, path, max, out, e);
}

static int local_watch_fd(const struct backend *b)
{
	const struct local *L = b->priv;
	return L->main.link.fd;
}

static int local_check(struct backend *b, struct err *e)
{
	struct local *L = b->priv;
	int st;
	pid_t p = L->main.pid > 0 ? waitpid(L->main.pid, &st, WNOHANG | __WALL) : -1;
	if (p == L->main.pid) {
		L->main.pid = 0; /* reaped: inst_kill must not wait for it */
		inst_kill(&L->main);
		if (WIFSIGNALED(st))
			return err_set(e, "the sandbox's init process was killed by signal %d", WTERMSIG(st)), BACKEND_LOST;
		return err_set(e, "the sandbox's init process exited"), BACKEND_LOST;
	}
	if (L->main.pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	if (hostdir_removed(&L->h))
		return err_set(e, "its workspace %s was removed on the host", L->h.ws), BACKEND_LOST;
	return 0;
}

static int local_destroy(struct backend *b, enum backend_end how, struct err *e)
{
	struct local *L = b->priv;
	int rc = 0;
	inst_kill(&L->main);
	filter_free(&L->filter);
	if (L->agent_fd >= 0)
		close(L->agent_fd);
	L->agent_fd = -1;
	bool keep = how == BACKEND_END_SHUTDOWN && b->cfg->keep && L->h.dir[0];
	if (keep)
		log_msg(LOG_NOTICE, "kept the workspace of %s at %s", b->sandbox_id, L->h.ws);
	if (hostdir_close(&L->h, keep ? HOSTDIR_KEEP : how == BACKEND_END_CLEANUP ? HOSTDIR_CLEAR : HOSTDIR_REMOVE, e) < 0) {
		log_msg(LOG_WARNING, "%s", e->msg);
		rc = -1;
	}
	return rc;
}

static void local_report(struct backend *b, FILE *f)
{
	struct local *L = b->priv;
	const struct config *cfg = b->cfg;
	const struct cgroup *cg = &L->main.cg;
	char sz[32];
	const char *m;
	fprintf(f, "    isolation   %smount, pid, ipc, uts, cgroup%s namespaces; seccomp filter (%u rules); "
		   "no_new_privs; no capabilities\n",
		L->userns ? "user, " : "", cfg->network == NET_ALL ? "" : ", network", L->filter.rules);
	if (!L->userns)
		fprintf(f, "    mode        no user namespace (refused here: %s); the server is root and makes the "
			   "others itself, the code runs as host uid %u\n", L->no_userns, (unsigned)L->host_uid);
	fprintf(f, "    user        sandbox (uid %u inside, host uid %u)\n", L->userns ? SBX_UID : (unsigned)L->host_uid,
		(unsigned)L->host_uid);
	char net[PATH_MAX + 256];
	fprintf(f, "    network     %s\n", installnet_describe(cfg, "the host's network", net, sizeof net));
	m = cgroup_mechanism(cg, CG_MEMORY);
	fprintf(f, "    memory      %-10s %s\n", config_fmt_size(cfg->memory, sz, sizeof sz),
		m ? m : "per process only (RLIMIT_AS): no cgroup memory controller here");
	m = cgroup_mechanism(cg, CG_PIDS);
	fprintf(f, "    processes   %-10llu %s\n", (unsigned long long)cfg->pids,
		m ? m : "per user (RLIMIT_NPROC): no cgroup pids controller here");
	m = cgroup_mechanism(cg, CG_CPU);
	fprintf(f, "    cpus        %-10g %s\n", cfg->cpus, m ? m : "NOT enforced: no cgroup cpu controller here");
	if (!m || !cgroup_mechanism(cg, CG_MEMORY) || !cgroup_mechanism(cg, CG_PIDS))
		fprintf(f, "                (%s)\n", cg->why);
	agentlink_report_limits(cfg, f);
	hostdir_report_workspace(&L->h, cfg, NULL, f);
	hostdir_report_quota(&L->h, cfg, f);
}

static void local_reap(const struct config *cfg)
{
	char state[PATH_MAX];
	struct err e = {""};
	if (hostdir_state(cfg, state, sizeof state, &e) == 0)
		hostdir_reap(state, "local-");
	cgroup_reap();
}

const struct backend_ops local_backend_ops = {
	.name = "local",
	.workspace_dir = true,
	.priv_size = sizeof(struct local),
	.init = local_init,
	.probe = local_probe,
	.start = local_start,
	.run = local_run,
	.put = local_put,
	.list = local_list,
	.get = local_get,
	.watch_fd = local_watch_fd,
	.check = local_check,
	.destroy = local_destroy,
	.report = local_report,
	.reap = local_reap,
};
