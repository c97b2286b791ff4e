#!/usr/bin/env bash
# Host test of libcudal1.so's activation: off by default and silent; on with CUDAL1_ENABLE=1 (or off with one
# log line where there is no driver, or where CUDAL1_CUDA_LIBRARY names one that does not load), the app's results
# right either way; bad values warn; the library stays
# linked under --as-needed; LD_PRELOAD works; the CLI answers.
set -u
probe=$1 lib=$2 cli=$3 plain_linked=$4 plain=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out" 2>/dev/null; echo "--- stderr"; cat "$tmp/err" 2>/dev/null; exit 1; }
export CUDAL1_CACHE_DIR="$tmp/cache"
unset CUDAL1_ENABLE CUDAL1_LOG_LEVEL CUDAL1_MODE CUDAL1_HOT_CALLS

"$probe" >"$tmp/out" 2>"$tmp/err" || fail "probe failed with cudal1 off"
grep -q "off: CUDAL1_ENABLE is not set" "$tmp/out" || fail "off by default"
grep -q "result ok" "$tmp/out" || fail "wrong result with cudal1 off"
[ ! -s "$tmp/err" ] || fail "cudal1 printed something while off"
echo "ok: off by default, silent"
# Note [Forward graphs]: an app linked with cudal1 before torch calls TorchScript methods through cudal1's
# definition of torch::jit::Method::operator() (passed straight to libtorch's while cudal1 is off or on the CPU).
grep -q "forward graphs: 3 method calls reached cudal1," "$tmp/out" || fail "the app's TorchScript calls did not reach cudal1"
echo "ok: the app's TorchScript method calls reach cudal1 and compute right"

CUDAL1_ENABLE=1 "$probe" >"$tmp/out" 2>"$tmp/err" || fail "probe failed with cudal1 on"
grep -q "result ok" "$tmp/out" || fail "wrong result with cudal1 on"
if grep -q "on (tune)" "$tmp/out"; then
  echo "ok: on (a CUDA driver, NVRTC and a CUDA LibTorch are here)"
else
  grep -q "off: " "$tmp/out" || fail "neither on nor off"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "expected exactly one log line when turning itself off"
  echo "ok: turned itself off with one line: $(cat "$tmp/err")"
fi

# A driver path that does not load turns cudal1 off, naming it (no fall back to another driver), on any machine.
CUDAL1_ENABLE=1 CUDAL1_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$probe" >"$tmp/out" 2>"$tmp/err" ||
  fail "probe failed with a bad CUDAL1_CUDA_LIBRARY"
grep -q "result ok" "$tmp/out" || fail "wrong result with a bad CUDAL1_CUDA_LIBRARY"
grep -q "off: .*CUDAL1_CUDA_LIBRARY=/nonexistent/libcuda.so.1 does not load" "$tmp/out" ||
  fail "a bad CUDAL1_CUDA_LIBRARY did not turn cudal1 off, naming the path"
echo "ok: a bad CUDAL1_CUDA_LIBRARY turns cudal1 off, naming it"

CUDAL1_ENABLE=1 CUDAL1_HOT_CALLS=abc CUDAL1_MODE=fast "$probe" >"$tmp/out" 2>"$tmp/err" || fail "bad values aborted"
grep -q "CUDAL1_HOT_CALLS='abc' is not an integer; using 50" "$tmp/err" || fail "no warning for a bad integer"
grep -q "CUDAL1_MODE='fast' is not tune, serve or profile" "$tmp/err" || fail "no warning for a bad mode"
grep -q "result ok" "$tmp/out" || fail "wrong result after bad values"
echo "ok: bad values warn and keep defaults"

readelf -d "$plain_linked" | grep -q "libcudal1" || fail "--as-needed dropped libcudal1 from an app that calls nothing in it"
CUDAL1_ENABLE=1 CUDAL1_LOG_LEVEL=info "$plain_linked" >"$tmp/out" 2>"$tmp/err" || fail "linked plain app failed"
grep -q "plain app sum ok" "$tmp/out" || fail "linked plain app computed wrong"
grep -q "\[cudal1\]" "$tmp/err" || fail "cudal1 did not initialise in an app linked under --as-needed"
echo "ok: linked under -Wl,--as-needed and initialised"

readelf -d "$plain" | grep -q "libcudal1" && fail "the plain app must not link cudal1"
CUDAL1_ENABLE=1 CUDAL1_LOG_LEVEL=info LD_PRELOAD="$lib" "$plain" >"$tmp/out" 2>"$tmp/err" || fail "preloaded app failed"
grep -q "plain app sum ok" "$tmp/out" || fail "preloaded app computed wrong"
grep -q "\[cudal1\]" "$tmp/err" || fail "cudal1 did not initialise under LD_PRELOAD"
echo "ok: LD_PRELOAD"

"$cli" --help >"$tmp/out" 2>&1 && grep -q "cache" "$tmp/out" || fail "cudal1 --help"
"$cli" --cache-dir "$tmp/empty" cache ls >"$tmp/out" 2>&1 && grep -q "(empty)" "$tmp/out" || fail "cache ls on an empty cache"
"$cli" --cache-dir "$tmp/empty" report >"$tmp/out" 2>&1 && grep -q "no recorded runs" "$tmp/out" || fail "report without runs"
"$cli" env >"$tmp/out" 2>&1 && grep -q "CUDAL1_HOT_CALLS" "$tmp/out" || fail "cudal1 env"
"$cli" cache >"$tmp/out" 2>&1 && fail "cache without a subcommand must fail"
"$cli" --cache-dir "$tmp/empty" cache clear >"$tmp/out" 2>&1 && fail "clear without a target must fail"
echo "ok: CLI"
echo PASS
