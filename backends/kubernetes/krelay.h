/*
 * The agent's stream, relayed: a thread of its own carries the bytes of a WebSocket stream
 * (kexec.h: the container's stdin and stdout, pods/attach) to and from one end of a socket
 * pair, whose other end the agent link (agentlink.h) uses exactly as a local agent's socket:
 * what the link writes goes out on channel 0 (stdin), what comes on channel 1 (stdout) is
 * written to it; channel 2 (the agent's stderr) is logged, bounded; the status (channel 3) or
 * the stream's end closes the link's end, which the link sees as the agent's end.
 *
 * Once the agent took AG_MUX (agent/proto.h), krelay_mux switches the relay to the agent's
 * chunks: the link's pair carries stream 0, a second pair the channel (stream 1), and each way
 * is cut into chunks and joined again here, so that background processes run on a stream
 * where no descriptor can pass.
 *
 * The relay owns the stream from krelay_start to krelay_stop: nothing else touches it.
 */
#ifndef SANDBOX_KUBERNETES_KRELAY_H
#define SANDBOX_KUBERNETES_KRELAY_H

#include <pthread.h>
#include <stdbool.h>

#include "../../src/base/err.h"
#include "../agenthost/stdiorelay.h"
#include "kexec.h"

struct krelay {
	struct kexec *x;         /* borrowed; the relay's alone while it runs */
	int fd;                  /* the relay's end of the pair; -1 */
	int cfd, cfd_peer;       /* the channel's pair: the relay's end and, until krelay_mux hands
	                          * it out, the other; -1 */
	pthread_t thread;
	bool running;
	bool mux;                /* under mu: the stream is in chunks (krelay_mux) */
	bool own;                /* fd is the relay's, a connection given to krelay_start_on */
	struct chunk_sink sink;  /* the relay's thread alone: the agent's chunks to the pairs */
	char why[256];           /* how the stream ended (the status's words, or the error), once it did */
	pthread_mutex_t mu;      /* guards why */
};

/* No relay yet, as krelay_stop takes it (no descriptor of its own). */
void krelay_init(struct krelay *r);

/* Starts relaying x; *link_fd: the other end (caller owns; close-on-exec, blocking). 0, or -1
 * with e set. */
int krelay_start(struct krelay *r, struct kexec *x, int *link_fd, struct err *e);

/* Relays x to fd instead (a socket the caller connected: the relay owns it from here, and
 * closes it even on failure), in its bytes alone: no link, no chunks. The end of fd's side is
 * passed on as the end of the command's stdin (v5's CLOSE; v4 has none: the stream's close,
 * which ends its stdin), and the stream is read on until it ends, so that nothing fd's side
 * said before its end is lost; the relay's end is said (krelay_why) only then, or when fd
 * takes no more. 0, or -1 with e set. */
int krelay_start_on(struct krelay *r, struct kexec *x, int fd, struct err *e);

/* Switches to chunks, once the agent answered AG_MUX with AG_OK and before anything more goes
 * on the link; *chan_fd: the channel's end (caller owns; close-on-exec, blocking), which
 * AG_CHANNEL then opens without a descriptor. Once only. */
void krelay_mux(struct krelay *r, int *chan_fd);

/* How the stream ended, into out (n bytes); "" while it runs. */
void krelay_why(struct krelay *r, char *out, size_t n);

/* Waits for the relay's end; the caller has closed link_fd first (which ends it). The stream is
 * shut down too (a send blocked on a server that stopped reading ends): only kexec_close after.
 * Idempotent. */
void krelay_stop(struct krelay *r);

#endif
