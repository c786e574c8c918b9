/* The CPU path's exp, sigmoid and tanh on single values, in f64 and f32:
 * spk_cpu_{exp,sigmoid,tanh}_{f64,f32}. The definition (and why each lane of
 * the reference's vector form gives these bits) is in cpu_math_impl.h. */
#ifndef SPK_LSTM_CPU_MATH_H
#define SPK_LSTM_CPU_MATH_H

#include <stdint.h>
#include <string.h>

static inline uint64_t spk_cpu_bits_f64(double v)
{
    uint64_t i;
    memcpy(&i, &v, sizeof i);
    return i;
}

static inline double spk_cpu_from_bits_f64(uint64_t i)
{
    double v;
    memcpy(&v, &i, sizeof v);
    return v;
}

static inline uint32_t spk_cpu_bits_f32(float v)
{
    uint32_t i;
    memcpy(&i, &v, sizeof i);
    return i;
}

static inline float spk_cpu_from_bits_f32(uint32_t i)
{
    float v;
    memcpy(&v, &i, sizeof v);
    return v;
}

#define MATH_DOUBLE 1
#define MATH_REAL double
#define MATH_V double
#define MATH_I uint64_t
#define MATH_FN(name) spk_cpu_##name##f64
#define MATH_AS_I(v) spk_cpu_bits_f64(v)
#define MATH_AS_V(i) spk_cpu_from_bits_f64(i)
#define MATH_MASK(cmp) ((uint64_t)0 - (uint64_t)(cmp))
#define MATH_SPLAT(c) ((double)(c))
#define MATH_FMA(a, b, c) __builtin_fma(a, b, c)
#include "lstm/cpu_math_impl.h"

#define MATH_DOUBLE 0
#define MATH_REAL float
#define MATH_V float
#define MATH_I uint32_t
#define MATH_FN(name) spk_cpu_##name##f32
#define MATH_AS_I(v) spk_cpu_bits_f32(v)
#define MATH_AS_V(i) spk_cpu_from_bits_f32(i)
#define MATH_MASK(cmp) ((uint32_t)0 - (uint32_t)(cmp))
#define MATH_SPLAT(c) ((float)(c))
#define MATH_FMA(a, b, c) __builtin_fmaf(a, b, c)
#include "lstm/cpu_math_impl.h"

#endif
