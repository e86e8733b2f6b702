#include "helper.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "curlhttp.h"
#include "wire.h"

static const int ctl = HTTP_HELPER_FD;

/* A request as read from the wire: its strings and the parts' bytes, owned. */
struct request {
	struct http_req rq;
	char *strs;              /* method, url, json and the parts' names, NUL-terminated */
	struct http_part *parts;
	char *bytes;             /* the parts' data, one after the other */
	bool stream;
};

static void request_free(struct request *r)
{
	json_decref(r->rq.json);
	free(r->strs);
	free(r->parts);
	free(r->bytes);
	memset(r, 0, sizeof *r);
}

/* A str of the payload copied to *sp (advanced past it), NUL-terminated; NULL when bad. */
static const char *take_str(struct ag_cur *c, char **sp)
{
	size_t n;
	const char *s = ag_get_str(c, &n);
	if (!s && n)
		return NULL;
	char *d = *sp;
	memcpy(d, s ? s : "", n);
	d[n] = '\0';
	*sp += n + 1;
	return memchr(d, 0, n) ? NULL : d;
}

static int send_simple(struct ag_buf *b, uint8_t type)
{
	ag_frame_begin(b, type);
	return hw_send(ctl, b);
}

/* HW_REQ in c, then its parts' HW_BYTES frames. 0, or -1 when the client broke the protocol. */
static int read_request(struct ag_cur *c, struct ag_buf *in, struct request *r)
{
	/* Every str of the frame fits in its own length plus a NUL each. */
	char *sp = r->strs = malloc(c->left + 64);
	if (!sp)
		return -1;
	r->rq.method = take_str(c, &sp);
	r->rq.url = take_str(c, &sp);
	const uint8_t *has_json = ag_get(c, 1);
	const char *json = take_str(c, &sp);
	uint32_t nparts = ag_get_u32(c);
	if (c->bad || !r->rq.method || !r->rq.url || !has_json || !json || nparts > c->left / 17)
		return -1;
	if (*has_json && !(r->rq.json = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL)))
		return -1;
	size_t total = 0;
	r->parts = nparts ? calloc(nparts, sizeof *r->parts) : NULL;
	if (nparts && !r->parts)
		return -1;
	for (uint32_t i = 0; i < nparts; i++) {
		struct http_part *p = &r->parts[i];
		p->name = take_str(c, &sp);
		const uint8_t *hf = ag_get(c, 1);
		const char *fname = take_str(c, &sp);
		p->filename = hf && *hf ? fname : NULL;
		p->len = ag_get_u64(c);
		if (c->bad || !p->name || !fname || p->len > HW_PART_MAX || total + p->len < total)
			return -1;
		total += p->len;
	}
	r->rq.nparts = nparts;
	r->rq.parts = r->parts;
	r->rq.timeout_ms = (long)ag_get_u64(c);
	r->rq.max_body = ag_get_u64(c);
	r->rq.deadline_ms = (int64_t)ag_get_u64(c);
	const uint8_t *retry = ag_get(c, 1), *stream = ag_get(c, 1), *fresh = ag_get(c, 1);
	if (c->bad || !retry || !stream || !fresh)
		return -1;
	r->rq.retry = *retry ? HTTP_RETRY_SAFE : HTTP_ONCE;
	r->rq.fresh = *fresh;
	r->stream = *stream;
	if (total && !(r->bytes = malloc(total)))
		return -1;
	for (size_t got = 0; got < total;) {
		uint8_t type;
		struct ag_cur bc;
		if (hw_recv(ctl, in, &type, &bc) <= 0 || type != HW_BYTES || bc.left > total - got)
			return -1;
		memcpy(r->bytes + got, bc.p, bc.left);
		got += bc.left;
	}
	size_t off = 0;
	for (uint32_t i = 0; i < nparts; i++) {
		r->parts[i].data = r->bytes ? r->bytes + off : "";
		off += r->parts[i].len;
	}
	return 0;
}

/* A streamed answer's bytes, sent as they come. */
static size_t stream_body(const char *p, size_t n, void *ctx)
{
	struct ag_buf *b = ctx;
	ag_frame_begin(b, HW_BODY);
	ag_put(b, p, n);
	return hw_send(ctl, b) == 0 ? n : 0;
}

/* Runs one request and answers it. 0, or -1 when the client is gone. */
static int serve(struct curlhttp *h, const char *broken, struct request *r, struct ag_buf *b)
{
	struct http_resp rs = {0};
	struct err e = {""};
	int rc;
	if (broken) {
		rc = err_set(&e, "%s", broken);
	} else {
		if (r->stream) {
			r->rq.on_data = stream_body;
			r->rq.ctx = b;
		}
		rc = curlhttp_call(h, &r->rq, &rs, &e);
	}
	if (h->cancelled) {
		http_resp_free(&rs);
		return -1;
	}
	for (size_t off = 0; rc == 0 && off < rs.len; off += HW_CHUNK) {
		ag_frame_begin(b, HW_BODY);
		ag_put(b, rs.body + off, rs.len - off < HW_CHUNK ? rs.len - off : HW_CHUNK);
		if (hw_send(ctl, b) < 0) {
			http_resp_free(&rs);
			return -1;
		}
	}
	ag_frame_begin(b, HW_DONE);
	ag_put_u8(b, rc == 0);
	ag_put_u64(b, rc == 0 ? (uint64_t)rs.status : 0);
	ag_put_str(b, rc == 0 ? "" : e.msg, rc == 0 ? 0 : strlen(e.msg));
	http_resp_free(&rs);
	return hw_send(ctl, b);
}

/* HW_TUNNEL: connects, says so, then carries the bytes until either end closes. */
static void tunnel(struct curlhttp *h, const char *broken, struct ag_cur *c, struct ag_buf *b)
{
	size_t n;
	const char *u = ag_get_str(c, &n);
	long timeout_ms = (long)ag_get_u64(c);
	char *url = !c->bad && u ? strndup(u, n) : NULL;
	struct err e = {""};
	int rc = !url || strlen(url) != n || timeout_ms <= 0 ? err_set(&e, "a bad tunnel request")
		 : broken				       ? err_set(&e, "%s", broken)
								       : curlhttp_tunnel(h, url, timeout_ms, &e);
	free(url);
	ag_frame_begin(b, HW_DONE);
	ag_put_u8(b, rc == 0);
	ag_put_u64(b, 0);
	ag_put_str(b, rc == 0 ? "" : e.msg, rc == 0 ? 0 : strlen(e.msg));
	if (hw_send(ctl, b) == 0 && rc == 0)
		curlhttp_pump(h, ctl);
}

int http_helper_main(void)
{
	int type_opt;
	socklen_t tl = sizeof type_opt;
	if (getsockopt(ctl, SOL_SOCKET, SO_TYPE, &type_opt, &tl) < 0) {
		fprintf(stderr, "sandbox-mcp: %s is for the server's own use\n", HTTP_HELPER_ARG);
		return 2;
	}
	prctl(PR_SET_NAME, HTTP_HELPER_NAME, 0, 0, 0);
	/* A signal to the server's whole group (a terminal's ^C, a service manager's stop) is the
	 * server's to handle: the helper ends when the server closes its socket, not before. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	struct ag_buf in = {0}, out = {0};
	struct curlhttp h = {.cancel_fd = -1};
	struct err oe = {""};
	const char *broken = NULL;
	uint8_t type;
	struct ag_cur c;
	/* The first frame says which server, with which headers, and how long to stay idle. */
	if (hw_recv(ctl, &in, &type, &c) <= 0 || type != HW_OPEN)
		goto out;
	uint32_t linger_ms = ag_get_u32(&c);
	size_t n;
	const char *sock = ag_get_str(&c, &n);
	char path[sizeof h.unix_socket] = "";
	if (c.bad || n >= sizeof path)
		goto out;
	memcpy(path, sock, n);
	if (curlhttp_open(&h, path, &oe) < 0)
		broken = oe.msg;
	uint32_t nh = ag_get_u32(&c);
	for (uint32_t i = 0; !broken && i < nh; i++) {
		const char *line = ag_get_str(&c, &n);
		char *l = c.bad ? NULL : strndup(line ? line : "", n);
		if (!l)
			goto out;
		int rc = curlhttp_header(&h, l, &oe);
		explicit_bzero(l, n);
		free(l);
		if (rc < 0)
			broken = oe.msg;
	}
	const char *tls[3];
	size_t tls_len[3];
	for (int i = 0; i < 3; i++)
		tls[i] = ag_get_str(&c, &tls_len[i]);
	if (c.bad)
		goto out;
	if (!broken && curlhttp_tls(&h, tls, tls_len, &oe) < 0)
		broken = oe.msg;
	/* The headers and keys: wiped from the frame as soon as they are in the client. */
	explicit_bzero(in.p, in.len);
	h.cancel_fd = ctl;
	for (;;) {
		struct pollfd p = {ctl, POLLIN, 0};
		int r = poll(&p, 1, (int)linger_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || hw_recv(ctl, &in, &type, &c) <= 0 || (type != HW_REQ && type != HW_TUNNEL))
			break;
		if (type == HW_TUNNEL) {
			tunnel(&h, broken, &c, &out);
			break;
		}
		struct request rq = {0};
		int rc = read_request(&c, &in, &rq);
		if (rc == 0)
			rc = send_simple(&out, HW_TAKEN);
		if (rc == 0)
			rc = serve(&h, broken, &rq, &out);
		request_free(&rq);
		if (rc < 0)
			break;
	}
out:
	curlhttp_close(&h);
	free(in.p);
	free(out.p);
	return 0;
}
