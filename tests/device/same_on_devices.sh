#!/bin/sh
# Usage: same_on_devices.sh [--resume-at K] DTRUN NP TRAIN_GPT [train_gpt options...]
#
# Trains with the same options on NP ranks twice, --device cpu and --device
# sim, and fails unless both exit 0 and print the same losses (every step
# line, timings dropped) and save byte-identical weights. The sim device runs
# the CPU kernels behind a strict device boundary, so any difference is a
# device-genericity bug above the kernels. DT_SIM_DELAY_US holds every sim job
# back a little, so a missing synchronisation reads poison instead of passing
# by luck. With --resume-at K, each device first trains K steps and saves a
# sharded checkpoint, and the compared run resumes from it (save, reshard and
# load of device tensors).
set -u
resume_at=""
if [ "$1" = "--resume-at" ]; then
    resume_at=$2
    shift 2
fi
dtrun=$1
np=$2
train=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() { # run DEVICE OUT [options...]
    d=$1
    o=$2
    shift 2
    DT_DEVICE=cpu DT_SIM_DELAY_US=20 "$dtrun" -n "$np" "$train" --device "$d" "$@" >"$o" 2>&1
}

for dev in cpu sim; do
    resume=""
    if [ -n "$resume_at" ]; then
        if ! run "$dev" "$dir/first_$dev" "$@" --steps "$resume_at" \
            --save-checkpoint "$dir/ck_$dev"; then
            echo "FAIL: --device $dev: the first $resume_at steps exited non-zero:"
            cat "$dir/first_$dev"
            exit 1
        fi
        resume="--resume $dir/ck_$dev"
    fi
    # shellcheck disable=SC2086 # $resume is two words or none
    if ! run "$dev" "$dir/out_$dev" --save "$dir/w_$dev.safetensors" "$@" $resume; then
        echo "FAIL: --device $dev exited non-zero:"
        cat "$dir/out_$dev"
        exit 1
    fi
    # drop timings: "(12.3 ms)" and the tokens/s line
    grep '^step ' "$dir/out_$dev" | sed 's/  ([0-9.]* ms)$//' >"$dir/steps_$dev"
    if [ ! -s "$dir/steps_$dev" ]; then
        echo "FAIL: --device $dev printed no step line:"
        cat "$dir/out_$dev"
        exit 1
    fi
done
if ! diff "$dir/steps_cpu" "$dir/steps_sim"; then
    echo "FAIL: losses differ between --device cpu and --device sim"
    exit 1
fi
if ! cmp "$dir/w_cpu.safetensors" "$dir/w_sim.safetensors"; then
    echo "FAIL: saved weights differ between --device cpu and --device sim"
    exit 1
fi
echo "same on cpu and sim: $(wc -l <"$dir/steps_cpu") steps, weights identical ($np ranks: $*)"
