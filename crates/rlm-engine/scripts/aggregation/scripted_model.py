#!/usr/bin/env python3
"""A frontier-style scripted model for the aggregation benchmark: an
OpenAI-compatible chat server (standard library only; the HTTP side is the
grounded-answers benchmark's) that answers each question shape of run.py by
writing the code a capable model writes once it has seen the ledger's lines:
`grep()` or `grep_count()` with a pattern, then counting, summing or
comparing in Python. It knows the question shapes and the line format, never
the answers: every number comes from the engine running its code over the
store, so its runs measure the engine (exhaustive reading, exact results,
the counted sets an answer carries).

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


def code_for(question):
    """The code for one question shape (None: not a shape of run.py)."""
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
    return None


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
