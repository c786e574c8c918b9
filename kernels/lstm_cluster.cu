// The thread-block-cluster LSTM recurrence for sm_90 (Hopper), direct
// pushes: one cluster per (batch tile, direction), both directions in one
// launch; each block owns HIDDEN / CLUSTER hidden units of every row of its
// tile, keeps a copy of h in shared memory, and the lanes that finish a
// cell st.async its h straight into the blocks of the cluster, counted on
// each block's mbarrier: no cluster barrier and no block barrier in a step.
// Compiled by NVRTC; every size is a macro, set from the option table of
// src/lstm/cluster.c (spk help lists the options):
//   HIDDEN, CLUSTER, THREADS, TILE_ROWS, ROW_GROUP, MIN_BLOCKS  sizes
//   PUSH         1: direct pushes (4-byte st.async a cell copy and block);
//                2: warp pushes (four units of a row in one 16-byte st.async)
//   GATE_BLOCK   gate rows a thread holds: 1, or 4 (its unit's four)
//   GATES_AHEAD  steps ahead a cell's x·Wᵀ is fetched: 1 (a register load),
//                2 .. 4 (cp.async stages in shared memory)
//   ROW_PHASES   1, or 2: the tile's row groups in two halves that take turns
//   EARLY_GATES  1: a step's gates taken at the end of the step before, and
//                thread 0's re-arm after its publish (off the wait's path)
//   CELL         0: the reference cell; 1: trimmed (the same bits); 2: fused
//                (the bias added early, FMAs: other bits within the FP32 bound)
//   MAPPED_PUSHES 1: a lane maps its peers' h and mbarrier addresses once
//                (mapa) and pushes with one predicated st.async each; 2 (direct
//                pushes): the same, each step's addresses made after the step
//                before's publish; 0: mapa at every push, the pushes under branches
// A step reads as its stages (kernels/lstm_cluster_stages.cuh): wait for h,
// take the gates, the dot products with their reduction and the cell,
// publish h (per row phase); then the output and the next gates. Every
// option gives the same bits, except the chunk split (THREADS and
// GATE_BLOCK): another split adds the same products in another order.
// docs/design.md has the work split, the exchange's memory-ordering argument
// and why each default; kernels/lstm_cluster_baseline.cu is the plain form
// every variant is checked against. SPK_TIMELINE 1 is the timeline build:
// the stage boundaries of chosen steps and blocks stamped
// (kernels/spk_timeline.cuh; the stages: kernels/lstm_timeline_stages.cuh).

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
#define PUSH 1
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
#ifndef MAPPED_PUSHES
#define MAPPED_PUSHES 0
#endif
static_assert(MAPPED_PUSHES >= 0 && MAPPED_PUSHES <= 2, "MAPPED_PUSHES must be 0, 1 or 2");
static_assert(MAPPED_PUSHES < 2 || PUSH == 1, "MAPPED_PUSHES 2 needs PUSH 1 (direct)");
static_assert(PUSH == 1 || PUSH == 2,
              "PUSH must be 1 (direct) or 2 (warp); kernels/lstm_cluster_baseline.cu has the scalar pushes");
static_assert(EARLY_GATES == 0 || EARLY_GATES == 1, "EARLY_GATES must be 0 or 1");
#define WARP_PUSH (PUSH == 2)

#define UNITS (HIDDEN / CLUSTER)
#define GATE_ROWS (4 * UNITS)
#define CHUNKS (THREADS / (GATE_ROWS / GATE_BLOCK))
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#define WARP_UNITS (32 / CHUNKS) /* gate blocks: units a warp holds */
#define WARP_ITEMS (WARP_UNITS / 4 * ROW_GROUP * CLUSTER) /* 16-byte pushes a warp makes per slot */
#ifndef ROW_GROUP
#define ROW_GROUP CHUNKS
#endif
#define GROUPS ((TILE_ROWS + ROW_GROUP - 1) / ROW_GROUP)
#define PADDED_ROWS (GROUPS * ROW_GROUP)     /* a tile padded to whole row groups */
#define SLOTS GROUPS                          /* cells a thread may own: one a row group */
#define BARRIER_FLOATS (4 * ROW_PHASES)       /* two 8-byte mbarriers a phase */
#define PHASE_SLOT(p) ((p) * SLOTS / ROW_PHASES) /* phase p owns slots PHASE_SLOT(p) .. PHASE_SLOT(p + 1) - 1 */
#define RING_FLOATS (GATES_AHEAD > 1 ? GATES_AHEAD * SLOTS * THREADS * 4 : 0) /* the gates' cp.async stages */
#include "spk_status.cuh" /* STATUS_*: the codes the host reports */
#define FULL_MASK 0xffffffffu
// The timeline build's stages (one list a row phase count): PHASE_MARK(S, phase) is the mark stamped where
// stage S of row phase `phase` ends, STEP_MARK(S) that of a stage once a step; slot k is in phase SLOT_PHASE(k).
#define CLUSTER_TIMELINE_STAGES (ROW_PHASES == 1 ? SPK_CLUSTER_STAGE_COUNT : SPK_CLUSTER_PHASED_STAGE_COUNT)
#define PHASE_MARK(s, phase)                                                                                         \
    (1 + (ROW_PHASES == 1 ? SPK_CLUSTER_##s : (phase) == 0 ? SPK_CLUSTER_PHASED_##s : SPK_CLUSTER_PHASED_##s##_2))
#define STEP_MARK(s) (1 + (ROW_PHASES == 1 ? SPK_CLUSTER_##s : SPK_CLUSTER_PHASED_##s))
#define SLOT_PHASE(k) ((k) >= PHASE_SLOT(1))

static_assert(CLUSTER == 1 || CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16,
              "CLUSTER must be 1, 2, 4, 8 or 16");
static_assert(HIDDEN % CLUSTER == 0, "HIDDEN must be a multiple of CLUSTER");
static_assert(GATE_BLOCK == 1 || GATE_BLOCK == 4, "GATE_BLOCK must be 1 or 4");
static_assert(!WARP_PUSH || (GATE_BLOCK == 4 && UNITS % 4 == 0),
              "PUSH 2 (warp) needs GATE_BLOCK 4 and UNITS (HIDDEN / CLUSTER) a multiple of 4");
static_assert(THREADS % (GATE_ROWS / GATE_BLOCK) == 0 && (CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8),
              "THREADS must be GATE_ROWS / GATE_BLOCK * CHUNKS (GATE_ROWS = 4 * HIDDEN / CLUSTER), CHUNKS 2, 4 or 8");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be whole warps, at most 1024");
static_assert(HIDDEN % (4 * CHUNKS) == 0, "HIDDEN must split into float4 groups per chunk (4 * CHUNKS)");
static_assert(TILE_ROWS >= 1 && TILE_ROWS <= 32, "TILE_ROWS must be 1 .. 32");
static_assert((ROW_GROUP == 1 || ROW_GROUP == 2 || ROW_GROUP == 4 || ROW_GROUP == 8) && ROW_GROUP <= CHUNKS,
              "ROW_GROUP must be 1, 2, 4 or 8 and at most CHUNKS");
static_assert(ROW_PHASES == 1 || (ROW_PHASES == 2 && SLOTS >= 2),
              "ROW_PHASES must be 1, or 2 with TILE_ROWS >= 2 * ROW_GROUP");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS * THREADS <= 2048, "MIN_BLOCKS must be 1 .. 2048 / THREADS");
static_assert(GATES_AHEAD >= 1 && GATES_AHEAD <= 4, "GATES_AHEAD must be 1 .. 4");
static_assert(4 * (BARRIER_FLOATS + 2 * PADDED_ROWS * HIDDEN + RING_FLOATS) <= 227 * 1024,
              "shared memory (mbarriers, two h buffers, gate stages) must fit 227 KiB");

#include "lstm_cell.cuh"
#include "lstm_gate_block.cuh"
#include "lstm_reduce.cuh"
#include "lstm_timeline_stages.cuh"
#include "spk_timeline.cuh"

// Below sm_90 (the file still compiles there, like every kernel in kernels/)
// the entry only reports STATUS_NEEDS_SM90; the host never launches it there.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

#include "cluster_sync.cuh"
#include "cluster_dots.cuh"
#include "lstm_cluster_stages.cuh"

#define SPK_CLUSTER_SUPPORTED 1
#endif

// The weights a thread holds: one gate row, or the four of its unit.
template <int G>
struct gate_weights {
    typedef float4 type[FLOAT4_PER_CHUNK];
};
template <>
struct gate_weights<4> {
    typedef float4 type[4][FLOAT4_PER_CHUNK];
};

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
    const int tid = MAPPED_PUSHES ? thread_index_kept() : (int)threadIdx.x;
    const int direction = (int)blockIdx.z;
    const int row0 = blockIdx.y * tile_rows;
    const int rows = min(tile_rows, batch - row0);
    const unsigned rank = cluster_rank();
    // Shared memory: [2 mbarriers a phase], h[2][padded rows][H], [gate stages[GATES_AHEAD][SLOTS][THREADS]
    // float4]: `need` bytes, a multiple of 16 (src/lstm/cluster.c sizes it the same way).
    const int padded_rows = (tile_rows + ROW_GROUP - 1) / ROW_GROUP * ROW_GROUP;
    const unsigned need = 4u * (unsigned)(BARRIER_FLOATS + 2 * padded_rows * HIDDEN + RING_FLOATS);
    // Uniform over the cluster (arguments, the tile, the cluster shape), so an
    // early exit never leaves a peer waiting at a barrier.
    if (cluster_blocks() != CLUSTER || blockDim.x != THREADS || gridDim.x != CLUSTER || gridDim.z != 2 ||
        tile_rows < 1 || tile_rows > TILE_ROWS || rows < 1 || steps < 1 || dynamic_smem_bytes() < need) {
        if (tid == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    float4 *smem4 = block_smem4;
    float *h_buffers = reinterpret_cast<float *>(smem4) + BARRIER_FLOATS;
    const int h_floats = padded_rows * HIDDEN;
    float4 *stages = reinterpret_cast<float4 *>(h_buffers + 2 * h_floats); // the gates' (GATES_AHEAD > 1)
    gates += (size_t)direction * batch * steps * 4 * HIDDEN;
    r += (size_t)direction * 4 * HIDDEN * HIDDEN;
    bias += (size_t)direction * 4 * HIDDEN;
    output += (size_t)direction * HIDDEN;
    const int q = tid % CHUNKS;
    const int j = tid / CHUNKS;
    const int first_unit = (int)rank * UNITS;
    SPK_TIMELINE_SETUP(CLUSTER_TIMELINE_STAGES, direction, (int)rank + CLUSTER * (int)blockIdx.y, tid);
    typename gate_weights<GATE_BLOCK>::type w; // this thread's slice of R, for the whole sequence
    load_weights(w, r, rank, j, q);
    // The cells this thread owns (kernels/lstm_cluster_stages.cuh: SLOT_ROW, SLOT_OWNED, SLOT_STORES).
    const int lane_row = spk_scatter_row<ROW_GROUP, CHUNKS>(q);
    const int lane_unit = GATE_BLOCK == 4 ? j : j >> 2;
    const int unit_lane0 = (tid & 31) & ~(4 * CHUNKS - 1); // one gate row a thread: lane of gate 0, chunk 0
    const int copy = (GATE_BLOCK == 4 ? 0 : (j & 3) * (CHUNKS / ROW_GROUP)) + q / ROW_GROUP;
    const bool cell_lane = true;
    const bool store_lane = copy == 0;
    float c[SLOTS], hv[SLOTS];
    float4 gx[SLOTS], b4[SLOTS];
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    int stage = 0; // the gates' stage of this step (GATES_AHEAD > 1)
    prime_gates(direction, steps, row0, rows, first_unit, lane_row, lane_unit, cell_lane, gates4, bias, stages, tid,
                c, hv, gx, b4);
    zero_h(tid, h_buffers, h_floats);
    // The exchange (kernels/lstm_cluster_stages.cuh): the mbarriers made and armed, one cluster barrier.
    const unsigned full0 = (unsigned)__cvta_generic_to_shared(smem4);
    unsigned exchange_bytes[ROW_PHASES]; // a phase's bytes of h a step
#pragma unroll
    for (int phase = 0; phase < ROW_PHASES; phase++)
        exchange_bytes[phase] = PHASE_BYTES(phase);
    bool waiting = true; // false once a wait timed out: the launch then just runs to its end
    start_exchange(tid, steps, rows, full0, exchange_bytes[0], exchange_bytes[ROW_PHASES - 1]);
    // MAPPED_PUSHES: the peers' addresses (else unused)
    unsigned remote_h[PUSH_TARGETS], remote_bar[PUSH_TARGETS], push_toggle[PUSH_TARGETS];
    map_push_targets(rank, tid, copy, lane_row, first_unit, lane_unit, h_buffers, h_floats, full0, remote_h,
                     remote_bar, push_toggle);

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const float *h = h_buffers + parity * h_floats;
        const bool last = step + 1 == steps;
        SPK_TIMELINE_START(step);

        // The row phases in turn (ROW_PHASES 1: a plain block; a loop of one compiles otherwise).
#if ROW_PHASES == 1
        {
            const int phase = 0;
#else
#pragma unroll
        for (int phase = 0; phase < ROW_PHASES; phase++) {
#endif
            waiting = wait_for_h(step, phase, parity, steps, rows, tid, full0, exchange_bytes[phase], waiting, status);
            SPK_TIMELINE_STAMP(step, PHASE_MARK(WAIT, phase));
            if (phase == 0 && !EARLY_GATES)
                take_gates(stage, lane_row, rows, cell_lane, stages, tid, gx);
            SPK_TIMELINE_STAMP(step, phase == 0 ? STEP_MARK(GATES) : 255);
#pragma unroll
            for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++)
                cell_of_slot(w, h, k, rows, q, lane_row, cell_lane, unit_lane0, gx[k], b4[k], c[k],
                             hv[k] SPK_TIMELINE_FN_ARGS(step));
            publish_h(phase, parity, last, t, steps, row0, rows, first_unit, lane_row, lane_unit, cell_lane,
                      store_lane, copy, rank, tid, h_buffers, h_floats, full0, remote_h, remote_bar, hv, output);
            rearm_after_publish(step, phase, parity, steps, rows, tid, full0, exchange_bytes[phase]);
            SPK_TIMELINE_STAMP(step, PHASE_MARK(PUBLISH, phase));
        } // phases
        if (last)
            break;
        advance_push_targets(remote_h, remote_bar, push_toggle);
        stage = store_and_fetch(step, t, steps, direction, row0, rows, first_unit, lane_row, lane_unit, cell_lane,
                                store_lane, gates4, stages, tid, hv, gx, stage, output);
        SPK_TIMELINE_STAMP(step, STEP_MARK(FETCH));
    }
    end_exchange();
#endif
}
