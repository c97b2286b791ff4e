#!/usr/bin/env bash
# GPU test of pre-warming, the deployment path: an app run in profile mode records its hot signatures (no
# tuning); `cudal1 warm` tunes them from that run into the cache; a second `cudal1 warm` finds them all cached;
# the app in serve mode then takes every signature's outcome from the cache on first use, and its outputs
# match ATen; a missing device and a cache that cannot be written are errors. Exit 77 = skipped (no GPU).
set -u
app=$1 cli=$2 dir=$3
rm -rf "$dir"
export CUDAL1_CACHE_DIR="$dir"
echo "== 1. record (CUDAL1_MODE=profile)"
CUDAL1_ENABLE=1 CUDAL1_MODE=profile "$app" record
rc=$?
[ $rc -eq 0 ] || exit $rc
"$cli" report || exit 1
echo "== 2. cudal1 warm (the newest app run)"
"$cli" warm --timeout 500 | tee "$dir.warm1"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "FAIL: cudal1 warm failed"; exit 1; }
grep -qE "^3 signatures \(3 outcomes\): [1-3] kernels" "$dir.warm1" || { echo "FAIL: expected 3 tuned, >= 1 kernel"; exit 1; }
grep -qE "tuned as: aten::native_layer_norm" "$dir.warm1" || {
  echo "FAIL: the recorded aten::layer_norm (a composite op) should have tuned aten::native_layer_norm"; exit 1; }
"$cli" cache ls || exit 1
"$cli" cache verify | tee "$dir.verify"
[ "${PIPESTATUS[0]}" -eq 0 ] && grep -q "every record is sound" "$dir.verify" || {
  echo "FAIL: cudal1 cache verify should load every warmed kernel on this GPU"; exit 1; }
"$cli" report --runs | grep -q "tune/warm" || { echo "FAIL: the warm run is not marked in cudal1 report --runs"; exit 1; }
echo "== 3. cudal1 warm again: nothing left to tune"
"$cli" warm --timeout 500 | tee "$dir.warm2"
grep -qE "^3 signatures \(3 outcomes\): 0 kernels, 0 stay on ATen, 3 already cached" "$dir.warm2" || {
  echo "FAIL: expected all 3 already cached"; exit 1; }
echo "== 4. serve (CUDAL1_MODE=serve): first calls from the cache"
CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_LOG_LEVEL=info "$app" serve || exit 1
echo "== 5. errors: a device that is not there, a cache that cannot keep the outcome"
echo 'aten::relu(f32[1024,1024]{1024,1})' > "$dir.one"
"$cli" warm --signatures "$dir.one" --device 99 | tee "$dir.dev"
[ "${PIPESTATUS[0]}" -eq 1 ] && grep -q "no CUDA device 99" "$dir.dev" || { echo "FAIL: --device 99"; exit 1; }
"$cli" --cache-dir /dev/null/cache warm --signatures "$dir.one" | tee "$dir.bad"
[ "${PIPESTATUS[0]}" -eq 1 ] && grep -q "tuned, but not in the cache at /dev/null/cache" "$dir.bad" || {
  echo "FAIL: an outcome the cache did not keep must be an error"; exit 1; }
echo "ok: recorded, warmed, served from the cache; bad device and unwritable cache reported"
