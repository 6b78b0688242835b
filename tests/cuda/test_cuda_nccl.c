/*
 * The NCCL backend over real processes (dtrun), one GPU per rank: every
 * native collective, uneven blocks, point-to-point, split, non-blocking work.
 * Inputs are small integers, so float results are exact and any reduction
 * order must agree with the host computation bit for bit.
 *
 * The runtime is started on the CPU (for rank, size and the store); the NCCL
 * world is created here directly. Without one GPU per local rank nothing can
 * run: every rank exits 77, which dtrun passes on and ctest reports as skipped
 * (SKIP_RETURN_CODE), not passed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "comm/nccl/nccl_comm.h"
#include "dtensor.h"
#include "kernels/cuda/kernels_cuda.h"

#define NC_OK(call)                                                                                \
    do {                                                                                           \
        dt_status nc_s_ = (call);                                                                  \
        if (nc_s_ != DT_OK)                                                                        \
            fail_msg("%s -> %s: %s", #call, dt_status_str(nc_s_), dt_last_error());                \
    } while (0)

static dt_runtime *rt;
static dt_comm *world;
static int me, np;

static int group_setup(void **state)
{
    (void)state;
    if (dt__comm_nccl_create_world(dt_runtime_store(rt), me, np, dt_runtime_local_rank(rt), 60.0,
                                   &world) != DT_OK) {
        fprintf(stderr, "nccl world: %s\n", dt_last_error());
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    dt_comm_destroy(world);
    dt_runtime_destroy(rt);
    return 0;
}

/* Device buffer of n floats holding host[0..n) (NULL: zeros). */
static float *dev(const float *host, size_t n)
{
    float *d = NULL;
    assert_int_equal(cudaMalloc((void **)&d, (n > 0 ? n : 1) * sizeof(float)), cudaSuccess);
    if (host != NULL && n > 0)
        assert_int_equal(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice),
                         cudaSuccess);
    else
        assert_int_equal(cudaMemset(d, 0, (n > 0 ? n : 1) * sizeof(float)), cudaSuccess);
    return d;
}

static void expect(const float *d, const float *want, size_t n, const char *what)
{
    float *h = malloc((n > 0 ? n : 1) * sizeof(float));
    assert_non_null(h);
    if (n > 0)
        assert_int_equal(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        if (h[i] != want[i])
            fail_msg("%s (rank %d of %d): element %zu is %g, expected %g", what, me, np, i,
                     (double)h[i], (double)want[i]);
    free(h);
}

static float val(int rank, size_t i)
{
    return (float)((int)((size_t)rank * 7 + i * 3) % 13 - 6);
}

static void test_allreduce(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 1000, 262147};
    static const dt_reduce_op ops[] = {DT_REDUCE_OP_SUM, DT_REDUCE_OP_MAX, DT_REDUCE_OP_MIN};
    for (size_t s = 0; s < 4; s++)
        for (size_t o = 0; o < 3; o++) {
            size_t n = sizes[s];
            float *in = malloc((n + 1) * sizeof(float)), *want = malloc((n + 1) * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                in[i] = val(me, i);
                float acc = val(0, i);
                for (int r = 1; r < np; r++) {
                    float v = val(r, i);
                    acc = ops[o] == DT_REDUCE_OP_SUM   ? acc + v
                          : ops[o] == DT_REDUCE_OP_MAX ? (v > acc ? v : acc)
                                                       : (v < acc ? v : acc);
                }
                want[i] = acc;
            }
            float *d = dev(in, n);
            NC_OK(dt_comm_allreduce(world, d, d, n, DT_DTYPE_F32, ops[o], NULL));
            expect(d, want, n, "allreduce in place");
            cudaFree(d);
            free(want);
            free(in);
        }
}

static void test_allgatherv_reduce_scatterv(void **state)
{
    (void)state;
    size_t *counts = malloc(sizeof(size_t) * (size_t)np), total = 0;
    for (int r = 0; r < np; r++) {
        counts[r] = (size_t)(r % 3 == 1 ? 0 : 5 + 3 * r); /* uneven, some empty */
        total += counts[r];
    }
    float *mine = malloc((counts[me] + 1) * sizeof(float)),
          *want = malloc((total + 1) * sizeof(float));
    for (size_t i = 0; i < counts[me]; i++)
        mine[i] = val(me, i);
    size_t off = 0;
    for (int r = 0; r < np; r++)
        for (size_t i = 0; i < counts[r]; i++)
            want[off++] = val(r, i);
    float *ds = dev(mine, counts[me]), *dr = dev(NULL, total);
    NC_OK(dt_comm_allgatherv(world, ds, dr, counts, NULL, DT_DTYPE_F32, NULL));
    expect(dr, want, total, "allgatherv");
    /* even all-gather */
    float m4[4], *w4 = malloc(sizeof(float) * 4 * (size_t)np);
    for (int i = 0; i < 4; i++)
        m4[i] = (float)(10 * me + i);
    for (int r = 0; r < np; r++)
        for (int i = 0; i < 4; i++)
            w4[4 * r + i] = (float)(10 * r + i);
    float *de = dev(NULL, (size_t)np * 4), *mine4 = dev(m4, 4);
    NC_OK(dt_comm_allgather(world, mine4, de, 4, DT_DTYPE_F32, NULL));
    expect(de, w4, (size_t)np * 4, "allgather");

    /* reduce-scatterv: every rank sends total elements val(rank, i) */
    float *in = malloc((total + 1) * sizeof(float)), *rs = malloc((counts[me] + 1) * sizeof(float));
    for (size_t i = 0; i < total; i++)
        in[i] = val(me, i);
    size_t start = 0;
    for (int r = 0; r < me; r++)
        start += counts[r];
    for (size_t i = 0; i < counts[me]; i++) {
        float acc = 0;
        for (int r = 0; r < np; r++)
            acc += val(r, start + i);
        rs[i] = acc;
    }
    float *din = dev(in, total), *dout = dev(NULL, counts[me]);
    NC_OK(dt_comm_reduce_scatterv(world, din, dout, counts, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
    expect(dout, rs, counts[me], "reduce_scatterv");
    cudaFree(dout);
    cudaFree(din);
    cudaFree(mine4);
    cudaFree(de);
    cudaFree(dr);
    cudaFree(ds);
    free(w4);
    free(rs);
    free(in);
    free(want);
    free(mine);
    free(counts);
}

static void test_alltoall_broadcast(void **state)
{
    (void)state;
    const size_t k = 3;
    size_t n = k * (size_t)np;
    float *in = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
    for (int p = 0; p < np; p++)
        for (size_t i = 0; i < k; i++) {
            in[(size_t)p * k + i] = (float)(100 * me + 10 * p + (int)i);
            want[(size_t)p * k + i] = (float)(100 * p + 10 * me + (int)i);
        }
    float *ds = dev(in, n), *dr = dev(NULL, n);
    NC_OK(dt_comm_alltoall(world, ds, dr, k, DT_DTYPE_F32, NULL));
    expect(dr, want, n, "alltoall");
    float b[5] = {1, 2, 3, 4, 5}, z[5] = {0};
    float *db = dev(me == np - 1 ? b : z, 5);
    NC_OK(dt_comm_broadcast(world, db, 5, DT_DTYPE_F32, np - 1, NULL));
    expect(db, b, 5, "broadcast");
    NC_OK(dt_comm_barrier(world, NULL));
    cudaFree(db);
    cudaFree(dr);
    cudaFree(ds);
    free(want);
    free(in);
}

static void test_p2p_nonblocking_split(void **state)
{
    (void)state;
    /* ring: post the receive first (non-blocking), then send */
    float mine[4], want[4];
    int from = (me + np - 1) % np, to = (me + 1) % np;
    for (int i = 0; i < 4; i++) {
        mine[i] = (float)(me * 4 + i);
        want[i] = (float)(from * 4 + i);
    }
    float *ds = dev(mine, 4), *dr = dev(NULL, 4);
    dt_work *w = NULL;
    NC_OK(dt_comm_recv(world, dr, 4, DT_DTYPE_F32, from, 7, &w));
    NC_OK(dt_comm_send(world, ds, 4, DT_DTYPE_F32, to, 7, NULL));
    NC_OK(dt_work_wait(w, -1));
    dt_work_release(w);
    expect(dr, want, 4, "ring send/recv");

    /* NCCL has no tags: a second tag to the same peer while one is outstanding
     * is refused (it would match by order), the first one still completes */
    dt_work *ws = NULL, *wr = NULL;
    NC_OK(dt_comm_send(world, ds, 4, DT_DTYPE_F32, to, 7, &ws));
    assert_int_equal(dt_comm_send(world, ds, 4, DT_DTYPE_F32, to, 8, NULL), DT_ERR_UNSUPPORTED);
    assert_non_null(strstr(dt_last_error(), "by order, not by tag"));
    NC_OK(dt_comm_recv(world, dr, 4, DT_DTYPE_F32, from, 7, &wr));
    NC_OK(dt_work_wait(ws, -1));
    NC_OK(dt_work_wait(wr, -1));
    dt_work_release(ws);
    dt_work_release(wr);
    expect(dr, want, 4, "tagged send/recv");

    /* non-blocking all-reduce completes through dt_work_test */
    float one = 1.0f, sz = (float)np;
    float *d1 = dev(&one, 1);
    NC_OK(dt_comm_allreduce(world, d1, d1, 1, DT_DTYPE_F32, DT_REDUCE_OP_SUM, &w));
    bool done = false;
    while (!done)
        NC_OK(dt_work_test(w, &done));
    dt_work_release(w);
    expect(d1, &sz, 1, "non-blocking allreduce");

    /* split by parity; the last rank opts out when np > 2 */
    int color = (np > 2 && me == np - 1) ? DT_COMM_SPLIT_NOCOLOR : me % 2;
    dt_comm *sub = NULL;
    NC_OK(dt_comm_split(world, color, -me, &sub)); /* key -me: reversed order */
    if (color == DT_COMM_SPLIT_NOCOLOR) {
        assert_null(sub);
    } else {
        int members = 0, my_new = 0;
        for (int r = 0; r < np; r++) {
            bool in_sub = !(np > 2 && r == np - 1) && r % 2 == color;
            if (in_sub) {
                members++;
                if (r > me)
                    my_new++;
            }
        }
        assert_string_equal(dt_comm_backend(sub), "nccl");
        assert_int_equal(dt_comm_size(sub), members);
        assert_int_equal(dt_comm_rank(sub), my_new);
        float v = 1.0f, m = (float)members;
        float *dv = dev(&v, 1);
        NC_OK(dt_comm_allreduce(sub, dv, dv, 1, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
        expect(dv, &m, 1, "split allreduce");
        cudaFree(dv);
        dt_comm_destroy(sub);
    }
    cudaFree(d1);
    cudaFree(dr);
    cudaFree(ds);
}

/* Host buffers through an NCCL comm are staged through device memory. */
static void test_host_buffers(void **state)
{
    (void)state;
    float v[3] = {1, 2, (float)me}, want[3] = {(float)np, (float)(2 * np), 0};
    for (int r = 0; r < np; r++)
        want[2] += (float)r;
    NC_OK(dt_comm_allreduce(world, v, v, 3, DT_DTYPE_F32, DT_REDUCE_OP_SUM, NULL));
    for (int i = 0; i < 3; i++)
        assert_true(v[i] == want[i]);
    /* uneven all-gather with a gap the collective must leave alone */
    size_t *counts = malloc(sizeof(size_t) * (size_t)np),
           *displs = malloc(sizeof(size_t) * (size_t)np);
    size_t extent = 0;
    for (int r = 0; r < np; r++) {
        counts[r] = (size_t)r + 1;
        displs[r] = extent + 1; /* one untouched slot before each block */
        extent = displs[r] + counts[r];
    }
    float *all = malloc(extent * sizeof(float)), mine[16];
    for (size_t i = 0; i < extent; i++)
        all[i] = -7.0f;
    for (int i = 0; i <= me; i++)
        mine[i] = (float)(100 * me + i);
    dt_work *w = NULL;
    NC_OK(dt_comm_allgatherv(world, mine, all, counts, displs, DT_DTYPE_F32, &w));
    NC_OK(dt_work_wait(w, -1));
    dt_work_release(w);
    for (int r = 0; r < np; r++) {
        assert_true(all[displs[r] - 1] == -7.0f);
        for (size_t i = 0; i < counts[r]; i++)
            assert_true(all[displs[r] + i] == (float)(100 * r + (int)i));
    }
    free(all);
    free(displs);
    free(counts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_allgatherv_reduce_scatterv),
        cmocka_unit_test(test_alltoall_broadcast),
        cmocka_unit_test(test_p2p_nonblocking_split),
        cmocka_unit_test(test_host_buffers),
    };
    /* No device at all: every rank decides alone, before meeting the others. */
    if (dt__cuda_device_count() == 0) {
        printf("# no CUDA device: NCCL tests not run, exit 77 (skipped)\n");
        return 77;
    }
    dt_init_params p = {.field_mask = DT_INIT_PARAM_FIELD_DEVICE, .device = DT_DEVICE_CPU};
    if (dt_init(&p, &rt) != DT_OK) {
        fprintf(stderr, "dt_init: %s\n", dt_last_error());
        return 1;
    }
    me = dt_runtime_rank(rt);
    np = dt_runtime_size(rt);
    if (dt__cuda_device_count() < dt_runtime_local_size(rt)) {
        printf("# %d CUDA devices for %d local ranks: NCCL tests not run, exit 77 (skipped)\n",
               dt__cuda_device_count(), dt_runtime_local_size(rt));
        /* dtrun reports the first rank that exits non-zero: let none leave before all are up,
         * so a rank that lost the store cannot fail first */
        (void)dt_comm_barrier(dt_runtime_host_world(rt), NULL);
        dt_runtime_destroy(rt);
        return 77;
    }
    return cmocka_run_group_tests_name("cuda_nccl", tests, group_setup, group_teardown);
}
