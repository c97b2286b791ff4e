#!/usr/bin/env bash
# GPU test: process 1 tunes and writes the cache, process 2 (a real app linked with libcudal1.so) hits it on
# first use. Exit 77 = skipped (no GPU).
set -u
writer=$1 reader=$2 dir=$3
rm -rf "$dir"
"$writer" "$dir"
rc=$?
[ $rc -eq 0 ] || exit $rc
CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$dir" CUDAL1_LOG_LEVEL=info "$reader"
