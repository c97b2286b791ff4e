#!/usr/bin/env bash
# GPU test (Note [Cache healing], Note [Serve mode]): an app in serve mode over a damaged cache always runs and its
# result equals ATen's, and the run after it has a working cache. Damage: random bytes flipped in every file of the
# database, every file truncated to half, a garbage CURRENT, a file where the directory should be, a read-only
# directory; and a record whose cubin the driver cannot load (served by ATen, with one warning).
# Usage: damaged_cache.sh WRITER READER CLI DIR. Exit 77 = skipped (no GPU).
set -u
writer=$1 reader=$2 cli=$3 dir=$4
serve() { CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$dir" CUDAL1_LOG_LEVEL=info "$reader" --any 2>&1; }
fresh() {
  chmod -R u+w "$dir"* 2>/dev/null
  rm -rf "$dir" "$dir".corrupt-*
  "$writer" "$dir" "$@" >/dev/null
}
fresh
rc=$?
[ $rc -eq 0 ] || exit $rc
flip() { for f in "$dir"/*; do [ -f "$f" ] && [ -s "$f" ] || continue
  python3 - "$f" <<'P'
import random, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); r = random.Random(len(b))
for _ in range(max(1, len(b) // 64)): b[r.randrange(len(b))] ^= 0xff
open(p, 'wb').write(bytes(b))
P
done; }
truncate_all() { for f in "$dir"/*; do [ -f "$f" ] && truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"; done; }
garbage_current() { echo garbage > "$dir/CURRENT"; }
file_for_dir() { rm -rf "$dir"; echo "not a directory" > "$dir"; }
read_only() { chmod -R a-w "$dir"; }
for damage in flip truncate_all garbage_current file_for_dir read_only; do
  echo "== $damage"
  fresh || exit 1
  $damage
  out=$(serve); rc=$?
  echo "$out" | grep -E "ok:|FAIL|unusable|corrupt|not writable|not checked" | head -4
  [ $rc -eq 0 ] || { echo "FAIL: the app failed over a damaged cache ($damage)"; echo "$out" | tail -5; exit 1; }
  chmod -R u+w "$dir" 2>/dev/null
  out=$(serve); rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: the next run failed ($damage)"; exit 1; }
  if [ -d "$dir" ]; then "$cli" --cache-dir "$dir" cache ls >/dev/null || { echo "FAIL: no working cache after $damage"; exit 1; }; fi
done
echo "== a record whose cubin cannot be loaded"
fresh --bad-cubin || exit 1
out=$(serve); rc=$?
echo "$out" | grep -E "ok:|not used|FAIL" | head -3
[ $rc -eq 0 ] || { echo "FAIL: the app failed over an unloadable cached kernel"; exit 1; }
echo "$out" | grep -q "ok: the result equals ATen's (by ATen)" || { echo "FAIL: expected ATen to serve the call"; exit 1; }
[ "$(echo "$out" | grep -c "not used")" -eq 1 ] || { echo "FAIL: expected one warning for the unloadable kernel"; exit 1; }
chmod -R u+w "$dir"* 2>/dev/null
rm -rf "$dir" "$dir".corrupt-*
echo "ok: every damaged cache served the app with ATen's result, and the next run had a working cache"
