/*
 * The forward hooks a style adds (PyTorch's _prepare_input_fn /
 * _prepare_output_fn): wrap a local tensor as distributed in its declared
 * layout, redistribute it to the layout wanted, hand it on local or not.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "styles/style_impl.h"

/* What both hooks of one module share: the io and the tp mesh (one
 * reference), freed with the last of the hooks. */
typedef struct hook_ctx {
    dt_style_io io;
    dt_mesh *mesh;
    int refs;
} hook_ctx;

static void hook_ctx_free(void *p)
{
    hook_ctx *c = p;
    if (c != NULL && --c->refs == 0) {
        dt_mesh_release(c->mesh);
        free(c);
    }
}

static dt_status hook_pre(dt_module *m, int n_in, dt_tensor **inputs, void *user);
static dt_status hook_post(dt_module *m, dt_tensor **output, void *user);

static bool output_prepared(const dt_style_io *io)
{
    return io->output.present || io->desired_output.present || io->output_fn != NULL ||
           io->local_output;
}

dt_status dt__style_hooks_add(dt_module *m, const dt_style_io *io, dt_mesh *tp)
{
    bool pre = io->n_inputs > 0, post = output_prepared(io);
    if (!pre && !post)
        return DT_OK;
    hook_ctx *c = malloc(sizeof(*c));
    if (c == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "parallelize: no memory for a hook");
    *c = (hook_ctx){.io = *io, .mesh = dt_mesh_retain(tp), .refs = (pre ? 1 : 0) + (post ? 1 : 0)};
    dt_status status = DT_OK;
    if (pre) {
        status = dt_module_add_pre_hook(m, hook_pre, c, hook_ctx_free);
        if (status != DT_OK) {
            c->refs = 1; /* the post hook will not be added either */
            hook_ctx_free(c);
            return status;
        }
    }
    if (post) {
        status = dt_module_add_post_hook(m, hook_post, c, hook_ctx_free);
        if (status != DT_OK)
            hook_ctx_free(c); /* drop the post hook's share */
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

static dt_status hook_pre(dt_module *m, int n_in, dt_tensor **inputs, void *user)
{
    const hook_ctx *c = user;
    const dt_style_io *io = &c->io;
    int n = n_in < io->n_inputs ? n_in : io->n_inputs;
    for (int i = 0; i < n; i++) {
        dt_tensor *y = NULL;
        if (inputs[i] != NULL && io->input_fn[i] != NULL) { /* the style's function does it all */
            DT_CHECK(io->input_fn[i](inputs[i], c->mesh, &y));
            dt_tensor_release(inputs[i]);
            inputs[i] = y;
            continue;
        }
        if (inputs[i] == NULL || (!io->input[i].present && !io->desired_input[i].present))
            continue;
        char what[24];
        snprintf(what, sizeof(what), "input %d", i);
        DT_CHECK(in_context(prepare(m, what, inputs[i], c->mesh, io->input[i], io->desired_input[i],
                                    io->input_last_dim[i], io->local_inputs, &y),
                            m, what,
                            io->desired_input[i].present ? io->desired_input[i] : io->input[i]));
        dt_tensor_release(inputs[i]);
        inputs[i] = y;
    }
    return DT_OK;
}

static dt_status hook_post(dt_module *m, dt_tensor **output, void *user)
{
    const hook_ctx *c = user;
    const dt_style_io *io = &c->io;
    if (*output == NULL)
        return DT_OK;
    dt_tensor *y = NULL;
    if (io->output_fn != NULL) /* the style's function does it all */
        DT_CHECK(io->output_fn(*output, c->mesh, &y));
    else
        DT_CHECK(in_context(prepare(m, "output", *output, c->mesh, io->output, io->desired_output,
                                    -1, io->local_output, &y),
                            m, "output",
                            io->desired_output.present ? io->desired_output : io->output));
    dt_tensor_release(*output);
    *output = y;
    return DT_OK;
}
