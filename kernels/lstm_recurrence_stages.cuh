// The stages of kernels/lstm_recurrence.cu, the persistent recurrence: a step
// of a block reads wait for h (its paired gather), fetch the next gates, the
// cells of the step (the dot products, their reduction, the cell, publish h),
// take the gates. Each stage is a function here; where the variants differ
// (one gate row a thread or a gate block, row groups or single rows) the stage
// picks its implementation by overload or `if constexpr`, never by a branch
// inside the step. Included after the kernel's macros and its primitives (the
// exchange words, the give-up check, the trace record). docs/design.md has the
// work split and the exchange's memory-ordering argument.
//
// (Written so, the kernel compiles to the machine code it had as one
// function: the kernel's own arrays (c, a round's pairs) are passed by
// reference; a float4 is passed and returned by value, never written through
// a reference; lane_row comes by reference where a stage compares it with
// values of its own; the locals of a conditional float4 are declared w first;
// the word addresses are formed as written; the gather's loop over rounds
// stays in the kernel. Other forms that read the same give ptxas other code.)
//
// The timeline build (SPK_TIMELINE 1) stamps dot, reduce, cell and publish
// inside cells_of_step (the kernel hands its recording on with
// SPK_TIMELINE_FN_ARGS), wait and fetch between the kernel's stage calls.
// With several rows or row slots a step, each stamps them and the last one's
// stamps are kept. Off, the timeline macros are nothing.
#ifndef SPK_LSTM_RECURRENCE_STAGES_CUH
#define SPK_LSTM_RECURRENCE_STAGES_CUH

#include "spk_timeline.cuh"

// ---- what a thread holds ---------------------------------------------------------

// One gate row a thread: a row of R, and one cell, row lane_row of the tile
// (the lane's index among its unit's lanes) while below `rows`. A gate block:
// the four gate rows of the thread's unit, and on the lanes q < ROW_GROUP one
// cell a row slot s, row s * ROW_GROUP + lane_row.
struct slot_gates {
    float4 slot[ROW_SLOTS];
};
template <int G>
struct lane_state {
    typedef float4 weights[FLOAT4_PER_CHUNK];
    typedef float4 gates;
    typedef float cells;
};
template <>
struct lane_state<4> {
    typedef float4 weights[4][FLOAT4_PER_CHUNK];
    typedef slot_gates gates;
    typedef float cells[ROW_SLOTS];
};
typedef lane_state<GATE_BLOCK>::weights thread_weights; // this thread's slice of R
typedef lane_state<GATE_BLOCK>::gates cell_gates;       // its cells' x·Wᵀ of a step
typedef lane_state<GATE_BLOCK>::cells cell_states;      // its cells' c

// ---- the weights and the first step ---------------------------------------------

// This thread's slice of R: gate row `row` (one gate row a thread), or the
// four gate rows from `row` on (a gate block), at k-chunk q.
__device__ __forceinline__ void load_weights(float4 (&w)[FLOAT4_PER_CHUNK], const float *r, int row, int q)
{
    const float4 *src = reinterpret_cast<const float4 *>(r + (size_t)row * HIDDEN);
#pragma unroll
    for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
        w[k] = src[k * CHUNKS + q];
}
__device__ __forceinline__ void load_weights(float4 (&w)[4][FLOAT4_PER_CHUNK], const float *r, int row, int q)
{
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const float4 *src = reinterpret_cast<const float4 *>(r + (size_t)(row + p) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            w[p][k] = src[k * CHUNKS + q];
    }
}

// Initial h is zero; rows past `rows` stay zero for the whole launch.
__device__ __forceinline__ void zero_h(float *h_buffers, int tid)
{
    for (int i = tid; i < 2 * MAX_TILE_ROWS * HIDDEN; i += THREADS)
        h_buffers[i] = 0.0f;
}

// The first step's x·Wᵀ of each cell, zero where the thread owns none
// (gates(step, b): the kernel's x·Wᵀ of row b of the tile).
template <int G, class Gates>
__device__ __forceinline__ typename lane_state<G>::gates first_gates(const Gates &gates, int rows, int lane_row,
                                                                     bool cell_lane, bool owner)
{
    if constexpr (G == 1) {
        return owner ? gates(0, lane_row) : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
        slot_gates gx;
#pragma unroll
        for (int s = 0; s < ROW_SLOTS; s++) {
            const int b = s * ROW_GROUP + lane_row;
            gx.slot[s] = cell_lane && b < rows ? gates(0, b) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        return gx;
    }
}

__device__ __forceinline__ void zero_cells(float &c)
{
    c = 0.0f;
}
__device__ __forceinline__ void zero_cells(float (&c)[ROW_SLOTS])
{
#pragma unroll
    for (int s = 0; s < ROW_SLOTS; s++)
        c[s] = 0.0f;
}

// ---- stage: wait for h (the paired gather) ------------------------------------------

// A round's pairs of the thread, words base, base + THREADS, ...: all loads in flight together.
__device__ __forceinline__ void poll_pairs(ulonglong2 (&w)[GATHER_PAIRS], const ulonglong2 *slot2, int base, int pairs)
{
#pragma unroll
    for (int k = 0; k < GATHER_PAIRS; k++) {
        int i = base + k * THREADS;
        if (i < pairs)
            w[k] = poll_pair(slot2 + i);
    }
}

// Polls every stale pair of the round again, all in flight together (one
// round trip a round), until each carries `flag` or the grid gives up.
__device__ __forceinline__ void wait_for_pairs(ulonglong2 (&w)[GATHER_PAIRS], const ulonglong2 *slot2, int base,
                                               int pairs, unsigned flag, unsigned *status, u64 timeout_ns,
                                               bool &given_up)
{
    u64 start = 0;
    unsigned rounds = 0;
    for (;;) {
        bool ready = true;
#pragma unroll
        for (int k = 0; k < GATHER_PAIRS; k++) {
            int i = base + k * THREADS;
            if (i < pairs && !pair_ready(w[k], flag))
                ready = false;
        }
        if (ready || given_up)
            break;
        if ((++rounds & 15u) == 0)
            check_give_up(start, status, timeout_ns, given_up);
#pragma unroll
        for (int k = 0; k < GATHER_PAIRS; k++) {
            int i = base + k * THREADS;
            if (i < pairs && !pair_ready(w[k], flag))
                w[k] = poll_pair(slot2 + i);
        }
    }
}

// The round's values into h of the previous step (shared memory).
__device__ __forceinline__ void store_pairs(float2 *h_prev2, const ulonglong2 (&w)[GATHER_PAIRS], int base, int pairs)
{
#pragma unroll
    for (int k = 0; k < GATHER_PAIRS; k++) {
        int i = base + k * THREADS;
        if (i < pairs)
            h_prev2[i] = make_float2(__uint_as_float((unsigned)w[k].x), __uint_as_float((unsigned)w[k].y));
    }
}

// ---- stage: fetch the next gates ----------------------------------------------------

// The next step's x·Wᵀ of each cell, loaded while this step computes (the
// current one where there is no next step or no cell).
template <class Gates>
__device__ __forceinline__ float4 fetch_gates(float4 gx, const Gates &gates, int step, int steps, int rows,
                                              int lane_row, bool cell_lane, bool owner)
{
    float4 next = gx;
    if (owner && step + 1 < steps)
        next = gates(step + 1, lane_row);
    return next;
}
template <class Gates>
__device__ __forceinline__ float4 fetch_slot(float4 gx, const Gates &gates, int step, int steps, int rows, int b,
                                             bool cell_lane)
{
    float w = gx.w, z = gx.z, y = gx.y, x = gx.x;
    if (cell_lane && b < rows && step + 1 < steps) {
        const float4 g = gates(step + 1, b);
        x = g.x;
        y = g.y;
        z = g.z;
        w = g.w;
    }
    return make_float4(x, y, z, w);
}
template <class Gates>
__device__ __forceinline__ slot_gates fetch_gates(const slot_gates &gx, const Gates &gates, int step, int steps,
                                                  int rows, int lane_row, bool cell_lane, bool owner)
{
    slot_gates next;
#pragma unroll
    for (int s = 0; s < ROW_SLOTS; s++)
        next.slot[s] = fetch_slot(gx.slot[s], gates, step, steps, rows, s * ROW_GROUP + lane_row, cell_lane);
    return next;
}

// ---- stage: dot products and their reduction ---------------------------------------

// Per-thread partial dot product of one batch row: the thread's float4 groups
// of h (shared memory) with its registers of R, 4 FMA chains, fixed order.
__device__ __forceinline__ float partial_dot(const float4 (&r)[FLOAT4_PER_CHUNK], const float *h_row, int q)
{
    const float4 *h4 = reinterpret_cast<const float4 *>(h_row);
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
    for (int k = 0; k < FLOAT4_PER_CHUNK; k++) {
        float4 h = h4[k * CHUNKS + q];
        a0 = fmaf(h.x, r[k].x, a0);
        a1 = fmaf(h.y, r[k].y, a1);
        a2 = fmaf(h.z, r[k].z, a2);
        a3 = fmaf(h.w, r[k].w, a3);
    }
    return (a0 + a1) + (a2 + a3);
}

// Sum over the CHUNKS lanes of a gate row: every one of them ends with the same bits.
__device__ __forceinline__ float chunk_sum(float v)
{
#pragma unroll
    for (int mask = 1; mask < CHUNKS; mask <<= 1)
        v += __shfl_xor_sync(0xffffffffu, v, mask);
    return v;
}

// One gate row a thread, ROW_GROUP > 1: the rows of whole row groups, each
// group's sums reduce-scattered; gate p of row b0 + e lies in lane p * CHUNKS
// + spk_scatter_row(e) of the unit, and the lane of the row takes its four.
// Returns the first row left over.
__device__ __forceinline__ int row_group_sums(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h_prev, int rows,
                                              int q, const int &lane_row, int unit_base, float &pi, float &pf,
                                              float &pc, float &po SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(SPK_RECURRENCE_STAGE_COUNT);
    int b0 = 0;
    float v[ROW_GROUP][1];
    for (; b0 + ROW_GROUP <= rows; b0 += ROW_GROUP) {
#pragma unroll
        for (int e = 0; e < ROW_GROUP; e++)
            v[e][0] = partial_dot(w, h_prev + (b0 + e) * HIDDEN, q);
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(DOT));
        spk_reduce_scatter<ROW_GROUP, 1, CHUNKS>(v, q);
        const int e = (lane_row - b0) & (ROW_GROUP - 1);
        const int from = unit_base + spk_scatter_row<ROW_GROUP, CHUNKS>(e);
        float si = __shfl_sync(0xffffffffu, v[0][0], from + 0 * CHUNKS);
        float sf = __shfl_sync(0xffffffffu, v[0][0], from + 1 * CHUNKS);
        float sc = __shfl_sync(0xffffffffu, v[0][0], from + 2 * CHUNKS);
        float so = __shfl_sync(0xffffffffu, v[0][0], from + 3 * CHUNKS);
        const bool mine = (unsigned)(lane_row - b0) < (unsigned)ROW_GROUP;
        pi = mine ? si : pi;
        pf = mine ? sf : pf;
        pc = mine ? sc : pc;
        po = mine ? so : po;
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(REDUCE));
    }
    return b0;
}

// One gate row a thread: rows b0 .. rows - 1 one at a time, each all-reduced
// over the chunk lanes; the lane of the row takes its unit's four gates.
__device__ __forceinline__ void row_sums(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h_prev, int b0, int rows,
                                         int q, const int &lane_row, int unit_base, float &pi, float &pf, float &pc,
                                         float &po SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(SPK_RECURRENCE_STAGE_COUNT);
    for (int b = b0; b < rows; b++) {
        const float d = partial_dot(w, h_prev + b * HIDDEN, q);
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(DOT));
        float s = chunk_sum(d);
        float si = __shfl_sync(0xffffffffu, s, unit_base + 0 * CHUNKS);
        float sf = __shfl_sync(0xffffffffu, s, unit_base + 1 * CHUNKS);
        float sc = __shfl_sync(0xffffffffu, s, unit_base + 2 * CHUNKS);
        float so = __shfl_sync(0xffffffffu, s, unit_base + 3 * CHUNKS);
        const bool mine = lane_row == b;
        pi = mine ? si : pi;
        pf = mine ? sf : pf;
        pc = mine ? sc : pc;
        po = mine ? so : po;
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(REDUCE));
    }
}

// A gate block: the four gate sums of each row of the row slot from b0 (zeros
// past `rows`), reduce-scattered so that lane q < ROW_GROUP holds those of row
// b0 + spk_scatter_row(q) in v[0].
__device__ __forceinline__ void slot_sums(const float4 (&w)[4][FLOAT4_PER_CHUNK], const float *h_prev, int b0,
                                          int rows, int q, float (&v)[ROW_GROUP][4] SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(SPK_RECURRENCE_STAGE_COUNT);
#pragma unroll
    for (int e = 0; e < ROW_GROUP; e++) {
        float dw = 0.f, dz = 0.f, dy = 0.f, dx = 0.f;
        if (b0 + e < rows) {
            const float4 d = spk_partial_dot4<FLOAT4_PER_CHUNK, CHUNKS>(w, h_prev + (b0 + e) * HIDDEN, q);
            dx = d.x;
            dy = d.y;
            dz = d.z;
            dw = d.w;
        }
        v[e][0] = dx;
        v[e][1] = dy;
        v[e][2] = dz;
        v[e][3] = dw;
    }
    SPK_TIMELINE_STAMP(spk_timeline_step, MARK(DOT));
    spk_reduce_scatter<ROW_GROUP, 4, CHUNKS>(v, q);
    SPK_TIMELINE_STAMP(spk_timeline_step, MARK(REDUCE));
}

// ---- stage: publish h ------------------------------------------------------------------

// The h of cell (row b, hidden_unit) at step `step` (time t) to the output and,
// as its flagged word, into the exchange slot of the step's parity (`word`:
// the cell's word in slot 0).
__device__ __forceinline__ void publish_h(float *output, u64 *word, int row0, int b, int steps, int t, int step,
                                          unsigned flag_base, int hidden_unit, int batch, float c,
                                          float h SPK_TRACE_PARAMS)
{
    output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
    const u64 flagged = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
    publish_word(word + (step & 1) * (MAX_TILE_ROWS * HIDDEN), flagged);
    SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c, h);
}

// ---- a step's cells: the dot products, their reduction, the cell, publish h ------------

// One gate row a thread: the gate sums of every row (row groups, then single
// rows), then the cell of the lane's row.
__device__ __forceinline__ void cells_of_step(const float4 (&w)[FLOAT4_PER_CHUNK], const float *h_prev, float4 gx,
                                              float &c, float4 b4, int rows, int q, const int &lane_row,
                                              bool cell_lane, int unit_base, bool owner, float *output,
                                              u64 *tile_state, int row0, int steps, int t, int step,
                                              unsigned flag_base, int hidden_unit,
                                              int batch SPK_TRACE_PARAMS SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(SPK_RECURRENCE_STAGE_COUNT);
    float po = 0.0f, pc = 0.0f, pf = 0.0f, pi = 0.0f; // the unit's four gate sums of the lane's row
    int b0 = 0;
    if constexpr (ROW_GROUP > 1)
        b0 = row_group_sums(w, h_prev, rows, q, lane_row, unit_base, pi, pf, pc,
                            po SPK_TIMELINE_FN_ARGS(spk_timeline_step));
    row_sums(w, h_prev, b0, rows, q, lane_row, unit_base, pi, pf, pc, po SPK_TIMELINE_FN_ARGS(spk_timeline_step));
    if (owner) {
        const float h = spk_lstm_cell(gx, pi, pf, pc, po, b4, c);
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(CELL));
        publish_h(output, tile_state + hidden_unit + lane_row * HIDDEN, row0, lane_row, steps, t, step, flag_base,
                  hidden_unit, batch, c, h SPK_TRACE_ARGS);
        SPK_TIMELINE_STAMP(spk_timeline_step, MARK(PUBLISH));
    }
}

// A gate block: per row slot with rows, its sums, then the lead lanes' cells
// (the test on the slot is the same for the whole block, so every lane takes
// the same shuffles).
__device__ __forceinline__ void cells_of_step(const float4 (&w)[4][FLOAT4_PER_CHUNK], const float *h_prev,
                                              const slot_gates &gx, float (&c)[ROW_SLOTS], float4 b4, int rows,
                                              int q, const int &lane_row, bool cell_lane, int unit_base, bool owner,
                                              float *output, u64 *tile_state, int row0, int steps, int t, int step,
                                              unsigned flag_base, int hidden_unit,
                                              int batch SPK_TRACE_PARAMS SPK_TIMELINE_FN_PARAMS)
{
    SPK_TIMELINE_FN_SETUP(SPK_RECURRENCE_STAGE_COUNT);
#pragma unroll
    for (int s = 0; s < ROW_SLOTS; s++) {
        const int b0 = s * ROW_GROUP;
        if (b0 < rows) {
            float v[ROW_GROUP][4];
            slot_sums(w, h_prev, b0, rows, q, v SPK_TIMELINE_FN_ARGS(spk_timeline_step));
            const int b = b0 + lane_row;
            if (cell_lane && b < rows) {
                const float h = spk_lstm_cell(gx.slot[s], v[0][0], v[0][1], v[0][2], v[0][3], b4, c[s]);
                SPK_TIMELINE_STAMP(spk_timeline_step, MARK(CELL));
                publish_h(output, tile_state + b * HIDDEN + hidden_unit, row0, b, steps, t, step, flag_base,
                          hidden_unit, batch, c[s], h SPK_TRACE_ARGS);
                SPK_TIMELINE_STAMP(spk_timeline_step, MARK(PUBLISH));
            }
        }
    }
}

#endif
