#!/bin/sh
# multihost.sh BUILD_DIR: a two-host job without a second machine. Two network
# namespaces joined by a veth pair (198.18.0.1 and .2, the benchmarking test
# range), each "host" with its own hostname (UTS namespace) and its own
# /dev/shm (mount namespace), so same-host shortcuts cannot cross hosts; one
# dtrun per host, 2 ranks each, mesh dp=2 x tp=2 (tp inside a host, dp
# across the link). Checks:
#   1. GPT training equals the one-host run bit for bit (saved weights);
#   2. a rank killed on one host ends every rank on both hosts within 10 s,
#      and its host names it;
#   3. a host whose link is cut is reported (timed out / peer lost) on both
#      hosts within 3 x DT_TIMEOUT_S (5 s here), not hung;
#   4. the store refuses a host whose job token differs.
# Skips (77) where namespaces cannot be made (not root, no iproute2, no
# unshare, a container without CAP_SYS_ADMIN).
set -u
build=${1:?usage: multihost.sh BUILD_DIR}
dtrun=$build/tools/dtrun/dtrun
train=$build/examples/train_gpt/train_gpt
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v unshare >/dev/null || skip "no unshare (util-linux)"

id=$$
ns0=dtmh0_$id ns1=dtmh1_$id v0=dtmv0_$id v1=dtmv1_$id
work=$(mktemp -d)
cleanup() {
  ip netns pids "$ns0" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$ns1" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$ns0" 2>/dev/null
  ip netns del "$ns1" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns0" 2>/dev/null && ip netns add "$ns1" &&
  ip link add "$v0" type veth peer name "$v1" &&
  ip link set "$v0" netns "$ns0" && ip link set "$v1" netns "$ns1" &&
  ip -n "$ns0" addr add 198.18.0.1/24 dev "$v0" && ip -n "$ns1" addr add 198.18.0.2/24 dev "$v1" &&
  ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up &&
  ip -n "$ns0" link set "$v0" up && ip -n "$ns1" link set "$v1" up ||
  skip "cannot create network namespaces here"
ip netns exec "$ns0" unshare -u -m true 2>/dev/null || skip "cannot unshare UTS/mount namespaces"

fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
# host N ARGS...: dtrun for host N (rank = 2N + local) in its namespaces
host() {
  n=$1
  shift
  ip netns exec "dtmh${n}_$id" unshare -u -m --propagation private sh -c \
    'hostname dt-host'"$n"'; mount -t tmpfs dtshm /dev/shm; exec "$@"' sh \
    "$dtrun" --nnodes 2 --node-rank "$n" --master 198.18.0.1:29500 -n 2 --tag-output "$@"
}
# job NAME ARGS...: both hosts in the background; NAME.0 and NAME.1 get each
# host's output and then "rc=<status> t=<seconds>"
job() {
  name=$1
  shift
  for n in 0 1; do
    (host "$n" "$train" "$@" > "$work/$name.$n" 2>&1
     echo "rc=$? t=$(now)" >> "$work/$name.$n") &
  done
}
field() { sed -n "s/^rc=\([0-9]*\) t=\([0-9.]*\)$/\\$2/p" "$work/$1"; }
after() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
wait_for() { # FILE REGEX: up to 60 s
  i=0
  until grep -q "$2" "$work/$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le 300 ] || fail "no '$2' in $1: $(tail -5 "$work/$1")"; sleep 0.2
  done
}
export DT_DEVICE=cpu DT_JOB_TOKEN=multihost-$id
args="--config tiny --mesh dp=2,tp=2 --data-parallel zero2 --batch 8 --seq 32"

# 1. the same training as on one host
job same $args --steps 8 --save "$work/two.safetensors"
wait
[ "$(field same.0 1)" = 0 ] && [ "$(field same.1 1)" = 0 ] ||
  fail "two-host training failed: $(cat "$work/same.0" "$work/same.1")"
"$dtrun" -n 4 "$train" $args --steps 8 --save "$work/one.safetensors" > "$work/one" 2>&1 ||
  fail "one-host training failed: $(cat "$work/one")"
cmp -s "$work/one.safetensors" "$work/two.safetensors" ||
  fail "the weights trained on two hosts differ from one host's"
grep '^\[0\] step' "$work/same.0" | sed 's/^\[0\] //; s/  (.*//' > "$work/two.steps"
grep '^step' "$work/one" | sed 's/  (.*//' > "$work/one.steps"
cmp -s "$work/one.steps" "$work/two.steps" || fail "losses differ: $(paste "$work/one.steps" "$work/two.steps")"
echo "ok: dp across two hosts trains the one-host weights bit for bit ($(wc -l < "$work/one.steps") steps)"

# 2. a rank killed on host 1
job kill $args --steps 1000000
wait_for kill.0 '^\[0\] step  *5 '
victim=""
for p in $(ip netns pids "$ns1"); do
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = train_gpt ] && victim=$p
done
[ -n "$victim" ] || fail "no train_gpt process on host 1"
t=$(now)
kill -9 "$victim"
wait
for n in 0 1; do
  [ "$(field kill.$n 1)" != 0 ] || fail "host $n exited 0 after a rank was killed"
  s=$(after "$t" "$(field kill.$n 2)")
  awk -v s="$s" 'BEGIN { exit !(s <= 10) }' || fail "host $n took $s s (> 10) to end"
  echo "ok: host $n ended $s s after the kill"
done
grep -q 'dtrun: rank [23] killed by signal SIGKILL' "$work/kill.1" ||
  fail "host 1 does not name the killed rank: $(tail -5 "$work/kill.1")"
grep -Eq '^\[[01]\] train_gpt: peer lost: rank [01]: .*world rank [23]' "$work/kill.0" ||
  fail "host 0's ranks do not report losing a host-1 rank: $(tail -5 "$work/kill.0")"

# 3. the link cut
export DT_TIMEOUT_S=5
job cut $args --steps 1000000
wait_for cut.0 '^\[0\] step  *5 '
t=$(now)
ip -n "$ns1" link set "$v1" down
wait
for n in 0 1; do
  [ "$(field cut.$n 1)" != 0 ] || fail "host $n exited 0 after its link was cut"
  s=$(after "$t" "$(field cut.$n 2)")
  awk -v s="$s" 'BEGIN { exit !(s <= 15) }' ||
    fail "host $n took $s s (> 3 x DT_TIMEOUT_S=5) to end: $(grep -v ' step ' "$work/cut.$n" | tail -8)"
  grep -Eq 'train_gpt: (timed out|peer lost)' "$work/cut.$n" ||
    fail "host $n does not report the lost link: $(tail -5 "$work/cut.$n")"
  echo "ok: host $n reported the cut link and ended $s s after it"
done
ip -n "$ns1" link set "$v1" up

# 4. a host with another job token
t=$(now)
for n in 0 1; do
  tok=multihost-$id
  [ "$n" = 1 ] && tok=another-job
  (DT_JOB_TOKEN=$tok host "$n" "$train" $args --steps 2 > "$work/tok.$n" 2>&1
   echo "rc=$? t=$(now)" >> "$work/tok.$n") &
done
wait
grep -q 'refused our job token' "$work/tok.1" || fail "host 1 was not refused: $(tail -5 "$work/tok.1")"
[ "$(field tok.0 1)" != 0 ] || fail "host 0 went on without host 1"
echo "ok: the store refuses another job's token; host 0 ended after $(after "$t" "$(field tok.0 2)") s"
