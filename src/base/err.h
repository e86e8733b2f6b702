/*
 * Error detail for callers: functions return 0 or a negative code and, on failure, write a
 * human-readable reason into the caller's struct err (the first failure wins; later calls to
 * err_set keep it, so a low-level cause is not overwritten by a vaguer one).
 */
#ifndef SANDBOX_ERR_H
#define SANDBOX_ERR_H

#include <stdarg.h>

struct err {
	char msg[1024];
};

/* Sets the message unless one is already set. Returns -1 for `return err_set(...)`. */
int err_set(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like err_set, with ": strerror(errno)" appended (errno read at entry). */
int err_sys(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline void err_clear(struct err *e) { e->msg[0] = '\0'; }

#endif
