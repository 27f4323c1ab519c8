#!/usr/bin/env python3
"""German/English bilingual evaluation: the same questions in German over
Debian's German manual pages (manpages-de and the German pages that procps,
psmisc and passwd ship) and in English over their English originals
(Python 3.11, standard library only).

    run.py --out DIR [--rlm PATH] [--lang de|en|both] [--retrieval] [--ask]
           [--wall SECS] [--limit N] [--only ID,...]
    run.py --report --out DIR
    run.py --corpus --out DIR       (only fetch and convert the pages)

Corpus: every run first makes sure OUT/de/<page>.txt and OUT/en/<page>.txt
exist. It downloads the pinned .deb files with `apt-get download PKG=VERSION`
into OUT/debs/ (a Debian bookworm machine with its apt lists: run
`apt-get update` once), checks each file's SHA-256 against PACKAGES below
(and stops with a message naming the package when a version or a digest
differs), unpacks them with `dpkg-deb -x` (nothing is installed) and renders
each page with groff (`groff -t -Kutf-8 -Tutf8 -mandoc`, no hyphenation, plain
text) or, where groff is missing, with the small troff stripper below. The
man page texts are GPL/other free licences and are not committed: only this
script, questions.json and the README are.

--retrieval: indexes OUT/de and OUT/en afresh into OUT/store-de and
OUT/store-en (`rlm index DIR --store STORE --rebuild`), runs `rlm search
QUESTION --store STORE --json -k 5` for every question and scores recall@1
(the first hit is a chunk of the gold page) and recall@5 (a chunk of the gold
page is among the 5 hits), plus the reciprocal rank of the gold page.

--ask: `rlm ask QUESTION --store STORE --json --max-wall-secs WALL` for every
question not yet in OUT/results.jsonl (resumable), scored correct when an
accepted gold string is in the answer without its citation markers (options:
an exact token, case kept; anything else: case and spaces folded, on word
boundaries). Also records
the wall time and the answer's language (German/English by stop-word
counts; "unknown" when the answer has too few of them).

Results: OUT/results.jsonl, one line per (kind, lang, id), kind "retrieval"
or "ask" (a new --retrieval pass replaces the retrieval lines; ask lines are
kept), traces in OUT/traces/. --report prints a markdown table per language.
"""

import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Debian bookworm packages the pages come from: name -> (version, SHA-256 of the .deb).
PACKAGES = {
    "manpages-de": ("4.18.1-1", "37d2e7ee51f22952aecec3af93647ff59194a3c74bb7a694560f49c7f7ab3978"),
    "manpages": ("6.03-2", "efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91"),
    "coreutils": ("9.1-1", "61038f857e346e8500adf53a2a0a20859f4d3a3b51570cc876b153a2d51a3091"),
    "findutils": ("4.9.0-4", "5dd86bd0af4aa73f067dfd6b8339dd868f2dd84056aa79db29d1206d4fbc5e04"),
    "grep": ("3.8-5", "3264acea728df3c48a54f20e9291b965130e306b9d00adac76647049da7196df"),
    "gzip": ("1.12-1", "eabec1dde2834f72540d7b93fc5df2625f52611c06d93d61f5cdb12480e0e6a3"),
    "sed": ("4.9-1+deb12u1", "fd557efeee8aae4619c2cb7f68aadccb804322ad4a99ab048aaae5901d253885"),
    "tar": ("1.34+dfsg-1.2+deb12u1", "24fb92e98c2969171f81a8b589263d705f6b1670f95d121cd74c810d4605acc3"),
    "diffutils": ("1:3.8-4", "8bdfedc14c1035e3750e9f055ac9c1ecd9b5d05d9e6dc6466c4e9237eef407dd"),
    "less": ("590-2.1~deb12u2", "3c4ee8ce5e0f625e1169da9584e309c375a8a68e22de5821461d14446825cc1a"),
    "util-linux": ("2.38.1-5+deb12u3", "8eb241ff24b2e1ee9c0373f4fc9bc728b85bf5966c1496154df7da01c0e42f34"),
    "bsdutils": ("1:2.38.1-5+deb12u3", "6cae172b006a4603e710e046c3acba8d98d36748894cbe3eeda31d415fec331e"),
    "mount": ("2.38.1-5+deb12u3", "456ed2c62f884bc1133b6969d4d1eb2e6d8581076b00b4c8d700151155270a7a"),
    "procps": ("2:4.0.2-3", "d9d0e75779cb79af869181f17b93c5c263a2b89cac6a0193c436160a4483ddc1"),
    "psmisc": ("23.6-1", "9d02f654bdf280a6622a9b1371f7a1fa44546702d11991e438558bc259df7b69"),
    "passwd": ("1:4.13+dfsg1-1+deb12u2", "fb787363372903e03627e53fd483e51dfb6861047a1e02c7d5a5f27d66546d08"),
}

# The pages: (name, section, package of the German page, package of the English page).
PAGES = [(n, "1", "manpages-de", "coreutils") for n in (
    "ls", "cp", "mv", "rm", "chmod", "chown", "df", "du", "date", "sort", "uniq", "wc", "head",
    "tail", "cut", "tr", "ln", "mkdir", "touch", "stat", "seq", "split", "tee", "timeout", "shred",
    "nl", "dd", "mktemp", "truncate", "nice")] + [
    ("find", "1", "manpages-de", "findutils"),
    ("grep", "1", "manpages-de", "grep"),
    ("gzip", "1", "manpages-de", "gzip"),
    ("sed", "1", "manpages-de", "sed"),
    ("tar", "1", "manpages-de", "tar"),
    ("diff", "1", "manpages-de", "diffutils"),
    ("less", "1", "manpages-de", "less"),
    ("su", "1", "manpages-de", "util-linux"),
    ("dmesg", "1", "manpages-de", "util-linux"),
    ("flock", "1", "manpages-de", "util-linux"),
    ("ionice", "1", "manpages-de", "util-linux"),
    ("renice", "1", "manpages-de", "bsdutils"),
    ("logger", "1", "manpages-de", "bsdutils"),
    ("ps", "1", "procps", "procps"),
    ("kill", "1", "procps", "procps"),
    ("free", "1", "procps", "procps"),
    ("uptime", "1", "procps", "procps"),
    ("pgrep", "1", "procps", "procps"),
    ("watch", "1", "procps", "procps"),
    ("killall", "1", "psmisc", "psmisc"),
    ("pstree", "1", "psmisc", "psmisc"),
    ("passwd", "1", "passwd", "passwd"),
    ("chage", "1", "passwd", "passwd"),
    ("useradd", "8", "passwd", "passwd"),
    ("usermod", "8", "passwd", "passwd"),
    ("mount", "8", "manpages-de", "mount"),
    ("fstab", "5", "manpages-de", "mount"),
    ("hosts", "5", "manpages-de", "manpages"),
    ("shells", "5", "manpages-de", "manpages"),
    ("signal", "7", "manpages-de", "manpages"),
    ("hier", "7", "manpages-de", "manpages"),
]

LANGS = ("de", "en")


def die(msg):
    sys.exit(f"run.py: {msg}")


# ---------------------------------------------------------------- corpus

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(debs):
    """Download every pinned package into DEBS and check its digest; returns {pkg: path}."""
    os.makedirs(debs, exist_ok=True)
    os.chmod(debs, 0o777)  # apt-get download as root drops to _apt, which must be able to write here
    paths, failed = {}, []
    for pkg, (version, digest) in PACKAGES.items():
        found = [p for p in glob.glob(os.path.join(debs, f"{pkg}_*.deb"))]
        want = [p for p in found if sha256(p) == digest]
        if want:
            paths[pkg] = want[0]
            continue
        for p in found:
            os.remove(p)
        r = subprocess.run(["apt-get", "download", f"{pkg}={version}"], cwd=debs,
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(f"  {pkg}={version}: apt-get download failed: "
                          f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        got = glob.glob(os.path.join(debs, f"{pkg}_*.deb"))
        if len(got) != 1:
            failed.append(f"  {pkg}={version}: expected one {pkg}_*.deb after the download, found {got}")
            continue
        d = sha256(got[0])
        if d != digest:
            failed.append(f"  {pkg}={version}: SHA-256 {d} differs from the pinned {digest}")
            continue
        paths[pkg] = got[0]
    if failed:
        die("the pinned Debian packages could not be fetched as they were when the questions were "
            "written:\n" + "\n".join(failed) + "\n"
            "The questions were checked against exactly these versions (Debian 12 bookworm). Run "
            "`apt-get update` first; if bookworm has since replaced a version (a point release), "
            "the pages may have changed: re-check the affected questions against the new pages, "
            "then update PACKAGES in run.py.")
    return paths


def extract(debs, paths):
    root = os.path.join(debs, "x")
    for pkg, deb in paths.items():
        dest = os.path.join(root, pkg)
        stamp = os.path.join(dest, ".sha256")
        if os.path.exists(stamp) and open(stamp).read() == PACKAGES[pkg][1]:
            continue
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        if shutil.which("dpkg-deb") is None:
            die("dpkg-deb is needed to unpack the .deb files (a Debian or Ubuntu machine)")
        subprocess.run(["dpkg-deb", "-x", deb, dest], check=True)
        with open(stamp, "w") as f:
            f.write(PACKAGES[pkg][1])
    return root


# Prepended to every page: no hyphenation, even where a page asks for it with `.hy`
# (a word split over two lines is two words to a search index).
NO_HYPHENATION = ".nh\n.de hy\n..\n"


def groff_text(source):
    if source.startswith(("'\\\"", '.\\"')):  # keep a preprocessor line ('\" t) first
        first, _, rest = source.partition("\n")
        source = first + "\n" + NO_HYPHENATION + rest
    else:
        source = NO_HYPHENATION + source
    r = subprocess.run(["groff", "-t", "-Kutf-8", "-Tutf8", "-mandoc", "-rHY=0", "-rLL=100n", "-P-cbou"],
                       input=source.encode(), capture_output=True, env=dict(os.environ, LC_ALL="C.UTF-8"))
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode(errors="replace")[-300:])
    return r.stdout.decode("utf-8", errors="replace")


ESCAPES = {
    "-": "-", "e": "\\", "\\": "\\", "(em": "—", "(en": "–", "(bu": "•", "(co": "©", "(aq": "'",
    "(dq": '"', "(lq": "“", "(rq": "”", "(Fo": "«", "(Fc": "»", "(fo": "‹", "(fc": "›", "(Bq": "„",
    "(oq": "‘", "(cq": "’", "(ga": "`", "(ha": "^", "(ti": "~", "(ul": "_", "(rs": "\\", "(mi": "-",
    "(hy": "-", "(pl": "+", "(<=": "<=", "(>=": ">=", "(mu": "×", "(de": "°", "(ss": "ß", "(:a": "ä",
    "(:o": "ö", "(:u": "ü", "(:A": "Ä", "(:O": "Ö", "(:U": "Ü", "(rg": "®", "(tm": "™", "(->": "→",
    "(<-": "←", "(sc": "§", "(ba": "|", "(or": "|", "(at": "@", "(sh": "#", "(Do": "$", "(sl": "/",
    "(lB": "[", "(rB": "]", "(lC": "{", "(rC": "}", "(la": "⟨", "(ra": "⟩", "(aa": "´",
    "~": " ", " ": " ", "0": " ", "|": "", "^": "", "&": "", ")": "", "/": "", ",": "", "%": "",
    ":": "", ".": ".", "'": "'", "`": "`",
}


def strip_troff(source):
    """Good-enough troff/man/mdoc to text, for machines without groff."""
    out = []

    def inline(s):
        s = re.sub(r"\\f(\[[^\]]*\]|\(..|.)", "", s)
        s = re.sub(r"\\[sS][+-]?\d+", "", s)
        s = re.sub(r"\\\*(\[[^\]]*\]|\(..|.)", "", s)
        s = re.sub(r"\\[nkz](\[[^\]]*\]|\(..|.)", "", s)
        s = re.sub(r"\\[hvwoLlbx]'[^']*'", "", s)
        s = re.sub(r"\\\[u([0-9A-Fa-f]{4,5})\]", lambda m: chr(int(m.group(1), 16)), s)

        def esc(m):
            k = m.group(1)
            if k.startswith("["):
                k = "(" + k[1:-1] if len(k) == 4 else k
            return ESCAPES.get(k, "")
        s = re.sub(r"\\(\[[^\]]*\]|\(..|.)", esc, s)
        return s

    fill = []
    for line in source.splitlines():
        if line.startswith((".\\\"", "'\\\"", '.\\"')) or line.strip() in (".", "'"):
            continue
        if line.startswith((".", "'")):
            m = re.match(r"[.'](\S+)\s*(.*)", line)
            if not m:
                continue
            req, args = m.group(1), m.group(2)
            words = [w.strip('"') for w in re.findall(r'"[^"]*"|\S+', args)]
            if req in ("SH", "SS", "Sh", "Ss"):
                out.append(" ".join(fill)); fill = []
                out.append("")
                out.append(inline(" ".join(words)))
            elif req in ("TH", "Dt"):
                out.append(inline(" ".join(words)))
            elif req in ("PP", "P", "LP", "sp", "br", "TP", "IP", "HP", "Pp", "Bl", "El", "It", "nf", "fi",
                         "RS", "RE", "EX", "EE"):
                out.append(" ".join(fill)); fill = []
                if req in ("IP", "It") and words:
                    fill.append(inline(" ".join(words[:1] if req == "IP" else words)))
            elif req in ("B", "I", "SM", "SB", "Nm", "Ar", "Fl", "Cm", "Pa", "Ev", "Em", "Sy", "Li", "Va",
                         "Dv", "Er", "Ic", "Nd", "UR", "MT"):
                pre = "-" if req == "Fl" else ""
                fill.append(pre + inline(" ".join(words)))
            elif req in ("BR", "RB", "IR", "RI", "BI", "IB"):
                fill.append(inline("".join(words)))
            elif req in ("Op",):
                fill.append("[" + inline(" ".join(words)) + "]")
            continue
        fill.append(inline(line))
    out.append(" ".join(fill))
    return "\n".join(out)


def tidy(text):
    lines = []
    for line in text.replace("\r", "").split("\n"):
        line = re.sub(r".\x08", "", line).rstrip()
        indent = len(line) - len(line.lstrip(" "))
        lines.append(" " * indent + re.sub(r" {2,}", " ", line.strip()))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def build_corpus(out, force=False):
    manifest = os.path.join(out, "corpus.json")
    if not force and os.path.exists(manifest):
        m = json.load(open(manifest))
        if m.get("packages") == json.loads(json.dumps(PACKAGES)) and m.get("pages") == [list(p) for p in PAGES]:
            return m
    debs = os.path.join(out, "debs")
    root = extract(debs, fetch(debs))
    converter = "groff" if shutil.which("groff") else "strip_troff"
    pages = []
    for name, sec, de_pkg, en_pkg in PAGES:
        for lang, pkg in (("de", de_pkg), ("en", en_pkg)):
            sub = f"usr/share/man/de/man{sec}" if lang == "de" else f"usr/share/man/man{sec}"
            src = os.path.join(root, pkg, sub, f"{name}.{sec}.gz")
            if not os.path.exists(src):
                die(f"{pkg} has no {sub}/{name}.{sec}.gz")
            source = gzip.open(src).read().decode("utf-8", errors="replace")
            text = tidy(groff_text(source) if converter == "groff" else strip_troff(source))
            os.makedirs(os.path.join(out, lang), exist_ok=True)
            with open(os.path.join(out, lang, f"{name}.txt"), "w") as f:
                f.write(text)
        pages.append(name)
    m = {"packages": PACKAGES, "pages": [list(p) for p in PAGES], "converter": converter,
         "groff": subprocess.run(["groff", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
         if converter == "groff" else None}
    with open(manifest, "w") as f:
        json.dump(m, f, indent=1)
    print(f"corpus: {len(pages)} pages in {out}/de and {out}/en ({converter})", flush=True)
    return m


def check_gold(out, qs):
    """Every question's first accepted answer should be in its gold page, in both languages."""
    bad = []
    for q in qs:
        for lang in LANGS:
            text = open(os.path.join(out, lang, f"{q['doc']}.txt")).read()
            flat = re.sub(r"\s+", " ", text).lower()
            if not any(re.sub(r"\s+", " ", g).lower() in flat for g in q[lang]["gold"]):
                bad.append(f"{q['id']} {lang}: none of {q[lang]['gold']} in {q['doc']}.txt")
    if bad:
        print("warning: gold answers not found in their pages:\n  " + "\n  ".join(bad), file=sys.stderr)


# ---------------------------------------------------------------- scoring

STOP = {
    "de": set("""der die das den dem des ein eine einen einem einer eines und oder aber nicht kein keine
        ist sind wird werden wurde wurden hat haben sein mit von zu zum zur im in auf für bei aus nach
        über unter durch als wie wenn dass daß auch nur noch es sie er wir ihr ich man sich diese dieser
        dieses welche welcher welches wird kann können muss müssen soll sollte dann diese alle werden
        um am an vom beim ob bzw sowie wo was wer hier dort jede jeder jedes eines mit ohne""".split()),
    "en": set("""the a an and or but not no is are was were be been being has have had with of to in on
        for at by from as if that this these those it its they them he she we you i can could must
        should shall will would may might do does did which what who when where there here all any
        each every into than then also only use used using option""".split()),
}
# Words of both lists ("in", "an", "was", ...) say nothing about the language.
STOP = {lang: words - (STOP["de"] & STOP["en"]) for lang, words in STOP.items()}


MARKERS = re.compile(r"\[\[\s*(?:chunk|doc)\s*:.*?\]\]|\[DOCUMENT\s+\d+[^\]\n]*\]", re.S)


def prose(answer):
    """The answer without its citation markers (their quotes are the page's words, not the answer's)."""
    return MARKERS.sub(" ", answer)


def language(text):
    """de or en by stop words; a word with an umlaut or ß counts for German
    too (a short German answer holds few stop words: "tail -f schläft
    standardmäßig 1 Sekunde")."""
    words = re.findall(r"[a-zäöüß]+", prose(text).lower())
    de = sum(w in STOP["de"] or any(c in "äöüß" for c in w) for w in words)
    en = sum(w in STOP["en"] for w in words)
    if de + en < 2 or de == en:
        return "unknown"
    return "de" if de > en else "en"


def is_option(g):
    return re.fullmatch(r"--?[A-Za-z0-9][\w-]*(=\S*)?", g) is not None


def correct(answer, golds):
    answer = prose(answer)
    tokens = [t.rstrip(".") for t in re.split(r"[\s,;:()\[\]{}\"'`»«„“”‘’|*/]+", answer) if t]
    flat = re.sub(r"\s+", " ", answer).lower()
    for g in golds:
        if is_option(g):
            if any(t == g or ("=" not in g and t.startswith(g + "=")) for t in tokens):
                return True
        elif re.search(r"(?<!\w)" + re.escape(re.sub(r"\s+", " ", g).lower()) + r"(?!\w)", flat):
            return True
    return False


# ---------------------------------------------------------------- runs

def rlm_version(rlm):
    path = shutil.which(rlm) or rlm
    return {"path": os.path.abspath(path), "sha256": sha256(path)}


def index(rlm, out, lang):
    store = os.path.join(out, f"store-{lang}")
    shutil.rmtree(store, ignore_errors=True)
    r = subprocess.run([rlm, "index", os.path.join(out, lang), "--store", store, "--rebuild", "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die(f"rlm index {lang} failed:\n{r.stderr[-2000:]}")
    with open(os.path.join(out, f"store-{lang}.json"), "w") as f:
        json.dump({"rlm": rlm_version(rlm), "report": r.stdout}, f, indent=1)
    return store


def store_for(rlm, out, lang):
    """The language's store, indexed afresh when missing or built by another binary."""
    meta = os.path.join(out, f"store-{lang}.json")
    store = os.path.join(out, f"store-{lang}")
    if os.path.isdir(store) and os.path.exists(meta) and json.load(open(meta))["rlm"] == rlm_version(rlm):
        return store
    return index(rlm, out, lang)


def hit_docs(v):
    hits = v if isinstance(v, list) else v.get("results") or v.get("hits") or []
    docs = []
    for h in hits:
        p = h.get("path") or h.get("document", {}).get("path") or h.get("doc_path") or ""
        docs.append(os.path.splitext(os.path.basename(p))[0])
    return docs


def search(rlm, store, q, k=5):
    t0 = time.time()
    r = subprocess.run([rlm, "search", q, "--store", store, "--json", "-k", str(k)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {"docs": [], "error": r.stderr[-500:], "wall": time.time() - t0}
    return {"docs": hit_docs(json.loads(r.stdout)), "wall": time.time() - t0}


def ask(rlm, store, q, wall, trace):
    t0 = time.time()
    try:
        p = subprocess.run([rlm, "ask", q, "--store", store, "--json", "--max-wall-secs", str(wall),
                            "--trace", trace], capture_output=True, text=True, timeout=wall + 300)
    except subprocess.TimeoutExpired:
        return {"answer": "", "error": "timeout", "wall": time.time() - t0}
    elapsed = time.time() - t0
    try:
        v = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"answer": "", "error": p.stderr[-500:], "wall": elapsed}
    cites = []
    for c in v.get("citations") or []:
        path = c.get("path") or c.get("document") or c.get("doc_path") or ""
        if isinstance(path, dict):
            path = path.get("path", "")
        cites.append(os.path.splitext(os.path.basename(str(path)))[0])
    return {"answer": v.get("answer") or "", "partial": v.get("partial"),
            "calls": (v.get("usage") or {}).get("calls"), "cited": cites, "wall": elapsed}


def load_results(out):
    path = os.path.join(out, "results.jsonl")
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []


def save_results(out, rows):
    path = os.path.join(out, "results.jsonl")
    with open(path + ".tmp", "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(path + ".tmp", path)


def run_retrieval(a, qs, langs):
    kept = [r for r in load_results(a.out) if not (r["kind"] == "retrieval" and r["lang"] in langs)]
    rows = []
    for lang in langs:
        store = index(a.rlm, a.out, lang)
        for q in qs:
            r = search(a.rlm, store, q[lang]["q"])
            docs = r["docs"]
            rank = docs.index(q["doc"]) + 1 if q["doc"] in docs else None
            rows.append({"kind": "retrieval", "lang": lang, "id": q["id"], "doc": q["doc"],
                         "question": q[lang]["q"], "hits": docs, "rank": rank,
                         "r1": rank == 1, "r5": rank is not None, "wall": r["wall"],
                         **({"error": r["error"]} if "error" in r else {})})
            print(f"{lang} {q['id']:>4} {'@' + str(rank) if rank else 'miss':>4}  {q[lang]['q']}  "
                  f"-> {' '.join(docs)}", flush=True)
    save_results(a.out, kept + rows)


def run_ask(a, qs, langs):
    os.makedirs(os.path.join(a.out, "traces"), exist_ok=True)
    done = {(r["lang"], r["id"]) for r in load_results(a.out) if r["kind"] == "ask"}
    for lang in langs:
        store = store_for(a.rlm, a.out, lang)
        for q in qs:
            if (lang, q["id"]) in done:
                continue
            r = ask(a.rlm, store, q[lang]["q"], a.wall, os.path.join(a.out, "traces", f"{lang}-{q['id']}.jsonl"))
            r.update({"kind": "ask", "lang": lang, "id": q["id"], "doc": q["doc"], "question": q[lang]["q"],
                      "gold": q[lang]["gold"], "correct": correct(r["answer"], q[lang]["gold"]),
                      "answer_lang": language(r["answer"])})
            with open(os.path.join(a.out, "results.jsonl"), "a") as f:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            print(("ok  " if r["correct"] else "BAD ") + f"{lang} {q['id']} {r['wall']:.0f}s "
                  f"[{r['answer_lang']}] {q[lang]['q']} -> {r['answer'][:160]!r}", flush=True)


def pct(xs):
    return f"{100 * sum(xs) / len(xs):.0f}% ({sum(xs)}/{len(xs)})" if xs else "–"


def report(out):
    rows = load_results(out)
    if not rows:
        die(f"no results in {out}/results.jsonl")
    for r in rows:
        if r["kind"] == "ask":  # scored again, as the scorer is now
            r["answer_lang"] = language(r["answer"])
    print("| lang | questions | recall@1 | recall@5 | MRR@5 | accuracy | answers in question's language "
          "| median wall (ask) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for lang in LANGS:
        ret = [r for r in rows if r["kind"] == "retrieval" and r["lang"] == lang]
        asks = [r for r in rows if r["kind"] == "ask" and r["lang"] == lang]
        if not ret and not asks:
            continue
        mrr = f"{sum(1 / r['rank'] for r in ret if r['rank']) / len(ret):.2f}" if ret else "–"
        walls = [r["wall"] for r in asks]
        unknown = sum(r["answer_lang"] == "unknown" for r in asks)
        in_lang = pct([r["answer_lang"] == lang for r in asks]) + (f", {unknown} unknown" if unknown else "")
        print(f"| {lang} | {max(len(ret), len(asks))} | {pct([r['r1'] for r in ret])} | "
              f"{pct([r['r5'] for r in ret])} | {mrr} | {pct([r['correct'] for r in asks])} | "
              f"{in_lang if asks else '–'} | {f'{statistics.median(walls):.0f} s' if walls else '–'} |")
    by = {(r["lang"], r["id"]): r for r in rows if r["kind"] == "retrieval"}
    ids = sorted({i for _, i in by}, key=lambda i: (len(i), i))
    misses = [i for i in ids if any(not by[(l, i)]["r1"] for l in LANGS if (l, i) in by)]
    if misses:
        print("\nNot first (rank of the gold page in the top 5, '-' = missing):\n")
        print("| id | gold | de | en | de question |")
        print("| --- | --- | --- | --- | --- |")
        for i in misses:
            de, en = by.get(("de", i)), by.get(("en", i))
            rk = lambda r: "–" if r is None else (str(r["rank"]) if r["rank"] else "-")
            any_r = de or en
            print(f"| {i} | {any_r['doc']} | {rk(de)} | {rk(en)} | {de['question'] if de else ''} |")
    asks = [r for r in rows if r["kind"] == "ask"]
    if asks:
        print("\nAnswers:\n")
        for r in asks:
            mark = "ok " if r["correct"] else "BAD"
            print(f"- {mark} {r['lang']} {r['id']} {r['wall']:.0f}s [{r['answer_lang']}] gold={r['gold']} "
                  f"{r['question']} -> {r['answer'][:200]!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="target/german")
    ap.add_argument("--rlm", default="rlm")
    ap.add_argument("--lang", choices=("de", "en", "both"), default="both")
    ap.add_argument("--retrieval", action="store_true")
    ap.add_argument("--ask", action="store_true")
    ap.add_argument("--wall", type=int, default=600)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated question ids")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--corpus", action="store_true", help="only fetch and convert the pages")
    ap.add_argument("--questions", default=os.path.join(HERE, "questions.json"))
    a = ap.parse_args()
    if a.report:
        return report(a.out)
    if not (a.retrieval or a.ask or a.corpus):
        ap.error("nothing to do: give --retrieval, --ask, --corpus or --report")
    qs = json.load(open(a.questions))
    if a.only:
        keep = set(a.only.split(","))
        qs = [q for q in qs if q["id"] in keep]
    if a.limit:
        qs = qs[: a.limit]
    build_corpus(a.out)
    check_gold(a.out, qs)
    if a.corpus:
        return
    if shutil.which(a.rlm) is None and not os.path.exists(a.rlm):
        die(f"no rlm binary at {a.rlm!r} (give --rlm PATH)")
    langs = LANGS if a.lang == "both" else (a.lang,)
    if a.retrieval:
        run_retrieval(a, qs, langs)
    if a.ask:
        run_ask(a, qs, langs)
    report(a.out)


if __name__ == "__main__":
    sys.exit(main())
