#!/usr/bin/env bash
# End-to-end measurement on real models (GPU machine, after scripts/gpu_run.sh build): torchvision's ResNet-50
# (batch 32, fp32), transformers' GPT-2 small (fp16, 8x512) and, with MODELS naming them, an 8-layer
# Llama-architecture decoder (llama) and BERT-base's encoder (bert), both fp16, 8x512 (scripts/models/export_models.py),
# built from their configs with random weights, traced to TorchScript and served by a plain C++ app
# (examples/model_runner.cpp) with cudal1 off, tuning (CUDAL1_MODE=tune: tune, wait for the tuner, then time) and
# serving from that cache (CUDAL1_MODE=serve); and the same models in Python, eager and torch.compile, in the same
# run. Outputs are compared with the cudal1-off run.
# Usage: scripts/real_models.sh [build-dir]   (OUT: where results go, default ./out). Prints a table last.
# MODELS="resnet50 gpt2" picks models; MODELS_DIR (default /tmp/cudal1_models) keeps the traced models and the
# Python timings between calls (exported once); TUNE_TIMEOUT (s, default 400) bounds a tuning run. The C++ app also
# runs with PyTorch TunableOp (cudal1 off, every GEMM shape's algorithm tuned at its first call), the GEMM-only
# peer (TUNABLEOP_TIMEOUT, s, default 900, bounds it); TUNABLEOP=0 leaves that run out. Llama's tune run needs more
# than 110 s of TUNE_TIMEOUT on an H100.
# HOSTPROF=/path/hostprof.so preloads bench/probes/hostprof.cpp into each runner: $OUT/<model>_<mode>.prof holds
# the main thread's stack samples over the timed loops (bench/probes/hostprof_report.py reads them).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
OUT=${OUT:-$PWD/out}
ITERS=${ITERS:-30}
W=${MODELS_DIR:-/tmp/cudal1_models}
MODELS=${MODELS:-resnet50 gpt2}
mkdir -p "$OUT" "$W"
RUNNER=$B/examples/cudal1_model_runner
CLI=$B/csrc/cli/cudal1
[ -x "$RUNNER" ] || { echo "no $RUNNER: build first (scripts/gpu_run.sh build)"; exit 1; }

# The GPU machine's layout (scripts/gpu_run.sh): Debian packages unpacked into a prefix, torch from python3.
export LD_LIBRARY_PATH="/opt/cudal1-deps/usr/lib/x86_64-linux-gnu:$(python3 -c \
  'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))'):${LD_LIBRARY_PATH:-}"
todo=""
for m in $MODELS; do
  [ -f "$W/$m.pt" ] && grep -q "model=$m mode=compile" "$W/models_python.txt" 2>/dev/null || todo="$todo,$m"
done
if [ -n "$todo" ]; then
  echo "== export + Python eager / torch.compile: ${todo#,} ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  timeout 900 python3 scripts/models/export_models.py "$W" "$ITERS" "${todo#,}" >>"$W/models_python.txt" 2>&1
fi
cp "$W/models_python.txt" "$OUT/models_python.txt"
cp "$W"/*_kernels.txt "$OUT/" 2>/dev/null
grep -E '^PY|^SYNC' "$OUT/models_python.txt" || tail -20 "$OUT/models_python.txt"

declare -A spec=([resnet50]="f32:32x3x224x224" [gpt2]="i64:8x512:50257" [llama]="i64:8x512:32000"
  [bert]="i64:8x512:30522")
prof() { [ -n "${HOSTPROF:-}" ] && echo "LD_PRELOAD=$HOSTPROF HOSTPROF_OUT=$OUT/$1.prof"; }
# Says how the runner of the pipeline just before ended, unless it ended well (124: its timeout killed it, before
# its RESULT line; a tune run's cache then holds what the tuner had finished).
said() {
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || echo "   ($1 ended with status $rc$([ "$rc" = 124 ] && echo ': killed by its timeout'))" |
    tee -a "$OUT/$1.txt"
}
for m in $MODELS; do
  cache="$W/cache_$m"
  echo "== $m: cudal1 off"
  env $(prof "${m}_off") CUDAL1_ENABLE=0 timeout 600 "$RUNNER" "$W/$m.pt" "${spec[$m]}" "$ITERS" "$W/${m}_off.pt" 2>&1 | tee "$OUT/${m}_off.txt" | grep -E '^RESULT|cudal1:'
  said "${m}_off"
  if [ "${TUNABLEOP:-1}" = 1 ]; then  # the GEMM-only peer a C++ app can switch on: PyTorch TunableOp, cudal1 off
    echo "== $m: PyTorch TunableOp (cudal1 off; each GEMM shape's algorithm tuned at its first call, in the warm-up)"
    # Its results file (a device-ordinal suffix added) stays in $W: a later call tunes only the shapes still missing.
    CUDAL1_ENABLE=0 PYTORCH_TUNABLEOP_ENABLED=1 PYTORCH_TUNABLEOP_TUNING=1 \
      PYTORCH_TUNABLEOP_FILENAME="$W/${m}_tunableop_results.csv" timeout "${TUNABLEOP_TIMEOUT:-900}" "$RUNNER" \
      "$W/$m.pt" "${spec[$m]}" "$ITERS" "$W/${m}_tunableop.pt" "$W/${m}_off.pt" 2>&1 | tee "$OUT/${m}_tunableop.txt" |
      grep -E '^RESULT'
    said "${m}_tunableop"
    cp "$W/${m}"_tunableop_results*.csv "$OUT/" 2>/dev/null
  fi
  echo "== $m: cudal1 tune (then wait for the tuner and time)"
  env $(prof "${m}_tune") CUDAL1_ENABLE=1 CUDAL1_MODE=tune CUDAL1_CACHE_DIR="$cache" timeout "${TUNE_TIMEOUT:-400}" "$RUNNER" "$W/$m.pt" "${spec[$m]}" "$ITERS" \
    "$W/${m}_tune.pt" "$W/${m}_off.pt" 2>&1 | tee "$OUT/${m}_tune.txt" | grep -E '^RESULT|cudal1:'
  said "${m}_tune"
  echo "== $m: cudal1 serve (from the tune run's cache)"
  "$CLI" --cache-dir "$cache" report >"$OUT/${m}_tune_report.txt" 2>&1
  env $(prof "${m}_serve") CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$cache" timeout 600 "$RUNNER" "$W/$m.pt" "${spec[$m]}" "$ITERS" \
    "$W/${m}_serve.pt" "$W/${m}_off.pt" 2>&1 | tee "$OUT/${m}_serve.txt" | grep -E '^RESULT|cudal1:'
  said "${m}_serve"
  "$CLI" --cache-dir "$cache" report >"$OUT/${m}_report.txt" 2>&1
  cp "$OUT/${m}_off.txt" "$OUT/${m}_tune.txt" "$OUT/${m}_serve.txt" "$OUT/${m}_tunableop.txt" "$W/" 2>/dev/null
done

echo "== table (ms per iteration, median of 5 rounds of $ITERS; speedups over C++ eager with cudal1 off)"
val() { grep -o "$2=[0-9.e+-]*" "$1" 2>/dev/null | tail -1 | cut -d= -f2; }
printf '%-9s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %14s\n' model cpp_off tunableop tune serve py_eager compile \
  tunop_x tune_x serve_x compile_x "max|diff|/scale"
for m in $MODELS; do
  [ -f "$W/${m}_off.txt" ] || continue
  for f in off tune serve tunableop; do cp "$W/${m}_$f.txt" "$OUT/" 2>/dev/null; done
  off=$(val "$OUT/${m}_off.txt" ms_per_iter); tune=$(val "$OUT/${m}_tune.txt" ms_per_iter)
  serve=$(val "$OUT/${m}_serve.txt" ms_per_iter); top=$(val "$OUT/${m}_tunableop.txt" ms_per_iter)
  pe=$(grep "model=$m mode=eager" "$OUT/models_python.txt" | grep -o 'ms_per_iter=[0-9.]*' | cut -d= -f2)
  pc=$(grep "model=$m mode=compile" "$OUT/models_python.txt" | grep -o 'ms_per_iter=[0-9.]*' | cut -d= -f2)
  d=$(val "$OUT/${m}_serve.txt" max_abs_diff); s=$(val "$OUT/${m}_serve.txt" scale)
  awk -v m="$m" -v off="$off" -v to="$top" -v t="$tune" -v sv="$serve" -v pe="$pe" -v pc="$pc" -v d="$d" -v s="$s" '
  BEGIN {
    r = (off > 0 && t > 0) ? off / t : 0; rs = (off > 0 && sv > 0) ? off / sv : 0; rc = (off > 0 && pc > 0) ? off / pc : 0
    ro = (off > 0 && to > 0) ? off / to : 0
    printf "%-9s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7.3fx %7.3fx %7.3fx %7.3fx %14.3g\n", m, off, to, t, sv, pe, pc,
      ro, r, rs, rc, (s > 0 ? d / s : -1) }'
done | tee "$OUT/real_models_table.txt"
echo "== latency (ms per forward when the app waits for each one: RESULT ms_synced)" | tee -a "$OUT/real_models_table.txt"
for m in $MODELS; do
  [ -f "$OUT/${m}_off.txt" ] || continue
  off=$(val "$OUT/${m}_off.txt" ms_synced); sv=$(val "$OUT/${m}_serve.txt" ms_synced)
  awk -v m="$m" -v o="$off" -v s="$sv" 'BEGIN { if (o > 0 && s > 0) printf "%-9s off %.3f serve %.3f (%.3fx)\n", m, o, s, o / s }'
done | tee -a "$OUT/real_models_table.txt"
echo "== GPU time of one forward, the host out of the way (ms; RESULT ms_gpu, PY ms_gpu)" | tee -a "$OUT/real_models_table.txt"
for m in $MODELS; do
  [ -f "$OUT/${m}_off.txt" ] || continue
  pe=$(grep "model=$m mode=eager" "$OUT/models_python.txt" | grep -o 'ms_gpu=[0-9.-]*' | cut -d= -f2)
  pc=$(grep "model=$m mode=compile" "$OUT/models_python.txt" | grep -o 'ms_gpu=[0-9.-]*' | cut -d= -f2)
  echo "$m off $(val "$OUT/${m}_off.txt" ms_gpu) serve $(val "$OUT/${m}_serve.txt" ms_gpu) py_eager ${pe:-?} compile ${pc:-?}" \
    "host: off $(val "$OUT/${m}_off.txt" ms_host) serve $(val "$OUT/${m}_serve.txt" ms_host)"
done | tee -a "$OUT/real_models_table.txt"
