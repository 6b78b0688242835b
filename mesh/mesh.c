/* The device mesh as a data structure: layout, rank <-> coordinate, slicing, printing. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "mesh/mesh_impl.h"

static void mesh_free(dt_mesh *m);

const char *dt__mesh_shape_str(int ndim, const int *shape, char *buf, size_t len)
{
    size_t p = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (int d = 0; d < ndim && p < len; d++) {
        int w = snprintf(buf + p, len - p, d ? "x%d" : "%d", shape[d]);
        p += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

dt_status dt__mesh_layout_create(const char *fn, int ndim, const int *shape,
                                 const char *const *names, int world_size, int my_rank,
                                 dt_mesh **out)
{
    if (ndim < 1 || ndim > DT_MESH_MAX_DIMS)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: mesh ndim %d is outside 1..%d", fn, ndim,
                      DT_MESH_MAX_DIMS);
    if (shape == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'shape' is NULL", fn);
    int64_t prod = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1)
            return DT_ERR(DT_ERR_INVALID_ARG, "%s: mesh dim %d has size %d (must be >= 1)", fn, d,
                          shape[d]);
        prod *= shape[d];
        if (prod > INT_MAX) { /* ranks are ints: a bigger product would wrap */
            char s[64];
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: mesh shape %s holds more than %d ranks (at dim %d of size %d)", fn,
                          dt__mesh_shape_str(ndim, shape, s, sizeof(s)), INT_MAX, d, shape[d]);
        }
    }
    if (prod != world_size) {
        char s[64];
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: mesh shape %s holds %lld ranks but the world has %d",
                      fn, dt__mesh_shape_str(ndim, shape, s, sizeof(s)), (long long)prod,
                      world_size);
    }
    if (my_rank < 0 || my_rank >= world_size)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: rank %d is outside the mesh of %d ranks", fn,
                      my_rank, world_size);
    for (int d = 0; names != NULL && d < ndim; d++) {
        if (names[d] == NULL)
            continue;
        if (names[d][0] == '\0' || strlen(names[d]) >= DT_MESH_NAME_MAX ||
            strchr(names[d], ',') != NULL)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "%s: dim name '%s' is empty, has a comma or is longer than %d", fn,
                          names[d], DT_MESH_NAME_MAX - 1);
        for (int e = 0; e < d; e++)
            if (names[e] != NULL && strcmp(names[e], names[d]) == 0)
                return DT_ERR(DT_ERR_INVALID_ARG, "%s: dim name '%s' is used by dims %d and %d", fn,
                              names[d], e, d);
    }
    dt_mesh *m = dt__handle_new(sizeof(*m), DT__MAGIC_MESH);
    if (m == NULL)
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for a mesh", fn);
    m->ranks = malloc(sizeof(int) * (size_t)world_size);
    if (m->ranks == NULL) {
        dt__handle_delete(m, sizeof(*m));
        return DT_ERR(DT_ERR_NO_MEMORY, "%s: no memory for %d ranks", fn, world_size);
    }
    atomic_init(&m->refcount, 1);
    pthread_mutex_init(&m->lock, NULL);
    m->ndim = ndim;
    m->size = world_size;
    for (int d = 0; d < ndim; d++) {
        m->shape[d] = shape[d];
        if (names != NULL && names[d] != NULL)
            snprintf(m->names[d], DT_MESH_NAME_MAX, "%s", names[d]);
    }
    for (int r = 0; r < world_size; r++)
        m->ranks[r] = r;
    m->my_rank = my_rank;
    dt_mesh_rank_to_coord(m, my_rank, m->coord);
    *out = m;
    return DT_OK;
}

dt_status dt_mesh_create_virtual(int ndim, const int *shape, const char *const *dim_names,
                                 int my_rank, dt_mesh **out)
{
    DT_ARG_NOT_NULL(out);
    DT_ARG_NOT_NULL(shape);
    /* ndim is validated (with its message) by dt__mesh_layout_create; read no
     * more of shape than a valid ndim allows before that */
    int64_t prod = 1;
    for (int d = 0; ndim <= DT_MESH_MAX_DIMS && d < ndim && prod <= INT_MAX; d++)
        prod *= shape[d] > 0 ? shape[d] : 1;
    /* too many ranks: refused by the layout check, which names the shape */
    int world = prod <= INT_MAX ? (int)prod : INT_MAX;
    return dt__mesh_layout_create(__func__, ndim, shape, dim_names, world, my_rank, out);
}

dt_mesh *dt_mesh_retain(dt_mesh *m)
{
    if (m != NULL && m->magic != DT__MAGIC_MESH) {
        DT_LOG_ERROR("mesh", "dt_mesh_retain: mesh %p is released", (void *)m);
        return NULL;
    }
    if (m != NULL)
        atomic_fetch_add(&m->refcount, 1);
    return m;
}

static void mesh_free(dt_mesh *m)
{
    if (m->root != NULL) {
        dt_mesh_release(m->root);
    } else {
        for (int d = 0; d < m->ndim; d++)
            dt_comm_destroy(m->dim_comm[d]);
        dt__mesh_cache_entry *e = m->cache;
        while (e != NULL) {
            dt__mesh_cache_entry *next = e->next;
            free(e->key);
            free(e);
            e = next;
        }
        pthread_mutex_destroy(&m->lock);
    }
    free(m->ranks);
    dt__handle_delete(m, sizeof(*m));
}

void dt_mesh_release(dt_mesh *m)
{
    if (m != NULL && m->magic != DT__MAGIC_MESH) { /* released twice */
        DT_LOG_ERROR("mesh", "dt_mesh_release: mesh %p is already released", (void *)m);
        return;
    }
    if (m != NULL && atomic_fetch_sub(&m->refcount, 1) == 1)
        mesh_free(m);
}

int dt_mesh_ndim(const dt_mesh *m)
{
    return m ? m->ndim : 0;
}
int dt_mesh_size(const dt_mesh *m)
{
    return m ? m->size : 0;
}
int dt_mesh_rank(const dt_mesh *m)
{
    return m ? m->my_rank : -1;
}

int dt_mesh_dim_size(const dt_mesh *m, int dim)
{
    if (m == NULL || dim < -m->ndim || dim >= m->ndim)
        return -1;
    return m->shape[dim < 0 ? dim + m->ndim : dim];
}

const char *dt_mesh_dim_name(const dt_mesh *m, int dim)
{
    if (m == NULL || dim < -m->ndim || dim >= m->ndim)
        return NULL;
    const char *n = m->names[dim < 0 ? dim + m->ndim : dim];
    return n[0] ? n : NULL;
}

static int names_str(const dt_mesh *m, char *buf, size_t len)
{
    int p = 0;
    buf[0] = '\0';
    for (int d = 0; d < m->ndim && (size_t)p < len; d++)
        p += snprintf(buf + p, len - (size_t)p, "%s%s", d ? ", " : "",
                      m->names[d][0] ? m->names[d] : "-");
    return p;
}

dt_status dt_mesh_dim_index(const dt_mesh *m, const char *name, int *out)
{
    return dt__mesh_dim_find("dt_mesh_dim_index", m, name, out);
}

dt_status dt__mesh_dim_find(const char *fn, const dt_mesh *m, const char *name, int *out)
{
    if (m == NULL || name == NULL || out == NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument '%s' is NULL", fn,
                      m == NULL      ? "mesh"
                      : name == NULL ? "name"
                                     : "out");
    const char *dead = dt__handle_problem(m, DT__MAGIC_MESH);
    if (dead != NULL)
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: argument 'mesh' is %s mesh", fn, dead);
    for (int d = 0; d < m->ndim; d++) {
        if (m->names[d][0] && strcmp(m->names[d], name) == 0) {
            *out = d;
            return DT_OK;
        }
    }
    char names[160];
    names_str(m, names, sizeof(names));
    return DT_ERR(DT_ERR_NOT_FOUND, "%s: the mesh has no dim named '%s' (dims: %s)", fn, name,
                  names);
}

void dt_mesh_coordinate(const dt_mesh *m, int *coord)
{
    for (int d = 0; m != NULL && d < m->ndim; d++)
        coord[d] = m->coord[d];
}

dt_status dt_mesh_rank_to_coord(const dt_mesh *m, int rank, int *coord)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(coord);
    if (rank < 0 || rank >= m->size)
        return DT_ERR(DT_ERR_INVALID_ARG,
                      "dt_mesh_rank_to_coord: rank %d is outside the mesh of %d ranks", rank,
                      m->size);
    for (int d = m->ndim - 1; d >= 0; d--) {
        coord[d] = rank % m->shape[d];
        rank /= m->shape[d];
    }
    return DT_OK;
}

dt_status dt_mesh_coord_to_rank(const dt_mesh *m, const int *coord, int *rank)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(coord);
    DT_ARG_NOT_NULL(rank);
    int r = 0;
    for (int d = 0; d < m->ndim; d++) {
        if (coord[d] < 0 || coord[d] >= m->shape[d])
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_mesh_coord_to_rank: coordinate %d on dim %d is outside 0..%d",
                          coord[d], d, m->shape[d] - 1);
        r = r * m->shape[d] + coord[d];
    }
    *rank = r;
    return DT_OK;
}

int dt_mesh_world_rank(const dt_mesh *m, int rank)
{
    if (m == NULL || rank < 0 || rank >= m->size)
        return -1;
    return m->ranks[rank];
}

dt_comm *dt_mesh_dim_comm(const dt_mesh *m, int dim)
{
    if (m == NULL || dim < -m->ndim || dim >= m->ndim)
        return NULL;
    return m->dim_comm[dim < 0 ? dim + m->ndim : dim];
}

static dt_mesh *mesh_root(dt_mesh *m)
{
    return m->root != NULL ? m->root : m;
}

dt_status dt_mesh_slice_dims(dt_mesh *m, int n, const int *dims, dt_mesh **out)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(dims);
    DT_ARG_NOT_NULL(out);
    if (n < 1 || n > m->ndim)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_slice: %d dims requested from a %d-d mesh", n,
                      m->ndim);
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0 || dims[i] >= m->ndim)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_slice: dim %d is outside the %d-d mesh",
                          dims[i], m->ndim);
        if (i > 0 && dims[i] <= dims[i - 1])
            return DT_ERR(
                DT_ERR_INVALID_ARG,
                "dt_mesh_slice: dims must be distinct and in mesh order (dim %d after %d)", dims[i],
                dims[i - 1]);
    }
    dt_mesh *s = dt__handle_new(sizeof(*s), DT__MAGIC_MESH);
    int size = 1;
    for (int i = 0; i < n; i++)
        size *= m->shape[dims[i]];
    if (s == NULL || (s->ranks = malloc(sizeof(int) * (size_t)size)) == NULL) {
        dt__handle_delete(s, sizeof(*s));
        return DT_ERR(DT_ERR_NO_MEMORY, "dt_mesh_slice: no memory for a mesh of %d ranks", size);
    }
    atomic_init(&s->refcount, 1);
    s->ndim = n;
    s->size = size;
    s->rt = m->rt;
    for (int i = 0; i < n; i++) {
        s->shape[i] = m->shape[dims[i]];
        memcpy(s->names[i], m->names[dims[i]], DT_MESH_NAME_MAX);
        s->dim_comm[i] = m->dim_comm[dims[i]];
        s->coord[i] = m->coord[dims[i]];
    }
    /* every position of the slice: this rank's coordinate with the kept dims varied */
    for (int r = 0; r < size; r++) {
        int c[DT_MESH_MAX_DIMS], sc[DT_MESH_MAX_DIMS], pr = 0;
        memcpy(c, m->coord, sizeof(c));
        dt_mesh_rank_to_coord(s, r, sc);
        for (int i = 0; i < n; i++)
            c[dims[i]] = sc[i];
        dt_mesh_coord_to_rank(m, c, &pr);
        s->ranks[r] = m->ranks[pr];
    }
    dt_mesh_coord_to_rank(s, s->coord, &s->my_rank);
    s->root = dt_mesh_retain(mesh_root(m));
    *out = s;
    return DT_OK;
}

dt_status dt_mesh_slice(dt_mesh *m, const char *dim_names, dt_mesh **out)
{
    DT_ARG_NOT_NULL(m);
    DT_ARG_NOT_NULL(dim_names);
    DT_ARG_NOT_NULL(out);
    int dims[DT_MESH_MAX_DIMS], n = 0;
    const char *p = dim_names;
    while (*p != '\0') {
        char name[DT_MESH_NAME_MAX + 1];
        size_t l = strcspn(p, ",");
        while (l > 0 && *p == ' ') {
            p++;
            l--;
        }
        size_t t = l;
        while (t > 0 && p[t - 1] == ' ')
            t--;
        if (t == 0 || t > DT_MESH_NAME_MAX - 1)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_slice: bad dim name list \"%s\"", dim_names);
        memcpy(name, p, t);
        name[t] = '\0';
        int d = -1;
        for (int e = 0; e < m->ndim; e++)
            if (strcmp(m->names[e], name) == 0)
                d = e;
        if (d < 0) {
            char names[160];
            names_str(m, names, sizeof(names));
            return DT_ERR(DT_ERR_NOT_FOUND,
                          "dt_mesh_slice: the mesh has no dim named '%s' (dims: %s)", name, names);
        }
        for (int i = 0; i < n; i++)
            if (dims[i] == d)
                return DT_ERR(DT_ERR_INVALID_ARG,
                              "dt_mesh_slice: dim '%s' is named twice in \"%s\"", name, dim_names);
        if (n == DT_MESH_MAX_DIMS)
            return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_slice: too many names in \"%s\"", dim_names);
        if (n > 0 && d < dims[n - 1])
            return DT_ERR(
                DT_ERR_INVALID_ARG,
                "dt_mesh_slice: '%s' comes before '%s' in the mesh; list dims in mesh order", name,
                m->names[dims[n - 1]]);
        dims[n++] = d;
        p += l;
        if (*p == ',')
            p++;
    }
    if (n == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_mesh_slice: empty dim name list");
    return dt_mesh_slice_dims(m, n, dims, out);
}

bool dt_mesh_equal(const dt_mesh *a, const dt_mesh *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL || a->ndim != b->ndim || a->size != b->size)
        return false;
    return memcmp(a->shape, b->shape, sizeof(int) * (size_t)a->ndim) == 0 &&
           memcmp(a->ranks, b->ranks, sizeof(int) * (size_t)a->size) == 0;
}

#define APPEND(...)                                                                                \
    do {                                                                                           \
        int w_ = snprintf(buf + (p < (int)len ? p : (int)len),                                     \
                          (size_t)(p < (int)len ? (int)len - p : 0), __VA_ARGS__);                 \
        p += w_ > 0 ? w_ : 0;                                                                      \
    } while (0)

int dt_mesh_format(const dt_mesh *m, char *buf, size_t len)
{
    int p = 0;
    char tmp[1];
    if (buf == NULL || len == 0) {
        buf = tmp;
        len = 1;
    }
    buf[0] = '\0';
    if (m == NULL) {
        APPEND("mesh (null)");
        return p;
    }
    char shape[64];
    APPEND("mesh %s", dt__mesh_shape_str(m->ndim, m->shape, shape, sizeof(shape)));
    bool named = false;
    for (int d = 0; d < m->ndim; d++)
        named = named || m->names[d][0];
    if (named) {
        APPEND(" (");
        for (int d = 0; d < m->ndim; d++)
            APPEND("%s%s", d ? ", " : "", m->names[d][0] ? m->names[d] : "-");
        APPEND(")");
    }
    APPEND("\n");
    /* torch-style nested brackets, one line per innermost row */
    int inner = m->shape[m->ndim - 1];
    for (int r = 0; r < m->size; r++) {
        int c[DT_MESH_MAX_DIMS];
        dt_mesh_rank_to_coord(m, r, c);
        int opens = 0;
        for (int d = m->ndim - 1; d >= 0 && c[d] == 0; d--)
            opens++;
        if (r % inner == 0) {
            APPEND("%*s", m->ndim - opens, "");
            for (int i = 0; i < opens; i++)
                APPEND("[");
        }
        APPEND("%d", m->ranks[r]);
        int closes = 0;
        for (int d = m->ndim - 1; d >= 0 && c[d] == m->shape[d] - 1; d--)
            closes++;
        for (int i = 0; i < closes; i++)
            APPEND("]");
        if (r == m->size - 1)
            APPEND("\n");
        else if (closes > 0)
            APPEND(",\n");
        else
            APPEND(", ");
    }
    return p;
}

void dt_mesh_print(const dt_mesh *m, FILE *f)
{
    char buf[4096];
    dt_mesh_format(m, buf, sizeof(buf));
    fputs(buf, f);
}
