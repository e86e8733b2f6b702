#!/usr/bin/env python3
"""lint-suite.py [FILES...]: the suite's own checks on its test files.

1. A bats line `! cmd` that is not the last command of its test asserts nothing: bats runs
   tests under `set -e`, which ignores a negated command's status. Write `run ! cmd` or
   `[ -z "$(cmd)" ]` instead.
2. A session script step {"sleep": S} is a race on a loaded machine: wait for the condition
   ({"wait": ID}, {"wait_line": RE}, {"until": CMD}); only a client that stalls on purpose
   may sleep, on a line that says so with "# stalls on purpose".
Prints FILE:LINE: TEXT for each, then "N found"; exits 1 when any is found.
"""
import glob, re, sys

def tests_of(lines):
    """Yields (start, [(lineno, text)]) for each @test body, comment and blank lines left out."""
    body, depth = None, 0
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if body is None:
            if re.match(r"@test\b.*\{$", s):
                body, depth = [], 1
            continue
        if re.search(r"\{$", s) and not s.startswith("#"):
            depth += 1
        if s == "}" or s.startswith("} ") or s == "};":
            depth -= 1
            if depth == 0:
                yield body
                body = None
                continue
        if s and not s.startswith("#"):
            body.append((n, s, depth))

def main():
    files = sys.argv[1:] or sorted(glob.glob("tests/*.bats"))
    found = 0
    for path in files:
        lines = open(path, encoding="utf-8").read().split("\n")
        for body in tests_of(lines):
            for i, (n, s, depth) in enumerate(body):
                last = i == len(body) - 1
                if s.startswith("! ") and not last:
                    print(f"{path}:{n}: {s}  (an assertion that cannot fail)")
                    found += 1
                if re.search(r'\{"sleep": *[0-9.]+\}', s) and "# stalls on purpose" not in lines[n - 2] + lines[n - 1]:
                    print(f"{path}:{n}: {s}  (a fixed sleep: wait for a condition)")
                    found += 1
    print(f"{found} found")
    return 1 if found else 0

sys.exit(main())
