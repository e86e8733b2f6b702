/*
 * The server's wheelhouse (--wheelhouse): a host folder of wheels (and source archives) that
 * installs then use alone, with no network. Checked at start-up, so that a missing or
 * unreadable one is refused with its reason instead of failing every install later; and
 * listed, so that the tool descriptions tell the model exactly which packages it can install.
 */
#ifndef SANDBOX_WHEELHOUSE_H
#define SANDBOX_WHEELHOUSE_H

#include <stddef.h>
#include <sys/types.h>

#include "../base/err.h"

/* 0 when dir is a folder the sandbox user can read and search, holding distributions it can
 * read (when the server runs as root, the sandbox user is sandbox_uid, not the server). */
int wheelhouse_check(const char *dir, uid_t sandbox_uid, struct err *e);

/* "numpy 1.26.4, pandas 2.2.2" (projects and versions, sorted), at most max of them, then
 * " and N more"; "" when it holds none. Caller frees; NULL when out of memory. */
char *wheelhouse_list(const char *dir, size_t max);

#endif
