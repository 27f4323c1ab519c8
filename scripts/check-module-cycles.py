#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a circle.

Usage: check-module-cycles.py CRATE_SRC_DIR...

A module's imports are its `use crate::…`, `super::…` and child-module paths
outside `#[cfg(test)]` and comments; each resolves to the deepest module file that exists.
Any cycle in that graph is printed and makes the exit status 1.
"""
import os
import re
import sys


def modules(root):
    mods = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            parts = os.path.relpath(path, root)[:-3].split("/")
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            if "bin" in parts:
                continue
            mods["::".join(parts)] = path
    return mods


def edges(mods):
    def resolve(path):
        parts = [p for p in path.split("::") if p]
        while parts:
            key = "::".join(parts)
            if key in mods:
                return key
            parts = parts[:-1]
        return None

    graph = {m: set() for m in mods}
    for m, path in mods.items():
        text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
        # Comments (doc links included) name modules without importing them.
        text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("//"))
        base = m.split("::")[:-1] if m else []
        targets = [resolve(u) for u in re.findall(r"crate::([a-z_:]+)", text)]
        targets += [resolve("::".join(base + [u])) for u in re.findall(r"super::([a-z_:]+)", text)]
        for u in re.findall(r"^use (\w+)::", text, re.M):
            child = resolve(f"{m}::{u}" if m else u)
            if child and m and child.startswith(m + "::"):
                targets.append(child)
        graph[m] = {t for t in targets if t and t != m}
    return graph


def cycles(graph):
    found = set()

    def walk(node, stack):
        for t in graph.get(node, ()):
            if t in stack:
                cycle = stack[stack.index(t):]
                k = cycle.index(min(cycle))
                found.add(" -> ".join(cycle[k:] + cycle[:k] + [min(cycle)]))
            elif len(stack) < 12:
                walk(t, stack + [t])

    for m in graph:
        walk(m, [m])
    return sorted(found)


def main():
    bad = 0
    for root in sys.argv[1:]:
        for c in cycles(edges(modules(root))):
            print(f"{root}: import cycle: {c}")
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
