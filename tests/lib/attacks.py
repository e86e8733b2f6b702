#!/usr/bin/env python3
"""Runs the attack suite's cases (tests/attacks/cases) against one backend.

Usage: attacks.py CASES BACKEND [--stderr FILE] -- SERVER [ARGS...]
Sets up what the cases aim at on the host (a secret file, a TCP listener on 127.0.0.1, an
abstract unix socket), runs every case that applies to BACKEND as one call of one server
session (lib/session.py), and checks each result: SAFE as the last line of stdout (or, for
"expect: timeout", a timed-out result; for "expect: capped", a cut stdout and a result within
32 KiB). Prints "ok N NAME" or "not ok N NAME: WHY" per case, then "N cases, N failed"; exits
1 when any failed or none ran.
"""
import json, os, re, secrets, socket, subprocess, sys, threading

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT_MAX = 32 * 1024

def parse(path):
    cases, cur = [], None
    for line in open(path, encoding="utf-8").read().split("\n"):
        m = re.match(r"^=== (.+?) \| (bash|python) \| ([a-z ]+?)(?: \| expect: (timeout|capped))?\s*$", line)
        if m:
            cur = {"name": m.group(1), "tool": m.group(2), "backends": m.group(3).split(),
                   "expect": m.group(4) or "safe", "code": []}
            cases.append(cur)
        elif line.startswith("==="):
            sys.exit("attacks.py: a bad case header: %r" % line)
        elif cur is not None:
            cur["code"].append(line)
        elif line and not line.startswith("#"):
            sys.exit("attacks.py: text before the first case: %r" % line)
    for c in cases:
        c["code"] = "\n".join(c["code"]).strip() + "\n"
    return cases

def host_targets():
    """What the cases aim at, alive while the session runs."""
    tag = secrets.token_hex(6)
    secret = "/tmp/attack-secret-" + tag
    with open(secret, "w") as f:
        f.write("host secret\n")
    os.chmod(secret, 0o644)
    lsn = socket.socket(); lsn.bind(("127.0.0.1", 0)); lsn.listen(16)
    ab = socket.socket(socket.AF_UNIX); ab.bind("\0attack-" + tag); ab.listen(16)
    def serve(s):
        while True:
            try:
                c, _ = s.accept(); c.sendall(b"HOST\n"); c.close()
            except OSError:
                return
    for s in (lsn, ab):
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    subs = {"@SECRET@": secret, "@PORT@": str(lsn.getsockname()[1]), "@ABSTRACT@": "attack-" + tag,
            "@HOSTNAME@": socket.gethostname(),
            "@STATE@": os.path.realpath(os.environ.get("SANDBOX_STATE_DIR") or
                                        os.path.join(os.environ.get("TMPDIR") or "/tmp", "sandbox-mcp-%d" % os.geteuid()))}
    return subs, lambda: (lsn.close(), ab.close(), os.unlink(secret))

def main():
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args:
        sys.exit(__doc__)
    cases_path, backend = args[0], args[1]
    rest = args[2:args.index("--")]
    server = args[args.index("--") + 1:]
    cases = [c for c in parse(cases_path) if backend in c["backends"]]
    if not cases:
        print("0 cases, 0 failed"); return 1
    subs, undo = host_targets()
    script = [{"jsonrpc": "2.0", "id": "init", "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attacks", "version": "1"}}},
              {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    for i, c in enumerate(cases, 1):
        code = c["code"]
        for k, v in subs.items():
            code = code.replace(k, v)
        arg = {"code": code} if c["tool"] == "bash" else {"script": code}
        arg["timeout_s"] = 2 if c["expect"] == "timeout" else 30
        tool = "execute_bash_commands" if c["tool"] == "bash" else "execute_python"
        script.append({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": arg}})
        script.append({"wait": i})
    try:
        p = subprocess.run([sys.executable, os.path.join(HERE, "session.py"), "--timeout", "900"] + rest + ["--"] + server,
                           input="\n".join(json.dumps(s) for s in script) + "\n", capture_output=True, text=True)
    finally:
        undo()
    results, sizes = {}, {}
    for line in p.stdout.split("\n"):
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if isinstance(m, dict) and isinstance(m.get("id"), int):
            results[m["id"]] = m
            sizes[m["id"]] = len(json.dumps(m.get("result"), separators=(",", ":"), ensure_ascii=False).encode())
    failed = 0
    for i, c in enumerate(cases, 1):
        m = results.get(i)
        why = None
        if m is None or "result" not in m:
            why = "no result: %s" % (json.dumps(m)[:300] if m else "none (the session: %s)" % p.stderr[-300:])
        else:
            sc = m["result"].get("structuredContent") or {}
            out = sc.get("stdout") or ""
            if c["expect"] == "timeout":
                if not sc.get("timed_out"):
                    why = "did not time out: %s" % json.dumps(sc)[:300]
            elif c["expect"] == "capped":
                if not (sc.get("truncated") or {}).get("stdout") or sizes[i] > RESULT_MAX or not out.rstrip("\n").endswith("SAFE"):
                    why = "not capped to the budget (%d bytes): %s" % (sizes[i], json.dumps(sc)[:300])
            elif m["result"].get("isError") or out.rstrip("\n").split("\n")[-1] != "SAFE":
                why = "%s" % json.dumps({"exit_code": sc.get("exit_code"), "stdout": out[-300:],
                                         "stderr": (sc.get("stderr") or "")[-300:], "error": sc.get("error")})
        if why:
            failed += 1
            print("not ok %d %s: %s" % (i, c["name"], why))
        else:
            print("ok %d %s" % (i, c["name"]))
    if p.returncode != 0:
        print("the session failed (exit %d): %s" % (p.returncode, p.stderr[-500:]))
        failed += 1
    print("%d cases, %d failed" % (len(cases), failed))
    return 1 if failed else 0

sys.exit(main())
