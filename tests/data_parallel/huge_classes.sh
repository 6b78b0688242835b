#!/bin/bash
# examples/huge_classes on tp=1 and tp=4: the same losses (the class-sharded
# head trains the same full weight), and tp=4 peaks at <= 0.3x tp=1's memory
# per rank. usage: huge_classes.sh HUGE_CLASSES DTRUN [CLASSES]
set -u
exe=$1 dtrun=$2 n=${3:-32768} steps=2
fail() { echo "FAIL: $*"; exit 1; }
args=(--classes "$n" --hidden 512 --batch 16 --steps "$steps")
one=$("$dtrun" -n 1 "$exe" "${args[@]}") || fail "tp=1 run"
four=$("$dtrun" -n 4 "$exe" "${args[@]}") || fail "tp=4 run"
echo "$one"
echo "$four"
field() { echo "$1" | grep '^result' | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
p1=$(field "$one" peak_mib_max) p4=$(field "$four" peak_mib_max)
# "step S  loss L  (T ms)": the losses in step order; exactly steps 0 .. steps-1
# must be there with a positive loss, or the comparison below has nothing to compare
losses() {
    echo "$1" | awk -v want="$steps" 'BEGIN { i = 0 } $1 == "step" && $3 == "loss" {
        if ($2 != i || !($4 + 0 > 0)) bad = 1; i++; print $4 }
        END { exit bad || i != want }'
}
l1=$(losses "$one") || fail "tp=1: want $steps step lines (0..$((steps - 1))) with a loss, got [$l1]"
l4=$(losses "$four") || fail "tp=4: want $steps step lines (0..$((steps - 1))) with a loss, got [$l4]"
echo "classes $n: peak per rank tp=1 $p1 MiB, tp=4 $p4 MiB"
awk -v a="$p4" -v b="$p1" 'BEGIN { exit !(b > 0 && a > 0 && a <= 0.3 * b) }' ||
    fail "tp=4 peak [$p4] > 0.3 x tp=1 [$p1] (or a result line is missing)"
paste <(echo "$l1") <(echo "$l4") | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = 1 } END { exit bad }' ||
    fail "losses differ: tp=1 [$l1] tp=4 [$l4]"
echo "ok: tp=4 peak <= 0.3 x tp=1 and the same losses ($(echo $l1))"
