/*
 * A stream of pods/exec (or any WebSocket of the API server) as Kubernetes' own clients speak
 * it (client-go tools/remotecommand, websocket.go): an HTTP/1.1 Upgrade to a WebSocket
 * (wsframe.h) offering the subprotocols v5.channel.k8s.io then v4.channel.k8s.io, over a
 * connection the HTTP helper makes (http_tunnel: TLS with the cluster's CA and the client
 * certificate), with the bearer token in the request. Each binary message's first byte is its
 * channel: 0 stdin, 1 stdout, 2 stderr, 3 the status (a metav1.Status), 255 (v5 only) closes
 * the stream its second byte names.
 *
 * Every read is bounded in time and size: the answer's head (KEXEC_HEAD_MAX), its body when it
 * is not an upgrade, and each message (max_msg). Pings are answered, pongs ignored, a close is
 * answered and ends the stream. One thread at a time.
 */
#ifndef SANDBOX_KUBERNETES_KEXEC_H
#define SANDBOX_KUBERNETES_KEXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"
#include "../http/http.h"
#include "kcreds.h"

#define KEXEC_HEAD_MAX 16384
#define KEXEC_MSG_MAX (16u << 20)
#define KEXEC_V5 "v5.channel.k8s.io"
#define KEXEC_V4 "v4.channel.k8s.io"

enum { KEXEC_STDIN = 0, KEXEC_STDOUT = 1, KEXEC_STDERR = 2, KEXEC_STATUS = 3, KEXEC_CLOSE = 255 };

#define KEXEC_TIMEOUT (-2)

struct kexec {
	struct http tun;         /* the helper's tunnel; its fd is the connection */
	int fd;                  /* tun.fd once open; -1 */
	char proto[24];          /* the subprotocol the server chose */
	bool v5;
	unsigned char *buf;      /* what was read and not yet taken; owned */
	size_t len, cap, off;    /* off: where the unread bytes start */
	unsigned char *msg;      /* the message being put together from its fragments; owned */
	size_t msg_len, msg_cap;
	bool in_msg;             /* a fragmented message is under way */
	size_t max_msg;
	int close_code;          /* the server's close code; 0 before, 1005 when it gave none */
	bool close_sent;         /* ours went (once only) */
	long http_status;        /* the handshake's answer: 101, or the status that refused it */
	char *http_body;         /* when it was not 101: its body (a metav1.Status), bounded; owned */
	int cancel_fd;           /* -1 (the default), or an fd whose turning readable ends the opening
				  * and every read at once (an error: "cancelled") */
	int64_t send_deadline;   /* clock_ms() by which a send must be taken whole; -1 (the default):
				  * none (the relay's: krelay_stop ends a send blocked for good) */
};

/* Sets x up with nothing open (kexec_close is safe from here). */
void kexec_init(struct kexec *x);

/* The path and query of an exec of argv (n > 0 words) in pod's container (NULL: the pod's only
 * one) in ns, with stdout and stderr, and stdin when asked. Caller frees; NULL when out of
 * memory. */
char *kexec_exec_path(const char *ns, const char *pod, const char *container, const char *const *argv, size_t n,
		      bool with_stdin);

/* Opens the WebSocket at path (from "/api/...", query included) on c's server within
 * timeout_ms. 0; or -1 with e saying why (a refusal's status in x->http_status, its reason,
 * from the metav1.Status it sent, in e). */
int kexec_open(struct kexec *x, const struct kcreds *c, const char *path, long timeout_ms, struct err *e);

/* Sends n bytes of p on channel ch as one binary message, by send_deadline. 0, or -1 with e set
 * (an API server that takes nothing more by then: -1, not a wait without end). */
int kexec_send(struct kexec *x, unsigned ch, const void *p, size_t n, struct err *e);

/* Closes the command's stdin: v5's CLOSE message for channel 0. Under v4 there is no such
 * message: 1 (nothing was sent; the command's stdin ends when the stream does). 0, -1. */
int kexec_close_stdin(struct kexec *x, struct err *e);

/* The next data message, waiting at most timeout_ms (-1: no bound): 1 with *ch and *p (borrowed
 * until the next call on x), *n; 0 when the stream ended (a close, answered; or the connection
 * went: close_code says which, 1006 for the latter); KEXEC_TIMEOUT; or -1 with e set (the server
 * broke the protocol: x sent its close). */
int kexec_recv(struct kexec *x, int timeout_ms, unsigned *ch, const unsigned char **p, size_t *n, struct err *e);

/* The exit code a channel-3 status says: 0 for Success, the ExitCode cause's for
 * NonZeroExitCode; -1 with why (n bytes) saying what the status says otherwise. */
int kexec_exit_code(const unsigned char *p, size_t n, char *why, size_t why_n);

/* Begins the close: ours (1000) goes, once, and the stream is read on until the server's,
 * which comes after all that was sent before it (kexec_recv then answers nothing more). */
void kexec_close_send(struct kexec *x);

/* Sends a close (1000) when the stream is open, and ends the connection. Idempotent. */
void kexec_close(struct kexec *x);

#endif
