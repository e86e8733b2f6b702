/*
 * What a package requirement of execute_python may be, before pip sees it.
 *
 * pip splits a requirements file into lines on every line separator Python knows (VT, FF, FS,
 * GS, RS, NEL, U+2028, U+2029, as well as CR and LF), and a smuggled line can be any pip option
 * (-r, --index-url, --no-binary ...). So requirements never go through a file: each one is an
 * argument of its own, after "--", which nothing re-splits. And each must be what a
 * requirement can be: printable ASCII (PEP 508's names, versions and markers are ASCII), not
 * starting with '-'. Where installs may reach a network, only a plain PEP 508 requirement is
 * taken: a name, extras, version specifiers and a marker; no URL (it could reach services the
 * host sees), no path (a folder in the workspace with a build backend would run it), nothing
 * that pip takes for an archive file.
 */
#ifndef SANDBOX_REQUIREMENTS_H
#define SANDBOX_REQUIREMENTS_H

#include <stdbool.h>
#include <stddef.h>

/* 0 when q (n bytes) may be given to pip; else -1 with the reason in why (wn bytes). `online`:
 * the install may reach a network. */
int req_check(const char *q, size_t n, bool online, char *why, size_t wn);

#endif
