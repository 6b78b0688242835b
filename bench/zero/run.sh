#!/bin/bash
# bench/zero: dp=2 x tp=2 ZeRO-3 (and ZeRO-1/2) step time against DDP on the
# same mesh, in one run (interleaved steps). usage: run.sh BUILD_DIR [args...]
# (args go to zero_bench: --config small --layers 2 --steps 6 --batch 8 --seq 64)
set -eu
build=${1:?usage: run.sh BUILD_DIR [zero_bench args]}
shift
exec "$build/tools/dtrun/dtrun" -n 4 "$build/bench/zero/zero_bench" --mesh 2x2 "$@"
