/* Placements as values: constructors, equality, normalisation, text form. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "placement/placement_impl.h"

dt_placement dt_shard(int dim)
{
    dt_placement p = {DT_PLACEMENT_SHARD, dim, DT_REDUCE_OP_SUM, 0, 0};
    return p;
}

dt_placement dt_strided_shard(int dim)
{
    dt_placement p = {DT_PLACEMENT_SHARD, dim, DT_REDUCE_OP_SUM, 1, 0};
    return p;
}

dt_placement dt_strided_shard_split(int dim, int split_factor)
{
    dt_placement p = {DT_PLACEMENT_SHARD, dim, DT_REDUCE_OP_SUM, 1,
                      split_factor > 1 ? split_factor : 0};
    return p;
}

dt_placement dt_replicate(void)
{
    dt_placement p = {DT_PLACEMENT_REPLICATE, 0, DT_REDUCE_OP_SUM, 0, 0};
    return p;
}

dt_placement dt_partial(dt_reduce_op op)
{
    dt_placement p = {DT_PLACEMENT_PARTIAL, 0, op, 0, 0};
    return p;
}

bool dt_placement_is_shard(dt_placement p, int dim)
{
    return p.kind == DT_PLACEMENT_SHARD && (dim < 0 || p.dim == dim);
}

bool dt_placement_equal(dt_placement a, dt_placement b)
{
    if (a.kind != b.kind)
        return false;
    if (a.kind == DT_PLACEMENT_SHARD)
        return a.dim == b.dim && !a.strided == !b.strided &&
               (a.split_factor > 1 ? a.split_factor : 0) ==
                   (b.split_factor > 1 ? b.split_factor : 0);
    if (a.kind == DT_PLACEMENT_PARTIAL)
        return a.op == b.op;
    return true;
}

bool dt__placements_unstride(int n, const dt_placement *pl, dt_placement *out)
{
    bool any = false;
    for (int k = 0; k < n; k++) {
        any = any || pl[k].strided;
        out[k] = pl[k].strided ? dt_replicate() : pl[k];
    }
    return any;
}

static bool op_supported(dt_reduce_op op)
{
    return op == DT_REDUCE_OP_SUM || op == DT_REDUCE_OP_AVG || op == DT_REDUCE_OP_MAX ||
           op == DT_REDUCE_OP_MIN;
}

dt_status dt_placement_normalize(dt_placement p, int ndim, dt_placement *out)
{
    DT_ARG_NOT_NULL(out);
    char t[32];
    switch (p.kind) {
    case DT_PLACEMENT_REPLICATE:
        *out = dt_replicate();
        return DT_OK;
    case DT_PLACEMENT_PARTIAL:
        if (!op_supported(p.op))
            return DT_ERR(
                DT_ERR_INVALID_ARG,
                "dt_placement_normalize: Partial(%s) is not supported (sum, avg, max, min)",
                dt_reduce_op_name(p.op));
        *out = dt_partial(p.op);
        return DT_OK;
    case DT_PLACEMENT_SHARD:
        if (p.dim < -ndim || p.dim >= ndim) {
            dt_placement_format(p, t, sizeof(t));
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_placement_normalize: %s: shard dim %d is out of range for a tensor "
                          "of %d dims",
                          t, p.dim, ndim);
        }
        if (p.split_factor < 0 || p.split_factor > DT_PLACEMENT_MAX_SPLIT) {
            dt_placement_format(p, t, sizeof(t));
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_placement_normalize: %s: split factor %d is outside 0..%d", t,
                          p.split_factor, DT_PLACEMENT_MAX_SPLIT);
        }
        int d = p.dim < 0 ? p.dim + ndim : p.dim;
        *out = p.split_factor > 1 ? dt_strided_shard_split(d, p.split_factor)
               : p.strided        ? dt_strided_shard(d)
                                  : dt_shard(d);
        return DT_OK;
    }
    return DT_ERR(DT_ERR_INVALID_ARG, "dt_placement_normalize: unknown placement kind %d",
                  (int)p.kind);
}

int dt_placement_format(dt_placement p, char *buf, size_t len)
{
    switch (p.kind) {
    case DT_PLACEMENT_REPLICATE:
        return snprintf(buf, len, "R");
    case DT_PLACEMENT_SHARD:
        if (p.split_factor > 1)
            return snprintf(buf, len, "_S(%d,sf=%d)", p.dim, p.split_factor);
        return snprintf(buf, len, "%sS(%d)", p.strided ? "_" : "", p.dim);
    case DT_PLACEMENT_PARTIAL:
        return snprintf(buf, len, "P(%s)", dt_reduce_op_name(p.op));
    }
    return snprintf(buf, len, "?");
}

int dt_placements_format(int n, const dt_placement *pl, const char *sep, char *buf, size_t len)
{
    int p = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t room = (size_t)p < len ? len - (size_t)p : 0;
        if (i > 0 && sep != NULL)
            p += snprintf(room ? buf + p : NULL, room, "%s", sep);
        room = (size_t)p < len ? len - (size_t)p : 0;
        p += dt_placement_format(pl[i], room ? buf + p : NULL, room);
    }
    return p;
}

/* The argument of a shard token: "d", or for a strided one "d,sf=k" (k >= 2). */
static bool parse_shard_arg(const char *arg, size_t argl, bool strided, dt_placement *out)
{
    char num[32], *end = NULL;
    if (arg == NULL || argl == 0 || argl >= sizeof(num))
        return false;
    memcpy(num, arg, argl);
    num[argl] = '\0';
    long d = strtol(num, &end, 10), sf = 0;
    if (end == num || d < -DT_MAX_DIMS || d >= DT_MAX_DIMS)
        return false;
    if (*end == ',' && strided) {
        while (*++end == ' ')
            ;
        if (strncmp(end, "sf=", 3) != 0)
            return false;
        const char *k = end + 3;
        sf = strtol(k, &end, 10);
        if (end == k || sf < 2 || sf > DT_PLACEMENT_MAX_SPLIT)
            return false;
    }
    if (*end != '\0')
        return false;
    *out = !strided ? dt_shard((int)d)
           : sf > 1 ? dt_strided_shard_split((int)d, (int)sf)
                    : dt_strided_shard((int)d);
    return true;
}

/* Parse one token [s, s+l) (already trimmed); false when it is not a placement. */
static bool parse_token(const char *s, size_t l, dt_placement *out)
{
    static const struct {
        const char *name;
        dt_placement_kind kind;
        bool strided;
    } heads[] = {
        {"S", DT_PLACEMENT_SHARD, false},
        {"Shard", DT_PLACEMENT_SHARD, false},
        {"StridedShard", DT_PLACEMENT_SHARD, true},
        {"R", DT_PLACEMENT_REPLICATE, false},
        {"Replicate", DT_PLACEMENT_REPLICATE, false},
        {"P", DT_PLACEMENT_PARTIAL, false},
        {"Partial", DT_PLACEMENT_PARTIAL, false},
    };
    bool underscore = l > 2 && s[0] == '_' && s[1] == 'S' && s[2] == '('; /* "_S(d)" */
    if (underscore)
        s++, l--;
    size_t h = 0;
    while (h < l && isalpha((unsigned char)s[h]))
        h++;
    const char *arg = NULL;
    size_t argl = 0;
    if (h < l) { /* "(arg)" must close the token */
        if (s[h] != '(' || s[l - 1] != ')')
            return false;
        arg = s + h + 1;
        argl = l - h - 2;
    }
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        if (strlen(heads[i].name) != h || strncmp(heads[i].name, s, h) != 0)
            continue;
        switch (heads[i].kind) {
        case DT_PLACEMENT_SHARD:
            return parse_shard_arg(arg, argl, heads[i].strided || underscore, out);
        case DT_PLACEMENT_REPLICATE:
            if (arg != NULL && argl != 0)
                return false;
            *out = dt_replicate();
            return true;
        case DT_PLACEMENT_PARTIAL:
            if (arg == NULL || argl == 0) {
                *out = dt_partial(DT_REDUCE_OP_SUM);
                return true;
            }
            for (int op = 0; op < DT_REDUCE_OP_COUNT; op++) {
                const char *nm = dt_reduce_op_name((dt_reduce_op)op);
                if (strlen(nm) == argl && strncmp(nm, arg, argl) == 0 &&
                    op_supported((dt_reduce_op)op)) {
                    *out = dt_partial((dt_reduce_op)op);
                    return true;
                }
            }
            return false;
        }
    }
    return false;
}

dt_status dt_placement_parse(const char *text, dt_placement *out)
{
    DT_ARG_NOT_NULL(text);
    DT_ARG_NOT_NULL(out);
    dt_placement p[2];
    int n = 0;
    DT_CHECK(dt_placements_parse(text, 2, p, &n));
    if (n != 1)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_placement_parse: \"%s\" holds %d placements, not 1",
                      text, n);
    *out = p[0];
    return DT_OK;
}

static bool is_sep(char c)
{
    return c == '\0' || c == ',' || isspace((unsigned char)c);
}

/* Length of the token starting at s: a head (StridedShard|Shard|Replicate|Partial|_S|S|R|P),
 * an optional "(...)", and anything else up to a separator or the next head
 * (so "S(0)R" splits into "S(0)" and "R" while "S0" stays one bad token). */
static size_t token_len(const char *s)
{
    static const char *words[] = {"StridedShard", "Shard", "Replicate", "Partial", "_S"};
    size_t l = 0;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]) && l == 0; i++)
        if (strncmp(s, words[i], strlen(words[i])) == 0)
            l = strlen(words[i]);
    if (l == 0 && (s[0] == 'S' || s[0] == 'R' || s[0] == 'P'))
        l = 1;
    if (s[l] == '(') {
        const char *close = strchr(s + l, ')');
        l = close != NULL ? (size_t)(close - s) + 1 : strlen(s);
    }
    if (l > 0 && (is_sep(s[l]) || s[l] == 'S' || s[l] == 'R' || s[l] == 'P' || s[l] == '_'))
        return l;
    while (!is_sep(s[l])) /* not a placement: the whole run is the bad token */
        l++;
    return l;
}

dt_status dt_placements_parse(const char *text, int max, dt_placement *out, int *n)
{
    DT_ARG_NOT_NULL(text);
    DT_ARG_NOT_NULL(out);
    DT_ARG_NOT_NULL(n);
    int count = 0;
    const char *s = text;
    for (;;) {
        while (*s == ',' || isspace((unsigned char)*s))
            s++;
        if (*s == '\0')
            break;
        size_t l = token_len(s);
        dt_placement p;
        if (!parse_token(s, l, &p))
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_placements_parse: item %d '%.*s' of \"%s\" is not a placement "
                          "(expected S(dim), _S(dim), _S(dim,sf=k), R or P(sum|avg|max|min))",
                          count + 1, (int)l, s, text);
        if (count == max)
            return DT_ERR(DT_ERR_INVALID_ARG,
                          "dt_placements_parse: \"%s\" has more than %d placements", text, max);
        out[count++] = p;
        s += l;
    }
    if (count == 0)
        return DT_ERR(DT_ERR_INVALID_ARG, "dt_placements_parse: \"%s\" holds no placement", text);
    *n = count;
    return DT_OK;
}
