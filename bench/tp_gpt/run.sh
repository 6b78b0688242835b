#!/usr/bin/env bash
# The reference GPT's training step (SGD) on tp ranks, one compute thread per
# rank: train_gpt --mesh tp=N (dtensor, the spec's default plan) and the same
# model tensor-parallel by hand in PyTorch + gloo (tp_gpt_torch.py, Debian's
# python3-torch), on the same token file, then the ratio of the median step
# times (step 0 is a warm-up in both). On a machine whose cores are busy with
# other work, DT_SPIN_US=0 (sleep at once in waits, as gloo does) matters:
# spinning ranks then take the CPU from the peer they wait for.
#   bench/tp_gpt/run.sh BUILD_DIR [--world 2] [--config small] [--batch 8] [--seq 256] [--steps 6]
set -eu
build=${1:-build}
shift || true
world=2 config=small batch=8 seq=256 steps=6
while [ $# -gt 1 ]; do
    case $1 in
    --world) world=$2 ;; --config) config=$2 ;; --batch) batch=$2 ;;
    --seq) seq=$2 ;; --steps) steps=$2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
here=$(cd "$(dirname "$0")" && pwd)
tokens=$build/examples/data/tokens.bin
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DT_NUM_THREADS=1
out=$("$build/tools/dtrun/dtrun" -n "$world" "$build/examples/train_gpt/train_gpt" --config "$config" \
    --mesh "tp=$world" --optim sgd --lr 0.02 --batch "$batch" --seq "$seq" --steps "$steps" --data "$tokens")
times=$(echo "$out" | sed -n 's/^step *\([0-9]*\) .*(\([0-9.]*\) ms).*/\1 \2/p' | awk '$1 > 0 { print $2 }' | sort -n)
ms=$(echo "$times" | awk '{ v[NR] = $1 } END { print v[int(NR / 2) + 1] }')
mn=$(echo "$times" | head -1)
losses=$(echo "$out" | sed -n 's/^step *[0-9]* *loss \([0-9.]*\).*/\1/p' | awk '{ printf "%.4f ", $1 }')
echo "dtensor  tp=$world gpt $config batch $batch seq $seq: step $ms ms (median of $((steps - 1))), min $mn ms; losses $losses"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "pytorch: not installed (apt-get install python3-torch); no ratio"
    exit 0
fi
theirs=$(/usr/bin/python3 "$here/tp_gpt_torch.py" --world "$world" --config "$config" --batch "$batch" \
    --seq "$seq" --steps "$steps" --lr 0.02 --data "$tokens")
echo "$theirs"
b=$(echo "$theirs" | sed -n 's/.*step \([0-9.]*\) ms.*/\1/p')
d=$(echo "$theirs" | sed -n 's/.*min \([0-9.]*\) ms.*/\1/p')
awk -v a="$ms" -v b="$b" -v c="$mn" -v d="$d" -v spin="${DT_SPIN_US:-auto}" 'BEGIN {
    printf "ratio dtensor / pytorch step time: median %.3f, min %.3f (goal <= 0.9; DT_SPIN_US=%s)\n", a / b, c / d, spin }'
