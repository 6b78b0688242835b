#!/bin/sh
# veth_link.sh [BUILD_DIR] [-r RATE] [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-k REPEAT]
#              [-P CPUS]
#
# Measures the namespace "hosts" link alone, for commsim's `veth` preset
# (docs/COMMSIM_VETH.md): two network namespaces joined by a veth pair, the link
# shaped to RATE (default 10gbit; none: unshaped) each way with tbf, set up as
# bench/comm/multihost_bench.sh does, and ONE rank per host (dtrun --nnodes 2
# -n 1), so every transfer crosses the link and no two ranks share a host.
# Runs comm_bench's all-gather (2 ranks: one exchange of half the buffer
# each way) REPEAT times and prints, per size, the best time (us) in
# comm_bench's rows. -P CPUS pins both ranks to those CPUs (taskset -c; -P 0:
# the two ranks share one core, as two ranks of a 2 x 2 job on 2 cores do).
# The 2 x 2 rank runs that commsim is validated on are
# multihost_bench.sh's; this run is only the link's calibration.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/../../build
case "${1:-}" in -*|"") ;; *) BUILD=$1; shift ;; esac
RATE=10gbit MINB=1K MAXB=16M ITERS=50 REPEAT=3 PIN=
while [ $# -gt 0 ]; do
  case "$1" in
    -r) RATE=$2; shift 2 ;;
    -b) MINB=$2; shift 2 ;;
    -e) MAXB=$2; shift 2 ;;
    -n) ITERS=$2; shift 2 ;;
    -k) REPEAT=$2; shift 2 ;;
    -P) PIN=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
dtrun=$BUILD/tools/dtrun/dtrun
bench=$BUILD/bench/comm/comm_bench
[ -x "$dtrun" ] && [ -x "$bench" ] || { echo "build $BUILD first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 77; }

. "$HERE/../../bench/comm/netns_hosts.sh"
hosts_up dtv 198.18.1 "$RATE"
export DT_DEVICE=cpu DT_JOB_TOKEN=veth-$id DT_TCP_DIRECT=1
k=1
while [ "$k" -le "$REPEAT" ]; do
  for n in 0 1; do
    inhost "$n" ${PIN:+taskset -c "$PIN"} "$dtrun" --nnodes 2 --node-rank "$n" --master 198.18.1.1:29521 -n 1 \
      "$bench" -b "$MINB" -e "$MAXB" -f 2 -n "$ITERS" -c allgather > "$work/ag.$k.h$n" 2>&1 &
  done
  wait
  k=$((k + 1))
done
echo "# veth link, 2 hosts x 1 rank, tbf $RATE${PIN:+, pinned to CPU $PIN}; comm_bench allgather, best of $REPEAT; $(uptime)"
cat "$work"/ag.*.h0 | awk '!/^#/ && NF == 8 && $1 ~ /^[0-9]+$/ {
  if (!($1 in t) || $5 < t[$1]) t[$1] = $5 } END { for (b in t) print b, t[b] }' | sort -n |
  awk '{ printf "%10d %12.1f\n", $1, $2 }'
