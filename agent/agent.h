/*
 * What the files of sandbox-agent share: the connection to the server, the running call, and
 * the prestarted Python interpreter (prestart.c). The agent is static and uses nothing but libc.
 */
#ifndef SANDBOX_AGENT_H
#define SANDBOX_AGENT_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

#define MAX_ARGS 4096
#define MAX_RLIMITS 16

/* A run request as it came (proto.h's run spec): strings copied out of the frame. */
struct run_spec {
	uint32_t flags;
	char cwd[4096];
	uint32_t relay_port;
	char relay_sock[108];
	uint32_t nrl;
	struct { uint32_t res; uint64_t lim; } rl[MAX_RLIMITS];
	char *argv[MAX_ARGS + 2], *envp[MAX_ARGS + 1];
	char *block;             /* the strings of argv and envp, each with its terminator */
};

/* The frame being built for the server (sandbox-agent.c), and sending it or a short one. */
extern struct ag_buf out;
void send_frame(void);
void send_simple(uint8_t type, const char *text);
void send_errno(const char *what, int err);

/* Creates path anew (a fresh file renamed over whatever is there, following no symlink):
 * its fd, write-only, or -1 with errno set. */
int create_fresh(const char *path, unsigned mode);

/* Notes which signals the agent's own start found at other than their default action; called
 * once, first thing in main, before anything could change one. */
void note_signals(void);

/* Every signal back to its default action, none blocked (async-signal-safe; it writes nothing
 * but its own stack). The agent must change no disposition after note_signals: a child resets
 * only those that note_signals found. */
void reset_signals(void);

/* execve with a PATH search in envp's own PATH (execvpe would use the agent's); returns only
 * when it failed (errno says why). */
void exec_path(const char *file, char *const argv[], char *const envp[]);

/* Copies a str field into buf (n bytes, terminated). 0, or -1 when it does not fit or holds a
 * NUL. */
int get_str(struct ag_cur *c, char *buf, size_t n);

/*
 * The stdio link in chunks of more than one stream (mux.c, proto.h's AG_MUX). mux_prepare makes
 * a socket pair per stream, whose ends the agent then uses (fds[0] the conversation, fds[1] the
 * channel): 0, or -1 with errno set and nothing made. mux_go starts the thread that joins them
 * to in and to (made non-blocking), from which nothing else may read or write after: 0, or -1
 * with errno set. A child of the agent that does not exec closes every descriptor it does not
 * need first.
 */
int mux_prepare(int in, int to, int fds[AG_MUX_STREAMS]);
int mux_go(void);

/*
 * The workspace's change watch (watch.c, proto.h's AG_WATCH). watch_begin starts a new one in
 * place of the last (skip: the name at the top whose changes do not count); the walk calls
 * watch_folder with each folder it holds open, before reading it (top: the walked one). Its
 * state, an AG_CHANGES_* value, stays AG_CHANGES_SOME once something changed, until the next
 * watch_begin.
 */
void watch_begin(const char *skip);
void watch_folder(int dfd, int top);
int watch_state(void);

/*
 * The prestarted Python interpreter (agent/prestart.py): started by this agent after each call,
 * once the server has sent its answer, it starts up, imports the modules to preload and waits;
 * the next execute_python call that can runs in it rather than in a new one (proto.h's
 * AG_PRESTART and AG_RUN_PRESTART). It runs as the sandbox's user like the code, so the agent
 * trusts it no further than the code: every wait on it is bounded, and anything odd ends it
 * (the call starts plainly, and a new one is started after it).
 */

/* AG_PRESTART: how to start it (answered AG_OK / AG_ERR). It is started after the call that
 * follows, never while code runs: until it has made itself non-dumpable, code running as the
 * same user could write into its memory. */
void prestart_configure(struct ag_cur *c);

/* Its control socket while it is starting (its 'D' and 'R' come there), or -1. Polled only
 * between calls: one heard ready only after a call's code ran beside it is not trusted. */
int prestart_fd(void);
/* Its control socket turned readable. */
void prestart_readable(void);

/* Before a call starts. For a call that may run in it (for_python): waits (bounded) until a
 * starting interpreter cannot be written into by the call's code, and for a while until it is
 * ready; or ends it. For another call: takes a 'ready' already said (that one is kept), and ends
 * one not ready at once, so that the call neither waits for it nor shares the CPU with its
 * start, and no code runs beside an interpreter that is not ready. */
void prestart_settle(bool for_python);

/* The call in it, with out and err as its stdout and stderr: the pid of the call's process (a
 * child of the agent), or -1 when it cannot (the call is then started plainly). It is handed
 * the call only when it is alone (one thread, not stopped, no other process in the sandbox;
 * else it and every stray are killed), and runs it only once told to go, which it is only
 * while its answer is awaited: a call runs in one interpreter at most. */
pid_t prestart_run(const struct run_spec *sp, int outw, int errw);

/* Kills every process of the sandbox but the agent and a ready interpreter, and reaps the agent's children; 0 when done so, -1 when there is none to spare or it failed (then nothing
 * was done). reaped(pid, status) is told of each child reaped. */
int prestart_kill_others(void (*reaped)(pid_t, int));

/* The call's interpreter p said it exits (SIGUSR1 to the agent, after its streams are flushed):
 * waits a moment (bounded) until the kernel shows it past its code for good, in its exit with
 * its memory dropped, and nothing else runs in the sandbox. 0 then, with its wait status (what
 * waitpid will say) in status: the call can be answered without waiting for the kernel to free
 * its memory. -1 when not (too late, it is gone, other processes run, an interpreter waits
 * ahead): the call ends as it is reaped. */
int prestart_exited(pid_t p, int *status);

/* Whether the interpreter last started (the one prestart_run last handed a call, until the
 * next starts) loaded prestart.py's functions as the code object of one before it: the first
 * one compiles their source and hands its code to the agent, kept once that one is heard
 * ready (as trusted as its 'R'); the next ones load it, and do not compile them again. */
bool prestart_from_code(void);

/* A child of the agent was reaped, with that wait status: forgets the interpreter when it was
 * that; after three that ended before they were ready, none is started again. */
void prestart_reaped(pid_t p, int status);

/* Between calls, once the server says the call before is answered (AG_SETTLE): starts one
 * when it is wanted and none runs. */
void prestart_between_calls(void);

/* AG_PREINFO: answers with its phase, how long the last one took to be ready, and what it
 * said. */
void prestart_info(void);

/* The prestarted interpreter ends now, if one runs (why: what AG_PREINFO then says). */
void prestart_end(const char *why);

/*
 * Background processes (background.c; proto.h's AG_RUN_BACKGROUND and channel): a call that
 * outlives its wait becomes one, and runs on beside later calls in its own session, which the
 * end of a call spares. While one runs no prestarted interpreter is kept: it is handed calls
 * only when alone.
 */
struct bg_stream {
	int fd;                  /* the pipe's read end, -1 when closed */
	uint64_t bytes;          /* everything it wrote so far */
	int file_fd;             /* the spill file, -1 when none */
	uint64_t file_len;       /* bytes written to it */
	int file_errno;
	int cut;
};

/* A running call, handed over: pid (its session's leader), its stdin's write end, its two
 * streams (spill files that hold each from byte 0), when it started, its cap and spill file
 * prefix. The id it now has (0 when none could be given: nothing was taken). */
uint32_t bg_adopt(pid_t pid, int in_fd, const struct bg_stream s[2], uint64_t started_ns, uint64_t cap,
		  uint64_t spill_max, const char *prefix, uint64_t timeout_ms, const char *label);
/* How many run now. */
unsigned bg_live(void);
/* The channel's fd arrived (AG_CHANNEL): taken. */
void bg_channel(int fd);
/* Adds the fds to watch to p (room for at least max): how many. */
int bg_watch(struct pollfd *p, int max);
/* After the poll: handles what turned ready among p's n fds. */
void bg_ready(const struct pollfd *p, int n);
/* ms until a background process's deadline (-1: none); bg_expire ends those past it. */
int bg_next_ms(void);
void bg_expire(void);
/* A child of the agent was reaped: 1 when it was a background process's leader. */
int bg_reaped(pid_t p, int status);
/* Whether one ended since the last look (then what it moved out of its session, beyond
 * kill_session's reach, must be swept away as at a call's end): cleared. */
int bg_take_ended(void);
/* Whether a process of session sid must be spared at a call's end. */
int bg_spared(pid_t sid);
/* Every one ends (the connection ended, or the calls' end could not spare them): forgotten. */
void bg_end_all(void);

/* Milliseconds of CLOCK_MONOTONIC. */
long mono_ms(void);

/* The session of process p, from /proc/p/stat; its state and parent too where asked (NULL:
 * not). -1 when p is gone or its stat unreadable. */
pid_t proc_session(pid_t p, char *state, pid_t *ppid);

#endif
