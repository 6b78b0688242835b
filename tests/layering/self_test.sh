#!/bin/sh
# The layering check can fail: on a copy of the sources, an include that goes
# up a layer, and an exception that no longer occurs, must each fail it. The
# copy gets its own exceptions file, so this holds when the real list is empty.
set -u
root=${1:?usage: self_test.sh ROOT WORKDIR}
work=${2:?usage: self_test.sh ROOT WORKDIR}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" || exit 2
cp -r "$root/src" "$root/mesh" "$root/placement" "$root/styles" "$work/" || exit 2
cp "$here/exceptions.txt" "$work/exceptions.txt" || exit 2
LAYER_EXCEPTIONS=$work/exceptions.txt
export LAYER_EXCEPTIONS
fail() { echo "FAIL: $*"; exit 1; }

out=$(sh "$here/check_layers.sh" "$work") || fail "the clean copy fails: $out"
echo '#include "styles/style_impl.h"' >> "$work/src/core/dtype.c"
out=$(sh "$here/check_layers.sh" "$work") && fail "an upward include passed: $out"
echo "$out" | grep -q 'src/core/dtype.c (core) includes styles/style_impl.h (styles)' ||
  fail "the message does not name the file and both layers: $out"
echo "ok: an upward include fails: $out"

echo 'src/core/dtype.c styles/style_impl.h listed by the self test' >> "$LAYER_EXCEPTIONS"
out=$(sh "$here/check_layers.sh" "$work") || fail "a listed upward include fails: $out"
echo "ok: a listed upward include passes"

sed -i '$d' "$work/src/core/dtype.c"
out=$(sh "$here/check_layers.sh" "$work") && fail "a stale exception passed: $out"
echo "$out" | grep -q "exception 'src/core/dtype.c styles/style_impl.h' no longer occurs" ||
  fail "the message does not name the stale exception: $out"
echo "ok: a stale exception fails"
