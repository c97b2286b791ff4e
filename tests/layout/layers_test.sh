#!/usr/bin/env bash
# layout.layers: the tree's includes point down the layers (scripts/check_layers.sh), and the checker catches
# each kind of wrong include when one is planted in a copy of the tree.
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$src/scripts/check_layers.sh" "$src"

plant() {  # plant FILE LINE EXPECTED: a copy of the modules with LINE added to FILE must fail naming FILE
  rm -rf "$work/t"; mkdir -p "$work/t"
  for d in csrc cache dispatcher optimizer; do cp -r "$src/$d" "$work/t/"; done
  echo "$2" >>"$work/t/$1"
  if out=$("$src/scripts/check_layers.sh" "$work/t"); then
    echo "not caught: $2 in $1"; exit 1
  fi
  grep -q "^$1: #include" <<<"$out" || { echo "caught, but the report does not name $1:"; echo "$out"; exit 1; }
  echo "caught: $1 <- $2"
}
plant csrc/core/src/log.cpp '#include "cudal1/dispatcher/hook.h"'
plant cache/src/kernel_cache.cpp '#include "cudal1/optimizer/tuner.h"'
plant dispatcher/src/hook.cpp '#include "cudal1/cache/kernel_cache.h"'
plant optimizer/framework/tuner.cpp '#include "softmax/softmax_family.h"'
plant optimizer/families/softmax/softmax_rows.cpp '#include "../norm/norm_family.h"'
plant optimizer/families/unary/unary_family.cpp '#include "cudal1/cudal1.h"'
plant csrc/cli/main.cpp '#include "cudal1/optimizer/family.h"'
echo "layout.layers: passed"
