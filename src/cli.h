/*
 * The command line and the environment: every option is a flag (--NAME) and a SANDBOX_*
 * variable; flags win over the environment, which wins over the defaults. The server's own
 * options are the table in cli.c; each backend adds its own (backend.h's opts), so --help and
 * the parsing know every option from one place each.
 */
#ifndef SANDBOX_CLI_H
#define SANDBOX_CLI_H

#include <stdio.h>

#include "base/config.h"
#include "base/err.h"

enum cli_mode { MODE_SERVE, MODE_HELP, MODE_VERSION, MODE_CHECK };

/* Fills cfg (caller frees with config_free, also after a failure) from the defaults, the
 * environment and argv, and checks the values. The mode, or -1 with e set. */
int cli_load(struct config *cfg, int argc, char **argv, struct err *e);

/* --help: every option with its variable and default, and the other variables read. */
void cli_usage(FILE *f);

#endif
