#!/usr/bin/env python3
"""The include check: every #include "..." of the project points down its layers.

The layers, from the top (doc/architecture.md); a file may include headers of its own folder
and of any layer below its own, never one above, and a backend never includes another
backend's files (they are siblings: what two share goes into a layer below them).

Usage: layers.py [ROOT]   (default: the checkout this file is in). Prints one line per
include that breaks the rule, and "N found"; exit 1 when N > 0.
"""
import os, re, sys

# (name, folder prefix, rank): a file's layer is the entry with the longest matching folder.
LAYERS = [
    ('the server', 'src', 90),
    ('protocol', 'src/protocol', 80),
    ('engine', 'src/engine', 70),
    ('tools', 'src/tools', 60),
    ('sandbox life', 'src/sandbox', 50),
    ('a backend', 'backends/*', 45),          # every folder of backends/ but those below
    ('the backend contract', 'backends', 40),
    ('the agent host', 'backends/agenthost', 30),
    ('host folders', 'backends/hostfs', 28),
    ('the HTTP client', 'backends/http', 25),
    ('runs and results', 'backends/run', 20),
    ('the agent', 'agent', 10),
    ('base', 'src/base', 0),
]
FIXED = {p for _, p, _ in LAYERS if '*' not in p}


def layer(path):
    """(name, rank, folder) of a file relative to the root, or None outside the layers."""
    d = os.path.dirname(path)
    if d.startswith('backends/') and d.count('/') == 1 and d not in FIXED:
        return ('a backend', 45, d)
    best = None
    for name, prefix, rank in LAYERS:
        if '*' not in prefix and (d == prefix) and (best is None or len(prefix) > len(best[2])):
            best = (name, rank, prefix)
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..'))
    found = 0
    for top in ('src', 'backends', 'agent'):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if not n.endswith(('.c', '.h')):
                    continue
                path = os.path.relpath(os.path.join(dirpath, n), root)
                me = layer(path)
                if me is None:
                    print('%s: in no layer (add its folder to tests/lib/layers.py)' % path)
                    found += 1
                    continue
                for lineno, line in enumerate(open(os.path.join(root, path), errors='replace'), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
                    it = layer(target)
                    if it is None:
                        print('%s:%d: includes %s, which is in no layer' % (path, lineno, target))
                        found += 1
                    elif it[1] > me[1]:
                        print('%s:%d: includes %s: up from %s to %s' % (path, lineno, target, me[0], it[0]))
                        found += 1
                    elif it[1] == me[1] and it[2] != me[2]:
                        print('%s:%d: includes %s: sideways, from %s to %s' % (path, lineno, target, me[2], it[2]))
                        found += 1
    print('%d found' % found)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
