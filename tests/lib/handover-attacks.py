# (After lib/handover-client.py.) Handed-over sockets that try to hold the server's proxy (tests/handover-attacks.bats): run in
# the sandbox with --allow-hosts; prints one JSON line.
import json, select, socket, struct, time

out = {}


def hand(fd, byte=b"\0"):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(PROXY)
    u.sendmsg([byte], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
    return u


# A socket handed over whose close would linger: its peer (a) never reads, the send queue is
# full, and after the handover the code asks for a lingering close and drops its own copy.
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(1)
a = socket.socket()
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
a.connect(ls.getsockname())
b, _ = ls.accept()
b.setblocking(False)
try:
    while True:
        b.send(b"x" * 65536)
except BlockingIOError:
    pass
u = hand(b.fileno())
time.sleep(0.5)
b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
b.close()
a.sendall(b"NOT HTTP\r\n\r\n")
time.sleep(0.5)
# The proxy still answers another client at once.
t = time.monotonic()
out["after_linger"] = ask(b"GET http://evil.test/ HTTP/1.1\r\n\r\n")
out["after_linger_s"] = round(time.monotonic() - t, 2)
print(json.dumps(out), flush=True)
# a is kept open (unread) past the call's end.
time.sleep(600)
