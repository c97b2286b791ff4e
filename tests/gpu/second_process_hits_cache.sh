#!/usr/bin/env bash
# GPU test: process 1 tunes and writes the cache, process 2 (a real app linked with libcudal1.so) hits it on
# first use. Then the same with the record moved to an older driver's fingerprint: served after verification
# where the move is allowed for the driver, not served where only torch may differ (Note [Cache transfer]).
# Exit 77 = skipped (no GPU).
set -u
writer=$1 reader=$2 dir=$3
rm -rf "$dir"
"$writer" "$dir"
rc=$?
[ $rc -eq 0 ] || exit $rc
CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$dir" CUDAL1_LOG_LEVEL=info "$reader" || exit 1
for mode in transfer refused; do
  rm -rf "$dir.$mode"
  "$writer" "$dir.$mode" "--$mode" || exit 1
  expect=""
  [ "$mode" = refused ] && expect=--expect-miss
  out=$(CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$dir.$mode" CUDAL1_LOG_LEVEL=info "$reader" $expect 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 0 ] || exit 1
  if [ "$mode" = transfer ]; then
    echo "$out" | grep -q "re-verified on this GPU" || { echo "FAIL: the transferred kernel was not re-verified"; exit 1; }
  fi
done
