#include "procstart.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int procstart(pid_t pid, unsigned long long *out)
{
	char path[64], st[1024];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, st, sizeof st - 1);
	close(fd);
	if (r <= 0)
		return -1;
	st[r] = '\0';
	/* The name (field 2) may hold spaces and parentheses: the fields go on after its last ')'.
	 * Each ' ' from there on begins a field: the first begins field 3, the 20th field 22. */
	char *p = strrchr(st, ')');
	for (int field = 3; p && field <= 22; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -1;
	char *end;
	unsigned long long v = strtoull(p + 1, &end, 10);
	if (end == p + 1 || (*end != ' ' && *end != '\n' && *end != '\0'))
		return -1;
	*out = v;
	return 0;
}
