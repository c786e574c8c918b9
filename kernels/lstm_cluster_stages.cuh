// The stages of kernels/lstm_cluster.cu, the direct-push cluster recurrence:
// a step of a block reads, per row phase, wait for h, take the gates, the dot
// products with their reduction and the cell, publish h; then the output and
// the next gates. Each stage is a function here; where a variant differs (gate
// blocks or one gate row a thread, warp or direct pushes, the gates one or
// more steps ahead) it picks its implementation at the stage boundary, by
// overload or `if constexpr`, never by a branch inside the step. Included
// after the kernel's macros and the primitives (cluster_sync.cuh).
// docs/design.md has the work split and the exchange's memory-ordering
// argument.
//
// (The stages take scalars and arrays, and hold no bool: written so, the
// kernel compiles to the machine code it had as one function; a struct of
// the block's context or a bool member gives ptxas other code.)
//
// The timeline build (SPK_TIMELINE 1) stamps the boundaries inside
// cell_of_slot (dot, reduce, cell: the kernel hands its recording on with
// SPK_TIMELINE_FN_ARGS); the others are stamped by the kernel between the
// stage calls. With several slots a phase each slot stamps them and the
// last slot's stamps are kept. Off, the timeline macros are nothing.
#ifndef SPK_LSTM_CLUSTER_STAGES_CUH
#define SPK_LSTM_CLUSTER_STAGES_CUH

#include "spk_timeline.cuh"

// ---- the cells a thread owns ---------------------------------------------------

// Slot k of a thread is (row slot_row(k), unit lane_unit): every lane of a
// unit holds a copy of the cell of its row after the reduction; copy (gate p,
// chunk q) = p * CHUNKS / G + q / G pushes to blocks copy, copy + COPIES, ...
// and copy 0 stores the output. Gate blocks: every lane of the unit holds the
// four sums of its row; copy q / G pushes.
#define COPIES (4 / GATE_BLOCK * CHUNKS / ROW_GROUP)
// (Macros over lane_row, rows, cell_lane and store_lane in scope: functions
// returning bool, or the tests written out, give other machine code.)
#define SLOT_ROW(k) ((k) * ROW_GROUP + lane_row)
#define SLOT_OWNED(k) (cell_lane && SLOT_ROW(k) < rows)
#define SLOT_STORES(k) (store_lane && SLOT_OWNED(k))

// ---- stage: the weights ------------------------------------------------------

// This thread's slice of R for the whole sequence: gate row j (one gate row a
// thread), or the four gate rows of unit j (gate blocks).
__device__ __forceinline__ void load_weights(float4 (&w)[FLOAT4_PER_CHUNK], const float *r, unsigned rank, int j,
                                             int q)
{
    load_gate_row(w, r, rank * GATE_ROWS + j, q);
}
__device__ __forceinline__ void load_weights(float4 (&w)[4][FLOAT4_PER_CHUNK], const float *r, unsigned rank, int j,
                                             int q)
{
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(rank * GATE_ROWS + j * 4 + p) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            w[p][k] = row[k * CHUNKS + q];
    }
}

// The gates' stage a of slot k: a float4 a thread.
#define STAGE(a, k) (stages + ((a) * SLOTS + (k)) * THREADS + tid)
// x·Wᵀ of (row b, unit u) of this block at time t
__device__ __forceinline__ const float4 *gates_at(const float4 *gates4, int row0, int steps, int first_unit, int b,
                                                  int u, int t)
{
    return gates4 + ((size_t)(row0 + b) * steps + t) * HIDDEN + first_unit + u;
}

// ---- stage: take the gates -------------------------------------------------------

// GATES_AHEAD > 1: this thread's copies of step `step` have landed; each
// slot's x·Wᵀ from its stage (GATES_AHEAD 1: gx already holds it). Called
// after the step's wait, or with EARLY_GATES at the end of the step before.
__device__ __forceinline__ void take_gates(int stage, int lane_row, int rows, bool cell_lane, float4 *stages, int tid,
                                           float4 (&gx)[SLOTS])
{
    if constexpr (GATES_AHEAD > 1) {
        copy_async_wait<GATES_AHEAD - 1>();
#pragma unroll
        for (int k = 0; k < SLOTS; k++)
            if (SLOT_OWNED(k))
                gx[k] = *STAGE(stage, k);
    }
}

// ---- stage: the gates' first steps ------------------------------------------------

// The bias and the first step's x·Wᵀ of each slot (GATES_AHEAD 1: into gx),
// the cell state zero; with GATES_AHEAD > 1 the first GATES_AHEAD steps' x·Wᵀ
// into the stages, one cp.async commit group a step (empty past the end), so
// waiting for all but the newest GATES_AHEAD - 1 groups at step s means step
// s's has landed (stage a holds step s's gates for s % GATES_AHEAD == a).
__device__ __forceinline__ void prime_gates(int direction, int steps, int row0, int rows, int first_unit,
                                            int lane_row, int lane_unit, bool cell_lane, const float4 *gates4,
                                            const float *bias, float4 *stages, int tid, float (&c)[SLOTS],
                                            float (&hv)[SLOTS], float4 (&gx)[SLOTS], float4 (&b4)[SLOTS])
{
#pragma unroll
    for (int k = 0; k < SLOTS; k++) {
        c[k] = hv[k] = 0.0f;
        gx[k] = b4[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (SLOT_OWNED(k)) {
            b4[k] = reinterpret_cast<const float4 *>(bias)[first_unit + lane_unit];
            const int t = direction ? steps - 1 : 0;
            if (GATES_AHEAD == 1)
                gx[k] = __ldg(gates_at(gates4, row0, steps, first_unit, SLOT_ROW(k), lane_unit, t));
        }
    }
    if constexpr (GATES_AHEAD > 1) {
        for (int a = 0; a < GATES_AHEAD; a++) {
#pragma unroll
            for (int k = 0; k < SLOTS; k++)
                if (SLOT_OWNED(k) && a < steps) {
                    const int t = direction ? steps - 1 - a : a;
                    copy_async16(STAGE(a, k), gates_at(gates4, row0, steps, first_unit, SLOT_ROW(k), lane_unit, t));
                }
            copy_async_commit();
        }
        if constexpr (EARLY_GATES)
            take_gates(0, lane_row, rows, cell_lane, stages, tid, gx); // step 0's
    }
}

// Rows of a phase (ROW_PHASES 1: the tile's). A phase without rows (the last
// tile's second half, say) never arms, waits or pushes. (Macros over `rows`
// in scope, as the slot tests above.)
#define PHASE_ROWS(p)                                                                                                 \
    (ROW_PHASES == 1 ? rows                                                                                         \
                     : max(0, min(rows, PHASE_SLOT((p) + 1) * ROW_GROUP) - PHASE_SLOT(p) * ROW_GROUP))
#define PHASE_HAS_ROWS(p) (ROW_PHASES == 1 || PHASE_ROWS(p) > 0) /* rows >= 1: the geometry check */
#define PHASE_BYTES(p) ((unsigned)(PHASE_ROWS(p) * HIDDEN * 4)) /* a phase's bytes of h a step */

// ---- stage: the exchange's start and end ------------------------------------------

// Zeroes both h buffers: rows past `rows` stay zero, and no push may land before this.
__device__ __forceinline__ void zero_h(int tid, float *h_buffers, int h_floats)
{
    for (int i = tid; i < 2 * h_floats; i += THREADS)
        h_buffers[i] = 0.0f;
}

// The mbarriers: full[phase][q] at full0 + 16 phase + 8 q counts a phase's
// bytes of h[q] (bytes0, the first phase's; bytes1, the second's), this
// block's own units' included. Thread 0 makes them and arms them for steps 0
// and 1 (a phase without rows never arms, waits or pushes); after the cluster
// barrier every block of the cluster is running and armed before any pushes.
// (The bytes as scalars: the kernel's array by reference gives other code.)
__device__ __forceinline__ void start_exchange(int tid, int steps, int rows, unsigned full0, unsigned bytes0,
                                               unsigned bytes1)
{
    if (tid == 0) {
#pragma unroll
        for (int phase = 0; phase < ROW_PHASES; phase++) {
            mbarrier_init(full0 + 16 * phase, 1);
            mbarrier_init(full0 + 16 * phase + 8, 1);
        }
        mbarrier_init_fence();
#pragma unroll
        for (int phase = 0; phase < ROW_PHASES; phase++) {
            if (!PHASE_HAS_ROWS(phase))
                continue;
            if (steps > 1)
                mbarrier_arm(full0 + 16 * phase + 8, phase == 0 ? bytes0 : bytes1); // step 0's pushes, into h[1]
            if (steps > 2)
                mbarrier_arm(full0 + 16 * phase, phase == 0 ? bytes0 : bytes1); // step 1's pushes, into h[0]
        }
    }
    cluster_arrive();
    cluster_wait();
}

// Nobody leaves while a peer may still store into its shared memory.
__device__ __forceinline__ void end_exchange()
{
    cluster_arrive();
    cluster_wait();
}

// ---- stage: wait for h -------------------------------------------------------------

// Step `step` (>= 1) of a phase waits until the bytes of its h have landed,
// then thread 0 re-arms the barrier for step + 2's pushes into the same
// buffer (with EARLY_GATES, after its publish: rearm_after_publish). A wait
// past EXCHANGE_TIMEOUT_NS reports and stops waiting: returns whether to wait
// again.
__device__ __forceinline__ bool wait_for_h(int step, int phase, int parity, int steps, int rows, int tid,
                                           unsigned full0, unsigned bytes, bool waiting, unsigned *status)
{
    if (step > 0 && PHASE_HAS_ROWS(phase)) {
        const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)parity;
        if (waiting && !mbarrier_wait(bar, (unsigned)((step - 1) >> 1) & 1u)) {
            waiting = false;
            atomicCAS(status, 0u, STATUS_EXCHANGE_TIMEOUT);
        }
        if (!EARLY_GATES && tid == 0 && step + 2 < steps)
            mbarrier_arm(bar, bytes); // step+1's pushes, into this same buffer
    }
    return waiting;
}

// EARLY_GATES: thread 0 re-arms the barrier it waited on at this step after
// its own publish, so the arm is off the path from the wait to the dot
// products. Pushes of step + 1 may reach the barrier before the arm (its
// tx-count goes below zero), never before the phase this step waited for
// completed, and the next phase cannot complete without the arm's arrival.
__device__ __forceinline__ void rearm_after_publish(int step, int phase, int parity, int steps, int rows, int tid,
                                                    unsigned full0, unsigned bytes)
{
    if constexpr (EARLY_GATES) {
        if (tid == 0 && step > 0 && step + 2 < steps && PHASE_HAS_ROWS(phase))
            mbarrier_arm(full0 + 16u * (unsigned)phase + 8u * (unsigned)parity, bytes);
    }
}

// ---- stage: dot products, reduction, cell ---------------------------------------

// Gate blocks: the four gate sums of slot k's ROW_GROUP rows, reduce-scattered
// over the chunk lanes, leave lane q with all four of row SLOT_ROW(k), which
// finishes its cell. Each row's first float4 of h is loaded one row ahead, so
// the load's latency passes under the previous row's FMAs (rows of a group
// past `rows` are zeros in h).
__device__ __forceinline__ void cell_of_slot(const float4 (&w)[4][FLOAT4_PER_CHUNK], const float *h, int k, int rows,
                                             int q, int lane_row, bool cell_lane, int unit_lane0, const float4 &gx,
                                             const float4 &b4, float &c, float &hv SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(CLUSTER_TIMELINE_STAGES);
    const float4 kept = spk_cell_gates<CELL>(gx, b4); // (CELL 2: x·Wᵀ + bias before the dot products)
    if (k * ROW_GROUP < rows) {
        float v[ROW_GROUP][4];
        const float *group_h = h + k * ROW_GROUP * HIDDEN;
        float4 h_next = reinterpret_cast<const float4 *>(group_h)[q];
#pragma unroll
        for (int e = 0; e < ROW_GROUP; e++) {
            const float4 h_first = h_next;
            if (e + 1 < ROW_GROUP)
                h_next = reinterpret_cast<const float4 *>(group_h + (e + 1) * HIDDEN)[q];
            float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
            if (k * ROW_GROUP + e < rows)
                d = spk_partial_dot4_from<FLOAT4_PER_CHUNK, CHUNKS>(w, group_h + e * HIDDEN, q, h_first);
            v[e][0] = d.x;
            v[e][1] = d.y;
            v[e][2] = d.z;
            v[e][3] = d.w;
        }
        SPK_TIMELINE_STAMP(spk_timeline_step, PHASE_MARK(DOT, SLOT_PHASE(k)));
        spk_reduce_scatter<ROW_GROUP, 4, CHUNKS>(v, q);
        SPK_TIMELINE_STAMP(spk_timeline_step, PHASE_MARK(REDUCE, SLOT_PHASE(k)));
        if (SLOT_OWNED(k))
            hv = spk_lstm_cell_form<CELL>(kept, v[0][0], v[0][1], v[0][2], v[0][3], b4, c);
        SPK_TIMELINE_STAMP(spk_timeline_step, PHASE_MARK(CELL, SLOT_PHASE(k)));
    }
}

// One gate row a thread: the row sums, then the unit's four gates from the
// lanes that hold them (the same chunk lane of each gate row, so the same row).
__device__ __forceinline__ void cell_of_slot(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h, int k, int rows,
                                             int q, int lane_row, bool cell_lane, int unit_lane0, const float4 &gx,
                                             const float4 &b4, float &c, float &hv SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(CLUSTER_TIMELINE_STAGES);
    const float4 kept = spk_cell_gates<CELL>(gx, b4); // (CELL 2: x·Wᵀ + bias before the dot products)
    if (k * ROW_GROUP < rows) {
        const float s = row_sums<ROW_GROUP>(w, h, k * ROW_GROUP,
                                            q ROW_SUMS_TIMELINE_ARGS(spk_timeline_step, PHASE_MARK(DOT, SLOT_PHASE(k))));
        const float pi = __shfl_sync(FULL_MASK, s, unit_lane0 + q);
        const float pf = __shfl_sync(FULL_MASK, s, unit_lane0 + CHUNKS + q);
        const float pc = __shfl_sync(FULL_MASK, s, unit_lane0 + 2 * CHUNKS + q);
        const float po = __shfl_sync(FULL_MASK, s, unit_lane0 + 3 * CHUNKS + q);
        SPK_TIMELINE_STAMP(spk_timeline_step, PHASE_MARK(REDUCE, SLOT_PHASE(k)));
        if (SLOT_OWNED(k))
            hv = spk_lstm_cell_form<CELL>(kept, pi, pf, pc, po, b4, c);
        SPK_TIMELINE_STAMP(spk_timeline_step, PHASE_MARK(CELL, SLOT_PHASE(k)));
    }
}

// ---- stage: publish h ---------------------------------------------------------------

// The peers a lane pushes to: one (warp pushes: item i goes to block i % CLUSTER, and a lane's items are
// lane, lane + 32, ...), or CLUSTER / COPIES for a copy of a cell (direct pushes, copy + COPIES * i).
#define PUSH_TARGETS (WARP_PUSH || COPIES >= CLUSTER ? 1 : CLUSTER / COPIES)

// MAPPED_PUSHES: for each peer a lane pushes to, that block's shared::cluster address of this block's h
// buffers (direct pushes: of the lane's cell in the first buffer, slot 0) and of its mbarriers, mapped once; an
// address in a peer's window is the mapped one plus the shared::cta offset. MAPPED_PUSHES 2 (direct pushes):
// the addresses step 0's pushes go to (buffer 1, its mbarrier), and in `toggle` what turns them into the other
// buffer's and back (advance_push_targets: an XOR a step).
__device__ __forceinline__ void map_push_targets(unsigned rank, int tid, int copy, int lane_row, int first_unit,
                                                 int lane_unit, const float *h_buffers, int h_floats,
                                                 unsigned full0, unsigned (&remote_h)[PUSH_TARGETS],
                                                 unsigned (&remote_bar)[PUSH_TARGETS],
                                                 unsigned (&toggle)[PUSH_TARGETS])
{
    if constexpr (MAPPED_PUSHES) {
        const unsigned h0 = (unsigned)__cvta_generic_to_shared(
            h_buffers + (WARP_PUSH ? 0 : SLOT_ROW(0) * HIDDEN + first_unit + lane_unit));
#pragma unroll
        for (int i = 0; i < PUSH_TARGETS; i++) {
            const int g = WARP_PUSH ? (tid & 31) % CLUSTER : (copy + i * COPIES) % CLUSTER;
            const unsigned target = (rank + (unsigned)g) % CLUSTER;
            remote_h[i] = map_rank(h0, target);
            remote_bar[i] = map_rank(full0, target);
            if constexpr (MAPPED_PUSHES == 2) {
                toggle[i] = remote_h[i] ^ (remote_h[i] + 4u * (unsigned)h_floats);
                remote_h[i] += 4u * (unsigned)h_floats;
                remote_bar[i] += 8u;
            }
        }
    }
}

// MAPPED_PUSHES 2: the next step's push addresses, the other buffer's (once a step, after its publish; the
// mbarriers of a phase are 8 bytes apart from a 16-byte boundary).
__device__ __forceinline__ void advance_push_targets(unsigned (&remote_h)[PUSH_TARGETS],
                                                     unsigned (&remote_bar)[PUSH_TARGETS],
                                                     const unsigned (&toggle)[PUSH_TARGETS])
{
    if constexpr (MAPPED_PUSHES == 2) {
#pragma unroll
        for (int i = 0; i < PUSH_TARGETS; i++) {
            remote_h[i] ^= toggle[i];
            remote_bar[i] ^= 8u;
        }
    }
}

// Warp pushes: item `item` of slot k, per slot the warp's WARP_UNITS units of its ROW_GROUP rows as float4 (4
// consecutive units of one row), each to every block: item i is (block i % CLUSTER, row (i / CLUSTER) % G, quad
// i / (CLUSTER * G)). Returns its four values, shuffled from the lanes that hold them (every lane of the warp
// calls it), and sets its row b and quad.
__device__ __forceinline__ float4 warp_push_item(const float (&hv)[SLOTS], int k, int item, int &b, int &quad)
{
    const int rq = item / CLUSTER;
    const int e = rq % ROW_GROUP;
    quad = (rq / ROW_GROUP) % (WARP_UNITS / 4);
    const int from = quad * 4 * CHUNKS + spk_scatter_row<ROW_GROUP, CHUNKS>(e);
    float4 v;
    v.x = __shfl_sync(FULL_MASK, hv[k], from);
    v.y = __shfl_sync(FULL_MASK, hv[k], from + CHUNKS);
    v.z = __shfl_sync(FULL_MASK, hv[k], from + 2 * CHUNKS);
    v.w = __shfl_sync(FULL_MASK, hv[k], from + 3 * CHUNKS);
    b = k * ROW_GROUP + e;
    return v;
}

// MAPPED_PUSHES's publish: the same pushes of the same values into the same
// places, each to its peer's address mapped once (map_push_targets) plus the
// step's offset, and each a predicated st.async (the last step's too, whose
// predicate is false), so no lane's test splits a warp around its pushes
// (ptxas may still branch on the last step, which is uniform); tid comes in a
// register (thread_index_kept).
__device__ __forceinline__ void publish_h_mapped(int phase, int parity, bool last, int t, int steps, int row0,
                                                 int rows, int first_unit, int lane_row, int lane_unit,
                                                 bool cell_lane, bool store_lane, int copy, int tid, int h_floats,
                                                 const unsigned (&remote_h)[PUSH_TARGETS],
                                                 const unsigned (&remote_bar)[PUSH_TARGETS],
                                                 const float (&hv)[SLOTS], float *output)
{
    // (MAPPED_PUSHES 2: the step's buffer and mbarrier are in the addresses already)
    const unsigned next_bytes = MAPPED_PUSHES == 2 ? 0u : 4u * (unsigned)((parity ^ 1) * h_floats);
    const unsigned bar_offset = 16u * (unsigned)phase + (MAPPED_PUSHES == 2 ? 0u : 8u * (unsigned)(parity ^ 1));
    if constexpr (!WARP_PUSH) {
#pragma unroll
        for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
            const unsigned offset = next_bytes + 4u * (unsigned)(k * ROW_GROUP * HIDDEN); // slot k's, from slot 0's
#pragma unroll
            for (int i = 0; i < PUSH_TARGETS; i++)
                store_async1_if(!last && SLOT_OWNED(k) && copy + i * COPIES < CLUSTER, remote_h[i] + offset, hv[k],
                                remote_bar[i] + bar_offset);
        }
    } else if (!last) {
        const int lane = tid & 31;
        const int warp_units = first_unit + (tid >> 5) * WARP_UNITS; // the warp's first unit
        // the items of publish_h's warp pushes, in the same order
#pragma unroll
        for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
            if (k * ROW_GROUP < rows) {
#pragma unroll
                for (int item0 = 0; item0 < WARP_ITEMS; item0 += 32) {
                    const int item = item0 + lane;
                    int b, quad;
                    const float4 v = warp_push_item(hv, k, item, b, quad);
                    const unsigned offset = next_bytes + 4u * (unsigned)(b * HIDDEN + warp_units + 4 * quad);
                    store_async4_if((WARP_ITEMS % 32 == 0 || item < WARP_ITEMS) && b < rows, remote_h[0] + offset, v,
                                    remote_bar[0] + bar_offset);
                }
            }
        }
    }
    if (last) {
#pragma unroll
        for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++)
            if (SLOT_STORES(k))
                output[((size_t)(row0 + SLOT_ROW(k)) * steps + t) * (2 * HIDDEN) + first_unit + lane_unit] = hv[k];
    }
}

// The phase's h: at the last step to the output (no exchange follows); before
// it into h[parity ^ 1] of every block of the cluster, this one's included:
// each copy of a cell st.asyncs it into its share of the blocks (direct
// pushes), or each warp packs its units (warp pushes).
__device__ __forceinline__ void publish_h(int phase, int parity, bool last, int t, int steps, int row0, int rows,
                                          int first_unit, int lane_row, int lane_unit, bool cell_lane,
                                          bool store_lane, int copy, unsigned rank, int tid, float *h_buffers,
                                          int h_floats, unsigned full0, const unsigned (&remote_h)[PUSH_TARGETS],
                                          const unsigned (&remote_bar)[PUSH_TARGETS], const float (&hv)[SLOTS],
                                          float *output)
{
    if constexpr (MAPPED_PUSHES) {
        publish_h_mapped(phase, parity, last, t, steps, row0, rows, first_unit, lane_row, lane_unit, cell_lane,
                         store_lane, copy, tid, h_floats, remote_h, remote_bar, hv, output);
        return;
    }
    const int next_offset = (parity ^ 1) * h_floats;
#pragma unroll
    for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
        if (SLOT_OWNED(k)) {
            const int b = SLOT_ROW(k), u = lane_unit;
            if (SLOT_STORES(k) && last)
                output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv[k];
            if (!last) {
                if constexpr (!WARP_PUSH) {
                    const unsigned local =
                        (unsigned)__cvta_generic_to_shared(h_buffers + next_offset + b * HIDDEN + first_unit + u);
                    const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)(parity ^ 1);
                    for (int g = copy; g < CLUSTER; g += COPIES) {
                        const unsigned target = (rank + (unsigned)g) % CLUSTER;
                        store_async1(map_rank(local, target), hv[k], map_rank(bar, target));
                    }
                }
            }
        }
    }
    if constexpr (WARP_PUSH) {
        if (!last) {
            const int lane = tid & 31;
            const int warp_units = first_unit + (tid >> 5) * WARP_UNITS; // the warp's first unit
            const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)(parity ^ 1);
            // per slot, the items of warp_push_item
#pragma unroll
            for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
                if (k * ROW_GROUP < rows) {
#pragma unroll
                    for (int item0 = 0; item0 < WARP_ITEMS; item0 += 32) {
                        const int item = item0 + lane;
                        const int g = item % CLUSTER;
                        int b, quad;
                        const float4 v = warp_push_item(hv, k, item, b, quad);
                        if ((WARP_ITEMS % 32 == 0 || item < WARP_ITEMS) && b < rows) {
                            const unsigned local = (unsigned)__cvta_generic_to_shared(
                                h_buffers + next_offset + b * HIDDEN + warp_units + 4 * quad);
                            const unsigned target = (rank + (unsigned)g) % CLUSTER;
                            store_async4(map_rank(local, target), v, map_rank(bar, target));
                        }
                    }
                }
            }
        }
    }
}

// ---- stage: the output and the next gates ----------------------------------------

// While the step's h crosses the cluster: this step's h to the output, and
// the x·Wᵀ of the step GATES_AHEAD ahead into its register (GATES_AHEAD 1)
// or into the stage just read (its value is in gx), one commit group a step;
// with EARLY_GATES the next step's gates taken from their stage. Returns the
// next step's stage.
__device__ __forceinline__ int store_and_fetch(int step, int t, int steps, int direction, int row0, int rows,
                                               int first_unit, int lane_row, int lane_unit, bool cell_lane,
                                               bool store_lane, const float4 *gates4, float4 *stages, int tid,
                                               const float (&hv)[SLOTS], float4 (&gx)[SLOTS], int stage,
                                               float *output)
{
    const int t_fetch = direction ? t - GATES_AHEAD : t + GATES_AHEAD; // the step whose gates load now
#pragma unroll
    for (int k = 0; k < SLOTS; k++) {
        if (SLOT_OWNED(k)) {
            const int b = SLOT_ROW(k), u = lane_unit;
            if (SLOT_STORES(k))
                output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv[k];
            if constexpr (GATES_AHEAD > 1) {
                if (step + GATES_AHEAD < steps)
                    copy_async16(STAGE(stage, k), gates_at(gates4, row0, steps, first_unit, b, u, t_fetch));
            } else {
                gx[k] = __ldg(gates_at(gates4, row0, steps, first_unit, b, u, t_fetch));
            }
        }
    }
    if constexpr (GATES_AHEAD > 1) {
        copy_async_commit();
        const int next = stage + 1 == GATES_AHEAD ? 0 : stage + 1;
        if constexpr (EARLY_GATES)
            take_gates(next, lane_row, rows, cell_lane, stages, tid, gx); // the next step's, under the exchange
        return next;
    }
    return stage;
}

#endif
