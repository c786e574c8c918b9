// Reduce-scatter of several rows' partial sums over the lanes that split a
// dot product into k-chunks (a transposed reduction). Included by
// kernels/lstm_recurrence.cu; usable by any kernel whose LANES consecutive
// lanes (2, 4 or 8, aligned) hold the partial sums of the same rows.
//
// The plain all-reduce sums one row with log2(LANES) xor shuffles (masks 1,
// 2, 4), so G rows cost G * log2(LANES). Here, at each mask, a lane keeps one
// half of its rows and sends the other half to its partner, which adds the
// received values to the same rows: G/2 + G/4 + ... + 1 = G - 1 shuffles (per
// value of a row), then the plain all-reduce on the one row left for the
// masks that remain when G < LANES. Afterwards lane q holds the full sum of row
// spk_scatter_row<G, LANES>(q) (the lanes with the same low log2(G) bits hold
// the same row; those with q < G are the first of each).
//
// Same bits as the all-reduce: at every mask each lane computes
// own + partner's value of one row (IEEE addition is commutative), so every
// row is summed over the same pairs in the same order,
// ((q0+q1)+(q2+q3))+((q4+q5)+(q6+q7)), whichever lane finishes it and
// whatever G is.
#ifndef SPK_LSTM_REDUCE_CUH
#define SPK_LSTM_REDUCE_CUH

// The row that lane q (0 .. LANES-1 within its lane group) holds after the
// reduce-scatter of G rows: the low log2(G) bits of q reversed. Its own
// inverse: the lane holding row r (< G) is spk_scatter_row<G, LANES>(r).
template <int G, int LANES>
__device__ __forceinline__ int spk_scatter_row(int q)
{
    int e = 0;
#pragma unroll
    for (int mask = 1, n = G; mask < LANES; mask <<= 1) {
        if (n > 1) {
            e += (q & mask) ? n / 2 : 0;
            n /= 2;
        }
    }
    return e;
}

// One mask of the reduce-scatter (N rows still spread over this lane and
// its partner), then the next; templates keep every index a constant, so the
// rows stay in registers.
template <int N, int MASK, int G, int W, int LANES>
__device__ __forceinline__ void spk_reduce_step(float (&v)[G][W], int q)
{
    if constexpr (MASK < LANES) {
        if constexpr (N > 1) {
            // Keep one half, send the other: both partners add the same two values.
            const bool upper = (q & MASK) != 0;
            constexpr int half = N / 2;
#pragma unroll
            for (int k = 0; k < half; k++) {
#pragma unroll
                for (int w = 0; w < W; w++) {
                    const float send = upper ? v[k][w] : v[k + half][w];
                    const float keep = upper ? v[k + half][w] : v[k][w];
                    v[k][w] = keep + __shfl_xor_sync(0xffffffffu, send, MASK);
                }
            }
            spk_reduce_step<half, MASK * 2, G, W, LANES>(v, q);
        } else {
#pragma unroll
            for (int w = 0; w < W; w++)
                v[0][w] += __shfl_xor_sync(0xffffffffu, v[0][w], MASK);
            spk_reduce_step<1, MASK * 2, G, W, LANES>(v, q);
        }
    }
}

// v[r][w]: this lane's partial sum of value w of row r. On return v[0][w] is
// the full sum of value w of row spk_scatter_row<G, LANES>(q). Every lane of
// the warp must call it (full-mask shuffles) with the same G, W and LANES.
template <int G, int W, int LANES>
__device__ __forceinline__ void spk_reduce_scatter(float (&v)[G][W], int q)
{
    static_assert(G == 1 || G == 2 || G == 4 || G == 8 || G == 16, "G must be a power of two");
    static_assert(G <= LANES && (LANES == 2 || LANES == 4 || LANES == 8 || LANES == 16 || LANES == 32),
                  "G rows over LANES lanes, G <= LANES");
    spk_reduce_step<G, 1, G, W, LANES>(v, q);
}

#endif
