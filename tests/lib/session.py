#!/usr/bin/env python3
"""Drives sandbox-mcp over stdio for the tests and the demo.

Usage: session.py [--stderr FILE] [--timeout S] [--rusage] [--pidfile F] -- SERVER [ARGS...]
(--rusage: print {"maxrss_kb": N} last, the peak resident size of the server or any of its
descendants that it waited for.)

Reads a script from stdin, one JSON value per line:
  - an object or array: sent to the server as one line (compact JSON);
  - {"raw": "text"}: sent as is (no newline added); {"raw_hex": "..."}: bytes sent as is;
  - {"sleep": S}: pause;
  - {"wait": ID}: wait until the response with that id arrived;
  - {"wait_line": "regex"}: wait until a stdout line matches;
  - {"signal": "TERM"|"INT"|"KILL"}: signal the server;
  - {"sh": "command"}: run a shell command on the host (it must succeed; $SERVER_PID is the
    server's pid, e.g. to find its containers by their label sandbox-mcp.pid);
  - {"until": "command"}: run a shell command every 0.1 s until it succeeds (within the
    session's timeout): how a script waits for a condition on the host;
  - {"close": true}: close the server's stdin;
  - {"expect_exit": S}: wait up to S seconds for the server to exit; prints
    {"exit": CODE, "exit_after_ms": MS} (time since the previous step) as a line of its own.
After the script, waits until every request sent was answered, closes stdin, and waits for
the server to exit. Prints every stdout line of the server unchanged. Exits 3 if a stdout
line was not JSON (protocol pollution), 4 on a timeout, 5 when a tool result's
structuredContent does not satisfy its tool's outputSchema (schemas/tools.json), 6 when the
server exited by itself (no signal, close or expect_exit step) leaving requests unanswered,
else 0.
"""
import json, os, re, signal, subprocess, sys, threading, time

try:
    import jsonschema
except ImportError:
    # A python3 of its own on PATH (pyenv, a venv) may lack it where Debian's has it.
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("session.py: the jsonschema module is missing (scripts/deps.sh test installs python3-jsonschema)")

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas", "tools.json")

def output_schemas():
    """Each tool's outputSchema, as the server lists it (schemas/tools.json names its file)."""
    with open(SCHEMAS) as f:
        tools = json.load(f)["tools"]
    out = {}
    for t in tools:
        with open(os.path.join(os.path.dirname(SCHEMAS), t["output"])) as f:
            out[t["name"]] = json.load(f)
    return out

def main():
    args = sys.argv[1:]
    stderr_path, timeout, rusage, pidfile = None, 120.0, False, None
    while args and args[0] != "--":
        if args[0] == "--stderr":
            stderr_path = args[1]; args = args[2:]
        elif args[0] == "--pidfile":
            pidfile = args[1]; args = args[2:]
        elif args[0] == "--rusage":
            rusage = True; args = args[1:]
        elif args[0] == "--timeout":
            timeout = float(args[1]); args = args[2:]
        else:
            sys.exit("usage: session.py [--stderr FILE] [--timeout S] -- SERVER [ARGS]")
    cmd = args[1:]
    script = [json.loads(l) for l in sys.stdin.read().split("\n") if l.strip()]  # not splitlines(): it splits inside JSON on U+2028 and others
    err = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    os.environ["SERVER_PID"] = str(proc.pid)  # for the sh and until steps
    if pidfile:
        with open(pidfile, "w") as f:
            f.write("%d\n" % proc.pid)
    lines, answered, bad = [], set(), []
    cv = threading.Condition()

    def reader():
        for raw in proc.stdout:
            text = raw.decode("utf-8", "replace").rstrip("\n")
            try:
                msg = json.loads(text)
            except ValueError:
                bad.append(text)
                msg = None
            with cv:
                lines.append(text)
                for m in (msg if isinstance(msg, list) else [msg]):
                    if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m):
                        answered.add(json.dumps(m["id"]))
                cv.notify_all()
        with cv:
            cv.notify_all()
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    sent = []

    def wait_for(pred):
        with cv:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    print(json.dumps({"session_timeout": True}), flush=True)
                    for l in lines: print(l)
                    proc.kill(); sys.exit(4)
                if proc.poll() is not None and not t.is_alive():
                    return False
                cv.wait(min(left, 0.05))
        return True

    def send(data):
        try:
            proc.stdin.write(data); proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    mark = time.monotonic()
    extra = []
    tools_of = {}      # request id (as JSON) -> the tool it called
    ended = False      # the script itself ended the server (signal, close, expect_exit)
    for step in script:
        if isinstance(step, dict) and "raw" in step:
            send(step["raw"].encode("utf-8", "surrogateescape"))
        elif isinstance(step, dict) and "raw_hex" in step:
            send(bytes.fromhex(step["raw_hex"]))
        elif isinstance(step, dict) and "sleep" in step:
            time.sleep(step["sleep"])
        elif isinstance(step, dict) and "wait" in step:
            key = json.dumps(step["wait"])
            wait_for(lambda: key in answered)
        elif isinstance(step, dict) and "wait_line" in step:
            rx = re.compile(step["wait_line"])
            wait_for(lambda: any(rx.search(l) for l in lines))
        elif isinstance(step, dict) and "sh" in step:
            subprocess.run(step["sh"], shell=True, check=True)
        elif isinstance(step, dict) and "until" in step:
            while subprocess.run(step["until"], shell=True).returncode != 0:
                if time.monotonic() > deadline:
                    print(json.dumps({"session_timeout": "until", "command": step["until"]}), flush=True)
                    proc.kill(); sys.exit(4)
                time.sleep(0.1)
        elif isinstance(step, dict) and "signal" in step:
            ended = True
            mark = time.monotonic()
            proc.send_signal(getattr(signal, "SIG" + step["signal"]))
        elif isinstance(step, dict) and "close" in step:
            ended = True
            mark = time.monotonic()
            try: proc.stdin.close()
            except BrokenPipeError: pass
        elif isinstance(step, dict) and "expect_exit" in step:
            ended = True
            try:
                code = proc.wait(timeout=step["expect_exit"])
            except subprocess.TimeoutExpired:
                code = None
            extra.append(json.dumps({"exit": code, "exit_after_ms": int((time.monotonic() - mark) * 1000)}))
        else:
            send((json.dumps(step, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
            for m in (step if isinstance(step, list) else [step]):
                if isinstance(m, dict) and "id" in m and "method" in m:
                    sent.append(json.dumps(m["id"]))
                    if m.get("method") == "tools/call" and isinstance(m.get("params"), dict):
                        tools_of[json.dumps(m["id"])] = m["params"].get("name")
                # A cancelled request is never answered: do not wait for it.
                if isinstance(m, dict) and m.get("method") == "notifications/cancelled":
                    key = json.dumps((m.get("params") or {}).get("requestId"))
                    sent[:] = [k for k in sent if k != key]
    if proc.poll() is None:
        wait_for(lambda: all(k in answered for k in sent))
        try: proc.stdin.close()
        except BrokenPipeError: pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill(); print(json.dumps({"session_timeout": "exit"}))
    t.join(5)
    for l in lines:
        print(l)
    for l in extra:
        print(l)
    if rusage:
        import resource
        print(json.dumps({"maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
    if bad:
        sys.stderr.write("stdout line is not JSON: %r\n" % bad[0][:200])
        sys.exit(3)
    if check_results(lines, tools_of):
        sys.exit(5)
    unanswered = [k for k in sent if k not in answered]
    if unanswered and not ended:
        sys.stderr.write("the server exited with requests unanswered: %s\n" % ", ".join(unanswered))
        sys.exit(6)

def check_results(lines, tools_of):
    """Every tool result of a known tool satisfies its outputSchema; a result that is not an
    error carries structuredContent. Returns the number of results that do not."""
    schemas, wrong = output_schemas(), 0
    for l in lines:
        try:
            msg = json.loads(l)
        except ValueError:
            continue
        for m in (msg if isinstance(msg, list) else [msg]):
            if not isinstance(m, dict) or not isinstance(m.get("result"), dict):
                continue
            tool = tools_of.get(json.dumps(m.get("id")))
            if tool not in schemas:
                continue
            res = m["result"]
            if "structuredContent" not in res:
                if not res.get("isError"):
                    sys.stderr.write("result %s of %s has no structuredContent\n" % (m.get("id"), tool))
                    wrong += 1
                continue
            try:
                jsonschema.validate(res["structuredContent"], schemas[tool])
            except jsonschema.ValidationError as e:
                sys.stderr.write("result %s of %s does not satisfy its outputSchema: %s\n" % (m.get("id"), tool, e.message))
                wrong += 1
    return wrong

if __name__ == "__main__":
    main()
