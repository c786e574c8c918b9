/* Plain-C stand-ins for the persistent kernel's activation functions, so their
 * error against libm can be measured (and reasoned about) on the CPU. The
 * reference (reference.c) uses its own (cpu_math.h); the kernel uses these:
 *
 *   exp(v)     = ex2.approx(clamp(v, -87, 87) * log2(e)); here exp2f stands in
 *                for ex2.approx (PTX documents ex2.approx.ftz.f32 to about 2 ulp,
 *                so the kernel's figures can be a little above the ones below);
 *   sigmoid(v) = 1 / (1 + exp(-v));
 *   tanh(v)    = Cephes' odd polynomial for |v| < 0.625,
 *                v + v^3 (p4 z^4 + p3 z^3 + p2 z^2 + p1 z + p0), z = v^2,
 *                and sign(v) * (1 - 2 / (exp(2|v|) + 1)) above.
 *
 * Measured against libm (expf/tanhf in f32, compared in f64) over 4,000,001
 * evenly spaced points of [-20, 20] (tests/c/test_lstm_reference.c,
 * kernel_activation_error):
 *   sigmoid: max abs error 1.19e-07 (1 ulp of values in [0.5, 1), at v = 0.897);
 *   tanh:    max abs error 1.19e-07 (1 ulp of values in [0.5, 1), at v = -1.038,
 *            the 1 - 2/(e^{2|v|}+1) side); the polynomial side (|v| < 0.625)
 *            stays within 5.96e-08.
 * Both are far inside the stack's f32 budget (rel L2 2e-5 against f64). */
#ifndef SPK_LSTM_ACTIVATIONS_H
#define SPK_LSTM_ACTIVATIONS_H

#include <math.h>

/* The clamp keeps exp finite in f32 (e^88.7 overflows) and the sigmoid of
 * a saturated gate exactly 0 or 1 instead of NaN from inf/inf. */
#define SPK_KERNEL_EXP_LIMIT 87.0f

static inline float spk_kernel_exp(float v)
{
    float clamped = fminf(fmaxf(v, -SPK_KERNEL_EXP_LIMIT), SPK_KERNEL_EXP_LIMIT);
    return exp2f(clamped * 1.44269504088896341f);
}

static inline float spk_kernel_sigmoid(float v)
{
    return 1.0f / (1.0f + spk_kernel_exp(-v));
}

static inline float spk_kernel_tanh(float v)
{
    float a = fabsf(v);
    if (a < 0.625f) {
        float z = v * v;
        float p = -5.70498872745e-3f;
        p = p * z + 2.06390887954e-2f;
        p = p * z - 5.37397155531e-2f;
        p = p * z + 1.33314422036e-1f;
        p = p * z - 3.33332819422e-1f;
        return p * z * v + v;
    }
    float t = 1.0f - 2.0f / (spk_kernel_exp(2.0f * a) + 1.0f);
    return v < 0 ? -t : t;
}

#endif
