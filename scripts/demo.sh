#!/usr/bin/env bash
# `make demo`: the main job. Trains the reference GPT (tiny) on 4 local CPU ranks,
# 2-D mesh dp=2 x tp=2: tensor parallel inside each pair, ZeRO-2 across pairs.
set -eu
build=${1:-build}
echo "== make demo: GPT tiny on 4 local CPU ranks, mesh dp=2,tp=2, ZeRO-2, AdamW =="
exec "$build/tools/dtrun/dtrun" -n 4 --tag-output "$build/examples/train_gpt/train_gpt" \
  --config tiny --mesh dp=2,tp=2 --data-parallel zero2 --steps 200 --optim adamw --lr 3e-3 \
  --memory-report
