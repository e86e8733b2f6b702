/*
 * The local sandbox's root and its first process (see plan.c): what the child of clone needs,
 * prepared before it, and the child itself.
 */
#ifndef SANDBOX_LOCAL_PLAN_H
#define SANDBOX_LOCAL_PLAN_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../../src/base/config.h"
#include "../agenthost/cgroup.h"

/* The sandbox user, as seen inside. */
#define SBX_UID 1000
#define SBX_GID 1000

enum op_kind { OP_MOUNT, OP_MOVE, OP_SETATTR, OP_MKDIR, OP_MKFILE, OP_SYMLINK };

/* A step of the child. Making steps (OP_MKDIR, OP_MKFILE with data as its text, OP_SYMLINK
 * to src) fill the root's tmpfs first; mounting steps follow. */
struct op {
	enum op_kind kind;
	const char *src, *dst, *fstype, *data;
	unsigned long flags;   /* mount flags, or MOUNT_ATTR_* for OP_SETATTR */
	int fd;                /* OP_MOVE: the detached mount moved to dst */
	bool recursive;        /* OP_SETATTR */
	bool optional;         /* failure is not fatal (host file that may vanish) */
	bool verify;           /* OP_MOUNT of a host folder: what dst shows once bound must be the */
	dev_t dev;             /* folder checked at start-up (its device and inode), else the step */
	ino_t ino;             /* fails with ESTALE */
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
	int lock_fd;           /* the sandbox folder's lock (hostdir.h), closed first: a server
				* killed now leaves nothing that keeps the next from removing it */
	int server_fd;         /* a pidfd of the server, to see it died before the child asked to
				* die with it; -1 where the kernel has none */
	int cg_fd[CG_N];       /* where the child moves itself into its cgroups (cgroup_self_fds);
				* all -1: the server moves it */
	char agent_path[32];   /* /proc/self/fd/agent_fd, where execveat fails (valgrind) */
	int ws_step;           /* the step that moves the workspace's mount in; -1 when none */
	int ws_bind;           /* the step that binds the workspace's host folder; -1 when none */
	char *const *argv;
};

/* What the child reports through err_fd when a step fails. */
struct child_err {
	int step;              /* index into ops, or a negative step below */
	int err;
};
enum { STEP_SYNC = -1, STEP_HOSTNAME = -2, STEP_LO = -3, STEP_PIVOT = -4, STEP_IDS = -5,
       STEP_PRCTL = -6, STEP_FDS = -7, STEP_EXEC = -8, STEP_CGROUPNS = -9, STEP_CAPS = -10, STEP_ROOT = -11,
       STEP_MAKE = -12, STEP_CGROUP = -13 };

/* Binds the host's device nodes (and device folders) paths[0..n) at the same paths in the
 * sandbox (--gpu: gpu.h's). After plan_fill. 0, or -1 when the plan is full. */
int plan_devices(struct plan *p, const char (*paths)[64], size_t n);

/* Copies a formatted string into the plan's arena. Borrowed from p; NULL when it is full. */
const char *plan_str(struct plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds the root's making and mounting steps: the read-only system, the workspace (ws_fd, a
 * detached mount the child moves in, see wsholder.h; or, when it is -1, the host folder ws
 * bound), the --mount folders (none for the install step), and proxy_dir (the install step's
 * way to the proxy, or NULL). p's root, root_opts, uid and gid must be set; ws_fd must stay
 * open until the child has run. 0, or -1 when the plan does not fit. */
int plan_fill(struct plan *p, const struct config *cfg, const char *ws, int ws_fd, bool net, const char *proxy_dir,
	      bool install);

/* After plan_fill: the host folder ws, when it is bound (ws_fd -1), must be dev:ino. */
void plan_verify_ws(struct plan *p, dev_t dev, ino_t ino);

/* Runs in the cloned child: closes lock_fd and dies with the server (and at once, should the
 * server be dead already), waits for the server's go on sync_fd, joins its cgroups where
 * cg_fd says, builds the root, becomes the sandbox user and executes the agent; a failing step
 * is reported on err_fd. Never returns. */
void plan_child(const struct plan *p) __attribute__((noreturn));

/* What step (of struct child_err) was doing, for an error text; buf holds it when needed. A
 * verified bind that failed with ESTALE says that the host folder changed. */
const char *plan_step_name(const struct plan *p, int step, int err, char *buf, size_t n);

#endif
