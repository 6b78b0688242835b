#!/bin/sh
# veth_link.sh [BUILD_DIR] [-r RATE] [-b MINBYTES] [-e MAXBYTES] [-n ITERS] [-k REPEAT]
#              [-P CPUS]
#
# Measures the namespace "hosts" link alone, for commsim's `veth` preset
# (docs/COMMSIM.md): two network namespaces joined by a veth pair, the link
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

id=$$
ns0=dtvl0_$id ns1=dtvl1_$id v0=dtvv0_$id v1=dtvv1_$id
work=$(mktemp -d)
cleanup() {
  set +e
  for ns in "$ns0" "$ns1"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null
  done
  ip netns del "$ns0" 2> /dev/null
  ip netns del "$ns1" 2> /dev/null
  ip link del "$v0" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$ns0"
ip netns add "$ns1"
ip link add "$v0" type veth peer name "$v1"
ip link set "$v0" netns "$ns0"
ip link set "$v1" netns "$ns1"
ip -n "$ns0" addr add 198.18.1.1/24 dev "$v0"
ip -n "$ns1" addr add 198.18.1.2/24 dev "$v1"
for n in 0 1; do
  ip -n "dtvl${n}_$id" link set lo up
  ip -n "dtvl${n}_$id" link set "dtvv${n}_$id" up
  [ "$RATE" = none ] && continue
  ip netns exec "dtvl${n}_$id" tc qdisc add dev "dtvv${n}_$id" root handle 1: \
    tbf rate "$RATE" burst 64kb latency 10ms
done
printf '198.18.1.1 h0\n198.18.1.2 h1\n127.0.0.1 localhost\n' > "$work/hosts"
uns="unshare --uts --mount --ipc --pid --mount-proc --fork --kill-child --propagation private"
inhost() {
  i_n=$1
  shift
  timeout -k 5 600 ip netns exec "dtvl${i_n}_$id" $uns sh -c \
    'hostname "$0" && mount -t tmpfs dtshm /dev/shm && mount --bind "$1" /etc/hosts &&
     shift && exec "$@"' "h$i_n" "$work/hosts" "$@"
}
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
