#!/usr/bin/env python3
"""Checks the documentation against the repository (part of scripts/test).

    python3 scripts/check-docs.py [ROOT]      # the repository (default: this one)
    python3 scripts/check-docs.py --self-test # proves a broken doc fails

Reads README.md, docs/*.md and crates/*/*.md and reports, one line per
problem as FILE:LINE: what is wrong, then exits 1:

- README.md over 300 lines, a crates/*/README.md over 150;
- a relative Markdown link whose file (or #anchor) does not exist;
- a repository path in backticks or in a code block (crates/..., scripts/...,
  docs/..., vendor/..., fuzz/..., .ci/...; in a crate's README also src/...,
  tests/..., relative to the crate) that does not exist;
- an RLM_* variable that no source, script or test of the repository names
  (a variable renamed or removed in the code but not in the docs);
- a reference to something outside the repository (a folder beside it,
  DESIGN.md, a numbered document that is not in it, one machine's paths or
  tools).

Standard library only; reads each file once.
"""

import os
import re
import sys
import tempfile

README_MAX_LINES = 300
CRATE_README_MAX_LINES = 150

ROOT_PREFIXES = ("crates", "scripts", "docs", "vendor", "fuzz", r"\.ci")
CRATE_PREFIXES = ("src", "tests", "benches", "examples", "ui", "prompts", "python", "scripts")

# Names the docs use that a change landing beside this one introduces: the
# generated settings reference and the new name of the root turn limit. Once
# they exist in the repository these entries change nothing and can go.
PENDING: set = set()

OUTSIDE = [
    (re.compile(r"\.\./shared"), "refers to a folder beside the repository"),
    (re.compile(r"\bDESIGN\.md\b"), "refers to DESIGN.md, which the repository does not have (docs/architecture.md is the design)"),
    (re.compile(r"\bseeds?[ -]?\d{3}\b", re.I), "names a numbered document that is not in the repository"),
    (re.compile(r"(?<![\w.])/work/"), "refers to a /work/ path of one machine"),
    (re.compile(r"\bissue \d+\b", re.I), "refers to an issue tracker outside the repository"),
]

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
RLM_VAR = re.compile(r"\bRLM_[A-Z0-9_]*[A-Z0-9]\b")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# A path token: not preceded by a word character, '.', '/' or '-', so that
# URLs and longer paths are not matched in their middle.
PATH_CHARS = r"[\w.\-/]*"
PLACEHOLDER_NEXT = set("<*{…[")


def path_pattern(prefixes):
    return re.compile(r"(?<![\w./-])(?:\./)?((?:%s)/%s)" % ("|".join(prefixes), PATH_CHARS))


ROOT_PATH = path_pattern(ROOT_PREFIXES)
CRATE_PATH = path_pattern(ROOT_PREFIXES + CRATE_PREFIXES)


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(lines):
    seen = {}
    out = set()
    in_fence = False
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def doc_files(root):
    files = []
    if os.path.isfile(os.path.join(root, "README.md")):
        files.append("README.md")
    for folder in ("docs",):
        d = os.path.join(root, folder)
        if os.path.isdir(d):
            files += sorted(f"{folder}/{n}" for n in os.listdir(d) if n.endswith(".md"))
    crates = os.path.join(root, "crates")
    if os.path.isdir(crates):
        for c in sorted(os.listdir(crates)):
            cd = os.path.join(crates, c)
            if os.path.isdir(cd):
                files += sorted(f"crates/{c}/{n}" for n in os.listdir(cd) if n.endswith(".md"))
    return files


SKIP_DIRS = {"target", ".git", "node_modules", "vendor", "__pycache__"}


def code_names(root):
    """Every RLM_* name in the repository's code, scripts and tests (not docs)."""
    names = set()
    for top in ("crates", "scripts", ".ci", "fuzz"):
        base = os.path.join(root, top)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and d != "data"]
            for name in filenames:
                if name.endswith(".md"):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    if os.path.getsize(path) > 2_000_000:
                        continue
                    with open(path, encoding="utf-8", errors="ignore") as f:
                        text = f.read()
                except OSError:
                    continue
                if "RLM_" in text:
                    names.update(RLM_VAR.findall(text))
    return names


class Checker:
    def __init__(self, root):
        self.root = root
        self.problems = []
        self.anchor_cache = {}
        self.known_vars = None

    def report(self, rel, lineno, message):
        self.problems.append(f"{rel}:{lineno}: {message}")

    def exists(self, rel):
        return rel.rstrip("/") in PENDING or os.path.exists(os.path.join(self.root, rel))

    def anchors_of(self, rel):
        if rel not in self.anchor_cache:
            try:
                with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                    self.anchor_cache[rel] = anchors(f.read().splitlines())
            except OSError:
                self.anchor_cache[rel] = set()
        return self.anchor_cache[rel]

    def check_path(self, rel, lineno, match, text, crate_dir):
        token = match.group(1).rstrip(".,;")
        nxt = text[match.end(1) : match.end(1) + 1]
        if "..." in token:
            return
        if nxt in PLACEHOLDER_NEXT:
            # A pattern such as crates/*/README.md: the part before it must exist.
            token = token[: token.rfind("/") + 1] if "/" in token else token
        candidates = [token]
        if crate_dir:
            candidates.insert(0, f"{crate_dir}/{token}")
        if not any(self.exists(c) for c in candidates):
            self.report(rel, lineno, f"`{token}` does not exist")

    def check_link(self, rel, lineno, target):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            return  # http:, https:, mailto: …
        path, _, anchor = target.partition("#")
        if path:
            joined = os.path.normpath(os.path.join(os.path.dirname(rel), path))
            if joined.startswith(".."):
                self.report(rel, lineno, f"link {target} leaves the repository")
                return
            if not self.exists(joined):
                self.report(rel, lineno, f"link {target}: {joined} does not exist")
                return
        else:
            joined = rel
        if anchor and joined.endswith(".md") and joined not in PENDING:
            if anchor not in self.anchors_of(joined):
                self.report(rel, lineno, f"link {target}: no heading #{anchor} in {joined}")

    def check_file(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8") as f:
            lines = f.read().splitlines()
        parts = rel.split("/")
        crate_dir = "/".join(parts[:2]) if parts[0] == "crates" and len(parts) == 3 else None
        if rel == "README.md" and len(lines) > README_MAX_LINES:
            self.report(rel, len(lines), f"{len(lines)} lines; the README has at most {README_MAX_LINES}")
        if crate_dir and parts[2] == "README.md" and len(lines) > CRATE_README_MAX_LINES:
            self.report(rel, len(lines), f"{len(lines)} lines; a crate README has at most {CRATE_README_MAX_LINES}")
        paths = CRATE_PATH if crate_dir else ROOT_PATH
        in_fence = False
        for lineno, line in enumerate(lines, 1):
            for pattern, message in OUTSIDE:
                if pattern.search(line):
                    self.report(rel, lineno, message)
            for name in RLM_VAR.findall(line):
                if name in PENDING:
                    continue
                if self.known_vars is None:
                    self.known_vars = code_names(self.root)
                if name not in self.known_vars:
                    self.report(rel, lineno, f"{name} is named by no code, script or test of the repository")
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                for m in paths.finditer(line):
                    self.check_path(rel, lineno, m, line, crate_dir)
                continue
            for span in CODE_SPAN.finditer(line):
                content = span.group(2)
                for m in paths.finditer(content):
                    self.check_path(rel, lineno, m, content, crate_dir)
            prose = CODE_SPAN.sub("", line)
            for m in LINK.finditer(prose):
                self.check_link(rel, lineno, m.group(1))

    def run(self):
        for rel in doc_files(self.root):
            self.check_file(rel)
        return self.problems


def check(root):
    return Checker(root).run()


def self_test():
    """A broken fake repository must fail on each kind of problem, a sound one pass."""
    failures = []
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)

        write("crates/demo/src/lib.rs", 'const VAR: &str = "RLM_KNOWN";\n')
        write("scripts/test", "#!/bin/sh\n")
        write("docs/guide.md", "# Guide\n\n## Asking questions\n")
        write(
            "README.md",
            "# Demo\n\n`crates/demo/src/lib.rs:1`, `scripts/test`, `RLM_KNOWN`, "
            "[guide](docs/guide.md#asking-questions), [site](https://example.org/x)\n\n"
            "```sh\nscripts/test\n```\n",
        )
        write("crates/demo/README.md", "# demo\n\n`src/lib.rs`, `docs/guide.md`\n")
        sound = check(root)
        if sound:
            failures.append("a sound repository reported problems: " + "; ".join(sound))

        write(
            "README.md",
            "# Demo\n\n`crates/demo/src/missing.rs`\n[gone](docs/gone.md)\n"
            "[bad anchor](docs/guide.md#no-such-heading)\n`RLM_NO_SUCH_VARIABLE`\n"
            "See DESIGN.md and seed 003.\n\n```sh\nscripts/nothing-here\n```\n",
        )
        write("crates/demo/README.md", "# demo\n\n`src/gone.rs`\n" + "line\n" * 150)
        found = "\n".join(check(root))
        expected = {
            "a missing backticked path": "crates/demo/src/missing.rs` does not exist",
            "a missing path in a code block": "scripts/nothing-here` does not exist",
            "a missing crate-relative path": "src/gone.rs` does not exist",
            "a missing link target": "docs/gone.md does not exist",
            "a missing anchor": "no heading #no-such-heading",
            "an unknown RLM_ variable": "RLM_NO_SUCH_VARIABLE is named by no code",
            "DESIGN.md": "DESIGN.md",
            "a numbered outside document": "numbered document",
            "a crate README over 150 lines": "a crate README has at most 150",
        }
        for what, needle in expected.items():
            if needle not in found:
                failures.append(f"{what} was not reported")
    if failures:
        for f in failures:
            print(f"check-docs self-test: {f}")
        return 1
    print("check-docs self-test: ok")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in the docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
