#!/usr/bin/env python3
"""A frontier-style scripted model for the aggregation benchmark: an
OpenAI-compatible chat server (standard library only; the HTTP side is the
grounded-answers benchmark's) that answers each question shape of run.py by
writing the code a capable model writes once it has seen the corpus:
  ledger  `grep()` or `grep_count()` with a pattern, then counting, summing
          or comparing in Python;
  logs    `tally()` (a count, a total or maximum with `number=`, a ranking
          or a number of distinct ids with `by=`), and `grep()` per document
          plus Python for a threshold (grep returns at most 100,000 lines);
  prose   every chunk of each document joined in order, its whitespace
          made single spaces, split into sentences, each order sentence
          parsed into a record (id, status, city, month, weight), then
          counting, summing, ranking or listing the records in Python (a
          record is a sentence, not a line: a line count would be wrong).
It knows the question shapes and the formats, never the answers: every
number comes from the engine running its code over the store, so its runs
measure the engine (exhaustive reading, exact results, the counted sets an
answer carries).

Policy (text turns: run rlm with RLM_TURN_FORMAT=text): turn 1, a ```repl
cell that computes the answer into `result` and prints it; turn 2, FINAL
with the printed value in a sentence. An unknown question shape gets
`FINAL(unknown)`. Judge requests get "entailed" for every claim.

Usage: scripted_model.py [--port 0]; the first line on stdout is
`listening on http://127.0.0.1:PORT/v1`.
"""

import argparse
import importlib.util
import json
import os
import re
import threading
from http.server import ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "gqa_scripted", os.path.join(os.path.dirname(HERE), "grounded_qa", "scripted_model.py")
)
gqa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gqa)

AMOUNT = r'int(re.search(r"(\d+) EUR", r["text"]).group(1))'


# Logs: `2024-03-02T10:15:03Z ERROR payments timeout after 1532 ms (request r-88213)`.
ERRORS = r'r"^\S+ ERROR "'


def logs_code(q):
    if re.match(r"How many ERROR lines are in the logs in total\?", q):
        return f'result = tally({ERRORS}, ignore_case=False)["lines"]'
    if re.match(r"Which service logged the most errors\?", q):
        return (f't = tally({ERRORS}, by=r"^\\S+ ERROR (\\w+) ", ignore_case=False)\n'
                'print(t["by"][:3])\nresult = t["top"]')
    if m := re.match(r"What is the total latency in ms of all (\w+) timeouts\?", q):
        return (f't = tally(r"^\\S+ ERROR {m[1]} timeout after", number=r"timeout after (\\d+) ms", '
                'ignore_case=False)\nprint(t["lines"], "timeouts")\nresult = t["sum"]')
    if m := re.match(r"What was the longest (\w+) timeout, in ms\?", q):
        return (f't = tally(r"^\\S+ ERROR {m[1]} timeout after", number=r"timeout after (\\d+) ms", '
                'ignore_case=False)\nprint(t["max_line"])\nresult = t["max"]')
    if re.match(r"How many distinct request ids failed\?", q):
        return (f't = tally({ERRORS}, by=r"\\(request (r-\\d+)\\)", ignore_case=False)\n'
                'print(t["lines"], "error lines")\nresult = t["groups"]')
    if m := re.match(r"Were there more warnings from (\w+) or from (\w+)\?", q):
        return (f'a = tally(r"^\\S+ WARN {m[1]} ", ignore_case=False)["lines"]\n'
                f'b = tally(r"^\\S+ WARN {m[2]} ", ignore_case=False)["lines"]\n'
                f'print(a, b)\nresult = "{m[1]}" if a > b else "{m[2]}"')
    if re.match(r"On which day were the most errors logged\?", q):
        return (f't = tally({ERRORS}, by=r"^(\\d{{4}}-\\d{{2}}-\\d{{2}})T", ignore_case=False)\n'
                'print(t["by"][:3])\nresult = t["top"]')
    if m := re.match(r"How many requests completed in more than (\d+) ms\?", q):
        return ('n = 0\nseen = 0\nfor i in range(len(documents)):\n'
                '    rows = grep(r"^\\S+ INFO \\w+ request \\S+ completed in \\d+ ms$", doc=i, limit=100000, '
                'ignore_case=False)\n'
                '    seen = seen + len(rows)\n'
                '    for r in rows:\n'
                '        if int(re.search(r"completed in (\\d+) ms", r["text"]).group(1)) > ' + m[1] + ':\n'
                '            n = n + 1\n'
                'print(seen, "completed requests")\nresult = n')
    return None


# Prose: `Order 10412 was shipped to Berlin on 3 May and weighed 12.5 kg.`, in
# three sentence shapes, wrapped over lines, among sentences that are no orders.
ORDERS = r"""texts = {}
for c in chunks():
    texts[c["doc_index"]] = texts.get(c["doc_index"], "") + c["text"]
orders = []
for i in texts:
    for s in " ".join(texts[i].split()).split(". "):
        m = re.search(r"\b[Oo]rder (\d+)\b", s)
        if m is None:
            continue
        st = re.search(r"\bwas (shipped to|delivered to|returned from|lost in transit to) ([A-Z]\w+)", s)
        d = re.search(r"\b(\d{1,2}) (January|February|March|April|May|June|July|August|September|October|November|December)\b", s)
        w = re.search(r"(\d+(?:\.\d+)?) kg\b", s)
        orders.append({"id": m.group(1), "status": st.group(1).split(" ")[0], "city": st.group(2),
                       "month": d.group(2), "kg": float(w.group(1))})
print(len(orders), "orders")
"""


def prose_code(q):
    body = None
    if m := re.match(r"How many orders were (shipped|delivered|returned|lost)\?", q):
        body = f'result = len([o for o in orders if o["status"] == "{m[1]}"])'
    elif m := re.match(r"How many orders were (\w+) (?:to|from) (\w+)\?", q):
        body = f'result = len([o for o in orders if o["status"] == "{m[1]}" and o["city"] == "{m[2]}"])'
    elif m := re.match(r"What is the total weight in kg of all orders (\w+) (?:to|from) (\w+)\?", q):
        body = (f'result = round(sum([o["kg"] for o in orders if o["status"] == "{m[1]}" '
                f'and o["city"] == "{m[2]}"]), 2)')
    elif m := re.match(r"To which city were the most orders (\w+)\?", q):
        body = ('counts = {}\nfor o in orders:\n'
                f'    if o["status"] == "{m[1]}":\n'
                '        counts[o["city"]] = counts.get(o["city"], 0) + 1\n'
                'print(sorted(counts.items(), key=lambda kv: -kv[1])[:3])\n'
                'result = max(counts, key=lambda c: counts[c])')
    elif re.match(r"Which order was the heaviest\?", q):
        body = ('ranked = sorted(orders, key=lambda o: -o["kg"])\nprint(ranked[:2])\n'
                'result = ranked[0]["id"]')
    elif m := re.match(r"How many orders weighed more than ([\d.]+) kg\?", q):
        body = f'result = len([o for o in orders if o["kg"] > {m[1]}])'
    elif m := re.match(r"Were more orders (\w+) in (\w+) or in (\w+)\?", q):
        body = (f'a = len([o for o in orders if o["status"] == "{m[1]}" and o["month"] == "{m[2]}"])\n'
                f'b = len([o for o in orders if o["status"] == "{m[1]}" and o["month"] == "{m[3]}"])\n'
                f'print(a, b)\nresult = "{m[2]}" if a > b else "{m[3]}"')
    elif m := re.match(r"Which orders were (\w+) in transit\?", q):
        body = (f'ids = [o["id"] for o in orders if o["status"] == "{m[1]}"]\n'
                'result = str(len(ids)) + " orders: " + ", ".join(ids)')
    return None if body is None else ORDERS + body


def code_for(question):
    """The code for one question shape (None: not a shape of run.py); the ledger's first."""
    q = question
    if m := re.match(r"How many (\w+) transactions (?:are in the ledger in total|does the ledger hold)\?", q):
        return f'result = grep_count(r"\\| {m[1]} \\|")'
    if m := re.match(r"What is the total amount in EUR of all purchases made in (\w+)\?", q):
        return (f'result = 0\nfor r in grep(r"\\| purchase \\|.*\\| {m[1]}$"):\n'
                f"    result = result + {AMOUNT}")
    if re.match(r"Which user made the most cancel transactions\?", q):
        return ('counts = {}\nfor r in grep(r"\\| cancel \\|"):\n'
                '    u = re.search(r"user (\\w+)", r["text"]).group(1)\n'
                "    counts[u] = counts.get(u, 0) + 1\n"
                "result = max(counts, key=lambda u: counts[u])")
    if m := re.match(r"How many transactions did user (\w+) make\?", q):
        return f'result = grep_count(r"\\| user {m[1]} \\|")'
    if re.match(r"What is the ID of the transaction with the largest amount\?", q):
        return ('best = None\nfor r in grep(r"EUR"):\n'
                f"    a = {AMOUNT}\n"
                "    if best is None or a > best[0]:\n"
                '        best = (a, r["text"].split(" | ")[0])\n'
                "result = best[1]")
    if m := re.match(r"Were there more transactions in (\w+) or in (\w+)\?", q):
        return (f'a = grep_count(r"\\| {m[1]}$")\nb = grep_count(r"\\| {m[2]}$")\n'
                f'result = "{m[1]}" if a > b else "{m[2]}"')
    if m := re.match(r"How many (\w+?)s were made in (\w+)\?", q):
        return f'result = grep_count(r"\\| {m[1]} \\|.*\\| {m[2]}$")'
    return logs_code(q) or prose_code(q)


class Policy:
    def __init__(self):
        self.lock = threading.Lock()
        self.log = []

    def reply(self, body):
        messages = body.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        last = (messages[-1].get("content") or "") if messages else ""
        if gqa.JUDGE_MARK in system:
            n = len(re.findall(r"^Claim \d+: ", last, flags=re.M))
            return json.dumps({"verdicts": [{"claim": i, "verdict": "entailed"} for i in range(1, n + 1)]}), "judge"
        if "You are answering a question" not in system:
            return "unknown", "other"
        first = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
        question = re.search(r"^Question: (.+)$", first, flags=re.M)
        question = question[1].strip() if question else ""
        if m := re.search(r"RESULT=(.+)", last):
            return f"FINAL(The answer is {m[1].strip()}.)", "answer"
        code = code_for(question)
        if code is None:
            return "FINAL(unknown)", "unknown"
        return f"```repl\nimport re\n{code}\nprint(\"RESULT=\" + str(result))\n```", "code"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    policy = Policy()
    server = ThreadingHTTPServer(("127.0.0.1", a.port), gqa.make_handler(policy))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
