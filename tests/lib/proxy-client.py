#!/usr/bin/env python3
"""Talks to the install step's proxy over its unix socket, as pip would through a relay.

Usage: proxy-client.py SOCK get URL            a plain-HTTP request in absolute form
       proxy-client.py SOCK connect HOST:PORT PATH
                                              a CONNECT tunnel, then "GET PATH" through it
       proxy-client.py SOCK raw TEXT          sends TEXT as is (\\r\\n written as such)
Prints the proxy's (or the upstream's) status line, then the body; exits 0 whatever the status.
"""
import socket, sys

def main():
    path, how = sys.argv[1], sys.argv[2]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    if how == "get":
        url = sys.argv[3]
        host = url.split("/")[2]
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Connection: keep-alive\r\n\r\n" % (url, host)).encode())
    elif how == "connect":
        target, req = sys.argv[3], sys.argv[4]
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b:
                break
            head += b
        status = head.split(b"\r\n")[0].decode()
        if " 200 " not in status:
            print(status)
            print(s.recv(65536).decode(errors="replace"), end="")
            return
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (req, target)).encode())
    else:
        s.sendall(sys.argv[3].replace("\\r\\n", "\r\n").encode())
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    head, _, body = data.partition(b"\r\n\r\n")
    print(head.split(b"\r\n")[0].decode(errors="replace"))
    print(body.decode(errors="replace"), end="")

if __name__ == "__main__":
    main()
