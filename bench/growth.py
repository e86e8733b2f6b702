#!/usr/bin/env python3
"""Costs that grow with what a client does, against their baselines, on one server each.

Usage: growth.py [--server BIN] [--rounds N] [--files N,N,...] [--json OUT]

- resources/list over a workspace of N files (N from --files, default 10,10000,100000): the
  first page, then every page to the end, timed from request written to response read; the
  ratio of all pages to the first.
- a warm `pass` (execute_python) in a workspace of the largest N, before any listing and after
  a listing (the server then tracks the tree for notifications/resources/list_changed).
- a `files` input of 1 KiB to 8 MiB (text and base64) on a warm `true`: the time over the same
  call without files, per MiB of content.

Each figure is a median over --rounds; runs are interleaved (before/after alternate), so load
on the machine moves both alike. The server runs with --backend local.
"""
import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

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
        self.p.stdin.close()
        self.p.wait(timeout=60)
        subprocess.run(["rm", "-rf", self.tmp], stderr=subprocess.DEVNULL)


def list_all(s):
    t_first, r = s.rpc("resources/list")
    total, pages = t_first, 1
    while "nextCursor" in r["result"]:
        ms, r = s.rpc("resources/list", {"cursor": r["result"]["nextCursor"]})
        total += ms
        pages += 1
    return t_first, total, pages


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("SANDBOX_MCP", "build/sandbox-mcp"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", default="10,10000,100000")
    ap.add_argument("--sizes", default="1K,64K,1M,8M")
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {"server": a.server, "resources": [], "pass": None, "files": []}

    counts = [int(x) for x in a.files.split(",")]
    for n in counts:
        s = Server(a.server, [])
        s.call("execute_bash_commands", {"code": f"seq {n} | sed 's/^/f/' | xargs touch"})
        firsts, alls, pages = [], [], 0
        for _ in range(a.rounds):
            f, t, pages = list_all(s)
            firsts.append(f)
            alls.append(t)
        row = {"files": n, "pages": pages, "first_ms": med(firsts), "all_ms": med(alls)}
        out["resources"].append(row)
        print(f"resources/list, {n} files: one page {row['first_ms']:.1f} ms, all {pages} pages {row['all_ms']:.1f} ms "
              f"({row['all_ms'] / row['first_ms']:.2f}x one page)", flush=True)
        if n == max(counts):
            # A warm pass before any listing, then after one: a fresh server each, interleaved.
            before, after = [], []
            for _ in range(a.rounds):
                for listed, acc in ((False, before), (True, after)):
                    if listed:
                        s.rpc("resources/list")
                    ms = [s.call("execute_python", {"script": "pass"})[0] for _ in range(5)]
                    acc.append(med(ms))
                # A new server for the next "before": the listing is remembered for its life.
                s.close()
                s = Server(a.server, [])
                s.call("execute_bash_commands", {"code": f"seq {n} | sed 's/^/f/' | xargs touch"})
            out["pass"] = {"files": n, "before_ms": med(before), "after_ms": med(after)}
            print(f"warm pass, {n} files: before any listing {med(before):.1f} ms, after one {med(after):.1f} ms "
                  f"({med(after) / med(before):.2f}x)", flush=True)
        s.close()

    s = Server(a.server, [])
    s.call("execute_bash_commands", {"code": "true"})
    units = {"K": 1 << 10, "M": 1 << 20}
    for spec in a.sizes.split(","):
        size = int(spec[:-1]) * units[spec[-1]]
        text = "x" * size
        b64 = base64.b64encode(os.urandom(size)).decode()
        base, tt, tb = [], [], []
        for _ in range(a.rounds):
            base.append(s.call("execute_bash_commands", {"code": "true"})[0])
            tt.append(s.call("execute_bash_commands", {"code": "true", "files": {"in.txt": text}})[0])
            tb.append(s.call("execute_bash_commands", {"code": "true", "files": {"in.bin": {"base64": b64}}})[0])
        mib = size / (1 << 20)
        row = {"bytes": size, "base_ms": med(base), "text_ms": med(tt), "base64_ms": med(tb),
               "text_ms_per_mib": (med(tt) - med(base)) / mib, "base64_ms_per_mib": (med(tb) - med(base)) / mib}
        out["files"].append(row)
        print(f"files {spec}: call without {row['base_ms']:.1f} ms; text {row['text_ms']:.1f} ms "
              f"({row['text_ms_per_mib']:.1f} ms/MiB), base64 {row['base64_ms']:.1f} ms "
              f"({row['base64_ms_per_mib']:.1f} ms/MiB)", flush=True)
    s.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
