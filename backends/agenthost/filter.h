/*
 * The sandbox's seccomp filter, built with libseccomp in the spirit of Flatpak's and Docker's
 * defaults: everything is allowed except the kernel surface sandboxed code has no business
 * with (ptrace and cross-process memory, mounts, namespace creation, keyrings, bpf, perf,
 * userfaultfd, io_uring, kexec and modules, terminal injection ioctls, exotic socket
 * families, clock and host settings). Syscalls of foreign ABIs (x32, i386) kill the process.
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
