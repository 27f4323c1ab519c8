#!/usr/bin/env bash
# The prefix state on disk, measured: the first request of a fresh process
# with a ~2,000-token system turn (the RLM root system prompt followed by
# Vim manual text), three times in three processes — cache off, cache cold
# (decodes and saves), cache warm (restores; another question). One JSON
# line each (`examples/throughput.rs --prefix-state`).
# Usage: prefix_state.sh [SYSTEM_CHARS (default 8000)]
set -euo pipefail
cd "$(dirname "$0")/../../.."
chars=${1:-8000}
system=$(mktemp)
cache=$(mktemp -d)
trap 'rm -rf "$system" "$cache"' EXIT
python3 - "$system" "$chars" <<'PY'
import glob, sys
path, n = sys.argv[1], int(sys.argv[2])
text = open('crates/rlm-engine/prompts/system_root.md').read()
text += ''.join(open(f, errors='replace').read() for f in sorted(glob.glob('/usr/share/vim/vim*/doc/usr_0*.txt')))
open(path, 'w').write(text[:n])
PY
# The build scripts/test-local-model makes (same features, same ggml flags).
export GGML_AVX=ON GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON GGML_BMI2=ON LLAMA_LIB_PROFILE=Release
run() { cargo run -q -p rlm-local --features llama,testing --example throughput -- --prefix-state "$system" "$@"; }
echo "off:  $(run off)"
echo "cold: $(run "$cache" 'Which section of the text above explains undo?')"
echo "warm: $(run "$cache" 'What does the text above say about the dot command?')"
