#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const net_names[] = {"none", "install", "all"};

const char *config_net_name(int policy)
{
	return policy >= 0 && policy <= NET_ALL ? net_names[policy] : "?";
}

int config_net_parse(const char *name)
{
	for (int i = 0; i <= NET_ALL; i++)
		if (!strcmp(name, net_names[i]))
			return i;
	return -1;
}

const char *config_fmt_size(uint64_t v, char *buf, size_t n)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (u < 4 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, "%llu %s", (unsigned long long)v, units[u]);
	return buf;
}

void config_free(struct config *cfg)
{
	for (size_t i = 0; i < CONFIG_BACKENDS_MAX; i++) {
		free(cfg->backend_opts[i]);
		cfg->backend_opts[i] = NULL;
	}
}
