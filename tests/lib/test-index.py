#!/usr/bin/env python3
"""A package index (PEP 503 "simple" pages) for the install tests, served from a folder.

Usage: test-index.py ROOT ADDRESS PORT
  ROOT/simple/<project>/index.html   the project pages (links may point anywhere: a hostile
                                     index sends pip to the host's loopback, say)
  ROOT/files/...                     the distributions
A path containing "slow" is answered after SLOW_S seconds (default 4): long enough for a test to
look at the install step while it waits. Every request is logged to stderr.
"""
import functools, http.server, os, sys, time

SLOW_S = float(os.environ.get("SLOW_S", "4"))


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if "slow" in self.path:
            time.sleep(SLOW_S)
        return super().do_GET()


def main():
    root, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    srv = http.server.ThreadingHTTPServer((addr, port), functools.partial(Handler, directory=root))
    srv.serve_forever()


if __name__ == "__main__":
    main()
