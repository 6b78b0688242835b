/*
 * mlp: a 2-layer perceptron trained with plain SGD on a fixed classification
 * problem, single process on the CPU. It shows the ops + autograd API end to
 * end and prints the loss per step; it exits 1 if the loss did not fall.
 *
 *   x [64, 8] ~ N(0, 1), labels = argmax(x T) for a fixed teacher T [8, 4]
 *   model: logits = linear(gelu(linear(x, W1, b1)), W2, b2), loss = cross entropy
 *
 * Usage: mlp [steps] [lr]     (defaults 40, 0.5)
 */
#include <stdio.h>
#include <stdlib.h>

#include "dtensor.h"

#define N_SAMPLES 64
#define N_IN      8
#define N_HIDDEN  32
#define N_CLASSES 4

#define CHECK(call)                                                                                \
    do {                                                                                           \
        dt_status s_ = (call);                                                                     \
        if (s_ != DT_OK) {                                                                         \
            fprintf(stderr, "mlp: %s failed: %s (%s)\n", #call, dt_status_str(s_),                 \
                    dt_last_error());                                                              \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static dt_tensor *param(int ndim, const int64_t *shape, double std, uint64_t seed)
{
    dt_tensor *p = NULL;
    CHECK(dt_tensor_empty(ndim, shape, DT_DTYPE_F32, dt_device_cpu(), &p));
    CHECK(dt_tensor_fill_normal(p, 0.0, std, seed, NULL, NULL));
    dt_tensor_set_mem_category(p, DT_MEM_PARAMETER);
    CHECK(dt_tensor_set_requires_grad(p, true));
    return p;
}

/* The labels a fixed random linear teacher assigns to x. */
static dt_tensor *teacher_labels(dt_tensor *x)
{
    int64_t tshape[2] = {N_IN, N_CLASSES}, n = N_SAMPLES, labels[N_SAMPLES];
    dt_tensor *t = NULL, *y = NULL;
    CHECK(dt_tensor_empty(2, tshape, DT_DTYPE_F32, dt_device_cpu(), &t));
    CHECK(dt_tensor_fill_normal(t, 0.0, 1.0, 7, NULL, NULL));
    CHECK(dt_matmul(x, t, false, false, &y));
    for (int i = 0; i < N_SAMPLES; i++) {
        int best = 0;
        for (int c = 1; c < N_CLASSES; c++)
            if (dt_tensor_item_at(y, i * N_CLASSES + c) >
                dt_tensor_item_at(y, i * N_CLASSES + best))
                best = c;
        labels[i] = best;
    }
    dt_tensor_release(y);
    dt_tensor_release(t);
    dt_tensor *ids = NULL;
    CHECK(dt_tensor_from_buffer(1, &n, DT_DTYPE_I64, labels, &ids));
    return ids;
}

static dt_tensor *forward(dt_tensor *x, dt_tensor *const *p, dt_tensor *labels)
{
    dt_tensor *h = NULL, *a = NULL, *logits = NULL, *loss = NULL;
    CHECK(dt_linear(x, p[0], p[1], &h));
    CHECK(dt_gelu_tanh(h, &a));
    CHECK(dt_linear(a, p[2], p[3], &logits));
    CHECK(dt_cross_entropy(logits, labels, -100, &loss));
    dt_tensor_release(logits);
    dt_tensor_release(a);
    dt_tensor_release(h);
    return loss;
}

/* p -= lr * p.grad, then clear the gradient; no history is recorded. */
static void sgd_step(dt_tensor *const *p, int n, double lr)
{
    bool prev = dt_grad_set_enabled(false);
    for (int i = 0; i < n; i++) {
        dt_tensor *upd = NULL, *np = NULL;
        CHECK(dt_scale(dt_tensor_grad(p[i]), -lr, &upd));
        CHECK(dt_add(p[i], upd, &np));
        CHECK(dt_tensor_copy_(p[i], np));
        CHECK(dt_tensor_set_grad(p[i], NULL));
        dt_tensor_release(np);
        dt_tensor_release(upd);
    }
    dt_grad_set_enabled(prev);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    double lr = argc > 2 ? atof(argv[2]) : 0.5;
    int64_t xs[2] = {N_SAMPLES, N_IN}, w1s[2] = {N_HIDDEN, N_IN}, b1s[1] = {N_HIDDEN};
    int64_t w2s[2] = {N_CLASSES, N_HIDDEN}, b2s[1] = {N_CLASSES};
    dt_tensor *x = NULL;
    CHECK(dt_tensor_empty(2, xs, DT_DTYPE_F32, dt_device_cpu(), &x));
    CHECK(dt_tensor_fill_normal(x, 0.0, 1.0, 1, NULL, NULL));
    dt_tensor *labels = teacher_labels(x);
    dt_tensor *p[4] = {param(2, w1s, 0.35, 11), param(1, b1s, 0.0, 12), param(2, w2s, 0.18, 13),
                       param(1, b2s, 0.0, 14)};
    double first = 0.0, last = 0.0;
    for (int step = 0; step < steps; step++) {
        dt_tensor *loss = forward(x, p, labels);
        CHECK(dt_tensor_item(loss, &last));
        if (step == 0)
            first = last;
        printf("step %3d  loss %.6f\n", step, last);
        CHECK(dt_backward(loss, NULL));
        dt_tensor_release(loss);
        sgd_step(p, 4, lr);
    }
    dt_memory_stats st;
    CHECK(dt_memory_stats_get(dt_device_cpu(), &st));
    printf("loss %.6f -> %.6f; activation bytes live after training: %lld\n", first, last,
           (long long)st.current[DT_MEM_ACTIVATION]);
    for (int i = 0; i < 4; i++)
        dt_tensor_release(p[i]);
    dt_tensor_release(labels);
    dt_tensor_release(x);
    if (!(last < first)) {
        fprintf(stderr, "mlp: the loss did not fall\n");
        return 1;
    }
    return 0;
}
