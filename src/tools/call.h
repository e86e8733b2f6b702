/*
 * Running one tool call on the sandbox: the install step of execute_python, the program, and
 * the result (result.h), with the same steps and texts on every backend. Worker thread only.
 */
#ifndef SANDBOX_CALL_H
#define SANDBOX_CALL_H

#include <jansson.h>

#include "../base/config.h"
#include "../sandbox/sandbox.h"
#include "tools.h"

/* What the schema cannot say about an execute call's files, env and args (inputs.h): 0, or -1
 * with e saying what is wrong. */
int call_check(const json_t *args, struct err *e);

/* execute_python / execute_bash_commands. The CallToolResult (new ref); NULL when cancelled
 * (tc->cancelled set) or, without it, out of memory. */
json_t *call_execute(struct sandbox *sb, struct tool_call *tc, const struct config *cfg);

/* cleanup_sandbox. New ref; NULL when out of memory. */
json_t *call_cleanup(struct sandbox *sb);

#endif
