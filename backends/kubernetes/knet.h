/*
 * The install step's way out of a pod: no socket of this host leads into a pod, so the server's
 * filtering proxy (agenthost/proxy.h) is reached the other way round. The step runs in the
 * sandbox's pod, whose NetworkPolicy lets nothing out; the agent's relay takes pip's
 * connections on the pod's 127.0.0.1:INSTALLNET_PORT and, with AG_RUN_RELAY_TAKE, hands each to
 * a taker on an abstract socket named for the step (knet_socket): a small Python program of the
 * server's (knet.c's TAKER, run isolated from the image's read-only root, so that nothing the
 * code wrote runs in it), started in the pod through an exec of its own (pods/exec, kexec.h);
 * the exec's stdin and stdout then carry that one connection's bytes, which a relay
 * (krelay_start_on) joins to a connection of its own to the proxy's unix socket. Each
 * connection is one exec: its own stream, its own flow control.
 *
 * A thread keeps one taker waiting (its exec open before pip connects, so a connection waits
 * for no request), opens the next as soon as one takes a connection (32 at once, then 20 a
 * second), and carries at most KNET_MAX connections at once (more wait in the relay's
 * backlog). Nothing of it outlives knet_stop, which also ends an exec being opened; a taker
 * ends with its exec's stdin, and the agent ends every process of the pod at the call's end.
 * A taker's exec that fails to open is tried again, 50 ms later, doubling to 1 s, TRIES times.
 */
#ifndef SANDBOX_KUBERNETES_KNET_H
#define SANDBOX_KUBERNETES_KNET_H

#include "../../src/base/err.h"
#include "kcreds.h"

#define KNET_MAX 16

struct knet;

/* Starts carrying connections of pod (in ns) to the proxy's socket at proxy_path, as c's user,
 * with takers run by python (the image's). NULL with e set when it cannot start. */
struct knet *knet_start(const struct kcreds *c, const char *ns, const char *pod, const char *python,
			const char *proxy_path, struct err *e);

/* The takers' socket of this step, "@sandbox-mcp-take-" and 16 random hex digits (an abstract
 * socket of the pod's network namespace), for the agent's AG_RUN_RELAY_TAKE. Borrowed. */
const char *knet_socket(const struct knet *k);

/* How many connections were carried; into why (n bytes), once the step is hopeless (see
 * knet_hopeless_fd), the last failure to open a taker, else "". */
unsigned knet_carried(struct knet *k, char *why, size_t n);

/* An fd that turns readable once the step is hopeless: TRIES takers in a row could not be
 * opened, or the API server refused one (4xx: the exec is not allowed, the pod is gone), so
 * that pip does not spend its retries on connections no one will take. Borrowed. */
int knet_hopeless_fd(const struct knet *k);

/* Ends every connection and the thread, and frees k. NULL is fine. */
void knet_stop(struct knet *k);

#endif
