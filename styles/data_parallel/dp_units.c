/*
 * ZeRO-3 units: the modules whose parameters are gathered together. Given as
 * comma-separated FQN patterns ('*' matches one path segment), or by default
 * every child of the root that owns parameters itself, and every child of a
 * child that owns none (a container such as the GPT's "layers").
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "styles/data_parallel/dp_impl.h"

/* Does the FQN @p f match the pattern @p pat (segments; '*' = any one)? */
static bool fqn_match(const char *f, const char *pat, size_t plen)
{
    const char *pe = pat + plen;
    while (1) {
        const char *fd = strchr(f, '.'), *pd = memchr(pat, '.', (size_t)(pe - pat));
        size_t fl = fd != NULL ? (size_t)(fd - f) : strlen(f);
        size_t pl = pd != NULL ? (size_t)(pd - pat) : (size_t)(pe - pat);
        if (!(pl == 1 && pat[0] == '*') && (pl != fl || strncmp(f, pat, fl) != 0))
            return false;
        if ((fd == NULL) != (pd == NULL))
            return false;
        if (fd == NULL)
            return true;
        f = fd + 1, pat = pd + 1;
    }
}

typedef struct units_ctx {
    const char *pat;
    size_t plen;
    dt_module **mods;
    int n, cap;
} units_ctx;

static dt_status push(units_ctx *c, dt_module *m)
{
    for (int i = 0; i < c->n; i++)
        if (c->mods[i] == m)
            return DT_OK;
    if (c->n == c->cap) {
        int cap = c->cap > 0 ? c->cap * 2 : 8;
        dt_module **v = realloc(c->mods, (size_t)cap * sizeof(*v));
        if (v == NULL)
            return DT_ERR(DT_ERR_NO_MEMORY, "dt_fully_shard: no memory for %d units", cap);
        c->mods = v, c->cap = cap;
    }
    c->mods[c->n++] = m;
    return DT_OK;
}

static dt_status visit(const char *fqn, dt_module *m, void *user)
{
    units_ctx *c = user;
    if (fqn[0] != '\0' && fqn_match(fqn, c->pat, c->plen))
        return push(c, m);
    return DT_OK;
}

static dt_status default_units(dt_module *root, units_ctx *c)
{
    for (int i = 0; i < dt_module_num_children(root); i++) {
        dt_module *ch = dt_module_child_at(root, i);
        if (dt_module_num_params(ch) > 0) {
            DT_CHECK(push(c, ch));
            continue;
        }
        for (int j = 0; j < dt_module_num_children(ch); j++)
            DT_CHECK(push(c, dt_module_child_at(ch, j)));
    }
    return DT_OK;
}

dt_status dt__dp_find_units(dt_module *root, const char *units, dt_module ***mods, int *n)
{
    units_ctx c = {0};
    dt_status st = DT_OK;
    if (units == NULL) {
        st = default_units(root, &c);
    } else {
        for (const char *p = units; st == DT_OK && *p != '\0';) {
            const char *e = strchr(p, ',');
            size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
            int before = c.n;
            c.pat = p, c.plen = len;
            st = len == 0 ? DT_ERR(DT_ERR_INVALID_ARG,
                                   "dt_fully_shard: empty unit pattern in "
                                   "\"%s\"",
                                   units)
                          : dt_module_foreach(root, visit, &c);
            if (st == DT_OK && c.n == before)
                st = DT_ERR(DT_ERR_INVALID_ARG,
                            "dt_fully_shard: unit pattern '%.*s' matches no module", (int)len, p);
            p += len + (e != NULL ? 1 : 0);
        }
    }
    if (st != DT_OK) {
        free(c.mods);
        return st;
    }
    *mods = c.mods;
    *n = c.n;
    return DT_OK;
}
