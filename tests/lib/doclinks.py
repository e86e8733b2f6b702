#!/usr/bin/env python3
"""The docs' link check: every relative link of the given Markdown pages resolves.

A link's file must exist (relative to its page), and an anchor (#name) must name a heading of
the page it points to, spelled as GitHub spells it: lower case, punctuation dropped, spaces
made hyphens, a repeated heading given -1, -2, ... Links to other sites are not fetched.

Usage: doclinks.py PAGE...   Prints one line per broken link ("PAGE:LINE: ...") and
"N found"; exit 1 when N > 0.
"""
import os, re, sys

LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')


def lines_outside_fences(text):
    fence = False
    for n, line in enumerate(text.split('\n'), 1):
        if line.lstrip().startswith('```'):
            fence = not fence
            continue
        if not fence:
            yield n, line


def anchors(path):
    seen, out = {}, set()
    with open(path, encoding='utf-8') as f:
        text = f.read()
    for _, line in lines_outside_fences(text):
        m = re.match(r'^#{1,6} (.*)', line)
        if not m:
            continue
        slug = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-')
        k = seen.get(slug, 0)
        seen[slug] = k + 1
        out.add(slug if k == 0 else f'{slug}-{k}')
    return out


def main(pages):
    found = 0
    for page in pages:
        with open(page, encoding='utf-8') as f:
            text = f.read()
        for n, line in lines_outside_fences(text):
            # Code spans are text, not links.
            for target in LINK.findall(re.sub(r'`[^`]*`', '', line)):
                if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                    continue
                path, _, frag = target.partition('#')
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                why = None
                if not os.path.exists(dest):
                    why = f'{dest} does not exist'
                elif frag and dest.endswith('.md') and frag not in anchors(dest):
                    why = f'{dest} has no heading #{frag}'
                if why:
                    print(f'{page}:{n}: ({target}): {why}')
                    found += 1
    print(f'{found} found')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
