/*
 * The Kubernetes backend: the sandbox is one Pod (kpod.h: hardened in its spec) in a cluster
 * whose API server this server reaches with the credentials client-go would use (kcreds.h),
 * running the same in-sandbox agent, speaking the same protocol, as the local and Docker
 * backends, so that calls give the same results.
 *
 * The pod's command waits for the agent's binary in an emptyDir of its own, then becomes it
 * (`sandbox-agent --stdio`, the pod's PID 1, as the agent must be: it ends a call's processes
 * with kill(-1)). The server attaches to the container's stdin and stdout (pods/attach over a
 * WebSocket, kexec.h) before it writes the binary there through one exec (kpod_put), so the
 * agent's greeting comes on the attached stream; that one stream then carries every call, for
 * the sandbox's life: a relay thread (krelay.h) joins it to a socket pair, on which the agent
 * link (agentlink.h) talks as to a local agent. A warm call makes no HTTP request: its bytes go
 * both ways on the open stream. stdinOnce: when the stream goes, the agent's stdin ends, the
 * agent ends and with it the pod.
 *
 * Each pod comes with a NetworkPolicy that denies its egress (kpod_netpol), made before it and
 * deleted after it.
 *
 * With --kube-warm-pool, where the agent-sandbox CRDs are served, the pod is claimed from that
 * SandboxWarmPool instead (a SandboxClaim): the cluster made it from a template this server did
 * not write, so it is read and refused unless it is hardened as ours and runs the same starter
 * (kpod_check_claimed); one NetworkPolicy per server, made once, selects the pool's pods by the
 * label of their template (a pod without it is refused); then it is used as a cold one. The
 * claim goes with the sandbox.
 *
 * With --workspace NAME the workspace is the PersistentVolumeClaim NAME (made when it is not
 * there, never deleted here), mounted in place of the emptyDir; cleanup_sandbox empties it
 * through the pod before the pod goes (k8s_destroy).
 *
 * Once the agent greeted, the stream is cut into chunks of two streams (agentlink_mux,
 * krelay_mux): the calls', and the background processes' channel, which no descriptor passed
 * could give the agent here.
 *
 * The install step (--network install's pip) runs in the sandbox's pod: its connections leave
 * the pod through takers the server runs there, an exec each (knet.h), to the server's filtering
 * proxy, so the NetworkPolicy stays closed. Not yet: --allow-hosts, refused where it is asked for.
 * --check says the cluster's version, the permissions (a SelfSubjectAccessReview each), what
 * its API serves, and the test pod's start step by step.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/log.h"
#include "../../src/base/procstart.h"
#include "../agenthost/agenthost.h"
#include "../backend.h"
#include "kapi.h"
#include "kcreds.h"
#include "kexec.h"
#include "knet.h"
#include "kpod.h"
#include "krelay.h"

#define DEFAULT_IMAGE "python:3.12-slim"
#define START_TIMEOUT_MS 120000L
#define PUT_TIMEOUT_MS 30000L
#define AGENT_WAIT_MS 30000
#define OOM_LOOK_MS 2000L
/* The pod's deadline: the cluster ends a pod whose server died by then at the latest. */
#define DEADLINE_S (24L * 3600)

extern const struct backend_ops kubernetes_backend_ops;

/* The embedded agent (the Makefile's embed.S), written into the pod. */
extern const unsigned char agent_blob_start[], agent_blob_end[];

struct k8s_opts {
	char ns[254];
	char image[256];
	char context[128];
	char runtime_class[64];
	char warm_pool[254];
};

struct k8s_inst {
	struct agent_inst in;    /* first: the agent host's */
	char name[64];           /* ours: the NetworkPolicy's, the claim's, a cold pod's */
	char pod[254];           /* the pod's: name, or the claimed Sandbox's */
	struct kexec x;
	struct krelay relay;
	bool pod_made, pol_made, claim_made;
};

struct k8s {
	struct agenthost host;   /* first: the agent host's (backend.h) */
	const struct k8s_opts *o;
	struct kapi api;
	char ns[254];
	char self_host[200], self_start[32], self_pid[16];
	/* The last pod's start, step by step (ms), for --check; claimed: from the warm pool. */
	int64_t t_pol, t_create, t_running, t_attach, t_put, t_agent;
	bool claimed;
};

#define KI(in) ((struct k8s_inst *)(void *)(in))

static void self_labels(struct k8s *K)
{
	char host[128] = "?", ns[64] = "";
	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "?");
	host[sizeof host - 1] = '\0';
	ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
	ns[n > 0 ? n : 0] = '\0';
	/* The PID namespace's inode with the host name: a pid means something on that pair alone. */
	snprintf(K->self_host, sizeof K->self_host, "%.60s.%s", host, ns[0] ? ns + strcspn(ns, "0123456789") : "0");
	K->self_host[strcspn(K->self_host, "]")] = '\0';
	unsigned long long t = 0;
	if (procstart(getpid(), &t) < 0)
		t = 0;
	snprintf(K->self_start, sizeof K->self_start, "%llu", t);
	snprintf(K->self_pid, sizeof K->self_pid, "%d", (int)getpid());
}

/* Whether the pod's labels name a server on this host that is gone. */
static bool owner_gone(json_t *labels, void *arg)
{
	struct k8s *K = arg;
	char host[64];
	kpod_label_value(K->self_host, host, sizeof host);
	const char *h = json_string_value(json_object_get(labels, KPOD_LABEL_HOST));
	const char *pid = json_string_value(json_object_get(labels, KPOD_LABEL_PID));
	const char *start = json_string_value(json_object_get(labels, KPOD_LABEL_START));
	if (!h || strcmp(h, host) || !pid || !start)
		return false; /* another host's: its own server judges, or the pod's deadline */
	char *end;
	long p = strtol(pid, &end, 10);
	if (*end || p <= 0)
		return false;
	if (p == (long)getpid())
		return strcmp(start, K->self_start) != 0;
	if (kill((pid_t)p, 0) < 0 && errno == ESRCH)
		return true;
	unsigned long long t;
	char now[32];
	if (procstart((pid_t)p, &t) < 0)
		return false;
	snprintf(now, sizeof now, "%llu", t);
	return strcmp(now, start) != 0;
}

static int open_api(struct k8s *K, const struct k8s_opts *o, struct err *e)
{
	if (K->api.open)
		return 0;
	struct kcreds c;
	if (kcreds_load(&c, o->context, KCREDS_SA_DIR, e) < 0)
		return -1;
	snprintf(K->ns, sizeof K->ns, "%s", o->ns[0] ? o->ns : c.ns);
	if (kapi_open(&K->api, &c, e) < 0) {
		kapi_close(&K->api);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- the home */

static int k8s_prepare(void *ctx, struct err *e)
{
	struct k8s *K = ctx;
	return open_api(K, K->o, e);
}

static void k8s_kill(void *ctx, struct agent_inst *ai)
{
	struct k8s *K = ctx;
	if (!ai)
		return;
	struct k8s_inst *in = KI(ai);
	if (in->in.inband)
		close(in->in.inband_fd);
	agentlink_close(&in->in.link);
	krelay_stop(&in->relay);
	kexec_close(&in->x);
	/* The claim first: its Sandbox would make a deleted pod again. */
	if (in->claim_made) {
		struct err e = {""};
		if (kpod_claim_delete(&K->api, K->ns, in->name, 15000, &e) < 0)
			log_msg(LOG_WARNING, "kubernetes: sandboxclaim %s/%s: %s", K->ns, in->name, e.msg);
	}
	if (in->pod_made) {
		struct err e = {""};
		if (kpod_delete(&K->api, K->ns, in->pod, 15000, &e) < 0)
			log_msg(LOG_WARNING, "kubernetes: pod %s/%s: %s", K->ns, in->pod, e.msg);
	}
	if (in->pol_made) {
		struct err e = {""};
		if (kpod_netpol_delete(&K->api, K->ns, in->name, 15000, &e) < 0)
			log_msg(LOG_WARNING, "kubernetes: networkpolicy %s/%s: %s", K->ns, in->name, e.msg);
	}
	free(in);
}

/* The size the workspace's claim asks for (--workspace-size; 1 GiB where that is 0: a claim
 * asks for some). */
static uint64_t claim_bytes(const struct config *cfg)
{
	return cfg->workspace_size ? cfg->workspace_size : 1u << 30;
}

/* The workspace's size: a tmpfs counts in the pod's memory, so at most half of it, as Docker's
 * tmpfs volume. */
static uint64_t ws_bytes(const struct config *cfg)
{
	uint64_t b = cfg->workspace_size ? cfg->workspace_size : cfg->memory / 2;
	return cfg->memory && b > cfg->memory / 2 ? cfg->memory / 2 : b;
}

static int k8s_quota(void *ctx, uint64_t *bytes, char *how, size_t n, struct err *e)
{
	struct k8s *K = ctx;
	(void)e;
	if (K->host.cfg->workspace_claim) {
		*bytes = claim_bytes(K->host.cfg);
		snprintf(how, n, "the PersistentVolumeClaim %.60s's storage request: its volume's size, where its storage "
				 "class enforces one", K->host.cfg->workspace_dir);
		return 0;
	}
	*bytes = ws_bytes(K->host.cfg);
	snprintf(how, n, "the pod's memory-backed emptyDir (tmpfs) at /workspace, of that sizeLimit (memory, not disk; "
			 "at most half of --memory)");
	return 0;
}

/* A pod made here: its NetworkPolicy first (the pod never runs a moment without it), the pod,
 * then a watch until it runs. 0, or -1 with e set. */
static int cold_pod(struct k8s *K, struct k8s_inst *in, const struct kpod_spec *sp, struct err *e)
{
	int64_t t = clock_ms();
	json_t *pol = kpod_netpol(sp);
	int rc = pol ? kpod_netpol_create(&K->api, K->ns, pol, false, e) : err_set(e, "out of memory");
	json_decref(pol);
	if (rc < 0)
		return -1;
	in->pol_made = true;
	K->t_pol = clock_ms() - t;
	t = clock_ms();
	json_t *pod = kpod_spec(sp);
	if (!pod)
		return err_set(e, "out of memory");
	rc = kpod_create(&K->api, K->ns, pod, e);
	json_decref(pod);
	if (rc < 0)
		return -1;
	in->pod_made = true;
	K->t_create = clock_ms() - t;
	t = clock_ms();
	if (kpod_wait_running(&K->api, K->ns, in->pod, START_TIMEOUT_MS, e) < 0)
		return -1;
	K->t_running = clock_ms() - t;
	return 0;
}

/* The server's warm pool, shared by its sandboxes: what it names and the one NetworkPolicy that
 * denies the egress of the pods claimed from it. A server's sandboxes come one at a time (the
 * engine's worker thread, or --check's), yet each has a backend of its own, so this lives once in
 * the process, under its lock. The pool is read once (at start-up, by k8s_reap, else by the first
 * sandbox) and again only when a claim says it changed (refused, or its pod not of the template
 * the policy selects); the policy is made once, before the first claimed pod's agent is written,
 * made again only when the pool's template changed, and deleted at the server's end
 * (k8s_shutdown). */
#define POOL_READ (KPOD_NO_CRDS + 1)
static struct {
	pthread_mutex_t mu;
	int state;                 /* 0 not read; POOL_READ (tpl); KPOD_NO_CRDS */
	char tpl[254];             /* the pool's SandboxTemplate */
	char ns[254];              /* the server's namespace (one per server) */
	char pol[64];              /* the policy's name, "" until made */
	char pol_tpl[254];         /* the template its pods are selected by */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The pool read and its policy made, if not yet: into tpl (n bytes). 0; KPOD_NO_CRDS; -1 with e. */
static int pool_ready(struct k8s *K, char *tpl, size_t n, struct err *e)
{
	const struct k8s_opts *o = K->o;
	pthread_mutex_lock(&pool.mu);
	int rc = 0;
	if (pool.state == 0) {
		rc = kpod_pool_template(&K->api, K->ns, o->warm_pool, pool.tpl, sizeof pool.tpl, e);
		if (rc == KPOD_NO_CRDS)
			log_msg(LOG_NOTICE, "kubernetes: the agent-sandbox CRDs are not installed: a pod made here, not one "
					    "claimed from the warm pool %s (for each sandbox of this server)", o->warm_pool);
		pool.state = rc < 0 ? 0 : rc == KPOD_NO_CRDS ? KPOD_NO_CRDS : POOL_READ;
		snprintf(pool.ns, sizeof pool.ns, "%s", K->ns);
	}
	if (pool.state == POOL_READ && pool.pol[0] && strcmp(pool.pol_tpl, pool.tpl)) {
		/* The pool now keeps pods of another template: its policy goes, a new one comes. */
		if (kpod_netpol_delete(&K->api, K->ns, pool.pol, 15000, e) < 0)
			rc = -1;
		else
			pool.pol[0] = '\0';
	}
	if (rc == 0 && pool.state == POOL_READ && !pool.pol[0]) {
		/* Named after the server (its host, pid and start): one per server, its own. */
		char key[300], h[9], name[64];
		snprintf(key, sizeof key, "%s/%s/%s", K->self_host, K->self_pid, K->self_start);
		kpod_template_hash(key, h);
		snprintf(name, sizeof name, "sandbox-mcp-pool-%s-%s", h, K->self_pid);
		json_t *pol = kpod_pool_netpol(name, pool.tpl, K->self_pid, K->self_start, K->self_host);
		rc = pol ? kpod_netpol_create(&K->api, K->ns, pol, true, e) : err_set(e, "out of memory");
		json_decref(pol);
		if (rc >= 0) {
			rc = 0;
			snprintf(pool.pol, sizeof pool.pol, "%s", name);
			snprintf(pool.pol_tpl, sizeof pool.pol_tpl, "%s", pool.tpl);
		}
	}
	if (rc == 0 && pool.state == POOL_READ)
		snprintf(tpl, n, "%s", pool.tpl);
	rc = rc < 0 ? -1 : pool.state == KPOD_NO_CRDS ? KPOD_NO_CRDS : 0;
	pthread_mutex_unlock(&pool.mu);
	return rc;
}

/* Something said the pool changed: it is read again by the next sandbox. */
static void pool_forget(void)
{
	pthread_mutex_lock(&pool.mu);
	pool.state = 0;
	pthread_mutex_unlock(&pool.mu);
}

/* A sandbox claimed from the warm pool: the pool's policy there (made once), the claim, then its
 * pod read and checked (it is the cluster's, made from a template this server did not write,
 * and must carry the label the policy selects). 0; KPOD_NO_CRDS (nothing made: a cold pod
 * instead); -1 with e set (what was made is marked for k8s_kill). */
static int claim_pod(struct k8s *K, struct k8s_inst *in, struct kpod_spec *sp, struct err *e)
{
	const struct k8s_opts *o = K->o;
	char tpl[254], hash[9];
	int64_t t = clock_ms();
	int rc = pool_ready(K, tpl, sizeof tpl, e);
	if (rc)
		return rc;
	K->t_pol = clock_ms() - t;
	t = clock_ms();
	if (kpod_claim(&K->api, K->ns, sp, tpl, o->warm_pool, START_TIMEOUT_MS, in->pod, sizeof in->pod, &in->claim_made,
		       e) < 0) {
		pool_forget();
		return -1;
	}
	K->claimed = true;
	in->pod_made = true;
	K->t_create = clock_ms() - t;
	t = clock_ms();
	json_t *pod = NULL;
	if (kpod_get(&K->api, K->ns, in->pod, 15000, &pod, e) < 0)
		return -1;
	kpod_template_hash(tpl, hash);
	rc = kpod_check_claimed(pod, in->pod, hash, o->runtime_class, e);
	const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
	bool running = phase && !strcmp(phase, "Running");
	json_decref(pod);
	if (rc < 0) {
		pool_forget();
		char m[sizeof e->msg];
		snprintf(m, sizeof m, "%s", e->msg);
		err_clear(e);
		return err_set(e, "refused the sandbox claimed from the warm pool %s: %.900s", o->warm_pool, m);
	}
	if (!running && kpod_wait_running(&K->api, K->ns, in->pod, START_TIMEOUT_MS, e) < 0)
		return -1;
	K->t_running = clock_ms() - t;
	return 0;
}

static int spawn_pod(struct k8s *K, struct k8s_inst *in, struct err *e)
{
	const struct config *cfg = K->host.cfg;
	const struct k8s_opts *o = K->o;
	const char *cmd[] = {"sh", "-c", KPOD_STARTER, NULL};
	struct kpod_spec sp = {
		.name = in->name, .image = o->image[0] ? o->image : DEFAULT_IMAGE, .runtime_class = o->runtime_class,
		.uid = (uint32_t)(cfg->sandbox_uid ? cfg->sandbox_uid : 65534), .cpus = cfg->cpus, .memory = cfg->memory,
		.workspace = ws_bytes(cfg), .tmp = cfg->tmp_size, .agent_dir = 64u << 20, .deadline_s = DEADLINE_S,
		.command = cmd, .stdin = true,
		.pid = K->self_pid, .start = K->self_start, .host = K->self_host, .sandbox = K->host.id};
	sp.ephemeral = sp.agent_dir + (64u << 20); /* the agent's folder, and the container's logs */
	if (cfg->workspace_claim) {
		bool made;
		sp.ws_claim = cfg->workspace_dir;
		if (kpod_pvc_ensure(&K->api, K->ns, cfg->workspace_dir, claim_bytes(cfg), &made, e) < 0)
			return -1;
		if (made)
			log_msg(LOG_NOTICE, "kubernetes: made the workspace's PersistentVolumeClaim %s/%s", K->ns,
				cfg->workspace_dir);
	}
	K->t_pol = K->t_create = K->t_running = K->t_attach = K->t_put = K->t_agent = -1;
	K->claimed = false;
	int rc = o->warm_pool[0] ? claim_pod(K, in, &sp, e) : KPOD_NO_CRDS;
	if (rc < 0)
		return -1;
	if (rc == KPOD_NO_CRDS) {
		snprintf(in->pod, sizeof in->pod, "%s", in->name);
		if (cold_pod(K, in, &sp, e) < 0)
			return -1;
	}
	int64_t t = clock_ms();
	/* Attached first: the agent's greeting comes on its stdout as soon as the binary is there. */
	char path[1024];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/attach?container=sandbox&stdin=true&stdout=true&stderr=true",
		 K->ns, in->pod);
	if (kexec_open(&in->x, &K->api.creds, path, 30000, e) < 0)
		return -1;
	K->t_attach = clock_ms() - t;
	t = clock_ms();
	int fd = -1;
	if (krelay_start(&in->relay, &in->x, &fd, e) < 0)
		return -1;
	if (kpod_put(&K->api, K->ns, in->pod, KPOD_AGENT_PATH, agent_blob_start, (size_t)(agent_blob_end - agent_blob_start),
		     PUT_TIMEOUT_MS, e) < 0) {
		close(fd);
		return -1;
	}
	K->t_put = clock_ms() - t;
	t = clock_ms();
	in->in.relayed = true;
	if (agentlink_open(&in->in.link, fd, AGENT_WAIT_MS, e) < 0) {
		char why[256];
		krelay_why(&in->relay, why, sizeof why);
		if (why[0])
			err_set(e, "the agent in pod %s did not start: %s", in->pod, why);
		return -1;
	}
	/* The stream in chunks, so that the background processes' channel rides on it too. */
	if (agentlink_mux(&in->in.link, e) != 0)
		return -1;
	krelay_mux(&in->relay, &in->in.inband_fd);
	in->in.inband = true;
	K->t_agent = clock_ms() - t;
	return 0;
}

static int k8s_spawn(void *ctx, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		     struct err *e)
{
	struct k8s *K = ctx;
	(void)net;
	if (install) /* run_install_here's, in the main pod */
		return err_set(e, "the install step runs in the sandbox's pod on the kubernetes backend");
	if (proxy_dir)
		return err_set(e, "--allow-hosts is not available on the kubernetes backend yet");
	struct k8s_inst *in = calloc(1, sizeof *in);
	if (!in)
		return err_set(e, "out of memory");
	in->in.link.fd = -1;
	kexec_init(&in->x);
	krelay_init(&in->relay);
	/* The sandbox's id is "k8s-XXXXXXXX": what is made for it is named after it. */
	snprintf(in->name, sizeof in->name, "sandbox-mcp-%s", K->host.id + strcspn(K->host.id, "-") + 1);
	snprintf(in->pod, sizeof in->pod, "%s", in->name);
	if (spawn_pod(K, in, e) < 0) {
		k8s_kill(K, &in->in);
		return -1;
	}
	*out = &in->in;
	return 0;
}

/* Between calls the agent says nothing: readable means the stream or the agent ended. */
static int k8s_alive(void *ctx, struct agent_inst *ai, struct err *e)
{
	(void)ctx;
	if (!agentlink_ended(&ai->link))
		return 0;
	char why[256];
	krelay_why(&KI(ai)->relay, why, sizeof why);
	agentlink_close(&ai->link);
	return err_set(e, "its agent went away (%s)", why[0] ? why : "the stream ended"), BACKEND_LOST;
}

static void k8s_lost(void *ctx, struct agent_inst *ai)
{
	struct k8s *K = ctx;
	char why[256];
	krelay_why(&KI(ai)->relay, why, sizeof why);
	log_msg(LOG_WARNING, "kubernetes: lost the agent of pod %s/%s: %s", K->ns, KI(ai)->pod, why[0] ? why : "no reason known");
}

/* The stream broke: whether the pod's container was OOM-killed, as its status says; else why
 * it ended, added to the call's error. The kubelet writes that after the kill, so it is read
 * again for a short while (OOM_LOOK_MS) until the container or the pod is seen ended, or the
 * pod gone. */
static bool k8s_lost_oom(void *ctx, struct agent_inst *ai, struct err *e)
{
	struct k8s *K = ctx;
	int64_t until = clock_ms() + OOM_LOOK_MS;
	char why[700] = "";
	int r = -1;
	for (;;) {
		json_t *pod = NULL;
		struct err ge = {""};
		int64_t left = until - clock_ms();
		if (left <= 0)
			break;
		if (kpod_get(&K->api, K->ns, KI(ai)->pod, (long)left, &pod, &ge) < 0) {
			if (strstr(ge.msg, "HTTP 404 "))
				snprintf(why, sizeof why, "the pod was deleted (not by this server)");
			break;
		}
		r = kpod_ended(pod, why, sizeof why);
		json_decref(pod);
		if (r >= 0 || clock_ms() + 100 >= until)
			break;
		poll(NULL, 0, 100);
	}
	if (r == 1) {
		log_msg(LOG_WARNING, "kubernetes: pod %s/%s: its container was OOM-killed", K->ns, KI(ai)->pod);
		return true;
	}
	if (why[0]) {
		log_msg(LOG_WARNING, "kubernetes: pod %s/%s: %s", K->ns, KI(ai)->pod, why);
		size_t l = strlen(e->msg);
		snprintf(e->msg + l, sizeof e->msg - l, "%s%s", l ? "; " : "", why);
	}
	return false;
}

static int k8s_oom_open(void *ctx, const struct agent_inst *in)
{
	(void)ctx;
	(void)in;
	return -1;
}

/* The install step runs in the sandbox's pod: its connections come out through takers (knet.h). */
static void *k8s_net_start(void *ctx, struct agent_inst *in, const char *proxy_path, char *take, size_t take_n,
			   struct err *e)
{
	struct k8s *K = ctx;
	struct knet *k = knet_start(&K->api.creds, K->ns, KI(in)->pod, K->host.cfg->python, proxy_path, e);
	if (k)
		snprintf(take, take_n, "%s", knet_socket(k));
	return k;
}

static int k8s_net_fd(void *ctx, void *net)
{
	(void)ctx;
	return knet_hopeless_fd(net);
}

static void k8s_net_note(void *ctx, void *net, char *buf, size_t n)
{
	(void)ctx;
	char why[256];
	unsigned carried = knet_carried(net, why, sizeof why);
	if (why[0])
		snprintf(buf, n, "the install step's connections could not be carried out of the pod (%u were): %s",
			 carried, why);
}

static void k8s_net_stop(void *ctx, void *net)
{
	(void)ctx;
	knet_stop(net);
}

/* cleanup_sandbox empties the workspace's claim, as a --workspace folder is emptied elsewhere,
 * through the pod before it goes (the server never mounts the claim). The claim stays. */
static int k8s_destroy(struct backend *b, enum backend_end how, struct err *e)
{
	struct k8s *K = b->priv;
	struct err ce = {""};
	int rc = 0;
	if (how == BACKEND_END_CLEANUP && b->cfg->workspace_claim) {
		if (!K->host.main)
			rc = err_set(&ce, "its pod is gone");
		else
			rc = kpod_empty_workspace(&K->api, K->ns, KI(K->host.main)->pod, PUT_TIMEOUT_MS, &ce);
		if (rc < 0)
			log_msg(LOG_WARNING, "kubernetes: the workspace's claim %s/%s was not emptied: %s", K->ns,
				b->cfg->workspace_dir, ce.msg);
	}
	if (agenthost_destroy(&K->host, how, e) < 0)
		return -1;
	return rc < 0 ? err_set(e, "the workspace's claim %s was not emptied: %s", b->cfg->workspace_dir, ce.msg) : 0;
}

static void k8s_end(void *ctx, bool keep)
{
	struct k8s *K = ctx;
	(void)keep;
	kapi_close(&K->api);
}

/* A GET's status and body (rs), and the ms it took. */
static long get(struct k8s *K, const char *path, struct http_resp *rs, int64_t *ms)
{
	struct err e = {""};
	int64_t t = clock_ms();
	int rc = kapi_call(&K->api, "GET", path, NULL, 10000, NULL, NULL, rs, &e);
	*ms = clock_ms() - t;
	return rc < 0 ? -1 : rs->status;
}

/* --check's lines on the cluster: its version, the permissions the backend needs (one
 * SelfSubjectAccessReview each), what its API serves, and the test pod's steps. */
static void report_cluster(struct k8s *K, FILE *f)
{
	struct http_resp rs = {0};
	int64_t ms;
	long st = get(K, "/version", &rs, &ms);
	const char *v = json_string_value(json_object_get(rs.json, "gitVersion"));
	fprintf(f, "    version     %.60s (GET /version: HTTP %ld, %lld ms)\n", v ? v : "unknown", st, (long long)ms);
	http_resp_free(&rs);
	/* The fifth column: "" always; "c" with a workspace claim; "w" with --kube-warm-pool. */
	static const char *const need[][5] = {
		{"create", "pods", "", "", ""},	    {"get", "pods", "", "", ""},	  {"list", "pods", "", "", ""},
		{"watch", "pods", "", "", ""},	    {"delete", "pods", "", "", ""},	  {"create", "pods", "exec", "", ""},
		{"create", "pods", "attach", "", ""}, {"create", "networkpolicies", "", "networking.k8s.io", ""},
		{"delete", "networkpolicies", "", "networking.k8s.io", ""},
		{"list", "networkpolicies", "", "networking.k8s.io", ""},
		{"get", "persistentvolumeclaims", "", "", "c"},
		{"create", "persistentvolumeclaims", "", "", "c"},
		{"get", "sandboxwarmpools", "", "extensions.agents.x-k8s.io", "w"},
		{"create", "sandboxclaims", "", "extensions.agents.x-k8s.io", "w"},
		{"get", "sandboxclaims", "", "extensions.agents.x-k8s.io", "w"},
		{"delete", "sandboxclaims", "", "extensions.agents.x-k8s.io", "w"},
	};
	char denied[512] = "";
	size_t dl = 0, nok = 0, n = 0;
	int64_t t = clock_ms();
	for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
		if ((need[i][4][0] == 'c' && !K->host.cfg->workspace_claim) || (need[i][4][0] == 'w' && !K->o->warm_pool[0]))
			continue;
		n++;
		json_t *body = json_pack("{s:s, s:s, s:{s:{s:s, s:s, s:s, s:s, s:s}}}", "apiVersion", "authorization.k8s.io/v1",
					 "kind", "SelfSubjectAccessReview", "spec", "resourceAttributes", "namespace", K->ns,
					 "verb", need[i][0], "resource", need[i][1], "subresource", need[i][2], "group", need[i][3]);
		struct err e = {""};
		int rc = body ? kapi_call(&K->api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body, 10000,
					  NULL, NULL, &rs, &e)
			      : -1;
		json_decref(body);
		if (rc == 0 && (rs.status == 201 || rs.status == 200) &&
		    json_is_true(json_object_get(json_object_get(rs.json, "status"), "allowed")))
			nok++;
		else if (dl < sizeof denied)
			dl += (size_t)snprintf(denied + dl, sizeof denied - dl, "%s%s %s%s%s%s", dl ? ", " : "", need[i][0],
					       need[i][1], need[i][2][0] ? "/" : "", need[i][2], rc == 0 && rs.status >= 300 ? " (no answer)" : "");
		http_resp_free(&rs);
	}
	fprintf(f, "    permissions %zu of %zu allowed in namespace %s (a SelfSubjectAccessReview each, %lld ms)%s%s\n", nok, n,
		K->ns, (long long)(clock_ms() - t), dl ? "; DENIED: " : "", denied);
	st = get(K, "/apis/networking.k8s.io/v1", &rs, &ms);
	bool np = st == 200 && strstr(rs.body ? rs.body : "", "\"networkpolicies\"");
	http_resp_free(&rs);
	fprintf(f, "    policies    NetworkPolicies %s (%lld ms); whether they are enforced is the network plugin's, "
		   "which the API does not say\n", np ? "served" : "NOT served: egress is not denied", (long long)ms);
	st = get(K, "/apis/extensions.agents.x-k8s.io/v1alpha1", &rs, &ms);
	bool crd = st == 200 && strstr(rs.body ? rs.body : "", "\"sandboxclaims\"");
	http_resp_free(&rs);
	fprintf(f, "    agent-sandbox CRDs %s (%lld ms); %s%s\n", crd ? "installed" : "not installed", (long long)ms,
		!K->o->warm_pool[0] ? "no --kube-warm-pool: pods made here"
		: crd		    ? "sandboxes claimed from the warm pool "
				    : "pods made here, not claimed from the warm pool ",
		K->o->warm_pool[0] ? K->o->warm_pool : "");
	if (K->t_agent >= 0 && K->claimed)
		fprintf(f, "    test pod    pool read and its policy %lld ms, claimed %lld ms, checked and running %lld ms, "
			   "attached %lld ms, agent written %lld ms, agent ready %lld ms; called above, its claim deleted as "
			   "--check ends\n",
			(long long)K->t_pol, (long long)K->t_create, (long long)K->t_running, (long long)K->t_attach,
			(long long)K->t_put, (long long)K->t_agent);
	else if (K->t_agent >= 0)
		fprintf(f, "    test pod    policy %lld ms, pod created %lld ms, running %lld ms, attached %lld ms, agent "
			   "written %lld ms, agent ready %lld ms; called above, deleted as --check ends\n",
			(long long)K->t_pol, (long long)K->t_create, (long long)K->t_running, (long long)K->t_attach,
			(long long)K->t_put, (long long)K->t_agent);
}

/* --check's line on the workspace's claim: whether it is there, bound, of what capacity. */
static void report_claim(struct k8s *K, FILE *f)
{
	const char *name = K->host.cfg->workspace_dir;
	json_t *pvc = NULL;
	struct err e = {""};
	if (kpod_pvc_get(&K->api, K->ns, name, &pvc, &e) < 0) {
		fprintf(f, "    workspace claim %s: could not be read: %s\n", name, e.msg);
		return;
	}
	if (!pvc) {
		fprintf(f, "    workspace claim %s: does not exist; made with the next sandbox (ReadWriteOnce, storage %llu)\n",
			name, (unsigned long long)claim_bytes(K->host.cfg));
		return;
	}
	json_t *st = json_object_get(pvc, "status");
	const char *phase = json_string_value(json_object_get(st, "phase"));
	const char *cap = json_string_value(json_object_get(json_object_get(st, "capacity"), "storage"));
	fprintf(f, "    workspace claim %s: exists, %s%.40s, capacity %.40s; mounted at " KPOD_WORKSPACE ", kept across "
		   "sandboxes and restarts, never deleted by the server; cleanup_sandbox empties it\n",
		name, phase && !strcmp(phase, "Bound") ? "" : "NOT bound: phase ", phase && !strcmp(phase, "Bound") ? "bound" : phase ? phase : "unknown",
		cap ? cap : "unknown");
	json_decref(pvc);
}

static void k8s_report_isolation(void *ctx, FILE *f)
{
	struct k8s *K = ctx;
	report_cluster(K, f);
	fprintf(f, "    cluster     %s (%s), namespace %s\n", K->api.creds.server, K->api.creds.source, K->ns);
	fprintf(f, "    image       %s\n", K->o->image[0] ? K->o->image : DEFAULT_IMAGE);
	fprintf(f, "    isolation   a pod of its own%s%s; runAsNonRoot, no privilege escalation, no capabilities, "
		   "RuntimeDefault seccomp plus the server's filter (%u rules), read-only root, no service account "
		   "token; what the cluster enforces of it depends on its admission and runtime\n",
		K->o->runtime_class[0] ? ", runtimeClassName " : "", K->o->runtime_class, K->host.filter.rules);
	fprintf(f, "    egress      denied by a NetworkPolicy made with each pod%s; enforced only where the cluster's "
		   "network plugin enforces NetworkPolicies (without a NetworkPolicy controller it does nothing, and "
		   "every process of the pod, the code's and the install step's, reaches what the pod network "
		   "reaches)\n",
		K->o->warm_pool[0] ? " (claimed pods: one per server, selecting the pool template's pods)" : "");
	if (K->host.cfg->network == NET_INSTALL)
		fprintf(f, "    installs    in the sandbox's pod, through the server's filtering proxy, which lets through "
			   "only the package index; the step's connections leave the pod through an exec each (a "
			   "taker of the server's, run by the image's Python), not through the pod network, which the "
			   "egress policy keeps closed (where it is enforced: else a process that ignores the proxy "
			   "variables reaches the pod network)\n");
	if (K->host.cfg->workspace_claim)
		report_claim(K, f);
	if (K->o->warm_pool[0])
		fprintf(f, "    warm pool   %s: each claimed pod is checked hardened as above and running the agent's "
			   "starter before use, or refused; its image, limits and deadline are its template's\n",
			K->o->warm_pool);
}

static void k8s_report_limits(void *ctx, FILE *f)
{
	struct k8s *K = ctx;
	const struct config *cfg = K->host.cfg;
	char sz[32];
	fprintf(f, "    memory      %-10s the container's memory limit (enforced by the kubelet's cgroup)\n",
		config_fmt_size(cfg->memory, sz, sizeof sz));
	fprintf(f, "    processes   %-10llu NOT enforced: the pod's pids limit is the node's (kubelet podPidsLimit)\n",
		(unsigned long long)cfg->pids);
	fprintf(f, "    cpus        %-10g the container's CPU limit\n", cfg->cpus);
	fprintf(f, "    not yet     --allow-hosts is refused on this backend\n");
}

static const struct agenthost_home k8s_home = {
	.prefix = "k8s",
	.quota = k8s_quota,
	.prepare = k8s_prepare,
	.spawn = k8s_spawn,
	.kill = k8s_kill,
	.check = k8s_alive,
	.lost = k8s_lost,
	.lost_oom = k8s_lost_oom,
	.oom_open = k8s_oom_open,
	.report_isolation = k8s_report_isolation,
	.report_limits = k8s_report_limits,
	.end = k8s_end,
	.net_start = k8s_net_start,
	.net_fd = k8s_net_fd,
	.net_note = k8s_net_note,
	.net_stop = k8s_net_stop,
	.ws_remote = true,
	.shared_net = "the cluster's pod network",
	.ws_how = "the pod's emptyDir at /workspace",
};

/* ---------------------------------------------------------------- ops */

static void k8s_init(struct backend *b)
{
	struct k8s *K = b->priv;
	K->o = b->opts;
}

/* auto tries it only where it is configured (a namespace named); named, it says why not. */
static int k8s_probe(struct backend *b, struct err *e)
{
	struct k8s *K = b->priv;
	if (strcmp(b->cfg->backend, "kubernetes") && !K->o->ns[0])
		return err_set(e, "not configured (--kube-namespace)"), BACKEND_ABSENT;
	return open_api(K, K->o, e);
}

static int k8s_start(struct backend *b, int cancel_fd, struct err *e)
{
	struct k8s *K = b->priv;
	K->api.http.cancel_fd = cancel_fd;
	self_labels(K);
	int rc = open_api(K, K->o, e);
	if (rc == 0)
		rc = agenthost_start(&K->host, e);
	bool cancelled = K->api.http.cancelled;
	K->api.http.cancel_fd = -1;
	return rc < 0 && cancelled ? BACKEND_CANCELLED : rc;
}

static bool k8s_present(const struct config *cfg)
{
	int i = backend_index(&kubernetes_backend_ops);
	const struct k8s_opts *o = i >= 0 ? cfg->backend_opts[i] : NULL;
	return o && o->ns[0];
}

/* At start-up: the credentials are found and the API server answers /version, within a few
 * seconds; else the server does not start, saying why. */
static int k8s_startup_check(const struct config *cfg, struct err *e)
{
	int i = backend_index(&kubernetes_backend_ops);
	const struct k8s_opts *o = i >= 0 ? cfg->backend_opts[i] : NULL;
	if (!o || (strcmp(cfg->backend, "kubernetes") && !o->ns[0]))
		return 0;
	struct kcreds c;
	struct kapi a;
	struct err ce = {""};
	if (kcreds_load(&c, o->context, KCREDS_SA_DIR, &ce) < 0)
		return err_set(e, "--backend kubernetes: %s", ce.msg);
	char server[sizeof c.server];
	snprintf(server, sizeof server, "%s", c.server);
	int rc = kapi_open(&a, &c, &ce);
	struct http_resp rs = {0};
	if (rc == 0)
		rc = kapi_call(&a, "GET", "/version", NULL, 5000, NULL, NULL, &rs, &ce);
	if (rc == 0 && rs.status != 200)
		rc = kapi_fail(&rs, "GET /version", &ce);
	http_resp_free(&rs);
	kapi_close(&a);
	return rc < 0 ? err_set(e, "--backend kubernetes: the API server %s: %s", server, ce.msg) : 0;
}

static int k8s_opts_check(const void *opts, const struct config *cfg, struct err *e)
{
	const struct k8s_opts *o = opts;
	if (cfg->workspace_claim) {
		const char *w = cfg->workspace_dir;
		size_t n = strlen(w);
		bool ok = n && n <= 253 && isalnum((unsigned char)w[0]) && isalnum((unsigned char)w[n - 1]);
		for (size_t i = 0; ok && i < n; i++)
			ok = (w[i] >= 'a' && w[i] <= 'z') || (w[i] >= '0' && w[i] <= '9') || w[i] == '-' || w[i] == '.';
		if (!ok)
			return err_set(e, "--workspace %.80s: on kubernetes --workspace names a PersistentVolumeClaim in the "
					  "namespace (a DNS-1123 name: lowercase letters, digits, '-' and '.'), not a host folder", w);
		if (o->warm_pool[0])
			return err_set(e, "--workspace cannot be used with --kube-warm-pool: a claimed pod's volumes are its "
					  "template's");
	}
	/* The wheelhouse is a folder of this host, which no pod sees. */
	if (cfg->wheelhouse[0] && (!strcmp(cfg->backend, "kubernetes") || (!strcmp(cfg->backend, "auto") && o->ns[0])))
		return err_set(e, "--wheelhouse: a folder of this host, which no pod sees: on kubernetes packages install "
				  "from --index-url through the server's proxy, or come with the image (--kube-image)%s",
			       strcmp(cfg->backend, "auto") ? "" : " (auto tries kubernetes, as --kube-namespace is set)");
	if (strpbrk(o->image, " \t\r\n"))
		return err_set(e, "--kube-image must name one image");
	for (const char *p = o->ns; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return err_set(e, "--kube-namespace must be a DNS label");
	for (const char *p = o->runtime_class; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			return err_set(e, "--kube-runtime-class must be a RuntimeClass's name");
	for (const char *p = o->warm_pool; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
			return err_set(e, "--kube-warm-pool must be a SandboxWarmPool's name");
	return 0;
}

/* At start-up, once: the folders, then the claims, pods and NetworkPolicies of servers of this
 * host that are gone, where the backend is configured (not on every sandbox's path). */
static void k8s_reap(const struct config *cfg)
{
	agenthost_reap(cfg, "k8s", NULL, NULL);
	int i = backend_index(&kubernetes_backend_ops);
	const struct k8s_opts *o = i >= 0 ? cfg->backend_opts[i] : NULL;
	if (!o || (strcmp(cfg->backend, "kubernetes") && !o->ns[0]))
		return;
	struct k8s *K = calloc(1, sizeof *K);
	struct err e = {""};
	if (!K)
		return;
	self_labels(K);
	if (open_api(K, o, &e) == 0) {
		int n = kpod_reap(&K->api, K->ns, owner_gone, K, &e);
		if (n > 0)
			log_msg(LOG_NOTICE, "kubernetes: deleted %d pod%s of servers that are gone", n, n == 1 ? "" : "s");
		/* The warm pool read and its policy made now, off the first sandbox's path. What fails
		 * here is tried again by the first sandbox, whose call then says why. */
		char tpl[254];
		K->o = o;
		if (o->warm_pool[0] && pool_ready(K, tpl, sizeof tpl, &e) < 0)
			log_msg(LOG_NOTICE, "kubernetes: the warm pool %s: %s", o->warm_pool, e.msg);
	}
	kapi_close(&K->api);
	free(K);
}

/* At the server's end, after its last sandbox: the warm pool's policy deleted. */
static void k8s_shutdown(const struct config *cfg)
{
	int i = backend_index(&kubernetes_backend_ops);
	const struct k8s_opts *o = i >= 0 ? cfg->backend_opts[i] : NULL;
	char name[sizeof pool.pol], ns[sizeof pool.ns];
	pthread_mutex_lock(&pool.mu);
	snprintf(name, sizeof name, "%s", pool.pol);
	snprintf(ns, sizeof ns, "%s", pool.ns);
	pool.pol[0] = '\0';
	pool.state = 0;
	pthread_mutex_unlock(&pool.mu);
	struct k8s *K = name[0] && o ? calloc(1, sizeof *K) : NULL;
	if (!K)
		return;
	struct err e = {""};
	if (open_api(K, o, &e) < 0 || kpod_netpol_delete(&K->api, ns, name, 15000, &e) < 0)
		log_msg(LOG_WARNING, "kubernetes: networkpolicy %s/%s: %s", ns, name, e.msg);
	kapi_close(&K->api);
	free(K);
}

#define O(field) OPT_FIELD(struct k8s_opts, field)
static const struct opt k8s_options[] = {
	{"kube-namespace", "SANDBOX_KUBE_NAMESPACE", OPT_STR, O(ns), "",
	 "Kubernetes: namespace of the pods (default: the context's); set, auto tries Kubernetes"},
	{"kube-image", "SANDBOX_KUBE_IMAGE", OPT_STR, O(image), DEFAULT_IMAGE, "Kubernetes: image of the sandbox pod"},
	{"kube-context", "SANDBOX_KUBE_CONTEXT", OPT_STR, O(context), "",
	 "Kubernetes: kubeconfig context (default: its current-context)"},
	{"kube-runtime-class", "SANDBOX_KUBE_RUNTIME_CLASS", OPT_STR, O(runtime_class), "",
	 "Kubernetes: runtimeClassName of the pods (gVisor, Kata: what the cluster has)"},
	{"kube-warm-pool", "SANDBOX_KUBE_WARM_POOL", OPT_STR, O(warm_pool), "",
	 "Kubernetes: claim each sandbox from this agent-sandbox SandboxWarmPool (its pods checked hardened as ours)"},
};

const struct backend_ops kubernetes_backend_ops = {
	.name = "kubernetes",
	.opts = k8s_options,
	.nopts = sizeof k8s_options / sizeof k8s_options[0],
	.opts_size = sizeof(struct k8s_opts),
	.opts_check = k8s_opts_check,
	.env_help = "  KUBECONFIG           Kubernetes: the kubeconfig (default $HOME/.kube/config); unset, in a\n"
		    "                       pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT set),\n"
		    "                       its service account\n",
	.priv_size = sizeof(struct k8s),
	.home = &k8s_home,
	.workspace_dir = true,
	.workspace_claim = true,
	.init = k8s_init,
	.present = k8s_present,
	.probe = k8s_probe,
	.start = k8s_start,
	.destroy = k8s_destroy,
	.startup_check = k8s_startup_check,
	.reap = k8s_reap,
	.shutdown = k8s_shutdown,
};
