/*
 * What a call brings besides its code: `files` written into the workspace before the code
 * runs, `env` added to the code's environment, `args` for the Python script's sys.argv, and
 * the paths `collect` asks back (checked here, read by artifacts.h).
 * The schema checks their shape; this module checks the rest (paths confined to /workspace,
 * byte totals, base64, names the sandbox keeps) and turns them into the run request's parts.
 *
 * Paths are relative to /workspace, made of plain names: no absolute path, no "." or "..",
 * nothing under the server's own .sandbox folder. The sandbox side writes each file as a new
 * file renamed into place and follows no symlink on the way (agent/sandbox-agent.c, the
 * Daytona runner), so nothing code planted earlier makes a write land elsewhere or block.
 */
#ifndef SANDBOX_INPUTS_H
#define SANDBOX_INPUTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../backends/run/run.h"
#include "../base/err.h"

#define INPUTS_FILES_MAX 100              /* files per call */
#define INPUTS_PATH_MAX 1024              /* bytes of one path */
#define INPUTS_FILE_BYTES (8u << 20)      /* bytes of all files of a call together, decoded */
#define INPUTS_ENV_MAX 64                 /* variables per call */
#define INPUTS_ENV_BYTES (64u << 10)      /* bytes of all names and values together */
#define INPUTS_ARGS_BYTES (64u << 10)     /* bytes of all args together */

struct inputs {
	struct run_file *files;   /* nfiles, paths absolute in the sandbox; data borrowed or owned */
	size_t nfiles;
	const char **env;         /* the whole environment (base + extra), NULL-terminated */
	const char **args;        /* the args, NULL-terminated (borrowed from the arguments) */
	size_t nargs;
	void **owned;             /* what inputs_free frees */
	size_t nowned;
};

/* Why a path relative to /workspace is refused ("must not contain \"..\"", ...), or NULL.
 * reading: the path is only read (`collect`, resources), so the server's own .sandbox folder
 * (where cut output is saved) is allowed. */
const char *inputs_path_problem(const char *p, bool reading);

/* 0 when the call's files, env and args (in args, the tool's arguments) are acceptable, else
 * -1 with e saying which one and why, e.g. "files.a/../b: must not contain \"..\"". */
int inputs_check(const json_t *args, const char *const *base_env, struct err *e);

/* Builds in (zeroed by the caller) from checked arguments: files decoded, the environment
 * base_env followed by the call's env. 0, or -1 with e set (out of memory). */
int inputs_build(const json_t *args, const char *const *base_env, struct inputs *in, struct err *e);

void inputs_free(struct inputs *in);

#endif
