/*
 * test-helper: the server's pure parts driven one at a time, for the unit tests below the
 * binary (git's t/helper pattern). Each command reads its arguments (and stdin where it says),
 * prints its answer on stdout, and exits 0, or 1 with the reason on stderr.
 *
 *   test-helper proxy SOCK URL|HOST...   serve the install step's proxy on SOCK for these index
 *                                        URLs and hosts until stdin closes; prints "ready", then
 *                                        "allowed N refused N" at the end
 *   test-helper tree-remove PATH         remove PATH and all below it; prints "removed" or the
 *                                        error
 *   test-helper beneath OP DIR REL [MODE]
 *                                        below the folder DIR: OP write (stdin as the file REL,
 *                                        MODE octal), mkdir or remove REL; prints "ok" or the
 *                                        error
 *   test-helper addr-allowed HOST ADDR [URL|HOST...]
 *                                        would the proxy connect to ADDR, which HOST resolved to?
 *                                        prints "yes" or "no"
 *   test-helper allow-host LIST HOST PORT
 *                                        would the code's proxy, under --allow-hosts LIST, let a
 *                                        request for HOST:PORT go on? "yes", "no" or "refused: why"
 *   test-helper allow-narrow LIST CALL   a call's `network` CALL within --allow-hosts LIST: "ok"
 *                                        or why not
 *   test-helper multipart                stdin read as a multipart answer: a line "NAME FILENAME
 *                                        LEN HEX" per part, then "end" or "malformed"
 *   test-helper utf8                     stdin made valid UTF-8, on stdout
 *   test-helper cursor make PATH | parse CURSOR
 *                                        resources/list's cursor after PATH; or the path a
 *                                        cursor names, or "refused"
 *   test-helper loadb                    each line of stdin read by the server's reader of a
 *                                        message (bignum_loadb) and by jansson's json_loadb:
 *                                        "same", "same error", or "differs" and both
 *   test-helper kyaml                    stdin read as a kubeconfig's YAML (or JSON): the value as
 *                                        compact JSON, or "refused: WHY"
 *   test-helper kube-creds SA_DIR [CONTEXT]
 *                                        the Kubernetes credentials found (kcreds.h) as JSON:
 *                                        server, ns, source, token, and the lengths of ca, cert
 *                                        and key; or "refused: WHY"
 *   test-helper ws-accept KEY            the Sec-WebSocket-Accept for KEY (wsframe.h)
 *   test-helper kube-exec NS POD [--stdin TEXT] [--close-stdin] [--max N] [--attach] -- CMD...
 *                                        runs CMD in POD over pods/exec (kexec.h) with the
 *                                        credentials kcreds_load finds; prints JSON: protocol,
 *                                        http_status, stdout, stderr, exit (or why), close_code,
 *                                        error, messages; --attach: pods/attach instead (CMD
 *                                        ignored)
 *   test-helper kube-pod NS NAME spec|create|put PATH|delete|reap [IMAGE]
 *                                        a sandbox's pod (kpod.h) with the credentials kcreds_load
 *                                        finds: its spec (printed), made and waited on until it
 *                                        runs, stdin written to PATH in it, deleted; or reap:
 *                                        every pod of ours in NS deleted. Prints "ok" (or the
 *                                        spec, or "reaped N"), or "failed: WHY"
 *   test-helper b64-decode               stdin as base64: the bytes in hex, or "refused"
 *   test-helper log PAD                  logs one line, PAD bytes of "a" then 1000 "é", through
 *                                        the server's log with a client that asked for every
 *                                        level: the notification on stdout, the line on stderr
 *   test-helper jsonw                    each line of stdin (a JSON value) written by jsonw and
 *                                        by jansson: "same N" (N: the length jsonw_size says)
 *                                        per line, or "differs" and both texts
 *   test-helper capture CAP CHUNK        stdin through one stream's capture (CAP bytes kept),
 *                                        fed CHUNK bytes at a time; prints {"total", "cut",
 *                                        "text"} (the kept text, a marker where bytes are left out)
 *   test-helper result MAX OUT ERR       the result of a call that printed the files OUT and ERR
 *                                        (a 64 KiB capture each), within MAX bytes: its JSON, then
 *                                        a line "size N" (its serialized size)
 *   test-helper lying-agent HEX...       the server's side of a call (agentlink_run of a call
 *                                        whose end brings outputs/'s listing and files) against
 *                                        an agent that answers the run with the frames HEX (whole
 *                                        frames, in hex; @FILE: in that file) then AG_EXIT, and each later request
 *                                        with an empty listing or ENOENT, and AG_CHANGES with
 *                                        the payload $LYING_CHANGES (hex) when it is set, which
 *                                        is then asked for last; prints "run RC MSG",
 *                                        then for a run that ended well "list N" (of
 *                                        /workspace/outputs) and "get ERR LEN DATA" (of
 *                                        /workspace/outputs/a)
 *   test-helper without CALL[,CALL...] -- PROG [ARGS...]
 *                                        runs PROG with those system calls failing with ENOSYS,
 *                                        as on a kernel (or under a tool) that lacks them; the
 *                                        filter holds for everything PROG starts
 *   test-helper schema FILE              validates stdin (JSON) against schemas/FILE: "ok" or
 *                                        the reason
 *   test-helper requirement [--online] R may R go to pip? "ok" or "refused: why"
 *   test-helper frame-encode STR...      a frame of type 3 holding each STR as a str, in hex
 *   test-helper frame-decode HEX N       reads a frame (hex) and N strs from it: each on a line
 *                                        after "str:", or "bad" where the frame or its payload
 *                                        is malformed
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../agent/proto.h"
#include "../../backends/agenthost/agentlink.h"
#include "../../backends/agenthost/proxy.h"
#include "../../backends/daytona/multipart.h"
#include "../../backends/hostfs/beneath.h"
#include "../../backends/hostfs/tree.h"
#include "../../backends/http/helper.h"
#include "../../backends/kubernetes/kcreds.h"
#include "../../backends/kubernetes/kexec.h"
#include "../../backends/kubernetes/kpod.h"
#include "../../backends/kubernetes/wsframe.h"
#include "../../backends/kubernetes/kyaml.h"
#include "../../src/base/base64.h"
#include "../../src/base/clock.h"
#include "../../src/base/jsonw.h"
#include "../../src/base/log.h"
#include "../../src/base/utf8.h"
#include "../../src/protocol/bignum.h"
#include "../../src/protocol/era.h"
#include "../../src/protocol/writer.h"
#include "../../src/tools/output.h"
#include "../../src/tools/requirements.h"
#include "../../src/tools/resources.h"
#include "../../src/tools/result.h"
#include "../../src/tools/schema.h"

static int policy_of(struct netpolicy *p, int n, char **items)
{
	struct err e = {""};
	memset(p, 0, sizeof *p);
	for (int i = 0; i < n; i++) {
		int rc = strstr(items[i], "://") ? netpolicy_add_url(p, items[i], &e)
						 : netpolicy_add_host(p, items[i], &e);
		if (rc < 0) {
			fprintf(stderr, "test-helper: %s\n", e.msg);
			return -1;
		}
	}
	return 0;
}

static int cmd_proxy(int argc, char **argv)
{
	struct netpolicy pol;
	struct proxy *px;
	struct err e = {""};
	if (argc < 2 || policy_of(&pol, argc - 1, argv + 1) < 0)
		return 1;
	if (proxy_start(&px, argv[0], &pol, PROXY_INSTALL, &e) < 0) {
		fprintf(stderr, "test-helper: %s\n", e.msg);
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	while (read(0, buf, sizeof buf) > 0)
		;
	unsigned allowed, refused;
	char why[PROXY_WHY_MAX];
	proxy_counts(px, &allowed, &refused);
	bool unreachable = proxy_unreachable(px, why, sizeof why);
	proxy_stop(px);
	printf("allowed %u refused %u\n", allowed, refused);
	printf("unreachable %s\n", unreachable ? why : "none");
	return 0;
}

/* allow-host LIST HOST PORT: would the code's proxy let a request for HOST:PORT go on? */
static int cmd_allow_host(int argc, char **argv)
{
	struct netpolicy pol;
	struct err e = {""};
	char canon[256];
	const char *why = NULL;
	if (argc != 3)
		return 1;
	if (netpolicy_parse_allow(&pol, argv[0], &e) < 0) {
		fprintf(stderr, "test-helper: %s\n", e.msg);
		return 1;
	}
	if (netpolicy_canon_host(argv[1], canon, sizeof canon, &why) < 0)
		printf("refused: %s\n", why);
	else
		printf("%s\n", netpolicy_allows(&pol, canon, (unsigned)atoi(argv[2])) ? "yes" : "no");
	return 0;
}

/* allow-narrow LIST CALL: a call's `network` against --allow-hosts LIST: "ok" or the error. */
static int cmd_allow_narrow(int argc, char **argv)
{
	struct netpolicy all, sub;
	struct err e = {""};
	if (argc != 2 || netpolicy_parse_allow(&all, argv[0], &e) < 0)
		return 1;
	printf("%s\n", netpolicy_narrow(&sub, &all, argv[1], &e) < 0 ? e.msg : "ok");
	return 0;
}

static int cmd_addr_allowed(int argc, char **argv)
{
	struct netpolicy pol;
	if (argc < 2 || policy_of(&pol, argc - 2, argv + 2) < 0)
		return 1;
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	const struct sockaddr *sa;
	if (inet_pton(AF_INET, argv[1], &in.sin_addr) == 1)
		sa = (const struct sockaddr *)&in;
	else if (inet_pton(AF_INET6, argv[1], &in6.sin6_addr) == 1)
		sa = (const struct sockaddr *)&in6;
	else {
		fprintf(stderr, "test-helper: %s is not an address\n", argv[1]);
		return 1;
	}
	printf("%s\n", netpolicy_addr_allowed(&pol, argv[0], sa) ? "yes" : "no");
	return 0;
}

static int cmd_tree_remove(int argc, char **argv)
{
	if (argc != 1)
		return 1;
	if (tree_remove(argv[0]) < 0) {
		printf("%s\n", strerror(errno));
		return 1;
	}
	printf("removed\n");
	return 0;
}

static char *slurp(FILE *f, size_t *len);

static int cmd_beneath(int argc, char **argv)
{
	if (argc < 3)
		return 1;
	int dir = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	unsigned mode = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 8) : 0644;
	size_t n = 0;
	char *data = !strcmp(argv[0], "write") ? slurp(stdin, &n) : NULL;
	int rc = dir < 0 ? -1
		 : data ? beneath_write(dir, argv[2], data, n, mode)
		 : !strcmp(argv[0], "mkdir") ? beneath_mkdir(dir, argv[2], mode)
		 : !strcmp(argv[0], "remove") ? beneath_remove(dir, argv[2])
		 : (errno = EINVAL, -1);
	printf("%s\n", rc < 0 ? strerror(errno) : "ok");
	free(data);
	if (dir >= 0)
		close(dir);
	return rc < 0 ? 1 : 0;
}

static int print_part(void *ctx, const struct multipart_part *p)
{
	(void)ctx;
	printf("%s %s %zu ", p->name[0] ? p->name : "-", p->filename[0] ? p->filename : "-", p->len);
	for (size_t i = 0; i < p->len; i++)
		printf("%02x", (unsigned char)p->data[i]);
	printf("\n");
	return 0;
}

static int cmd_multipart(int argc, char **argv)
{
	(void)argv;
	size_t n;
	char *in = argc == 0 ? slurp(stdin, &n) : NULL;
	if (!in)
		return 1;
	int rc = multipart_each(in, n, print_part, NULL);
	printf("%s\n", rc ? "malformed" : "end");
	free(in);
	return rc ? 1 : 0;
}

/* All of stdin (or a file); caller frees. */
static char *slurp(FILE *f, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	size_t r;
	while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap && !(b = realloc(b, cap *= 2)))
			return NULL;
	}
	*len = n;
	return b;
}

static int cmd_utf8(int argc, char **argv)
{
	(void)argv;
	size_t n, cl;
	char *in = argc == 0 ? slurp(stdin, &n) : NULL;
	char *out = in ? utf8_sanitize(in, n, &cl) : NULL;
	if (!out)
		return 1;
	fwrite(out, 1, cl, stdout);
	free(in);
	free(out);
	return 0;
}

static int cmd_cursor(int argc, char **argv)
{
	char path[2048];
	if (argc == 2 && !strcmp(argv[0], "make")) {
		char *c = resources_cursor_make(argv[1]);
		if (!c)
			return 1;
		printf("%s\n", c);
		free(c);
		return 0;
	}
	if (argc != 2 || strcmp(argv[0], "parse"))
		return 1;
	if (resources_cursor_parse(argv[1], path, sizeof path) < 0)
		printf("refused\n");
	else
		printf("%s\n", path);
	return 0;
}

static int cmd_loadb(int argc, char **argv)
{
	(void)argv;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while (argc == 0 && (n = getline(&line, &cap, stdin)) > 0) {
		if (line[n - 1] == '\n')
			n--;
		json_error_t a, b;
		/* In a buffer of its exact size: a sanitizer build sees a read past its end. */
		char *exact = malloc(n ? (size_t)n : 1);
		if (!exact)
			return 1;
		memcpy(exact, line, (size_t)n);
		json_t *got = bignum_loadb(exact, (size_t)n, &a);
		free(exact);
		json_t *want = json_loadb(line, (size_t)n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &b);
		if (got && want && json_equal(got, want))
			printf("same\n");
		else if (!got && !want && !strcmp(a.text, b.text) && a.position == b.position)
			printf("same error\n");
		else
			printf("differs: %s (%d) / %s (%d)\n", got ? "read" : a.text, a.position, want ? "read" : b.text,
			       b.position);
		json_decref(got);
		json_decref(want);
	}
	free(line);
	return argc == 0 ? 0 : 1;
}

static int cmd_b64_decode(int argc, char **argv)
{
	(void)argv;
	size_t n;
	char *in = argc == 0 ? slurp(stdin, &n) : NULL;
	unsigned char *out = in ? malloc(n / 4 * 3 + 3) : NULL;
	if (!out)
		return 1;
	long counted = b64_decode(in, n, NULL), got = b64_decode(in, n, out);
	if (counted != got) {
		fprintf(stderr, "counted %ld, decoded %ld\n", counted, got);
		return 1;
	}
	if (got < 0)
		printf("refused");
	for (long i = 0; i < got; i++)
		printf("%02x", out[i]);
	printf("\n");
	free(in);
	free(out);
	return 0;
}

/* b64-lines: each line of stdin the hex of an input; per line "refused" or the hex of what it
 * decodes to, decoded into a buffer of exactly the size that sizing it (out NULL) said, so that
 * a sanitizer build sees any byte written past it; "differs" where sizing and decoding disagree. */
static int cmd_b64_lines(int argc, char **argv)
{
	(void)argv;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while (argc == 0 && (n = getline(&line, &cap, stdin)) > 0) {
		if (line[n - 1] == '\n')
			n--;
		size_t len = (size_t)n / 2;
		char *in = malloc(len + 1);
		if (!in)
			return 1;
		for (size_t i = 0; i < len; i++) {
			unsigned v;
			if (sscanf(line + 2 * i, "%2x", &v) != 1)
				return 1;
			in[i] = (char)v;
		}
		long counted = b64_decode(in, len, NULL);
		unsigned char *out = malloc(counted > 0 ? (size_t)counted : 1);
		long got = counted >= 0 && out ? b64_decode(in, len, out) : -1;
		if (counted != got)
			printf("differs: counted %ld, decoded %ld\n", counted, got);
		else if (got < 0)
			printf("refused\n");
		else {
			for (long i = 0; i < got; i++)
				printf("%02x", out[i]);
			printf("\n");
		}
		free(out);
		free(in);
	}
	free(line);
	return argc == 0 ? 0 : 1;
}

static int cmd_kyaml(int argc, char **argv)
{
	(void)argv;
	size_t n;
	char *in = argc == 0 ? slurp(stdin, &n) : NULL;
	if (!in)
		return 1;
	struct err e = {""};
	json_t *v = kyaml_parse(in, n, &e);
	free(in);
	if (!v) {
		printf("refused: %s\n", e.msg);
		return 0;
	}
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
	printf("%s\n", s ? s : "");
	free(s);
	json_decref(v);
	return 0;
}

static int cmd_kube_creds(int argc, char **argv)
{
	if (argc < 1 || argc > 2)
		return 1;
	struct kcreds c;
	struct err e = {""};
	if (kcreds_load(&c, argc == 2 ? argv[1] : NULL, argv[0], &e) < 0) {
		printf("refused: %s\n", e.msg);
		return 0;
	}
	json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:I, s:I, s:I}", "server", c.server, "ns", c.ns, "source", c.source,
			      "token", c.token, "ca", (json_int_t)c.ca_len, "cert", (json_int_t)c.cert_len, "key",
			      (json_int_t)c.key_len);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	printf("%s\n", s ? s : "");
	free(s);
	json_decref(o);
	kcreds_free(&c);
	return 0;
}

static int cmd_ws_accept(int argc, char **argv)
{
	if (argc != 1)
		return 1;
	char out[WS_ACCEPT_LEN + 1];
	ws_accept(argv[0], out);
	printf("%s\n", out);
	return 0;
}

/* Appends n bytes of p to a JSON string value s (NUL bytes as they are). */
static json_t *grow(json_t *s, const unsigned char *p, size_t n)
{
	size_t l = json_string_length(s);
	char *b = malloc(l + n + 1);
	memcpy(b, json_string_value(s), l);
	memcpy(b + l, p, n);
	json_t *v = json_stringn_nocheck(b, l + n);
	free(b);
	json_decref(s);
	return v;
}

static int cmd_kube_exec(int argc, char **argv)
{
	const char *in = NULL;
	bool close_in = false, attach = false;
	size_t max = 0;
	int i = 2;
	if (argc < 4)
		return 1;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--stdin") && i + 1 < argc)
			in = argv[++i];
		else if (!strcmp(argv[i], "--close-stdin"))
			close_in = true;
		else if (!strcmp(argv[i], "--max") && i + 1 < argc)
			max = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--attach"))
			attach = true;
		else
			return 1;
	}
	if (i + 1 >= argc)
		return 1;
	struct kcreds c;
	struct err e = {""};
	if (kcreds_load(&c, NULL, "/nonexistent", &e) < 0) {
		printf("{\"error\": \"%s\"}\n", "no credentials");
		fprintf(stderr, "%s\n", e.msg);
		return 1;
	}
	struct kexec x;
	kexec_init(&x);
	if (max)
		x.max_msg = max;
	char *path = kexec_exec_path(argv[0], argv[1], NULL, (const char *const *)argv + i + 1, (size_t)(argc - i - 1),
				     in != NULL || close_in);
	if (attach && path)
		snprintf(strstr(path, "/exec?"), 64, "/attach?stdin=true&stdout=true&stderr=true");
	json_t *o = json_object(), *out = json_string(""), *err = json_string(""), *msgs = json_array();
	int rc = kexec_open(&x, &c, path, 10000, &e);
	if (rc == 0 && in)
		rc = kexec_send(&x, KEXEC_STDIN, in, strlen(in), &e);
	if (rc == 0 && close_in)
		rc = kexec_close_stdin(&x, &e) < 0 ? -1 : 0;
	while (rc == 0) {
		unsigned ch;
		const unsigned char *p;
		size_t n;
		int r = kexec_recv(&x, 20000, &ch, &p, &n, &e);
		if (r <= 0) {
			rc = r == 0 ? 0 : -1;
			if (r == KEXEC_TIMEOUT)
				err_set(&e, "timed out");
			break;
		}
		json_array_append_new(msgs, json_integer(ch));
		if (ch == KEXEC_STDOUT)
			out = grow(out, p, n);
		else if (ch == KEXEC_STDERR)
			err = grow(err, p, n);
		else if (ch == KEXEC_STATUS) {
			char why[256] = "";
			int code = kexec_exit_code(p, n, why, sizeof why);
			json_object_set_new(o, "exit", json_integer(code));
			if (code < 0)
				json_object_set_new(o, "why", json_string(why));
		}
	}
	json_object_set_new(o, "protocol", json_string(x.proto));
	json_object_set_new(o, "http_status", json_integer(x.http_status));
	json_object_set_new(o, "stdout", out);
	json_object_set_new(o, "stderr", err);
	json_object_set_new(o, "messages", msgs);
	json_object_set_new(o, "close_code", json_integer(x.close_code));
	if (rc < 0 || e.msg[0])
		json_object_set_new(o, "error", json_string(e.msg));
	kexec_close(&x);
	kcreds_free(&c);
	free(path);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	printf("%s\n", s);
	free(s);
	json_decref(o);
	return 0;
}

static bool always_gone(json_t *labels, void *arg)
{
	(void)labels;
	(void)arg;
	return true;
}

static int cmd_kube_pod(int argc, char **argv)
{
	if (argc < 3)
		return 1;
	const char *ns = argv[0], *name = argv[1], *op = argv[2];
	const char *cmd[] = {"sleep", "infinity", NULL};
	struct kpod_spec sp = {.name = name, .image = argc > 3 && strcmp(op, "put") ? argv[3] : "python:3.12-slim",
			       .uid = 1000, .cpus = 1.5, .memory = 512u << 20, .ephemeral = 1u << 30, .workspace = 64u << 20,
			       .tmp = 16u << 20, .agent_dir = 32u << 20, .deadline_s = 600, .command = cmd, .pid = "123",
			       .start = "456", .host = "test host!", .sandbox = "k8s-0011aabb"};
	json_t *spec = kpod_spec(&sp);
	if (!strcmp(op, "spec")) {
		char *s = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
		printf("%s\n", s);
		free(s);
		json_decref(spec);
		return 0;
	}
	struct kcreds c;
	struct kapi a;
	struct err e = {""};
	int rc = kcreds_load(&c, NULL, "/nonexistent", &e);
	if (rc == 0)
		rc = kapi_open(&a, &c, &e);
	if (rc == 0 && !strcmp(op, "create")) {
		rc = kpod_create(&a, ns, spec, &e);
		if (rc == 0)
			rc = kpod_wait_running(&a, ns, name, 20000, &e);
	} else if (rc == 0 && !strcmp(op, "put") && argc == 4) {
		size_t n;
		char *data = slurp(stdin, &n);
		rc = data ? kpod_put(&a, ns, name, argv[3], data, n, 20000, &e) : -1;
		free(data);
	} else if (rc == 0 && !strcmp(op, "delete")) {
		rc = kpod_delete(&a, ns, name, 10000, &e);
	} else if (rc == 0 && !strcmp(op, "reap")) {
		rc = kpod_reap(&a, ns, always_gone, NULL, &e);
		if (rc >= 0)
			printf("reaped %d\n", rc);
	} else if (rc == 0) {
		rc = err_set(&e, "no such action");
	}
	if (rc < 0)
		printf("failed: %s\n", e.msg);
	else if (strcmp(op, "reap"))
		printf("ok\n");
	kapi_close(&a);
	json_decref(spec);
	return 0;
}

static int cmd_log(int argc, char **argv)
{
	if (argc != 1)
		return 2;
	size_t pad = strtoul(argv[0], NULL, 10);
	char *msg = malloc(pad + 2001);
	if (!msg || writer_start(STDOUT_FILENO) < 0)
		return 1;
	memset(msg, 'a', pad);
	for (size_t i = 0; i < 1000; i++)
		memcpy(msg + pad + 2 * i, "\xc3\xa9", 2);
	msg[pad + 2000] = 0;
	log_set_client(era_send_log, LOG_DEBUG);
	log_msg(LOG_INFO, "%s", msg);
	free(msg);
	return writer_flush(clock_ms() + 5000) < 0;
}

static int cmd_jsonw(int argc, char **argv)
{
	(void)argv;
	static char line[1 << 20];
	while (argc == 0 && fgets(line, sizeof line, stdin)) {
		json_error_t je;
		json_t *j = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
		if (!j) {
			fprintf(stderr, "test-helper: %s\n", je.text);
			return 1;
		}
		char *want = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
		struct buf b = {0};
		jsonw_dump(j, &b);
		size_t n = jsonw_size(j), got_len;
		char *got = buf_take(&b, &got_len);
		if (want && got && got_len == strlen(want) && !memcmp(got, want, got_len) && n == got_len)
			printf("same %zu\n", n);
		else
			printf("differs (size %zu)\n%s\n%s\n", n, want ? want : "(null)", got ? got : "(null)");
		free(want);
		free(got);
		json_decref(j);
	}
	return argc == 0 ? 0 : 1;
}

/* writer socket|pipe N: hands the writer N lines ({"n":k,"pad":"x..."}, 1 byte to 9 KiB of pad,
 * the sizes in turn, pausing now and then so that the queue empties) on a socket of a small send
 * buffer or a pipe of one page, read by a slow reader that checks each line is whole and
 * follows the one before. Prints "read N direct D partial P": the lines read in order, how many
 * the handing thread wrote itself, and how many of those in part. */
struct writer_reader {
	int fd;
	long want, got;
	char bad[160];
};

static void *writer_read(void *arg)
{
	struct writer_reader *r = arg;
	static char acc[1 << 16];
	size_t have = 0;
	unsigned reads = 0;
	while (r->got < r->want && !r->bad[0]) {
		ssize_t k = read(r->fd, acc + have, sizeof acc - have < 1500 ? sizeof acc - have : 1500);
		if (k <= 0) {
			snprintf(r->bad, sizeof r->bad, "read ended after %ld lines", r->got);
			break;
		}
		have += (size_t)k;
		char *nl;
		while ((nl = memchr(acc, '\n', have))) {
			*nl = '\0';
			json_t *j = json_loads(acc, 0, NULL);
			bool whole = j != NULL;
			json_int_t n = whole ? json_integer_value(json_object_get(j, "n")) : -1;
			json_decref(j);
			if (n != r->got) {
				snprintf(r->bad, sizeof r->bad, "line %ld: %s", r->got, whole ? "out of order" : "not whole JSON");
				break;
			}
			r->got++;
			size_t used = (size_t)(nl - acc) + 1;
			memmove(acc, nl + 1, have - used);
			have -= used;
		}
		if (++reads % 7 == 0)
			nanosleep(&(struct timespec){0, 300000}, NULL);
	}
	return NULL;
}

static int cmd_writer(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int fds[2];
	bool sock = !strcmp(argv[0], "socket");
	if (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0 : pipe(fds) < 0)
		return 1;
	if (writer_start(fds[1]) < 0)
		return 1;
	/* Small, so that a line written at once often meets a buffer with less room than it. */
	int small = 4096;
	if (sock)
		(void)setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	else
		(void)fcntl(fds[1], F_SETPIPE_SZ, small);
	struct writer_reader r = {.fd = fds[0], .want = atol(argv[1])};
	pthread_t t;
	if (pthread_create(&t, NULL, writer_read, &r) != 0)
		return 1;
	static const size_t sizes[] = {1, 3000, 4000, 200, 9000, 40, 2500, 4060, 700};
	static char pad[9001];
	memset(pad, 'x', sizeof pad - 1);
	for (long k = 0; k < r.want; k++) {
		size_t n = sizes[k % (sizeof sizes / sizeof sizes[0])];
		json_t *j = json_pack("{s:I, s:s%}", "n", (json_int_t)k, "pad", pad, n);
		if (writer_send(j) < 0)
			return 1;
		if (k % 4)
			nanosleep(&(struct timespec){0, (k % 4) * 150000}, NULL);
	}
	pthread_join(t, NULL);
	uint64_t d, p;
	writer_counts(&d, &p);
	printf("read %ld direct %llu partial %llu%s%s\n", r.got, (unsigned long long)d, (unsigned long long)p,
	       r.bad[0] ? " bad " : "", r.bad);
	return r.bad[0] ? 1 : 0;
}

static int cmd_capture(int argc, char **argv)
{
	size_t n, tl;
	if (argc != 2)
		return 1;
	size_t cap = strtoul(argv[0], NULL, 10), chunk = strtoul(argv[1], NULL, 10);
	char *in = slurp(stdin, &n);
	struct output o;
	if (!in || !chunk || output_init(&o, cap) < 0)
		return 1;
	for (size_t i = 0; i < n; i += chunk)
		output_add(&o, in + i, n - i < chunk ? n - i : chunk);
	char *text = output_text(&o, "/workspace/full", &tl);
	json_t *j = json_pack("{s:I, s:b, s:s%}", "total", (json_int_t)o.total, "cut", output_cut(&o), "text", text, tl);
	char *s = json_dumps(j, JSON_COMPACT);
	printf("%s\n", s);
	free(s);
	json_decref(j);
	free(text);
	output_free(&o);
	free(in);
	return 0;
}

static int cmd_result(int argc, char **argv)
{
	if (argc != 3)
		return 1;
	struct output o[2];
	struct result_facts f = {.exit_code = 0, .backend = "local", .sandbox_id = "local-00000000"};
	for (int i = 0; i < 2; i++) {
		FILE *fp = fopen(argv[1 + i], "rb");
		size_t n;
		char *d = fp ? slurp(fp, &n) : NULL;
		if (fp)
			fclose(fp);
		if (!d || output_init(&o[i], 64 << 10) < 0)
			return 1;
		output_add(&o[i], d, n);
		free(d);
		f.s[i].out = &o[i];
		f.s[i].file = i ? "/workspace/.sandbox/output/call-1.stderr" : "/workspace/.sandbox/output/call-1.stdout";
	}
	json_t *r = result_execution(&f, strtoul(argv[0], NULL, 10), NULL);
	char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;
	if (!s)
		return 1;
	printf("%s\nsize %zu\n", s, strlen(s));
	free(s);
	json_decref(r);
	output_free(&o[0]);
	output_free(&o[1]);
	return 0;
}

static int cmd_schema(int argc, char **argv)
{
	struct err e = {""};
	char name[256];
	json_error_t je;
	if (argc != 1)
		return 1;
	snprintf(name, sizeof name, "schemas/%s", argv[0]);
	json_t *schema = schema_load(name, &e), *inst = json_loadf(stdin, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	if (!schema || !inst) {
		fprintf(stderr, "test-helper: %s\n", schema ? je.text : e.msg);
		return 1;
	}
	printf("%s\n", schema_validate(schema, inst, "", &e) == 0 ? "ok" : e.msg);
	json_decref(schema);
	json_decref(inst);
	return 0;
}

static int cmd_requirement(int argc, char **argv)
{
	bool online = argc == 2 && !strcmp(argv[0], "--online");
	char why[400];
	if (argc != 1 && !online)
		return 1;
	const char *r = argv[argc - 1];
	if (req_check(r, strlen(r), online, why, sizeof why) == 0)
		printf("ok\n");
	else
		printf("refused: %s\n", why);
	return 0;
}

static int cmd_frame_encode(int argc, char **argv)
{
	struct ag_buf b = {0};
	ag_frame_begin(&b, AG_PUT);
	for (int i = 0; i < argc; i++)
		ag_put_str(&b, argv[i], strlen(argv[i]));
	if (ag_frame_end(&b) < 0)
		return 1;
	for (size_t i = 0; i < b.len; i++)
		printf("%02x", b.p[i]);
	printf("\n");
	free(b.p);
	return 0;
}

static int cmd_frame_decode(int argc, char **argv)
{
	if (argc != 2)
		return 1;
	size_t hl = strlen(argv[0]), n = hl / 2;
	unsigned char *d = malloc(n + 1);
	for (size_t i = 0; d && i < n; i++)
		sscanf(argv[0] + 2 * i, "%2hhx", &d[i]);
	/* As the agent and the server read one: the length, then that many bytes. */
	uint32_t len = n >= 4 ? ag_le32(d) : 0;
	if (!d || n < 5 || len == 0 || len > AG_MAX_FRAME || len != n - 4) {
		printf("bad\n");
		free(d);
		return 0;
	}
	struct ag_cur c = {d + 5, len - 1, 0};
	for (long i = 0; i < strtol(argv[1], NULL, 10); i++) {
		size_t sl;
		const char *s = ag_get_str(&c, &sl);
		if (c.bad) {
			printf("bad\n");
			break;
		}
		printf("str:%.*s\n", (int)sl, s);
	}
	free(d);
	return 0;
}

static int cmd_without(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[1], "--")) {
		fprintf(stderr, "usage: test-helper without CALL[,CALL...] -- PROG [ARGS...]\n");
		return 2;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return 1;
	for (char *save = NULL, *name = strtok_r(argv[0], ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		int nr = seccomp_syscall_resolve_name(name);
		if (nr == __NR_SCMP_ERROR || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0) < 0) {
			fprintf(stderr, "test-helper: no system call %s\n", name);
			seccomp_release(ctx);
			return 1;
		}
	}
	int rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		fprintf(stderr, "test-helper: seccomp_load: %s\n", strerror(-rc));
		return 1;
	}
	execvp(argv[2], argv + 2);
	fprintf(stderr, "test-helper: %s: %s\n", argv[2], strerror(errno));
	return 127;
}

/* One whole frame from fd into a buffer of the caller's (freed by it); -1 at its end. */
static int lying_read(int fd, unsigned char **buf)
{
	unsigned char h[4];
	if (ag_read_full(fd, h, 4) <= 0)
		return -1;
	uint32_t n = ag_le32(h);
	if (n == 0 || n > AG_MAX_FRAME || !(*buf = malloc(n)) || ag_read_full(fd, *buf, n) <= 0)
		return -1;
	return 0;
}

static void lying_agent(int fd, int argc, char **argv)
{
	struct ag_buf b = {0};
	unsigned char *in = NULL;
	ag_frame_begin(&b, AG_HELLO);
	ag_put_u32(&b, AG_VERSION);
	ag_frame_end(&b);
	if (ag_write_full(fd, b.p, b.len) < 0 || lying_read(fd, &in) < 0)
		_exit(1);
	free(in);
	for (int i = 0; i < argc; i++) {
		/* @FILE: the hex is that file's (an argument is at most 128 KiB) */
		size_t hl = 0;
		FILE *hf = argv[i][0] == '@' ? fopen(argv[i] + 1, "r") : NULL;
		char *hex = hf ? slurp(hf, &hl) : argv[i][0] == '@' ? NULL : argv[i];
		if (hf)
			fclose(hf);
		size_t n = !hex ? 0 : (hf ? hl : strlen(hex)) / 2;
		unsigned char *d = malloc(n ? n : 1);
		for (size_t k = 0; d && k < n; k++)
			sscanf(hex + 2 * k, "%2hhx", &d[k]);
		if (!hex || !d || ag_write_full(fd, d, n) < 0)
			_exit(1);
		free(d);
	}
	ag_frame_begin(&b, AG_EXIT);
	for (int i = 0; i < 10; i++)
		ag_put_u32(&b, 0);
	ag_frame_end(&b);
	if (ag_write_full(fd, b.p, b.len) < 0)
		_exit(1);
	/* Whatever comes next is answered as for an empty outputs/. */
	while (lying_read(fd, &in) == 0) {
		if (in[0] == AG_LIST) {
			ag_frame_begin(&b, AG_ENTRIES);
			ag_put_u32(&b, 0);
			ag_put_u32(&b, 0);
		} else if (in[0] == AG_GET) {
			ag_frame_begin(&b, AG_DATA);
			ag_put_u32(&b, ENOENT);
			ag_put_u32(&b, 0);
			ag_put_u64(&b, 0);
		} else if (in[0] == AG_CHANGES && getenv("LYING_CHANGES")) {
			const char *hex = getenv("LYING_CHANGES");
			ag_frame_begin(&b, AG_CHANGES);
			for (size_t k = 0; hex[2 * k] && hex[2 * k + 1]; k++) {
				unsigned char c;
				sscanf(hex + 2 * k, "%2hhx", &c);
				ag_put_u8(&b, c);
			}
		} else {
			free(in);
			continue;
		}
		free(in);
		ag_frame_end(&b);
		if (ag_write_full(fd, b.p, b.len) < 0)
			break;
	}
	_exit(0);
}

static int cmd_lying_agent(int argc, char **argv)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 1;
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		lying_agent(sv[1], argc, argv);
	}
	close(sv[1]);
	struct agentlink l;
	struct err e = {""};
	int rc = agentlink_open(&l, sv[0], 5000, &e);
	if (rc == 0) {
		const char *argv_run[] = {"true", NULL}, *env[] = {NULL};
		struct run_req rq = {.argv = argv_run, .env = env, .cwd = "/workspace", .cancel_fd = -1,
				     .deadline_ms = clock_ms() + 10000, .changes_in = "/workspace/outputs",
				     .changes_list_max = 1000, .changes_files = 20, .changes_file_max = 65536};
		struct agentlink_limits lim = {0};
		struct run_res rs = {0};
		rc = agentlink_run(&l, &rq, &lim, &rs, &e);
	}
	printf("run %d %s\n", rc, e.msg);
	if (rc == 0) {
		struct ws_list ls;
		struct ws_file f;
		if (agentlink_list(&l, "/workspace/outputs", NULL, 1000, &ls, &e) == 0) {
			printf("list %zu\n", ls.n);
			ws_list_free(&ls);
		}
		if (agentlink_get(&l, "/workspace/outputs/a", 1 << 20, &f, &e) == 0) {
			printf("get %d %zu %.*s\n", f.err, f.len, (int)f.len, f.data ? (const char *)f.data : "");
			ws_file_free(&f);
		}
		if (getenv("LYING_CHANGES")) {
			e.msg[0] = 0;
			rc = agentlink_changes(&l, &e);
			printf("changes %d %s\n", rc, e.msg);
		}
	}
	agentlink_close(&l);
	waitpid(pid, NULL, 0);
	return 0;
}

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} cmds[] = {
	{"without", cmd_without},
	{"proxy", cmd_proxy},
	{"addr-allowed", cmd_addr_allowed},
	{"allow-host", cmd_allow_host},
	{"allow-narrow", cmd_allow_narrow},
	{"tree-remove", cmd_tree_remove},
	{"beneath", cmd_beneath},
	{"multipart", cmd_multipart},
	{"utf8", cmd_utf8},
	{"cursor", cmd_cursor},
	{"b64-decode", cmd_b64_decode},
	{"b64-lines", cmd_b64_lines},
	{"kyaml", cmd_kyaml},
	{"kube-creds", cmd_kube_creds},
	{"kube-exec", cmd_kube_exec},
	{"kube-pod", cmd_kube_pod},
	{"ws-accept", cmd_ws_accept},
	{"loadb", cmd_loadb},
	{"jsonw", cmd_jsonw},
	{"writer", cmd_writer},
	{"log", cmd_log},
	{"capture", cmd_capture},
	{"result", cmd_result},
	{"schema", cmd_schema},
	{"requirement", cmd_requirement},
	{"frame-encode", cmd_frame_encode},
	{"frame-decode", cmd_frame_decode},
	{"lying-agent", cmd_lying_agent},
};

int main(int argc, char **argv)
{
	/* The HTTP client starts this program as its helper (helper.h). */
	if (argc == 2 && !strcmp(argv[1], HTTP_HELPER_ARG))
		return http_helper_main();
	for (size_t i = 0; argc > 1 && i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].run(argc - 2, argv + 2);
	fprintf(stderr, "usage: test-helper COMMAND ARGS... (see tests/helper/test-helper.c)\n");
	return 2;
}
