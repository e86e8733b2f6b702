#include "hostmount.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostdir.h"

static const char *const mkfs_paths[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4", "/usr/bin/mkfs.ext4"};

static const char *mkfs_path(void)
{
	for (size_t i = 0; i < sizeof mkfs_paths / sizeof mkfs_paths[0]; i++)
		if (access(mkfs_paths[i], X_OK) == 0)
			return mkfs_paths[i];
	return NULL;
}

int hostmount_usable(char *why, size_t n)
{
	if (geteuid() != 0)
		snprintf(why, n, "the server is not root");
	else if (access("/dev/loop-control", R_OK | W_OK) < 0)
		snprintf(why, n, "no loop devices (/dev/loop-control: %s)", strerror(errno));
	else if (!mkfs_path())
		snprintf(why, n, "no mkfs.ext4 (e2fsprogs is not installed)");
	else
		return 1;
	return 0;
}

/* Runs mkfs.ext4 on img, its output kept for the error. */
static int make_fs(const char *img, uid_t uid, gid_t gid, struct err *e)
{
	const char *mkfs = mkfs_path();
	if (!mkfs)
		return err_set(e, "no mkfs.ext4 (e2fsprogs is not installed)");
	char ext[96];
	/* No journal (the image lives as long as its sandbox), no blocks kept for growing it (it
	 * never grows), no blocks reserved for root, one inode per 8 KiB (packages are many small
	 * files); lost+found is removed once mounted. mke2fs discards the sparse file first, so the
	 * inode tables need no zeroing later. */
	snprintf(ext, sizeof ext, "root_owner=%u:%u", (unsigned)uid, (unsigned)gid);
	char *const argv[] = {(char *)mkfs, "-q", "-F", "-m", "0", "-i", "8192", "-O", "^has_journal,^resize_inode", "-E", ext,
			      (char *)img, NULL};
	char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	int out = memfd_create("mkfs-output", MFD_CLOEXEC);
	if (out < 0)
		return err_sys(e, "memfd_create");
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out, 1);
	posix_spawn_file_actions_adddup2(&fa, out, 2);
	posix_spawnattr_init(&at);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	pid_t pid;
	int rc = posix_spawn(&pid, mkfs, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		close(out);
		errno = rc;
		return err_sys(e, "running %s", mkfs);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = -1;
			break;
		}
	if (st != 0) {
		char msg[256] = "";
		ssize_t r = pread(out, msg, sizeof msg - 1, 0);
		msg[r > 0 ? r : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		close(out);
		if (st != -1 && WIFSIGNALED(st))
			return err_set(e, "%s was killed by signal %d: %s", mkfs, WTERMSIG(st), msg);
		return err_set(e, "%s failed (exit %d): %s", mkfs, st == -1 ? -1 : WEXITSTATUS(st), msg);
	}
	close(out);
	return 0;
}

/*
 * A fresh image's file system, kept once made: its data extents (about 80 KiB of a 1 GiB image)
 * copied into a sparse file are the same file system as mkfs.ext4 would write there, without
 * running it (3 ms quiet, 15 ms beside a busy client). One file per size, owner and these
 * options, in a root-only folder on /run (on most hosts a tmpfs, emptied at boot). The kernel
 * parses what is copied from there as root: the folder and file are used only when they are
 * root's and no one else may write to them.
 */
#define TEMPLATE_DIR "/run/sandbox-mcp"
#define TEMPLATE_VERSION 1 /* of make_fs's options: another version never reads this one's */

/* Root's, and nobody else may write to it. */
static bool root_only(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & 022);
}

static int template_dir(bool make)
{
	if (make)
		(void)mkdir(TEMPLATE_DIR, 0700);
	int d = open(TEMPLATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (d >= 0 && (fstat(d, &st) < 0 || !root_only(&st))) {
		close(d);
		d = -1;
	}
	return d;
}

static void template_name(char *name, size_t n, uint64_t bytes, uid_t uid, gid_t gid)
{
	snprintf(name, n, "ext4-v%d-%llu-%u-%u.img", TEMPLATE_VERSION, (unsigned long long)bytes, (unsigned)uid,
		 (unsigned)gid);
}

/* Copies the data extents of from (size bytes) into to, whose holes read as zeros. */
static int copy_extents(int from, int to, uint64_t size)
{
	char buf[64 * 1024];
	off_t off = 0;
	for (;;) {
		off_t data = lseek(from, off, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? 0 : -1;
		off_t hole = lseek(from, data, SEEK_HOLE);
		if (hole < 0)
			return -1;
		for (off_t at = data; at < hole;) {
			size_t want = (size_t)(hole - at) < sizeof buf ? (size_t)(hole - at) : sizeof buf;
			ssize_t r = pread(from, buf, want, at);
			if (r <= 0 || pwrite(to, buf, (size_t)r, at) != r)
				return -1;
			at += r;
		}
		if ((uint64_t)hole >= size)
			return 0;
		off = hole;
	}
}

/* Fills the image fd (sized `bytes`) from the template. 0, or -1 when there is none to use. */
static int template_fill(int fd, uint64_t bytes, uid_t uid, gid_t gid)
{
	char name[96];
	int d = template_dir(false);
	if (d < 0)
		return -1;
	template_name(name, sizeof name, bytes, uid, gid);
	int t = openat(d, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(d);
	struct stat st;
	int rc = -1;
	if (t >= 0 && fstat(t, &st) == 0 && S_ISREG(st.st_mode) && root_only(&st) &&
	    (uint64_t)st.st_size == bytes)
		rc = copy_extents(t, fd, bytes);
	if (t >= 0)
		close(t);
	return rc;
}

/* Keeps the file system mkfs.ext4 just made in fd as the template, unless there is one. Best
 * effort: a file appears whole or not at all (linked in once written). */
static void template_save(int fd, uint64_t bytes, uid_t uid, gid_t gid)
{
	char name[96], path[64];
	int d = template_dir(true);
	if (d < 0)
		return;
	template_name(name, sizeof name, bytes, uid, gid);
	int t = openat(d, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (t >= 0 && ftruncate(t, (off_t)bytes) == 0 && copy_extents(fd, t, bytes) == 0) {
		snprintf(path, sizeof path, "/proc/self/fd/%d", t);
		(void)!linkat(AT_FDCWD, path, d, name, AT_SYMLINK_FOLLOW);
	}
	if (t >= 0)
		close(t);
	close(d);
}

/* Attaches img to a free loop device that detaches itself at the last umount. Returns the
 * device's open fd and its path in dev, or -1 with e set. */
static int loop_attach(int img, char *dev, size_t n, struct err *e)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return err_sys(e, "/dev/loop-control");
	/* Another process may take the device between GET_FREE and CONFIGURE: try again. */
	for (int tries = 0; tries < 64; tries++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0) {
			err_sys(e, "no free loop device");
			break;
		}
		snprintf(dev, n, "/dev/loop%d", nr);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			err_sys(e, "%s", dev);
			break;
		}
		struct loop_config lc;
		memset(&lc, 0, sizeof lc);
		lc.fd = (unsigned)img;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			close(ctl);
			return fd;
		}
		int err = errno;
		close(fd);
		if (err != EBUSY) {
			errno = err;
			err_sys(e, "attaching the workspace image to %s", dev);
			break;
		}
	}
	close(ctl);
	if (!e->msg[0])
		err_set(e, "no free loop device");
	return -1;
}

int hostmount_image(const char *img, const char *dir, uint64_t bytes, uid_t uid, gid_t gid, struct err *e)
{
	int rc_fail = -1;
	int fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(e, "creating %s", img);
	if (ftruncate(fd, (off_t)bytes) < 0) {
		err_sys(e, "sizing %s", img);
		goto fail;
	}
	if (template_fill(fd, bytes, uid, gid) < 0) {
		/* What a failed copy wrote goes: mkfs starts from a sparse file. */
		if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)bytes) < 0) {
			err_sys(e, "sizing %s", img);
			goto fail;
		}
		if (make_fs(img, uid, gid, e) < 0)
			goto fail;
		template_save(fd, bytes, uid, gid);
	}
	/* Every block of the image reserved on the host, now: a sparse image would take them as
	 * the code writes, and where the host's file system has filled up meanwhile the loop
	 * device's writes fail after the code's own succeeded (the kernel's "lost async page
	 * write"), its data silently gone. Reserved, the code meets ENOSPC at the quota and only
	 * there. After the file system is written: fallocate keeps what is there. */
	if ((errno = posix_fallocate(fd, 0, (off_t)bytes)) != 0) {
		int err = errno;
		struct statvfs sv;
		char free_s[32] = "?";
		if (fstatvfs(fd, &sv) == 0)
			snprintf(free_s, sizeof free_s, "%llu MiB",
				 (unsigned long long)sv.f_bavail * sv.f_frsize >> 20);
		errno = err;
		err_sys(e, "reserving the workspace's %llu MiB (--workspace-size) on the state folder's file system, "
			   "which has %s free", (unsigned long long)(bytes >> 20), free_s);
		rc_fail = err == ENOSPC || err == EDQUOT || err == EFBIG ? HOSTMOUNT_NO_ROOM : -1;
		goto fail;
	}
	char dev[64], lf[PATH_MAX];
	int loop = loop_attach(fd, dev, sizeof dev, e);
	if (loop < 0)
		goto fail;
	int rc = mount(dev, dir, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "");
	int err = errno;
	close(loop); /* the mount holds the device now; without it, it detaches */
	if (rc < 0) {
		errno = err;
		err_sys(e, "mounting the workspace image on %s", dir);
		goto fail;
	}
	close(fd);
	if (hostdir_path(lf, sizeof lf, "%s/lost+found", dir) == 0)
		(void)rmdir(lf);
	return 0;
fail:
	close(fd);
	unlink(img);
	return rc_fail;
}

int hostmount_tmpfs(const char *dir, uint64_t bytes, struct err *e)
{
	char opts[64];
	snprintf(opts, sizeof opts, "size=%llu,mode=0700", (unsigned long long)bytes);
	/* Not noexec: Docker binds the agent from here, and a bind keeps its source's flags on
	 * some runtimes. Only root may enter it; the sandbox sees what is bound. */
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return err_sys(e, "mounting a tmpfs on %s", dir);
	return 0;
}

int hostmount_release(const char *dir)
{
	if (umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return 0;
	/* EINVAL: nothing is mounted there; ENOENT: it is gone; EPERM: not root, so nothing of
	 * ours can be mounted there either. */
	return errno == EINVAL || errno == ENOENT || errno == EPERM ? 0 : -1;
}
