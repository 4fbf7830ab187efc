#!/usr/bin/env bash
# Installs the Debian 12 packages mamba.cpp builds and tests with (idempotent; needs root or sudo).
# Node.js and npm (for the HF tokenizers / OpenAI / HF inference oracles in the tests) are taken from
# Debian only when no `node`/`npm` is on PATH already (a newer Node install must not be replaced).
set -euo pipefail
PKGS=(build-essential cmake ninja-build pkg-config ccache git curl
      nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libpcre2-dev libutf8proc-dev
      libcpp-httplib-dev libhwy-dev libgtest-dev libgmock-dev
      libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
      clang-14 libclang-rt-14-dev python3-numpy)
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
