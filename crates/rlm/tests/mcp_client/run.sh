#!/usr/bin/env bash
# The MCP client test: the official MCP Python SDK (PyPI `mcp`, pinned in
# requirements.txt) drives the real `rlm mcp` over stdio (test_stdio.py) and
# `rlm serve`'s /mcp over streamable HTTP (test_http.py).
#
# 1. builds rlm (debug, the same features and llama.cpp flags as scripts/test,
#    so after it this is a no-op), unless RLM_BIN names a binary;
# 2. makes a venv under target/mcp-client-venv with the pinned packages
#    (re-made when requirements.txt changes);
# 3. runs pytest: its fixtures start scripted_model.py (an OpenAI-compatible
#    stub on 127.0.0.1:0), index a three-file corpus in a temporary folder
#    and start `rlm mcp` through the SDK's stdio client, or `rlm serve` on
#    127.0.0.1:0 for its streamable HTTP client.
#
# Usage: crates/rlm/tests/mcp_client/run.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../../../scripts/python-client-test" "$here" mcp-client-venv test_stdio.py "$here/test_http.py" "$@"
