#include "agenthost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../../agent/proto.h"
#include "../../src/base/clock.h"
#include "../../src/base/embed.h"
#include "../../src/base/log.h"
#include "cgroup.h"
#include "installnet.h"

/* The agent, embedded at build time (the Makefile's embed.S). */
extern const unsigned char agent_blob_start[], agent_blob_end[];

void agenthost_init(struct agenthost *h, const struct agenthost_home *home, void *ctx, const struct config *cfg)
{
	memset(h, 0, sizeof *h);
	h->codenet.dir_fd = -1;
	h->home = home;
	h->ctx = ctx;
	h->cfg = cfg;
	h->oom_fd = -1;
	h->chan.fd = -1;
	hostdir_init(&h->h);
}

int agenthost_write_agent(int fd, const char *what, struct err *e)
{
	const unsigned char *p = agent_blob_start;
	size_t len = (size_t)(agent_blob_end - agent_blob_start);
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_sys(e, "writing %s", what);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Makes an instance and installs the filter in its agent, so that every process it starts
 * inherits it. */
static int spawn(struct agenthost *h, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		 struct err *e)
{
	if (h->home->spawn(h->ctx, net, proxy_dir, install, out, e) < 0)
		return -1;
	if (agentlink_filter(&(*out)->link, h->filter.bpf, h->filter.len, e) != 0) {
		h->home->kill(h->ctx, *out);
		*out = NULL;
		return -1;
	}
	return 0;
}

int agenthost_start(struct agenthost *h, struct err *e)
{
	const struct config *cfg = h->cfg;
	h->as_root = geteuid() == 0;
	h->uid = h->as_root ? (uid_t)cfg->sandbox_uid : geteuid();
	h->gid = h->as_root ? (gid_t)cfg->sandbox_uid : getegid();
	if (hostdir_state(cfg, h->state, sizeof h->state, e) < 0)
		return -1;
	unsigned char rnd[4];
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		return err_sys(e, "getrandom");
	snprintf(h->id, sizeof h->id, "%s-%02x%02x%02x%02x", h->home->prefix, rnd[0], rnd[1], rnd[2], rnd[3]);
	/* A workspace away from this host: no file system of its own here, which would reserve its
	 * blocks on this host for nothing. */
	struct config remote;
	if (h->home->ws_remote) {
		remote = *cfg;
		remote.workspace_size = 0;
		if (cfg->workspace_claim)
			remote.workspace_dir[0] = '\0'; /* a name of the home's, no host folder */
	}
	if (hostdir_open(&h->h, h->home->ws_remote ? &remote : cfg, h->state, h->id, h->uid, h->gid, e) < 0)
		return -1;
	if (hostdir_quota_open(&h->h, cfg) && h->home->quota) {
		char how[160];
		uint64_t bytes = cfg->workspace_size;
		struct err qe = {""};
		int rc = h->home->quota(h->ctx, &bytes, how, sizeof how, &qe);
		if (rc == 0) {
			hostdir_quota_by(&h->h, bytes, how, false);
		} else if (rc == BACKEND_CANCELLED) {
			return err_set(e, "%s", qe.msg);
		} else {
			/* Unexpected where the home offers it: said every time. */
			log_msg(LOG_WARNING, "could not bound the workspace: %s", qe.msg);
			hostdir_quota_lost(&h->h, qe.msg);
		}
	}
	hostdir_quota_tell(&h->h, cfg);
	if (cfg->wheelhouse[0] && access(cfg->wheelhouse, R_OK | X_OK) < 0)
		return err_sys(e, "wheelhouse %s", cfg->wheelhouse);
	if (filter_build(&h->filter, e) < 0)
		return -1;
	if (h->home->prepare && h->home->prepare(h->ctx, e) < 0)
		return -1;
	if (cfg->allow_hosts[0] && cfg->network == NET_INSTALL) {
		if (!(h->allow = malloc(sizeof *h->allow)))
			return err_set(e, "out of memory");
		if (netpolicy_parse_allow(h->allow, cfg->allow_hosts, e) < 0 ||
		    installnet_open_code(&h->codenet, h->allow, h->h.host, h->uid, e) < 0)
			return -1;
	}
	if (spawn(h, cfg->network == NET_ALL, h->allow ? h->codenet.dir : NULL, false, &h->main, e) < 0)
		return -1;
	/* What the count's file is does not change for the instance's life: found once, here. */
	h->oom_fd = h->home->oom_open(h->ctx, h->main);
	if (h->oom_fd >= 0 && cgroup_oom_read(h->oom_fd, &h->oom_seen) < 0) {
		close(h->oom_fd);
		h->oom_fd = -1;
	}
	/* The channel is a socket handed to the agent (SCM_RIGHTS), or, for an agent on a relayed
	 * stream or a container's attached stdio, a stream of its own within that one (inband). An
	 * agent with neither runs no background processes. */
	if (h->main->inband) {
		h->main->inband = false;
		return agentlink_channel_inband(&h->main->link, &h->chan, h->main->inband_fd, e) ? -1 : 0;
	}
	if (h->main->link.mux || h->main->relayed)
		return 0;
	return agentlink_channel(&h->main->link, &h->chan, e) ? -1 : 0;
}

/* The rlimits of one call's processes in instance in. */
static void call_limits(const struct agenthost *h, const struct agent_inst *in, const struct run_req *rq,
			struct agentlink_limits *lim)
{
	const struct config *cfg = h->cfg;
	int64_t left = rq->deadline_ms - clock_ms();
	memset(lim, 0, sizeof *lim);
	lim->open_files = in->nofile_max && in->nofile_max < cfg->open_files ? in->nofile_max : cfg->open_files;
	lim->file_size = cfg->file_size;
	/* What is left of the timeout, in whole seconds rounded up, and one more: the same for
	 * every call that starts within the second its timeout began, whatever fraction of it
	 * passed (a prestarted interpreter and a plain start see the same limit). */
	lim->cpu_s = ((uint64_t)(left > 0 ? left : 0) + 999) / 1000 + 1;
	if (rq->background) /* bound by its own timeout, not its wait's */
		lim->cpu_s = (rq->bg_timeout_ms + 999) / 1000 + 1;
	lim->nproc = in->rl_pids ? cfg->pids : 0;
	/* CUDA reserves address space far beyond any memory (unified addressing): under --gpu an
	 * RLIMIT_AS fails the first GPU allocation, so memory is then bounded by a cgroup or not at
	 * all, and --check says which. */
	lim->as = in->rl_memory && !cfg->gpu ? cfg->memory : 0;
	lim->spill_max = cfg->spill_max;
}

static int run_main(struct agenthost *h, const struct run_req *rq, const struct installnet *step, const char *take,
		    int stop_fd, struct run_res *rs, struct err *e);

/* The install step in the main instance, where no socket of this host reaches it (net_start):
 * its connections are carried to the proxy by the home. Its failure to reach the index is said
 * as anywhere else; a lost instance is the sandbox's. */
static int run_install_here(struct agenthost *h, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	struct installnet inet;
	if (installnet_open(&inet, h->cfg, h->h.host, h->uid, rq->env, e) < 0)
		return -1;
	char sock[64], take[64];
	installnet_socket(&inet, sock, sizeof sock);
	void *net = h->home->net_start(h->ctx, h->main, sock, take, sizeof take, e);
	int rc = -1;
	if (net) {
		struct run_req step = *rq;
		step.env = installnet_env(&inet);
		step.prestart = false;
		rc = run_main(h, &step, &inet, take, h->home->net_fd(h->ctx, net), rs, e);
		char note[300] = "";
		h->home->net_note(h->ctx, net, note, sizeof note);
		h->home->net_stop(h->ctx, net);
		if (rc == 0 && !proxy_unreachable(inet.px, rs->unreachable, sizeof rs->unreachable) && rs->exit_code &&
		    note[0])
			snprintf(rs->unreachable, sizeof rs->unreachable, "%s", note);
	}
	installnet_close(&inet);
	return rc;
}

/* The install step alone reaches the package index: in an instance of its own on the same
 * workspace, with a network of its own (no host loopback, no abstract sockets) whose only way
 * out is the server's proxy. A failure there is the step's, not the sandbox's. Where
 * the home's instances are out of this host's reach, in the main instance (run_install_here). */
static int run_install(struct agenthost *h, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	struct installnet inet;
	struct agent_inst *in = NULL;
	if (h->home->net_start)
		return run_install_here(h, rq, rs, e);
	if (h->home->direct_install && h->home->direct_install(h->ctx)) {
		/* The proxy cannot reach this instance: the step gets no network at all (a way out
		 * of its own would be the whole network, the engine's address included) and
		 * installs from --wheelhouse alone. */
		struct agentlink_limits lim;
		struct run_req step = *rq;
		size_t n = 0;
		while (rq->env && rq->env[n])
			n++;
		const char **env = calloc(n + 2, sizeof *env);
		if (!env)
			return err_set(e, "out of memory");
		for (size_t i = 0; i < n; i++)
			env[i] = rq->env[i];
		env[n] = "PIP_NO_INDEX=1";
		step.env = env;
		int rc = spawn(h, false, NULL, true, &in, e);
		if (rc == 0) {
			call_limits(h, in, rq, &lim);
			rc = agentlink_run(&in->link, &step, &lim, rs, e);
			h->home->kill(h->ctx, in);
			if (rc == 0 && rs->exit_code != 0)
				snprintf(rs->unreachable, sizeof rs->unreachable,
					 "a server in a container gives the install step no network: only --wheelhouse is "
					 "searched");
		}
		free(env);
		return rc == BACKEND_LOST ? -1 : rc;
	}
	if (installnet_open(&inet, h->cfg, h->h.host, h->uid, rq->env, e) < 0)
		return -1;
	int rc = spawn(h, false, inet.dir, true, &in, e);
	if (rc == 0) {
		struct agentlink_limits lim;
		struct run_req step = *rq;
		step.env = installnet_env(&inet);
		call_limits(h, in, rq, &lim);
		installnet_limits(&inet, &lim);
		/* An index host that cannot be reached ends the step at once: pip would spend its
		 * retries, seconds of backing off, on what the proxy already knows. */
		rc = agentlink_run_until(&in->link, &step, &lim, proxy_unreachable_fd(inet.px), -1, rs, e);
		h->home->kill(h->ctx, in);
		if (rc == 0)
			proxy_unreachable(inet.px, rs->unreachable, sizeof rs->unreachable);
	}
	installnet_close(&inet);
	return rc == BACKEND_LOST ? -1 : rc;
}

/* Tells the main instance's agent of the prestarted Python interpreter (agent/prestart.py),
 * which it starts after the call, for calls such as rq's. Once per sandbox: what fails here
 * leaves calls to plain starts. 0, or BACKEND_LOST. */
static int prestart(struct agenthost *h, const struct run_req *rq)
{
	struct agentlink_prestart ps = {.python = h->cfg->python, .env = rq->prestart_env, .script = rq->argv[1],
					.modules = h->cfg->python_preload};
	ps.source = (const char *)embed_find("agent/prestart.py", &ps.source_len);
	struct err pe = {""};
	h->prestart = true;
	int rc = ps.source ? agentlink_prestart(&h->main->link, &ps, &pe)
			   : err_set(&pe, "agent/prestart.py is not in this build");
	if (rc < 0)
		log_msg(LOG_WARNING, "Python calls start a new interpreter each: %s", pe.msg);
	return rc == BACKEND_LOST ? BACKEND_LOST : 0;
}

/* With --allow-hosts, the notice of what the proxy refused during the call. */
static void note_refusals(struct agenthost *h, struct run_res *rs)
{
	char got[PROXY_NOTE_MAX];
	if (!proxy_take_refusals(h->codenet.px, got, sizeof got))
		return;
	size_t l = strlen(rs->notice);
	snprintf(rs->notice + l, sizeof rs->notice - l, "%sthe network refused (only --allow-hosts reach out, "
		 "through the proxy at $HTTPS_PROXY): %s.", l ? " " : "", got);
}

int agenthost_run(struct agenthost *h, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	if (rq->network && h->cfg->network == NET_INSTALL)
		return run_install(h, rq, rs, e);
	if (!h->allow)
		return run_main(h, rq, NULL, NULL, -1, rs, e);
	/* The code reaches the allowed hosts through the proxy, whose variables it is given. */
	struct run_req r = *rq;
	const char **env = installnet_env_of(rq->env), **penv = NULL;
	struct netpolicy *narrow = rq->allow ? malloc(sizeof *narrow) : NULL;
	int rc;
	if (!env || (rq->prestart_env && !(penv = installnet_env_of(rq->prestart_env))) || (rq->allow && !narrow)) {
		rc = err_set(e, "out of memory");
	} else if (narrow && netpolicy_narrow(narrow, h->allow, rq->allow, e) < 0) {
		rc = -1;
	} else {
		char drop[PROXY_NOTE_MAX];
		r.env = env;
		if (penv)
			r.prestart_env = penv;
		/* The call's narrowing holds while it runs. */
		if (narrow)
			proxy_set_policy(h->codenet.px, narrow);
		proxy_take_refusals(h->codenet.px, drop, sizeof drop);
		rc = run_main(h, &r, NULL, NULL, -1, rs, e);
		if (rc == 0)
			note_refusals(h, rs);
		if (narrow)
			proxy_set_policy(h->codenet.px, h->allow);
	}
	free(narrow);
	free(env);
	free(penv);
	return rc;
}

/* A call in the main instance; step: the install step's proxy, when the call is that step
 * (run_install_here), which the home's takers reach on take, and stop_fd the home's net_fd. */
static int run_main(struct agenthost *h, const struct run_req *rq, const struct installnet *step, const char *take,
		    int stop_fd, struct run_res *rs, struct err *e)
{
	struct agentlink_limits lim;
	call_limits(h, h->main, rq, &lim);
	if (step) {
		installnet_limits(step, &lim);
		lim.relay_socket = take;
		lim.relay_take = true;
	} else if (h->allow) {
		installnet_limits(&h->codenet, &lim);
	}
	if (rq->prestart && h->cfg->python_prestart && !h->prestart && prestart(h, rq) == BACKEND_LOST)
		return err_set(e, "the sandbox agent went away"), BACKEND_LOST;
	/* An index host that cannot be reached ends the step at once, as in run_install. */
	int rc = step ? agentlink_run_until(&h->main->link, rq, &lim, proxy_unreachable_fd(step->px), stop_fd, rs, e)
		      : agentlink_run(&h->main->link, rq, &lim, rs, e);
	uint64_t oom_now;
	if (rc == 0 && h->oom_fd >= 0 && cgroup_oom_read(h->oom_fd, &oom_now) == 0) {
		if (oom_now > h->oom_seen) {
			rs->oom_killed = true;
			rs->memory_limit = h->cfg->memory;
		}
		h->oom_seen = oom_now;
	}
	if (rc == BACKEND_LOST) {
		if (h->home->lost)
			h->home->lost(h->ctx, h->main);
		agentlink_close(&h->main->link);
		if (rs->started && h->home->lost_oom && h->home->lost_oom(h->ctx, h->main, e)) {
			err_clear(e);
			rs->exit_code = 137;
			rs->oom_killed = true;
			rs->memory_limit = h->cfg->memory;
			return 0;
		}
	}
	return rc;
}

bool agenthost_has_process(const struct agenthost *h)
{
	return h->chan.fd >= 0 || h->chan_lost;
}

int agenthost_process(struct agenthost *h, const struct proc_req *rq, struct proc_res *rs, struct err *e)
{
	*rs = (struct proc_res){0};
	if (!h->main)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	if (h->chan_lost)
		return err_set(e, "the sandbox's channel for background processes was lost: an answer on it "
				  "failed");
	if (h->chan.fd < 0)
		return err_set(e, "this sandbox runs no background processes");
	int rc = agentlink_process(&h->chan, rq, rs, e);
	if (rc == BACKEND_LOST) {
		/* Out of step: an answer still to come would be read as the next request's. Closed,
		 * so that nothing of it is kept waiting either (on a relayed stream, it would hold up
		 * the calls' stream behind it). */
		agentlink_close(&h->chan);
		h->chan_lost = true;
	}
	return rc;
}

int agenthost_put(struct agenthost *h, const struct run_file *f, struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_put(&h->main->link, f, 1, e);
}

int agenthost_list(struct agenthost *h, const char *dir, const char *skip, size_t max, struct ws_list *out,
		   struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_list(&h->main->link, dir, skip, max, out, e);
}

int agenthost_list_watch(struct agenthost *h, const char *dir, const char *skip, size_t max, struct ws_list *out,
			 struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_list_watch(&h->main->link, dir, skip, max, out, e);
}

int agenthost_changes(struct agenthost *h, struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_changes(&h->main->link, e);
}

int agenthost_get(struct agenthost *h, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_get(&h->main->link, path, max, out, e);
}

/* What came with the call's end is forgotten; only an agent told of the prestarted
 * interpreter has something to start. */
void agenthost_settle(struct agenthost *h)
{
	struct err e = {""};
	if (h->main)
		agentlink_forget(&h->main->link);
	if (h->prestart && h->main && h->main->link.fd >= 0 && agentlink_settle(&h->main->link, &e) < 0)
		log_msg(LOG_DEBUG, "the sandbox agent could not be told the call is answered: %s", e.msg);
}

int agenthost_watch_fd(const struct agenthost *h)
{
	return h->main ? h->main->link.fd : -1;
}

int agenthost_check(struct agenthost *h, struct err *e)
{
	if (!h->main || h->main->link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	if (h->home->check(h->ctx, h->main, e) != 0)
		return BACKEND_LOST;
	/* Its process may not be reaped yet, but an agent that died has closed its end. */
	if (agentlink_ended(&h->main->link)) {
		if (h->home->lost)
			h->home->lost(h->ctx, h->main);
		agentlink_close(&h->main->link);
		return err_set(e, "the sandbox agent's connection ended"), BACKEND_LOST;
	}
	if (hostdir_removed(&h->h))
		return err_set(e, "its workspace %s was removed on the host", h->h.ws), BACKEND_LOST;
	if (hostdir_host_removed(&h->h))
		return err_set(e, "its folder %s, of what is bound into it, was removed on the host", h->h.host),
		       BACKEND_LOST;
	return 0;
}

int agenthost_destroy(struct agenthost *h, enum backend_end how, struct err *e)
{
	bool keep = how == BACKEND_END_SHUTDOWN && h->cfg->keep && h->h.dir[0];
	int rc = 0;
	/* Closed first: the instance's cgroup goes with it. */
	if (h->oom_fd >= 0)
		close(h->oom_fd);
	h->oom_fd = -1;
	agentlink_close(&h->chan);
	h->chan_lost = false;
	if (h->home->kill)
		h->home->kill(h->ctx, h->main);
	h->main = NULL;
	installnet_close(&h->codenet);
	free(h->allow);
	h->allow = NULL;
	filter_free(&h->filter);
	if (h->home->end)
		h->home->end(h->ctx, keep);
	if (keep)
		log_msg(LOG_NOTICE, "kept the workspace of %s at %s", h->id, h->h.ws);
	if (hostdir_close(&h->h, keep ? HOSTDIR_KEEP : how == BACKEND_END_CLEANUP ? HOSTDIR_CLEAR : HOSTDIR_REMOVE, e) < 0) {
		log_msg(LOG_WARNING, "%s", e->msg);
		rc = -1;
	}
	return rc;
}

/* --check: whether execute_python calls run in a prestarted interpreter here, tried for real:
 * told of it, the agent starts one after a call is settled, and is asked until it is ready or
 * gave up. */
static void report_python(struct agenthost *h, FILE *f)
{
	static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", NULL};
	static const char *const argv[] = {"true", WORKSPACE "/.sandbox/check.py", NULL};
	char said[1024] = "";
	unsigned phase = AG_PY_NONE, ready = 0;
	struct err e = {""};
	if (!h->cfg->python_prestart) {
		fprintf(f, "    python      a new interpreter started for each call (--no-python-prestart)\n");
		return;
	}
	struct run_req rq = {.argv = argv, .env = env, .cwd = WORKSPACE, .cancel_fd = -1, .cap = 4096,
			     .deadline_ms = clock_ms() + 10000, .prestart = true, .prestart_env = env};
	struct run_res rs = {0};
	int64_t until = clock_ms() + 10000;
	int rc = agenthost_run(h, &rq, &rs, &e);
	if (rc == 0)
		agenthost_settle(h);
	while (rc == 0 && clock_ms() < until &&
	       (rc = agentlink_preinfo(&h->main->link, &phase, &ready, said, sizeof said, &e)) == 0 &&
	       (phase == AG_PY_STARTING || phase == AG_PY_NODUMP))
		clock_sleep_ms(20);
	if (rc == 0 && phase == AG_PY_READY)
		fprintf(f, "    python      each call in a %s started ahead of it (ready %u ms after the call before)%s%s\n",
			h->cfg->python, ready, h->cfg->python_preload[0] ? ", preloading " : "", h->cfg->python_preload);
	else
		fprintf(f, "    python      a new interpreter started for each call: none can be started ahead here (%s)\n",
			rc ? e.msg : *said ? said : "it did not become ready");
	if (rc == 0 && phase == AG_PY_READY && *said)
		fprintf(f, "                not preloaded: %s\n", said);
}

void agenthost_report(struct agenthost *h, FILE *f)
{
	char net[PATH_MAX + 256];
	h->home->report_isolation(h->ctx, f);
	fprintf(f, "    network     %s\n", installnet_describe(h->cfg, h->home->shared_net, net, sizeof net));
	h->home->report_limits(h->ctx, f);
	agentlink_report_limits(h->cfg, h->main ? h->main->nofile_max : 0, f);
	report_python(h, f);
	hostdir_report_workspace(&h->h, h->cfg, h->home->ws_how, f);
	hostdir_report_quota(&h->h, h->cfg, f);
}

int agenthost_config_check(const struct config *cfg, struct err *e)
{
	char state[PATH_MAX];
	return hostdir_state(cfg, state, sizeof state, e);
}

void agenthost_reap(const struct config *cfg, const char *prefix, void (*gone)(const char *name, void *arg),
		    void *arg)
{
	char state[PATH_MAX], p[64];
	struct err e = {""};
	snprintf(p, sizeof p, "%s-", prefix);
	if (hostdir_state(cfg, state, sizeof state, &e) == 0)
		hostdir_reap(state, p, gone, arg);
}
