#!/usr/bin/env python3
"""A scripted model for the MCP client tests: an OpenAI-compatible chat
server (Python standard library only) that plays the same two turns as the
Rust tests' scripted server (crates/rlm/tests/mcp_stdio.rs):

  the engine's entailment judge                every claim entailed by its passage
  a request whose messages hold "REPL output"  FINAL with a quoted citation
  a last message holding "STALL"               waits --stall-secs, then a cell
  a last message holding "SUBCALL"             a cell that calls llm_query
  the typed-answer request                     {"code": "4721"}
  anything else                                a ```repl cell printing the context

Usage: python3 scripted_model.py [--port 0] [--stall-secs 60]
The first line on stdout is `listening on http://127.0.0.1:PORT/v1`.
"""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CELL = "```repl\nprint(context[:200])\n```"
SUBCALL_CELL = "```repl\nprint(llm_query('Say hello'))\n```"
FINAL = 'FINAL(The secret code is 4721 [[doc:1 "The secret code is 4721"]])'
TYPED = '{"code": "4721"}'


JUDGE = "You check claims against passages"


def reply_for(body, stall_secs):
    messages = body.get("messages") or []
    contents = [m.get("content") or "" for m in messages]
    contents = [c if isinstance(c, str) else json.dumps(c) for c in contents]
    if contents and contents[-1].startswith("Put the answer below into one JSON document"):
        return TYPED
    if contents and JUDGE in contents[0]:
        claims = [line for line in contents[-1].splitlines() if line.startswith("Claim ")]
        verdicts = [{"claim": i + 1, "verdict": "entailed"} for i in range(len(claims))]
        return json.dumps({"verdicts": verdicts})
    if any("REPL output" in c for c in contents):
        return FINAL
    if contents and "STALL" in contents[-1]:
        time.sleep(stall_secs)
    if contents and "SUBCALL" in contents[-1]:
        return SUBCALL_CELL
    return CELL


def make_handler(stall_secs):
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
                models = [{"id": m, "object": "model"} for m in ("root-model", "sub-model")]
                self.send_json(200, {"object": "list", "data": models})
            else:
                self.send_json(404, {"error": {"message": "not found"}})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self.send_json(404, {"error": {"message": "not found"}})
                return
            text = reply_for(body, stall_secs)
            prompt_words = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
            usage = {"prompt_tokens": max(1, prompt_words), "completion_tokens": max(1, len(text.split()))}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            model = body.get("model") or "root-model"
            created = int(time.time())
            try:
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
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
                    return
                self.send_json(200, {
                    "id": "scripted",
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    "usage": usage,
                })
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a cancelled run)

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stall-secs", type=float, default=60.0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.stall_secs))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
