#!/usr/bin/env python3
"""Harness of the grounded-answers benchmark: asks every question of the set
with the real `rlm` binary and scores the answers (Python 3.11, standard
library only).

    run.py ask SET STORE OUT [--rlm BIN] [--verify on|quotes|semantic|off] [--wall 300]
               [--limit N] [--only ID,...]
    run.py report OUT [--set SET] [--store STORE] [--json FILE]

SET is fetch.py's output folder (questions.jsonl), STORE the store built by
`rlm index SET/corpus --store STORE`, OUT a results folder. `ask` runs
`rlm ask QUESTION --store STORE --json --trace OUT/traces/ID.jsonl
--verify MODE --max-wall-secs WALL` for every question not yet scored in
OUT/results.jsonl (so an interrupted pass resumes where it stopped), keeps the
answer JSON in OUT/answers/ID.json and appends one scored line per question.
The model is whatever the environment configures (RLM_PROVIDER,
RLM_BASE_URL, ...). `report` re-scores every saved answer against the store
and prints the benchmark's tables (and writes them as JSON with --json).

Metrics (per question, then over the pass):

- accuracy: an answer is correct when, after removing citation markers and
  verification flags and normalizing as the SQuAD evaluation does (lower
  case, punctuation and articles a/an/the removed, spaces collapsed), it
  CONTAINS one of the gold answers ("exact match" = equal to one of them, also
  reported). Partial answers count like any other.
- committed: the answer is not partial (no budget stop, no fallback).
- with >= 1 verified citation: share of committed answers with at least one
  citation whose status is `verified` (model-written or engine-attached).
- citation precision vs gold: share of verified citations whose chunk belongs
  to the question's gold passage (its paragraph's document), counted
  separately for engine-attached (`origin: engine`) and model-written
  (`origin: model`) citations. "Supports the answer" (lenient) also counts a
  citation whose quote contains a gold answer, wherever it is.
- precision on answer claims: the same share, over the engine-attached
  citations of the claims that state a gold answer (the claim's normalized
  text contains it). A model's answer often has further sentences about
  other passages it was shown; their citations are right for those
  sentences but not on the gold passage, so the plain precision mixes the
  engine's matching with the model's focus. This one measures the matching
  where it matters: does the sentence carrying the answer cite its source?
- quote validity: every quote of an engine-attached citation must occur
  byte for byte in the text of the chunk it names, read here from the
  store's SQLite file (documents.text sliced at chunks.byte_start..byte_end),
  not taken from the engine's status. Verified model quotes are checked the
  way the engine's verifier promises (case folded, whitespace collapsed).
- cost: model calls, input and output tokens, wall seconds (from the answer's
  usage); with the entailment judge (--verify on, the default, or semantic),
  its own calls and tokens (grounded.semantic), the verdicts it gave and
  took from the cache, and its seconds (the latency of its model calls in
  the trace, purpose "semantic_check").
"""

import argparse
import json
import os
import re
import sqlite3
import statistics
import string
import subprocess
import sys
import time

MARKER_RE = re.compile(r"\[\[\s*(?:chunk|doc)\s*:[^\]]*\]\]|\[DOCUMENT\s+\d+[^\]]*\]")
FLAG_RE = re.compile(r"\[(?:not supported by its source|contradicted by its source|unverified:[^\]]*)\]")


def normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def clean_answer(text):
    return " ".join(FLAG_RE.sub(" ", MARKER_RE.sub(" ", text)).split())


def load_questions(set_dir):
    with open(os.path.join(set_dir, "questions.jsonl"), encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def read_results(out):
    path = os.path.join(out, "results.jsonl")
    if not os.path.exists(path):
        return {}
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                rows[r["id"]] = r
    return rows


class Store:
    """Chunk texts read straight from the store's SQLite file."""

    def __init__(self, store_dir):
        self.db = sqlite3.connect(f"file:{os.path.join(store_dir, 'store.sqlite')}?mode=ro", uri=True)
        self.docs = {}

    def chunk(self, chunk_id):
        """(document path, chunk text) of `chunk_id`, or (None, None)."""
        row = self.db.execute(
            "SELECT doc_id, byte_start, byte_end FROM chunks WHERE id = ?", (chunk_id,)
        ).fetchone()
        if not row:
            return None, None
        doc_id, start, end = row
        if doc_id not in self.docs:
            path, text = self.db.execute(
                "SELECT path, text FROM documents WHERE id = ?", (doc_id,)).fetchone()
            self.docs[doc_id] = (path, text.encode("utf-8"))
        path, data = self.docs[doc_id]
        return path, data[start:end].decode("utf-8")

    def span(self, chunk_id, start, end):
        """Bytes start..end of the document holding `chunk_id`, as text."""
        self.chunk(chunk_id)
        row = self.db.execute("SELECT doc_id FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
        if not row or row[0] not in self.docs:
            return None
        try:
            return self.docs[row[0]][1][start:end].decode("utf-8")
        except UnicodeDecodeError:
            return None


def citations_of(answer):
    """Every citation of an answer (model-written and engine-attached), once."""
    seen, out = set(), []
    lists = [c.get("citations") or [] for c in answer.get("claims") or []]
    lists.append((answer.get("verification") or {}).get("citations") or [])
    for lst in lists:
        for c in lst:
            key = (c.get("origin"), c.get("marker"), c.get("answer_offset"), c.get("chunk_id"), c.get("quote"))
            if key in seen:
                continue
            seen.add(key)
            out.append(c)
    return out


def semantic_seconds(trace_path):
    """Seconds spent in the semantic check's model calls, from the trace."""
    if not os.path.exists(trace_path):
        return None
    # llm_response carries no purpose: the check's calls run one at a time
    # after the answer, so each is the next response of the agent that sent
    # a request with purpose semantic_check.
    pending, total = set(), 0.0
    with open(trace_path, encoding="utf-8") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            t = e.get("type")
            if t == "llm_request" and "semantic" in str(e.get("purpose")):
                pending.add(e.get("agent"))
            elif t == "llm_response" and e.get("agent") in pending:
                pending.discard(e.get("agent"))
                total += (e.get("latency_ms") or 0) / 1000.0
    return total


def score(q, answer, store, trace_path):
    text = answer.get("answer") or ""
    cleaned = normalize(clean_answer(text))
    golds = [normalize(g) for g in q["answers"]]
    correct = any(g and g in cleaned for g in golds)
    exact = any(g == cleaned for g in golds)
    cits = citations_of(answer)
    per = {"engine": {"verified": 0, "gold": 0, "supports": 0, "quotes": 0, "quotes_valid": 0, "invalid": [],
                      "answer_claims": 0, "answer_claims_gold": 0},
           "model": {"verified": 0, "gold": 0, "supports": 0, "quotes": 0, "quotes_valid": 0, "invalid": [],
                     "written": 0}}
    for c in cits:
        origin = "engine" if c.get("origin") == "engine" else "model"
        if origin == "model":
            per["model"]["written"] += 1
        if c.get("status") != "verified":
            continue
        p = per[origin]
        p["verified"] += 1
        chunk_id = c.get("chunk_id") or ""
        doc_path, chunk_text = store.chunk(chunk_id) if chunk_id else (None, None)
        if doc_path and (doc_path == q["gold_doc"] or doc_path.endswith("/" + q["gold_doc"])):
            p["gold"] += 1
        quote = c.get("quote") or ""
        if quote and any(g and g in normalize(quote) for g in golds):
            p["supports"] += 1
        if quote:
            p["quotes"] += 1
            if chunk_text is None:
                ok = False
            elif origin == "engine":
                # Verbatim in the chunk, and exactly the bytes the citation
                # names (byte_start..byte_end of the document).
                ok = quote in chunk_text and (
                    c.get("byte_start") is None
                    or store.span(chunk_id, c["byte_start"], c["byte_end"]) == quote)
            else:
                fold = lambda s: " ".join(s.lower().split())
                ok = all(fold(piece) in fold(chunk_text) for piece in quote.split("...") if piece.strip())
            if ok:
                p["quotes_valid"] += 1
            else:
                p["invalid"].append({"chunk_id": chunk_id, "quote": quote})
    for claim in answer.get("claims") or []:
        if not any(g and g in normalize(claim.get("text") or "") for g in golds):
            continue
        for c in claim.get("citations") or []:
            if c.get("origin") != "engine" or c.get("status") != "verified":
                continue
            per["engine"]["answer_claims"] += 1
            doc_path, _ = store.chunk(c.get("chunk_id") or "")
            if doc_path and (doc_path == q["gold_doc"] or doc_path.endswith("/" + q["gold_doc"])):
                per["engine"]["answer_claims_gold"] += 1
    usage = answer.get("usage") or {}
    grounded = answer.get("grounded") or {}
    sem = grounded.get("semantic")
    return {
        "id": q["id"],
        "question": q["question"],
        "gold": q["answers"],
        "answer": text[:400],
        "correct": correct,
        "exact": exact,
        "partial": bool(answer.get("partial")),
        "partial_reason": answer.get("partial_reason"),
        "claims": grounded.get("claims"),
        "supported_claims": grounded.get("supported"),
        "related_claims": grounded.get("related"),
        "unverified_claims": grounded.get("unverified"),
        "engine_attached_claims": grounded.get("engine_attached"),
        "citations": per,
        "calls": usage.get("calls"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "wall_s": (usage.get("wall_ms") or 0) / 1000.0,
        "semantic": sem,
        "semantic_s": semantic_seconds(trace_path) if sem else None,
    }


def ask(args):
    qs = load_questions(args.set)
    if args.only:
        keep = set(args.only.split(","))
        qs = [q for q in qs if q["id"] in keep]
    if args.limit:
        qs = qs[: args.limit]
    os.makedirs(os.path.join(args.out, "answers"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "traces"), exist_ok=True)
    done = read_results(args.out)
    store = Store(args.store)
    for n, q in enumerate(qs, 1):
        if q["id"] in done:
            continue
        ans_path = os.path.join(args.out, "answers", q["id"] + ".json")
        trace = os.path.join(args.out, "traces", q["id"] + ".jsonl")
        cmd = [args.rlm, "ask", q["question"], "--store", args.store, "--json", "--trace", trace,
               "--verify", args.verify, "--max-wall-secs", str(args.wall)]
        load_before = os.getloadavg()[0]
        t0 = time.time()
        with open(ans_path, "w") as out, open(ans_path[:-5] + ".err", "w") as err:
            rc = subprocess.run(cmd, stdout=out, stderr=err).returncode
        took = time.time() - t0
        try:
            answer = json.load(open(ans_path))
        except ValueError:
            print(f"[{n}/{len(qs)}] {q['id']}: no JSON answer (exit {rc}, see {ans_path[:-5]}.err)", flush=True)
            answer = {"answer": "", "partial": True, "partial_reason": f"no answer (exit {rc})"}
        row = score(q, answer, store, trace)
        row["exit"] = rc
        row["process_s"] = round(took, 1)
        # The machine's 1-minute load average before and after the question
        # (2 cores: above ~2.5 something else is competing for the CPU).
        row["load"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        with open(os.path.join(args.out, "results.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        e, m = row["citations"]["engine"], row["citations"]["model"]
        print(f"[{n}/{len(qs)}] {'correct' if row['correct'] else 'wrong  '} "
              f"{'partial' if row['partial'] else 'final  '} calls={row['calls']} {row['wall_s']:.0f}s "
              f"engine={e['gold']}/{e['verified']} model={m['gold']}/{m['verified']} "
              f"{q['question'][:60]!r} -> {clean_answer(row['answer'])[:80]!r}", flush=True)


def pct(a, b):
    return f"{a}/{b} ({100.0 * a / b:.0f}%)" if b else f"{a}/0 (n/a)"


def report(args):
    rows = list(read_results(args.out).values())
    if args.set and args.store:
        # Re-score from the saved answers (scoring changes need no re-run).
        qs = {q["id"]: q for q in load_questions(args.set)}
        store = Store(args.store)
        fresh = []
        for r in rows:
            path = os.path.join(args.out, "answers", r["id"] + ".json")
            try:
                answer = json.load(open(path))
            except (OSError, ValueError):
                fresh.append(r)
                continue
            n = score(qs[r["id"]], answer, store, os.path.join(args.out, "traces", r["id"] + ".jsonl"))
            n["exit"], n["process_s"], n["load"] = r.get("exit"), r.get("process_s"), r.get("load")
            fresh.append(n)
        rows = fresh
    n = len(rows)
    if not n:
        sys.exit("no results")
    committed = [r for r in rows if not r["partial"]]
    with_cite = [r for r in committed
                 if r["citations"]["engine"]["verified"] + r["citations"]["model"]["verified"] > 0]
    tot = lambda origin, key: sum(r["citations"][origin][key] for r in rows)
    walls = [r["wall_s"] for r in rows]
    summary = {
        "questions": n,
        "correct": sum(r["correct"] for r in rows),
        "exact": sum(r["exact"] for r in rows),
        "committed": len(committed),
        "committed_with_verified_citation": len(with_cite),
        "answers_citing_gold": sum(1 for r in rows
                                   if r["citations"]["engine"]["gold"] + r["citations"]["model"]["gold"] > 0),
        "engine": {k: sum(r["citations"]["engine"].get(k, 0) for r in rows)
                   for k in ("verified", "gold", "supports", "quotes", "quotes_valid",
                             "answer_claims", "answer_claims_gold")},
        "model": {k: tot("model", k) for k in ("written", "verified", "gold", "supports", "quotes", "quotes_valid")},
        "invalid_engine_quotes": [dict(i, id=r["id"]) for r in rows for i in r["citations"]["engine"]["invalid"]],
        "calls": sum(r["calls"] or 0 for r in rows),
        "input_tokens": sum(r["input_tokens"] or 0 for r in rows),
        "output_tokens": sum(r["output_tokens"] or 0 for r in rows),
        "wall_s_total": round(sum(walls), 1),
        "wall_s_median": round(statistics.median(walls), 1),
    }
    sem = [r for r in rows if r.get("semantic")]
    if sem:
        summary["semantic"] = {
            "questions": len(sem),
            "checked_claims": sum(r["semantic"].get("checked", 0) for r in sem),
            "verdicts": {v: sum(r["semantic"].get(v, 0) for r in sem)
                         for v in ("entailed", "not_entailed", "contradicted", "not_claims", "no_verdict", "cached")},
            "calls": sum(r["semantic"].get("calls", 0) for r in sem),
            "input_tokens": sum(r["semantic"].get("input_tokens", 0) for r in sem),
            "output_tokens": sum(r["semantic"].get("output_tokens", 0) for r in sem),
            "seconds": round(sum(r.get("semantic_s") or 0 for r in sem), 1),
            "stopped": sum(1 for r in sem if r["semantic"].get("stopped")),
        }
    e, m = summary["engine"], summary["model"]
    lines = [
        f"| metric | result |",
        f"|---|---|",
        f"| questions | {n} |",
        f"| answer accuracy (gold answer contained, SQuAD-normalized) | {pct(summary['correct'], n)} |",
        f"| exact match | {pct(summary['exact'], n)} |",
        f"| committed (not partial) | {pct(len(committed), n)} |",
        f"| committed answers with >= 1 verified citation | {pct(len(with_cite), len(committed))} |",
        f"| answers citing the gold passage | {pct(summary['answers_citing_gold'], n)} |",
        f"| citation precision vs gold, engine-attached | {pct(e['gold'], e['verified'])} |",
        f"| citation precision vs gold, engine-attached, on claims stating the answer | {pct(e['answer_claims_gold'], e['answer_claims'])} |",
        f"| citation precision vs gold, model-written (verified) | {pct(m['gold'], m['verified'])} |",
        f"| citations whose quote holds a gold answer (engine / model) | {pct(e['supports'], e['verified'])} / {pct(m['supports'], m['verified'])} |",
        f"| model-written citations verified | {pct(m['verified'], m['written'])} |",
        f"| quote validity, engine-attached (byte-exact in the chunk) | {pct(e['quotes_valid'], e['quotes'])} |",
        f"| quote validity, model-written verified (folded) | {pct(m['quotes_valid'], m['quotes'])} |",
        f"| model calls / input tokens / output tokens | {summary['calls']} / {summary['input_tokens']:,} / {summary['output_tokens']:,} |",
        f"| wall per question, median (total) | {summary['wall_s_median']} s ({summary['wall_s_total']} s) |",
    ]
    if sem:
        s = summary["semantic"]
        v = s["verdicts"]
        lines.append(f"| entailment judge: claims judged / calls / calls per answer / in+out tokens / seconds | "
                     f"{s['checked_claims']} / {s['calls']} / {s['calls'] / s['questions']:.2f} / "
                     f"{s['input_tokens']:,}+{s['output_tokens']:,} / {s['seconds']} s |")
        lines.append(f"| judge verdicts (entailed/not entailed/contradicted/not claims/no verdict; from the cache) | "
                     f"{v['entailed']}/{v['not_entailed']}/{v['contradicted']}/{v['not_claims']}/{v['no_verdict']}; {v['cached']} |")
    print("\n".join(lines))
    if summary["invalid_engine_quotes"]:
        print("\nengine quotes NOT verbatim in their chunk:")
        for i in summary["invalid_engine_quotes"]:
            print(f"  {i['id']} {i['chunk_id']}: {i['quote'][:120]!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "rows": rows}, f, indent=1, ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description="grounded-answers benchmark harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ask")
    a.add_argument("set")
    a.add_argument("store")
    a.add_argument("out")
    a.add_argument("--rlm", default="rlm")
    a.add_argument("--verify", default="on", choices=["on", "quotes", "semantic", "off"])
    a.add_argument("--wall", type=int, default=300)
    a.add_argument("--limit", type=int, default=0)
    a.add_argument("--only", default="")
    r = sub.add_parser("report")
    r.add_argument("out")
    r.add_argument("--set")
    r.add_argument("--store")
    r.add_argument("--json")
    args = ap.parse_args()
    (ask if args.cmd == "ask" else report)(args)


if __name__ == "__main__":
    main()
