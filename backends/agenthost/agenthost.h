/*
 * The agent host: what the backends that run sandbox-agent on this machine's kernel (local,
 * Docker) share, written once. A sandbox here is a folder of the state folder (hostdir.h)
 * holding its workspace, the seccomp filter (filter.h), and a main instance: a process tree
 * whose init is the agent, to which the server holds a connection (agentlink.h). The install
 * step of --network install runs in an instance of its own on the same workspace, with no
 * network but the server's filtering proxy (installnet.h); where no socket of this host reaches
 * the instances (a pod), in the main one, its connections carried out by the home (net_start).
 *
 * The backends differ only in how an instance -- the agent's home -- is made and ended: Linux
 * namespaces the server makes itself, or a container the engine makes. That is their struct
 * agenthost_home; everything else (the start, the call limits, the install step, the
 * out-of-memory check, keep or remove, the --check lines) is here.
 */
#ifndef SANDBOX_AGENTHOST_H
#define SANDBOX_AGENTHOST_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../../src/base/config.h"
#include "../../src/base/err.h"
#include "../run/run.h"
#include "agentlink.h"
#include "filter.h"
#include "hostdir.h"
#include "installnet.h"

/* One instance, connected to its agent. A home's own instance struct begins with it. */
struct agent_inst {
	struct agentlink link;
	pid_t pid;                 /* its init, as this host sees it; 0 when not known */
	bool rl_memory, rl_pids;   /* the home cannot bound these: rlimits for each call instead */
	bool relayed;              /* the agent talks through a relay of bytes (a remote stream): no
	                            * descriptor reaches it, so it has no channel unless in band */
	bool inband;               /* relayed, with the channel's end of its stream in inband_fd
	                            * (agentlink_channel_inband), which the main instance's start
	                            * takes; a home closes one not taken */
	int inband_fd;
	uint64_t nofile_max;       /* the most open files a call may be given (the hard limit its
	                            * agent inherits, which it may not raise); 0: no bound known */
};

struct agenthost;

/* How a backend makes and ends the agent's home. ctx is the backend's, given to agenthost_init. */
struct agenthost_home {
	const char *prefix;        /* of sandbox ids and folders: "local" -> local-1a2b3c4d */
	/* Once, before the first instance, with the sandbox's folder made: what every instance
	 * needs (the agent's copy, an image). 0, or -1 with e set. May be NULL. */
	int (*prepare)(void *ctx, struct err *e);
	/* Once, before prepare, when the host folder does not bound the workspace
	 * (hostdir_quota_open): bounds it to *bytes (which it may lower) the home's own way, on a
	 * file system that its instances alone see, saying how in `how` (for --check). 0, -1 with
	 * e saying why not (the sandbox is made without the quota), or BACKEND_CANCELLED when the
	 * making was cancelled meanwhile (agenthost_start fails). May be NULL. */
	int (*quota)(void *ctx, uint64_t *bytes, char *how, size_t n, struct err *e);
	/* Makes an instance on the workspace and connects to its agent (agentlink_open); net:
	 * the host's network; proxy_dir: the folder of a proxy of the server's (installnet.h),
	 * bound at INSTALLNET_DIR, or NULL; install: the instance is the install step's (it sees
	 * no --mount folder). 0 with *out set (the home's struct), or -1 with e set and nothing
	 * left. */
	int (*spawn)(void *ctx, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		     struct err *e);
	/* Ends an instance, reaps it and frees it. NULL is fine. */
	void (*kill)(void *ctx, struct agent_inst *in);
	/* Between calls: has the instance's init died? 0, or BACKEND_LOST with e saying how (what
	 * died reaped). */
	int (*check)(void *ctx, struct agent_inst *in, struct err *e);
	/* The connection to the instance broke during a call: what the home knows about why. May
	 * be NULL. */
	void (*lost)(void *ctx, struct agent_inst *in);
	/* Then: whether the home knows that the out-of-memory killer ended the instance (a pod's
	 * status says so): the call then ends as killed for memory (oom_killed, exit code 137),
	 * not as a lost sandbox; the next call finds it gone. Else it may add to e, the call's
	 * error, what it knows of why (a pod's status's reason and message). May be NULL. */
	bool (*lost_oom)(void *ctx, struct agent_inst *in, struct err *e);
	/* Once per sandbox, after its main instance is made: the file that counts the times the
	 * out-of-memory killer ended a process of the instance (cgroup_oom_open), which each call
	 * reads once, after it ends; the caller owns the fd. -1 when that cannot be told. */
	int (*oom_open)(void *ctx, const struct agent_inst *in);
	/* --check: the lines before the network's (isolation, user) and after it (memory,
	 * processes, cpus). */
	void (*report_isolation)(void *ctx, FILE *f);
	void (*report_limits)(void *ctx, FILE *f);
	/* The sandbox ends: what prepare made goes (keep: the workspace is kept with --keep). May
	 * be NULL. */
	void (*end)(void *ctx, bool keep);
	/* Where no socket of this host leads into the home's instances (a pod): the install step
	 * runs in the main instance, whose agent hands each connection of the step to a taker on
	 * the socket net_start names in take (an abstract one, "@NAME", new for each step;
	 * AG_RUN_RELAY_TAKE), and the home carries them to the proxy's unix socket at proxy_path
	 * here, from net_start until net_stop (its handle), or NULL with e set. net_fd: an fd that turns readable once that way is hopeless (the step
	 * is then stopped, as for an index that cannot be reached); net_note: what the step's
	 * failure should say of that way, into buf ("" for nothing). All four, or net_start NULL:
	 * a second instance, with the proxy's folder bound. */
	void *(*net_start)(void *ctx, struct agent_inst *in, const char *proxy_path, char *take, size_t take_n,
			   struct err *e);
	int (*net_fd)(void *ctx, void *net);
	void (*net_note)(void *ctx, void *net, char *buf, size_t n);
	void (*net_stop)(void *ctx, void *net);
	/* Whether the install step must go out on the shared network itself: the server's proxy
	 * (a unix socket in a host folder) cannot reach this home's instances now. May be NULL. */
	bool (*direct_install)(void *ctx);
	/* The workspace is the home's own, away from this host (a pod's volume, which its quota
	 * hook bounds): the host folder gets no file system of its own. */
	bool ws_remote;
	const char *shared_net;    /* what --network all gives, for --check */
	const char *ws_how;        /* how the sandbox sees the workspace, for --check; NULL: nothing */
};

struct agenthost {
	const struct agenthost_home *home;
	void *ctx;
	const struct config *cfg;
	char id[64];               /* the sandbox's id; "" before agenthost_start */
	char state[PATH_MAX];      /* the state folder */
	struct hostdir h;          /* the sandbox's folder and workspace */
	struct filter filter;
	struct agent_inst *main;   /* NULL when there is none */
	bool prestart;             /* the main instance's agent was told of the prestarted Python */
	int oom_fd;                /* the main instance's OOM kill count (oom_open); -1 when none */
	uint64_t oom_seen;         /* its value after the last call (or when the instance was made):
	                            * a kill since then, as during a call, is that call's */
	uid_t uid;                 /* the sandbox user on the host: --sandbox-uid as root, else ours */
	gid_t gid;
	bool as_root;
	/* --allow-hosts: the code's way out, the server's proxy for the allowed hosts, bound into
	 * the main instance and relayed to for each call; allow: the list (NULL: no such way). */
	struct netpolicy *allow;
	struct installnet codenet;
	struct agentlink chan;     /* the main agent's channel for background processes (agentlink.h);
	                            * used by agenthost_process alone, from any one thread */
	bool chan_lost;            /* an answer on it failed (late, malformed): closed, since the next
	                            * answer read there could be the one that failed */
};

/* Sets h up, with nothing made yet (destroy is safe from here on). */
void agenthost_init(struct agenthost *h, const struct agenthost_home *home, void *ctx, const struct config *cfg);

/* Makes the sandbox: its folder and workspace, the filter, the home's preparation, the main
 * instance. 0 with h->id set, or -1 with e set (then agenthost_destroy removes what was made). */
int agenthost_start(struct agenthost *h, struct err *e);

/* Whether the sandbox runs background processes (agenthost_process): not where its agent talks
 * on a container's attached stdio (no channel can be handed to it there). */
bool agenthost_has_process(const struct agenthost *h);

/* The backend ops (backend.h), for the backends built on the agent host. */
int agenthost_run(struct agenthost *h, const struct run_req *rq, struct run_res *rs, struct err *e);
int agenthost_put(struct agenthost *h, const struct run_file *f, struct err *e);
int agenthost_list(struct agenthost *h, const char *dir, const char *skip, size_t max, struct ws_list *out,
		   struct err *e);
int agenthost_list_watch(struct agenthost *h, const char *dir, const char *skip, size_t max, struct ws_list *out,
			 struct err *e);
int agenthost_changes(struct agenthost *h, struct err *e);
int agenthost_get(struct agenthost *h, const char *path, size_t max, struct ws_file *out, struct err *e);
int agenthost_watch_fd(const struct agenthost *h);
int agenthost_process(struct agenthost *h, const struct proc_req *rq, struct proc_res *rs, struct err *e);
void agenthost_settle(struct agenthost *h);
int agenthost_check(struct agenthost *h, struct err *e);
int agenthost_destroy(struct agenthost *h, enum backend_end how, struct err *e);
void agenthost_report(struct agenthost *h, FILE *f);

/* At start-up, before anything is made: whether the state folder is usable (hostdir_state),
 * so that a bad one is refused then and not met by the first call. 0, or -1 with e set. */
int agenthost_config_check(const struct config *cfg, struct err *e);

/* At start-up: removes the folders <prefix>-* of the state folder whose server is gone; gone
 * (may be NULL) as hostdir_reap says. */
void agenthost_reap(const struct config *cfg, const char *prefix, void (*gone)(const char *name, void *arg),
		    void *arg);

/* What a sandbox is called inside, and its /etc/hosts: nothing of the host's name. */
#define AGENTHOST_HOSTNAME "sandbox"
#define AGENTHOST_ETC_HOSTS "127.0.0.1\tlocalhost " AGENTHOST_HOSTNAME "\n::1\tlocalhost ip6-localhost ip6-loopback\n"

/* Writes the embedded sandbox-agent binary to fd (from its start). 0, or -1 with e set. */
int agenthost_write_agent(int fd, const char *what, struct err *e);

#endif
