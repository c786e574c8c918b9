// A recurrence kernel of one's own, as plain as it gets: one block per batch
// row and direction, R read from global memory (through L2) at every step.
// It keeps the recurrence-kernel contract of docs/kernels.md and runs in the
// stack through experiments/kernels/row_block.lua (spk.lstm.kernel_stack).
//
// A block of 4H threads runs the whole sequence of its row and direction:
//   1. thread j forms gate row j's dot product R[j] . h (h in shared memory,
//      R straight from global memory, 4 FMA chains in a fixed order);
//   2. thread u < H finishes unit u's cell from its four gates (spk's cell,
//      kernels/lstm_cell.cuh, as the built-in kernels have it), writes h to
//      the output and to shared memory for the next step.
// Two block barriers a step; no other block is waited for, so any number of
// blocks may run in waves and no co-residency is needed.
//
// The plan defines SPK_HIDDEN, where each gate sits (SPK_GATE_I, _F, _C, _O:
// 0 .. 3) and the layout (SPK_PACK_ROWS 0: row u*4 + p, 1: row p*H + u), so
// the same source takes any of the 24 gate orders in either layout.

#include "lstm_cell.cuh"

#ifndef SPK_HIDDEN
#define SPK_HIDDEN 128
#define SPK_GATE_I 0
#define SPK_GATE_F 1
#define SPK_GATE_C 2
#define SPK_GATE_O 3
#define SPK_PACK_ROWS 0
#endif

#define H SPK_HIDDEN
static_assert(H % 4 == 0 && 4 * H <= 1024, "4H threads a block, whole float4 rows");

// The packed row of unit u's gate at position p.
__device__ __forceinline__ int packed_row(int u, int p) { return SPK_PACK_ROWS ? p * H + u : u * 4 + p; }

// R[j] . h, four FMA chains over float4 groups, added (a0 + a1) + (a2 + a3).
__device__ __forceinline__ float row_dot(const float *r_row, const float *h)
{
    const float4 *r4 = reinterpret_cast<const float4 *>(r_row);
    const float4 *h4 = reinterpret_cast<const float4 *>(h);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll 8
    for (int k = 0; k < H / 4; k++) {
        const float4 w = __ldg(r4 + k), x = h4[k];
        a0 = fmaf(w.x, x.x, a0);
        a1 = fmaf(w.y, x.y, a1);
        a2 = fmaf(w.z, x.z, a2);
        a3 = fmaf(w.w, x.w, a3);
    }
    return (a0 + a1) + (a2 + a3);
}

extern "C" __global__ void __launch_bounds__(4 * H)
lstm_row_block(const float *__restrict__ gates, // [batch * steps, 4H]: x·Wᵀ of this direction
               const float *__restrict__ r,     // [4H, H] this direction's R, packed
               const float *__restrict__ bias,  // [4H] Wb + Rb, packed
               float *output,                   // this direction's first column of [batch, steps, 2H]
               int batch, int steps, int direction,
               float *trace, const int *trace_slot, int trace_slots) // a traced forward's buffer, or NULL
{
    __shared__ __align__(16) float h[H];
    __shared__ float dot[4 * H];
    const int b = blockIdx.x; // the batch row
    const int j = threadIdx.x;
    const int u = threadIdx.x; // the unit of a cell thread (u < H)
    if (b >= batch || blockDim.x != 4 * H)
        return; // the plan launches exactly batch blocks of 4H threads

    float gate_bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (u < H) {
        h[u] = 0.0f;
        for (int p = 0; p < 4; p++)
            gate_bias[p] = bias[packed_row(u, p)];
    }
    float c = 0.0f;
    __syncthreads();

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        dot[j] = row_dot(r + (size_t)j * H, h);
        __syncthreads();
        if (u < H) {
            const float *gx = gates + ((size_t)b * steps + t) * 4 * H;
            float4 x4 = make_float4(gx[packed_row(u, SPK_GATE_I)], gx[packed_row(u, SPK_GATE_F)],
                                    gx[packed_row(u, SPK_GATE_C)], gx[packed_row(u, SPK_GATE_O)]);
            float4 b4 = make_float4(gate_bias[SPK_GATE_I], gate_bias[SPK_GATE_F], gate_bias[SPK_GATE_C],
                                    gate_bias[SPK_GATE_O]);
            const float hv = spk_lstm_cell(x4, dot[packed_row(u, SPK_GATE_I)], dot[packed_row(u, SPK_GATE_F)],
                                           dot[packed_row(u, SPK_GATE_C)], dot[packed_row(u, SPK_GATE_O)], b4, c);
            output[((size_t)b * steps + t) * (2 * H) + u] = hv;
            h[u] = hv;
            if (trace != nullptr && trace_slot[t] >= 0) {
                const int e = trace_slot[t];
                trace[((size_t)e * batch + b) * H + u] = hv;
                trace[((size_t)(trace_slots + e) * batch + b) * H + u] = c;
            }
        }
        __syncthreads();
    }
}
