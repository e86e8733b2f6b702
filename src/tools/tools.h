/*
 * The four tools: their listing (from schemas/tools.json and the schema files, with the
 * configured limits written into the descriptions), argument checks, and what a call does on
 * the sandbox. The same steps run on every backend, so results and error texts are the same.
 *
 * The table is built once by tools_init and read-only afterwards (safe from any thread).
 */
#ifndef SANDBOX_TOOLS_H
#define SANDBOX_TOOLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../base/config.h"
#include "../base/err.h"
#include "../sandbox/sandbox.h"

enum tool_id { TOOL_PYTHON, TOOL_BASH, TOOL_CLEANUP, TOOL_PROCESS, TOOL_COUNT };

/* Where a call keeps its files inside the workspace. */
#define TOOLS_DIR WORKSPACE "/.sandbox"
#define TOOLS_SCRIPT TOOLS_DIR "/task.py"
#define TOOLS_PACKAGES TOOLS_DIR "/packages"
#define TOOLS_SHELL_SCRIPT TOOLS_DIR "/task.sh" /* bash code too long for one argument */
#define TOOLS_OUTPUT TOOLS_DIR "/output"
#define TOOLS_TMP TOOLS_DIR "/tmp"           /* temporary files of the install step */

int tools_init(const struct config *cfg, struct err *e);
void tools_free(void);

/* The tools/list "tools" array. New reference. */
json_t *tools_list(void);

/* The tool's id, or -1 for an unknown name. */
int tools_find(const char *name);

/* The tool's name ("?" for no tool). */
const char *tools_name(int tool);

/* "execute_python, execute_bash_commands, cleanup_sandbox", for error texts. */
const char *tools_names(void);

/* 0 when args (borrowed) are acceptable. -1 when not: *why gets an isError CallToolResult
 * saying why (new ref), or NULL when even that could not be made (out of memory). */
int tools_check(int tool, const json_t *args, json_t **why);

struct tool_call {
	int tool;
	const json_t *args;        /* borrowed, already checked */
	int cancel_fd;             /* readable once the call is cancelled */
	unsigned long seq;         /* call number: names the call's spill files */
	bool links;                /* the client takes resource_link content (2025-06-18 on) */
	/* Sees all output as it comes (for progress); may be NULL. */
	void (*on_output)(void *ctx, int stream, const char *buf, size_t len);
	void *ctx;
	bool cancelled;            /* out: cancelled, so no response is to be sent */
};

/* Between calls (worker thread): makes the sandbox ahead of the next call where it can be
 * (sandbox_prepare), primed as a first call would want it (its Python interpreter started)
 * unless call_fd turned readable meanwhile (a call came, and starts what it needs). */
void tools_prepare(struct sandbox *sb, int cancel_fd, int call_fd);

/* What a background process's read keeps of each stream, in bytes: what a result has room for. */
uint64_t tools_bg_cap(const struct config *cfg);

/* The process tool (process.c): answered on any one thread besides the worker, at the same time
 * as calls. The CallToolResult (new ref); NULL when out of memory. */
json_t *tools_process(struct sandbox *sb, const json_t *args);

/* Runs the call (worker thread). The CallToolResult (new ref); NULL when cancelled
 * (tc->cancelled) or, without tc->cancelled, when out of memory. */
json_t *tools_run(struct sandbox *sb, struct tool_call *tc);

#endif
