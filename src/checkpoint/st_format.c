/*
 * safetensors format facts shared by the reader and the writer: the dtype
 * table, UTF-8 validation, the reference writer's tensor order.
 */
#include <stdlib.h>
#include <string.h>

#include "checkpoint/st_impl.h"

/* safetensors data is little-endian and we copy it as raw bytes. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors I/O assumes a little-endian host");

/* Every dtype the reference format names, with its element size and its rank
 * in the reference writer's sort (the Rust enum's declaration order). */
static const dt_st_dtype st_dtypes[] = {
    {"BOOL", 1, 0, DT_DTYPE_COUNT},    {"U8", 1, 1, DT_DTYPE_U8},
    {"I8", 1, 2, DT_DTYPE_COUNT},      {"F8_E5M2", 1, 3, DT_DTYPE_COUNT},
    {"F8_E4M3", 1, 4, DT_DTYPE_COUNT}, {"F8_E8M0", 1, 4, DT_DTYPE_COUNT},
    {"I16", 2, 5, DT_DTYPE_COUNT},     {"U16", 2, 6, DT_DTYPE_U16},
    {"F16", 2, 7, DT_DTYPE_F16},       {"BF16", 2, 8, DT_DTYPE_BF16},
    {"I32", 4, 9, DT_DTYPE_I32},       {"U32", 4, 10, DT_DTYPE_COUNT},
    {"F32", 4, 11, DT_DTYPE_F32},      {"F64", 8, 12, DT_DTYPE_F64},
    {"I64", 8, 13, DT_DTYPE_I64},      {"U64", 8, 14, DT_DTYPE_COUNT},
    {"C64", 8, 15, DT_DTYPE_COUNT},
};

#define ST_NDTYPES ((int)(sizeof(st_dtypes) / sizeof(st_dtypes[0])))

const dt_st_dtype *dt__st_dtype_by_name(const char *name)
{
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0)
            return &st_dtypes[i];
    return NULL;
}

const dt_st_dtype *dt__st_dtype_of(dt_dtype dtype)
{
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == dtype && dtype != DT_DTYPE_COUNT)
            return &st_dtypes[i];
    return NULL;
}

bool dt__st_utf8_valid(const unsigned char *s, size_t len, size_t *bad_at)
{
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t need;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            need = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            need = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            need = 3, cp = c & 0x07, min = 0x10000;
        } else {
            goto bad;
        }
        if (len - i <= need)
            goto bad;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                goto bad;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((cp < min) || (cp > 0x10FFFF) || ((cp >= 0xD800) && (cp <= 0xDFFF)))
            goto bad;
        i += need + 1;
    }
    return true;
bad:
    if (bad_at != NULL)
        *bad_at = i;
    return false;
}

/* qsort has no context argument: the entries being sorted live here. */
static _Thread_local const dt_safetensors_entry *order_entries;

static int order_cmp(const void *a, const void *b)
{
    const dt_safetensors_entry *ea = &order_entries[*(const int *)a];
    const dt_safetensors_entry *eb = &order_entries[*(const int *)b];
    int ra = dt__st_dtype_of(ea->dtype)->rank, rb = dt__st_dtype_of(eb->dtype)->rank;
    if (ra != rb)
        return rb - ra; /* larger alignment first */
    return strcmp(ea->name, eb->name);
}

void dt__st_write_order(int n, const dt_safetensors_entry *entries, int *order)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    order_entries = entries;
    qsort(order, (size_t)n, sizeof(*order), order_cmp);
    order_entries = NULL;
}
