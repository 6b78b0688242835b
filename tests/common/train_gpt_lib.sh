# Shared by the train_gpt end-to-end drivers (tests/styles/train_gpt_tp.sh,
# tests/data_parallel/train_gpt_dp.sh): sourced, it only defines functions.
# same() compares with $single, the single-rank run's losses the driver sets.

fail() { echo "FAIL: $*"; exit 1; }

# The loss column of train_gpt's "step" lines, one per line.
losses() { grep '^step' | awk '{print $4}'; }

# $1 name, $2 losses: equal to $single (the single-rank run's) within 1e-5 relative.
same() {
    paste <(echo "$single") <(echo "$2") | awk -v n="$1" '
        { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1 || $2 == "") { print n ": loss " $2 " vs " $1; bad = 1 } }
        END { exit bad }' || fail "$1 differs from the single-rank run"
    echo "ok: $1 losses equal the single-rank run"
}

# $1 text wanted on stderr, rest: a command that must fail.
expect_error() {
    local want=$1; shift
    local err
    err=$("$@" 2>&1 >/dev/null) && fail "'$*' succeeded"
    echo "$err" | grep -q -- "$want" || fail "'$*' did not say '$want': $err"
    echo "ok: $* -> $want"
}
