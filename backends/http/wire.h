/*
 * The conversation between a client of http.h (in the server) and its helper process
 * (helper.h), which does the HTTP: one stream socket, the helper's fd HTTP_HELPER_FD, in the
 * frames of agent/proto.h (u32 length, u8 type, payload; its builders and readers).
 *
 *   server -> helper  HW_OPEN   u32 linger_ms, str unix_socket ("": TCP), u32 n, n x str
 *                               header line, str ca, str cert, str key (PEM; "": none): first,
 *                               once
 *   server -> helper  HW_REQ    str method, str url, u8 has_json, str json, u32 nparts,
 *                               nparts x (str name, u8 has_filename, str filename, u64 len),
 *                               u64 timeout_ms, u64 max_body, u64 deadline_ms (monotonic, the
 *                               machine's clock), u8 retry, u8 stream; then the parts' bytes,
 *                               in order, in HW_BYTES frames
 *   server -> helper  HW_BYTES  bytes
 *   helper -> server  HW_TAKEN  empty: the request was read whole and now runs. When the socket
 *                               ends before it, nothing of the request was sent.
 *   helper -> server  HW_BODY   bytes of the answer's body: as they come when stream is set,
 *                               else once the request is done
 *   helper -> server  HW_DONE   u8 answered, u64 status, str error (why none came)
 *   server -> helper  HW_TUNNEL str url, u64 timeout_ms: connect to url's host (TLS for
 *                               https), send nothing; HW_DONE says whether it is connected
 *                               (answered 1, status 0). From then on the socket carries the
 *                               connection's bytes both ways, no frames, until either end closes.
 *
 * The server sends nothing while a request runs: the socket turning readable then (its end)
 * stops the request. The helper ends when the socket ends, and after linger_ms without a
 * request.
 */
#ifndef SANDBOX_HTTP_WIRE_H
#define SANDBOX_HTTP_WIRE_H

#include <stdint.h>

#include "../../agent/proto.h"

enum hw_type {
	HW_OPEN = 1,
	HW_REQ = 2,
	HW_BYTES = 3,
	HW_TAKEN = 4,
	HW_BODY = 5,
	HW_DONE = 6,
	HW_TUNNEL = 7,
};

#define HW_CHUNK (1u << 20) /* bytes of one HW_BYTES or HW_BODY frame, at most */
#define HW_PART_MAX (1ull << 30) /* bytes of one part of a request, at most */

/* Ends the frame in b and writes it whole. 0, or -1 (errno set). */
int hw_send(int fd, struct ag_buf *b);

/* Reads one frame into b, blocking: 1 with *type and c (over b) set, 0 at the socket's end
 * between frames, -1 on a read error, an end within a frame or one too large. */
int hw_recv(int fd, struct ag_buf *b, uint8_t *type, struct ag_cur *c);

#endif
