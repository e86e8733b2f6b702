/*
 * The host side of sandboxes that live in folders (local, Docker): the state folder, one
 * folder per sandbox holding a lock its server keeps while it lives, and the removal of
 * folders whose server is gone.
 */
#ifndef SANDBOX_HOSTDIR_H
#define SANDBOX_HOSTDIR_H

#include <stddef.h>

#include "config.h"
#include "err.h"

/* snprintf for paths: 0, or -1 when the result does not fit. */
int hostdir_path(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The state folder (--state-dir, or $TMPDIR/sandbox-mcp-UID), made 0700 if missing and
 * checked to be a folder of ours that no one else may write. Its path leaves room (256
 * bytes) for the paths made below it. */
int hostdir_state(const struct config *cfg, char *out, size_t n, struct err *e);

/* Makes <state>/<name> with <name>/lock held in *lock_fd (caller closes it at the end of the
 * sandbox's life). Made under a temporary name and renamed once locked, so hostdir_reap never
 * sees it unlocked. out gets the folder's path. */
int hostdir_make(const char *state, const char *name, char *out, size_t n, int *lock_fd, struct err *e);

/* Marks a sandbox folder kept (--keep): hostdir_reap leaves it alone. */
void hostdir_keep(const char *dir);

/* Removes the folders <state>/<prefix>* whose lock no server holds, unless kept. */
void hostdir_reap(const char *state, const char *prefix);

#endif
