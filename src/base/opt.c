#include "opt.h"

#include <bsd/stdlib.h>
#include <limits.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "log.h"

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0 || !isfinite(v))
		return -1;
	while (*end == ' ')
		end++;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = 1024.0 * 1024; end++; break;
	case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul > 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end || v * mul > 1e18)
		return -1;
	*out = (uint64_t)(v * mul);
	return 0;
}

static int set_bool(bool *field, const char *val, const char *from, struct err *e)
{
	static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no", "off", ""};
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		if (!strcasecmp(val, yes[i]))
			return *field = true, 0;
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		if (!strcasecmp(val, no[i]))
			return *field = false, 0;
	return err_set(e, "%s: '%s' is not true or false", from, val);
}

/* Adds the specs of val (';' between them) to the list. */
static int add_mounts(struct mountlist *l, const char *val, const char *from, struct err *e)
{
	for (const char *p = val; *p;) {
		const char *semi = strchr(p, ';');
		size_t n = semi ? (size_t)(semi - p) : strlen(p);
		char spec[MOUNT_HOST_MAX + MOUNT_INSIDE_MAX + 8];
		struct err me = {""};
		if (n >= sizeof spec)
			return err_set(e, "%s: value too long", from);
		memcpy(spec, p, n);
		spec[n] = '\0';
		if (n && l->n >= MOUNTS_MAX)
			return err_set(e, "%s: at most %d mounts", from, MOUNTS_MAX);
		if (n && mountspec_parse(&l->v[l->n++], spec, &me) < 0)
			return err_set(e, "%s: %s", from, me.msg);
		p += n + (semi ? 1 : 0);
	}
	return 0;
}

int opt_set(void *base, const struct opt *o, const char *val, const char *from, struct err *e)
{
	char *field = (char *)base + o->off;
	const char *why = NULL;
	double d;
	char *end;
	switch (o->type) {
	case OPT_STR:
		if (strlen(val) >= o->size)
			return err_set(e, "%s: value too long", from);
		memcpy(field, val, strlen(val) + 1);
		return 0;
	case OPT_SIZE:
		if (parse_size(val, (uint64_t *)(void *)field) < 0)
			return err_set(e, "%s: '%s' is not a size (like 512M or 64K)", from, val);
		return 0;
	case OPT_COUNT:
		*(uint64_t *)(void *)field = (uint64_t)strtonum(val, 0, LLONG_MAX, &why);
		if (why || !isdigit((unsigned char)val[0]))
			return err_set(e, "%s: '%s' is not a whole number", from, val);
		return 0;
	case OPT_SECONDS:
	case OPT_NUMBER:
		errno = 0;
		d = strtod(val, &end);
		if (!*val || *end || errno || d < 0 || !isfinite(d))
			return err_set(e, "%s: '%s' is not a non-negative number", from, val);
		*(double *)(void *)field = d;
		return 0;
	case OPT_BOOL:
		return set_bool((bool *)(void *)field, val, from, e);
	case OPT_NET:
		*(int *)(void *)field = config_net_parse(val);
		if (*(int *)(void *)field < 0)
			return err_set(e, "%s: '%s' is not none, install or all", from, val);
		return 0;
	case OPT_LEVEL:
		*(int *)(void *)field = log_level_parse(val);
		if (*(int *)(void *)field < 0)
			return err_set(e, "%s: '%s' is not a log level", from, val);
		return 0;
	case OPT_MOUNT:
		return add_mounts((struct mountlist *)(void *)field, val, from, e);
	}
	return err_set(e, "%s: unhandled option type", from);
}
