/*
 * comm_bench_mpi: the same sweep and output as comm_bench, with Open MPI's
 * collectives (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Alltoall, MPI_Bcast), for side-by-side ratios.
 *   mpirun -n 2 comm_bench_mpi [same options as comm_bench]
 */
#include <mpi.h>
#include <stdbool.h>

#include "bench_common.h"

static void run_once(b_coll c, float *a, float *b, size_t cnt)
{
    int n = (int)cnt;
    switch (c) {
    case B_ALLREDUCE:
        MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case B_ALLGATHER:
        MPI_Allgather(a, n, MPI_FLOAT, b, n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case B_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case B_ALLTOALL:
        MPI_Alltoall(a, n, MPI_FLOAT, b, n, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    default:
        MPI_Bcast(a, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    }
}

static int side_run(void *ctx, b_coll c, size_t cnt)
{
    float **ab = ctx;
    run_once(c, ab[0], ab[1], cnt);
    return 0;
}

static double side_slowest(void *ctx, double v)
{
    double worst = 0;
    (void)ctx;
    MPI_Allreduce(&v, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    b_opts o;
    if (b_parse(argc, argv, &o) != 0) {
        MPI_Finalize();
        return 2;
    }
    int p = 0, me = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    size_t cap = o.max_bytes / 4 + 16;
    float *a = malloc(cap * sizeof(float)), *b = malloc(cap * sizeof(float));
    for (size_t i = 0; i < cap; i++)
        a[i] = b[i] = (float)(i % 7);
    float *ab[2] = {a, b};
    b_lib lib = {"openmpi", p, me, side_run, side_slowest, ab, a, b};
    if (o.side > 0)
        b_side_by_side(&o, &lib);
    for (int c = 0; o.side == 0 && c < B_NCOLL; c++) {
        if (!o.run[c])
            continue;
        if (me == 0)
            b_header("openmpi", (b_coll)c, p);
        for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
            size_t cnt = b_count((b_coll)c, bytes, p);
            int iters = b_iters(&o, bytes);
            for (int i = 0; i < b_warmup(&o, iters); i++)
                run_once((b_coll)c, a, b, cnt);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = b_now();
            for (int i = 0; i < iters; i++)
                run_once((b_coll)c, a, b, cnt);
            double sec = (b_now() - t0) / iters, worst = 0;
            MPI_Allreduce(&sec, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (me == 0)
                b_row((b_coll)c, p, bytes, worst);
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
