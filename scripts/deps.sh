#!/usr/bin/env bash
# Installs cudal1's build and test dependencies from Debian 12's packages (idempotent). Needs root or sudo.
# The CUDA headers (cuda.h, nvrtc.h) come from the CUDA toolkit in /usr/local/cuda (or $CUDA_HOME); the CUDA
# libraries themselves are optional at run time.
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libtorch-dev librocksdb-dev libspdlog-dev libfmt-dev libgtest-dev
      libbenchmark-dev libcli11-dev nlohmann-json3-dev libxxhash-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -f "$cuda/include/cuda.h" ] || [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "error: cudal1 builds against the CUDA headers cuda.h and nvrtc.h; none under $cuda/include (set CUDA_HOME)" >&2
  exit 1
fi
echo "dependencies ready"
