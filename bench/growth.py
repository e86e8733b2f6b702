#!/usr/bin/env python3
"""Costs that grow with what a client does, against their baselines, on one server each.

Usage: growth.py [--server BIN] [--baseline BIN] [--rounds N] [--files N,N,...] [--sizes S,...]
                 [--out-sizes S,...] [--json OUT]

- resources/list over a workspace of N files (N from --files, default 10,10000,100000): the
  first page, then every page to the end, timed from request written to response read; the
  ratio of all pages to the first.
- a warm `pass` (execute_python) in each workspace of N files, before any listing and after
  it (the server then tracks the tree for notifications/resources/list_changed); and the CPU
  time of server and sandbox per pass after a listing over the same passes before it.
With --baseline (or BENCH_BASELINE), an older build's figures of both, beside this one's.
- a `files` input of 1 KiB to 8 MiB (text and base64) on a warm `true`: the time over the same
  call without files, per MiB of content, end to end; and the server's own CPU time over the
  same call without files, per MiB (its threads' run time from /proc/PID/task/*/schedstat, in
  ns: what the server spends, not the client's encoding, the pipe or the agent's writing).
- a warm call printing 1 KB to 100 MB to stdout (--out-sizes), with the default --result-max
  (32 KiB: the rest is saved in the workspace), beside the same command run natively (`bash -c
  CMD`, posix_spawn, stdout read to its end, waitpid).
- a warm call writing 0, 1 and 20 small files into outputs/ (returned with its result), beside
  the same server's warm `true`; with strace, the agent frames each costs (bench/roundtrips.py).

Each figure is a median over --rounds; runs are interleaved (the builds alternate, each round
on a fresh server), so load on the machine moves them alike. The server runs with --backend local.
"""
import argparse
import base64
import shutil
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roundtrips  # noqa: E402  (its strace count of agent frames)

CPU_CALLS = 20
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "growth", "version": "1"}}}


class Server:
    def __init__(self, binary, extra):
        self.tmp = tempfile.mkdtemp(prefix="growth-")
        self.p = subprocess.Popen([binary, "--backend", "local", "--state-dir", self.tmp + "/state"] + extra,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.id = 0
        self.rpc("initialize", INIT["params"])
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        self.p.stdin.flush()

    def rpc(self, method, params=None):
        self.id += 1
        msg = {"jsonrpc": "2.0", "id": self.id, "method": method}
        if params is not None:
            msg["params"] = params
        t0 = time.perf_counter()
        self.send(msg)
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("the server ended")
            r = json.loads(line)
            if r.get("id") == self.id:
                return (time.perf_counter() - t0) * 1000, r

    def call(self, tool, args):
        ms, r = self.rpc("tools/call", {"name": tool, "arguments": args})
        if "error" in r or r["result"].get("isError"):
            raise SystemExit(f"call failed: {json.dumps(r)[:300]}")
        return ms, r

    def close(self):
        """Ends the server; returns the CPU seconds (user + system) of it and of the processes
        it waited for (its sandbox's), which load on the machine moves far less than time."""
        self.p.stdin.close()
        deadline = time.monotonic() + 60
        while True:
            pid, status, ru = os.wait4(self.p.pid, os.WNOHANG)
            if pid:
                self.p.returncode = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                raise SystemExit("the server did not end")
            time.sleep(0.05)
        subprocess.run(["rm", "-rf", self.tmp], stderr=subprocess.DEVNULL)
        return ru.ru_utime + ru.ru_stime


def list_all(s):
    """Every page of the listing: the first page's time, all pages' time, the pages, and the CPU
    seconds of server and sandbox for the first page and for all."""
    c0 = tree_cpu(s.p.pid)
    t_first, r = s.rpc("resources/list")
    c1 = tree_cpu(s.p.pid)
    total, pages = t_first, 1
    while "nextCursor" in r["result"]:
        ms, r = s.rpc("resources/list", {"cursor": r["result"]["nextCursor"]})
        total += ms
        pages += 1
    return t_first, total, pages, c1 - c0, tree_cpu(s.p.pid) - c0


def server_cpu_ns(pid):
    """Nanoseconds the server process itself (every thread, no child) has run so far."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def tree_cpu(pid):
    """CPU seconds so far of pid and its descendants (their sandboxes' processes too): each live
    one's own and that of the children it waited for (/proc's utime, stime, cutime, cstime)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def cpu_per_pass(binary, n, listed, calls):
    """CPU seconds of the server and its sandbox over `calls` warm passes in a workspace of n
    files, after the first page was listed (listed) or with no listing yet."""
    s = Server(binary, [])
    s.call("execute_bash_commands", {"code": f"seq {n} | sed 's/^/f/' | xargs touch"})
    s.call("execute_python", {"script": "pass"})
    if listed:
        s.rpc("resources/list")
    t0 = tree_cpu(s.p.pid)
    for _ in range(calls):
        s.call("execute_python", {"script": "pass"})
    # What the last call's check costs comes after its answer: a request queued behind it.
    s.rpc("resources/read", {"uri": "sandbox://workspace/no-such-file"})
    t1 = tree_cpu(s.p.pid)
    s.close()
    return t1 - t0


def med(v):
    return statistics.median(v) if v else float("nan")


BASH = shutil.which("bash") or "/bin/bash"
PAUSE_S = 0.05  # before each timed call and native run, so that neither pays for the one before


def native(cmd):
    """`bash -c CMD` as bench/spawn.py times a floor: posix_spawn (stdin /dev/null, stdout a pipe),
    stdout read to its end, waitpid. Returns the milliseconds and the bytes read."""
    r, w = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    n = 0
    t0 = time.perf_counter()
    pid = os.posix_spawn(BASH, [BASH, "-c", cmd], dict(os.environ),
                         file_actions=[(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, w, 1)])
    os.close(w)
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        n += len(b)
    _, st = os.waitpid(pid, 0)
    ms = (time.perf_counter() - t0) * 1000
    os.close(r)
    os.close(null)
    if os.waitstatus_to_exitcode(st) != 0:
        raise SystemExit(f"growth: `bash -c {cmd}` failed")
    return ms, n


def printed(r):
    """The bytes a call wrote to stdout, from its result: all of it, or the count of a cut one."""
    sc = r["result"]["structuredContent"]
    t = sc.get("truncated") or {}
    if t.get("stdout"):
        if t.get("stdout_file_error"):
            raise SystemExit(f"growth: the cut stdout was not saved: {t['stdout_file_error']}")
        return t["stdout_bytes"]
    return len(sc["stdout"].encode())


def stdout_sizes(binary, specs, rounds):
    """A warm call printing each size, beside the same command run natively, rounds interleaved."""
    units = {"K": 10 ** 3, "M": 10 ** 6}
    sizes = [(spec, int(spec[:-1]) * units[spec[-1]]) for spec in specs.split(",")]
    s = Server(binary, [])
    s.call("execute_bash_commands", {"code": "true"})
    got = {n: {"native": [], "ours": []} for _, n in sizes}
    for _ in range(rounds):
        for _spec, n in sizes:
            cmd = f"head -c {n} /dev/zero | tr '\\0' a"
            time.sleep(PAUSE_S)
            ms, b = native(cmd)
            if b != n:
                raise SystemExit(f"growth: `bash -c {cmd}` printed {b} bytes")
            got[n]["native"].append(ms)
            time.sleep(PAUSE_S)
            ms, r = s.call("execute_bash_commands", {"code": cmd})
            if printed(r) != n:
                raise SystemExit(f"growth: the call printing {n} bytes gave {printed(r)}")
            got[n]["ours"].append(ms)
            if n > 10 ** 6:  # untimed: the saved stream, so the workspace does not fill up
                s.call("execute_bash_commands", {"code": "rm -f /workspace/.sandbox/output/call-*"})
    s.close()
    rows = []
    print(f"\nstdout of a warm call (--backend local, the default --result-max 32 KiB: past it the result "
          f"keeps the stream's head and tail and the whole of it is saved in the workspace), beside "
          f"`bash -c CMD` with stdout read to its end; CMD `head -c N /dev/zero | tr '\\0' a`, "
          f"medians of {rounds} rounds")
    print("| stdout | native ms | ours ms | ours / native | ours - native ms |")
    print("| --- | --- | --- | --- | --- |")
    for spec, n in sizes:
        nat, ours = med(got[n]["native"]), med(got[n]["ours"])
        rows.append({"bytes": n, "native_ms": nat, "ours_ms": ours})
        print(f"| {spec[:-1]} {spec[-1]}B | {nat:.2f} | {ours:.2f} | {ours / nat:.2f}x | {ours - nat:+.2f} |", flush=True)
    return rows


def files_code(n):
    """Bash builtins only (outputs/ is made before): n small files written into outputs/."""
    return f'for ((i = 0; i < {n}; i++)); do echo "file $i" > outputs/f$i.txt; done'


def returned_files(binary, counts, rounds):
    """A warm call writing each count of files into outputs/, beside the same server's warm
    `true`, rounds interleaved; and, with strace, the agent frames of each (bench/roundtrips.py)."""
    s = Server(binary, [])
    s.call("execute_bash_commands", {"code": "mkdir -p outputs"})
    got = {k: [] for k in ["true"] + counts}
    for _ in range(rounds):
        time.sleep(PAUSE_S)
        got["true"].append(s.call("execute_bash_commands", {"code": "true"})[0])
        for n in counts:
            time.sleep(PAUSE_S)
            ms, r = s.call("execute_bash_commands", {"code": files_code(n)})
            back = len(r["result"]["structuredContent"].get("artifacts") or [])
            if back != n:
                raise SystemExit(f"growth: a call writing {n} files returned {back}")
            got[n].append(ms)
    s.close()
    frames = {}
    if shutil.which("strace"):
        tmp = tempfile.mkdtemp(prefix="growth-rt-")
        try:
            for n, (f, _files) in zip(counts, roundtrips.agent_counts(
                    os.path.abspath(binary), "local", None, tmp, [roundtrips.outputs_code(n) for n in counts])):
                frames[n] = f
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    base = med(got["true"])
    print(f"\na warm call writing small files into outputs/ (each returned inline with its result; "
          f"--backend local), beside the same server's warm `true` ({base:.2f} ms), medians of {rounds} rounds; "
          f"agent frames the call cost " + ("(strace, as bench/roundtrips.py)" if frames else "(skipped: no strace)"))
    print("| files | ms | over `true` ms | agent frames |")
    print("| --- | --- | --- | --- |")
    rows = []
    for n in counts:
        v = med(got[n])
        rows.append({"files": n, "ms": v, "true_ms": base, "agent_frames": frames.get(n)})
        print(f"| {n} | {v:.2f} | {v - base:+.2f} | {frames.get(n, 'n/a')} |", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("SANDBOX_MCP", "build/sandbox-mcp"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", default="10,10000,100000")
    ap.add_argument("--sizes", default="1K,64K,1M,8M")
    ap.add_argument("--out-sizes", default="1K,100K,1M,10M,100M",
                    help="stdout sizes of the output case (K = 1000 bytes, M = 10**6)")
    ap.add_argument("--baseline", default=os.environ.get("BENCH_BASELINE"),
                    help="an older build: its figures of the listing and the pass, side by side")
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {"server": a.server, "resources": [], "pass": [], "pass_cpu": [], "files": []}

    counts = [int(x) for x in a.files.split(",")]
    builds = [("", a.server)] + ([("baseline ", a.baseline)] if a.baseline else [])
    out["baseline"] = a.baseline
    for n in counts:
        # Per round and build: a fresh server of n files, a warm pass before any listing, every
        # page of the listing, a warm pass after it. Rounds interleave the builds.
        got = {b: {"first": [], "all": [], "cpu_first": [], "cpu_all": [], "before": [], "after": [], "pages": 0}
               for b, _ in builds}
        for _ in range(a.rounds):
            for label, binary in builds:
                g = got[label]
                s = Server(binary, [])
                s.call("execute_bash_commands", {"code": f"seq {n} | sed 's/^/f/' | xargs touch"})
                g["before"].append(med([s.call("execute_python", {"script": "pass"})[0] for _ in range(5)]))
                f, t, g["pages"], cf, ca = list_all(s)
                g["first"].append(f)
                g["all"].append(t)
                g["cpu_first"].append(cf * 1000)
                g["cpu_all"].append(ca * 1000)
                g["after"].append(med([s.call("execute_python", {"script": "pass"})[0] for _ in range(5)]))
                s.close()
        for label, binary in builds:
            g = got[label]
            row = {"build": binary, "files": n, "pages": g["pages"], "first_ms": med(g["first"]), "all_ms": med(g["all"]),
                   "cpu_first_ms": med(g["cpu_first"]), "cpu_all_ms": med(g["cpu_all"])}
            out["resources"].append(row)
            print(f"{label}resources/list, {n} files: one page {row['first_ms']:.1f} ms, all {row['pages']} pages "
                  f"{row['all_ms']:.1f} ms ({row['all_ms'] / row['first_ms']:.2f}x one page; target at most 2x); "
                  f"CPU of server and sandbox {row['cpu_first_ms']:.0f} ms, all {row['cpu_all_ms']:.0f} ms", flush=True)
        for label, binary in builds:
            g = got[label]
            row = {"build": binary, "files": n, "before_ms": med(g["before"]), "after_ms": med(g["after"])}
            out["pass"].append(row)
            print(f"{label}warm pass, {n} files: before any listing {row['before_ms']:.1f} ms, after one "
                  f"{row['after_ms']:.1f} ms ({row['after_ms'] / row['before_ms']:.2f}x; target 1x)", flush=True)
        # The same in CPU time, server and sandbox together: CPU_CALLS passes with a listing
        # before them or none, interleaved.
        cpu = {b: {True: [], False: []} for b, _ in builds}
        for _ in range(a.rounds):
            for label, binary in builds:
                for listed in (False, True):
                    cpu[label][listed].append(cpu_per_pass(binary, n, listed, CPU_CALLS))
        for label, binary in builds:
            extra = (med(cpu[label][True]) - med(cpu[label][False])) / CPU_CALLS * 1000
            per = med(cpu[label][False]) / CPU_CALLS * 1000
            out["pass_cpu"].append({"build": binary, "files": n, "calls": CPU_CALLS, "unlisted_s": med(cpu[label][False]),
                                    "listed_s": med(cpu[label][True]), "ms_per_pass": per, "extra_ms_per_pass": extra})
            print(f"{label}warm pass, {n} files, CPU of server and sandbox: {per:.2f} ms a pass before any listing, "
                  f"{extra:+.2f} ms after one (target +0)", flush=True)

    s = Server(a.server, [])
    s.call("execute_bash_commands", {"code": "true"})
    units = {"K": 1 << 10, "M": 1 << 20}
    for spec in a.sizes.split(","):
        size = int(spec[:-1]) * units[spec[-1]]
        text = "x" * size
        b64 = base64.b64encode(os.urandom(size)).decode()
        base, tt, tb = [], [], []
        cpu = {"base": [], "text": [], "base64": []}

        def timed(kind, args):
            c0 = server_cpu_ns(s.p.pid)
            ms = s.call("execute_bash_commands", args)[0]
            cpu[kind].append((server_cpu_ns(s.p.pid) - c0) / 1e6)
            return ms
        for _ in range(a.rounds):
            base.append(timed("base", {"code": "true"}))
            tt.append(timed("text", {"code": "true", "files": {"in.txt": text}}))
            tb.append(timed("base64", {"code": "true", "files": {"in.bin": {"base64": b64}}}))
        mib = size / (1 << 20)
        row = {"bytes": size, "base_ms": med(base), "text_ms": med(tt), "base64_ms": med(tb),
               "text_ms_per_mib": (med(tt) - med(base)) / mib, "base64_ms_per_mib": (med(tb) - med(base)) / mib,
               "server_cpu_base_ms": med(cpu["base"]),
               "server_text_ms_per_mib": (med(cpu["text"]) - med(cpu["base"])) / mib,
               "server_base64_ms_per_mib": (med(cpu["base64"]) - med(cpu["base"])) / mib}
        out["files"].append(row)
        print(f"files {spec}: call without {row['base_ms']:.1f} ms; text {row['text_ms']:.1f} ms "
              f"({row['text_ms_per_mib']:.1f} ms/MiB), base64 {row['base64_ms']:.1f} ms "
              f"({row['base64_ms_per_mib']:.1f} ms/MiB); in the server (CPU over the call without, "
              f"{row['server_cpu_base_ms']:.2f} ms): text {row['server_text_ms_per_mib']:.1f} ms/MiB, "
              f"base64 {row['server_base64_ms_per_mib']:.1f} ms/MiB (target at most 10)", flush=True)
    s.close()
    out["stdout"] = stdout_sizes(a.server, a.out_sizes, a.rounds)
    out["returned_files"] = returned_files(a.server, [0, 1, 20], a.rounds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
