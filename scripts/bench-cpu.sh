#!/usr/bin/env bash
# Issue 5's CPU goal table: builds bench_cpu (Release) and runs it on random-weight mamba-130m and
# mamba2-130m checkpoints in bf16 — plus q8 / q4 copies once `mamba-cli quantize` exists.
#   bash scripts/bench-cpu.sh [bench_cpu options]      e.g. --threads 2 --prompt-lens 512
#   (the default precision, auto, runs the bf16 checkpoints in the bf16 tier on CPUs with AVX-512 BF16
#   and the q8 / q4 copies exact; --precision exact: every checkpoint in the exact tier; --precision
#   int8: the q8 / q4 copies only, loaded with the int8 tier; --precision bf16: the bf16 checkpoints only)
# The checkpoints are made once with ../shared/tools/make_checkpoint.py (python3-numpy) and cached
# under $MODELS. Run it on an otherwise idle machine: other load shows as a cpu column below ~90%.
# Env: BUILD (default build/release), MODELS (default $BUILD/bench-models), MAMBA_SHARED_DIR
# (default ../shared), JOBS (build parallelism, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build/release}
MODELS=${MODELS:-$BUILD/bench-models}
SHARED=${MAMBA_SHARED_DIR:-../shared}
JOBS=${JOBS:-2}
export CCACHE_BASEDIR=$PWD

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target bench_cpu mamba-cli

mkdir -p "$MODELS"
dirs=() qdirs=()
for preset in mamba-130m mamba2-130m; do
  d=$MODELS/$preset-bf16
  if [ ! -f "$d/config.json" ]; then
    rm -rf "$d.tmp"
    /usr/bin/python3 "$SHARED/tools/make_checkpoint.py" "$preset" "$d.tmp" --dtype bf16
    mv "$d.tmp" "$d"
  fi
  dirs+=("$d")
done
if "$BUILD/mamba-cli" --help 2>&1 | grep -qw quantize; then
  for preset in mamba-130m mamba2-130m; do
    for type in q8 q4; do
      q=$MODELS/$preset-$type
      [ -f "$q/config.json" ] || "$BUILD/mamba-cli" quantize -m "$MODELS/$preset-bf16" --type "$type" -o "$q"
      qdirs+=("$q")
    done
  done
else
  echo "(mamba-cli has no quantize command yet: q8/q4 rows skipped)"
fi
# The int8 tier applies to quantized checkpoints only: with --precision int8, the q8 / q4 copies
# alone. The bf16 tier applies to float projections (a q8 / q4 Mamba-2 copy has none and is refused):
# with --precision bf16, the bf16 checkpoints alone.
prev=
for a in "$@"; do
  tier=
  case "$a" in --precision=*) tier=${a#--precision=} ;; *) [ "$prev" = --precision ] && tier=$a ;; esac
  prev=$a
  if [ "$tier" = int8 ]; then
    [ ${#qdirs[@]} -gt 0 ] || { echo "error: --precision int8 needs the q8 / q4 copies (mamba-cli quantize)" >&2; exit 2; }
    exec "$BUILD/bench_cpu" "${qdirs[@]}" "$@"
  fi
  [ "$tier" = bf16 ] && exec "$BUILD/bench_cpu" "${dirs[@]}" "$@"
done
exec "$BUILD/bench_cpu" "${dirs[@]}" "${qdirs[@]}" "$@"
