#!/usr/bin/env python3
"""Requests a call returning small files in outputs/ costs its sandbox, beside a baseline.

Usage: roundtrips.py [--server BIN] [--baseline BIN] [--backends local,docker,daytona]
                     [--image IMG] [--json OUT]

- local, Docker: the frames the server sends its sandbox's agent (agent/proto.h), seen by
  `strace -f -e trace=sendto` on the server (a frame is a send whose first four bytes give its
  length); a session with one warm call, then the same with the 20-file call after it: the
  difference is that call's. On local, also calls writing 0 and 1 file, counted the same way.
- Daytona: tests/daytona/server.py's request log (GET /_control), before and after the call.
Prints a line per backend and binary.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "roundtrips", "version": "1"}}


def outputs_code(n):
    """Bash that writes n small files into outputs/ (n = 0 writes none but runs the same)."""
    return f"mkdir -p outputs; for i in $(seq 10 {9 + n}); do echo \"file $i\" > outputs/f$i.txt; done"


TWENTY = outputs_code(20)


def session(argv, env, calls, between=None):
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    n = 0
    files = None

    def rpc(method, params):
        nonlocal n
        n += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit("roundtrips: the server ended")
            r = json.loads(line)
            if r.get("id") == n:
                if "error" in r or r["result"].get("isError"):
                    raise SystemExit("roundtrips: call failed: " + line.decode()[:300])
                return r

    rpc("initialize", INIT)
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for i, code in enumerate(calls):
        if between and i == len(calls) - 1:
            between("before")
        r = rpc("tools/call", {"name": "execute_bash_commands", "arguments": {"code": code}})
        files = len(r["result"]["structuredContent"].get("artifacts") or [])
        if between and i == len(calls) - 1:
            between("after")
    p.stdin.close()
    p.wait(timeout=120)
    return files


FRAME = re.compile(r'sendto\(\d+, "((?:\\x[0-9a-f]{2}){5})"\.\.\., (\d+),')


def agent_frames(trace):
    n = 0
    with open(trace) as f:
        for line in f:
            m = FRAME.search(line)
            if not m:
                continue
            b = bytes(int(x, 16) for x in m.group(1).split("\\x")[1:])
            if int.from_bytes(b[:4], "little") + 4 == int(m.group(2)) and 1 <= b[4] <= 64:
                n += 1
    return n


def agent_counts(binary, backend, image, tmp, codes):
    """The agent frames of each of codes as a warm call (the second of its session), and the
    files it returned: [(frames, files)] in the order of codes."""
    counts, got = [], []
    for calls in [["true"]] + [["true", c] for c in codes]:
        trace = os.path.join(tmp, "trace")
        argv = ["strace", "-f", "-qq", "-e", "trace=sendto", "-e", "signal=none", "-s", "5", "-xx", "-o", trace,
                binary, "--backend", backend, "--state-dir", os.path.join(tmp, "state")]
        if backend == "docker":
            argv += ["--image", image]
        got.append(session(argv, dict(os.environ), calls))
        counts.append(agent_frames(trace))
        shutil.rmtree(os.path.join(tmp, "state"), ignore_errors=True)
    return [(c - counts[0], f) for c, f in zip(counts[1:], got[1:])]


def daytona_count(binary, tmp):
    port_file = os.path.join(tmp, "dt.port")
    here = os.path.dirname(os.path.abspath(__file__))
    srv = subprocess.Popen([sys.executable, os.path.join(here, "..", "tests", "daytona", "server.py"), "--port-file",
                            port_file], env=dict(os.environ, DAYTONA_TEST_KEY="rt-key"), stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        url = "http://127.0.0.1:" + open(port_file).read().strip()
        seen = {}

        def mark(when):
            with urllib.request.urlopen(url + "/_control") as r:
                seen[when] = len(json.load(r)["requests"])

        env = dict(os.environ, DAYTONA_API_URL=url + "/api", DAYTONA_API_KEY="rt-key")
        files = session([binary, "--backend", "daytona", "--state-dir", os.path.join(tmp, "state")], env,
                        ["true", TWENTY], mark)
        shutil.rmtree(os.path.join(tmp, "state"), ignore_errors=True)
        return seen["after"] - seen["before"], files
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("SANDBOX_MCP", "build/sandbox-mcp"))
    ap.add_argument("--baseline")
    ap.add_argument("--backends", default="local,docker,daytona")
    ap.add_argument("--image", default=os.environ.get("SANDBOX_IMAGE", "sandbox-mcp-test:latest"))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for backend in a.backends.split(","):
        if backend != "daytona" and not shutil.which("strace"):
            print(f"a call returning 20 files, {backend}: skipped, strace is not installed")
            continue
        for label, binary in (("this build", a.server), ("baseline", a.baseline)):
            if not binary:
                continue
            tmp = tempfile.mkdtemp(prefix="roundtrips-")
            try:
                if backend == "daytona":
                    got = [(20, *daytona_count(os.path.abspath(binary), tmp))]
                    what = "HTTP requests"
                else:
                    written = [0, 1, 20] if backend == "local" else [20]
                    got = [(w, *c) for w, c in zip(written, agent_counts(
                        os.path.abspath(binary), backend, a.image, tmp, [outputs_code(w) for w in written]))]
                    what = "agent requests"
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for written, n, files in got:
                rows.append({"backend": backend, "binary": label, "written": written, "requests": n, "files": files})
                print(f"a call returning {files} small files, {backend}, {label}: {n} {what}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    sys.exit(main())
