#!/usr/bin/env python3
"""A client that stops reading the server's stdout, for the shutdown tests.

Usage: stalled-client.py SIGNAL|eof|pings -- SERVER [ARGS...]

Sends initialize, then a call whose result is larger than a pipe holds, and pings, without
reading anything. Once a thread of the server is blocked writing to the full pipe (its wchan
says so), it sends SIGNAL to the server (or closes its stdin, for "eof") and waits for it to exit.
Prints one JSON line: {"exit": CODE, "exit_after_ms": MS, "stuck_bytes": N}. Exits 4 when the pipe
never filled or the server did not exit within 10 s.

With "slow" it sends 3 pings, closes its stdin, and only then reads, 64 KiB every 0.1 s (a
client that reads slowly but goes on reading), and prints {"pings_answered": N, "call_answered":
BOOL, "read_s": S}.

With "pings" it sends 5000 pings instead (far more than a pipe holds, so a server that stopped
reading its stdin would block this client), each write bounded by 10 s, then reads everything and
prints {"pings_sent": N, "pings_answered": N, "call_answered": BOOL}.
"""
import fcntl, json, os, signal, struct, subprocess, sys, termios, time

def writing_blocked(pid):
    """A thread of pid sleeps in the kernel's pipe write (wchan pipe_write / anon_pipe_write)."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return False
    for t in tids:
        try:
            with open("/proc/%d/task/%s/wchan" % (pid, t)) as f:
                if "pipe_write" in f.read():
                    return True
        except OSError:
            pass
    return False

def pings(proc):
    import select
    fd = proc.stdin.fileno()
    os.set_blocking(fd, False)
    data = b"".join((json.dumps({"jsonrpc": "2.0", "id": "p%d" % i, "method": "ping"}) + "\n").encode()
                    for i in range(5000))
    sent = 0
    while sent < len(data):
        if not select.select([], [fd], [], 10)[1]:
            print(json.dumps({"error": "the server stopped reading its stdin", "sent_bytes": sent}))
            proc.kill()
            sys.exit(4)
        try:
            sent += os.write(fd, data[sent:])
        except BlockingIOError:
            pass
    os.set_blocking(fd, True)
    proc.stdin.close()
    answered, call = set(), False
    for raw in proc.stdout:
        m = json.loads(raw)
        if isinstance(m.get("id"), str) and m["id"].startswith("p") and m.get("result") == {}:
            answered.add(m["id"])
        if m.get("id") == 1 and "result" in m:
            call = True
    proc.wait(timeout=10)
    print(json.dumps({"pings_sent": 5000, "pings_answered": len(answered), "call_answered": call}))

def slow(proc):
    for i in range(3):
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": "p%d" % i, "method": "ping"}) + "\n").encode())
    proc.stdin.close()
    t0, got, fd = time.monotonic(), b"", proc.stdout.fileno()
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        got += b
        time.sleep(0.1)
    answered, call = 0, False
    for raw in got.split(b"\n"):
        try:
            m = json.loads(raw)
        except ValueError:
            continue  # a line cut short: not an answer
        answered += isinstance(m.get("id"), str) and m.get("result") == {}
        call = call or (m.get("id") == 1 and "result" in m)
    proc.wait(timeout=10)
    print(json.dumps({"pings_answered": answered, "call_answered": call, "read_s": round(time.monotonic() - t0, 2)}))

def main():
    how, cmd = sys.argv[1], sys.argv[3:]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    def send(obj):
        proc.stdin.write((json.dumps(obj) + "\n").encode())
        proc.stdin.flush()
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    code = "head -c 300000 /dev/zero | tr '\\\\0' a"
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "execute_bash_commands", "arguments": {"code": code}}})
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not writing_blocked(proc.pid):
        time.sleep(0.02)
    queued = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    if not writing_blocked(proc.pid):
        print(json.dumps({"error": "no thread of the server ever blocked writing", "queued": queued}))
        proc.kill()
        sys.exit(4)
    if how == "pings":
        pings(proc)
        return
    if how == "slow":
        slow(proc)
        return
    for i in range(3):
        send({"jsonrpc": "2.0", "id": "p%d" % i, "method": "ping"})
    t0 = time.monotonic()
    if how == "eof":
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, "SIG" + how))
    try:
        rc = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        print(json.dumps({"error": "the server did not exit", "stuck_bytes": queued}))
        proc.kill()
        sys.exit(4)
    print(json.dumps({"exit": rc, "exit_after_ms": int((time.monotonic() - t0) * 1000), "stuck_bytes": queued}))

if __name__ == "__main__":
    main()
