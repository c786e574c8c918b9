// The tensor-core LSTM recurrence for sm_90 (Hopper), FP32-accurate: each
// step's R·h is split-precision tensor-core products, the cell is spk's FP32
// cell (lstm_cell.cuh), h crosses the cluster through distributed shared
// memory as in kernels/lstm_cluster.cu. One cluster per (batch tile,
// direction), both directions in one launch: grid (CLUSTER, tiles, 2).
//
// Work split (the indices: kernels/lstm_tc_layout.cuh). Cluster rank g owns
// the UNITS = H / CLUSTER units g·UNITS .. of every row of its tile. Its warps
// each own WARP_MT m-tiles of 16 gate rows (4·WARP_MT units) over all of K:
// R is mma's A operand, split once at the start into a big and a small part,
// in registers for the whole sequence; h is the B operand, n-tiles of 8 batch
// rows, read from shared memory where the cells of every block pushed it
// already split (h is split once a step, by the thread that made it). A
// warp's accumulators end with whole cells (two m-tiles: two cells a thread;
// one m-tile: one, after two shuffles), so no sum crosses a warp.
//
// The products (docs/kernels.md: why the accuracy holds). TC_SPLIT_TF32
// (3xTF32): x = big + small, both TF32 (rounded to nearest, ties away), and a
// product is small·big + big·small + big·big (small·small, 2^-22 of it,
// dropped); each k-slice of SLICE_STEPS mmas starts from zero, small products
// first, and is added to the FP32 accumulator by a rounded FADD, so the
// tensor core's truncating sums only ever cut a short slice. TC_SPLIT_F16
// (FP16x3, Ootomo and Yokota): R's rows are scaled by a power of two (the row's
// largest magnitude to [2^14, 2^15)), x = big + small·2^-11 with big and small
// FP16 (small scaled so it stays normal); small·big + big·small and big·big go
// to two accumulators, combined and unscaled once at the end. Every product of
// two TF32 or two FP16 parts is exact in FP32; the sums run in a fixed order,
// so the bits repeat.
//
// Compiled by NVRTC; every size is a macro (lua/spk/tensor_core.lua picks
// them per batch; its variants are listed there):
//   TC_SPLIT     1 (3xTF32, mma m16n8k8) or 2 (FP16x3, mma m16n8k16)
//   TC_PRODUCTS  3, or 1 (the big product alone: not FP32-accurate, for
//                measuring what the split costs)
//   CLUSTER      blocks a cluster (2, 4, 8, 16)
//   TILE_ROWS    batch rows a tile (1 .. 32, n-tiles of 8)
//   WARP_MT      m-tiles a warp (1 or 2)
//   ROW_PHASES   1, or 2: the tile's n-tiles in two halves that take turns
//                (each with its own mbarriers: one half computes while the
//                other's h crosses the cluster)
//   GATES_AHEAD  steps ahead a cell's x·Wᵀ is fetched (cp.async stages, 1 .. 4)
//   SLICE_STEPS  mma k-steps a slice (1 or 2; wgmma 1, 2, 4, 8)
//   TC_MMA       1 (mma.sync, each warp its own products) or 2 (wgmma: a warpgroup's
//                four m-tiles in one instruction, A = R from registers, B = h read by
//                the tensor core from shared memory once a warpgroup; FP16x3, one
//                m-tile a warp, warps a multiple of 4, sm_90a)
//   FETCH_EARLY  0, or 1: the x·Wᵀ of a step ahead is fetched right after this step's
//                gates are taken, before the wait (off the step's chain), not at its end
//   TC_CELL      the cell's form (kernels/lstm_cell_forms.cuh): 0 the reference, 1 trimmed
//                (the same bits), 2 fused (within the FP32 bound)
// and the plan's SPK_HIDDEN and SPK_GATE_* (packing: units layout, any order).
// SPK_TIMELINE 1 is the timeline build (kernels/spk_timeline.cuh; its stages:
// TC_STAGES in kernels/lstm_tc_timeline_stages.cuh).

#ifndef SPK_HIDDEN
#define SPK_HIDDEN 128
#define SPK_GATE_I 0
#define SPK_GATE_F 1
#define SPK_GATE_C 2
#define SPK_GATE_O 3
#define SPK_PACK_ROWS 0
#endif
#include "lstm_tc_layout.cuh"
#include "spk_status.cuh" /* the status codes: the built-in kernels' (lua/spk/tensor_core.lua says each) */
#ifndef TC_SPLIT
#define TC_SPLIT TC_SPLIT_F16
#endif
#ifndef TC_PRODUCTS
#define TC_PRODUCTS 3
#endif
#ifndef CLUSTER
#define CLUSTER 4
#endif
#ifndef TILE_ROWS
#define TILE_ROWS 16
#endif
#ifndef WARP_MT
#define WARP_MT 2
#endif
#ifndef ROW_PHASES
#define ROW_PHASES 1
#endif
#ifndef GATES_AHEAD
#define GATES_AHEAD 2
#endif
#ifndef SLICE_STEPS
#define SLICE_STEPS 1
#endif
#ifndef TC_MMA
#define TC_MMA TC_MMA_SYNC
#endif
#ifndef FETCH_EARLY
#define FETCH_EARLY 0
#endif
#ifndef TC_CELL
#define TC_CELL 0
#endif

#define H SPK_HIDDEN
#define UNITS (H / CLUSTER)
#define WARPS (UNITS / (4 * WARP_MT))
#define THREADS (32 * WARPS)
#define KSTEP (TC_SPLIT == TC_SPLIT_F16 ? 16 : 8)
#define KSTEPS (H / KSTEP)
#define NT ((TILE_ROWS + 7) / 8)                     /* n-tiles of 8 batch rows */
#define PADDED_ROWS (NT * 8)
#define CELLS (NT * (WARP_MT == 2 ? 2 : 1))          /* cells a thread finishes a step */
#define ROW_ITEMS (TC_SPLIT == TC_SPLIT_F16 ? H / 2 : H)
#define ROW_WORDS (ROW_ITEMS + 8)                    /* 8-byte words of a batch row of h */
#define BUFFER_WORDS (TC_MMA == TC_MMA_WGMMA ? NT * 2 * 16 * H / 8 : PADDED_ROWS * ROW_WORDS) /* a buffer's 8-byte words */
#define UNIT_BYTES (TC_SPLIT == TC_SPLIT_F16 ? 4 : 8) /* bytes of h a unit and row in the exchange */
#define PHASE_NT(p) ((p) * NT / ROW_PHASES)          /* phase p owns n-tiles PHASE_NT(p) .. PHASE_NT(p + 1) - 1 */
#define BARRIER_BYTES 128
// Shared memory: [mbarriers full[phase][parity]] in 128 bytes, h[2][BUFFER_WORDS] (mma.sync:
// [PADDED_ROWS][ROW_WORDS] 8-byte words; wgmma: [NT][2 parts] groups of 16 H bytes), gate stages
// [GATES_AHEAD][CELLS][THREADS] float4. lua/spk/tensor_core.lua sizes the launch the same way.
#define SMEM_BYTES (BARRIER_BYTES + 2 * 8 * BUFFER_WORDS + 16 * GATES_AHEAD * CELLS * THREADS)
#define FULL_MASK 0xffffffffu
#define TC_TIMELINE_STAGES (ROW_PHASES == 1 ? TC_STAGE_COUNT : TC_PHASED_STAGE_COUNT) /* the _EARLY lists' counts too */
#if FETCH_EARLY
#define TC_ONE_PHASE(s) TC_EARLY_STAGE_##s
#define TC_TWO_PHASES(s) TC_EARLY_PHASED_STAGE_##s
#else
#define TC_ONE_PHASE(s) TC_STAGE_##s
#define TC_TWO_PHASES(s) TC_PHASED_STAGE_##s
#endif
#define TC_MARK(s, phase) (1 + (ROW_PHASES == 1 ? TC_ONE_PHASE(s) : (phase) == 0 ? TC_TWO_PHASES(s) : TC_TWO_PHASES(s##_2)))
#define TC_STEP_MARK(s) (1 + (ROW_PHASES == 1 ? TC_ONE_PHASE(s) : TC_TWO_PHASES(s)))

static_assert(TC_SPLIT == TC_SPLIT_TF32 || TC_SPLIT == TC_SPLIT_F16, "TC_SPLIT must be 1 (3xTF32) or 2 (FP16x3)");
static_assert(TC_PRODUCTS == 3 || TC_PRODUCTS == 1, "TC_PRODUCTS must be 3 or 1");
static_assert(CLUSTER == 2 || CLUSTER == 4 || CLUSTER == 8 || CLUSTER == 16, "CLUSTER must be 2, 4, 8 or 16");
static_assert(WARP_MT == 1 || WARP_MT == 2, "WARP_MT must be 1 or 2");
static_assert(H % CLUSTER == 0 && UNITS % (4 * WARP_MT) == 0 && WARPS >= 1,
              "H / CLUSTER units must split into warps of 4 * WARP_MT units");
static_assert(H % 16 == 0 && H % KSTEP == 0, "H must be a multiple of 16");
static_assert(THREADS <= 1024, "at most 1024 threads a block");
static_assert(TILE_ROWS >= 1 && TILE_ROWS <= 32, "TILE_ROWS must be 1 .. 32");
static_assert(ROW_PHASES == 1 || (ROW_PHASES == 2 && NT >= 2), "ROW_PHASES 2 needs TILE_ROWS > 8 (two n-tiles)");
static_assert(GATES_AHEAD >= 1 && GATES_AHEAD <= 4, "GATES_AHEAD must be 1 .. 4");
static_assert(TC_MMA == TC_MMA_SYNC || TC_MMA == TC_MMA_WGMMA, "TC_MMA must be 1 (mma.sync) or 2 (wgmma)");
static_assert((SLICE_STEPS == 1 || SLICE_STEPS == 2 ||
               (TC_MMA == TC_MMA_WGMMA && (SLICE_STEPS == 4 || SLICE_STEPS == 8))) &&
                  KSTEPS % SLICE_STEPS == 0,
              "SLICE_STEPS must be 1 or 2 (wgmma: 1, 2, 4 or 8) and divide the k-steps");
static_assert(TC_MMA == TC_MMA_SYNC || (TC_SPLIT == TC_SPLIT_F16 && TC_PRODUCTS == 3 && WARP_MT == 1 &&
                                         WARPS % 4 == 0 && NT % ROW_PHASES == 0 && NT / ROW_PHASES <= 2),
              "wgmma needs FP16x3 with 3 products, one m-tile a warp, whole warpgroups (a multiple of 4 "
              "warps) and one or two n-tiles a phase");
static_assert(FETCH_EARLY == 0 || (FETCH_EARLY == 1 && GATES_AHEAD >= 2),
              "FETCH_EARLY 1 needs GATES_AHEAD >= 2 (the stage a fetch fills must not be the one just read)");
#if TC_MMA == TC_MMA_WGMMA && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "TC_MMA 2 (wgmma) needs the arch-specific target sm_90a (compute_90a)"
#endif
static_assert(SPK_PACK_ROWS == 0, "the tensor-core kernel reads a unit's four gates as one float4: packing layout units");
static_assert(SMEM_BYTES <= 227 * 1024, "shared memory (mbarriers, two h buffers, gate stages) must fit 227 KiB");
#ifdef TC_EXPECTED_SMEM /* the launch rule's size (lua/spk/tensor_core.lua passes it): the two formulas agree */
static_assert(SMEM_BYTES == TC_EXPECTED_SMEM, "lua/spk/tensor_core.lua sizes shared memory unlike SMEM_BYTES");
#endif

#include "lstm_cell.cuh"
#include "spk_timeline.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#include "cluster_sync.cuh"
#include "lstm_tc_stages.cuh"
#define SPK_TC_SUPPORTED 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS, 1)
spk_lstm_tc(const float *__restrict__ gates, // [2, batch * steps, 4H]: x·Wᵀ, row b*steps + t
            const float *__restrict__ r,     // [2, 4H, H] packed
            const float *__restrict__ bias,  // [2, 4H] packed, Wb + Rb
            float *output,                   // [batch, steps, 2H]
            unsigned *status,                // 0, or why the launch refused to run
            int batch, int steps, float *trace, const int *trace_slot, int trace_slots,
            int trace_direction SPK_TIMELINE_PARAMS)
{
#ifndef SPK_TC_SUPPORTED
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
        atomicCAS(status, 0u, STATUS_NEEDS_SM90);
#else
    extern __shared__ __align__(128) unsigned long long tc_smem[];
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int direction = (int)blockIdx.z;
    const int row0 = (int)blockIdx.y * TILE_ROWS;
    const int rows = min(TILE_ROWS, batch - row0);
    const unsigned rank = cluster_rank();
    // Uniform over the cluster (arguments, the tile, the cluster shape): an early exit leaves no peer waiting.
    if (cluster_blocks() != CLUSTER || blockDim.x != THREADS || gridDim.x != CLUSTER || gridDim.z != 2 || rows < 1 ||
        steps < 1 || dynamic_smem_bytes() < SMEM_BYTES) {
        if (tid == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    unsigned long long *h_buffers = tc_smem + BARRIER_BYTES / 8;
    float4 *stages = reinterpret_cast<float4 *>(h_buffers + 2 * BUFFER_WORDS);
    const unsigned full0 = (unsigned)__cvta_generic_to_shared(tc_smem); // full[phase][parity] at full0 + 16 phase + 8 parity
    gates += (size_t)direction * batch * steps * 4 * H;
    r += (size_t)direction * 4 * H * H;
    bias += (size_t)direction * 4 * H;
    output += (size_t)direction * H;
    const int first_unit = (int)rank * UNITS;
    if (direction != trace_direction)
        trace = nullptr;
    SPK_TIMELINE_SETUP(TC_TIMELINE_STAGES, direction, (int)rank + CLUSTER * (int)blockIdx.y, tid);

    unsigned a_big[WARP_MT][KSTEPS][4], a_small[WARP_MT][KSTEPS][4]; // this warp's R, for the whole sequence
    float unscale[WARP_MT][2];                                        // f16: 2^-shift of A rows g, g + 8
    tc_load_weights(a_big, a_small, unscale, r, first_unit, warp, lane);
    const int unit = first_unit + tc_cell_unit(WARP_MT, warp, lane); // the unit of every cell this thread finishes
    const float4 b4 = tc_gate_float4(reinterpret_cast<const float4 *>(bias)[unit]);
    float c[CELLS], hv[CELLS];
    float4 gx[CELLS];
#pragma unroll
    for (int k = 0; k < CELLS; k++)
        c[k] = hv[k] = 0.0f;
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    int stage = 0;
    tc_prime_gates(direction, steps, row0, rows, unit, lane, gates4, stages, tid);
    for (int i = tid; i < 2 * BUFFER_WORDS; i += THREADS)
        h_buffers[i] = 0ull; // rows past `rows` stay zero; no push lands before this (the cluster barrier below)
    unsigned exchange_bytes[ROW_PHASES];
    tc_setup_exchange(exchange_bytes, rows, steps, tid, full0);
    cluster_arrive();
    cluster_wait();

    bool waiting = true; // false once a wait timed out: the launch then runs to its end
    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const bool last = step + 1 == steps;
        SPK_TIMELINE_START(step);
        tc_take_gates(stage, row0, rows, lane, stages, tid, gx);
        SPK_TIMELINE_STAMP(step, TC_STEP_MARK(GATES));
        int next_stage = stage;
        if (FETCH_EARLY) {
            next_stage = tc_fetch_gates(step, t, steps, direction, row0, rows, unit, lane, gates4, stages, tid, stage);
            SPK_TIMELINE_STAMP(step, TC_STEP_MARK(FETCH));
        }
#pragma unroll
        for (int p = 0; p < ROW_PHASES; p++) {
            waiting = tc_wait_for_h(step, p, parity, steps, tid, full0, exchange_bytes[p], waiting, status);
            SPK_TIMELINE_STAMP(step, TC_MARK(WAIT, p));
            float pre[WARP_MT][NT][4];
#if TC_MMA == TC_MMA_WGMMA
            tc_products_wgmma(p, pre, a_big, a_small, unscale,
                              (unsigned)__cvta_generic_to_shared(h_buffers + parity * BUFFER_WORDS));
#else
            tc_products(p, pre, a_big, a_small, unscale, h_buffers + parity * BUFFER_WORDS, lane);
#endif
            SPK_TIMELINE_STAMP(step, TC_MARK(PRODUCTS, p));
            tc_cells(p, pre, gx, b4, c, hv, t, steps, batch, row0, rows, unit, lane, output, trace, trace_slot,
                     trace_slots);
            SPK_TIMELINE_STAMP(step, TC_MARK(CELL, p));
            if (!last)
                tc_publish(p, hv, rows, first_unit, warp, lane, rank, h_buffers + (parity ^ 1) * BUFFER_WORDS,
                           full0 + 16u * (unsigned)p + 8u * (unsigned)(parity ^ 1));
            SPK_TIMELINE_STAMP(step, TC_MARK(PUBLISH, p));
        }
        if (last)
            break;
        if (!FETCH_EARLY) {
            next_stage = tc_fetch_gates(step, t, steps, direction, row0, rows, unit, lane, gates4, stages, tid, stage);
            SPK_TIMELINE_STAMP(step, TC_STEP_MARK(FETCH));
        }
        stage = next_stage;
    }
    cluster_arrive(); // nobody leaves while a peer may still push into its shared memory
    cluster_wait();
#endif
}
