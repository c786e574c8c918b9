// A recurrence kernel to copy: the smallest complete kernel of the contract
// (docs/kernels.md), to be renamed and changed. Copy this file and
// skeleton.lua beside it, rename both (and `entry`, `name` in the kernel
// file), then check and run it:
//
//   build/spk run experiments/custom_kernel.lua --kernel my_kernel.lua --quick
//
// As it stands: one block per batch row and direction, one thread per hidden
// unit. Each step thread u forms its unit's four gate dot products R[row] . h
// (h in shared memory, R from global memory), then its cell with spk's cell
// (kernels/lstm_cell.cuh), and writes h. Nothing waits for another block, so
// it needs no co-residency, no state and no status (a kernel whose blocks
// wait on each other takes `state`, `status` and `timeout_ns`: docs/kernels.md,
// "The rules a kernel keeps").
//
// Every place to change is marked EDIT. The rest is the contract: the plan's
// defines, the output and trace layouts, and a fixed summation order (the
// same bits every run).
//
// The step timeline (docs/timeline.md): the kernel stamps its two stages,
// "dot" and "cell", with the macros of kernels/spk_timeline.cuh. With
// SPK_TIMELINE undefined (every normal build) they are nothing at all; built
// with SPK_TIMELINE=1 (what plan:forward(x, {timeline = ...}) runs) the kernel
// takes the timeline's seven parameters after its own and records them. The
// stage names live in skeleton.lua's timeline = {stages = ...}, which the
// plan checks against STAGES as the timeline build compiles.

#include "lstm_cell.cuh"
#include "spk_timeline.cuh"

// The plan defines these (the hidden size, where each gate sits in the packed
// order, and the layout); the defaults let the file compile on its own.
#ifndef SPK_HIDDEN
#define SPK_HIDDEN 128
#define SPK_GATE_I 0
#define SPK_GATE_F 1
#define SPK_GATE_C 2
#define SPK_GATE_O 3
#define SPK_PACK_ROWS 0
#endif

#define H SPK_HIDDEN
static_assert(H % 4 == 0 && H <= 1024, "H threads a block, whole float4 rows of R");

// The stages a step runs, in order (the marks SPK_TIMELINE_STAMP takes, from 1);
// skeleton.lua names them in the same order.
enum { STAGE_DOT = 1, STAGE_CELL = 2, STAGES = 2 };

// The packed row of unit u's gate at position p (0 .. 3), in W, R, the bias and the gates.
__device__ __forceinline__ int packed_row(int u, int p) { return SPK_PACK_ROWS ? p * H + u : u * 4 + p; }

// R[row] . h in one fixed order: four FMA chains over float4 groups, added
// (a0 + a1) + (a2 + a3). EDIT: any order is fine, as long as it is fixed.
__device__ __forceinline__ float row_dot(const float *r_row, const float *h)
{
    const float4 *r4 = reinterpret_cast<const float4 *>(r_row);
    const float4 *h4 = reinterpret_cast<const float4 *>(h);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int k = 0; k < H / 4; k++) {
        const float4 w = __ldg(r4 + k), x = h4[k];
        a0 = fmaf(w.x, x.x, a0);
        a1 = fmaf(w.y, x.y, a1);
        a2 = fmaf(w.z, x.z, a2);
        a3 = fmaf(w.w, x.w, a3);
    }
    return (a0 + a1) + (a2 + a3);
}

// EDIT: the name (skeleton.lua's `entry`) and, if the kernel needs more, the
// parameters: any of the contract's, in the order skeleton.lua's `args` lists.
extern "C" __global__ void __launch_bounds__(H)
lstm_skeleton(const float *__restrict__ gates, // [batch * steps, 4H]: x·Wᵀ of this direction, row b * steps + t
              const float *__restrict__ r,     // [4H, H]: this direction's R, rows packed
              const float *__restrict__ bias,  // [4H]: Wb + Rb, packed
              float *output,                   // this direction's first column of y [batch, steps, 2H]
              int batch, int steps, int direction,
              float *trace, const int *trace_slot, int trace_slots // a traced forward's buffer, else NULL
              SPK_TIMELINE_PARAMS)
{
    __shared__ __align__(16) float h[H];
    const int b = blockIdx.x;  // the batch row (one block each: skeleton.lua's launch rule)
    const int u = threadIdx.x; // the hidden unit
    if (b >= batch || blockDim.x != H)
        return;
    SPK_TIMELINE_SETUP(STAGES, direction, b, u);

    h[u] = 0.0f; // h and c start at zero
    float c = 0.0f;
    float4 b4 = make_float4(bias[packed_row(u, SPK_GATE_I)], bias[packed_row(u, SPK_GATE_F)],
                            bias[packed_row(u, SPK_GATE_C)], bias[packed_row(u, SPK_GATE_O)]);
    __syncthreads();

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step; // the time position this step computes
        SPK_TIMELINE_START(step);
        // stage "dot": the four gates' R . h of unit u (EDIT: the part most worth making faster)
        const float pi = row_dot(r + (size_t)packed_row(u, SPK_GATE_I) * H, h);
        const float pf = row_dot(r + (size_t)packed_row(u, SPK_GATE_F) * H, h);
        const float pc = row_dot(r + (size_t)packed_row(u, SPK_GATE_C) * H, h);
        const float po = row_dot(r + (size_t)packed_row(u, SPK_GATE_O) * H, h);
        __syncthreads(); // every thread has read h before any writes it
        SPK_TIMELINE_STAMP(step, STAGE_DOT);
        // stage "cell": spk's cell from the gates [i, f, c, o] (c updated in place), then h out
        const float *gx = gates + ((size_t)b * steps + t) * 4 * H;
        const float4 x4 = make_float4(gx[packed_row(u, SPK_GATE_I)], gx[packed_row(u, SPK_GATE_F)],
                                      gx[packed_row(u, SPK_GATE_C)], gx[packed_row(u, SPK_GATE_O)]);
        const float hv = spk_lstm_cell(x4, pi, pf, pc, po, b4, c);
        output[((size_t)b * steps + t) * (2 * H) + u] = hv; // y[b, t, u] of this direction's half
        h[u] = hv;
        if (trace != nullptr && trace_slot[t] >= 0) { // a traced forward: h and c at the traced times
            const int e = trace_slot[t];
            trace[((size_t)e * batch + b) * H + u] = hv;
            trace[((size_t)(trace_slots + e) * batch + b) * H + u] = c;
        }
        __syncthreads(); // h of this step complete before the next step reads it
        SPK_TIMELINE_STAMP(step, STAGE_CELL);
    }
}
