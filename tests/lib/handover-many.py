# (After lib/handover-client.py.) Everything but a TCP connection handed over to the server's proxy, many times over
# (tests/handover-attacks.bats): each is dropped without a descriptor kept; a TCP connection
# handed over is served under the same policy. Prints one JSON line.
import json, os, select, socket, struct, threading, time

out = {}


def hand(fds, byte=b"\0", more=b""):
    u = unix()
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, b"".join(struct.pack("i", f) for f in fds))] if fds else []
    u.sendmsg([byte + more], anc)
    return u


def pair_server():
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    return ls


def tcp_pair(ls):
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    return a, b


ls = pair_server()
mem = os.open("/proc/self/mem", os.O_RDWR)
fifo = "/tmp/handover-fifo"
os.mkfifo(fifo)
fifo_fd = os.open(fifo, os.O_RDWR)
r, w = os.pipe()
ev = os.eventfd(0) if hasattr(os, "eventfd") else r
reg = os.open("/tmp/handover-file", os.O_RDWR | os.O_CREAT, 0o600)
os.write(reg, b"GET http://198.51.100.2:8080/ HTTP/1.1\r\n\r\n")
os.lseek(reg, 0, 0)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sp1, sp2 = socket.socketpair()
sp2.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) if hasattr(socket, "AF_NETLINK") else udp
bad = {}
for rnd in range(int(os.environ.get("ROUNDS", "25"))):
    a, b = tcp_pair(ls)
    down_a, down_b = tcp_pair(ls)
    down_b.shutdown(socket.SHUT_RDWR)
    own = unix()
    kinds = {
        "file": [reg], "fifo": [fifo_fd], "pipe": [w], "eventfd": [ev], "mem": [mem], "udp": [udp.fileno()],
        "listening": [ls.fileno()], "socketpair": [sp1.fileno()], "netlink": [nl.fileno()],
        "two": [b.fileno(), b.fileno()], "own_unix": [own.fileno()], "shut_down": [down_b.fileno()],
    }
    for k, fds in kinds.items():
        u = hand(fds)
        if k == "socketpair":
            try:
                sp2.sendall(b"GET http://evil.test/ HTTP/1.1\r\n\r\n")
            except BrokenPipeError:
                pass  # the proxy shut it, dropping it: not served either
        bad[k] = told(u)
        u.close()
    # A byte other than 0 with a socket, a 0 with none.
    u = hand([b.fileno()], byte=b"G")
    bad["nonzero_byte"] = told(u)
    u = hand([], more=b"GET http://198.51.100.2:8080/ HTTP/1.1\r\n\r\n")
    bad["zero_no_fd"] = told(u)
    for s in (a, b, down_a, down_b, own):
        s.close()
# What the socketpair's other end heard (the server's credentials, had it been served).
sp2.setblocking(False)
try:
    out["socketpair_heard"] = sp2.recv(4096) != b""  # b"": shut by the proxy, nothing said
except BlockingIOError:
    out["socketpair_heard"] = False
out["zero_no_fd"] = bad.pop("zero_no_fd")
out["bad"] = bad
# A TCP connection handed over: the policy holds on it, the handover followed by bytes too.
a, b = tcp_pair(ls)
u = hand([b.fileno()], more=b"junk")
b.close()
a.sendall(b"GET http://evil.test/ HTTP/1.1\r\n\r\n")
out["tcp_evil"] = told(a)
a, b = tcp_pair(ls)
u = hand([b.fileno()])
b.close()
a.sendall(b"CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n")
out["tcp_loopback"] = told(a)
# 36 handed over at once, each waiting: as many held as the proxy has slots (32, or fewer as
# here, where the server's 64 descriptors would not back 32), the rest told 503 on their own
# sockets.
for f in (mem, fifo_fd, r, w, ev, reg):
    os.close(f)
for s in (udp, sp1, sp2, nl):
    s.close()
held = []
for i in range(36):
    a, b = tcp_pair(ls)
    u = hand([b.fileno()])
    b.close()
    u.close()
    a.sendall(b"GET http://198.51.100.2:8080/ HTTP/1.1\r\nX-Slow: ")
    held.append(a)
# The 503s are waited for as they come (a loaded server may take seconds), until 4 of those past
# the slots are told, or 10 s pass; a held one answers nothing, or ends when its head's time is up.
busy, waiting, until = 0, list(held), time.monotonic() + 10
while waiting and busy < 4 and time.monotonic() < until:
    for a in select.select(waiting, [], [], max(0, until - time.monotonic()))[0]:
        waiting.remove(a)
        try:
            busy += b" 503 " in a.recv(200)
        except OSError:
            pass
out["busy"] = busy
for a in held:
    a.close()
# Still serving: a client on the socket itself is told 403.
time.sleep(0.5)
out["after"] = told(hand([], byte=b"G", more=b"ET http://evil.test/ HTTP/1.1\r\n\r\n"))
print(json.dumps(out), flush=True)
