#!/usr/bin/env bash
# Wall time of `rlm ask` on a 1 MB folder with the embedded model: the first
# question (indexes the folder, then answers) and a second one (store ready),
# each in a fresh process, under the settings given in the environment.
#
#   crates/rlm/scripts/first_answer.sh OUT_DIR [rlm]
#
# The folder: the Vim user manual (/usr/share/vim/vim*/doc/usr_*.txt, Debian
# package vim-runtime) plus reference chapters up to 1 MB, with two planted
# facts. Prints one TSV line per question: label, question, wall seconds,
# seconds of the first model reply, correct (the planted answer appears in
# the answer), model calls, prompt tokens, prompt tokens served from a cache,
# output tokens. LABEL names the rows (e.g. the settings).
# Compare e.g. RLM_STOP_AFTER_CODE=off vs on, RLM_LOCAL_PREFIX_CACHE=off vs
# the default (a prefix state is written by the first run of a setting and
# read by later processes: run a setting twice to see both).
set -euo pipefail
out=${1:?usage: first_answer.sh OUT_DIR [rlm]}
rlm=${2:-rlm}
label=${LABEL:-default}
mkdir -p "$out"
docs="$out/docs"
if [ ! -d "$docs" ]; then
  mkdir -p "$docs"
  python3 - "$docs" <<'PY'
import glob, os, sys
docs = sys.argv[1]
files = sorted(glob.glob('/usr/share/vim/vim*/doc/usr_*.txt')) + sorted(glob.glob('/usr/share/vim/vim*/doc/*.txt'))
if not files:
    sys.exit('no Vim documentation under /usr/share/vim (apt-get install vim-runtime)')
total, seen = 0, set()
for f in files:
    base = os.path.basename(f)
    if base in seen:
        continue
    seen.add(base)
    text = open(f, encoding='utf-8', errors='replace').read()
    if total + len(text) > 1_000_000:
        continue
    total += len(text)
    open(os.path.join(docs, base), 'w').write(text)
facts = {
    'usr_05.txt': 'The night-shift supervisor\'s parking permit number is 58213.',
    'usr_41.txt': 'The quarterly budget review meeting takes place in room 4B-217.',
}
for name, fact in facts.items():
    p = os.path.join(docs, name)
    t = open(p).read()
    cut = t.rfind('\n', 0, len(t) // 2)
    open(p, 'w').write(t[:cut] + '\n' + fact + '\n' + t[cut:])
print(f'{len(seen)} files seen, {total} characters written', file=sys.stderr)
PY
fi
store="$out/store-$label"
rm -rf "$store"
ask() {
  local q=$1 expect=$2 n=$3; shift 3
  local start end
  start=$(date +%s.%N)
  "$rlm" ask "$q" "$@" --store "$store" --json --quiet --trace "$out/$label-$n.jsonl" >"$out/$label-$n.json" 2>"$out/$label-$n.err" || true
  end=$(date +%s.%N)
  python3 - "$out/$label-$n.json" "$out/$label-$n.jsonl" "$expect" "$label" "$n" "$(echo "$end - $start" | bc)" <<'PY'
import json, sys
path, trace, expect, label, n, secs = sys.argv[1:]
try:
    answer = json.load(open(path))
except Exception:
    answer = {}
text = json.dumps(answer.get('answer', ''))
calls = prompt = cached = output = 0
first_reply_ms = None
try:
    for line in open(trace):
        e = json.loads(line)
        if e.get('type') == 'llm_response':
            calls += 1
            prompt += e.get('input_tokens', 0)
            cached += e.get('cached_input_tokens', 0)
            output += e.get('output_tokens', 0)
            if first_reply_ms is None:
                first_reply_ms = e.get('latency_ms')
except FileNotFoundError:
    pass
first = f"{first_reply_ms / 1000:.1f}" if first_reply_ms is not None else "-"
print(f"{label}\tq{n}\t{float(secs):.1f}\t{first}\t{expect.lower() in text.lower()}\t{calls}\t{prompt}\t{cached}\t{output}", flush=True)
PY
}
ask "What is the night-shift supervisor's parking permit number?" 58213 1 "$docs"
ask "In which room does the quarterly budget review meeting take place?" 4B-217 2
