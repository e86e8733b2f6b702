/*
 * The host side of sandboxes that live in folders (local, Docker): the state folder, one
 * folder per sandbox holding a lock its server keeps while it lives, its workspace, and the
 * removal of folders whose server is gone.
 */
#ifndef SANDBOX_HOSTDIR_H
#define SANDBOX_HOSTDIR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/config.h"
#include "../../src/base/err.h"

/* snprintf for paths: 0, or -1 when the result does not fit. */
int hostdir_path(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The state folder (--state-dir, or $TMPDIR/sandbox-mcp-UID), made 0700 if missing and
 * checked to be a folder of ours that no one else may write. Its path leaves room (256
 * bytes) for the paths made below it. */
int hostdir_state(const struct config *cfg, char *out, size_t n, struct err *e);

/* A sandbox's folder <state>/<name>, with `lock` (held while its server lives), `workspace`
 * (or, with --workspace DIR, DIR itself: see hostdir_open) and `host`, where the files bound
 * into the sandbox go (agent, sockets, proxy folder). When the server is root and the host
 * allows (hostmount.h), the workspace is an ext4 image of the quota mounted there and `host` a
 * tmpfs: the code cannot fill the host's disk, and the sandbox's mountinfo shows no host path.
 * Else the workspace is a plain folder, and the quota is enforced only where the backend's home
 * does it its own way (hostdir_quota_by); `why` says why it is not. `host` is then a folder of
 * its own on /dev/shm (a tmpfs: a bind from it names no path of the state folder), with
 * <dir>/host a link to it; where /dev/shm is no tmpfs that may hold programs, a plain folder. */
struct hostdir {
	char dir[PATH_MAX];    /* the sandbox's folder; "" when none */
	char ws[PATH_MAX];     /* its workspace */
	char host[PATH_MAX];   /* its files bound into the sandbox (maybe not in dir: see above) */
	int lock_fd;           /* -1 when none */
	int ws_fd;             /* --workspace: that folder, locked while the sandbox lives; -1 */
	dev_t ws_dev;          /* which workspace it is: one removed and made again is not it */
	ino_t ws_ino;
	dev_t host_dev;        /* which folder `host` is when it is not in dir; 0 when it is */
	ino_t host_ino;
	uint64_t quota;        /* the workspace's quota; 0 when it is not enforced */
	char how[160];         /* how it is, for --check (hostdir_quota_by) */
	bool ws_away;          /* the workspace's files are not in `ws` on the host */
	char why[300];         /* why it is not (or, when a home enforces it, why the host folder does
	                        * not); "" when none was asked */
};

/* An empty hostdir (no folder, no fd), for structs that are set up before it is opened. */
void hostdir_init(struct hostdir *h);

/* Makes <state>/<name>, locked, its workspace owned by uid:gid, with cfg's quota
 * (--workspace-size; with --keep the workspace is a plain folder, left as files at the end).
 * Made under a temporary name and renamed once locked, so hostdir_reap never sees it
 * unlocked. With --workspace DIR the workspace is DIR, a plain folder made if missing and
 * taken only when it is empty or a workspace of this server (it holds .sandbox): never a
 * folder of the user's that cleanup would empty. It is locked, so that two servers never
 * share it. 0, or -1 with e set (and h closed). */
int hostdir_open(struct hostdir *h, const struct config *cfg, const char *state, const char *name, uid_t uid,
		 gid_t gid, struct err *e);

/* Whether the quota is asked for and not enforced, on a workspace that is the sandbox's own
 * (not a --workspace or --keep folder, plain host folders by choice): a backend's home may then
 * enforce it its own way. */
bool hostdir_quota_open(const struct hostdir *h, const struct config *cfg);

/* The quota of `bytes` is enforced; how says how, for --check. on_host: the bounded file
 * system is mounted on `ws` on the host (else the host folder stays empty, and the files are
 * where only the sandbox sees them). */
void hostdir_quota_by(struct hostdir *h, uint64_t bytes, const char *how, bool on_host);

/* The quota is not enforced after all; why says why. */
void hostdir_quota_lost(struct hostdir *h, const char *why);

/* Logs that the quota is not enforced and why, when it is not (a warning once, as it is the
 * same for every sandbox); else how it is (debug). */
void hostdir_quota_tell(const struct hostdir *h, const struct config *cfg);

/* Whether the workspace or the whole folder was removed on the host since hostdir_open. */
bool hostdir_removed(const struct hostdir *h);

/* Moves `host` into the folder, a plain one, where it was not (an engine that does not see
 * /dev/shm as the server does): what was in it is gone. 0 (also when it was there already), or
 * -1 with e set. */
int hostdir_host_in_dir(struct hostdir *h, struct err *e);

/* Whether `host`, where it is not in the folder, was removed since hostdir_open: it goes on its
 * own (logind's RemoveIPC removes a user's files on /dev/shm when the user's last session
 * ends). */
bool hostdir_host_removed(const struct hostdir *h);

enum hostdir_end {
	HOSTDIR_REMOVE,   /* everything is unmounted and removed; a --workspace folder stays */
	HOSTDIR_CLEAR,    /* the same, and a --workspace folder is emptied */
	HOSTDIR_KEEP,     /* the folder is marked kept and left as files (hostdir_reap leaves it;
	                   * a kept workspace is never an image, see hostdir_open) */
};

/* Ends it as `how` says. Then h is empty. 0, or -1 with e set when something could not be
 * removed. */
int hostdir_close(struct hostdir *h, enum hostdir_end how, struct err *e);

/* The --check lines of the workspace (how: how the sandbox sees it, or NULL) and --mount. */
void hostdir_report_workspace(const struct hostdir *h, const struct config *cfg, const char *how, FILE *f);

/* The --check line of the workspace's quota: its size and how it is enforced, or why not. */
void hostdir_report_quota(const struct hostdir *h, const struct config *cfg, FILE *f);

/* Removes the folders <state>/<prefix>* whose lock no server holds, unless kept (of those, only
 * what was bound into the sandbox goes), and the folders new-<prefix>* of servers that died
 * while they made one. gone (may be NULL) is called with the name of each whose lock was free,
 * while this process holds that lock, before its folder goes: the caller removes what else the
 * dead server made for that sandbox (its cgroups). */
void hostdir_reap(const char *state, const char *prefix, void (*gone)(const char *name, void *arg), void *arg);

#endif
