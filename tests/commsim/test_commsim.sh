#!/bin/sh
# commsim against closed forms: on a model with latency a and bandwidth b and
# free CPU work, a ring all-reduce of B bytes on n ranks takes
# 2(n-1)(a + B/(n b)) and recursive doubling log2(n)(a + B/b); the
# dispatcher's choice is printed; bad arguments fail naming the value.
#   test_commsim.sh path/to/commsim
set -u
SIM=$1
FAIL=0
# free CPU: no overheads, reductions and copies at 1e9 GB/s, a core per rank,
# no cache effects, every message eager (no handshake)
FREE="--set o_msg=0 --set o_round=0 --set bw_reduce=1e9 --set bw_copy=1e9 --set cores=4096
  --set mem_exp=0 --set eager_bytes=1G"

# expect NAME GOT WANT: |GOT/WANT - 1| < 1e-6
expect() {
  if awk -v g="$2" -v w="$3" 'BEGIN { d = g / w - 1; exit !(d < 1e-6 && d > -1e-6) }'; then
    echo "ok   $1: $2 s"
  else
    echo "FAIL $1: got $2 s, want $3 s"; FAIL=1
  fi
}
# time ARGS...: the predicted seconds of the one algorithm asked for (--csv column 6)
time_of() { "$SIM" --csv $FREE "$@" | cut -d, -f6; }

for n in 2 8 64; do
  # one host: shared memory, a = 2 us, b = 1 GB/s; B/n = 16 KiB per step, one segment
  t=$(time_of --ranks $n --bytes $((16384 * n)) --algo ring --set lat_shm=2 --set bw_shm=1 --set bw_eager=1)
  expect "ring allreduce, $n ranks, one host" "$t" \
    "$(awk -v n=$n 'BEGIN { printf "%.12g", 2 * (n - 1) * (2e-6 + 16384 / 1e9) }')"
  # one rank per host: the NICs, a = 5 us, b = 10 GB/s
  t=$(time_of --ranks $n --per-host 1 --bytes $((16384 * n)) --algo ring --set lat_net=5 \
    --set bw_net=10 --hosts-per-switch 1024)
  expect "ring allreduce, $n ranks, $n hosts" "$t" \
    "$(awk -v n=$n 'BEGIN { printf "%.12g", 2 * (n - 1) * (5e-6 + 16384 / 1e10) }')"
done
# a direct reduce-scatter is an all-to-all: each rank sends p-1 blocks and
# receives p-1, so with ports taking the first gap that fits (commsim_busy.h)
# it takes p-1 block times, not up to 2p-3 as when each transfer queued
# after the last one reserved (3 ranks still take 3: the greedy's order)
for n in 4 8; do
  t=$(time_of --ranks $n --collective reduce_scatter --bytes $((65536 * n)) --algo direct \
    --set lat_shm=2 --set bw_shm=1 --set bw_eager=1)
  expect "direct reduce-scatter, $n ranks, one host" "$t" \
    "$(awk -v n=$n 'BEGIN { printf "%.12g", 2e-6 + (n - 1) * 65536 / 1e9 }')"
done
t=$(time_of --ranks 16 --bytes 65536 --algo recursive_doubling --set lat_shm=1 --set bw_shm=2 --set bw_eager=2)
expect "recursive doubling allreduce, 16 ranks" "$t" "$(awk 'BEGIN { printf "%.12g", 4 * (1e-6 + 65536 / 2e9) }')"

# the tiny path (src/comm/comm_tiny.c): the dispatcher's one-round exchange of
# up to 256 bytes pays o_tiny per send or receive and no engine round; a
# forced algorithm (DT_ALGO) leaves it and pays o_msg and o_round (its
# message has arrived by the time the receive is posted)
TINY="--set o_tiny=1 --set o_msg=3 --set o_round=5 --set lat_shm=2 --set bw_eager=1"
t=$("$SIM" --csv $FREE $TINY --ranks 2 --bytes 256 | awk -F, '$8 == "*" { print $6 }')
expect "tiny allreduce, 2 ranks" "$t" "$(awk 'BEGIN { printf "%.12g", 1e-6 + 2e-6 + 256 / 1e9 }')"
t=$(time_of $TINY --ranks 2 --bytes 256 --algo recursive_doubling)
expect "forced recursive doubling, 2 ranks" "$t" "$(awk 'BEGIN { printf "%.12g", 2 * 3e-6 + 5e-6 }')"
# the bulk path (ucx_shm_bulk.c): a message above eager_bytes pays the
# handshake (3 latencies); one of one chunk its two copies in sequence; a
# longer one pays its first chunk's copies in sequence only when the window
# has no more slots than a send keeps chunks in flight (slots_shm 4 here,
# or more than 4 ranks on the host), none with 8
BULK="--set lat_shm=2 --set bw_shm=1 --set eager_bytes=4080 --set chunk_shm=128K --set flight_shm=4"
for case in "65536 8 65536" "65536 4 65536" "1048576 8 0" "1048576 4 131072"; do
  set -- $case
  t=$(time_of --ranks 2 --collective allgather --bytes $((2 * $1)) --algo ring $BULK --set slots_shm=$2)
  expect "bulk allgather, 2 ranks, $1 B blocks, $2 slots" "$t" \
    "$(awk -v b=$1 -v f=$3 'BEGIN { printf "%.12g", 6e-6 + (b + f) / 1e9 }')"
done
# 8 ranks on a host: the window keeps flight_shm slots, so even with
# slots_shm 8 each of the ring's 7 steps pays the first chunk's copies
t=$(time_of --ranks 8 --collective allgather --bytes $((8 * 1048576)) --algo ring $BULK --set slots_shm=8)
expect "bulk allgather, 8 ranks, 1 MiB blocks" "$t" \
  "$(awk 'BEGIN { printf "%.12g", 7 * (6e-6 + (1048576 + 131072) / 1e9) }')"
# ranks sharing cores (4 on 2: stretch 2, no context switch cost) stretch
# the latencies and the copies, not the fill of a one-chunk message: it is
# a wait, in which the other ranks run
t=$(time_of --ranks 4 --collective allgather --bytes $((4 * 65536)) --algo ring $BULK --set cores=2 \
  --set o_switch=0)
expect "bulk allgather, 4 ranks on 2 cores, 64 KiB blocks" "$t" \
  "$(awk 'BEGIN { printf "%.12g", 3 * (2 * 6e-6 + (2 * 65536 + 65536) / 1e9) }')"
# ranks sharing cores sleep while they wait: a rank whose host has no more
# ranks awake than cores runs as if it had a core of its own. Recursive
# doubling on 3 ranks on 2 cores is serial: rank 0 hands its 32 KiB to
# rank 1, which exchanges with rank 2 and hands the result back. The two
# hand-offs run while all three are awake (all enter the call; by the last
# one rank 2 has returned to the caller): stretched by 3/2, a third of a
# context switch for the handshake, the fill (one chunk: bytes) not
# stretched; the exchange runs while rank 0 sleeps: unstretched, no switch;
# every wake-up finds a core but rank 0's last (a third of a switch)
t=$(time_of --ranks 3 --bytes 32K --algo recursive_doubling $BULK --set cores=2 --set o_switch=5)
expect "recursive doubling, 3 ranks on 2 cores, a rank asleep" "$t" \
  "$(awk 'BEGIN { b = 32768e-9; printf "%.12g", 2 * (9e-6 + 5e-6 / 3 + 2.5 * b) + 6e-6 + 2 * b + 5e-6 / 3 }')"
# and a longer message pays its first chunk's copies in sequence even with
# 8 slots: a rank without a core copies out when it is scheduled (2 ranks
# on 1 core)
t=$(time_of --ranks 2 --collective allgather --bytes $((2 * 1048576)) --algo ring $BULK --set cores=1 \
  --set o_switch=0 --set slots_shm=8)
expect "bulk allgather, 2 ranks on 1 core, 1 MiB blocks" "$t" \
  "$(awk 'BEGIN { printf "%.12g", 2 * 6e-6 + (2 * 1048576 + 131072) / 1e9 }')"
# beyond the cache, per op (cache_call 0: every buffer as the scratch's):
# 2 ranks x 2 buffers of a 64 KiB (eager) message are 4x a 64 KiB cache,
# so at mem_exp 1 the transfer takes 4x as long
t=$(time_of --ranks 2 --collective allgather --bytes 131072 --algo ring --set lat_shm=2 \
  --set bw_eager=1 --set mem_exp=1 --set mem_max=100 --set cache_bytes=64K --set cache_call=0)
expect "allgather beyond the cache, 2 ranks" "$t" "$(awk 'BEGIN { printf "%.12g", 2e-6 + 4 * 65536 / 1e9 }')"
# the caller's buffers by the call's footprint (cache_call): a 2-rank
# all-gather of 1 MiB holds 1.5 MiB per rank (its 512 KiB input and the
# output), 3 MiB on the host, 4x a 768 KiB cache_call, so its one 512 KiB
# transfer takes 4x as long (the per-op cache is out of reach: 1G)
CALL="--set lat_shm=2 --set bw_eager=1 --set mem_exp=1 --set mem_max=100 --set cache_bytes=1G"
t=$(time_of --ranks 2 --collective allgather --bytes 1M --algo ring $CALL --set cache_call=768K)
expect "allgather beyond cache_call, 2 ranks" "$t" "$(awk 'BEGIN { printf "%.12g", 2e-6 + 4 * 524288 / 1e9 }')"
# a transfer's two copies each stream one side: recursive doubling on 2
# ranks sends 64 KiB out of the caller's buffer (2 x 64 KiB per rank, 256 KiB
# on the host: 4x a 64 KiB cache_call) into its scratch (per op: 2 ranks x 2
# x 64 KiB, 2x a 128 KiB cache_bytes): the mean, 3x
t=$(time_of --ranks 2 --bytes 64K --algo recursive_doubling $CALL --set cache_call=64K --set cache_bytes=128K)
expect "recursive doubling, caller's buffer into scratch" "$t" \
  "$(awk 'BEGIN { printf "%.12g", 2e-6 + 3 * 65536 / 1e9 }')"

# kernel TCP (bw_net_cpu): a network transfer holds both ranks' CPUs for
# bytes / bw_net_cpu, so a shared-memory copy of either waits behind it. A
# ring all-gather on 2 hosts x 2 ranks of 1 MiB blocks (rendezvous copies,
# no fill, the link 0.5 GB/s, copies 0.5 GB/s): each step's copy starts when
# the hold ends, B / bw_net_cpu after the network transfer; 0 (a NIC) lets
# it overlap. A 2 x 1 exchange holds each CPU in both directions at once:
# its time stays bytes / bw_net.
NETCPU="--set eager_bytes=4080 --set eager_net=1G --set lat_shm=0 --set lat_net=0 --set bw_shm=0.5
  --set chunk_shm=0 --set bw_net=0.5"
for c in 0 0.5 1 2; do
  t=$(time_of --ranks 4 --per-host 2 --collective allgather --bytes 4M --algo ring $NETCPU \
    --set bw_net_cpu=$c)
  expect "ring allgather, 2 hosts x 2, bw_net_cpu=$c" "$t" \
    "$(awk -v c=$c 'BEGIN { b = 1048576; d = c > 0 ? b / (c * 1e9) : 0
      if (d > b / 0.5e9) d = b / 0.5e9
      s = d + b / 0.5e9; if (s < b / 0.5e9) s = b / 0.5e9; printf "%.12g", 3 * s }')"
done
t=$(time_of --ranks 2 --per-host 1 --collective allgather --bytes 2M --algo ring $NETCPU --set bw_net_cpu=0.5)
expect "2 x 1 exchange, bw_net_cpu=0.5" "$t" "$(awk 'BEGIN { printf "%.12g", 1048576 / 0.5e9 }')"

# the dispatcher's choice (src/comm/comm_choose.c) on 8 ranks of one host,
# and on 4096 (ring only from 256 bytes per rank on)
for case in "8 1K direct" "8 8K recursive_doubling" "8 1M ring" "4096 1M recursive_doubling" \
  "4096 2M ring"; do
  set -- $case
  got=$("$SIM" --ranks $1 --bytes "$2" --algo direct | sed -n 's/^dispatcher: //p')
  if [ "$got" = "$3" ]; then echo "ok   dispatcher, $1 ranks, $2: $got"; else
    echo "FAIL dispatcher, $1 ranks, $2: got '$got', want '$3'"; FAIL=1; fi
done

# across hosts of one size the runtime runs the two-level algorithm where
# the ring would run (comm.c's hier_for_ring); on one host of 3-4 ranks a
# reduce-scatter of 16 MiB or more folds in one pass instead; a broadcast
# goes down the pipelined chain only from 512 KiB per rank beyond the first
for case in "4 2 allreduce 1M hier" "16 8 allreduce 64M hier" "16 8 allreduce 8K recursive_doubling" \
  "8 4 allgather 4M hier" "8 4 reduce_scatter 4M hier" "12 4 allreduce 64M hier" "6 4 allreduce 64M ring" \
  "4 4 reduce_scatter 64M fold" "3 3 reduce_scatter 24M fold" "4 4 reduce_scatter 4M ring" \
  "2 2 reduce_scatter 64M ring" "8 8 reduce_scatter 64M ring" "8 4 reduce_scatter 64M hier" \
  "2 1 broadcast 256K binomial" "2 1 broadcast 512K pipeline" "3 3 broadcast 512K binomial" \
  "3 3 broadcast 1M pipeline" "4 2 broadcast 1M binomial" "4 2 broadcast 4M pipeline" \
  "64 8 broadcast 16M binomial" "64 8 broadcast 64M pipeline"; do
  set -- $case
  forced=ring
  [ "$3" = broadcast ] && forced=binomial
  got=$("$SIM" --ranks $1 --per-host $2 --collective $3 --bytes "$4" --algo $forced | sed -n 's/^dispatcher: //p')
  if [ "$got" = "$5" ]; then echo "ok   dispatcher, $1 ranks of $2 per host, $3 $4: $got"; else
    echo "FAIL dispatcher, $1 ranks of $2 per host, $3 $4: got '$got', want '$5'"; FAIL=1; fi
done
for coll in allreduce allgather reduce_scatter; do
  rows=$("$SIM" --csv --ranks 8 --per-host 4 --collective $coll --bytes 1M --algo hier | wc -l)
  if [ "$rows" -eq 1 ]; then echo "ok   $coll hier on 2 hosts x 4 runs to the end"; else
    echo "FAIL $coll hier on 2 hosts x 4: $rows rows"; FAIL=1; fi
done
msg=$("$SIM" --ranks 8 --algo hier 2>&1 >/dev/null)
case "$msg" in *"not several hosts"*) echo "ok   rejects hier on one host: $msg" ;;
  *) echo "FAIL hier on one host: '$msg'"; FAIL=1 ;; esac

# every algorithm of every collective runs to the end (no unmatched message)
# on 5 ranks over 2 hosts, eager and rendezvous sizes
for case in "allreduce 3" "allgather 2" "reduce_scatter 3" "broadcast 3"; do
  set -- $case
  for b in 1K 1M; do
    rows=$("$SIM" --csv --ranks 5 --per-host 3 --collective $1 --bytes $b | wc -l)
    if [ "$rows" -eq "$2" ]; then echo "ok   $1 of $b on 5 ranks, 2 hosts: $2 algorithms"; else
      echo "FAIL $1 of $b on 5 ranks, 2 hosts: $rows rows, want $2"; FAIL=1; fi
  done
done

# bad arguments: exit 2 and a message naming the value
bad() {
  want=$1; shift
  msg=$("$SIM" "$@" 2>&1 >/dev/null); rc=$?
  case "$msg" in
    *"$want"*) [ $rc -eq 2 ] && { echo "ok   rejects $*: $msg"; return; } ;;
  esac
  echo "FAIL $*: rc $rc, message '$msg' does not name '$want'"; FAIL=1
}
bad "'0'" --ranks 0
bad "'12X'" --ranks 8 --bytes 12X
bad "'gather'" --ranks 8 --collective gather
bad "'abc'" --ranks 8 --set bw_net=abc
bad "'nope'" --ranks 8 --set nope=1
bad "'cluster2'" --ranks 8 --model cluster2
bad "--ranks" --bytes 1M
bad "less than one float" --ranks 8 --bytes 16
"$SIM" --ranks 8 --algo tree >/dev/null 2>/tmp/commsim_err.$$; rc=$?
if [ $rc -ne 0 ] && grep -q "'tree'" /tmp/commsim_err.$$; then echo "ok   rejects --algo tree"; else
  echo "FAIL --algo tree: rc $rc, $(cat /tmp/commsim_err.$$)"; FAIL=1; fi
rm -f /tmp/commsim_err.$$
exit $FAIL
