#!/bin/bash
# train_gpt on tensor-parallel ranks, started from weights PyTorch made, gives
# PyTorch's own losses (tests/reference/gpt_ref.py compare: the spec's model
# in plain PyTorch, one process) within 1e-5 relative: tp=2, tp=2 with
# sequence parallelism, tp=4. Skipped (77) when Debian's python3-torch is
# not installed: the suite never needs PyTorch.
# usage: train_gpt_vs_pytorch.sh TRAIN_GPT DTRUN TOKENS REF_PY WORKDIR
set -u
train=$1 dtrun=$2 tokens=$3 ref=$4 work=$5
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "python3-torch not installed: skipped"; exit 77; }
mkdir -p "$work"
. "$(dirname "$0")/../common/train_gpt_lib.sh" # fail, losses, run_losses
run_losses "gpt_ref.py compare" /usr/bin/python3 "$ref" compare "$tokens" "$work/pt.safetensors" \
    tiny 4 adamw 0.003
theirs=$got
[ "$(echo "$theirs" | wc -l)" = 4 ] || fail "gpt_ref.py printed $(echo "$theirs" | wc -l) losses, want 4"
run() { # $1 name, $2 ranks, rest: options
    local name=$1 n=$2 ours
    shift 2
    run_losses "$name" "$dtrun" -n "$n" "$train" --data "$tokens" --init "$work/pt.safetensors" \
        --steps 4 --optim adamw --lr 0.003 "$@"
    ours=$got
    [ "$(echo "$ours" | wc -l)" = 4 ] || fail "$name printed $(echo "$ours" | wc -l) losses, want 4"
    paste <(echo "$theirs") <(echo "$ours") | awk -v n="$name" '
        { d = $1 - $2; if (d < 0) d = -d; if ($2 == "" || d > 1e-5 * $1) { print n ": " $2 " vs PyTorch " $1; bad = 1 } }
        END { exit bad }' || fail "$name differs from PyTorch"
    echo "ok: $name: $(echo $ours) (PyTorch: $(echo $theirs))"
}
run "tp=2" 2 --mesh tp=2
run "tp=2 +sp" 2 --mesh tp=2 --sequence-parallel
run "tp=4" 4 --mesh tp=4
echo "1 passed, 0 failed"
