// The thread-block-cluster LSTM recurrence for sm_90 (Hopper), the baseline:
// the plain form every other cluster variant is checked against, kept
// readable and unchanged. One cluster per (batch tile, direction), both
// directions in one launch; each block owns HIDDEN / CLUSTER hidden units of
// every row of its tile and keeps a copy of h in shared memory. A step: every
// thread forms its gate row's sums (its k-chunk, then the reduce-scatter over
// the chunk lanes) into the block's `pre` buffer; a block barrier; each cell
// (row, unit) finishes in one thread, which stores its h to the output and
// into every block of the cluster (scalar DSMEM stores); one cluster barrier
// (arrive with release, wait with acquire) ends the step while the next
// step's x·Wᵀ loads. docs/design.md has the work split and why one barrier a
// step orders every access. Compiled by NVRTC for kernel.push "scalar"; the
// macros (HIDDEN, CLUSTER, THREADS, TILE_ROWS, ROW_GROUP, MIN_BLOCKS) come
// from src/lstm/cluster.c's option table, the other options at their plain
// values. The same bits as kernels/lstm_cluster.cu and the persistent kernel
// with the same chunk split. SPK_TIMELINE 1 is the timeline build: the stage
// boundaries of chosen steps and blocks stamped (kernels/spk_timeline.cuh;
// the stages: kernels/lstm_timeline_stages.cuh, a step from one publish to
// the next).

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
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef PUSH
#define PUSH 0
#endif
#ifndef GATE_BLOCK
#define GATE_BLOCK 1
#endif
#ifndef GATES_AHEAD
#define GATES_AHEAD 1
#endif
#ifndef ROW_PHASES
#define ROW_PHASES 1
#endif
#ifndef EARLY_GATES
#define EARLY_GATES 0
#endif
#ifndef CELL
#define CELL 0
#endif
static_assert(PUSH == 0 && GATE_BLOCK == 1 && GATES_AHEAD == 1 && ROW_PHASES == 1 && EARLY_GATES == 0 && CELL == 0,
              "the baseline has scalar pushes (PUSH 0), one gate row a thread, the gates one step ahead, one row "
              "phase, the reference cell");

#define UNITS (HIDDEN / CLUSTER)
#define GATE_ROWS (4 * UNITS)
#define CHUNKS (THREADS / (GATE_ROWS / GATE_BLOCK))
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#ifndef ROW_GROUP
#define ROW_GROUP CHUNKS
#endif
#define PRE_STRIDE (GATE_ROWS + 4)
#define CELLS ((TILE_ROWS * UNITS + THREADS - 1) / THREADS)
#define SLOTS CELLS /* cells a thread owns: cell tid + k * THREADS for k < SLOTS */
#include "spk_status.cuh" /* STATUS_*: the codes the host reports */
#define FULL_MASK 0xffffffffu
#define CLUSTER_TIMELINE_STAGES SPK_CLUSTER_BASELINE_STAGE_COUNT /* the timeline build's */
#define MARK(s) (1 + SPK_CLUSTER_BASELINE_##s)

static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16,
              "CLUSTER must be 1, 2, 4, 8 or 16");
static_assert(HIDDEN % CLUSTER == 0, "HIDDEN must be a multiple of CLUSTER");
static_assert(THREADS % GATE_ROWS == 0 && (CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8),
              "THREADS must be GATE_ROWS * CHUNKS (GATE_ROWS = 4 * HIDDEN / CLUSTER), CHUNKS 2, 4 or 8");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be whole warps, at most 1024");
static_assert(HIDDEN % (4 * CHUNKS) == 0, "HIDDEN must split into float4 groups per chunk (4 * CHUNKS)");
static_assert(TILE_ROWS >= 1 && TILE_ROWS <= 32, "TILE_ROWS must be 1 .. 32");
static_assert((ROW_GROUP == 1 || ROW_GROUP == 2 || ROW_GROUP == 4 || ROW_GROUP == 8) && ROW_GROUP <= CHUNKS,
              "ROW_GROUP must be 1, 2, 4 or 8 and at most CHUNKS");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS * THREADS <= 2048, "MIN_BLOCKS must be 1 .. 2048 / THREADS");
static_assert(4 * (2 * TILE_ROWS * HIDDEN + TILE_ROWS * PRE_STRIDE) <= 227 * 1024,
              "shared memory (two h buffers, pre-activations) must fit 227 KiB");

#include "lstm_cell.cuh"
#include "lstm_reduce.cuh"
#include "lstm_timeline_stages.cuh"
#include "spk_timeline.cuh"

// Below sm_90 (the file still compiles there, like every kernel in kernels/)
// the entry only reports STATUS_NEEDS_SM90; the host never launches it there.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

#include "cluster_sync.cuh"
#include "cluster_dots.cuh"

// The `pre` form: lane q < G of gate row j writes its row's sum.
template <int G>
__device__ __forceinline__ void row_group(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h, float *pre, int b0,
                                          int j, int q SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(CLUSTER_TIMELINE_STAGES);
    const float s = row_sums<G>(w, h, b0, q ROW_SUMS_TIMELINE_ARGS(spk_timeline_step, MARK(DOT)));
    if (q < G)
        pre[(b0 + spk_scatter_row<G, CHUNKS>(q)) * PRE_STRIDE + j] = s;
    SPK_TIMELINE_STAMP(spk_timeline_step, MARK(REDUCE));
}

// ---- the recurrence ---------------------------------------------------------

// Stage 1: the gate sums of every row of the tile, from this block's copy of h
// (the timeline build: each row group stamps dot and reduce, the last one's kept).
__device__ __forceinline__ void dots_to_pre(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h, float *pre, int rows,
                                            int j, int q SPK_TIMELINE_FN_PARAMS)
{
    int b0 = 0;
    for (; b0 + ROW_GROUP <= rows; b0 += ROW_GROUP)
        row_group<ROW_GROUP>(w, h, pre, b0, j, q SPK_TIMELINE_FN_ARGS(spk_timeline_step));
    for (; b0 < rows; b0++)
        row_group<1>(w, h, pre, b0, j, q SPK_TIMELINE_FN_ARGS(spk_timeline_step));
}

// The cells a thread owns: cell i = tid + k * THREADS is (row i / UNITS, unit
// i % UNITS); x·Wᵀ of (row b, unit u) of this block at time t. (Macros over
// the kernel's names: a lambda or function here changes the codegen.)
#define SLOT_ROW(k) ((tid + (k) * THREADS) / UNITS)
#define SLOT_UNIT(k) ((tid + (k) * THREADS) % UNITS)
#define SLOT_OWNED(k) (SLOT_ROW(k) < rows)
#define SLOT_STORES(k) SLOT_OWNED(k)
#define GATES_AT(b, u, t) (gates4 + ((size_t)(row0 + (b)) * steps + (t)) * HIDDEN + first_unit + (u))

// Stage 2, after the block barrier and the cells: slot k's h (hv) to the
// output and, unless this is the last step, into the next h buffer
// (next_offset) of every block of the cluster, scalar DSMEM stores. (One
// slot a call, the kernel looping: the array by reference gives other code.)
__device__ __forceinline__ void push_h(int k, int next_offset, bool last, int t, int steps, int row0, int rows,
                                       int first_unit, int tid, float *h_buffers, float hv, float *output)
{
    if (SLOT_OWNED(k)) {
        const int b = SLOT_ROW(k), u = SLOT_UNIT(k);
        if (SLOT_STORES(k))
            output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv;
        if (!last) {
            const unsigned local =
                (unsigned)__cvta_generic_to_shared(h_buffers + next_offset + b * HIDDEN + first_unit + u);
#pragma unroll
            for (unsigned g = 0; g < CLUSTER; g++)
                store_cluster(map_rank(local, g), hv);
        }
    }
}

#define SPK_CLUSTER_SUPPORTED 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
spk_lstm_cluster(const float *__restrict__ gates, // [2, batch * steps, 4H]: x·Wᵀ, row b*steps + t
                 const float *__restrict__ r,     // [2, 4H, H] packed
                 const float *__restrict__ bias,  // [2, 4H] packed, Wb + Rb
                 float *output,                   // [batch, steps, 2H]
                 unsigned *status,                // 0, or why the launch refused to run
                 int batch, int steps, int tile_rows SPK_TIMELINE_PARAMS)
{
#ifndef SPK_CLUSTER_SUPPORTED
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
        atomicCAS(status, 0u, STATUS_NEEDS_SM90);
#else
    extern __shared__ float4 block_smem4[];
    const int tid = (int)threadIdx.x;
    const int direction = (int)blockIdx.z;
    const int row0 = blockIdx.y * tile_rows;
    const int rows = min(tile_rows, batch - row0);
    const unsigned rank = cluster_rank();

    // Shared memory: h[2][tile_rows][H], pre[tile_rows][PRE_STRIDE] (src/lstm/cluster.c sizes it the same way).
    const unsigned need = 4u * (unsigned)(2 * tile_rows * HIDDEN + tile_rows * PRE_STRIDE);
    // Uniform over the cluster (arguments, the tile, the cluster shape), so an
    // early exit never leaves a peer waiting at a barrier.
    if (cluster_blocks() != CLUSTER || blockDim.x != THREADS || gridDim.x != CLUSTER || gridDim.z != 2 ||
        tile_rows < 1 || tile_rows > TILE_ROWS || rows < 1 || steps < 1 || dynamic_smem_bytes() < need) {
        if (tid == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    float *h_buffers = reinterpret_cast<float *>(block_smem4);
    const int h_floats = tile_rows * HIDDEN;
    float *pre = h_buffers + 2 * h_floats;

    gates += (size_t)direction * batch * steps * 4 * HIDDEN;
    r += (size_t)direction * 4 * HIDDEN * HIDDEN;
    bias += (size_t)direction * 4 * HIDDEN;
    output += (size_t)direction * HIDDEN;
    const int q = tid % CHUNKS;
    const int j = tid / CHUNKS;
    const int first_unit = (int)rank * UNITS;
    SPK_TIMELINE_SETUP(CLUSTER_TIMELINE_STAGES, direction, (int)rank + CLUSTER * (int)blockIdx.y, tid);

    float4 w[FLOAT4_PER_CHUNK]; // this thread's slice of R (gate row j, chunk q), for the whole sequence
    load_gate_row(w, r, rank * GATE_ROWS + j, q);
    float c[SLOTS], hv[SLOTS];
    float4 gx[SLOTS], b4[SLOTS];
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    SPK_TIMELINE_START(0); // step 1 fetches its gates and waits here; later steps start where the previous published
#pragma unroll
    for (int k = 0; k < SLOTS; k++) {
        c[k] = hv[k] = 0.0f;
        gx[k] = b4[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (SLOT_OWNED(k)) {
            b4[k] = reinterpret_cast<const float4 *>(bias)[first_unit + SLOT_UNIT(k)];
            const int t = direction ? steps - 1 : 0;
            gx[k] = __ldg(GATES_AT(SLOT_ROW(k), SLOT_UNIT(k), t));
        }
    }

    SPK_TIMELINE_STAMP(0, MARK(FETCH));
    // Zero h (rows past `rows` stay zero); no push may land before this.
    for (int i = tid; i < 2 * h_floats; i += THREADS)
        h_buffers[i] = 0.0f;
    cluster_arrive();
    cluster_wait();
    SPK_TIMELINE_STAMP(0, MARK(WAIT));

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const float *h = h_buffers + parity * h_floats;
        const bool last = step + 1 == steps;

        {
            dots_to_pre(w, h, pre, rows, j, q SPK_TIMELINE_FN_ARGS(step));
            __syncthreads();
            SPK_TIMELINE_STAMP(step, MARK(SYNC));
            // the cells: activations, c, h
#pragma unroll
            for (int k = 0; k < SLOTS; k++) {
                if (SLOT_OWNED(k)) {
                    const float4 s =
                        *reinterpret_cast<const float4 *>(pre + SLOT_ROW(k) * PRE_STRIDE + SLOT_UNIT(k) * 4);
                    hv[k] = spk_lstm_cell(gx[k], s.x, s.y, s.z, s.w, b4[k], c[k]);
                }
            }
            SPK_TIMELINE_STAMP(step, MARK(CELL));
            const int next_offset = (parity ^ 1) * h_floats;
#pragma unroll
            for (int k = 0; k < SLOTS; k++)
                push_h(k, next_offset, last, t, steps, row0, rows, first_unit, tid, h_buffers, hv[k], output);
            SPK_TIMELINE_STAMP(step, MARK(PUBLISH));
        }
        if (last)
            break;
        // the exchange completes under one cluster barrier while the next inputs load
        SPK_TIMELINE_START(step + 1);
        cluster_arrive();
        const int t_fetch = direction ? t - 1 : t + 1; // the step whose gates load now
#pragma unroll
        for (int k = 0; k < SLOTS; k++) {
            if (SLOT_OWNED(k)) {
                const int b = SLOT_ROW(k), u = SLOT_UNIT(k);
                gx[k] = __ldg(GATES_AT(b, u, t_fetch));
            }
        }
        SPK_TIMELINE_STAMP(step + 1, MARK(FETCH));
        cluster_wait();
        SPK_TIMELINE_STAMP(step + 1, MARK(WAIT));
    }
#endif
}
