/* CPU feature detection (cpuid + xgetbv) and the feature -> OpenBLAS core map. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kernels/cpu/blas.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

typedef struct cpu_flags {
    bool sse42, avx, avx2, fma, avx512f, avx512bw, avx512vl, avx512dq, avx512cd, os_avx, os_avx512;
} cpu_flags;

static unsigned long long xgetbv0(void)
{
    unsigned int lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static cpu_flags cpu_detect(void)
{
    cpu_flags f;
    memset(&f, 0, sizeof(f));
    unsigned int a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return f;
    f.sse42 = (c >> 20) & 1;
    f.fma = (c >> 12) & 1;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    if (osxsave) {
        /* the OS must save the wide registers, else the instructions fault */
        unsigned long long xcr0 = xgetbv0();
        f.os_avx = (xcr0 & 0x6) == 0x6;
        f.os_avx512 = (xcr0 & 0xe6) == 0xe6;
    }
    f.avx = avx && f.os_avx;
    f.fma = f.fma && f.os_avx;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = ((b >> 5) & 1) && f.os_avx;
        f.avx512f = ((b >> 16) & 1) && f.os_avx512;
        f.avx512dq = ((b >> 17) & 1) && f.os_avx512;
        f.avx512cd = ((b >> 28) & 1) && f.os_avx512;
        f.avx512bw = ((b >> 30) & 1) && f.os_avx512;
        f.avx512vl = ((b >> 31) & 1) && f.os_avx512;
    }
    return f;
}

void dt__cpu_features_str(char *buf, size_t len)
{
    cpu_flags f = cpu_detect();
    struct {
        bool on;
        const char *name;
    } list[] = {
        {f.sse42, "sse4.2"},      {f.avx, "avx"},           {f.avx2, "avx2"},
        {f.fma, "fma"},           {f.avx512f, "avx512f"},   {f.avx512bw, "avx512bw"},
        {f.avx512vl, "avx512vl"}, {f.avx512dq, "avx512dq"}, {f.avx512cd, "avx512cd"},
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
        if (!list[i].on)
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", used ? " " : "", list[i].name);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
}

int dt__cpu_level(void)
{
    cpu_flags f = cpu_detect();
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512cd)
        return 4;
    if (f.avx2 && f.fma)
        return 3;
    if (f.avx)
        return 2;
    if (f.sse42)
        return 1;
    return 0;
}
#else
void dt__cpu_features_str(char *buf, size_t len)
{
    snprintf(buf, len, "%s", "");
}

int dt__cpu_level(void)
{
    return -1; /* not x86: no selection */
}
#endif

static const char *const level_core[] = {"Prescott", "Nehalem", "Sandybridge", "Haswell",
                                         "SkylakeX"};

const char *dt__blas_core_for_level(int level)
{
    if (level < 0 || level > 4)
        return NULL;
    return level_core[level];
}

int dt__blas_core_level(const char *corename)
{
    /* OpenBLAS 0.3.x x86_64 DYNAMIC_ARCH core names, by the widest ISA they use */
    static const struct {
        const char *name;
        int level;
    } map[] = {
        {"prescott", 0},   {"katmai", 0},         {"coppermine", 0},
        {"northwood", 0},  {"banias", 0},         {"atom", 0},
        {"athlon", 0},     {"opteron", 0},        {"opteron_sse3", 0},
        {"core2", 0},      {"penryn", 1},         {"dunnington", 1},
        {"nehalem", 1},    {"barcelona", 1},      {"nano", 1},
        {"bobcat", 1},     {"sandybridge", 2},    {"bulldozer", 2},
        {"piledriver", 2}, {"steamroller", 2},    {"haswell", 3},
        {"zen", 3},        {"excavator", 3},      {"skylakex", 4},
        {"cooperlake", 4}, {"sapphirerapids", 4},
    };
    if (corename == NULL)
        return -1;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(corename, map[i].name) == 0)
            return map[i].level;
    return -1;
}

int dt__blas_candidates(const char **names, int max)
{
    int n = 0;
    for (int l = dt__cpu_level(); l >= 0 && n < max; l--)
        names[n++] = level_core[l];
    return n;
}
