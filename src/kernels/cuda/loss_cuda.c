/*
 * Cross entropy table entries. Targets are validated on the device before
 * anything is written (one small kernel and a 8-byte read back, so these
 * entries synchronise), giving the CPU reference's error naming the row.
 */
#include <string.h>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/kernels_cuda.h"

static dt_status ce_shapes(const char *fn, const dt_tensor *logits, const dt_tensor *targets,
                           int64_t *rows, int64_t *classes)
{
    DT_CHECK(dt__cuda_check(fn, "logits", logits, DT_DTYPE_F32));
    if (logits->ndim != 2)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: logits have %d dims, expected [N, C]", fn,
                      logits->ndim);
    *rows = logits->shape[0];
    *classes = logits->shape[1];
    DT_CHECK(dt__cuda_check_int(fn, "targets", targets));
    return dt__cuda_check_numel(fn, "targets", targets, *rows);
}

/* DT_ERR_INVALID_ARG naming the first bad target, like the CPU kernel. */
static dt_status ce_check_targets(const char *fn, const void *targets, dt_dtype tdt, int64_t rows,
                                  int64_t classes, int64_t ignore_index)
{
    unsigned long long *bad = NULL, host_bad = ~0ull;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_scratch(fn, sizeof(*bad), (void **)&bad));
    DT_CUDA_CHECK_GOTO(
        cudaMemcpyAsync(bad, &host_bad, sizeof(host_bad), cudaMemcpyHostToDevice, DT_CUDA_STREAM),
        fn, s, out_free);
    DT_CUDA_CHECK_GOTO(
        dt__cu_check_targets(targets, (int)tdt, rows, classes, ignore_index, bad, DT_CUDA_STREAM),
        fn, s, out_free);
    DT_CUDA_CHECK_GOTO(cudaMemcpy(&host_bad, bad, sizeof(host_bad), cudaMemcpyDeviceToHost), fn, s,
                       out_free);
    if (host_bad != ~0ull) {
        int64_t row = (int64_t)host_bad, t = 0;
        size_t esz = dt_dtype_size(tdt);
        unsigned char raw[8] = {0};
        DT_CUDA_CHECK_GOTO(cudaMemcpy(raw, (const char *)targets + row * (int64_t)esz, esz,
                                      cudaMemcpyDeviceToHost),
                           fn, s, out_free);
        t = dt__load_elem_int(raw, tdt);
        s = DT_ERR(DT_ERR_INVALID_ARG, "%s: target %lld of row %lld is outside [0, %lld)", fn,
                   (long long)t, (long long)row, (long long)classes);
    }
out_free:
    dt__cuda_scratch_free(bad);
    return s;
}

dt_status dt__cuda_cross_entropy(const dt_tensor *logits, const dt_tensor *targets,
                                 int64_t ignore_index, dt_tensor *loss, dt_tensor *lse)
{
    const char *fn = "dt_kernel_cross_entropy";
    int64_t rows = 0, classes = 0;
    DT_CHECK(dt__cuda_check_out(fn, "loss", loss, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_out(fn, "lse", lse, DT_DTYPE_F32));
    DT_CHECK(ce_shapes(fn, logits, targets, &rows, &classes));
    DT_CHECK(dt__cuda_check_numel(fn, "loss", loss, rows));
    DT_CHECK(dt__cuda_check_numel(fn, "lse", lse, rows));
    if (rows == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, loss));
    const void *ld = NULL, *td = NULL;
    void *tl = NULL, *tt = NULL;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_contig(fn, targets, &td, &tt));
    DT_CHECK_GOTO(ce_check_targets(fn, td, targets->dtype, rows, classes, ignore_index), s,
                  out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, logits, &ld, &tl), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_cross_entropy(ld, rows, classes, td, (int)targets->dtype,
                                            ignore_index, dt__cuda_ptr(loss), dt__cuda_ptr(lse),
                                            NULL, DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tl);
    dt__cuda_scratch_free(tt);
    return s;
}

dt_status dt__cuda_cross_entropy_backward(const dt_tensor *logits, const dt_tensor *targets,
                                          int64_t ignore_index, const dt_tensor *lse,
                                          const dt_tensor *gloss, dt_tensor *glogits)
{
    const char *fn = "dt_kernel_cross_entropy_backward";
    int64_t rows = 0, classes = 0;
    DT_CHECK(dt__cuda_check_out(fn, "glogits", glogits, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check(fn, "gloss", gloss, DT_DTYPE_F32));
    DT_CHECK(dt__cuda_check_same_shape(fn, "logits", logits, glogits));
    DT_CHECK(ce_shapes(fn, logits, targets, &rows, &classes));
    DT_CHECK(dt__cuda_check_numel(fn, "gloss", gloss, rows));
    if (lse != NULL) {
        DT_CHECK(dt__cuda_check(fn, "lse", lse, DT_DTYPE_F32));
        DT_CHECK(dt__cuda_check_numel(fn, "lse", lse, rows));
    }
    if (rows == 0)
        return DT_OK;
    DT_CHECK(dt__cuda_use_device(fn, glogits));
    const void *ld = NULL, *td = NULL, *ed = NULL, *gd = NULL;
    void *tl = NULL, *tt = NULL, *te = NULL, *tg = NULL;
    dt_status s = DT_OK;
    DT_CHECK(dt__cuda_contig(fn, targets, &td, &tt));
    DT_CHECK_GOTO(ce_check_targets(fn, td, targets->dtype, rows, classes, ignore_index), s,
                  out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, logits, &ld, &tl), s, out_free);
    if (lse != NULL)
        DT_CHECK_GOTO(dt__cuda_contig(fn, lse, &ed, &te), s, out_free);
    DT_CHECK_GOTO(dt__cuda_contig(fn, gloss, &gd, &tg), s, out_free);
    DT_CUDA_CHECK_GOTO(dt__cu_cross_entropy_backward(ld, rows, classes, td, (int)targets->dtype,
                                                     ignore_index, ed, gd, 1, dt__cuda_ptr(glogits),
                                                     DT_CUDA_STREAM),
                       fn, s, out_free);
out_free:
    dt__cuda_scratch_free(tg);
    dt__cuda_scratch_free(te);
    dt__cuda_scratch_free(tl);
    dt__cuda_scratch_free(tt);
    return s;
}
