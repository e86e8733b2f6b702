/*
 * The local backend: a sandbox made from Linux namespaces, a minimal read-only root, a
 * seccomp filter, cgroups where the host delegates them and rlimits, on the agent host
 * (agenthost.h) that it shares with the Docker backend.
 *
 * An instance is one process tree. The server clones a child into new user, mount, PID, IPC,
 * UTS and cgroup namespaces (and a network namespace with only loopback unless the network
 * policy says otherwise). The child mounts the root, pivots into it, becomes the unprivileged
 * sandbox user with no capabilities and no_new_privs, and executes sandbox-agent, which this
 * binary carries and starts from a sealed memfd (plan.h). The agent is PID 1 there: each call
 * is one fork+exec by it, so a warm call never rebuilds anything, and when the agent dies the
 * kernel kills everything left in the namespace.
 *
 * Host side, the sandbox's folder (hostdir.h) also holds an empty folder, root, that the
 * child mounts its root on.
 *
 * Where user namespaces are refused (a chroot, a container, the sysctl at 0) and the server
 * runs as root, the same without the user namespace: root may make the others itself, and the
 * child becomes the unprivileged sandbox user (--sandbox-uid) with no capabilities, under the
 * same filter, cgroups and rlimits.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/base/gpu.h"
#include "../../src/base/clock.h"
#include "../../src/base/log.h"
#include "../backend.h"
#include "../agenthost/agenthost.h"
#include "../agenthost/cgroup.h"
#include "../agenthost/hostdir.h"
#include "plan.h"
#include "wsholder.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* start_child's answer when the workspace's mount could not be moved in. */
#define WS_MOVE_FAILED (-2)

/* How long the sandbox's first process may take to build its root and start the agent. */
#define BUILD_TIMEOUT_MS 30000

/* One instance: its agent and its cgroups. */
struct local_inst {
	struct agent_inst in;
	struct cgroup cg;
};

struct local {
	struct agenthost host;  /* first: the agent host's (backend.h) */
	int agent_fd;          /* sealed memfd with the agent; -1 when none */
	unsigned seq;          /* instances made, for cgroup names */
	struct wsholder ws;    /* the workspace's tmpfs, where it is the quota (wsholder.h) */
	bool userns;           /* a user namespace (else: root making the other namespaces alone) */
	uint64_t nofile_max;   /* the server's hard open files limit, which its sandbox inherits;
	                        * 0 when unlimited */
	char no_userns[300];   /* without one: why the kernel refused it */
};

#define LI(in) ((struct local_inst *)(void *)(in))

/* ---------------------------------------------------------------- instances */

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

/* The agent in a sealed memfd: the child executes it from there, so no file of the host is
 * needed and nothing can change it. */
static int agent_memfd(struct err *e)
{
	int fd = memfd_create("sandbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL)
		fd = memfd_create("sandbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_sys(e, "memfd_create");
	if (agenthost_write_agent(fd, "sandbox-agent", e) < 0) {
		close(fd);
		return -1;
	}
	/* F_SEAL_WRITE waits for the kernel to drop passing references to the file's pages and
	 * says EBUSY when they outlast its wait, which a loaded machine has been seen to do: a few
	 * more tries before the sandbox is given up. */
	int rc = fchmod(fd, 0555), tries = 0;
	while (rc == 0 && (rc = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) < 0 &&
	       errno == EBUSY && tries++ < 5) {
		clock_sleep_ms(20);
		rc = 0;
	}
	if (rc < 0) {
		err_sys(e, "sealing sandbox-agent");
		close(fd);
		return -1;
	}
	return fd;
}

static void local_kill(void *ctx, struct agent_inst *in)
{
	(void)ctx;
	if (!in)
		return;
	if (in->pid > 0) {
		kill(in->pid, SIGKILL);
		while (waitpid(in->pid, NULL, __WALL) < 0 && errno == EINTR)
			;
		in->pid = 0;
	}
	agentlink_close(&in->link);
	cgroup_destroy(&LI(in)->cg);
	free(in);
}

/* Maps the sandbox user of the child's user namespace to the host uid (nothing to do without
 * one: the child becomes that uid itself). */
static int map_ids(const struct local *L, pid_t pid, struct err *e)
{
	if (!L->userns)
		return 0;
	char path[64], map[64];
	snprintf(map, sizeof map, "%d %u 1\n", SBX_UID, (unsigned)L->host.uid);
	hostdir_path(path, sizeof path, "/proc/%d/uid_map", (int)pid);
	if (write_str(path, map, e) < 0)
		return -1;
	if (!L->host.as_root) {
		hostdir_path(path, sizeof path, "/proc/%d/setgroups", (int)pid);
		if (write_str(path, "deny", e) < 0)
			return -1;
	}
	snprintf(map, sizeof map, "%d %u 1\n", SBX_GID, (unsigned)L->host.gid);
	hostdir_path(path, sizeof path, "/proc/%d/gid_map", (int)pid);
	return write_str(path, map, e);
}

static int map_ids_cb(void *ctx, pid_t pid, struct err *e)
{
	return map_ids(ctx, pid, e);
}

/* The plan of an instance (see plan.h), on the workspace's mount ws_fd or else its folder.
 * Caller frees. */
static struct plan *make_plan(struct local *L, const char *root, int ws_fd, bool net, const char *proxy_dir,
			      bool install, struct err *e)
{
	struct plan *p = calloc(1, sizeof *p);
	if (!p) {
		err_set(e, "out of memory");
		return NULL;
	}
	static char *const argv[] = {"sandbox-agent", "--fd", "3", NULL};
	p->sync_fd = p->err_fd = p->ctl_fd = p->agent_fd = p->server_fd = -1;
	p->lock_fd = L->host.h.lock_fd;
	for (int c = 0; c < CG_N; c++)
		p->cg_fd[c] = -1;
	p->root = root;
	p->new_net = !net;
	p->setgroups = L->host.as_root;
	p->uid = L->userns ? SBX_UID : L->host.uid;
	p->gid = L->userns ? SBX_GID : L->host.gid;
	/* In a user namespace the root's tmpfs is the sandbox user's (the one id mapped there);
	 * root, unmapped in it, makes the root's files as that user. */
	p->fsuid = L->userns && L->host.as_root;
	p->root_opts = plan_str(p, "size=4m,mode=0755,uid=%u,gid=%u", L->userns ? SBX_UID : 0, L->userns ? SBX_GID : 0);
	snprintf(p->lo.ifr_name, IFNAMSIZ, "lo");
	p->argv = argv;
	struct err ge = {""};
	char gpus[GPU_NODES_MAX][64];
	int ngpu = L->host.cfg->gpu ? gpu_nodes(gpus, GPU_NODES_MAX, &ge) : 0;
	if (ngpu < 0) {
		free(p);
		err_set(e, "--gpu: %s", ge.msg);
		return NULL;
	}
	if (plan_fill(p, L->host.cfg, L->host.h.ws, ws_fd, net, proxy_dir, install) < 0 ||
	    plan_devices(p, (const char (*)[64])gpus, (size_t)ngpu) < 0) {
		free(p);
		err_set(e, "the sandbox's mount plan is too large");
		return NULL;
	}
	plan_verify_ws(p, L->host.h.ws_dev, L->host.h.ws_ino);
	return p;
}

/* The ends of the socket to the agent and of the pipes the child is started and reports
 * through. The child's own ends are copied high (plan's fds), so that its dup2 onto 0, 1 and 3
 * cannot clobber one of them. */
struct child_fds {
	int sv[2], sync[2], err[2];
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void close_plan_fds(struct plan *p)
{
	close_fd(&p->sync_fd);
	close_fd(&p->err_fd);
	close_fd(&p->ctl_fd);
	close_fd(&p->agent_fd);
	close_fd(&p->server_fd);
	for (int c = 0; c < CG_N; c++)
		close_fd(&p->cg_fd[c]);
}

static void close_child_fds(struct child_fds *c)
{
	for (int i = 0; i < 2; i++) {
		close_fd(&c->sv[i]);
		close_fd(&c->sync[i]);
		close_fd(&c->err[i]);
	}
}

/* A copy of fd that the child's dup2 onto 0 to 3 leaves alone: 64 or above, out of the way of
 * the fds the server opens, or, where the open files limit is not above 64, 4 or above. */
static int dup_high(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 64);
	return d < 0 && errno == EINVAL ? fcntl(fd, F_DUPFD_CLOEXEC, 4) : d;
}

static int child_fds(struct local *L, struct plan *p, struct child_fds *c, struct err *e)
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->sv) < 0 || pipe2(c->sync, O_CLOEXEC) < 0 ||
	    pipe2(c->err, O_CLOEXEC) < 0)
		return err_sys(e, "socketpair/pipe");
	p->sync_fd = dup_high(c->sync[0]);
	p->err_fd = dup_high(c->err[1]);
	p->ctl_fd = dup_high(c->sv[1]);
	p->agent_fd = dup_high(L->agent_fd);
	if (p->sync_fd < 0 || p->err_fd < 0 || p->ctl_fd < 0 || p->agent_fd < 0)
		return err_sys(e, "copying the sandbox's descriptors");
	/* pidfd_open's fd is close-on-exec. ENOSYS: a kernel before 5.3. */
	p->server_fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (p->server_fd < 0 && errno != ENOSYS)
		return err_sys(e, "pidfd_open");
	snprintf(p->agent_path, sizeof p->agent_path, "/proc/self/fd/%d", p->agent_fd);
	return 0;
}

/* The sandbox never runs under a real-time policy that the server may have been started with
 * (chrt): its code must not starve the host, and the kernel refuses to move a real-time task
 * into a cgroup with a cpu controller (EINVAL), which the child is about to join. The nice
 * value it keeps: a user may lower a server's priority, and its sandbox's with it. */
static int plain_scheduling(pid_t pid, struct err *e)
{
	int pol = sched_getscheduler(pid);
	if (pol < 0)
		return err_sys(e, "reading the sandbox's scheduling policy");
	pol &= ~SCHED_RESET_ON_FORK;
	if (pol == SCHED_OTHER || pol == SCHED_BATCH || pol == SCHED_IDLE)
		return 0;
	struct sched_param sp = {.sched_priority = 0};
	if (sched_setscheduler(pid, SCHED_OTHER, &sp) < 0)
		return err_sys(e, "giving the sandbox the normal scheduling policy instead of the server's real-time one");
	return 0;
}

/* After the clone: its scheduling policy made the normal one, ids mapped, the child moved into its cgroups unless it moves itself, and
 * told to go; then its report (a step that failed) or its agent's greeting. 0, -1 with e set,
 * or WS_MOVE_FAILED when the step that failed is the move of the workspace's mount. */
static int start_child(struct local *L, struct local_inst *li, struct plan *p, struct child_fds *c, struct err *e)
{
	bool self = false;
	for (int i = 0; i < CG_N; i++)
		self |= p->cg_fd[i] >= 0;
	if (plain_scheduling(li->in.pid, e) < 0 || map_ids(L, li->in.pid, e) < 0 || (!self && cgroup_attach(&li->cg, li->in.pid, e) < 0))
		return -1;
	if (write(c->sync[1], "x", 1) != 1)
		return err_sys(e, "starting the sandbox");
	close_plan_fds(p);
	close_fd(&c->err[1]);
	close_fd(&c->sv[1]);
	/* Its report, or end of file once it has started the agent: never waited for forever. */
	struct child_err ce;
	ssize_t n = -1;
	struct pollfd pf = {c->err[0], POLLIN, 0};
	int pr;
	while ((pr = poll(&pf, 1, BUILD_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (pr == 0)
		return err_set(e, "building the sandbox took more than %d s", BUILD_TIMEOUT_MS / 1000);
	do
		n = read(c->err[0], &ce, sizeof ce);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof ce) {
		char buf[PATH_MAX];
		err_set(e, "building the sandbox failed while %s: %s", plan_step_name(p, ce.step, ce.err, buf, sizeof buf),
			strerror(ce.err));
		return p->ws_step >= 0 && ce.step == p->ws_step ? WS_MOVE_FAILED : -1;
	}
	int fd = c->sv[0];
	c->sv[0] = -1;
	return agentlink_open(&li->in.link, fd, 10000, e) != 0 ? -1 : 0;
}

/* Starts an instance on the workspace; `net` shares the host's network. 0, -1 with e set, or
 * WS_MOVE_FAILED (see start_child). */
static int spawn_once(struct local *L, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		      struct err *e)
{
	struct child_fds c = {{-1, -1}, {-1, -1}, {-1, -1}};
	struct local_inst *li = calloc(1, sizeof *li);
	char root[PATH_MAX], name[96];
	if (li)
		li->in.link.fd = -1;
	hostdir_path(root, sizeof root, "%s/root", L->host.h.dir);
	/* A workspace that is not its host folder is had from the holder, or not at all. */
	bool away = L->host.h.ws_away;
	int ws_fd = li && away ? wsholder_mount(&L->ws, e) : -1;
	struct plan *p = li && (ws_fd >= 0 || !away) ? make_plan(L, root, ws_fd, net, proxy_dir, install, e) : NULL;
	int rc = -1;
	if (!li)
		err_set(e, "out of memory");
	if (!li || !p || child_fds(L, p, &c, e) < 0)
		goto out;
	snprintf(name, sizeof name, "sandbox-mcp-%d-%s-%u", (int)getpid(), L->host.id, ++L->seq);
	cgroup_create(&li->cg, name, L->host.cfg->memory, L->host.cfg->pids, L->host.cfg->cpus);
	li->in.rl_memory = !li->cg.on[CG_MEMORY];
	li->in.rl_pids = !li->cg.on[CG_PIDS];
	li->in.nofile_max = L->nofile_max;
	cgroup_self_fds(&li->cg, p->cg_fd);
	unsigned long flags = (L->userns ? CLONE_NEWUSER : 0) | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
			      CLONE_NEWUTS | (net ? 0 : CLONE_NEWNET) | SIGCHLD;
	pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid == 0)
		plan_child(p);
	if (pid < 0)
		err_sys(e, "creating the sandbox namespaces");
	li->in.pid = pid > 0 ? pid : 0;
	if (pid > 0 && (rc = start_child(L, li, p, &c, e)) == 0) {
		*out = &li->in;
		li = NULL;
	}
out:
	if (li && !p)
		free(li);
	else if (li)
		local_kill(L, &li->in);
	if (p)
		close_plan_fds(p);
	close_child_fds(&c);
	free(p);
	if (ws_fd >= 0)
		close(ws_fd);
	return rc;
}

static int local_spawn(void *ctx, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		       struct err *e)
{
	struct local *L = ctx;
	int rc = spawn_once(L, net, proxy_dir, install, out, e);
	if (rc != WS_MOVE_FAILED)
		return rc;
	/* The kernel would not take the workspace's tmpfs into a sandbox. Before the first
	 * instance, the sandbox is made on its plain folder instead, without the quota; later, an
	 * instance on another workspace than the others' would be wrong. */
	if (L->host.main)
		return -1;
	log_msg(LOG_WARNING, "the workspace quota is not enforced: %s", e->msg);
	hostdir_quota_lost(&L->host.h, e->msg);
	wsholder_stop(&L->ws);
	return spawn_once(L, net, proxy_dir, install, out, e) < 0 ? -1 : 0;
}

/* Between calls the agent says nothing: its init has either exited or not. */
static int local_alive(void *ctx, struct agent_inst *in, struct err *e)
{
	struct local *L = ctx;
	int st;
	pid_t p = in->pid > 0 ? waitpid(in->pid, &st, WNOHANG | __WALL) : -1;
	if (p == in->pid) {
		in->pid = 0; /* reaped: local_kill must not wait for it */
		agentlink_close(&in->link);
		cgroup_destroy(&LI(in)->cg);
		if (WIFSIGNALED(st))
			return err_set(e, "the sandbox's init process was killed by signal %d", WTERMSIG(st)), BACKEND_LOST;
		return err_set(e, "the sandbox's init process exited"), BACKEND_LOST;
	}
	if (in->pid <= 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	if (in == L->host.main && wsholder_gone(&L->ws))
		return err_set(e, "the process holding its workspace's tmpfs died"), BACKEND_LOST;
	return 0;
}

/* A call lost its agent: tell a dead sandbox from a broken call by ending it for good. */
static void local_lost(void *ctx, struct agent_inst *in)
{
	(void)ctx;
	if (in->pid > 0) {
		kill(in->pid, SIGKILL);
		while (waitpid(in->pid, NULL, __WALL) < 0 && errno == EINTR)
			;
		in->pid = 0;
	}
}

static int local_oom_open(void *ctx, const struct agent_inst *in)
{
	(void)ctx;
	return cgroup_oom_open(&LI(in)->cg);
}

/* What every instance needs: the folder the child mounts its root on, and the agent. */
static int local_prepare(void *ctx, struct err *e)
{
	struct local *L = ctx;
	char path[PATH_MAX + 32];
	/* The sandbox's agent may not raise its hard limit of open files above the server's: the
	 * calls get what that allows. Said once, as it is the same for every sandbox. */
	struct rlimit r;
	L->nofile_max = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_max != RLIM_INFINITY ? r.rlim_max : 0;
	static bool told;
	if (L->nofile_max && L->nofile_max < L->host.cfg->open_files && !told) {
		log_msg(LOG_WARNING, "the sandbox's calls may open %llu files, this server's hard limit (ulimit -Hn), "
				     "not --open-files %llu", (unsigned long long)L->nofile_max,
			(unsigned long long)L->host.cfg->open_files);
		told = true;
	}
	hostdir_path(path, sizeof path, "%s/root", L->host.h.dir);
	if (mkdir(path, 0755) < 0)
		return err_sys(e, "creating %s", path);
	return (L->agent_fd = agent_memfd(e)) < 0 ? -1 : 0;
}

/* Without an image on the host, the workspace is a tmpfs of the quota (wsholder.h): in a user
 * namespace of its own, which this server can make. */
static int local_quota(void *ctx, uint64_t *bytes, char *how, size_t n, struct err *e)
{
	struct local *L = ctx;
	uint64_t memory = L->host.cfg->memory;
	if (!L->userns)
		return err_set(e, "no user namespace to mount a tmpfs in");
	/* Its files take memory, counted in the sandbox's memory cgroup where there is one, and
	 * never swapped there: the code must meet ENOSPC long before the memory limit. */
	bool halved = memory && *bytes > memory / 2;
	if (halved)
		*bytes = memory / 2;
	if (wsholder_start(&L->ws, L->host.id, L->host.h.ws, *bytes, SBX_UID, SBX_GID, map_ids_cb, L, e) < 0)
		return -1;
	snprintf(how, n, "the workspace is a tmpfs of its own (memory, not disk%s)",
		 halved ? "; at most half of --memory" : "");
	return 0;
}

static void local_end(void *ctx, bool keep)
{
	struct local *L = ctx;
	(void)keep;
	wsholder_stop(&L->ws);
	if (L->agent_fd >= 0)
		close(L->agent_fd);
	L->agent_fd = -1;
}

static void local_report_isolation(void *ctx, FILE *f)
{
	struct local *L = ctx;
	const struct config *cfg = L->host.cfg;
	fprintf(f, "    isolation   %smount, pid, ipc, uts, cgroup%s namespaces; seccomp filter (%u rules); "
		   "no_new_privs; no capabilities\n",
		L->userns ? "user, " : "", cfg->network == NET_ALL ? "" : ", network", L->host.filter.rules);
	if (!L->userns)
		fprintf(f, "    mode        no user namespace (refused here: %s); the server is root and makes the "
			   "others itself, the code runs as host uid %u\n", L->no_userns, (unsigned)L->host.uid);
	fprintf(f, "    user        sandbox (uid %u inside, host uid %u)\n", L->userns ? SBX_UID : (unsigned)L->host.uid,
		(unsigned)L->host.uid);
}

static void local_report_limits(void *ctx, FILE *f)
{
	struct local *L = ctx;
	const struct config *cfg = L->host.cfg;
	const struct cgroup *cg = &LI(L->host.main)->cg;
	char sz[32];
	const char *m = cgroup_mechanism(cg, CG_MEMORY);
	fprintf(f, "    memory      %-10s %s\n", config_fmt_size(cfg->memory, sz, sizeof sz),
		m ? m
		  : cfg->gpu ? "NOT enforced: no cgroup memory controller here, and --gpu rules out the per-process "
			       "RLIMIT_AS (CUDA reserves address space far beyond memory)"
			     : "per process only (RLIMIT_AS): no cgroup memory controller here");
	m = cgroup_mechanism(cg, CG_PIDS);
	fprintf(f, "    processes   %-10llu %s\n", (unsigned long long)cfg->pids,
		m ? m : "per user (RLIMIT_NPROC): no cgroup pids controller here");
	m = cgroup_mechanism(cg, CG_CPU);
	fprintf(f, "    cpus        %-10g %s\n", cfg->cpus, m ? m : "NOT enforced: no cgroup cpu controller here");
	if (!m || !cgroup_mechanism(cg, CG_MEMORY) || !cgroup_mechanism(cg, CG_PIDS))
		fprintf(f, "                (%s)\n", cg->why);
}

static const struct agenthost_home local_home = {
	.prefix = "local",
	.quota = local_quota,
	.prepare = local_prepare,
	.spawn = local_spawn,
	.kill = local_kill,
	.check = local_alive,
	.lost = local_lost,
	.oom_open = local_oom_open,
	.report_isolation = local_report_isolation,
	.report_limits = local_report_limits,
	.end = local_end,
	.shared_net = "the host's own network, with its loopback and abstract unix sockets",
};

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

/* Does this process run in a container of an engine (Docker, Podman)? For the hints alone. */
static bool in_container(void)
{
	return access("/.dockerenv", F_OK) == 0 || access("/run/.containerenv", F_OK) == 0 || getenv("container");
}

/* Is this process confined by an AppArmor profile (an engine's docker-default)? */
static bool apparmor_confined(void)
{
	char buf[128] = "";
	int fd = open("/proc/self/attr/current", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 && strncmp(buf, "unconfined", 10) != 0;
}

/* What a containerised server lacks for the local backend, and what to start it with; "" out of
 * a container. */
static const char *container_hint(void)
{
	if (!in_container())
		return "";
	return apparmor_confined()
		? "; in a container, the engine's defaults refuse what the local sandbox needs: start it with "
		  "--security-opt seccomp=unconfined --security-opt systempaths=unconfined --security-opt "
		  "apparmor=unconfined (doc/backends.md, \"The local backend in a container\"), or use --backend "
		  "docker from it"
		: "; in a container, the engine's defaults refuse what the local sandbox needs: start it with "
		  "--security-opt seccomp=unconfined --security-opt systempaths=unconfined (doc/backends.md, "
		  "\"The local backend in a container\"), or use --backend docker from it";
}

/* Can this process make a user namespace that may mount, with a /proc of its own? 0, or -1
 * with why not and the fix. */
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
	if (pid == 0) {
		if (mount(NULL, "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(1);
		/* The kernel refuses a new proc where the one there has paths masked by mounts over
		 * them (an engine's defaults for a container). */
		_exit(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0 ? 0 : 3);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
		return err_set(e, "a /proc of the sandbox's own cannot be mounted: the /proc here has paths masked by "
				  "mounts over them");
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
	/* A sandbox is about to be made: where moving it into its cgroups waits for the kernel's
	 * lock, that wait starts now and passes while the rest is made. */
	cgroup_prewarm();
	L->userns = userns_probe(&ue) == 0;
	if (L->userns)
		return 0;
	/* Root needs no user namespace to make the others, but a sandbox user to become. */
	char why[512];
	const char *hint = container_hint();
	if (geteuid() != 0)
		return err_set(e, "%s%s", ue.msg, hint);
	if (!plain_namespaces(why, sizeof why))
		return err_set(e, "%s; %s%s", ue.msg, why, hint);
	if (!uid_mapped(b->cfg->sandbox_uid))
		return err_set(e, "%s; as root without one the code would run as uid %llu, which does not exist here",
			       ue.msg, (unsigned long long)b->cfg->sandbox_uid);
	snprintf(L->no_userns, sizeof L->no_userns, "%s", ue.msg);
	return 0;
}

static void local_init(struct backend *b)
{
	struct local *L = b->priv;
	L->agent_fd = -1;
	wsholder_init(&L->ws);
}

/* A dead server's sandbox: its cgroups go with its folder. */
static void reap_cgroups(const char *name, void *arg)
{
	(void)arg;
	cgroup_reap(name);
}

static void local_reap(const struct config *cfg)
{
	agenthost_reap(cfg, "local", reap_cgroups, NULL);
	cgroup_reap_leaves();
}

/* The local sandbox's system is the host's (/usr, /bin, /lib bound read-only), so --python is
 * looked up as the sandbox's PATH would find it: a name that is not there is known at start-up.
 * A path in the sandbox's own folders (/workspace, /tmp) names what a call may put there: it is
 * only found when a call runs. */
static int local_startup_check(const struct config *cfg, struct err *e)
{
	static const char *const path[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"};
	if (!strncmp(cfg->python, "/workspace/", 11) || !strncmp(cfg->python, "/tmp/", 5))
		return 0;
	if (strchr(cfg->python, '/'))
		return access(cfg->python, X_OK) == 0
			       ? 0
			       : err_set(e, "--python %s: no such program (%s): name a Python interpreter the host has "
					    "in /usr or /bin, which the local sandbox shares", cfg->python, strerror(errno));
	for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
		char p[PATH_MAX];
		if (hostdir_path(p, sizeof p, "%s/%s", path[i], cfg->python) == 0 && access(p, X_OK) == 0)
			return 0;
	}
	return err_set(e, "--python %s: no such program in the local sandbox's PATH (/usr/local/bin:/usr/bin:/bin): "
			  "name a Python interpreter the host has there", cfg->python);
}

const struct backend_ops local_backend_ops = {
	.name = "local",
	.workspace_dir = true,
	.ahead = true,
	.priv_size = sizeof(struct local),
	.home = &local_home,
	.init = local_init,
	.probe = local_probe,
	.startup_check = local_startup_check,
	.reap = local_reap,
};
