/*
 * The Daytona backend: the sandbox is a Daytona cloud sandbox, driven through its REST API
 * (rest.h) and its toolbox (the in-sandbox daemon behind the toolbox proxy).
 *
 * Life of a sandbox:
 *  - start: POST /sandbox with our labels (so a later server can find and delete what a dead
 *    one left), autoStopInterval/autoDeleteInterval (so Daytona itself stops and deletes it if
 *    this server vanishes), networkBlockAll unless --network all; then GET /sandbox/{id}
 *    until `started` on a bounded schedule; then one command makes /workspace writable.
 *  - run: one synchronous execute of the call runner (runner.h) starts the call, with its
 *    files, and waits for its end in the sandbox; more only when the call runs on, is
 *    cancelled, or has large files (dtcall.h).
 *  - --workspace DIR: taken and locked before the sandbox is made, copied in before any call
 *    (wsseed.h), and every call's changes copied back before its result (wssync.h).
 *  - destroy: DELETE /sandbox/{id}, bounded in time; cleanup_sandbox empties DIR.
 *
 * Why not toolbox sessions and their logs: a session costs requests of its own (create, exec,
 * delete), and the logs endpoint returns the whole log every time (unbounded, quadratic when
 * polled) and as JSON text (not byte-exact). The runner keeps the streams apart in files it
 * bounds, so every answer here stays small. A background process is a call whose keeper the
 * server stops waiting for (dtcall.h); the process op asks the runner about it (runner.h's
 * bgq, bgin, bgsig), and sweeps spare it by the keeper's PID:START that go reported. Toolbox
 * sessions would add no timeout, no signal but their delete, no closing of stdin.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../backend.h"
#include "../../src/base/clock.h"
#include "../../src/base/base64.h"
#include "../../src/base/buf.h"
#include "../../src/base/procstart.h"
#include "hosttree.h"
#include "../../src/base/log.h"
#include "../run/netpolicy.h"
#include "dtcall.h"
#include "rest.h"
#include "runner.h"
#include "wsseed.h"
#include "wssync.h"

/* Each call's state lives in a fresh folder here, of a name code cannot guess before the call.
 * Files too large to go in the call's command go up into it first, and the runner puts them in
 * place: the toolbox daemon never writes to a path the code could have planted a FIFO or a
 * symlink at. */
#define RUN_DIR "/tmp/.sandbox-mcp"
#define LABEL "sandbox-mcp"
#define OWNER_LABEL "sandbox-mcp-owner"
/* Names one attempt at making a sandbox, so that one whose create was cut short can be found. */
#define ATTEMPT_LABEL "sandbox-mcp-attempt"

#define SMALL_BODY (1u << 20)           /* API and toolbox answers but a call's */
#define API_TIMEOUT_MS 30000L
#define CREATE_TIMEOUT_MS 75000L        /* the API may hold a create for 30 s */
#define PROBE_TIMEOUT_MS 5000L
#define SHUTDOWN_DELETE_MS 1500L        /* the server must exit within 2 s */
/* How long a failed making looks for, and deletes, what its create may have made: a sandbox
 * refuses its delete (409) while it is being made. */
#define FORGET_MS 60000L
/* Files up to this much in all go in the command of the request that uses them (base64, a
 * third more), larger ones up by bulk upload first: the toolbox proxy retries a stale
 * connection only for bodies up to 256 KiB, and the shell reads a here-document a byte at a
 * time. */
#define INLINE_MAX (128u << 10)

/* Background processes: at most BG_LIVE at once, and BG_ENDED ended ones kept unread (the
 * oldest goes first), as the agent keeps them (proto.h's AG_BG_MAX, AG_BG_ENDED). */
#define BG_LIVE 64u
#define BG_ENDED 16u
#define BG_SLOTS (BG_LIVE + BG_ENDED)
/* Past its timeout by this much, a background process whose keeper has not ended it (the code
 * stopped the keeper) is no longer spared by sweeps, and a read kills it. */
#define BG_GRACE_MS 10000

/* A background process: a call's keeper (runner.h) left running in its folder bg-..., which
 * the server alone names to the sweeps (by its keeper's PID:START, as go found it). */
struct dt_bg {
	unsigned id;               /* 0: a free slot */
	bool running, timed_out, input_closed, cut, file[2];
	int status;                /* wait status, once ended */
	int file_errno[2];
	char dir[128], keeper[64], label[256], prefix[256];
	int64_t started_ns, start_ms, end_ms, deadline_ms;
	uint64_t cap, off[2], bytes[2], ended_seq;
};

/* The backend's own options. */
struct daytona_opts {
	char snapshot[256];        /* snapshot to create sandboxes from; "" for the organization's */
	char image[256];           /* image to create them from instead; "" for none */
	double start_timeout_s;    /* how long a new sandbox may take to start */
};

struct daytona {
	struct rest rest;
	bool open;             /* http is usable */
	char id[64];           /* the sandbox's id; "" when none */
	char tb[2048];         /* toolbox base URL: toolboxProxyUrl/id */
	char snapshot[256], image[256];
	const char *python;    /* cfg->python, borrowed */
	char *baseline;        /* "PID:START,..." of the sandbox's own processes, spared by sweeps */
	struct runner_code code; /* the runner as the sandbox's Python compiled it, said with the
	                        * baseline (before any call): requests name it, and carry it
	                        * only when the copy kept in the sandbox is not it */
	char *code_allow;      /* --allow-hosts: the CIDRs its hosts resolved to when the sandbox
	                        * was made, the code's networkAllowList; NULL for none */
	char attempt[40];      /* ATTEMPT_LABEL of the sandbox being made */
	bool create_sent;      /* its create request went out: the service may have made it */
	long disk_gib;         /* the sandbox's disk as Daytona reports it; 0 unknown */
	struct mount_copy {    /* what of each --mount folder was copied in */
		size_t files;
		uint64_t bytes;
		size_t skipped;    /* symlinks, special files, names the toolbox cannot carry */
	} mounts[MOUNTS_MAX];
	struct wssync ws;      /* --workspace DIR, kept in step with /workspace */
	struct wssync_io io;   /* the requests it makes */
	char lost[300];        /* why the sandbox is gone, found after a call; "" while it is not */
	json_t *out;           /* the runner's "out" of the last call (runner.h), which answers the
	                        * list and reads of out_dir that follow it until the call is
	                        * answered; NULL when none */
	char out_dir[256];
	/* Background processes, shared by the call's thread (run) and the process op's thread,
	 * which has a REST client of its own (rest.h: one per thread). */
	pthread_mutex_t bg_mu;
	struct dt_bg bg[BG_SLOTS];
	unsigned bg_next;
	uint64_t bg_ended_seq;
	struct rest prest;
	bool popen;
};

/* What the runner's "out" holds (runner.py's OUT_*). */
#define OUT_LIST 1000
#define OUT_FILE_MAX 65536

static void forget_out(struct daytona *D);

/* ---------------------------------------------------------------- small helpers */

/* Waits ms, or less when the making is cancelled: true then. */
static bool pause_ms(struct daytona *D, int64_t ms)
{
	struct pollfd p = {D->rest.http.cancel_fd, POLLIN, 0};
	if (poll(&p, D->rest.http.cancel_fd >= 0 ? 1 : 0, ms > 0 ? (int)ms : 0) > 0) {
		D->rest.http.cancelled = true;
		return true;
	}
	return false;
}

static void sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* "host:pid:starttime": who made a sandbox, so that reap can tell a dead server's. */
static void owner_of(pid_t pid, char *out, size_t n)
{
	char host[128] = "?";
	unsigned long long start = 0;
	gethostname(host, sizeof host - 1);
	host[sizeof host - 1] = '\0';
	if (procstart(pid, &start) < 0)
		start = 0;
	snprintf(out, n, "%s:%d:%llu", host, (int)pid, start);
}

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---------------------------------------------------------------- requests */

/* fresh: a connection of its own, for a request that must not run twice (http.h). */
static int api_req(struct daytona *D, const char *method, const char *path, json_t *body, long timeout_ms, bool fresh,
		   struct http_resp *rs, struct err *e)
{
	char *url = rest_url(&D->rest, path);
	if (!url) {
		memset(rs, 0, sizeof *rs);
		return err_set(e, "out of memory");
	}
	struct rest_req rq = {.method = method, .url = url, .json = body, .timeout_ms = timeout_ms,
			    .max_body = SMALL_BODY, .fresh = fresh};
	int rc = rest_call(&D->rest, &rq, rs, e);
	free(url);
	return rc;
}

static int api(struct daytona *D, const char *method, const char *path, json_t *body, long timeout_ms,
	       struct http_resp *rs, struct err *e)
{
	return api_req(D, method, path, body, timeout_ms, false, rs, e);
}

static int tbx(struct daytona *D, const char *method, const char *path, json_t *body, const struct rest_file *parts,
	       size_t nparts, long timeout_ms, size_t max_body, struct http_resp *rs, struct err *e)
{
	size_t n = strlen(D->tb) + strlen(path) + 1;
	char *url = malloc(n);
	if (!url)
		return err_set(e, "out of memory");
	snprintf(url, n, "%s%s", D->tb, path);
	struct rest_req rq = {.method = method, .url = url, .json = body, .files = parts, .nfiles = nparts,
			    .timeout_ms = timeout_ms, .max_body = max_body};
	int rc = rest_call(&D->rest, &rq, rs, e);
	free(url);
	return rc;
}

/* A toolbox request failed: is the sandbox itself gone? BACKEND_LOST if so, else -1. The
 * reason for the failure is already in e. */
static int lost_or_failed(struct daytona *D, struct err *e)
{
	char path[128];
	struct http_resp rs;
	struct err ce = {""};
	snprintf(path, sizeof path, "/sandbox/%s", D->id);
	if (api(D, "GET", path, NULL, 10000, &rs, &ce) < 0)
		return -1;
	int rc = -1;
	if (rs.status == 404) {
		err_clear(e);
		err_set(e, "the Daytona sandbox %s no longer exists", D->id);
		rc = BACKEND_LOST;
	} else if (rs.status == 200) {
		const char *st = json_str(rs.json, "state");
		if (st && strcmp(st, "started")) {
			err_clear(e);
			err_set(e, "the Daytona sandbox %s is %s", D->id, st);
			rc = BACKEND_LOST;
		}
	}
	http_resp_free(&rs);
	return rc;
}

/* Runs a shell command with the toolbox's synchronous execute, abandoned at once when
 * cancel_fd (>= 0) turns readable. 0 with *out (caller frees) the combined output and *code
 * the exit code, DTCALL_CANCELLED, or -1 / BACKEND_LOST. */
static int tb_exec_one(struct daytona *D, const char *cmd, int timeout_s, size_t max_body, int cancel_fd,
		       char **out, int *code, struct err *e);

/* The same, the runner's line put into a runner's command (runner_fill): the code object kept in
 * the sandbox, and when the runner finds it gone or not the one named (the code runs as the same
 * user and may have changed it), once more with the code object itself. */
static int tb_exec(struct daytona *D, const char *cmd, int timeout_s, size_t max_body, int cancel_fd, char **out,
		   int *code, struct err *e)
{
	struct buf c = {0};
	const struct runner_code *rc = D->code.line ? &D->code : NULL;
	int f = runner_fill(&c, cmd, rc, false);
	if (f < 0) {
		buf_free(&c);
		return err_set(e, "out of memory");
	}
	int r = tb_exec_one(D, f ? c.p : cmd, timeout_s, max_body, cancel_fd, out, code, e);
	buf_free(&c);
	if (r == 0 && f && rc && *code == 3 && !strcmp(*out, RUNNER_MISS "\n")) {
		log_msg(LOG_DEBUG, "daytona: the runner's code object was not in the sandbox; sent along");
		free(*out);
		*out = NULL;
		struct buf full = {0};
		if (runner_fill(&full, cmd, rc, true) < 0) {
			buf_free(&full);
			return err_set(e, "out of memory");
		}
		r = tb_exec_one(D, full.p, timeout_s, max_body, cancel_fd, out, code, e);
		buf_free(&full);
	}
	return r;
}

static int tb_exec_one(struct daytona *D, const char *cmd, int timeout_s, size_t max_body, int cancel_fd,
		       char **out, int *code, struct err *e)
{
	json_t *body = json_pack("{s:s, s:i}", "command", cmd, "timeout", timeout_s);
	if (!body)
		return err_set(e, "out of memory");
	struct http_resp rs;
	int saved = D->rest.http.cancel_fd;
	if (cancel_fd >= 0)
		D->rest.http.cancel_fd = cancel_fd;
	int rc = tbx(D, "POST", "/process/execute", body, NULL, 0, (timeout_s + 5) * 1000L, max_body, &rs, e);
	D->rest.http.cancel_fd = saved;
	json_decref(body);
	if (rc < 0)
		http_resp_free(&rs);
	if (rc < 0 && cancel_fd >= 0 && D->rest.http.cancelled)
		return DTCALL_CANCELLED;
	if (rc < 0)
		return lost_or_failed(D, e);
	if (rs.status != 200) {
		rest_fail(&rs, "running a command in the Daytona sandbox", e);
		http_resp_free(&rs);
		return lost_or_failed(D, e);
	}
	const char *res = json_str(rs.json, "result");
	json_t *ec = json_object_get(rs.json, "exitCode");
	if (!ec)
		ec = json_object_get(rs.json, "code");
	*code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	*out = strdup(res ? res : "");
	http_resp_free(&rs);
	return *out ? 0 : err_set(e, "out of memory");
}

/* ---------------------------------------------------------------- probe, start */

static int dt_open(struct daytona *D, struct err *e)
{
	if (D->open)
		return 0;
	if (rest_open(&D->rest, e) < 0)
		return -1;
	D->open = true;
	return 0;
}

static int daytona_probe(struct backend *b, struct err *e)
{
	struct daytona *D = b->priv;
	const char *key = getenv("DAYTONA_API_KEY");
	if (!key || !*key) {
		err_set(e, "DAYTONA_API_KEY is not set");
		return BACKEND_ABSENT;
	}
	if (b->cfg->wheelhouse[0])
		return err_set(e, "--wheelhouse is a folder on this host, which a Daytona sandbox cannot see");
	/* Both names were checked with the rest of the configuration. */
	const struct daytona_opts *o = b->opts;
	snprintf(D->snapshot, sizeof D->snapshot, "%s", o->snapshot);
	snprintf(D->image, sizeof D->image, "%s", o->image);
	if (dt_open(D, e) < 0)
		return -1;
	/* The cheapest authenticated call: one list item. */
	struct http_resp rs;
	struct err he = {""};
	if (api(D, "GET", "/sandbox?limit=1", NULL, PROBE_TIMEOUT_MS, &rs, &he) < 0)
		return err_set(e, "the Daytona API at %s does not answer: %s", D->rest.api, he.msg);
	int rc = 0;
	if (rs.status != 200) {
		char what[1200];
		snprintf(what, sizeof what, "the Daytona API at %s", D->rest.api);
		rc = rest_fail(&rs, what, e);
	}
	http_resp_free(&rs);
	return rc;
}

static long start_timeout_ms(const struct backend *b)
{
	const struct daytona_opts *o = b->opts;
	return (long)(o->start_timeout_s * 1000);
}

/* Bytes as Daytona's resources take them: whole GiB, rounded up, at least 1. */
static json_int_t gib_up(uint64_t bytes)
{
	json_int_t gib = (json_int_t)ceil((double)bytes / (1024.0 * 1024 * 1024));
	return gib < 1 ? 1 : gib;
}

static json_t *create_body(struct backend *b, struct daytona *D)
{
	const struct config *cfg = b->cfg;
	char owner[256];
	owner_of(getpid(), owner, sizeof owner);
	/* Stopped after this many idle minutes, then deleted (autoDeleteInterval 0): a server that
	 * dies without deleting its sandbox leaks nothing for long. Longer than --idle-timeout,
	 * which removes the sandbox itself while the server lives. */
	long stop_min = cfg->idle_timeout_s > 0 ? (long)ceil(cfg->idle_timeout_s / 60.0) + 5 : 60;
	if (stop_min > 24 * 60)
		stop_min = 24 * 60;
	json_t *body = json_pack("{s:{s:s, s:s, s:s, s:s}, s:i, s:i, s:b, s:{}}", "labels", LABEL, "1", OWNER_LABEL,
				 owner, ATTEMPT_LABEL, D->attempt, "code-toolbox-language", "python", "autoStopInterval", (int)stop_min,
				 "autoDeleteInterval", 0, "networkBlockAll", cfg->network != NET_ALL && !D->code_allow, "env");
	if (!body)
		return NULL;
	if (D->code_allow)
		json_object_set_new(body, "networkAllowList", json_string(D->code_allow));
	if (D->rest.target[0])
		json_object_set_new(body, "target", json_string(D->rest.target));
	if (D->snapshot[0]) {
		json_object_set_new(body, "snapshot", json_string(D->snapshot));
	} else if (D->image[0]) {
		/* Resources may be given only with an image (a snapshot fixes its own). */
		char df[300];
		snprintf(df, sizeof df, "FROM %s\n", D->image);

		json_object_set_new(body, "buildInfo", json_pack("{s:s}", "dockerfileContent", df));
		json_object_set_new(body, "cpu", json_integer((json_int_t)ceil(cfg->cpus)));
		json_object_set_new(body, "memory", json_integer(gib_up(cfg->memory)));
		/* The workspace's quota is the sandbox's disk. */
		if (cfg->workspace_size)
			json_object_set_new(body, "disk", json_integer(gib_up(cfg->workspace_size)));
	}
	return body;
}

/* Polls the sandbox until `started`: every 100 ms for 5 s, then 10% slower each time, at most
 * every second (the SDKs' schedule), until the deadline. */
static int wait_started(struct daytona *D, json_t **dto, int64_t deadline, struct err *e)
{
	char path[128];
	snprintf(path, sizeof path, "/sandbox/%s", D->id);
	int64_t t0 = clock_ms(), interval = 100;
	for (;;) {
		const char *st = json_str(*dto, "state");
		if (st && !strcmp(st, "started"))
			return 0;
		if (st && (!strcmp(st, "error") || !strcmp(st, "build_failed"))) {
			const char *why = json_str(*dto, "errorReason");
			return err_set(e, "the Daytona sandbox %s failed to start (%s)%s%s", D->id, st, why ? ": " : "",
				       why ? why : "");
		}
		if (st && (!strcmp(st, "destroyed") || !strcmp(st, "destroying")))
			return err_set(e, "the Daytona sandbox %s was %s while starting", D->id, st);
		int64_t now = clock_ms();
		if (now >= deadline)
			return err_set(e, "the Daytona sandbox %s did not start within %lld s (state: %s)", D->id,
				       (long long)((deadline - t0 + 999) / 1000), st ? st : "unknown");
		if (pause_ms(D, interval < deadline - now ? interval : deadline - now))
			return err_set(e, "cancelled");
		if (clock_ms() - t0 > 5000)
			interval = interval * 11 / 10 > 1000 ? 1000 : interval * 11 / 10;
		struct http_resp rs;
		if (api(D, "GET", path, NULL, API_TIMEOUT_MS, &rs, e) < 0)
			return err_set(e, "asking for the state of the Daytona sandbox");
		if (rs.status != 200 || !json_is_object(rs.json)) {
			rest_fail(&rs, "asking for the state of the Daytona sandbox", e);
			http_resp_free(&rs);
			return -1;
		}
		json_decref(*dto);
		*dto = json_incref(rs.json);
		http_resp_free(&rs);
	}
}

static int toolbox_url(struct daytona *D, const json_t *dto, struct err *e)
{
	const char *u = json_str(dto, "toolboxProxyUrl");
	struct http_resp rs = {0};
	if (!u || !*u) {
		char path[128];
		snprintf(path, sizeof path, "/sandbox/%s/toolbox-proxy-url", D->id);
		if (api(D, "GET", path, NULL, API_TIMEOUT_MS, &rs, e) < 0)
			return -1;
		if (rs.status != 200 || !(u = json_str(rs.json, "url"))) {
			rest_fail(&rs, "asking for the toolbox URL", e);
			http_resp_free(&rs);
			return -1;
		}
	}
	size_t n = strlen(u);
	while (n && u[n - 1] == '/')
		n--;
	int w = snprintf(D->tb, sizeof D->tb, "%.*s/%s", (int)n, u, D->id);
	http_resp_free(&rs);
	if (w < 0 || (size_t)w >= sizeof D->tb)
		return err_set(e, "the toolbox URL is too long");
	return 0;
}

/* The processes the sandbox has before any call: the toolbox daemon, the entrypoint, ... A
 * sweep spares them; everything else of the sandbox user is a call's and dies with it. */
static int take_baseline(struct daytona *D, struct err *e)
{
	struct buf c = {0};
	char *out = NULL;
	int code = -1;
	runner_cmd(&c, D->python, "procs");
	runner_end(&c, NULL, NULL, 0);
	runner_code_free(&D->code); /* this one sends the runner's source, which compiles it */
	int rc = c.oom ? err_set(e, "out of memory") : tb_exec(D, c.p, 30, SMALL_BODY, -1, &out, &code, e);
	free(c.p);
	if (rc < 0)
		return -1;
	/* The second line: the runner's code object, which later requests name. Without it (an
	 * answer cut short), they carry the source as before. */
	char *nl = strchr(out, '\n');
	if (nl && nl[1]) {
		if (code == 0 && runner_code_set(&D->code, nl + 1) < 0)
			log_msg(LOG_DEBUG, "daytona: no code object from the runner: requests carry its source");
		nl[1] = '\0';
	}
	size_t n = strlen(out);
	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
		out[--n] = '\0';
	if (code != 0 || !n || strspn(out, "0123456789:,") != n || n > 64 * 1024) {
		rc = err_set(e, "preparing the Daytona sandbox: listing its processes failed: %.300s", out);
		free(out);
		return rc;
	}
	free(D->baseline);
	D->baseline = out;
	return 0;
}

/* --mount on Daytona: a cloud sandbox cannot see a host folder, so each one is copied in
 * when the sandbox is made (bounded), before any code runs there: the files go straight to
 * their places, where nothing can have been planted yet. Changes stay in the sandbox. */
#define MOUNT_FILES_MAX 2000
#define MOUNT_BYTES_MAX (64ull << 20)
#define MOUNT_BATCH_BYTES (8u << 20)
#define MOUNT_BATCH_FILES 256

/* Uploads parts in one bulk request (what: what they are, for an error). 0, or -1 /
 * BACKEND_LOST. */
static int put_parts(struct daytona *D, const struct rest_file *parts, size_t n, const char *what, struct err *e)
{
	struct http_resp rs;
	if (tbx(D, "POST", "/files/bulk-upload", NULL, parts, n, 120000, SMALL_BODY, &rs, e) < 0)
		return lost_or_failed(D, e);
	int rc = 0;
	if (rs.status != 200) {
		char msg[128];
		snprintf(msg, sizeof msg, "copying %s into the Daytona sandbox", what);
		rc = rest_fail(&rs, msg, e);
	}
	http_resp_free(&rs);
	return rc;
}

static int upload_mount(struct daytona *D, const struct mountspec *m, size_t i, size_t *files, uint64_t *bytes,
			struct err *e)
{
	struct hosttree t;
	struct err te = {""};
	if (hosttree_read(m->host, m->dev, m->ino, MOUNT_FILES_MAX - *files, MOUNT_BYTES_MAX - *bytes, &t, &te) < 0)
		return err_set(e, "--mount %s: %s (Daytona copies mounts in when it makes the sandbox, at most %d files "
				  "and %llu MiB in all)", m->inside, te.msg, MOUNT_FILES_MAX, MOUNT_BYTES_MAX >> 20);
	struct rest_file *parts = calloc(t.n ? t.n : 1, sizeof *parts);
	char **paths = calloc(t.n ? t.n : 1, sizeof *paths);
	int rc = parts && paths ? 0 : err_set(e, "out of memory");
	size_t n = 0, skipped = t.skipped, from = 0;
	uint64_t batch = 0;
	for (size_t k = 0; rc == 0 && k < t.n; k++) {
		if (!rest_name_ok(t.v[k].rel)) {
			skipped++;
			continue;
		}
		if (asprintf(&paths[n], "%s/%s", m->inside, t.v[k].rel) < 0) {
			paths[n] = NULL;
			rc = err_set(e, "out of memory");
			break;
		}
		parts[n] = (struct rest_file){paths[n], t.v[k].data, t.v[k].len};
		batch += t.v[k].len;
		if (++n - from >= MOUNT_BATCH_FILES || batch >= MOUNT_BATCH_BYTES) {
			rc = put_parts(D, parts + from, n - from, "a --mount folder", e);
			from = n;
			batch = 0;
		}
	}
	if (rc == 0 && n > from)
		rc = put_parts(D, parts + from, n - from, "a --mount folder", e);
	D->mounts[i] = (struct mount_copy){n, 0, skipped};
	for (size_t k = 0; k < n; k++)
		D->mounts[i].bytes += parts[k].len;
	*files += n;
	*bytes += D->mounts[i].bytes;
	for (size_t k = 0; paths && k < n; k++)
		free(paths[k]);
	free(paths);
	free(parts);
	hosttree_free(&t);
	return rc;
}

/* Copies every --mount folder in, then makes the read-only ones so by their files' modes. */
static int upload_mounts(struct backend *b, struct err *e)
{
	struct daytona *D = b->priv;
	const struct config *cfg = b->cfg;
	size_t files = 0;
	uint64_t bytes = 0;
	struct buf c = {0};
	for (size_t i = 0; i < cfg->mounts.n; i++) {
		int rc = upload_mount(D, &cfg->mounts.v[i], i, &files, &bytes, e);
		if (rc) {
			buf_free(&c);
			return rc;
		}
		if (!cfg->mounts.v[i].rw)
			buf_fmt(&c, "%schmod -R a-w %s", c.len ? " && " : "", cfg->mounts.v[i].inside);
	}
	if (!c.len)
		return 0;
	char *out = NULL;
	int code = -1;
	int rc = c.oom ? err_set(e, "out of memory") : tb_exec(D, c.p, 60, SMALL_BODY, -1, &out, &code, e);
	if (rc == 0 && code != 0)
		rc = err_set(e, "making the --mount copies read-only: %.300s", out && *out ? out : "failed");
	free(out);
	free(c.p);
	return rc;
}

/* ---------------------------------------------------------------- --workspace (wssync.h) */

static int ws_upload(void *ctx, const struct rest_file *parts, size_t n, struct err *e)
{
	return put_parts(ctx, parts, n, "the --workspace folder", e);
}

static int ws_download(void *ctx, const char *const *paths, size_t n, size_t max_body, char **body, size_t *len,
		       struct err *e)
{
	struct daytona *D = ctx;
	json_t *list = json_array(), *req = json_pack("{s:o}", "paths", list);
	for (size_t i = 0; list && i < n; i++)
		json_array_append_new(list, json_string(paths[i]));
	struct http_resp rs;
	int rc = req ? tbx(D, "POST", "/files/bulk-download", req, NULL, 0, 300000, max_body, &rs, e)
		     : err_set(e, "out of memory");
	json_decref(req);
	if (rc < 0) {
		http_resp_free(&rs);
		return req ? lost_or_failed(D, e) : -1;
	}
	if (rs.status != 200) {
		rest_fail(&rs, "downloading files from the Daytona sandbox", e);
		http_resp_free(&rs);
		return lost_or_failed(D, e);
	}
	*body = rs.body;
	*len = rs.len;
	rs.body = NULL;
	http_resp_free(&rs);
	return 0;
}

static int ws_exec(void *ctx, const char *cmd, int timeout_s, char **out, int *code, struct err *e)
{
	return tb_exec(ctx, cmd, timeout_s, SMALL_BODY, -1, out, code, e);
}

static int fresh_dir(char *dir, size_t n, const char *prefix, struct err *e);

/* Takes --workspace DIR (wsdir.h's rules) before the sandbox is made: a folder that may not be
 * taken costs no sandbox. The runner keeps its listings in a fresh folder of its own. */
static int take_workspace(struct daytona *D, const char *path, struct err *e)
{
	char state[128];
	if (fresh_dir(state, sizeof state, "", e) < 0)
		return -1;
	D->io = (struct wssync_io){.upload = ws_upload, .download = ws_download, .exec = ws_exec, .ctx = D,
				   .python = D->python};
	return wssync_take(&D->ws, path, state, e);
}

/* Makes the sandbox (see daytona_start). */
static int make_sandbox(struct backend *b, struct err *e)
{
	struct daytona *D = b->priv;
	int64_t deadline = clock_ms() + start_timeout_ms(b);
	json_t *body = create_body(b, D);
	if (!body)
		return err_set(e, "out of memory");
	struct http_resp rs;
	struct err he = {""};
	/* Never sent twice: a create whose answer is lost may have made a sandbox, which is found
	 * by its attempt label instead (forget_attempt). */
	D->create_sent = true;
	int rc = api_req(D, "POST", "/sandbox", body, CREATE_TIMEOUT_MS, true, &rs, &he);
	json_decref(body);
	if (rc < 0)
		return err_set(e, "creating a Daytona sandbox: %s", he.msg);
	const char *id = json_str(rs.json, "id");
	if ((rs.status != 200 && rs.status != 201) || !id || !*id || strlen(id) >= sizeof D->id ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(id)) {
		if (rs.status == 200 || rs.status == 201)
			err_set(e, "creating a Daytona sandbox: the answer has no usable id");
		else
			rest_fail(&rs, "creating a Daytona sandbox", e);
		http_resp_free(&rs);
		return -1;
	}
	snprintf(D->id, sizeof D->id, "%s", id);
	snprintf(b->sandbox_id, sizeof b->sandbox_id, "%s", id);
	json_t *dto = json_incref(rs.json);
	http_resp_free(&rs);
	json_t *disk = json_object_get(dto, "disk");
	D->disk_gib = json_is_integer(disk) ? (long)json_integer_value(disk) : 0;
	log_msg(LOG_INFO, "Daytona sandbox %s created; waiting for it to start", D->id);
	rc = wait_started(D, &dto, deadline, e);
	if (rc == 0)
		rc = toolbox_url(D, dto, e);
	json_decref(dto);
	if (rc < 0)
		return -1;
	/* The workspace is /workspace on every backend; images run as an unprivileged user that
	 * usually has sudo (Daytona's own do), which is needed once to make the folder. */
	struct buf cmd = {0};
	/* So are the --mount folders' places (plain names under /mnt: see mountspec.h). */
	for (size_t i = 0; i <= b->cfg->mounts.n; i++) {
		const char *d = i == 0 ? WORKSPACE : b->cfg->mounts.v[i - 1].inside;
		buf_fmt(&cmd, "mkdir -p %s 2>/dev/null || sudo -n sh -c 'mkdir -p %s && chown \"$1\" %s' sh \"$(id -u):$(id -g)\";"
			     " [ -w %s ] || sudo -n chown \"$(id -u):$(id -g)\" %s 2>/dev/null;"
			     " [ -w %s ] || { echo \"no writable %s for user $(id -un) (and no sudo)\"; exit 1; }; ",
		       d, d, d, d, d, d, d);
	}
	buf_add(&cmd, "command -v", 10);
	runner_word(&cmd, b->cfg->python);
	buf_fmt(&cmd, " >/dev/null || { echo \"the image has no %s, which the backend needs\"; exit 1; }",
	       strchr(b->cfg->python, '\'') ? "python" : b->cfg->python);
	if (cmd.oom) {
		free(cmd.p);
		return err_set(e, "out of memory");
	}
	char *out = NULL;
	int code = -1;
	rc = tb_exec(D, cmd.p, 60, SMALL_BODY, -1, &out, &code, e);
	free(cmd.p);
	if (rc == 0 && code != 0) {
		size_t n = out ? strlen(out) : 0;
		while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
			out[--n] = '\0';
		rc = err_set(e, "preparing the Daytona sandbox: %s", out && *out ? out : "the setup command failed");
	}
	free(out);
	if (rc != 0)
		return -1;
	if (take_baseline(D, e) < 0 || upload_mounts(b, e) < 0 || (D->ws.fd >= 0 && wsseed_run(&D->ws, &D->io, e) != 0))
		return -1;
	log_msg(LOG_INFO, "Daytona sandbox %s started (%s)", D->id,
		D->snapshot[0] ? D->snapshot : D->image[0] ? D->image : "the default snapshot");
	return 0;
}

static int delete_sandbox(struct rest *h, const char *id, long timeout_ms, int tries, struct err *e);

/*
 * Deletes what a making that failed may have left, when its create got no usable answer (an
 * error after the service made the sandbox, a malformed or cut answer, a reset): whatever
 * carries this attempt's label, listed again after each round until none is left; a delete
 * refused while the sandbox is still being made (409) is tried again in the next round. Until
 * `until` (monotonic ms); when cancel_fd turns readable, one more round of at most 700 ms.
 * 0 once a list shows none left.
 */
static int forget_attempt(struct daytona *D, int64_t until, int cancel_fd)
{
	char *lab = NULL, path[256], filter[128];
	snprintf(filter, sizeof filter, "{\"" ATTEMPT_LABEL "\":\"%s\"}", D->attempt);
	lab = http_escape(filter);
	if (!lab)
		return -1;
	snprintf(path, sizeof path, "/sandbox?limit=10&labels=%s", lab);
	free(lab);
	int saved = D->rest.http.cancel_fd;
	D->rest.http.cancel_fd = -1; /* the cleanup goes on when the making is cancelled, bounded */
	int rc = -1;
	for (int round = 0;; round++) {
		if (cancel_fd >= 0 && poll(&(struct pollfd){cancel_fd, POLLIN, 0}, 1, 0) > 0) {
			cancel_fd = -1;
			if (until > clock_ms() + 700)
				until = clock_ms() + 700;
		}
		int64_t left = until - clock_ms();
		if (left <= 0)
			break;
		struct http_resp rs;
		struct err e = {""};
		size_t live = 0;
		if (api(D, "GET", path, NULL, left < API_TIMEOUT_MS ? (long)left : API_TIMEOUT_MS, &rs, &e) == 0 &&
		    rs.status == 200) {
			json_t *items = json_is_array(rs.json) ? rs.json : json_object_get(rs.json, "items");
			size_t i;
			json_t *it;
			json_array_foreach(items, i, it) {
				const char *id = json_str(it, "id"), *st = json_str(it, "state");
				if (!id || strlen(id) >= 100 || (st && (!strcmp(st, "destroyed") || !strcmp(st, "destroying"))))
					continue;
				live++;
				left = until - clock_ms();
				if (left > 0 && delete_sandbox(&D->rest, id, left < 10000 ? (long)left : 10000, 1, &e) == 0)
					log_msg(LOG_INFO, "deleted Daytona sandbox %s, made by a create whose answer was lost", id);
				else if (round == 0)
					log_msg(LOG_DEBUG, "daytona: deleting %s, made by a create whose answer was lost: %s", id, e.msg);
			}
			if (!live) {
				http_resp_free(&rs);
				rc = 0;
				break;
			}
		}
		http_resp_free(&rs);
		left = until - clock_ms();
		sleep_ms(left < 500 ? left : 500);
	}
	D->rest.http.cancel_fd = saved;
	if (rc < 0)
		log_msg(LOG_WARNING, "a Daytona sandbox made by a create whose answer was lost may be left (label %s=%s); "
				     "this server deletes it at its next start, or Daytona once it is idle", ATTEMPT_LABEL, D->attempt);
	return rc;
}

/* Deletes the sandboxes this very server made and no longer has: a create cut short before
 * its answer came may still have made one, after the fact. Bounded, best effort. */
static void forget_own_leftovers(struct daytona *D)
{
	char owner[256], filter[400], path[600];
	owner_of(getpid(), owner, sizeof owner);
	snprintf(filter, sizeof filter, "{\"" OWNER_LABEL "\":\"%s\"}", owner);
	char *lab = http_escape(filter);
	snprintf(path, sizeof path, "/sandbox?limit=20&labels=%s", lab ? lab : "");
	free(lab);
	struct http_resp rs;
	struct err e = {""};
	if (api(D, "GET", path, NULL, 2000, &rs, &e) == 0 && rs.status == 200) {
		json_t *items = json_is_array(rs.json) ? rs.json : json_object_get(rs.json, "items");
		size_t i;
		json_t *it;
		json_array_foreach(items, i, it) {
			const char *id = json_str(it, "id");
			if (id && strlen(id) < 100 && delete_sandbox(&D->rest, id, 2000, 1, &e) == 0)
				log_msg(LOG_INFO, "deleted Daytona sandbox %s, made by a create of this server that was cut short", id);
		}
	}
	http_resp_free(&rs);
}

/* Creating and starting a sandbox can take a minute: every request and wait of it watches
 * cancel_fd, and a cancelled making leaves nothing behind. */
static char *code_allow_list(const struct netpolicy *pol, struct err *e);

static int daytona_start(struct backend *b, int cancel_fd, struct err *e)
{
	struct daytona *D = b->priv;
	D->python = b->cfg->python;
	/* The names resolved now, when the sandbox is made: Daytona's rule is by address. */
	free(D->code_allow);
	D->code_allow = NULL;
	if (b->cfg->allow_hosts[0] && b->cfg->network == NET_INSTALL) {
		struct netpolicy pol;
		if (netpolicy_parse_allow(&pol, b->cfg->allow_hosts, e) < 0 || !(D->code_allow = code_allow_list(&pol, e)))
			return -1;
		log_msg(LOG_INFO, "daytona: --allow-hosts %s is the addresses %s", b->cfg->allow_hosts, D->code_allow);
	}
	if (dt_open(D, e) < 0)
		return -1;
	unsigned char r[8];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return err_sys(e, "getrandom");
	snprintf(D->attempt, sizeof D->attempt, "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
		 r[5], r[6], r[7]);
	D->lost[0] = '\0';
	if (b->cfg->workspace_dir[0] && take_workspace(D, b->cfg->workspace_dir, e) < 0)
		return -1;
	D->rest.http.cancel_fd = cancel_fd;
	forget_own_leftovers(D);
	D->create_sent = false;
	int rc = make_sandbox(b, e);
	bool cancelled = rc < 0 && (D->rest.http.cancelled ||
				    (cancel_fd >= 0 && poll(&(struct pollfd){cancel_fd, POLLIN, 0}, 1, 0) > 0));
	D->rest.http.cancel_fd = -1;
	/* A sandbox with an id is deleted by the destroy that follows a failed start. */
	if (rc < 0 && D->create_sent && !D->id[0])
		forget_attempt(D, clock_ms() + (cancelled ? 700 : FORGET_MS), cancelled ? -1 : cancel_fd);
	return cancelled ? BACKEND_CANCELLED : rc;
}

/* ---------------------------------------------------------------- run */

/*
 * The addresses the install step may reach, as Daytona's allow list takes them (CIDRs): those
 * the index hosts resolve to here, each checked as the proxy checks it (proxy.h). Caller frees;
 * NULL with e set when none can be had.
 */
static char *addr_list(const struct netpolicy *p)
{
	const struct netpolicy pol = *p;
	struct buf out = {0};
	for (size_t h = 0; h < pol.nhosts; h++) {
		struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
		if (getaddrinfo(pol.hosts[h], NULL, &hints, &res) != 0)
			continue;
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			char a[INET_ADDRSTRLEN];
			const struct sockaddr_in *in = (const struct sockaddr_in *)ai->ai_addr;
			if (!netpolicy_addr_allowed(&pol, pol.hosts[h], ai->ai_addr) ||
			    !inet_ntop(AF_INET, &in->sin_addr, a, sizeof a))
				continue;
			char cidr[32];
			snprintf(cidr, sizeof cidr, "%s/32", a);
			if (out.p && strstr(out.p, cidr))
				continue;
			if (out.len)
				buf_add(&out, ",", 1);
			buf_add(&out, cidr, strlen(cidr));
		}
		freeaddrinfo(res);
	}
	if (out.oom || !out.len) {
		free(out.p);
		return NULL;
	}
	return out.p;
}

static char *index_allow_list(const struct config *cfg, struct err *e)
{
	struct netpolicy pol;
	if (netpolicy_for_index(&pol, cfg->index_url, cfg->index_hosts, e) < 0)
		return NULL;
	char *l = addr_list(&pol);
	if (!l)
		err_set(e, "none of the package index hosts (%s...) resolves to an address the install step may reach",
			pol.hosts[0]);
	return l;
}

/* Why --allow-hosts cannot be applied on Daytona (a wildcard names no address), or NULL. */
static const char *allow_problem(const struct netpolicy *pol, char *buf, size_t n)
{
	for (size_t i = 0; i < pol->nhosts; i++)
		if (pol->wild[i]) {
			snprintf(buf, n, "--allow-hosts: '*.%s': Daytona allows a sandbox's network by address "
				 "(networkAllowList), and a wildcard names no address to resolve: list the names", pol->hosts[i]);
			return buf;
		}
	return NULL;
}

/* The code's allow list (the CIDRs of the hosts a policy names), or NULL with e set. */
static char *code_allow_list(const struct netpolicy *pol, struct err *e)
{
	char why[400];
	if (allow_problem(pol, why, sizeof why))
		return err_set(e, "%s", why), NULL;
	char *l = addr_list(pol);
	if (!l)
		err_set(e, "none of the --allow-hosts hosts resolves to an address the code may reach");
	return l;
}

/* Blocks the sandbox's network, or opens it to `allow` (CIDRs) alone. */
static int set_network(struct daytona *D, bool block, const char *allow, struct err *e)
{
	char path[128];
	snprintf(path, sizeof path, "/sandbox/%s/network-settings", D->id);
	json_t *body = block ? json_pack("{s:b}", "networkBlockAll", 1)
			     : json_pack("{s:b, s:s}", "networkBlockAll", 0, "networkAllowList", allow);
	struct http_resp rs;
	int rc = body ? api(D, "POST", path, body, API_TIMEOUT_MS, &rs, e) : err_set(e, "out of memory");
	json_decref(body);
	if (rc < 0)
		return -1;
	if (rs.status != 200 && rs.status != 201)
		rc = rest_fail(&rs, block ? "blocking the sandbox's network again" : "opening the network for the install",
				  e);
	http_resp_free(&rs);
	return rc;
}

/* A fresh folder name: RUN_DIR/<prefix><128 random bits>. A call's folder (prefix "call-")
 * holds its state and uploads; the runner removes it at the next call's start. */
static int fresh_dir(char *dir, size_t n, const char *prefix, struct err *e)
{
	unsigned char r[16];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return err_sys(e, "getrandom");
	int o = snprintf(dir, n, "%s/%s", RUN_DIR, prefix);
	for (size_t i = 0; i < sizeof r && o > 0 && (size_t)o + 2 < n; i++)
		o += snprintf(dir + o, n - (size_t)o, "%02x", r[i]);
	return 0;
}

/* Whether an answer of the toolbox daemon says its disk is full ("no space left on device"). */
static bool says_full(const char *body)
{
	const char *w = "no space left on device";
	for (const char *p = body; p && *p; p++)
		if (!strncasecmp(p, w, strlen(w)))
			return true;
	return false;
}

/* Uploads the files into dir (as put-N, for the runner to put in place). */
static int upload(struct daytona *D, const struct run_file *files, size_t nfiles, const char *dir, struct err *e)
{
	struct rest_file *parts = calloc(nfiles ? nfiles : 1, sizeof *parts);
	char(*names)[160] = calloc(nfiles ? nfiles : 1, sizeof *names);
	if (!parts || !names) {
		free(parts);
		free(names);
		return err_set(e, "out of memory");
	}
	for (size_t i = 0; i < nfiles; i++) {
		snprintf(names[i], sizeof names[i], "%s/put-%zu", dir, i);
		parts[i] = (struct rest_file){names[i], files[i].data, files[i].len};
	}
	struct http_resp rs;
	int rc = tbx(D, "POST", "/files/bulk-upload", NULL, parts, nfiles, 120000, SMALL_BODY, &rs, e);
	free(parts);
	free(names);
	if (rc < 0)
		return lost_or_failed(D, e);
	if (rs.status != 200) {
		rest_fail(&rs, "uploading files into the Daytona sandbox", e);
		if (says_full(rs.body)) {
			/* The daemon's words (Go's): said as the other backends say it. */
			err_clear(e);
			err_set(e, "uploading files into the Daytona sandbox: %s (its disk is full)", strerror(ENOSPC));
		}
		http_resp_free(&rs);
		return lost_or_failed(D, e);
	}
	http_resp_free(&rs);
	return 0;
}

static int call_exec(void *ctx, const char *cmd, int timeout_s, size_t max_body, int cancel_fd, char **out, int *code,
		     struct err *e)
{
	return tb_exec(ctx, cmd, timeout_s, max_body, cancel_fd, out, code, e);
}

/* What the call changed goes to the --workspace folder, whatever became of the call; the
 * result's notice says what was left out (and, for the sandbox's first call, what its copy of
 * the folder left out). A sandbox found gone on the way is dropped before the next call. */
static void sync_back(struct daytona *D, json_t *ws, struct run_res *rs)
{
	char note[440] = "";
	struct err we = {""};
	if (ws && wssync_apply(&D->ws, ws, &D->io, note, sizeof note, &we) == BACKEND_LOST)
		snprintf(D->lost, sizeof D->lost, "%s", we.msg);
	snprintf(rs->notice, sizeof rs->notice, "%s%s%s", D->ws.pending, D->ws.pending[0] && note[0] ? " " : "", note);
	D->ws.pending[0] = '\0';
}

/* What a sweep spares (runner.h's KEEP): the sandbox's own processes, and every running
 * background process with all its descendants, until its timeout and grace have passed.
 * Caller frees; NULL when out of memory. */
static char *keep_word(struct daytona *D)
{
	struct buf k = {0};
	buf_str(&k, D->baseline ? D->baseline : "");
	int64_t now = clock_ms();
	pthread_mutex_lock(&D->bg_mu);
	for (unsigned i = 0; i < BG_SLOTS; i++)
		if (D->bg[i].id && D->bg[i].running && D->bg[i].keeper[0] && now < D->bg[i].deadline_ms)
			buf_fmt(&k, ",+%s", D->bg[i].keeper);
	pthread_mutex_unlock(&D->bg_mu);
	if (!k.p)
		buf_str(&k, "");
	return buf_take(&k, NULL);
}

static unsigned bg_running(struct daytona *D)
{
	unsigned n = 0;
	for (unsigned i = 0; i < BG_SLOTS; i++)
		n += D->bg[i].id && D->bg[i].running;
	return n;
}

/* The ended ones past BG_ENDED go, oldest first. Holding bg_mu. */
static void bg_trim(struct daytona *D)
{
	for (;;) {
		unsigned n = 0;
		struct dt_bg *old = NULL;
		for (unsigned i = 0; i < BG_SLOTS; i++) {
			if (!D->bg[i].id || D->bg[i].running)
				continue;
			n++;
			if (!old || D->bg[i].ended_seq < old->ended_seq)
				old = &D->bg[i];
		}
		if (n <= BG_ENDED)
			return;
		memset(old, 0, sizeof *old);
	}
}

/* Takes a call that went on as a background process: its id (0: no room, cannot happen as
 * the run was refused when too many ran). */
static unsigned bg_adopt(struct daytona *D, const struct run_req *rq, const char *dir, const struct dtcall_bg *bg,
			 int64_t started_ns, int64_t start_ms, const uint64_t bytes[2])
{
	pthread_mutex_lock(&D->bg_mu);
	struct dt_bg *s = NULL;
	for (unsigned i = 0; i < BG_SLOTS && !s; i++)
		if (!D->bg[i].id)
			s = &D->bg[i];
	if (!s) {
		for (unsigned i = 0; i < BG_SLOTS; i++)
			if (!D->bg[i].running && (!s || D->bg[i].ended_seq < s->ended_seq))
				s = &D->bg[i];
	}
	unsigned id = 0;
	if (s) {
		memset(s, 0, sizeof *s);
		s->id = id = ++D->bg_next;
		s->running = true;
		snprintf(s->dir, sizeof s->dir, "%s", dir);
		snprintf(s->keeper, sizeof s->keeper, "%s", bg->keeper);
		snprintf(s->label, sizeof s->label, "%s", rq->bg_label ? rq->bg_label : "");
		snprintf(s->prefix, sizeof s->prefix, "%s", rq->spill_prefix ? rq->spill_prefix : "");
		s->started_ns = started_ns;
		s->start_ms = start_ms;
		uint64_t t = rq->bg_timeout_ms > (uint64_t)1 << 40 ? (uint64_t)1 << 40 : rq->bg_timeout_ms;
		s->deadline_ms = start_ms + (int64_t)t + BG_GRACE_MS;
		s->cap = rq->cap;
		for (int i = 0; i < 2; i++) /* what the call's result had is read */
			s->off[i] = s->bytes[i] = bytes[i];
	}
	pthread_mutex_unlock(&D->bg_mu);
	return id;
}

static int daytona_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	struct daytona *D = b->priv;
	if (!D->id[0] || !D->open)
		return err_set(e, "the Daytona sandbox is gone"), BACKEND_LOST;
	char dir[128], word[300];
	if (rq->background) {
		pthread_mutex_lock(&D->bg_mu);
		unsigned live = bg_running(D), max = rq->bg_max < BG_LIVE ? rq->bg_max : BG_LIVE;
		pthread_mutex_unlock(&D->bg_mu);
		if (live >= max)
			return err_set(e, "at most %u background processes may run at once: end one first (process with "
					  "signal)", max);
	}
	/* A background process's folder is not a call's: the next call's go leaves it be. */
	if (fresh_dir(dir, sizeof dir, rq->background ? "bg-" : "call-", e) < 0)
		return -1;
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t started_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec, start_ms = clock_ms();
	struct dtcall_bg bg = {.until_ms = start_ms + (rq->bg_wait_ms > 0 ? rq->bg_wait_ms : 0)};
	char *keep = keep_word(D);
	if (!keep)
		return err_set(e, "out of memory");
	size_t size = 0;
	for (size_t i = 0; i < rq->nfiles; i++)
		size += rq->files[i].len;
	json_t *ws = NULL;
	struct dtcall_req cr = {.python = D->python, .keep = keep, .dir = dir, .uploaded = size > INLINE_MAX,
				.spill_max = b->cfg->spill_max, .bg = rq->background ? &bg : NULL};
	forget_out(D);
	if (rq->changes_in && rq->changes_list_max == OUT_LIST && rq->changes_file_max <= OUT_FILE_MAX &&
	    strlen(rq->changes_in) < sizeof D->out_dir) {
		snprintf(D->out_dir, sizeof D->out_dir, "%s", rq->changes_in);
		cr.out = &D->out;
	}
	if (D->ws.fd >= 0) {
		wssync_word(&D->ws, word, sizeof word);
		cr.sync = word;
		cr.ws = &ws;
		cr.ws_body = WS_BODY;
	}
	/* The install step alone may reach the network (--network install); a call narrowing
	 * --allow-hosts gets the addresses of what it names (none: blocked). */
	bool opened = rq->network && b->cfg->network == NET_INSTALL;
	bool narrowed = !rq->network && rq->allow && D->code_allow;
	char *allow = NULL;
	if (opened) {
		allow = index_allow_list(b->cfg, e);
	} else if (narrowed && strcmp(rq->allow, "none")) {
		struct netpolicy all, sub;
		if (netpolicy_parse_allow(&all, b->cfg->allow_hosts, e) == 0 && netpolicy_narrow(&sub, &all, rq->allow, e) == 0)
			allow = code_allow_list(&sub, e);
	}
	if ((opened || (narrowed && strcmp(rq->allow, "none"))) && !allow) {
		free(keep);
		return -1;
	}
	if ((opened || narrowed) && set_network(D, !allow, allow, e) < 0) {
		free(allow);
		free(keep);
		return -1;
	}
	free(allow);
	opened = opened || narrowed;
	int rc = cr.uploaded ? upload(D, rq->files, rq->nfiles, dir, e) : 0;
	if (rc == 0) {
		struct dtcall_exec x = {call_exec, D};
		rc = dtcall_run(&x, &cr, rq, rs, e);
	}
	free(keep);
	if (rc == 0 && bg.detached) {
		rs->started_ns = started_ns;
		if (!(rs->bg_id = bg_adopt(D, rq, dir, &bg, started_ns, start_ms, rs->bytes)))
			rc = err_set(e, "no room for another background process");
	}
	if (opened) {
		struct err ne = {""};
		if (set_network(D, !D->code_allow, D->code_allow, &ne) < 0) {
			/* The code must not get the network the install had: drop this sandbox. */
			err_clear(e);
			err_set(e, "%s; the sandbox is dropped", ne.msg);
			rc = BACKEND_LOST;
		}
	}
	if (D->ws.fd >= 0)
		sync_back(D, ws, rs);
	json_decref(ws);
	return rc;
}

static int daytona_put(struct backend *b, const struct run_file *f, struct err *e)
{
	struct daytona *D = b->priv;
	forget_out(D);
	if (!D->id[0] || !D->open)
		return err_set(e, "the Daytona sandbox is gone"), BACKEND_LOST;
	char dir[128], tail[200] = "";
	bool up = f->len > INLINE_MAX;
	int rc = up ? fresh_dir(dir, sizeof dir, "", e) : 0;
	if (rc == 0 && up)
		rc = upload(D, f, 1, dir, e);
	if (rc)
		return rc;
	/* The runner puts it in place (see RUN_DIR); an uploaded copy's folder goes after. */
	struct buf c = {0};
	runner_cmd(&c, D->python, "put");
	if (up) {
		buf_fmt(&c, " %s/put-0", dir);
		snprintf(tail, sizeof tail, "; r=$?; rm -rf %s; exit $r", dir);
	} else {
		buf_str(&c, " -");
	}
	runner_word(&c, f->path);
	buf_fmt(&c, " %o", f->mode & 07777);
	runner_end(&c, up ? tail : NULL, f, up ? 0 : 1);
	char *out = NULL;
	int code = -1;
	rc = c.oom ? err_set(e, "out of memory") : tb_exec(D, c.p, 60, SMALL_BODY, -1, &out, &code, e);
	free(c.p);
	if (rc == 0 && code != 0)
		rc = err_set(e, "writing %s in the Daytona sandbox: %.300s", f->path, out && *out ? out : "failed");
	free(out);
	return rc;
}

/* Runs the runner's `VERB PATH MAX [SKIP]` and parses the one JSON line it prints. 0 with *out
 * (new ref), or -1 / BACKEND_LOST. */
static int runner_query(struct daytona *D, const char *verb, const char *path, uint64_t max, const char *skip,
			size_t max_body, json_t **out, struct err *e)
{
	*out = NULL;
	if (!D->id[0] || !D->open)
		return err_set(e, "the Daytona sandbox is gone"), BACKEND_LOST;
	struct buf c = {0};
	runner_cmd(&c, D->python, verb);
	runner_word(&c, path);
	buf_fmt(&c, " %llu", (unsigned long long)max);
	if (skip)
		runner_word(&c, skip);
	runner_end(&c, NULL, NULL, 0);
	char *res = NULL;
	int code = -1;
	int rc = c.oom ? err_set(e, "out of memory") : tb_exec(D, c.p, 60, max_body, -1, &res, &code, e);
	free(c.p);
	if (rc == 0) {
		*out = code == 0 ? json_loads(res, 0, NULL) : NULL;
		if (!json_is_object(*out)) {
			json_decref(*out);
			*out = NULL;
			rc = err_set(e, "the call runner in the sandbox failed: %.300s", res && *res ? res : "no answer");
		}
	}
	free(res);
	return rc;
}

/* A listing as the runner answers one (j) into out (at most max names). 0, or -1 with e. */
static int list_from(const json_t *j, size_t max, struct ws_list *out, struct err *e)
{
	json_t *v = json_object_get(j, "entries");
	size_t n = json_array_size(v);
	out->v = calloc(n ? n : 1, sizeof *out->v);
	if (!out->v || n > max) {
		free(out->v);
		out->v = NULL;
		return err_set(e, n > max ? "the call runner listed too much" : "out of memory");
	}
	out->truncated = json_is_true(json_object_get(j, "truncated"));
	out->skipped = json_is_true(json_object_get(j, "skipped"));
	for (size_t i = 0; i < n; i++) {
		json_t *en = json_array_get(v, i);
		const char *p64 = json_string_value(json_array_get(en, 0));
		size_t pl = p64 ? strlen(p64) : 0;
		char *p = pl ? malloc(pl / 4 * 3 + 4) : NULL;
		long got = p ? b64_decode(p64, pl, (unsigned char *)p) : -1;
		if (got <= 0 || memchr(p, 0, (size_t)got)) {
			free(p);
			continue; /* nothing the runner would send */
		}
		p[got] = '\0';
		struct ws_entry *w = &out->v[out->n++];
		w->path = p;
		w->size = (uint64_t)json_integer_value(json_array_get(en, 1));
		w->mtime_ns = json_integer_value(json_array_get(en, 2));
		w->ctime_ns = json_integer_value(json_array_get(en, 3));
		w->mode = (unsigned)json_integer_value(json_array_get(en, 4));
	}
	return 0;
}

/* A file as the runner's get answers one (j, read with at most max bytes) into out. 0, or -1. */
static int file_from(const json_t *j, size_t max, struct ws_file *out, struct err *e)
{
	out->err = (int)json_integer_value(json_object_get(j, "err"));
	out->mode = (unsigned)json_integer_value(json_object_get(j, "mode"));
	json_int_t size = json_integer_value(json_object_get(j, "size"));
	out->size = size > 0 ? (uint64_t)size : 0;
	const char *d = json_str(j, "data");
	size_t dl = d ? strlen(d) : 0;
	out->data = malloc(dl / 4 * 3 + 4);
	long got = out->data ? b64_decode(d ? d : "", dl, out->data) : -1;
	if (got < 0 || (size_t)got > max) {
		bool oom = !out->data;
		ws_file_free(out);
		return err_set(e, oom ? "out of memory" : "the call runner sent a malformed file");
	}
	out->len = (size_t)got;
	out->data[out->len] = '\0';
	return 0;
}

static void forget_out(struct daytona *D)
{
	json_decref(D->out);
	D->out = NULL;
	D->out_dir[0] = '\0';
}

/* The answer to get path max from the last call's "out": 1 with *out set, 0 when it does not
 * hold it (or holds less than max of a longer file), -1 with e. */
static int cached_get(struct daytona *D, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	size_t dl = strlen(D->out_dir);
	if (!D->out || strncmp(path, D->out_dir, dl) || path[dl] != '/')
		return 0;
	json_t *files = json_object_get(D->out, "files"), *f;
	size_t i;
	json_array_foreach(files, i, f) {
		const char *n64 = json_string_value(json_array_get(f, 0));
		size_t nl = n64 ? strlen(n64) : 0;
		unsigned char *name = malloc(nl / 4 * 3 + 4);
		long got = name && n64 ? b64_decode(n64, nl, name) : -1;
		bool same = got > 0 && strlen(path + dl + 1) == (size_t)got && !memcmp(path + dl + 1, name, (size_t)got);
		free(name);
		if (!same)
			continue;
		if (file_from(json_array_get(f, 1), OUT_FILE_MAX, out, e) < 0)
			return -1;
		if (out->len != out->size && max > out->len) {
			ws_file_free(out);
			*out = (struct ws_file){0};
			return 0;
		}
		if (out->len > max)
			out->len = max;
		out->data[out->len] = '\0';
		return 1;
	}
	return 0;
}

static int daytona_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	struct daytona *D = b->priv;
	*out = (struct ws_list){0};
	if (D->out && (!skip || !*skip) && max == OUT_LIST && !strcmp(dir, D->out_dir))
		return list_from(D->out, max, out, e);
	json_t *j;
	int rc = runner_query(D, "list", dir, max, skip, 64u << 20, &j, e);
	if (rc)
		return rc;
	rc = list_from(j, max, out, e);
	json_decref(j);
	return rc;
}

static int daytona_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	struct daytona *D = b->priv;
	*out = (struct ws_file){0};
	json_t *j;
	int rc = cached_get(D, path, max, out, e);
	if (rc)
		return rc < 0 ? -1 : 0;
	size_t wl = strlen(WORKSPACE);
	if (!rest_name_ok(path) && !strncmp(path, WORKSPACE "/", wl + 1)) {
		/* A name that is not UTF-8 cannot travel in the toolbox's JSON command: it goes as
		 * base64, below the workspace (named as it is, which the test server maps). */
		char *rel = b64_encode((const unsigned char *)path + wl + 1, strlen(path + wl + 1), NULL);
		rc = rel ? runner_query(D, "getb", WORKSPACE, max, rel, max / 3 * 4 + (64u << 10), &j, e)
			 : err_set(e, "out of memory");
		free(rel);
	} else {
		rc = runner_query(D, "get", path, max, NULL, max / 3 * 4 + (64u << 10), &j, e);
	}
	if (rc)
		return rc;
	rc = file_from(j, max, out, e);
	json_decref(j);
	return rc;
}

/* The call is answered: what came with its end is read anew from now on. */
static void daytona_settle(struct backend *b)
{
	forget_out(b->priv);
}

/* ---------------------------------------------------------------- destroy, report, reap */

static int delete_sandbox(struct rest *h, const char *id, long timeout_ms, int tries, struct err *e)
{
	char path[128];
	snprintf(path, sizeof path, "/sandbox/%s", id);
	char *url = rest_url(h, path);
	if (!url)
		return err_set(e, "out of memory");
	int rc = -1;
	for (int i = 0; i < tries; i++) {
		struct rest_req rq = {.method = "DELETE", .url = url, .timeout_ms = timeout_ms, .max_body = SMALL_BODY};
		struct http_resp rs;
		err_clear(e);
		if (rest_call(h, &rq, &rs, e) < 0)
			break;
		long st = rs.status;
		if (st == 200 || st == 202 || st == 204 || st == 404) {
			http_resp_free(&rs);
			rc = 0;
			break;
		}
		rest_fail(&rs, "deleting the Daytona sandbox", e);
		http_resp_free(&rs);
		/* 409: a state change is in progress; it ends soon. */
		if (st != 409 || i + 1 == tries)
			break;
		sleep_ms(1000);
	}
	free(url);
	return rc;
}

static int daytona_destroy(struct backend *b, enum backend_end how, struct err *e)
{
	struct daytona *D = b->priv;
	int rc = 0;
	forget_out(D);
	bool shutdown = how == BACKEND_END_SHUTDOWN;
	if (D->id[0] && D->open) {
		struct err de = {""};
		if (shutdown && b->cfg->keep) {
			log_msg(LOG_NOTICE, "kept Daytona sandbox %s; Daytona stops and deletes it once it is idle", D->id);
		} else if (delete_sandbox(&D->rest, D->id, shutdown ? SHUTDOWN_DELETE_MS : 10000, shutdown ? 1 : 30, &de) < 0) {
			rc = err_set(e, "could not delete Daytona sandbox %s: %s (Daytona deletes it once it is idle)", D->id,
				     de.msg);
			log_msg(LOG_WARNING, "%s", e->msg);
		} else
			log_msg(LOG_INFO, "deleted Daytona sandbox %s", D->id);
	}
	/* After the sandbox: cleanup_sandbox empties the folder whatever became of the delete. */
	struct err we = {""};
	if (how == BACKEND_END_CLEANUP && wssync_clear(&D->ws, &we) < 0 && rc == 0) {
		rc = err_set(e, "%s", we.msg);
		log_msg(LOG_WARNING, "%s", e->msg);
	}
	wssync_release(&D->ws);
	D->id[0] = '\0';
	D->tb[0] = '\0';
	free(D->baseline);
	D->baseline = NULL;
	runner_code_free(&D->code);
	free(D->code_allow);
	D->code_allow = NULL;
	if (D->open)
		rest_close(&D->rest);
	D->open = false;
	/* Its background processes went with the sandbox. */
	pthread_mutex_lock(&D->bg_mu);
	memset(D->bg, 0, sizeof D->bg);
	pthread_mutex_unlock(&D->bg_mu);
	if (D->popen)
		rest_close(&D->prest);
	D->popen = false;
	return rc;
}

/* ---------------------------------------------------------------- background processes */

/* Runs a runner command on the process op's own REST client; parses its one JSON line. 0 with
 * *out (new reference), or -1 with e set. */
static int bg_exec_one(struct daytona *D, const char *cmd, size_t max_body, json_t **out, bool *miss,
		       struct err *e);

/* The runner's line put into cmd as tb_exec puts it: the kept code object, and once more with
 * the code itself when the runner finds it gone (the code may have changed it). */
static int bg_exec(struct daytona *D, const char *cmd, size_t max_body, json_t **out, struct err *e)
{
	const struct runner_code *rc = D->code.line ? &D->code : NULL;
	int r = -1;
	for (int full = 0; full < 2; full++) {
		struct buf c = {0};
		bool miss = false;
		int f = runner_fill(&c, cmd, rc, full);
		r = f < 0 ? err_set(e, "out of memory") : bg_exec_one(D, f ? c.p : cmd, max_body, out, &miss, e);
		buf_free(&c);
		if (!(r < 0 && miss && f && rc && !full))
			break;
		e->msg[0] = 0;
		log_msg(LOG_DEBUG, "daytona: the runner's code object was not in the sandbox; sent along");
	}
	return r;
}

static int bg_exec_one(struct daytona *D, const char *cmd, size_t max_body, json_t **out, bool *miss,
		       struct err *e)
{
	*out = NULL;
	if (!D->popen) {
		if (rest_open(&D->prest, e) < 0)
			return -1;
		D->popen = true;
	}
	json_t *body = json_pack("{s:s, s:i}", "command", cmd, "timeout", 30);
	if (!body)
		return err_set(e, "out of memory");
	size_t n = strlen(D->tb) + 32;
	char *url = malloc(n);
	if (!url) {
		json_decref(body);
		return err_set(e, "out of memory");
	}
	snprintf(url, n, "%s/process/execute", D->tb);
	struct rest_req rq = {.method = "POST", .url = url, .json = body, .timeout_ms = 35000, .max_body = max_body};
	struct http_resp rs;
	int rc = rest_call(&D->prest, &rq, &rs, e);
	free(url);
	json_decref(body);
	if (rc < 0) {
		http_resp_free(&rs);
		return -1;
	}
	if (rs.status != 200) {
		rest_fail(&rs, "asking the Daytona sandbox about its background processes", e);
		http_resp_free(&rs);
		return -1;
	}
	const char *res = json_str(rs.json, "result");
	json_t *ec = json_object_get(rs.json, "exitCode");
	*out = res && json_integer_value(ec) == 0 ? json_loads(res, 0, NULL) : NULL;
	*miss = !*out && res && json_integer_value(ec) == 3 && !strcmp(res, RUNNER_MISS "\n");
	if (!*out)
		rc = err_set(e, "the call runner in the sandbox failed: %.300s", res && *res ? res : "no answer");
	http_resp_free(&rs);
	return rc;
}

/* A copy of slot id, taken under the lock; false when there is none. */
static bool bg_copy(struct daytona *D, unsigned id, struct dt_bg *out)
{
	bool found = false;
	pthread_mutex_lock(&D->bg_mu);
	for (unsigned i = 0; i < BG_SLOTS && !found; i++)
		if (id && D->bg[i].id == id) {
			*out = D->bg[i];
			found = true;
		}
	pthread_mutex_unlock(&D->bg_mu);
	return found;
}

/* Puts what bgq said of one process (j) into its slot and into pi (with the data when read).
 * Holding no lock; takes it. read: the offsets move past everything it wrote (as the agent's
 * read: what the cap left out is only in the spill file), and an ended one is forgotten. */
static void bg_take(struct daytona *D, unsigned id, const json_t *j, bool read, struct proc_info *pi)
{
	pthread_mutex_lock(&D->bg_mu);
	struct dt_bg *s = NULL;
	for (unsigned i = 0; i < BG_SLOTS && !s; i++)
		if (D->bg[i].id == id)
			s = &D->bg[i];
	if (!s) {
		pthread_mutex_unlock(&D->bg_mu);
		return;
	}
	json_t *done = json_object_get(j, "done"), *end = json_object_get(j, "end");
	if (s->running && json_is_object(done)) {
		s->running = false;
		s->end_ms = clock_ms();
		s->ended_seq = ++D->bg_ended_seq;
		json_t *ec = json_object_get(done, "exit_code");
		if (!json_is_integer(ec)) {
			s->status = SIGKILL; /* its keeper ended without a word: killed */
		} else {
			json_int_t c = json_integer_value(ec);
			s->status = c > 128 && c < 160 ? (int)(c - 128) : (int)((c & 0xff) << 8);
		}
		s->timed_out = json_is_true(json_object_get(done, "timed_out"));
		s->cut = json_is_true(json_object_get(done, "spill_cut"));
		for (int i = 0; i < 2; i++) {
			json_int_t b = json_integer_value(json_array_get(json_object_get(done, "bytes"), (size_t)i));
			if (b > 0 && (uint64_t)b > s->bytes[i])
				s->bytes[i] = (uint64_t)b;
			s->file_errno[i] = (int)json_integer_value(json_array_get(json_object_get(done, "spill_errno"), (size_t)i));
		}
	}
	*pi = (struct proc_info){.id = s->id, .running = s->running, .timed_out = s->timed_out, .cut = s->cut,
				 .input_closed = s->input_closed, .status = s->status, .started_ns = s->started_ns};
	pi->duration_ms = (uint64_t)((s->running ? clock_ms() : s->end_ms) - s->start_ms);
	snprintf(pi->label, sizeof pi->label, "%s", s->label);
	snprintf(pi->prefix, sizeof pi->prefix, "%s", s->prefix);
	for (int i = 0; i < 2; i++) {
		json_int_t e = json_integer_value(json_array_get(end, (size_t)i));
		if (e > 0 && (uint64_t)e > s->bytes[i])
			s->bytes[i] = (uint64_t)e;
		json_t *ch = json_array_get(json_object_get(j, "s"), (size_t)i);
		json_int_t off = json_integer_value(json_object_get(ch, "off"));
		const char *data = json_str(ch, "data");
		size_t dl = data ? strlen(data) : 0;
		pi->s[i].from = s->off[i];
		if (read && dl && off >= 0 && (uint64_t)off >= s->off[i] && (pi->s[i].data = malloc(dl / 4 * 3 + 3))) {
			long n = b64_decode(data, dl, (unsigned char *)pi->s[i].data);
			if (n > 0 && (uint64_t)n <= s->cap) {
				pi->s[i].len = (size_t)n;
				pi->s[i].from = (uint64_t)off;
				pi->s[i].data[n] = '\0';
				if ((uint64_t)off + (uint64_t)n > s->bytes[i])
					s->bytes[i] = (uint64_t)off + (uint64_t)n;
			} else {
				free(pi->s[i].data);
				pi->s[i].data = NULL;
			}
		}
		pi->s[i].bytes = s->bytes[i];
		pi->s[i].file = s->prefix[0] && s->bytes[i] > s->cap && !s->file_errno[i];
		pi->s[i].file_errno = s->file_errno[i];
		if (read)
			s->off[i] = s->bytes[i];
	}
	if (read && !s->running)
		memset(s, 0, sizeof *s);
	bg_trim(D);
	pthread_mutex_unlock(&D->bg_mu);
}

/* bgq of the processes v[0..n), reading size bytes of each stream past its offset. */
static int bg_query(struct daytona *D, const struct dt_bg *v, size_t n, uint64_t size, json_t **out, struct err *e)
{
	struct buf c = {0};
	runner_cmd(&c, D->python, "bgq");
	buf_fmt(&c, " %llu %zu", (unsigned long long)size, n);
	for (size_t i = 0; i < n; i++) {
		runner_word(&c, v[i].dir);
		runner_word(&c, v[i].keeper);
		buf_fmt(&c, " %llu %llu", (unsigned long long)v[i].off[0], (unsigned long long)v[i].off[1]);
		runner_word(&c, v[i].prefix);
	}
	runner_end(&c, NULL, NULL, 0);
	int rc = c.oom ? err_set(e, "out of memory") : bg_exec(D, c.p, 4 * size + (64u << 10) * (n + 1), out, e);
	free(c.p);
	if (rc == 0 && (!json_is_array(*out) || json_array_size(*out) != n)) {
		json_decref(*out);
		*out = NULL;
		rc = err_set(e, "the call runner in the sandbox sent a malformed answer");
	}
	return rc;
}

/* bgin or bgsig of one process: its answer's error, if any, as e. */
static int bg_act(struct daytona *D, const struct dt_bg *s, const char *verb, const char *arg, const struct run_file *data,
		  json_t **out, struct err *e)
{
	struct buf c = {0};
	runner_cmd(&c, D->python, verb);
	runner_word(&c, s->dir);
	runner_word(&c, s->keeper);
	runner_word(&c, arg);
	runner_end(&c, NULL, data, data ? 1 : 0);
	int rc = c.oom ? err_set(e, "out of memory") : bg_exec(D, c.p, SMALL_BODY, out, e);
	free(c.p);
	const char *why = rc == 0 ? json_str(*out, "error") : NULL;
	if (why)
		rc = err_set(e, "%s", why);
	return rc;
}

static int daytona_process(struct backend *b, const struct proc_req *rq, struct proc_res *rs, struct err *e)
{
	struct daytona *D = b->priv;
	*rs = (struct proc_res){0};
	if (!D->id[0] || !D->open)
		return err_set(e, "the Daytona sandbox is gone"), BACKEND_LOST;
	json_t *j = NULL;
	int rc = 0;
	if (rq->op == PROC_LIST) {
		struct dt_bg *v = calloc(BG_SLOTS, sizeof *v);
		if (!v)
			return err_set(e, "out of memory");
		size_t n = 0;
		pthread_mutex_lock(&D->bg_mu);
		for (unsigned i = 0; i < BG_SLOTS; i++)
			if (D->bg[i].id)
				v[n++] = D->bg[i];
		pthread_mutex_unlock(&D->bg_mu);
		if (n && (rc = bg_query(D, v, n, 0, &j, e)) < 0) {
			free(v);
			return rc;
		}
		if (!(rs->v = calloc(n ? n : 1, sizeof *rs->v))) {
			free(v);
			json_decref(j);
			return err_set(e, "out of memory");
		}
		for (size_t i = 0; i < n; i++)
			bg_take(D, v[i].id, json_array_get(j, i), false, &rs->v[rs->n++]);
		free(v);
		json_decref(j);
		return 0;
	}
	struct dt_bg s;
	if (!bg_copy(D, rq->id, &s))
		return err_set(e, "no such background process");
	if (rq->op == PROC_INPUT) {
		if (!s.running)
			return err_set(e, "it has ended");
		if (s.input_closed && (rq->len || !rq->close_input))
			return err_set(e, "its input is closed");
		if (s.input_closed)
			return 0;
		struct run_file f = {"", rq->input ? rq->input : "", rq->len < INLINE_MAX ? rq->len : INLINE_MAX, 0};
		rc = bg_act(D, &s, "bgin", rq->close_input ? "1" : "0", &f, &j, e);
		if (rc == 0) {
			json_int_t w = json_integer_value(json_object_get(j, "written"));
			rs->written = w > 0 && (size_t)w <= f.len ? (size_t)w : 0;
			if (rq->close_input) {
				pthread_mutex_lock(&D->bg_mu);
				for (unsigned i = 0; i < BG_SLOTS; i++)
					if (D->bg[i].id == rq->id)
						D->bg[i].input_closed = true;
				pthread_mutex_unlock(&D->bg_mu);
			}
		}
		json_decref(j);
		return rc;
	}
	if (rq->op == PROC_SIGNAL) {
		if (rq->sig <= 0 || rq->sig >= 32)
			return err_set(e, "bad signal");
		if (!s.running)
			return err_set(e, "it has ended");
		char sig[16];
		snprintf(sig, sizeof sig, "%d", rq->sig);
		rc = bg_act(D, &s, "bgsig", sig, NULL, &j, e);
		json_decref(j);
		return rc;
	}
	/* PROC_READ; one past its timeout and grace (its keeper stopped by the code) is killed. */
	if (s.running && clock_ms() >= s.deadline_ms) {
		char sig[16];
		snprintf(sig, sizeof sig, "%d", SIGKILL);
		bg_act(D, &s, "bgsig", sig, NULL, &j, e);
		json_decref(j);
		j = NULL;
		err_clear(e);
	}
	if ((rc = bg_query(D, &s, 1, s.cap, &j, e)) < 0)
		return rc;
	if (!(rs->v = calloc(1, sizeof *rs->v))) {
		json_decref(j);
		return err_set(e, "out of memory");
	}
	rs->n = 1;
	bg_take(D, s.id, json_array_get(j, 0), true, &rs->v[0]);
	json_decref(j);
	return 0;
}

static void daytona_report(struct backend *b, FILE *f)
{
	struct daytona *D = b->priv;
	const struct config *cfg = b->cfg;
	fprintf(f, "    api         %s%s%s\n", D->rest.api, D->rest.target[0] ? ", target " : "", D->rest.target);
	fprintf(f, "    sandbox     %s (%s)\n", D->id,
		D->snapshot[0] ? D->snapshot : D->image[0] ? D->image : "the organization's default snapshot");
	if (D->code_allow)
		fprintf(f, "    network     the code reaches the addresses %s, on every port: what --allow-hosts %s resolved "
			   "to when the sandbox was made (Daytona's rule is by address: any other name at those addresses "
			   "is reached too, and a host's later addresses are not)\n", D->code_allow, cfg->allow_hosts);
	else
		fprintf(f, "    network     %s\n", cfg->network == NET_NONE ? "blocked (networkBlockAll)"
					     : cfg->network == NET_INSTALL ? (cfg->wheelhouse[0] ? "blocked; package installs from the wheelhouse, with no network"
												 : "blocked; the install step alone may reach the package index's addresses")
									   : "open");
	fprintf(f, "    resources   Daytona's: %s\n", D->image[0] ? "cpu and memory (GiB, rounded up) from --cpus and --memory"
							  : "the snapshot's; --memory, --cpus, --pids NOT applied");
	char sz[32];
	if (D->image[0] && cfg->workspace_size)
		fprintf(f, "    disk        %ld GiB    the sandbox's disk, from --workspace-size (%s) in whole GiB\n",
			D->disk_gib, config_fmt_size(cfg->workspace_size, sz, sizeof sz));
	else if (D->disk_gib)
		fprintf(f, "    disk        %ld GiB    the sandbox's disk, %s\n", D->disk_gib,
			D->image[0] ? "Daytona's default (--workspace-size 0)"
				    : "the snapshot's own (--workspace-size applies with --daytona-image alone)");
	fprintf(f, "    timeouts    the call's timeout; every process of the call killed at its end\n");
	if (cfg->max_background)
		fprintf(f, "    background  %-10llu at once (--max-background), each until its timeout_s (default %g s, at most "
			   "%g s), in a Landlock domain of its own (refused without one)\n",
			(unsigned long long)cfg->max_background, cfg->bg_timeout_s, cfg->bg_max_timeout_s);
	else
		fprintf(f, "    background  %-10s (--max-background 0)\n", "none");
	fprintf(f, "    lifetime    auto-stop when idle, then auto-delete; labelled %s for reaping\n", LABEL);
	wssync_report(&D->ws, f);
	for (size_t i = 0; i < cfg->mounts.n; i++)
		fprintf(f, "    mount       %s: a copy of the host folder %s made at creation (%zu files, %s%s%zu skipped); "
			   "%s; changes stay in the sandbox\n", cfg->mounts.v[i].inside, cfg->mounts.v[i].host,
			D->mounts[i].files, config_fmt_size(D->mounts[i].bytes, sz, sizeof sz), ", ", D->mounts[i].skipped,
			cfg->mounts.v[i].rw ? "writable" : "read-only by its files' modes (the code could change them back)");
}

/* A sandbox found gone after a call (its workspace's files could not be fetched), or whose
 * --workspace folder was removed on the host, is dropped before the next call, which gets a
 * new sandbox and a notice, as on the other backends. */
static int daytona_check(struct backend *b, struct err *e)
{
	struct daytona *D = b->priv;
	if (!D->lost[0] && wssync_removed(&D->ws))
		snprintf(D->lost, sizeof D->lost, "its workspace %.200s was removed on the host", D->ws.dir);
	return D->lost[0] ? (err_set(e, "%s", D->lost), BACKEND_LOST) : 0;
}

static void daytona_init(struct backend *b)
{
	struct daytona *D = b->priv;
	wssync_init(&D->ws);
	pthread_mutex_init(&D->bg_mu, NULL);
}

static bool owner_alive(const char *owner, const char *host)
{
	char h[128];
	int pid;
	unsigned long long start;
	const char *c = strrchr(owner, ':');
	if (!c || c == owner)
		return true;
	const char *c2 = c - 1;
	while (c2 > owner && *c2 != ':')
		c2--;
	if (c2 == owner || (size_t)(c2 - owner) >= sizeof h)
		return true;
	memcpy(h, owner, (size_t)(c2 - owner));
	h[c2 - owner] = '\0';
	if (strcmp(h, host) || sscanf(c2 + 1, "%d:%llu", &pid, &start) != 2 || pid <= 0)
		return true; /* not ours to judge */
	char now[256], want[256];
	owner_of(pid, now, sizeof now);
	snprintf(want, sizeof want, "%s", owner);
	return kill(pid, 0) == 0 && !strcmp(now, want);
}

static void daytona_reap(const struct config *cfg)
{
	if (strcmp(cfg->backend, "auto") && strcmp(cfg->backend, "daytona"))
		return;
	const char *key = getenv("DAYTONA_API_KEY");
	if (!key || !*key)
		return;
	struct rest h;
	struct err e = {""};
	if (rest_open(&h, &e) < 0)
		return;
	char *lab = http_escape("{\"" LABEL "\":\"1\"}"), path[256], host[128] = "?";
	gethostname(host, sizeof host - 1);
	host[sizeof host - 1] = '\0';
	snprintf(path, sizeof path, "/sandbox?limit=100&labels=%s", lab ? lab : "");
	free(lab);
	char *url = rest_url(&h, path);
	/* At start-up, before the first call: short, whatever the API does. */
	struct rest_req rq = {.method = "GET", .url = url, .timeout_ms = 2000, .max_body = 8u << 20};
	struct http_resp rs = {0};
	if (!url || rest_call(&h, &rq, &rs, &e) < 0 || rs.status != 200) {
		log_msg(LOG_DEBUG, "daytona: not looking for leftovers: %s", e.msg[0] ? e.msg : "the API said no");
		goto out;
	}
	json_t *items = json_is_array(rs.json) ? rs.json : json_object_get(rs.json, "items");
	size_t i;
	json_t *it;
	int64_t until = clock_ms() + 5000;
	json_array_foreach(items, i, it) {
		const char *id = json_str(it, "id");
		json_t *labels = json_object_get(it, "labels");
		const char *owner = json_str(labels, OWNER_LABEL);
		if (!id || !owner || strlen(id) > 100 || owner_alive(owner, host) || clock_ms() > until)
			continue;
		struct err de = {""};
		if (delete_sandbox(&h, id, 3000, 1, &de) == 0)
			log_msg(LOG_INFO, "deleted Daytona sandbox %s, left by a server that is gone (%s)", id, owner);
		else
			log_msg(LOG_WARNING, "could not delete Daytona sandbox %s left by %s: %s", id, owner, de.msg);
	}
out:
	http_resp_free(&rs);
	free(url);
	rest_close(&h);
}

static int daytona_opts_check(const void *opts, const struct config *cfg, struct err *e)
{
	const struct daytona_opts *o = opts;
	struct netpolicy pol;
	char why[400];
	if (!strcmp(cfg->backend, "daytona") && netpolicy_parse_allow(&pol, cfg->allow_hosts, e) == 0 &&
	    allow_problem(&pol, why, sizeof why))
		return err_set(e, "%s", why);
	if (o->snapshot[0] && o->image[0])
		return err_set(e, "--daytona-snapshot and --daytona-image exclude each other: give one");
	if (strpbrk(o->image, "\r\n") || strpbrk(o->snapshot, " \t\r\n"))
		return err_set(e, "--daytona-snapshot or --daytona-image is not a valid name");
	if (o->start_timeout_s <= 0 || o->start_timeout_s > 3600)
		return err_set(e, "--daytona-start-timeout must be between 0 and 3600 seconds");
	return 0;
}

#define O(field) OPT_FIELD(struct daytona_opts, field)
static const struct opt daytona_options[] = {
	{"daytona-snapshot", "SANDBOX_DAYTONA_SNAPSHOT", OPT_STR, O(snapshot), "",
	 "Daytona: snapshot to create sandboxes from (default: the organisation's)"},
	{"daytona-image", "SANDBOX_DAYTONA_IMAGE", OPT_STR, O(image), "",
	 "Daytona: image to create sandboxes from, instead of a snapshot"},
	{"daytona-start-timeout", "SANDBOX_DAYTONA_START_TIMEOUT", OPT_SECONDS, O(start_timeout_s), "60",
	 "Daytona: seconds a new sandbox may take to start"},
};

/* A key is what makes auto try Daytona (its probe then asks the API). */
static bool daytona_present(const struct config *cfg)
{
	(void)cfg;
	const char *key = getenv("DAYTONA_API_KEY");
	return key && *key;
}

const struct backend_ops daytona_backend_ops = {
	.name = "daytona",
	.opts = daytona_options,
	.nopts = sizeof daytona_options / sizeof daytona_options[0],
	.opts_size = sizeof(struct daytona_opts),
	.opts_check = daytona_opts_check,
	.env_help = "  DAYTONA_API_KEY      Daytona API key; with it, --backend auto tries Daytona first\n"
		    "  DAYTONA_API_URL      Daytona API base URL (default " DT_DEFAULT_API_URL ";\n"
		    "                       the deprecated DAYTONA_SERVER_URL is read when it is unset)\n"
		    "  DAYTONA_TARGET       Daytona region for new sandboxes (default: the organisation's)\n",
	.priv_size = sizeof(struct daytona),
	.workspace_dir = true,
	.init = daytona_init,
	.present = daytona_present,
	.probe = daytona_probe,
	.start = daytona_start,
	.run = daytona_run,
	.put = daytona_put,
	.list = daytona_list,
	.get = daytona_get,
	.settle = daytona_settle,
	.check = daytona_check,
	.destroy = daytona_destroy,
	.process = daytona_process,
	.report = daytona_report,
	.reap = daytona_reap,
};
