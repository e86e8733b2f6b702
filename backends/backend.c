#include "backend.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Each backend's ops, named <name>_backend_ops, in the order of table.h. */
#define BACKEND(name) extern const struct backend_ops name##_backend_ops;
#include "table.h"
#undef BACKEND

const struct backend_ops *const backend_table[] = {
#define BACKEND(name) &name##_backend_ops,
#include "table.h"
#undef BACKEND
	NULL,
};

int backend_index(const struct backend_ops *ops)
{
	for (int i = 0; backend_table[i]; i++)
		if (backend_table[i] == ops)
			return i;
	return -1;
}

const struct backend_ops *backend_find(const char *name)
{
	for (size_t i = 0; backend_table[i]; i++)
		if (!strcmp(backend_table[i]->name, name))
			return backend_table[i];
	return NULL;
}

/* The agent host of a backend built on it: the start of its private struct. */
static struct agenthost *host_of(const struct backend *b)
{
	return b->ops->home ? (struct agenthost *)b->priv : NULL;
}

const struct backend_ops *backend_first(const struct config *cfg)
{
	const bool autosel = !strcmp(cfg->backend, "auto");
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (autosel ? !ops->present || ops->present(cfg) : !strcmp(ops->name, cfg->backend))
			return ops;
	}
	return NULL;
}

int backend_config_check(const struct config *cfg, struct err *e)
{
	const bool autosel = !strcmp(cfg->backend, "auto");
	bool state_checked = false, first = true;
	for (size_t i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (!autosel && strcmp(ops->name, cfg->backend))
			continue;
		if (ops->home && !state_checked) {
			if (agenthost_config_check(cfg, e) < 0)
				return -1;
			state_checked = true;
		}
		/* auto: the backend it tries first, the first that present does not rule out. */
		bool tried_first = autosel && first && (!ops->present || ops->present(cfg));
		first = first && !tried_first;
		if ((!autosel || tried_first) && ops->startup_check && ops->startup_check(cfg, e) < 0)
			return -1;
	}
	return 0;
}

int backend_new(struct backend **out, const struct backend_ops *ops, const struct config *cfg, struct err *e)
{
	struct backend *b = calloc(1, sizeof *b);
	if (!b)
		return err_set(e, "out of memory");
	b->priv = calloc(1, ops->priv_size ? ops->priv_size : 1);
	if (!b->priv) {
		free(b);
		return err_set(e, "out of memory");
	}
	b->ops = ops;
	b->cfg = cfg;
	int i = backend_index(ops);
	b->opts = i >= 0 && i < CONFIG_BACKENDS_MAX ? cfg->backend_opts[i] : NULL;
	if (ops->home)
		agenthost_init(host_of(b), ops->home, b->priv, cfg);
	if (ops->init)
		ops->init(b);
	*out = b;
	return 0;
}

int backend_probe(struct backend *b, struct err *e)
{
	return b->ops->probe(b, e);
}

int backend_start(struct backend *b, int cancel_fd, struct err *e)
{
	if (b->started)
		return 0;
	int rc = b->ops->start ? b->ops->start(b, cancel_fd, e) : agenthost_start(host_of(b), e);
	if (host_of(b))
		snprintf(b->sandbox_id, sizeof b->sandbox_id, "%s", host_of(b)->id);
	if (rc == 0)
		b->started = true;
	else
		backend_destroy(b, BACKEND_END_DROP, &(struct err){""});
	return rc;
}

int backend_run(struct backend *b, const struct run_req *rq, struct run_res *rs, struct err *e)
{
	memset(rs, 0, sizeof *rs);
	rs->changed = -1;
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	return b->ops->run ? b->ops->run(b, rq, rs, e) : agenthost_run(host_of(b), rq, rs, e);
}

int backend_put(struct backend *b, const struct run_file *f, struct err *e)
{
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	return b->ops->put ? b->ops->put(b, f, e) : agenthost_put(host_of(b), f, e);
}

int backend_list(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		 struct err *e)
{
	*out = (struct ws_list){0};
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	return b->ops->list ? b->ops->list(b, dir, skip, max, out, e) : agenthost_list(host_of(b), dir, skip, max, out, e);
}

int backend_list_watch(struct backend *b, const char *dir, const char *skip, size_t max, struct ws_list *out,
		       struct err *e)
{
	*out = (struct ws_list){0};
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	if (b->ops->list)
		return b->ops->list(b, dir, skip, max, out, e);
	return agenthost_list_watch(host_of(b), dir, skip, max, out, e);
}

int backend_changes(struct backend *b, struct err *e)
{
	if (!b->started || b->ops->list)
		return WS_CHANGES_UNKNOWN;
	return agenthost_changes(host_of(b), e);
}

int backend_get(struct backend *b, const char *path, size_t max, struct ws_file *out, struct err *e)
{
	*out = (struct ws_file){0};
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	return b->ops->get ? b->ops->get(b, path, max, out, e) : agenthost_get(host_of(b), path, max, out, e);
}

void backend_settle(struct backend *b)
{
	if (!b->started)
		return;
	if (b->ops->settle)
		b->ops->settle(b);
	else if (host_of(b))
		agenthost_settle(host_of(b));
}

int backend_watch_fd(const struct backend *b)
{
	if (!b->started)
		return -1;
	if (b->ops->watch_fd)
		return b->ops->watch_fd(b);
	return host_of(b) ? agenthost_watch_fd(host_of(b)) : -1;
}

bool backend_has_process(const struct backend *b)
{
	if (b->ops->process)
		return true;
	return b->started && host_of(b) && agenthost_has_process(host_of(b));
}

int backend_process(struct backend *b, const struct proc_req *rq, struct proc_res *rs, struct err *e)
{
	*rs = (struct proc_res){0};
	if (!b->started)
		return err_set(e, "the sandbox is not started");
	if (b->ops->process)
		return b->ops->process(b, rq, rs, e);
	if (host_of(b))
		return agenthost_process(host_of(b), rq, rs, e);
	return err_set(e, "the %s backend runs no background processes", b->ops->name);
}

int backend_check(struct backend *b, struct err *e)
{
	if (!b->started)
		return 0;
	if (b->ops->check)
		return b->ops->check(b, e);
	return host_of(b) ? agenthost_check(host_of(b), e) : 0;
}

int backend_destroy(struct backend *b, enum backend_end how, struct err *e)
{
	if (!b)
		return 0;
	int rc = b->ops->destroy ? b->ops->destroy(b, how, e) : agenthost_destroy(host_of(b), how, e);
	b->started = false;
	b->sandbox_id[0] = '\0';
	return rc;
}

void backend_report(struct backend *b, FILE *f)
{
	if (b->ops->report)
		b->ops->report(b, f);
	else
		agenthost_report(host_of(b), f);
}

void backend_reap_all(const struct config *cfg)
{
	for (size_t i = 0; backend_table[i]; i++)
		if (backend_table[i]->reap)
			backend_table[i]->reap(cfg);
}

void backend_shutdown_all(const struct config *cfg)
{
	for (size_t i = 0; backend_table[i]; i++)
		if (backend_table[i]->shutdown)
			backend_table[i]->shutdown(cfg);
}

void backend_free(struct backend *b)
{
	if (!b)
		return;
	backend_destroy(b, BACKEND_END_SHUTDOWN, &(struct err){""});
	free(b->priv);
	free(b);
}
