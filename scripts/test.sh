#!/usr/bin/env bash
# Sets up (Debian packages), builds and runs the whole test suite. GPU tests skip with a reason where there is
# no GPU; scripts/gpu_run.sh runs them on a GPU machine. Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
scripts/deps.sh
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$B" -j "$(nproc)"
ctest --test-dir "$B" --output-on-failure -j "$(nproc)"
