/*
 * test-helper: the server's pure parts driven one at a time, for the unit tests below the
 * binary (git's t/helper pattern). Each command reads its arguments (and stdin where it says),
 * prints its answer on stdout, and exits 0, or 1 with the reason on stderr.
 *
 *   test-helper proxy SOCK URL|HOST...   serve the install step's proxy on SOCK for these index
 *                                        URLs and hosts until stdin closes; prints "ready", then
 *                                        "allowed N refused N" at the end
 *   test-helper tree-remove PATH         remove PATH and all below it; prints "removed" or the
 *                                        error
 *   test-helper addr-allowed HOST ADDR [URL|HOST...]
 *                                        would the proxy connect to ADDR, which HOST resolved to?
 *                                        prints "yes" or "no"
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../backends/agenthost/proxy.h"
#include "../../backends/agenthost/tree.h"

static int policy_of(struct netpolicy *p, int n, char **items)
{
	struct err e = {""};
	memset(p, 0, sizeof *p);
	for (int i = 0; i < n; i++) {
		int rc = strstr(items[i], "://") ? netpolicy_add_url(p, items[i], &e)
						 : netpolicy_add_host(p, items[i], &e);
		if (rc < 0) {
			fprintf(stderr, "test-helper: %s\n", e.msg);
			return -1;
		}
	}
	return 0;
}

static int cmd_proxy(int argc, char **argv)
{
	struct netpolicy pol;
	struct proxy *px;
	struct err e = {""};
	if (argc < 2 || policy_of(&pol, argc - 1, argv + 1) < 0)
		return 1;
	if (proxy_start(&px, argv[0], &pol, &e) < 0) {
		fprintf(stderr, "test-helper: %s\n", e.msg);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	while (read(0, buf, sizeof buf) > 0)
		;
	unsigned allowed, refused;
	proxy_counts(px, &allowed, &refused);
	proxy_stop(px);
	printf("allowed %u refused %u\n", allowed, refused);
	return 0;
}

static int cmd_addr_allowed(int argc, char **argv)
{
	struct netpolicy pol;
	if (argc < 2 || policy_of(&pol, argc - 2, argv + 2) < 0)
		return 1;
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	const struct sockaddr *sa;
	if (inet_pton(AF_INET, argv[1], &in.sin_addr) == 1)
		sa = (const struct sockaddr *)&in;
	else if (inet_pton(AF_INET6, argv[1], &in6.sin6_addr) == 1)
		sa = (const struct sockaddr *)&in6;
	else {
		fprintf(stderr, "test-helper: %s is not an address\n", argv[1]);
		return 1;
	}
	printf("%s\n", netpolicy_addr_allowed(&pol, argv[0], sa) ? "yes" : "no");
	return 0;
}

static int cmd_tree_remove(int argc, char **argv)
{
	if (argc != 1)
		return 1;
	if (tree_remove(argv[0]) < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	printf("removed\n");
	return 0;
}

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} cmds[] = {
	{"proxy", cmd_proxy},
	{"addr-allowed", cmd_addr_allowed},
	{"tree-remove", cmd_tree_remove},
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 2, argv + 2);
	fprintf(stderr, "usage: test-helper COMMAND ARGS... (commands: proxy, addr-allowed, tree-remove)\n");
	return 2;
}
