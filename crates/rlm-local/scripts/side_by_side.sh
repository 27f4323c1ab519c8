#!/usr/bin/env bash
# The same GGUF and the same prompt, in-process (rlm-local) and, when
# SERVER_START is set, under an OpenAI-compatible server of the same GGUF on
# 127.0.0.1:8088 (e.g. llama-cpp-python's): SERVER_START is a command that
# starts it and returns once it answers, SERVER_STOP (optional) one that stops
# it first, so its load time is measured like ours. Prints one JSON line per
# runtime:
# load time, prompt tokens/s (time to the first token), generation tokens/s
# (first to last token), greedy, 128 output tokens.
# Usage: side_by_side.sh [PROMPT_CHARS (default 6000)]
set -euo pipefail
cd "$(dirname "$0")/../../.."
chars=${1:-6000}
prompt=$(mktemp)
python3 - "$prompt" "$chars" <<'PY'
import glob, sys
path, n = sys.argv[1], int(sys.argv[2])
text = ''.join(open(f, errors='replace').read() for f in sorted(glob.glob('/usr/share/vim/vim*/doc/usr_0*.txt')))
open(path, 'w').write(text[:n] + '\n\nSummarize the text above in ten numbered points.')
PY
export GGML_AVX=ON GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON GGML_BMI2=ON LLAMA_LIB_PROFILE=Release
cargo run -q --release -p rlm-local --features llama --example throughput -- "$prompt" 128
if [ -z "${SERVER_START:-}" ]; then
  rm -f "$prompt"
  exit 0
fi
# Restarted so its load time is measured like ours (process start to ready).
[ -z "${SERVER_STOP:-}" ] || sh -c "$SERVER_STOP" >/dev/null 2>&1 || true
t0=$(date +%s.%N)
sh -c "$SERVER_START" >/dev/null
python3 - "$prompt" "$t0" <<'PY'
import json, sys, time, urllib.request
prompt = open(sys.argv[1]).read()
url = 'http://127.0.0.1:8088/v1/chat/completions'
def post(body, stream=False):
    req = urllib.request.Request(url, json.dumps(body).encode(), {'Content-Type': 'application/json'})
    return urllib.request.urlopen(req, timeout=900)
load_s = time.time() - float(sys.argv[2])
post({'model': 'qwen', 'messages': [{'role': 'user', 'content': 'Say hi.'}], 'max_tokens': 4}).read()
body = {'model': 'qwen', 'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': 128,
        'temperature': 0, 'stream': True}
start = time.time(); first = last = None; pieces = 0
for line in post(body):
    line = line.decode().strip()
    if not line.startswith('data:') or line == 'data: [DONE]':
        continue
    delta = json.loads(line[5:])['choices'][0].get('delta', {})
    if delta.get('content'):
        now = time.time(); first = first or now; last = now; pieces += 1
usage = json.loads(post({**body, 'stream': False, 'max_tokens': 1}).read())['usage']
p = usage['prompt_tokens']
print(json.dumps({'runtime': 'OpenAI-compatible server', 'load_s': round(load_s, 2),
  'prompt_tokens': p, 'prompt_s': round(first - start, 2), 'prompt_tok_s': round(p / (first - start), 1),
  'output_tokens': pieces, 'generation_s': round(last - first, 2),
  'generation_tok_s': round((pieces - 1) / (last - first), 1)}))
PY
rm -f "$prompt"
