#include "title.h"

#include <bsd/unistd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

extern char **environ;

static bool ready;

void title_init(int argc, char **argv)
{
	setproctitle_init(argc, argv, environ);
	ready = true;
}

void title_set(const char *fmt, ...)
{
	char t[256];
	va_list ap;
	if (!ready)
		return;
	va_start(ap, fmt);
	vsnprintf(t, sizeof t, fmt, ap);
	va_end(ap);
	setproctitle("%s", t);
}
