/*
 * launch_env - who am I in this job, and where is rank 0's store?
 *
 * dt__launch_env_read() looks at the launcher's environment, first match wins:
 *
 *   source   rank / size                        local rank / size
 *   "env"    RANK, WORLD_SIZE                   LOCAL_RANK, LOCAL_WORLD_SIZE  (dtrun, torchrun)
 *   "ompi"   OMPI_COMM_WORLD_RANK, _SIZE        OMPI_COMM_WORLD_LOCAL_RANK, _LOCAL_SIZE (mpirun)
 *   "pmi"    PMI_RANK, PMI_SIZE                 MPI_LOCALRANKID, MPI_LOCALNRANKS (MPICH Hydra)
 *   "slurm"  SLURM_PROCID, SLURM_NTASKS         SLURM_LOCALID, SLURM_TASKS_PER_NODE at
 *                                               SLURM_NODEID ("2(x3),1" is expanded)
 *   "single" 0, 1                               0, 1      (nothing set: one process)
 *
 * Missing local values default to "every rank on this node" (local = global).
 *
 * Rendezvous (master_addr, master_port, token), so that `mpirun -n 4 ./prog`
 * and `srun -n 4 ./prog` work without the user exporting anything:
 *   - master_addr: MASTER_ADDR if set; else 127.0.0.1 when all ranks are on
 *     this node (local_size == size); else for Slurm the first host of
 *     SLURM_STEP_NODELIST / SLURM_JOB_NODELIST / SLURM_NODELIST ("node[03-05]"
 *     -> "node03"); else (multi-node mpirun / Hydra) DT_ERR_INVALID_ARG
 *     asking for MASTER_ADDR.
 *   - master_port: MASTER_PORT if set; else derived from the job id, the same
 *     on every rank: 10000 + FNV-1a(job id) % 20000 (below Linux's ephemeral
 *     range). Job id = OMPI_MCA_ess_base_jobid (or PMIX_NAMESPACE) for Open MPI,
 *     SLURM_JOB_ID "." SLURM_STEP_ID for Slurm, PMI_JOBID (else the parent
 *     pid, single node only) for Hydra. "env" requires MASTER_PORT when size > 1.
 *     "single" reports port 0 (the store, if any, picks one).
 *   - token: DT_JOB_TOKEN if set (read through the tunables registry); else
 *     derived from the source and job id ("dtjob-" + 16 hex digits). A derived
 *     token keeps jobs from meeting each other's stores by accident; it is not
 *     a secret. Export DT_JOB_TOKEN (dtrun makes a random one) when that matters.
 *   Multi-node runs must also make rank 0's store reachable: DT_STORE_BIND
 *   (default 127.0.0.1) = 0.0.0.0 or rank 0's address (dtrun --nnodes does this).
 *
 * Launcher variables (RANK, OMPI_*, SLURM_*, ...) are read with getenv()
 * directly: they belong to the launchers, not to dtensor's tunables registry.
 */
#ifndef DT_COMM_LAUNCH_ENV_H
#define DT_COMM_LAUNCH_ENV_H

#include "dtensor/core.h"

typedef struct dt_launch_env {
    int rank, size, local_rank, local_size;
    char master_addr[256];
    int master_port;
    char token[128];
    char source[16]; /* "env", "ompi", "pmi", "slurm" or "single" */
} dt_launch_env;

/*
 * Fill @p out from the environment (see above). Not collective; no I/O.
 * Errors: DT_ERR_INVALID_ARG naming the variable and its value (non-numeric,
 * rank out of range, size < 1, port outside 1..65535, a missing partner
 * variable such as WORLD_SIZE without RANK). *out is written only on success.
 */
dt_status dt__launch_env_read(dt_launch_env *out);

#endif
