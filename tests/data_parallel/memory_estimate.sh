#!/bin/bash
# train_gpt --estimate-memory (dt_gpt_memory_estimate) against the measured
# peaks: on one rank, tp=2, dp=2 x tp=2 ZeRO-3 (also with sequence
# parallelism) and dp=2 DDP with SGD + momentum, and with activation
# checkpointing (1 rank; dp=2 x tp=2 ZeRO-3 + sequence parallelism), every
# rank's measured total peak lies within 15% of the estimate (with
# checkpointing the activation peak too); the estimate is printed before any
# tensor is allocated (before the model line), and --estimate-only allocates
# nothing and trains nothing.
# usage: memory_estimate.sh TRAIN_GPT DTRUN
set -u
train=$1 dtrun=$2
. "$(dirname "$0")/../common/train_gpt_lib.sh" # fail
args=(--config small --n-layers 2 --batch 4 --seq 64 --steps 3 --estimate-memory)

# $1 name, $2 ranks, rest: options. Checks the order of the output and each rank's ratio.
check() {
    local name=$1 n=$2 out
    shift 2
    if [ "$n" = 1 ]; then
        out=$("$train" "${args[@]}" "$@") || fail "$name: train_gpt failed"
    else
        out=$("$dtrun" -n "$n" "$train" "${args[@]}" "$@") || fail "$name: train_gpt failed"
    fi
    local first model
    first=$(echo "$out" | grep -n '^memory estimate per rank (0 tensor bytes allocated so far)' |
            head -1 | cut -d: -f1)
    model=$(echo "$out" | grep -n '^GPT ' | head -1 | cut -d: -f1)
    [ -n "$first" ] && [ -n "$model" ] && [ "$first" -lt "$model" ] ||
        fail "$name: the estimate is not printed before the model is built"
    local ratios
    ratios=$(echo "$out" | awk '/^rank [0-9]+: peak/ { print $(NF - 3) }')
    [ "$(echo "$ratios" | wc -l)" = "$n" ] || fail "$name: want $n rank lines, got: $ratios"
    echo "$ratios" | awk '{ if ($1 < 0.85 || $1 > 1.15) bad = 1 } END { exit bad }' ||
        { echo "$out" | sed -n '/^memory estimate vs/,$p'; fail "$name: a ratio is off by > 15%: $(echo $ratios)"; }
    echo "ok: $name: measured / estimate per rank $(echo $ratios)"
}

check "1 rank" 1
check "tp=2" 2 --mesh tp=2
check "dp=2,tp=2 zero3" 4 --mesh dp=2,tp=2 --data-parallel zero3
check "dp=2,tp=2 zero3 + sequence parallel" 4 --mesh dp=2,tp=2 --data-parallel zero3 --sequence-parallel
check "dp=2 ddp, sgd + momentum" 2 --mesh dp=2,tp=1 --data-parallel ddp --optim sgd --momentum 0.9
check "1 rank, activation checkpointing" 1 --activation-checkpointing
check "dp=2,tp=2 zero3 + sequence parallel + activation checkpointing" 4 --mesh dp=2,tp=2 \
    --data-parallel zero3 --sequence-parallel --activation-checkpointing
# the activation peak itself, which checkpointing changes (not only the total)
out=$("$train" "${args[@]}" --activation-checkpointing) || fail "checkpointing: train_gpt failed"
act=$(echo "$out" | sed -n '/^memory estimate vs/,$p' | awk '$1 == "activation" { print $4 }')
awk -v r="$act" 'BEGIN { exit !(r != "" && r >= 0.85 && r <= 1.15) }' ||
    fail "activation checkpointing: activation measured / estimate '$act' is off by > 15%"
echo "ok: activation checkpointing: activation measured / estimate $act"

out=$("$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel zero3 --estimate-only) ||
    fail "--estimate-only failed"
echo "$out" | grep -q '^total ' || fail "--estimate-only printed no total"
echo "$out" | grep -qE '^(GPT |step )' && fail "--estimate-only built or trained the model"
echo "ok: --estimate-only prints the table and stops"
