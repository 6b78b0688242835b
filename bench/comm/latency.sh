#!/bin/sh
# 8-byte latency of every collective: dtensor's comm_bench from one or two
# builds (before / after a change) and Open MPI's comm_bench_mpi, run
# interleaved ROUNDS times (a shared host's load then hits all alike), each
# row's best and median time per call, and the ratios against Open MPI.
#
#   bench/comm/latency.sh [-n RANKS] [-k ROUNDS] [-i ITERS] [-s BYTES] [-B] BUILD [BASE_BUILD]
#   (SUMMARY_ONLY=1 with the same OUT, -n and -k: the table again from the saved runs)
#
# -B pins dtensor rank i to CPU i mod nproc (taskset), as mpirun binds its
# ranks to cores when they do not outnumber them; dtrun binds only when they do.
# -s sets the size (default 8 B: the all-gather's output, the reduce-scatter's
# and all-to-all's input; -s 32 on 4 ranks gives those 8 B blocks).
set -u
N=2 R=5 IT=20000 BIND="" SZ=8
while getopts n:k:i:s:B o; do
  case $o in
    n) N=$OPTARG ;; k) R=$OPTARG ;; i) IT=$OPTARG ;; s) SZ=$OPTARG ;; B) BIND=1 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
NEW=$1 BASE=${2:-}
C=allreduce,broadcast,allgather,reduce_scatter,alltoall
OUT=${OUT:-/tmp/dt_latency}/$N
[ -n "${SUMMARY_ONLY:-}" ] || rm -rf "$OUT"
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dt() { # build, output file
  if [ -n "$BIND" ]; then
    "$1/tools/dtrun/dtrun" -n "$N" sh -c 'exec taskset -c $((LOCAL_RANK % $(nproc))) "$@"' bind \
      "$1/bench/comm/comm_bench" -b "$SZ" -e "$SZ" -n "$IT" -c $C > "$2"
  else
    "$1/tools/dtrun/dtrun" -n "$N" "$1/bench/comm/comm_bench" -b "$SZ" -e "$SZ" -n "$IT" -c $C > "$2"
  fi
}
k=1
[ -n "${SUMMARY_ONLY:-}" ] && k=$((R + 1))
[ -n "${SUMMARY_ONLY:-}" ] || rm -f "$OUT/load.txt"
while [ "$k" -le "$R" ]; do
  uptime >> "$OUT/load.txt"
  [ -n "$BASE" ] && dt "$BASE" "$OUT/base_$k.txt"
  dt "$NEW" "$OUT/new_$k.txt"
  mpirun --oversubscribe -n "$N" "$NEW/bench/comm/comm_bench_mpi" -b "$SZ" -e "$SZ" -n "$IT" -c $C \
    > "$OUT/mpi_$k.txt" 2>/dev/null
  k=$((k + 1))
done
[ -n "${SUMMARY_ONLY:-}" ] || uptime >> "$OUT/load.txt"
python3 - "$OUT" "$N" "$R" "$BIND" "$SZ" <<'PY'
import glob, statistics, sys
out, n, r, bind, sz = sys.argv[1:6]

def load(prefix):
    rows = {}
    for path in glob.glob("%s/%s_*.txt" % (out, prefix)):
        for line in open(path):
            f = line.split()
            if len(f) == 8 and not line.startswith("#"):
                rows.setdefault(f[7], []).append(float(f[4]))
    return rows

base, new, mpi = load("base"), load("new"), load("mpi")
cell = lambda v: "%6.2f (%6.2f)" % (min(v), statistics.median(v)) if v else "%15s" % "-"
# below one float per rank an all-gather or reduce-scatter moves nothing (0.00 us): no ratio
ratio = lambda a, b: "%5.2f (%4.2f)" % (min(a) / min(b), statistics.median(a) / statistics.median(b)) \
    if a and b and min(b) > 0 and statistics.median(b) > 0 else "%12s" % "-"
print("# %s ranks%s, %s B, us per call: best (median) of %s interleaved runs" %
      (n, ", dtensor ranks pinned" if bind else "", sz, r))
print("%-15s %15s %15s %15s %12s %12s" % ("collective", "before", "after", "Open MPI",
                                            "before/mpi", "after/mpi"))
for c in sorted(new):
    b, a, m = base.get(c, []), new[c], mpi.get(c, [])
    print("%-15s %15s %15s %15s %12s %12s" % (c, cell(b), cell(a), cell(m), ratio(b, m), ratio(a, m)))
print("# load average (1, 5, 15 min) before each round and at the end:")
print("#   " + " | ".join(l.split("load average:")[1].strip() for l in open(out + "/load.txt")))
PY
