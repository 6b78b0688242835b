#!/usr/bin/env bash
# bench/redistribute/run.sh BUILD_DIR [args]: S->R, P->R, P->S and S(0)->S(1) of
# 64 MiB next to the bare collective, on 2 and 4 ranks, plus the per-op overhead
# of the distributed layer on a 64x64 matmul.
set -eu
build=${1:-build}
shift || true
for n in 2 4; do
  echo "-- $n ranks"
  "$build/tools/dtrun/dtrun" -n "$n" "$build/bench/redistribute/bench_redistribute" "$@"
done
