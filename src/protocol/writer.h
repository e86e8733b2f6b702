/*
 * The one writer of stdout. Messages are queued in the order they are handed over and written
 * by a thread of its own, so no other thread ever waits for a client that stops reading: the
 * reader keeps answering (its answers queue up) and shutdown is never held up.
 */
#ifndef SANDBOX_WRITER_H
#define SANDBOX_WRITER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Starts the writer on fd; call it before anything is queued. 0 or -1. A socket gets a send
 * buffer of WRITER_SNDBUF bytes, as the kernel counts them (it doubles the figure). */
int writer_start(int fd);
#define WRITER_SNDBUF 212992

/* Waits until everything queued was written, the client is gone, or deadline_ms (monotonic)
 * passes; -1 when something was left unwritten. The writer may stay blocked in a write: the
 * process is about to exit. */
int writer_flush(int64_t deadline_ms);

/* Queues one message as one line on stdout. Stolen. Thread-safe, never blocks on the client.
 * -1 once stdout is gone. A line of up to 4 KiB with nothing waiting ahead of it is written by
 * the calling thread itself, as far as the client takes it at once (a socket's MSG_DONTWAIT, or
 * a pipe with a free slot, which stderr does not share), and the rest queued: an answer then
 * waits for no wake-up of the writer. */
int writer_send(json_t *msg);

/* Like writer_send, for messages a client can do without (progress, logs): dropped rather than
 * queued while the client is not reading (more than WRITER_OPTIONAL_MAX bytes wait). */
int writer_send_optional(json_t *msg);
#define WRITER_OPTIONAL_MAX (1u << 20)

/* True while more than WRITER_BACKLOG_MAX bytes wait for the client: the reader stops taking new
 * requests until it catches up, so the queue stays bounded. */
bool writer_backlog(void);
#define WRITER_BACKLOG_MAX (64u << 20)

/* True once a write to stdout failed (the client is gone). */
bool writer_closed(void);

/* True when nothing waits to be written (or the client is gone). */
bool writer_drained(void);

/* True when something waits to be written and no byte of it reached the client for stall_ms,
 * counted from since_ms at the earliest: a client that stopped reading. */
bool writer_stalled(int64_t since_ms, int stall_ms);

/* fn(ctx) is called each time all that was queued has been written: on the writer's thread, or
 * on the thread that handed over a line it wrote itself (below). It runs under the writer's
 * lock: quick, and calling nothing of the writer. Once writer_on_drained(NULL, NULL) has
 * returned, fn is not running and is not called again. */
void writer_on_drained(void (*fn)(void *ctx), void *ctx);

/* How many lines the handing thread wrote itself, and how many of those only in part (their
 * rest queued): for the tests. */
void writer_counts(uint64_t *direct, uint64_t *partial);

#endif
