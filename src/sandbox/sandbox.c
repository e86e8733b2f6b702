#include "sandbox.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>

#include "../base/clock.h"
#include "../base/log.h"

void sandbox_init(struct sandbox *s, const struct config *cfg)
{
	memset(s, 0, sizeof *s);
	s->cfg = cfg;
	s->installed = json_object();
	s->outputs_seen = json_object();
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
	return s->cfg->workspace_dir[0] && s->b->ops->workspace_dir
		       ? "the --workspace folder as the host holds it (its files stay; processes and /tmp do not)"
		       : "an empty workspace";
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

int sandbox_ensure(struct sandbox *s, int cancel_fd, char *notice, struct err *e)
{
	if (s->b) {
		/* A sandbox that died, or whose workspace went, since the last call is replaced. */
		struct err ce = {""};
		if (backend_check(s->b, &ce) == 0) {
			take(s, notice);
			return 0;
		}
		lost(s, ce.msg);
	}
	char reasons[sizeof e->msg] = "";
	size_t used = 0;
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
			take(s, notice);
			return 0;
		}
		if (rc == BACKEND_CANCELLED) {
			log_msg(LOG_INFO, "backend %s: making the sandbox was cancelled", ops->name);
			return BACKEND_CANCELLED;
		}
		/* auto passing over a backend that is not set up here is the normal case. */
		log_msg(!autosel ? LOG_ERROR : rc == BACKEND_ABSENT ? LOG_INFO : LOG_WARNING, "backend %s: %s",
			ops->name, be.msg);
		used += (size_t)snprintf(reasons + used, sizeof reasons - (used < sizeof reasons ? used : sizeof reasons),
					 "%s%s: %s", used ? "; " : "", ops->name, be.msg);
		if (used >= sizeof reasons)
			used = sizeof reasons - 1;
	}
	if (!any)
		snprintf(reasons, sizeof reasons, "%s: this build has no %s backend", s->cfg->backend, s->cfg->backend);
	return err_set(e, "Failed to initialize sandbox engine: %s", reasons);
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

/* May a sandbox be made ahead on ops, or must the next call choose (1), or is ops not there
 * for auto to pass over (0, auto only)? Nothing is made; only a local probe may run. */
static int ahead_blocked(const struct sandbox *s, const struct backend_ops *ops, bool autosel)
{
	if (ops->ahead)
		return -1;
	if (ops->present)
		return autosel && !ops->present(s->cfg) ? 0 : 1;
	struct backend *b;
	struct err e = {""};
	if (backend_new(&b, ops, s->cfg, &e) < 0)
		return 1;
	int rc = backend_probe(b, &e);
	backend_free(b);
	return autosel && rc != 0 ? 0 : 1;
}

int sandbox_prepare(struct sandbox *s, int cancel_fd, const struct run_req *prime, int call_fd)
{
	if (s->b)
		return 0;
	if (!sandbox_ahead_due(s))
		return 1;
	s->ahead_made = true;
	const bool autosel = !strcmp(s->cfg->backend, "auto");
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, s->cfg->backend))
			continue;
		int blocked = ahead_blocked(s, ops, autosel);
		if (blocked >= 0) {
			if (blocked)
				return 1;
			continue;
		}
		struct err be = {""};
		int rc = try_backend(s, ops, cancel_fd, &be);
		if (rc == 0) {
			log_msg(LOG_INFO, "sandbox %s made ahead on the %s backend", s->b->sandbox_id, ops->name);
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
	if (s->b)
		return 0;
	if (!s->cfg->workspace_dir[0])
		return 1;
	char pending[SANDBOX_NOTICE_MAX], notice[SANDBOX_NOTICE_MAX] = "";
	snprintf(pending, sizeof pending, "%s", s->pending);
	int rc = sandbox_ensure(s, -1, notice, e);
	snprintf(s->pending, sizeof s->pending, "%s", pending);
	return rc < 0 ? -1 : 0;
}

int sandbox_list(struct sandbox *s, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e)
{
	*out = (struct ws_list){0};
	int ready = for_reading(s, e);
	if (ready)
		return ready < 0 ? -1 : 0;
	int rc = backend_list(s->b, dir, skip, max, out, e);
	if (rc == BACKEND_LOST) {
		lost(s, e->msg);
		return -1;
	}
	return rc;
}

int sandbox_get(struct sandbox *s, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	*out = (struct ws_file){.err = ENOENT};
	int ready = for_reading(s, e);
	if (ready)
		return ready < 0 ? -1 : 0;
	int rc = backend_get(s->b, path, max, out, e);
	if (rc == BACKEND_LOST) {
		lost(s, e->msg);
		return -1;
	}
	return rc;
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
		 kept ? "on the same --workspace folder (its files and packages stay; processes and /tmp do not)"
		      : "with an empty workspace (earlier files and packages are gone)");
	drop(s, BACKEND_END_DROP, &(struct err){""});
}

void sandbox_shutdown(struct sandbox *s)
{
	/* One made ahead and never used leaves nothing behind, --keep or not. */
	drop(s, s->b && !s->used ? BACKEND_END_DROP : BACKEND_END_SHUTDOWN, &(struct err){""});
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

int sandbox_check_all(const struct config *cfg, FILE *f)
{
	int usable = 0;
	const bool autosel = !strcmp(cfg->backend, "auto");
	fprintf(f, "backends (%s):\n", autosel ? "auto tries them in this order" : "as configured");
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, cfg->backend))
			continue;
		struct backend *b = NULL;
		struct err e = {""};
		if (backend_new(&b, ops, cfg, &e) < 0 || backend_probe(b, &e) < 0 || backend_start(b, -1, &e) < 0) {
			fprintf(f, "  %-8s unavailable: %s\n", ops->name, e.msg);
			backend_free(b);
			continue;
		}
		static const char *const argv[] = {"true", NULL};
		static const char *const env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
		struct run_req rq = {.argv = argv, .env = env, .cwd = WORKSPACE, .deadline_ms = clock_ms() + 30000,
				     .cancel_fd = -1, .cap = 4096};
		struct run_res rs;
		int64_t t0 = clock_ms();
		int rc = backend_run(b, &rq, &rs, &e);
		if (rc != 0 || rs.exit_code != 0) {
			fprintf(f, "  %-8s unavailable: a test run failed: %s\n", ops->name, rc ? e.msg : "exit code not 0");
		} else {
			fprintf(f, "  %-8s ok (sandbox made and a test call run; the call took %lld ms)\n", ops->name,
				(long long)(clock_ms() - t0));
			backend_report(b, f);
			usable++;
		}
		backend_free(b);
	}
	if (!autosel && !backend_find(cfg->backend))
		fprintf(f, "  %-8s unavailable: this build has no %s backend\n", cfg->backend, cfg->backend);
	fprintf(f, "%s\n", usable ? "ready" : "no backend works here: calls will fail");
	return usable ? 0 : -1;
}
