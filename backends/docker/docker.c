/*
 * The Docker backend: the sandbox is one container per workspace, made through the Docker
 * Engine API (dkapi.h; Podman's compatible socket works too), with the same in-sandbox agent
 * and the same wire protocol as the local backend, so calls give the same results.
 *
 * The container runs the server's own static sandbox-agent as its PID 1 (no --init): the
 * binary is written to the sandbox's `host` folder (hostdir.h: a tmpfs of its own as root, else
 * a folder on /dev/shm) and bind-mounted read-only at /.sandbox-agent, and it connects to
 * /run/sandbox-agent/agent.sock, where the server listens in a folder there bound read-only, so
 * the two talk directly (same kernel) and no call goes through the engine: a warm call is one
 * round trip on a unix socket, as on the local backend. Timeouts and cancellation kill the call's
 * processes the same way: the agent kills every process of the container's PID namespace.
 *
 * The container: an unprivileged user (--sandbox-uid, 65534, when the server runs as root;
 * else the server's own uid), every capability dropped, no-new-privileges, the engine's
 * default seccomp profile plus the server's filter (backends/agenthost/filter.h) installed by the agent, a
 * read-only root, /tmp a tmpfs of --tmp-size, network "none" (--network all: the engine's
 * default bridge), memory (no swap), CPU and process limits from the configuration, and labels
 * naming the server that made it (sandbox-mcp=1, sandbox-mcp.pid, .starttime, .pidns, .host,
 * .sandbox).
 *
 * Host side, a sandbox is a folder <state-dir>/docker-<id>, like a local sandbox's: a lock (so
 * a later server can tell a dead server's leftovers), the workspace, bind-mounted at
 * /workspace (the engine is on this machine anyway, since we reach the agent's socket through
 * a host folder; a bind keeps ownership simple and --keep meaningful), and its `host` folder:
 * the agent binary and one run-N folder per container for its socket. A server that is not
 * root cannot mount the workspace's quota there: the engine makes it, a tmpfs volume
 * (dkvolume.h) mounted at /workspace instead, and the host folder stays empty.
 *
 * With --network install, the install step runs in a second, short-lived container on the same
 * workspace with the engine's default bridge network, running the same agent; it is removed as
 * soon as pip ends.
 */
#include <ctype.h>
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
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/log.h"
#include "../../src/base/procstart.h"
#include "../agenthost/agenthost.h"
#include "../agenthost/cgroup.h"
#include "../agenthost/hostdir.h"
#include "../agenthost/installnet.h"
#include "../hostfs/beneath.h"
#include "../hostfs/tree.h"
#include "../backend.h"
#include "dkapi.h"
#include "dkstream.h"
#include "dkvolume.h"

#define DEFAULT_IMAGE "python:3.12-slim"
#define AGENT_IN "/.sandbox-agent"
#define RUN_IN "/run/sandbox-agent"
#define SOCK_NAME "agent.sock"
#define LABEL "sandbox-mcp"
/* Where a sandbox finds the server's files when the engine does not see this server's folders. */
#define FILES_IN "/.sandbox-mcp"
#define AGENT_FILE "sandbox-agent"
/* The most an agent binary may take. */
#define AGENT_MAX (64u << 20)

/* Engine call timeouts, ms. */
#define T_QUICK 15000L
#define T_STARTUP 2000L  /* each step of the start-up check: a slower engine leaves it to the call */
#define T_CREATE 60000L
#define T_PULL 600000L
/* How long a started container's agent may take to listen. */
#define AGENT_WAIT_MS 20000

/* The backend's own options (--image). */
struct docker_opts {
	char image[256];
};

/* One instance: a container. */
struct docker_inst {
	struct agent_inst in;  /* its pid: its init (the agent) as this host sees it */
	char id[80];           /* the container's id; "" when none */
	char run[PATH_MAX];    /* host folder bound at RUN_IN; "" when none */
	int listen_fd;         /* the socket the agent connects to, until it did; -1 */
	struct stdiorelay relay; /* with stream: the attached stdio, in chunks (agentlink_mux_relay) */
};

struct docker {
	struct agenthost host;  /* first: the agent host's (backend.h) */
	struct dkapi eng;
	char image[256];
	char agent[PATH_MAX];  /* the agent binary, bound into every container */
	unsigned seq;
	bool rl_memory, rl_pids; /* the engine could not limit these: fall back to rlimits */
	char hostname[256];    /* labels: this server */
	char start_time[32];
	char pidns[32];        /* the PID namespace its pid means something in: "pid:[INODE]" */
	char self[72];         /* the container this server runs in, on the same engine; "" when none */
	char volume[96];       /* the workspace's tmpfs volume (dkvolume.h); "" when none */
	bool stream;           /* the engine does not see this server's folders: its sandboxes get their
	                        * files from a volume of their own and talk on their attached stdio */
	char files[96];        /* with stream: the volume of the agent binary; "" when none */
	json_t *ws_mount;      /* with stream: --workspace as the engine binds it; NULL: none */
	json_t *wh_mount;      /* ... --wheelhouse; NULL: none */
	json_t *mnt_mounts;    /* ... the --mount folders, in their order; NULL: none */
	bool no_pull;          /* --check: a missing image is said, not pulled */
	bool would_pull;       /* ... and it was missing */
};

#define DI(in) ((struct docker_inst *)(void *)(in))

/* ---------------------------------------------------------------- small helpers */

/* A process's start time as a label (procstart.h). */
static int proc_start(pid_t pid, char *buf, size_t n)
{
	unsigned long long t;
	if (procstart(pid, &t) < 0)
		return -1;
	snprintf(buf, n, "%llu", t);
	return 0;
}

static void self_labels(struct docker *D)
{
	if (gethostname(D->hostname, sizeof D->hostname) < 0)
		snprintf(D->hostname, sizeof D->hostname, "?");
	D->hostname[sizeof D->hostname - 1] = '\0';
	if (proc_start(getpid(), D->start_time, sizeof D->start_time) < 0)
		snprintf(D->start_time, sizeof D->start_time, "?");
	ssize_t n = readlink("/proc/self/ns/pid", D->pidns, sizeof D->pidns - 1);
	D->pidns[n > 0 ? n : 0] = '\0';
}

/* The id of the Docker container this server runs in: the engine binds its own files of the
 * container (/var/lib/docker/containers/ID/hostname, hosts, resolv.conf) into it, and the
 * mount table names them. Confirmed by the engine (that container exists, with our hostname),
 * so that a server in a container on another engine names none. */
static void self_container(struct docker *D, long timeout_ms)
{
	D->self[0] = '\0';
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], id[65] = "";
	while (f && !id[0] && fgets(line, sizeof line, f)) {
		const char *p = strstr(line, "/containers/");
		if (!p || !strstr(line, " /etc/hostname "))
			continue;
		p += strlen("/containers/");
		if (strspn(p, "0123456789abcdef") == 64 && p[64] == '/')
			snprintf(id, sizeof id, "%.64s", p);
	}
	if (f)
		fclose(f);
	if (!id[0])
		return;
	char path[128];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	snprintf(path, sizeof path, "/containers/%s/json", id);
	if (dkapi_call(&D->eng, "GET", path, NULL, timeout_ms, &status, &ans, &e) == 0 && status == 200) {
		const char *h = json_string_value(json_object_get(json_object_get(ans, "Config"), "Hostname"));
		if (h && !strcmp(h, D->hostname))
			snprintf(D->self, sizeof D->self, "%s", id);
	}
	json_decref(ans);
}

/* Is the container id (a label's) gone or stopped? Not when the engine did not answer. */
static bool container_gone(struct docker *D, const char *id)
{
	char path[128];
	long status = 0;
	json_t *ans = NULL;
	struct err e = {""};
	if (strspn(id, "0123456789abcdef") != strlen(id) || strlen(id) != 64)
		return false;
	snprintf(path, sizeof path, "/containers/%s/json", id);
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, &status, &ans, &e) < 0) {
		json_decref(ans);
		return false;
	}
	bool gone = status == 404 ||
		    (status == 200 && !json_is_true(json_object_get(json_object_get(ans, "State"), "Running")));
	json_decref(ans);
	return gone;
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
	int rc = agenthost_write_agent(fd, path, e);
	if (rc == 0 && fchmod(fd, 0555) < 0)
		rc = err_sys(e, "chmod %s", path);
	if (close(fd) < 0 && rc == 0)
		rc = err_sys(e, "writing %s", path);
	return rc;
}

/* The container's /etc/hosts, /etc/hostname and /etc/resolv.conf without a network: the
 * engine's own copies would name its data folder in the mount table, and the host's resolver. */
static const char *const etc_files[][2] = {
	{"hosts", AGENTHOST_ETC_HOSTS},
	{"hostname", AGENTHOST_HOSTNAME "\n"},
	{"resolv.conf", "# no network\n"},
};

/* Writes them to dir, as etc-NAME, mode 0444. 0, or -1 with e set. */
static int write_etc(const char *dir, struct err *e)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, "opening %s", dir);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < sizeof etc_files / sizeof etc_files[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "etc-%s", etc_files[i][0]);
		if (beneath_write(dfd, name, etc_files[i][1], strlen(etc_files[i][1]), 0444) < 0)
			rc = err_sys(e, "writing %s/%s", dir, name);
	}
	close(dfd);
	return rc;
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
	struct dkapi_held held = dkapi_hold_cancel(&D->eng);
	remove_container(&D->eng, name);
	dkapi_release_cancel(&D->eng, held);
}

static void docker_kill(void *ctx, struct agent_inst *ai)
{
	struct docker *D = ctx;
	struct docker_inst *in = DI(ai);
	if (!in)
		return;
	if (in->in.inband)
		close(in->in.inband_fd);
	agentlink_close(&in->in.link);
	stdiorelay_stop(&in->relay);
	if (in->listen_fd >= 0)
		close(in->listen_fd);
	if (in->id[0])
		remove_container(&D->eng, in->id);
	if (in->run[0] && tree_remove(in->run) < 0)
		log_msg(LOG_WARNING, "could not remove %s: %s", in->run, strerror(errno));
	free(in);
}

static json_t *mount_spec(const char *src, const char *dst, bool ro)
{
	return json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source", src, "Target", dst, "ReadOnly", ro);
}

/* The labels of what D makes (new reference): they name this server, so that a later one can
 * tell its leftovers. role: "main" or "install" for a container, NULL for a volume. */
static json_t *labels(const struct docker *D, const char *role)
{
	char pid[24];
	snprintf(pid, sizeof pid, "%ld", (long)getpid());
	json_t *l = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", LABEL, "1", LABEL ".pid", pid, LABEL ".starttime",
			      D->start_time, LABEL ".pidns", D->pidns, LABEL ".host", D->hostname, LABEL ".sandbox",
			      D->host.id);
	if (l && role)
		json_object_set_new(l, LABEL ".role", json_string(role));
	if (l && D->self[0])
		json_object_set_new(l, LABEL ".container", json_string(D->self));
	return l;
}

/* The create request of a container on D's workspace; `net`: the engine's default network. */
static json_t *container_spec(struct docker *D, const struct docker_inst *in, bool net, bool install,
			      const char *proxy_dir)
{
	const struct config *cfg = D->host.cfg;
	char user[32], tmpfs[96];
	snprintf(user, sizeof user, "%u:%u", (unsigned)D->host.uid, (unsigned)D->host.gid);
	snprintf(tmpfs, sizeof tmpfs, "rw,nosuid,nodev,size=%llu,mode=1777", (unsigned long long)cfg->tmp_size);
	json_t *ws = D->ws_mount ? json_deep_copy(D->ws_mount)
		     : D->volume[0] ? dkvolume_mount(D->volume, WORKSPACE) : mount_spec(D->host.h.ws, WORKSPACE, false);
	json_t *mounts;
	if (D->stream) {
		json_t *files = dkvolume_mount(D->files, FILES_IN);
		json_object_set_new(files, "ReadOnly", json_true());
		mounts = json_pack("[o, o]", ws, files);
	} else {
		mounts = json_pack("[o, o, o]", ws, mount_spec(in->run, RUN_IN, true), mount_spec(D->agent, AGENT_IN, true));
	}
	for (size_t i = 0; mounts && !net && !D->stream && i < sizeof etc_files / sizeof etc_files[0]; i++) {
		char src[PATH_MAX + 32], dst[32];
		snprintf(src, sizeof src, "%s/etc-%s", D->host.h.host, etc_files[i][0]);
		snprintf(dst, sizeof dst, "/etc/%s", etc_files[i][0]);
		json_array_append_new(mounts, mount_spec(src, dst, true));
	}
	if (mounts && cfg->wheelhouse[0])
		json_array_append_new(mounts, D->wh_mount ? json_deep_copy(D->wh_mount)
							  : mount_spec(cfg->wheelhouse, "/wheelhouse", true));
	if (mounts && proxy_dir)
		json_array_append_new(mounts, mount_spec(proxy_dir, INSTALLNET_DIR, true));
	/* The install step sees no --mount folder: it runs code from the package index. */
	for (size_t i = 0; mounts && !install && i < cfg->mounts.n; i++)
		json_array_append_new(mounts, D->mnt_mounts ? json_deep_copy(json_array_get(D->mnt_mounts, i))
			: mount_spec(cfg->mounts.v[i].host, cfg->mounts.v[i].inside, !cfg->mounts.v[i].rw));
	json_t *host = json_pack(
		"{s:o, s:b, s:[s], s:[s], s:s, s:I, s:I, s:I, s:I, s:{s:s, s:s}, s:I, s:b, s:b, s:s, s:s, s:{s:s}}",
		"Mounts", mounts, "ReadonlyRootfs", 1, "CapDrop", "ALL", "SecurityOpt", "no-new-privileges",
		"NetworkMode", net ? "bridge" : "none", "Memory", (json_int_t)cfg->memory, "MemorySwap",
		(json_int_t)cfg->memory, "NanoCpus", (json_int_t)(cfg->cpus * 1e9), "PidsLimit", (json_int_t)cfg->pids,
		"Tmpfs", "/tmp", tmpfs, "/sys", "ro,nosuid,nodev,noexec,size=4k", "ShmSize", (json_int_t)cfg->tmp_size, "Init", 0, "Privileged", 0, "IpcMode",
		"private", "CgroupnsMode", "private", "RestartPolicy", "Name", "no");
	/* --gpu: every GPU of the engine's host, through its nvidia driver (the NVIDIA Container
	 * Toolkit), which adds the device nodes and the driver's libraries, read-only. */
	/* On the attached stdio, what the agent sends is its stdout: the calls' output and the
	 * workspace's files. The engine's log would keep all of it on its disk, unbounded. */
	if (host && D->stream)
		json_object_set_new(host, "LogConfig", json_pack("{s:s, s:{}}", "Type", "none", "Config"));
	if (host && cfg->gpu)
		json_object_set_new(host, "DeviceRequests",
				    json_pack("[{s:s, s:I, s:[[s]]}]", "Driver", "nvidia", "Count", (json_int_t)-1,
					      "Capabilities", "gpu"));
	if (D->stream)
		/* StdinOnce: when the server's attach ends (it exits, or is killed), the agent reads
		 * the end of its stdin and ends, and the container with it. */
		return json_pack("{s:s, s:[s], s:[s], s:s, s:s, s:s, s:[], s:I, s:o, s:o, s:b, s:b, s:b, s:b, s:b, s:b}",
				 "Image", D->image, "Entrypoint", FILES_IN "/" AGENT_FILE, "Cmd", "--stdio", "User", user,
				 "WorkingDir", WORKSPACE, "Hostname", AGENTHOST_HOSTNAME, "Env", "StopTimeout",
				 (json_int_t)1, "Labels", labels(D, install ? "install" : "main"), "HostConfig", host, "OpenStdin", 1, "StdinOnce",
				 1, "AttachStdin", 1, "AttachStdout", 1, "AttachStderr", 0, "Tty", 0);
	return json_pack("{s:s, s:[s], s:[s, s], s:s, s:s, s:s, s:[], s:I, s:o, s:o}", "Image", D->image, "Entrypoint",
			 AGENT_IN, "Cmd", "--connect", RUN_IN "/" SOCK_NAME, "User", user, "WorkingDir", WORKSPACE,
			 "Hostname", AGENTHOST_HOSTNAME, "Env", "StopTimeout", (json_int_t)1, "Labels",
			 labels(D, install ? "install" : "main"),
			 "HostConfig", host);
}

/* The engine's State of a container (new reference), NULL with *status 404 when it is gone,
 * or NULL with e set when the engine did not answer. */
static json_t *inspect(struct docker *D, const char *id, long *status, struct err *e)
{
	char path[128];
	json_auto_t *ans = NULL;
	snprintf(path, sizeof path, "/containers/%s/json", id);
	*status = 0;
	if (dkapi_call(&D->eng, "GET", path, NULL, T_QUICK, status, &ans, e) < 0 || *status != 200)
		return NULL;
	return json_incref(json_object_get(ans, "State"));
}

/* What the engine's 404 for a container that should be running means. */
#define CONTAINER_REMOVED "its container was removed from the engine by something other than this server, " \
	"such as docker rm or a prune"

/* Reads what the engine says about a container that should be running. */
static void container_state(struct docker *D, const char *id, char *buf, size_t n, bool *running)
{
	long status;
	struct err e = {""};
	json_auto_t *st = inspect(D, id, &status, &e);
	*running = status != 404;
	if (st) {
		*running = json_is_true(json_object_get(st, "Running"));
		const char *err = json_string_value(json_object_get(st, "Error"));
		snprintf(buf, n, "the container %s (exit code %lld%s%s%s)", *running ? "runs" : "stopped",
			 (long long)json_integer_value(json_object_get(st, "ExitCode")), err && *err ? ": " : "",
			 err ? err : "", json_is_true(json_object_get(st, "OOMKilled")) ? ", out of memory" : "");
	} else {
		snprintf(buf, n, "%s", status == 404 ? CONTAINER_REMOVED : e.msg[0] ? e.msg : "state unknown");
	}
}

/* The host pid of a running container's init, or 0. */
static pid_t container_pid(struct docker *D, const char *id)
{
	long status;
	struct err e = {""};
	json_auto_t *st = inspect(D, id, &status, &e);
	json_int_t pid = json_integer_value(json_object_get(st, "Pid"));
	return pid > 0 ? (pid_t)pid : 0;
}

/* Listens on in's folder for its agent: the folder is bound read-only into the container (the
 * code can write nothing there, which is on the host's disk when the server is not root), and
 * connecting to a socket needs no write access to its file system. 0, or -1 with e set. */
static int listen_agent(struct docker *D, struct docker_inst *in, struct err *e)
{
	int dfd = open(in->run, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_sys(e, "opening %s", in->run);
	/* Through /proc/self/fd, so that a long state folder cannot overflow sun_path. */
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/" SOCK_NAME, dfd);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc = 0;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1) < 0 ||
	    fchownat(dfd, SOCK_NAME, D->host.uid, D->host.gid, 0) < 0 || fchmodat(dfd, SOCK_NAME, 0600, 0) < 0)
		rc = err_sys(e, "listening for the sandbox agent in %s", in->run);
	close(dfd);
	if (rc < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	in->listen_fd = fd;
	return 0;
}

/* Takes the agent's connection once its container runs; then nothing else can connect (the
 * socket is closed and its file removed). The fd, or -1 with e set. */
static int wait_agent(struct docker *D, struct docker_inst *in, struct err *e)
{
	int64_t until = clock_ms() + AGENT_WAIT_MS, next_check = clock_ms() + 300;
	int fd = -1;
	for (;;) {
		fd = accept4(in->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
			err_sys(e, "taking the sandbox agent's connection in %s", in->run);
			break;
		}
		if (clock_ms() >= next_check) {
			char why[512];
			bool running;
			container_state(D, in->id, why, sizeof why, &running);
			if (!running) {
				err_set(e, "the sandbox container stopped before its agent connected: %s", why);
				break;
			}
			next_check = clock_ms() + 300;
		}
		if (clock_ms() >= until) {
			err_set(e, "the sandbox agent did not connect to %s/%s within %d s (the engine must run on this "
				   "machine's kernel, and see that folder as this server does)", in->run, SOCK_NAME,
				AGENT_WAIT_MS / 1000);
			break;
		}
		struct pollfd pf[2] = {{in->listen_fd, POLLIN, 0}, {D->eng.http.cancel_fd, POLLIN, 0}};
		if (poll(pf, D->eng.http.cancel_fd >= 0 ? 2 : 1, 100) > 0 && (pf[1].revents & POLLIN)) {
			D->eng.http.cancelled = true;
			err_set(e, "cancelled");
			break;
		}
	}
	close(in->listen_fd);
	in->listen_fd = -1;
	char sock[PATH_MAX + 16];
	if (hostdir_path(sock, sizeof sock, "%s/" SOCK_NAME, in->run) == 0)
		unlink(sock);
	return fd; /* blocking: accept does not pass the listener's O_NONBLOCK on */
}

/* Is the host folder at path still dev:ino? */
static int still(const char *what, const char *path, dev_t dev, ino_t ino, struct err *e)
{
	struct stat st;
	if (stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
		return 0;
	return err_set(e, "%s: the host folder %s is no longer the folder checked at start-up (it was replaced, or "
			  "renamed and something put in its place): the sandbox is not made", what, path);
}

/*
 * The engine binds host folders by path: each is checked to be the folder checked at start-up
 * (the workspace: the one hostdir_open took) right before the container is made. No sandbox's
 * code can re-point a name on their paths meanwhile: none lies in a folder the code may write
 * (hostfolders.h), and the workspace's path is in the state folder or given by --workspace.
 */
static int verify_binds(const struct docker *D, bool install, struct err *e)
{
	const struct config *cfg = D->host.cfg;
	/* In a container of its own (go_stream), the folders are checked as this server sees them:
	 * what the engine binds is the same folder, through the server's container's mounts. */
	if (!D->volume[0] && still("the workspace", D->host.h.ws, D->host.h.ws_dev, D->host.h.ws_ino, e) < 0)
		return -1;
	if (cfg->wheelhouse[0] && still("--wheelhouse", cfg->wheelhouse, cfg->wheelhouse_dev, cfg->wheelhouse_ino, e) < 0)
		return -1;
	for (size_t i = 0; !install && i < cfg->mounts.n; i++) {
		char what[MOUNT_INSIDE_MAX + 16];
		snprintf(what, sizeof what, "--mount %s", cfg->mounts.v[i].inside);
		if (still(what, cfg->mounts.v[i].host, cfg->mounts.v[i].dev, cfg->mounts.v[i].ino, e) < 0)
			return -1;
	}
	return 0;
}

/* Creates the container of in (named after the sandbox and n); notes what the engine cannot
 * limit here. 0, or -1 with e set. */
static int create_container(struct docker *D, struct docker_inst *in, unsigned n, bool net, const char *proxy_dir,
			    bool install, struct err *e)
{
	char name[128], path[256];
	long status = 0;
	if (verify_binds(D, install, e) < 0)
		return -1;
	json_t *ans = NULL, *spec = container_spec(D, in, net, install, proxy_dir);
	if (!spec)
		return err_set(e, "out of memory");
	snprintf(name, sizeof name, "sandbox-mcp-%s-%u", D->host.id, n);
	snprintf(path, sizeof path, "/containers/create?name=%s", name);
	int rc = dkapi_call(&D->eng, "POST", path, spec, T_CREATE, &status, &ans, e);
	json_decref(spec);
	/* A request cut short may have reached the engine: the container may exist. Its name is
	 * ours alone. */
	if (rc < 0 && D->eng.http.cancelled)
		remove_by_name(D, name);
	const char *id = json_string_value(json_object_get(ans, "Id"));
	if (rc == 0 && (status != 201 || !id || strlen(id) >= sizeof in->id))
		rc = err_set(e, "the engine refused to create the sandbox container: %s (HTTP %ld)",
			     dkapi_message(ans, "no container id"), status);
	if (rc == 0)
		snprintf(in->id, sizeof in->id, "%s", id);
	size_t i;
	json_t *w;
	json_array_foreach(rc == 0 ? json_object_get(ans, "Warnings") : NULL, i, w) {
		const char *s = json_string_value(w);
		if (s)
			log_msg(LOG_WARNING, "docker: %s", s);
		D->rl_memory = D->rl_memory || (s && strstr(s, "emory"));
		D->rl_pids = D->rl_pids || (s && (strstr(s, "PID") || strstr(s, "pids")));
	}
	json_decref(ans);
	return rc;
}

/* Starts the container of in and connects to its agent. 0, or -1 with e set. */
static int start_container(struct docker *D, struct docker_inst *in, struct err *e)
{
	char path[256], why[512];
	long status = 0;
	json_t *ans = NULL;
	int afd = -1;
	/* Attached before it starts: nothing the agent says is missed. */
	if (D->stream && (afd = dkstream_attach(&D->eng, in->id, T_CREATE, e)) < 0)
		return -1;
	snprintf(path, sizeof path, "/containers/%s/start", in->id);
	int rc = dkapi_call(&D->eng, "POST", path, NULL, T_CREATE, &status, &ans, e);
	if (rc == 0 && status != 204 && status != 304)
		rc = err_set(e, "the engine could not start the sandbox container: %s (HTTP %ld)",
			     dkapi_message(ans, "no reason given"), status);
	json_decref(ans);
	int fd = rc < 0 ? -1 : D->stream ? afd : wait_agent(D, in, e);
	if (fd < 0) {
		if (afd >= 0)
			close(afd);
		return -1;
	}
	if (agentlink_open_mux(&in->in.link, fd, D->stream, 10000, e) != 0) {
		container_state(D, in->id, why, sizeof why, &(bool){true});
		return err_set(e, "(%s)", why);
	}
	/* The attached stdio in chunks, so that the background processes' channel rides on it. */
	if (D->stream) {
		if (agentlink_mux_relay(&in->in.link, &in->relay, &in->in.inband_fd, e) != 0)
			return -1;
		in->in.inband = true;
	}
	return 0;
}

/* Is what the container's process pid sees at inside (through its root, from the host) dev:ino? */
static bool seen_as(pid_t pid, const char *inside, dev_t dev, ino_t ino)
{
	char p[PATH_MAX];
	struct stat st;
	return hostdir_path(p, sizeof p, "/proc/%d/root%s", (int)pid, inside) == 0 && stat(p, &st) == 0 &&
	       st.st_dev == dev && st.st_ino == ino;
}

/*
 * Once the container runs, before any code does: what the engine bound, seen through the
 * container's root from the host, must be the folders verify_binds checked; a host process
 * that re-pointed a path between that check and the engine's bind is caught here. Where the
 * server cannot see into the container (another PID namespace than the engine's, or not
 * allowed), the agent's own bind shows it: verify_binds alone holds then.
 */
static int verify_bound(struct docker *D, struct docker_inst *in, bool install, struct err *e)
{
	const struct config *cfg = D->host.cfg;
	pid_t pid = container_pid(D, in->id);
	struct stat agent;
	if (!pid || stat(D->agent, &agent) < 0 || !seen_as(pid, AGENT_IN, agent.st_dev, agent.st_ino)) {
		log_msg(LOG_DEBUG, "docker: cannot see into the container %.12s: its binds were checked by path alone",
			in->id);
		return 0;
	}
	const char *bad = NULL, *host = NULL;
	char what[MOUNT_INSIDE_MAX + 16];
	if (!D->volume[0] && !seen_as(pid, WORKSPACE, D->host.h.ws_dev, D->host.h.ws_ino))
		bad = "the workspace", host = D->host.h.ws;
	else if (cfg->wheelhouse[0] && !seen_as(pid, "/wheelhouse", cfg->wheelhouse_dev, cfg->wheelhouse_ino))
		bad = "--wheelhouse", host = cfg->wheelhouse;
	for (size_t i = 0; !bad && !install && i < cfg->mounts.n; i++)
		if (!seen_as(pid, cfg->mounts.v[i].inside, cfg->mounts.v[i].dev, cfg->mounts.v[i].ino)) {
			snprintf(what, sizeof what, "--mount %s", cfg->mounts.v[i].inside);
			bad = what, host = cfg->mounts.v[i].host;
		}
	if (!bad)
		return 0;
	return err_set(e, "%s: the host folder %s is no longer the folder checked at start-up (it was replaced, or "
			  "renamed and something put in its place): the sandbox is not made", bad, host);
}

/* Starts a container on the workspace and connects to its agent. */
static int spawn_once(struct docker *D, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
		      struct err *e)
{
	struct docker_inst *in = calloc(1, sizeof *in);
	if (!in)
		return err_set(e, "out of memory");
	in->in.link.fd = -1;
	in->listen_fd = -1;
	stdiorelay_init(&in->relay);
	unsigned n = D->seq++;
	int rc = 0;
	if (D->stream) {
		in->run[0] = '\0';
	} else if (hostdir_path(in->run, sizeof in->run, "%s/run-%u", D->host.h.host, n) < 0) {
		in->run[0] = '\0';
		rc = err_set(e, "the state folder's path is too long");
	} else if (mkdir(in->run, 0700) < 0 || chown(in->run, D->host.uid, D->host.gid) < 0) {
		rc = err_sys(e, "creating %s", in->run);
	}
	if (rc == 0 && !D->stream)
		rc = listen_agent(D, in, e);
	if (rc == 0)
		rc = create_container(D, in, n, net, proxy_dir, install, e);
	if (rc == 0)
		rc = start_container(D, in, e);
	if (rc == 0 && !D->stream)
		rc = verify_bound(D, in, install, e);
	if (rc < 0) {
		docker_kill(D, &in->in);
		return -1;
	}
	/* For telling out-of-memory kills: the engine's OOMKilled flags only a dead init. Its
	 * pid is the engine's, which means nothing here when this server sees another system. */
	in->in.pid = D->stream ? 0 : container_pid(D, in->id);
	in->in.rl_memory = D->rl_memory;
	in->in.rl_pids = D->rl_pids;
	if (install)
		log_msg(LOG_INFO, "docker: the install step runs in its own container %.12s (no network but the proxy)",
			in->id);
	*out = &in->in;
	return 0;
}

/* Whether the engine's message names the volume: its name, not the start of a container's
 * (sandbox-mcp-docker-ID-N). */
static bool names_volume(const char *msg, const char *volume)
{
	size_t n = strlen(volume);
	for (const char *p = strstr(msg, volume); p; p = strstr(p + 1, volume))
		if (p[n] != '-' && !isalnum((unsigned char)p[n]) && p[n] != '_' && p[n] != '.')
			return true;
	return false;
}

static int write_files(struct docker *D, struct err *e);

/* The engine does not have what the first container binds from /dev/shm (it sees another
 * /dev/shm than ours: the server in a container of its own, say; its errors name the path):
 * the files go to the sandbox's folder, as where /dev/shm is unusable. 0 when they moved. */
static int host_fallback(struct docker *D, struct err *e)
{
	if (!D->host.h.host_dev || D->host.main || !strstr(e->msg, D->host.h.host))
		return -1;
	log_msg(LOG_WARNING, "the container engine does not see %s as this server does (%s): the files bound into "
			     "sandboxes go to the sandbox's folder, whose path their mount table shows",
		D->host.h.host, e->msg);
	/* The proxy folder of an install step, were this one, would be there: this is the main
	 * instance's first start, before any install step. */
	struct err fe = {""};
	if (hostdir_host_in_dir(&D->host.h, &fe) < 0 || write_files(D, &fe) < 0) {
		log_msg(LOG_WARNING, "%s", fe.msg);
		return -1;
	}
	err_clear(e);
	return 0;
}

/* Reads the agent's copy in the host folder (caller frees *out). 0, or -1 with e set. */
static int read_agent(const struct docker *D, unsigned char **out, size_t *n, struct err *e)
{
	int fd = open(D->agent, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	*out = NULL;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > AGENT_MAX) {
		if (fd >= 0)
			close(fd);
		return err_set(e, "reading the agent's copy %s failed", D->agent);
	}
	unsigned char *p = malloc((size_t)st.st_size);
	size_t got = 0;
	while (p && got < (size_t)st.st_size) {
		ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!p || got != (size_t)st.st_size) {
		free(p);
		return err_set(e, "reading the agent's copy %s failed", D->agent);
	}
	*out = p;
	*n = got;
	return 0;
}

/* Fills the files volume through a container made for that alone, never started, which mounts
 * it writable (the engine unpacks a tar stream only into a writable place, and a sandbox's
 * root is read-only): the sandboxes mount it read-only. 0, or -1 with e set. */
static int fill_files(struct docker *D, struct err *e)
{
	char name[128], path[256];
	long status = 0;
	json_t *ans = NULL;
	struct dktar t = {0};
	unsigned char *agent = NULL;
	size_t n = 0;
	int rc = read_agent(D, &agent, &n, e);
	if (rc == 0)
		rc = dktar_file(&t, AGENT_FILE, agent, n, 0555, e);
	free(agent);
	if (rc == 0)
		rc = dktar_end(&t, e);
	json_t *spec = rc < 0 ? NULL : json_pack("{s:s, s:[s], s:o, s:{s:s, s:[o]}}", "Image", D->image, "Cmd", "--never",
				   "Labels", labels(D, "files"), "HostConfig", "NetworkMode", "none", "Mounts",
				   dkvolume_mount(D->files, FILES_IN));
	if (rc == 0 && !spec)
		rc = err_set(e, "out of memory");
	snprintf(name, sizeof name, "sandbox-mcp-%s-files", D->host.id);
	snprintf(path, sizeof path, "/containers/create?name=%s", name);
	if (rc == 0)
		rc = dkapi_call(&D->eng, "POST", path, spec, T_CREATE, &status, &ans, e);
	json_decref(spec);
	const char *id = json_string_value(json_object_get(ans, "Id"));
	if (rc == 0 && (status != 201 || !id))
		rc = err_set(e, "the engine refused to make the container that fills the sandbox's files: %s (HTTP %ld)",
			     dkapi_message(ans, "no container id"), status);
	if (rc == 0)
		rc = dkstream_put(&D->eng, id, FILES_IN, &t, T_CREATE, e);
	json_decref(ans);
	dktar_free(&t);
	/* Made or not (a request cut short may have made it): its name is ours alone. */
	remove_by_name(D, name);
	return rc;
}

/* Does the folder at dfd hold the engine's socket (dev:ino), within depth levels? A bounded
 * walk (*budget entries): past it, true, as what cannot be shown safe is refused. */
static bool holds_socket(int dfd, dev_t dev, ino_t ino, int depth, long *budget)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return false;
	}
	bool found = false;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (--*budget < 0) {
			found = true;
			break;
		}
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (st.st_dev == dev && st.st_ino == ino)
			found = true;
		else if (S_ISDIR(st.st_mode) && depth > 0) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
			if (sub >= 0)
				found = holds_socket(sub, dev, ino, depth - 1, budget);
		}
	}
	closedir(d);
	return found;
}

/* Whether a file of the file system dev may show under the resolved folder real, by this
 * process's mount table: through the mount that holds real, or one mounted below it (a file
 * shows only through a mount of its own file system; a hard link cannot leave it). 1 yes, 0
 * no, -1 cannot tell (dev is in no mount, as on btrfs, or no table). */
static int dev_shows_under(const char *real, dev_t dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char line[8192];
	size_t rl = strlen(real), best = 0;
	bool seen = false, below = false;
	dev_t holder = 0;
	while (!below && fgets(line, sizeof line, f)) {
		unsigned maj, min;
		char mp[4096], out[4096];
		if (sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, mp) != 3)
			continue;
		/* The table escapes blanks and backslashes as \ooo. */
		size_t o = 0;
		for (const char *q = mp; *q && o + 1 < sizeof out; o++) {
			if (q[0] == '\\' && q[1] >= '0' && q[1] <= '3' && q[2] >= '0' && q[2] <= '7' && q[3] >= '0' && q[3] <= '7') {
				out[o] = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
				q += 4;
			} else {
				out[o] = *q++;
			}
		}
		out[o] = '\0';
		dev_t d = makedev(maj, min);
		size_t ml = strlen(out);
		seen = seen || d == dev;
		if (d == dev && ml >= rl && !strncmp(out, real, rl) && (out[rl] == '\0' || out[rl] == '/' || rl == 1))
			below = true;
		else if (ml >= best && !strncmp(real, out, ml) && (real[ml] == '\0' || real[ml] == '/' || ml == 1)) {
			best = ml;
			holder = d;
		}
	}
	fclose(f);
	if (below || (best && holder == dev))
		return 1;
	return seen ? 0 : -1;
}

/* The engine's socket is the keys to the host: no folder bound into a sandbox may hold it. */
static int no_engine_socket(const char *engine_sock, const char *what, const char *path, struct err *e)
{
	struct stat sock;
	char real[PATH_MAX];
	if (stat(engine_sock, &sock) < 0)
		return 0;
	/* Where the socket's file system shows nowhere under the folder, it cannot be there: no
	 * walk (a large workspace would take long). */
	if (realpath(path, real) && dev_shows_under(real, sock.st_dev) == 0)
		return 0;
	long budget = 100000;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0 && holds_socket(fd, sock.st_dev, sock.st_ino, 4, &budget))
		return err_set(e, "%s %s holds the container engine's socket %s (or too many files to tell): a sandbox "
				  "must never reach it; name a folder without it", what, path, engine_sock);
	return 0;
}

/* No folder the sandboxes bind (--workspace at ws, --wheelhouse, --mount) holds the engine's
 * socket. */
static int binds_clean(const char *engine_sock, const struct config *cfg, const char *ws, struct err *e)
{
	if ((cfg->workspace_dir[0] && no_engine_socket(engine_sock, "--workspace", ws, e) < 0) ||
	    (cfg->wheelhouse[0] && no_engine_socket(engine_sock, "--wheelhouse", cfg->wheelhouse, e) < 0))
		return -1;
	for (size_t i = 0; i < cfg->mounts.n; i++)
		if (no_engine_socket(engine_sock, "--mount", cfg->mounts.v[i].host, e) < 0)
			return -1;
	return 0;
}

/* Where given resolves here (realpath, PATH_MAX bytes at out); where nothing is there yet (a
 * --workspace that wsdir_take makes at the first sandbox, checked at start-up), where its
 * parent resolves, joined with its last name. 0, or -1. */
static int resolve_here(const char *given, char *out)
{
	struct stat st;
	char parent[PATH_MAX], real[PATH_MAX];
	if (realpath(given, out))
		return 0;
	if (errno != ENOENT || lstat(given, &st) == 0 || snprintf(parent, sizeof parent, "%s", given) >= (int)sizeof parent)
		return -1;
	size_t n = strlen(parent);
	while (n > 1 && parent[n - 1] == '/')
		parent[--n] = '\0';
	char *slash = strrchr(parent, '/');
	if (!slash || !slash[1] || !strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
		return -1;
	*slash = '\0';
	if (!realpath(parent[0] ? parent : "/", real))
		return -1;
	int len = snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") ? real : "", slash + 1);
	return len > 0 && len < PATH_MAX ? 0 : -1;
}

/* The mount that path is, or lies in, among the server's own container's Mounts (borrowed),
 * as a mount spec for a sandbox at target (new reference): a bind of the engine's host's
 * folder, or the named volume when path is the volume's top. NULL when there is none. */
static json_t *engine_mount(json_t *self_mounts, const char *given, const char *target, bool ro)
{
	json_t *best = NULL, *m;
	size_t i, best_len = 0;
	/* Matched as it resolves here: no "..", and no link of ours that leads out of a mount,
	 * reaches the engine's side. */
	char path[PATH_MAX];
	if (resolve_here(given, path) < 0)
		return NULL;
	json_array_foreach(self_mounts, i, m) {
		const char *dst = json_string_value(json_object_get(m, "Destination"));
		size_t n = dst ? strlen(dst) : 0;
		if (n && n >= best_len && !strncmp(path, dst, n) && (path[n] == '\0' || path[n] == '/')) {
			best = m;
			best_len = n;
		}
	}
	if (!best)
		return NULL;
	const char *type = json_string_value(json_object_get(best, "Type"));
	const char *rest = path + best_len;
	if (type && !strcmp(type, "bind")) {
		const char *src = json_string_value(json_object_get(best, "Source"));
		char full[PATH_MAX];
		if (!src || snprintf(full, sizeof full, "%s%s", src, rest) >= (int)sizeof full)
			return NULL;
		return mount_spec(full, target, ro);
	}
	const char *name = json_string_value(json_object_get(best, "Name"));
	if (type && !strcmp(type, "volume") && name && !*rest) {
		json_t *v = dkvolume_mount(name, target);
		json_object_set_new(v, "ReadOnly", json_boolean(ro));
		return v;
	}
	return NULL;
}

/* Undoes the octal escapes of a mount table's path (\040 for a blank, ...), in place. */
static void mountinfo_unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* A mount of this server's below the folder it names (its path as it resolves here) hides,
 * in this server's view, what the engine's host has there, which is what a sandbox gets: the
 * look for the engine's socket (binds_clean) would see the stand-in. Refused. */
static int no_mount_below(const char *what, const char *given, struct err *e)
{
	char path[PATH_MAX], line[4096];
	if (resolve_here(given, path) < 0)
		return 0; /* said by engine_mount */
	size_t n = strlen(path);
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return err_set(e, "%s %s: this server's mount table cannot be read", what, given);
	int rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		char *save = NULL, *mp = strtok_r(line, " ", &save);
		for (int k = 0; mp && k < 4; k++)
			mp = strtok_r(NULL, " ", &save);
		if (!mp)
			continue;
		mountinfo_unescape(mp);
		bool below = n == 1 ? mp[0] == '/' && mp[1] : !strncmp(mp, path, n) && mp[n] == '/' && mp[n + 1];
		if (below)
			rc = err_set(e, "%s %s has a mount of its own below it in this server's container (%.200s), which "
					"hides what the engine's host has there from this server's checks: name a folder "
					"without one", what, given, mp);
	}
	fclose(f);
	return rc;
}

/* Where a folder of this server's is in its file system: the mount table's device and root
 * of the mount it lies in, which the kernel gives as it is (no link, no ".."), joined with the
 * rest of its path. Two binds of the server's container that are one host folder (or one in
 * the other) show as such, whatever names their docker run line gave them. */
struct fs_place {
	char dev[32];
	char path[PATH_MAX + 8];
};

static int fs_place(const char *given, struct fs_place *out)
{
	char path[PATH_MAX], line[4096], best_mp[PATH_MAX] = "";
	if (resolve_here(given, path) < 0)
		return -1;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	size_t best = 0;
	bool found = false;
	while (fgets(line, sizeof line, f)) {
		char *save = NULL, *fld[5] = {strtok_r(line, " ", &save)};
		for (int k = 1; fld[k - 1] && k < 5; k++)
			fld[k] = strtok_r(NULL, " ", &save);
		if (!fld[4])
			continue;
		mountinfo_unescape(fld[3]);
		mountinfo_unescape(fld[4]);
		size_t n = strlen(fld[4]);
		bool holds = n == 1 || (!strncmp(path, fld[4], n) && (path[n] == '\0' || path[n] == '/'));
		/* The longest mount point wins; of two at one point, the later (on top). */
		if (holds && n >= best && strlen(fld[2]) < sizeof out->dev) {
			best = n;
			found = true;
			snprintf(out->dev, sizeof out->dev, "%s", fld[2]);
			snprintf(best_mp, sizeof best_mp, "%s", fld[3]);
		}
	}
	fclose(f);
	if (!found)
		return -1;
	const char *rest = best == 1 ? path : path + best;
	snprintf(out->path, sizeof out->path, "%s%s", strcmp(best_mp, "/") ? best_mp : "", rest);
	return 0;
}

/* Is place a strictly inside place b (one file system, by its names there)? */
static bool place_inside(const struct fs_place *a, const struct fs_place *b)
{
	size_t n = strlen(b->path);
	if (strcmp(a->dev, b->dev))
		return false;
	if (!strcmp(b->path, "/"))
		return a->path[1] != '\0';
	return !strncmp(a->path, b->path, n) && a->path[n] == '/';
}

/* No folder bound into a sandbox lies in one the code may write (the workspace, a writable
 * --mount) through another bind of the server's container: the engine binds by host path, which
 * it resolves anew for each container, and the code could put a link on that path to any host
 * folder. The check of hostfolders.c does not see this: here the two are apart. */
static int binds_apart(const struct config *cfg, const char *ws, struct err *e)
{
	size_t n = cfg->mounts.n + 2, k = 0;
	struct fs_place *pl = calloc(n, sizeof *pl);
	const char **what = calloc(n, sizeof *what), **name = calloc(n, sizeof *name);
	bool *rw = calloc(n, sizeof *rw);
	int rc = 0;
	if (!pl || !what || !name || !rw) {
		rc = err_set(e, "out of memory");
		goto out;
	}
	if (cfg->workspace_dir[0] && fs_place(ws, &pl[k]) == 0)
		what[k] = "--workspace", name[k] = cfg->workspace_dir, rw[k++] = true;
	if (cfg->wheelhouse[0] && fs_place(cfg->wheelhouse, &pl[k]) == 0)
		what[k] = "--wheelhouse", name[k] = cfg->wheelhouse, rw[k++] = false;
	for (size_t i = 0; i < cfg->mounts.n; i++)
		if (fs_place(cfg->mounts.v[i].host, &pl[k]) == 0)
			what[k] = "--mount", name[k] = cfg->mounts.v[i].host, rw[k++] = cfg->mounts.v[i].rw;
	for (size_t i = 0; rc == 0 && i < k; i++)
		for (size_t j = 0; rc == 0 && j < k; j++)
			if (i != j && rw[j] && place_inside(&pl[i], &pl[j]))
				rc = err_set(e, "%s %s lies in the folder of %s %s on the engine's host (through another bind "
						"of this server's container), where the sandbox's code could put a link in its "
						"place: name folders apart",
					     what[i], name[i], what[j], name[j]);
out:
	free(pl);
	free(what);
	free(name);
	free(rw);
	return rc;
}

/* This server's own container (D->self), as the engine describes it (*self: caller frees).
 * 0, or -1 with e set when the engine did not answer. */
static int self_describe(struct docker *D, long timeout_ms, json_t **self, struct err *e)
{
	char path[128];
	long status = 0;
	*self = NULL;
	snprintf(path, sizeof path, "/containers/%s/json", D->self);
	if (dkapi_call(&D->eng, "GET", path, NULL, timeout_ms, &status, self, e) < 0 || status != 200) {
		json_decref(*self);
		*self = NULL;
		return err_set(e, "the engine would not describe this server's container %.12s (%s)", D->self,
			       e->msg[0] ? e->msg : "HTTP error");
	}
	return 0;
}

/* Why the engine does not see this server's folders, when it runs in the engine's container. */
static void in_container_why(const struct docker *D, char *why, size_t n)
{
	snprintf(why, n, "this server runs in the engine's container %.12s", D->self);
}

/* What the sandboxes of a server the engine does not see bind, as the engine has it. */
struct engine_binds {
	json_t *ws, *wh;  /* --workspace, --wheelhouse; NULL: none */
	json_t *mnt;      /* the --mount folders, in their order; NULL: none */
};

static void engine_binds_free(struct engine_binds *b)
{
	json_decref(b->ws);
	json_decref(b->wh);
	json_decref(b->mnt);
	*b = (struct engine_binds){0};
}

/*
 * The folders named by --workspace (ws: its path here), --wheelhouse and --mount, as the engine
 * binds them for a sandbox of a server the engine does not see: each must be what this
 * server's own container has from the engine (self_mounts, borrowed: its "Mounts"; NULL when
 * that container is not known), a bind of the engine's host's folder or a named volume's top,
 * with no mount of this server's below it, none in a folder the code may write through another
 * bind, and none holding the engine's socket (engine_sock; said first, as on the host). One
 * check for both times it is made: at start-up (docker_startup_check) and when the first
 * sandbox is (go_stream). 0 with *out set (caller frees with engine_binds_free), or -1 with e
 * saying what to type instead (why: why the engine does not see this server's folders) and
 * *out empty.
 */
static int engine_binds(const char *engine_sock, const struct config *cfg, json_t *self_mounts, const char *ws,
			const char *why, struct engine_binds *out, struct err *e)
{
	const char *bad = NULL, *bad_path = NULL;
	*out = (struct engine_binds){0};
	if (binds_clean(engine_sock, cfg, ws, e) < 0)
		return -1;
	if (cfg->workspace_dir[0] && !(out->ws = engine_mount(self_mounts, ws, WORKSPACE, false)))
		bad = "--workspace", bad_path = cfg->workspace_dir;
	if (!bad && cfg->wheelhouse[0] && !(out->wh = engine_mount(self_mounts, cfg->wheelhouse, "/wheelhouse", true)))
		bad = "--wheelhouse", bad_path = cfg->wheelhouse;
	if (!bad && cfg->mounts.n && !(out->mnt = json_array())) {
		engine_binds_free(out);
		return err_set(e, "out of memory");
	}
	for (size_t i = 0; !bad && i < cfg->mounts.n; i++) {
		json_t *m = engine_mount(self_mounts, cfg->mounts.v[i].host, cfg->mounts.v[i].inside, !cfg->mounts.v[i].rw);
		if (!m)
			bad = "--mount", bad_path = cfg->mounts.v[i].host;
		json_array_append_new(out->mnt, m);
	}
	int rc = 0;
	if (bad)
		rc = err_set(e, "%s %s is a folder of this server's own file system, which the container engine does not "
				"see (%s): give the server's container that folder from the engine, e.g. docker run -v "
				"/path/on/the/host:%s (or -v VOLUME:%s) ... %s %s", bad, bad_path, why, bad_path, bad_path,
			     bad, bad_path);
	else if ((cfg->workspace_dir[0] && no_mount_below("--workspace", cfg->workspace_dir, e) < 0) ||
		 (cfg->wheelhouse[0] && no_mount_below("--wheelhouse", cfg->wheelhouse, e) < 0))
		rc = -1;
	for (size_t i = 0; rc == 0 && i < cfg->mounts.n; i++)
		rc = no_mount_below("--mount", cfg->mounts.v[i].host, e);
	if (rc == 0 && binds_apart(cfg, ws, e) < 0)
		rc = -1;
	if (rc < 0)
		engine_binds_free(out);
	return rc;
}

/*
 * The engine does not see this server's folders (the server runs in a container of its own,
 * the engine's socket bound in): from here on nothing of the host folder is bound. The agent
 * comes from a volume of the sandbox's own (fill_files), the workspace is a volume, and the
 * agent talks on its container's attached stdio. Folders named by --workspace, --mount and
 * --wheelhouse must be what the server's own container has from the engine (engine_binds,
 * which refused them at start-up already where the server found its container then).
 */
static int go_stream(struct docker *D, const char *reason, struct err *e)
{
	const struct config *cfg = D->host.cfg;
	char why[sizeof e->msg];
	snprintf(why, sizeof why, "%s", reason);
	err_clear(e);
	json_t *self = NULL;
	if ((cfg->workspace_dir[0] || cfg->mounts.n || cfg->wheelhouse[0]) && D->self[0] &&
	    self_describe(D, T_QUICK, &self, e) < 0)
		return -1;
	struct engine_binds eb;
	int brc = engine_binds(D->eng.sock, cfg, json_object_get(self, "Mounts"), D->host.h.ws, why, &eb, e);
	json_decref(self);
	if (brc < 0)
		return -1;
	D->ws_mount = eb.ws;
	D->wh_mount = eb.wh;
	D->mnt_mounts = eb.mnt;
	log_msg(LOG_NOTICE, "docker: the engine does not see this server's folders (%s): sandboxes get the agent from "
			    "a volume and talk on their attached stdio", why);
	json_t *l = labels(D, NULL);
	if (!l)
		return err_set(e, "out of memory");
	int rc = 0;
	if (!D->volume[0] && !D->ws_mount) {
		uint64_t bytes = cfg->workspace_size ? cfg->workspace_size : cfg->memory / 2;
		if (cfg->memory && bytes > cfg->memory / 2)
			bytes = cfg->memory / 2;
		char name[sizeof D->volume];
		snprintf(name, sizeof name, "sandbox-mcp-%s", D->host.id);
		rc = dkvolume_create(&D->eng, name, bytes ? bytes : (64u << 20), D->host.uid, D->host.gid, l, e);
		if (rc == 0)
			snprintf(D->volume, sizeof D->volume, "%s", name);
	}
	snprintf(D->files, sizeof D->files, "sandbox-mcp-%s-files", D->host.id);
	if (rc == 0 && dkvolume_create(&D->eng, D->files, 0, 0, 0, l, e) < 0) {
		D->files[0] = '\0';
		rc = -1;
	}
	json_decref(l);
	if (rc == 0) {
		D->stream = true;
		rc = fill_files(D, e);
	}
	return rc;
}

/* Whether the engine's message names a folder of this server's that a container binds. */
static bool names_ours(const struct docker *D, const char *msg)
{
	return strstr(msg, D->host.h.host) || (!D->volume[0] && strstr(msg, D->host.h.ws)) ||
	       strstr(msg, "bind source path does not exist");
}

static bool docker_direct_install(void *ctx)
{
	struct docker *D = ctx;
	return D->stream;
}

static int docker_spawn(void *ctx, bool net, const char *proxy_dir, bool install, struct agent_inst **out,
			struct err *e)
{
	struct docker *D = ctx;
	if (D->stream && proxy_dir && !install)
		return err_set(e, "--allow-hosts needs the server on the engine's host: its proxy, a unix socket, "
				  "cannot reach a sandbox of a server in a container");
	int rc = spawn_once(D, net, proxy_dir, install, out, e);
	/* The code's proxy folder was made in the old place: no fallback for it. */
	if (rc < 0 && (install || !proxy_dir) && host_fallback(D, e) == 0)
		rc = spawn_once(D, net, proxy_dir, install, out, e);
	if (rc < 0 && !D->stream && !D->host.main && !proxy_dir && !D->eng.http.cancelled && names_ours(D, e->msg)) {
		rc = go_stream(D, e->msg, e);
		if (rc == 0)
			rc = spawn_once(D, net, proxy_dir, install, out, e);
	}
	/* The engine would not mount the workspace's volume (its errors name it). Before the first
	 * instance, the sandbox is made on its plain folder instead, without the quota; later, an
	 * instance on another workspace than the others' would be wrong. */
	if (rc == 0 || !D->volume[0] || D->host.main || !names_volume(e->msg, D->volume))
		return rc;
	/* For --check, the engine's reason without its paths: what follows its last ": ". */
	char why[200];
	const char *last = strrchr(e->msg, ':');
	snprintf(why, sizeof why, "the engine could not mount the workspace's tmpfs volume: %.120s",
		 last ? last + 1 + strspn(last + 1, " ") : e->msg);
	log_msg(LOG_WARNING, "the workspace quota is not enforced: %s (%s)", why, e->msg);
	hostdir_quota_lost(&D->host.h, why);
	dkvolume_remove(&D->eng, D->volume);
	D->volume[0] = '\0';
	err_clear(e);
	return spawn_once(D, net, proxy_dir, install, out, e);
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
	if (D->no_pull) {
		D->would_pull = true;
		return err_set(e, "the image %s is not on this engine: the first call would pull it (--check pulls "
				  "nothing; docker pull %s makes it ready)", D->image, D->image);
	}
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

/* Is the server of these labels gone? Only servers of this host and of this PID namespace are
 * judged (a pid means nothing in another: a server in a container or a CI job's namespace on
 * the same host is never taken for a gone one here): by pid and start time (a pid reused by
 * another process is not the server). What lacks the namespace label (an earlier build's) is
 * not judged at all: nothing is removed that cannot be proved to be a gone server's. */
static bool owner_dead(struct docker *D, json_t *labels, bool self_too)
{
	/* A server in a container of the same engine: gone with its container, whoever judges
	 * (a server in the next container, with another hostname and PID namespace, too). */
	const char *in = json_string_value(json_object_get(labels, LABEL ".container"));
	if (in && strcmp(in, D->self) && container_gone(D, in))
		return true;
	const char *host = json_string_value(json_object_get(labels, LABEL ".host"));
	const char *ns = json_string_value(json_object_get(labels, LABEL ".pidns"));
	const char *pid = json_string_value(json_object_get(labels, LABEL ".pid"));
	const char *start = json_string_value(json_object_get(labels, LABEL ".starttime"));
	if (!host || strcmp(host, D->hostname) || !ns || !D->pidns[0] || strcmp(ns, D->pidns) || !pid || !start)
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
	return proc_start((pid_t)p, now, sizeof now) == 0 && strcmp(now, start) != 0;
}

struct reap_ctx {
	struct docker *D;
	bool self_too;
};

static bool volume_dead(json_t *labels, void *ctx)
{
	const struct reap_ctx *r = ctx;
	return owner_dead(r->D, labels, r->self_too);
}

/* Removes containers of servers of this host that are gone, then their workspaces' volumes;
 * with self_too, this server's own earlier ones too (they outlived an engine restart). */
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
	dkvolume_reap(&D->eng, LABEL, volume_dead, &(struct reap_ctx){D, self_too});
}

/* ---------------------------------------------------------------- the home */

/* The workspace's quota where the host folder has none (the server is not root): a tmpfs
 * volume of the engine's (dkvolume.h). */
static int docker_quota(void *ctx, uint64_t *bytes, char *how, size_t n, struct err *e)
{
	struct docker *D = ctx;
	uint64_t memory = D->host.cfg->memory;
	/* Its files take memory, counted in the container's memory cgroup and never swapped: the
	 * code must meet ENOSPC long before the memory limit. */
	bool halved = memory && *bytes > memory / 2;
	if (halved)
		*bytes = memory / 2;
	char name[sizeof D->volume];
	snprintf(name, sizeof name, "sandbox-mcp-%s", D->host.id);
	json_t *l = labels(D, NULL);
	if (!l)
		return err_set(e, "out of memory");
	int rc = dkvolume_create(&D->eng, name, *bytes, D->host.uid, D->host.gid, l, e);
	json_decref(l);
	if (rc < 0)
		return D->eng.http.cancelled ? BACKEND_CANCELLED : -1;
	snprintf(D->volume, sizeof D->volume, "%s", name);
	snprintf(how, n, "the workspace is a tmpfs volume of its own (memory, not disk%s)",
		 halved ? "; at most half of --memory" : "");
	return 0;
}

/* The files every container binds, in the host folder: the agent's copy, the /etc files. */
static int write_files(struct docker *D, struct err *e)
{
	if (hostdir_path(D->agent, sizeof D->agent, "%s/sandbox-agent", D->host.h.host) < 0)
		return err_set(e, "the state folder's path is too long");
	return write_agent(D->agent, e) < 0 || write_etc(D->host.h.host, e) < 0 ? -1 : 0;
}

/* What every container needs: its files, and the image. */
static int docker_prepare(void *ctx, struct err *e)
{
	struct docker *D = ctx;
	if (write_files(D, e) < 0 || ensure_image(D, e) < 0)
		return -1;
	/* In a container of the engine's own: its folders are not the engine's host's. */
	if (D->self[0] && !D->stream) {
		char why[160];
		in_container_why(D, why, sizeof why);
		return go_stream(D, why, e);
	}
	return binds_clean(D->eng.sock, D->host.cfg, D->host.h.ws, e);
}

/* Between calls the agent says nothing: readable means it closed or died. */
static int docker_alive(void *ctx, struct agent_inst *in, struct err *e)
{
	struct docker *D = ctx;
	if (!agentlink_ended(&in->link))
		return 0;
	char why[512];
	bool running;
	/* The agent goes first when the container is removed (docker rm -f kills it, then removes
	 * it): the engine may call it running, then stopped, for a moment. Asked again until it is
	 * gone, for at most a second, so that the notice says what happened. */
	container_state(D, DI(in)->id, why, sizeof why, &running);
	for (int i = 0; strcmp(why, CONTAINER_REMOVED) && i < 10; i++) {
		nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
		container_state(D, DI(in)->id, why, sizeof why, &running);
	}
	agentlink_close(&in->link);
	if (!strcmp(why, CONTAINER_REMOVED))
		return err_set(e, "%s", why), BACKEND_LOST;
	return err_set(e, "its agent went away (%s)", why), BACKEND_LOST;
}

static void docker_lost(void *ctx, struct agent_inst *in)
{
	struct docker *D = ctx;
	char why[512];
	bool running;
	container_state(D, DI(in)->id, why, sizeof why, &running);
	/* On the attached stdio, the relay knows how the stream ended: a frame that broke the
	 * format says more than the container's state. */
	char how[256] = "";
	if (D->stream)
		stdiorelay_why(&DI(in)->relay, how, sizeof how);
	log_msg(LOG_WARNING, "docker: lost the agent of %s: %s%s%s%s", D->host.id, why, how[0] ? " (its stream: " : "",
		how, how[0] ? ")" : "");
}

static int docker_oom_open(void *ctx, const struct agent_inst *in)
{
	(void)ctx;
	if (!in->pid || in->rl_memory)
		return -1;
	return cgroup_oom_open_of(in->pid);
}

static void docker_end(void *ctx, bool keep)
{
	struct docker *D = ctx;
	if (keep && D->agent[0])
		unlink(D->agent);
	/* Its containers are removed by now: the engine has unmounted it. */
	if (D->volume[0])
		dkvolume_remove(&D->eng, D->volume);
	D->volume[0] = '\0';
	if (D->files[0])
		dkvolume_remove(&D->eng, D->files);
	D->files[0] = '\0';
	json_decref(D->ws_mount);
	json_decref(D->wh_mount);
	json_decref(D->mnt_mounts);
	D->ws_mount = D->wh_mount = D->mnt_mounts = NULL;
	D->stream = false;
	dkapi_close(&D->eng);
	D->eng.api[0] = '\0';
}

static void docker_report_isolation(void *ctx, FILE *f)
{
	struct docker *D = ctx;
	const struct config *cfg = D->host.cfg;
	fprintf(f, "    engine      %s %s at unix://%s (API version %s)\n", D->eng.name, D->eng.version, D->eng.sock,
		D->eng.api + 2);
	fprintf(f, "    image       %s\n", D->image);
	fprintf(f, "    isolation   container (own pid, mount, ipc, uts%s namespaces); read-only root; engine's default "
		   "seccomp profile plus the server's filter (%u rules); no-new-privileges; no capabilities\n",
		cfg->network == NET_ALL ? "" : ", network", D->host.filter.rules);
	fprintf(f, "    user        uid %u, gid %u\n", (unsigned)D->host.uid, (unsigned)D->host.gid);
}

static void docker_report_limits(void *ctx, FILE *f)
{
	struct docker *D = ctx;
	const struct config *cfg = D->host.cfg;
	char sz[32];
	fprintf(f, "    memory      %-10s %s\n", config_fmt_size(cfg->memory, sz, sizeof sz),
		!D->rl_memory ? "container memory limit (cgroup), no swap"
		: cfg->gpu    ? "NOT enforced: the engine cannot limit memory here, and --gpu rules out the per-process "
				"RLIMIT_AS (CUDA reserves address space far beyond memory)"
			      : "per process only (RLIMIT_AS): the engine cannot limit memory here");
	fprintf(f, "    processes   %-10llu %s\n", (unsigned long long)cfg->pids,
		D->rl_pids ? "per user (RLIMIT_NPROC): the engine cannot limit processes here" : "container pids limit (cgroup)");
	fprintf(f, "    cpus        %-10g container CPU quota (NanoCpus)\n", cfg->cpus);
}

static const struct agenthost_home docker_home = {
	.prefix = "docker",
	.quota = docker_quota,
	.prepare = docker_prepare,
	.spawn = docker_spawn,
	.kill = docker_kill,
	.check = docker_alive,
	.lost = docker_lost,
	.oom_open = docker_oom_open,
	.report_isolation = docker_report_isolation,
	.report_limits = docker_report_limits,
	.end = docker_end,
	.direct_install = docker_direct_install,
	.shared_net = "the engine's default bridge",
	.ws_how = "bind-mounted at /workspace",
};

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
}

/* Makes the sandbox (see docker_start). */
static int make_sandbox(struct backend *b, struct err *e)
{
	struct docker *D = b->priv;
	const struct docker_opts *o = b->opts;
	snprintf(D->image, sizeof D->image, "%s", o->image[0] ? o->image : DEFAULT_IMAGE);
	if (!image_ok(D->image))
		return err_set(e, "--image '%s' is not an image reference", D->image);
	self_labels(D);
	if (!D->eng.api[0] && dkapi_open(&D->eng, 5000, e) < 0)
		return -1;
	self_container(D, T_QUICK);
	reap_containers(D, true);
	return agenthost_start(&D->host, e);
}

/* An image pull can take minutes: every engine call and wait of the making watches cancel_fd,
 * and a cancelled making says so (what it made is removed by destroy, which follows). */
static int docker_start(struct backend *b, int cancel_fd, struct err *e)
{
	struct docker *D = b->priv;
	D->eng.http.cancel_fd = cancel_fd;
	D->no_pull = b->checking;
	int rc = make_sandbox(b, e);
	bool cancelled = D->eng.http.cancelled || (rc < 0 && cancel_fd >= 0 && poll(&(struct pollfd){cancel_fd, POLLIN, 0}, 1, 0) > 0);
	D->eng.http.cancel_fd = -1;
	D->eng.http.cancelled = false;
	if (rc < 0 && D->would_pull)
		return BACKEND_WOULD_FETCH;
	return rc < 0 && cancelled ? BACKEND_CANCELLED : rc;
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
		self_container(D, T_QUICK);
		reap_containers(D, false);
	}
	agenthost_reap(cfg, "docker", NULL, NULL);
	dkapi_close(&D->eng);
	free(D);
}

/*
 * A server in a container of the engine it talks to: the folders it names must be the engine's
 * (engine_binds), known now, before the server answers anything. Where the engine does not
 * answer within T_STARTUP, or names no container of this server's, nothing is known: the first
 * sandbox says it (go_stream runs the same check).
 */
static int docker_startup_check(const struct config *cfg, struct err *e)
{
	if (!cfg->workspace_dir[0] && !cfg->mounts.n && !cfg->wheelhouse[0])
		return 0;
	struct docker *D = calloc(1, sizeof *D);
	if (!D)
		return err_set(e, "out of memory");
	dkapi_init(&D->eng);
	struct err quiet = {""};
	json_t *self = NULL;
	int rc = 0;
	if (dkapi_locate(&D->eng, &quiet) == 0 && dkapi_open(&D->eng, T_STARTUP, &quiet) == 0) {
		self_labels(D);
		self_container(D, T_STARTUP);
	}
	if (D->self[0] && self_describe(D, T_STARTUP, &self, &quiet) == 0) {
		char why[160], ws[PATH_MAX] = "";
		struct engine_binds eb;
		in_container_why(D, why, sizeof why);
		if (cfg->workspace_dir[0] && resolve_here(cfg->workspace_dir, ws) < 0)
			snprintf(ws, sizeof ws, "%s", cfg->workspace_dir);
		rc = engine_binds(D->eng.sock, cfg, json_object_get(self, "Mounts"), ws, why, &eb, e);
		engine_binds_free(&eb);
	}
	json_decref(self);
	dkapi_close(&D->eng);
	free(D);
	return rc;
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
	.home = &docker_home,
	.init = docker_init,
	.probe = docker_probe,
	.start = docker_start,
	.startup_check = docker_startup_check,
	.reap = docker_reap,
};
