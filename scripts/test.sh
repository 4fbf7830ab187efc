#!/usr/bin/env bash
# Builds mamba.cpp and runs the whole test suite: the README's test command and what CI runs.
#   1. installs missing Debian packages and the npm oracles (HF tokenizers, openai, @huggingface/inference)
#   2. Release build + every CTest test (unit, reference fixtures, CLI, server end-to-end)
#   3. ASan/UBSan build + the tests of every user-input parser and the model paths
#   4. libFuzzer (clang-14) targets, each for FUZZ_SECONDS (default 30) from fuzz/corpus/<target>
#   5. the -DMAMBA_CUDA=ON build compiles (when nvcc is present and a CUDA backend, src/ops/cuda/, exists: none yet)
# Env: JOBS (default nproc), FUZZ_SECONDS, SKIP_SANITIZE=1, SKIP_FUZZ=1, SKIP_CUDA=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
# ccache keys on paths relative to the checkout, so fresh clones reuse earlier compiles.
export CCACHE_BASEDIR=$ROOT

bash scripts/install-deps.sh
if [ -f tests/node/package.json ]; then
  (cd tests/node && { [ -d node_modules ] && npm ls --silent >/dev/null 2>&1 || npm install --no-audit --no-fund --silent; })
fi

echo "== Release build + tests"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$JOBS"
ctest --test-dir build/release --output-on-failure -j "$JOBS" --timeout 900

if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== ASan/UBSan build + parser and model tests"
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAMBA_SANITIZE=ON -DMAMBA_BUILD_BENCH=OFF >/dev/null
  cmake --build build/asan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build/asan --output-on-failure -j "$JOBS" --timeout 1200 -LE 'slow|server_e2e'
fi

if [ "${SKIP_FUZZ:-0}" != 1 ] && ls fuzz/*.cc >/dev/null 2>&1; then
  echo "== libFuzzer targets (${FUZZ_SECONDS}s each)"
  cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DMAMBA_FUZZ=ON -DMAMBA_BUILD_TESTS=OFF -DMAMBA_BUILD_BENCH=OFF >/dev/null
  fuzz_targets=$(for src in fuzz/*.cc; do basename "$src" .cc; done)
  cmake --build build/fuzz -j "$JOBS" --target $fuzz_targets
  for src in fuzz/*.cc; do
    t=$(basename "$src" .cc)
    mkdir -p "build/fuzz/corpus-$t"
    seeds=fuzz/corpus/$t; [ -d "$seeds" ] || seeds=""
    echo "-- $t"
    "build/fuzz/$t" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -print_final_stats=0 \
      "build/fuzz/corpus-$t" $seeds 2>&1 | tail -n 3
  done
fi

if [ "${SKIP_CUDA:-0}" != 1 ] && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } && ls src/ops/cuda/*.cu >/dev/null 2>&1; then
  echo "== CUDA build (compile only; GPU tests skip without a GPU)"
  cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DMAMBA_CUDA=ON \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DMAMBA_BUILD_TESTS=OFF >/dev/null
  cmake --build build/cuda -j "$JOBS"
else
  echo "== CUDA build skipped ($( [ -d src/ops/cuda ] && echo 'no nvcc, or SKIP_CUDA=1' || echo 'no CUDA backend in this version yet' ))"
fi
echo "== all test stages passed"
