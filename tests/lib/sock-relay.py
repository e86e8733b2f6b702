#!/usr/bin/env python3
"""Relays a unix socket to a Docker engine's, each connection on its own.

Usage: sock-relay.py LISTEN TARGET OWNER [FAULT]

Listens on LISTEN (mode 0600, owned by the user OWNER) and connects each client to TARGET: a
server run as OWNER reaches an engine's socket that only root may use, and nothing about the
engine or its socket changes. Runs until killed.

Without FAULT it copies bytes both ways. With one, it reads the HTTP/1.1 exchanges (one request,
then its answer, as the server's client sends them) and changes one kind of request:
  refuse-volume  POST .../volumes/create is answered 500 by the relay, never reaching the engine
  bad-volume     POST .../volumes/create reaches the engine with tmpfs options the kernel
                 refuses: the engine makes the volume and fails to mount it at the container's
                 start, with its own error
  taken-volume   POST .../volumes/create asks for the volume sbx-test-taken instead, which the
                 test made: the engine answers with that one, not the one asked for
  lost-volume    POST .../volumes/create reaches the engine, which makes the volume, but the
                 connection is closed before its answer reaches the client
  slow-volume    the same, but the answer is held until the client goes away; the relay says
                 "holding POST /volumes/create" on stderr when it holds it
  other-shm      POST .../containers/create binding anything from /dev/shm is answered 400 as
                 the engine answers a bind of a path it does not have: an engine that sees
                 another /dev/shm than the server's
"""
import json
import os
import pwd
import re
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Stream:
    """Buffered reads of a socket: lines and exact counts."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def until(self, mark):
        while mark not in self.buf:
            self.fill()
        i = self.buf.index(mark) + len(mark)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def header(head, name):
    m = re.search(rb"(?im)^" + name + rb":\s*([^\r\n]*)", head)
    return m.group(1).strip() if m else None


def answer(stream, request_line):
    """One whole HTTP/1.1 answer: (head, body)."""
    head = stream.until(b"\r\n\r\n")
    status = head.split(b" ", 2)[1]
    if status in (b"204", b"304") or request_line.startswith(b"HEAD "):
        return head, b""
    if (header(head, rb"Transfer-Encoding") or b"").lower() == b"chunked":
        body = b""
        while True:
            size_line = stream.until(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            body += size_line + stream.take(size + 2)
            if size == 0:
                break
        return head, body
    length = header(head, rb"Content-Length")
    if length is not None:
        return head, stream.take(int(length))
    # To the end of the connection.
    rest = stream.buf
    stream.buf = b""
    try:
        while True:
            data = stream.sock.recv(65536)
            if not data:
                break
            rest += data
    except OSError:
        pass
    return head, rest


def with_body(head, body):
    head = re.sub(rb"(?im)^Content-Length:[^\r\n]*\r\n", b"", head)
    return head[:-2] + b"Content-Length: %d\r\n\r\n" % len(body), body


def exchange(client, upstream, fault):
    cs, us = Stream(client), Stream(upstream)
    while True:
        try:
            head = cs.until(b"\r\n\r\n")
        except EOFError:
            return
        # The client waits for a go-ahead before a large body: given here, and not asked of
        # the engine (its answer would come before the one the client reads next).
        if (header(head, rb"Expect") or b"").lower() == b"100-continue":
            head = re.sub(rb"(?im)^Expect:[^\r\n]*\r\n", b"", head)
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        length = header(head, rb"Content-Length")
        body = cs.take(int(length)) if length is not None else b""
        line = head.split(b"\r\n", 1)[0]
        if fault == "other-shm" and re.match(rb"POST /v[0-9.]+/containers/create", line):
            shm = [m["Source"] for m in json.loads(body)["HostConfig"]["Mounts"]
                   if m.get("Type") == "bind" and m["Source"].startswith("/dev/shm/")]
            if shm:
                said = json.dumps({"message": 'invalid mount config for type "bind": bind source path does not '
                                              "exist: " + shm[0]}).encode()
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                               b"Content-Length: %d\r\n\r\n%s" % (len(said), said))
                continue
        if re.match(rb"POST /v[0-9.]+/volumes/create ", line):
            if fault == "refuse-volume":
                said = json.dumps({"message": "volumes are refused here (sock-relay.py refuse-volume)"}).encode()
                client.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                               b"Content-Length: %d\r\n\r\n%s" % (len(said), said))
                continue
            if fault in ("bad-volume", "taken-volume"):
                spec = json.loads(body)
                if fault == "bad-volume":
                    spec["DriverOpts"]["o"] = "size=not-a-size"
                else:
                    spec["Name"] = "sbx-test-taken"
                head, body = with_body(head, json.dumps(spec).encode())
            if fault in ("lost-volume", "slow-volume"):
                upstream.sendall(head + body)
                answer(us, line)
                if fault == "slow-volume":
                    print("holding POST /volumes/create", file=sys.stderr, flush=True)
                    while client.recv(65536):
                        pass
                return
        upstream.sendall(head + body)
        ahead, abody = answer(us, line)
        client.sendall(ahead + abody)


def serve(client, target, fault):
    with client:
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(target)
        except OSError:
            return
        with upstream:
            if fault:
                try:
                    exchange(client, upstream, fault)
                except (OSError, EOFError, ValueError):
                    pass
                return
            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join()


def main():
    listen, target, owner = sys.argv[1], sys.argv[2], sys.argv[3]
    fault = sys.argv[4] if len(sys.argv) > 4 else ""
    if fault not in ("", "refuse-volume", "bad-volume", "taken-volume", "lost-volume", "slow-volume", "other-shm"):
        sys.exit("sock-relay.py: unknown fault " + fault)
    pw = pwd.getpwnam(owner)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = listen + ".tmp"
    srv.bind(tmp)
    os.chmod(tmp, 0o600)
    os.chown(tmp, pw.pw_uid, pw.pw_gid)
    srv.listen(64)
    # Appears whole: a client that finds it finds it ready.
    os.rename(tmp, listen)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client, target, fault), daemon=True).start()


if __name__ == "__main__":
    main()
