#!/usr/bin/env bash
# Sets up (Debian packages), builds and installs cudal1 into ./install, builds the example app against the
# installed package (find_package(cudal1), one target_link_libraries line), and runs it with CUDAL1_ENABLE=1.
# On a machine without a GPU it runs on the CPU and says so; cudal1 says why it stays off.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PWD/install"
cmake --build build -j "$(nproc)" --target cudal1_shared cudal1_cli cudal1_warm
cmake --install build >/dev/null
cmake -S examples -B build-example -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PWD/install"
cmake --build build-example
echo "---- running the example with CUDAL1_ENABLE=1 (cache: ${CUDAL1_CACHE_DIR:-default})"
CUDAL1_ENABLE=1 CUDAL1_LOG_LEVEL=${CUDAL1_LOG_LEVEL:-info} build-example/cudal1_example "${ITERS:-200}"
echo "---- what cudal1 recorded (install/bin/cudal1 report)"
install/bin/cudal1 report
