#!/usr/bin/env python3
"""Structured and text turns side by side: asks the same questions under
both reply protocols (`rlm ask --turn-format text|structured`) and scores
them (Python 3.11, standard library only). See README.md.

    run.py [--sets needle,qa] [--protocols text,structured] [--limit N]
           [--wall SECS] [--rlm PATH] [--out DIR] [--scripted plain|cited]
    run.py --report [--out DIR]

Every run is a fresh `rlm ask QUESTION --store STORE --json --trace FILE
--turn-format PROTOCOL --max-wall-secs WALL` process, interleaved (q1 text,
q1 structured, q2 text, ...) so machine load hits both protocols alike. The
model is RLM_PROVIDER (default `local`, the embedded model) and whatever
else the environment sets; --scripted starts grounded_qa/scripted_model.py
on the questions and points the runs at it (a dry run of the plumbing).
Results: OUT/results.jsonl (one scored line per run; a run already there is
not asked again, so an interrupted pass resumes), OUT/answers/, OUT/traces/,
OUT/to_label.jsonl (supported claims to judge by hand; put verdicts in
OUT/labels.jsonl as {"key": ..., "entailed": true|false}).
"""

import argparse
import importlib.util
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(SCRIPTS)))
sys.path.insert(0, SCRIPTS)
import needle_set  # noqa: E402


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The grounded-answers harness: SQuAD normalization, marker stripping.
gqa = load_module("grounded_qa_run", os.path.join(SCRIPTS, "grounded_qa", "run.py"))

QA_SAMPLE_SEED = 25
QA_SAMPLE = 20
FALLBACK_VIAS = {"extraction", "synthesis"}
# The engine's own output, pasted back as an answer.
ENGINE_OUTPUT = {
    "document header": re.compile(r"\[DOCUMENT \d+:"),
    "bare chunk marker": re.compile(r"\[\[chunk:[0-9a-f]{16}-\d+\]\]"),
    "REPL output": re.compile(r"REPL output"),
    "search lead": re.compile(r"a lead, not proof"),
    "chunk record": re.compile(r"""['"]chunk_id['"]\s*:"""),
}


# ---------------------------------------------------------------- question sets

def needle_questions(root, rlm):
    """The needle set's 10 questions (5 facts x 30k and 300k stores)."""
    planted = needle_set.build(root)
    out = []
    for name, _ in needle_set.SIZES:
        store = os.path.join(root, "s" + name[1:])
        index(rlm, os.path.join(root, name), store)
        for k, (fact, question, answer, folder, file) in enumerate(
                p for p in planted if p[3] == name):
            out.append({"set": "needle", "qid": f"{name[1:]}-q{k + 1}", "question": question,
                        "answers": [answer], "store": store, "gold_path": f"{folder}/{file}",
                        "gold_text": fact})
    return out


def qa_questions(set_dir, store, rlm, n):
    """A fixed sample of `n` questions of the grounded-answers set (seeded),
    over the store of its whole corpus."""
    path = os.path.join(set_dir, "questions.jsonl")
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: python3 {SCRIPTS}/grounded_qa/fetch.py {set_dir}")
    index(rlm, os.path.join(set_dir, "corpus"), store)
    qs = gqa.load_questions(set_dir)
    sample = random.Random(QA_SAMPLE_SEED).sample(qs, min(n, len(qs)))
    out = []
    for q in sample:
        with open(os.path.join(set_dir, "corpus", q["gold_doc"]), encoding="utf-8") as f:
            passage = f.read()
        out.append({"set": "qa", "qid": q["id"], "question": q["question"], "answers": q["answers"],
                    "store": store, "gold_path": q["gold_doc"], "gold_text": passage})
    return out


def index(rlm, folder, store):
    """Indexes `folder` into `store` (incremental: cheap when nothing changed)."""
    subprocess.run([rlm, "index", folder, "--store", store], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---------------------------------------------------------------- scoring

def all_citations(answer):
    """Every citation of the answer (top level and per claim), once."""
    seen, out = set(), []
    lists = [answer.get("citations") or []] + [c.get("citations") or [] for c in answer.get("claims") or []]
    for lst in lists:
        for c in lst:
            key = (c.get("origin"), c.get("chunk_id"), c.get("answer_offset"), c.get("quote"))
            if key not in seen:
                seen.add(key)
                out.append(c)
    return out


def root_final_via(trace_path):
    """`via` of the root agent's last committed `final` event, and the
    trace's fallback notes by kind."""
    via, fallbacks = None, Counter()
    try:
        lines = open(trace_path, encoding="utf-8").readlines()
    except OSError:
        return None, {}
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("type") == "final" and e.get("depth") == 0 and not e.get("deferred"):
            via = e.get("via")
        elif e.get("type") == "fallback":
            fallbacks[e.get("kind")] += 1
    return via, dict(fallbacks)


def holds_gold(text, answers):
    """A gold answer appears in `text` (markers and flags removed), case
    folded, or after SQuAD normalization."""
    cleaned = gqa.clean_answer(text)
    norm = gqa.normalize(cleaned)
    return any(a.lower() in cleaned.lower() or (gqa.normalize(a) and gqa.normalize(a) in norm)
               for a in answers)


def cites_gold(citation, q):
    path = citation.get("path") or ""
    return path == q["gold_path"] or path.endswith("/" + q["gold_path"])


def score(q, proto, answer, trace_path):
    """One run's scored line."""
    text = answer.get("answer") or ""
    partial = bool(answer.get("partial"))
    via, fallbacks = root_final_via(trace_path)
    cits = all_citations(answer)
    model_verified = [c for c in cits if c.get("status") == "verified" and c.get("origin") == "model"]
    claims = []
    for i, c in enumerate(answer.get("claims") or []):
        if c.get("support") != "supported":
            continue
        claims.append({
            "key": f"{q['set']}/{q['qid']}/{proto}/{i}",
            "text": c.get("text") or "",
            "citations": [{k: x.get(k) for k in ("origin", "status", "chunk_id", "path", "quote")}
                          for x in c.get("citations") or []],
            "entailed": True if (holds_gold(c.get("text") or "", q["answers"])
                                 and any(cites_gold(x, q) for x in c.get("citations") or []))
            else None,
        })
    usage = answer.get("usage") or {}
    return {
        "set": q["set"], "qid": q["qid"], "protocol": proto, "question": q["question"],
        "gold": q["answers"], "answer": text,
        "correct": bool(text) and holds_gold(text, q["answers"]),
        "partial": partial, "partial_reason": answer.get("partial_reason"),
        "via": via, "fallbacks": fallbacks,
        "committed": bool(text) and not partial,
        "committed_no_fallback": bool(text) and not partial and via not in FALLBACK_VIAS,
        "model_verified_citations": len(model_verified),
        "verified_citations": sum(1 for c in cits if c.get("status") == "verified"),
        "model_cited_gold": any(cites_gold(c, q) for c in model_verified),
        "engine_output": [name for name, rx in ENGINE_OUTPUT.items() if rx.search(text)],
        "calls": usage.get("calls"),
        "run_s": (usage.get("wall_ms") or 0) / 1000.0,
        "support": dict(Counter(c.get("support") for c in answer.get("claims") or [])),
        "supported_claims": claims,
    }


# ---------------------------------------------------------------- running

def scripted_server(questions_path, policy):
    """Starts the scripted model; returns (process, base URL)."""
    proc = subprocess.Popen(
        [sys.executable, os.path.join(SCRIPTS, "grounded_qa", "scripted_model.py"), questions_path,
         "--policy", policy], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        proc.terminate()
        sys.exit(f"scripted model did not start: {line!r}")
    return proc, line[len("listening on "):]


def run_one(args, q, proto, env):
    """Asks `q` under `proto` in a fresh process; returns the scored line."""
    name = f"{q['set']}/{proto}/{q['qid']}"
    ans_path = os.path.join(args.out, "answers", name + ".json")
    trace = os.path.join(args.out, "traces", name + ".jsonl")
    os.makedirs(os.path.dirname(ans_path), exist_ok=True)
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    cmd = [args.rlm, "ask", q["question"], "--store", q["store"], "--json", "--trace", trace,
           "--turn-format", proto, "--max-wall-secs", str(args.wall)]
    if args.verify:
        cmd += ["--verify", args.verify]
    load_before = os.getloadavg()[0]
    t0 = time.time()
    with open(ans_path, "w") as out, open(ans_path[:-5] + ".err", "w") as err:
        try:
            # The engine's wall cap ends the loop; the grace covers loading
            # the model and checking the answer.
            rc = subprocess.run(cmd, stdout=out, stderr=err, env=env, timeout=args.wall + 300).returncode
        except subprocess.TimeoutExpired:
            rc = "killed"
    took = time.time() - t0
    try:
        answer = json.load(open(ans_path))
    except ValueError:
        answer = {"answer": "", "partial": True, "partial_reason": f"no answer (exit {rc})"}
    row = score(q, proto, answer, trace)
    row.update(exit=rc, wall_s=round(took, 1), load=[round(load_before, 1), round(os.getloadavg()[0], 1)],
               started=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t0)))
    return row


def read_results(out):
    rows = {}
    path = os.path.join(out, "results.jsonl")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            if line.strip():
                r = json.loads(line)
                rows[(r["set"], r["qid"], r["protocol"])] = r
    return rows


def run(args, questions):
    env = dict(os.environ)
    env.setdefault("RLM_PROVIDER", "local")
    server = None
    if args.scripted:
        server, url = scripted_server(os.path.join(args.out, "questions.jsonl"), args.scripted)
        env.update(RLM_PROVIDER="openai", RLM_BASE_URL=url, RLM_API_KEY="dummy",
                   RLM_PRIMARY_MODEL="scripted", RLM_SUB_MODEL="scripted")
    done = read_results(args.out)
    todo = [(q, p) for q in questions for p in args.protocols if (q["set"], q["qid"], p) not in done]
    print(f"{len(todo)} runs to do ({len(done)} already in {args.out}/results.jsonl), "
          f"provider {env['RLM_PROVIDER']}, rlm {args.rlm}", flush=True)
    try:
        for n, (q, proto) in enumerate(todo, 1):
            row = run_one(args, q, proto, env)
            with open(os.path.join(args.out, "results.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
            print(f"[{n}/{len(todo)}] {q['set']} {q['qid']:>24} {proto:10} "
                  f"{'correct' if row['correct'] else 'wrong  '} {'partial' if row['partial'] else 'final  '} "
                  f"via={row['via']} calls={row['calls']} {row['wall_s']:.0f}s "
                  f"model-cited={row['model_verified_citations']} "
                  f"-> {' '.join(row['answer'].split())[:90]!r}", flush=True)
    finally:
        if server:
            server.terminate()
            server.wait()


# ---------------------------------------------------------------- report

def pct(a, b):
    return f"{a}/{b} ({100.0 * a / b:.0f}%)" if b else "0/0"


def median(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):g}" if xs else "n/a"


def report(out, questions):
    """Re-scores the saved answers, prints a table per set and protocol,
    writes the claims left to judge by hand to OUT/to_label.jsonl."""
    by_key = {(q["set"], q["qid"]): q for q in questions}
    rows = []
    for key, r in sorted(read_results(out).items()):
        q = by_key.get(key[:2])
        if q is None:
            continue
        name = f"{r['set']}/{r['protocol']}/{r['qid']}"
        try:
            answer = json.load(open(os.path.join(out, "answers", name + ".json")))
            fresh = score(q, r["protocol"], answer, os.path.join(out, "traces", name + ".jsonl"))
            r = dict(r, **fresh)
        except (OSError, ValueError, TypeError):
            pass
        rows.append(r)
    labels = {}
    if os.path.exists(os.path.join(out, "labels.jsonl")):
        for line in open(os.path.join(out, "labels.jsonl"), encoding="utf-8"):
            if line.strip():
                lab = json.loads(line)
                labels[lab["key"]] = bool(lab["entailed"])
    to_label = []
    for set_name in sorted({r["set"] for r in rows}, key=lambda s: ["needle", "qa"].index(s)):
        print(f"\n### {set_name}\n")
        print("| protocol | runs | correct | committed (not partial) | committed without fallback "
              "| committed with a verified citation the model wrote | model calls, median "
              "| wall, median | committed answers holding engine output | support precision |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        vias = {}
        for proto in ("text", "structured"):
            rs = [r for r in rows if r["set"] == set_name and r["protocol"] == proto]
            if not rs:
                continue
            committed = [r for r in rs if r["committed"]]
            supported = [c for r in rs for c in r["supported_claims"]]
            entailed, pending = 0, 0
            for c in supported:
                verdict = c["entailed"] if c["entailed"] is not None else labels.get(c["key"])
                if verdict is None:
                    pending += 1
                    q = by_key[(set_name, c["key"].split("/")[1])]
                    to_label.append(dict(c, question=q["question"], gold=q["answers"],
                                         gold_passage=q["gold_text"]))
                entailed += bool(verdict)
            # Over the claims judged (mechanically or by hand); claims still
            # to label are named apart, not counted either way.
            precision = pct(entailed, len(supported) - pending) + (f" + {pending} unlabelled" if pending else "")
            print(f"| {proto} | {len(rs)} | {pct(sum(r['correct'] for r in rs), len(rs))} "
                  f"| {pct(len(committed), len(rs))} "
                  f"| {pct(sum(r['committed_no_fallback'] for r in rs), len(rs))} "
                  f"| {pct(sum(r['model_verified_citations'] > 0 for r in committed), len(committed))} "
                  f"| {median([r['calls'] for r in rs])} | {median([r['wall_s'] for r in rs])} s "
                  f"| {sum(bool(r['engine_output']) for r in committed)} | {precision} |")
            vias[proto] = Counter(str(r["via"]) for r in rs)
        for proto, c in vias.items():
            print(f"\n{proto}: root final via " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
    with open(os.path.join(out, "to_label.jsonl"), "w", encoding="utf-8") as f:
        for c in to_label:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    if to_label:
        print(f"\n{len(to_label)} supported claims to judge by hand (in {out}/to_label.jsonl; "
              f"verdicts go to {out}/labels.jsonl):")
        for c in to_label:
            quotes = "; ".join(f"{x['path']} {(x['quote'] or '')[:100]!r}" for x in c["citations"])
            print(f"- {c['key']} gold={c['gold'][0]!r}\n    claim: {' '.join(c['text'].split())[:200]!r}"
                  f"\n    cites: {quotes}")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description="structured and text turns side by side")
    ap.add_argument("--sets", default="needle,qa")
    ap.add_argument("--protocols", default="text,structured")
    ap.add_argument("--limit", type=int, default=0, help="questions per set (0: all)")
    ap.add_argument("--wall", type=int, default=600, help="wall cap per question, seconds")
    ap.add_argument("--rlm", default=os.path.join(REPO, "target", "debug", "rlm"))
    ap.add_argument("--out", default=os.path.join(REPO, "target", "protocols"))
    ap.add_argument("--qa-set", default=os.path.join(REPO, "target", "gqa", "set"),
                    help="grounded_qa/fetch.py's output folder")
    ap.add_argument("--qa-store", default=None, help="default: QA_SET/../store")
    ap.add_argument("--qa-sample", type=int, default=QA_SAMPLE)
    ap.add_argument("--verify", choices=["on", "semantic", "off"], help="default: the engine's")
    ap.add_argument("--scripted", choices=["plain", "cited"],
                    help="run against grounded_qa/scripted_model.py (a dry run)")
    ap.add_argument("--report", action="store_true", help="only re-score and print the tables of OUT")
    args = ap.parse_args()
    args.protocols = [p for p in args.protocols.split(",") if p]
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    qpath = os.path.join(args.out, "questions.jsonl")
    # Every question OUT has seen (the report covers the runs of earlier
    # invocations too).
    known = {}
    if os.path.exists(qpath):
        for line in open(qpath, encoding="utf-8"):
            if line.strip():
                q = json.loads(line)
                known[(q["set"], q["qid"])] = q
    if args.report:
        report(args.out, list(known.values()))
        return
    questions = []
    for s in [s for s in args.sets.split(",") if s]:
        if s == "needle":
            qs = needle_questions(os.path.join(args.out, "needle"), args.rlm)
        elif s == "qa":
            qs = qa_questions(args.qa_set, args.qa_store or os.path.join(args.qa_set, "..", "store"),
                              args.rlm, args.qa_sample)
        else:
            sys.exit(f"unknown set {s!r}: needle or qa")
        questions += qs[: args.limit] if args.limit else qs
    known.update({(q["set"], q["qid"]): q for q in questions})
    with open(qpath, "w", encoding="utf-8") as f:
        for q in known.values():
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    run(args, questions)
    report(args.out, list(known.values()))


if __name__ == "__main__":
    main()
