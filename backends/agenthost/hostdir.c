#include "hostdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hostmount.h"
#include "../../src/base/hostfolders.h"
#include "../../src/base/log.h"
#include "../hostfs/tree.h"
#include "../hostfs/wsdir.h"

int hostdir_path(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

int hostdir_state(const struct config *cfg, char *out, size_t n, struct err *e)
{
	if (hostfolders_state(cfg, out, n) < 0 || strlen(out) > PATH_MAX - 256)
		return err_set(e, "the state folder's path is too long");
	/* Named as the user gave it: the option, or where the default comes from. */
	const char *what = cfg->state_dir[0] ? "--state-dir" : "the state folder";
	const char *fix = "give --state-dir a folder of this user's that no one else may write (mode 0700), or a "
			  "path where one can be made";
	/* The folder itself, not what a name ending in "/" or "/." would reach through a symlink:
	 * those ends are dropped, and one ending in ".." is refused. */
	size_t len = strlen(out);
	for (;;) {
		if (len > 1 && out[len - 1] == '/')
			len--;
		else if (len > 2 && out[len - 1] == '.' && out[len - 2] == '/')
			len -= 2;
		else
			break;
		out[len] = '\0';
	}
	if (!strcmp(out, "..") || (len >= 3 && !strcmp(out + len - 3, "/..")))
		return err_set(e, "%s %s ends in '..': %s", what, out, fix);
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return err_set(e, "%s %s cannot be made (%s): %s", what, out, strerror(errno), fix);
	struct stat st;
	if (lstat(out, &st) < 0)
		return err_set(e, "%s %s: %s: %s", what, out, strerror(errno), fix);
	if (!S_ISDIR(st.st_mode))
		return err_set(e, "%s %s is not a folder (a symlink is not followed): %s", what, out, fix);
	if (st.st_uid != geteuid())
		return err_set(e, "%s %s is owned by uid %u, not by this server's uid %u: %s", what, out,
			       (unsigned)st.st_uid, (unsigned)geteuid(), fix);
	if (st.st_mode & 022)
		return err_set(e, "%s %s may be written by %s (mode %04o), who could tamper with the sandboxes' "
				  "folders: %s", what, out, st.st_mode & 002 ? "every user" : "its group",
			       (unsigned)(st.st_mode & 07777), fix);
	if (faccessat(AT_FDCWD, out, W_OK | X_OK, AT_EACCESS) < 0)
		return err_set(e, "%s %s is not writable by this server (mode %04o): %s", what, out,
			       (unsigned)(st.st_mode & 07777), fix);
	return 0;
}

void hostdir_init(struct hostdir *h)
{
	memset(h, 0, sizeof *h);
	h->lock_fd = -1;
	h->ws_fd = -1;
}

/* The tmpfs for what is bound into the sandbox: the Docker agent's copy, sockets, folders. */
#define HOST_TMPFS_SIZE (16u << 20)

/* Where `host` goes when it cannot be a tmpfs of its own (the server is not root): a folder
 * of ours on the host's shared-memory tmpfs, so that a bind from it names that folder alone
 * (/sandbox-mcp-XXXX/...) and nothing of the state folder's path, which may hold the user's
 * name. <dir>/host is a symlink to it, for remove_dir (and so hostdir_reap) to find. */
#define SHM_DIR HOSTFOLDERS_SHM /* one definition, which the start-up check refuses to show */
#define SHM_PREFIX HOSTFOLDERS_SHM_PREFIX
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* Is path a folder this server made on SHM_DIR (SHM_PREFIX and a name, owned by us)? */
static bool shm_ours(const char *path)
{
	size_t n = strlen(SHM_PREFIX);
	struct stat st;
	return !strncmp(path, SHM_PREFIX, n) && path[n] && !strchr(path + n, '/') && strcmp(path + n, "..") &&
	       lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid();
}

/* Makes h->host a folder on SHM_DIR with <dir>/host linking to it. 0, or -1 (nothing made):
 * SHM_DIR is no tmpfs, forbids running programs (the Docker agent runs from there), or lets
 * others remove what is ours. */
static int host_on_shm(struct hostdir *h, const char *link)
{
	struct statfs sf;
	struct stat sd;
	if (statfs(SHM_DIR, &sf) < 0 || sf.f_type != TMPFS_MAGIC || (sf.f_flags & ST_NOEXEC))
		return -1;
	/* Others may write there: only where they cannot remove or rename what is ours. */
	if (lstat(SHM_DIR, &sd) < 0 || !S_ISDIR(sd.st_mode) || ((sd.st_mode & S_IWOTH) && !(sd.st_mode & S_ISVTX)))
		return -1;
	for (int tries = 0; tries < 8; tries++) {
		unsigned char r[9];
		char name[sizeof r * 2 + 1];
		if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
			return -1;
		for (size_t i = 0; i < sizeof r; i++)
			snprintf(name + 2 * i, 3, "%02x", r[i]);
		if (hostdir_path(h->host, sizeof h->host, SHM_PREFIX "%s", name) < 0 || symlink(h->host, link) < 0)
			return -1;
		/* The link first: a server killed between the two leaves no folder it cannot find. */
		struct stat st;
		if (mkdir(h->host, 0700) == 0 && lstat(h->host, &st) == 0) {
			h->host_dev = st.st_dev;
			h->host_ino = st.st_ino;
			return 0;
		}
		int err = errno;
		unlink(link);
		if (err != EEXIST)
			return -1;
	}
	return -1;
}

/* Makes `host`: a tmpfs of its own as root, where the host allows; else a folder on SHM_DIR;
 * else a plain folder in dir. 0, or -1 with e set. */
static int make_host(struct hostdir *h, struct err *e)
{
	char link[PATH_MAX];
	snprintf(link, sizeof link, "%s", h->host);
	if (geteuid() == 0) {
		struct err me = {""};
		if (mkdir(link, 0700) < 0)
			return err_sys(e, "creating %s", link);
		if (hostmount_tmpfs(link, HOST_TMPFS_SIZE, &me) == 0)
			return 0;
		log_msg(LOG_DEBUG, "%s", me.msg);
		if (rmdir(link) < 0)
			return 0; /* the plain folder it is */
	}
	if (host_on_shm(h, link) == 0)
		return 0;
	/* The same every time: said once. */
	static bool told;
	log_msg(told ? LOG_DEBUG : LOG_INFO, "the files bound into sandboxes are in the state folder, whose path "
					     "their mount table shows: %s is not a tmpfs where programs may run and "
					     "others cannot remove ours, or refused a folder", SHM_DIR);
	told = true;
	snprintf(h->host, sizeof h->host, "%s", link);
	if (mkdir(link, 0700) < 0)
		return err_sys(e, "creating %s", link);
	return 0;
}

/* The state folder, flocked as `how` says (LOCK_SH | LOCK_EX, maybe | LOCK_NB): shared while a
 * server makes a sandbox's folder under its temporary name and locks it, exclusive while
 * hostdir_reap removes such folders (they are then a dead server's). Its fd, or -1. */
static int state_lock(const char *state, int how)
{
	int fd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && flock(fd, how) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Makes <state>/<name> locked: under a temporary name, renamed once the lock is held. */
static int make_locked(struct hostdir *h, const char *state, const char *name, struct err *e)
{
	char tmp[PATH_MAX], lock[PATH_MAX + 8];
	int sfd = -1, rc = -1;
	if (hostdir_path(tmp, sizeof tmp, "%s/new-%s", state, name) < 0 ||
	    hostdir_path(h->dir, sizeof h->dir, "%s/%s", state, name) < 0 ||
	    hostdir_path(h->ws, sizeof h->ws, "%s/workspace", h->dir) < 0 ||
	    hostdir_path(h->host, sizeof h->host, "%s/host", h->dir) < 0 ||
	    hostdir_path(lock, sizeof lock, "%s/lock", tmp) < 0) {
		h->dir[0] = h->ws[0] = h->host[0] = '\0';
		return err_set(e, "the state folder's path is too long");
	}
	if ((sfd = state_lock(state, LOCK_SH)) < 0 || mkdir(tmp, 0700) < 0) {
		err_sys(e, "creating %s", tmp);
		h->dir[0] = h->ws[0] = h->host[0] = '\0';
		goto out;
	}
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 || rename(tmp, h->dir) < 0) {
		err_sys(e, "locking %s", h->dir);
		if (fd >= 0)
			close(fd);
		unlink(lock);
		rmdir(tmp);
		h->dir[0] = h->ws[0] = h->host[0] = '\0';
		goto out;
	}
	h->lock_fd = fd;
	rc = 0;
out:
	if (sfd >= 0)
		close(sfd);
	return rc;
}

/* Is a the same path as b, or inside it? */
static bool within(const char *a, const char *b)
{
	size_t n = strlen(b);
	return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/' || (n && b[n - 1] == '/'));
}

int hostdir_open(struct hostdir *h, const struct config *cfg, const char *state, const char *name, uid_t uid,
		 gid_t gid, struct err *e)
{
	uint64_t quota = cfg->workspace_size;
	hostdir_init(h);
	/* The state folder holds every sandbox's workspace and the server's sockets: no --mount
	 * may show it to the code. */
	char real[PATH_MAX];
	const char *sd = realpath(state, real) ? real : state;
	for (size_t i = 0; i < cfg->mounts.n; i++)
		if (within(sd, cfg->mounts.v[i].host) || within(cfg->mounts.v[i].host, sd))
			return err_set(e, "--mount %s: the host folder %s holds, or is in, the state folder %s, which the "
					  "code must not see", cfg->mounts.v[i].inside, cfg->mounts.v[i].host, sd);
	/* Nor the folders on SHM_DIR of every sandbox's bound files (their agents, sockets). */
	for (size_t i = 0; i < cfg->mounts.n; i++)
		if (within(SHM_DIR, cfg->mounts.v[i].host) ||
		    !strncmp(cfg->mounts.v[i].host, SHM_PREFIX, strlen(SHM_PREFIX)))
			return err_set(e, "--mount %s: the host folder %s holds, or is in, %s, where the files bound "
					  "into sandboxes are, which the code must not see", cfg->mounts.v[i].inside,
				       cfg->mounts.v[i].host, SHM_DIR);
	if (make_locked(h, state, name, e) < 0)
		return -1;
	if (make_host(h, e) < 0)
		goto fail;
	if (cfg->workspace_dir[0]) {
		if ((h->ws_fd = wsdir_take(cfg->workspace_dir, uid, gid, h->ws, sizeof h->ws, e)) < 0)
			goto fail;
	} else if (mkdir(h->ws, 0755) < 0 || chown(h->ws, uid, gid) < 0) {
		err_sys(e, "creating the workspace in %s", h->dir);
		goto fail;
	}
	/* A kept workspace must outlive the server as files, whatever becomes of its mounts. */
	if (quota && cfg->workspace_dir[0])
		snprintf(h->why, sizeof h->why, "--workspace keeps the workspace in a plain folder of the host");
	else if (quota && cfg->keep)
		snprintf(h->why, sizeof h->why, "--keep keeps workspaces as plain folders");
	else if (quota && hostmount_usable(h->why, sizeof h->why)) {
		char img[PATH_MAX + 16];
		struct err me = {""};
		int r = hostdir_path(img, sizeof img, "%s/workspace.img", h->dir) < 0 ? -1
			: hostmount_image(img, h->ws, quota, uid, gid, &me);
		if (r == HOSTMOUNT_NO_ROOM) {
			/* Without the quota the code would fill that file system instead: refused. */
			err_set(e, "%s", me.msg);
			goto fail;
		} else if (r < 0) {
			/* Unexpected where images can be made: said every time. */
			snprintf(h->why, sizeof h->why, "%s", me.msg[0] ? me.msg : "the state folder's path is too long");
			log_msg(LOG_WARNING, "could not make the workspace's image: %s", h->why);
		} else {
			hostdir_quota_by(h, quota,
					 "the workspace is an ext4 image of its own, its blocks reserved on the host "
					 "(loop device)", true);
		}
	}
	/* Which folder it is: a --workspace folder, the one locked (what is bound must be it). */
	struct stat st;
	if ((h->ws_fd >= 0 ? fstat(h->ws_fd, &st) : stat(h->ws, &st)) < 0) {
		err_sys(e, "%s", h->ws);
		goto fail;
	}
	h->ws_dev = st.st_dev;
	h->ws_ino = st.st_ino;
	return 0;
fail:;
	struct err ce = {""};
	hostdir_close(h, HOSTDIR_REMOVE, &ce);
	return -1;
}

bool hostdir_removed(const struct hostdir *h)
{
	struct stat st;
	/* A folder removed on the host takes the lock file with it; a workspace that is an image
	 * stays as an empty mount point, so the lock tells that case too. */
	if (h->lock_fd >= 0 && fstat(h->lock_fd, &st) == 0 && st.st_nlink == 0)
		return true;
	return stat(h->ws, &st) < 0 || st.st_ino != h->ws_ino || st.st_dev != h->ws_dev;
}

static int release_host(const char *link);

int hostdir_host_in_dir(struct hostdir *h, struct err *e)
{
	if (!h->host_dev)
		return 0;
	char link[sizeof h->host];
	if (hostdir_path(link, sizeof link, "%s/host", h->dir) < 0)
		return err_set(e, "the state folder's path is too long");
	/* Through the link; the folder itself too, should the link be gone. */
	if (release_host(link) < 0 || (shm_ours(h->host) && tree_remove(h->host) < 0))
		return err_sys(e, "removing %s", h->host);
	h->host_dev = 0;
	snprintf(h->host, sizeof h->host, "%s", link);
	if (mkdir(link, 0700) < 0)
		return err_sys(e, "creating %s", link);
	return 0;
}

bool hostdir_host_removed(const struct hostdir *h)
{
	struct stat st;
	return h->host_dev && (lstat(h->host, &st) < 0 || st.st_ino != h->host_ino || st.st_dev != h->host_dev);
}

/* Ends the `host` of a sandbox folder, link its path: its tmpfs is unmounted, or the folder on
 * SHM_DIR it links to removed with the link. 0, or -1 with errno. */
static int release_host(const char *link)
{
	char to[PATH_MAX];
	ssize_t n = readlink(link, to, sizeof to - 1);
	if (n < 0)
		return hostmount_release(link);
	to[n] = '\0';
	if (shm_ours(to) && tree_remove(to) < 0)
		return -1;
	return unlink(link) < 0 && errno != ENOENT ? -1 : 0;
}

/* Unmounts the sandbox folder dir's mounts and removes it. 0, or -1 with errno. */
static int remove_dir(const char *dir)
{
	char ws[PATH_MAX + 16], host[PATH_MAX + 16];
	if (hostdir_path(ws, sizeof ws, "%s/workspace", dir) < 0 || hostdir_path(host, sizeof host, "%s/host", dir) < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* A mount that stays is never emptied through: what is in it is not this folder's. */
	int rc = hostmount_release(ws), err = errno;
	if (release_host(host) < 0 && rc == 0) {
		rc = -1;
		err = errno;
	}
	if (rc < 0) {
		errno = err;
		return -1;
	}
	return tree_remove(dir);
}

int hostdir_close(struct hostdir *h, enum hostdir_end how, struct err *e)
{
	int rc = 0;
	if (h->ws_fd >= 0 && how == HOSTDIR_CLEAR && wsdir_clear(h->ws_fd) < 0)
		rc = err_sys(e, "could not empty the workspace %s", h->ws);
	if (h->ws_fd >= 0)
		close(h->ws_fd);
	h->ws_fd = -1;
	/* Also when the sandbox folder, and the link in it, were removed on the host. */
	if (shm_ours(h->host) && tree_remove(h->host) < 0 && rc == 0)
		rc = err_sys(e, "could not remove %s", h->host);
	if (h->dir[0] && how == HOSTDIR_KEEP) {
		char path[PATH_MAX + 8];
		if (hostdir_path(path, sizeof path, "%s/kept", h->dir) == 0) {
			int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
			if (fd >= 0)
				close(fd);
		}
		char host[PATH_MAX + 8];
		if (hostdir_path(host, sizeof host, "%s/host", h->dir) == 0)
			(void)release_host(host);
		if (h->quota && !h->ws_away) /* a kept workspace is no image today; never left mounted */
			(void)hostmount_release(h->ws);
	} else if (h->dir[0] && remove_dir(h->dir) < 0 && rc == 0) {
		rc = err_sys(e, "could not remove %s", h->dir);
	}
	if (h->lock_fd >= 0)
		close(h->lock_fd);
	hostdir_init(h);
	return rc;
}

void hostdir_report_workspace(const struct hostdir *h, const struct config *cfg, const char *how, FILE *f)
{
	if (h->ws_away)
		fprintf(f, "    workspace   the sandbox's own file system, seen by its processes alone (%s stays empty)\n",
			h->ws);
	else
		fprintf(f, "    workspace   %s%s%s%s\n", h->ws, how ? " (" : "", how ? how : "", how ? ")" : "");
	if (cfg->workspace_dir[0])
		fprintf(f, "                --workspace: kept across restarts, crashes and idle removal; cleanup_sandbox "
			   "empties it\n");
	for (size_t i = 0; i < cfg->mounts.n; i++)
		fprintf(f, "    mount       %s: the host folder %s, %s\n", cfg->mounts.v[i].inside, cfg->mounts.v[i].host,
			cfg->mounts.v[i].rw ? "read-write" : "read-only");
	if ((cfg->workspace_dir[0] && !cfg->workspace_claim) || cfg->mounts.n || cfg->wheelhouse[0])
		fprintf(f, "                host folders: each bound only while it is the folder checked at start-up; the "
			   "code can leave no set-id file or folder, nor a file capability, in them\n");
}

bool hostdir_quota_open(const struct hostdir *h, const struct config *cfg)
{
	return cfg->workspace_size && !h->quota && (!cfg->workspace_dir[0] || cfg->workspace_claim) && !cfg->keep;
}

void hostdir_quota_by(struct hostdir *h, uint64_t bytes, const char *how, bool on_host)
{
	h->quota = bytes;
	h->ws_away = !on_host;
	snprintf(h->how, sizeof h->how, "%s", how);
}

void hostdir_quota_lost(struct hostdir *h, const char *why)
{
	h->quota = 0;
	h->ws_away = false;
	h->how[0] = '\0';
	char was[sizeof h->why];
	snprintf(was, sizeof was, "%s", h->why);
	snprintf(h->why, sizeof h->why, "%.140s%s%.150s", was, was[0] ? ", and " : "", why);
}

void hostdir_quota_tell(const struct hostdir *h, const struct config *cfg)
{
	char sz[32];
	if (h->quota)
		log_msg(LOG_DEBUG, "the workspace quota is %s: %s", config_fmt_size(h->quota, sz, sizeof sz), h->how);
	if (!cfg->workspace_size || h->quota)
		return;
	/* The same every time: said once. */
	static bool told;
	log_msg(told ? LOG_DEBUG : cfg->keep || cfg->workspace_dir[0] ? LOG_INFO : LOG_WARNING,
		"the workspace quota is not enforced: %s", h->why);
	told = true;
}

void hostdir_report_quota(const struct hostdir *h, const struct config *cfg, FILE *f)
{
	char sz[32];
	if (h->quota)
		fprintf(f, "    disk        %-10s %s: the code gets ENOSPC when it is full\n",
			config_fmt_size(h->quota, sz, sizeof sz), h->how);
	else if (cfg->workspace_size)
		fprintf(f, "    disk        %-10s NOT enforced: %s\n", config_fmt_size(cfg->workspace_size, sz, sizeof sz),
			h->why);
	else
		fprintf(f, "    disk        no quota (--workspace-size 0)\n");
}

/* Removes the folders new-<prefix>* of servers that died while they made them (hostdir_open's
 * temporary names): those there while no server is making one, which the state folder's
 * exclusive lock says. Tried for a second at most; else they wait for the next start. */
static void reap_unfinished(const char *state, const char *prefix)
{
	int sfd = -1;
	for (int i = 0; i < 100 && (sfd = state_lock(state, LOCK_EX | LOCK_NB)) < 0; i++)
		usleep(10 * 1000);
	DIR *d = sfd >= 0 ? opendir(state) : NULL;
	if (!d) {
		if (sfd >= 0)
			close(sfd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		if (strncmp(de->d_name, "new-", 4) != 0 || strncmp(de->d_name + 4, prefix, strlen(prefix)) != 0 ||
		    hostdir_path(path, sizeof path, "%s/%s/lock", state, de->d_name) < 0)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		bool held = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0;
		hostdir_path(path, sizeof path, "%s/%s", state, de->d_name);
		if (!held && remove_dir(path) == 0)
			log_msg(LOG_INFO, "removed %s, left by a server that is gone", path);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
	close(sfd);
}

void hostdir_reap(const char *state, const char *prefix, void (*gone)(const char *name, void *arg), void *arg)
{
	reap_unfinished(state, prefix);
	DIR *d = opendir(state);
	if (!d)
		return;
	size_t pl = strlen(prefix);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, pl) != 0)
			continue;
		char path[PATH_MAX];
		if (hostdir_path(path, sizeof path, "%s/%s/lock", state, de->d_name) < 0)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			continue; /* a live server's */
		}
		/* What else the dead server made for it goes first, while its lock is ours. */
		if (gone)
			gone(de->d_name, arg);
		hostdir_path(path, sizeof path, "%s/%s/kept", state, de->d_name);
		bool kept = access(path, F_OK) == 0;
		/* A kept one's files bound into it are of no use now (its server ends them, unless it
		 * died doing so). */
		hostdir_path(path, sizeof path, "%s/%s%s", state, de->d_name, kept ? "/host" : "");
		if (kept)
			(void)release_host(path);
		else if (remove_dir(path) == 0)
			log_msg(LOG_INFO, "removed %s, left by a server that is gone", path);
		if (fd >= 0)
			close(fd);
	}
	closedir(d);
}
