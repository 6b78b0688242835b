/*
 * Sharded checkpoints, save side: every rank writes the distinct shards it
 * holds to rank-<R>.<save_id>.safetensors, then world rank 0 writes
 * index.json (global shapes, dtypes, every shard's file, offset and shape)
 * last, and removes the files of older saves. All files go through temporary
 * names + fsync + rename, and the save id keeps an older checkpoint in the
 * same directory whole until the new index replaces the old one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/ck_index.h"
#include "checkpoint/ck_params.h"
#include "checkpoint/st_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"

typedef struct ss_ctx {
    const char *dir;
    dt_ck_params l;
    dt_mesh *mesh;
    dt_optim *optim; /* NULL: parameters only */
    int world_rank;
    char id[24];
} ss_ctx;

static void ss_file_name(const ss_ctx *c, int world_rank, char *buf, size_t len)
{
    snprintf(buf, len, "rank-%d.%s.safetensors", world_rank, c->id);
}

/* The stored tensors of this rank's shard of @p t (FQN @p fqn): the local
 * tensor, or one contiguous copy per box of a split-factor shard under its
 * box key; appended to names/ts at *n (new references, names malloc'ed). */
static dt_status ss_shard_tensors(dt_tensor *t, const char *fqn, char **names, dt_tensor **ts,
                                  int *n)
{
    dt_box boxes[DT_PLACEMENT_MAX_SPLIT];
    int nb = 0;
    DT_CHECK(dt__ck_boxes(t, NULL, boxes, &nb));
    for (int b = 0; b < nb; b++) {
        char key[512];
        dt_tensor *v = NULL;
        dt__ck_box_key(fqn, b, key, sizeof(key));
        DT_CHECK(dt__ck_box_view(dt_to_local(t), &boxes[b], &v));
        dt_status st = dt_tensor_contiguous(v, &ts[*n]);
        dt_tensor_release(v);
        DT_CHECK(st);
        if ((names[*n] = strdup(key)) == NULL) {
            dt_tensor_release(ts[*n]);
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_save: key of %s", fqn);
        }
        (*n)++;
    }
    return DT_OK;
}

/* Write this rank's stored shards (and, on world rank 0, the local parameters). */
static dt_status ss_write_rank_file(ss_ctx *c)
{
    size_t cap = (size_t)c->l.n * DT_PLACEMENT_MAX_SPLIT + 1;
    char **names = calloc(cap, sizeof(char *));
    dt_tensor **ts = calloc(cap, sizeof(dt_tensor *));
    dt_status st = DT_OK;
    int n = 0;
    if (names == NULL || ts == NULL) {
        st = DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_save: %d parameters", c->l.n);
        goto out;
    }
    for (int i = 0; i < c->l.n && st == DT_OK; i++) {
        dt_tensor *t = c->l.p[i].t;
        if (dt_tensor_is_distributed(t)) {
            int coord[DT_MESH_MAX_DIMS];
            dt_mesh_coordinate(c->mesh, coord);
            if (!dt__ck_shard_stored(dt_tensor_spec(t), coord) ||
                dt_tensor_numel(dt_to_local(t)) == 0)
                continue;
            st = ss_shard_tensors(t, c->l.p[i].fqn, names, ts, &n);
            continue;
        } else if (c->world_rank != 0 || dt_tensor_numel(t) == 0) {
            continue;
        }
        names[n] = strdup(c->l.p[i].fqn);
        ts[n++] = dt_tensor_retain(t);
        if (names[n - 1] == NULL)
            st = DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_save: key of %s", c->l.p[i].fqn);
    }
    if (n > 0 && st == DT_OK) {
        char name[96], path[4096], rank[16], step[24];
        ss_file_name(c, c->world_rank, name, sizeof(name));
        snprintf(path, sizeof(path), "%s/%s", c->dir, name);
        snprintf(rank, sizeof(rank), "%d", c->world_rank);
        snprintf(step, sizeof(step), "%lld", (long long)dt_optim_step_count(c->optim));
        const char *meta[10] = {"format",
                                "pt",
                                "dtensor.save_id",
                                c->id,
                                "dtensor.rank",
                                rank,
                                "dtensor.optim",
                                dt_optim_name(c->optim),
                                "dtensor.optim_step",
                                step};
        st = dt_safetensors_save(path, n, (const char **)names, ts, c->optim != NULL ? 5 : 3, meta);
    }
out:
    for (int i = 0; i < n; i++) {
        free(names[i]);
        dt_tensor_release(ts[i]);
    }
    free(names);
    free(ts);
    return st;
}

static cJSON *ss_dims(int n, const int64_t *v)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; a != NULL && d < n; d++) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%lld", (long long)v[d]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(buf));
    }
    return a;
}

static bool ss_add_shard(cJSON *shards, const char *file, const char *key, int nd,
                         const int64_t *off, const int64_t *shape)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return false;
    cJSON_AddItemToArray(shards, o);
    return cJSON_AddStringToObject(o, "file", file) && cJSON_AddStringToObject(o, "key", key) &&
           cJSON_AddItemToObject(o, "offset", ss_dims(nd, off)) &&
           cJSON_AddItemToObject(o, "shape", ss_dims(nd, shape));
}

/* Every stored shard of parameter @p p, computed from its spec (no communication). */
static dt_status ss_index_param(const ss_ctx *c, const dt_ck_param *p, cJSON *shards)
{
    dt_tensor *t = p->t;
    int nd = dt_tensor_ndim(t);
    char file[96];
    bool ok = true;
    if (!dt_tensor_is_distributed(t)) {
        int64_t zero[DT_MAX_DIMS] = {0};
        ss_file_name(c, 0, file, sizeof(file));
        if (dt_tensor_numel(t) > 0)
            ok = ss_add_shard(shards, file, p->fqn, nd, zero, dt_tensor_shape(t));
    } else {
        const dt_spec *s = dt_tensor_spec(t);
        for (int mr = 0; ok && mr < dt_mesh_size(c->mesh); mr++) {
            int coord[DT_MESH_MAX_DIMS];
            int64_t ls[DT_MAX_DIMS], off[DT_MAX_DIMS];
            DT_CHECK(dt_mesh_rank_to_coord(c->mesh, mr, coord));
            if (!dt__ck_shard_stored(s, coord))
                continue;
            DT_CHECK(dt_spec_local_shape(s, coord, ls, off));
            if (dt__shape_numel(nd, ls) == 0)
                continue;
            ss_file_name(c, dt_mesh_world_rank(c->mesh, mr), file, sizeof(file));
            dt_box boxes[DT_PLACEMENT_MAX_SPLIT];
            int nb = 0;
            DT_CHECK(dt__ck_boxes(t, coord, boxes, &nb));
            for (int b = 0; ok && b < nb; b++) { /* a split-factor shard: one entry per box */
                char key[512];
                dt__ck_box_key(p->fqn, b, key, sizeof(key));
                ok = ss_add_shard(shards, file, key, nd, boxes[b].offset, boxes[b].shape);
            }
        }
    }
    return ok ? DT_OK : DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_save: index of %s", p->fqn);
}

/* The "optim" object: name and step count (hyper-parameters informative). */
static bool ss_add_optim(const ss_ctx *c, cJSON *root)
{
    cJSON *o = cJSON_AddObjectToObject(root, "optim");
    return o != NULL && cJSON_AddStringToObject(o, "name", dt_optim_name(c->optim)) &&
           cJSON_AddNumberToObject(o, "step", (double)dt_optim_step_count(c->optim)) &&
           cJSON_AddNumberToObject(o, "lr", dt_optim_lr(c->optim));
}

static dt_status ss_write_index(const ss_ctx *c)
{
    dt_status st = DT_OK;
    cJSON *root = cJSON_CreateObject(), *ts = NULL;
    bool ok = root != NULL && cJSON_AddStringToObject(root, "format", "dtensor-sharded") &&
              cJSON_AddNumberToObject(root, "version", 1) &&
              cJSON_AddStringToObject(root, "save_id", c->id) &&
              cJSON_AddNumberToObject(root, "world_size", c->mesh ? dt_mesh_size(c->mesh) : 1) &&
              (c->optim == NULL || ss_add_optim(c, root)) &&
              (ts = cJSON_AddObjectToObject(root, "tensors")) != NULL;
    for (int i = 0; ok && st == DT_OK && i < c->l.n; i++) {
        const dt_ck_param *p = &c->l.p[i];
        cJSON *e = cJSON_AddObjectToObject(ts, p->fqn), *shards = NULL;
        char pls[128] = "local";
        if (dt_tensor_is_distributed(p->t))
            dt_placements_format(dt_mesh_ndim(c->mesh), dt_tensor_placements(p->t), ",", pls,
                                 sizeof(pls));
        ok = e != NULL &&
             cJSON_AddStringToObject(e, "dtype", dt__st_dtype_of(dt_tensor_dtype(p->t))->name) &&
             cJSON_AddItemToObject(e, "shape",
                                   ss_dims(dt_tensor_ndim(p->t), dt_tensor_shape(p->t))) &&
             cJSON_AddStringToObject(e, "placements", pls) &&
             (shards = cJSON_AddArrayToObject(e, "shards")) != NULL;
        if (ok)
            st = ss_index_param(c, p, shards);
    }
    char *text = (ok && st == DT_OK) ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (st != DT_OK)
        return st;
    if (text == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_checkpoint_save: index.json");
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", c->dir, DT_CK_INDEX_NAME);
    st = dt__atomic_file_put(path, text, strlen(text));
    free(text);
    return st;
}

/* Remove rank files of other saves and temporaries left by crashed ones.
 * Best effort: a failure only leaves garbage behind. */
static void ss_sweep(const ss_ctx *c)
{
    DIR *d = opendir(c->dir);
    if (d == NULL)
        return;
    char mine[40];
    snprintf(mine, sizeof(mine), ".%s.safetensors", c->id);
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        const char *n = e->d_name;
        size_t len = strlen(n), ml = strlen(mine);
        bool ours = len > ml && strcmp(n + len - ml, mine) == 0;
        bool stale = (strncmp(n, "rank-", 5) == 0 && !ours) ||
                     strncmp(n, DT_CK_INDEX_NAME ".tmp-", strlen(DT_CK_INDEX_NAME) + 5) == 0;
        if (stale) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", c->dir, n);
            unlink(path);
        }
    }
    closedir(d);
}

static dt_status ss_mkdir(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return DT_ERR(DT_ERR_SYSTEM, "dt_checkpoint_save: cannot create directory %s: %s", dir,
                      strerror(errno));
    return DT_OK;
}

/*
 * Saves of local parameters are not collective, so several processes (the
 * ranks of a job, each with the same model) may save into one directory at
 * once. Each writes rank-0 files under its own save id and sweeps the
 * others', so unserialised, an index.json could name a file another save
 * had just removed. An exclusive flock on <dir>/.lock makes each save whole.
 */
static dt_status ss_lock(const char *dir, int *fd)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/.lock", dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0)
        return DT_ERR(DT_ERR_SYSTEM, "dt_checkpoint_save: cannot open %s: %s", path,
                      strerror(errno));
    while (flock(*fd, LOCK_EX) != 0) {
        if (errno == EINTR)
            continue;
        dt_status st =
            DT_ERR(DT_ERR_SYSTEM, "dt_checkpoint_save: cannot lock %s: %s", path, strerror(errno));
        close(*fd);
        *fd = -1;
        return st;
    }
    return DT_OK;
}

/* One step of the save everyone agrees on: a failure anywhere stops all. */
static dt_status ss_step(const ss_ctx *c, dt_status mine, const char *what)
{
    return dt__ck_agree_step("dt_checkpoint_save", c->mesh, mine, what);
}

static bool ss_in_world_slice(dt_mesh *mesh)
{
    for (int r = 0; mesh != NULL && r < dt_mesh_size(mesh); r++)
        if (dt_mesh_world_rank(mesh, r) == 0)
            return true;
    return mesh == NULL;
}

dt_status dt_checkpoint_save(dt_module *root, dt_optim *optim, const char *dir)
{
    static const char *fn = "dt_checkpoint_save";
    DT_ARG_NOT_NULL(root);
    DT_ARG_NOT_NULL(dir);
    ss_ctx c = {.dir = dir, .optim = optim};
    dt_status st = DT_OK;
    DT_CHECK_GOTO(dt__ck_params_collect(fn, root, &c.l), st, out);
    for (int i = 0; i < c.l.n; i++)
        DT_CHECK_GOTO(dt__ck_check_not_partial(fn, &c.l.p[i]), st, out);
    if (optim != NULL)
        DT_CHECK_GOTO(dt__ck_params_add_optim(fn, &c.l, optim), st, out);
    c.mesh = c.l.mesh;
    if (!ss_in_world_slice(c.mesh))
        goto out; /* a replica of the slice that holds world rank 0: it saves */
    c.world_rank = c.mesh != NULL ? dt_mesh_world_rank(c.mesh, dt_mesh_rank(c.mesh)) : 0;
    int64_t id = 0;
    if (c.world_rank == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = (int64_t)((((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^
                        ((uint64_t)getpid() << 40)) &
                       0x7fffffffffffffffULL) |
             1;
    }
    if (c.mesh != NULL)
        DT_CHECK_GOTO(dt__ck_agree_max(c.mesh, &id), st, out);
    snprintf(c.id, sizeof(c.id), "%016llx", (unsigned long long)id);
    DT_CHECK_GOTO(ss_step(&c, ss_mkdir(dir), "creating the directory"), st, out);
    int lock = -1;
    if (c.mesh == NULL) /* not collective: other processes may save here too */
        DT_CHECK_GOTO(ss_lock(dir, &lock), st, out);
    st = ss_step(&c, ss_write_rank_file(&c), "writing a rank file");
    dt_status ist = DT_OK;
    if (st == DT_OK && c.world_rank == 0) {
        ist = ss_write_index(&c);
        if (ist == DT_OK)
            ss_sweep(&c);
    }
    if (st == DT_OK)
        st = ss_step(&c, ist, "writing index.json (world rank 0)");
    if (lock >= 0)
        close(lock); /* releases the lock */
out:
    dt__ck_params_free(&c.l);
    return st;
}
