#!/bin/sh
# commsim sweeps for docs/COMMSIM.md: the all-reduce of SIZE (default 1G) on
# 8 .. 4096 ranks of the "cluster" model (8 ranks per host), every algorithm
# against the bandwidth bound 2(n-1)/n * SIZE / link, and (with gnuplot) a
# plot of it. Also the sizes where the ring starts to beat recursive doubling.
#   bench/comm/commsim_sweep.sh path/to/commsim [OUTDIR] [SIZE]
set -eu
SIM=$1
OUT=${2:-/tmp/commsim_sweep}
SIZE=${3:-1G}
MODEL="--model cluster --per-host 8"
mkdir -p "$OUT"
# the slowest link of a multi-host ring: min(bw_shm, bw_net), in GB/s
LINK=$("$SIM" --ranks 16 $MODEL --bytes 1M | sed -n 's/^bandwidth bound: busbw \([0-9.]*\).*/\1/p')
echo "# ranks ring_s rd_s bound_s ring_busbw rd_busbw bound_busbw dispatcher hier_s" > "$OUT/scale.dat"
for n in 8 16 32 64 128 256 512 1024 2048 4096; do
  "$SIM" --csv $MODEL --ranks $n --bytes "$SIZE" --algo ring > "$OUT/ring.csv"
  "$SIM" --csv $MODEL --ranks $n --bytes "$SIZE" --algo recursive_doubling > "$OUT/rd.csv"
  choice=$("$SIM" $MODEL --ranks $n --bytes "$SIZE" --algo ring | sed -n 's/^dispatcher: //p')
  # the two-level algorithm across hosts, up to 512 ranks (its layout is O(ranks x hosts))
  hier=-
  [ $n -gt 8 ] && [ $n -le 512 ] &&
    hier=$("$SIM" --csv $MODEL --ranks $n --bytes "$SIZE" --algo hier | cut -d, -f6)
  paste -d, "$OUT/ring.csv" "$OUT/rd.csv" | awk -F, -v n=$n -v link="$LINK" -v c="$choice" -v h="$hier" '{
    bytes = $4; bound = 2 * (n - 1) / n * bytes / (link * 1e9)
    printf "%d %.6g %.6g %.6g %.4g %.4g %.4g %s %s\n", n, $6, $14, bound, $7, $15, link, c, h }' \
    >> "$OUT/scale.dat"
done
cat "$OUT/scale.dat"

# crossover: the smallest power-of-two size at which the ring is faster
echo "# ranks ring_beats_rd_from_bytes" > "$OUT/crossover.dat"
for n in 8 64 512 4096; do
  b=$((4096 > 4 * n ? 4096 : 4 * n))
  while [ $b -le $((1 << 30)) ]; do
    r=$("$SIM" --csv $MODEL --ranks $n --bytes $b --algo ring | cut -d, -f6)
    d=$("$SIM" --csv $MODEL --ranks $n --bytes $b --algo recursive_doubling | cut -d, -f6)
    if awk -v r="$r" -v d="$d" 'BEGIN { exit !(r < d) }'; then break; fi
    b=$((b * 2))
  done
  echo "$n $b" >> "$OUT/crossover.dat"
done
cat "$OUT/crossover.dat"

command -v gnuplot >/dev/null || { echo "no gnuplot: plot skipped"; exit 0; }
gnuplot <<GP
set terminal pngcairo size 800,480 font ",10"
set output "$OUT/commsim_allreduce.png"
set title "commsim: all-reduce of $SIZE, cluster model (8 ranks/host, 100 Gbit/s NICs)"
set logscale x 2
set logscale y
set xlabel "ranks"
set ylabel "time (s)"
set key top left
set grid
set datafile missing "-"
plot "$OUT/scale.dat" using 1:2 with linespoints title "ring (predicted)", \
     "$OUT/scale.dat" using 1:3 with linespoints title "recursive doubling (predicted)", \
     "$OUT/scale.dat" using 1:9 with linespoints title "two-level, hier (predicted; the dispatcher's pick across hosts)", \
     "$OUT/scale.dat" using 1:4 with lines dt 2 lw 2 title "bandwidth bound 2(n-1)/n B / link"
GP
echo "plot: $OUT/commsim_allreduce.png"
