// A layer's input projections, streamed beside its recurrence: gates[d] =
// x · W[d]ᵀ for both directions, in FP32 FMAs, the steps in the order the
// direction's recurrence takes them, each group of SPK_GATES_READY_ROWS packed
// gate rows counted ready after every stage of steps (kernels/spk_gates_ready.cuh).
// A block is one group of one direction: grid (4H / SPK_GATES_READY_ROWS, 2),
// THREADS threads in HALVES halves of SPK_GATES_READY_ROWS * CHUNKS; thread
// (row, chunk) of a half holds its row's weights of every CHUNKS-th float4 of
// the input and sums them in order for X_ROWS rows of x at once (independent
// chains), then the chunks' sums meet in a butterfly of shuffles: a fixed
// order, so the bits repeat (another order than cuBLAS's GEMM: other bits,
// within FP32's bound). The halves take turns over a stage's groups of X_ROWS
// rows. x's rows of a stage (stage_steps steps of every batch row) come into
// shared memory by cp.async, RING - 1 stages ahead of the one summed, so a
// stage costs its sums and not the load's latency.
// The kernel is launched with an early start after the layer's recurrence,
// whose blocks let it be scheduled as soon as they all run: it never waits
// on the recurrence, which waits on the ready counts, so both run at once and
// the recurrence keeps the placement it has on an idle GPU.
// Macros (src/lstm/kernel_stack.c sets them): HIDDEN, INPUTS (a multiple of 4).
// Launch: grid (GROUPS, 2), THREADS threads, dynamic shared memory at least
// SPK_PROJECT_STREAM_RING stages of stage_steps * batch rows of INPUTS floats;
// stage_steps is the host's (src/lstm/kernel_stack.c:
// SPK_PROJECT_STREAM_STAGE_ROWS rows at least).

#ifndef HIDDEN
#define HIDDEN 128
#endif
#ifndef INPUTS
#define INPUTS 256
#endif
#include "spk_gates_ready.cuh"

#define THREADS SPK_PROJECT_STREAM_THREADS
#define HALVES 2
#define CHUNKS (THREADS / HALVES / SPK_GATES_READY_ROWS)
#define X_ROWS 8 /* rows of x a thread sums at once */
#define RING SPK_PROJECT_STREAM_RING
static_assert(CHUNKS == 8, "the chunks' butterfly below is three shuffles: 8 lanes a row");
#define FLOAT4S (INPUTS / 4)
#define PER_CHUNK ((FLOAT4S + CHUNKS - 1) / CHUNKS)
#define GROUPS (4 * HIDDEN / SPK_GATES_READY_ROWS)
static_assert(INPUTS % 4 == 0, "INPUTS must be a multiple of 4 (rows of x in float4)");
static_assert((4 * HIDDEN) % SPK_GATES_READY_ROWS == 0, "4 * HIDDEN must be whole groups of ready rows");

__device__ __forceinline__ void stage_copy16(float4 *to, const float4 *from)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(to)),
                 "l"(__cvta_generic_to_global(from))
                 : "memory");
}

// x's rows of stage `st` (steps st * stage_steps ..., every batch row, row i =
// step-in-stage * batch + b) into `stage`; one commit group.
__device__ __forceinline__ void load_stage(float4 *stage, const float4 *x4, int st, int stage_steps, int batch,
                                           int steps, int direction)
{
    const int s0 = st * stage_steps;
    const int rows = min(stage_steps, steps - s0) * batch;
    for (int i = (int)threadIdx.x; i < rows * FLOAT4S; i += THREADS) {
        const int row = i / FLOAT4S, k4 = i - row * FLOAT4S;
        const int s = s0 + row / batch, b = row - row / batch * batch;
        const int t = direction ? steps - 1 - s : s;
        stage_copy16(stage + i, x4 + ((size_t)b * steps + t) * FLOAT4S + k4);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
spk_lstm_project_stream(const float *__restrict__ x, // [batch, steps, INPUTS]
                        const float *__restrict__ w, // [2, 4H, INPUTS], rows in the recurrence's packing
                        float *gates,                // [2, batch * steps, 4H], row b * steps + t
                        unsigned *ready,             // [2, GROUPS]: steps done, zero at the start of the pass
                        int batch, int steps, int stage_steps)
{
    extern __shared__ float4 stages[]; // [RING][stage_steps * batch][FLOAT4S]
    const int direction = (int)blockIdx.y, group = (int)blockIdx.x;
    const int tid = (int)threadIdx.x, half = tid / (THREADS / HALVES), chunk = tid % CHUNKS;
    const int row = group * SPK_GATES_READY_ROWS + (tid % (THREADS / HALVES)) / CHUNKS;
    if (blockDim.x != THREADS || gridDim.x != GROUPS || gridDim.y != 2 || batch < 1 || steps < 1 || stage_steps < 1)
        return; // the recurrence's wait times out and reports it
    const float4 *w4 = reinterpret_cast<const float4 *>(w + ((size_t)direction * 4 * HIDDEN + row) * INPUTS);
    float4 wv[PER_CHUNK];
#pragma unroll
    for (int i = 0; i < PER_CHUNK; i++) {
        const int k4 = chunk + i * CHUNKS;
        wv[i] = k4 < FLOAT4S ? __ldg(w4 + k4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float *out = gates + (size_t)direction * batch * steps * 4 * HIDDEN + row;
    const int stage_floats4 = stage_steps * batch * FLOAT4S;
    const int count = (steps + stage_steps - 1) / stage_steps;
    // one commit group a stage (empty past the last), so waiting for all but the newest RING - 1 groups at
    // stage st means st's has landed
    for (int st = 0; st < RING - 1; st++)
        load_stage(stages + st * stage_floats4, x4, st < count ? st : count, stage_steps, batch, steps, direction);
    for (int st = 0; st < count; st++) {
        const float4 *stage = stages + (st % RING) * stage_floats4;
        const int ahead = st + RING - 1; // into the buffer the stage before this one freed
        load_stage(stages + (ahead % RING) * stage_floats4, x4, ahead < count ? ahead : count, stage_steps, batch,
                   steps, direction);
        asm volatile("cp.async.wait_group %0;" ::"n"(RING - 1) : "memory");
        __syncthreads(); // every thread's copies of this stage have landed
        const int s0 = st * stage_steps;
        const int rows = min(stage_steps, steps - s0) * batch;
        for (int i0 = half * X_ROWS; i0 < rows; i0 += HALVES * X_ROWS) {
            float acc[X_ROWS];
#pragma unroll
            for (int r = 0; r < X_ROWS; r++)
                acc[r] = 0.0f;
#pragma unroll
            for (int j = 0; j < PER_CHUNK; j++) {
                const int k4 = chunk + j * CHUNKS;
                if (k4 < FLOAT4S) {
#pragma unroll
                    for (int r = 0; r < X_ROWS; r++) {
                        const float4 v = stage[min(i0 + r, rows - 1) * FLOAT4S + k4]; // past `rows`: not stored
                        acc[r] = fmaf(wv[j].x, v.x, acc[r]);
                        acc[r] = fmaf(wv[j].y, v.y, acc[r]);
                        acc[r] = fmaf(wv[j].z, v.z, acc[r]);
                        acc[r] = fmaf(wv[j].w, v.w, acc[r]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < X_ROWS; r++) {
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], 4);
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], 2);
                acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], 1);
            }
            if (chunk == 0) {
                // row i of the stage is step s0 + i / batch, batch row i % batch: one division a group
                int s = s0 + i0 / batch, b = i0 - i0 / batch * batch;
#pragma unroll
                for (int r = 0; r < X_ROWS; r++) {
                    if (i0 + r < rows) {
                        const int t = direction ? steps - 1 - s : s;
                        out[((size_t)b * steps + t) * 4 * HIDDEN] = acc[r];
                    }
                    if (++b == batch) {
                        b = 0;
                        s++;
                    }
                }
            }
        }
        // Every thread's gates of the stage written, and its buffer free for the next load; the count's
        // release store after the barrier makes them visible with it (the barrier orders them before it).
        __syncthreads();
        if (tid == 0)
            spk_gates_ready_store(ready + direction * GROUPS + group, (unsigned)min(steps, s0 + stage_steps));
    }
}
