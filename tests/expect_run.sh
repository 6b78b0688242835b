#!/bin/sh
# expect_run.sh [--exit N] [--match REGEX]... -- COMMAND [ARG...]
#
# Runs COMMAND and passes only if it exits with status N (default 0) AND every
# REGEX (grep -E) matches a line of its output (stdout and stderr together).
# It replaces PASS_REGULAR_EXPRESSION, with which ctest ignores the exit
# status, and WILL_FAIL, which passes on any failure (a crash included)
# without looking at the message.
set -u
me=expect_run.sh
want=0
patterns=""
while [ $# -gt 0 ]; do
  case $1 in
    --exit)
      case ${2-} in
        '' | *[!0-9]*) echo "$me: --exit needs a status (0-255)"; exit 2 ;;
      esac
      want=$2
      shift 2
      ;;
    --match)
      [ $# -ge 2 ] && [ -n "$2" ] || { echo "$me: --match needs a regex"; exit 2; }
      patterns="$patterns$2
"
      shift 2
      ;;
    --)
      shift
      break
      ;;
    *)
      echo "$me: unknown option '$1' (usage: $me [--exit N] [--match REGEX]... -- COMMAND...)"
      exit 2
      ;;
  esac
done
[ $# -gt 0 ] || { echo "$me: no command after --"; exit 2; }

out=$(mktemp) || exit 2
trap 'rm -f "$out"' EXIT
"$@" >"$out" 2>&1
rc=$?
cat "$out"
bad=0
if [ "$rc" -ne "$want" ]; then
  echo "FAIL: $1 exited with status $rc, expected $want"
  bad=1
fi
# a here-document keeps the loop in this shell, so bad=1 survives it
while IFS= read -r re; do
  [ -n "$re" ] || continue
  if ! grep -Eq -- "$re" "$out"; then
    echo "FAIL: no line of the output matches: $re"
    bad=1
  fi
done <<EOF
$patterns
EOF
exit $bad
