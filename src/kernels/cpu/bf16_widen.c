/*
 * bf16 and f16 operands for the CPU kernels other than GEMM: each such input
 * is read through an f32 copy, the f32 kernel computes (accumulating in f32,
 * as PyTorch's CPU kernels do for bf16), and each such output is rounded once
 * from its f32 result. Kernels without a half operand go straight to the f32
 * code (no cost), and so do bf16 operands of the kernels that read bf16
 * natively (half_stage.c: the same results without the copies); what stays
 * here is f16, and bf16 for embedding, masked fill and sum of squares.
 */
#include "kernels/cpu/cpu_internal.h"

static bool is_half(dt_dtype d)
{
    return d == DT_DTYPE_BF16 || d == DT_DTYPE_F16;
}

/* @p t, or its f32 copy when it is bf16 (@p is_out: written by the kernel). */
dt_tensor *dt__cpu_widen_in(dt__cpu_widen *w, const dt_tensor *t, bool is_out)
{
    if (t == NULL || !is_half(t->dtype) || w->st != DT_OK)
        return (dt_tensor *)t;
    if (w->n == DT__CPU_WIDEN_MAX) {
        w->st =
            DT_ERR(DT_ERR_INTERNAL, "bf16 kernels: more than %d bf16 operands", DT__CPU_WIDEN_MAX);
        return (dt_tensor *)t;
    }
    dt_tensor *f = NULL;
    w->st = dt_tensor_empty(t->ndim, t->shape, DT_DTYPE_F32, dt_device_cpu(), &f);
    if (w->st == DT_OK) /* outputs too: accumulating kernels (+=) read them */
        w->st = dt__cpu_copy(f, t);
    if (w->st != DT_OK) {
        dt_tensor_release(f);
        return (dt_tensor *)t;
    }
    w->orig[w->n] = (dt_tensor *)t;
    w->f32[w->n] = f;
    w->out[w->n++] = is_out;
    return f;
}

/* Round the outputs back (when @p st is DT_OK) and free the copies. */
dt_status dt__cpu_widen_end(dt__cpu_widen *w, dt_status st)
{
    if (st == DT_OK)
        st = w->st;
    for (int i = 0; i < w->n; i++) {
        if (st == DT_OK && w->out[i])
            st = dt__cpu_copy(w->orig[i], w->f32[i]);
        dt_tensor_release(w->f32[i]);
    }
    return st;
}

static bool any_half(const dt_tensor *const *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (ts[i] != NULL && is_half(ts[i]->dtype))
            return true;
    return false;
}
#define ANY_HALF(...)                                                                              \
    any_half((const dt_tensor *const[]){__VA_ARGS__},                                              \
             (int)(sizeof((const dt_tensor *const[]){__VA_ARGS__}) / sizeof(dt_tensor *)))

/* Whether a kernel that reads bf16 natively (half_stage.c) still needs the
 * f32 copies: for an f16 operand, a strided bf16 @p out (the native loops
 * write outputs in place, contiguous; NULL: none such), or native reading
 * switched off. */
static bool needs_widen(const dt_tensor *out, const dt_tensor *const *ts, int n)
{
    if (!dt__cpu_half_native ||
        (out != NULL && is_half(out->dtype) && !dt_tensor_is_contiguous(out)))
        return any_half(ts, n);
    for (int i = 0; i < n; i++)
        if (ts[i] != NULL && ts[i]->dtype == DT_DTYPE_F16)
            return true;
    return false;
}
#define NEEDS_WIDEN(out, ...)                                                                      \
    needs_widen(out, (const dt_tensor *const[]){__VA_ARGS__},                                      \
                (int)(sizeof((const dt_tensor *const[]){__VA_ARGS__}) / sizeof(dt_tensor *)))

dt_status dt__cpu_binary_any(dt_binary_op op, const dt_tensor *a, const dt_tensor *b,
                             dt_tensor *out)
{
    if (!NEEDS_WIDEN(out, a, b, out))
        return dt__cpu_binary(op, a, b, out);
    dt__cpu_widen w = {0};
    dt_tensor *fa = dt__cpu_widen_in(&w, a, false), *fb = dt__cpu_widen_in(&w, b, false),
              *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_binary(op, fa, fb, fo) : w.st);
}

dt_status dt__cpu_unary_any(dt_unary_op op, const dt_tensor *x, float alpha, dt_tensor *out)
{
    if (!NEEDS_WIDEN(out, x, out))
        return dt__cpu_unary(op, x, alpha, out);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_unary(op, fx, alpha, fo) : w.st);
}

dt_status dt__cpu_unary_backward_any(dt_unary_op op, const dt_tensor *x, const dt_tensor *gy,
                                     dt_tensor *gx)
{
    if (!NEEDS_WIDEN(gx, x, gy, gx))
        return dt__cpu_unary_backward(op, x, gy, gx);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fg = dt__cpu_widen_in(&w, gy, false),
              *fo = dt__cpu_widen_in(&w, gx, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_unary_backward(op, fx, fg, fo) : w.st);
}

dt_status dt__cpu_softmax_any(const dt_tensor *x, float scale, bool causal, bool log, dt_tensor *y)
{
    if (!NEEDS_WIDEN(y, x, y))
        return dt__cpu_softmax(x, scale, causal, log, y);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fy = dt__cpu_widen_in(&w, y, true);
    return dt__cpu_widen_end(&w,
                             w.st == DT_OK ? dt__cpu_softmax(fx, scale, causal, log, fy) : w.st);
}

dt_status dt__cpu_softmax_backward_any(const dt_tensor *y, const dt_tensor *gy, float scale,
                                       bool log, dt_tensor *gx)
{
    if (!NEEDS_WIDEN(gx, y, gy, gx))
        return dt__cpu_softmax_backward(y, gy, scale, log, gx);
    dt__cpu_widen w = {0};
    dt_tensor *fy = dt__cpu_widen_in(&w, y, false), *fg = dt__cpu_widen_in(&w, gy, false),
              *fo = dt__cpu_widen_in(&w, gx, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_softmax_backward(fy, fg, scale, log, fo)
                                               : w.st);
}

dt_status dt__cpu_layer_norm_any(const dt_tensor *x, const dt_tensor *wt, const dt_tensor *b,
                                 float eps, dt_tensor *y, dt_tensor *mean, dt_tensor *rstd)
{
    if (!NEEDS_WIDEN(y, x, wt, b, y))
        return dt__cpu_layer_norm(x, wt, b, eps, y, mean, rstd);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fw = dt__cpu_widen_in(&w, wt, false),
              *fb = dt__cpu_widen_in(&w, b, false);
    dt_tensor *fy = dt__cpu_widen_in(&w, y, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_layer_norm(fx, fw, fb, eps, fy, mean, rstd)
                                               : w.st);
}

dt_status dt__cpu_layer_norm_backward_any(const dt_tensor *x, const dt_tensor *wt,
                                          const dt_tensor *mean, const dt_tensor *rstd,
                                          const dt_tensor *gy, dt_tensor *gx, dt_tensor *gw,
                                          dt_tensor *gb)
{
    if (!NEEDS_WIDEN(gx, x, wt, gy, gx, gw, gb))
        return dt__cpu_layer_norm_backward(x, wt, mean, rstd, gy, gx, gw, gb);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fw = dt__cpu_widen_in(&w, wt, false);
    dt_tensor *fg = dt__cpu_widen_in(&w, gy, false), *fgx = dt__cpu_widen_in(&w, gx, true);
    dt_tensor *fgw = dt__cpu_widen_in(&w, gw, true), *fgb = dt__cpu_widen_in(&w, gb, true);
    return dt__cpu_widen_end(
        &w,
        w.st == DT_OK ? dt__cpu_layer_norm_backward(fx, fw, mean, rstd, fg, fgx, fgw, fgb) : w.st);
}

dt_status dt__cpu_embedding_any(const dt_tensor *weight, const dt_tensor *ids, int64_t vocab_start,
                                dt_tensor *out)
{
    if (!ANY_HALF(weight, out))
        return dt__cpu_embedding(weight, ids, vocab_start, out);
    dt__cpu_widen w = {0};
    dt_tensor *fw = dt__cpu_widen_in(&w, weight, false), *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w,
                             w.st == DT_OK ? dt__cpu_embedding(fw, ids, vocab_start, fo) : w.st);
}

dt_status dt__cpu_embedding_backward_any(const dt_tensor *ids, const dt_tensor *gy,
                                         int64_t vocab_start, dt_tensor *gweight)
{
    if (!ANY_HALF(gy, gweight))
        return dt__cpu_embedding_backward(ids, gy, vocab_start, gweight);
    dt__cpu_widen w = {0};
    dt_tensor *fg = dt__cpu_widen_in(&w, gy, false), *fw = dt__cpu_widen_in(&w, gweight, true);
    return dt__cpu_widen_end(
        &w, w.st == DT_OK ? dt__cpu_embedding_backward(ids, fg, vocab_start, fw) : w.st);
}

dt_status dt__cpu_cross_entropy_any(const dt_tensor *logits, const dt_tensor *targets,
                                    int64_t ignore_index, dt_tensor *loss, dt_tensor *lse)
{
    if (!NEEDS_WIDEN(NULL, logits, loss, lse))
        return dt__cpu_cross_entropy(logits, targets, ignore_index, loss, lse);
    dt__cpu_widen w = {0};
    dt_tensor *fl = dt__cpu_widen_in(&w, logits, false), *fo = dt__cpu_widen_in(&w, loss, true);
    dt_tensor *fs = dt__cpu_widen_in(&w, lse, true);
    return dt__cpu_widen_end(
        &w, w.st == DT_OK ? dt__cpu_cross_entropy(fl, targets, ignore_index, fo, fs) : w.st);
}

dt_status dt__cpu_cross_entropy_backward_any(const dt_tensor *logits, const dt_tensor *targets,
                                             int64_t ignore_index, const dt_tensor *lse,
                                             const dt_tensor *gloss, dt_tensor *glogits)
{
    if (!NEEDS_WIDEN(glogits, logits, lse, gloss, glogits))
        return dt__cpu_cross_entropy_backward(logits, targets, ignore_index, lse, gloss, glogits);
    dt__cpu_widen w = {0};
    dt_tensor *fl = dt__cpu_widen_in(&w, logits, false), *fs = dt__cpu_widen_in(&w, lse, false);
    dt_tensor *fg = dt__cpu_widen_in(&w, gloss, false), *fo = dt__cpu_widen_in(&w, glogits, true);
    return dt__cpu_widen_end(
        &w, w.st == DT_OK ? dt__cpu_cross_entropy_backward(fl, targets, ignore_index, fs, fg, fo)
                          : w.st);
}

dt_status dt__cpu_reduce_any(dt_reduce_kind kind, const dt_tensor *x, int dim, dt_tensor *out,
                             dt_tensor *argmax)
{
    if (!NEEDS_WIDEN(NULL, x, out))
        return dt__cpu_reduce(kind, x, dim, out, argmax);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_reduce(kind, fx, dim, fo, argmax) : w.st);
}

dt_status dt__cpu_masked_fill_any(const dt_tensor *x, const dt_tensor *mask, float value,
                                  dt_tensor *out)
{
    if (!ANY_HALF(x, out))
        return dt__cpu_masked_fill(x, mask, value, out);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false), *fo = dt__cpu_widen_in(&w, out, true);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_masked_fill(fx, mask, value, fo) : w.st);
}

dt_status dt__cpu_sum_squares_any(const dt_tensor *x, double *out)
{
    if (!ANY_HALF(x))
        return dt__cpu_sum_squares(x, out);
    dt__cpu_widen w = {0};
    dt_tensor *fx = dt__cpu_widen_in(&w, x, false);
    return dt__cpu_widen_end(&w, w.st == DT_OK ? dt__cpu_sum_squares(fx, out) : w.st);
}
