#!/usr/bin/env bash
# examples/generate against PyTorch: greedy decoding with a KV cache of the
# reference GPT (config small by default), tokens/s of dtensor on tp=1 and
# tp=2 (dtrun, one compute thread per rank) and of PyTorch in one process
# (generate_torch.py, Debian's python3-torch run with /usr/bin/python3) on
# the same weights: a short train_gpt run saves both a sharded checkpoint
# (for generate) and a safetensors file (for PyTorch). PyTorch runs with one
# thread, the ratio's baseline, and with two (the cores tp=2 uses). Rounds
# alternate the runs and each row keeps its best tokens/s; "text" says
# whether a row's greedy text equals PyTorch's.
#   bench/generate/run.sh BUILD_DIR [--config small] [--tokens 200] [--rounds 3] [--train-steps 10]
set -eu
build=${1:-build}
shift || true
config=small tokens=200 rounds=3 train_steps=10
while [ $# -gt 1 ]; do
    case $1 in
    --config) config=$2 ;; --tokens) tokens=$2 ;; --rounds) rounds=$2 ;;
    --train-steps) train_steps=$2 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 DT_NUM_THREADS=1
dtrun=$build/tools/dtrun/dtrun gen=$build/examples/generate/generate
prompt="It is a truth universally acknowledged"
"$build/examples/train_gpt/train_gpt" --config "$config" --steps "$train_steps" --batch 4 --seq 64 \
    --data "$build/examples/data/tokens.bin" --save-checkpoint "$work/ck" \
    --save "$work/w.safetensors" > "$work/train.log"
have_torch=1
/usr/bin/python3 -c "import torch" 2>/dev/null || have_torch=0

# $1 row name, rest: the command; appends "name tokens/s" to $work/rates, the text to $work/name.txt
measure() {
    local name=$1 out
    shift
    out=$("$@")
    echo "$out" | sed '$d' > "$work/$name.txt"
    echo "$name $(echo "$out" | tail -n 1 | sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p')" >> "$work/rates"
}
for r in $(seq "$rounds"); do
    measure dtensor_tp1 "$dtrun" -n 1 "$gen" --checkpoint "$work/ck" --mesh tp=1 --prompt "$prompt" --tokens "$tokens"
    measure dtensor_tp2 "$dtrun" -n 2 "$gen" --checkpoint "$work/ck" --mesh tp=2 --prompt "$prompt" --tokens "$tokens"
    if [ "$have_torch" = 1 ]; then
        for th in 1 2; do
            measure "pytorch_${th}t" /usr/bin/python3 "$here/generate_torch.py" --weights "$work/w.safetensors" \
                --config-json "$work/ck/config.json" --prompt "$prompt" --tokens "$tokens" --threads "$th"
        done
    fi
done
echo "greedy decoding, GPT $config ($(sed -n 's/^GPT [a-z]*: \([0-9]*\) parameters.*/\1/p' "$work/train.log") parameters), prompt ${#prompt} tokens + $tokens generated, best of $rounds rounds"
[ "$have_torch" = 1 ] || echo "pytorch: not installed (apt-get install python3-torch); no ratio"
awk -v work="$work" -v torch="$have_torch" '
    { if (!($1 in best) || $2 > best[$1]) best[$1] = $2 }
    END {
        n = split("dtensor_tp1 dtensor_tp2 pytorch_1t pytorch_2t", rows, " ")
        split("1x1 2x1 1x1 1x2", shape, " ")
        base = ("pytorch_1t" in best) ? best["pytorch_1t"] : 0
        printf "%-12s %-16s %10s %12s %6s\n", "impl", "procs x threads", "tokens/s", "vs PT 1x1", "text"
        for (i = 1; i <= n; i++) {
            r = rows[i]
            if (!(r in best)) continue
            same = "-"
            if (torch == 1) {
                cmd = "cmp -s " work "/" r ".txt " work "/pytorch_1t.txt && echo same || echo differs"
                cmd | getline same; close(cmd)
            }
            ratio = base > 0 ? sprintf("%.2fx", best[r] / base) : "-"
            printf "%-12s %-16s %10.1f %12s %6s\n", r, shape[i], best[r], ratio, same
        }
        if (base > 0 && ("dtensor_tp2" in best))
            printf "goal: dtensor tp=2 >= 1.5x PyTorch single-process tokens/s: %s (%.2fx)\n",
                (best["dtensor_tp2"] >= 1.5 * base ? "met" : "NOT met"), best["dtensor_tp2"] / base
    }' "$work/rates"
