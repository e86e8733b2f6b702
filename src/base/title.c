#include "title.h"

#include <bsd/unistd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

extern char **environ;

static bool ready;
static char current[256]; /* what title_set last set */

void title_init(int argc, char **argv)
{
	setproctitle_init(argc, argv, environ);
	ready = true;
}

void title_set(const char *fmt, ...)
{
	va_list ap;
	if (!ready)
		return;
	va_start(ap, fmt);
	vsnprintf(current, sizeof current, fmt, ap);
	va_end(ap);
	setproctitle("%s", current);
}

void title_before_clone(const char *fmt, ...)
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

void title_after_clone(void)
{
	if (ready)
		setproctitle("%s", current);
}
