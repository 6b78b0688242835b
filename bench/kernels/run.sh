#!/usr/bin/env bash
# `make bench` entry: run the kernel benchmark from the given build directory.
set -eu
build=${1:-build}
"$build/bench/kernels/kernel_bench" "${@:2}"
