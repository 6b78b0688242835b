/* train_gpt's sharded checkpoints (see checkpointing.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "checkpointing.h"

static dt_status any_distributed(const char *fqn, dt_module *owner, const char *name,
                                 dt_tensor *param, void *user)
{
    (void)fqn;
    (void)owner;
    (void)name;
    if (dt_tensor_is_distributed(param))
        *(bool *)user = true;
    return DT_OK;
}

/* @p msg without the "rank N: " of a last error (set again, it gets one). */
static const char *unprefixed(const char *msg)
{
    const char *p = strstr(msg, ": ");
    return strncmp(msg, "rank ", 5) == 0 && p != NULL ? p + 2 : msg;
}

/*
 * A load over a mesh agrees by itself (all ranks fail alike); one of an
 * all-local model (DDP) does not. When only some ranks failed, each of them
 * aborts the world, so the others stop (in the barrier) with its message
 * instead of training without it.
 */
static dt_status agree_world(dt_comm *w, dt_status st)
{
    int32_t v[2] = {(int32_t)st, -(int32_t)st}; /* the lowest and the highest status */
    dt_status ast = dt_comm_allreduce(w, v, v, 2, DT_DTYPE_I32, DT_REDUCE_OP_MIN, NULL);
    if (st != DT_OK) { /* its own error stands */
        if (ast == DT_OK && -v[1] == DT_OK) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "%s", unprefixed(dt_last_error()));
            (void)dt_comm_abort(w, st, msg);
            return dt_set_error(st, "%s", msg);
        }
        return st;
    }
    CHECK(ast);
    if (v[0] == DT_OK)
        return DT_OK;
    CHECK(dt_comm_barrier(w, NULL)); /* fails when the abort notice arrives */
    return dt_set_error((dt_status)v[0], "train_gpt: another rank could not load the checkpoint");
}

dt_status train_ck_resume(const train_parallel *p, const char *dir, dt_module *model, dt_optim *opt,
                          int64_t *first_step)
{
    dt_status st = dt_checkpoint_load(model, opt, dir);
    if (p->rt != NULL && p->world > 1)
        CHECK(agree_world(dt_runtime_world(p->rt), st));
    CHECK(st);
    *first_step = dt_optim_step_count(opt);
    if (p->rank == 0)
        printf("resumed %s at step %" PRId64 "\n", dir, *first_step);
    return DT_OK;
}

/*
 * <dir>/config.json: the model's sizes, which the tensors' shapes alone do not
 * give (n_heads), for programs that load the checkpoint (examples/generate).
 * Written to a temporary name and renamed, as the checkpoint's files are.
 */
static dt_status write_config(const char *dir, const dt_gpt_config *c)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return dt_set_error(DT_ERR_SYSTEM, "train_gpt: cannot create %s: %s", tmp, strerror(errno));
    fprintf(f,
            "{\"model_type\": \"gpt\", \"vocab_size\": %" PRId64 ", \"max_seq_len\": %" PRId64
            ", \"dim\": %" PRId64 ", \"n_layers\": %" PRId64 ", \"n_heads\": %" PRId64
            ", \"ffn_dim\": %" PRId64 ", \"tokenizer\": \"bytes\"}\n",
            c->vocab_size, c->max_seq_len, c->dim, c->n_layers, c->n_heads, c->ffn_dim);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return dt_set_error(DT_ERR_SYSTEM, "train_gpt: cannot write %s: %s", path, strerror(errno));
    return DT_OK;
}

dt_status train_ck_after_step(const train_parallel *p, const char *dir, int64_t every, int64_t s,
                              int64_t steps, dt_module *model, dt_optim *opt)
{
    if (dir == NULL || !((every > 0 && (s + 1) % every == 0) || s + 1 == steps))
        return DT_OK;
    bool dist = false;
    CHECK(dt_module_foreach_param(model, any_distributed, &dist));
    /* an all-local model (one rank, or DDP without tp) is the same everywhere: rank 0 saves */
    dt_status st = (dist || p->rank == 0) ? dt_checkpoint_save(model, opt, dir) : DT_OK;
    if (!dist && p->rt != NULL && p->world > 1) { /* the others wait for rank 0's files */
        int32_t v = (int32_t)st;
        CHECK(dt_comm_allreduce(dt_runtime_world(p->rt), &v, &v, 1, DT_DTYPE_I32, DT_REDUCE_OP_MIN,
                                NULL));
        if (st == DT_OK && v != DT_OK)
            return dt_set_error((dt_status)v, "train_gpt: rank 0 could not save %s", dir);
    }
    CHECK(st);
    if (p->rank == 0) {
        CHECK(write_config(dir, dt_gpt_get_config(model)));
        printf("checkpoint %s at step %" PRId64 "\n", dir, s + 1);
    }
    return DT_OK;
}
