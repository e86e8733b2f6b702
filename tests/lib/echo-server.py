#!/usr/bin/env python3
"""A TCP server that sends back what it is sent, for the tunnel tests of tests/allowhosts.bats.

Usage: echo-server.py ADDRESS PORT...   each connection's first chunk comes back as is; each is
                                        logged on stderr as "PORT got N bytes"; a port written
                                        bPORT says "BANNER\r\n" first, as an SSH server does
"""
import socket, sys, threading


def serve(ls, port, banner):
    while True:
        c, _ = ls.accept()
        try:
            c.settimeout(10)
            if banner:
                c.sendall(b"BANNER\r\n")
            data = c.recv(65536)
            print("%d got %d bytes" % (port, len(data)), file=sys.stderr, flush=True)
            c.sendall(data)
        except OSError:
            pass
        finally:
            c.close()


def main():
    addr = sys.argv[1]
    for p in sys.argv[2:]:
        banner = p.startswith("b")
        port = int(p.lstrip("b"))
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port))
        ls.listen(16)
        threading.Thread(target=serve, args=(ls, port, banner), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
