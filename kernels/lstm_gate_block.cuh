// The gate-block partial dot product: a thread holds the four gate rows of one
// unit at one k-chunk, so one float4 of h from shared memory feeds 16 FMAs (a
// quarter of the shared-memory loads per FMA of one gate row a thread).
// Included by kernels/lstm_recurrence.cu and kernels/lstm_cluster.cu (GATE_BLOCK
// 4), so both compute a gate block's sums with the same instructions in the
// same order and can be compared bit for bit.
#ifndef SPK_LSTM_GATE_BLOCK_CUH
#define SPK_LSTM_GATE_BLOCK_CUH

// K4 float4 groups per chunk; chunk q holds the groups q, q + CHUNKS_, ... of
// every row (the kernels' split). Each gate has its own 4 FMA chains, summed
// (a0 + a1) + (a2 + a3), as in the one-row partial dots.
// h_first is h_row's first float4 of the chunk (h4[q]), loaded by the caller:
// a caller that loads it one row ahead lets that load's latency pass under the
// previous row's FMAs. The sums are the same.
template <int K4, int CHUNKS_>
__device__ __forceinline__ float4 spk_partial_dot4_from(const float4 (&r)[4][K4], const float *h_row, int q,
                                                        float4 h_first)
{
    const float4 *h4 = reinterpret_cast<const float4 *>(h_row);
    float a[4][4];
#pragma unroll
    for (int p = 0; p < 4; p++)
        a[p][0] = a[p][1] = a[p][2] = a[p][3] = 0.0f;
#pragma unroll
    for (int k = 0; k < K4; k++) {
        float4 h = k == 0 ? h_first : h4[k * CHUNKS_ + q];
#pragma unroll
        for (int p = 0; p < 4; p++) {
            a[p][0] = fmaf(h.x, r[p][k].x, a[p][0]);
            a[p][1] = fmaf(h.y, r[p][k].y, a[p][1]);
            a[p][2] = fmaf(h.z, r[p][k].z, a[p][2]);
            a[p][3] = fmaf(h.w, r[p][k].w, a[p][3]);
        }
    }
    return make_float4((a[0][0] + a[0][1]) + (a[0][2] + a[0][3]), (a[1][0] + a[1][1]) + (a[1][2] + a[1][3]),
                       (a[2][0] + a[2][1]) + (a[2][2] + a[2][3]), (a[3][0] + a[3][1]) + (a[3][2] + a[3][3]));
}

template <int K4, int CHUNKS_>
__device__ __forceinline__ float4 spk_partial_dot4(const float4 (&r)[4][K4], const float *h_row, int q)
{
    return spk_partial_dot4_from<K4, CHUNKS_>(r, h_row, q, reinterpret_cast<const float4 *>(h_row)[q]);
}

#endif
