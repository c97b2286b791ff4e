#!/usr/bin/env bash
# Profiles one kernel variant with Nsight Compute on the GPU machine (after scripts/gpu_run.sh build): the bench
# tunes only the rows whose name contains ROW and only the variants whose id contains VARIANT (a trailing '$'
# anchors it at the id's end: 'async1$' leaves out the '...async1.pair1' twin), and ncu reports the 7th launch of
# KERNEL (after verification's launches: a warm, timed one). Clocks are left alone.
# Usage: scripts/profile_variant.sh ROW VARIANT KERNEL [OUTFILE]   e.g. 'layer_norm f32 [64' mode8 cudal1_norm
set -u
ROW=$1 VARIANT=$2 KERNEL=$3 OUTFILE=${4:-/dev/stdout}
B=${BUILD_DIR:-build-gpu}
TORCH_LIB=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH=/opt/cudal1-deps/usr/lib/x86_64-linux-gnu:$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout "${PROFILE_TIMEOUT:-150}" ncu --clock-control none --kernel-name "$KERNEL" --launch-skip 6 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats --section SchedulerStats \
  "$B/bench/bench_kernels" 1 "$ROW" "$VARIANT" >"$OUTFILE" 2>&1
echo "profile $ROW / $VARIANT: rc=$?"
