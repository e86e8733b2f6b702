#include "title.h"

#include <bsd/unistd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

extern char **environ;

static bool ready;
static char current[256]; /* what title_set last set */

void title_init(int argc, char **argv)
{
	setproctitle_init(argc, argv, environ);
	ready = true;
}

/* Formats into buf and shows it. */
__attribute__((format(printf, 3, 0)))
static void show(char *buf, size_t n, const char *fmt, va_list ap)
{
	vsnprintf(buf, n, fmt, ap);
	setproctitle("%s", buf);
}

void title_set(const char *fmt, ...)
{
	char t[sizeof current];
	va_list ap;
	if (!ready)
		return;
	va_start(ap, fmt);
	vsnprintf(t, sizeof t, fmt, ap);
	va_end(ap);
	/* The same title again (the idle one, after each wake between calls) is left as it is. */
	if (!strcmp(t, current))
		return;
	memcpy(current, t, sizeof current);
	setproctitle("%s", current);
}

void title_before_clone(const char *fmt, ...)
{
	char t[256];
	va_list ap;
	if (!ready)
		return;
	va_start(ap, fmt);
	show(t, sizeof t, fmt, ap);
	va_end(ap);
}

void title_after_clone(void)
{
	if (ready)
		setproctitle("%s", current);
}
