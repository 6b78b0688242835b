#!/bin/sh
# fake_srun.sh N PROGRAM ARGS... : start N copies of PROGRAM the way `srun -n N`
# on one node would (SLURM_* variables only, no RANK/MASTER_*), wait for all,
# and fail if any copy fails. Used by the store_ranks_slurm test.
set -u
n=$1
shift
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT DT_JOB_TOKEN
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE
job=$$$(date +%N)
pids=""
i=0
while [ "$i" -lt "$n" ]; do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NTASKS=$n SLURM_NODEID=0 SLURM_NNODES=1 \
  SLURM_TASKS_PER_NODE=$n SLURM_JOB_ID=$job SLURM_STEP_ID=0 SLURM_STEP_NODELIST=$(uname -n) \
    "$@" &
  pids="$pids $!"
  i=$((i + 1))
done
rc=0
for p in $pids; do
  wait "$p" || rc=1
done
exit $rc
