#!/bin/sh
# The ring against recursive doubling on large jobs, for docs/COMMSIM.md
# ("Thresholds for large jobs"): the all-reduce of 64 KiB - 2 MiB on 8 ..
# 4096 ranks of the "cluster" model, both predicted times in ms, and the
# smallest of these sizes at which the ring is faster ("-": none).
#   bench/comm/commsim_thresholds.sh path/to/commsim
set -eu
SIM=$1
MODEL="--model cluster --per-host 8"
echo "| ranks | 64 KiB ring / rd | 128 KiB | 256 KiB | 512 KiB | 1 MiB | 2 MiB | ring faster from |"
echo "|---:|---|---|---|---|---|---|---:|"
for n in 8 64 256 1024 2048 4096; do
  line="| $n"
  from=-
  for kib in 64 128 256 512 1024 2048; do
    r=$("$SIM" --csv $MODEL --ranks $n --bytes ${kib}K --algo ring | cut -d, -f6)
    d=$("$SIM" --csv $MODEL --ranks $n --bytes ${kib}K --algo recursive_doubling | cut -d, -f6)
    line="$line | $(awk -v r="$r" -v d="$d" 'BEGIN { printf "%.3g / %.3g", r * 1e3, d * 1e3 }')"
    if [ "$from" = - ] && awk -v r="$r" -v d="$d" 'BEGIN { exit !(r < d) }'; then
      from=$([ $kib -ge 1024 ] && echo "$((kib / 1024)) MiB" || echo "$kib KiB")
    fi
  done
  echo "$line | $from |"
done
