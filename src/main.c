/*
 * sandbox-mcp: an MCP server over stdio that runs Python and shell code in a sandbox.
 *
 * Threads: this one reads stdin and answers what needs no sandbox (handshake, ping, lists,
 * cancellations) at once; the engine's worker runs tool calls one at a time; the writer
 * (rpc.h) alone writes stdout, so neither ever waits for a client that stops reading. stdout
 * carries protocol only; logs go to stderr. EOF on stdin first lets the requests already read
 * be answered, within --shutdown-budget. SIGTERM, SIGINT, SIGHUP, a closed stdout, or the end of
 * that budget shut down: the running call is killed, the sandbox removed, and the process exits
 * within 2 s, whatever the client does.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../backends/http/helper.h"
#include "base/clock.h"
#include "base/heap.h"
#include "base/hostfolders.h"
#include "cli.h"
#include "base/config.h"
#include "engine/engine.h"
#include "base/log.h"
#include "base/title.h"
#include "protocol/mcp.h"
#include "protocol/reader.h"
#include "protocol/writer.h"
#include "sandbox/sandbox.h"
#include "tools/tools.h"
#include "base/version.h"
#include "tools/wheelhouse.h"

/* The whole shutdown takes less than 2 s: the engine gets SHUTDOWN_MS at most; then the
 * writer gets FLUSH_MS to hand over what is queued, within the 2 s. */
#define SHUTDOWN_MS 1700
#define FLUSH_MS 250
#define EXIT_MS 1900

/* The writer has written everything queued: the engine may settle the sandbox. */
static void output_drained(void *eng)
{
	engine_output_drained(eng);
}

/* How long a client may take no byte of the answers queued for it once stdin closed before
 * it is taken for one that stopped reading: they are then left to the last flush. */
#define DRAIN_STALL_MS 400

/* stdin ended: the requests read before are answered as they finish, and their answers
 * handed to a client that goes on reading, for budget_s at most, unless a signal comes or the
 * client goes first. Why the server then shuts down. */
static const char *answer_what_was_read(struct engine *eng, double budget_s, int sfd)
{
	int64_t t0 = clock_ms(), until = t0 + (int64_t)(budget_s * 1000);
	log_msg(LOG_INFO, "stdin closed: answering the requests read, for %g s at most", budget_s);
	for (;;) {
		bool calls = engine_pending(eng);
		if (!calls && writer_drained())
			return "stdin closed, every request read answered";
		if (!calls && writer_stalled(t0, DRAIN_STALL_MS))
			return "stdin closed, every request read answered; the client takes no more of the answers";
		int64_t left = until - clock_ms();
		if (left <= 0)
			return "stdin closed, and the shutdown budget is spent";
		/* Only answers left to hand over: looked at more often, so that a client that stopped
		 * reading is let go soon after DRAIN_STALL_MS. */
		int step = calls ? 250 : 50;
		struct pollfd p[2] = {{sfd, POLLIN, 0}, {STDOUT_FILENO, 0, 0}};
		int r = poll(p, 2, left < step ? (int)left : step);
		if (r > 0 && p[0].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				return strsignal((int)si.ssi_signo);
		}
		if (writer_closed() || (r > 0 && (p[1].revents & (POLLERR | POLLHUP))))
			return "stdout closed";
		engine_tick(eng);
	}
}

static int serve(const struct config *cfg)
{
	struct err e = {""};
	heap_init();
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	/* Blocked before any thread starts, so every thread inherits the mask. */
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0)
		return 1;
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_msg(LOG_ERROR, "signalfd: %s", strerror(errno));
		return 1;
	}
	if (writer_start(STDOUT_FILENO) < 0) {
		log_msg(LOG_ERROR, "cannot start the output writer");
		return 1;
	}
	struct engine *eng;
	static const struct engine_output output = {.drained = writer_drained};
	if (engine_start(&eng, cfg, &output, &e) < 0) {
		log_msg(LOG_ERROR, "%s", e.msg);
		return 1;
	}
	writer_on_drained(output_drained, eng);
	struct mcp *m = mcp_new(cfg, eng);
	struct reader rd;
	if (!m || reader_init(&rd, STDIN_FILENO, cfg->max_message) < 0) {
		log_msg(LOG_ERROR, "out of memory");
		return 1;
	}
	log_thread_is_session();
	log_msg(LOG_INFO, "sandbox-mcp %s ready (backend %s)", SANDBOX_MCP_VERSION, cfg->backend);
	const char *why = "stdin closed";
	bool eof = false;
	for (;;) {
		/* While the client is far behind in reading, take no new requests. stdout is polled
		 * for nothing: POLLERR (a pipe whose reader closed it) or POLLHUP (a socket whose peer
		 * is gone) come anyway, and tell a client gone while all is idle. */
		struct pollfd p[3] = {{writer_backlog() ? -1 : STDIN_FILENO, POLLIN, 0}, {sfd, POLLIN, 0},
				      {STDOUT_FILENO, 0, 0}};
		int r = poll(p, 3, 250);
		if (r < 0 && errno != EINTR) {
			why = "poll failed";
			break;
		}
		if (r > 0 && p[1].revents) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				why = strsignal((int)si.ssi_signo);
			break;
		}
		if (r > 0 && p[0].revents) {
			if (reader_fill(&rd) < 0) {
				why = "stdin read error";
				break;
			}
			if (mcp_handle_input(m, &rd) == READER_EOF) {
				eof = true;
				break;
			}
		}
		if (writer_closed() || (r > 0 && (p[2].revents & (POLLERR | POLLHUP)))) {
			why = "stdout closed";
			break;
		}
		engine_tick(eng);
	}
	if (eof && (engine_pending(eng) || !writer_drained()) && cfg->shutdown_budget_s > 0)
		why = answer_what_was_read(eng, cfg->shutdown_budget_s, sfd);
	log_msg(LOG_INFO, "shutting down: %s", why);
	writer_on_drained(NULL, NULL); /* the engine goes */
	int64_t t0 = clock_ms();
	int rc = engine_stop(eng, t0 + SHUTDOWN_MS);
	if (rc < 0) {
		/* The sandbox dies with us: its init has the parent-death signal set. */
		log_msg(LOG_ERROR, "the running call did not stop in time; exiting anyway");
		_exit(1);
	}
	int64_t flush_by = clock_ms() + FLUSH_MS;
	if (writer_flush(flush_by < t0 + EXIT_MS ? flush_by : t0 + EXIT_MS) < 0)
		log_msg(LOG_NOTICE, "the client stopped reading: answers it did not take are dropped");
	mcp_free(m);
	reader_free(&rd);
	close(sfd);
	return 0;
}

/* What the server does once its options are read: the exit status. */
static int run(const struct config *cfg, int mode, int argc, char **argv)
{
	struct err e = {""};
	if (mode == MODE_HELP) {
		cli_usage(stdout);
		return 0;
	}
	if (mode == MODE_VERSION) {
		printf("sandbox-mcp %s\n", SANDBOX_MCP_VERSION);
		return 0;
	}
	log_set_stderr_level(cfg->log_level);
	if (cfg->wheelhouse[0] &&
	    wheelhouse_check(cfg->wheelhouse, geteuid() == 0 ? (uid_t)cfg->sandbox_uid : geteuid(), &e) < 0) {
		fprintf(stderr, "sandbox-mcp: %s\n", e.msg);
		return 2;
	}
	/* What no call could get past is refused now, not met by every call of a server that
	 * looked ready to the host. */
	if (backend_config_check(cfg, &e) < 0) {
		fprintf(stderr, "sandbox-mcp: %s\n", e.msg);
		return 2;
	}
	if (sandbox_fd_limit(&e) < 0) {
		fprintf(stderr, "sandbox-mcp: %s\n", e.msg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (tools_init(cfg, &e) < 0) {
		fprintf(stderr, "sandbox-mcp: %s\n", e.msg);
		return 1;
	}
	int rc;
	if (mode == MODE_CHECK) {
		printf("sandbox-mcp %s on %s\n", SANDBOX_MCP_VERSION, geteuid() == 0 ? "root" : "an unprivileged user");
		rc = sandbox_check_all(cfg, stdout) == 0 ? 0 : 1;
	} else {
		title_init(argc, argv);
		rc = serve(cfg);
	}
	tools_free();
	return rc;
}

int main(int argc, char **argv)
{
	/* The HTTP helper a backend starts (backends/http/helper.h): not a server at all. It ends
	 * with _exit: nothing of it is buffered, and a sanitizer build's leak check at exit would
	 * start a tracer process that outlives it when the server kills it meanwhile. */
	if (argc == 2 && !strcmp(argv[1], HTTP_HELPER_ARG))
		_exit(http_helper_main());
	struct config cfg;
	struct err e = {""};
	int mode = cli_load(&cfg, argc, argv, &e), rc;
	/* The host folders are checked once, here, whatever the backend: a sandbox made later binds
	 * or copies them as checked now (hostfolders.h). */
	if (mode < 0 || ((mode == MODE_SERVE || mode == MODE_CHECK) && hostfolders_check(&cfg, &e) < 0)) {
		fprintf(stderr, "sandbox-mcp: %s\n", e.msg);
		rc = 2;
	} else {
		rc = run(&cfg, mode, argc, argv);
	}
	config_free(&cfg);
	return rc;
}
