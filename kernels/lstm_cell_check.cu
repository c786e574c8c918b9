// The cell's activations (kernels/lstm_cell.cuh) against their plain forms:
// a correctly rounded division for each reciprocal and a branch between
// tanh's two sides. lstm_cell.cuh writes them for latency and claims the same
// bits; this kernel checks the claim on every float bit pattern it is given.
// Two NaNs match whatever their payloads. It also checks that the cluster
// kernel's trimmed forms (kernel.cell "trimmed") give the reference forms'
// bits. As a control, it also counts where
// the bare approximation (rcp.approx without the Newton step) differs from
// the division in the sigmoid: a check that finds no difference there could
// not find one anywhere.
#include "lstm_cell.cuh"

__device__ __forceinline__ float plain_sigmoid(float v)
{
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, spk_exp(-v)));
}

__device__ __forceinline__ float plain_tanh(float v)
{
    const float a = fabsf(v);
    if (a < 0.625f)
        return spk_tanh_polynomial(v);
    const float t = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(spk_exp(__fmul_rn(2.0f, a)), 1.0f)));
    return v < 0.0f ? -t : t;
}

__device__ __forceinline__ float coarse_sigmoid(float v)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fadd_rn(1.0f, spk_exp(-v))));
    return r;
}

__device__ __forceinline__ bool same_bits(float a, float b)
{
    return __float_as_uint(a) == __float_as_uint(b) || (isnan(a) && isnan(b));
}

// Bit patterns first .. first + count - 1 (count <= 2^32 - first). out[0] and
// out[1]: sigmoid and tanh mismatches; out[2] and out[3]: the smallest
// pattern of each that mismatched (the host starts them above 2^32 - 1);
// out[4]: the control's mismatches; out[5] and out[6]: the trimmed sigmoid's
// and tanh's mismatches against spk_sigmoid and spk_tanh, out[7] and out[8]
// the smallest pattern of each.
extern "C" __global__ void activation_mismatches(unsigned long long first, unsigned long long count,
                                                 unsigned long long *out)
{
    unsigned long long sigmoid_bad = 0, tanh_bad = 0, coarse_bad = 0, trimmed_sigmoid_bad = 0, trimmed_tanh_bad = 0;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const unsigned long long bits = first + i;
        const float v = __uint_as_float((unsigned)bits);
        if (!same_bits(spk_sigmoid(v), plain_sigmoid(v))) {
            sigmoid_bad++;
            atomicMin(&out[2], bits);
        }
        coarse_bad += !same_bits(coarse_sigmoid(v), plain_sigmoid(v));
        const float t = spk_tanh(v);
        if (!same_bits(t, plain_tanh(v))) {
            tanh_bad++;
            atomicMin(&out[3], bits);
        }
        if (!same_bits(spk_sigmoid_trimmed(v), spk_sigmoid(v))) {
            trimmed_sigmoid_bad++;
            atomicMin(&out[7], bits);
        }
        if (!same_bits(spk_tanh_trimmed(v), t)) {
            trimmed_tanh_bad++;
            atomicMin(&out[8], bits);
        }
    }
    if (sigmoid_bad)
        atomicAdd(&out[0], sigmoid_bad);
    if (tanh_bad)
        atomicAdd(&out[1], tanh_bad);
    if (coarse_bad)
        atomicAdd(&out[4], coarse_bad);
    if (trimmed_sigmoid_bad)
        atomicAdd(&out[5], trimmed_sigmoid_bad);
    if (trimmed_tanh_bad)
        atomicAdd(&out[6], trimmed_tanh_bad);
}
