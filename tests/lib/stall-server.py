#!/usr/bin/env python3
"""A TCP server that accepts connections and never answers: a registry (or an API) that hangs.

Usage: stall-server.py PORTFILE   listens on 127.0.0.1 (a free port, written to PORTFILE), holds
every connection open and silent, and counts them in PORTFILE.count. Runs until killed.
"""
import socket, sys, threading

def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    held = []
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write("%d\n" % s.getsockname()[1])
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        c, _ = s.accept()
        held.append(c)
        with open(sys.argv[1] + ".count", "w") as f:
            f.write("%d\n" % len(held))

if __name__ == "__main__":
    main()
