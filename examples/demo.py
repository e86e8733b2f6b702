#!/usr/bin/env python3
"""A short agent session with sandbox-mcp, printed as it happens.

Usage: python3 examples/demo.py [--log FILE] PATH_TO_SERVER [SERVER OPTIONS...]

Starts the server as a child process over stdio, as an MCP host does, performs the
handshake, lists the tools and makes the calls an agent would make:

  1. execute_python         writes a CSV file into /workspace and prints statistics
  2. execute_bash_commands  lists and reads that file: the workspace persists
  3. execute_python         uses a variable of call 1: NameError, the interpreter is fresh
  4. execute_bash_commands  sleeps past timeout_s 1: killed, exit code 124
  5. execute_bash_commands  a file goes in (`files`) and its upper-case copy comes back (`collect`)
  6. execute_python         draws a chart of the CSV into outputs/: it comes back as an image,
                            which the demo saves next to its log
  7. execute_python         session "frame": loads the CSV into a data frame (pandas when it is
                            installed, columns of lists otherwise), which stays loaded
  8. execute_python         session "frame" again: uses the frame of call 7; its last
                            expression comes back as `value`
  9. execute_bash_commands  background: a job that outlives its call returns a process_id at
                            once; `process` polls it until it ends, with all of its output
 10. cleanup_sandbox        removes the sandbox and its workspace
 11. execute_bash_commands  looks for the file again: it is gone

Every result is checked. The last line is a summary; the exit status is 0 when every step
went as it should and 1 otherwise, so the demo doubles as a test. The server's stderr (its
log) goes to FILE, or to a temporary file that is shown when something fails. SANDBOX_*
environment variables are passed on to the server. Standard library only.
"""
import base64
import json
import os
import select
import subprocess
import sys
import tempfile
import time

PROTOCOL = "2025-06-18"
REPLY_TIMEOUT_S = 60      # per request; the longest call here takes about a second
SHUTDOWN_TIMEOUT_S = 5    # the server promises to exit within 2 s of stdin closing


class Server:
    """The server as a child process; messages are JSON lines on its stdin and stdout."""

    def __init__(self, argv, log):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.buf = b""
        self.replies = {}
        self.notifications = []
        self.bad_lines = []
        self.next_id = 1

    def send(self, msg):
        try:
            self.proc.stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass  # the server is gone: the wait for its reply says so

    def request(self, method, params=None):
        """Sends a request and waits for the response with its id; returns it, or None."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_reply(rid, REPLY_TIMEOUT_S)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def _read_lines(self, timeout):
        """Reads what stdout has within `timeout` seconds; False once stdout is closed."""
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0))
        if not ready:
            return True
        chunk = os.read(fd, 65536)
        if not chunk:
            return False
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                # stdout must carry protocol only: anything else is a bug worth reporting.
                self.bad_lines.append(line.decode("utf-8", "replace"))
                continue
            if isinstance(msg, dict) and "id" in msg and ("result" in msg or "error" in msg):
                self.replies[msg["id"]] = msg
            else:
                self.notifications.append(msg)
        return True

    def wait_reply(self, rid, timeout):
        deadline = time.monotonic() + timeout
        while rid not in self.replies:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read_lines(left):
                break
        return self.replies.pop(rid, None)

    def close(self):
        """Closes stdin (the host going away) and waits; returns (exit status or None, seconds)."""
        t0 = time.monotonic()
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        deadline = t0 + SHUTDOWN_TIMEOUT_S
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read_lines(0.05)
        code = self.proc.poll()
        if code is None:
            self.proc.kill()
            self.proc.wait()
        return code, time.monotonic() - t0


# ------------------------------------------------------------------ printing

def block(text, limit=14):
    """Text as an indented block, at most `limit` lines."""
    if text == "":
        return "      (empty)"
    lines = text.rstrip("\n").split("\n")
    shown = ["      | " + l for l in lines[:limit]]
    if len(lines) > limit:
        shown.append("      | ... (%d more lines)" % (len(lines) - limit))
    return "\n".join(shown)


def show_call(n, total, title, tool, args):
    print()
    print("[%d/%d] %s" % (n, total, title))
    shown = {k: v for k, v in args.items() if k not in ("script", "code")}
    print("  -> %s%s" % (tool, " " + json.dumps(shown) if shown else ""))
    for key in ("script", "code"):
        if key in args:
            print("     %s:" % key)
            print(block(args[key], 40))


def show_result(result):
    sc = result.get("structuredContent") or {}
    if "exit_code" in sc:
        where = "%s sandbox %s" % (sc.get("backend"), sc.get("sandbox_id")) if sc.get("backend") else "no sandbox"
        flags = "  TIMED OUT" if sc.get("timed_out") else ""
        print("  <- exit_code %s | isError %s | %s ms | %s%s" % (
            sc["exit_code"], "true" if result.get("isError") else "false", sc.get("duration_ms"), where, flags))
        if sc.get("notice"):
            print("     notice: %s" % sc["notice"])
        if sc.get("session"):
            print("     session %s, value: %s" % (sc["session"], sc.get("value")))
        if sc.get("running"):
            print("     still running as %s" % sc.get("process_id"))
        if sc.get("error"):
            print("     error: %s" % sc["error"])
        print("     stdout:")
        print(block(sc.get("stdout", "")))
        print("     stderr:")
        print(block(sc.get("stderr", "")))
        for a in sc.get("artifacts") or []:
            print("     file %s (%s, %s bytes): %s" % (a["path"], a["mime_type"], a["size"], a["shown"]))
            if a["shown"] == "text":
                print(block(a["text"], 6))
        for c in result.get("content", []):
            if c.get("type") == "image":
                print("     image content: %s, %d bytes" % (c.get("mimeType"), len(base64.b64decode(c.get("data", "")))))
    else:
        text = " ".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        print("  <- isError %s | %s" % ("true" if result.get("isError") else "false", text))
        if sc:
            print("     structuredContent: %s" % json.dumps(sc))


# ------------------------------------------------------------------ the session

def main():
    args = sys.argv[1:]
    log_path = None
    if len(args) >= 2 and args[0] == "--log":
        log_path, args = args[1], args[2:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: python3 examples/demo.py [--log FILE] PATH_TO_SERVER [SERVER OPTIONS...]")
    temp_log = not log_path
    if temp_log:
        log = tempfile.NamedTemporaryFile(prefix="sandbox-mcp-demo-", suffix=".log", delete=False)
        log_path = log.name
    else:
        log = open(log_path, "ab")

    print("starting %s" % " ".join(args))
    try:
        server = Server(args, log)
    except OSError as e:
        sys.exit("demo: cannot start %s: %s" % (args[0], e))
    log.close()  # the child has its own copy
    rc = session(server, log_path)
    if rc == 0 and temp_log:
        os.unlink(log_path)
    return rc


def session(server, log_path):
    failures = []
    passed = 0

    def verdict(name, problems):
        nonlocal passed
        if problems:
            failures.append(name)
            for p in problems:
                print("  FAIL: %s" % p)
        else:
            passed += 1
            print("  ok")

    # --- handshake
    print()
    print("[handshake] initialize (protocol %s), then notifications/initialized" % PROTOCOL)
    reply = server.request("initialize", {
        "protocolVersion": PROTOCOL,
        "capabilities": {},
        "clientInfo": {"name": "sandbox-mcp-demo", "version": "1.0"},
    })
    problems = []
    if reply is None:
        problems.append("no answer to initialize within %d s" % REPLY_TIMEOUT_S)
    elif "error" in reply:
        problems.append("initialize failed: %s" % json.dumps(reply["error"]))
    else:
        res = reply["result"]
        info = res.get("serverInfo", {})
        print("  <- %s %s, protocol %s, capabilities %s" % (
            info.get("name"), info.get("version"), res.get("protocolVersion"), ", ".join(sorted(res.get("capabilities", {})))))
        if res.get("protocolVersion") != PROTOCOL:
            problems.append("protocolVersion %r, expected %r" % (res.get("protocolVersion"), PROTOCOL))
        if "tools" not in res.get("capabilities", {}):
            problems.append("no tools capability")
    verdict("handshake", problems)
    if problems:
        return finish(server, passed, failures, log_path, fatal=True)
    server.notify("notifications/initialized")

    # --- tools
    print()
    print("[tools] tools/list")
    reply = server.request("tools/list")
    problems = []
    output_schemas = {}
    if reply is None or "error" in reply:
        problems.append("tools/list failed: %s" % (json.dumps(reply["error"]) if reply else "no answer"))
    else:
        for tool in reply["result"].get("tools", []):
            schema = tool.get("inputSchema", {})
            required = set(schema.get("required", []))
            params = ", ".join(p + ("" if p in required else "?") for p in schema.get("properties", {}))
            print("  <- %s(%s)  %s" % (tool["name"], params, tool.get("title", "")))
            output_schemas[tool["name"]] = tool.get("outputSchema", {})
        for name in ("execute_python", "execute_bash_commands", "cleanup_sandbox"):
            if name not in output_schemas:
                problems.append("tool %s is missing" % name)
    verdict("tools", problems)
    if problems:
        return finish(server, passed, failures, log_path, fatal=True)

    # --- the calls
    state = {}

    def shape(tool, result):
        """What every result must be: structuredContent with every field its outputSchema requires."""
        sc = result.get("structuredContent")
        if not isinstance(sc, dict):
            return ["no structuredContent"]
        missing = [k for k in output_schemas[tool].get("required", []) if k not in sc]
        out = ["structuredContent lacks %s" % ", ".join(missing)] if missing else []
        if not any(c.get("type") == "text" and c.get("text") for c in result.get("content", [])):
            out.append("no text block")
        return out

    def check_csv(sc, r):
        p = []
        if sc["exit_code"] != 0 or r.get("isError"):
            p.append("expected exit_code 0 and no isError")
        if "wrote 60 rows to /workspace/data/temperatures.csv" not in sc["stdout"]:
            p.append("stdout does not report the CSV file")
        if sc["backend"] is None or not sc["sandbox_id"]:
            p.append("no backend or sandbox_id")
        state["sandbox"] = sc["sandbox_id"]
        return p

    def check_persist(sc, r):
        p = []
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        if "61 data/temperatures.csv" not in sc["stdout"] or "day,city,temp_c" not in sc["stdout"]:
            p.append("the file written by call 1 is not there")
        if sc["sandbox_id"] != state.get("sandbox"):
            p.append("ran in another sandbox (%s)" % sc["sandbox_id"])
        return p

    def check_fresh(sc, r):
        p = []
        if sc["exit_code"] != 1 or r.get("isError") is not True:
            p.append("expected exit_code 1 and isError true")
        if "NameError: name 'rows' is not defined" not in sc["stderr"]:
            p.append("stderr lacks the NameError")
        return p

    def check_timeout(sc, r):
        p = []
        if sc["exit_code"] != 124 or sc["timed_out"] is not True or r.get("isError") is not True:
            p.append("expected exit_code 124, timed_out true, isError true")
        if "working" not in sc["stdout"]:
            p.append("the output from before the timeout is missing")
        if "finished" in sc["stdout"]:
            p.append("the command was not stopped")
        if not 900 <= sc["duration_ms"] < 10000:
            p.append("duration %s ms is not about 1 s" % sc["duration_ms"])
        return p

    def check_files(sc, r):
        p = []
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        out = [a for a in sc.get("artifacts") or [] if a["path"] == "notes/shout.txt"]
        if not out or out[0].get("text") != "SANDBOXES KEEP THE HOST SAFE.\n":
            p.append("notes/shout.txt did not come back with its text")
        return p

    def check_chart(sc, r):
        p = []
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        images = [c for c in r.get("content", []) if c.get("type") == "image"]
        if len(images) != 1 or images[0].get("mimeType") != "image/png":
            return ["expected one image/png content block"]
        png = base64.b64decode(images[0]["data"])
        if not png.startswith(b"\x89PNG\r\n\x1a\n"):
            p.append("the image is not a PNG")
        else:
            path = os.path.join(os.path.dirname(log_path) or ".", "sandbox-mcp-demo-chart.png")
            try:
                with open(path, "wb") as f:
                    f.write(png)
                print("     saved the chart as %s" % path)
            except OSError as e:
                print("     (could not save the chart: %s)" % e)
        return p

    def check_frame(sc, r):
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        if sc.get("session") != "frame" or "loaded 60 rows" not in sc["stdout"]:
            return ["the session did not load the frame"]
        return []

    def check_frame_kept(sc, r):
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        if sc.get("value") != "60":
            return ["expected value '60' (the frame of the call before), got %r" % sc.get("value")]
        if "Oslo" not in sc["stdout"]:
            return ["the frame's cities are not in stdout"]
        return []

    def check_background(sc, r):
        if r.get("isError") or sc.get("running") is not True or not sc.get("process_id"):
            return ["expected running true and a process_id"]
        pid, out, polls = sc["process_id"], sc.get("stdout", ""), 0
        while True:
            polls += 1
            print("  -> process %s" % json.dumps({"process_id": pid, "wait_s": 5}))
            reply = server.request("tools/call", {"name": "process", "arguments": {"process_id": pid, "wait_s": 5}})
            if reply is None or "error" in reply:
                return ["process: %s" % (json.dumps(reply["error"]) if reply else "no answer")]
            ps = reply["result"].get("structuredContent") or {}
            out += ps.get("stdout", "")
            print("  <- running %s | exit_code %s | %s new bytes of stdout" % (
                ps.get("running"), ps.get("exit_code"), len(ps.get("stdout", ""))))
            if ps.get("running") is False:
                break
            if polls == 20:
                return ["still running after 20 polls"]
        print("     stdout, all polls together:")
        print(block(out))
        if ps.get("exit_code") != 0 or out != "".join("step %d\n" % i for i in range(1, 6)) + "done\n":
            return ["expected exit_code 0 and steps 1 to 5, then done"]
        return []

    def check_cleanup(sc, r):
        p = []
        if r.get("isError"):
            p.append("cleanup reported an error")
        if sc.get("removed") is not True or sc.get("sandbox_id") != state.get("sandbox"):
            p.append("expected removed true for %s" % state.get("sandbox"))
        return p

    def check_gone(sc, r):
        p = []
        if sc["exit_code"] != 0 or r.get("isError"):
            return ["expected exit_code 0 and no isError"]
        if "data/temperatures.csv is gone" not in sc["stdout"]:
            p.append("the file is still there")
        if sc["sandbox_id"] == state.get("sandbox"):
            p.append("still the old sandbox")
        return p

    steps = [
        ("Python writes a CSV file into the workspace and prints statistics", "execute_python", {
            "script": (
                "import csv, os, random, statistics\n"
                "\n"
                "random.seed(7)\n"
                "rows = [{'day': d, 'city': c, 'temp_c': round(random.gauss(mu, 3), 1)}\n"
                "        for d in range(1, 31) for c, mu in (('Oslo', 4), ('Lisbon', 16))]\n"
                "os.makedirs('data', exist_ok=True)\n"
                "with open('data/temperatures.csv', 'w', newline='') as f:\n"
                "    w = csv.DictWriter(f, fieldnames=['day', 'city', 'temp_c'])\n"
                "    w.writeheader()\n"
                "    w.writerows(rows)\n"
                "print(f'wrote {len(rows)} rows to {os.path.abspath(\"data/temperatures.csv\")}')\n"
                "for city in ('Oslo', 'Lisbon'):\n"
                "    t = [r['temp_c'] for r in rows if r['city'] == city]\n"
                "    print(f'{city:7} mean {statistics.mean(t):5.1f} C  min {min(t):5.1f}  '\n"
                "          f'max {max(t):5.1f}  stdev {statistics.stdev(t):4.1f}')\n"),
        }, check_csv),
        ("bash lists and reads the file: the workspace persists between calls", "execute_bash_commands", {
            "code": "ls -l data\nwc -l data/temperatures.csv\nhead -n 4 data/temperatures.csv",
        }, check_persist),
        ("Python state does not persist: each call is a fresh interpreter", "execute_python", {
            "script": "print(f'{len(rows)} rows still in memory')\n",
        }, check_fresh),
        ("A command that outlives timeout_s is killed", "execute_bash_commands", {
            "code": "echo working...\nsleep 30\necho finished",
            "timeout_s": 1,
        }, check_timeout),
        ("A file goes in with `files`, and its upper-case copy comes back through `collect`", "execute_bash_commands", {
            "code": "tr a-z A-Z < notes/in.txt > notes/shout.txt",
            "files": {"notes/in.txt": "sandboxes keep the host safe.\n"},
            "collect": ["notes/shout.txt"],
        }, check_files),
        ("A chart of the CSV, written to outputs/, comes back as an image", "execute_python", {
            "script": (
                "import csv, os, struct, zlib\n"
                "\n"
                "# A bar chart of the mean temperatures, as a PNG, with the standard library only.\n"
                "rows = list(csv.DictReader(open('data/temperatures.csv')))\n"
                "cities = ['Oslo', 'Lisbon']\n"
                "means = [sum(float(r['temp_c']) for r in rows if r['city'] == c) / 30 for c in cities]\n"
                "w, h = 160, 100\n"
                "px = [[(255, 255, 255)] * w for _ in range(h)]\n"
                "for i, (m, colour) in enumerate(zip(means, [(70, 110, 200), (230, 140, 40)])):\n"
                "    for y in range(h - 10 - int(m * 4), h - 10):\n"
                "        for x in range(30 + 60 * i, 70 + 60 * i):\n"
                "            px[y][x] = colour\n"
                "raw = b''.join(b'\\x00' + bytes(v for p in row for v in p) for row in px)\n"
                "chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n"
                "os.makedirs('outputs', exist_ok=True)\n"
                "with open('outputs/mean-temperature.png', 'wb') as f:\n"
                "    f.write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))\n"
                "            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))\n"
                "print('mean temperature:', ', '.join(f'{c} {m:.1f} C' for c, m in zip(cities, means)))\n"),
        }, check_chart),
        ("A Python session keeps a data frame loaded between calls", "execute_python", {
            "session": "frame",
            "script": (
                "import csv\n"
                "try:\n"
                "    import pandas as pd\n"
                "    frame = pd.read_csv('data/temperatures.csv')\n"
                "except ImportError:  # no pandas here: the same columns as lists\n"
                "    rows = list(csv.DictReader(open('data/temperatures.csv')))\n"
                "    frame = {k: [r[k] for r in rows] for k in rows[0]}\n"
                "print(f'loaded {len(frame[\"day\"])} rows into the session')\n"),
        }, check_frame),
        ("The same session: the frame is still there, and the last expression is the value", "execute_python", {
            "session": "frame",
            "script": "print(sorted(set(frame['city'])))\nlen(frame['day'])\n",
        }, check_frame_kept),
        ("A background job returns at once and is polled to its end", "execute_bash_commands", {
            "code": "for i in 1 2 3 4 5; do echo step $i; sleep 0.4; done; echo done",
            "background": True,
            "wait_s": 0,
        }, check_background),
        ("cleanup_sandbox removes the sandbox and its workspace", "cleanup_sandbox", {}, check_cleanup),
        ("The next call gets a new, empty workspace", "execute_bash_commands", {
            "code": ("if [ -e data/temperatures.csv ]; then echo 'data/temperatures.csv is still there'\n"
                     "else echo 'data/temperatures.csv is gone'; fi\n"
                     "ls -A /workspace"),
        }, check_gone),
    ]

    for n, (title, tool, arguments, check) in enumerate(steps, 1):
        show_call(n, len(steps), title, tool, arguments)
        t0 = time.monotonic()
        reply = server.request("tools/call", {"name": tool, "arguments": arguments})
        if reply is None:
            verdict(tool, ["no answer within %d s" % REPLY_TIMEOUT_S])
            return finish(server, passed, failures, log_path, fatal=True)
        if "error" in reply:
            verdict(tool, ["JSON-RPC error: %s" % json.dumps(reply["error"])])
            continue
        result = reply["result"]
        show_result(result)
        problems = shape(tool, result)
        if not problems:
            problems = check(result["structuredContent"], result)
        if time.monotonic() - t0 > 30:
            problems.append("the call took %.0f s" % (time.monotonic() - t0))
        verdict("%d %s" % (n, tool), problems)

    return finish(server, passed, failures, log_path)


def finish(server, passed, failures, log_path, fatal=False):
    print()
    print("[shutdown] closing the server's stdin")
    code, took = server.close()
    problems = []
    if code != 0:
        problems.append("exit status %s after %.1f s (expected 0 within 2 s)" % (code, took))
    if server.bad_lines:
        problems.append("stdout carried a line that is not JSON: %r" % server.bad_lines[0][:200])
    if problems:
        failures.append("shutdown")
        for p in problems:
            print("  FAIL: %s" % p)
    else:
        passed += 1
        print("  <- exited with status 0 after %.2f s" % took)
        print("  ok")
    total = passed + len(failures)
    print()
    if failures or fatal:
        try:
            with open(log_path, "rb") as f:
                tail = f.read().decode("utf-8", "replace").splitlines()[-20:]
            print("server log (%s), last lines:" % log_path)
            print(block("\n".join(tail), 20))
        except OSError:
            pass
        print("summary: %d of %d steps as expected; FAILED: %s%s" % (
            passed, total, ", ".join(failures), " (stopped early)" if fatal else ""))
        return 1
    print("summary: %d of %d steps as expected" % (passed, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
