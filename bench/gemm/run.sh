#!/usr/bin/env bash
# `make bench` entry: the GEMM table (dtensor's oneDNN engine vs OpenBLAS as
# loaded vs OpenBLAS with SkylakeX forced in a child, 1 and 2 threads), then
# the 8 B all-reduce latency on 2 ranks right after GEMMs, per engine: idle
# OpenMP threads must not slow the communication (oneDNN loads with
# OMP_WAIT_POLICY=passive; the active row shows the trap it avoids).
#   bench/gemm/run.sh BUILD_DIR [--quick] [--core SkylakeX]
set -eu
build=${1:-build}
[ $# -gt 0 ] && shift
"$build/bench/gemm/gemm_bench" "$@"

echo "8 B all-reduce, 2 ranks, right after a 512^3 GEMM (20 rounds x 100 calls):"
dtrun="$build/tools/dtrun/dtrun"
bench="$build/bench/gemm/gemm_bench"
for threads in 1 2; do
  for cfg in "DT_GEMM=openblas" "DT_GEMM=onednn" "DT_GEMM=onednn OMP_WAIT_POLICY=active"; do
    printf '  DT_NUM_THREADS=%s %-40s ' "$threads" "$cfg"
    env DT_LOG=error DT_NUM_THREADS="$threads" $cfg "$dtrun" -n 2 "$bench" --latency | grep '^latency' ||
      echo "(failed)"
  done
done
echo "comm_bench 8 B all-reduce, 2 ranks (no GEMM), oneDNN loaded vs DT_GEMM=openblas:"
for cfg in "DT_GEMM=auto" "DT_GEMM=openblas"; do
  printf '  %-18s ' "$cfg"
  env DT_LOG=error $cfg "$dtrun" -n 2 "$build/bench/comm/comm_bench" -b 8 -e 8 -c allreduce |
    awk '/^ *8 /{print "time " $0; found=1} END{if(!found) print "(no 8 B row)"}'
done
