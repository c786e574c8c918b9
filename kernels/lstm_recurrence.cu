// The persistent LSTM recurrence and the clear kernel of its exchange state.
// Per layer and direction one cooperative launch runs the whole sequence:
// block (g, y) owns hidden units g*UNITS .. g*UNITS+UNITS-1 of every row of
// tile first_tile + y, keeps its slice of R in registers and its cells' c on
// chip, and blocks exchange h through 64-bit words (flag << 32) | float_bits
// in global memory, two parity slots a tile. Compiled by NVRTC; every size is
// a macro, set from the option table of src/lstm/persistent.c (spk help
// lists the options):
//   HIDDEN, UNITS, THREADS, MAX_TILE_ROWS  sizes (THREADS = UNITS * (4 / GATE_BLOCK) * CHUNKS)
//   GATE_BLOCK     gate rows a thread holds: 1, or 4 (the four gates of a unit)
//   ROW_GROUP      batch rows reduced together over the chunk lanes (1, 2, 4, 8; at most CHUNKS)
//   SPK_DEBUG_TRACE 1: the trace build: three extra kernel parameters, and h and c of chosen time
//                  positions written to a trace buffer (SPK_TRACE_STEP); 0/undefined: no trace code
//   SPK_TIMELINE   1: the timeline build: the stage boundaries of chosen steps and blocks stamped
//                  (kernels/spk_timeline.cuh; the stages: kernels/lstm_timeline_stages.cuh)
// A step: gather h of the previous step (paired 16-byte polls of flagged
// words), the dot products with their reduction, the cell, publish h.
// docs/design.md has the work split, the exchange's memory-ordering argument
// (why two parity slots suffice, why a matching flag implies its value,
// never waiting forever) and the numerics; every variant gives the same bits.

#ifndef HIDDEN
#define HIDDEN 128
#endif
#ifndef UNITS
#define UNITS 4
#endif
#ifndef THREADS
#define THREADS 128
#endif
#ifndef MAX_TILE_ROWS
#define MAX_TILE_ROWS 32
#endif
#ifndef SPK_DEBUG_TRACE
#define SPK_DEBUG_TRACE 0
#endif
#ifndef GATE_BLOCK
#define GATE_BLOCK 1
#endif
#ifndef ROW_GROUP
#define ROW_GROUP 1
#endif

#define GATE_ROWS (4 * UNITS)
#define CHUNK_THREADS (GATE_ROWS / GATE_BLOCK) // threads that share one k-chunk
#define CHUNKS (THREADS / CHUNK_THREADS)
#define GROUPS (HIDDEN / UNITS)
#define UNIT_LANES ((4 / GATE_BLOCK) * CHUNKS)
#define ROW_SLOTS ((MAX_TILE_ROWS + ROW_GROUP - 1) / ROW_GROUP) // rows per lane (GATE_BLOCK 4)
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#define STATE_TILE (2 * MAX_TILE_ROWS * HIDDEN)
// Paired gather: 16-byte pairs a thread keeps in flight per round (at most 8: 32 registers).
#define GATHER_PAIRS_ALL ((MAX_TILE_ROWS * HIDDEN / 2 + THREADS - 1) / THREADS)
#define GATHER_PAIRS (GATHER_PAIRS_ALL < 8 ? GATHER_PAIRS_ALL : 8)
#define STATUS_TIMEOUT 1u
#define STATUS_BAD_GEOMETRY 2u
#define MARK(s) (1 + SPK_RECURRENCE_##s) /* the timeline build's mark where stage s ends */

static_assert(UNITS == 4 || UNITS == 8 || UNITS == 16 || (UNITS == 32 && GATE_BLOCK == 4),
              "UNITS must be 4, 8 or 16 (or 32 with GATE_BLOCK 4)");
static_assert(GATE_BLOCK == 1 || GATE_BLOCK == 4, "GATE_BLOCK must be 1 or 4");
static_assert(HIDDEN % 2 == 0, "HIDDEN must be even (paired gather)");
static_assert(HIDDEN % UNITS == 0, "HIDDEN must be a multiple of UNITS");
static_assert(THREADS == CHUNK_THREADS * CHUNKS, "THREADS must be UNITS * (4 / GATE_BLOCK) * CHUNKS");
static_assert(CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8,
              "CHUNKS (THREADS / (UNITS * 4 / GATE_BLOCK)) must be 2, 4 or 8");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS must be whole warps, at most 1024");
static_assert(HIDDEN % (4 * CHUNKS) == 0, "HIDDEN must split into float4 groups per chunk");
static_assert((ROW_GROUP == 1 || ROW_GROUP == 2 || ROW_GROUP == 4 || ROW_GROUP == 8) && ROW_GROUP <= CHUNKS,
              "ROW_GROUP must be 1, 2, 4 or 8 and at most CHUNKS");
static_assert(MAX_TILE_ROWS >= 1 && MAX_TILE_ROWS <= (GATE_BLOCK == 1 ? UNIT_LANES : 4 * ROW_GROUP),
              "MAX_TILE_ROWS must be 1 .. 4 * CHUNKS (GATE_BLOCK 4: 1 .. 4 * ROW_GROUP)");
static_assert(2 * MAX_TILE_ROWS * HIDDEN * 4 <= 48 * 1024, "the two h buffers must fit 48 KiB of static shared memory");

#if SPK_DEBUG_TRACE
// The trace build: the owner of (row, unit) writes h and c of every traced time
// position t into trace [2][trace_slots][batch][HIDDEN] (h first, then c) at
// slot trace_slot[t] (a [steps] table, -1 where t is not traced). trace is
// NULL in every launch but the traced layer's traced direction.
#define SPK_TRACE_STEP(step, t, row, unit, c, h) trace_record(trace, trace_slot, trace_slots, batch, t, row, unit, c, h)
#define SPK_TRACE_PARAMS , float *trace, const int *trace_slot, int trace_slots
// The few extra registers must not spill: let ptxas use what one block per SM allows.
#define SPK_LAUNCH_BOUNDS __launch_bounds__(THREADS, 1)
#else
// Normal builds: no trace parameters, no trace code.
#define SPK_TRACE_STEP(step, t, row, unit, c, h) ((void)0)
#define SPK_TRACE_PARAMS
#define SPK_LAUNCH_BOUNDS __launch_bounds__(THREADS)
#endif
#if defined(SPK_TIMELINE) && SPK_TIMELINE
// The timeline build's few extra registers must not spill either (batch 1's
// default spilled 4 bytes at the plain build's bounds).
#undef SPK_LAUNCH_BOUNDS
#define SPK_LAUNCH_BOUNDS __launch_bounds__(THREADS, 1)
#endif

typedef unsigned long long u64;

// ---- exchange words ------------------------------------------------------

__device__ __forceinline__ void publish_word(u64 *address, u64 word)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(address), "l"(word) : "memory");
}

__device__ __forceinline__ unsigned poll_status(const unsigned *status)
{
    unsigned value;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(status) : "memory");
    return value;
}

__device__ __forceinline__ u64 global_ns()
{
    u64 ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

#include "lstm_cell.cuh"
#include "lstm_reduce.cuh"
#include "lstm_gate_block.cuh"
#include "lstm_timeline_stages.cuh"
#include "spk_timeline.cuh"

__device__ __forceinline__ ulonglong2 poll_pair(const ulonglong2 *address)
{
    ulonglong2 pair;
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(pair.x), "=l"(pair.y) : "l"(address) : "memory");
    return pair;
}

__device__ __forceinline__ bool pair_ready(ulonglong2 pair, unsigned flag)
{
    return ((unsigned)(pair.x >> 32) == flag) & ((unsigned)(pair.y >> 32) == flag);
}

// The rare path of a long wait: gives up when the grid has, or when this wait
// has lasted more than timeout_ns (then tells the grid).
__device__ __forceinline__ void check_give_up(u64 &start, unsigned *status, u64 timeout_ns, bool &given_up)
{
    u64 now = global_ns();
    if (start == 0)
        start = now;
    if (poll_status(status) != 0) {
        given_up = true;
    } else if (timeout_ns != 0 && now - start > timeout_ns) {
        atomicCAS(status, 0u, STATUS_TIMEOUT);
        given_up = true;
    }
}

#if SPK_DEBUG_TRACE
// trace_slot[t]: the slot of time position t in the trace buffer, or -1.
__device__ __forceinline__ void trace_record(float *trace, const int *trace_slot, int slots, int batch, int t,
                                             int row, int unit, float c, float h)
{
    if (trace == nullptr)
        return;
    const int e = trace_slot[t];
    if (e >= 0) {
        trace[((size_t)e * batch + row) * HIDDEN + unit] = h;
        trace[((size_t)(slots + e) * batch + row) * HIDDEN + unit] = c;
    }
}
#endif

// ---- the recurrence ----------------------------------------------------------

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

extern "C" __global__ void SPK_LAUNCH_BOUNDS
spk_lstm_recurrence(const float *__restrict__ gates, // [batch * steps, 4H]: x·Wᵀ of this direction, row b*steps + t
                    const float *__restrict__ r,     // [4H, H] packed
                    const float *__restrict__ bias,  // [4H] packed, Wb + Rb
                    float *output,                   // this direction's first column of [batch, steps, 2H]
                    u64 *state,                      // this direction's [tiles, 2, MAX_TILE_ROWS, H] words
                    unsigned *status,                // 0, or why the launch gave up
                    int batch, int steps, int direction, int first_tile, int tile_rows, unsigned flag_base,
                    u64 timeout_ns SPK_TRACE_PARAMS SPK_TIMELINE_PARAMS)
{
    __shared__ __align__(16) float h_buffers[2][MAX_TILE_ROWS * HIDDEN];

    const int tid = threadIdx.x;
    const int group = blockIdx.x;
    const int tile = first_tile + blockIdx.y;
    const int row0 = tile * tile_rows;
    const int rows = min(tile_rows, batch - row0); // the host never launches an empty tile
    if (tile_rows < 1 || tile_rows > MAX_TILE_ROWS || rows < 1 || steps < 1) {
        // Checked by the host; a whole tile leaves together, so nothing waits on it.
        if (threadIdx.x == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    u64 *tile_state = state + (size_t)tile * STATE_TILE;

    const int q = tid % CHUNKS;                 // k-chunk
    const int unit = tid / UNIT_LANES;          // unit within the block
    const int hidden_unit = group * UNITS + unit;
    SPK_TIMELINE_SETUP(SPK_RECURRENCE_STAGE_COUNT, direction, group + GROUPS * tile, tid);
#if GATE_BLOCK == 1
    const int j = tid / CHUNKS;                 // gate row within the block: unit * 4 + gate
    const int unit_lane = tid % UNIT_LANES;     // = the batch row this lane owns
    const int unit_base = (tid % 32) - unit_lane; // first lane of this unit in the warp
    const bool owner = unit_lane < rows;

    // This thread's slice of R, held for the whole sequence.
    float4 weights[FLOAT4_PER_CHUNK];
    load_weights(weights, r, group * GATE_ROWS + j, q);
#else
    // Lane q < ROW_GROUP of a unit owns row s * ROW_GROUP + my_row of every group s.
    const bool lead = q < ROW_GROUP;
    const int my_row = spk_scatter_row<ROW_GROUP, CHUNKS>(q);
    // The four gate rows of this thread's unit at chunk q, for the whole sequence.
    float4 weights[4][FLOAT4_PER_CHUNK];
    load_weights(weights, r, group * GATE_ROWS + unit * 4, q);
#endif
    const float4 b4 = reinterpret_cast<const float4 *>(bias)[hidden_unit];

    // Initial h is zero; rows past `rows` stay zero for the whole launch.
    for (int i = tid; i < 2 * MAX_TILE_ROWS * HIDDEN; i += THREADS)
        (&h_buffers[0][0])[i] = 0.0f;

    const int gate_stride = 4 * HIDDEN;
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    auto gates_row = [&](int step, int b) -> float4 {
        int t = direction ? steps - 1 - step : step;
        size_t index = ((size_t)(row0 + b) * steps + t) * gate_stride + hidden_unit * 4;
        return __ldg(gates4 + index / 4);
    };
#if GATE_BLOCK == 1
    float4 gx = owner ? gates_row(0, unit_lane) : make_float4(0.f, 0.f, 0.f, 0.f);
    float c = 0.0f;
#else
    float4 gx[ROW_SLOTS];
    float c[ROW_SLOTS];
#pragma unroll
    for (int s = 0; s < ROW_SLOTS; s++) {
        const int b = s * ROW_GROUP + my_row;
        gx[s] = lead && b < rows ? gates_row(0, b) : make_float4(0.f, 0.f, 0.f, 0.f);
        c[s] = 0.0f;
    }
#endif
    bool given_up = false;
    __syncthreads();

    const int words = rows * HIDDEN;
    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        float *h_prev = h_buffers[step & 1];
        SPK_TIMELINE_START(step);

        if (step > 0) {
            // Gather h of step - 1 (flag flag_base + step) from the other slot.
            const u64 *slot = tile_state + ((step - 1) & 1) * (MAX_TILE_ROWS * HIDDEN);
            const unsigned flag = flag_base + (unsigned)step;
            // Paired gather: word i = b * HIDDEN + u, pairs (2i', 2i'+1) never straddle rows (HIDDEN even).
            const ulonglong2 *slot2 = reinterpret_cast<const ulonglong2 *>(slot);
            float2 *h_prev2 = reinterpret_cast<float2 *>(h_prev);
            const int pairs = words / 2;
            for (int base = tid; base < pairs; base += THREADS * GATHER_PAIRS) {
                ulonglong2 w[GATHER_PAIRS];
#pragma unroll
                for (int k = 0; k < GATHER_PAIRS; k++) {
                    int i = base + k * THREADS;
                    if (i < pairs)
                        w[k] = poll_pair(slot2 + i);
                }
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
                    // Every stale pair again, all in flight together: one round trip per round.
#pragma unroll
                    for (int k = 0; k < GATHER_PAIRS; k++) {
                        int i = base + k * THREADS;
                        if (i < pairs && !pair_ready(w[k], flag))
                            w[k] = poll_pair(slot2 + i);
                    }
                }
#pragma unroll
                for (int k = 0; k < GATHER_PAIRS; k++) {
                    int i = base + k * THREADS;
                    if (i < pairs)
                        h_prev2[i] = make_float2(__uint_as_float((unsigned)w[k].x), __uint_as_float((unsigned)w[k].y));
                }
            }
        }
        __syncthreads();
        SPK_TIMELINE_STAMP(step, MARK(WAIT));

#if GATE_BLOCK == 1
        // The next step's input projection, loaded while this step computes.
        float4 gx_next = gx;
        if (owner && step + 1 < steps)
            gx_next = gates_row(step + 1, unit_lane);
        SPK_TIMELINE_STAMP(step, MARK(FETCH));

        // Dot products of every row; the owner lane of row b collects its unit's four gates.
        float pi = 0.0f, pf = 0.0f, pc = 0.0f, po = 0.0f;
        int b0 = 0;
#if ROW_GROUP > 1
        for (; b0 + ROW_GROUP <= rows; b0 += ROW_GROUP) {
            float v[ROW_GROUP][1];
#pragma unroll
            for (int e = 0; e < ROW_GROUP; e++)
                v[e][0] = partial_dot(weights, h_prev + (b0 + e) * HIDDEN, q);
            SPK_TIMELINE_STAMP(step, MARK(DOT));
            spk_reduce_scatter<ROW_GROUP, 1, CHUNKS>(v, q);
            // Gate p of row b0 + e lies in lane p * CHUNKS + spk_scatter_row(e) of the unit.
            const int e = (unit_lane - b0) & (ROW_GROUP - 1);
            const int from = unit_base + spk_scatter_row<ROW_GROUP, CHUNKS>(e);
            float si = __shfl_sync(0xffffffffu, v[0][0], from + 0 * CHUNKS);
            float sf = __shfl_sync(0xffffffffu, v[0][0], from + 1 * CHUNKS);
            float sc = __shfl_sync(0xffffffffu, v[0][0], from + 2 * CHUNKS);
            float so = __shfl_sync(0xffffffffu, v[0][0], from + 3 * CHUNKS);
            if ((unsigned)(unit_lane - b0) < (unsigned)ROW_GROUP) {
                pi = si;
                pf = sf;
                pc = sc;
                po = so;
            }
            SPK_TIMELINE_STAMP(step, MARK(REDUCE));
        }
#endif
        for (int b = b0; b < rows; b++) {
            const float d = partial_dot(weights, h_prev + b * HIDDEN, q);
            SPK_TIMELINE_STAMP(step, MARK(DOT));
            float s = chunk_sum(d);
            float si = __shfl_sync(0xffffffffu, s, unit_base + 0 * CHUNKS);
            float sf = __shfl_sync(0xffffffffu, s, unit_base + 1 * CHUNKS);
            float sc = __shfl_sync(0xffffffffu, s, unit_base + 2 * CHUNKS);
            float so = __shfl_sync(0xffffffffu, s, unit_base + 3 * CHUNKS);
            if (unit_lane == b) {
                pi = si;
                pf = sf;
                pc = sc;
                po = so;
            }
            SPK_TIMELINE_STAMP(step, MARK(REDUCE));
        }

        if (owner) {
            const float h = spk_lstm_cell(gx, pi, pf, pc, po, b4, c);
            SPK_TIMELINE_STAMP(step, MARK(CELL));
            const int b = unit_lane;
            output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
            const u64 word = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
            publish_word(tile_state + (step & 1) * (MAX_TILE_ROWS * HIDDEN) + b * HIDDEN + hidden_unit, word);
            SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c, h);
            SPK_TIMELINE_STAMP(step, MARK(PUBLISH));
        }
        gx = gx_next;
#else
        // The next step's input projections of this lane's rows, loaded while this step computes.
        float4 gx_next[ROW_SLOTS];
#pragma unroll
        for (int s = 0; s < ROW_SLOTS; s++) {
            const int b = s * ROW_GROUP + my_row;
            gx_next[s] = gx[s];
            if (lead && b < rows && step + 1 < steps)
                gx_next[s] = gates_row(step + 1, b);
        }
        SPK_TIMELINE_STAMP(step, MARK(FETCH));
        // Row groups: the 4-gate dots of ROW_GROUP rows, their reduce-scatter,
        // then the owner lanes update their cells (the condition on b0 is the
        // same for the whole block, so every lane takes the same shuffles).
#pragma unroll
        for (int s = 0; s < ROW_SLOTS; s++) {
            const int b0 = s * ROW_GROUP;
            if (b0 < rows) {
                float v[ROW_GROUP][4];
#pragma unroll
                for (int e = 0; e < ROW_GROUP; e++) {
                    float4 d = make_float4(0.f, 0.f, 0.f, 0.f);
                    if (b0 + e < rows)
                        d = spk_partial_dot4<FLOAT4_PER_CHUNK, CHUNKS>(weights, h_prev + (b0 + e) * HIDDEN, q);
                    v[e][0] = d.x;
                    v[e][1] = d.y;
                    v[e][2] = d.z;
                    v[e][3] = d.w;
                }
                SPK_TIMELINE_STAMP(step, MARK(DOT));
                spk_reduce_scatter<ROW_GROUP, 4, CHUNKS>(v, q);
                SPK_TIMELINE_STAMP(step, MARK(REDUCE));
                const int b = b0 + my_row;
                if (lead && b < rows) {
                    const float h = spk_lstm_cell(gx[s], v[0][0], v[0][1], v[0][2], v[0][3], b4, c[s]);
                    SPK_TIMELINE_STAMP(step, MARK(CELL));
                    output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
                    const u64 word = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
                    publish_word(tile_state + (step & 1) * (MAX_TILE_ROWS * HIDDEN) + b * HIDDEN + hidden_unit,
                                 word);
                    SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c[s], h);
                    SPK_TIMELINE_STAMP(step, MARK(PUBLISH));
                }
            }
        }
#pragma unroll
        for (int s = 0; s < ROW_SLOTS; s++)
            gx[s] = gx_next[s];
#endif
    }
}

// Zeroes `words` 64-bit words of exchange state (once per forward pass).
extern "C" __global__ void spk_lstm_clear(u64 *state, u64 words)
{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (u64)gridDim.x * blockDim.x)
        state[i] = 0ull;
}
