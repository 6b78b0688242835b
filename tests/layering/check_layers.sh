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
#
# check_layers.sh ROOT --map prints the map of the layers (which layers each
# one includes) drawn from the same #include lines; --check-map DOC fails when
# the map between the "layer-map" markers of DOC differs from it.
set -u
root=${1:?usage: check_layers.sh ROOT [--map | --check-map DOC]}
mode=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
exceptions=${LAYER_EXCEPTIONS:-$here/exceptions.txt}
cd "$root" || exit 2

# every include as "FILE INCLUDE FILE_LAYER INCLUDE_LAYER RANK_FILE RANK_INCLUDE"
edges=$(grep -rn '^#include "' src mesh placement styles \
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
      if ((lf in rank) && (li in rank))
        print $1, $2, lf, li, rank[lf], rank[li]
    }' | sort)
found=$(echo "$edges" | awk 'NF == 6 && $6 > $5 { print $1, $2, $3, $4 }')

# the map: each layer, top first, and the other layers its files include
layer_map() {
  echo "$edges" | awk 'NF == 6 && $3 != $4 { uses[$5] = uses[$5] " " $6; name[$5] = $3; name[$6] = $4 }
    END {
      n = split("core kernels autograd ops comm runtime mesh placement nn styles checkpoint", L, " ")
      for (k = n; k >= 1; k--) {
        line = ""
        for (j = 1; j < k; j++) if (index(uses[k] " ", " " j " ")) line = line " " L[j]
        for (j = k + 1; j <= n; j++) if (index(uses[k] " ", " " j " ")) line = line " " L[j] "(UP)"
        printf "%-10s ->%s\n", L[k], line == "" ? " (nothing)" : line
      }
    }'
}
if [ "$mode" = "--map" ]; then
  layer_map
  exit 0
fi
if [ "$mode" = "--check-map" ]; then
  doc=${3:?--check-map needs the document}
  drawn=$(sed -n '/<!-- layer-map:begin -->/,/<!-- layer-map:end -->/p' "$doc" | grep -- ' -> ')
  if [ "$drawn" != "$(layer_map)" ]; then
    echo "layering: the map in $doc differs from the #include lines; it should read:"
    layer_map
    exit 1
  fi
  echo "layering: the map in $doc matches the #include lines"
  exit 0
fi

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
