#!/usr/bin/env bash
# Deployment example (GPU machine, after scripts/gpu_run.sh build): tune once, ship a bundle, serve elsewhere with
# no tuning. A "tuning node" runs GPT-2 small (scripts/models/export_models.py, TorchScript from C++) with
# CUDAL1_MODE=tune into cache A and exports this GPU's fingerprint as one bundle file; a "serving node" (a fresh
# cache B) imports the bundle and serves the model with CUDAL1_MODE=serve. Prints a table: C++ eager with cudal1
# off, the tuning node, the serving node from the bundle, and how many kernels the serving node compiled (must be
# 0: Note [Serve mode]). MODEL (default gpt2; resnet50 works too), TUNE_TIMEOUT (s, default 300), OUT (./out).
# Usage: scripts/deploy_example.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
OUT=${OUT:-$PWD/out}
M=${MODEL:-gpt2}
ITERS=${ITERS:-30}
W=${MODELS_DIR:-/tmp/cudal1_models}
RUNNER=$B/examples/cudal1_model_runner
CLI=$B/csrc/cli/cudal1
[ -x "$RUNNER" ] || { echo "no $RUNNER: build first (scripts/gpu_run.sh build)"; exit 1; }
export LD_LIBRARY_PATH="/opt/cudal1-deps/usr/lib/x86_64-linux-gnu:$(python3 -c \
  'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))'):${LD_LIBRARY_PATH:-}"
mkdir -p "$OUT" "$W"
[ -f "$W/$M.pt" ] || python3 scripts/models/export_models.py "$W" 5 "$M" >/dev/null 2>&1
declare -A spec=([resnet50]="f32:32x3x224x224" [gpt2]="i64:8x512:50257")
A=$W/deploy_tuning_node B_CACHE=$W/deploy_serving_node BUNDLE=$W/deploy_$M.bundle
rm -rf "$A" "$B_CACHE" "$BUNDLE"
LOG=$OUT/deploy_$M.txt
: >"$LOG"
run() { echo "== $1" | tee -a "$LOG"; shift; "$@" 2>&1 | tee -a "$LOG" | grep -E '^RESULT|cudal1:|imported|exported|error'; }
run "C++ eager, cudal1 off" env CUDAL1_ENABLE=0 timeout 600 "$RUNNER" "$W/$M.pt" "${spec[$M]}" "$ITERS" "$W/${M}_deploy_off.pt"
run "tuning node: CUDAL1_MODE=tune into cache A" env CUDAL1_ENABLE=1 CUDAL1_MODE=tune CUDAL1_CACHE_DIR="$A" \
  timeout "${TUNE_TIMEOUT:-300}" "$RUNNER" "$W/$M.pt" "${spec[$M]}" "$ITERS" "$W/${M}_deploy_tune.pt" "$W/${M}_deploy_off.pt"
run "tuning node: export this GPU's fingerprint" "$CLI" --cache-dir "$A" cache export --gpu current -o "$BUNDLE"
run "serving node: import the bundle into an empty cache B" "$CLI" --cache-dir "$B_CACHE" cache import "$BUNDLE"
run "serving node: CUDAL1_MODE=serve from cache B" env CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR="$B_CACHE" \
  CUDAL1_LOG_LEVEL=info timeout 600 "$RUNNER" "$W/$M.pt" "${spec[$M]}" "$ITERS" "$W/${M}_deploy_serve.pt" \
  "$W/${M}_deploy_off.pt"
"$CLI" --cache-dir "$B_CACHE" report >"$OUT/deploy_${M}_report.txt" 2>&1
val() { awk -v h="$1" -v k="$2" 'index($0, "== " h) == 1 {on = 1; next} /^== / {on = 0} on && $0 ~ k"=" {
  for (i = 1; i <= NF; ++i) if ($i ~ "^"k"=") { split($i, a, "="); v = a[2] } } END { print v }' "$LOG"; }
off=$(val "C++ eager" ms_per_iter); tune=$(val "tuning node: CUDAL1" ms_per_iter)
serve=$(val "serving node: CUDAL1" ms_per_iter); diff=$(val "serving node: CUDAL1" max_abs_diff)
compiled=$(grep -A100 "^== serving node: CUDAL1" "$LOG" | grep -o '[0-9]* kernels compiled' | head -1)
echo "== table ($M, ms per iteration; speedups over C++ eager with cudal1 off)" | tee "$OUT/deploy_${M}_table.txt"
awk -v m="$M" -v o="$off" -v t="$tune" -v s="$serve" -v d="$diff" -v c="$compiled" 'BEGIN {
  printf "%-8s off %.3f | tuning node %.3f (%.3fx) | serving node from the bundle %.3f (%.3fx), %s, max|diff| %s\n",
         m, o, t, (t > 0 ? o / t : 0), s, (s > 0 ? o / s : 0), c, d }' | tee -a "$OUT/deploy_${M}_table.txt"
case "$compiled" in "0 kernels compiled") ;; *) echo "FAIL: the serving node compiled kernels"; exit 1 ;; esac
