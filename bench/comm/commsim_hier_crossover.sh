#!/bin/sh
# Where the flat ring starts to beat the two-level (hier) all-reduce, by
# commsim, for docs/COMMSIM.md ("The two-level choice"): per model (local:
# this 2-core machine with a 10 Gbit/s link; cluster: 100 Gbit/s NICs), L
# ranks per host and H hosts, the smallest power-of-two size from 64 KiB at
# which the ring is predicted faster (0: never up to 256 MiB).
#   bench/comm/commsim_hier_crossover.sh path/to/commsim
set -eu
SIM=$1
echo "# model ranks_per_host hosts ring_beats_hier_from_bytes bytes_per_rank"
for model in local cluster; do
  for L in 2 4 8; do
    for H in 2 3 4 8 16 64; do
      n=$((H * L))
      b=65536
      found=0
      while [ $b -le 268435456 ]; do
        r=$("$SIM" --model $model --per-host $L --ranks $n --bytes $b --csv --algo ring | cut -d, -f6)
        x=$("$SIM" --model $model --per-host $L --ranks $n --bytes $b --csv --algo hier | cut -d, -f6)
        if awk -v r="$r" -v x="$x" 'BEGIN { exit !(r < x) }'; then found=$b; break; fi
        b=$((b * 2))
      done
      echo "$model $L $H $found $((found / n))"
    done
  done
done
