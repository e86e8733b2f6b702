#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "../../backends/agenthost/proxy.h"

enum opt_type { T_STR, T_SIZE, T_COUNT, T_SECONDS, T_NUMBER, T_BOOL, T_NET, T_LEVEL, T_MOUNT };

struct opt {
	const char *flag;   /* without the leading "--" */
	const char *env;
	enum opt_type type;
	size_t off, size;   /* field in struct config; size for strings */
	const char *def;
	const char *help;
};

#define F(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)

static const struct opt opts[] = {
	{"backend", "SANDBOX_BACKEND", T_STR, F(backend), "auto",
	 "auto, daytona, docker or local (auto tries them in that order)"},
	{"timeout", "SANDBOX_TIMEOUT", T_SECONDS, F(timeout_s), "60", "default timeout of a call, seconds"},
	{"max-timeout", "SANDBOX_MAX_TIMEOUT", T_SECONDS, F(max_timeout_s), "600",
	 "largest timeout_s a call may ask for, seconds"},
	{"output-cap", "SANDBOX_OUTPUT_CAP", T_SIZE, F(output_cap), "64K",
	 "bytes of stdout and of stderr kept (head and tail); past it the full text is saved in the workspace"},
	{"result-max", "SANDBOX_RESULT_MAX", T_SIZE, F(result_max), "32K",
	 "largest result of a call, serialized (text and structured content together)"},
	{"spill-max", "SANDBOX_SPILL_MAX", T_SIZE, F(spill_max), "100M",
	 "largest file a cut stream is saved to in the workspace"},
	{"memory", "SANDBOX_MEMORY", T_SIZE, F(memory), "512M", "memory of the whole sandbox"},
	{"cpus", "SANDBOX_CPUS", T_NUMBER, F(cpus), "1", "CPUs the sandbox may use"},
	{"pids", "SANDBOX_PIDS", T_COUNT, F(pids), "256", "processes the sandbox may have"},
	{"open-files", "SANDBOX_OPEN_FILES", T_COUNT, F(open_files), "1024", "open files per process"},
	{"file-size", "SANDBOX_FILE_SIZE", T_SIZE, F(file_size), "1G", "largest file a process may write"},
	{"tmp-size", "SANDBOX_TMP_SIZE", T_SIZE, F(tmp_size), "128M", "size of the sandbox's /tmp"},
	{"workspace-size", "SANDBOX_WORKSPACE_SIZE", T_SIZE, F(workspace_size), "1G",
	 "disk quota of the workspace (0: none); local and Docker enforce it when the server is root"},
	{"network", "SANDBOX_NETWORK", T_NET, F(network), "install",
	 "none | install (only package installs reach the network) | all"},
	{"wheelhouse", "SANDBOX_WHEELHOUSE", T_STR, F(wheelhouse), "",
	 "folder of wheels; requirements install from it alone, with no network"},
	{"index-url", "SANDBOX_INDEX_URL", T_STR, F(index_url), "https://pypi.org/simple",
	 "package index requirements install from (the install step reaches it alone)"},
	{"index-hosts", "SANDBOX_INDEX_HOSTS", T_STR, F(index_hosts), "",
	 "more hosts the install step may reach, comma-separated (with PyPI: files.pythonhosted.org)"},
	{"idle-timeout", "SANDBOX_IDLE_TIMEOUT", T_SECONDS, F(idle_timeout_s), "1800",
	 "remove a sandbox unused this long, seconds (0: never)"},
	{"queue", "SANDBOX_QUEUE", T_COUNT, F(queue_max), "16", "calls that may wait behind the running one"},
	{"max-message", "SANDBOX_MAX_MESSAGE", T_SIZE, F(max_message), "16M", "longest request line accepted"},
	{"keep", "SANDBOX_KEEP", T_BOOL, F(keep), "false", "keep the sandbox and workspace at shutdown"},
	{"workspace", "SANDBOX_WORKSPACE", T_STR, F(workspace_dir), "",
	 "host folder that is the workspace, kept across restarts (local, Docker); cleanup_sandbox empties it"},
	{"mount", "SANDBOX_MOUNT", T_MOUNT, F(mounts), "",
	 "HOST_DIR:/mnt/NAME[:rw], repeatable (env: ';' between): a host folder the code sees, read-only unless :rw"},
	{"state-dir", "SANDBOX_STATE_DIR", T_STR, F(state_dir), "",
	 "where local sandboxes keep their workspaces (default $TMPDIR/sandbox-mcp-UID)"},
	{"python", "SANDBOX_PYTHON", T_STR, F(python), "python3", "Python interpreter inside the sandbox"},
	{"log-level", "SANDBOX_LOG_LEVEL", T_LEVEL, F(log_level), "info",
	 "stderr log level: debug info notice warning error"},
	{"sandbox-uid", "SANDBOX_UID", T_COUNT, F(sandbox_uid), "65534",
	 "host uid of the sandbox user when the server runs as root"},
	{"image", "SANDBOX_IMAGE", T_STR, F(image), "python:3.12-slim",
	 "Docker: image of the sandbox container (pulled when missing)"},
	{"daytona-snapshot", "SANDBOX_DAYTONA_SNAPSHOT", T_STR, F(daytona_snapshot), "",
	 "Daytona: snapshot to create sandboxes from (default: the organisation's)"},
	{"daytona-image", "SANDBOX_DAYTONA_IMAGE", T_STR, F(daytona_image), "",
	 "Daytona: image to create sandboxes from, instead of a snapshot"},
	{"daytona-start-timeout", "SANDBOX_DAYTONA_START_TIMEOUT", T_SECONDS, F(daytona_start_timeout_s), "60",
	 "Daytona: seconds a new sandbox may take to start"},
};

static const char *const net_names[] = {"none", "install", "all"};

const char *config_net_name(int policy)
{
	return policy >= 0 && policy <= NET_ALL ? net_names[policy] : "?";
}

const char *config_fmt_size(uint64_t v, char *buf, size_t n)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (u < 4 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, "%llu %s", (unsigned long long)v, units[u]);
	return buf;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0 || !isfinite(v))
		return -1;
	while (*end == ' ')
		end++;
	double mul = 1;
	switch (toupper((unsigned char)*end)) {
	case 'K': mul = 1024.0; end++; break;
	case 'M': mul = 1024.0 * 1024; end++; break;
	case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
	case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
	default: break;
	}
	if (mul > 1 && (*end == 'i' || *end == 'I'))
		end++;
	if (mul > 1 && (*end == 'b' || *end == 'B'))
		end++;
	if (*end || v * mul > 1e18)
		return -1;
	*out = (uint64_t)(v * mul);
	return 0;
}

static int set_opt(struct config *cfg, const struct opt *o, const char *val, const char *from, struct err *e)
{
	char *field = (char *)cfg + o->off;
	char *end;
	double d;
	uint64_t u;
	switch (o->type) {
	case T_STR:
		if (strlen(val) >= o->size)
			return err_set(e, "%s: value too long", from);
		strcpy(field, val);
		return 0;
	case T_SIZE:
		if (parse_size(val, &u) < 0)
			return err_set(e, "%s: '%s' is not a size (like 512M or 64K)", from, val);
		*(uint64_t *)(void *)field = u;
		return 0;
	case T_COUNT:
		errno = 0;
		u = strtoull(val, &end, 10);
		if (!*val || *end || errno || val[0] == '-')
			return err_set(e, "%s: '%s' is not a whole number", from, val);
		*(uint64_t *)(void *)field = u;
		return 0;
	case T_SECONDS:
	case T_NUMBER:
		errno = 0;
		d = strtod(val, &end);
		if (!*val || *end || errno || d < 0 || !isfinite(d))
			return err_set(e, "%s: '%s' is not a non-negative number", from, val);
		*(double *)(void *)field = d;
		return 0;
	case T_BOOL:
		if (!strcmp(val, "1") || !strcasecmp(val, "true") || !strcasecmp(val, "yes") || !strcasecmp(val, "on"))
			*(bool *)(void *)field = true;
		else if (!strcmp(val, "0") || !strcasecmp(val, "false") || !strcasecmp(val, "no") ||
			 !strcasecmp(val, "off") || !*val)
			*(bool *)(void *)field = false;
		else
			return err_set(e, "%s: '%s' is not true or false", from, val);
		return 0;
	case T_NET:
		for (int i = 0; i <= NET_ALL; i++)
			if (!strcmp(val, net_names[i])) {
				*(int *)(void *)field = i;
				return 0;
			}
		return err_set(e, "%s: '%s' is not none, install or all", from, val);
	case T_MOUNT:
		/* The environment's list is one value; each flag adds one. */
		for (const char *p = val; *p;) {
			const char *semi = strchr(p, ';');
			size_t n = semi ? (size_t)(semi - p) : strlen(p);
			char spec[MOUNT_HOST_MAX + MOUNT_INSIDE_MAX + 8];
			if (n >= sizeof spec)
				return err_set(e, "%s: value too long", from);
			memcpy(spec, p, n);
			spec[n] = '\0';
			struct err me = {""};
			if (n && cfg->nmounts >= MOUNTS_MAX)
				return err_set(e, "%s: at most %d mounts", from, MOUNTS_MAX);
			if (n && mountspec_parse(&cfg->mounts[cfg->nmounts++], spec, &me) < 0)
				return err_set(e, "%s: %s", from, me.msg);
			p += n + (semi ? 1 : 0);
		}
		return 0;
	case T_LEVEL: {
		int l = log_level_parse(val);
		if (l < 0)
			return err_set(e, "%s: '%s' is not a log level", from, val);
		*(int *)(void *)field = l;
		return 0;
	}
	}
	return err_set(e, "%s: unhandled option type", from);
}

static const struct opt *find_opt(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
		if (strlen(opts[i].flag) == n && !strncmp(opts[i].flag, name, n))
			return &opts[i];
	return NULL;
}

static int check_values(const struct config *c, struct err *e)
{
	if (strcmp(c->backend, "auto") && strcmp(c->backend, "local") && strcmp(c->backend, "docker") &&
	    strcmp(c->backend, "daytona"))
		return err_set(e, "--backend: '%s' is not auto, daytona, docker or local", c->backend);
	if (c->timeout_s <= 0 || c->max_timeout_s <= 0)
		return err_set(e, "--timeout and --max-timeout must be above 0");
	if (c->timeout_s > c->max_timeout_s)
		return err_set(e, "--timeout (%g) is above --max-timeout (%g)", c->timeout_s, c->max_timeout_s);
	if (c->output_cap < 1024 || c->output_cap > (64u << 20))
		return err_set(e, "--output-cap must be between 1K and 64M");
	if (c->result_max < 4096 || c->result_max > (256u << 20))
		return err_set(e, "--result-max must be between 4K and 256M");
	if (c->memory < (16u << 20))
		return err_set(e, "--memory must be at least 16M");
	if (c->cpus <= 0 || c->cpus > 1024)
		return err_set(e, "--cpus must be above 0");
	if (c->pids < 8 || c->open_files < 16 || c->queue_max < 1 || c->max_message < 4096)
		return err_set(e, "--pids, --open-files, --queue or --max-message is too small");
	if (c->tmp_size < (1u << 20))
		return err_set(e, "--tmp-size must be at least 1M");
	if (c->workspace_size && c->workspace_size < (16u << 20))
		return err_set(e, "--workspace-size must be 0 (no quota) or at least 16M");
	if (c->sandbox_uid == 0 || c->sandbox_uid > 0xfffffffe)
		return err_set(e, "--sandbox-uid must be a non-root uid");
	if (!c->python[0] || strchr(c->python, ' '))
		return err_set(e, "--python must name one program");
	if (!c->image[0] || strpbrk(c->image, " \t\r\n"))
		return err_set(e, "--image must name one image");
	if (c->daytona_snapshot[0] && c->daytona_image[0])
		return err_set(e, "--daytona-snapshot and --daytona-image exclude each other: give one");
	if (strpbrk(c->daytona_image, "\r\n") || strpbrk(c->daytona_snapshot, " \t\r\n"))
		return err_set(e, "--daytona-snapshot or --daytona-image is not a valid name");
	struct proxy_policy pol;
	struct err pe = {""};
	if (proxy_policy_for_index(&pol, c->index_url, c->index_hosts, &pe) < 0)
		return err_set(e, "--index-url / --index-hosts: %s", pe.msg);
	if (c->workspace_dir[0] && c->workspace_dir[0] != '/')
		return err_set(e, "--workspace must be an absolute path");
	if (c->workspace_dir[0] && strlen(c->workspace_dir) > PATH_MAX - 256)
		return err_set(e, "--workspace: the path is too long");
	struct err me = {""};
	if (mountspec_check_set(c->mounts, c->nmounts, &me) < 0)
		return err_set(e, "%s", me.msg);
	if (c->daytona_start_timeout_s <= 0 || c->daytona_start_timeout_s > 3600)
		return err_set(e, "--daytona-start-timeout must be between 0 and 3600 seconds");
	return 0;
}

int config_load(struct config *cfg, int argc, char **argv, struct err *e)
{
	size_t nopts = sizeof opts / sizeof opts[0];
	memset(cfg, 0, sizeof *cfg);
	for (size_t i = 0; i < nopts; i++)
		if (set_opt(cfg, &opts[i], opts[i].def, opts[i].flag, e) < 0)
			return -1;
	for (size_t i = 0; i < nopts; i++) {
		const char *v = getenv(opts[i].env);
		if (v && set_opt(cfg, &opts[i], v, opts[i].env, e) < 0)
			return -1;
	}
	bool timeout_set = getenv("SANDBOX_TIMEOUT") != NULL, mount_flag = false;
	int mode = MODE_SERVE;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			mode = MODE_HELP;
			continue;
		}
		if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			mode = mode == MODE_HELP ? mode : MODE_VERSION;
			continue;
		}
		if (!strcmp(a, "--check")) {
			if (mode == MODE_SERVE)
				mode = MODE_CHECK;
			continue;
		}
		if (strncmp(a, "--", 2) != 0)
			return err_set(e, "unexpected argument '%s' (see --help)", a);
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t n = eq ? (size_t)(eq - name) : strlen(name);
		const struct opt *o = find_opt(name, n);
		const char *val = eq ? eq + 1 : NULL;
		if (!o && !eq && !strncmp(name, "no-", 3)) {
			o = find_opt(name + 3, n - 3);
			if (o && o->type == T_BOOL)
				val = "false";
			else
				o = NULL;
		}
		if (!o)
			return err_set(e, "unknown option '%s' (see --help)", a);
		if (!val && o->type == T_BOOL)
			val = "true";
		if (!val) {
			if (i + 1 >= argc)
				return err_set(e, "option '%s' needs a value", a);
			val = argv[++i];
		}
		char from[64];
		snprintf(from, sizeof from, "--%s", o->flag);
		if (o->type == T_MOUNT && !mount_flag) {
			cfg->nmounts = 0; /* flags win over the environment */
			mount_flag = true;
		}
		if (set_opt(cfg, o, val, from, e) < 0)
			return -1;
		if (!strcmp(o->flag, "timeout"))
			timeout_set = true;
	}
	if (mode == MODE_HELP || mode == MODE_VERSION)
		return mode;
	/* A lower --max-timeout also lowers the default timeout, unless that was set too. */
	if (!timeout_set && cfg->timeout_s > cfg->max_timeout_s)
		cfg->timeout_s = cfg->max_timeout_s;
	if (check_values(cfg, e) < 0)
		return -1;
	return mode;
}

void config_usage(FILE *f)
{
	fprintf(f, "Usage: sandbox-mcp [OPTION]...\n"
		   "An MCP server (stdio) that runs Python and shell code in an isolated sandbox with a\n"
		   "persistent workspace. Tools: execute_python, execute_bash_commands, cleanup_sandbox.\n\n"
		   "  -h, --help            show this help and exit\n"
		   "  -V, --version         show the version and exit\n"
		   "      --check           say which backends work here and which limits are enforced\n\n"
		   "Options (each also read from its environment variable; flags win):\n");
	for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		const struct opt *o = &opts[i];
		char left[64];
		if (o->type == T_BOOL)
			snprintf(left, sizeof left, "--%s", o->flag);
		else
			snprintf(left, sizeof left, "--%s VALUE", o->flag);
		fprintf(f, "      %-24s %s\n", left, o->help);
		fprintf(f, "      %-24s env %s, default %s\n", "", o->env, *o->def ? o->def : "(none)");
	}
	/* The variables the backends read besides the options; none of them reaches the sandbox. */
	fprintf(f, "\nEnvironment (besides the SANDBOX_* variables above):\n"
		   "  DAYTONA_API_KEY      Daytona API key; with it, --backend auto tries Daytona first\n"
		   "  DAYTONA_API_URL      Daytona API base URL (default https://app.daytona.io/api;\n"
		   "                       the deprecated DAYTONA_SERVER_URL is read when it is unset)\n"
		   "  DAYTONA_TARGET       Daytona region for new sandboxes (default: the organisation's)\n"
		   "  DOCKER_HOST          the Docker engine's socket, unix:///PATH only (default: the first of\n"
		   "                       /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock,\n"
		   "                       $XDG_RUNTIME_DIR/podman/podman.sock, /run/podman/podman.sock)\n"
		   "  TMPDIR               where the default state folder goes (default /tmp)\n");
	fprintf(f, "\nSizes take K, M, G suffixes (powers of 1024). Logs go to stderr; stdout carries only\n"
		   "the protocol. Exit status: 0 on a clean shutdown, 2 on a usage error, 1 otherwise.\n");
}
