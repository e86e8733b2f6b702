/*
 * cgroup limits for one sandbox: memory (whole sandbox, no swap beyond it), processes and
 * CPU. Works on cgroup v1 (a controller per hierarchy) and on v2 when the server's cgroup is
 * delegated to it (root, or a systemd user slice). Everything is best effort: what the host
 * does not let us do is left to rlimits, and the flags say what is enforced.
 */
#ifndef SANDBOX_CGROUP_H
#define SANDBOX_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/err.h"

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_N };

struct cgroup {
	int version;               /* 1, 2, or 0 when nothing could be made */
	char dir[CG_N][PATH_MAX];  /* per controller (v1), or all the same folder (v2); "" if none */
	bool on[CG_N];             /* limit written and enforced */
	char why[256];             /* when something is not enforced: why */
};

/* Makes the cgroup(s) named `name` with the given limits. Never fails: see cg->on and why. */
void cgroup_create(struct cgroup *cg, const char *name, uint64_t memory, uint64_t pids, double cpus);

/* Moves pid (and, as it forks, its descendants) into the cgroup(s). */
int cgroup_attach(struct cgroup *cg, pid_t pid, struct err *e);

/*
 * The kernel's lock for moving processes between cgroups waits for an RCU grace period when it
 * is taken after a quiet spell (8-16 ms here), and not when it is taken again soon after. It
 * is not taken when a thread moves itself into a v1 cgroup (writes "0" to its `tasks`), which
 * for a process of one thread moves all of it: 0.1 ms here.
 *
 * cgroup_self_fds opens what such a process writes to, each hierarchy's `tasks` (close-on-exec;
 * -1 where none). It returns how many it opened: 0 on v2, or when one cannot be opened, and
 * then the process is moved with cgroup_attach instead. cgroup_join_self is what that process
 * runs, before it starts another: system calls only (a raw clone may call it). 0, or -1 with
 * errno.
 */
int cgroup_self_fds(const struct cgroup *cg, int fds[CG_N]);
int cgroup_join_self(const int fds[CG_N]);

/* On v2, where a sandbox is moved with cgroup_attach: takes that lock now, in a thread of its
 * own, by moving the server into the cgroup it is in (which changes nothing), so that the grace
 * period passes while the rest of a sandbox is made and cgroup_attach finds it passed. Nothing
 * on v1. Best effort; returns at once, and does nothing while one is under way; cgroup_create
 * waits for it. Called from the thread that calls cgroup_create. */
void cgroup_prewarm(void);

/* Removes the cgroup(s); the processes in them must be gone. Idempotent. */
void cgroup_destroy(struct cgroup *cg);

/* Removes the cgroups of sandbox id ("sandbox-mcp-PID-<id>-N" below ours), killing what is
 * left in them. Only for a sandbox whose server is proven gone: its folder's lock was free
 * (hostdir_reap). The PID in a name is never trusted for that: a server of another PID
 * namespace (a container, a CI job) may share the hierarchy, and its PID means nothing here. */
void cgroup_reap(const char *id);

/* Removes v2's empty leaves "sandbox-mcp-server-PID" of servers that look gone; never kills:
 * a leaf that holds a process stays. */
void cgroup_reap_leaves(void);

/*
 * The file that counts how many times the kernel's out-of-memory killer has ended a process of
 * a memory cgroup ("oom_kill N": memory.events on v2, memory.oom_control on v1), opened once
 * (read-only, close-on-exec) so that each call reads it with one pread and resolves no path:
 * cgroup_oom_open for the sandbox's own memory cgroup (-1 when there is none),
 * cgroup_oom_open_of for the memory cgroup pid is in (a container's init, say), as this host
 * sees it (-1 when none is found). The caller owns the fd.
 */
int cgroup_oom_open(const struct cgroup *cg);
int cgroup_oom_open_of(pid_t pid);

/* The count now, from such an fd. 0, or -1 when it cannot be read or holds no count. */
int cgroup_oom_read(int fd, uint64_t *n);

/* "cgroup v1" / "cgroup v2" for a controller that is on; NULL when it is not. */
const char *cgroup_mechanism(const struct cgroup *cg, int controller);

#endif
