#!/bin/bash
# same_losses.sh DTRUN N EXE [ARG...]
# Runs an example as one process and on N ranks under dtrun; both must exit 0
# and print the same "step S  loss L" lines: the same steps, each loss within
# 1e-5 relative of the one-process run's (parallelism only reorders sums).
# The loss must also fall (the run trains at all).
set -u
dtrun=$1 n=$2 name=$(basename "$3")
shift 2
fail() { echo "FAIL: $*"; exit 1; }
# "step S  loss L" -> "S L"
steps() { awk '$1 == "step" && $3 == "loss" { print $2, $4 }'; }

out=$(mktemp) || fail mktemp
trap 'rm -f "$out"' EXIT
"$@" > "$out" 2>&1 || { cat "$out"; fail "one process: $* exited with status $?"; }
one=$(steps < "$out")
"$dtrun" -n "$n" "$@" > "$out" 2>&1 || { cat "$out"; fail "$n ranks: $* exited with status $?"; }
many=$(steps < "$out")
echo "one process / $n ranks:"
paste <(echo "$one") <(echo "$many")
[ -n "$one" ] || fail "the one-process run printed no step line"
[ "$(echo "$one" | wc -l)" = "$(echo "$many" | wc -l)" ] || fail "different numbers of step lines"
paste <(echo "$one") <(echo "$many") | awk '
    NR == 1 { first = $2 }
    { last = $2; d = $2 - $4; if (d < 0) d = -d
      if ($1 != $3 || d > 1e-5 * $2) { print "step " $1 ": loss " $4 " vs " $2; bad = 1 } }
    END { if (!(last < first)) { print "the loss did not fall: " first " -> " last; bad = 1 }
          exit bad }' || fail "$n ranks differ from one process"
echo "ok: $name on $n ranks matches one process"
