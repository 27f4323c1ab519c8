#!/usr/bin/env python3
"""Aggregation benchmark: questions whose answer needs every record of a
generated corpus (counting, summing, argmax, comparison, listing), with exact
answers (Python 3.11, standard library only).

    run.py [--kind ledger|logs|prose|all] [--lines N] [--files N] [--seed N]
           [--rlm PATH] [--out DIR] [--wall SECS] [--limit N] [--flow repl|auto]
           [--scripted]
    run.py --report [--out DIR]

Three corpus kinds, each about N lines over N files (OUT/KIND/corpus/):
  ledger  one transaction per line (`T100001 | 2024-01-03 | user harper |
          refund | 23 EUR | Oslo`);
  logs    service log lines over several hosts' files (`2024-03-02T10:15:03Z
          ERROR payments timeout after 1532 ms (request r-88213)`), with
          levels, services, latencies and request ids;
  prose   dispatch notes: orders written as sentences in wrapped paragraphs
          (`Order 10412 was shipped to Berlin on 3 May and weighed 12.5 kg.`),
          several to a line or one over two lines, among sentences that are
          no orders: a record is not a line.
Each kind is indexed into OUT/KIND/store; each question is asked with a
fresh `rlm ask QUESTION --store OUT/KIND/store --json --max-wall-secs WALL`
and scored: a number (or a name) is correct when it is the first number (or
the only name of its kind) the answer states, a decimal when it is within
0.005, a list when the answer names every item and no other.
Results: OUT/KIND/results.jsonl (a question already there is not asked
again), OUT/KIND/traces/qNN.jsonl (`rlm trace show` them).
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
import textwrap
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



def make_ledger(lines, files, seed, out):
    """The ledger, its questions and the kinds of names an answer may state."""
    rows = ledger(lines, files, seed)
    if out:
        write_corpus(rows, files, out)
    return questions(rows), [USERS, CITIES]


# ---------------------------------------------------------------- logs

SERVICES = ["payments", "auth", "search", "billing", "gateway", "inventory"]
ERROR_WEIGHTS = [7, 5, 3, 4, 6, 3]
WARN_WEIGHTS = [4, 5, 3, 5, 6, 3]
DEPENDENCIES = ["postgres", "redis", "kafka", "s3"]
DAYS = 14


def log_lines(lines, files, rnd):
    """Each host's lines in time order, as (timestamp, level, service, message, fields)."""
    hosts = []
    failing = []
    for h in range(files):
        n = lines // files + (1 if h < lines % files else 0)
        stamps = sorted(rnd.randrange(DAYS * 86400) for _ in range(n))
        rows = []
        for s in stamps:
            ts = f"2024-03-{s // 86400 + 1:02d}T{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}Z"
            level = rnd.choices(["INFO", "DEBUG", "WARN", "ERROR"], weights=[60, 15, 15, 10])[0]
            rid = f"r-{rnd.randrange(10000, 100000)}"
            row = {"ts": ts, "day": ts[:10], "level": level, "ms": None, "rid": None, "what": None}
            if level == "ERROR":
                svc = rnd.choices(SERVICES, weights=ERROR_WEIGHTS)[0]
                if failing and rnd.random() < 0.3:
                    svc, rid = rnd.choice(failing[-20:])
                else:
                    failing.append((svc, rid))
                what = rnd.choices(["timeout", "refused", "token"], weights=[5, 3, 2])[0]
                if what == "timeout":
                    ms = rnd.randint(1000, 30000)
                    msg = f"timeout after {ms} ms (request {rid})"
                    row["ms"] = ms
                elif what == "refused":
                    msg = f"connection refused by {rnd.choice(DEPENDENCIES)} (request {rid})"
                else:
                    msg = f"invalid token (request {rid})"
                row.update(rid=rid, what=what)
            elif level == "WARN":
                svc = rnd.choices(SERVICES, weights=WARN_WEIGHTS)[0]
                if rnd.random() < 0.5:
                    ms = rnd.randint(800, 5000)
                    msg = f"slow response {ms} ms (request {rid})"
                else:
                    msg = f"retrying upstream call (attempt {rnd.randint(1, 4)}, request {rid})"
            elif level == "INFO":
                svc = rnd.choice(SERVICES)
                u = rnd.random()
                if u < 0.8:
                    ms = int(rnd.lognormvariate(5.5, 0.8))
                    msg = f"request {rid} completed in {ms} ms"
                    row.update(ms=ms, what="completed")
                elif u < 0.9:
                    svc = "gateway"
                    msg = f"error budget at {rnd.randint(50, 99)}% remaining"
                else:
                    msg = "health check ok"
            else:
                svc = rnd.choice(SERVICES)
                msg = f"cache hit ratio 0.{rnd.randint(10, 99)}"
            row["svc"] = svc
            row["text"] = f"{ts} {level} {svc} {msg}"
            rows.append(row)
        hosts.append(rows)
    return hosts


def unique_top(counter):
    """The most common key of counter, or None on a tie."""
    top = counter.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def log_questions(rows):
    err = [r for r in rows if r["level"] == "ERROR"]
    timeouts = defaultdict(list)
    for r in err:
        if r["what"] == "timeout":
            timeouts[r["svc"]].append(r["ms"])
    warns = Counter(r["svc"] for r in rows if r["level"] == "WARN")
    by_service = unique_top(Counter(r["svc"] for r in err))
    by_day = unique_top(Counter(r["day"] for r in err))
    if None in (by_service, by_day) or warns["billing"] == warns["auth"]:
        return None
    return [
        ("How many ERROR lines are in the logs in total?", len(err)),
        ("Which service logged the most errors?", by_service),
        ("What is the total latency in ms of all payments timeouts?", sum(timeouts["payments"])),
        ("What was the longest search timeout, in ms?", max(timeouts["search"])),
        ("How many distinct request ids failed?", len({r["rid"] for r in err})),
        ("Were there more warnings from billing or from auth?",
         "billing" if warns["billing"] > warns["auth"] else "auth"),
        ("On which day were the most errors logged?", by_day),
        ("How many requests completed in more than 1000 ms?",
         sum(1 for r in rows if r["what"] == "completed" and r["ms"] > 1000)),
    ]


def make_logs(lines, files, seed, out):
    """Service logs, one file per host; another draw when an answer would tie."""
    for attempt in range(100):
        hosts = log_lines(lines, files, random.Random(f"logs-{seed}-{attempt}"))
        qs = log_questions([r for h in hosts for r in h])
        if qs is not None:
            break
    for h, rows in enumerate(hosts if out else []):
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"app-{h + 1:02d}.log"), "w") as f:
            for r in rows:
                f.write(r["text"] + "\n")
    return qs, [SERVICES, [f"2024-03-{d:02d}" for d in range(1, DAYS + 1)]]


# ---------------------------------------------------------------- prose

PLACES = ["Berlin", "Lyon", "Vienna", "Milan", "Ghent", "Krakow", "Seville", "Zurich"]
MONTH_NAMES = ["March", "April", "May", "June", "July", "August"]
LOST = 6
FILLERS = [
    "The {city} depot reported a quiet afternoon.",
    "Two pallets were returned to the supplier in {city} without a label.",
    "The scales in {city} were recalibrated to within 0.05 kg.",
    "Customs checks near {city} delayed several trucks by a day.",
    "A new van was delivered to the {city} depot.",
    "Staff in {city} counted 3 damaged boxes and 12 loose straps.",
]


def kg(c):
    """Hundredths of a kilogram as people write them: 1250 -> 12.5, 700 -> 7."""
    return f"{c // 100}.{c % 100:02d}".rstrip("0").rstrip(".")


def sentence(o, rnd):
    verb = {"shipped": "was shipped to", "delivered": "was delivered to", "returned": "was returned from",
            "lost": "was lost in transit to"}[o["status"]]
    date = f"{o['day']} {MONTH_NAMES[o['month']]}"
    shape = rnd.randrange(3)
    if shape == 0:
        return f"Order {o['id']} {verb} {o['city']} on {date} and weighed {kg(o['w'])} kg."
    if shape == 1:
        return f"Order {o['id']}, weighing {kg(o['w'])} kg, {verb} {o['city']} on {date}."
    return f"On {date}, order {o['id']} {verb} {o['city']}; it weighed {kg(o['w'])} kg."


def prose_orders(lines, rnd):
    """About lines * 0.8 orders (a wrapped line holds about 1.2), LOST of them lost in transit."""
    orders, oid = [], 10000
    for i in range(max(LOST * 2, int(lines * 0.8))):
        oid += rnd.randint(1, 3)
        orders.append({
            "id": oid,
            "status": rnd.choices(["shipped", "delivered", "returned"], weights=[4, 5, 1])[0],
            "city": rnd.choices(PLACES, weights=[3, 2, 3, 2, 1, 2, 1, 2])[0],
            "month": rnd.randrange(len(MONTH_NAMES)),
            "day": rnd.randint(1, 28),
            "w": max(5, int(rnd.lognormvariate(6.5, 0.8))),
        })
    for o in rnd.sample(orders, LOST):
        o["status"] = "lost"
    return orders


def prose_questions(orders):
    delivered = Counter(o["city"] for o in orders if o["status"] == "delivered")
    top_city = unique_top(delivered)
    heaviest = sorted(orders, key=lambda o: o["w"])[-2:]
    shipped = Counter(o["month"] for o in orders if o["status"] == "shipped")
    april, may = shipped[MONTH_NAMES.index("April")], shipped[MONTH_NAMES.index("May")]
    if top_city is None or heaviest[0]["w"] == heaviest[1]["w"] or april == may:
        return None
    vienna = sum(o["w"] for o in orders if o["status"] == "delivered" and o["city"] == "Vienna")
    return [
        ("How many orders were returned?", sum(1 for o in orders if o["status"] == "returned")),
        ("How many orders were shipped to Milan?",
         sum(1 for o in orders if o["status"] == "shipped" and o["city"] == "Milan")),
        ("What is the total weight in kg of all orders delivered to Vienna?", vienna / 100),
        ("To which city were the most orders delivered?", top_city),
        ("Which order was the heaviest? Give its order number.", str(heaviest[1]["id"])),
        ("How many orders weighed more than 20 kg?", sum(1 for o in orders if o["w"] > 2000)),
        ("Were more orders shipped in April or in May?", "April" if april > may else "May"),
        ("Which orders were lost in transit? List every order number.",
         [str(o["id"]) for o in orders if o["status"] == "lost"]),
    ]


def make_prose(lines, files, seed, out):
    """Dispatch notes: paragraphs of 3-7 sentences (some no order), wrapped at 88 columns."""
    for attempt in range(100):
        rnd = random.Random(f"prose-{seed}-{attempt}")
        orders = prose_orders(lines, rnd)
        qs = prose_questions(orders)
        if qs is not None:
            break
    paragraphs, para = [], []
    for o in orders:
        if rnd.random() < 0.15:
            para.append(rnd.choice(FILLERS).format(city=rnd.choice(PLACES)))
        para.append(sentence(o, rnd))
        if len(para) >= rnd.randint(3, 7):
            paragraphs.append(textwrap.fill(" ".join(para), width=88))
            para = []
    if para:
        paragraphs.append(textwrap.fill(" ".join(para), width=88))
    per = -(-len(paragraphs) // files)
    for f in range(files if out else 0):
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"dispatch-notes-{f + 1:02d}.txt"), "w") as fh:
            fh.write(f"Dispatch notes, book {f + 1}\n\n")
            fh.write("\n\n".join(paragraphs[f * per:(f + 1) * per]) + "\n")
    return qs, [PLACES, MONTH_NAMES, [str(o["id"]) for o in orders]]


MAKERS = {"ledger": make_ledger, "logs": make_logs, "prose": make_prose}


# ---------------------------------------------------------------- scoring

def numbers(text):
    """The numbers of text in order (commas as thousands separators), dates and times left out."""
    text = re.sub(r"\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}Z?)?", " ", text)
    return [float(n.replace(",", "")) if "." in n else int(n.replace(",", ""))
            for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def correct(answer, gold, names):
    """gold: an int (the first number), a float (the first number, within 0.005),
    a name or a list of names: every one stated (as a word) and no other name of
    the same kind (names: lists of names of one kind each), except after all of
    them, as a comparison says it ("more in Porto than in Lisbon"). The answer's
    citation markers are its sources, not what it states: left out."""
    answer = re.sub(r"\[\[.*?\]\]", " ", answer, flags=re.S)
    if isinstance(gold, (int, float)):
        got = [n for n in numbers(answer) if n != 2024]
        if isinstance(gold, int):
            return bool(got) and got[0] == gold
        return bool(got) and abs(got[0] - gold) < 0.005
    said = set(re.findall(r"[\w-]+", answer.lower()))
    want = {g.lower() for g in (gold if isinstance(gold, list) else [gold])}
    others = set()
    for kind in names:
        kind = {n.lower() for n in kind}
        if want & kind:
            others |= kind - want
    if not want <= said:
        return False
    words = re.findall(r"[\w-]+", answer.lower())
    last_wanted = max(i for i, w in enumerate(words) if w in want)
    return not any(w in others for w in words[:last_wanted])


# ---------------------------------------------------------------- running

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


def summary(rows):
    ok = sum(r["correct"] for r in rows)
    walls = [r["wall"] for r in rows]
    return (f"{ok}/{len(rows)} exact; median wall {statistics.median(walls):.1f} s "
            f"(min {min(walls):.1f}, max {max(walls):.1f})")


def report(out, kinds, a):
    for kind in kinds:
        path = os.path.join(out, kind, "results.jsonl")
        if not os.path.exists(path):
            continue
        rows = [json.loads(l) for l in open(path)]
        # Scored again, so that a fix of the scoring applies to old runs.
        _, names = MAKERS[kind](a.lines, a.files, a.seed, None)
        for r in rows:
            r["correct"] = correct(r["answer"], r["gold"], names)
        corpus = os.path.join(out, kind, "corpus")
        files = sorted(os.listdir(corpus)) if os.path.isdir(corpus) else []
        size = sum(os.path.getsize(os.path.join(corpus, f)) for f in files)
        lines = sum(sum(1 for _ in open(os.path.join(corpus, f))) for f in files)
        print(f"== {kind}: {lines} lines in {len(files)} files, {size / 1e6:.2f} MB: {summary(rows)}")
        for r in rows:
            mark = "ok " if r["correct"] else "BAD"
            gold = ", ".join(r["gold"]) if isinstance(r["gold"], list) else str(r["gold"])
            print(f"{mark} {r['wall']:5.1f}s gold={gold[:60]:>8}  {r['question']}\n"
                  f"      -> {r['answer'][:160]!r}")


def run_kind(kind, a, env):
    out = os.path.join(a.out, kind)
    corpus, store = os.path.join(out, "corpus"), os.path.join(out, "store")
    fresh = not os.path.isdir(store)
    qs, names = MAKERS[kind](a.lines, a.files, a.seed, corpus if fresh else None)
    if fresh:
        subprocess.run([a.rlm, "index", corpus, "--store", store], check=True)
    done = set()
    results = os.path.join(out, "results.jsonl")
    if os.path.exists(results):
        done = {json.loads(l)["question"] for l in open(results)}
    if a.limit:
        qs = qs[: a.limit]
    os.makedirs(os.path.join(out, "traces"), exist_ok=True)
    for i, (q, gold) in enumerate(qs):
        if q in done:
            continue
        r = ask(a.rlm, store, q, a.wall, a.flow, os.path.join(out, "traces", f"q{i:02d}.jsonl"), env)
        r.update({"question": q, "gold": gold, "correct": correct(r["answer"], gold, names)})
        with open(results, "a") as f:
            f.write(json.dumps(r) + "\n")
        print(("ok  " if r["correct"] else "BAD ") + f"{r['wall']:.1f}s [{kind}] {q} -> {r['answer'][:120]!r}",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", choices=list(MAKERS) + ["all"], default="all")
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
    kinds = list(MAKERS) if a.kind == "all" else [a.kind]
    if a.report:
        return report(a.out, kinds, a)
    env = dict(os.environ)
    model = None
    if a.scripted:
        model = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                               "scripted_model.py")],
                                 stdout=subprocess.PIPE, text=True)
        url = model.stdout.readline().split()[-1]
        env.update({"RLM_PROVIDER": "openai", "RLM_BASE_URL": url, "RLM_API_KEY": "dummy",
                    "RLM_PRIMARY_MODEL": "scripted", "RLM_SUB_MODEL": "scripted", "RLM_TURN_FORMAT": "text"})
    try:
        for kind in kinds:
            run_kind(kind, a, env)
    finally:
        if model is not None:
            model.terminate()
    report(a.out, kinds, a)


if __name__ == "__main__":
    sys.exit(main())
