/*
 * The server's side of a connection to sandbox-agent (agent/proto.h). A backend that runs the
 * agent (local, Docker) hands it the connected socket and calls these; they block the calling
 * thread. Every wait is bounded: an agent that stops answering is reported as BACKEND_LOST.
 */
#ifndef SANDBOX_AGENTLINK_H
#define SANDBOX_AGENTLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../run/run.h"
#include "../../src/base/config.h"
#include "../../src/base/err.h"
#include "stdiorelay.h"

struct agentlink {
	int fd;              /* owned; -1 when closed */
	unsigned char *rbuf; /* receive buffer, reused for every frame; owned */
	size_t rcap;
	int reset;           /* the last read failed with ECONNRESET: the agent ended with frames of
	                      * ours unread (agentlink_run) */
	struct agentlink_cache *cache; /* what came with the last run's end (rq->changes_list_max):
	                      * answers agentlink_list and agentlink_get of it until the next other
	                      * request or agentlink_forget; NULL when none. Owned */
	bool mux;            /* what the agent sends comes in the engine's stdout frames */
	uint32_t mux_left;   /* bytes of the current one still to come */
	bool not_sock;       /* fd is no socket: each read waits in poll first (otherwise what is
	                      * there is taken at once, MSG_DONTWAIT) */
	unsigned char *ahead; /* what was read from fd past the frames taken so far (not on a
	                      * multiplexed link, whose fd changes hands): a run's last frames come
	                      * in one write, and one read takes them all. Owned */
	size_t ahead_at, ahead_len;
};

/* rlimits applied to each call's processes. */
struct agentlink_limits {
	uint64_t open_files, file_size, cpu_s;
	uint64_t nproc;   /* 0: not set (a pids cgroup bounds processes) */
	uint64_t as;      /* 0: not set (a memory cgroup bounds memory) */
	uint64_t spill_max;
	uint32_t relay_port;        /* 0, or: relay 127.0.0.1:port in the sandbox to relay_socket */
	const char *relay_socket;   /* a unix socket path inside the sandbox; with relay_take, "@NAME" */
	bool relay_take;            /* the relay listens there for takers (AG_RUN_RELAY_TAKE) */
};

/* Takes ownership of fd and waits up to timeout_ms for the agent's greeting. */
int agentlink_open(struct agentlink *l, int fd, int timeout_ms, struct err *e);

/* The same; with mux, fd is a container's attached stdin and stdout (the Docker Engine API's
 * hijacked attach stream, no TTY): what is sent reaches the agent as it is, and what it sends
 * comes wrapped in the engine's 8-byte stream headers, which the link takes off. */
int agentlink_open_mux(struct agentlink *l, int fd, bool mux, int timeout_ms, struct err *e);

/* Installs the seccomp filter (struct sock_filter[], len bytes) in the agent. */
int agentlink_filter(struct agentlink *l, const void *bpf, size_t len, struct err *e);

/* Writes the n files f[0..n) inside the sandbox, as the sandbox user: all of them or none
 * (each file is written whole before any is renamed into place; see proto.h's AG_PUT). */
int agentlink_put(struct agentlink *l, const struct run_file *f, size_t n, struct err *e);

/* Lists and reads between calls (see backend.h's list and get). What came with the last run's
 * end answers them where it can (the same answer, no round trip). */
int agentlink_list(struct agentlink *l, const char *dir, const char *skip, size_t max, struct ws_list *out, struct err *e);
int agentlink_get(struct agentlink *l, const char *path, size_t max, struct ws_file *out, struct err *e);
/* A list as agentlink_list's, never from the cache, after which the agent watches the folders
 * it walked (proto.h's AG_WATCH); and whether anything under them changed since: a WS_CHANGES_*
 * state (AG_CHANGES_* are the same numbers), or -1 / BACKEND_LOST. */
int agentlink_list_watch(struct agentlink *l, const char *dir, const char *skip, size_t max, struct ws_list *out,
			 struct err *e);
int agentlink_changes(struct agentlink *l, struct err *e);

/* Writes rq->files, then runs rq to its end (see backend.h). 0, -1, BACKEND_LOST. An agent that
 * ended with the run request unread (its connection reset before it answered anything, and no
 * kill was sent) never started the program: rs->started is false then, as when the request
 * could not be sent, so that the call may be run again on a new sandbox. */
int agentlink_run(struct agentlink *l, const struct run_req *rq, const struct agentlink_limits *lim,
		  struct run_res *rs, struct err *e);

/* The same, and the run is killed as soon as stop_fd or stop_fd2 (-1: none) turns readable:
 * the caller knows it cannot succeed. Then rs->stopped is set (and exit_code says the kill). */
int agentlink_run_until(struct agentlink *l, const struct run_req *rq, const struct agentlink_limits *lim,
			int stop_fd, int stop_fd2, struct run_res *rs, struct err *e);

/* The agent's prestarted Python interpreter (proto.h's AG_PRESTART): started with python, env
 * and the source of agent/prestart.py, preloading modules (comma-separated), for calls that run
 * `python script ...`. */
struct agentlink_prestart {
	const char *python;
	const char *const *env;
	const char *source;
	size_t source_len;
	const char *script;
	const char *modules;
};
int agentlink_prestart(struct agentlink *l, const struct agentlink_prestart *ps, struct err *e);

/* Between calls, the call before answered: the agent starts the next prestarted interpreter
 * (proto.h's AG_SETTLE). 0, or -1 when it cannot be told (the watch on its socket says more). */
int agentlink_settle(struct agentlink *l, struct err *e);

/* Its state (AG_PY_* of proto.h), how long the last one took to be ready (ms, 0: none was) and
 * what it said (text, n bytes). 0, -1, BACKEND_LOST. */
int agentlink_preinfo(struct agentlink *l, unsigned *phase, unsigned *ready_ms, char *text, size_t n, struct err *e);

/* Forgets what came with the last run's end: after the call is answered, the workspace may
 * change (a resources/read then reads it anew). */
void agentlink_forget(struct agentlink *l);
/* Between requests nothing of the agent's may be waiting: a connection that is readable then
 * has ended (or the agent broke the protocol). true when it is so. */
bool agentlink_ended(const struct agentlink *l);

void agentlink_close(struct agentlink *l);

/* The channel (proto.h's AG_CHANNEL): a second connection to the same agent, ch, for the
 * requests about background processes, answered at once even while l runs a call. ch must be
 * used by one thread at a time, which may be another than l's. 0, -1, BACKEND_LOST. */
int agentlink_channel(struct agentlink *l, struct agentlink *ch, struct err *e);

/* The same on a link whose stream carries the channel in band (agent/proto.h's AG_MUX): fd is
 * the channel's end of that stream, which ch then owns (closed when this fails). */
int agentlink_channel_inband(struct agentlink *l, struct agentlink *ch, int fd, struct err *e);

/* Asks the agent on a stdio link to carry its streams in chunks (AG_MUX): once this returns 0,
 * the relay of the link's bytes must cut and join them so before anything more is sent. 0, -1,
 * BACKEND_LOST. */
int agentlink_mux(struct agentlink *l, struct err *e);

/* The same on a link whose bytes are the engine's frames of a container's attached stdio
 * (agentlink_open_mux): then the relay r (stdiorelay.h) takes the stream over, and l talks on
 * its pair as on a plain socket; *chan_fd: the channel's end, for agentlink_channel_inband. 0,
 * -1, BACKEND_LOST. */
int agentlink_mux_relay(struct agentlink *l, struct stdiorelay *r, int *chan_fd, struct err *e);

/* A request about background processes over the channel (run.h's proc_req): 0 with rs filled,
 * -1 (e says why: no such process), BACKEND_LOST. */
int agentlink_process(struct agentlink *ch, const struct proc_req *rq, struct proc_res *rs, struct err *e);

/* For --check: the per-call rlimits the agent applies (see agentlink_run), and /tmp's size,
 * one line each, as the backends that run the agent print their limits. open_files_max: the
 * most open files the agent may give (agent_inst's nofile_max; 0: no bound). */
void agentlink_report_limits(const struct config *cfg, uint64_t open_files_max, FILE *f);

#endif
