#!/usr/bin/env bash
# `make bench`: every benchmark under bench/, each printing its own side-by-side table.
set -eu
build=${1:-build}
for script in bench/*/run.sh; do
  [ -f "$script" ] || continue
  echo "== $script =="
  bash "$script" "$build"
done
