/*
 * The Docker backend: the sandbox is one container per workspace, made through the Docker
 * Engine API (dkapi.h; Podman's compatible socket works too), with the same in-sandbox agent
 * and the same wire protocol as the local backend, so calls give the same results.
 *
 * The container runs the server's own static sandbox-agent as its PID 1 (no --init): the
 * binary is written under the state folder and bind-mounted read-only at /.sandbox-agent, and
 * it listens on /run/sandbox-agent/agent.sock, a bind of a host folder, so the server connects
 * to it directly (same kernel) and no call goes through the engine: a warm call is one round
 * trip on a unix socket, as on the local backend. Timeouts and cancellation kill the call's
 * processes the same way: the agent kills every process of the container's PID namespace.
 *
 * The container: an unprivileged user (--sandbox-uid, 65534, when the server runs as root;
 * else the server's own uid), every capability dropped, no-new-privileges, the engine's
 * default seccomp profile plus the server's filter (backends/agenthost/filter.h) installed by the agent, a
 * read-only root, /tmp a tmpfs of --tmp-size, network "none" (--network all: the engine's
 * default bridge), memory (no swap), CPU and process limits from the configuration, and labels
 * naming the server that made it (sandbox-mcp=1, sandbox-mcp.pid, .start, .host, .sandbox).
 *
 * Host side, a sandbox is a folder <state-dir>/docker-<id>, like a local sandbox's: a lock (so
 * a later server can tell a dead server's leftovers), the workspace, bind-mounted at
 * /workspace (the engine is on this machine anyway, since we reach the agent's socket through
 * a host folder; a bind keeps ownership simple and --keep meaningful), the agent binary and
 * one run-N folder per container for its socket.
 *
 * With --network install, the install step runs in a second, short-lived container on the same
 * workspace with the engine's default bridge network, running the same agent; it is removed as
 * soon as pip ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "../backend.h"
#include "../../src/base/clock.h"
#include "../agenthost/agentlink.h"
#include "../agenthost/cgroup.h"
#include "../agenthost/filter.h"
#include "../agenthost/hostdir.h"
#include "../agenthost/installnet.h"
#include "../../src/base/log.h"
#include "../agenthost/tree.h"
#include "dkapi.h"

#define DEFAULT_IMAGE "python:3.12-slim"
#define AGENT_IN "/.sandbox-agent"
#define RUN_IN "/run/sandbox-agent"
#define SOCK_NAME "agent.sock"
#define LABEL "sandbox-mcp"

/* Engine call timeouts, ms. */
#define T_QUICK 15000L
#define T_CREATE 60000L
#define T_PULL 600000L
/* How long a started container's agent may take to listen. */
#define AGENT_WAIT_MS 20000

/* The agent, embedded at build time (see embed.S). */
extern const unsigned char agent_blob_start[], agent_blob_end[];

/* The backend's own options (--image). */
struct docker_opts {
	char image[256];
};

struct docker_inst {
	char id[80];           /* the container's id; "" when none */
	char run[PATH_MAX];    /* host folder bound at RUN_IN; "" when none */
	struct agentlink link;
	pid_t pid;             /* its init (the agent) as this host sees it; 0 unknown */
};

struct docker {
	struct dkapi eng;
	char image[256];
	char state[PATH_MAX];  /* the state folder */
	struct hostdir h;      /* this sandbox's folder and workspace */
	char agent[PATH_MAX];  /* the agent binary, bound into every container */
	struct filter filter;
	struct docker_inst main;
	unsigned seq;
	unsigned uid, gid;     /* the container's user */
	bool rl_memory, rl_pids; /* the engine could not limit these: fall back to rlimits */
	char host[256];        /* labels: this server */
	char start_time[32];
};

/* ---------------------------------------------------------------- small helpers */

/* Field 22 of /proc/PID/stat (start time in clock ticks): with the pid, names a process. */
static int proc_start(long pid, char *buf, size_t n)
{
	char path[64], st[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, st, sizeof st - 1);
	close(fd);
	if (r <= 0)
		return -1;
	st[r] = '\0';
	char *p = strrchr(st, ')');
	if (!p)
		return -1;
	/* After ") " come fields 3 onwards; field 22 is the 20th of them. */
	p++;
	for (int field = 2; field < 22 && p; field++) {
		p = strchr(p + 1, ' ');
	}
	if (!p)
		return -1;
	size_t len = strcspn(p + 1, " ");
	if (len == 0 || len >= n)
		return -1;
	memcpy(buf, p + 1, len);
	buf[len] = '\0';
	return 0;
}

static void self_labels(struct docker *D)
{
	if (gethostname(D->host, sizeof D->host) < 0)
		snprintf(D->host, sizeof D->host, "?");
	D->host[sizeof D->host - 1] = '\0';
	if (proc_start(getpid(), D->start_time, sizeof D->start_time) < 0)
		snprintf(D->start_time, sizeof D->start_time, "?");
}

/* Image names go into URL paths: keep them to the characters image references use. */
static bool image_ok(const char *s)
{
	return *s && strlen(s) < 256 && s[0] != '-' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") == strlen(s);
}

/* Writes the embedded agent to path, mode 0555. */
static int write_agent(const char *path, struct err *e)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0700);
	if (fd < 0)
		return err_sys(e, "creating %s", path);
	const unsigned char *p = agent_blob_start;
	size_t len = (size_t)(agent_blob_end - agent_blob_start);
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err_sys(e, "writing %s", path);
			close(fd);
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, 0555) < 0) {
		err_sys(e, "chmod %s", path);
		close(fd);
		return -1;
	}
	if (close(fd) < 0)
		return err_sys(e, "writing %s", path);
	return 0;
}

/* ---------------------------------------------------------------- containers */

static void remove_container(struct dkapi *eng, const char *id)
{
	char path[160];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	snprintf(path, sizeof path, "/containers/%s?force=1&v=1", id);
	/* A loaded engine may take longer than a quick request: once more, with the time a
	 * create gets, rather than leave the container behind. */
	int rc = dkapi_call(eng, "DELETE", path, NULL, T_QUICK, &status, &ans, &e);
	if (rc < 0 && !eng->http.cancelled) {
		err_clear(&e);
		rc = dkapi_call(eng, "DELETE", path, NULL, T_CREATE, &status, &ans, &e);
	}
	if (rc < 0)
		log_msg(LOG_WARNING, "could not remove container %.12s: %s", id, e.msg);
	else if (status != 204 && status != 404)
		log_msg(LOG_WARNING, "could not remove container %.12s: %s (HTTP %ld)", id,
			dkapi_message(ans, "the engine refused"), status);
	json_decref(ans);
}

/* Removes a container by name, whatever the caller's cancellation says (quick, bounded). */
static void remove_by_name(struct docker *D, const char *name)
{
	int fd = D->eng.http.cancel_fd;
	D->eng.http.cancel_fd = -1;
	remove_container(&D->eng, name);
	D->eng.http.cancel_fd = fd;
}

static void inst_kill(struct docker *D, struct docker_inst *in)
{
	agentlink_close(&in->link);
	if (in->id[0]) {
		remove_container(&D->eng, in->id);
		in->id[0] = '\0';
	}
	if (in->run[0]) {
		if (tree_remove(in->run) < 0)
			log_msg(LOG_WARNING, "could not remove %s: %s", in->run, strerror(errno));
		in->run[0] = '\0';
	}
}

static json_t *mount_spec(const char *src, const char *dst, bool ro)
{
	return json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source", src, "Target", dst, "ReadOnly", ro);
}

/* The create request of a container on D's workspace; `net`: the engine's default network. */
static json_t *container_spec(struct backend *b, const struct docker_inst *in, bool net, const char *role,
			      const char *proxy_dir)
{
	struct docker *D = b->priv;
	const struct config *cfg = b->cfg;
	char user[32], pid[24], tmpfs[96];
	snprintf(user, sizeof user, "%u:%u", D->uid, D->gid);
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	snprintf(tmpfs, sizeof tmpfs, "rw,nosuid,nodev,size=%llu,mode=1777", (unsigned long long)cfg->tmp_size);
	json_t *mounts = json_pack("[o, o, o]", mount_spec(D->h.ws, WORKSPACE, false), mount_spec(in->run, RUN_IN, false),
				   mount_spec(D->agent, AGENT_IN, true));
	if (mounts && cfg->wheelhouse[0])
		json_array_append_new(mounts, mount_spec(cfg->wheelhouse, "/wheelhouse", true));
	if (mounts && proxy_dir)
		json_array_append_new(mounts, mount_spec(proxy_dir, INSTALLNET_DIR, false));
	/* The install step sees no --mount folder: it runs code from the package index. */
	for (size_t i = 0; mounts && !proxy_dir && i < cfg->mounts.n; i++)
		json_array_append_new(mounts, mount_spec(cfg->mounts.v[i].host, cfg->mounts.v[i].inside, !cfg->mounts.v[i].rw));
	json_t *host = json_pack(
		"{s:o, s:b, s:[s], s:[s], s:s, s:I, s:I, s:I, s:I, s:{s:s, s:s}, s:I, s:b, s:b, s:s, s:s, s:{s:s}}",
		"Mounts", mounts, "ReadonlyRootfs", 1, "CapDrop", "ALL", "SecurityOpt", "no-new-privileges",
		"NetworkMode", net ? "bridge" : "none", "Memory", (json_int_t)cfg->memory, "MemorySwap",
		(json_int_t)cfg->memory, "NanoCpus", (json_int_t)(cfg->cpus * 1e9), "PidsLimit", (json_int_t)cfg->pids,
		"Tmpfs", "/tmp", tmpfs, "/sys", "ro,nosuid,nodev,noexec,size=4k", "ShmSize", (json_int_t)cfg->tmp_size, "Init", 0, "Privileged", 0, "IpcMode",
		"private", "CgroupnsMode", "private", "RestartPolicy", "Name", "no");
	return json_pack("{s:s, s:[s], s:[s, s], s:s, s:s, s:s, s:[], s:I, s:{s:s, s:s, s:s, s:s, s:s, s:s}, s:o}",
			 "Image", D->image, "Entrypoint", AGENT_IN, "Cmd", "--listen", RUN_IN "/" SOCK_NAME, "User", user,
			 "WorkingDir", WORKSPACE, "Hostname", "sandbox", "Env", "StopTimeout", (json_int_t)1, "Labels",
			 LABEL, "1", LABEL ".pid", pid, LABEL ".start", D->start_time, LABEL ".host", D->host,
			 LABEL ".sandbox", b->sandbox_id, LABEL ".role", role, "HostConfig", host);
}

/* Reads what the engine says about a container that should be running. */
static void container_state(struct docker *D, const char *id, char *buf, size_t n, bool *running)
{
	char path[128];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	*running = true;
	snprintf(buf, n, "state unknown");
	snprintf(path, sizeof path, "/containers/%s/json", id);
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) < 0) {
		snprintf(buf, n, "%s", e.msg);
	} else if (status == 404) {
		*running = false;
		snprintf(buf, n, "the container is gone");
	} else if (status == 200) {
		json_t *st = json_object_get(ans, "State");
		*running = json_is_true(json_object_get(st, "Running"));
		const char *err = json_string_value(json_object_get(st, "Error"));
		snprintf(buf, n, "the container %s (exit code %lld%s%s%s)", *running ? "runs" : "stopped",
			 (long long)json_integer_value(json_object_get(st, "ExitCode")), err && *err ? ": " : "",
			 err ? err : "", json_is_true(json_object_get(st, "OOMKilled")) ? ", out of memory" : "");
	}
	json_decref(ans);
}

/* The host pid of a running container's init, or 0. */
static pid_t container_pid(struct docker *D, const char *id)
{
	char path[128];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	snprintf(path, sizeof path, "/containers/%s/json", id);
	pid_t pid = 0;
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) == 0 && status == 200)
		pid = (pid_t)json_integer_value(json_object_get(json_object_get(ans, "State"), "Pid"));
	json_decref(ans);
	return pid > 0 ? pid : 0;
}

/* Connects to the agent's socket once it listens; the fd, or -1 with e set. */
static int wait_agent(struct docker *D, struct docker_inst *in, struct err *e)
{
	int dfd = open(in->run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, "opening %s", in->run);
	/* Through /proc/self/fd, so that a long state folder cannot overflow sun_path. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/" SOCK_NAME, dfd);
	int64_t until = clock_ms() + AGENT_WAIT_MS, next_check = clock_ms() + 300;
	int fd = -1;
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			err_sys(e, "socket");
			break;
		}
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			break;
		int saved = errno;
		close(fd);
		fd = -1;
		if (saved != ENOENT && saved != ECONNREFUSED && saved != EAGAIN) {
			errno = saved;
			err_sys(e, "connecting to the sandbox agent in %s", in->run);
			break;
		}
		if (clock_ms() >= next_check) {
			char why[512];
			bool running;
			container_state(D, in->id, why, sizeof why, &running);
			if (!running) {
				err_set(e, "the sandbox container stopped before its agent listened: %s", why);
				break;
			}
			next_check = clock_ms() + 300;
		}
		if (clock_ms() >= until) {
			err_set(e, "the sandbox agent did not listen on %s/%s within %d s (the engine must run on this "
				   "machine's kernel, with the state folder visible to it)", in->run, SOCK_NAME,
				AGENT_WAIT_MS / 1000);
			break;
		}
		struct pollfd cp = {D->eng.http.cancel_fd, POLLIN, 0};
		if (poll(&cp, D->eng.http.cancel_fd >= 0 ? 1 : 0, 5) > 0) {
			D->eng.http.cancelled = true;
			err_set(e, "cancelled");
			break;
		}
	}
	close(dfd);
	return fd;
}

/* Starts a container on D's workspace and connects to its agent. */
static int inst_spawn(struct backend *b, struct docker_inst *in, bool net, const char *role, const char *proxy_dir,
		      struct err *e)
{
	struct docker *D = b->priv;
	char name[128], path[256], why[512];
	long status = 0;
	json_t *ans = NULL;
	memset(in, 0, sizeof *in);
	in->link.fd = -1;
	unsigned n = D->seq++;
	if (hostdir_path(in->run, sizeof in->run, "%s/run-%u", D->h.host, n) < 0)
		return err_set(e, "the state folder's path is too long");
	if (mkdir(in->run, 0700) < 0 || chown(in->run, D->uid, D->gid) < 0) {
		err_sys(e, "creating %s", in->run);
		goto fail;
	}
	json_t *spec = container_spec(b, in, net, role, proxy_dir);
	if (!spec) {
		err_set(e, "out of memory");
		goto fail;
	}
	snprintf(name, sizeof name, "sandbox-mcp-%s-%u", b->sandbox_id, n);
	snprintf(path, sizeof path, "/containers/create?name=%s", name);
	int rc = dkapi_call(&D->eng, "POST", path, spec, T_CREATE, &status, &ans, e);
	json_decref(spec);
	if (rc < 0) {
		/* The request may have reached the engine before it was cut short: the container
		 * may exist. Its name is ours alone. */
		if (D->eng.http.cancelled)
			remove_by_name(D, name);
		goto fail;
	}
	const char *id = json_string_value(json_object_get(ans, "Id"));
	if (status != 201 || !id || strlen(id) >= sizeof in->id) {
		err_set(e, "the engine refused to create the sandbox container: %s (HTTP %ld)",
			dkapi_message(ans, "no container id"), status);
		goto fail;
	}
	snprintf(in->id, sizeof in->id, "%s", id);
	size_t i;
	json_t *w;
	json_array_foreach(json_object_get(ans, "Warnings"), i, w) {
		const char *s = json_string_value(w);
		if (!s)
			continue;
		log_msg(LOG_WARNING, "docker: %s", s);
		if (strstr(s, "emory"))
			D->rl_memory = true;
		if (strstr(s, "PID") || strstr(s, "pids"))
			D->rl_pids = true;
	}
	json_decref(ans);
	ans = NULL;
	snprintf(path, sizeof path, "/containers/%s/start", in->id);
	if (dkapi_call(&D->eng, "POST", path, NULL, T_CREATE, &status, &ans, e) < 0)
		goto fail;
	if (status != 204 && status != 304) {
		err_set(e, "the engine could not start the sandbox container: %s (HTTP %ld)",
			dkapi_message(ans, "no reason given"), status);
		goto fail;
	}
	json_decref(ans);
	ans = NULL;
	int fd = wait_agent(D, in, e);
	if (fd < 0)
		goto fail;
	if (agentlink_open(&in->link, fd, 10000, e) != 0) {
		container_state(D, in->id, why, sizeof why, &(bool){true});
		err_set(e, "(%s)", why);
		goto fail;
	}
	if (agentlink_filter(&in->link, D->filter.bpf, D->filter.len, e) != 0)
		goto fail;
	/* For telling out-of-memory kills: the engine's OOMKilled flags only a dead init. */
	in->pid = container_pid(D, in->id);
	return 0;
fail:
	json_decref(ans);
	inst_kill(D, in);
	return -1;
}

/* ---------------------------------------------------------------- images */

static int ensure_image(struct docker *D, struct err *e)
{
	char path[400];
	long status = 0;
	json_t *ans = NULL;
	snprintf(path, sizeof path, "/images/%s/json", D->image);
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, &status, &ans, e) < 0)
		return -1;
	if (status == 200) {
		json_decref(ans);
		return 0;
	}
	if (status != 404) {
		err_set(e, "the engine could not look up the image %s: %s (HTTP %ld)", D->image,
			dkapi_message(ans, "no reason given"), status);
		json_decref(ans);
		return -1;
	}
	json_decref(ans);
	log_msg(LOG_NOTICE, "pulling the image %s (not on this engine yet)", D->image);
	struct err pe = {""};
	if (dkapi_pull(&D->eng, D->image, T_PULL, &pe) < 0)
		return err_set(e, "the image %s is not on this engine and pulling it failed (%s); pull it where a "
				  "registry is reachable (docker pull %s, or docker load), or choose an image that "
				  "is present with --image / SANDBOX_IMAGE (it needs python3, and bash for "
				  "execute_bash_commands)", D->image, pe.msg, D->image);
	return 0;
}

/* ---------------------------------------------------------------- leftovers */

/* Is the server of these labels gone? Only servers of this host are judged. */
static bool owner_dead(const struct docker *D, json_t *labels, bool self_too)
{
	const char *host = json_string_value(json_object_get(labels, LABEL ".host"));
	const char *pid = json_string_value(json_object_get(labels, LABEL ".pid"));
	const char *start = json_string_value(json_object_get(labels, LABEL ".start"));
	if (!host || strcmp(host, D->host) || !pid || !start)
		return false;
	char *end;
	long p = strtol(pid, &end, 10);
	if (*end || p <= 0)
		return false;
	if (p == (long)getpid() && !strcmp(start, D->start_time))
		return self_too;
	char now[32];
	if (kill((pid_t)p, 0) < 0 && errno == ESRCH)
		return true;
	return proc_start(p, now, sizeof now) == 0 && strcmp(now, start) != 0;
}

/* Removes containers of servers of this host that are gone; with self_too, this server's own
 * earlier containers too (they outlived an engine restart). */
static void reap_containers(struct docker *D, bool self_too)
{
	char path[256];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	char *filt = http_escape("{\"label\":[\"" LABEL "=1\"]}");
	if (!filt)
		return;
	snprintf(path, sizeof path, "/containers/json?all=1&filters=%s", filt);
	free(filt);
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) < 0 || status != 200) {
		log_msg(LOG_DEBUG, "docker: listing leftover containers failed: %s", e.msg[0] ? e.msg : "HTTP error");
		json_decref(ans);
		return;
	}
	size_t i;
	json_t *c;
	json_array_foreach(ans, i, c) {
		const char *id = json_string_value(json_object_get(c, "Id"));
		if (id && owner_dead(D, json_object_get(c, "Labels"), self_too)) {
			remove_container(&D->eng, id);
			log_msg(LOG_INFO, "removed container %.12s, left by a server that is gone", id);
		}
	}
	json_decref(ans);
}

/* Removes docker-* sandbox folders whose lock is free (their server is gone). */
/* ---------------------------------------------------------------- ops */

static int docker_probe(struct backend *b, struct err *e)
{
	struct docker *D = b->priv;
	if (D->eng.api[0])
		return 0;
	/* No DOCKER_HOST and no engine socket anywhere: Docker is not set up here at all. */
	const char *host = getenv("DOCKER_HOST");
	if (!D->eng.sock[0] && dkapi_locate(&D->eng, e) < 0)
		return host && *host ? -1 : BACKEND_ABSENT;
	return dkapi_open(&D->eng, 5000, e);
}

static void docker_init(struct backend *b)
{
	struct docker *D = b->priv;
	dkapi_init(&D->eng);
	hostdir_init(&D->h);
	D->main.link.fd = -1;
}

/* Makes the sandbox (see docker_start). */
static int make_sandbox(struct backend *b, struct err *e)
{
	struct docker *D = b->priv;
	const struct config *cfg = b->cfg;
	D->uid = geteuid() == 0 ? (unsigned)cfg->sandbox_uid : (unsigned)geteuid();
	D->gid = geteuid() == 0 ? (unsigned)cfg->sandbox_uid : (unsigned)getegid();
	const struct docker_opts *o = b->opts;
	snprintf(D->image, sizeof D->image, "%s", o->image[0] ? o->image : DEFAULT_IMAGE);
	if (!image_ok(D->image))
		return err_set(e, "--image '%s' is not an image reference", D->image);
	self_labels(D);
	if (!D->eng.api[0] && dkapi_open(&D->eng, 5000, e) < 0)
		return -1;
	if (hostdir_state(cfg, D->state, sizeof D->state, e) < 0)
		return -1;
	reap_containers(D, true);

	unsigned char rnd[4];
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
		return err_sys(e, "getrandom");
	snprintf(b->sandbox_id, sizeof b->sandbox_id, "docker-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
	if (hostdir_open(&D->h, cfg, D->state, b->sandbox_id, D->uid, D->gid, e) < 0)
		return -1;
	if (hostdir_path(D->agent, sizeof D->agent, "%s/sandbox-agent", D->h.host) < 0)
		return err_set(e, "the state folder's path is too long");
	if (write_agent(D->agent, e) < 0)
		return -1;
	if (cfg->wheelhouse[0] && access(cfg->wheelhouse, R_OK | X_OK) < 0)
		return err_sys(e, "wheelhouse %s", cfg->wheelhouse);
	if (ensure_image(D, e) < 0 || filter_build(&D->filter, e) < 0)
		return -1;
	return inst_spawn(b, &D->main, cfg->network == NET_ALL, "main", NULL, e);
}

/* An image pull can take minutes: every engine call and wait of the making watches cancel_fd,
 * and a cancelled making says so (what it made is removed by destroy, which follows). */
static int docker_start(struct backend *b, int cancel_fd, struct err *e)
{
	struct docker *D = b->priv;
	D->eng.http.cancel_fd = cancel_fd;
	int rc = make_sandbox(b, e);
	bool cancelled = D->eng.http.cancelled || (rc < 0 && cancel_fd >= 0 && poll(&(struct pollfd){cancel_fd, POLLIN, 0}, 1, 0) > 0);
	D->eng.http.cancel_fd = -1;
	D->eng.http.cancelled = false;
	return rc < 0 && cancelled ? BACKEND_CANCELLED : rc;
}

static void call_limits(const struct backend *b, const struct run_req *rq, struct agentlink_limits *lim)
{
	const struct docker *D = b->priv;
	const struct config *cfg = b->cfg;
	int64_t left = rq->deadline_ms - clock_ms();
	memset(lim, 0, sizeof *lim);
	lim->open_files = cfg->open_files;
	lim->file_size = cfg->file_size;
	lim->cpu_s = (uint64_t)(left > 0 ? left : 0) / 1000 + 2;
	lim->nproc = D->rl_pids ? cfg->pids : 0;
	lim->as = D->rl_memory ? cfg->memory : 0;
	lim->spill_max = cfg->spill_max;
}

static int docker_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	struct docker *D = b->priv;
	struct agentlink_limits lim;
	if (!D->main.id[0] || D->main.link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	call_limits(b, rq, &lim);
	/* The install step alone reaches the package index: in a container of its own on the same
	 * workspace, with no network ("none": loopback only) but the server's proxy. */
	if (rq->network && b->cfg->network == NET_INSTALL) {
		struct installnet inet;
		struct docker_inst net;
		if (installnet_open(&inet, b->cfg, D->h.host, D->uid, rq->env, e) < 0)
			return -1;
		int rc = inst_spawn(b, &net, false, "install", inet.dir, e);
		if (rc == 0) {
			struct run_req step = *rq;
			step.env = installnet_env(&inet);
			installnet_limits(&inet, &lim);
			log_msg(LOG_INFO, "docker: the install step runs in its own container %.12s (no network but the proxy)",
				net.id);
			rc = agentlink_run(&net.link, &step, &lim, rs, e);
			inst_kill(D, &net);
		}
		installnet_close(&inet);
		return rc == BACKEND_LOST ? -1 : rc;
	}
	uint64_t oom_before = 0, oom_after = 0;
	bool counted = D->main.pid && !D->rl_memory && cgroup_oom_kills_of(D->main.pid, &oom_before) == 0;
	int rc = agentlink_run(&D->main.link, rq, &lim, rs, e);
	if (rc == 0 && counted && cgroup_oom_kills_of(D->main.pid, &oom_after) == 0 && oom_after > oom_before) {
		rs->oom_killed = true;
		rs->memory_limit = b->cfg->memory;
	}
	if (rc == BACKEND_LOST) {
		char why[512];
		bool running;
		container_state(D, D->main.id, why, sizeof why, &running);
		log_msg(LOG_WARNING, "docker: lost the agent of %s: %s", b->sandbox_id, why);
		agentlink_close(&D->main.link);
	}
	return rc;
}

static int docker_put(struct backend *b, const struct run_file *f, struct err *e)
{
	struct docker *D = b->priv;
	if (!D->main.id[0] || D->main.link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_put(&D->main.link, f, e);
}

static int docker_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	struct docker *D = b->priv;
	if (!D->main.id[0] || D->main.link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_list(&D->main.link, dir, skip, max, out, e);
}

static int docker_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	struct docker *D = b->priv;
	if (!D->main.id[0] || D->main.link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	return agentlink_get(&D->main.link, path, max, out, e);
}

static int docker_watch_fd(const struct backend *b)
{
	const struct docker *D = b->priv;
	return D->main.link.fd;
}

static int docker_check(struct backend *b, struct err *e)
{
	struct docker *D = b->priv;
	if (!D->main.id[0] || D->main.link.fd < 0)
		return err_set(e, "the sandbox is gone"), BACKEND_LOST;
	/* Between calls the agent says nothing: readable means it closed or died. */
	struct pollfd p = {D->main.link.fd, POLLIN, 0};
	if (poll(&p, 1, 0) > 0) {
		char why[512];
		bool running;
		container_state(D, D->main.id, why, sizeof why, &running);
		agentlink_close(&D->main.link);
		return err_set(e, "its agent went away (%s)", why), BACKEND_LOST;
	}
	if (hostdir_removed(&D->h))
		return err_set(e, "its workspace %s was removed on the host", D->h.ws), BACKEND_LOST;
	return 0;
}

static int docker_destroy(struct backend *b, enum backend_end how, struct err *e)
{
	struct docker *D = b->priv;
	int rc = 0;
	inst_kill(D, &D->main);
	filter_free(&D->filter);
	bool keep = how == BACKEND_END_SHUTDOWN && b->cfg->keep && D->h.dir[0];
	if (keep) {
		unlink(D->agent);
		log_msg(LOG_NOTICE, "kept the workspace of %s at %s", b->sandbox_id, D->h.ws);
	}
	if (hostdir_close(&D->h, keep ? HOSTDIR_KEEP : how == BACKEND_END_CLEANUP ? HOSTDIR_CLEAR : HOSTDIR_REMOVE, e) < 0) {
		log_msg(LOG_WARNING, "%s", e->msg);
		rc = -1;
	}
	dkapi_close(&D->eng);
	D->eng.api[0] = '\0';
	return rc;
}

static void docker_report(struct backend *b, FILE *f)
{
	struct docker *D = b->priv;
	const struct config *cfg = b->cfg;
	char sz[32];
	fprintf(f, "    engine      %s %s at unix://%s (API version %s)\n", D->eng.name, D->eng.version, D->eng.sock,
		D->eng.api + 2);
	fprintf(f, "    image       %s\n", D->image);
	fprintf(f, "    isolation   container (own pid, mount, ipc, uts%s namespaces); read-only root; engine's default "
		   "seccomp profile plus the server's filter (%u rules); no-new-privileges; no capabilities\n",
		cfg->network == NET_ALL ? "" : ", network", D->filter.rules);
	fprintf(f, "    user        uid %u, gid %u\n", D->uid, D->gid);
	char net[PATH_MAX + 256];
	fprintf(f, "    network     %s\n", installnet_describe(cfg, "the engine's default bridge", net, sizeof net));
	fprintf(f, "    memory      %-10s %s\n", config_fmt_size(cfg->memory, sz, sizeof sz),
		D->rl_memory ? "per process only (RLIMIT_AS): the engine cannot limit memory here"
			     : "container memory limit (cgroup), no swap");
	fprintf(f, "    processes   %-10llu %s\n", (unsigned long long)cfg->pids,
		D->rl_pids ? "per user (RLIMIT_NPROC): the engine cannot limit processes here" : "container pids limit (cgroup)");
	fprintf(f, "    cpus        %-10g container CPU quota (NanoCpus)\n", cfg->cpus);
	agentlink_report_limits(cfg, f);
	hostdir_report_workspace(&D->h, cfg, "bind-mounted at /workspace", f);
	hostdir_report_quota(&D->h, cfg, f);
}

static void docker_reap(const struct config *cfg)
{
	struct docker *D = calloc(1, sizeof *D);
	struct err e = {""};
	if (!D)
		return;
	dkapi_init(&D->eng);
	/* Only when an engine is there: no waiting at start-up for one that is not. Containers
	 * first: they hold the folders' binds. */
	if (dkapi_locate(&D->eng, &e) == 0 && dkapi_open(&D->eng, 3000, &e) == 0) {
		self_labels(D);
		reap_containers(D, false);
	}
	char state[PATH_MAX];
	if (hostdir_state(cfg, state, sizeof state, &e) == 0)
		hostdir_reap(state, "docker-");
	dkapi_close(&D->eng);
	free(D);
}

static int docker_opts_check(const void *opts, const struct config *cfg, struct err *e)
{
	const struct docker_opts *o = opts;
	(void)cfg;
	if (!o->image[0] || strpbrk(o->image, " \t\r\n"))
		return err_set(e, "--image must name one image");
	return 0;
}

static const struct opt docker_options[] = {
	{"image", "SANDBOX_IMAGE", OPT_STR, OPT_FIELD(struct docker_opts, image), DEFAULT_IMAGE,
	 "Docker: image of the sandbox container (pulled when missing)"},
};

const struct backend_ops docker_backend_ops = {
	.name = "docker",
	.opts = docker_options,
	.nopts = sizeof docker_options / sizeof docker_options[0],
	.opts_size = sizeof(struct docker_opts),
	.opts_check = docker_opts_check,
	.env_help = "  DOCKER_HOST          the Docker engine's socket, unix:///PATH only (default: the first of\n"
		    "                       /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock,\n"
		    "                       $XDG_RUNTIME_DIR/podman/podman.sock, /run/podman/podman.sock)\n",
	.workspace_dir = true,
	.priv_size = sizeof(struct docker),
	.init = docker_init,
	.probe = docker_probe,
	.start = docker_start,
	.run = docker_run,
	.put = docker_put,
	.list = docker_list,
	.get = docker_get,
	.watch_fd = docker_watch_fd,
	.check = docker_check,
	.destroy = docker_destroy,
	.report = docker_report,
	.reap = docker_reap,
};
