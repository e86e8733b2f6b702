# (After lib/handover-client.py.) A handed-over socket that turns blocking again while the proxy, all its slots taken, tells it
# 503 (tests/handover-attacks.bats): its send queue is full, and a thread of the code clears
# O_NONBLOCK on its own copy over and over. Prints one JSON line.
import fcntl, json, os, socket, struct, threading, time

out = {}


held = []
for i in range(32):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(PROXY)
    s.sendall(b"GET http://198.51.100.2:8080/ HTTP/1.1\r\nX-Slow: ")
    held.append(s)
time.sleep(0.5)
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
stop = False


def clear():
    while not stop:
        fcntl.fcntl(b.fileno(), fcntl.F_SETFL, 0)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))


t = threading.Thread(target=clear)
t.start()
for i in range(20):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(PROXY)
    u.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", b.fileno()))])
    u.close()
time.sleep(0.5)
stop = True
t.join()
for s in held:
    s.close()
time.sleep(0.5)
t0 = time.monotonic()
out["after"] = ask(b"GET http://evil.test/ HTTP/1.1\r\n\r\n")
out["after_s"] = round(time.monotonic() - t0, 2)
print(json.dumps(out), flush=True)
time.sleep(600)
