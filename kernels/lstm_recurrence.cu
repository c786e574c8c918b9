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
// A step reads as its stages (kernels/lstm_recurrence_stages.cuh): wait for
// h (the paired gather: 16-byte polls of flagged words), fetch the next
// gates, the step's cells (the dot products with their reduction, the cell,
// publish h), take the gates.
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
#include "spk_status.cuh" /* STATUS_*: the codes the host reports */
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
#define SPK_TRACE_ARGS , trace, trace_slot, trace_slots /* handed on to the stages that publish h */
// The few extra registers must not spill: let ptxas use what one block per SM allows.
#define SPK_LAUNCH_BOUNDS __launch_bounds__(THREADS, 1)
#else
// Normal builds: no trace parameters, no trace code.
#define SPK_TRACE_STEP(step, t, row, unit, c, h) ((void)0)
#define SPK_TRACE_PARAMS
#define SPK_TRACE_ARGS
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

#include "lstm_recurrence_stages.cuh"

// ---- the recurrence ----------------------------------------------------------

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
    // The cells this thread owns and the rows of R it holds (kernels/lstm_recurrence_stages.cuh).
    const int j = tid / CHUNKS; // one gate row a thread: the block's gate row unit * 4 + gate
    const bool cell_lane = GATE_BLOCK == 1 || q < ROW_GROUP;
    const int lane_row = GATE_BLOCK == 1 ? tid % UNIT_LANES : spk_scatter_row<ROW_GROUP, CHUNKS>(q);
    const int unit_base = (tid % 32) - lane_row; // one gate row a thread: the unit's first lane in the warp
    const bool owner = cell_lane && lane_row < rows; // owns the cell of row lane_row
    thread_weights weights;                          // this thread's slice of R, for the whole sequence
    load_weights(weights, r, group * GATE_ROWS + (GATE_BLOCK == 1 ? j : unit * 4), q);
    const float4 b4 = reinterpret_cast<const float4 *>(bias)[hidden_unit];
    zero_h(&h_buffers[0][0], tid);

    // x·Wᵀ of row b of the tile at `step` of the direction, for this block's unit.
    const int gate_stride = 4 * HIDDEN;
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    auto gates_of = [&](int step, int b) -> float4 {
        int t = direction ? steps - 1 - step : step;
        size_t index = ((size_t)(row0 + b) * steps + t) * gate_stride + hidden_unit * 4;
        return __ldg(gates4 + index / 4);
    };
    cell_gates gx = first_gates<GATE_BLOCK>(gates_of, rows, lane_row, cell_lane, owner);
    cell_states c;
    zero_cells(c);
    bool given_up = false;
    __syncthreads();

    const int words = rows * HIDDEN;
    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        float *h_prev = h_buffers[step & 1];
        SPK_TIMELINE_START(step);
        if (step > 0) {
            // Wait for h: gather h of step - 1 (flag flag_base + step) from the other parity slot, word i =
            // b * HIDDEN + u in 16-byte pairs (HIDDEN even: no pair straddles two rows), a round at a time.
            const u64 *slot = tile_state + ((step - 1) & 1) * (MAX_TILE_ROWS * HIDDEN);
            const unsigned flag = flag_base + (unsigned)step;
            const ulonglong2 *slot2 = reinterpret_cast<const ulonglong2 *>(slot);
            float2 *h_prev2 = reinterpret_cast<float2 *>(h_prev);
            const int pairs = words / 2;
            for (int base = tid; base < pairs; base += THREADS * GATHER_PAIRS) {
                ulonglong2 w[GATHER_PAIRS];
                poll_pairs(w, slot2, base, pairs);
                wait_for_pairs(w, slot2, base, pairs, flag, status, timeout_ns, given_up);
                store_pairs(h_prev2, w, base, pairs);
            }
        }
        __syncthreads();
        SPK_TIMELINE_STAMP(step, MARK(WAIT));
        const cell_gates gx_next = fetch_gates(gx, gates_of, step, steps, rows, lane_row, cell_lane, owner);
        SPK_TIMELINE_STAMP(step, MARK(FETCH));
        cells_of_step(weights, h_prev, gx, c, b4, rows, q, lane_row, cell_lane, unit_base, owner, output, tile_state,
                      row0, steps, t, step, flag_base, hidden_unit, batch SPK_TRACE_ARGS SPK_TIMELINE_FN_ARGS(step));
        gx = gx_next; // take the gates
    }
}

// Zeroes `words` 64-bit words of exchange state (once per forward pass).
extern "C" __global__ void spk_lstm_clear(u64 *state, u64 words)
{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (u64)gridDim.x * blockDim.x)
        state[i] = 0ull;
}
