#!/usr/bin/env bash
# The 1,048,576-class cross entropy step (hidden 512, batch 256, forward +
# backward to W and x; issue 8) in one run, one configuration at a time (W is
# 2 GiB, the logits 1 GiB): dtensor with its caching host allocator, the same
# binary with DT_ALLOC=system, and PyTorch (CPU, one thread, Debian's
# python3-torch). Prints one table: step time (median of steps 2..N), minor
# page faults of step 1 and per step after it (getrusage), and the ratios to
# PyTorch. Goal: faults per step after the first near zero with caching.
#   bench/ce_pagefaults/run.sh BUILD_DIR [--classes 1048576] [--hidden 512] [--batch 256] [--steps 4]
set -eu
build=${1:-build}
shift || true
args=("$@")
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
run "dtensor, caching allocator" env -u DT_ALLOC "$exe" "${args[@]}"
run "dtensor, DT_ALLOC=system" env DT_ALLOC=system "$exe" "${args[@]}"
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
    run "pytorch" /usr/bin/python3 "$here/ce_torch.py" "${args[@]}"
else
    echo "-- pytorch: not installed (apt-get install python3-torch): no PyTorch column, no ratios"
fi

echo
printf '%s\n' "${results[@]}" | awk '
    function field(line, key,    n, i, kv) {
        n = split(line, kv, " ")
        for (i = 1; i <= n; i++) if (index(kv[i], key "=") == 1) return substr(kv[i], length(key) + 2)
        return ""
    }
    { row[NR] = $0
      if (field($0, "alloc") == "pytorch") { pt_ms = field($0, "step_ms"); pt_cpu = field($0, "cpu_ms") } }
    END {
        fmt = "%-16s %-9s %10s %10s %9s %9s %11s %15s %9s %11s %11s\n"
        printf fmt, "allocator", "kernel", "step ms", "cpu ms", "fwd ms", "bwd ms", "faults 1st",
               "faults/step 2+", "peak MiB", "step vs PT", "cpu vs PT"
        for (i = 1; i <= NR; i++) {
            r = row[i]; a = field(r, "alloc"); name = a == "pytorch" ? "pytorch" : "dtensor " a
            ratio = pt_ms == "" ? "n/a" : sprintf("%.3fx", field(r, "step_ms") / pt_ms)
            cratio = pt_cpu == "" ? "n/a" : sprintf("%.3fx", field(r, "cpu_ms") / pt_cpu)
            printf fmt, name, field(r, "kernel"), field(r, "step_ms"), field(r, "cpu_ms"), field(r, "fwd_ms"),
                   field(r, "bwd_ms"), field(r, "faults_first"), field(r, "faults_per_step"),
                   field(r, "peak_mib"), ratio, cratio
        }
        print "(step ms: wall time, median of steps 2..N; cpu ms: user+sys CPU time of the process, median of"
        print " steps 2..N, steadier than wall time on a shared machine; fwd/bwd: means of steps 2..N; faults:"
        print " getrusage ru_minflt of the whole process; vs PT: ratio to PyTorch, lower is better;"
        print " peak MiB: dtensor peak live tensor bytes, PyTorch max RSS)"
    }'
