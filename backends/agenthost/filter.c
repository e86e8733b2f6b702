#include "filter.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* Denied outright with EPERM. Names this architecture lacks are skipped. */
static const char *const denied[] = {
	/* other processes' memory */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
	/* the mount table */
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
	"fsconfig", "fsmount", "fspick", "mount_setattr",
	/* namespaces */
	"unshare", "setns",
	/* keyrings */
	"keyctl", "add_key", "request_key",
	/* kernel attack surface */
	"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "create_module", "get_kernel_syms", "query_module", "lookup_dcookie",
	"open_by_handle_at", "name_to_handle_at", "fanotify_init", "nfsservctl", "uselib", "ustat",
	"sysfs", "_sysctl", "iopl", "ioperm", "vm86", "vm86old",
	/* host settings */
	"acct", "quotactl", "quotactl_fd", "swapon", "swapoff", "reboot", "syslog", "vhangup",
	"settimeofday", "stime", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
	"setdomainname",
	/* NUMA policy of the host's memory */
	"mbind", "migrate_pages", "move_pages", "set_mempolicy", "set_mempolicy_home_node",
};

/*
 * No set-uid or set-gid bit is ever set by the code (it would land on a host folder the
 * sandbox shows, a :rw --mount or the --workspace folder, where nosuid does not apply): every
 * call that takes a mode is refused (EPERM) when the mode holds one, wherever the file is.
 * Which argument is the mode, by call; names this architecture lacks are skipped, and calls newer
 * than this libseccomp may know are given by their numbers on x86_64 and aarch64.
 */
#if defined(__x86_64__) || defined(__aarch64__)
#define NEW_NR(nr) (nr)
#else
#define NEW_NR(nr) (-1)
#endif
static const struct {
	const char *name;
	int nr;           /* when libseccomp does not know the name; -1: none */
	unsigned arg;
	int flags;        /* open's flags argument: the mode counts only when they create; -1: none */
} mode_calls[] = {
	{"chmod", -1, 1, -1}, {"fchmod", -1, 1, -1}, {"fchmodat", -1, 2, -1}, {"fchmodat2", NEW_NR(452), 2, -1},
	{"creat", -1, 1, -1}, {"open", -1, 2, 1}, {"openat", -1, 3, 2},
	{"mkdir", -1, 1, -1}, {"mkdirat", -1, 2, -1}, {"mknod", -1, 1, -1}, {"mknodat", -1, 2, -1},
};

/* Extended attributes are not set at all (ENOTSUP, as on a file system without them, which
 * tools that copy them take quietly): a filter cannot read the name, and security.capability
 * (file capabilities) must never be set. setxattrat is newer than this libseccomp may know. */
static const struct {
	const char *name;
	int nr;
} xattr_calls[] = {{"setxattr", -1}, {"lsetxattr", -1}, {"fsetxattr", -1}, {"setxattrat", NEW_NR(463)}};

static const unsigned long ns_flags[] = {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
					 CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME};

/* Socket families code may use; every other one fails with EAFNOSUPPORT. */
static int family_allowed(int af)
{
	return af == AF_UNIX || af == AF_INET || af == AF_INET6 || af == AF_NETLINK;
}

static int add(scmp_filter_ctx ctx, unsigned *n, uint32_t action, int nr, unsigned cnt,
	       const struct scmp_arg_cmp *cmp, struct err *e)
{
	int rc = seccomp_rule_add_array(ctx, action, nr, cnt, cmp);
	if (rc < 0) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		err_set(e, "seccomp_rule_add(%s): %s", name ? name : "?", strerror(-rc));
		free(name);
		return -1;
	}
	(*n)++;
	return 0;
}

/* The number of a call of this architecture: by name, else `fallback` (-1: none). */
static int syscall_nr(const char *name, int fallback)
{
	int nr = seccomp_syscall_resolve_name(name);
	return nr == __NR_SCMP_ERROR || nr < 0 ? fallback : nr;
}

static int build_rules(scmp_filter_ctx ctx, unsigned *n, struct err *e)
{
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);
		if (nr == __NR_SCMP_ERROR || nr < 0)
			continue; /* not a syscall of this architecture */
		if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), nr, 0, NULL, e) < 0)
			return -1;
	}
	/* clone3 passes its flags in memory a filter cannot read: make libc fall back to clone.
	 * openat2 its mode likewise: libc falls back to openat. */
	static const char *const in_memory[] = {"clone3", "openat2"};
	for (size_t i = 0; i < 2; i++) {
		int nr = seccomp_syscall_resolve_name(in_memory[i]);
		if (i == 1 && nr < 0)
			nr = NEW_NR(437);
		if (nr >= 0 && add(ctx, n, SCMP_ACT_ERRNO(ENOSYS), nr, 0, NULL, e) < 0)
			return -1;
	}
	/* An open that creates nothing passes no mode (the register holds whatever it held): only
	 * with O_CREAT or O_TMPFILE is its mode looked at. */
	static const unsigned long setid[] = {S_ISUID, S_ISGID}, creating[] = {O_CREAT, O_TMPFILE & ~O_DIRECTORY};
	for (size_t i = 0; i < sizeof mode_calls / sizeof mode_calls[0]; i++) {
		int nr = syscall_nr(mode_calls[i].name, mode_calls[i].nr);
		for (size_t b = 0; nr >= 0 && b < 2; b++) {
			struct scmp_arg_cmp c[2] = {{mode_calls[i].arg, SCMP_CMP_MASKED_EQ, setid[b], setid[b]}};
			if (mode_calls[i].flags < 0) {
				if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), nr, 1, c, e) < 0)
					return -1;
				continue;
			}
			for (size_t f = 0; f < 2; f++) {
				c[1] = (struct scmp_arg_cmp){(unsigned)mode_calls[i].flags, SCMP_CMP_MASKED_EQ, creating[f],
							     creating[f]};
				if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), nr, 2, c, e) < 0)
					return -1;
			}
		}
	}
	for (size_t i = 0; i < sizeof xattr_calls / sizeof xattr_calls[0]; i++) {
		int nr = syscall_nr(xattr_calls[i].name, xattr_calls[i].nr);
		if (nr >= 0 && add(ctx, n, SCMP_ACT_ERRNO(ENOTSUP), nr, 0, NULL, e) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
		if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, &c, e) < 0)
			return -1;
	}
	/* Terminal injection: compare the low 32 bits only, as the kernel does. */
	static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
	for (size_t i = 0; i < 2; i++) {
		struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctls[i]);
		if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, &c, e) < 0)
			return -1;
	}
	/* Socket families: every family number up to AF_MAX that is not allowed, and anything above. */
	for (int af = 0; af < AF_MAX; af++) {
		if (family_allowed(af))
			continue;
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (unsigned)af);
		if (add(ctx, n, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, &c, e) < 0)
			return -1;
	}
	struct scmp_arg_cmp above = SCMP_A0(SCMP_CMP_GE, AF_MAX, 0);
	if (add(ctx, n, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, &above, e) < 0)
		return -1;
	/* Another process's limits, nice value or I/O priority: never set. Every process of the
	 * sandbox runs as the code's user, the agent (its first process) and the interpreter it keeps
	 * ahead included, and a lower hard limit or a higher nice value set on those would reach every
	 * later call, since an unprivileged process cannot undo either. A process sets its own (pid
	 * or who 0: ulimit, nice, setrlimit), which its children inherit; reading another's is fine. */
	const struct scmp_arg_cmp other_limits[] = {SCMP_A0(SCMP_CMP_NE, 0, 0), SCMP_A2(SCMP_CMP_NE, 0, 0)};
	if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 2, other_limits, e) < 0)
		return -1;
	static const struct {
		int nr;
		unsigned long self; /* the `which` that names one process, whose `who` 0 is the caller */
	} whose[] = {{SCMP_SYS(setpriority), 0 /* PRIO_PROCESS */}, {SCMP_SYS(ioprio_set), 1 /* IOPRIO_WHO_PROCESS */}};
	for (size_t i = 0; i < sizeof whose / sizeof whose[0]; i++) {
		struct scmp_arg_cmp which = SCMP_A0(SCMP_CMP_NE, whose[i].self, 0), who = SCMP_A1(SCMP_CMP_NE, 0, 0);
		if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), whose[i].nr, 1, &which, e) < 0 ||
		    add(ctx, n, SCMP_ACT_ERRNO(EPERM), whose[i].nr, 1, &who, e) < 0)
			return -1;
	}
	/* personality: no turning off address randomisation or making reads imply exec. */
	static const unsigned long pers[] = {ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC};
	for (size_t i = 0; i < 2; i++) {
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, pers[i], pers[i]);
		if (add(ctx, n, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1, &c, e) < 0)
			return -1;
	}
	return 0;
}

int filter_build(struct filter *f, struct err *e)
{
	int rc = -1, fd = -1;
	memset(f, 0, sizeof *f);
	/* The filter is only exported here; the agent loads it. Where libseccomp cannot probe the
	 * kernel (seccomp(2) unknown to a tool the server runs under, such as valgrind, on a
	 * kernel that has seccomp), it is told the level the filter needs (3, for
	 * KILL_PROCESS): the program is the same, and a kernel without that level refuses it
	 * where the agent loads it. */
	if (seccomp_api_get() < 3 && prctl(PR_GET_SECCOMP) >= 0)
		(void)seccomp_api_set(3);
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return err_set(e, "seccomp_init failed");
	int r;
	/* Only the native ABI: i386 (int 0x80) and x32 syscalls end the process. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0) {
		err_set(e, "seccomp_attr_set(BADARCH): %s", strerror(-r));
		goto out;
	}
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)) < 0) {
		err_set(e, "seccomp_attr_set(NNP): %s", strerror(-r));
		goto out;
	}
	if (build_rules(ctx, &f->rules, e) < 0)
		goto out;
	fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
	if (fd < 0) {
		err_sys(e, "memfd_create");
		goto out;
	}
	if ((r = seccomp_export_bpf(ctx, fd)) < 0) {
		err_set(e, "seccomp_export_bpf: %s", strerror(-r));
		goto out;
	}
	off_t len = lseek(fd, 0, SEEK_END);
	if (len <= 0 || lseek(fd, 0, SEEK_SET) < 0) {
		err_sys(e, "seccomp filter size");
		goto out;
	}
	f->bpf = malloc((size_t)len);
	if (!f->bpf) {
		err_set(e, "out of memory");
		goto out;
	}
	if (read(fd, f->bpf, (size_t)len) != len) {
		err_sys(e, "reading the seccomp filter");
		goto out;
	}
	f->len = (size_t)len;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	if (rc < 0)
		filter_free(f);
	return rc;
}

void filter_free(struct filter *f)
{
	free(f->bpf);
	f->bpf = NULL;
	f->len = 0;
}
