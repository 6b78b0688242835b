#!/usr/bin/env bash
# The reference GPT's SGD training step (default: config small, batch 8 x seq
# 256), one compute thread per rank, in one run, one configuration at a time:
# dtensor on 1 rank and on tp=2 (dtrun, the spec's default plan), each with
# its caching allocator and with DT_ALLOC=system, and PyTorch on one process
# (tests/reference/gpt_ref.py's model, Debian's python3-torch). Prints one
# table: step time and CPU time (medians of steps 2..N), minor page faults of
# step 1 and per step after it, peak memory, and the ratios to PyTorch.
# (PyTorch tensor-parallel by hand over gloo is bench/tp_gpt.)
#   bench/gpt_step/run.sh BUILD_DIR [--config small] [--batch 8] [--seq 256] [--steps 5] [--world 2]
set -eu
build=${1:-build}
shift || true
world=2
args=()
while [ $# -gt 1 ]; do
    case $1 in
    --world) world=$2 ;;
    --config | --batch | --seq | --steps) args+=("$1" "$2") ;;
    *) echo "gpt_step/run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
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
run "dtensor tp=1, caching allocator" env -u DT_ALLOC "$exe" "${args[@]}"
run "dtensor tp=1, DT_ALLOC=system" env DT_ALLOC=system "$exe" "${args[@]}"
if [ "$world" -gt 1 ]; then
    run "dtensor tp=$world, caching allocator" env -u DT_ALLOC "$dtrun" -n "$world" "$exe" "${args[@]}"
    run "dtensor tp=$world, DT_ALLOC=system" env DT_ALLOC=system "$dtrun" -n "$world" "$exe" "${args[@]}"
fi
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    run "pytorch tp=1" /usr/bin/python3 "$here/gpt_step_torch.py" "${args[@]}"
else
    echo "-- pytorch: not installed (apt-get install python3-torch): no PyTorch row, no ratios"
fi

echo
printf '%s\n' "${results[@]}" | awk '
    function field(line, key,    n, i, kv) {
        n = split(line, kv, " ")
        for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
        return ""
    }
    { row[NR] = $0
      if (field($0, "impl") == "pytorch") { pt_ms = field($0, "step_ms"); pt_cpu = field($0, "cpu_ms") } }
    END {
        fmt = "%-8s %-8s %3s %10s %10s %11s %15s %9s %11s %11s %10s\n"
        printf fmt, "impl", "alloc", "tp", "step ms", "cpu ms", "faults 1st", "faults/step 2+", "peak MiB",
               "step vs PT", "cpu vs PT", "loss"
        for (i = 1; i <= NR; i++) {
            r = row[i]; impl = field(r, "impl"); a = impl == "pytorch" ? "-" : field(r, "alloc")
            ratio = pt_ms == "" ? "n/a" : sprintf("%.3fx", field(r, "step_ms") / pt_ms)
            cratio = pt_cpu == "" ? "n/a" : sprintf("%.3fx", field(r, "cpu_ms") / pt_cpu)
            printf fmt, impl, a, field(r, "world"), field(r, "step_ms"), field(r, "cpu_ms"),
                   field(r, "faults_first"), field(r, "faults_per_step"), field(r, "peak_mib"), ratio, cratio,
                   field(r, "loss")
        }
        print "(step ms: wall time of the slowest rank, median of steps 2..N; cpu ms: user+sys CPU time of the"
        print " busiest rank, median of steps 2..N (on tp ranks it includes spinning on communication);"
        print " faults: getrusage ru_minflt of the rank with most; vs PT: ratio to PyTorch on one process,"
        print " lower is better; peak MiB: dtensor peak live tensor bytes of a rank, PyTorch max RSS;"
        print " loss: last step, SGD lr 0.01 (PyTorch initialises with its own RNG: its losses differ slightly))"
    }'
