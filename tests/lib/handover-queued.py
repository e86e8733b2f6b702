# (After lib/handover-client.py; HOWS names the cases.) Descriptors the proxy never asked for, left
# queued on its socket (tests/handover-attacks.bats): behind a handover, in a unix socket handed
# over, past the eight a message was once read with. Whatever the proxy does not take, the
# kernel closes in the proxy's thread as it closes what held them. Among them, a socket set to
# linger on close (its send queue full), and before it its peer, which never read: closed in
# that order, the first close would wait on the second. Prints one JSON line.
import json, socket, struct, time

out = {}


def fds(*fs):
    return [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fs), *fs))]


ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(8)

for how in HOWS.split():
    x = socket.create_connection(ls.getsockname())
    y, _ = ls.accept()
    # c's close waits for a (which never reads) to take what c still has to send.
    a = socket.socket()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.connect(ls.getsockname())
    c, _ = ls.accept()
    c.setblocking(False)
    try:
        while True:
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
    u = unix()
    try:
        if how == "behind":
            # A handover, and behind it two more messages.
            u.sendmsg([b"\0"], fds(y.fileno()))
            u.sendmsg([b"\0"], fds(a.fileno()))
            u.sendmsg([b"\0"], fds(c.fileno()))
        elif how == "nested":
            # A unix socket handed over, with both queued in it.
            s1, s2 = socket.socketpair()
            s2.sendmsg([b"\0"], fds(a.fileno()))
            s2.sendmsg([b"\0"], fds(c.fileno()))
            a.close()
            c.close()
            s2.close()
            u.sendmsg([b"\0"], fds(s1.fileno()))
            s1.close()
        elif how == "busy":
            # The same while every connection slot is taken: the proxy's acceptor tells it 503.
            u.close()
            time.sleep(0.5)  # its slot is free again
            held = [unix() for i in range(32)]
            for h in held:
                h.sendall(b"GET http://198.51.100.2:8080/ HTTP/1.1\r\nX-Slow: ")
            time.sleep(0.5)
            # Two that say nothing keep the acceptor waiting on them while all is queued.
            held += [unix(), unix()]
            u = unix()
            u.sendmsg([b"\0"], fds(y.fileno()))
            u.sendmsg([b"\0"], fds(a.fileno()))
            u.sendmsg([b"\0"], fds(c.fileno()))
        elif how == "many":
            # Nine in one message.
            u.sendmsg([b"\0"], fds(*([y.fileno()] * 7 + [a.fileno(), c.fileno()])))
    except OSError:
        # The proxy was quicker and dropped the connection: c is this code's to close.
        if c.fileno() >= 0:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 0, 0))
    for s in (a, c, y):
        s.close()
    if how == "busy":
        out["busy"] = told(x, 2)  # what the acceptor told the socket handed over
        for h in held:
            h.close()
    x.close()
time.sleep(1)
t = time.monotonic()
out["after"] = ask(b"GET http://evil.test/ HTTP/1.1\r\n\r\n")
out["after_s"] = round(time.monotonic() - t, 2)
print(json.dumps(out), flush=True)
