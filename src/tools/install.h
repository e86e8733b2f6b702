/*
 * The install step of execute_python (install.c): `requirements` installed into the
 * workspace's package folder before the script runs. Worker thread only.
 */
#ifndef SANDBOX_INSTALL_H
#define SANDBOX_INSTALL_H

#include <jansson.h>

#include "call.h"

/* Installs reqs (the call's argument; may be NULL) unless every one was installed in this
 * sandbox before. NULL when done (or nothing to do); else the result to return (new ref), or
 * NULL with c->tc->cancelled set. */
json_t *install_requirements(struct call_ctx *c, const json_t *reqs);

#endif
