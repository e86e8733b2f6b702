/*
 * mount_setattr's work done with MS_REMOUNT | MS_BIND, one mount at a time, as bubblewrap does
 * it: for valgrind, which answers ENOSYS to mount_setattr and follows the local sandbox's first
 * process up to its exec, and for a seccomp policy around the server that refuses the call.
 * Each mount keeps the flags statfs reports for it and gains the new ones. The mounts beneath a
 * folder are found by identity, not by name: the folder's mount ID (statx), then every mount of
 * this namespace's /proc/self/mountinfo whose chain of parents leads to it, so that a path given
 * with "//", a trailing "/" or a symlink on the way still finds them all. Any failure fails the
 * whole, as mount_setattr's would.
 */
#include "remount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256
#endif

/* statfs's f_flags (the kernel's ST_* values) and the MS_* flag each stands for. */
static const struct {
	unsigned long st, ms;
} kept[] = {
	{0x0001, MS_RDONLY},  {0x0002, MS_NOSUID},     {0x0004, MS_NODEV},    {0x0008, MS_NOEXEC},
	{0x0400, MS_NOATIME}, {0x0800, MS_NODIRATIME}, {0x1000, MS_RELATIME}, {0x2000, MS_NOSYMFOLLOW},
};

/* MOUNT_ATTR_RDONLY, _NOSUID and _NODEV, the attributes the plan sets. */
static unsigned long attrs_to_ms(unsigned long attrs)
{
	return (attrs & 0x1 ? MS_RDONLY : 0) | (attrs & 0x2 ? MS_NOSUID : 0) | (attrs & 0x4 ? MS_NODEV : 0);
}

static int remount_one(const char *path, unsigned long ms)
{
	struct statfs s;
	if (statfs(path, &s) < 0)
		return -1;
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		if ((unsigned long)s.f_flags & kept[i].st)
			ms |= kept[i].ms;
	/* Neither noatime nor relatime is strictatime, which must be said: a remount that names
	 * no atime mode keeps the old one only when it names no atime flag at all (nodiratime). */
	if (!(s.f_flags & (0x0400 | 0x1000)))
		ms |= MS_STRICTATIME;
	return mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | ms, NULL);
}

/* The whole mount table, read once, and what each line says. Static: the child is a copy of
 * the server, whose heap it must not touch, and its stack may be a thread's. */
#define MAX_MOUNTS 16384
static char table[1 << 20];
static struct {
	uint64_t id, parent;
	char *point;  /* the mount point, escapes undone in place */
	bool beneath; /* the folder's mount or one below it */
} mounts[MAX_MOUNTS];

static ssize_t read_table(void)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		if (n == sizeof table - 1) {
			close(fd);
			errno = E2BIG;
			return -1;
		}
		ssize_t r = read(fd, table + n, sizeof table - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	table[n] = '\0';
	return (ssize_t)n;
}

static bool octal(char c)
{
	return c >= '0' && c <= '7';
}

/* A decimal number ending in a space; *s moves past the space. -1 when there is none. */
static int number(char **s, uint64_t *v)
{
	char *p = *s;
	*v = 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (*v > (UINT64_MAX - 9) / 10)
			return -1;
		*v = *v * 10 + (uint64_t)(*p - '0');
	}
	if (p == *s || *p != ' ')
		return -1;
	*s = p + 1;
	return 0;
}

/* One mountinfo line (terminated, no newline): "ID PARENT MAJ:MIN ROOT POINT ...". The mount
 * point's escapes (\040 and the like) are undone in place. 0, or -1 when malformed. */
static int parse_line(char *line, uint64_t *id, uint64_t *parent, char **point)
{
	if (number(&line, id) < 0 || number(&line, parent) < 0)
		return -1;
	for (int field = 0; field < 2; field++) {
		line = strchr(line, ' ');
		if (!line)
			return -1;
		line++;
	}
	char *out = line;
	*point = out;
	for (char *s = line; *s && *s != ' '; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && octal(s[2]) && octal(s[3])) {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	if (out == line)
		return -1;
	*out = '\0';
	return 0;
}

int remount_attrs(const char *dst, unsigned long attrs, bool recursive)
{
	unsigned long ms = attrs_to_ms(attrs);
	if (!recursive)
		return remount_one(dst, ms);
	struct statx sx;
	if (statx(AT_FDCWD, dst, 0, STATX_MNT_ID, &sx) < 0)
		return -1;
	if (!(sx.stx_mask & STATX_MNT_ID)) {
		errno = ENOSYS;
		return -1;
	}
	ssize_t len = read_table();
	if (len < 0)
		return -1;
	size_t n = 0;
	for (char *line = table, *next; *line; line = next) {
		char *nl = strchr(line, '\n');
		next = nl ? nl + 1 : line + strlen(line);
		if (nl)
			*nl = '\0';
		if (n == MAX_MOUNTS) {
			errno = E2BIG;
			return -1;
		}
		if (parse_line(line, &mounts[n].id, &mounts[n].parent, &mounts[n].point) < 0) {
			errno = EINVAL;
			return -1;
		}
		mounts[n].beneath = mounts[n].id == sx.stx_mnt_id;
		n++;
	}
	/* Down the tree from the folder's mount, one level per pass. */
	for (bool grew = true; grew;) {
		grew = false;
		for (size_t i = 0; i < n; i++) {
			if (mounts[i].beneath)
				continue;
			for (size_t j = 0; j < n; j++)
				if (mounts[j].beneath && mounts[j].id == mounts[i].parent) {
					mounts[i].beneath = grew = true;
					break;
				}
		}
	}
	bool found = false;
	for (size_t i = 0; i < n; i++) {
		if (!mounts[i].beneath)
			continue;
		found = true;
		if (remount_one(mounts[i].point, ms) < 0)
			return -1;
	}
	if (!found) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}
