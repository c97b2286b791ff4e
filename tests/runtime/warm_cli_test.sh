#!/usr/bin/env bash
# Host test of `cudal1 warm` and `cudal1 source` (no GPU needed, and none used where there is one): where
# signatures come from (text, JSON report, JSON array, the newest recorded run), the dry run's verdicts, and the
# clear errors: an unreadable file, no runs, bad JSON, conflicting options, and cudal1 being off (no driver here,
# or a CPU-only LibTorch); the sources of a signature's variants and source's errors.
set -u
cli=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fails=0
check() {  # check NAME EXPECTED_RC PATTERN COMMAND...: runs COMMAND, wants its exit code and PATTERN in its output
  local name=$1 want=$2 pat=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
    echo "FAIL $name: rc $rc (want $want), pattern '$pat' in:"
    echo "$out" | sed 's/^/    /'
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
cat > sigs.txt <<'S'
# one signature a line; comments and blank lines are ignored
aten::gelu(f32[4,6]{6,1}, approximate='tanh')

aten::bmm(f32[2,4,4]{16,4,1}, f32[2,4,4]{16,4,1})
aten::_log_softmax(bf16[32,32000,64]{2048000,64,1}, 1, False)
aten::gelu(f32[4,6]{6,1}, approximate='tanh')
S
cat > report.json <<'S'
{"run_id": "1-2", "mode": "profile", "signatures": [
  {"signature": "aten::relu(f16[128,64]{64,1})", "hot": true, "calls": 60},
  {"signature": "aten::tanh(f32[64]{1})", "hot": false, "calls": 3}]}
S
echo '["aten::relu(f32[8]{1})", {"signature": "aten::relu(f33[8]{1})"}]' > list.json
echo '{"signatures": 3}' > odd.json
echo '[1, 2]' > ints.json
echo '{"signatures": [' > broken.json
c="$cli --cache-dir $work/cache"

check "dry run of a text list (a repeat dropped)" 0 "^3 signatures \(3 outcomes\): 0 kernels.* 3 checked, 0 skipped, 0 errors" \
  $c warm --signatures sigs.txt --dry-run
check "a foreign op is checked, with a note" 0 "note: not an op cudal1 tunes itself" \
  $c warm --signatures sigs.txt --dry-run
printf 'aten::relu(f32[2]{1}@cpu)\naten::relu(f32[2]{1})\n' > cpu.txt
check "a CPU signature is skipped" 0 "^2 signatures \(2 outcomes\): .*1 checked, 1 skipped, 0 errors" \
  $c warm --signatures cpu.txt --dry-run
check "... with the reason" 0 "note: Unsupported: argument self: a cpu tensor: only CUDA signatures are rebuilt" \
  $c warm --signatures cpu.txt --dry-run
cat > chains.txt <<'S'
chain %0 = aten::add.Tensor(f16[8,768]{768,1}, f16[8,768]{768,1}, alpha=1) <- ext0 ext1 | %1 = aten::native_layer_norm(f16[8,768]{768,1}, [768], f16[768]{1}, f16[768]{1}, 1.0000000000000001e-05) <- %0.0 ext2 ext3
chain %0 = aten::relu(f32[4]{1}) <- ext0
chain %0 = aten::sigmoid(f16[64,64]{64,1}) <- ext0 | %1 = aten::mul.Tensor(f16[64,64]{64,1}, f16[64,64]{64,1}) <- ext0 %3.0
chain %0 = aten::sigmoid(f16[64,64]{64,1}) <- ext0 | %1 = aten::mul.Tensor(f16[64,64]{64,1}, f16[64,64]{64,1}) <- ext0 ext1 ext2
S
cat > chain_report.json <<'S'
{"run_id": "1-3", "mode": "tune", "signatures": [{"signature": "aten::relu(f16[128,64]{64,1})", "hot": true}],
 "chains": [{"key": "chain %0 = aten::sigmoid(f16[64,64]{64,1}) <- ext0 | %1 = aten::mul.Tensor(f16[64,64]{64,1}, f16[64,64]{64,1}) <- ext0 %0.0", "state": "fused"},
            {"key": "chain %0 = aten::tanh(f32[64]{1}) <- ext0 | %1 = aten::exp(f32[64]{1}) <- %0.0", "state": "cold"}]}
S
check "chains by their cache keys: a residual + layer norm rebuilds" 1 "^checked .* chain %0 = aten::add.Tensor" \
  $c warm --signatures chains.txt --dry-run
check "... a one-node chain, a source from a later node, too many sources: errors" 1 \
  "2 checked|1 checked, 0 skipped, 3 errors" $c warm --signatures chains.txt --dry-run
check "... with the reasons" 1 "a chain has at least two nodes" $c warm --signatures chains.txt --dry-run
check "... a later node's output" 1 "chain source %3.0 is not an earlier node's output" \
  $c warm --signatures chains.txt --dry-run
check "... more sources than arguments" 1 "node 1: more sources than tensor arguments" \
  $c warm --signatures chains.txt --dry-run
# Note [Matmul views]: eager attention's chain, whose scale and second bmm read reshapes of a node's output.
cat > attention.txt <<'S'
chain %0 = aten::bmm(f16[2,16,8]{128,8,1}, f16[2,8,16]{128,1,8}) <- ext0 ext1 | %1 = aten::mul.Scalar(f16[1,2,16,16]{512,256,16,1}, 0.25) <- %0.0:view | %2 = aten::_softmax(f16[1,2,16,16]{512,256,16,1}, -1, False) <- %1.0 | %3 = aten::bmm(f16[2,16,16]{256,16,1}, f16[2,16,8]{128,8,1}) <- %2.0:view ext2
chain %0 = aten::bmm(f16[2,16,8]{128,8,1}, f16[2,8,16]{128,1,8}) <- ext0 ext1 | %1 = aten::mul.Scalar(f16[1,2,16,16]{512,256,16,1}, 0.25) <- %0.0:views
S
check "an attention chain reading views of its nodes' outputs rebuilds" 1 "^checked .* chain %0 = aten::bmm" \
  $c warm --signatures attention.txt --dry-run
check "... a source that is neither %p.i nor %p.i:view is an error" 1 "chain source '%0.0:views' does not parse" \
  $c warm --signatures attention.txt --dry-run
check "a report gives its hot chains after its hot signatures" 0 "^2 signatures \(2 outcomes\): .*2 checked" \
  $c warm --signatures chain_report.json --dry-run
check "--all gives its cold chains too" 0 "^3 signatures \(3 outcomes\): .*3 checked" \
  $c warm --signatures chain_report.json --all --dry-run
check "a report gives its hot signatures" 0 "^1 signatures \(1 outcomes\): .*1 checked" $c warm --signatures report.json --dry-run
check "--all gives every signature" 0 "^2 signatures \(2 outcomes\): .*2 checked" $c warm --signatures report.json --all --dry-run
check "a JSON list; a bad signature is an error" 1 "note: InvalidArgument: argument self: unknown dtype 'f33'" \
  $c warm --signatures list.json --dry-run
check "an error sets the exit code" 1 "1 checked, 0 skipped, 1 errors" $c warm --signatures list.json --dry-run
check "unreadable file" 1 "cannot read missing.txt" $c warm --signatures missing.txt
check "JSON that is not a list of signatures" 1 "neither a run report nor a list" $c warm --signatures odd.json
check "a JSON list of numbers" 1 "neither a string nor" $c warm --signatures ints.json
check "broken JSON" 1 "does not parse" $c warm --signatures broken.json
check "no recorded runs" 1 "no recorded app runs in $work/cache" $c warm
check "an unknown run" 1 "no run 42" $c warm --run 42
check "--run and --signatures exclude each other" 108 "excludes" $c warm --run 1 --signatures sigs.txt
check "no hot signatures" 1 "no signatures to warm .*--all" $c warm --signatures /dev/null
# Without a GPU (no driver, or a CPU-only LibTorch) cudal1 is off: tuning is refused with the reason. On a GPU
# machine cudal1 is on, so the foreign signature is only skipped (gpu.warm_then_serve tests tuning there).
echo 'aten::bmm(f32[2,4,4]{16,4,1}, f32[2,4,4]{16,4,1})' > foreign.txt
if $c warm --signatures foreign.txt 2>&1 | grep -q "cudal1 is off"; then
  check "cudal1 off: nothing warmed, and why" 1 "cudal1 warm: cudal1 is off: .*nothing warmed" \
    $c warm --signatures foreign.txt
else
  check "cudal1 on (a GPU here): a foreign op is skipped" 0 "note: its call reaches no op cudal1 tunes" \
    $c warm --signatures foreign.txt
fi
check "--help names the sources" 0 "a run report \(.cudal1 report --json.\)" $c warm --help
# `cudal1 source` (cudal1::kernel_source through cudal1-warm --source): planned on the meta device, no GPU used.
stem="aten::max_pool2d_with_indices(f16[64,64,112,112]{802816,12544,112,1}, [3, 3], [2, 2], [1, 1], [1, 1], False)"
pair4=opw1.oph1.block128.smem0.px0.slide0.seg0.cpx1.walk0.flat0.pair4
check "source: the stem's space, packed pairs in it" 0 "^$pair4\$" $c source "$stem" --list
check "source: the space's size and the family" 0 "^// family: pool, [0-9]+ variants for sm_90" $c source "$stem" --list
check "source: a packed-pair variant's kernel" 0 "set\.gt\.u32\.f16x2" $c source "$stem" --variant $pair4
check "source: the first variant by default" 0 "^extern \"C\" __global__ void __launch_bounds__" $c source "$stem"
check "source: another compute capability" 0 "variants for sm_80" $c source "$stem" --sm 80 --list
check "source: no such variant" 1 "error: no variant nope in its space for sm_90" $c source "$stem" --variant nope
check "source: an op no family serves" 1 "error: no cudal1 family serves aten::bmm" \
  $c source 'aten::bmm(f32[2,4,4]{16,4,1}, f32[2,4,4]{16,4,1})'
check "source: GPT-2's vocabulary head is the gemm family's" 0 "^// family: gemm, 26 variants for sm_90" \
  $c source 'aten::mm(f16[4096,768]{768,1}, f16[768,50257]{1,768})' --list
check "source: a signature the family declines" 1 "declines this signature \(ATen keeps it\): dtype Double" \
  $c source 'aten::relu(f64[8]{1})'
check "source: malformed text" 1 "error: InvalidArgument: argument self: unknown dtype 'f33'" \
  $c source 'aten::relu(f33[8]{1})'
check "source: a not-a-capability" 1 "compute capability 7 is not one" $c source "$stem" --sm 7
held='aten::_log_softmax(bf16[32,32000,64]{2048000,64,1}, 1, False)'
check "source: held slabs sized for 132 SMs by default" 0 "P = 128, R = 250, NB = 7;" \
  $c source "$held" --variant tile3.stats8.out8.merge4.pf0.hold0
check "source: held slabs sized for --sms" 0 "P = 110, R = 291, NB = 6;" \
  $c source "$held" --variant tile3.stats8.out8.merge4.pf0.hold0 --sms 114
check "source: a not-an-SM-count" 1 "2000 SMs is not a device's count" $c source "$stem" --sms 2000
check "source: no signatures" 1 "no signatures \(give them as arguments" $c source
check "source: from a file, each one (the repeat dropped)" 1 "^// family: softmax, [0-9]+ variants" \
  $c source --signatures sigs.txt --list
check "source: --help" 0 "the CUDA source cudal1 generates" $c source --help
[ "$fails" -eq 0 ] && echo "all warm and source CLI checks passed" ||
  { echo "$fails warm/source CLI checks failed"; exit 1; }
