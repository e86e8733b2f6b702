/*
 * Options: a table of them, each a flag (--NAME), a SANDBOX_* environment variable, a default
 * and a help line, stored into a field of a struct by offset. The server's own options and
 * each backend's use the same table form (src/cli.c reads them all, --help prints them).
 */
#ifndef SANDBOX_OPT_H
#define SANDBOX_OPT_H

#include <stddef.h>

#include "err.h"

enum opt_type {
	OPT_STR,      /* char[size] */
	OPT_SIZE,     /* uint64_t: bytes, with K, M, G, T suffixes (powers of 1024) */
	OPT_COUNT,    /* uint64_t: a whole number */
	OPT_SECONDS,  /* double: seconds, not negative */
	OPT_NUMBER,   /* double: not negative */
	OPT_BOOL,     /* bool: 1/0, true/false, yes/no, on/off ("" is false) */
	OPT_NET,      /* int: enum net_policy by name */
	OPT_LEVEL,    /* int: enum log_level by name */
	OPT_MOUNT,    /* struct mountlist: each value adds specs, ';' between them */
};

struct opt {
	const char *flag;   /* without the leading "--" */
	const char *env;
	enum opt_type type;
	size_t off, size;   /* the field in the options struct (OPT_FIELD) */
	const char *def;    /* "" for none */
	const char *help;
};

/* The offset and size of a field, for struct opt. */
#define OPT_FIELD(type, field) offsetof(type, field), sizeof(((type *)0)->field)

/* Stores val into o's field of base. from names where val came from, for the error. 0, or -1
 * with e saying what is wrong ("--memory: 'x' is not a size (like 512M or 64K)"). */
int opt_set(void *base, const struct opt *o, const char *val, const char *from, struct err *e);

#endif
