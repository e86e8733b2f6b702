/*
 * The WebSocket protocol (RFC 6455) as a client speaks it, without I/O: the opening
 * handshake's key and the accept value the server must answer with (section 4), the frames a
 * client sends (masked, section 5.3) and the frames it reads (unmasked, section 5.2), bounded.
 */
#ifndef SANDBOX_KUBERNETES_WSFRAME_H
#define SANDBOX_KUBERNETES_WSFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_op {
	WS_CONT = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xa,
};

#define WS_KEY_LEN 24     /* base64 of 16 bytes */
#define WS_ACCEPT_LEN 28  /* base64 of a SHA-1 */
#define WS_HEAD_MAX 14    /* bytes of a client frame's header, at most */

/* A new random key for Sec-WebSocket-Key, NUL-terminated. 0, or -1 (no randomness). */
int ws_key(char out[WS_KEY_LEN + 1]);

/* The Sec-WebSocket-Accept a server must answer key with, NUL-terminated. */
void ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1]);

/* The SHA-1 of n bytes of p (FIPS 180-4), for ws_accept. */
void ws_sha1(const void *p, size_t n, unsigned char out[20]);

/* Writes a client frame's header for a payload of n bytes (fin: the message's last frame) into
 * head, with a new random mask in mask; the payload must then be masked with ws_mask. The
 * header's length (2 to WS_HEAD_MAX). */
size_t ws_frame_head(unsigned char head[WS_HEAD_MAX], enum ws_op op, bool fin, uint64_t n, unsigned char mask[4]);

/* XORs n bytes of p with mask, from the payload's offset off (so a payload may be masked in
 * pieces). */
void ws_mask(unsigned char *p, size_t n, const unsigned char mask[4], uint64_t off);

/* One frame from a server, as read from the start of a buffer. */
struct ws_frame {
	enum ws_op op;
	bool fin;
	size_t head;             /* bytes of its header */
	uint64_t len;            /* bytes of its payload, which follow the header */
};

/*
 * Reads the frame at the start of the n bytes at p, whose payload may be at most max bytes.
 * 1 with f set when the whole header is there (the payload may not be yet: f->head + f->len
 * bytes make the frame), 0 when more bytes are needed for the header, or -1 with *why set:
 * a masked frame (servers never mask), reserved bits or opcodes, a control frame that is
 * fragmented or over 125 bytes, a length not in its shortest form or with its top bit set, or
 * over max (why names the close code's reason: 1002, or 1009 for the size).
 */
int ws_frame_parse(const unsigned char *p, size_t n, uint64_t max, struct ws_frame *f, const char **why, int *code);

#endif
