/*
 * The wire protocol between sandbox-mcp and sandbox-agent, the small process starter that
 * lives inside every sandbox. Shared by both sides; header-only so the agent stays free of
 * anything but libc.
 *
 * Transport: one stream socket. Every message is a frame:
 *
 *     u32 length (little endian, of type + payload) | u8 type | payload
 *
 * A frame is at most AG_MAX_FRAME bytes; a peer that sends more is broken and is dropped.
 *
 * Conversation:
 *   agent  -> server  AG_HELLO   u32 AG_VERSION
 *   server -> agent   AG_FILTER  struct sock_filter[]: installed on the agent itself, so every
 *                                process it starts inherits it; answered by AG_OK / AG_ERR
 *   server -> agent   AG_PUT     u32 n, n x (u32 mode, str path, str data): write n files
 *                                (parents created), each as a new file renamed over path, so
 *                                that whatever the code left there (a FIFO, a symlink) is
 *                                replaced, never opened; all or none: every file is written
 *                                whole under a temporary name before any is renamed, and a
 *                                batch that fails (ENOSPC) leaves every path as it was, and no
 *                                temporary file nor folder made for it; n is 1 to
 *                                AG_PUT_FILES; answered by AG_OK /
 *                                AG_ERR
 *   server -> agent   AG_RUN     run spec (below); answered by AG_OUT* then AG_EXIT, or AG_ERR
 *   server -> agent   AG_KILL    empty: kill the running call's processes now
 *   server -> agent   AG_LIST    u32 max, str dir, str skip: what lies under dir but in its
 *                                entry named skip ("" for none), between calls; answered
 *                                by AG_ENTRIES u32 flags (AG_LIST_*), u32 n, n x (str path
 *                                relative to dir, u64 size, u64 mtime_ns, u64 ctime_ns,
 *                                u32 st_mode): every name but folders, which are walked (to
 *                                AG_LIST_DEPTH levels, following no symlink)
 *   server -> agent   AG_WATCH   as AG_LIST, answered as AG_LIST, and from then on watches the
 *                                folders it walked (watch.c), in place of those watched before
 *   server -> agent   AG_CHANGES empty: answered by AG_CHANGES u32 state (AG_CHANGES_*): did
 *                                anything under the watched folders (but skip at the top)
 *                                change since the last AG_WATCH, at a cost that does not grow
 *                                with the tree
 *   server -> agent   AG_GET     u64 max, str path: a file's first max bytes, between calls;
 *                                answered by AG_DATA u32 errno (0, or why path cannot be read:
 *                                ENOENT, ELOOP for a symlink on the way or at path), u32 st_mode,
 *                                u64 size, bytes (none unless a regular file)
 *   server -> agent   AG_PRESTART str python, u32 n, n x str env, str source, str script,
 *                                str modules: the prestarted Python interpreter (prestart.py,
 *                                run with env, preloading the comma-separated modules), started
 *                                after each call (at AG_SETTLE) from then on, for calls whose
 *                                argv is as long as `python script`; answered by AG_OK / AG_ERR
 *   server -> agent   AG_PREINFO empty: answered by AG_PREINFO u32 phase (AG_PY_*), u32 ms the
 *                                last one took to be ready (0: none was), str text (the modules
 *                                it could not import, or why none runs)
 *   server -> agent   AG_SETTLE  empty, between calls, not answered: the call before is
 *                                answered, so the agent starts what it keeps off a call's path
 *                                (the next prestarted interpreter, which would otherwise take a
 *                                CPU from the answer on its way)
 *   agent  -> server  AG_OUT     u8 stream (1 stdout, 2 stderr), bytes
 *   agent  -> server  AG_OUTPUTS with AG_RUN_OUTPUTS, just before AG_EXIT, once the call's
 *                                processes are gone: what AG_LIST of the run spec's out_dir with
 *                                out_max would answer then (AG_ENTRIES' payload), then u32 m,
 *                                m x (str path relative to out_dir, then what AG_GET of it with
 *                                file_max would answer: u32 errno, u32 st_mode, u64 size, str
 *                                bytes) for the first (in byte order of path) out_files of the
 *                                listed names whose ctime is at or after started_ns, but regular
 *                                files over file_max bytes: what the server reads right after a
 *                                call comes with its end, in no round trip of its own (absent
 *                                when the agent could not make it, when the call was killed,
 *                                or when walking out_dir took over 500 ms: the server asks then)
 *   agent  -> server  AG_EXIT    i32 wait status, u32 flags, u64 bytes[2], u32 spill_errno[2]
 *                                (why a stream past the cap could not be saved; 0 when it was),
 *                                u64 started_ns (CLOCK_REALTIME_COARSE when the program was
 *                                started: files it changed have a ctime at or after it)
 *
 *
 * Background processes (AG_RUN_BACKGROUND): a run with that flag has a stdin pipe, and the run
 * spec ends with u32 wait_ms, u64 timeout_ms, u32 max_live, str label. It is answered as any run
 * when the program ends within wait_ms; else, at wait_ms, by
 *   agent  -> server  AG_DETACHED u32 id, u64 started_ns, u64 bytes[2]: the run goes on as the
 *                                background process id (no AG_EXIT follows); its output from then
 *                                on is read through the channel
 * A run refused because max_live background processes run already is answered by AG_ERR. Those
 * processes run until they end, timeout_ms passes (the agent kills their session), or the
 * connection ends; the ends of calls kill every process but theirs (their sessions).
 *   server -> agent   AG_CHANNEL  empty, with one fd (SCM_RIGHTS): a second stream socket that
 *                                the agent serves beside this one, for the requests below,
 *                                answered there at once, even while a call runs; AG_OK / AG_ERR
 * On a stdio link (sandbox-agent --stdio: a stream relayed from afar, where no descriptor can
 * pass), the channel comes in band instead:
 *   server -> agent   AG_MUX      empty: answered by AG_OK, the last bytes of the link as they
 *                                were; from then on both ways carry chunks,
 *                                    u32 stream | u32 length | length bytes   (little endian)
 *                                of stream 0, this conversation, and stream 1, the channel
 *                                (AG_CHANNEL then comes without a descriptor: it opens stream
 *                                1); at most AG_MUX_CHUNK bytes a chunk. A chunk of 0 bytes ends
 *                                its stream that way (no more of it follows); another stream,
 *                                a longer chunk or more of an ended stream breaks the link. A
 *                                peer sends a stream's next request only once the last is
 *                                answered, so a side keeps little of a stream it cannot yet pass
 *                                on, and neither way waits on the other.
 * On the channel, each request answered before the next is read:
 *   server -> agent   AG_BG_LIST  empty: AG_BG_INFO u32 n, n x entry (data empty)
 *   server -> agent   AG_BG_READ  u32 id: AG_BG_INFO with its one entry, holding what it wrote
 *                                since the last read; an ended process read so is forgotten;
 *                                AG_ERR for an unknown id
 *   server -> agent   AG_BG_INPUT u32 id, u32 close, bytes: written to its stdin (what fits
 *                                without blocking), then closed when close is 1; AG_OK u32
 *                                bytes written, or AG_ERR
 *   server -> agent   AG_BG_SIGNAL u32 id, u32 signal: to its process group; AG_OK / AG_ERR
 * Entry: u32 id, u32 flags (AG_BG_*), i32 wait status, u64 started_ns, u64 duration_ms,
 *        str label, str spill_prefix, 2 x (u64 bytes, u64 from, u64 file_start, u32 file_errno, str data):
 *        per stream, all it wrote (bytes); data starts at stream byte `from`; what came after
 *        data up to `bytes` is only in <spill_prefix>.stdout/.stderr, which holds the stream
 *        from byte file_start (AG_BG_FILE_OUT/ERR: such a file exists).
 *
 * Run spec: u32 flags, u64 cap, u64 spill_max, str cwd, str spill_prefix,
 *           u32 relay_port, str relay_socket,
 *           u32 nrlim, nrlim x (u32 resource, u64 limit), u32 argc, str argv[argc],
 *           u32 envc, str env[envc],
 *           and with AG_RUN_OUTPUTS: u32 out_max, str out_dir, u32 out_files, u64 file_max
 *           (out_files at most AG_OUTPUTS_FILES, file_max at most AG_OUTPUTS_FILE_MAX).
 * relay_port not 0: for the length of the call, the agent relays every TCP connection to
 * 127.0.0.1:relay_port (the sandbox's own loopback) to the unix socket relay_socket -- how the
 * install step, which has no network, reaches the server's proxy. With AG_RUN_RELAY_TAKE the
 * relay listens on relay_socket instead and hands each connection to a taker there (see the flag).
 * A str is u32 length + bytes (no terminator on the wire).
 */
#ifndef SANDBOX_AGENT_PROTO_H
#define SANDBOX_AGENT_PROTO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define AG_VERSION 11u
#define AG_MAX_FRAME (64u << 20)
#define AG_PUT_FILES 256u /* files in one AG_PUT */
#define AG_MUX_STREAMS 2u
#define AG_MUX_HDR 8u
#define AG_MUX_CHUNK (64u << 10)

enum ag_type {
	AG_HELLO = 1,
	AG_FILTER = 2,
	AG_PUT = 3,
	AG_RUN = 4,
	AG_KILL = 5,
	AG_OUT = 6,
	AG_EXIT = 7,
	AG_OK = 8,
	AG_ERR = 9,
	AG_LIST = 10,
	AG_ENTRIES = 11,
	AG_GET = 12,
	AG_DATA = 13,
	AG_PRESTART = 14,
	AG_PREINFO = 15,
	AG_SETTLE = 16,
	AG_WATCH = 17,
	AG_CHANGES = 18,
	AG_MUX = 19,
	/* background processes: a range of their own */
	AG_DETACHED = 32,
	AG_CHANNEL = 33,
	AG_BG_LIST = 34,
	AG_BG_READ = 35,
	AG_BG_INPUT = 36,
	AG_BG_SIGNAL = 37,
	AG_BG_INFO = 38,
	AG_OUTPUTS = 48, /* a call's outputs/ with its end: a range of its own too */
};

/* AG_RUN_OUTPUTS: the most files, and the most bytes of one, that come with a call's end. */
#define AG_OUTPUTS_FILES 64u
#define AG_OUTPUTS_FILE_MAX (64u << 10)

/* Background entries' flags */
#define AG_BG_RUNNING 0x1u
#define AG_BG_TIMED_OUT 0x2u
#define AG_BG_FILE_OUT 0x4u
#define AG_BG_FILE_ERR 0x8u
#define AG_BG_CUT 0x10u         /* a file stopped at spill_max bytes */
#define AG_BG_INPUT_CLOSED 0x20u
#define AG_BG_MAX 64u           /* live background processes the agent takes at most */
#define AG_BG_ENDED 16u         /* ended ones kept unread at most: the oldest goes first */

/* AG_LIST */
#define AG_LIST_DEPTH 64           /* folders deeper than this are not walked */
#define AG_LIST_BYTES (32u << 20)  /* an answer stops growing past this */
#define AG_LIST_VISIT 100000u      /* names looked at, folders included: the walk's time bound */
#define AG_LIST_TRUNCATED 0x1u     /* more entries than max (or AG_LIST_BYTES) */
#define AG_LIST_SKIPPED 0x2u       /* a folder too deep, or unreadable, was not walked */

/* AG_CHANGES states, and the most folders AG_WATCH watches (past it: unknown) */
#define AG_CHANGES_NONE 0u         /* nothing changed */
#define AG_CHANGES_SOME 1u         /* something may have: walk and compare */
#define AG_CHANGES_UNKNOWN 2u      /* no watch, or not a whole one: walk and compare */
#define AG_WATCH_DIRS 8192u

/* What AG_PRESTART's modules may hold: module names and the commas between them (the agent
 * writes them into the interpreter's source; the server refuses anything else at start-up). */
#define AG_MODULE_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,"

/* AG_RUN flags */
#define AG_RUN_SH_FALLBACK 0x1u /* argv[0] missing: run /bin/sh with the same arguments */
#define AG_RUN_PRESTART 0x2u    /* argv is PYTHON SCRIPT ARGS... in the prestarted interpreter's
				 * environment (but for variables that do not change how Python
				 * starts): it may run in that interpreter */
#define AG_RUN_BACKGROUND 0x4u  /* a background process: see above */
#define AG_RUN_RELAY_TAKE 0x8u  /* relay_socket is "@NAME", an abstract socket the relay listens
				 * on (made with the call) instead of connecting to a path, and it
				 * hands each connection (one byte 0, the socket as SCM_RIGHTS) to
				 * the next process that connects there, a taker: how a pod's
				 * install step reaches a proxy that no socket of the pod leads
				 * to (each taker an exec of the server's, carrying one
				 * connection). Not kept past the call. */
#define AG_RUN_OUTPUTS 0x100u   /* answer AG_OUTPUTS before AG_EXIT (the spec says what of) */

/* AG_EXIT flags */
#define AG_EXIT_KILLED 0x1u     /* the call was killed by AG_KILL */
#define AG_EXIT_SPILL_OUT 0x2u  /* stdout passed the cap; full text in <spill_prefix>.stdout */
#define AG_EXIT_SPILL_ERR 0x4u  /* same for stderr */
#define AG_EXIT_SPILL_CUT 0x8u  /* a spill file stopped at spill_max bytes */
#define AG_EXIT_EXEC_FAIL 0x10u /* the program could not be started (status is 127) */
#define AG_EXIT_PRESTARTED 0x20u /* the program ran in the prestarted interpreter */
#define AG_EXIT_EARLY 0x40u      /* answered as that interpreter exited, its status read from the
				  * kernel, before the kernel had freed its memory */
#define AG_EXIT_KEPT_CODE 0x80u  /* that interpreter loaded prestart.py's functions as the code
				  * object an interpreter before it compiled, not from their source */

/* AG_PREINFO phases */
#define AG_PY_NONE 0u           /* none (not configured, or it ended: the text says why) */
#define AG_PY_STARTING 1u
#define AG_PY_NODUMP 2u         /* started, not ready yet */
#define AG_PY_READY 3u

/* A growable output buffer for building frames. */
struct ag_buf {
	unsigned char *p;
	size_t len, cap;
	int oom;
};

/* A read cursor over a received payload; `bad` is set on any overrun. */
struct ag_cur {
	const unsigned char *p;
	size_t left;
	int bad;
};

#ifndef AG_REALLOC
#include <stdlib.h>
#define AG_REALLOC realloc
#endif

static inline void ag_put(struct ag_buf *b, const void *d, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t nc = b->cap ? b->cap : 256;
		while (nc < b->len + n)
			nc *= 2;
		unsigned char *np = AG_REALLOC(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	if (n && d) /* d NULL: room only, for the caller to fill */
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static inline void ag_put_u8(struct ag_buf *b, uint8_t v) { ag_put(b, &v, 1); }

static inline void ag_put_u32(struct ag_buf *b, uint32_t v)
{
	unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			      (unsigned char)(v >> 24)};
	ag_put(b, x, 4);
}

static inline void ag_put_u64(struct ag_buf *b, uint64_t v)
{
	ag_put_u32(b, (uint32_t)v);
	ag_put_u32(b, (uint32_t)(v >> 32));
}

static inline void ag_put_str(struct ag_buf *b, const char *s, size_t n)
{
	ag_put_u32(b, (uint32_t)n);
	ag_put(b, s, n);
}

/* Start a frame: reserve the length field and write the type. */
static inline void ag_frame_begin(struct ag_buf *b, uint8_t type)
{
	b->len = 0;
	b->oom = 0;
	ag_put_u32(b, 0);
	ag_put_u8(b, type);
}

/* Fill in the length field; returns 0, or -1 when the frame is too large or memory ran out. */
static inline int ag_frame_end(struct ag_buf *b)
{
	if (b->oom || b->len - 4 > AG_MAX_FRAME)
		return -1;
	uint32_t n = (uint32_t)(b->len - 4);
	b->p[0] = (unsigned char)n;
	b->p[1] = (unsigned char)(n >> 8);
	b->p[2] = (unsigned char)(n >> 16);
	b->p[3] = (unsigned char)(n >> 24);
	return 0;
}

static inline uint32_t ag_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void ag_put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

/* AG_MUX chunks read as their bytes come, however they are cut. */
struct ag_chunks {
	unsigned char hdr[AG_MUX_HDR]; /* the current chunk's header, as far as it came */
	size_t hdr_len;
	uint32_t sid, left;            /* its stream, and its bytes still to come */
};

/* Takes from *p (n bytes) the next piece of a chunk's payload: 1 with *sid and *data, *k bytes
 * of it (*k 0: the stream ended there, its chunk of 0 bytes), *p and *n past what it took; 0
 * when *p ran out first; -1 when a header names a stream of AG_MUX_STREAMS or more, or more than
 * AG_MUX_CHUNK bytes. */
static inline int ag_chunks_next(struct ag_chunks *c, const unsigned char **p, size_t *n, uint32_t *sid,
				 const unsigned char **data, size_t *k)
{
	if (c->hdr_len < AG_MUX_HDR) {
		size_t t = AG_MUX_HDR - c->hdr_len < *n ? AG_MUX_HDR - c->hdr_len : *n;
		memcpy(c->hdr + c->hdr_len, *p, t);
		c->hdr_len += t;
		*p += t;
		*n -= t;
		if (c->hdr_len < AG_MUX_HDR)
			return 0;
		c->sid = ag_le32(c->hdr);
		c->left = ag_le32(c->hdr + 4);
		if (c->sid >= AG_MUX_STREAMS || c->left > AG_MUX_CHUNK)
			return -1;
		if (c->left == 0) {
			c->hdr_len = 0;
			*sid = c->sid;
			*data = *p;
			*k = 0;
			return 1;
		}
	}
	if (*n == 0)
		return 0;
	*k = c->left < *n ? c->left : *n;
	*sid = c->sid;
	*data = *p;
	*p += *k;
	*n -= *k;
	c->left -= (uint32_t)*k;
	if (c->left == 0)
		c->hdr_len = 0;
	return 1;
}

static inline const void *ag_get(struct ag_cur *c, size_t n)
{
	if (c->bad || c->left < n) {
		c->bad = 1;
		return NULL;
	}
	const void *r = c->p;
	c->p += n;
	c->left -= n;
	return r;
}

static inline uint32_t ag_get_u32(struct ag_cur *c)
{
	const unsigned char *p = ag_get(c, 4);
	return p ? ag_le32(p) : 0;
}

static inline uint64_t ag_get_u64(struct ag_cur *c)
{
	uint64_t lo = ag_get_u32(c);
	uint64_t hi = ag_get_u32(c);
	return lo | hi << 32;
}

/* Borrowed pointer into the payload; *n gets the length. */
static inline const char *ag_get_str(struct ag_cur *c, size_t *n)
{
	*n = ag_get_u32(c);
	return ag_get(c, *n);
}

/* Blocking reads and writes of whole buffers, for the peers of a frame stream that wait for
 * nothing else. ag_read_full: 1 when n bytes came, 0 at the end before any, -1 on an error or
 * an end within them. ag_write_full: 0, or -1 (errno set). */
static inline int ag_read_full(int fd, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got || r < 0 ? -1 : 0;
		got += (size_t)r;
	}
	return 1;
}

static inline int ag_write_full(int fd, const void *buf, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, (const char *)buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

#endif
