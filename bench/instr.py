#!/usr/bin/env python3
"""The server's own instructions per warm call, counted by callgrind.

Usage: instr.py [--server BIN] [--baseline BIN] [--backend local|docker] [--calls N] [--code CODE]
                [--image IMG] [--files-mib M] [--listed N] [--json OUT]

The server runs under `valgrind --tool=callgrind` (its own process only: its sandboxes and
helpers are other processes, counted apart or not at all) while one session sends one call
that makes the sandbox, then N warm calls of CODE (execute_bash_commands, default `true`);
a second session sends 2N (--repeat pairs, the median said: how many requests making a Docker
sandbox takes varies a little). The difference over N is what one warm call costs the server, free
of start-up, the sandbox's making and the shutdown. With --baseline, the same for that binary
(an older build), side by side. With --files-mib M, also the instructions per MiB of a `files`
input of M MiB (text, then base64) on a warm call: sessions of three calls with and without it.
With --listed N, the first call makes N files and a resources/list follows it, so that each warm
call is one after a listing (what the change tracking for list_changed costs the server).
Prints a line per figure and binary, and JSON to --json.
"""
import argparse
import base64
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "instr", "version": "1"}}


def session(binary, backend, image, calls, code, tmp, prefix, files=None, listed=0):
    out = os.path.join(tmp, "cg.%p")
    args = prefix + ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, "--trace-children=no",
            binary, "--backend", backend, "--state-dir", os.path.join(tmp, "state")]
    if backend == "docker":
        args += ["--image", image]
    env = dict(os.environ, HOME=tmp)
    p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = 0

    def rpc(method, params):
        nonlocal n
        n += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit("instr: the server ended")
            r = json.loads(line)
            if r.get("id") == n:
                if "error" in r or r["result"].get("isError"):
                    raise SystemExit("instr: call failed: " + line.decode()[:300])
                return r

    rpc("initialize", INIT)
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    first = f"seq {listed} | sed 's/^/f/' | xargs touch" if listed else code
    rpc("tools/call", {"name": "execute_bash_commands", "arguments": {"code": first}})
    if listed:
        rpc("resources/list", {})
    for _ in range(calls):
        args = {"code": code}
        if files:
            args["files"] = files
        rpc("tools/call", {"name": "execute_bash_commands", "arguments": args})
    p.stdin.close()
    p.wait(timeout=120)
    # The server's own file: its pid is p's (valgrind execs the server in place).
    f = out.replace("%p", str(p.pid))
    total = None
    with open(f) as fh:
        for line in fh:
            if line.startswith("totals:") or line.startswith("summary:"):
                total = int(line.split()[1])
    keep = os.environ.get("INSTR_KEEP")
    if keep:
        shutil.copy(f, f"{keep}.{calls}")
    for g in glob.glob(os.path.join(tmp, "cg.*")):
        os.unlink(g)
    shutil.rmtree(os.path.join(tmp, "state"), ignore_errors=True)
    if total is None:
        raise SystemExit("instr: no totals in " + f)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("SANDBOX_MCP", "build/sandbox-mcp"))
    ap.add_argument("--backend", default="local")
    ap.add_argument("--image", default=os.environ.get("SANDBOX_IMAGE", "sandbox-mcp-test:latest"))
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--code", default="true")
    ap.add_argument("--baseline")
    ap.add_argument("--repeat", type=int, default=3, help="pairs of sessions; the median is said")
    ap.add_argument("--json")
    ap.add_argument("--listed", type=int, default=0,
                    help="the first call makes this many files and a resources/list follows it: the calls are after a listing")
    ap.add_argument("--files-mib", type=int, default=0, help="also: instructions per MiB of a files input this large")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        print(f"server instructions per warm call, {a.backend}: skipped, valgrind is not installed")
        return
    rows = []
    for label, binary in (("this build", a.server), ("baseline", a.baseline)):
        if not binary:
            continue
        per, fixed, user = measure(os.path.abspath(binary), a)
        per, fixed = int(per), int(fixed)
        rows.append({"binary": label, "backend": a.backend, "user": user, "calls": a.calls, "per_call": per,
                     "fixed": fixed, "listed": a.listed})
        after = f" after a listing of {a.listed} files" if a.listed else ""
        print(f"server instructions per warm `{a.code}` call{after}, {a.backend} (as {user}), {label}: {per:,}", flush=True)
        if a.files_mib:
            for kind in ("text", "base64"):
                per = measure_files(os.path.abspath(binary), a, kind)
                rows.append({"binary": label, "files_input": kind, "per_mib": per})
                print(f"server instructions per MiB of a `files` input ({kind}), {label}: {per:,}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f)


def measure_files(binary, a, kind):
    """Instructions per MiB of a files input: sessions of 3 calls with and without one."""
    tmp = tempfile.mkdtemp(prefix="instr-")
    prefix = []
    if os.geteuid() == 0 and a.backend == "local":
        os.chmod(tmp, 0o777)
        shutil.copy(binary, tmp + "/sandbox-mcp")
        binary = tmp + "/sandbox-mcp"
        prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    mib = a.files_mib
    text = ("x" * 63 + "\n") * (mib << 14)
    files = {"in.txt": text} if kind == "text" else {"in.bin": {"base64": base64.b64encode(os.urandom(mib << 20)).decode()}}
    try:
        plain = session(binary, a.backend, a.image, 3, "true", tmp, prefix)
        with_files = session(binary, a.backend, a.image, 3, "true", tmp, prefix, files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return round((with_files - plain) / (3 * mib))


def measure(binary, a):
    tmp = tempfile.mkdtemp(prefix="instr-")
    # As root, local makes the sandbox's root files in a child whose fsuid is the sandbox
    # user's, which valgrind's own file use in that child does not survive: the server runs as
    # nobody there (then with no cgroup of its own to read).
    prefix, user = [], "root" if os.geteuid() == 0 else "unprivileged"
    if os.geteuid() == 0 and a.backend == "local":
        os.chmod(tmp, 0o777)
        shutil.copy(binary, tmp + "/sandbox-mcp")
        binary, user = tmp + "/sandbox-mcp", "nobody"
        prefix = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    per, fixed = [], []
    try:
        for _ in range(a.repeat):
            one = session(binary, a.backend, a.image, a.calls, a.code, tmp, prefix, listed=a.listed)
            two = session(binary, a.backend, a.image, 2 * a.calls, a.code, tmp, prefix, listed=a.listed)
            per.append(round((two - one) / a.calls))
            fixed.append(one - (two - one))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return statistics.median(per), statistics.median(fixed), user


if __name__ == "__main__":
    sys.exit(main())
