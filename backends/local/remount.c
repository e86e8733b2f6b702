/*
 * mount_setattr's work done with MS_REMOUNT | MS_BIND, one mount at a time, as bubblewrap does
 * it: for a kernel before 5.12, and for valgrind, which answers ENOSYS to mount_setattr and
 * follows the local sandbox's first process up to its exec. Each mount keeps the flags statfs
 * reports for it and gains the new ones; the mounts beneath a folder are read from this mount
 * namespace's /proc/self/mountinfo. Any failure fails the whole, as mount_setattr's would.
 */
#include "remount.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

/* statfs's f_flags (the kernel's ST_* values) and the MS_* flag each stands for. */
static const struct {
	unsigned long st, ms;
} kept[] = {
	{0x0001, MS_RDONLY},    {0x0002, MS_NOSUID},     {0x0004, MS_NODEV},      {0x0008, MS_NOEXEC},
	{0x0400, MS_NOATIME},   {0x0800, MS_NODIRATIME}, {0x1000, MS_RELATIME},
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
	return mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | ms, NULL);
}

/* The whole mount table, read once. Static: the child is a copy of the server, whose heap it
 * must not touch, and its stack may be a thread's. */
static char table[1 << 20];

static ssize_t read_table(void)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	for (;;) {
		if (n == sizeof table) {
			close(fd);
			errno = E2BIG;
			return -1;
		}
		ssize_t r = read(fd, table + n, sizeof table - n);
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
	return (ssize_t)n;
}

/* The mount point of one mountinfo line (its fifth field, with the kernel's octal escapes for
 * space, tab, newline and backslash undone) into out. 0, or -1 when the line is malformed or
 * the path too long. */
static int mount_point(const char *line, const char *end, char *out, size_t size)
{
	const char *s = line;
	for (int field = 0; field < 4; field++) {
		while (s < end && *s != ' ')
			s++;
		if (s++ >= end)
			return -1;
	}
	size_t n = 0;
	for (; s < end && *s != ' '; s++) {
		char c = *s;
		if (c == '\\' && end - s > 3 && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			c = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		}
		if (n + 1 >= size)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return n ? 0 : -1;
}

int remount_attrs(const char *dst, unsigned long attrs, bool recursive)
{
	unsigned long ms = attrs_to_ms(attrs);
	if (!recursive)
		return remount_one(dst, ms);
	ssize_t len = read_table();
	if (len < 0)
		return -1;
	size_t dlen = strlen(dst);
	char path[4096];
	for (const char *line = table, *stop = table + len; line < stop;) {
		const char *end = memchr(line, '\n', (size_t)(stop - line));
		if (!end)
			end = stop;
		if (mount_point(line, end, path, sizeof path) < 0) {
			errno = EINVAL;
			return -1;
		}
		if (!strncmp(path, dst, dlen) && (path[dlen] == '\0' || path[dlen] == '/') && remount_one(path, ms) < 0)
			return -1;
		line = end + 1;
	}
	return 0;
}
