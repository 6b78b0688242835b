#!/bin/sh
# The two-level (hier) all-reduce's time over the flat ring's, by commsim,
# for docs/COMMSIM.md ("The two-level choice"): per model and L ranks per
# host, at 1 MiB and 64 MiB on 2 .. 64 hosts (under 1: hier faster).
#   bench/comm/commsim_hier_ratio.sh path/to/commsim
set -eu
SIM=$1
echo "| model | ranks per host | 1 MiB: 2, 4, 8, 16, 32, 64 hosts | 64 MiB: 2, 4, 8, 16, 32, 64 hosts |"
echo "|---|---:|---|---|"
for model in local cluster; do
  for L in 2 8; do
    line="| $model | $L"
    for size in 1M 64M; do
      cell=
      for H in 2 4 8 16 32 64; do
        n=$((H * L))
        r=$("$SIM" --model $model --per-host $L --ranks $n --bytes $size --csv --algo ring | cut -d, -f6)
        x=$("$SIM" --model $model --per-host $L --ranks $n --bytes $size --csv --algo hier | cut -d, -f6)
        cell="$cell$(awk -v r="$r" -v x="$x" 'BEGIN { printf " %.2f", x / r }')"
      done
      line="$line |$cell"
    done
    echo "$line |"
  done
done
