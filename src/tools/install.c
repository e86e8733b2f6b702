/*
 * The install step of execute_python: pip, with each requirement one argument of its own,
 * in an environment of its own, reaching only what the network policy allows (the backend
 * runs it in an instance of its own on the same workspace when it may use the network).
 */
#include "install.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "output.h"
#include "requirements.h"

/*
 * The install step's environment: no PYTHONPATH and no pip configuration, so that nothing the
 * workspace holds (a planted sitecustomize.py, a pip.conf under $HOME) runs or steers pip while
 * the step may have the network. Its temporary files go to the workspace, not the sandbox's
 * small /tmp: pip unpacks a whole package there before moving it into place.
 */
static const char *const install_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp",
	"USER=sandbox",
	"LOGNAME=sandbox",
	"LANG=C.UTF-8",
	"TMPDIR=" TOOLS_TMP,
	"PIP_CONFIG_FILE=/dev/null",
	"PIP_DISABLE_PIP_VERSION_CHECK=1",
	"PIP_NO_INPUT=1",
	"PIP_ROOT_USER_ACTION=ignore",
	NULL,
};

/* True when every requirement asked for was installed in this sandbox before. */
static bool all_installed(struct sandbox *sb, const json_t *reqs)
{
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) if (!json_object_get(sb->installed, json_string_value(r))) return false;
	return true;
}

/* The install step failed: its result, with pip's own words. */
static json_t *install_failed(struct call_ctx *c, const struct run_res *rs, struct capture *col)
{
	size_t ol = 0, el = 0;
	char *out = output_text(&col->out[0], NULL, &ol), *err = output_text(&col->out[1], NULL, &el);
	const char *pip = err && el ? err : out ? out : "";
	size_t n = strlen(pip) + sizeof rs->unreachable + 384;
	char *msg = malloc(n);
	json_t *r = NULL;
	if (msg) {
		if (rs->unreachable[0])
			snprintf(msg, n, "Failed to install requirements: the package index could not be reached (%s), "
				 "so pip was stopped. Check --index-url and the host's network, or %s.\n%s", rs->unreachable,
				 /* No pod sees a folder of this host. */
				 sandbox_backend(c->sb) && !strcmp(sandbox_backend(c->sb), "kubernetes")
					 ? "use an image that has the packages (--kube-image)"
					 : "give --wheelhouse DIR to install from a folder of wheels with no network",
				 pip);
		else if (rs->timed_out)
			snprintf(msg, n, "Failed to install requirements: timed out after %g s\n%s", c->timeout, pip);
		else
			snprintf(msg, n, "Failed to install requirements: %s", pip);
		r = call_early_result(c, rs->timed_out ? 124 : 1, msg, NULL, rs->timed_out);
	}
	free(msg);
	free(out);
	free(err);
	return r;
}

/* pip's command line: its options, then each requirement an argument of its own after "--",
 * where nothing can re-split it or make it an option. trusted: room for a plain-HTTP index's
 * host. Caller frees; NULL when out of memory. */
static const char **pip_argv(const struct config *cfg, const json_t *reqs, bool offline, char *trusted, size_t tn)
{
	static const char *const fixed[] = {"-I", "-m", "pip", "install", "--no-warn-script-location", "--upgrade",
					    "--no-cache-dir", "--target", TOOLS_PACKAGES};
	const char **argv = calloc(json_array_size(reqs) + 24, sizeof *argv);
	size_t a = 0, i;
	const json_t *r;
	if (!argv)
		return NULL;
	argv[a++] = cfg->python;
	for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++)
		argv[a++] = fixed[k];
	if (offline) {
		argv[a++] = "--no-index";
	} else {
		argv[a++] = "--only-binary";
		argv[a++] = ":all:";
		argv[a++] = "--index-url";
		argv[a++] = cfg->index_url;
		/* pip ignores a plain-HTTP index unless told to trust its host. */
		if (!strncasecmp(cfg->index_url, "http://", 7)) {
			snprintf(trusted, tn, "%.*s", (int)strcspn(cfg->index_url + 7, "/?#"), cfg->index_url + 7);
			argv[a++] = "--trusted-host";
			argv[a++] = trusted;
		}
	}
	if (cfg->wheelhouse[0]) {
		argv[a++] = "--find-links";
		argv[a++] = "/wheelhouse";
	}
	argv[a++] = "--";
	json_array_foreach(reqs, i, r) argv[a++] = json_string_value(r);
	argv[a] = NULL;
	return argv;
}

json_t *install_requirements(struct call_ctx *c, const json_t *reqs)
{
	const struct config *cfg = c->cfg;
	if (!json_array_size(reqs) || all_installed(c->sb, reqs))
		return NULL;
	bool offline = cfg->wheelhouse[0] || cfg->network == NET_NONE;
	/* Nothing pip could install from: said at once, without starting it. */
	if (cfg->network == NET_NONE && !cfg->wheelhouse[0]) {
		char names[400] = "", msg[600];
		size_t used = 0, i;
		const json_t *r;
		json_array_foreach(reqs, i, r) if (used < sizeof names)
			used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", json_string_value(r));
		snprintf(msg, sizeof msg, "Failed to install requirements: package installs are off here (--network none, "
			 "and no --wheelhouse to install from), so %s%s could not be installed; the script was not run",
			 names, used >= sizeof names ? "..." : "");
		return call_early_result(c, 1, msg, NULL, false);
	}
	size_t i;
	const json_t *r;
	json_array_foreach(reqs, i, r) {
		char why[300], msg[800];
		if (req_check(json_string_value(r), json_string_length(r), !offline, why, sizeof why) < 0) {
			snprintf(msg, sizeof msg, "Failed to install requirements: '%.300s' is not allowed: %s",
				 json_string_value(r), why);
			return call_early_result(c, 1, msg, NULL, false);
		}
	}
	char trusted[300];
	const char **argv = pip_argv(cfg, reqs, offline, trusted, sizeof trusted);
	if (!argv)
		return call_early_result(c, 1, "Failed to install requirements: out of memory", "out of memory", false);

	struct capture col;
	if (capture_init(&col, cfg->output_cap, c->tc->on_output, c->tc->ctx) < 0) {
		free(argv);
		return call_early_result(c, 1, "Failed to install requirements: out of memory", "out of memory", false);
	}
	/* Makes the folder of pip's temporary files; its contents say what it is. */
	static const char keep[] = "Temporary files of package installs; removed with the sandbox.\n";
	struct run_file f = {TOOLS_TMP "/README", keep, sizeof keep - 1, 0644};
	/* Not in the workspace: a name must never resolve to a folder the code made there. */
	struct run_req rq = {.argv = argv, .env = install_env, .cwd = "/tmp", .files = &f, .nfiles = 1,
			     .network = !offline, .deadline_ms = c->deadline, .cancel_fd = c->tc->cancel_fd,
			     .cap = cfg->output_cap, .on_output = capture_add, .ctx = &col};
	struct run_res rs = {0};
	struct err e = {""};
	int rc = sandbox_run(c->sb, &rq, &rs, c->notice, &e);
	call_add_notice(c, rs.notice);
	free(argv);
	json_t *res = NULL;
	if (rc < 0) {
		char msg[sizeof e.msg + 64];
		snprintf(msg, sizeof msg, "Failed to install requirements: %s", e.msg);
		res = call_early_result(c, 1, msg, e.msg, false);
	} else if (rs.cancelled) {
		c->tc->cancelled = true;
	} else if (rs.exit_code != 0 || rs.timed_out || rs.stopped) {
		res = install_failed(c, &rs, &col);
	} else {
		json_array_foreach(reqs, i, r) json_object_set_new(c->sb->installed, json_string_value(r), json_true());
	}
	capture_free(&col);
	return res;
}
