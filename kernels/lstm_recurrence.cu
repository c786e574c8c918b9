// The persistent LSTM recurrence (DESIGN.md §3) and the clear kernel of its
// exchange state. Compiled by NVRTC; every size is a macro so scripts compile
// variants side by side:
//   HIDDEN         hidden units H (64, 128, 256)
//   UNITS          hidden units per block (4, 8 or 16; also 32 with GATE_BLOCK 4); GROUPS = HIDDEN / UNITS
//                  blocks cover a tile
//   GATE_BLOCK     gate rows a thread holds: 1 (the seed's layout) or 4 (the four gates of a unit, see
//                  "Gate blocks" below)
//   THREADS        threads per block = UNITS * (4 / GATE_BLOCK) * CHUNKS (CHUNKS = k-chunks per gate row:
//                  2, 4 or 8)
//   ROW_GROUP      batch rows reduced together over the chunk lanes (1, 2, 4, 8; at most CHUNKS): 1 is the
//                  seed's all-reduce per row, more is the reduce-scatter of kernels/lstm_reduce.cuh
//   MAX_TILE_ROWS  most batch rows a block carries (GATE_BLOCK 1: <= 4 * CHUNKS, one row per lane of a
//                  unit's lanes; GATE_BLOCK 4: <= 4 * ROW_GROUP, up to 4 rows per lane)
//   SPK_ACQ_REL    1: publish with st.release / poll with ld.acquire (conservative ordering, for A/B runs)
//   GATHER         1: the seed's gather (each thread polls one word at a time, waiting on each in turn)
//                  2: paired gather (two words per 16-byte load, every stale pair re-polled at once)
//   SPK_DEBUG_TRACE 1: the trace build: three extra kernel parameters, and h and c of chosen time
//                  positions written to a trace buffer (SPK_TRACE_STEP); 0/undefined: no trace code
//
// Work split. Block (g, y) owns the units g*UNITS .. g*UNITS+UNITS-1 of every
// row of tile first_tile + y. Thread t holds packed gate row j = t / CHUNKS of
// this block (4*UNITS rows: row u*4 + p is gate p of unit u, gates [i, f, c, o])
// and the columns of k-chunk q = t % CHUNKS in registers for the whole sequence.
// Chunk q holds the float4 groups q, q + CHUNKS, q + 2*CHUNKS, ... of the row, so
// the lanes of one gate row read 4*CHUNKS consecutive floats of h from shared
// memory (no bank conflict, broadcast across gate rows).
// A unit's four gate rows lie in 4*CHUNKS consecutive lanes of one warp (a whole
// warp when CHUNKS = 8). Per step and batch row: a K-term partial dot product per
// thread (4 interleaved FMA chains), an xor-shuffle tree over the CHUNKS lanes of
// the gate row, then four shuffles bring the unit's four pre-activations to the
// lane that owns that batch row (lane b of the unit's lanes owns row b, keeping
// its cell state c in a register for the whole sequence). The owner lanes of all
// rows then update c and h at once and publish h.
//
// Row groups (ROW_GROUP G > 1, GATE_BLOCK 1). G rows at a time: G partial dots
// per thread, then the reduce-scatter over the CHUNKS lanes of the gate row
// (G - 1 shuffles, plus one per mask left when G < CHUNKS) leaves lane q with
// the sum of row spk_scatter_row(q); four shuffles bring the unit's four gates
// of each row to the row's owner lane. 8 rows: 7 + 4 = 11 shuffles instead of
// 8 * (3 + 4) = 56. Rows past the last whole group go one at a time, as G = 1.
//
// Gate blocks (GATE_BLOCK 4). Thread t holds all four gate rows of unit
// t / CHUNKS at k-chunk q = t % CHUNKS (4 * FLOAT4_PER_CHUNK float4 registers),
// so one float4 of h from shared memory feeds 16 FMAs instead of 4 (a quarter
// of the shared-memory loads per FMA) and a unit's gates never leave its
// lanes. Rows go in groups of ROW_GROUP: 4-gate partial dots of each row, the
// reduce-scatter of the 4-gate vectors, and lane q < ROW_GROUP then holds the
// four sums of row b0 + spk_scatter_row(q) and updates that cell at once (its
// c in a register: up to four rows per lane, one per group). No gather
// shuffles at all: 8 rows x 4 gates cost 16 + 8 + 4 = 28 shuffles per warp of
// 4 units (the seed: 8 * 7 per unit).
//
// Exchange. The owner of (row b, unit u) stores the 64-bit word
// (flag << 32) | float_bits(h) at state[tile][step & 1][b][u], flag =
// flag_base + step + 1. At the next step every block gathers the whole h of its
// tile's rows from the other parity slot into shared memory, polling each word
// until its high half equals the expected flag. One 64-bit single-copy-atomic
// access carries value and flag, so a matching flag implies the value of the
// same store: no fence, no counter. Flags only grow within a pass (layer l uses
// l*steps + 1 .. (l+1)*steps), the clear kernel zeroes the state once per pass
// and flag 0 is never expected, so a stale word (earlier layer, earlier pass,
// or two steps back in the same slot: flag smaller by 2) never matches.
//
// Slot reuse invariant (why two parity slots suffice). Block X overwrites slot
// (s & 1) when it publishes step s + 2. It got there only after gathering step
// s + 1 from every block of the tile (every block reads all H units). Any block
// Y publishes step s + 1 only after its gather of step s (the words in slot
// s & 1) has returned its values: the step s + 1 values Y stores are computed
// from them (data dependency, plus the block barrier between gather and
// compute). So no reader still needs slot s & 1 when X overwrites it, and no
// block is ever more than one step ahead of another block of its tile. Even a
// hypothetical reordering could only make a reader see a larger flag and keep
// polling, never accept a wrong value; SPK_ACQ_REL=1 turns the data dependency
// into a formal release/acquire edge for anyone who wants to measure the cost.
//
// The paired gather (GATHER 2). The PTX memory model treats a vector access as
// the accesses of its elements, in an unspecified order; it promises nothing
// about the vector as a whole. So ld.relaxed.gpu.v2.u64 is two single-copy-
// atomic 64-bit loads, and each element carries its own flag as before: a
// pair is accepted only when BOTH flags match, so nothing changes in what a
// reader may accept. (Packing more floats behind one flag, e.g. flag + 3
// floats in 16 bytes, would rest on a 128-bit atomicity the model does not
// give, so it is not done.) What changes is the waiting: the seed waits on its
// words one after another, so a thread whose words are still stale pays one
// L2 round trip per stale word; here every stale pair of the thread is
// re-polled in the same round, so a wait costs one round trip per round
// however many words are late, and half as many load instructions are issued.
//
// Never waiting forever. The host only launches grids whose blocks are all
// co-resident (cooperative launch within the occupancy capacity). Beyond that,
// a poll that has not seen its flag for timeout_ns (globaltimer) writes a code
// to *status, and every later poll of the grid gives up at once when status is
// set, so the launch always ends; the host reports the status as an error.
// NaN or infinite values never touch control flow: only flags do.
//
// Numerics. pre = (gates_x + dot(h, R_row)) + bias, with the dot product summed
// in a fixed order (per thread: 4 FMA chains over its float4 groups, combined
// (a0 + a1) + (a2 + a3); across chunks: an xor tree, masks 1, 2, 4). Every row
// of every tile goes through the same instructions, so results are bitwise
// identical across runs, tile heights and launch splits. Row groups and gate
// blocks keep every one of these sums (kernels/lstm_reduce.cuh says why the
// reduce-scatter adds the same pairs in the same order), so every variant
// gives the same bits. Activations and the
// cell update: kernels/lstm_cell.cuh (shared with the cluster kernel).

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
#ifndef SPK_ACQ_REL
#define SPK_ACQ_REL 0
#endif
#ifndef GATHER
#define GATHER 2
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
#define POLL_BATCH 8
// Paired gather: 16-byte pairs a thread keeps in flight per round (at most 8: 32 registers).
#define GATHER_PAIRS_ALL ((MAX_TILE_ROWS * HIDDEN / 2 + THREADS - 1) / THREADS)
#define GATHER_PAIRS (GATHER_PAIRS_ALL < 8 ? GATHER_PAIRS_ALL : 8)
#define STATUS_TIMEOUT 1u
#define STATUS_BAD_GEOMETRY 2u

static_assert(UNITS == 4 || UNITS == 8 || UNITS == 16 || (UNITS == 32 && GATE_BLOCK == 4),
              "UNITS must be 4, 8 or 16 (or 32 with GATE_BLOCK 4)");
static_assert(GATE_BLOCK == 1 || GATE_BLOCK == 4, "GATE_BLOCK must be 1 or 4");
static_assert(GATHER == 1 || GATHER == 2, "GATHER must be 1 (per-word waits) or 2 (paired loads)");
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

typedef unsigned long long u64;

// ---- exchange words ------------------------------------------------------

__device__ __forceinline__ void publish_word(u64 *address, u64 word)
{
#if SPK_ACQ_REL
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(address), "l"(word) : "memory");
#else
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(address), "l"(word) : "memory");
#endif
}

__device__ __forceinline__ u64 poll_word(const u64 *address)
{
    u64 word;
#if SPK_ACQ_REL
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(word) : "l"(address) : "memory");
#else
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(word) : "l"(address) : "memory");
#endif
    return word;
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

// Polls one word until its flag matches. Returns false when the grid gave up
// (timeout here or elsewhere); `given_up` then stays set for this thread.
__device__ __forceinline__ u64 wait_word(const u64 *address, u64 word, unsigned flag, unsigned *status,
                                      u64 timeout_ns, bool &given_up)
{
    u64 start = 0;
    unsigned spins = 0;
    while ((unsigned)(word >> 32) != flag) {
        if (given_up)
            return word;
        if ((++spins & 63u) == 0) {
            // Rare path (tens of microseconds of waiting): a normal wait is about a microsecond.
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
        word = poll_word(address);
    }
    return word;
}

#include "lstm_cell.cuh"
#include "lstm_reduce.cuh"
#include "lstm_gate_block.cuh"

__device__ __forceinline__ ulonglong2 poll_pair(const ulonglong2 *address)
{
    ulonglong2 pair;
#if SPK_ACQ_REL
    asm volatile("ld.acquire.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(pair.x), "=l"(pair.y) : "l"(address) : "memory");
#else
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(pair.x), "=l"(pair.y) : "l"(address) : "memory");
#endif
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

extern "C" __global__ void SPK_LAUNCH_BOUNDS
spk_lstm_recurrence(const float *__restrict__ gates, // [batch * steps, 4H]: x·Wᵀ of this direction, row b*steps + t
                    const float *__restrict__ r,     // [4H, H] packed
                    const float *__restrict__ bias,  // [4H] packed, Wb + Rb
                    float *output,                   // this direction's first column of [batch, steps, 2H]
                    u64 *state,                      // this direction's [tiles, 2, MAX_TILE_ROWS, H] words
                    unsigned *status,                // 0, or why the launch gave up
                    int batch, int steps, int direction, int first_tile, int tile_rows, unsigned flag_base,
                    u64 timeout_ns SPK_TRACE_PARAMS)
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
#if GATE_BLOCK == 1
    const int j = tid / CHUNKS;                 // gate row within the block: unit * 4 + gate
    const int unit_lane = tid % UNIT_LANES;     // = the batch row this lane owns
    const int unit_base = (tid % 32) - unit_lane; // first lane of this unit in the warp
    const bool owner = unit_lane < rows;

    // This thread's slice of R, held for the whole sequence.
    float4 weights[FLOAT4_PER_CHUNK];
    {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(group * GATE_ROWS + j) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            weights[k] = row[k * CHUNKS + q];
    }
#else
    // Lane q < ROW_GROUP of a unit owns row s * ROW_GROUP + my_row of every group s.
    const bool lead = q < ROW_GROUP;
    const int my_row = spk_scatter_row<ROW_GROUP, CHUNKS>(q);
    // The four gate rows of this thread's unit at chunk q, for the whole sequence.
    float4 weights[4][FLOAT4_PER_CHUNK];
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const float4 *row =
            reinterpret_cast<const float4 *>(r + (size_t)(group * GATE_ROWS + unit * 4 + p) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            weights[p][k] = row[k * CHUNKS + q];
    }
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

        if (step > 0) {
            // Gather h of step - 1 (flag flag_base + step) from the other slot.
            const u64 *slot = tile_state + ((step - 1) & 1) * (MAX_TILE_ROWS * HIDDEN);
            const unsigned flag = flag_base + (unsigned)step;
#if GATHER == 1
            for (int base = tid; base < words; base += THREADS * POLL_BATCH) {
                u64 w[POLL_BATCH];
#pragma unroll
                for (int k = 0; k < POLL_BATCH; k++) {
                    int i = base + k * THREADS;
                    if (i < words)
                        w[k] = poll_word(slot + i);
                }
#pragma unroll
                for (int k = 0; k < POLL_BATCH; k++) {
                    int i = base + k * THREADS;
                    if (i < words) {
                        if ((unsigned)(w[k] >> 32) != flag)
                            w[k] = wait_word(slot + i, w[k], flag, status, timeout_ns, given_up);
                        h_prev[i] = __uint_as_float((unsigned)w[k]);
                    }
                }
            }
#else
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
#endif
        }
        __syncthreads();

#if GATE_BLOCK == 1
        // The next step's input projection, loaded while this step computes.
        float4 gx_next = gx;
        if (owner && step + 1 < steps)
            gx_next = gates_row(step + 1, unit_lane);

        // Dot products of every row; the owner lane of row b collects its unit's four gates.
        float pi = 0.0f, pf = 0.0f, pc = 0.0f, po = 0.0f;
        int b0 = 0;
#if ROW_GROUP > 1
        for (; b0 + ROW_GROUP <= rows; b0 += ROW_GROUP) {
            float v[ROW_GROUP][1];
#pragma unroll
            for (int e = 0; e < ROW_GROUP; e++)
                v[e][0] = partial_dot(weights, h_prev + (b0 + e) * HIDDEN, q);
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
        }
#endif
        for (int b = b0; b < rows; b++) {
            float s = chunk_sum(partial_dot(weights, h_prev + b * HIDDEN, q));
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
        }

        if (owner) {
            const float h = spk_lstm_cell(gx, pi, pf, pc, po, b4, c);
            const int b = unit_lane;
            output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
            const u64 word = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
            publish_word(tile_state + (step & 1) * (MAX_TILE_ROWS * HIDDEN) + b * HIDDEN + hidden_unit, word);
            SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c, h);
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
                spk_reduce_scatter<ROW_GROUP, 4, CHUNKS>(v, q);
                const int b = b0 + my_row;
                if (lead && b < rows) {
                    const float h = spk_lstm_cell(gx[s], v[0][0], v[0][1], v[0][2], v[0][3], b4, c[s]);
                    output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
                    const u64 word = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
                    publish_word(tile_state + (step & 1) * (MAX_TILE_ROWS * HIDDEN) + b * HIDDEN + hidden_unit,
                                 word);
                    SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c[s], h);
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
