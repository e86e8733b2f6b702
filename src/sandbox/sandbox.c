#include "sandbox.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>

#include "../base/gpu.h"
#include "../base/clock.h"
#include "../base/log.h"

void sandbox_init(struct sandbox *s, const struct config *cfg)
{
	memset(s, 0, sizeof *s);
	s->cfg = cfg;
	s->installed = json_object();
	s->outputs_seen = json_object();
	pthread_mutex_init(&s->side_mu, NULL);
}

int sandbox_process(struct sandbox *s, const struct proc_req *rq, struct proc_res *rs, struct err *e)
{
	*rs = (struct proc_res){0};
	pthread_mutex_lock(&s->side_mu);
	int rc = s->side && backend_has_process(s->side) ? backend_process(s->side, rq, rs, e)
		 : rq->op == PROC_LIST ? 0
		 : err_set(e, "%s", s->side ? "this sandbox's backend runs no background processes"
					   : "there is no sandbox, so no background process runs");
	pthread_mutex_unlock(&s->side_mu);
	return rc;
}

unsigned sandbox_session_find(struct sandbox *s, const char *name)
{
	unsigned id = 0;
	pthread_mutex_lock(&s->side_mu);
	for (size_t i = 0; i < SANDBOX_SESSIONS_MAX && !id; i++)
		if (s->sessions[i].id && !strcmp(s->sessions[i].name, name))
			id = s->sessions[i].id;
	pthread_mutex_unlock(&s->side_mu);
	return id;
}

int sandbox_session_set(struct sandbox *s, const char *name, unsigned id)
{
	int rc = -1;
	pthread_mutex_lock(&s->side_mu);
	for (size_t i = 0; i < SANDBOX_SESSIONS_MAX; i++)
		if (s->sessions[i].id && !strcmp(s->sessions[i].name, name))
			s->sessions[i].id = 0;
	for (size_t i = 0; i < SANDBOX_SESSIONS_MAX && id && rc; i++)
		if (!s->sessions[i].id) {
			snprintf(s->sessions[i].name, sizeof s->sessions[i].name, "%s", name);
			s->sessions[i].id = id;
			rc = 0;
		}
	pthread_mutex_unlock(&s->side_mu);
	return id ? rc : 0;
}

size_t sandbox_session_count(struct sandbox *s)
{
	size_t n = 0;
	pthread_mutex_lock(&s->side_mu);
	for (size_t i = 0; i < SANDBOX_SESSIONS_MAX; i++)
		n += s->sessions[i].id != 0;
	pthread_mutex_unlock(&s->side_mu);
	return n;
}

void sandbox_session_name(struct sandbox *s, unsigned id, char *buf, size_t n)
{
	snprintf(buf, n, "%s", "");
	pthread_mutex_lock(&s->side_mu);
	for (size_t i = 0; i < SANDBOX_SESSIONS_MAX && id; i++)
		if (s->sessions[i].id == id)
			snprintf(buf, n, "%s", s->sessions[i].name);
	pthread_mutex_unlock(&s->side_mu);
}

bool sandbox_has_process(const struct sandbox *s)
{
	return s->b && backend_has_process(s->b);
}

/* How many background processes run in the sandbox (0 when it cannot tell). */
static size_t live_processes(struct sandbox *s)
{
	struct proc_req rq = {.op = PROC_LIST};
	struct proc_res rs;
	size_t n = 0;
	if (sandbox_process(s, &rq, &rs, &(struct err){""}) == 0)
		for (size_t i = 0; i < rs.n; i++)
			n += rs.v[i].running;
	proc_res_free(&rs);
	return n;
}

int sandbox_fd_limit(struct err *e)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) < 0)
		return err_sys(e, "getrlimit(RLIMIT_NOFILE)");
	if (r.rlim_cur >= SANDBOX_MIN_FDS)
		return 0;
	if (r.rlim_max < SANDBOX_MIN_FDS)
		return err_set(e, "the open files limit is %llu (ulimit -Hn): the server needs at least %d; raise it "
				  "(ulimit -n %d, or LimitNOFILE= in a systemd unit)",
			       (unsigned long long)r.rlim_max, SANDBOX_MIN_FDS, SANDBOX_MIN_FDS);
	r.rlim_cur = r.rlim_max < 1024 ? r.rlim_max : 1024;
	if (setrlimit(RLIMIT_NOFILE, &r) < 0)
		return err_sys(e, "raising the open files limit to %llu", (unsigned long long)r.rlim_cur);
	return 0;
}

void sandbox_reap_leftovers(const struct config *cfg)
{
	backend_reap_all(cfg);
}

/* Removes the sandbox, its workspace as `how` says (backend.h). 0, or -1 with e naming what
 * could not be removed. */
static int drop(struct sandbox *s, enum backend_end how, struct err *e)
{
	if (!s->b)
		return 0;
	/* Counted for the next call's notice; a shutdown has none, and its time is the delete's. */
	size_t live = how == BACKEND_END_SHUTDOWN ? 0 : live_processes(s);
	if (live) {
		size_t l = strlen(s->pending);
		snprintf(s->pending + l, sizeof s->pending - l, "%s%zu background process%s of sandbox %s ended with it.",
			 l ? " " : "", live, live == 1 ? "" : "es", s->b->sandbox_id);
	}
	s->checked_at = 0;
	pthread_mutex_lock(&s->side_mu);
	s->side = NULL;
	memset(s->sessions, 0, sizeof s->sessions);
	pthread_mutex_unlock(&s->side_mu);
	int rc = backend_destroy(s->b, how, e);
	backend_free(s->b); /* nothing left to do: every backend's destroy is idempotent */
	s->b = NULL;
	json_object_clear(s->installed);
	json_object_clear(s->outputs_seen);
	return rc;
}

/* What the workspace of the sandbox that replaces s->b holds, for notices. */
static const char *next_workspace(const struct sandbox *s)
{
	return s->cfg->workspace_claim ? "the --workspace claim's volume as it holds it (its files stay; processes and /tmp do not)"
	       : s->cfg->workspace_dir[0] && s->b->ops->workspace_dir
		       ? "the --workspace folder as the host holds it (its files stay; processes and /tmp do not)"
		       : "a fresh, empty workspace (earlier files and packages are gone)";
}

/* The sandbox died or lost its workspace: removes it, and the next call that makes a new one
 * is told why and what its workspace holds. */
static void lost(struct sandbox *s, const char *why)
{
	if (!s->used) {
		/* Made ahead and never used: nobody's loss, and not made again until a call. */
		log_msg(LOG_INFO, "sandbox %s, made ahead, was lost before any call: %s", s->b->sandbox_id, why);
		drop(s, BACKEND_END_DROP, &(struct err){""});
		return;
	}
	log_msg(LOG_WARNING, "sandbox %s was lost: %s", s->b->sandbox_id, why);
	snprintf(s->pending, sizeof s->pending,
		 "The previous sandbox (%s) stopped unexpectedly (%s); this call ran in a new sandbox with %s.",
		 s->b->sandbox_id, why, next_workspace(s));
	drop(s, BACKEND_END_DROP, &(struct err){""});
}

/* The notice of a call whose code ran on another backend than one auto found set up here. */
static void note_passed_over(struct sandbox *s, const char *failed, const char *used)
{
	if (failed[0] && !s->pending[0])
		snprintf(s->pending, sizeof s->pending,
			 "--backend auto passed over what is set up here (%.600s); this call ran on the %s backend "
			 "instead.", failed, used);
}

/* Adds "name: why" to a list of reasons ("; " between). */
static void add_reason(char *list, size_t n, const char *name, const char *why)
{
	size_t used = strlen(list);
	snprintf(list + used, n - used, "%s%s: %s", used ? "; " : "", name, why);
}

/* Tries one backend: probe, then start. 0 with s->b set, or -1 / BACKEND_ABSENT /
 * BACKEND_CANCELLED with the reason in e. */
static int try_backend(struct sandbox *s, const struct backend_ops *ops, int cancel_fd, struct err *e)
{
	struct backend *b;
	if (backend_new(&b, ops, s->cfg, e) < 0)
		return -1;
	int rc = backend_probe(b, e);
	if (rc == 0)
		rc = backend_start(b, cancel_fd, e);
	if (rc < 0) {
		backend_free(b);
		return rc == BACKEND_ABSENT || rc == BACKEND_CANCELLED ? rc : -1;
	}
	s->b = b;
	pthread_mutex_lock(&s->side_mu);
	s->side = b;
	pthread_mutex_unlock(&s->side_mu);
	return 0;
}

/* A call is to run in the sandbox there now: the first one in it gets the pending notice. */
static void take(struct sandbox *s, char *notice)
{
	if (s->used)
		return;
	s->used = true;
	s->ahead_made = false;
	if (s->pending[0] && !notice[0])
		snprintf(notice, SANDBOX_NOTICE_MAX, "%s", s->pending);
	s->pending[0] = '\0';
}

/* Whether the sandbox there was found alive in this call, moments ago (sandbox_call_begin). */
static bool checked_now(const struct sandbox *s)
{
	return s->checked_at && clock_ms() - s->checked_at < SANDBOX_CHECK_FRESH_MS; /* 0 outside a call */
}

int sandbox_ensure(struct sandbox *s, int cancel_fd, char *notice, struct err *e)
{
	if (s->b) {
		/* A sandbox that died, or whose workspace went, since the last call is replaced. */
		struct err ce = {""};
		if (checked_now(s)) {
			take(s, notice);
			return 0;
		}
		if (backend_check(s->b, &ce) == 0) {
			s->checked_at = s->in_call ? clock_ms() : 0;
			take(s, notice);
			return 0;
		}
		lost(s, ce.msg);
	}
	/* The reasons of backends that were set up here and failed lead; those of backends that are
	 * not set up here at all (no key, no engine) follow. */
	char failed[sizeof e->msg] = "", absent[sizeof e->msg] = "";
	bool any = false;
	const bool autosel = !strcmp(s->cfg->backend, "auto");
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, s->cfg->backend))
			continue;
		any = true;
		struct err be = {""};
		int rc = try_backend(s, ops, cancel_fd, &be);
		if (rc == 0) {
			log_msg(LOG_INFO, "sandbox %s started on the %s backend", s->b->sandbox_id, ops->name);
			s->last_used = clock_ms();
			s->used = false;
			/* Code meant for a backend the user set up runs elsewhere: the call says so. */
			note_passed_over(s, failed, ops->name);
			take(s, notice);
			return 0;
		}
		if (rc == BACKEND_CANCELLED) {
			log_msg(LOG_INFO, "backend %s: making the sandbox was cancelled", ops->name);
			return BACKEND_CANCELLED;
		}
		/* auto passing over a backend that is not set up here is the normal case. */
		log_msg(!autosel ? LOG_ERROR : rc == BACKEND_ABSENT ? LOG_INFO : LOG_WARNING, "backend %s%s: %s",
			autosel ? "auto: passed over " : "", ops->name, be.msg);
		add_reason(rc == BACKEND_ABSENT ? absent : failed, sizeof failed, ops->name, be.msg);
	}
	if (!any)
		return err_set(e, "Failed to initialize sandbox engine: %s: this build has no %s backend", s->cfg->backend,
			       s->cfg->backend);
	return err_set(e, "Failed to initialize sandbox engine: %s%s%s", failed, failed[0] && absent[0] ? "; " : "",
		       absent);
}

static bool readable(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};
	return fd >= 0 && poll(&p, 1, 0) > 0;
}

bool sandbox_ahead_due(const struct sandbox *s)
{
	return s->cfg->sandbox_ahead && !s->b && !s->ahead_made && !s->cfg->workspace_dir[0];
}

/* May a sandbox be made ahead on ops (-1), or must the next call choose (1), or is ops not there
 * for auto to pass over (0, auto only; e says why, and *set_up whether it is set up here but
 * failed, rather than not set up at all)? Nothing is made; only a local probe may run (a backend
 * whose probe would reach the network is probed only where it is not present). */
static int ahead_blocked(const struct sandbox *s, const struct backend_ops *ops, bool autosel, struct err *e,
			 bool *set_up)
{
	*set_up = false;
	if (ops->ahead)
		return -1;
	if (!autosel || (ops->present && ops->present(s->cfg)))
		return 1;
	struct backend *b;
	if (backend_new(&b, ops, s->cfg, e) < 0)
		return 1;
	int rc = backend_probe(b, e);
	backend_free(b);
	*set_up = rc != 0 && rc != BACKEND_ABSENT;
	return rc != 0 ? 0 : 1;
}

int sandbox_prepare(struct sandbox *s, int cancel_fd, const struct run_req *prime, int call_fd)
{
	if (s->b)
		return 0;
	if (!sandbox_ahead_due(s))
		return 1;
	s->ahead_made = true;
	const bool autosel = !strcmp(s->cfg->backend, "auto");
	char failed[SANDBOX_NOTICE_MAX / 2] = "";
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, s->cfg->backend))
			continue;
		struct err be = {""};
		bool set_up;
		int blocked = ahead_blocked(s, ops, autosel, &be, &set_up);
		if (blocked >= 0) {
			if (blocked)
				return 1;
			/* Said whenever auto passes one over, made ahead or not. */
			log_msg(set_up ? LOG_WARNING : LOG_INFO, "backend auto: passed over %s: %s", ops->name, be.msg);
			if (set_up)
				add_reason(failed, sizeof failed, ops->name, be.msg);
			continue;
		}
		int rc = try_backend(s, ops, cancel_fd, &be);
		if (rc == 0) {
			log_msg(LOG_INFO, "sandbox %s made ahead on the %s backend", s->b->sandbox_id, ops->name);
			note_passed_over(s, failed, ops->name);
			s->used = false;
			s->last_used = clock_ms();
			struct run_res rs;
			if (prime && !readable(call_fd)) {
				if (backend_run(s->b, prime, &rs, &be) == BACKEND_LOST)
					lost(s, be.msg);
				else
					backend_settle(s->b);
			}
			return 0;
		}
		if (rc == BACKEND_CANCELLED)
			return rc;
		if (rc != BACKEND_ABSENT || !autosel) {
			/* The next call meets the failure, and says it. */
			log_msg(LOG_DEBUG, "backend %s: no sandbox made ahead: %s", ops->name, be.msg);
			return 1;
		}
	}
	return 1;
}

int sandbox_run(struct sandbox *s, const struct run_req *rq, struct run_res *rs, char *notice, struct err *e)
{
	for (int attempt = 0;; attempt++) {
		int rc = sandbox_ensure(s, rq->cancel_fd, notice, e);
		if (rc == BACKEND_CANCELLED) {
			memset(rs, 0, sizeof *rs);
			rs->cancelled = true;
			return 0;
		}
		if (rc < 0)
			return -1;
		struct err re = {""};
		rc = backend_run(s->b, rq, rs, &re);
		s->last_used = clock_ms();
		if (rc != BACKEND_LOST) {
			if (rc < 0)
				err_set(e, "%s", re.msg);
			return rc;
		}
		char id[sizeof s->b->sandbox_id];
		snprintf(id, sizeof id, "%s", s->b->sandbox_id);
		const char *next = next_workspace(s);
		lost(s, re.msg);
		/* Repeated on a new sandbox only when the program surely never started. */
		if (attempt > 0 || rs->started) {
			snprintf(s->pending, sizeof s->pending,
				 "The sandbox (%s) stopped unexpectedly during the previous call (%s); this call ran in "
				 "a new sandbox with %s.", id, re.msg, next);
			return err_set(e, "the sandbox stopped unexpectedly: %s; the next call starts a new one", re.msg);
		}
	}
}

int sandbox_put(struct sandbox *s, const struct run_file *f, struct err *e)
{
	if (!s->b)
		return err_set(e, "there is no sandbox");
	int rc = backend_put(s->b, f, e);
	if (rc == BACKEND_LOST) {
		lost(s, e->msg);
		return -1;
	}
	return rc;
}

/* With --workspace the workspace has files before any call: a sandbox is made to read them
 * (the server never reads the folder itself, where code may have planted links). A notice
 * waiting for the next call stays for it. 0 when there is a sandbox to read, 1 when there is
 * none to make, -1 with e set. */
static int for_reading(struct sandbox *s, struct err *e)
{
	if (!checked_now(s))
		sandbox_check(s);
	if (s->b)
		return 0;
	if (!s->cfg->workspace_dir[0])
		return 1;
	char pending[SANDBOX_NOTICE_MAX], notice[SANDBOX_NOTICE_MAX] = "";
	snprintf(pending, sizeof pending, "%s", s->pending);
	int rc = sandbox_ensure(s, -1, notice, e);
	snprintf(s->pending, sizeof s->pending, "%s", pending);
	/* Made to be read, it has run no call: the next call is its first, and takes the notice. */
	if (rc == 0)
		s->used = false;
	return rc < 0 ? -1 : 0;
}

/* sandbox_list, with the sandbox's watch (backend_list_watch) or without. */
static int list(struct sandbox *s, const char *dir, const char *skip, size_t max, bool watch, struct ws_list *out,
		struct err *e)
{
	*out = (struct ws_list){0};
	/* A sandbox found lost is replaced (with --workspace) or there is none to read: reading
	 * changes nothing, so it is done again. */
	for (int attempt = 0;; attempt++) {
		int ready = for_reading(s, e);
		if (ready)
			return ready < 0 ? -1 : 0;
		int rc = watch ? backend_list_watch(s->b, dir, skip, max, out, e) : backend_list(s->b, dir, skip, max, out, e);
		if (rc != BACKEND_LOST)
			return rc;
		lost(s, e->msg);
		if (attempt > 0)
			return -1;
	}
}

int sandbox_list(struct sandbox *s, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	return list(s, dir, skip, max, false, out, e);
}

int sandbox_list_watch(struct sandbox *s, const char *dir, const char *skip, size_t max, struct ws_list *out,
		       struct err *e)
{
	return list(s, dir, skip, max, true, out, e);
}

int sandbox_changes(struct sandbox *s)
{
	struct err e = {""};
	int rc = s->b ? backend_changes(s->b, &e) : WS_CHANGES_UNKNOWN;
	/* A lost sandbox is removed as a list would; the caller's list then finds what is there. */
	if (rc == BACKEND_LOST)
		lost(s, e.msg);
	return rc < 0 ? WS_CHANGES_UNKNOWN : rc;
}

int sandbox_get(struct sandbox *s, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	*out = (struct ws_file){.err = ENOENT};
	for (int attempt = 0;; attempt++) { /* as sandbox_list */
		int ready = for_reading(s, e);
		if (ready)
			return ready < 0 ? -1 : 0;
		int rc = backend_get(s->b, path, max, out, e);
		if (rc != BACKEND_LOST)
			return rc;
		lost(s, e->msg);
		if (attempt > 0)
			return -1;
	}
}

int sandbox_cleanup(struct sandbox *s, char *backend, size_t bn, char *id, size_t idn, struct err *e)
{
	s->pending[0] = '\0';
	s->ahead_made = false;
	if (s->b && !s->used) {
		/* Made ahead and unused: nothing of the client's to remove; it goes all the same. */
		log_msg(LOG_INFO, "sandbox %s, made ahead, removed unused on request", s->b->sandbox_id);
		drop(s, BACKEND_END_DROP, e);
		return 0;
	}
	if (!s->b)
		return 0;
	snprintf(backend, bn, "%s", s->b->ops->name);
	snprintf(id, idn, "%s", s->b->sandbox_id);
	int rc = drop(s, BACKEND_END_CLEANUP, e);
	log_msg(rc < 0 ? LOG_WARNING : LOG_INFO, "sandbox %s removed on request%s%s", id, rc < 0 ? ", but " : "",
		rc < 0 ? e->msg : "");
	return rc < 0 ? -1 : 1;
}

void sandbox_settle(struct sandbox *s)
{
	if (s->b)
		backend_settle(s->b);
}

int sandbox_watch_fd(const struct sandbox *s)
{
	return s->b ? backend_watch_fd(s->b) : -1;
}

void sandbox_call_begin(struct sandbox *s)
{
	s->in_call = true;
	s->checked_at = 0;
}

void sandbox_call_end(struct sandbox *s)
{
	s->in_call = false;
	s->checked_at = 0;
}

void sandbox_check(struct sandbox *s)
{
	struct err e = {""};
	if (s->b && backend_check(s->b, &e) != 0)
		lost(s, e.msg);
}

int64_t sandbox_idle_deadline(const struct sandbox *s)
{
	if (!s->b || s->cfg->idle_timeout_s <= 0)
		return -1;
	return s->last_used + (int64_t)(s->cfg->idle_timeout_s * 1000);
}

void sandbox_idle_expire(struct sandbox *s)
{
	if (!s->b)
		return;
	log_msg(LOG_INFO, "sandbox %s removed after %g s unused", s->b->sandbox_id, s->cfg->idle_timeout_s);
	s->ahead_made = true; /* the client went quiet: no sandbox is made for it ahead */
	if (!s->used) {
		drop(s, BACKEND_END_DROP, &(struct err){""});
		return;
	}
	bool kept = s->cfg->workspace_dir[0] && s->b->ops->workspace_dir;
	snprintf(s->pending, sizeof s->pending,
		 "The previous sandbox (%s) was removed after %g s without use; this call ran in a new "
		 "sandbox %s.", s->b->sandbox_id, s->cfg->idle_timeout_s,
		 kept && s->cfg->workspace_claim
			 ? "on the same --workspace claim (its files stay; processes and /tmp do not)"
		 : kept ? "on the same --workspace folder (its files and packages stay; processes and /tmp do not)"
		      : "with an empty workspace (earlier files and packages are gone)");
	drop(s, BACKEND_END_DROP, &(struct err){""});
}

void sandbox_shutdown(struct sandbox *s)
{
	/* One made ahead and never used leaves nothing behind, --keep or not. */
	drop(s, s->b && !s->used ? BACKEND_END_DROP : BACKEND_END_SHUTDOWN, &(struct err){""});
	backend_shutdown_all(s->cfg);
	json_decref(s->installed);
	s->installed = NULL;
	json_decref(s->outputs_seen);
	s->outputs_seen = NULL;
}

const char *sandbox_backend(const struct sandbox *s)
{
	return s->b ? s->b->ops->name : NULL;
}

const char *sandbox_id(const struct sandbox *s)
{
	return s->b ? s->b->sandbox_id : NULL;
}

bool sandbox_made_ahead(const struct sandbox *s)
{
	return s->b && !s->used;
}

/* The first line of what a test run wrote to stderr, for --check. */
struct first_line {
	char text[200];
	size_t len;
};

static void keep_first_line(void *ctx, int stream, const char *buf, size_t len)
{
	struct first_line *l = ctx;
	if (stream != 2)
		return;
	for (size_t i = 0; i < len && l->len + 1 < sizeof l->text && !memchr(l->text, '\n', l->len); i++)
		l->text[l->len++] = buf[i];
	l->text[l->len] = '\0';
	l->text[strcspn(l->text, "\n")] = '\0';
}

/* Runs argv in b as --check's test: 0, or -1 with why in e. */
static int check_run(struct backend *b, const char *const *argv, struct err *e)
{
	static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
	struct first_line l = {"", 0};
	struct run_req rq = {.argv = argv, .env = env, .cwd = WORKSPACE, .deadline_ms = clock_ms() + 30000,
			     .cancel_fd = -1, .cap = 4096, .on_output = keep_first_line, .ctx = &l};
	struct run_res rs;
	int rc = backend_run(b, &rq, &rs, e);
	if (rc != 0)
		return -1;
	if (rs.exit_code != 0)
		return err_set(e, "exit code %d%s%s", rs.exit_code, l.text[0] ? ": " : "", l.text);
	return 0;
}

int sandbox_check_all(const struct config *cfg, FILE *f)
{
	int usable = 0, would_fetch = 0;
	const bool autosel = !strcmp(cfg->backend, "auto");
	fprintf(f, "gpus (what --gpu gives the local backend):\n");
	gpu_report(f, "  ");
	fprintf(f, "backends (%s):\n", autosel ? "auto tries them in this order" : "as configured");
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, cfg->backend))
			continue;
		struct backend *b = NULL;
		struct err e = {""};
		int rc = backend_new(&b, ops, cfg, &e);
		if (rc == 0) {
			b->checking = true;
			rc = backend_probe(b, &e);
		}
		if (rc == 0)
			rc = backend_start(b, -1, &e);
		if (rc == BACKEND_WOULD_FETCH) {
			/* Nothing is wrong: the first call takes longer. */
			fprintf(f, "  %-8s not tried: %s\n", ops->name, e.msg);
			would_fetch++;
			backend_free(b);
			continue;
		}
		if (rc < 0) {
			fprintf(f, "  %-8s unavailable: %s\n", ops->name, e.msg);
			backend_free(b);
			continue;
		}
		static const char *const argv[] = {"true", NULL};
		const char *const py[] = {cfg->python, "-c", "pass", NULL};
		int64_t t0 = clock_ms(), took = -1;
		if (check_run(b, argv, &e) == 0)
			took = clock_ms() - t0;
		if (took < 0) {
			fprintf(f, "  %-8s unavailable: a test run failed: %s\n", ops->name, e.msg);
		} else if (check_run(b, py, &e) < 0) {
			/* Every execute_python call would fail: not a backend that works. */
			fprintf(f, "  %-8s unavailable: --python %s does not run in the sandbox (%s)\n", ops->name,
				cfg->python, e.msg);
		} else {
			fprintf(f, "  %-8s ok (sandbox made and a test call run; the call took %lld ms)\n", ops->name,
				(long long)took);
			backend_report(b, f);
			usable++;
		}
		backend_free(b);
	}
	backend_shutdown_all(cfg);
	if (!autosel && !backend_find(cfg->backend))
		fprintf(f, "  %-8s unavailable: this build has no %s backend\n", cfg->backend, cfg->backend);
	if (usable)
		fprintf(f, "ready\n");
	else if (would_fetch)
		fprintf(f, "not checked to the end: the first call fetches what --check did not, then runs\n");
	else
		fprintf(f, "no backend works here: calls will fail\n");
	return usable || would_fetch ? 0 : -1;
}
