// The timeline demo: a small recurrence in the shape of a cluster LSTM step,
// instrumented with kernels/spk_timeline.cuh, so that the whole timeline
// (stamps, decode, statistics, critical path, Gantt) runs end to end on an
// sm_90 GPU before the built-in kernels are instrumented. It is a real
// computation (a GPU spec checks it against an f64 reference), not a timer
// loop, so its stages have the latencies of the real ones: an exchange of h
// through distributed shared memory, dot products from shared memory, a
// shuffle reduction, an activation, remote stores.
//
// Sizes: CLUSTER blocks (2, 4 or 8) a cluster, HIDDEN = SPK_TIMELINE_DEMO_HIDDEN
// units split UNITS = HIDDEN / CLUSTER a block, CHUNKS lanes a unit (each
// holds FLOAT4_PER_CHUNK float4 of the unit's weight row, the chunk layout of
// the LSTM kernels), so THREADS = UNITS * CHUNKS. Grid (CLUSTER, tiles, 2):
// blockIdx.y the tile of up to tile_rows batch rows, blockIdx.z the direction
// (the reverse one runs the steps from the last time position back).
//
// A step s (time t), per block, stages as kernels/timeline_demo_stages.cuh names them:
//  wait     barrier.cluster.wait.acquire: every block's h of step s - 1 has
//           landed in this block's h[s & 1]
//  dot      each lane: its chunk's partial dot product of every row, 4 FMA
//           chains over its float4 groups, (a0 + a1) + (a2 + a3)
//  reduce   xor shuffles over the unit's CHUNKS lanes (masks 1, 2, 4): every
//           lane ends with the same sum (IEEE addition is commutative)
//  cell     h = tanhf(sum + x[b][t][unit])
//  publish  lane 0 stores h to y; lanes g < CLUSTER store it into block g's
//           h[(s + 1) & 1] (st.shared::cluster)
// then, after the publish stamp, barrier.cluster.arrive.release and the next
// step's x load (one step ahead): the gap between steps.
// Double buffering with one cluster barrier a step, as in kernels/lstm_cluster.cu
// (its comment has the argument): block X writes h[(s + 1) & 1] of every
// block before arriving at the end of step s, and reads h[s & 1] at step s
// after its wait; the arrive before the loop and the wait after it pair the
// first wait and the last arrive, so no block leaves while a peer may still
// store into its shared memory, and no push lands before h is zeroed.
// The result: y[b][t][d * HIDDEN + unit] = h of unit at time t, direction d,
// with h = 0 before the first step of each direction.
#include "timeline_demo_stages.cuh"
#include "spk_timeline.cuh"

#ifndef CLUSTER
#define CLUSTER 4
#endif

#define HIDDEN SPK_TIMELINE_DEMO_HIDDEN
#define CHUNKS SPK_TIMELINE_DEMO_CHUNKS
#define MAX_ROWS SPK_TIMELINE_DEMO_MAX_ROWS
#define UNITS (HIDDEN / CLUSTER)
#define THREADS (UNITS * CHUNKS)
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#define FULL_MASK 0xffffffffu

static_assert(CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8, "CLUSTER must be 2, 4 or 8");
static_assert(HIDDEN % (4 * CHUNKS) == 0 && CHUNKS == 8, "HIDDEN must split into float4 groups of 8 chunks");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS (UNITS * CHUNKS) must be whole warps");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__device__ __forceinline__ unsigned demo_cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void demo_cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ __forceinline__ void demo_cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// h into the same word of block `rank`'s shared memory.
__device__ __forceinline__ void demo_store_rank(float *local, unsigned rank, float v)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"((unsigned)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

#define SPK_TIMELINE_DEMO_SUPPORTED 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
spk_timeline_demo(const float *__restrict__ x, // [batch, steps, HIDDEN]
                  const float *__restrict__ w, // [2, HIDDEN, HIDDEN]: row u of direction d, unit u's weights
                  float *y,                    // [batch, steps, 2 * HIDDEN]
                  int batch, int steps, int tile_rows SPK_TIMELINE_PARAMS)
{
#ifdef SPK_TIMELINE_DEMO_SUPPORTED
    __shared__ __align__(16) float h_buffers[2][MAX_ROWS][HIDDEN];
    const int tid = (int)threadIdx.x;
    const int direction = (int)blockIdx.z;
    const int row0 = (int)blockIdx.y * tile_rows;
    const int rows = min(tile_rows, batch - row0);
    // Uniform over the cluster (arguments and the tile), so no block leaves a peer at a barrier.
    if (rows < 1 || tile_rows > MAX_ROWS || steps < 1 || gridDim.x != CLUSTER || blockDim.x != THREADS)
        return;
    const unsigned rank = demo_cluster_rank();
    const int q = tid % CHUNKS;
    const int unit = (int)rank * UNITS + tid / CHUNKS;
    SPK_TIMELINE_SETUP(SPK_TIMELINE_DEMO_STAGE_COUNT, direction, (int)(blockIdx.x + gridDim.x * blockIdx.y), tid);

    float4 weights[FLOAT4_PER_CHUNK];
    {
        const float4 *row = reinterpret_cast<const float4 *>(w + ((size_t)direction * HIDDEN + unit) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            weights[k] = row[k * CHUNKS + q];
    }
    for (int i = tid; i < 2 * MAX_ROWS * HIDDEN; i += THREADS)
        (&h_buffers[0][0][0])[i] = 0.0f;
    float xv[MAX_ROWS];
#pragma unroll
    for (int b = 0; b < MAX_ROWS; b++) {
        const int t = direction ? steps - 1 : 0;
        xv[b] = b < rows ? __ldg(x + ((size_t)(row0 + b) * steps + t) * HIDDEN + unit) : 0.0f;
    }
    demo_cluster_arrive();

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const bool last = step + 1 == steps;
        SPK_TIMELINE_START(step);

        demo_cluster_wait();
        SPK_TIMELINE_STAMP(step, SPK_TIMELINE_DEMO_WAIT + 1);

        float sum[MAX_ROWS];
#pragma unroll
        for (int b = 0; b < MAX_ROWS; b++) {
            sum[b] = 0.0f;
            if (b < rows) {
                const float4 *h4 = reinterpret_cast<const float4 *>(h_buffers[parity][b]);
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
                for (int k = 0; k < FLOAT4_PER_CHUNK; k++) {
                    const float4 hk = h4[k * CHUNKS + q];
                    a0 = fmaf(hk.x, weights[k].x, a0);
                    a1 = fmaf(hk.y, weights[k].y, a1);
                    a2 = fmaf(hk.z, weights[k].z, a2);
                    a3 = fmaf(hk.w, weights[k].w, a3);
                }
                sum[b] = (a0 + a1) + (a2 + a3);
            }
        }
        SPK_TIMELINE_STAMP(step, SPK_TIMELINE_DEMO_DOT + 1);

#pragma unroll
        for (int b = 0; b < MAX_ROWS; b++)
            if (b < rows) {
#pragma unroll
                for (int mask = 1; mask < CHUNKS; mask <<= 1)
                    sum[b] += __shfl_xor_sync(FULL_MASK, sum[b], mask);
            }
        SPK_TIMELINE_STAMP(step, SPK_TIMELINE_DEMO_REDUCE + 1);

        float hv[MAX_ROWS];
#pragma unroll
        for (int b = 0; b < MAX_ROWS; b++)
            hv[b] = tanhf(sum[b] + xv[b]);
        SPK_TIMELINE_STAMP(step, SPK_TIMELINE_DEMO_CELL + 1);

#pragma unroll
        for (int b = 0; b < MAX_ROWS; b++) {
            if (b < rows) {
                if (q == 0)
                    y[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + direction * HIDDEN + unit] = hv[b];
                if (!last && q < CLUSTER)
                    demo_store_rank(&h_buffers[parity ^ 1][b][unit], (unsigned)q, hv[b]);
            }
        }
        // published before the arrive, so a waiter never wakes before the last publish stamp
        SPK_TIMELINE_STAMP(step, SPK_TIMELINE_DEMO_PUBLISH + 1);
        demo_cluster_arrive();

        if (!last) {
            const int t_next = direction ? t - 1 : t + 1;
#pragma unroll
            for (int b = 0; b < MAX_ROWS; b++)
                if (b < rows)
                    xv[b] = __ldg(x + ((size_t)(row0 + b) * steps + t_next) * HIDDEN + unit);
        }
    }
    demo_cluster_wait();
#endif
}
