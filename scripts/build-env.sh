# Sourced by the build scripts (scripts/test, scripts/test-local-model,
# scripts/quickstart): how llama.cpp is compiled. Every script uses the same
# values, since a change rebuilds llama.cpp (~5 min on 2 cores).
#
# ggml otherwise compiles for SSE2 only (several times slower on CPU): turn on
# each x86-64 extension this machine's CPU has. Release C++ even in a debug
# cargo build: tests and debug builds still run the model at full speed.
if [ -r /proc/cpuinfo ]; then
  _rlm_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  for _rlm_ext in avx avx2 fma f16c bmi2; do
    case "$_rlm_flags" in
      *" $_rlm_ext "*) export "GGML_$(echo "$_rlm_ext" | tr a-z A-Z)=ON" ;;
    esac
  done
  unset _rlm_flags _rlm_ext
fi
export LLAMA_LIB_PROFILE=Release
# llama.cpp has ~190 C++ files (157 of them one per model architecture) that
# include the same heavy headers: compiled in batches they build ~15% faster.
export CMAKE_UNITY_BUILD=ON
