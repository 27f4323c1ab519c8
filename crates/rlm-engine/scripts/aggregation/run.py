#!/usr/bin/env python3
"""Aggregation benchmark: questions whose answer needs every line of a
generated corpus (counting, summing, argmax, comparison), with exact answers
(Python 3.11, standard library only).

    run.py [--lines N] [--files N] [--seed N] [--rlm PATH] [--out DIR]
           [--wall SECS] [--limit N] [--flow repl|auto] [--scripted]
    run.py --report [--out DIR]

Writes a ledger of N transaction lines over N files (OUT/corpus/), indexes
it into OUT/store, asks each question with a fresh `rlm ask QUESTION --store
OUT/store --json --max-wall-secs WALL` and scores it: correct when the gold
number (or name) is the first number (or the name) the answer states.
Results: OUT/results.jsonl (a question already there is not asked again),
OUT/traces/qNN.jsonl (`rlm trace show` them).
The model is RLM_PROVIDER (default: the embedded model); --scripted starts
scripted_model.py (a frontier-style model that writes the scanning code for
each question shape, never knowing an answer) and points the runs at it.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict

USERS = ["harper", "devon", "mila", "ravi", "sofia", "tomas", "yuki", "lena"]
CITIES = ["Oslo", "Lisbon", "Tallinn", "Porto", "Riga", "Bergen"]
KINDS = ["purchase", "refund", "cancel", "transfer"]
MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def ledger(lines, files, seed):
    rnd = random.Random(seed)
    rows = []
    for i in range(lines):
        rows.append({
            "id": f"T{100000 + i}",
            "month": i * files // lines,
            "day": rnd.randint(1, 28),
            "user": rnd.choice(USERS),
            "kind": rnd.choices(KINDS, weights=[5, 2, 1.5, 1.5])[0],
            "city": rnd.choice(CITIES),
            "amount": rnd.randint(5, 400),
        })
    return rows


def write_corpus(rows, files, out):
    os.makedirs(out, exist_ok=True)
    by_file = defaultdict(list)
    for r in rows:
        by_file[r["month"]].append(r)
    for m in range(files):
        with open(os.path.join(out, f"ledger-{MONTHS[m % 12]}-{m // 12 + 2024}.txt"), "w") as f:
            f.write(f"Transaction ledger, month {m + 1}\n\n")
            for r in by_file[m]:
                f.write(f"{r['id']} | 2024-{m % 12 + 1:02d}-{r['day']:02d} | user {r['user']} | "
                        f"{r['kind']} | {r['amount']} EUR | {r['city']}\n")


def questions(rows):
    kinds = Counter(r["kind"] for r in rows)
    qs = [
        ("How many refund transactions are in the ledger in total?", kinds["refund"]),
        ("How many transfer transactions does the ledger hold?", kinds["transfer"]),
    ]
    for city in ("Oslo", "Riga"):
        total = sum(r["amount"] for r in rows if r["kind"] == "purchase" and r["city"] == city)
        qs.append((f"What is the total amount in EUR of all purchases made in {city}?", total))
    cancels = Counter(r["user"] for r in rows if r["kind"] == "cancel")
    top, n = cancels.most_common(1)[0]
    if list(cancels.values()).count(n) == 1:
        qs.append(("Which user made the most cancel transactions?", top))
    for user in ("mila", "tomas"):
        qs.append((f"How many transactions did user {user} make?",
                   sum(1 for r in rows if r["user"] == user)))
    big = max(rows, key=lambda r: r["amount"])
    if sum(1 for r in rows if r["amount"] == big["amount"]) == 1:
        qs.append(("What is the ID of the transaction with the largest amount?", big["id"]))
    a = sum(1 for r in rows if r["city"] == "Lisbon")
    b = sum(1 for r in rows if r["city"] == "Porto")
    if a != b:
        qs.append(("Were there more transactions in Lisbon or in Porto?", "Lisbon" if a > b else "Porto"))
    qs.append(("How many refunds were made in Bergen?",
               sum(1 for r in rows if r["kind"] == "refund" and r["city"] == "Bergen")))
    return qs


def numbers(text):
    return [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", text)]


def correct(answer, gold):
    if isinstance(gold, int):
        got = [n for n in numbers(answer) if n != 2024]
        return bool(got) and got[0] == gold
    return gold.lower() in answer.lower() and not any(
        other.lower() in answer.lower() for other in USERS + CITIES if other != gold and gold in USERS + CITIES
    )


def ask(rlm, store, question, wall, flow, trace, env):
    t0 = time.time()
    p = subprocess.run(
        [rlm, "ask", question, "--store", store, "--json", "--max-wall-secs", str(wall), "--flow", flow,
         "--trace", trace],
        capture_output=True, text=True, timeout=wall + 300, env=env,
    )
    elapsed = time.time() - t0
    try:
        v = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"answer": "", "error": p.stderr[-500:], "wall": elapsed}
    counted = v.get("counted", [])
    return {
        "answer": v.get("answer", ""),
        "partial": v.get("partial"),
        "calls": v.get("usage", {}).get("calls"),
        "counted": [{k: c.get(k) for k in ("pattern", "lines", "recounted", "count_in_answer")} for c in counted],
        "wall": elapsed,
    }


def report(out):
    rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl"))]
    ok = sum(r["correct"] for r in rows)
    walls = [r["wall"] for r in rows]
    print(f"{ok}/{len(rows)} exact; median wall {statistics.median(walls):.0f} s "
          f"(min {min(walls):.0f}, max {max(walls):.0f})")
    for r in rows:
        mark = "ok " if r["correct"] else "BAD"
        print(f"{mark} {r['wall']:5.0f}s gold={r['gold']!s:>8}  {r['question']}\n      -> {r['answer'][:160]!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=400)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--rlm", default="rlm")
    ap.add_argument("--out", default="target/aggregation")
    ap.add_argument("--wall", type=int, default=600)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--flow", default="repl")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--scripted", action="store_true")
    a = ap.parse_args()
    if a.report:
        return report(a.out)
    env = dict(os.environ)
    model = None
    if a.scripted:
        model = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "scripted_model.py")],
                                 stdout=subprocess.PIPE, text=True)
        url = model.stdout.readline().split()[-1]
        env.update({"RLM_PROVIDER": "openai", "RLM_BASE_URL": url, "RLM_API_KEY": "dummy",
                    "RLM_PRIMARY_MODEL": "scripted", "RLM_SUB_MODEL": "scripted", "RLM_TURN_FORMAT": "text"})
    rows = ledger(a.lines, a.files, a.seed)
    corpus, store = os.path.join(a.out, "corpus"), os.path.join(a.out, "store")
    if not os.path.isdir(store):
        write_corpus(rows, a.files, corpus)
        subprocess.run([a.rlm, "index", corpus, "--store", store], check=True)
    done = set()
    results = os.path.join(a.out, "results.jsonl")
    if os.path.exists(results):
        done = {json.loads(l)["question"] for l in open(results)}
    qs = questions(rows)
    if a.limit:
        qs = qs[: a.limit]
    os.makedirs(os.path.join(a.out, "traces"), exist_ok=True)
    for i, (q, gold) in enumerate(qs):
        if q in done:
            continue
        r = ask(a.rlm, store, q, a.wall, a.flow, os.path.join(a.out, "traces", f"q{i:02d}.jsonl"), env)
        r.update({"question": q, "gold": gold, "correct": correct(r["answer"], gold)})
        with open(results, "a") as f:
            f.write(json.dumps(r) + "\n")
        print(("ok  " if r["correct"] else "BAD ") + f"{r['wall']:.0f}s {q} -> {r['answer'][:120]!r}", flush=True)
    if model is not None:
        model.terminate()
    report(a.out)


if __name__ == "__main__":
    sys.exit(main())
