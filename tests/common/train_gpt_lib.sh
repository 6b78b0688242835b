# Shared by the train_gpt end-to-end drivers (tests/styles/train_gpt_tp.sh,
# tests/styles/train_gpt_vs_pytorch.sh, tests/data_parallel/train_gpt_dp.sh):
# sourced, it only defines functions.
# same() runs a command and compares its losses with $single, the single-rank
# run's losses the driver sets (run_losses gets them without losing a status).

fail() { echo "FAIL: $*"; exit 1; }

# The loss column of train_gpt's "step" lines, one per line.
losses() { grep '^step' | awk '{print $4}'; }

# $1 name, rest: a command that prints train_gpt's step lines. Sets $got to
# their losses. Its output goes to a file, not down a pipe, so that its exit
# status is not lost: fails when it exits non-zero (a crash after the last
# step line included) or prints no step line.
run_losses() {
    local name=$1 out rc
    shift
    out=$(mktemp) || fail "$name: mktemp"
    "$@" > "$out"
    rc=$?
    got=$(losses < "$out")
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$out"
        rm -f "$out"
        fail "$name exited with status $rc"
    fi
    rm -f "$out"
    [ -n "$got" ] || fail "$name printed no step line"
}

# $1 name, rest: a train_gpt command (run through run_losses) whose losses must
# equal $single (the single-rank run's), step for step, within 1e-5 relative.
same() {
    local name=$1
    shift
    run_losses "$name" "$@"
    [ "$(echo "$got" | wc -l)" = "$(echo "$single" | wc -l)" ] ||
        fail "$name printed $(echo "$got" | wc -l) step lines, the single-rank run $(echo "$single" | wc -l)"
    paste <(echo "$single") <(echo "$got") | awk -v n="$name" '
        { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1 || $2 == "") { print n ": loss " $2 " vs " $1; bad = 1 } }
        END { exit bad }' || fail "$name differs from the single-rank run"
    echo "ok: $name losses equal the single-rank run"
}

# $1 text wanted on stderr, rest: a command that must fail.
expect_error() {
    local want=$1; shift
    local err
    err=$("$@" 2>&1 >/dev/null) && fail "'$*' succeeded"
    echo "$err" | grep -q -- "$want" || fail "'$*' did not say '$want': $err"
    echo "ok: $* -> $want"
}
