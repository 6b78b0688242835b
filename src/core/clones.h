/*
 * DT_CPU_CLONES: hot loops compiled for AVX-512, AVX2+FMA and baseline x86-64,
 * the best one picked at load time (gcc function multi-versioning), so one
 * binary runs everywhere and still uses the wide vectors this CPU has.
 */
#ifndef DT_CORE_CLONES_H
#define DT_CORE_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define DT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DT_CPU_CLONES
#endif

#endif
