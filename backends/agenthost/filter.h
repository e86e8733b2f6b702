/*
 * The sandbox's seccomp filter, built with libseccomp in the spirit of Flatpak's and Docker's
 * defaults: everything is allowed except the kernel surface sandboxed code has no business
 * with (ptrace and cross-process memory, mounts, namespace creation, keyrings, bpf, perf,
 * userfaultfd, io_uring, kexec and modules, terminal injection ioctls, exotic socket
 * families, clock and host settings). Syscalls of foreign ABIs (x32, i386) kill the process.
 * Nothing the code does may leave a set-id file or folder, or a file capability, in a host
 * folder: a mode holding S_ISUID or S_ISGID is refused (EPERM) by every call that takes one
 * (chmod, fchmod, fchmodat, fchmodat2, creat, open, openat, mkdir, mkdirat, mknod, mknodat),
 * openat2 (its mode is in memory) is ENOSYS so that libc falls back to openat, and no extended
 * attribute is set (the setxattr calls: ENOTSUP).
 *
 * The filter is exported as classic BPF so that sandbox-agent, which has no library
 * dependencies, can install it on itself; every process of the sandbox inherits it.
 */
#ifndef SANDBOX_FILTER_H
#define SANDBOX_FILTER_H

#include <stddef.h>

#include "../../src/base/err.h"

struct filter {
	void *bpf;       /* struct sock_filter[], owned */
	size_t len;      /* bytes */
	unsigned rules;  /* rules added, for --check */
};

/* Builds the filter. 0 or -1 with e set. Free with filter_free. */
int filter_build(struct filter *f, struct err *e);
void filter_free(struct filter *f);

#endif
