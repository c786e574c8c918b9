/* The cluster kernel's cell forms (kernel.cell, kernels/lstm_cell.cuh) on the
 * CPU: the trimmed activations give the reference forms' bits, the fused ones
 * stay within a few ulp of f64. The forms are written here operation for
 * operation as in lstm_cell.cuh, with stand-ins for the two approximations
 * (ex2.approx and rcp.approx): exp2f and a correctly rounded division, each
 * moved one ulp for a third of their inputs, so the equality rests on the
 * algebra of the trims, not on how either approximation rounds. Every 251st
 * bit pattern and every pattern within 2^16 of the values the trims move
 * (43.5, 87, 0.625, zero, the largest floats, infinity) are checked; the GPU
 * check (kernels/lstm_cell_check.cu, tests/spec/cell_spec.lua) takes all 2^32
 * with the hardware's approximations. A control (the sigmoid without its
 * clamp) must differ, so the comparison can fail. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

#define EXP_LIMIT 87.0f
#define LOG2E 1.44269504088896341f

static uint32_t bits_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* An approximation's stand-in: the exact value, one ulp off for a third of the inputs. */
static float nudge(float exact, float input)
{
    uint32_t h = bits_of(input) * 2654435761u;
    if (isfinite(exact) && exact != 0.0f && h % 3 == 0)
        return nextafterf(exact, (h >> 8) & 1 ? INFINITY : 0.0f);
    return exact;
}
static float ex2(float v) { return nudge(exp2f(v), v); }
static float rcp(float x) { return nudge(1.0f / x, x); }

/* ---- the reference forms (lstm_cell.cuh) ---- */

static float ref_exp(float v)
{
    v = v < -EXP_LIMIT ? -EXP_LIMIT : v;
    v = v > EXP_LIMIT ? EXP_LIMIT : v;
    return ex2(v * LOG2E);
}
static float ref_recip(float x)
{
    float r = rcp(x);
    return fmaf(fmaf(-x, r, 1.0f), r, r);
}
static float ref_sigmoid(float v) { return ref_recip(1.0f + ref_exp(-v)); }
static float ref_polynomial(float v)
{
    volatile float z = v * v; /* (volatile: no contraction into an FMA the kernel does not have) */
    float p = -5.70498872745e-3f;
    volatile float t;
    t = p * z, p = t + 2.06390887954e-2f;
    t = p * z, p = t + -5.37397155531e-2f;
    t = p * z, p = t + 1.33314422036e-1f;
    t = p * z, p = t + -3.33332819422e-1f;
    t = p * z;
    t = t * v;
    return t + v;
}
static float ref_tanh(float v)
{
    float a = fabsf(v);
    float near_zero = ref_polynomial(v);
    float t = 1.0f - 2.0f * ref_recip(ref_exp(2.0f * a) + 1.0f);
    float saturating = v < 0.0f ? -t : t;
    return a < 0.625f ? near_zero : saturating;
}

/* ---- the trimmed forms ---- */

static float trimmed_sigmoid(float v)
{
    float e = -v;
    e = e > EXP_LIMIT ? EXP_LIMIT : e;
    return ref_recip(1.0f + ex2(e * LOG2E));
}
static float scaled_reciprocal(float a, float scale)
{
    float m = a > 0.5f * EXP_LIMIT ? 0.5f * EXP_LIMIT : a;
    float x = ex2(m * (2.0f * LOG2E)) + 1.0f;
    float r = rcp(x);
    float rs = r * scale;
    return fmaf(fmaf(-x, r, 1.0f), rs, rs);
}
static float trimmed_tanh(float v)
{
    float a = fabsf(v);
    float near_zero = ref_polynomial(v);
    float sign = v < 0.0f ? -1.0f : 1.0f;
    float saturating = sign - scaled_reciprocal(a, 2.0f * sign);
    return a < 0.625f ? near_zero : saturating;
}

/* ---- the fused tanh (other bits) ---- */

static float fused_tanh(float v)
{
    float a = fabsf(v);
    float z = v * v;
    float p = -5.70498872745e-3f;
    p = fmaf(p, z, 2.06390887954e-2f);
    p = fmaf(p, z, -5.37397155531e-2f);
    p = fmaf(p, z, 1.33314422036e-1f);
    p = fmaf(p, z, -3.33332819422e-1f);
    volatile float pz = p * z;
    float near_zero = fmaf(pz, v, v);
    float sign = v < 0.0f ? -1.0f : 1.0f;
    float saturating = sign - scaled_reciprocal(a, 2.0f * sign);
    return a < 0.625f ? near_zero : saturating;
}

/* The control: no clamp, so a huge exp overflows and the Newton step makes NaN of it. */
static float unclamped_sigmoid(float v) { return ref_recip(1.0f + ex2(-v * LOG2E)); }

static bool same(float a, float b) { return bits_of(a) == bits_of(b) || (isnan(a) && isnan(b)); }

typedef struct tally {
    long checked, sigmoid_bad, tanh_bad, control_bad;
    double fused_worst;
    uint32_t first_bad;
} tally;

static void check_pattern(uint32_t u, tally *t)
{
    float v = float_of(u);
    t->checked++;
    bool bad = false;
    if (!same(trimmed_sigmoid(v), ref_sigmoid(v)))
        t->sigmoid_bad++, bad = true;
    if (!same(trimmed_tanh(v), ref_tanh(v)))
        t->tanh_bad++, bad = true;
    if (!same(unclamped_sigmoid(v), ref_sigmoid(v)))
        t->control_bad++;
    if (bad && t->first_bad == 0)
        t->first_bad = u;
    if (isfinite(v)) {
        double err = fabs((double)fused_tanh(v) - tanh((double)v));
        if (err > t->fused_worst)
            t->fused_worst = err;
    }
}

/* Every pattern within `radius` of v's, both signs. */
static void check_around(float v, uint32_t radius, tally *t)
{
    for (int sign = 0; sign < 2; sign++) {
        uint32_t c = bits_of(fabsf(v)) | (sign ? 0x80000000u : 0u);
        uint32_t lo = (c & 0x7fffffffu) > radius ? c - radius : c & 0x80000000u;
        for (uint32_t u = lo; u <= c + radius && u >= lo; u++)
            check_pattern(u, t);
    }
}

TEST(trimmed_activations_give_the_reference_bits)
{
    tally t = {0};
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251)
        check_pattern((uint32_t)u, &t);
    const float moved[] = {0.5f * EXP_LIMIT, EXP_LIMIT, 0.625f, 0.0f, 1.0f, 3.4e38f};
    for (size_t i = 0; i < sizeof moved / sizeof *moved; i++)
        check_around(moved[i], 1u << 16, &t);
    check_around(INFINITY, 1u << 16, &t); /* infinity and the NaNs above it */
    if (t.sigmoid_bad || t.tanh_bad)
        fprintf(stderr, "  first mismatch at bits 0x%08x (%.9g)\n", t.first_bad, (double)float_of(t.first_bad));
    CHECK(t.checked > 17000000);
    CHECK(t.sigmoid_bad == 0);
    CHECK(t.tanh_bad == 0);
    CHECK(t.control_bad > 1000); /* the comparison sees a real difference */
    /* the fused tanh: within 3 ulp of 1 (the stand-ins' own ulp included) */
    CHECK(t.fused_worst < 3.0 * 5.97e-8);
    if (check_verbose())
        fprintf(stderr, "  %ld patterns, fused tanh worst abs error %.3g, control mismatches %ld\n", t.checked,
                t.fused_worst, t.control_bad);
}

int main(void)
{
    RUN(trimmed_activations_give_the_reference_bits);
    return CHECK_SUMMARY();
}
