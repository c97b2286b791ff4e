#!/usr/bin/env bash
# Builds cudal1 from this checkout on the GPU machine (torch 2.11+cu130 from python3, Debian packages from
# .deps/ unpacked into a private prefix), then runs the GPU tests, the benchmarks and the example twice (the
# second run must hit the cache). Results go to $OUT (default ./out); the last lines printed are a summary.
# The example stage also records a profile run, pre-warms its signatures with `cudal1 warm` and serves them.
# Usage: scripts/gpu_run.sh [all|build|test|bench|hook|chains|steps|kernels|example]...   (default: all; bench =
# hook + chains + steps + kernels). CHAIN_REPS (default 30): repetitions a chain-suite row.
# CHAIN_ROWS='attention|bn_' runs only the chain-suite rows whose name holds one of the words (both sides);
# BENCH_ONLY='softmax|pool' runs only the kernel-benchmark rows whose name contains one of the words;
# BENCH_TIMEOUT (s, default 400) bounds that benchmark; CTEST_REGEX runs only the tests it matches, CTEST_EXCLUDE
# leaves out those it matches (e.g. '^Archs': the NVRTC arch sweep, which CI runs on the CPU).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
LOG="$OUT/gpu_run.log"
stages=${*:-all}
want() { [[ " $stages " == *" all "* || " $stages " == *" $1 "* ]]; }
say() { echo "== $*" | tee -a "$LOG"; }
summary=()

say "$(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$LOG"

DEPS=/opt/cudal1-deps
if [ ! -d "$DEPS/usr" ]; then
  mkdir -p "$DEPS"
  for f in .deps/*.deb; do dpkg -x "$f" "$DEPS"; done
fi
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
TP=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_LIB=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB:$LD_LIBRARY_PATH"
B=build-gpu

if want build; then
  say "configure + build"
  t0=$(date +%s)
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TP;$DEPS/usr" \
    -DCUDA_HOME=/usr/local/cuda >>"$LOG" 2>&1 && ninja -C $B >>"$LOG" 2>&1
  rc=$?
  summary+=("build: rc=$rc in $(( $(date +%s) - t0 )) s")
  [ $rc -eq 0 ] || { tail -40 "$LOG"; printf '%s\n' "${summary[@]}"; exit $rc; }
fi

if want test; then
  say "ctest"
  t0=$(date +%s)
  timeout "${CTEST_TIMEOUT:-480}" ctest --test-dir $B -V -j 8 ${CTEST_REGEX:+-R "$CTEST_REGEX"} ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"} >"$OUT/ctest.log" 2>&1
  rc=$?
  summary+=("ctest: rc=$rc in $(( $(date +%s) - t0 )) s; $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)")
  grep -E "Failed|\*\*\*" "$OUT/ctest.log" | head -20 | tee -a "$LOG"
fi

if want bench || want hook; then
  say "bench: hook overhead (one process, modes interleaved at random, 15 repetitions each)"
  timeout 200 taskset -c 3 $B/bench/bench_hook_overhead --benchmark_repetitions=15 \
    --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true >"$OUT/bench_hook.txt" 2>&1
  summary+=("bench_hook: rc=$?")
fi
if want bench || want chains; then
  say "bench: chains (torch.compile in Python, then bench_chains through the hook)"
  timeout 400 python3 bench/chains_compile.py "${CHAIN_REPS:-30}" >"$OUT/chains_compile.txt" 2>&1
  timeout 400 $B/bench/bench_chains "$OUT/chains_compile.txt" "${CHAIN_REPS:-30}" >"$OUT/bench_chains.txt" 2>&1
  summary+=("bench_chains: rc=$?")
fi
if want bench || want steps; then
  say "bench: steps (torch.compile in Python, then bench_steps through libcudal1.so, graphs on and off)"
  timeout 400 python3 bench/steps_compile.py 15 >"$OUT/steps_compile.txt" 2>&1
  for g in ${STEPS_GRAPHS:-on off}; do  # CUDAL1_GRAPHS for bench_steps
    rm -rf /tmp/cudal1_steps_cache
    CUDAL1_ENABLE=1 CUDAL1_MODE=tune CUDAL1_GRAPHS=$g CUDAL1_CACHE_DIR=/tmp/cudal1_steps_cache CUDAL1_LOG_LEVEL=info \
      timeout 300 $B/bench/bench_steps "$OUT/steps_compile.txt" 15 >"$OUT/bench_steps_graphs_$g.txt" 2>&1
    summary+=("bench_steps (graphs $g): rc=$? $(grep -E '^decode_step' "$OUT/bench_steps_graphs_$g.txt")")
  done
fi
if want bench || want kernels; then
  say "bench: kernels (${BENCH_ONLY:-all rows})"
  timeout "${BENCH_TIMEOUT:-400}" $B/bench/bench_kernels "${BENCH_TRIALS:-24}" "${BENCH_ONLY:-}" >"$OUT/bench_kernels.txt" 2>&1
  summary+=("bench_kernels: rc=$?")
fi

if want example; then
  CACHE=/tmp/cudal1_example_cache
  rm -rf "$CACHE"
  for run in 1 2; do
    say "example run $run (cache $CACHE)"
    CUDAL1_ENABLE=1 CUDAL1_CACHE_DIR="$CACHE" CUDAL1_LOG_LEVEL=info timeout 300 $B/examples/cudal1_example 200 \
      >"$OUT/example_run$run.txt" 2>&1
    summary+=("example run $run: rc=$? $(grep -E 'MATCH' "$OUT/example_run$run.txt" | tail -1)")
  done
  { $B/csrc/cli/cudal1 --cache-dir "$CACHE" cache ls; $B/csrc/cli/cudal1 --cache-dir "$CACHE" report; } \
    >"$OUT/cli.txt" 2>&1
  say "example in profile mode (every functional op counted and timed, nothing replaced)"
  rm -rf /tmp/cudal1_profile_cache
  CUDAL1_ENABLE=1 CUDAL1_MODE=profile CUDAL1_CACHE_DIR=/tmp/cudal1_profile_cache CUDAL1_PROFILE_SAMPLE=8 \
    timeout 300 $B/examples/cudal1_example 200 >"$OUT/example_profile.txt" 2>&1
  summary+=("example profile mode: rc=$? $(grep -E 'MATCH' "$OUT/example_profile.txt" | tail -1)")
  $B/csrc/cli/cudal1 --cache-dir /tmp/cudal1_profile_cache report >>"$OUT/example_profile.txt" 2>&1
  rm -rf /tmp/cudal1_fleet_cache && cp -r /tmp/cudal1_profile_cache /tmp/cudal1_fleet_cache  # for the fleet warm
  say "pre-warming: cudal1 warm tunes the profile run's hot signatures, then the example serves from that cache"
  t0=$(date +%s)
  timeout 600 $B/csrc/cli/cudal1 --cache-dir /tmp/cudal1_profile_cache warm >"$OUT/example_warm.txt" 2>&1
  summary+=("cudal1 warm: rc=$? in $(( $(date +%s) - t0 )) s; $(grep -E '^[0-9]+ signatures' "$OUT/example_warm.txt")")
  CUDAL1_ENABLE=1 CUDAL1_MODE=serve CUDAL1_CACHE_DIR=/tmp/cudal1_profile_cache CUDAL1_LOG_LEVEL=info \
    timeout 300 $B/examples/cudal1_example 200 >"$OUT/example_serve.txt" 2>&1
  summary+=("example serve mode after warm: rc=$? $(grep -E 'MATCH' "$OUT/example_serve.txt" | tail -1)")
  say "fleet warm (Note [Fleet warm]): two workers on GPU 0 share the profile run's list, then the same again (resume)"
  for pass in 1 2; do
    timeout 600 $B/csrc/cli/cudal1 --cache-dir /tmp/cudal1_fleet_cache warm --gpus 0,0 >"$OUT/fleet_warm$pass.txt" 2>&1
    summary+=("fleet warm pass $pass: rc=$? $(grep -E '^[0-9]+ signatures x' "$OUT/fleet_warm$pass.txt")")
  done
fi

say "summary"
printf '%s\n' "${summary[@]}" | tee -a "$LOG"
[ -f "$OUT/bench_hook.txt" ] && grep -E "_(median|cv) " "$OUT/bench_hook.txt"
[ -f "$OUT/bench_kernels.txt" ] && cat "$OUT/bench_kernels.txt"
for run in run1 run2 serve; do
  [ -f "$OUT/example_$run.txt" ] && grep -E "ms/iter|MATCH|cudal1 at end|speedup" "$OUT/example_$run.txt"
done
exit 0
