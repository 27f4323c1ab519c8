#!/usr/bin/env python3
"""Prints the named sections of a Markdown file, headings demoted one level:
`python3 scripts/readme_sections.py FILE "Heading" ...`."""
import re
import sys


def sections(path, wanted):
    lines = open(path, encoding="utf-8").read().splitlines()
    out = []
    i = 0
    in_fence = False
    heads = []
    for n, line in enumerate(lines):
        if re.match(r"^`{3,}[\w+-]*\s*$", line):
            in_fence = not in_fence
        if not in_fence:
            m = re.match(r"^(#+) (.*)", line)
            if m:
                heads.append((n, len(m.group(1)), m.group(2)))
    for idx, (n, level, title) in enumerate(heads):
        if not any(title.startswith(w) for w in wanted):
            continue
        end = len(lines)
        for n2, level2, _ in heads[idx + 1 :]:
            if level2 <= level:
                end = n2
                break
        body = lines[n:end]
        body = [("#" + l if re.match(r"^#+ ", l) else l) for l in body]
        out.append("\n".join(body).rstrip() + "\n")
    return "\n".join(out)


if __name__ == "__main__":
    path = sys.argv[1]
    print(sections(path, sys.argv[2:]))
