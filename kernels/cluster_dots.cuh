// One gate row's dot products of the cluster kernels, with the weights in
// registers: a thread's partial dots over its k-chunk, then the
// reduce-scatter (or all-reduce) over the chunk lanes. Included by
// kernels/lstm_cluster.cu (one gate row a thread) and
// kernels/lstm_cluster_baseline.cu after their macros (HIDDEN, CHUNKS,
// FLOAT4_PER_CHUNK, FULL_MASK).
#ifndef SPK_CLUSTER_DOTS_CUH
#define SPK_CLUSTER_DOTS_CUH

#include "spk_timeline.cuh"

// The timeline build: row_sums stamps `dot_mark` (of the including kernel's
// CLUSTER_TIMELINE_STAGES) where its partial dot products end; its callers
// pass ROW_SUMS_TIMELINE_ARGS(step, mark) after its last argument. Off: nothing.
#if SPK_TIMELINE
#define ROW_SUMS_TIMELINE_PARAMS SPK_TIMELINE_FN_PARAMS, const int dot_mark
#define ROW_SUMS_TIMELINE_ARGS(step, mark) SPK_TIMELINE_FN_ARGS(step), (mark)
#else
#define ROW_SUMS_TIMELINE_PARAMS
#define ROW_SUMS_TIMELINE_ARGS(step, mark)
#endif

// The G rows b0 .. b0+G-1 of this thread's gate row: G partial dots over the
// thread's chunk, then the reduce-scatter / all-reduce over the chunk lanes
// (the order of kernels/lstm_reduce.cuh, written out: the baseline keeps its
// codegen at 64 registers). Returns the full sum of row b0 +
// spk_scatter_row<G, CHUNKS>(q).
template <int G>
__device__ __forceinline__ float row_sums(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h, int b0,
                                          int q ROW_SUMS_TIMELINE_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(CLUSTER_TIMELINE_STAGES);
    float v[G];
#pragma unroll
    for (int r = 0; r < G; r++) {
        const float4 *h4 = reinterpret_cast<const float4 *>(h + (b0 + r) * HIDDEN);
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++) {
            const float4 x = h4[k * CHUNKS + q];
            const float4 m = w[k];
            a0 = fmaf(x.x, m.x, a0);
            a1 = fmaf(x.y, m.y, a1);
            a2 = fmaf(x.z, m.z, a2);
            a3 = fmaf(x.w, m.w, a3);
        }
        v[r] = (a0 + a1) + (a2 + a3);
    }
    SPK_TIMELINE_STAMP(spk_timeline_step, dot_mark);
#pragma unroll
    for (int mask = 1, n = G; mask < CHUNKS; mask <<= 1) {
        if (n > 1) {
            // Keep one half, send the other: both partners add the same two values.
            const bool upper = (q & mask) != 0;
            const int half = n / 2;
#pragma unroll
            for (int k = 0; k < half; k++) {
                const float send = upper ? v[k] : v[k + half];
                const float keep = upper ? v[k + half] : v[k];
                v[k] = keep + __shfl_xor_sync(FULL_MASK, send, mask);
            }
            n = half;
        } else {
            v[0] += __shfl_xor_sync(FULL_MASK, v[0], mask);
        }
    }
    return v[0];
}

// This thread's slice of gate row `row` of R (its k-chunk q), for the whole sequence.
__device__ __forceinline__ void load_gate_row(float4 (&w)[FLOAT4_PER_CHUNK], const float *r, unsigned row, int q)
{
    const float4 *src = reinterpret_cast<const float4 *>(r + (size_t)row * HIDDEN);
#pragma unroll
    for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
        w[k] = src[k * CHUNKS + q];
}

#endif
