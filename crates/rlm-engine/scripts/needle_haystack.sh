#!/bin/bash
# Needle-in-a-haystack runs of `rlm ask` against a real model.
# Usage: needle_haystack.sh OUT_DIR [rlm binary]
#
# Builds a 30k- and a 300k-character store from the Vim user manual with five
# planted facts, asks the five questions on each store (10 runs), and prints
# one line per run plus a summary: correct (the expected answer appears in the
# answer), partial, model calls, wall time. Results: OUT_DIR/results.tsv.
#
# Model: by default an OpenAI-compatible server at http://127.0.0.1:8088/v1
# (RLM_BASE_URL overrides it), e.g. one serving the embedded model's GGUF;
# RLM_PROVIDER=local uses the in-process model instead (`rlm model pull`, a
# local-model build).
# SIZES="30k" or QUESTIONS="1 3" restrict the runs; WALL caps each run (s).
set -euo pipefail
out=${1:?usage: needle_haystack.sh OUT_DIR [rlm]}
rlm=${2:-rlm}
mkdir -p "$out"
python3 "$(dirname "$0")/needle_set.py" "$out"
export RLM_PROVIDER=${RLM_PROVIDER:-openai}
if [ "$RLM_PROVIDER" != local ]; then
  export RLM_BASE_URL=${RLM_BASE_URL:-http://127.0.0.1:8088/v1}
  export RLM_API_KEY=${RLM_API_KEY:-local} RLM_PRIMARY_MODEL=${RLM_PRIMARY_MODEL:-qwen} RLM_SUB_MODEL=${RLM_SUB_MODEL:-qwen}
  export RLM_TIMEOUT=${RLM_TIMEOUT:-600}
fi
results="$out/results.tsv"
: >"$results"
for size in ${SIZES:-30k 300k}; do
  "$rlm" index "$out/h$size" --store "$out/s$size" >/dev/null
  for n in ${QUESTIONS:-1 2 3 4 5}; do
    q=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2])-1][0])" "$out/questions.json" "$n")
    run="$out/run-$size-$n"
    "$rlm" ask "$q" --store "$out/s$size" --json --trace "$run.jsonl" --max-wall-secs "${WALL:-900}" \
      >"$run.json" 2>"$run.err" || true
    python3 - "$run.json" "$out/questions.json" "$n" "$size" "$results" <<'PY' || echo "$size q$n: no answer (see $run.err)"
import json, sys
run, qs, n, size, results = sys.argv[1:]
d = json.load(open(run))
expected = json.load(open(qs))[int(n) - 1][1]
right = expected.lower() in d['answer'].lower()
finals = [e for e in map(json.loads, open(run[:-5] + '.jsonl'))
          if e.get('type') == 'final' and e.get('depth') == 0 and not e.get('deferred')]
how = finals[-1].get('via') if finals else None
row = [size, 'q' + n, 'correct' if right else 'wrong', 'partial' if d['partial'] else 'final',
       str(how), str(d['usage']['calls']), str(d['usage']['wall_ms']), repr(d['answer'][:160])]
print('\t'.join(row))
open(results, 'a').write('\t'.join(row) + '\n')
PY
  done
done
python3 - "$results" <<'PY'
import sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1]) if l.strip()]
right = sum(r[2] == 'correct' for r in rows)
final = sum(r[3] == 'final' for r in rows)
print(f"summary: {right}/{len(rows)} correct, {final}/{len(rows)} committed without fallback, "
      f"median wall {sorted(int(r[6]) for r in rows)[len(rows)//2] / 1000:.0f} s" if rows else "summary: no runs")
PY
