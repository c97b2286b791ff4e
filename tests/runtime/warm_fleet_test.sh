#!/usr/bin/env bash
# Host test of `cudal1 warm` over several workers and machines (Note [Fleet warm]), no GPU needed: dry-run workers
# (calls rebuilt on the meta device) claim one shared list through a c10d TCPStore. Two coordinators on this host
# stand in for two machines: node 0 serves the store and the list, node 1 takes the list from it; every signature
# gets exactly one outcome, both machines print all of them with progress and an estimate of the time left, and the
# bad uses fail with a clear error.
set -u
cli=$(realpath "$1") work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
export CUDAL1_CACHE_DIR="$work/cache"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
section=0
done_section() { [ "$fails" -eq "$section" ] && echo "ok   $*"; section=$fails; }
for i in $(seq 1 3000); do echo "aten::relu(f32[8,$i]{$i,1})"; done > list.txt
echo "not a signature" >> list.txt

# One machine, three workers.
out=$("$cli" warm --dry-run --workers 3 --signatures list.txt 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "one machine: exit code $rc, want 1 (one signature is an error)"
grep -qE "^3001 signatures x 1 GPU models in .*3000 checked, 0 skipped, 1 errors, 0 timed out, 0 never finished" \
  <<<"$out" || fail "one machine: summary"$'\n'"$(tail -n 3 <<<"$out")"
grep -qE "^\[3001/3001 100% ETA 0s\]" <<<"$out" || fail "one machine: the last progress line"
grep -qE "^\[[0-9]+/3001 +[0-9]+% ETA [0-9]+(s|m[0-9]+s)\] checked " <<<"$out" || fail "one machine: progress with ETA"
n=$(grep -cE "^\[[0-9]+/3001" <<<"$out")
[ "$n" -eq 3001 ] || fail "one machine: $n outcome lines, want 3001"
done_section "one machine, three workers"

# Two machines on one store: node 0 has the list, node 1 takes it from the store.
port=$((20000 + RANDOM % 20000))
"$cli" warm --dry-run --workers 2 --signatures list.txt --store 127.0.0.1:$port --nodes 2 --node 0 > n0.log 2>&1 &
p0=$!
"$cli" warm --dry-run --workers 2 --store 127.0.0.1:$port --nodes 2 --node 1 > n1.log 2>&1 &
p1=$!
wait $p0; rc0=$?
wait $p1; rc1=$?
for node in 0 1; do
  log=n$node.log
  grep -qE "^3001 signatures x 1 GPU models in .*3000 checked, 0 skipped, 1 errors, 0 timed out, 0 never finished" \
    "$log" || fail "node $node: summary"$'\n'"$(tail -n 3 "$log")"
  grep -q "machine $((node + 1)) of 2" "$log" || fail "node $node: which machine it is"
done
[ "$rc0" -eq 1 ] && [ "$rc1" -eq 1 ] || fail "two machines: exit codes $rc0 and $rc1, want 1 and 1"
# Exactly one outcome per signature (node 0's view of the whole fleet).
sed -nE 's/^\[[0-9]+\/3001 +[0-9]+% ETA [^]]*\] [a-z]+ +[^ ]+ +(aten::[^ ]+|not a signature) .*/\1/p' n0.log | sort > seen.txt
sort list.txt > want.txt
cmp -s seen.txt want.txt || fail "two machines: outcomes are not exactly the list ($(wc -l < seen.txt) lines; \
duplicates: $(uniq -d seen.txt | head -3 | tr '\n' ' '))"
workers=$(sed -nE 's/.*\((.* dry run [0-9]+)\)$/\1/p' n0.log | sort -u | wc -l)
done_section "two machines: $(wc -l < seen.txt) outcomes, each signature once, from $workers workers"

# Bad uses.
out=$("$cli" warm --dry-run --store 127.0.0.1:$port --nodes 2 --node 2 2>&1); rc=$?
{ [ "$rc" -eq 1 ] && grep -q "is not below --nodes 2" <<<"$out"; } || fail "--node out of range: rc $rc: $out"
out=$("$cli" warm --dry-run --workers 2 --signatures list.txt --nodes 2 2>&1); rc=$?
{ [ "$rc" -eq 1 ] && grep -q "needs --store" <<<"$out"; } || fail "--nodes without --store: rc $rc: $out"
out=$("$cli" warm --dry-run --workers 2 --signatures list.txt --store nocolon 2>&1); rc=$?
{ [ "$rc" -eq 1 ] && grep -q "HOST:PORT" <<<"$out"; } || fail "--store without a port: rc $rc: $out"
out=$("$cli" warm --gpus 0 --device 0 --signatures list.txt 2>&1); rc=$?
{ [ "$rc" -ne 0 ] && grep -q "excludes" <<<"$out"; } || fail "--gpus with --device: rc $rc: $out"
done_section "bad uses"
[ "$fails" -eq 0 ] || { echo "$fails failures"; exit 1; }
