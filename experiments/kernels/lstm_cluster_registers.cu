// The tutorial's second kernel (docs/kernels.md): lstm_row_block.cu with R
// held in registers. One batch row's direction has 4H x H weights (256 KiB at
// H = 128), more than one block's registers, so a cluster of CLUSTER blocks
// shares the row: block g owns units g * UNITS .. and keeps their 4 * UNITS
// gate rows of R in its threads' registers for the whole sequence. Each block
// keeps all of h in shared memory (two buffers, by step parity); a cell's h is
// stored into every block of the cluster (distributed shared memory) and one
// cluster barrier a step makes the stores visible. Needs compute capability 9.0.
//
// Thread t: gate row j = t / KSPLIT of the block, k-chunk q = t % KSPLIT
// (the float4 groups q, q + KSPLIT, ...: a row's lanes read consecutive h).
// Launched once for both directions (it takes no `direction`): grid
// (CLUSTER, batch, 2), blockIdx.z the direction, the pointers of both.

#include "cluster_sync.cuh"
#include "lstm_cell.cuh"

#ifndef SPK_HIDDEN
#define SPK_HIDDEN 128
#define SPK_GATE_I 0
#define SPK_GATE_F 1
#define SPK_GATE_C 2
#define SPK_GATE_O 3
#define SPK_PACK_ROWS 0
#endif
#ifndef CLUSTER
#define CLUSTER 8
#endif
#define H SPK_HIDDEN
#define UNITS (H / CLUSTER)
#define KSPLIT 4
#define THREADS (4 * UNITS * KSPLIT)
#define GROUPS (H / (4 * KSPLIT)) // float4 groups of R a thread holds
static_assert(H % (4 * KSPLIT) == 0 && H % CLUSTER == 0 && THREADS % 32 == 0 && THREADS <= 1024,
              "H must split into CLUSTER blocks of whole warps");

__device__ __forceinline__ int packed_row(int u, int p) { return SPK_PACK_ROWS ? p * H + u : u * 4 + p; }

extern "C" __global__ void __launch_bounds__(THREADS)
lstm_cluster_registers(const float *__restrict__ gates, // [2, batch * steps, 4H]
                       const float *__restrict__ r,     // [2, 4H, H]
                       const float *__restrict__ bias,  // [2, 4H]
                       float *output,                   // [batch, steps, 2H]
                       int batch, int steps, float *trace, const int *trace_slot, int trace_slots,
                       int trace_direction)
{
    __shared__ __align__(16) float h[2][H];
    __shared__ float dot[4 * UNITS];
    const int g = (int)cluster_rank(), b = blockIdx.y, d = blockIdx.z, t = threadIdx.x;
    const int j = t / KSPLIT, q = t % KSPLIT;
    if (b >= batch || blockDim.x != THREADS || cluster_blocks() != CLUSTER)
        return; // the whole cluster shares b and the geometry, so it leaves together
    gates += (size_t)d * batch * steps * 4 * H;
    r += (size_t)d * 4 * H * H;
    bias += (size_t)d * 4 * H;

    // This thread's part of gate row j of the block, held for the whole sequence.
    float4 w[GROUPS];
    const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)packed_row(g * UNITS + j / 4, j % 4) * H);
#pragma unroll
    for (int k = 0; k < GROUPS; k++)
        w[k] = row[k * KSPLIT + q];
    const int unit = g * UNITS + t; // of a cell thread, t < UNITS
    float4 b4 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (t < UNITS)
        b4 = make_float4(bias[packed_row(unit, SPK_GATE_I)], bias[packed_row(unit, SPK_GATE_F)],
                         bias[packed_row(unit, SPK_GATE_C)], bias[packed_row(unit, SPK_GATE_O)]);
    for (int i = t; i < 2 * H; i += THREADS)
        (&h[0][0])[i] = 0.0f;
    float c = 0.0f;
    cluster_arrive(); // no block stores into another before that one zeroed h
    cluster_wait();

    for (int step = 0; step < steps; step++) {
        const int tt = d ? steps - 1 - step : step;
        const float4 *h4 = reinterpret_cast<const float4 *>(h[step & 1]);
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
        for (int k = 0; k < GROUPS; k++) {
            const float4 x = h4[k * KSPLIT + q];
            a0 = fmaf(w[k].x, x.x, a0);
            a1 = fmaf(w[k].y, x.y, a1);
            a2 = fmaf(w[k].z, x.z, a2);
            a3 = fmaf(w[k].w, x.w, a3);
        }
        float s = (a0 + a1) + (a2 + a3);
        for (int mask = 1; mask < KSPLIT; mask <<= 1)
            s += __shfl_xor_sync(0xffffffffu, s, mask);
        if (q == 0)
            dot[j] = s;
        __syncthreads();
        if (t < UNITS) {
            const float *gx = gates + ((size_t)b * steps + tt) * 4 * H;
            const float4 x4 = make_float4(gx[packed_row(unit, SPK_GATE_I)], gx[packed_row(unit, SPK_GATE_F)],
                                          gx[packed_row(unit, SPK_GATE_C)], gx[packed_row(unit, SPK_GATE_O)]);
            const float hv = spk_lstm_cell(x4, dot[t * 4 + SPK_GATE_I], dot[t * 4 + SPK_GATE_F],
                                           dot[t * 4 + SPK_GATE_C], dot[t * 4 + SPK_GATE_O], b4, c);
            output[((size_t)b * steps + tt) * (2 * H) + d * H + unit] = hv;
            const unsigned mine = (unsigned)__cvta_generic_to_shared(&h[(step + 1) & 1][unit]);
            for (unsigned rank = 0; rank < CLUSTER; rank++)
                store_cluster(map_rank(mine, rank), hv);
            if (trace != nullptr && d == trace_direction && trace_slot[tt] >= 0) {
                const int e = trace_slot[tt];
                trace[((size_t)e * batch + b) * H + unit] = hv;
                trace[((size_t)(trace_slots + e) * batch + b) * H + unit] = c;
            }
        }
        cluster_arrive(); // h of this step is in every block; dot may be written again
        cluster_wait();
    }
}
