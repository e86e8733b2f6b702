#!/usr/bin/env python3
"""A TCP server that sends back what it is sent, for the tunnel tests of tests/allowhosts.bats.

Usage: echo-server.py ADDRESS PORT...   each connection's first chunk comes back as is; each is
                                        logged on stderr as "PORT got N bytes"
"""
import socket, sys, threading


def serve(ls, port):
    while True:
        c, _ = ls.accept()
        try:
            c.settimeout(10)
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
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, int(p)))
        ls.listen(16)
        threading.Thread(target=serve, args=(ls, int(p)), daemon=True).start()
    threading.Event().wait()


if __name__ == "__main__":
    main()
