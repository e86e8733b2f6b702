#include "cli.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../agent/proto.h"
#include "../backends/backend.h"
#include "../backends/hostfs/wsdir.h"
#include "../backends/run/netpolicy.h"
#include "base/gpu.h"
#include "base/opt.h"

#define F(field) OPT_FIELD(struct config, field)

/* {backends} in a help text: the backends' names, in auto's order. */
static const struct opt opts[] = {
	{"backend", "SANDBOX_BACKEND", OPT_STR, F(backend), "auto",
	 "auto, or one of {backends} (auto tries them in that order)"},
	{"timeout", "SANDBOX_TIMEOUT", OPT_SECONDS, F(timeout_s), "60", "default timeout of a call, seconds"},
	{"max-timeout", "SANDBOX_MAX_TIMEOUT", OPT_SECONDS, F(max_timeout_s), "600",
	 "largest timeout_s a call may ask for, seconds"},
	{"max-background", "SANDBOX_MAX_BACKGROUND", OPT_COUNT, F(max_background), "8",
	 "background processes (background: true) that may run at once, 0 to 64 (0: none)"},
	{"max-sessions", "SANDBOX_MAX_SESSIONS", OPT_COUNT, F(max_sessions), "8",
	 "Python sessions (execute_python with session) that may live at once, 0 to 64 (0: none)"},
	{"background-timeout", "SANDBOX_BACKGROUND_TIMEOUT", OPT_SECONDS, F(bg_timeout_s), "3600",
	 "default timeout of a background process, seconds"},
	{"max-background-timeout", "SANDBOX_MAX_BACKGROUND_TIMEOUT", OPT_SECONDS, F(bg_max_timeout_s), "86400",
	 "largest timeout_s a background process may ask for, seconds"},
	{"output-cap", "SANDBOX_OUTPUT_CAP", OPT_SIZE, F(output_cap), "64K",
	 "bytes of stdout and of stderr kept (head and tail); past it the full text is saved in the workspace"},
	{"result-max", "SANDBOX_RESULT_MAX", OPT_SIZE, F(result_max), "32K",
	 "largest result of a call, serialized (text and structured content together)"},
	{"spill-max", "SANDBOX_SPILL_MAX", OPT_SIZE, F(spill_max), "100M",
	 "largest file a cut stream is saved to in the workspace"},
	{"memory", "SANDBOX_MEMORY", OPT_SIZE, F(memory), "512M", "memory of the whole sandbox"},
	{"cpus", "SANDBOX_CPUS", OPT_NUMBER, F(cpus), "1", "CPUs the sandbox may use"},
	{"pids", "SANDBOX_PIDS", OPT_COUNT, F(pids), "256", "processes the sandbox may have"},
	{"open-files", "SANDBOX_OPEN_FILES", OPT_COUNT, F(open_files), "1024", "open files per process"},
	{"file-size", "SANDBOX_FILE_SIZE", OPT_SIZE, F(file_size), "1G", "largest file a process may write"},
	{"tmp-size", "SANDBOX_TMP_SIZE", OPT_SIZE, F(tmp_size), "128M", "size of the sandbox's /tmp"},
	{"workspace-size", "SANDBOX_WORKSPACE_SIZE", OPT_SIZE, F(workspace_size), "1G",
	 "disk quota of the workspace (0: none); --check says how it is enforced here"},
	{"network", "SANDBOX_NETWORK", OPT_NET, F(network), "install",
	 "none | install (only package installs reach the network) | all (the code uses the host's network; on "
	 "local that is the host's own, with its loopback and abstract unix sockets)"},
	{"wheelhouse", "SANDBOX_WHEELHOUSE", OPT_STR, F(wheelhouse), "",
	 "folder of wheels; requirements install from it alone, with no network"},
	{"index-url", "SANDBOX_INDEX_URL", OPT_STR, F(index_url), "https://pypi.org/simple",
	 "package index requirements install from (the install step reaches it alone)"},
	{"index-hosts", "SANDBOX_INDEX_HOSTS", OPT_STR, F(index_hosts), "",
	 "more hosts the install step may reach, comma-separated (with PyPI: files.pythonhosted.org)"},
	{"allow-hosts", "SANDBOX_ALLOW_HOSTS", OPT_STR, F(allow_hosts), "",
	 "hosts the code itself reaches, through the server's filtering proxy and nothing else: comma-separated "
	 "names (api.github.com), *.NAME for NAME's subdomains, addresses, each with :PORT if not 443 and 80 "
	 "(with --network install; on Daytona the rule is by address, and wildcards are refused)"},
	{"idle-timeout", "SANDBOX_IDLE_TIMEOUT", OPT_SECONDS, F(idle_timeout_s), "1800",
	 "remove a sandbox unused this long, seconds (0: never)"},
	{"queue", "SANDBOX_QUEUE", OPT_COUNT, F(queue_max), "16", "calls that may wait behind the running one"},
	{"max-message", "SANDBOX_MAX_MESSAGE", OPT_SIZE, F(max_message), "16M", "longest request line accepted"},
	{"keep", "SANDBOX_KEEP", OPT_BOOL, F(keep), "false", "keep the sandbox and workspace at shutdown"},
	{"gpu", "SANDBOX_GPU", OPT_BOOL, F(gpu), "false",
	 "give the sandbox the NVIDIA GPUs (local: the driver's device nodes; docker: the engine's nvidia "
	 "driver); refused where there is none"},
	{"shutdown-budget", "SANDBOX_SHUTDOWN_BUDGET", OPT_SECONDS, F(shutdown_budget_s), "10",
	 "on stdin EOF, seconds the requests already read may take to be answered (0: none); then "
	 "shutdown"},
	{"workspace", "SANDBOX_WORKSPACE", OPT_STR, F(workspace_dir), "",
	 "host folder that is the workspace, kept across restarts (Daytona copies it in, and each call's "
	 "changes back; on kubernetes, the name of a PersistentVolumeClaim); cleanup_sandbox empties it"},
	{"mount", "SANDBOX_MOUNT", OPT_MOUNT, F(mounts), "",
	 "HOST_DIR:/mnt/NAME[:rw], repeatable (env: ';' between): a host folder the code sees, read-only unless :rw"},
	{"state-dir", "SANDBOX_STATE_DIR", OPT_STR, F(state_dir), "",
	 "where sandboxes made on this host keep their folders (default $TMPDIR/sandbox-mcp-UID)"},
	{"python", "SANDBOX_PYTHON", OPT_STR, F(python), "python3", "Python interpreter inside the sandbox"},
	{"sandbox-ahead", "SANDBOX_AHEAD", OPT_BOOL, F(sandbox_ahead), "true",
	 "local: make the sandbox before the first call and after cleanup_sandbox, so that calls do not wait "
	 "for it (--no-sandbox-ahead: when a call comes)"},
	{"python-prestart", "SANDBOX_PYTHON_PRESTART", OPT_BOOL, F(python_prestart), "true",
	 "local and Docker: start each execute_python call's interpreter ahead of it, after the call before "
	 "(--no-python-prestart: when the call comes)"},
	{"python-preload", "SANDBOX_PYTHON_PRELOAD", OPT_STR, F(python_preload), "",
	 "modules the interpreter started ahead imports before the call, comma-separated (e.g. numpy,pandas)"},
	{"log-level", "SANDBOX_LOG_LEVEL", OPT_LEVEL, F(log_level), "info",
	 "stderr log level: debug info notice warning error"},
	{"sandbox-uid", "SANDBOX_UID", OPT_COUNT, F(sandbox_uid), "65534",
	 "host uid of the sandbox user when the server runs as root"},
};

/* One table of options and the struct its fields are in: the server's, or a backend's. */
struct group {
	const struct opt *v;
	size_t n;
	void *base;
	int (*check)(const void *opts, const struct config *cfg, struct err *e);
};

#define GROUPS_MAX (CONFIG_BACKENDS_MAX + 1)

/* The server's options, then each backend's (allocated into cfg). The count, or -1. */
static int groups_of(struct config *cfg, struct group *g, struct err *e)
{
	int n = 0;
	g[n++] = (struct group){opts, sizeof opts / sizeof opts[0], cfg, NULL};
	for (int i = 0; backend_table[i]; i++) {
		const struct backend_ops *ops = backend_table[i];
		if (i >= CONFIG_BACKENDS_MAX)
			return err_set(e, "too many backends in this build");
		if (!ops->nopts)
			continue;
		if (!(cfg->backend_opts[i] = calloc(1, ops->opts_size)))
			return err_set(e, "out of memory");
		g[n++] = (struct group){ops->opts, ops->nopts, cfg->backend_opts[i], ops->opts_check};
	}
	return n;
}

static const struct opt *find_opt(const struct group *g, int ng, const char *name, size_t len, void **base)
{
	for (int k = 0; k < ng; k++)
		for (size_t i = 0; i < g[k].n; i++)
			if (strlen(g[k].v[i].flag) == len && !strncmp(g[k].v[i].flag, name, len)) {
				*base = g[k].base;
				return &g[k].v[i];
			}
	return NULL;
}

/* The defaults, then the environment. */
static int load_defaults(const struct group *g, int ng, struct err *e)
{
	for (int k = 0; k < ng; k++)
		for (size_t i = 0; i < g[k].n; i++)
			if (opt_set(g[k].base, &g[k].v[i], g[k].v[i].def, g[k].v[i].flag, e) < 0)
				return -1;
	for (int k = 0; k < ng; k++)
		for (size_t i = 0; i < g[k].n; i++) {
			const char *v = getenv(g[k].v[i].env);
			if (v && opt_set(g[k].base, &g[k].v[i], v, g[k].v[i].env, e) < 0)
				return -1;
		}
	return 0;
}

/* -h, -V and --check; 1 when a is one of them. */
static int mode_flag(const char *a, int *mode)
{
	if (!strcmp(a, "-h") || !strcmp(a, "--help"))
		*mode = MODE_HELP;
	else if (!strcmp(a, "-V") || !strcmp(a, "--version"))
		*mode = *mode == MODE_HELP ? *mode : MODE_VERSION;
	else if (!strcmp(a, "--check"))
		*mode = *mode == MODE_SERVE ? MODE_CHECK : *mode;
	else
		return 0;
	return 1;
}

/* The flags of argv, over the environment's values. */
static int load_flags(struct config *cfg, const struct group *g, int ng, int argc, char **argv, bool *timeout_set,
		      struct err *e)
{
	bool mount_flag = false;
	int mode = MODE_SERVE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (mode_flag(a, &mode))
			continue;
		if (strncmp(a, "--", 2) != 0)
			return err_set(e, "unexpected argument '%s' (see --help)", a);
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t n = eq ? (size_t)(eq - name) : strlen(name);
		void *base = NULL;
		const struct opt *o = find_opt(g, ng, name, n, &base);
		const char *val = eq ? eq + 1 : NULL;
		if (!o && !eq && !strncmp(name, "no-", 3)) {
			o = find_opt(g, ng, name + 3, n - 3, &base);
			val = "false";
			if (o && o->type != OPT_BOOL)
				o = NULL;
		}
		if (!o)
			return err_set(e, "unknown option '%s' (see --help)", a);
		if (!val && o->type == OPT_BOOL)
			val = "true";
		if (!val && i + 1 >= argc)
			return err_set(e, "option '%s' needs a value", a);
		if (!val)
			val = argv[++i];
		char from[64];
		snprintf(from, sizeof from, "--%s", o->flag);
		if (o->type == OPT_MOUNT && !mount_flag)
			cfg->mounts.n = 0; /* flags win over the environment's list */
		mount_flag = mount_flag || o->type == OPT_MOUNT;
		if (opt_set(base, o, val, from, e) < 0)
			return -1;
		*timeout_set = *timeout_set || !strcmp(o->flag, "timeout");
	}
	return mode;
}

/* --gpu: where the backend's GPUs are this machine's, they must be there. Docker's are the
 * engine's host's (the server may run in a container that has none): its engine says so at the
 * first sandbox. Daytona gives GPUs only to sandboxes built from a Dockerfile, not from the
 * snapshots this server makes them from. */
static int gpu_check(const struct config *c, struct err *e)
{
	char paths[GPU_NODES_MAX][64];
	struct err ge = {""};
	const char *key = getenv("DAYTONA_API_KEY");
	if (!strcmp(c->backend, "daytona") || (!strcmp(c->backend, "auto") && key && *key))
		return err_set(e, "--gpu: the daytona backend gives no GPU (Daytona's API takes gpu only for a sandbox "
				  "built from a Dockerfile, and this server makes its sandboxes from snapshots)%s",
			       strcmp(c->backend, "auto") ? "" : "; with DAYTONA_API_KEY set, auto tries it first: "
								  "choose --backend docker or local");
	if (!strcmp(c->backend, "kubernetes"))
		return err_set(e, "--gpu: the kubernetes backend gives no GPU yet (its pods ask for no device)");
	if (!strcmp(c->backend, "local") && gpu_nodes(paths, GPU_NODES_MAX, &ge) < 0)
		return err_set(e, "--gpu: %s", ge.msg);
	return 0;
}

static int check_backend(const char *name, struct err *e)
{
	char list[256] = "";
	size_t used = 0;
	if (!strcmp(name, "auto") || backend_find(name))
		return 0;
	for (int i = 0; backend_table[i] && used < sizeof list; i++)
		used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", backend_table[i]->name);
	return err_set(e, "--backend: '%s' is not auto or one of %s", name, list);
}

/* A whole-number or size option's bounds: one text for every one, naming it and its bound. */
struct bound {
	const char *flag;
	uint64_t v, min, max; /* max 0: none */
	bool size;            /* said as a size (1K), else as a number */
};

static const char *bound_text(uint64_t v, bool size, char *buf, size_t n)
{
	static const char *const units[] = {"", "K", "M", "G", "T"};
	int u = 0;
	while (size && u < 4 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, "%llu%s", (unsigned long long)v, units[u]);
	return buf;
}

static int check_bound(const struct bound *b, struct err *e)
{
	char v[32], lo[32], hi[32];
	bound_text(b->v, b->size, v, sizeof v);
	bound_text(b->min, b->size, lo, sizeof lo);
	if (b->max && (b->v < b->min || b->v > b->max))
		return err_set(e, "--%s must be between %s and %s (it is %s)", b->flag, lo,
			       bound_text(b->max, b->size, hi, sizeof hi), v);
	if (b->v < b->min)
		return err_set(e, "--%s must be at least %s (it is %s)", b->flag, lo, v);
	return 0;
}

static int check_limits(const struct config *c, struct err *e)
{
	const struct bound bounds[] = {
		{"output-cap", c->output_cap, 1024, 64u << 20, true},
		{"result-max", c->result_max, 4096, 256u << 20, true},
		{"memory", c->memory, 16u << 20, 0, true},
		{"pids", c->pids, 8, 0, false},
		{"open-files", c->open_files, 16, 0, false},
		{"queue", c->queue_max, 1, 0, false},
		{"max-message", c->max_message, 4096, 0, true},
		{"tmp-size", c->tmp_size, 1u << 20, 0, true},
	};
	for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
		if (check_bound(&bounds[i], e) < 0)
			return -1;
	if (c->timeout_s <= 0 || c->max_timeout_s <= 0)
		return err_set(e, "--timeout and --max-timeout must be above 0");
	if (c->timeout_s > c->max_timeout_s)
		return err_set(e, "--timeout (%g) is above --max-timeout (%g)", c->timeout_s, c->max_timeout_s);
	if (c->max_background > 64)
		return err_set(e, "--max-background must be at most 64 (it is %llu)", (unsigned long long)c->max_background);
	if (c->max_sessions > 64)
		return err_set(e, "--max-sessions must be at most 64 (it is %llu)", (unsigned long long)c->max_sessions);
	if (c->bg_timeout_s <= 0 || c->bg_timeout_s > c->bg_max_timeout_s)
		return err_set(e, "--background-timeout (%g) must be above 0 and at most --max-background-timeout (%g)",
			       c->bg_timeout_s, c->bg_max_timeout_s);
	if (c->cpus <= 0 || c->cpus > 1024)
		return err_set(e, "--cpus must be above 0 and at most 1024 (it is %g)", c->cpus);
	if (c->workspace_size && c->workspace_size < (16u << 20))
		return err_set(e, "--workspace-size must be 0 (no quota) or at least 16M");
	if (c->sandbox_uid == 0 || c->sandbox_uid > 0xfffffffe)
		return err_set(e, "--sandbox-uid must be a non-root uid");
	return 0;
}

static int check_values(const struct config *c, const struct group *g, int ng, struct err *e)
{
	struct netpolicy pol;
	struct err pe = {""};
	if (check_backend(c->backend, e) < 0 || check_limits(c, e) < 0)
		return -1;
	if (!c->python[0] || strchr(c->python, ' '))
		return err_set(e, "--python must name one program");
	if (strspn(c->python_preload, AG_MODULE_CHARS) != strlen(c->python_preload))
		return err_set(e, "--python-preload: module names (letters, digits, '_' and '.') separated by commas");
	if (netpolicy_for_index(&pol, c->index_url, c->index_hosts, &pe) < 0)
		return err_set(e, "--index-url / --index-hosts: %s", pe.msg);
	if (netpolicy_parse_allow(&pol, c->allow_hosts, &pe) < 0)
		return err_set(e, "%s", pe.msg);
	if (pol.nhosts && c->network != NET_INSTALL)
		return err_set(e, "--allow-hosts needs --network install (with --network %s the code %s)",
			       config_net_name(c->network),
			       c->network == NET_NONE ? "may reach nothing" : "already reaches every host");
	if (c->gpu && gpu_check(c, e) < 0)
		return -1;
	/* Where it names the backend's own store (workspace_claim), its opts_check checks it. */
	if (c->workspace_dir[0] && !c->workspace_claim && c->workspace_dir[0] != '/')
		return err_set(e, "--workspace must be an absolute path");
	if (c->workspace_dir[0] && !c->workspace_claim && strlen(c->workspace_dir) > PATH_MAX - 256)
		return err_set(e, "--workspace: the path is too long");
	/* Taken only when new, empty or a workspace already: cleanup_sandbox empties it. */
	if (c->workspace_dir[0] && !c->workspace_claim && wsdir_check(c->workspace_dir, e) < 0)
		return -1;
	if (mountspec_check_set(c->mounts.v, c->mounts.n, &pe) < 0)
		return err_set(e, "%s", pe.msg);
	for (int k = 0; k < ng; k++)
		if (g[k].check && g[k].check(g[k].base, c, e) < 0)
			return -1;
	return 0;
}

int cli_load(struct config *cfg, int argc, char **argv, struct err *e)
{
	struct group g[GROUPS_MAX];
	memset(cfg, 0, sizeof *cfg);
	int ng = groups_of(cfg, g, e);
	if (ng < 0 || load_defaults(g, ng, e) < 0)
		return -1;
	bool timeout_set = getenv("SANDBOX_TIMEOUT") != NULL;
	int mode = load_flags(cfg, g, ng, argc, argv, &timeout_set, e);
	if (mode < 0 || mode == MODE_HELP || mode == MODE_VERSION)
		return mode;
	/* A lower --max-timeout also lowers the default timeout, unless that was set too. */
	if (!timeout_set && cfg->timeout_s > cfg->max_timeout_s)
		cfg->timeout_s = cfg->max_timeout_s;
	/* --workspace names the backend's own store where that backend runs; auto then stays on it,
	 * for any other would read the name as a host folder. */
	const struct backend_ops *first = backend_first(cfg);
	if (cfg->workspace_dir[0] && first && first->workspace_claim) {
		cfg->workspace_claim = true;
		snprintf(cfg->backend, sizeof cfg->backend, "%s", first->name);
	}
	return check_values(cfg, g, ng, e) < 0 ? -1 : mode;
}

static void print_help_text(FILE *f, const char *help)
{
	const char *at = strstr(help, "{backends}");
	if (!at) {
		fprintf(f, "%s\n", help);
		return;
	}
	fprintf(f, "%.*s", (int)(at - help), help);
	for (int i = 0; backend_table[i]; i++)
		fprintf(f, "%s%s", i ? ", " : "", backend_table[i]->name);
	fprintf(f, "%s\n", at + strlen("{backends}"));
}

static void print_opts(FILE *f, const struct opt *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char left[64];
		snprintf(left, sizeof left, v[i].type == OPT_BOOL ? "--%s" : "--%s VALUE", v[i].flag);
		fprintf(f, "      %-24s ", left);
		print_help_text(f, v[i].help);
		fprintf(f, "      %-24s env %s, default %s\n", "", v[i].env, *v[i].def ? v[i].def : "(none)");
	}
}

void cli_usage(FILE *f)
{
	fprintf(f, "Usage: sandbox-mcp [OPTION]...\n"
		   "An MCP server (stdio) that runs Python and shell code in an isolated sandbox with a\n"
		   "persistent workspace. Tools: execute_python, execute_bash_commands, cleanup_sandbox.\n\n"
		   "  -h, --help            show this help and exit\n"
		   "  -V, --version         show the version and exit\n"
		   "      --check           say which backends work here and which limits are enforced\n\n"
		   "Options (each also read from its environment variable; flags win):\n");
	print_opts(f, opts, sizeof opts / sizeof opts[0]);
	for (int i = 0; backend_table[i]; i++)
		print_opts(f, backend_table[i]->opts, backend_table[i]->nopts);
	/* The variables the backends read besides the options; none of them reaches the sandbox. */
	fprintf(f, "\nEnvironment (besides the SANDBOX_* variables above):\n");
	for (int i = 0; backend_table[i]; i++)
		if (backend_table[i]->env_help)
			fputs(backend_table[i]->env_help, f);
	fprintf(f, "  TMPDIR               where the default state folder goes (default /tmp)\n");
	fprintf(f, "\nSizes take K, M, G suffixes (powers of 1024). Logs go to stderr; stdout carries only\n"
		   "the protocol. Exit status: 0 on a clean shutdown, 2 on a usage error, 1 otherwise.\n");
}
