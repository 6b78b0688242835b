#!/bin/bash
# train_gpt on 2 tensor-parallel ranks (default plan, sequence parallel, a plan
# file) prints the same losses as one process; weights saved from tp=2 load
# and save again byte for byte in one process; bad --mesh/--plan fail by name.
# usage: train_gpt_tp.sh TRAIN_GPT DTRUN WORKDIR PLANS_DIR
set -u
train=$1 dtrun=$2 work=$3 plans=$4
mkdir -p "$work"
. "$(dirname "$0")/../common/train_gpt_lib.sh" # fail, losses, run_losses, same, expect_error
args=(--steps 3 --batch 4 --seq 32 --optim adamw)

run_losses "single-rank run" "$train" "${args[@]}"
single=$got
[ "$(echo "$single" | wc -l)" = 3 ] || fail "single-rank run printed no losses"

same "tp=2" "$dtrun" -n 2 "$train" "${args[@]}" --mesh tp=2
same "tp=2 +sp" "$dtrun" -n 2 "$train" "${args[@]}" --mesh dp=1,tp=2 --sequence-parallel
for plan in tp sp pairwise; do # the plan files shipped with train_gpt
    same "tp=2 --plan $plan.plan" "$dtrun" -n 2 "$train" "${args[@]}" --plan "$plans/$plan.plan"
done

# tp=3: 6 heads of 8, uneven ffn and vocabulary shards (86, 86, 84)
args3=(--steps 3 --batch 4 --seq 30 --optim sgd --dim 48 --n-heads 6)
run_losses "single-rank run (dim 48)" "$train" "${args3[@]}"
single3=$got
single_save=$single single=$single3
same "tp=3 (dim 48, 6 heads)" "$dtrun" -n 3 "$train" "${args3[@]}" --mesh tp=3
same "tp=3 +sp (uneven sequence shards)" \
    "$dtrun" -n 3 "$train" "${args3[@]}" --mesh tp=3 --sequence-parallel
single=$single_save

# save from tp=2, load in one process, save again: identical bytes
rm -f "$work/a.safetensors" "$work/b.safetensors"
"$dtrun" -n 2 "$train" "${args[@]}" --save "$work/a.safetensors" > /dev/null || fail "tp=2 --save"
"$train" --steps 0 --init "$work/a.safetensors" --save "$work/b.safetensors" > /dev/null ||
    fail "single-rank --init"
cmp "$work/a.safetensors" "$work/b.safetensors" || fail "tp=2 save / load / save differ"
echo "ok: tp=2 --save round-trips through one process exactly"

# --explain-plan prints every parameter's placement before training
explained=$("$dtrun" -n 2 "$train" --steps 0 --explain-plan --sequence-parallel) ||
    fail "--explain-plan exited non-zero"
echo "$explained" | grep -q "layers.1.feed_forward.w2 .*rowwise(output=S(1), local=false)" ||
    fail "--explain-plan: no style line for layers.1.feed_forward.w2"
echo "$explained" | grep -q "weight   S(1)     global \[64, 256\]      local \[64, 128\]" ||
    fail "--explain-plan: no shard line for w2.weight"
echo "ok: --explain-plan"

expect_error "only tensor" "$dtrun" -n 2 "$train" --steps 1 --mesh xp=2,tp=1
expect_error "no 'tp' dim" "$train" --steps 1 --mesh mp=1
expect_error "but the world has 2" "$dtrun" -n 2 "$train" --steps 1 --mesh tp=3
echo "output = colwize" > "$work/bad.plan"
expect_error "'colwize'" "$train" --steps 1 --plan "$work/bad.plan"
echo "layers.*.attention.wz = colwise" > "$work/nomatch.plan"
expect_error "'layers.\*.attention.wz' matches no module" "$train" --steps 1 --plan "$work/nomatch.plan"
expect_error "n_heads 4 is not divisible by the tp size 3" "$dtrun" -n 3 "$train" --steps 1
echo "1 passed, 0 failed"
