#!/bin/bash
# bench/memory_estimate: train_gpt --estimate-memory (dt_gpt_memory_estimate)
# against each rank's measured host peak, and the step time, one table row per
# rank. Default: the 719M-parameter GPT of issue 19 (dim 1280, 36 layers, 20
# heads, ffn 5120, vocab 4096) on dp=2 x tp=2 ZeRO-3 + AdamW, batch 4 x seq
# 128, 3 steps (minutes of CPU, ~3 GiB per rank); --quick: the same mesh on
# a 2-layer GPT small.
# usage: run.sh BUILD_DIR [--quick]
set -eu
build=${1:?usage: run.sh BUILD_DIR [--quick]}
model=(--config small --dim 1280 --n-layers 36 --n-heads 20 --ffn-dim 5120)
name="GPT 719M"
if [ "${2:-}" = --quick ]; then
    model=(--config small --n-layers 2)
    name="GPT small, 2 layers"
fi
out=$("$build/tools/dtrun/dtrun" -n 4 "$build/examples/train_gpt/train_gpt" "${model[@]}" \
      --mesh dp=2,tp=2 --data-parallel zero3 --optim adamw --batch 4 --seq 128 --steps 3 \
      --data "$build/examples/data/tokens.bin" --memory-report --estimate-memory)
echo "$out" | sed -n '/^memory report per rank/,$p'
est=$(echo "$out" | awk '/^memory estimate vs/ { f = 1 } f && $1 == "total" { print $2; exit }')
# steady-state step time: the mean of the steps after the first
step_ms=$(echo "$out" | awk '/^step/ && $2 > 0 { gsub(/[()]/, "", $(NF - 1)); s += $(NF - 1); n++ }
                             END { if (n) printf "%.0f", s / n }')
echo
echo "| model | mesh | style | batch x seq | rank | estimate MiB | measured MiB | measured/estimate | step ms |"
echo "|---|---|---|---|---|---|---|---|---|"
echo "$out" | awk -v name="$name" -v est="$est" -v ms="$step_ms" '/^rank [0-9]+: peak/ {
    r = $2; sub(":", "", r)
    printf "| %s | dp=2,tp=2 | zero3 + adamw | 4 x 128 | %s | %s | %s | %s | %s |\n", name, r, est, $4, $(NF - 3), ms }'
