#!/usr/bin/env bash
# The Python package's tests: build the rlm_rs wheel with maturin, install it
# into a fresh venv and run its pytest suite against the scripted model
# server (crates/rlm/tests/mcp_client/scripted_model.py, a real socket).
#
# 1. makes target/maturin-venv with the pinned maturin (re-made when the pin
#    changes);
# 2. `maturin build` of crates/rlm-python into target/wheels-rlm-rs, in the
#    workspace's target dir: the dev profile by default, which reuses what
#    ./scripts/test built (RLM_WHEEL_PROFILE=release for measurements);
# 3. scripts/python-client-test with RLM_WHEEL: a fresh venv, the wheel, the
#    pinned pytest, RLM_BIN (rlm, for the store test).
#
# Usage: crates/rlm-python/tests/run.sh [pytest arguments]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cd "$repo"
# shellcheck source=../../../scripts/build-env.sh
source scripts/build-env.sh
target="${CARGO_TARGET_DIR:-$repo/target}"
maturin_version=1.16.0
tools="$target/maturin-venv"
if ! "$tools/bin/maturin" --version 2>/dev/null | grep -qx "maturin $maturin_version"; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "maturin==$maturin_version"
fi
profile="${RLM_WHEEL_PROFILE:-dev}"
out="$target/wheels-rlm-rs"
rm -rf "$out"
# A wheel for this machine (no manylinux audit: it is installed right here).
compat=()
if [ "$(uname -s)" = Linux ]; then compat=(--compatibility linux); fi
started=$(date +%s)
"$tools/bin/maturin" build --locked --quiet --manifest-path crates/rlm-python/Cargo.toml \
  --profile "$profile" "${compat[@]}" --interpreter python3 --out "$out"
echo "rlm_rs wheel ($profile profile) built in $(( $(date +%s) - started )) s: $(ls "$out")"
wheel="$(ls "$out"/rlm_rs-*.whl)"
RLM_WHEEL="$wheel" exec "$repo/scripts/python-client-test" "$here" rlm-rs-venv . "$@"
