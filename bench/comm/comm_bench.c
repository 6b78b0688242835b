/*
 * comm_bench: dtensor collectives (UCX backend) in nccl-tests' format.
 *   dtrun -n 2 comm_bench [-b 8] [-e 64M] [-f 2] [-n iters] [-w warmup]
 *                         [-c allreduce,allgather,reduce_scatter,alltoall,broadcast]
 *                         [-x N]
 * float32, out of place; time = the slowest rank's mean per iteration.
 * -x N: all-reduce, reduce-scatter and all-gather side by side instead
 * (bench_common.h), each row the median of N interleaved batches, with the
 * memory-copy bandwidth of the same ranks and each bus bandwidth's fraction.
 */
#include "dtensor.h"

#include "bench_common.h"

static dt_status run_once(dt_comm *w, b_coll c, float *a, float *b, size_t cnt)
{
    switch (c) {
    case B_ALLREDUCE:
        return dt_comm_allreduce(w, a, b, cnt, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
    case B_ALLGATHER:
        return dt_comm_allgather(w, a, b, cnt, DT_DTYPE_F32, NULL);
    case B_REDUCE_SCATTER:
        return dt_comm_reduce_scatter(w, a, b, cnt, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL);
    case B_ALLTOALL:
        return dt_comm_alltoall(w, a, b, cnt, DT_DTYPE_F32, NULL);
    default:
        return dt_comm_broadcast(w, a, cnt, DT_DTYPE_F32, 0, NULL);
    }
}

typedef struct side_ctx {
    dt_comm *w;
    float *a, *b;
} side_ctx;

static int side_run(void *ctx, b_coll c, size_t cnt)
{
    side_ctx *x = ctx;
    dt_status st = run_once(x->w, c, x->a, x->b, cnt);
    if (st != DT_OK)
        fprintf(stderr, "%s: %s\n", b_coll_names[c], dt_last_error());
    return st != DT_OK;
}

static double side_slowest(void *ctx, double v)
{
    side_ctx *x = ctx;
    (void)dt_comm_allreduce(x->w, &v, &v, 1, DT_DTYPE_F64, DT_REDUCE_OP_MAX, NULL);
    return v;
}

int main(int argc, char **argv)
{
    b_opts o;
    if (b_parse(argc, argv, &o) != 0)
        return 2;
    dt_runtime *rt = NULL;
    if (dt_init(NULL, &rt) != DT_OK) {
        fprintf(stderr, "dt_init: %s\n", dt_last_error());
        return 1;
    }
    dt_comm *w = dt_runtime_world(rt);
    const int p = dt_comm_size(w), me = dt_comm_rank(w);
    size_t cap = o.max_bytes / 4 + 16;
    float *a = malloc(cap * sizeof(float)), *b = malloc(cap * sizeof(float));
    for (size_t i = 0; i < cap; i++)
        a[i] = b[i] = (float)(i % 7);
    int rc = 0;
    side_ctx x = {w, a, b};
    b_lib lib = {"dtensor/ucx", p, me, side_run, side_slowest, &x, a, b};
    if (o.side > 0)
        rc = b_side_by_side(&o, &lib);
    for (int c = 0; o.side == 0 && c < B_NCOLL && rc == 0; c++) {
        if (!o.run[c])
            continue;
        if (me == 0)
            b_header("dtensor/ucx", (b_coll)c, p);
        for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= (size_t)o.factor) {
            size_t cnt = b_count((b_coll)c, bytes, p);
            int iters = b_iters(&o, bytes);
            dt_status st = DT_OK;
            for (int i = 0; i < b_warmup(&o, iters) && st == DT_OK; i++)
                st = run_once(w, (b_coll)c, a, b, cnt);
            if (st == DT_OK)
                st = dt_comm_barrier(w, NULL);
            double t0 = b_now();
            for (int i = 0; i < iters && st == DT_OK; i++)
                st = run_once(w, (b_coll)c, a, b, cnt);
            double sec = (b_now() - t0) / iters;
            if (st == DT_OK)
                st = dt_comm_allreduce(w, &sec, &sec, 1, DT_DTYPE_F64, DT_REDUCE_OP_MAX, NULL);
            if (st != DT_OK) {
                fprintf(stderr, "%s: %s\n", b_coll_names[c], dt_last_error());
                rc = 1;
                break;
            }
            if (me == 0)
                b_row((b_coll)c, p, bytes, sec);
        }
    }
    free(a);
    free(b);
    dt_runtime_destroy(rt);
    return rc;
}
