#!/bin/sh
# check_layers.sh ROOT: fails when a source file includes a header of a layer
# above its own (docs/ARCHITECTURE.md, section 2: a layer uses only the layers
# below it). Layers, bottom to top, and the folders that hold them:
#   core (src/core)  kernels  autograd  ops  comm  runtime (src/runtime.c)
#   mesh  placement  nn  styles  checkpoint
# A private include names its layer by its first path component
# ("comm/comm_impl.h"); a public header (dtensor/X.h) belongs to the layer of
# its area (core.h, memory.h, tensor.h, scope.h: core; store.h, comm.h: comm;
# data_parallel.h: styles; the others: the layer of the same name).
# Known exceptions, each with the reason it stands, are listed in
# exceptions.txt next to this script as "FILE INCLUDE reason..."; an exception
# that no longer occurs fails the check too, so the list only shrinks.
set -u
root=${1:?usage: check_layers.sh ROOT}
here=$(cd "$(dirname "$0")" && pwd)
exceptions=${LAYER_EXCEPTIONS:-$here/exceptions.txt}
cd "$root" || exit 2

found=$(grep -rn '^#include "' src mesh placement styles \
          --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' |
  sed 's/:[0-9]*:#include "/ /; s/".*//' |
  awk '
    function layer_of_file(f,   p) {
      if (f == "src/runtime.c") return "runtime"
      split(f, p, "/")
      return p[1] == "src" ? p[2] : p[1]
    }
    function layer_of_include(i,   p, h) {
      if (i ~ /^dtensor\//) {
        h = i; sub(/^dtensor\//, "", h); sub(/\.h$/, "", h)
        if (h ~ /^(core|memory|tensor|scope)$/) return "core"
        if (h == "store" || h == "comm") return "comm"
        if (h == "data_parallel") return "styles"
        return h
      }
      if (split(i, p, "/") < 2) return ""
      return p[1]
    }
    BEGIN {
      n = split("core kernels autograd ops comm runtime mesh placement nn styles checkpoint", L, " ")
      for (k = 1; k <= n; k++) rank[L[k]] = k + 0
    }
    {
      lf = layer_of_file($1); li = layer_of_include($2)
      if ((lf in rank) && (li in rank) && rank[li] > rank[lf])
        print $1, $2, lf, li
    }' | sort)

status=0
# every upward include must be a listed exception
echo "$found" | while read -r file inc from to; do
  [ -n "$file" ] || continue
  if ! grep -q "^$file $inc " "$exceptions" 2>/dev/null; then
    echo "layering: $file ($from) includes $inc ($to), a layer above it"
  fi
done | grep . && status=1
# every exception must still occur
grep -v '^#' "$exceptions" 2>/dev/null | while read -r file inc reason; do
  [ -n "$file" ] || continue
  if ! echo "$found" | grep -q "^$file $inc "; then
    echo "layering: exception '$file $inc' no longer occurs: remove it from $exceptions"
  fi
done | grep . && status=1
if [ $status -eq 0 ]; then
  echo "layering: ok ($(echo "$found" | grep -c .) upward includes, all listed exceptions)"
fi
exit $status
