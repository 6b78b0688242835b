#!/bin/bash
# train_gpt when a rank fails (issue 16 items 3 and 4, "Done when"): every
# rank stops within seconds, the message naming the rank (and file) at fault.
#  - --resume with one rank's shard truncated: dtrun exits non-zero in < 5 s
#  - one rank SIGSTOPped, DT_TIMEOUT_S=5, under dtrun and started by hand:
#    every other rank fails within 2x the timeout naming the stopped world rank
#  - dtrun --stop-timeout: a stopped rank fails the job even with no timeout near
#  - one rank SIGKILLed mid-run (ZeRO-2 and DDP, started by hand): the others
#    exit with "peer lost" naming the dead world rank within seconds
#  - one rank alone past its DT_MEMORY_LIMIT: every rank fails with out of
#    memory naming world rank 1 and the category (train_gpt aborts the world)
# usage: failure_train_gpt.sh TRAIN_GPT DTRUN WORKDIR
set -u
train=$1 dtrun=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; } # lt A B: A < B
base=(--batch 4 --seq 32)
long=(--steps 100000000)

# --- a corrupt shard: every rank fails at once, naming the file
"$dtrun" -n 4 "$train" "${base[@]}" --mesh dp=2,tp=2 --steps 2 --save-checkpoint "$work/ck" \
    > /dev/null || fail "save on dp=2 x tp=2"
shard=$(ls "$work"/ck/rank-1.*.safetensors) || fail "no rank-1 file"
truncate -s 1000 "$shard"
t0=$(now)
"$dtrun" -n 4 --tag-output "$train" "${base[@]}" --mesh dp=2,tp=2 --steps 6 --resume "$work/ck" \
    > "$work/resume.txt" 2>&1 && fail "resume from a truncated shard succeeded"
took=$(since "$t0")
lt "$took" 5 || fail "resume with a corrupt shard took $took s"
for r in 0 1 2 3; do
    grep "^\[$r\] train_gpt: .*$(basename "$shard")" "$work/resume.txt" > /dev/null ||
        fail "rank $r does not name $shard: $(cat "$work/resume.txt")"
done
echo "ok: corrupt shard: every rank failed in $took s naming $(basename "$shard")"

# wait until $1 (a file) shows a training step (at most 30 s)
wait_training() {
    for _ in $(seq 300); do
        grep -q '^\(\[0\] \)\?step' "$1" 2> /dev/null && return 0
        sleep 0.1
    done
    fail "no training step in $1: $(cat "$1")"
}

# the pid of rank $2 among the children of $1 (dtrun)
rank_pid() {
    local s p
    for s in /proc/[0-9]*/stat; do # no pgrep: procps is not in every base image
        p=${s#/proc/}
        p=${p%/stat}
        [ "$(awk '{ print $4 }' "$s" 2> /dev/null)" = "$1" ] || continue
        tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "RANK=$2" && echo "$p" && return
    done
}

# --- a stopped rank under dtrun, DT_TIMEOUT_S=5
DT_TIMEOUT_S=5 "$dtrun" -n 4 --tag-output "$train" "${base[@]}" --mesh dp=2,tp=2 "${long[@]}" \
    > "$work/stop_dtrun.txt" 2>&1 &
d=$!
wait_training "$work/stop_dtrun.txt"
victim=$(rank_pid $d 3)
[ -n "$victim" ] || fail "rank 3 of dtrun not found"
t0=$(now)
kill -STOP "$victim"
wait $d && fail "dtrun exited 0 with a stopped rank"
took=$(since "$t0")
kill -KILL "$victim" 2> /dev/null
lt "$took" 10 || fail "dtrun took $took s with a stopped rank"
grep -q "dtrun: rank 3 .*stopped" "$work/stop_dtrun.txt" ||
    fail "dtrun does not name the stopped rank: $(tail "$work/stop_dtrun.txt")"
for line in $(grep -n "train_gpt: " "$work/stop_dtrun.txt" | cut -d: -f1); do
    sed -n "${line}p" "$work/stop_dtrun.txt" | grep -q "world rank 3" ||
        fail "an error does not name world rank 3: $(sed -n "${line}p" "$work/stop_dtrun.txt")"
done
echo "ok: stopped rank under dtrun: the job ended after $took s naming rank 3"

# start 4 ranks of train_gpt by hand ($1: tag; the rest: train_gpt options); pids in $pids
start_by_hand() {
    local tag=$1
    shift
    pids=()
    local port=$((20000 + RANDOM % 20000))
    for r in 0 1 2 3; do
        RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port DT_JOB_TOKEN=failure-train-gpt-$$ \
            "$train" "$@" > "$work/$tag.$r.txt" 2>&1 &
        pids[r]=$!
    done
    wait_training "$work/$tag.0.txt"
}

# wait for ranks 0..2 (rank 3 is the victim): each must fail within $1 s of $t0 with $2 in its error
expect_others_fail() {
    local limit=$1 want=$2 tag=$3
    for r in 0 1 2; do
        wait "${pids[r]}" && fail "$tag: rank $r exited 0"
        local took
        took=$(since "$t0")
        lt "$took" $limit || fail "$tag: rank $r took $took s"
        grep "train_gpt: " "$work/$tag.$r.txt" | grep -q "$want" ||
            fail "$tag: rank $r's error lacks '$want': $(grep -v '^step' "$work/$tag.$r.txt")"
        echo "ok: $tag: rank $r failed after $took s: $(grep 'train_gpt: ' "$work/$tag.$r.txt")"
    done
}

# --- a stopped rank, ranks started by hand, DT_TIMEOUT_S=5
DT_TIMEOUT_S=5 start_by_hand stop_hand "${base[@]}" --mesh dp=2,tp=2 "${long[@]}"
t0=$(now)
kill -STOP "${pids[3]}"
expect_others_fail 10 "world rank 3" stop_hand
kill -KILL "${pids[3]}"
wait "${pids[3]}" 2> /dev/null

# --- dtrun notices a rank that stays stopped, long before the ranks' timeout
DT_TIMEOUT_S=300 "$dtrun" -n 2 --stop-timeout 2 "$train" "${base[@]}" --mesh tp=2 "${long[@]}" \
    > "$work/stop_notice.txt" 2>&1 &
d=$!
wait_training "$work/stop_notice.txt"
victim=$(rank_pid $d 1)
t0=$(now)
kill -STOP "$victim"
wait $d && fail "dtrun --stop-timeout 2 exited 0"
took=$(since "$t0")
lt "$took" 6 || fail "dtrun --stop-timeout 2 took $took s"
grep -q "dtrun: rank 1 stopped (SIGSTOP) for" "$work/stop_notice.txt" ||
    fail "dtrun does not report the stopped rank: $(tail -3 "$work/stop_notice.txt")"
echo "ok: dtrun --stop-timeout 2 ended the job after $took s"

# --- a rank killed mid-run: ZeRO-2 and DDP, started by hand (dtrun would end them itself)
for dp in zero2 ddp; do
    start_by_hand "kill_$dp" "${base[@]}" --mesh dp=2,tp=2 --data-parallel $dp "${long[@]}"
    t0=$(now)
    kill -KILL "${pids[3]}"
    expect_others_fail 10 "world rank 3" "kill_$dp"
    grep -l "peer lost" "$work"/kill_$dp.[012].txt > /dev/null ||
        fail "kill_$dp: no rank reports peer lost"
done
# and under dtrun: it names the dead rank and ends the job
"$dtrun" -n 4 "$train" "${base[@]}" --mesh dp=2,tp=2 --data-parallel zero2 "${long[@]}" \
    > "$work/kill_dtrun.txt" 2>&1 &
d=$!
wait_training "$work/kill_dtrun.txt"
victim=$(rank_pid $d 2)
t0=$(now)
kill -KILL "$victim"
wait $d && fail "dtrun exited 0 after a rank was killed"
took=$(since "$t0")
grep -q "dtrun: rank 2 killed by signal SIGKILL" "$work/kill_dtrun.txt" ||
    fail "dtrun does not name the killed rank: $(tail -3 "$work/kill_dtrun.txt")"
lt "$took" 5 || fail "dtrun took $took s after a rank was killed"
echo "ok: rank 2 killed under dtrun: the job ended after $took s"
# --- one rank alone past its memory budget (DT_MEMORY_LIMIT on rank 1 only):
# every rank fails with out of memory, naming world rank 1 and the category
port=$((20000 + RANDOM % 20000))
t0=$(now)
for r in 0 1 2 3; do
    lim=()
    [ $r = 1 ] && lim=(DT_MEMORY_LIMIT=1M)
    env "${lim[@]}" RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port DT_JOB_TOKEN=failure-oom-$$ \
        "$train" "${base[@]}" --mesh dp=2,tp=2 --steps 3 > "$work/oom.$r.txt" 2>&1 &
    pids[r]=$!
done
for r in 0 1 2 3; do
    wait "${pids[r]}" && fail "oom: rank $r exited 0"
    took=$(since "$t0")
    lt "$took" 10 || fail "oom: rank $r took $took s"
    line=$(grep "train_gpt: " "$work/oom.$r.txt" | head -1)
    echo "$line" | grep -q "^train_gpt: out of memory: .*bytes of [a-z]* would .*DT_MEMORY_LIMIT=1M" ||
        fail "oom: rank $r's error does not name the category and budget: $line"
    [ $r = 1 ] || echo "$line" | grep -q "world rank 1 failed" ||
        fail "oom: rank $r's error does not name world rank 1: $line"
done
echo "ok: rank 1 alone out of memory: every rank failed within $took s naming it and the category"
rm -rf "$work"
