#!/usr/bin/env bash
# The Megatron MLP block (h=1024, ffn 4096, 2048 tokens, f32, SGD step) on
# tp=2, one compute thread per rank: dtensor (bench_tp_mlp under dtrun) and
# PyTorch + gloo (tp_mlp_torch.py, Debian's python3-torch) in one run, then
# the ratio of their median and min step times (goal: dtensor <= 0.9 x
# PyTorch). On busy cores DT_SPIN_US=0 matters (see bench/tp_gpt/run.sh).
#   bench/tp_mlp/run.sh BUILD_DIR [--world 2] [--hidden 1024] [--ffn 4096] [--tokens 2048] [--steps 10]
set -eu
build=${1:-build}
shift || true
world=2
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[i]}" = --world ] && world=${args[i + 1]}
done
passthru=()
for ((i = 0; i < ${#args[@]}; i += 2)); do
    [ "${args[i]}" != --world ] && passthru+=("${args[i]}" "${args[i + 1]}")
done
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DT_NUM_THREADS=1
ours=$("$build/tools/dtrun/dtrun" -n "$world" "$build/bench/tp_mlp/bench_tp_mlp" "${passthru[@]}")
echo "$ours"
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "pytorch: not installed (apt-get install python3-torch); no ratio"
    exit 0
fi
theirs=$(/usr/bin/python3 "$here/tp_mlp_torch.py" --world "$world" "${passthru[@]}")
echo "$theirs"
ms() { sed -n 's/.*step \([0-9.]*\) ms.*/\1/p'; }
mn() { sed -n 's/.*min \([0-9.]*\) ms.*/\1/p'; }
a=$(echo "$ours" | ms) b=$(echo "$theirs" | ms) c=$(echo "$ours" | mn) d=$(echo "$theirs" | mn)
awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v spin="${DT_SPIN_US:-auto}" 'BEGIN {
    printf "ratio dtensor / pytorch step time: median %.3f, min %.3f (goal <= 0.9; DT_SPIN_US=%s)\n", a / b, c / d, spin }'
