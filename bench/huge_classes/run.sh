#!/bin/bash
# bench/huge_classes: the class-sharded classifier head (examples/huge_classes)
# over N = 1k, 32k, 256k, 1M classes on tp = 1, 2, 4 ranks: peak memory per
# rank (largest over the ranks, dt_memory_stats total peak) and step time
# (mean of the steps after the first). Writes OUT/table.md, OUT/data.tsv and
# OUT/huge_classes.png (gnuplot).
# usage: run.sh BUILD_DIR [OUT_DIR]   (env: CLASSES="1024 ...", TPS="1 2 4",
#        STEPS=3, BATCH=32, HIDDEN=512)
set -eu
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/bench/huge_classes/results}
exe=$build/examples/huge_classes/huge_classes
dtrun=$build/tools/dtrun/dtrun
classes=${CLASSES:-1024 32768 262144 1048576}
tps=${TPS:-1 2 4}
steps=${STEPS:-3} batch=${BATCH:-32} hidden=${HIDDEN:-512}
[ -x "$exe" ] && [ -x "$dtrun" ] || { echo "build huge_classes and dtrun in $build first"; exit 1; }
mkdir -p "$out"
data=$out/data.tsv
echo -e "classes\ttp\tstep_ms\tpeak_mib_per_rank\tloss" > "$data"
for n in $classes; do
    for tp in $tps; do
        line=$("$dtrun" -n "$tp" "$exe" --classes "$n" --hidden "$hidden" --batch "$batch" \
               --steps "$steps" | grep '^result')
        set -- $line
        # result classes N tp K batch B step_ms T peak_mib_max P peak_mib_rank0 Q loss L
        echo -e "$3\t$5\t$9\t${11}\t${15}" >> "$data"
        echo "classes $3 tp $5: step ${9} ms, peak ${11} MiB per rank, loss ${15}"
    done
done

{
    echo "# huge_classes: hidden $hidden, batch $batch, $steps steps, SGD ($(date -u +%F), $(nproc) cores)"
    echo
    echo "| classes | tp | step (ms) | peak MiB / rank | vs tp=1 | loss |"
    echo "|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' 'NR > 1 { if ($2 == 1) base[$1] = $4;
                         r = (base[$1] > 0) ? sprintf("%.3f", $4 / base[$1]) : "-";
                         printf("| %d | %d | %.1f | %.1f | %s | %s |\n", $1, $2, $3, $4, r, $5) }' "$data"
} > "$out/table.md"
cat "$out/table.md"

if command -v gnuplot > /dev/null; then
    plot=""
    sep=""
    for tp in $tps; do
        awk -F'\t' -v t="$tp" 'NR > 1 && $2 == t' "$data" > "$out/tp$tp.tsv"
    done
    gnuplot <<GP
set terminal pngcairo size 1200,480 font ",10"
set output "$out/huge_classes.png"
set multiplot layout 1,2 title "class-sharded head, hidden $hidden, batch $batch"
set logscale xy
set xlabel "classes"
set grid
set key top left
set ylabel "peak memory per rank (MiB)"
plot for [t in "$tps"] "$out/tp".t.".tsv" using 1:4 with linespoints title "tp=".t
set ylabel "step time (ms)"
plot for [t in "$tps"] "$out/tp".t.".tsv" using 1:3 with linespoints title "tp=".t
unset multiplot
GP
    echo "plot: $out/huge_classes.png"
else
    echo "gnuplot not found: no plot"
fi
