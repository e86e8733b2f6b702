/*
 * An agent's stdio in chunks (agent/proto.h's AG_MUX) on a stream the server holds itself: a
 * container's attached socket, on which what the agent writes comes in the engine's stdout
 * frames (8 bytes each: stream 1, three zero bytes, the length big-endian). A thread of its own
 * joins the stream to one socket pair per stream, whose other ends the agent link uses as it
 * would a local agent's sockets: the calls' (stream 0) and the background processes' channel
 * (stream 1). So an agent that no descriptor can reach still runs background processes.
 *
 * Neither way waits on the other beyond one request: the agent keeps what it cannot pass on
 * yet (agent/mux.c), and the link reads its answers. A stream that breaks the format (an engine
 * frame of another kind, a chunk of a stream not there or too long) or the agent's end of the
 * calls' stream ends the relay, and the link sees the agent's end.
 */
#ifndef SANDBOX_STDIORELAY_H
#define SANDBOX_STDIORELAY_H

#include <pthread.h>
#include <stdbool.h>

#include "../../agent/proto.h"
#include "../../src/base/err.h"

/* Where an agent's chunks go: each stream's socket pair end (borrowed). A relay of the agent's
 * stream, here or a backend's own, passes what the agent wrote through chunk_sink_take. */
struct chunk_sink {
	int fd[AG_MUX_STREAMS];
	bool chan_open;              /* the channel's pair takes bytes yet (the server may close it) */
	struct ag_chunks ch;
};

/* Starts a sink on fd (AG_MUX_STREAMS ends). */
void chunk_sink_init(struct chunk_sink *k, const int fd[AG_MUX_STREAMS]);

/* n bytes of the agent's chunks, to their pairs (blocking writes); a channel the server closed
 * drops what comes for it. 1 to go on, 0 when it ended, *why saying how ("" when the calls'
 * pair closed its end). */
int chunk_sink_take(struct chunk_sink *k, const unsigned char *p, size_t n, const char **why);

struct stdiorelay {
	int fd;                      /* the stream, the relay's from stdiorelay_start; -1 */
	int pfd[AG_MUX_STREAMS];     /* the relay's ends of the pairs; -1 */
	pthread_t thread;
	bool running;
	pthread_mutex_t mu;          /* guards why */
	char why[256];               /* how the stream ended, once it did */
};

/* No relay yet, as stdiorelay_stop takes it. */
void stdiorelay_init(struct stdiorelay *r);

/* Relays fd (which it then owns), once the agent on it answered AG_MUX; link_fd[s]: the other
 * end of stream s's pair (caller owns; close-on-exec, blocking). 0, or -1 with e set (fd is
 * closed then). */
int stdiorelay_start(struct stdiorelay *r, int fd, int link_fd[AG_MUX_STREAMS], struct err *e);

/* How the stream ended, into out (n bytes); "" while it runs. */
void stdiorelay_why(struct stdiorelay *r, char *out, size_t n);

/* Ends the relay and closes what it holds; the agent reads the end of its stdin. Idempotent. */
void stdiorelay_stop(struct stdiorelay *r);

#endif
