#!/bin/bash
# train_gpt --data-parallel ddp|zero1|zero2|zero3 on dp=2 x tp=2 (4 ranks)
# prints the losses of one process; --memory-report prints one row per rank;
# a ZeRO-3 --save loads in one process; deferred init (the default) and
# --eager-init give the same losses, with and without --init, the deferred
# parameter peak below half the eager one; --micro-batches (one gradient sync
# per step) gives the same losses; a dp style without a dp dim fails.
# usage: train_gpt_dp.sh TRAIN_GPT DTRUN WORKDIR
set -u
train=$1 dtrun=$2 work=$3
mkdir -p "$work"
. "$(dirname "$0")/../common/train_gpt_lib.sh" # fail, losses, run_losses, same, expect_error
args=(--steps 3 --batch 4 --seq 32 --optim adamw)

run_losses "single-rank run" "$train" "${args[@]}"
single=$got
[ "$(echo "$single" | wc -l)" = 3 ] || fail "single-rank run printed no losses"

for st in ddp zero1 zero2 zero3; do
    same "dp=2,tp=2 $st" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel $st
done
same "dp=2,tp=2 zero3 +sp" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --sequence-parallel --data-parallel zero3
same "dp=2 default (zero2)" "$dtrun" -n 2 "$train" "${args[@]}" --mesh dp=2,tp=1
# gradient accumulation: --micro-batches splits each rank's rows, one dp reduction per step
for st in ddp zero2 zero3; do
    same "dp=2,tp=2 $st --micro-batches 2" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 \
        --data-parallel $st --micro-batches 2
done
same "one rank --micro-batches 4" "$train" "${args[@]}" --micro-batches 4
# --lr-schedule: constant with no warm-up is the plain run exactly; cosine with warm-up is not
run_losses "constant schedule" "$train" "${args[@]}" --lr-schedule constant
[ "$got" = "$single" ] || fail "--lr-schedule constant changed the losses: $got vs $single"
run_losses "cosine schedule" "$train" "${args[@]}" --lr-schedule cosine --warmup 2
[ "$got" != "$single" ] || fail "--lr-schedule cosine --warmup 2 left the losses unchanged"
echo "ok: --lr-schedule constant = no schedule; cosine with warm-up changes the run"
expect_error "--lr-schedule 'step' (expected constant, linear or cosine)" "$train" --lr-schedule step
expect_error "--micro-batches 3 is more than this rank's 2 rows" "$dtrun" -n 2 "$train" "${args[@]}" \
    --mesh dp=2,tp=1 --micro-batches 3

out=$("$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel zero3 --memory-report \
      --save "$work/z3.safetensors") || fail "zero3 --memory-report --save"
rows=$(echo "$out" | sed -n '/^memory report per rank/,$p' | grep -cE '^ +[0-3] ')
[ "$rows" = 4 ] || fail "--memory-report printed $rows rows, want 4"
echo "ok: --memory-report prints one row per rank"
"$train" --steps 0 --init "$work/z3.safetensors" > /dev/null || fail "zero3 save does not load"
echo "ok: a ZeRO-3 dt_save_full loads in one process"

# deferred init (the default on several ranks) = --eager-init, loss for loss, exactly;
# its parameter peak is the shards' (+ gathered units), not the full model's
param_peak() { sed -n '/^memory report per rank/,$p' | awk '$1 == "0" { split($3, a, "/"); print a[1] }'; }
for st in zero3 ddp; do
    run_losses "deferred $st" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel $st
    deferred=$got
    run_losses "eager $st" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel $st --eager-init
    [ "$deferred" = "$got" ] || fail "$st: deferred losses $deferred differ from --eager-init's $got"
    echo "ok: dp=2,tp=2 $st deferred init = --eager-init"
done
peaks=$(for e in "" --eager-init; do
    "$dtrun" -n 4 "$train" --config tiny --n-layers 4 --steps 0 --mesh dp=2,tp=2 --data-parallel zero3 \
        --memory-report $e | param_peak; done)
echo "$peaks" | awk 'NR == 1 { d = $1 } NR == 2 { e = $1 } END { exit !(d > 0 && 2 * d < e) }' ||
    fail "deferred parameter peak is not below half the eager one: $(echo $peaks)"
echo "ok: parameter peak MiB deferred vs eager: $(echo $peaks)"
# --init on a deferred model reads each rank's boxes: the same run as the eager --init
run_losses "eager --init" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel zero3 \
    --init "$work/z3.safetensors" --eager-init
eager_init=$got
run_losses "deferred --init" "$dtrun" -n 4 "$train" "${args[@]}" --mesh dp=2,tp=2 --data-parallel zero3 \
    --init "$work/z3.safetensors"
[ "$eager_init" = "$got" ] || fail "--init: deferred losses differ from --eager-init's"
[ "$eager_init" != "$single" ] || fail "--init did not change the start"
echo "ok: --init into a deferred ZeRO-3 model = --eager-init"

if "$dtrun" -n 2 "$train" "${args[@]}" --mesh tp=2 --data-parallel ddp > "$work/err.txt" 2>&1; then
    fail "--data-parallel without a dp dim succeeded"
fi
grep -q "needs a 'dp' dim" "$work/err.txt" || fail "no dp dim: message does not say so"
if "$train" "${args[@]}" --mesh dp=1,tp=1 --data-parallel zero4 > "$work/err.txt" 2>&1; then
    fail "--data-parallel zero4 succeeded"
fi
grep -q "zero4" "$work/err.txt" || fail "bad style: message does not name it"
echo "ok: bad --data-parallel uses fail by name"
