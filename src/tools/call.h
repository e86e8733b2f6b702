/*
 * Running one tool call on the sandbox: the install step of execute_python, the program, and
 * the result (result.h), with the same steps and texts on every backend. Worker thread only.
 */
#ifndef SANDBOX_CALL_H
#define SANDBOX_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "../base/config.h"
#include "../sandbox/sandbox.h"
#include "tools.h"

/* What every result of one call shares (install.c's too). */
struct call_ctx {
	struct sandbox *sb;
	struct tool_call *tc;
	const struct config *cfg;
	int64_t t0, deadline;      /* monotonic ms: when the call started, when it must end */
	double timeout;            /* seconds */
	const char *allow;         /* the call's `network` (borrowed from its arguments), or NULL */
	char notice[SANDBOX_NOTICE_MAX];
};

/* A result for a call that never reached the program (no sandbox, install failure, ...):
 * stderr_text is its stderr; error (may be NULL) why the sandbox could not run the code. New
 * reference; NULL when out of memory. */
json_t *call_early_result(const struct call_ctx *c, int exit_code, const char *stderr_text, const char *error,
			  bool timed_out);

/* Adds a run's own notice (run_res.notice; "" for none) to the call's. */
void call_add_notice(struct call_ctx *c, const char *notice);

/* What the schema cannot say about an execute call's files, env and args (inputs.h): 0, or -1
 * with e saying what is wrong. */
int call_check(const json_t *args, struct err *e);

/* execute_python / execute_bash_commands. The CallToolResult (new ref); NULL when cancelled
 * (tc->cancelled set) or, without it, out of memory. */
json_t *call_execute(struct sandbox *sb, struct tool_call *tc, const struct config *cfg);

/* Makes the sandbox ahead of the next call (sandbox_prepare), and runs `true` in it as an
 * execute_python call's program would run, so that its interpreter is started ahead too,
 * unless call_fd is readable by then (a call is waiting). */
void call_prepare(struct sandbox *sb, const struct config *cfg, int cancel_fd, int call_fd);

/* The environment every call's code starts with (borrowed, NULL-terminated). */
const char *const *call_env_base(void);

/* execute_python with `session` (session.c): the cell runs in that session's interpreter, with
 * in's files and env written first. The CallToolResult (new ref); NULL when cancelled
 * (c->tc->cancelled) or out of memory. */
struct inputs;
json_t *session_run(struct call_ctx *c, struct inputs *in);

/* The process tool (process.c; tools.h's tools_process), its result within result_max bytes. */
json_t *process_run(struct sandbox *sb, const json_t *args, size_t result_max);

/* cleanup_sandbox. New ref; NULL when out of memory. */
json_t *call_cleanup(struct sandbox *sb);

#endif
