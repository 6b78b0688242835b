#!/bin/bash
# examples/huge_classes on tp=1 and tp=4: the same losses (the class-sharded
# head trains the same full weight), and tp=4 peaks at <= 0.3x tp=1's memory
# per rank. usage: huge_classes.sh HUGE_CLASSES DTRUN [CLASSES]
set -u
exe=$1 dtrun=$2 n=${3:-32768}
fail() { echo "FAIL: $*"; exit 1; }
args=(--classes "$n" --hidden 512 --batch 16 --steps 2)
one=$("$dtrun" -n 1 "$exe" "${args[@]}") || fail "tp=1 run"
four=$("$dtrun" -n 4 "$exe" "${args[@]}") || fail "tp=4 run"
field() { echo "$1" | grep '^result' | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
p1=$(field "$one" peak_mib_max) p4=$(field "$four" peak_mib_max)
l1=$(echo "$one" | grep '^step' | awk '{print $3}') l4=$(echo "$four" | grep '^step' | awk '{print $3}')
echo "classes $n: peak per rank tp=1 $p1 MiB, tp=4 $p4 MiB"
awk -v a="$p4" -v b="$p1" 'BEGIN { exit !(b > 0 && a <= 0.3 * b) }' || fail "tp=4 peak $p4 > 0.3 x $p1"
paste <(echo "$l1") <(echo "$l4") | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) bad = 1 } END { exit bad }' ||
    fail "losses differ: tp=1 [$l1] tp=4 [$l4]"
echo "ok: tp=4 peak <= 0.3 x tp=1 and the same losses"
