#!/usr/bin/env bash
# Downloads the Debian packages the GPU machine lacks into .deps/ (git-ignored), to be carried there and
# unpacked into a private prefix by scripts/gpu_run.sh (see shared/research/gpu-build.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
cd .deps
apt-get download librocksdb-dev librocksdb7.8 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libgtest-dev googletest \
  libgflags2.2 libgflags-dev libsnappy1v5 libsnappy-dev liburing2 libzstd-dev liblz4-dev libbz2-dev zlib1g-dev \
  liburing-dev libcli11-dev nlohmann-json3-dev libxxhash-dev libxxhash0 libbenchmark-dev libbenchmark1debian
ls -1 | wc -l
