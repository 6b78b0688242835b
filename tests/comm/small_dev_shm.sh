#!/bin/sh
# A /dev/shm too small for every rank's shared-memory segment (6000 KiB for
# four segments of 2.6 MiB: rings and bulk windows; Docker's default of 64 MiB
# holds those of 9 local ranks): the ranks that cannot reserve theirs turn
# shared memory off, the world agrees, and the collectives run through UCX. With a sparse segment this died
# of SIGBUS at the first slot past the limit. UCX itself is kept off /dev/shm
# (UCX_TLS=self,tcp) so the test does not depend on how much UCX wants there.
# Needs a private mount namespace (root); skipped (77) where that is refused.
#   small_dev_shm.sh DTRUN COMM_COLLECTIVES
set -u
dtrun=$1 test=$2
unshare -m true 2>/dev/null || { echo "no mount namespace here: skipped"; exit 77; }
exec unshare -m sh -c '
  mount -t tmpfs -o size=6000k tmpfs /dev/shm || { echo "cannot mount a tmpfs: skipped"; exit 77; }
  UCX_TLS=self,tcp DT_LOG=info DT_LOG_SUBSYS=comm "$0" -n 4 --tag-output "$1" > out.txt 2>&1
  rc=$?
  cat out.txt
  [ $rc -eq 0 ] || exit $rc
  grep -q "No space left on device" out.txt || { echo "FAIL: every segment fit"; exit 1; }
  grep -q "go through UCX" out.txt || { echo "FAIL: rings not turned off"; exit 1; }
' "$dtrun" "$test"
