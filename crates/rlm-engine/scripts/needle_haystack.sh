#!/bin/bash
# Needle-in-a-haystack runs of `rlm ask` against the local model
# (../shared/tools/local-llm.sh start). Usage: needle_haystack.sh OUT_DIR [rlm binary]
# Builds 30k- and 300k-character stores from the Vim user manual with two
# inserted facts, asks two questions on each, prints answer / partial / calls / ms.
set -euo pipefail
out=${1:?usage: needle_haystack.sh OUT_DIR [rlm]}
rlm=${2:-rlm}
mkdir -p "$out"
python3 - "$out" <<'PY'
import glob, os, sys
out = sys.argv[1]
texts = [open(f, encoding='utf-8', errors='replace').read() for f in sorted(glob.glob('/usr/share/vim/vim*/doc/usr_*.txt'))]
texts = [t for t in texts if len(t) > 12000]
needles = ["The night-shift supervisor's parking permit number is 58213.",
           "In 2019 the archivist Marguerite Okafor moved to the city of Tromso."]
for name, ndocs in (('h30k', 3), ('h300k', 30)):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    for i in range(ndocs):
        t = texts[i % len(texts)][:10000]
        if i == ndocs // 2:
            cut = t.rfind('\n', 0, len(t) // 2); t = t[:cut] + '\n' + needles[0] + '\n' + t[cut:]
        if i == ndocs - 2:
            cut = t.rfind('\n', 0, len(t) // 3); t = t[:cut] + '\n' + needles[1] + '\n' + t[cut:]
        open(os.path.join(d, f'chapter_{i:02d}.txt'), 'w').write(t)
PY
export RLM_PROVIDER=${RLM_PROVIDER:-openai} RLM_BASE_URL=${RLM_BASE_URL:-http://127.0.0.1:8088/v1}
export RLM_API_KEY=${RLM_API_KEY:-local} RLM_PRIMARY_MODEL=${RLM_PRIMARY_MODEL:-qwen} RLM_SUB_MODEL=${RLM_SUB_MODEL:-qwen}
i=0
for size in 30k 300k; do
  "$rlm" index "$out/h$size" --store "$out/s$size" >/dev/null
  for q in "What is the night-shift supervisor's parking permit number?" "Which city did Marguerite Okafor move to in 2019?"; do
    i=$((i+1))
    "$rlm" ask "$q" --store "$out/s$size" --json --trace "$out/run-$i.jsonl" --max-wall-secs "${WALL:-900}" >"$out/run-$i.json" 2>"$out/run-$i.err" || true
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], repr(d['answer'][:160]), 'partial' if d['partial'] else 'final', d['usage']['calls'], 'calls', d['usage']['wall_ms'], 'ms')" "$out/run-$i.json" "$size" 2>/dev/null || echo "$size run $i: no answer (see $out/run-$i.err)"
  done
done
