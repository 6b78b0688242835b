/*
 * Moving the dp pieces of a tp-local tensor in and out of packed buffers. A
 * tensor [outer, K, inner] is split along K into pieces [outer, klen[r],
 * inner]; a packed buffer holds the pieces one after the other in rank order
 * (what allgatherv / reduce_scatterv exchange).
 */
#include <string.h>

#include "styles/data_parallel/dp_impl.h"

static int64_t piece_base(const dp_param *p, int r)
{
    int64_t base = 0;
    for (int q = 0; q < r; q++)
        base += p->outer * p->klen[q] * p->inner;
    return base;
}

void dp__slice(const dp_param *p, int r, const float *full, float *piece)
{
    int64_t K = p->lshape[p->k], row = p->klen[r] * p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        memcpy(piece + o * row, full + (o * K + p->koff[r]) * p->inner,
               (size_t)row * sizeof(float));
}

void dp__pack(const dp_param *p, const float *full, float *packed)
{
    int dp = 0;
    for (int64_t sum = 0; sum < p->lshape[p->k]; dp++)
        sum += p->klen[dp];
    /* ranks past the last non-empty piece hold nothing */
    for (int r = 0; r < dp; r++)
        dp__slice(p, r, full, packed + piece_base(p, r));
}

void dp__unpack(const dp_param *p, const float *packed, float *full)
{
    int64_t K = p->lshape[p->k];
    int64_t done = 0;
    for (int r = 0; done < K; r++) {
        int64_t row = p->klen[r] * p->inner;
        const float *src = packed + piece_base(p, r);
        for (int64_t o = 0; o < p->outer; o++)
            memcpy(full + (o * K + p->koff[r]) * p->inner, src + o * row,
                   (size_t)row * sizeof(float));
        done += p->klen[r];
    }
}
