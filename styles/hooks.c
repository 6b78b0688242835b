/*
 * The forward hooks a style adds (PyTorch's _prepare_input_fn /
 * _prepare_output_fn): wrap a local tensor as distributed in its declared
 * layout, redistribute it to the layout wanted, hand it on local or not.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "styles/style_kind.h"

dt_status dt__hook_ctx_new(const dt_style *s, dt_style_kind as, dt_mesh *tp, dt__hook_ctx **out)
{
    dt__hook_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for a hook");
    c->style = dt_style_retain((dt_style *)s);
    c->mesh = dt_mesh_retain(tp);
    c->as = as;
    c->in_last_dim = -1;
    *out = c;
    return DT_OK;
}

void dt__hook_ctx_free(void *ctx)
{
    dt__hook_ctx *c = ctx;
    if (c == NULL)
        return;
    dt_style_release(c->style);
    dt_mesh_release(c->mesh);
    free(c);
}

static int refs_of(bool pre, bool post)
{
    return (pre ? 1 : 0) + (post ? 1 : 0);
}

/* Both hooks share one context: a tiny refcount so each hook's free drops one. */
typedef struct shared_ctx {
    dt__hook_ctx *ctx;
    int refs;
} shared_ctx;

static void shared_free(void *p)
{
    shared_ctx *s = p;
    if (s != NULL && --s->refs == 0) {
        dt__hook_ctx_free(s->ctx);
        free(s);
    }
}

static dt_status pre_tramp(dt_module *m, int n_in, dt_tensor **in, void *user)
{
    return dt__hook_pre(m, n_in, in, ((shared_ctx *)user)->ctx);
}

static dt_status post_tramp(dt_module *m, dt_tensor **out, void *user)
{
    return dt__hook_post(m, out, ((shared_ctx *)user)->ctx);
}

dt_status dt__hook_add(dt_module *m, dt__hook_ctx *ctx, bool pre, bool post)
{
    shared_ctx *s = malloc(sizeof(*s));
    if (s == NULL) {
        dt__hook_ctx_free(ctx);
        return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for a hook");
    }
    s->ctx = ctx;
    s->refs = refs_of(pre, post);
    if (s->refs == 0) {
        shared_free(s);
        return DT_OK;
    }
    dt_status status = DT_OK;
    if (pre) {
        status = dt_module_add_pre_hook(m, pre_tramp, s, shared_free);
        if (status != DT_OK) {
            s->refs = 1; /* the post hook will not be added either */
            shared_free(s);
            return status;
        }
    }
    if (post) {
        status = dt_module_add_post_hook(m, post_tramp, s, shared_free);
        if (status != DT_OK)
            shared_free(s); /* drop the post hook's share */
    }
    return status;
}

static bool same_placement(dt_placement a, dt_placement b, int ndim)
{
    dt_placement na, nb;
    if (dt_placement_normalize(a, ndim, &na) != DT_OK ||
        dt_placement_normalize(b, ndim, &nb) != DT_OK)
        return false;
    return dt_placement_equal(na, nb);
}

/*
 * Wrap local @p x as distributed in @p l. The global shape is known without
 * communication for Replicate/Partial, and for a S(-1) whose full size the
 * style knows (@p last_dim); otherwise from_local infers it (collective).
 */
static dt_status wrap_local(dt_tensor *x, dt_mesh *mesh, dt_placement l, int64_t last_dim,
                            dt_tensor **out)
{
    int nd = dt_tensor_ndim(x);
    int64_t gs[DT_MAX_DIMS];
    memcpy(gs, dt_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
    bool known = l.kind != DT_PLACEMENT_SHARD;
    if (!known && last_dim >= 0 && nd > 0 && same_placement(l, dt_shard(nd - 1), nd)) {
        gs[nd - 1] = last_dim;
        known = true;
    }
    return dt_from_local(x, mesh, 1, &l, known ? gs : NULL, out);
}

static const char *pl_text(dt_placement p, char *buf, size_t len)
{
    dt_placement_format(p, buf, len);
    return buf;
}

/* @p st with the module and the plan's layout in front: a layout the plan got
 * wrong (colwise(output=S(7))) can only fail here, at the first forward,
 * when the tensor's rank is known, and must say which plan entry it was. */
static dt_status in_context(dt_status st, const dt_module *m, const char *what, dt_layout want)
{
    if (st == DT_OK)
        return st;
    char msg[768], pl[32] = "-";
    snprintf(msg, sizeof(msg), "%s", dt__error_text(dt_last_error())); /* DT_ERR rewrites it */
    if (want.present)
        dt_placement_format(want.placement, pl, sizeof(pl));
    return DT_ERR(st, "parallelize: %s '%s' %s (plan layout %s): %s", dt_module_type_name(m),
                  dt_module_name(m), what, pl, msg);
}

/*
 * The common step: local -> distributed in @p have, then to @p want, then
 * maybe local. @p m and @p what ("input 0", "output") name it in trace logs
 * (DT_LOG=trace DT_LOG_SUBSYS=styles).
 */
static dt_status prepare(const dt_module *m, const char *what, dt_tensor *x, dt_mesh *mesh,
                         dt_layout have, dt_layout want, int64_t last_dim, bool to_local,
                         dt_tensor **out)
{
    dt_tensor *d = NULL, *r = NULL;
    char a[32], b[32];
    if (dt_tensor_is_distributed(x))
        d = dt_tensor_retain(x);
    else if (have.present)
        DT_CHECK(wrap_local(x, mesh, have.placement, last_dim, &d));
    else
        d = dt_tensor_retain(x); /* nothing declared: leave it be */
    if (want.present && dt_tensor_is_distributed(d)) {
        const dt_placement *cur = dt_tensor_placements(d);
        if (dt_mesh_ndim(dt_tensor_mesh(d)) != 1 ||
            !same_placement(cur[0], want.placement, dt_tensor_ndim(d))) {
            DT_LOG_TRACE("styles", "%s '%s' %s: redistribute %s -> %s", dt_module_type_name(m),
                         dt_module_name(m), what, pl_text(cur[0], a, sizeof(a)),
                         pl_text(want.placement, b, sizeof(b)));
            dt_status status = dt_redistribute(d, 1, &want.placement, &r);
            dt_tensor_release(d);
            DT_CHECK(status);
            d = r;
        }
    }
    if (to_local && dt_tensor_is_distributed(d)) {
        r = dt_tensor_retain(dt_to_local(d));
        dt_tensor_release(d);
        d = r;
    }
    *out = d;
    return DT_OK;
}

dt_status dt__hook_pre(dt_module *m, int n_in, dt_tensor **inputs, void *user)
{
    const dt__hook_ctx *c = user;
    int n = n_in < c->n_in ? n_in : c->n_in;
    for (int i = 0; i < n; i++) {
        dt_tensor *y = NULL;
        if (i == 0 && inputs[0] != NULL && c->style->prepare_input != NULL) {
            /* the user's function does it all */
            DT_CHECK(c->style->prepare_input(inputs[0], c->mesh, &y));
            dt_tensor_release(inputs[0]);
            inputs[0] = y;
            continue;
        }
        if (inputs[i] == NULL || (!c->in[i].present && !c->desired[i].present))
            continue;
        char what[24];
        snprintf(what, sizeof(what), "input %d", i);
        DT_CHECK(in_context(prepare(m, what, inputs[i], c->mesh, c->in[i], c->desired[i],
                                    c->in_last_dim, c->local_in, &y),
                            m, what, c->desired[i].present ? c->desired[i] : c->in[i]));
        dt_tensor_release(inputs[i]);
        inputs[i] = y;
    }
    return DT_OK;
}

dt_status dt__hook_post(dt_module *m, dt_tensor **output, void *user)
{
    const dt__hook_ctx *c = user;
    if (*output == NULL)
        return DT_OK;
    dt_tensor *y = NULL;
    if (c->style->prepare_output != NULL) /* the user's function does it all */
        DT_CHECK(c->style->prepare_output(*output, c->mesh, &y));
    else
        DT_CHECK(in_context(
            prepare(m, "output", *output, c->mesh, c->out, c->desired_out, -1, c->local_out, &y), m,
            "output", c->desired_out.present ? c->desired_out : c->out));
    dt_tensor_release(*output);
    *output = y;
    return DT_OK;
}
