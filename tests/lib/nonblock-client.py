#!/usr/bin/env python3
"""A client that hands the server non-blocking descriptors, as a parent that shares its own
non-blocking pipe or socket does (O_NONBLOCK belongs to the open file, so the server's copy is
non-blocking too), and reads slowly.

Usage: nonblock-client.py pipe|socket N -- SERVER [ARGS...]

Sends initialize and N tools/list requests (each answer some 15 KB, so the pipe fills many times
over), reads 4 KiB at a time with a pause between reads, and prints one JSON line:
{"answered": COUNT, "exit": CODE}. Each wait is bounded: 60 s without a byte ends the run.
"""
import fcntl, json, os, select, socket, subprocess, sys, time

def nonblocking(fd):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)

def main():
    how, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[4:]
    if how == "pipe":
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        child_in, child_out, mine_in, mine_out = in_r, out_w, in_w, out_r
    else:
        a, b = socket.socketpair()
        child_in = child_out = b.fileno()
        mine_in = mine_out = a.fileno()
    for fd in (child_in, child_out):
        nonblocking(fd)
    proc = subprocess.Popen(cmd, stdin=child_in, stdout=child_out, stderr=sys.stderr)
    if how == "pipe":
        os.close(in_r)
        os.close(out_w)
    else:
        b.close()
    reqs = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}]
    reqs += [{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(1, n + 1)]
    data = b"".join((json.dumps(r) + "\n").encode() for r in reqs)
    nonblocking(mine_in)
    nonblocking(mine_out)
    sent, buf, answered = 0, b"", set()
    while len(answered) < n:
        want_w = [mine_in] if sent < len(data) else []
        r, w, _ = select.select([mine_out], want_w, [], 60)
        if not r and not w:
            break
        if w:
            try:
                sent += os.write(mine_in, data[sent:sent + 65536])
            except BlockingIOError:
                pass
        if r:
            try:
                chunk = os.read(mine_out, 4096)
            except BlockingIOError:
                continue
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for l in lines:
                m = json.loads(l)
                if isinstance(m.get("id"), int) and m["id"] > 0 and "result" in m:
                    answered.add(m["id"])
            time.sleep(0.0005)  # a slow reader: the server's writes meet a full pipe
    if how == "pipe":
        os.close(mine_in)
    else:
        socket.socket(fileno=mine_in).shutdown(socket.SHUT_WR)
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = "timeout"
    print(json.dumps({"answered": len(answered), "exit": code}))

main()
