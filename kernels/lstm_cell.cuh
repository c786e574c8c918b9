// The LSTM cell of the recurrence kernels: activation functions and the
// update of one (row, unit) from its four gate pre-activations. Included by
// kernels/lstm_recurrence.cu, kernels/lstm_cluster.cu and kernels/lstm_tc.cu,
// so the GPU recurrences compute a cell with the same instructions and can be
// compared bit for bit.
#ifndef SPK_LSTM_CELL_CUH
#define SPK_LSTM_CELL_CUH

#include "lstm_cell_forms.cuh"

// ---- activations -----------------------------------------------------------
// The same forms, operation for operation, as the plain-C emulations in
// src/lstm/activations.h (exp2f stands in there for ex2.approx); products and
// sums are rounded separately (__fmul_rn/__fadd_rn) so nothing is contracted
// into an FMA the emulation does not have:
//   exp(v)     = ex2.approx.ftz(clamp(v, -87, 87) * log2(e))
//   sigmoid(v) = 1 / (1 + exp(-v))                   (correctly rounded)
//   tanh(v)    = Cephes' odd polynomial v + v^3 P(v^2) for |v| < 0.625,
//                sign(v) * (1 - 2 / (exp(2|v|) + 1)) above.
// One deliberate difference: the clamp here lets NaN through (fminf/fmaxf
// would turn a NaN into the clamp limit), so a NaN pre-activation gives a NaN
// gate instead of a saturated one. For every other value both clamps agree.
//
// Latency. The cell is on every step's dependent chain, so it is written for
// it, branch-free, and gives the bits of the plain forms above:
//   - 1/x and 2/x are spk_recip(x) and 2 * spk_recip(x): rcp.approx and one
//     Newton step with FMAs. x is 1 + exp(.) or exp(.) + 1, so 1 <= x < 2^126
//     and 1/x is normal; div.rn's fast path is longer and carries a branch to
//     its slow path, which __frcp_rn's has too (that form was slower than the
//     divisions on the H200). The scaling by 2 is exact.
//   - tanh computes both of its forms and selects one. A branch diverges
//     whenever a warp's cells straddle |v| = 0.625, and then the two forms
//     run one after the other.
// The same bits are a measured claim, not an IEEE one: kernels/
// lstm_cell_check.cu compares both activations with the plain forms (divisions
// by __fdiv_rn, the branch) for all 2^32 float inputs on the GPU at hand
// (tests/spec/cell_spec.lua); on the H200 none differs.

#define EXP_LIMIT 87.0f

__device__ __forceinline__ float spk_exp(float v)
{
    v = v < -EXP_LIMIT ? -EXP_LIMIT : v;
    v = v > EXP_LIMIT ? EXP_LIMIT : v;
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(v, 1.44269504088896341f)));
    return y;
}

// 1/x for 1 <= x < 2^126, as the cell uses it: the reciprocal approximation
// and one Newton step: e = 1 - x*r in one FMA, then r + r*e in another.
__device__ __forceinline__ float spk_recip(float x)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return fmaf(fmaf(-x, r, 1.0f), r, r);
}

__device__ __forceinline__ float spk_sigmoid(float v)
{
    return spk_recip(__fadd_rn(1.0f, spk_exp(-v)));
}

// tanh's form for |v| < 0.625: v + v^3 P(v^2), Cephes' coefficients.
__device__ __forceinline__ float spk_tanh_polynomial(float v)
{
    const float z = __fmul_rn(v, v);
    float p = -5.70498872745e-3f;
    p = __fadd_rn(__fmul_rn(p, z), 2.06390887954e-2f);
    p = __fadd_rn(__fmul_rn(p, z), -5.37397155531e-2f);
    p = __fadd_rn(__fmul_rn(p, z), 1.33314422036e-1f);
    p = __fadd_rn(__fmul_rn(p, z), -3.33332819422e-1f);
    return __fadd_rn(__fmul_rn(__fmul_rn(p, z), v), v);
}

__device__ __forceinline__ float spk_tanh(float v)
{
    const float a = fabsf(v);
    const float near_zero = spk_tanh_polynomial(v);
    const float t = __fsub_rn(1.0f, __fmul_rn(2.0f, spk_recip(__fadd_rn(spk_exp(__fmul_rn(2.0f, a)), 1.0f))));
    const float saturating = v < 0.0f ? -t : t;
    return a < 0.625f ? near_zero : saturating;
}

// pre = (gates_x + dot(h, R_row)) + bias for the packed gates [i, f, c, o];
// c = f*c + i*c~ (one FMA over the rounded product i*c~); returns h = o*tanh(c).
__device__ __forceinline__ float spk_lstm_cell(float4 gx, float pi, float pf, float pc, float po, float4 b4,
                                               float &c)
{
    const float gi = spk_sigmoid((gx.x + pi) + b4.x);
    const float gf = spk_sigmoid((gx.y + pf) + b4.y);
    const float gc = spk_tanh((gx.z + pc) + b4.z);
    const float go = spk_sigmoid((gx.w + po) + b4.w);
    c = fmaf(gf, c, gi * gc);
    return go * spk_tanh(c);
}

// ---- the cluster kernel's other forms (kernel.cell) ----------------------------
// Trimmed: the reference cell's bits with fewer dependent instructions on the
// step's chain (the gate's tanh and tanh(c) are on it; the sigmoids run beside
// them). Each change is exact:
//   - sigmoid: the clamp at -87 goes: below it ex2 gives at most 2^-125.5 and
//     1 + that rounds to 1, as with the clamp (NaN still passes);
//   - tanh: 2|v| clamped at 87 then times log2(e) is |v| clamped at 43.5 times
//     2 log2(e): the same product (2|v| is exact, 2 log2(e) a float), so the
//     same ex2 argument; the clamp at -87 is dead there (|v| >= 0);
//   - tanh: sign(v) * (1 - 2r) with r the Newton step's 1/x is sign - q with q
//     the Newton step run on 2r sign(v): scaling by +-2 is exact (r is normal:
//     1 <= x < 2^126) and round-to-nearest is symmetric, so one select and one
//     multiply leave the chain.
// kernels/lstm_cell_check.cu compares both with the reference forms for all
// 2^32 inputs on the GPU; tests/c/test_cell_forms.c does it on the CPU with
// exp2f and a division standing in for ex2.approx and rcp.approx.
__device__ __forceinline__ float spk_sigmoid_trimmed(float v)
{
    float e = -v;
    e = e > EXP_LIMIT ? EXP_LIMIT : e;
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(e, 1.44269504088896341f)));
    return spk_recip(__fadd_rn(1.0f, y));
}

// The saturating side of tanh, sign(v) * (1 - 2 / (exp(2|v|) + 1)), trimmed;
// `scale` multiplies the Newton step's reciprocal exactly (2 sign(v)).
__device__ __forceinline__ float spk_tanh_scaled_reciprocal(float a, float scale)
{
    const float m = a > 0.5f * EXP_LIMIT ? 0.5f * EXP_LIMIT : a;
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(m, 2.0f * 1.44269504088896341f)));
    const float x = __fadd_rn(y, 1.0f);
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    const float rs = __fmul_rn(r, scale);
    return fmaf(fmaf(-x, r, 1.0f), rs, rs);
}

// tanh(v) from its near-zero side's value: that, or the trimmed saturating side.
__device__ __forceinline__ float spk_tanh_from(float v, float near_zero)
{
    const float a = fabsf(v);
    const float sign = v < 0.0f ? -1.0f : 1.0f;
    const float saturating = __fsub_rn(sign, spk_tanh_scaled_reciprocal(a, 2.0f * sign));
    return a < 0.625f ? near_zero : saturating;
}

__device__ __forceinline__ float spk_tanh_trimmed(float v)
{
    return spk_tanh_from(v, spk_tanh_polynomial(v));
}

__device__ __forceinline__ float spk_lstm_cell_trimmed(float4 gx, float pi, float pf, float pc, float po, float4 b4,
                                                       float &c)
{
    const float gi = spk_sigmoid_trimmed((gx.x + pi) + b4.x);
    const float gf = spk_sigmoid_trimmed((gx.y + pf) + b4.y);
    const float gc = spk_tanh_trimmed((gx.z + pc) + b4.z);
    const float go = spk_sigmoid_trimmed((gx.w + po) + b4.w);
    c = fmaf(gf, c, gi * gc);
    return go * spk_tanh_trimmed(c);
}

// Fused: other bits, within the FP32 bound (a few ulp of each activation,
// tests/spec/cluster_spec.lua checks the stack against f64). On top of the
// trimmed forms: pre = sum + (x·Wᵀ + bias), the bracket added before the dot
// products (gxb); the polynomial in FMAs; c = i*c~ + f*c in one FMA over f*c;
// h = o * tanh(c) with o folded into the saturating side's last subtraction.
__device__ __forceinline__ float spk_tanh_polynomial_fma(float v)
{
    const float z = v * v;
    float p = -5.70498872745e-3f;
    p = fmaf(p, z, 2.06390887954e-2f);
    p = fmaf(p, z, -5.37397155531e-2f);
    p = fmaf(p, z, 1.33314422036e-1f);
    p = fmaf(p, z, -3.33332819422e-1f);
    return fmaf(p * z, v, v);
}

__device__ __forceinline__ float spk_tanh_fused(float v)
{
    return spk_tanh_from(v, spk_tanh_polynomial_fma(v));
}

// o * tanh(v): o * sign - o * q in one FMA on the saturating side.
__device__ __forceinline__ float spk_times_tanh_fused(float o, float v)
{
    const float a = fabsf(v);
    const float near_zero = __fmul_rn(o, spk_tanh_polynomial_fma(v));
    const float sign = v < 0.0f ? -1.0f : 1.0f;
    const float saturating = fmaf(-o, spk_tanh_scaled_reciprocal(a, 2.0f * sign), __fmul_rn(o, sign));
    return a < 0.625f ? near_zero : saturating;
}

__device__ __forceinline__ float spk_lstm_cell_fused(float4 gxb, float pi, float pf, float pc, float po, float &c)
{
    const float gi = spk_sigmoid_trimmed(pi + gxb.x);
    const float gf = spk_sigmoid_trimmed(pf + gxb.y);
    const float gc = spk_tanh_fused(pc + gxb.z);
    const float go = spk_sigmoid_trimmed(po + gxb.w);
    c = fmaf(gi, gc, __fmul_rn(gf, c));
    return spk_times_tanh_fused(go, c);
}

// ---- a kernel's form (kernel.cell: SPK_CELL_*) ------------------------------
// What a step keeps of its x·Wᵀ: the fused form adds the bias when the gates
// are taken, off the step's chain; the others keep x·Wᵀ as it is.
template <int FORM> __device__ __forceinline__ float4 spk_cell_gates(const float4 &gx, const float4 &b4)
{
    if constexpr (FORM == SPK_CELL_FUSED)
        return make_float4(gx.x + b4.x, gx.y + b4.y, gx.z + b4.z, gx.w + b4.w);
    return gx;
}

// The cell of FORM from the gates spk_cell_gates<FORM> kept.
template <int FORM>
__device__ __forceinline__ float spk_lstm_cell_form(const float4 &kept, float pi, float pf, float pc, float po,
                                                    const float4 &b4, float &c)
{
    static_assert(FORM == SPK_CELL_REFERENCE || FORM == SPK_CELL_TRIMMED || FORM == SPK_CELL_FUSED,
                  "CELL must be 0 (reference), 1 (trimmed) or 2 (fused)");
    if constexpr (FORM == SPK_CELL_TRIMMED)
        return spk_lstm_cell_trimmed(kept, pi, pf, pc, po, b4, c);
    else if constexpr (FORM == SPK_CELL_FUSED)
        return spk_lstm_cell_fused(kept, pi, pf, pc, po, c);
    else
        return spk_lstm_cell(kept, pi, pf, pc, po, b4, c);
}

#endif
