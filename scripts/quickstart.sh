#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install what is missing, build (Release), and generate
# text from the embedded default model. Extra arguments go to `mamba-cli run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export CCACHE_BASEDIR=$PWD   # reuse earlier compiles of other checkouts
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target mamba-cli -j "$(nproc)"
if [ $# -eq 0 ]; then set -- -p "It was a dark and stormy night" -n 64; fi
exec build/release/mamba-cli run "$@"
