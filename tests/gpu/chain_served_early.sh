#!/usr/bin/env bash
# GPU test (Note [Cached chains turn hot early]): a tune run fuses a chain and caches its kernel; a serve run
# fuses it from the cache after its first commits, long before CUDAL1_HOT_CALLS of them, and its outputs match
# ATen. Exit 77 = skipped (no GPU).
set -u
app=$1 dir=$2
rm -rf "$dir"
export CUDAL1_CACHE_DIR="$dir" CUDAL1_ENABLE=1 CUDAL1_LOG_LEVEL=info
echo "== 1. tune: the chain is fused and cached"
CUDAL1_MODE=tune "$app" tune
rc=$?
[ $rc -eq 0 ] || exit $rc
echo "== 2. serve: fused from the cache after 3 of its calls"
CUDAL1_MODE=serve "$app" serve || exit 1
