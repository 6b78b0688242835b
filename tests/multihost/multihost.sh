#!/bin/sh
# multihost.sh BUILD_DIR: a two-host job without a second machine.
#
# Two network namespaces joined by a veth pair (198.18.0.1 and .2, the
# benchmarking test range), each "host" in its own UTS (hostname), mount (its
# own /dev/shm and /proc), IPC (SysV segments) and pid namespace, so no
# same-host shortcut (shared memory, CMA, liveness by pid) can cross hosts:
# only the veth link joins them. One dtrun per host, 2 ranks each, mesh
# dp=2 x tp=2 (rank = 2 x host + local: tp inside a host, dp across the link).
# Checks:
#   1. GPT training equals the one-host run bit for bit (losses and saved
#      weights), and its gradients crossed the veth link (byte counters),
#      through dtensor's direct sockets (ucx_tcp.c; the log says how many
#      messages) and, with DT_TCP_DIRECT=0, through UCX alone, bit for bit;
#   2. a rank killed on one host ends every rank on both hosts within 10 s,
#      its host's dtrun naming it and the other host's ranks reporting it lost;
#   3. a host whose link is cut (ip link set down) is reported as lost on both
#      hosts within 3 x DT_TIMEOUT_S (5 s here), not hung (2 and 3 with the
#      direct sockets on, which the log shows);
#   4. the store refuses a rank with another job's token and one without any;
#   5. two hosts that share a hostname (machines or containers named alike)
#      are still two hosts: the job runs, over the link.
#   6. dp=4 (2 ranks a host) runs its collectives two-level (hierarchical):
#      the losses of one host with the same folds, fewer bytes over the link.
#   7. with the direct sockets on and their default threshold, calls whose sizes differ
#      across DT_TCP_DIRECT_MIN_KB fail on both hosts within seconds, not
#      after DT_TIMEOUT_S (tests/comm/comm_tcp_mismatch.c, one rank a host).
# Skips (77) where namespaces cannot be made (not root, no iproute2 or
# unshare, a container without CAP_SYS_ADMIN or veth). Every step runs under
# `timeout`; the namespaces go on every exit.
set -eu
build=${1:?usage: multihost.sh BUILD_DIR}
dtrun=$build/tools/dtrun/dtrun
train=$build/examples/train_gpt/train_gpt
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}
[ -x "$dtrun" ] && [ -x "$train" ] || fail "no $dtrun or $train: build first"
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
for c in ip unshare timeout; do
  command -v "$c" > /dev/null || skip "no $c here"
done

# Unique per run: ctest -j may run two copies. Interface names fit in 15 chars.
id=$$
ns0=dtmh0_$id ns1=dtmh1_$id v0=dtmv0_$id v1=dtmv1_$id
work=$(mktemp -d)
watchdog=
cleanup() {
  set +e
  trap - EXIT INT TERM HUP PIPE
  kill "$watchdog" 2> /dev/null
  # whatever still runs in our namespaces is ours (dtrun, its ranks)
  for ns in "$ns0" "$ns1"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null
  done
  wait 2> /dev/null
  # deleting a namespace deletes the veth end inside it (and so the pair)
  ip netns del "$ns0" 2> /dev/null
  ip netns del "$ns1" 2> /dev/null
  ip link del "$v0" 2> /dev/null # if setup failed before moving it
  # KEEP=1 keeps the outputs for a look
  if [ -n "${KEEP:-}" ]; then echo "outputs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'echo "FAIL: terminated (the 75 s deadline, or the caller)"; exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE
# The whole test's deadline: well before ctest's TIMEOUT, whose SIGKILL would
# leave the namespaces behind. (A trap waits for the step running in the
# foreground, at most 35 s more.)
(
  trap 'kill "$s" 2> /dev/null; exit 0' TERM
  sleep 75 &
  s=$!
  wait "$s" && kill -TERM $$
) > /dev/null 2>&1 &
watchdog=$!

setup() {
  ip netns add "$ns0" && ip netns add "$ns1" &&
    ip link add "$v0" type veth peer name "$v1" &&
    ip link set "$v0" netns "$ns0" && ip link set "$v1" netns "$ns1" &&
    ip -n "$ns0" addr add 198.18.0.1/24 dev "$v0" &&
    ip -n "$ns1" addr add 198.18.0.2/24 dev "$v1" &&
    ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up &&
    ip -n "$ns0" link set "$v0" up && ip -n "$ns1" link set "$v1" up
}
setup 2> "$work/setup.err" ||
  skip "cannot create network namespaces and a veth pair here: $(cat "$work/setup.err")"
# the namespaces each host's dtrun runs in (see host below)
uns="unshare --uts --mount --ipc --pid --mount-proc --kill-child --propagation private"
timeout 10 ip netns exec "$ns0" $uns sh -c 'hostname dt-probe && mount -t tmpfs dtshm /dev/shm' \
  2> "$work/setup.err" ||
  skip "cannot unshare UTS/mount/IPC/pid namespaces here: $(cat "$work/setup.err")"

now() { date +%s.%N; }
after() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# host N NAME ARGS...: host N's dtrun (2 ranks) running ARGS in its namespaces,
# hostname NAME, for at most 30 s (--kill-child: the whole pid namespace goes
# with it)
# (sh has no local variables: h_ names are host's own)
host() {
  h_n=$1 h_name=$2
  shift 2
  timeout -k 5 30 ip netns exec "dtmh${h_n}_$id" $uns \
    sh -c 'hostname "$0" && mount -t tmpfs dtshm /dev/shm && exec "$@"' "$h_name" \
    "$dtrun" --nnodes 2 --node-rank "$h_n" --master 198.18.0.1:29500 -n "${h_np:-2}" \
    --tag-output "$@"
}
# job NAME ARGS...: train_gpt ARGS on both hosts in the background; NAME.N
# gets host N's output and then "rc=<status> t=<seconds>"
job() {
  name=$1
  shift
  for n in 0 1; do
    (
      rc=0
      host "$n" "dt-host$n" "$train" "$@" > "$work/$name.$n" 2>&1 || rc=$?
      echo "rc=$rc t=$(now)" >> "$work/$name.$n"
    ) &
    pids="$pids $!"
  done
}
# settle: wait for the background steps (not the deadline's watchdog)
settle() {
  for p in $pids; do
    wait "$p" || true
  done
  pids=
}
pids=
field() { sed -n "s/^rc=\([0-9]*\) t=\([0-9.]*\)$/\\$2/p" "$work/$1"; }
wait_for() { # FILE REGEX: up to 30 s
  i=0
  until grep -q "$2" "$work/$1" 2> /dev/null; do
    i=$((i + 1))
    [ $i -le 150 ] || fail "no '$2' in $1 after 30 s: $(tail -n 5 "$work/$1")"
    sleep 0.2
  done
}
# bytes DIR: bytes host 1 sent (tx) or received (rx) over its end of the link
bytes() { ip netns exec "$ns1" cat "/sys/class/net/$v1/statistics/${1}_bytes"; }
# train_pid RANK: the pid (as seen here) of train_gpt's rank RANK on host 1
train_pid() {
  for p in $(ip netns pids "$ns1"); do
    [ "$(cat "/proc/$p/comm" 2> /dev/null)" = train_gpt ] &&
      tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RANK=$1" && echo "$p"
  done
  return 0
}
export DT_DEVICE=cpu DT_JOB_TOKEN=multihost-$id
args="--config tiny --mesh dp=2,tp=2 --data-parallel zero2 --batch 8 --seq 32"
steps=8

# 1. the same training as on one host, over the link
tx0=$(bytes tx) rx0=$(bytes rx)
# every message between the hosts but abort notices on the direct sockets
# (this model's are mostly under the 64 KiB default)
export DT_TCP_DIRECT=1 DT_TCP_DIRECT_MIN_KB=0
export DT_LOG=info DT_LOG_SUBSYS=comm
job same $args --steps $steps --save "$work/two.safetensors"
settle
unset DT_LOG DT_LOG_SUBSYS
[ "$(field same.0 1)" = 0 ] && [ "$(field same.1 1)" = 0 ] ||
  fail "two-host training failed: $(cat "$work/same.0" "$work/same.1")"
tx=$(($(bytes tx) - tx0)) rx=$(($(bytes rx) - rx0))
timeout -k 5 30 "$dtrun" -n 4 "$train" $args --steps $steps --save "$work/one.safetensors" \
  > "$work/one" 2>&1 || fail "one-host training failed: $(cat "$work/one")"
grep '^\[0\] step' "$work/same.0" | sed 's/^\[0\] //; s/  (.*//' > "$work/two.steps"
grep '^step' "$work/one" | sed 's/  (.*//' > "$work/one.steps"
[ "$(wc -l < "$work/one.steps")" = $steps ] || fail "the one-host run printed no $steps steps"
cmp -s "$work/one.steps" "$work/two.steps" ||
  fail "losses differ (one host, two hosts): $(paste "$work/one.steps" "$work/two.steps")"
cmp -s "$work/one.safetensors" "$work/two.safetensors" ||
  fail "the weights trained on two hosts differ from one host's"
echo "ok: dp across two hosts trains the one-host weights bit for bit ($steps steps)"
# zero2 over dp=2 moves half of each rank's gradient shard each way per step
# (reduce-scatter) and half of its weights back (all-gather): per direction
# about one fp32 copy of the model per step. Ask for half of that, which a
# shared-memory path between the hosts would not come near.
params=$(sed -n 's/.*GPT tiny: \([0-9]*\) parameters.*/\1/p' "$work/same.0")
[ -n "$params" ] || fail "no parameter count in host 0's output"
want=$((steps * params * 2))
[ "$tx" -ge "$want" ] && [ "$rx" -ge "$want" ] ||
  fail "only $tx bytes out and $rx in crossed host 1's link (want >= $want each): same-host shortcuts between hosts?"
echo "ok: the gradients crossed the link ($tx bytes out, $rx in; >= $want each)"
# direct sockets: every rank sent messages through them (ucx_tcp.c's count)
for n in 0 1; do
  for r in $((2 * n)) $((2 * n + 1)); do
    grep -Eq "^\[$r\] .*direct sockets carried [1-9][0-9]* messages" "$work/same.$n" ||
      fail "rank $r sent nothing through the direct sockets: $(grep -v ' step ' "$work/same.$n" | tail -n 5)"
  done
done
export DT_TCP_DIRECT=0
job ucx $args --steps $steps --save "$work/ucx.safetensors"
settle
export DT_TCP_DIRECT=1
[ "$(field ucx.0 1)" = 0 ] && [ "$(field ucx.1 1)" = 0 ] ||
  fail "two-host training with DT_TCP_DIRECT=0 failed: $(cat "$work/ucx.0" "$work/ucx.1")"
grep '^\[0\] step' "$work/ucx.0" | sed 's/^\[0\] //; s/  (.*//' > "$work/ucx.steps"
cmp -s "$work/one.steps" "$work/ucx.steps" && cmp -s "$work/one.safetensors" "$work/ucx.safetensors" ||
  fail "DT_TCP_DIRECT=0 trains other losses or weights than the direct sockets"
echo "ok: the direct sockets carried every rank's large messages; UCX alone trains the same bits"

# with_direct NAME: both hosts' ranks used the direct sockets (their log)
with_direct() {
  for n in 0 1; do
    [ "$(grep -c 'go through direct sockets' "$work/$1.$n")" = 2 ] ||
      fail "$1: host $n's ranks did not use the direct sockets: $(head -n 5 "$work/$1.$n")"
  done
}
# 2. a rank killed on host 1
export DT_LOG=info DT_LOG_SUBSYS=comm DT_TCP_DIRECT_MIN_KB=0
job kill $args --steps 1000000
wait_for kill.0 '^\[0\] step  *5 '
victim=$(train_pid 3)
[ -n "$victim" ] || fail "no train_gpt rank 3 on host 1"
t=$(now)
kill -9 "$victim"
settle
with_direct kill
for n in 0 1; do
  [ "$(field kill.$n 1)" != 0 ] || fail "host $n exited 0 after a rank was killed"
  s=$(after "$t" "$(field kill.$n 2)")
  awk -v s="$s" 'BEGIN { exit !(s <= 10) }' || fail "host $n took $s s (> 10) to end"
  echo "ok: host $n ended $s s after the kill"
done
grep -q '^dtrun: rank 3 killed by signal SIGKILL' "$work/kill.1" ||
  fail "host 1's dtrun does not name rank 3: $(tail -n 5 "$work/kill.1")"
for r in 0 1; do
  grep -Eq "^\[$r\] train_gpt: peer lost: rank $r: .*world rank 3\b" "$work/kill.0" ||
    fail "host 0's rank $r does not report rank 3 lost: $(grep -v ' step ' "$work/kill.0" | tail -n 5)"
done
echo "ok: host 1 names the killed rank 3, both ranks of host 0 report it lost"

# 3. the link cut
export DT_TIMEOUT_S=5
job cut $args --steps 1000000
wait_for cut.0 '^\[0\] step  *5 '
t=$(now)
ip -n "$ns1" link set "$v1" down
settle
unset DT_LOG DT_LOG_SUBSYS DT_TCP_DIRECT_MIN_KB
with_direct cut
ip -n "$ns1" link set "$v1" up
for n in 0 1; do
  [ "$(field cut.$n 1)" != 0 ] || fail "host $n exited 0 after its link was cut"
  s=$(after "$t" "$(field cut.$n 2)")
  awk -v s="$s" 'BEGIN { exit !(s <= 15) }' ||
    fail "host $n took $s s (> 3 x DT_TIMEOUT_S=5) to end: $(grep -v ' step ' "$work/cut.$n" | tail -n 8)"
  other='[23]'
  [ "$n" = 1 ] && other='[01]'
  grep -Eq "train_gpt: (timed out|peer lost): .*world rank $other\b" "$work/cut.$n" ||
    fail "host $n does not report the other host's ranks lost: $(tail -n 5 "$work/cut.$n")"
  echo "ok: host $n reported the cut link and ended $s s after it"
done

# 4. host 1's ranks started by hand: rank 2 with another job's token, rank 3
# with none at all; host 0 (the store) must refuse both and then give up
t=$(now)
(
  rc=0
  host 0 dt-host0 "$train" $args --steps 2 > "$work/tok.0" 2>&1 || rc=$?
  echo "rc=$rc t=$(now)" >> "$work/tok.0"
) &
pids=$!
bare() { # RANK TOKEN|-: one rank of host 1 without dtrun
  rc=0
  timeout -k 5 30 ip netns exec "$ns1" $uns sh -c \
    'hostname dt-host1 && mount -t tmpfs dtshm /dev/shm && exec "$@"' sh \
    env -u DT_JOB_TOKEN RANK="$1" WORLD_SIZE=4 LOCAL_RANK=$(($1 - 2)) LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=198.18.0.1 MASTER_PORT=29500 ${2#-} "$train" $args --steps 2 \
    > "$work/tok.r$1" 2>&1 || rc=$?
  echo "rc=$rc t=$(now)" >> "$work/tok.r$1"
}
sleep 0.5 # let host 0's store start listening: a refused connection is retried anyway
bare 2 DT_JOB_TOKEN=another-job &
pids="$pids $!"
bare 3 - &
pids="$pids $!"
settle
for r in 2 3; do
  grep -q 'refused our job token' "$work/tok.r$r" ||
    fail "rank $r was not refused: $(tail -n 5 "$work/tok.r$r")"
  [ "$(field tok.r$r 1)" != 0 ] || fail "rank $r exited 0 after being refused"
done
[ "$(grep -c 'store: dropping client 198\.18\.0\.2:.*: wrong job token' "$work/tok.0")" -ge 2 ] ||
  fail "host 0's store does not log both refusals: $(grep -v ' step ' "$work/tok.0" | tail -n 5)"
[ "$(field tok.0 1)" != 0 ] || fail "host 0 went on without host 1"
echo "ok: the store refuses another job's token and no token; host 0 ended after $(after "$t" "$(field tok.0 2)") s"

# 5. both hosts named dt-twin: without their boot ids and namespaces to tell
# them apart, each took the other's ranks for its own and read their pids in
# its own /proc ("peer lost (its process exited)" at the first collective)
tx0=$(bytes tx)
for n in 0 1; do
  (
    rc=0
    host "$n" dt-twin "$train" $args --steps 2 > "$work/twin.$n" 2>&1 || rc=$?
    echo "rc=$rc t=$(now)" >> "$work/twin.$n"
  ) &
  pids="$pids $!"
done
settle
for n in 0 1; do
  [ "$(field twin.$n 1)" = 0 ] ||
    fail "host $n failed with both hosts named dt-twin: $(grep -v ' step ' "$work/twin.$n" | tail -n 5)"
done
tx=$(($(bytes tx) - tx0)) want=$((2 * params * 2))
[ "$tx" -ge "$want" ] || fail "with one hostname only $tx bytes left host 1 (want >= $want)"
echo "ok: two hosts with one hostname train over the link ($tx bytes out)"

# 6. dp=4 (2 ranks a host): zero2's reduce-scatters and all-gathers over the
# 4-rank dp comm span both hosts with 2 ranks each, so they run two-level
# (src/comm/algo/*_hier.c). These fold in another order than the flat ring,
# so the reference is one host with DT_TEST_RANKS_PER_HOST=2 (the same
# two-level folds, bit for bit); the flat algorithms forced on the two hosts
# must move more bytes over the link.
hargs="--config tiny --mesh dp=4,tp=1 --data-parallel zero2 --batch 8 --seq 32"
tx0=$(bytes tx)
job hier $hargs --steps 4
settle
txh=$(($(bytes tx) - tx0)) tx0=$(bytes tx)
export DT_ALGO=allreduce:ring,reduce_scatter:ring,allgather:ring
job flat $hargs --steps 4
settle
unset DT_ALGO
txf=$(($(bytes tx) - tx0))
for n in 0 1; do
  [ "$(field hier.$n 1)" = 0 ] && [ "$(field flat.$n 1)" = 0 ] ||
    fail "dp=4 over two hosts failed: $(tail -n 5 "$work/hier.$n" "$work/flat.$n")"
done
DT_TEST_RANKS_PER_HOST=2 timeout -k 5 30 "$dtrun" -n 4 "$train" $hargs --steps 4 \
  > "$work/hone" 2>&1 || fail "one-host dp=4 training failed: $(cat "$work/hone")"
grep '^\[0\] step' "$work/hier.0" | sed 's/^\[0\] //; s/  (.*//' > "$work/hier.steps"
grep '^step' "$work/hone" | sed 's/  (.*//' > "$work/hone.steps"
[ "$(wc -l < "$work/hone.steps")" = 4 ] || fail "the one-host dp=4 run printed no 4 steps"
cmp -s "$work/hone.steps" "$work/hier.steps" ||
  fail "dp=4 losses differ (one host, two hosts): $(paste "$work/hone.steps" "$work/hier.steps")"
[ "$txh" -lt "$txf" ] ||
  fail "two-level collectives sent $txh bytes over the link, the flat ones $txf: not used?"
echo "ok: dp=4 over two hosts runs two-level: one-host losses bit for bit, $txh bytes out against $txf flat"

# 7. mismatched sizes across the direct path's threshold, with the direct sockets on and the default threshold:
# the markers (src/comm/ucx/ucx_tcp_mark.c) fail them at once on both hosts
mism=$build/tests/comm/comm_tcp_mismatch
if [ -x "$mism" ]; then
  export DT_TCP_DIRECT=1
  unset DT_TCP_DIRECT_MIN_KB
  export DT_TIMEOUT_S=120 DT_LOG=info DT_LOG_SUBSYS=comm
  for n in 0 1; do
    (
      rc=0
      h_np=1 host "$n" "dt-host$n" "$mism" > "$work/mism.$n" 2>&1 || rc=$?
      echo "rc=$rc t=$(now)" >> "$work/mism.$n"
    ) &
    pids="$pids $!"
  done
  settle
  unset DT_LOG DT_LOG_SUBSYS
  for n in 0 1; do
    [ "$(field mism.$n 1)" = 0 ] ||
      fail "mismatched sizes over two hosts: host $n: $(grep -v '^\[.\] \[dtensor' "$work/mism.$n" | tail -n 8)"
    [ "$(grep -c 'go through direct sockets' "$work/mism.$n")" = 1 ] ||
      fail "mism: host $n's rank did not use the direct sockets by default: $(head -n 5 "$work/mism.$n")"
  done
  echo "ok: mismatched sizes across the direct path's threshold fail at once on both hosts (default on)"
fi
