#!/usr/bin/env bash
# The 1,048,576-class cross entropy step (hidden 512, batch 256, forward +
# backward to W and x; issue 8) in one run, one configuration at a time (W is
# 2 GiB, the logits 1 GiB): dtensor with its caching host allocator, the same
# binary with DT_ALLOC=system, and PyTorch (CPU, one thread, Debian's
# python3-torch). Prints one table: step time (median of steps 2..N), minor
# page faults of step 1 and per step after it (getrusage), and the ratios to
# PyTorch. Goal: faults per step after the first near zero with caching.
# --rounds R repeats the three runs R times, alternating, and keeps each
# configuration's lowest step and CPU times and highest fault counts (on a
# shared machine the load changes from minute to minute).
#   bench/ce_pagefaults/run.sh BUILD_DIR [--classes 1048576] [--hidden 512] [--batch 256] [--steps 4]
#                              [--rounds 1]
set -eu
build=${1:-build}
shift || true
args=() rounds=1
while [ $# -gt 1 ]; do
    case $1 in
    --rounds) rounds=$2 ;;
    --classes | --hidden | --batch | --steps) args+=("$1" "$2") ;;
    *) echo "ce_pagefaults/run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
[ $# -eq 0 ] || { echo "ce_pagefaults/run.sh: option $1 needs a value" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
exe=$build/bench/ce_pagefaults/ce_bench
[ -x "$exe" ] || { echo "ce_pagefaults: $exe not built" >&2; exit 1; }
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
    run "dtensor, caching allocator" env -u DT_ALLOC "$exe" "${args[@]}"
    run "dtensor, DT_ALLOC=system" env DT_ALLOC=system "$exe" "${args[@]}"
    [ $have_torch = 1 ] && run "pytorch" /usr/bin/python3 "$here/ce_torch.py" "${args[@]}"
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
        k = field($0, "alloc")
        if (!(k in row)) { row[k] = $0; order[++n_keys] = k }
        keep(k, "step_ms", field($0, "step_ms"), 1); keep(k, "cpu_ms", field($0, "cpu_ms"), 1)
        keep(k, "fwd_ms", field($0, "fwd_ms"), 1); keep(k, "bwd_ms", field($0, "bwd_ms"), 1)
        keep(k, "faults_first", field($0, "faults_first"), 0)
        keep(k, "faults_per_step", field($0, "faults_per_step"), 0)
    }
    END {
        if ("pytorch" in row) { pt_ms = best["pytorch", "step_ms"]; pt_cpu = best["pytorch", "cpu_ms"] }
        fmt = "%-16s %-9s %10s %10s %9s %9s %11s %15s %9s %11s %11s\n"
        printf fmt, "allocator", "kernel", "step ms", "cpu ms", "fwd ms", "bwd ms", "faults 1st",
               "faults/step 2+", "peak MiB", "step vs PT", "cpu vs PT"
        for (i = 1; i <= n_keys; i++) {
            a = order[i]; r = row[a]; name = a == "pytorch" ? "pytorch" : "dtensor " a
            ratio = pt_ms == "" ? "n/a" : sprintf("%.3fx", best[a, "step_ms"] / pt_ms)
            cratio = pt_cpu == "" ? "n/a" : sprintf("%.3fx", best[a, "cpu_ms"] / pt_cpu)
            printf fmt, name, field(r, "kernel"), best[a, "step_ms"], best[a, "cpu_ms"], best[a, "fwd_ms"],
                   best[a, "bwd_ms"], best[a, "faults_first"], best[a, "faults_per_step"],
                   field(r, "peak_mib"), ratio, cratio
        }
        if (rounds > 1) print "(" rounds " rounds: lowest times and highest fault counts of each configuration)"
        print "(step ms: wall time, median of steps 2..N; cpu ms: user+sys CPU time of the process, median of"
        print " steps 2..N, steadier than wall time on a shared machine; fwd/bwd: means of steps 2..N; faults:"
        print " getrusage ru_minflt of the whole process; vs PT: ratio to PyTorch, lower is better;"
        print " peak MiB: dtensor peak live tensor bytes, PyTorch max RSS)"
    }'
