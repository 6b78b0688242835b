#!/usr/bin/env bash
# The reference GPT's SGD training step (default: config small, batch 8 x seq
# 256), one compute thread per rank, in one run, one configuration at a time:
# dtensor on 1 rank and on tp=2 (dtrun, the spec's default plan), each with
# its caching allocator and with DT_ALLOC=system, and PyTorch on one process
# (tests/reference/gpt_ref.py's model, Debian's python3-torch); then both on
# one rank in bf16 (dtensor --precision bf16: dt_autocast_set; PyTorch
# torch.autocast("cpu", dtype=torch.bfloat16)). Prints one table: step time and CPU time (medians of steps 2..N), minor page faults of
# step 1 and per step after it, peak memory, and the ratios to PyTorch.
# (PyTorch tensor-parallel by hand over gloo is bench/tp_gpt.) --rounds R
# repeats all runs R times, alternating, and keeps each configuration's lowest
# times and highest fault counts (the load of a shared machine changes).
# --runs precision keeps only the one-rank f32/bf16 runs of both (the bf16
# speed comparison, more rounds in the same time).
#   bench/gpt_step/run.sh BUILD_DIR [--config small] [--batch 8] [--seq 256] [--steps 5] [--world 2]
#                         [--rounds 1] [--runs all|precision]
set -eu
build=${1:-build}
shift || true
world=2 rounds=1 runs=all
args=()
while [ $# -gt 1 ]; do
    case $1 in
    --world) world=$2 ;;
    --rounds) rounds=$2 ;;
    --runs) runs=$2 ;;
    --config | --batch | --seq | --steps) args+=("$1" "$2") ;;
    *) echo "gpt_step/run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
[ $# -eq 0 ] || { echo "gpt_step/run.sh: option $1 needs a value" >&2; exit 2; }
case $runs in all | precision) ;; *) echo "gpt_step/run.sh: --runs $runs, expected all or precision" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
exe=$build/bench/gpt_step/gpt_step
dtrun=$build/tools/dtrun/dtrun
tokens=$build/examples/data/tokens.bin
for f in "$exe" "$dtrun" "$tokens"; do
    [ -e "$f" ] || { echo "gpt_step: $f not built" >&2; exit 1; }
done
args+=(--data "$tokens")
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DT_NUM_THREADS=1

results=()
run() { # label, command...: echo the run's lines, keep its RESULT line
    local label=$1 out
    shift
    echo "-- $label"
    out=$("$@") || { echo "$label failed" >&2; exit 1; }
    echo "$out" | grep -v '^RESULT'
    results+=("$(echo "$out" | grep '^RESULT')")
}
have_torch=0
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    have_torch=1
else
    echo "-- pytorch: not installed (apt-get install python3-torch): no PyTorch row, no ratios"
fi
for ((round = 1; round <= rounds; round++)); do
    [ "$rounds" -gt 1 ] && echo "== round $round of $rounds"
    run "dtensor tp=1, caching allocator" env -u DT_ALLOC "$exe" "${args[@]}"
    run "dtensor tp=1, bf16 matmuls" env -u DT_ALLOC "$exe" "${args[@]}" --precision bf16
    [ "$runs" = all ] && run "dtensor tp=1, DT_ALLOC=system" env DT_ALLOC=system "$exe" "${args[@]}"
    if [ "$world" -gt 1 ] && [ "$runs" = all ]; then
        run "dtensor tp=$world, caching allocator" env -u DT_ALLOC "$dtrun" -n "$world" "$exe" "${args[@]}"
        run "dtensor tp=$world, DT_ALLOC=system" env DT_ALLOC=system "$dtrun" -n "$world" "$exe" "${args[@]}"
    fi
    if [ $have_torch = 1 ]; then
        run "pytorch tp=1" /usr/bin/python3 "$here/gpt_step_torch.py" "${args[@]}"
        run "pytorch tp=1, autocast bf16" /usr/bin/python3 "$here/gpt_step_torch.py" "${args[@]}" \
            --precision bf16
    fi
done

echo
printf '%s\n' "${results[@]}" | awk -v rounds="$rounds" '
    function field(line, key,    n, i, kv) {
        n = split(line, kv, " ")
        for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
        return ""
    }
    function keep(key, f, v, lower) { # the lowest (or highest) value of a field over rounds
        if (!((key, f) in best) || (lower ? v + 0 < best[key, f] + 0 : v + 0 > best[key, f] + 0))
            best[key, f] = v
    }
    {
        k = field($0, "impl") " " field($0, "alloc") " " field($0, "world") " " field($0, "precision")
        if (!(k in row)) { row[k] = $0; order[++n_keys] = k }
        keep(k, "step_ms", field($0, "step_ms"), 1)
        if (!((k, "cpu_ms") in best) || field($0, "cpu_ms") + 0 < best[k, "cpu_ms"] + 0)
            gemm[k] = field($0, "gemm_pct") # the GEMM share of the round with the lowest CPU time
        keep(k, "cpu_ms", field($0, "cpu_ms"), 1)
        keep(k, "faults_first", field($0, "faults_first"), 0)
        keep(k, "faults_per_step", field($0, "faults_per_step"), 0)
        if (field($0, "impl") == "pytorch") pt[field($0, "precision")] = k
        if (field($0, "impl") == "dtensor" && field($0, "world") == 1 && field($0, "alloc") == "caching")
            dt1[field($0, "precision")] = k
    }
    END {
        fmt = "%-8s %-8s %3s %5s %10s %10s %6s %11s %15s %9s %11s %11s %10s\n"
        printf fmt, "impl", "alloc", "tp", "prec", "step ms", "cpu ms", "gemm %", "faults 1st",
               "faults/step 2+", "peak MiB", "step vs PT", "cpu vs PT", "loss"
        for (i = 1; i <= n_keys; i++) {
            k = order[i]; r = row[k]; impl = field(r, "impl"); a = impl == "pytorch" ? "-" : field(r, "alloc")
            p = field(r, "precision"); ref = pt[p] # PyTorch in the same precision
            ratio = ref == "" ? "n/a" : sprintf("%.3fx", best[k, "step_ms"] / best[ref, "step_ms"])
            cratio = ref == "" ? "n/a" : sprintf("%.3fx", best[k, "cpu_ms"] / best[ref, "cpu_ms"])
            printf fmt, impl, a, field(r, "world"), p, best[k, "step_ms"], best[k, "cpu_ms"],
                   gemm[k] == "" ? "-" : gemm[k], best[k, "faults_first"], best[k, "faults_per_step"], field(r, "peak_mib"), ratio, cratio,
                   field(r, "loss")
        }
        if (dt1["f32"] != "" && dt1["bf16"] != "")
            printf "dtensor bf16 / f32 step, 1 rank: %.3fx (cpu %.3fx)\n",
                best[dt1["bf16"], "step_ms"] / best[dt1["f32"], "step_ms"],
                best[dt1["bf16"], "cpu_ms"] / best[dt1["f32"], "cpu_ms"]
        if (rounds > 1) print "(" rounds " rounds: lowest times and highest fault counts of each configuration)"
        print "(step ms: wall time of the slowest rank, median of steps 2..N; cpu ms: user+sys CPU time of the"
        print " busiest rank, median of steps 2..N (on tp ranks it includes spinning on communication);"
        print " gemm %: CPU time inside oneDNN matmuls / cpu ms (dtensor, one compute thread per rank);"
        print " faults: getrusage ru_minflt of the rank with most; vs PT: ratio to PyTorch on one process"
        print " in the same precision (bf16: torch.autocast vs dt_autocast_set, matmuls only),"
        print " lower is better; peak MiB: dtensor peak live tensor bytes of a rank, PyTorch max RSS;"
        print " loss: last step, SGD lr 0.01 (PyTorch initialises with its own RNG: its losses differ slightly))"
    }'
