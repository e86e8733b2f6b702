/*
 * The call runner (runner.py and sweep.py of this folder, one program, compiled in gzipped,
 * and wssync.py, sent after it in the requests that use it): a small Python program that does,
 * inside a Daytona sandbox, what sandbox-agent does in a local one. Every request the backend
 * makes of it is one synchronous `process/execute` of
 *
 *     PYTHON -I -S -c BOOT MODE ARGS... <<'.sandbox-mcp.'
 *     <the runner's line>
 *     <with a SYNC word, and for wsprep: the workspace sync, base64url of its gzip>
 *     <data lines: base64url, one per file sent along>
 *     .sandbox-mcp.
 *
 * The runner's line (runner_fill) is, for the first request to a sandbox ("procs", before any
 * call), base64url of the runner's gzip, which BOOT compiles; that request answers with the code
 * object as the sandbox's Python compiled it (its SHA-256 and its zlib), and keeps a copy in
 * /tmp/.sandbox-mcp-runner-HASH. Later requests send "@HASH": BOOT reads that file (no symlink
 * followed, nothing that blocks, 1 MiB at most) and runs it only when its SHA-256 is HASH, so
 * that what a call's code (the same user) leaves there never runs; else it answers RUNNER_MISS
 * (exit 3, nothing done) and the request goes again with "!HASH" and the code object, which the
 * runner keeps there again. Compiling the runner (~40 KB of Python) was most of a request's
 * time in the sandbox; nothing of the runner stays running between requests.
 * Data is base64url so that it holds no '/' (nothing in it looks like a path); the shell reads
 * a here-document a byte at a time, so large files go up by bulk upload instead. Modes:
 *
 *   go DIR WAIT_MS CHUNK KEEP SYNC CAP SPILL_MAX TIMEOUT_MS SPILL_PREFIX SH_FALLBACK CWD WATCH
 *      NPUT (SRC DST MODE)... NENV ENV... -- ARGV...
 *       Puts the files in place (SRC "-": the next data line; else a file uploaded into DIR,
 *       a fresh folder of an unguessable name; each becomes a new file renamed over DST, so
 *       whatever the code left at DST, a FIFO or a symlink, is replaced, never opened). Starts
 *       the call detached: a keeper, in a session of its own (the daemon kills the execute's
 *       process group, never it) and holding none of the execute's descriptors (so the
 *       execute answers without waiting for it). The keeper runs ARGV with exactly ENV, in
 *       CWD, stdin /dev/null, stdout and stderr on two pipes; it is a child subreaper, so
 *       every process of the call, setsid daemons included, stays its descendant, and all of
 *       them are killed when the call ends (exit, TIMEOUT_MS, or `kill`). Each stream's first
 *       CAP bytes go to DIR/N.head, its last CAP/2 bytes to DIR/N.tail ("OFFSET\n" + bytes,
 *       rewritten every 0.2 s); past CAP the full text goes to SPILL_PREFIX.stdout/.stderr
 *       (up to SPILL_MAX) when a prefix is given. It ends by writing DIR/status:
 *       {"exit_code", "timed_out", "killed", "bytes": [n1, n2], "spilled": [b1, b2],
 *       "spill_errno", "spill_cut", "oom_killed", "memory_limit", "started_ns", "watch"}
 *       or {"error": "..."}. Then go waits and answers as poll, from offsets 0.
 *   poll DIR WAIT_MS CHUNK KEEP SYNC OFF1 OFF2 SWEPT
 *       Waits until DIR/status exists, the keeper is gone (its pid and start time are in
 *       DIR/keeper: a keeper the code killed is seen at once), WAIT_MS pass, or output past
 *       the offsets has come and 0.25 s passed (at once when CHUNK bytes wait). When the call
 *       has ended and SWEPT is 0, sweeps (sweep.py: every process of the sandbox's user but
 *       the KEEP ones, "PID:START,...", and the sweep's own ancestors). Prints one JSON line:
 *       {"done": status, {"error": ...} for a keeper gone without one, or null,
 *        "s": [{"off": O, "data": base64}, x2]: up to CHUNK bytes of each stream from its
 *        offset (O > OFF when bytes between are gone: only ever past CAP),
 *        "sweep": {"ok", "msg"} when it swept,
 *        "ws": with the sweep, unless SYNC is "-": what the call changed in the workspace,
 *        "out": with the sweep, when the call had a WATCH folder: its listing as list's answer
 *        (1000 names; walked for 5 s at most, then "truncated") and "files": [[NAME base64,
 *        get's answer with MAX 65536], ...] for the first 20 names (in byte order) changed
 *        since the call started, but regular files over 65536 bytes: what the server reads
 *        next comes with the call's end; and with it the status's "changed", whether that
 *        listing has anything changed since the call started (true when it was cut short).
 *        The keeper walks nothing: the end of a call, killed or not, is written at once, so
 *        that a large WATCH folder on a loaded sandbox never holds up a kill's wait}.
 *       SYNC is "-" or GEN:MAXN:MAXB:INLINE:MAXRM:ROOT:STATE: the changes under ROOT since
 *       the listing STATE/GEN.json, within the bounds (wssync.h has it all).
 *   kill DIR WAIT_MS CHUNK KEEP SYNC OFF1 OFF2
 *       Creates DIR/kill (the keeper looks every 0.2 s, and go will not start a call after
 *       it) and sends the keeper SIGTERM; waits as poll, then sweeps whatever happened.
 *   Each of go, poll and kill first kills the one of them that ran for the call before, if it
 *   still waits: its request was abandoned, and its sweep would kill the new one.
 *   A background call: SH_FALLBACK's bit 2. Its keeper takes TIMEOUT_MS as the program's whole
 *   life, gives it a pipe for stdin fed from the FIFO DIR/in, and puts it (no_new_privs) in a
 *   Landlock domain of its own; go refuses it where the kernel has no Landlock scopes (ABI 6),
 *   and its answer says "keeper": "PID:START" of the keeper it forked. KEEP entries
 *   "+PID:START" spare that process and all its descendants from the sweep.
 *   bgq SIZE N (DIR KEEPER OFF1 OFF2 SPILL_PREFIX)...
 *       one JSON line, a list: per process {"done": status, {"error"} when its keeper is gone
 *       without one, or null; "end": [bytes of each stream so far]; "s": up to SIZE bytes of
 *       each stream from its offset, read from N.head, the spill file, or N.tail}
 *   bgin DIR KEEPER CLOSE   writes the data line into DIR/in, what it takes now ({"written"}),
 *                           then, CLOSE 1, makes DIR/inclose: the keeper closes the stdin
 *   bgsig DIR KEEPER SIG    DIR/sig for the keeper, which sends SIG to the process group
 *   procs                   prints "PID:STARTTIME,..." of every process (KEEP: taken when the
 *                           sandbox has started, before any call);
 *                           then "HASH B64": the runner's code object (see above)
 *   wsprep ROOT STATE SRC   after a --workspace folder was uploaded into ROOT: its folders and
 *                           modes (the manifest SRC, "-": the data line), the first listing
 *   put SRC DST MODE        puts SRC ("-": the data line) in place as DST, as go does
 *   list DIR MAX [SKIP]     one JSON line: what lies under DIR (as the agent's AG_LIST)
 *   get PATH MAX            one JSON line: PATH's first MAX bytes (as the agent's AG_GET)
 *   getb DIR MAX B64        the same for DIR/NAME, NAME (bytes, not UTF-8) given as base64
 * SANDBOX_MCP_NO_SWEEP=1 in the toolbox's environment turns the sweep off (the test server sets
 * it when it cannot give a sandbox a PID namespace of its own, where a sweep would reach the host).
 *
 * Python because every image this backend runs code in has it (it runs execute_python), and
 * it can be a subreaper and read /proc without anything else installed.
 */
#ifndef SANDBOX_DAYTONA_RUNNER_H
#define SANDBOX_DAYTONA_RUNNER_H

#include <stdbool.h>
#include <stddef.h>

#include "../../src/base/buf.h"
#include "../run/run.h"

/* The runner as the sandbox's Python compiled it (its "procs" says, before any call): the
 * SHA-256 of its code object (marshal) and the line that carries it, "!" HASH base64url(zlib). */
struct runner_code {
	char hash[65];
	char *line;
	size_t len;
};

/* The most a "procs" answer's code line may be. */
#define RUNNER_CODE_MAX (1u << 20)

/* What the runner answers, with exit code 3, when the code object it was told to use is not
 * there (or not the one named): the request is sent again with full (runner_fill). */
#define RUNNER_MISS "sandbox-mcp: runner code missing"

/* Takes "HASH B64" (procs' second line) into rc. 0, or -1 when it is not that. */
int runner_code_set(struct runner_code *rc, const char *answer);
void runner_code_free(struct runner_code *rc);

/* Puts the runner into cmd (a command runner_end ended) as out: with rc, the line that names its
 * kept code object, or with full the line that carries it; without rc (before the sandbox's
 * "procs" said it), its source. 1, 0 when cmd is no runner command (out untouched), -1 when out
 * of memory. */
int runner_fill(struct buf *out, const char *cmd, const struct runner_code *rc, bool full);

/* Starts a request's command in c: PYTHON -I -S -c BOOT MODE. */
void runner_cmd(struct buf *c, const char *python, const char *mode);

/* Adds " WORD", quoted for a POSIX shell. */
void runner_word(struct buf *c, const char *w);

/* Ends the command: tail (more shell text on its line, or NULL), then the here-document with
 * the runner and one data line per file of files[0..n) (their data; n may be 0). c->oom when
 * out of memory, the runner included. */
void runner_end(struct buf *c, const char *tail, const struct run_file *files, size_t n);

/* The same for a command that uses the workspace sync (a SYNC word, wsprep): its program
 * (wssync.py, gzipped) goes as the line after the runner's, which the runner executes too. */
void runner_end_ws(struct buf *c, const char *tail, const struct run_file *files, size_t n);

#endif
