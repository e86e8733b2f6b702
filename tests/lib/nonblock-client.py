#!/usr/bin/env python3
"""A client that hands the server non-blocking descriptors, as a parent that shares its own
non-blocking pipe or socket does (O_NONBLOCK belongs to the open file, so the server's copy is
non-blocking too), and reads slowly.

Usage: nonblock-client.py pipe|socket N [blocking] [mixed] -- SERVER [ARGS...]

Sends initialize and N tools/list requests (each answer some 15 KB, so the pipe fills many times
over), reads 4 KiB at a time with a pause between reads, and prints one JSON line:
{"answered": COUNT, "in_order": BOOL, "exit": CODE}. Each wait is bounded: 60 s without a byte
ends the run. With `blocking`, the server's descriptors stay blocking (the client's own are
non-blocking all the same). With `mixed`, every other request is a ping (an answer of some 40
bytes, which the server writes at once when nothing waits ahead of it): both are answered on
the thread that reads, so the answers must come in the order of the requests (`in_order`),
and each line must be whole JSON (a torn one ends the client with an exception).
"""
import fcntl, json, os, select, socket, subprocess, sys, time

def nonblocking(fd):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)

def main():
    how, n = sys.argv[1], int(sys.argv[2])
    opts = sys.argv[3:sys.argv.index("--")]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    if how == "pipe":
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        child_in, child_out, mine_in, mine_out = in_r, out_w, in_w, out_r
    else:
        a, b = socket.socketpair()
        child_in = child_out = b.fileno()
        mine_in = mine_out = a.fileno()
    if "blocking" not in opts:
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
    mixed = "mixed" in opts
    reqs += [{"jsonrpc": "2.0", "id": i, "method": "ping" if mixed and i % 2 == 0 else "tools/list"}
             for i in range(1, n + 1)]
    data = b"".join((json.dumps(r) + "\n").encode() for r in reqs)
    nonblocking(mine_in)
    nonblocking(mine_out)
    sent, buf, answered, order = 0, b"", set(), []
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
                    order.append(m["id"])
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
    print(json.dumps({"answered": len(answered), "in_order": order == sorted(order) and len(order) == len(answered),
                      "exit": code}))

main()
