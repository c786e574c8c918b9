/* The CPU path's exp, sigmoid and tanh, written once for a scalar or a vector
 * of any width: included by cpu_math.h (scalars) and by reference_impl.h (one
 * vector type per vector unit) with
 *   MATH_DOUBLE 1 for double, 0 for float
 *   MATH_REAL   float or double (the element)
 *   MATH_V      the value type (MATH_REAL or a vector of it)
 *   MATH_I      the unsigned integer type of the same width (uint32_t/uint64_t or a vector)
 *   MATH_FN(n)  the name of function n in this instantiation
 *   MATH_AS_I(v), MATH_AS_V(i)  bit casts; MATH_MASK(cmp)  all ones where cmp holds;
 *   MATH_SPLAT(c)  the constant c in every lane; MATH_FMA(a, b, c)  a·b + c rounded once
 *                  (lane by lane)
 * (the parameters are undefined at the end). Each lane does the same
 * correctly rounded operations in the same order,
 * so a vector's lanes give exactly the scalar functions' bits (the CPU
 * reference's promise across vector units rests on this).
 *
 * Every a·b + c below is one fused multiply-add (MATH_FMA).
 * exp(x): x clamped to [EXP_LO, EXP_HI] (NaN passes through), n = x·log2(e)
 * rounded to nearest by adding 1.5·2^MANT, r = (x − n·ln2_hi) − n·ln2_lo,
 * p = r + r²·(1/2! + r·(1/3! + … r/DEG!)) (Taylor by Horner; the first term
 * left out is below half an ulp on |r| ≤ ln2/2), exp = (1 + p)·2^n with 2^n
 * built in the exponent bits. The clamp keeps 2^n a normal number: beyond it
 * the LSTM's gates are 0 or 1 in the precision anyway.
 * expm1(y), y in [0, 2·TANH_LIMIT]: the same reduction, 2^n·p + (2^n − 1).
 * sigmoid(v) = 1 / (1 + exp(−v)).
 * tanh(v) = sign(v) · e / (e + 2), e = expm1(2·min(|v|, TANH_LIMIT)); at
 * the limit the quotient rounds to 1.
 * Against the true values over [−40, 40] and near 0 (tests/c/test_lstm_reference.c,
 * cpu_math_against_true_values): f64 exp within 0.99 ulp, sigmoid 2.36, tanh
 * 2.42 (glibc's: 0.51, 2.36, 2.13); f32 exp 0.97, sigmoid 2.47, tanh 2.17. */

#if MATH_DOUBLE
#define EXP_LO (-708.0)
#define EXP_HI 709.0
#define TANH_LIMIT 20.0
#define LOG2E 1.4426950408889634
#define ROUNDER 6755399441055744.0 /* 1.5 * 2^52 */
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10
#define MANT 52
#define ONE_BITS 0x3FF0000000000000ull /* 2^0: the exponent bias in place */
#else
#define EXP_LO (-87.0f)
#define EXP_HI 88.0f
#define TANH_LIMIT 10.0f
#define LOG2E 1.44269504f
#define ROUNDER 12582912.0f /* 1.5 * 2^23 */
#define LN2_HI 0.693145751953125f
#define LN2_LO 1.428606765330187045e-06f
#define MANT 23
#define ONE_BITS 0x3F800000u
#endif

#define R1 ((MATH_REAL)1)
#define SELECT(mask, a, b) MATH_AS_V(((mask) & MATH_AS_I(a)) | (~(mask) & MATH_AS_I(b)))

/* e^r − 1 for |r| <= ln2/2 (Taylor to r^13 in f64, r^8 in f32). */
static inline MATH_V MATH_FN(expm1_reduced_)(MATH_V r)
{
#if MATH_DOUBLE
    MATH_V q = MATH_FMA(r, MATH_SPLAT(R1 / 6227020800), MATH_SPLAT(R1 / 479001600)); /* 1/13!, 1/12! */
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 39916800));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 3628800));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 362880));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 40320));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 5040));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 720));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 120));
#else
    MATH_V q = MATH_FMA(r, MATH_SPLAT(R1 / 40320), MATH_SPLAT(R1 / 5040)); /* 1/8!, 1/7! */
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 720));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 120));
#endif
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 24));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 6));
    q = MATH_FMA(q, r, MATH_SPLAT(R1 / 2));
    return MATH_FMA(r * r, q, r);
}

/* n (as a value), r, and 2^n for x in the clamped range. */
static inline MATH_V MATH_FN(reduce_)(MATH_V x, MATH_V *scale)
{
    MATH_V t = MATH_FMA(x, MATH_SPLAT(LOG2E), MATH_SPLAT(ROUNDER));
    MATH_V n = t - ROUNDER;
    *scale = MATH_AS_V((MATH_AS_I(t) << MANT) + ONE_BITS);
    return MATH_FMA(-n, MATH_SPLAT(LN2_LO), MATH_FMA(-n, MATH_SPLAT(LN2_HI), x));
}

static inline MATH_V MATH_FN(exp_)(MATH_V x)
{
    x = SELECT(MATH_MASK(x < EXP_LO), MATH_SPLAT(EXP_LO), x);
    x = SELECT(MATH_MASK(x > EXP_HI), MATH_SPLAT(EXP_HI), x);
    MATH_V scale;
    MATH_V r = MATH_FN(reduce_)(x, &scale);
    return (R1 + MATH_FN(expm1_reduced_)(r)) * scale;
}

static inline MATH_V MATH_FN(sigmoid_)(MATH_V v)
{
    return R1 / (R1 + MATH_FN(exp_)(-v));
}

static inline MATH_V MATH_FN(tanh_)(MATH_V v)
{
    const MATH_I sign = MATH_AS_I(MATH_SPLAT(-(MATH_REAL)0)); /* the sign bit alone */
    MATH_V a = MATH_AS_V(MATH_AS_I(v) & ~sign);
    a = SELECT(MATH_MASK(a > TANH_LIMIT), MATH_SPLAT(TANH_LIMIT), a);
    MATH_V scale;
    MATH_V r = MATH_FN(reduce_)(a + a, &scale);
    MATH_V e = MATH_FMA(scale, MATH_FN(expm1_reduced_)(r), scale - R1);
    MATH_V t = e / (e + (MATH_REAL)2);
    return MATH_AS_V(MATH_AS_I(t) | (MATH_AS_I(v) & sign));
}

#undef EXP_LO
#undef EXP_HI
#undef TANH_LIMIT
#undef LOG2E
#undef ROUNDER
#undef LN2_HI
#undef LN2_LO
#undef MANT
#undef ONE_BITS
#undef R1
#undef SELECT
#undef MATH_DOUBLE
#undef MATH_REAL
#undef MATH_V
#undef MATH_I
#undef MATH_FN
#undef MATH_AS_I
#undef MATH_AS_V
#undef MATH_MASK
#undef MATH_SPLAT
#undef MATH_FMA
