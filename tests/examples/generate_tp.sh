#!/bin/bash
# generate_tp.sh TRAIN_GPT GENERATE DTRUN WORKDIR
# examples/generate end to end: a short train_gpt run saves a checkpoint on
# tp=2; generate loads it on tp=1, 2 and 4 (each launched by dtrun) and the
# greedy continuation is the same text on every tp size, as is a seeded
# top-k sample; the output is the prompt and its continuation, then the
# tokens/s line. A bad mesh, flag or directory fails naming the value.
set -u
train=$1 gen=$2 dtrun=$3 work=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"
mkdir -p "$work"
ck=$work/ck
"$dtrun" -n 2 "$train" --mesh tp=2 --steps 100 --batch 8 --seq 64 --save-checkpoint "$ck" \
    > "$work/train.log" 2>&1 || { tail -n 20 "$work/train.log"; fail "train_gpt could not save"; }
[ -f "$ck/config.json" ] || fail "train_gpt wrote no $ck/config.json"

prompt="It is a truth universally"
# $1 tp, rest: sampling options; the text (all lines but the last) into $text
run() {
    local tp=$1 out rc
    shift
    out=$("$dtrun" -n "$tp" "$gen" --checkpoint "$ck" --mesh "tp=$tp" --prompt "$prompt" \
          --tokens 36 "$@" 2> "$work/err")
    rc=$?
    [ "$rc" = 0 ] || { cat "$work/err"; fail "tp=$tp $* exited with $rc"; }
    echo "$out" | tail -n 1 | grep -Eq "^36 tokens in [0-9.]+ s: [0-9.]+ tokens/s \(tp=$tp" ||
        fail "tp=$tp: no tokens/s line in: $out"
    text=$(echo "$out" | sed '$d')
    case $text in "$prompt"?*) ;; *) fail "tp=$tp: the output does not continue the prompt: $text" ;; esac
}
for mode in "--greedy" "--temperature 0.8 --top-k 8 --seed 5"; do
    run 1 $mode
    want=$text
    echo "tp=1 $mode: $want"
    for tp in 2 4; do
        run "$tp" $mode
        [ "$text" = "$want" ] || fail "tp=$tp $mode differs from tp=1: '$text' vs '$want'"
        echo "ok: tp=$tp $mode gives the same tokens"
    done
done

# $1 exit status, $2 message (a grep -E pattern), rest: the command
refused() {
    local want=$1 pat=$2 rc
    shift 2
    "$@" > "$work/out" 2>&1
    rc=$?
    [ "$rc" = "$want" ] || { cat "$work/out"; fail "$* exited with $rc, want $want"; }
    grep -Eq -- "$pat" "$work/out" || { cat "$work/out"; fail "$* does not say '$pat'"; }
    echo "ok: refused: $pat"
}
refused 1 "--mesh 'tp=3': the model's 4 heads do not split evenly over 3 ranks" \
    "$dtrun" -n 3 "$gen" --checkpoint "$ck" --mesh tp=3 --prompt x --tokens 2
refused 1 "--mesh 'tp=2' needs 2 processes, this run has 1" \
    "$gen" --checkpoint "$ck" --mesh tp=2 --prompt x --tokens 2
refused 1 "cannot read $work/none/config.json: No such file" \
    "$gen" --checkpoint "$work/none" --prompt x --tokens 2
refused 2 "unknown option '--bogus'" "$gen" --checkpoint "$ck" --bogus 1
refused 2 "--temperature: bad value '-1'" \
    "$gen" --checkpoint "$ck" --prompt x --tokens 2 --temperature -1
refused 2 "--greedy excludes" "$gen" --checkpoint "$ck" --prompt x --tokens 2 --greedy --seed 1
echo "ok: generate on tp=1, 2, 4"
