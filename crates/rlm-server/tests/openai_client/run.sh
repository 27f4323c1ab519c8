#!/usr/bin/env bash
# The OpenAI-compatible endpoint driven by the official `openai` Python SDK
# (PyPI, pinned in requirements.txt): test_openai_sdk.py starts the real
# `rlm serve` over a small indexed corpus, with the scripted OpenAI-compatible
# stub of the MCP client test as its model, and calls /v1 through the SDK.
#
# 1. builds rlm (debug, the same features and llama.cpp flags as scripts/test,
#    so after it this is a no-op), unless RLM_BIN names a binary;
# 2. makes a venv under target/openai-client-venv (re-made when
#    requirements.txt changes);
# 3. runs pytest.
#
# Usage: crates/rlm-server/tests/openai_client/run.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
if [ -z "${RLM_BIN:-}" ]; then
  # shellcheck source=/dev/null
  source scripts/build-env.sh
  cargo build --locked -p rlm
  RLM_BIN="$target/debug/rlm"
fi
venv="$target/openai-client-venv"
stamp="$venv/.requirements"
if ! cmp -s "$here/requirements.txt" "$stamp" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
fi
RLM_BIN="$RLM_BIN" exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$here/test_openai_sdk.py" "$@"
