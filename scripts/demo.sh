#!/usr/bin/env bash
# `make demo`: the main job. Trains on local CPU ranks with what the build has.
set -eu
build=${1:-build}
if [ -x "$build/examples/train_gpt/train_gpt" ] && [ -x "$build/tools/dtrun/dtrun" ] \
   && "$build/examples/train_gpt/train_gpt" --help 2>&1 | grep -q -- "--mesh"; then
  echo "== make demo: GPT tiny on 4 local CPU ranks, mesh dp=2,tp=2 =="
  exec "$build/tools/dtrun/dtrun" -n 4 --tag-output "$build/examples/train_gpt/train_gpt" \
    --config tiny --mesh dp=2,tp=2 --steps 30 --optim adamw --lr 3e-3
fi
if [ -x "$build/examples/train_gpt/train_gpt" ]; then
  echo "== make demo: GPT tiny, single process =="
  exec "$build/examples/train_gpt/train_gpt" --config tiny --steps 30 --optim adamw --lr 3e-3
fi
echo "== make demo: a small MLP trained with autograd, single process =="
exec "$build/examples/mlp/mlp"
