#!/usr/bin/env python3
"""A scripted model for the grounded-answers benchmark: an OpenAI-compatible
chat server (Python standard library only) that plays a fixed, honest policy.

IT KNOWS THE GOLD ANSWERS. It reads questions.jsonl (written by fetch.py)
and, for each question `rlm ask` sends it, commits a gold answer. Its answer
accuracy is therefore 100% by construction and measures nothing about a
model; what its runs measure is the engine: whether the engine attaches a
verified citation to a correct short answer, whether that citation points at
the gold passage, whether the quotes the engine attaches are verbatim, and
what the entailment judge (`--verify on`, the default) costs.

Policy, per question (the root agent's turns):

  turn 1   a ```repl cell: `search(<the question>, k=5)`, printing each hit's
           chunk id and text (so the run's evidence ledger holds the hits);
  turn 2   commit the first gold answer, with `FINAL("...")` in a cell.
           --policy plain: the answer alone, no citation (every citation in
             the answer is then one the engine attached);
           --policy cited: the answer plus a citation the model writes itself,
             [[chunk:ID "sentence"]], ID the first printed hit whose text holds
             the answer and the sentence of that hit that holds it; no
             citation when no hit holds it (an honest model cites nothing it
             did not see).
  other    any later root turn commits the same answer; a sub-call, a
           synthesis or any other request gets the answer as plain text.

Structured turns (a request with `response_format` or tools, or whose prompt
gives the structured reply format): the same policy as JSON turns, turn 1
{"thought", "step": {"code": ...}}, later turns and the extraction call
{"thought", "step": {"answer": [{"text": <gold answer>, "source": ...}]}},
the source (--policy cited) `chunk:ID` of the first printed hit holding the
answer and the line of it that does, else null.

--replay DIR replaces the gold answer by the answer a real model committed in
an earlier pass (DIR/answers/ID.json, written by run.py), returned as plain
text to every request: with the `rag` flow (one answer call) this re-grounds
another model's answers with the current engine, without the model.

Entailment judge requests (its system prompt) get a lexical verdict per
claim: "entailed" when every word of the claim (lower case, letters and
digits) occurs in its passage, else "not_entailed".

Usage:
    python3 scripted_model.py QUESTIONS.jsonl [--policy plain|cited] [--port 0]
                              [--replay DIR]

The first line on stdout is `listening on http://127.0.0.1:PORT/v1`. Point
rlm at it with RLM_PROVIDER=openai RLM_BASE_URL=that RLM_API_KEY=dummy.
Usage numbers are estimates (characters / 4), so token counts of scripted
runs are only comparable with each other.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

JUDGE_MARK = "You check claims against passages"
QUESTION_RE = re.compile(r"^Question: (.*)$", re.M)
HIT_RE = re.compile(r"^HIT (\S+)\n(.*?)\n---$", re.S | re.M)


SEARCH_CODE = (
    "hits = search(%s, k=5)\n"
    "for h in hits:\n"
    "    print(\"HIT \" + h[\"chunk_id\"])\n"
    "    print(h[\"text\"])\n"
    "    print(\"---\")"
)


def wants_structured(body):
    """Whether the request asks for a structured turn: a schema sent as
    `response_format` or a tool, or the structured protocol's reply format
    in the prompt (an engine that sends this endpoint no schema)."""
    if body.get("response_format") or body.get("tools"):
        return True
    return any('"step"' in (m.get("content") or "") for m in body.get("messages") or [])


def words(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def sentence_with(text, needle):
    """The sentence of `text` holding `needle` (case-insensitive), or None."""
    at = text.lower().find(needle.lower())
    if at < 0:
        return None
    starts = [0] + [m.end() for m in re.finditer(r"[.!?][\"')\]]?\s+", text)]
    start = max(s for s in starts if s <= at)
    m = re.search(r"[.!?][\"')\]]?(\s|$)", text[at + len(needle):])
    end = at + len(needle) + (m.end() if m else len(text))
    return text[start:end].strip()



def printed_sentences(messages, answer):
    """(chunk id, the sentence holding `answer` or None) of each search hit
    printed back to the model so far, in order."""
    seen = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user")
    for chunk_id, text in HIT_RE.findall(seen):
        yield chunk_id, sentence_with(text, answer)

class Policy:
    def __init__(self, questions, policy, replay=None):
        self.by_question = {q["question"]: q for q in questions}
        self.policy = policy
        self.replay = replay
        self.lock = threading.Lock()
        self.log = []

    def gold_for(self, messages):
        text = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user")
        for m in QUESTION_RE.finditer(text):
            q = self.by_question.get(m.group(1).strip())
            if q:
                return q
        # A sub-call or synthesis prompt: find any known question in it.
        for qtext, q in self.by_question.items():
            if qtext in text:
                return q
        return None

    def reply(self, body):
        messages = body.get("messages") or []
        last = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        if any(JUDGE_MARK in (m.get("content") or "") for m in messages if m.get("role") == "system"):
            return self.semantic(last), "semantic"
        q = self.gold_for(messages)
        answer = q["answers"][0] if q else "I do not know."
        if self.replay is not None:
            return self.replayed(q), "replay"
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        is_root = system.startswith("You are answering a question about a collection of documents")
        turns = sum(1 for m in messages if m.get("role") == "assistant")
        structured = wants_structured(body)
        if structured and q is not None and (not is_root or turns > 0):
            return self.structured_answer(q, messages), "final"
        if not is_root or q is None:
            return answer, "other"
        if turns == 0:
            code = SEARCH_CODE % json.dumps(q["question"])
            if structured:
                return json.dumps({"thought": "Search for the question.", "step": {"code": code}}), "search"
            return "```repl\n" + code + "\n```", "search"
        final = answer
        if self.policy == "cited":
            for chunk_id, sent in printed_sentences(messages, answer):
                if sent:
                    quote = sent.replace('"', "'") if '"' in sent else sent
                    if quote != sent:
                        # A quote with a double quote cannot sit in the marker
                        # verbatim; take the part before it, if long enough.
                        quote = sent.split('"')[0].strip()
                        if len(quote) < 10:
                            continue
                    final = f'{answer} [[chunk:{chunk_id} "{quote}"]]'
                    break
        return "```repl\nFINAL(" + json.dumps(final) + ")\n```", "final"

    def structured_answer(self, q, messages):
        """A structured answer turn: the gold answer, with (--policy cited)
        the line of the first printed hit that holds it as its source."""
        answer = q["answers"][0]
        source = None
        if self.policy == "cited":
            for chunk_id, sent in printed_sentences(messages, answer):
                if sent:
                    # A quote is at most 300 characters: the line of the
                    # sentence that holds the answer.
                    line = next(l for l in sent.splitlines() if answer.lower() in l.lower())
                    source = {"ref": f"chunk:{chunk_id}", "quote": line.strip()[:300]}
                    break
        step = {"answer": [{"text": answer, "source": source}]}
        return json.dumps({"thought": "The search printed the answer.", "step": step})

    def replayed(self, q):
        if q is None:
            return "I do not know."
        try:
            with open(os.path.join(self.replay, "answers", q["id"] + ".json")) as f:
                return json.load(f).get("answer") or ""
        except (OSError, ValueError):
            return "I do not know."

    def semantic(self, prompt):
        verdicts = []
        for n, block in enumerate(re.split(r"^Claim \d+: ", prompt, flags=re.M)[1:], start=1):
            # The claim's line, then its "Passage N: ..." lines.
            claim, _, passage = block.partition("\n")
            cw, pw = words(claim), set(words(passage))
            v = "entailed" if cw and all(w in pw for w in cw) else "not_entailed"
            verdicts.append({"claim": n, "verdict": v})
        return json.dumps({"verdicts": verdicts})


def make_handler(policy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_json(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self.send_json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            else:
                self.send_json(404, {"error": {"message": "not found"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send_json(404, {"error": {"message": "not found"}})
                return
            text, kind = policy.reply(body)
            prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages") or [])
            usage = {
                "prompt_tokens": max(1, prompt_chars // 4),
                "completion_tokens": max(1, len(text) // 4),
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            with policy.lock:
                policy.log.append(kind)
            model = body.get("model") or "scripted"
            created = int(time.time())
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                chunks = [
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": usage},
                ]
                for c in chunks:
                    c.update({"id": "scripted", "object": "chat.completion.chunk", "created": created, "model": model})
                    self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
            else:
                self.send_json(200, {
                    "id": "scripted", "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": usage,
                })

    return Handler


def main():
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible model for the grounded-answers benchmark")
    ap.add_argument("questions")
    ap.add_argument("--policy", choices=["plain", "cited"], default="plain")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--replay", metavar="DIR", help="answer with the answers saved in DIR/answers/ by an earlier run.py pass")
    args = ap.parse_args()
    questions = [json.loads(l) for l in open(args.questions, encoding="utf-8") if l.strip()]
    policy = Policy(questions, args.policy, args.replay)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(policy))
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
