#!/usr/bin/env bash
# Installs the Debian packages dtensor needs, and only those that are missing.
# Idempotent: does nothing (and needs no root) when everything is present.
# libdnnl-dev is oneDNN, the default CPU matmul engine (DT_GEMM); without it GEMMs run on
# OpenBLAS. openmpi-bin is for the test that starts ranks under mpirun (store_ranks_mpirun_np2),
# iproute2 for the two-host test in network namespaces (tests/multihost).
# Extra packages can be asked for as arguments (e.g. libopenmpi-dev for the benchmarks).
set -eu
required="cmake make gcc pkg-config libopenblas-dev libdnnl-dev libucx-dev libcmocka-dev libcjson-dev openmpi-bin iproute2"
missing=""
for pkg in $required "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $pkg"
  fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != "0" ]; then
  echo "install-deps: missing Debian packages:$missing" >&2
  echo "install-deps: run as root, or: sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends $missing; then
  apt-get update
  apt-get install -y --no-install-recommends $missing
fi
