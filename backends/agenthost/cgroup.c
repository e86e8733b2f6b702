#include "cgroup.h"
#include "../../src/base/log.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const names[CG_N] = {"memory", "pids", "cpu"};

static int write_file(const char *dir, const char *file, const char *val)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, val, strlen(val));
	int saved = errno;
	close(fd);
	errno = saved;
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

static int read_file(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t r = fread(buf, 1, n - 1, f);
	buf[r] = '\0';
	fclose(f);
	return 0;
}

static bool has_word(const char *list, const char *word, char sep)
{
	size_t n = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == sep) && (p[n] == sep || p[n] == '\0' || p[n] == '\n' || p[n] == ' '))
			return true;
	return false;
}

/* The cgroup path of pid (0: ourselves) in the hierarchy holding `controller` ("" for v2's). */
static int path_of(pid_t pid, const char *controller, char *out, size_t n)
{
	char proc[64];
	if (pid)
		snprintf(proc, sizeof proc, "/proc/%d/cgroup", (int)pid);
	else
		snprintf(proc, sizeof proc, "/proc/self/cgroup");
	FILE *f = fopen(proc, "re");
	if (!f)
		return -1;
	char line[4096];
	int rc = -1;
	while (fgets(line, sizeof line, f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		line[strcspn(line, "\n")] = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		bool match = *controller ? has_word(c1 + 1, controller, ',') : (c1[1] == '\0' && !strcmp(line, "0"));
		if (match) {
			snprintf(out, n, "%s", c2 + 1);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* Mount point and root of the hierarchy: v1 with `controller`, or v2 when controller is "". */
static int find_mount(const char *controller, char *mnt, char *root, size_t n)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char line[4096];
	int rc = -1;
	while (fgets(line, sizeof line, f)) {
		char r[PATH_MAX], m[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2)
			continue;
		char *dash = strstr(line, " - ");
		if (!dash)
			continue;
		char fstype[64], src[256], opts[1024];
		if (sscanf(dash + 3, "%63s %255s %1023s", fstype, src, opts) != 3)
			continue;
		bool match = *controller ? !strcmp(fstype, "cgroup") && has_word(opts, controller, ',')
					 : !strcmp(fstype, "cgroup2");
		if (match) {
			snprintf(mnt, n, "%s", m);
			snprintf(root, n, "%s", r);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* The folder of pid's (0: our own) cgroup holding `controller` ("": v2's), as we see it. */
static int cgroup_dir_of(pid_t pid, const char *controller, char *out, size_t n)
{
	char mnt[PATH_MAX], root[PATH_MAX], own[PATH_MAX];
	if (find_mount(controller, mnt, root, sizeof mnt) < 0 || path_of(pid, controller, own, sizeof own) < 0)
		return -1;
	const char *rel = own;
	size_t rl = strlen(root);
	if (strcmp(root, "/") && !strncmp(own, root, rl))
		rel = own + rl;
	if (!strcmp(rel, "/"))
		rel = "";
	if ((size_t)snprintf(out, n, "%s%s", mnt, rel) >= n)
		return -1;
	return 0;
}

static void limit_values(int c, uint64_t memory, uint64_t pids, double cpus, int version, char *val, size_t n)
{
	switch (c) {
	case CG_MEMORY:
		snprintf(val, n, "%llu", (unsigned long long)memory);
		break;
	case CG_PIDS:
		snprintf(val, n, "%llu", (unsigned long long)pids);
		break;
	default:
		if (version == 2)
			snprintf(val, n, "%lld 100000", (long long)(cpus * 100000));
		else
			snprintf(val, n, "%lld", (long long)(cpus * 100000));
	}
}

static bool try_v1(struct cgroup *cg, const char *name, uint64_t memory, uint64_t pids, double cpus)
{
	bool any = false;
	for (int c = 0; c < CG_N; c++) {
		char base[PATH_MAX], val[64];
		if (cgroup_dir_of(0, names[c], base, sizeof base) < 0)
			continue;
		if ((size_t)snprintf(cg->dir[c], sizeof cg->dir[c], "%s/%s", base, name) >= sizeof cg->dir[c] ||
		    (mkdir(cg->dir[c], 0755) < 0 && errno != EEXIST)) {
			cg->dir[c][0] = '\0';
			continue;
		}
		limit_values(c, memory, pids, cpus, 1, val, sizeof val);
		int rc;
		if (c == CG_MEMORY) {
			rc = write_file(cg->dir[c], "memory.limit_in_bytes", val);
			/* With swap accounting, the same bound for memory + swap (no swapping past it). */
			char p[PATH_MAX + 32];
			snprintf(p, sizeof p, "%s/memory.memsw.limit_in_bytes", cg->dir[c]);
			if (rc == 0 && access(p, F_OK) == 0)
				rc = write_file(cg->dir[c], "memory.memsw.limit_in_bytes", val);
		} else if (c == CG_PIDS) {
			rc = write_file(cg->dir[c], "pids.max", val);
		} else {
			rc = write_file(cg->dir[c], "cpu.cfs_period_us", "100000");
			if (rc == 0)
				rc = write_file(cg->dir[c], "cpu.cfs_quota_us", val);
		}
		if (rc < 0) {
			rmdir(cg->dir[c]);
			cg->dir[c][0] = '\0';
			continue;
		}
		cg->on[c] = true;
		any = true;
	}
	if (any)
		cg->version = 1;
	return any;
}

/*
 * v2: a cgroup with processes cannot give controllers to children, so the server first moves
 * itself into a leaf of its own cgroup, then enables the controllers below its cgroup.
 */
static bool try_v2(struct cgroup *cg, const char *name, uint64_t memory, uint64_t pids, double cpus)
{
	char base[PATH_MAX], buf[512], path[PATH_MAX + 64];
	if (cgroup_dir_of(0, "", base, sizeof base) < 0)
		return false;
	snprintf(path, sizeof path, "%s/cgroup.controllers", base);
	if (read_file(path, buf, sizeof buf) < 0)
		return false;
	static const char *const v2names[CG_N] = {"memory", "pids", "cpu"};
	char enable[64] = "";
	for (int c = 0; c < CG_N; c++)
		if (has_word(buf, v2names[c], ' ')) {
			strcat(enable, "+");
			strcat(enable, v2names[c]);
			strcat(enable, " ");
		}
	if (!enable[0]) {
		snprintf(cg->why, sizeof cg->why, "no cgroup controllers delegated to %.200s", base);
		return false;
	}
	snprintf(path, sizeof path, "%s/cgroup.subtree_control", base);
	if (read_file(path, buf, sizeof buf) < 0)
		return false;
	bool enabled = true;
	for (int c = 0; c < CG_N; c++)
		if (strstr(enable, v2names[c]) && !has_word(buf, v2names[c], ' '))
			enabled = false;
	if (!enabled) {
		char leaf[PATH_MAX + 64], pid[32];
		snprintf(leaf, sizeof leaf, "%s/sandbox-mcp-server-%d", base, (int)getpid());
		snprintf(pid, sizeof pid, "%d", (int)getpid());
		if ((mkdir(leaf, 0755) < 0 && errno != EEXIST) || write_file(leaf, "cgroup.procs", pid) < 0 ||
		    write_file(base, "cgroup.subtree_control", enable) < 0) {
			snprintf(cg->why, sizeof cg->why, "cgroup %.150s is not delegated to us: %.60s", base, strerror(errno));
			return false;
		}
	}
	char dir[PATH_MAX];
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", base, name) >= sizeof dir || (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return false;
	static const char *const files[CG_N] = {"memory.max", "pids.max", "cpu.max"};
	bool any = false;
	for (int c = 0; c < CG_N; c++) {
		char val[64];
		limit_values(c, memory, pids, cpus, 2, val, sizeof val);
		snprintf(cg->dir[c], sizeof cg->dir[c], "%s", dir);
		if (write_file(dir, files[c], val) == 0) {
			cg->on[c] = true;
			any = true;
		}
	}
	if (cg->on[CG_MEMORY])
		(void)write_file(dir, "memory.swap.max", "0");
	if (!any) {
		rmdir(dir);
		memset(cg->dir, 0, sizeof cg->dir);
		return false;
	}
	cg->version = 2;
	return true;
}

static void prewarm_join(void);

/* A v1 hierarchy with a controller of ours is mounted: cgroup_create tries v1 first. */
static bool have_v1(void)
{
	char mnt[PATH_MAX], root[PATH_MAX];
	return find_mount("memory", mnt, root, sizeof mnt) == 0 || find_mount("pids", mnt, root, sizeof mnt) == 0;
}

void cgroup_create(struct cgroup *cg, const char *name, uint64_t memory, uint64_t pids, double cpus)
{
	prewarm_join();
	memset(cg, 0, sizeof *cg);
	if (have_v1() && try_v1(cg, name, memory, pids, cpus))
		goto done;
	if (try_v2(cg, name, memory, pids, cpus))
		goto done;
done:
	if (!cg->why[0] && (!cg->on[CG_MEMORY] || !cg->on[CG_PIDS] || !cg->on[CG_CPU]))
		snprintf(cg->why, sizeof cg->why, "%s",
			 geteuid() == 0 ? "the host does not offer these cgroup controllers to us"
					: "cgroups are not delegated to this user");
}

/* Controller c is on, in a folder no controller before it is in (v2's one folder, or v1
 * hierarchies mounted together): the folder a process joins for it. */
static bool joins(const struct cgroup *cg, int c)
{
	if (!cg->on[c])
		return false;
	for (int d = 0; d < c; d++)
		if (cg->on[d] && !strcmp(cg->dir[d], cg->dir[c]))
			return false;
	return true;
}

int cgroup_attach(struct cgroup *cg, pid_t pid, struct err *e)
{
	char val[32];
	snprintf(val, sizeof val, "%d", (int)pid);
	for (int c = 0; c < CG_N; c++)
		if (joins(cg, c) && write_file(cg->dir[c], "cgroup.procs", val) < 0)
			return err_sys(e, "moving the sandbox into %s", cg->dir[c]);
	return 0;
}

int cgroup_self_fds(const struct cgroup *cg, int fds[CG_N])
{
	int n = 0;
	for (int c = 0; c < CG_N; c++)
		fds[c] = -1;
	if (cg->version != 1)
		return 0;
	for (int c = 0; c < CG_N; c++) {
		if (!joins(cg, c))
			continue;
		char path[PATH_MAX + 8];
		snprintf(path, sizeof path, "%s/tasks", cg->dir[c]);
		if ((fds[c] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			for (int d = 0; d < c; d++) {
				if (fds[d] >= 0)
					close(fds[d]);
				fds[d] = -1;
			}
			return 0;
		}
		n++;
	}
	return n;
}

int cgroup_join_self(const int fds[CG_N])
{
	for (int c = 0; c < CG_N; c++)
		if (fds[c] >= 0 && write(fds[c], "0", 1) != 1)
			return -1;
	return 0;
}

/* The prewarm thread under way, joined before a cgroup is made: on v2, cgroup_create moves the
 * server itself, which a prewarm reading its cgroup before and writing after would undo. Both
 * are called from the one thread that makes sandboxes. */
static pthread_t prewarm_thread;
static bool prewarm_running;
static atomic_bool prewarm_done;

/* Moves the server into the v2 cgroup it is in. */
static void *prewarm(void *arg)
{
	(void)arg;
	char dir[PATH_MAX], val[32];
	snprintf(val, sizeof val, "%d", (int)getpid());
	if (cgroup_dir_of(0, "", dir, sizeof dir) == 0)
		(void)write_file(dir, "cgroup.procs", val);
	atomic_store(&prewarm_done, true);
	return NULL;
}

static void prewarm_join(void)
{
	if (prewarm_running)
		pthread_join(prewarm_thread, NULL);
	prewarm_running = false;
}

void cgroup_prewarm(void)
{
	/* One under way already serves: the lock it waits for is the one a new one would. */
	if (prewarm_running && !atomic_load(&prewarm_done))
		return;
	/* On v1 a sandbox's process moves itself (cgroup_join_self), with no lock to take. */
	if (have_v1())
		return;
	pthread_attr_t a;
	prewarm_join();
	atomic_store(&prewarm_done, false);
	if (pthread_attr_init(&a) != 0)
		return;
	pthread_attr_setstacksize(&a, 64 * 1024 + 2 * PATH_MAX);
	prewarm_running = pthread_create(&prewarm_thread, &a, prewarm, NULL) == 0;
	if (!prewarm_running)
		log_msg(LOG_DEBUG, "cgroup: no thread to take the attach lock ahead");
	pthread_attr_destroy(&a);
}

void cgroup_destroy(struct cgroup *cg)
{
	for (int c = 0; c < CG_N; c++) {
		if (!cg->dir[c][0])
			continue;
		/* The last processes may still be leaving the cgroup: retry for a short while. */
		for (int i = 0; i < 100; i++) {
			if (rmdir(cg->dir[c]) == 0 || errno == ENOENT)
				break;
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		for (int d = c + 1; d < CG_N; d++)
			if (!strcmp(cg->dir[d], cg->dir[c]))
				cg->dir[d][0] = '\0';
		cg->dir[c][0] = '\0';
		cg->on[c] = false;
	}
	cg->version = 0;
}

/* A process that no longer runs: none by that pid, or a zombie its parent has not reaped yet
 * (a server killed under a host that waits for it later). */
static bool process_gone(int pid)
{
	if (kill(pid, 0) < 0)
		return errno == ESRCH;
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if (read_file(path, buf, sizeof buf) < 0)
		return false;
	const char *end = strrchr(buf, ')');
	return end && end[1] == ' ' && end[2] == 'Z';
}

/* Removes the cgroup of a sandbox whose server is gone. Its processes die with their server,
 * but the last may still be exiting (a server started right after the kill): they are killed
 * again and the removal retried, for at most a second. */
static void remove_dead(const char *path)
{
	for (int i = 0; i < 20; i++) {
		if (rmdir(path) == 0 || errno != EBUSY)
			return;
		char procs[PATH_MAX + 300], buf[4096];
		snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
		if (read_file(procs, buf, sizeof buf) == 0)
			for (char *sp, *t = strtok_r(buf, "\n", &sp); t; t = strtok_r(NULL, "\n", &sp))
				if (atoi(t) > 1)
					kill(atoi(t), SIGKILL);
		usleep(50 * 1000);
	}
	log_msg(LOG_NOTICE, "could not remove %s, left by a server that is gone: %s", path, strerror(errno));
}

/* Is name a cgroup of sandbox id: sandbox-mcp-PID-<id>-N? */
static bool of_sandbox(const char *name, const char *id)
{
	int pid, end = 0;
	if (sscanf(name, "sandbox-mcp-%d-%n", &pid, &end) != 1 || !end)
		return false;
	size_t n = strlen(id);
	const char *rest = name + end;
	if (strncmp(rest, id, n) != 0 || rest[n] != '-' || !rest[n + 1])
		return false;
	return strspn(rest + n + 1, "0123456789") == strlen(rest + n + 1);
}

/* In each folder our cgroups are made in (every v1 hierarchy of ours, and v2's): id set, the
 * cgroups of that sandbox; else the v2 leaves of servers. */
static void reap_in(const char *base, const char *id)
{
	DIR *d = opendir(base);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[PATH_MAX + 256];
		int pid;
		snprintf(path, sizeof path, "%s/%s", base, de->d_name);
		if (id) {
			if (of_sandbox(de->d_name, id))
				remove_dead(path);
		} else if (sscanf(de->d_name, "sandbox-mcp-server-%d", &pid) == 1 && pid > 0 && pid != (int)getpid() &&
			   process_gone(pid)) {
			/* Removed only when empty: nothing in it is killed, as that pid may be of
			 * another PID namespace, where its server still runs in it. */
			(void)rmdir(path);
		}
	}
	closedir(d);
}

static void reap(const char *id)
{
	char base[PATH_MAX];
	for (int c = 0; c < CG_N; c++)
		if (cgroup_dir_of(0, names[c], base, sizeof base) == 0)
			reap_in(base, id);
	if (cgroup_dir_of(0, "", base, sizeof base) == 0)
		reap_in(base, id);
}

void cgroup_reap(const char *id)
{
	reap(id);
}

void cgroup_reap_leaves(void)
{
	reap(NULL);
}

/* Opens "oom_kill N"'s file of a memory cgroup folder: memory.events on v2,
 * memory.oom_control on v1 (each version has only its own); -1 when it holds no count. */
static int oom_open_in(const char *dir, const char *file)
{
	char path[PATH_MAX + 32];
	uint64_t n;
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && cgroup_oom_read(fd, &n) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

int cgroup_oom_open(const struct cgroup *cg)
{
	if (!cg->on[CG_MEMORY])
		return -1;
	return oom_open_in(cg->dir[CG_MEMORY], cg->version == 2 ? "memory.events" : "memory.oom_control");
}

int cgroup_oom_open_of(pid_t pid)
{
	char dir[PATH_MAX];
	int fd = -1;
	if (cgroup_dir_of(pid, "memory", dir, sizeof dir) == 0)
		fd = oom_open_in(dir, "memory.oom_control");
	if (fd < 0 && cgroup_dir_of(pid, "", dir, sizeof dir) == 0)
		fd = oom_open_in(dir, "memory.events");
	return fd;
}

int cgroup_oom_read(int fd, uint64_t *n)
{
	char buf[1024];
	ssize_t len;
	do
		len = pread(fd, buf, sizeof buf - 1, 0);
	while (len < 0 && errno == EINTR);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	static const char key[] = "oom_kill ";
	for (const char *l = buf; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, sizeof key - 1))
			continue;
		const char *d = l + sizeof key - 1;
		if (*d < '0' || *d > '9')
			return -1;
		uint64_t v = 0;
		for (; *d >= '0' && *d <= '9'; d++) {
			if (v > (UINT64_MAX - 9) / 10)
				return -1;
			v = v * 10 + (uint64_t)(*d - '0');
		}
		*n = v;
		return 0;
	}
	return -1;
}

const char *cgroup_mechanism(const struct cgroup *cg, int controller)
{
	if (!cg->on[controller])
		return NULL;
	return cg->version == 2 ? "cgroup v2" : "cgroup v1";
}
