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
exec "$here/../../../../scripts/python-client-test" "$here" openai-client-venv test_openai_sdk.py "$@"
