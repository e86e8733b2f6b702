/*
 * The call runner (runner.py of this folder, compiled in): a small Python program the Daytona
 * backend uploads into the sandbox with every call and runs there (`python3 RUNNER run ...` in a toolbox session). It is to a
 * Daytona sandbox what sandbox-agent is to a local one:
 *
 *   run DIR CAP SPILL_MAX TIMEOUT_MS SPILL_PREFIX SH_FALLBACK CWD NENV ENV... -- ARGV...
 *       Runs ARGV with exactly ENV, in CWD, stdin /dev/null, stdout and stderr on two pipes.
 *       It is a child subreaper: every process of the call, setsid daemons included, stays
 *       its descendant, and all of them are killed when the call ends (exit, TIMEOUT_MS, or
 *       `kill`). Each stream's first CAP bytes go to DIR/N.head, its last CAP/2
 *       bytes to DIR/N.tail ("OFFSET\n" + bytes, rewritten every 0.2 s); past CAP the full
 *       text goes to SPILL_PREFIX.stdout/.stderr (up to SPILL_MAX) when a prefix is given.
 *       Ends by writing DIR/status: {"exit_code", "timed_out", "killed", "bytes": [n1, n2],
 *       "spilled": [b1, b2], "spill_cut"} or {"error": "..."}.
 *   poll DIR OFF1 OFF2 CHUNK
 *       Prints one JSON line: {"done": status or null, "running": bool (when not done: the
 *       runner's heartbeat, DIR/alive, is under 5 s old),
 *       "s": [{"off": O, "data": base64}, ...]}: up to CHUNK bytes of each stream from its
 *       offset, from the head file, else from the tail window (O > OFF when bytes between
 *       them are gone: only ever past CAP, which the server's output cap drops anyway).
 *   kill DIR
 *       Creates DIR/kill (the runner looks every 0.2 s) and sends SIGTERM to the runner: the
 *       runner kills the call. The file works where the pid does not (another PID namespace).
 *
 * Python because every image this backend runs code in has it (it runs execute_python), and
 * it can be a subreaper and read /proc without anything else installed.
 */
#ifndef SANDBOX_DAYTONA_RUNNER_H
#define SANDBOX_DAYTONA_RUNNER_H

/* The runner's source, NUL-terminated; NULL when out of memory. Static. */
const char *daytona_runner_py(void);

/*
 * The sweep (sweep.py of this folder, compiled in): what ends a call's processes even when the call killed its runner (it runs as the
 * same user and can; its setsid descendants then leave the runner's tree). The server runs it
 * after every call with the toolbox's synchronous exec, as `python3 -c SWEEP ...`, so that no
 * file the call could have rewritten is involved:
 *   list          prints "PID:STARTTIME ..." for every process (taken once, when the sandbox
 *                 has started and before any call: the toolbox daemon, the entrypoint, ...)
 *   sweep KEEP... SIGKILLs every process of its user that is not pid 1, not in KEEP, not the
 *                 sweep itself or one of its ancestors (the daemon's exec, the daemon); again
 *                 until none is left, at most 3 s. Exit 0 when none is left, else 1.
 * SANDBOX_MCP_NO_SWEEP=1 in the toolbox's environment turns it off (the test server sets it
 * when it cannot give a sandbox a PID namespace of its own, where a sweep would reach the host).
 */
/* The sweep's source, NUL-terminated; NULL when out of memory. Static. */
const char *daytona_sweep_py(void);

#endif
