#include "err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int err_set(struct err *e, const char *fmt, ...)
{
	if (e && !e->msg[0]) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		va_end(ap);
	}
	return -1;
}

int err_sys(struct err *e, const char *fmt, ...)
{
	int saved = errno;
	if (e && !e->msg[0]) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < sizeof e->msg)
			snprintf(e->msg + n, sizeof e->msg - (size_t)n, ": %s", strerror(saved));
	}
	errno = saved;
	return -1;
}
