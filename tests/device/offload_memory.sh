#!/bin/sh
# Usage: offload_memory.sh DTRUN TRAIN_GPT
#
# ZeRO-3 with --cpu-offload on the sim device, 4 ranks: the memory report must
# show the optimizer state in host memory on every rank and none of it on the
# device (current and peak), while the same run without offload keeps it on
# the device.
set -u
dtrun=$1
train=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# optimizer column (current/peak) of every rank row of the table titled $1
optim_column() {
    awk -v t="$1" '
        index($0, t) { on = 1; next }
        on && /^rank/ { next }
        on && /^ *[0-9]+ / { gsub(/\/ +/, "/"); $0 = $0; print $4; next }
        on { on = 0 }' "$out"
}

run() {
    if ! DT_DEVICE=cpu "$dtrun" -n 4 "$train" --device sim --steps 2 --batch 4 --seq 16 \
        --mesh dp=2,tp=2 --data-parallel zero3 --memory-report "$@" >"$out" 2>&1; then
        echo "FAIL: train_gpt $* exited non-zero:"
        cat "$out"
        exit 1
    fi
}

run --cpu-offload
host=$(optim_column ", host memory")
dev=$(optim_column ", sim memory")
if [ "$(echo "$host" | wc -w)" -ne 4 ] || [ "$(echo "$dev" | wc -w)" -ne 4 ]; then
    echo "FAIL: expected a host and a sim table of 4 ranks each:"
    cat "$out"
    exit 1
fi
for v in $dev; do
    [ "$v" = "0.000/0.000" ] || { echo "FAIL: optimizer state on the device with offload: $v"; cat "$out"; exit 1; }
done
for v in $host; do
    case $v in 0.000/*) echo "FAIL: no optimizer state in host memory with offload: $v"; cat "$out"; exit 1 ;; esac
done
echo "offload: optimizer state on the host ($(echo $host)), none on sim"

run
dev=$(optim_column ", sim memory")
for v in $dev; do
    case $v in 0.000/*) echo "FAIL: without offload the optimizer state should be on sim: $v"; cat "$out"; exit 1 ;; esac
done
echo "no offload: optimizer state on sim ($(echo $dev))"
