/* dtypes: sizes, names, exact f32 <-> bf16/f16 conversion, element load/store. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/bf16.h"
#include "core/error.h"
#include "core/tensor_impl.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[DT_DTYPE_COUNT] = {
    [DT_DTYPE_F32] = {"f32", 4},   [DT_DTYPE_F64] = {"f64", 8}, [DT_DTYPE_F16] = {"f16", 2},
    [DT_DTYPE_BF16] = {"bf16", 2}, [DT_DTYPE_I32] = {"i32", 4}, [DT_DTYPE_I64] = {"i64", 8},
    [DT_DTYPE_U16] = {"u16", 2},   [DT_DTYPE_U8] = {"u8", 1},
};

bool dt__dtype_valid(dt_dtype dtype)
{
    return (int)dtype >= 0 && (int)dtype < DT_DTYPE_COUNT;
}

bool dt__dtype_is_float(dt_dtype dtype)
{
    return dtype == DT_DTYPE_F32 || dtype == DT_DTYPE_F64 || dtype == DT_DTYPE_F16 ||
           dtype == DT_DTYPE_BF16;
}

size_t dt_dtype_size(dt_dtype dtype)
{
    return dt__dtype_valid(dtype) ? dtype_table[dtype].size : 0;
}

const char *dt_dtype_name(dt_dtype dtype)
{
    return dt__dtype_valid(dtype) ? dtype_table[dtype].name : "invalid";
}

dt_status dt__check_dtype(const char *fn, dt_dtype dtype)
{
    if (!dt__dtype_valid(dtype))
        return DT_ERR(DT_ERR_INVALID_ARG, "%s: unknown dtype value %d", fn, (int)dtype);
    return DT_OK;
}

dt_status dt_dtype_parse(const char *name, dt_dtype *out)
{
    static const struct {
        const char *alias;
        dt_dtype dtype;
    } aliases[] = {
        {"f32", DT_DTYPE_F32},     {"float32", DT_DTYPE_F32},   {"float", DT_DTYPE_F32},
        {"fp32", DT_DTYPE_F32},    {"f64", DT_DTYPE_F64},       {"float64", DT_DTYPE_F64},
        {"double", DT_DTYPE_F64},  {"fp64", DT_DTYPE_F64},      {"f16", DT_DTYPE_F16},
        {"float16", DT_DTYPE_F16}, {"half", DT_DTYPE_F16},      {"fp16", DT_DTYPE_F16},
        {"bf16", DT_DTYPE_BF16},   {"bfloat16", DT_DTYPE_BF16}, {"i32", DT_DTYPE_I32},
        {"int32", DT_DTYPE_I32},   {"int", DT_DTYPE_I32},       {"i64", DT_DTYPE_I64},
        {"int64", DT_DTYPE_I64},   {"long", DT_DTYPE_I64},      {"u16", DT_DTYPE_U16},
        {"uint16", DT_DTYPE_U16},  {"u8", DT_DTYPE_U8},         {"uint8", DT_DTYPE_U8},
    };
    DT_ARG_NOT_NULL(name);
    DT_ARG_NOT_NULL(out);
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].dtype;
            return DT_OK;
        }
    }
    return DT_ERR(DT_ERR_INVALID_ARG, "dt_dtype_parse: unknown dtype name '%s'", name);
}

const char *dt_reduce_op_name(dt_reduce_op op)
{
    static const char *const names[DT_REDUCE_OP_COUNT] = {"sum", "avg", "max", "min", "prod"};
    return ((int)op >= 0 && (int)op < DT_REDUCE_OP_COUNT) ? names[op] : "invalid";
}

/* ------------------------------------------------------------ half formats */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

uint16_t dt_f32_to_bf16(float x)
{
    return dt__bf16_from_f32(x);
}

float dt_bf16_to_f32(uint16_t x)
{
    return dt__bf16_to_f32(x);
}

uint16_t dt_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) { /* NaN */
        uint16_t m = (uint16_t)((a >> 13) & 0x3ffu);
        return (uint16_t)(sign | 0x7c00u | (m ? m : 0x200u));
    }
    if (a >= 0x477ff000u) /* >= 65520 rounds to inf (and inf itself) */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: rebias the exponent, round the 13 dropped bits */
        a += 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((a - 0x38000000u) >> 13));
    }
    if (a <= 0x33000000u) /* <= 2^-25: zero (2^-25 itself is a tie to even 0) */
        return sign;
    /* subnormal half: value / 2^-24 = mant * 2^(e - 126), shifted right with RNE */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

float dt_f16_to_f32(uint16_t x)
{
    uint32_t sign = (uint32_t)(x & 0x8000u) << 16;
    uint32_t e = (x >> 10) & 0x1fu;
    uint32_t m = x & 0x3ffu;
    if (e == 0x1f)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return sign ? -v : v;
    }
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* ------------------------------------------------------------ element access */

double dt__load_elem(const void *p, dt_dtype dtype)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        return *(const float *)p;
    case DT_DTYPE_F64:
        return *(const double *)p;
    case DT_DTYPE_F16:
        return dt_f16_to_f32(*(const uint16_t *)p);
    case DT_DTYPE_BF16:
        return dt_bf16_to_f32(*(const uint16_t *)p);
    case DT_DTYPE_I32:
        return *(const int32_t *)p;
    case DT_DTYPE_I64:
        return (double)*(const int64_t *)p;
    case DT_DTYPE_U16:
        return *(const uint16_t *)p;
    case DT_DTYPE_U8:
        return *(const uint8_t *)p;
    default:
        return NAN;
    }
}

/* Saturating double -> integer conversion (NaN -> 0): C leaves the rest undefined. */
static int64_t sat_i64(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return v >= 0x1p63 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

/*
 * double -> float rounding to odd: an inexact result gets its last mantissa
 * bit set. Rounding that float to f16/bf16 (13+ bits shorter) then gives the
 * correctly rounded result of v, with no double-rounding error.
 */
static float f64_to_f32_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || !isfinite(f) || isnan(v))
        return f;
    uint32_t u = f32_bits(f);
    if (fabs((double)f) > fabs(v))
        u -= 1; /* step toward zero: truncation */
    return bits_f32(u | 1u);
}

void dt__store_elem(void *p, dt_dtype dtype, double v)
{
    switch (dtype) {
    case DT_DTYPE_F32:
        *(float *)p = (float)v;
        break;
    case DT_DTYPE_F64:
        *(double *)p = v;
        break;
    case DT_DTYPE_F16:
        *(uint16_t *)p = dt_f32_to_f16(f64_to_f32_odd(v));
        break;
    case DT_DTYPE_BF16:
        *(uint16_t *)p = dt_f32_to_bf16(f64_to_f32_odd(v));
        break;
    case DT_DTYPE_I32:
        *(int32_t *)p = (int32_t)sat_i64(v, INT32_MIN, INT32_MAX);
        break;
    case DT_DTYPE_I64:
        *(int64_t *)p = sat_i64(v, -0x1p63, 0x1p63);
        break;
    case DT_DTYPE_U16:
        *(uint16_t *)p = (uint16_t)sat_i64(v, 0, UINT16_MAX);
        break;
    case DT_DTYPE_U8:
        *(uint8_t *)p = (uint8_t)sat_i64(v, 0, UINT8_MAX);
        break;
    default:
        break;
    }
}

bool dt__dtype_is_int(dt_dtype dtype)
{
    return dtype == DT_DTYPE_I32 || dtype == DT_DTYPE_I64 || dtype == DT_DTYPE_U16 ||
           dtype == DT_DTYPE_U8;
}

int64_t dt__load_elem_int(const void *p, dt_dtype dtype)
{
    switch (dtype) {
    case DT_DTYPE_I32:
        return *(const int32_t *)p;
    case DT_DTYPE_I64:
        return *(const int64_t *)p;
    case DT_DTYPE_U16:
        return *(const uint16_t *)p;
    case DT_DTYPE_U8:
        return *(const uint8_t *)p;
    default:
        return sat_i64(dt__load_elem(p, dtype), -0x1p63, 0x1p63);
    }
}

void dt__store_elem_int(void *p, dt_dtype dtype, int64_t v)
{
    switch (dtype) {
    case DT_DTYPE_I32:
        *(int32_t *)p = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v);
        break;
    case DT_DTYPE_I64:
        *(int64_t *)p = v;
        break;
    case DT_DTYPE_U16:
        *(uint16_t *)p = (uint16_t)(v < 0 ? 0 : v > UINT16_MAX ? UINT16_MAX : v);
        break;
    case DT_DTYPE_U8:
        *(uint8_t *)p = (uint8_t)(v < 0 ? 0 : v > UINT8_MAX ? UINT8_MAX : v);
        break;
    default:
        dt__store_elem(p, dtype, (double)v);
        break;
    }
}
