// The thread-block-cluster LSTM recurrence for sm_90 (Hopper): one cluster
// per (batch tile, direction), both directions in one launch, h exchanged
// through distributed shared memory with one cluster barrier per step.
// Compiled by NVRTC; every size is a macro:
//   HIDDEN          hidden units H (16 .. 256)
//   CLUSTER         blocks per cluster (1, 2, 4, 8; 16 needs the non-portable
//                   cluster size attribute, which the host sets)
//   THREADS         threads per block = GATE_ROWS * CHUNKS, CHUNKS (k-chunks per
//                   gate row) 2, 4 or 8, whole warps, at most 1024
//   TILE_ROWS       the most batch rows a tile carries (1 .. 32); the launch's
//                   tile_rows (<= TILE_ROWS) sizes the shared memory
//   WEIGHTS_SHARED  0: each thread keeps its slice of R in registers;
//                   1: the block's slice of R lives in shared memory
//   ROW_GROUP       rows whose partial dots a thread forms at once (1, 2, 4,
//                   8, at most CHUNKS; default CHUNKS): fewer registers when
//                   smaller, fewer shuffles when larger; the results are the
//                   same bits for every value
//   MIN_BLOCKS      __launch_bounds__' blocks per SM (register budget)
//
// Work split. Grid (CLUSTER, tiles, 2), cluster (CLUSTER, 1, 1): blockIdx.z is
// the direction, blockIdx.y the tile, and the cluster rank g (= blockIdx.x)
// owns the UNITS = HIDDEN / CLUSTER hidden units g*UNITS .. g*UNITS+UNITS-1 of
// every row of the tile: GATE_ROWS = 4*UNITS packed rows of R (row u*4 + p is
// gate p of unit u, gates [i, f, c, o]). Thread t takes gate row j = t / CHUNKS
// and k-chunk q = t % CHUNKS; chunk q holds the float4 groups q, q + CHUNKS,
// q + 2*CHUNKS, ... of the row, so the CHUNKS lanes of a gate row read
// 4*CHUNKS consecutive floats of an h row (no bank conflict; the other gate
// rows of the warp read the same words: broadcast). This is the persistent
// kernel's split, so with the same CHUNKS the dot products are the same
// instructions in the same order (bitwise equal results).
//
// Per step s (parity p = s & 1), every block:
//  1. dot products: for groups of G = ROW_GROUP rows, each thread forms its G
//     partial dots (4 FMA chains over its float4 groups, (a0 + a1) + (a2 + a3))
//     from its own shared copy h[p]; a reduce-scatter over the chunk lanes
//     (xor masks 1, 2, 4: per mask half of the vector goes to the partner)
//     leaves lane q with the full sum of one row; rows left over (fewer than G)
//     go one at a time through the plain xor all-reduce. Both trees add the
//     same pairs in the same order: ((q0+q1)+(q2+q3))+((q4+q5)+(q6+q7)), and
//     IEEE addition is commutative, so the sum of a row does not depend on the
//     lane that finishes it, on G, or on the tile height. The sums go to the
//     block's `pre` buffer [tile_rows][GATE_ROWS (+4 padding: no bank conflict)].
//  2. __syncthreads, then cell (b, u) = thread (b*UNITS + u) mod THREADS (all
//     threads share the activations): pre-activations + gates_x (prefetched
//     during the previous barrier) + bias, spk_lstm_cell (kernels/lstm_cell.cuh,
//     the persistent kernel's cell), c in a register, h to the output and,
//     unless this is the last step, PUSHED into h[p^1][b][unit] of every block
//     of the cluster (st.shared::cluster through mapa; the own block included).
//  3. barrier.cluster.arrive.release; the next step's gates_x loads;
//     barrier.cluster.wait.acquire (skipped after the last step).
//
// Why one barrier per step suffices (double buffering). Let B(s) be the
// cluster barrier ending step s; every thread of every block arrives at B(s)
// after all of its step-s accesses (program order; arrive has release
// semantics at cluster scope) and leaves it before any of its step-s+1
// accesses (wait has acquire semantics).
//  - Read after write: block X writes h[(s+1)&1] of block Y at step s, before X
//    arrives at B(s); Y reads h[(s+1)&1] at step s+1, after Y waited on B(s).
//    Release/acquire through B(s) makes X's stores visible to Y's loads.
//  - Write after read: Y reads h[(s+1)&1] at step s+1 (before arriving at
//    B(s+1)); the next write of that buffer is X's push at step s+2, issued
//    after X waited on B(s+1), which completes only once Y arrived at B(s+1),
//    i.e. after Y's reads. Nobody writes h[(s+1)&1] at step s+1: pushes of step
//    s+1 go to h[s&1], which nobody reads at step s+1 (reads use h[(s+1)&1]).
//  - Write after write: pushes into h[q] happen at steps of one parity only,
//    separated by a barrier, and at each step the blocks write disjoint words
//    (their own units' columns).
//  - The `pre` buffer is block-local: written in phase 1 of step s+1 only
//    after every thread of the block left B(s), i.e. finished phase 2 of s.
// So no block can be more than one step ahead of another and one barrier per
// step orders every access. Before step 0 each block zeroes both of its h
// buffers and the cluster synchronises once (no push may land in a buffer
// before it is zeroed, and DSMEM may only be touched once every block of the
// cluster is running). The last step pushes nothing, so after B(steps-2) no
// block touches another's shared memory and blocks may exit freely.
//
// Never hanging. A cluster barrier waits only for the blocks of its own
// cluster, which the hardware schedules together; blocks of different
// clusters never wait on each other, so a grid with more clusters than fit
// at once just runs in waves. Every thread executes the same sequence of
// barriers: the only early exit (a bad geometry, reported in *status) depends
// on kernel arguments and the tile, which the whole cluster shares. No value
// (NaN, inf) reaches control flow.

#ifndef HIDDEN
#define HIDDEN 128
#endif
#ifndef CLUSTER
#define CLUSTER 8
#endif
#ifndef THREADS
#define THREADS 512
#endif
#ifndef TILE_ROWS
#define TILE_ROWS 32
#endif
#ifndef WEIGHTS_SHARED
#define WEIGHTS_SHARED 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#define UNITS (HIDDEN / CLUSTER)
#define GATE_ROWS (4 * UNITS)
#define CHUNKS (THREADS / GATE_ROWS)
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#ifndef ROW_GROUP
#define ROW_GROUP CHUNKS
#endif
#define PRE_STRIDE (GATE_ROWS + 4)
#define CELLS ((TILE_ROWS * UNITS + THREADS - 1) / THREADS)
#define STATUS_BAD_GEOMETRY 2u
#define STATUS_NEEDS_SM90 3u
#define FULL_MASK 0xffffffffu

static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16,
              "CLUSTER must be 1, 2, 4, 8 or 16");
static_assert(HIDDEN % CLUSTER == 0, "HIDDEN must be a multiple of CLUSTER");
static_assert(THREADS % GATE_ROWS == 0 && (CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8),
              "THREADS must be GATE_ROWS * CHUNKS (GATE_ROWS = 4 * HIDDEN / CLUSTER) with CHUNKS 2, 4 or 8");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be whole warps, at most 1024");
static_assert(HIDDEN % (4 * CHUNKS) == 0, "HIDDEN must split into float4 groups per chunk (4 * CHUNKS)");
static_assert(TILE_ROWS >= 1 && TILE_ROWS <= 32, "TILE_ROWS must be 1 .. 32");
static_assert((ROW_GROUP == 1 || ROW_GROUP == 2 || ROW_GROUP == 4 || ROW_GROUP == 8) && ROW_GROUP <= CHUNKS,
              "ROW_GROUP must be 1, 2, 4 or 8 and at most CHUNKS");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS * THREADS <= 2048, "MIN_BLOCKS must be 1 .. 2048 / THREADS");
static_assert(4 * ((WEIGHTS_SHARED ? GATE_ROWS * HIDDEN : 0) + 2 * TILE_ROWS * HIDDEN + TILE_ROWS * PRE_STRIDE) <=
                  227 * 1024,
              "shared memory (weights, two h buffers, pre-activations) must fit 227 KiB");

#include "lstm_cell.cuh"

// Below sm_90 (the file still compiles there, like every kernel in kernels/)
// the entry only reports STATUS_NEEDS_SM90; the host never launches it there.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// ---- cluster primitives (PTX ISA 7.8, sm_90) -------------------------------

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_blocks()
{
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

__device__ __forceinline__ unsigned dynamic_smem_bytes()
{
    unsigned n;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// A shared::cta address of this block mapped to the same offset in block `rank`.
__device__ __forceinline__ unsigned map_rank(unsigned cta_address, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(cta_address), "r"(rank));
    return remote;
}

__device__ __forceinline__ void store_cluster(unsigned address, float v)
{
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}

// ---- dot products --------------------------------------------------------

#if WEIGHTS_SHARED
typedef const float4 *weight_slice; // the block's R in shared memory, [FLOAT4_PER_CHUNK][THREADS]
#define WEIGHT(k) (w[(k) * THREADS + threadIdx.x])
#else
typedef const float4 (&weight_slice)[FLOAT4_PER_CHUNK];
#define WEIGHT(k) (w[k])
#endif

// The G rows b0 .. b0+G-1 of this thread's gate row: G partial dots over the
// thread's chunk, then the reduce-scatter / all-reduce over the chunk lanes.
// Lane q < G of the gate row writes the full sum of row b0 + e(q).
template <int G>
__device__ __forceinline__ void row_group(weight_slice w, const float *h, float *pre, int b0, int j, int q)
{
    float v[G];
#pragma unroll
    for (int r = 0; r < G; r++) {
        const float4 *h4 = reinterpret_cast<const float4 *>(h + (b0 + r) * HIDDEN);
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++) {
            const float4 x = h4[k * CHUNKS + q];
            const float4 m = WEIGHT(k);
            a0 = fmaf(x.x, m.x, a0);
            a1 = fmaf(x.y, m.y, a1);
            a2 = fmaf(x.z, m.z, a2);
            a3 = fmaf(x.w, m.w, a3);
        }
        v[r] = (a0 + a1) + (a2 + a3);
    }
    int e = 0;
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
            e += upper ? half : 0;
            n = half;
        } else {
            v[0] += __shfl_xor_sync(FULL_MASK, v[0], mask);
        }
    }
    if (q < G)
        pre[(b0 + e) * PRE_STRIDE + j] = v[0];
}

// ---- the recurrence ---------------------------------------------------------

#define SPK_CLUSTER_SUPPORTED 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
spk_lstm_cluster(const float *__restrict__ gates, // [2, batch * steps, 4H]: x·Wᵀ, row b*steps + t
                 const float *__restrict__ r,     // [2, 4H, H] packed
                 const float *__restrict__ bias,  // [2, 4H] packed, Wb + Rb
                 float *output,                   // [batch, steps, 2H]
                 unsigned *status,                // 0, or why the launch refused to run
                 int batch, int steps, int tile_rows)
{
#ifndef SPK_CLUSTER_SUPPORTED
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
        atomicCAS(status, 0u, STATUS_NEEDS_SM90);
#else
    extern __shared__ float4 smem4[];
    const int tid = threadIdx.x;
    const int direction = blockIdx.z;
    const int row0 = blockIdx.y * tile_rows;
    const int rows = min(tile_rows, batch - row0);
    const unsigned rank = cluster_rank();

    // Shared memory: [weights], h[2][tile_rows][H], pre[tile_rows][PRE_STRIDE].
    const int weight_floats = WEIGHTS_SHARED ? GATE_ROWS * HIDDEN : 0;
    const unsigned need = 4u * (unsigned)(weight_floats + 2 * tile_rows * HIDDEN + tile_rows * PRE_STRIDE);
    // Uniform over the cluster (arguments, the tile, the cluster shape), so an
    // early exit never leaves a peer waiting at a barrier.
    if (cluster_blocks() != CLUSTER || blockDim.x != THREADS || gridDim.x != CLUSTER || gridDim.z != 2 ||
        tile_rows < 1 || tile_rows > TILE_ROWS || rows < 1 || steps < 1 || dynamic_smem_bytes() < need) {
        if (tid == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    float *smem = reinterpret_cast<float *>(smem4);
    float *h_buffers = smem + weight_floats;
    float *pre = h_buffers + 2 * tile_rows * HIDDEN;
    const int h_floats = tile_rows * HIDDEN;

    gates += (size_t)direction * batch * steps * 4 * HIDDEN;
    r += (size_t)direction * 4 * HIDDEN * HIDDEN;
    bias += (size_t)direction * 4 * HIDDEN;
    output += (size_t)direction * HIDDEN;

    const int q = tid % CHUNKS;
    const int j = tid / CHUNKS;
    const int first_unit = (int)rank * UNITS;

    // This thread's slice of R, for the whole sequence.
#if WEIGHTS_SHARED
    float4 *w = smem4;
    {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(rank * GATE_ROWS + j) * HIDDEN);
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            w[k * THREADS + tid] = row[k * CHUNKS + q];
    }
#else
    float4 w[FLOAT4_PER_CHUNK];
    {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(rank * GATE_ROWS + j) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            w[k] = row[k * CHUNKS + q];
    }
#endif

    // Cells of this thread: cell i = tid + k*THREADS is (row i / UNITS, unit i % UNITS).
    float c[CELLS];
    float4 gx[CELLS], b4[CELLS];
    unsigned push[CELLS]; // shared::cta address of the cell's word in h[0]
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
#pragma unroll
    for (int k = 0; k < CELLS; k++) {
        const int i = tid + k * THREADS;
        const int b = i / UNITS, u = i % UNITS;
        c[k] = 0.0f;
        gx[k] = b4[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        push[k] = (unsigned)__cvta_generic_to_shared(h_buffers + b * HIDDEN + first_unit + u);
        if (b < rows) {
            b4[k] = reinterpret_cast<const float4 *>(bias)[first_unit + u];
            const int t = direction ? steps - 1 : 0;
            gx[k] = __ldg(gates4 + ((size_t)(row0 + b) * steps + t) * HIDDEN + first_unit + u);
        }
    }

    // Zero h (rows past `rows` stay zero); no push may land before this.
    for (int i = tid; i < 2 * h_floats; i += THREADS)
        h_buffers[i] = 0.0f;
    cluster_arrive();
    cluster_wait();

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const float *h = h_buffers + parity * h_floats;

        // 1. gate sums of every row of the tile, from the local copy of h.
        int b0 = 0;
        for (; b0 + ROW_GROUP <= rows; b0 += ROW_GROUP)
            row_group<ROW_GROUP>(w, h, pre, b0, j, q);
        for (; b0 < rows; b0++)
            row_group<1>(w, h, pre, b0, j, q);
        __syncthreads();

        // 2. cells: activations, c, h; h to the output and to every block.
        const bool last = step + 1 == steps;
#pragma unroll
        for (int k = 0; k < CELLS; k++) {
            const int i = tid + k * THREADS;
            const int b = i / UNITS, u = i % UNITS;
            if (b < rows) {
                const float4 s = *reinterpret_cast<const float4 *>(pre + b * PRE_STRIDE + u * 4);
                const float hv = spk_lstm_cell(gx[k], s.x, s.y, s.z, s.w, b4[k], c[k]);
                output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv;
                if (!last) {
                    const unsigned local = push[k] + (unsigned)((parity ^ 1) * h_floats * 4);
#pragma unroll
                    for (unsigned g = 0; g < CLUSTER; g++)
                        store_cluster(map_rank(local, g), hv);
                }
            }
        }
        if (last)
            break;

        // 3. one cluster barrier; the next inputs load while it completes.
        cluster_arrive();
        const int t_next = direction ? t - 1 : t + 1;
#pragma unroll
        for (int k = 0; k < CELLS; k++) {
            const int i = tid + k * THREADS;
            const int b = i / UNITS, u = i % UNITS;
            if (b < rows)
                gx[k] = __ldg(gates4 + ((size_t)(row0 + b) * steps + t_next) * HIDDEN + first_unit + u);
        }
        cluster_wait();
    }
#endif
}
