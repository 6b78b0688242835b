#!/bin/sh
# The shared library exports its public API only: every defined dynamic
# symbol starts with dt_ and a lower-case letter (internal ones are dt__ and
# hidden; a leaked helper would be callable, and clash, in user programs).
set -u
lib=${1:?usage: exported_symbols.sh LIBDTENSOR_SO}
command -v nm >/dev/null || { echo "nm not found"; exit 77; }
all=$(nm -D --defined-only "$lib" | awk '{print $3}') || exit 1
[ -n "$all" ] || { echo "FAIL: no symbols read from $lib"; exit 1; }
bad=$(echo "$all" | grep -v '^dt_[a-z]')
if [ -n "$bad" ]; then
  echo "FAIL: $lib exports non-public symbols:"
  echo "$bad"
  exit 1
fi
echo "ok: $(echo "$all" | wc -l) exported symbols, all dt_ public API"
