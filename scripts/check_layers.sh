#!/usr/bin/env bash
# Checks that every #include "..." in cudal1's modules points down the layers or within its own module
# (docs/ARCHITECTURE.md, "Layers"): core <- cache, dispatcher <- optimizer (framework <- families) <- runtime <- cli.
# A quoted include is either a public header of an allowed module ("cudal1/<module>/...", "cudal1/cudal1.h") or a
# private header that exists in one of the module's own private folders (or that its folder's or its parent's CMakeLists.txt
# generates with cudal1_embed_cuda). A family may include the framework's codegen helpers, never another family's
# files; the framework never includes a family's.
# Usage: scripts/check_layers.sh [ROOT]   Exit 0 when clean, 1 listing each offending include.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
bad=0

# check DIR "ALLOWED_PUBLIC..." "PRIVATE_DIR..."
check() {
  local dir=$1 allowed=$2 private=$3 f inc ok a p
  [ -d "$root/$dir" ] || { echo "missing module folder: $dir"; bad=1; return; }
  while IFS= read -r f; do
    while IFS= read -r inc; do
      ok=0
      if [[ $inc == *..* ]]; then
        ok=0  # a relative path out of a folder is never a module's own header
      elif [[ $inc == cudal1/* ]]; then
        for a in $allowed; do
          [[ $inc == "cudal1/$a/"* || ( $a == api && $inc == cudal1/cudal1.h ) ]] && ok=1
        done
      else
        for p in $private "$(dirname "${f#"$root"/}")"; do [ -f "$root/$p/$inc" ] && ok=1; done
        # Or the header cudal1_embed_cuda() generates from the folder's own .cuh files (cmake/EmbedCuda.cmake), in the
        # folder's CMakeLists.txt or its parent's (the optimizer target embeds the framework's .cuh files).
        for p in "$(dirname "$f")" "$(dirname "$(dirname "$f")")"; do
          if [ $ok -eq 0 ] && grep -Fqw "HEADER $inc" "$p/CMakeLists.txt" 2>/dev/null; then ok=1; fi
        done
      fi
      if [ $ok -eq 0 ]; then echo "${f#"$root"/}: #include \"$inc\" points outside what $dir may use"; bad=1; fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
  done < <(find "$root/$dir" -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cuh' \) | sort)
}

check csrc/core "core" "csrc/core/src"
check cache "core cache" "cache/src"
check dispatcher "core dispatcher" "dispatcher/src"
check optimizer/include "core cache dispatcher optimizer" ""
check optimizer/framework "core cache dispatcher optimizer" "optimizer/framework"
for fam in "$root"/optimizer/families/*/; do
  name=$(basename "$fam")
  check "optimizer/families/$name" "core cache dispatcher optimizer" "optimizer/families/$name optimizer/framework"
done
check csrc/runtime "core cache dispatcher optimizer api" "csrc/runtime/src"
check csrc/cli "core cache api" "csrc/cli"

if [ $bad -ne 0 ]; then echo "layers: FAILED"; exit 1; fi
echo "layers: every include points down or within its module"
