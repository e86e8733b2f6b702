/*
 * The install step's network, for the backends that run the agent (local, Docker): the step
 * runs in a sandbox with no network of its own, and its only way out is the server's proxy
 * (proxy.h), whose unix socket sits in a folder bound into that sandbox at INSTALLNET_DIR. The
 * agent relays the sandbox's 127.0.0.1:INSTALLNET_PORT to it, and pip finds it through the
 * usual proxy variables.
 */
#ifndef SANDBOX_INSTALLNET_H
#define SANDBOX_INSTALLNET_H

#include <limits.h>
#include <sys/types.h>

#include "agentlink.h"
#include "../../src/base/config.h"
#include "../../src/base/err.h"
#include "proxy.h"

#define INSTALLNET_DIR "/run/sandbox-proxy"
#define INSTALLNET_SOCKET INSTALLNET_DIR "/proxy.sock"
#define INSTALLNET_PORT 3128

struct installnet {
	char dir[PATH_MAX];   /* the host folder holding the socket; "" when none */
	int dir_fd;           /* -1 when none */
	struct proxy *px;
	const char **env;     /* the step's environment with the proxy variables; owned */
};

/* Starts the proxy in a new folder <sandbox_dir>/proxy, which uid may enter. The step's
 * environment is env plus the proxy variables (see installnet_env). 0, or -1 with e set. */
int installnet_open(struct installnet *n, const struct config *cfg, const char *sandbox_dir, uid_t uid,
		    const char *const *env, struct err *e);

/* The code's way out with --allow-hosts (codenet): the same, for the policy pol, in the folder
 * <sandbox_dir>/netproxy, with no environment (installnet_env_of makes each call's). */
int installnet_open_code(struct installnet *n, const struct netpolicy *pol, const char *sandbox_dir, uid_t uid,
			 struct err *e);

/* env plus the proxy variables, in a new array (caller frees the array, not the strings,
 * which are env's or static); NULL when out of memory. */
const char **installnet_env_of(const char *const *env);

/* The step's environment (borrowed from n). */
const char *const *installnet_env(const struct installnet *n);

/* The proxy's socket as this process reaches it (through the folder's fd), into buf. */
void installnet_socket(const struct installnet *n, char *buf, size_t len);

/* Tells the agent to relay (see proto.h). */
void installnet_limits(const struct installnet *n, struct agentlink_limits *lim);

/* What --check says of the network (local and Docker): the code's, and the install step's
 * under the configured policy, wheelhouse and index; `shared` names the network that
 * --network all gives. Writes into buf, returns it. */
const char *installnet_describe(const struct config *cfg, const char *shared, char *buf, size_t n);

/* Stops the proxy and removes its folder. Safe on a zeroed-and-closed n (dir_fd -1). */
void installnet_close(struct installnet *n);

#endif
