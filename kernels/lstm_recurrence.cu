// The persistent LSTM recurrence (DESIGN.md §3) and the clear kernel of its
// exchange state. Compiled by NVRTC; every size is a macro so scripts compile
// variants side by side:
//   HIDDEN         hidden units H (64, 128, 256)
//   UNITS          hidden units per block (4 or 8); GROUPS = HIDDEN / UNITS blocks cover a tile
//   THREADS        threads per block = UNITS * 4 * CHUNKS (CHUNKS = k-chunks per gate row: 2, 4 or 8)
//   MAX_TILE_ROWS  most batch rows a block carries (<= 4 * CHUNKS: one row per lane of a unit's lanes)
//   SPK_ACQ_REL    1: publish with st.release / poll with ld.acquire (conservative ordering, for A/B runs)
//   DEBUG_TRACE    reserved: a later trace hook goes where SPK_TRACE_STEP is expanded
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
// identical across runs, tile heights and launch splits. Activations below.

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

#define GATE_ROWS (4 * UNITS)
#define CHUNKS (THREADS / GATE_ROWS)
#define GROUPS (HIDDEN / UNITS)
#define UNIT_LANES (4 * CHUNKS)
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#define STATE_TILE (2 * MAX_TILE_ROWS * HIDDEN)
#define POLL_BATCH 8
#define STATUS_TIMEOUT 1u
#define STATUS_BAD_GEOMETRY 2u

static_assert(UNITS == 4 || UNITS == 8, "UNITS must be 4 or 8");
static_assert(HIDDEN % UNITS == 0, "HIDDEN must be a multiple of UNITS");
static_assert(THREADS == UNITS * 4 * CHUNKS, "THREADS must be UNITS * 4 * CHUNKS");
static_assert(CHUNKS == 2 || CHUNKS == 4 || CHUNKS == 8, "CHUNKS (THREADS / (4 * UNITS)) must be 2, 4 or 8");
static_assert(THREADS % 32 == 0, "THREADS must be whole warps");
static_assert(HIDDEN % (4 * CHUNKS) == 0, "HIDDEN must split into float4 groups per chunk");
static_assert(MAX_TILE_ROWS >= 1 && MAX_TILE_ROWS <= UNIT_LANES, "MAX_TILE_ROWS must be 1 .. 4 * CHUNKS");
static_assert(2 * MAX_TILE_ROWS * HIDDEN * 4 <= 48 * 1024, "the two h buffers must fit 48 KiB of static shared memory");

#ifndef DEBUG_TRACE
// Hook for a later step trace (h, c of chosen steps); empty in normal builds.
#define SPK_TRACE_STEP(step, t, row, unit, c, h) ((void)0)
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

// ---- activations -----------------------------------------------------------
// The same forms, operation for operation, as the plain-C emulations in
// src/lstm/activations.h (exp2f stands in there for ex2.approx); products and
// sums are rounded separately (__fmul_rn/__fadd_rn) so nothing is contracted
// into an FMA the emulation does not have:
//   exp(v)     = ex2.approx.ftz(clamp(v, -87, 87) * log2(e))
//   sigmoid(v) = 1 / (1 + exp(-v))                   (IEEE division)
//   tanh(v)    = Cephes' odd polynomial v + v^3 P(v^2) for |v| < 0.625,
//                sign(v) * (1 - 2 / (exp(2|v|) + 1)) above.
// One deliberate difference: the clamp here lets NaN through (fminf/fmaxf
// would turn a NaN into the clamp limit), so a NaN pre-activation gives a NaN
// gate instead of a saturated one. For every other value both clamps agree.

#define EXP_LIMIT 87.0f

__device__ __forceinline__ float spk_exp(float v)
{
    v = v < -EXP_LIMIT ? -EXP_LIMIT : v;
    v = v > EXP_LIMIT ? EXP_LIMIT : v;
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(v, 1.44269504088896341f)));
    return y;
}

__device__ __forceinline__ float spk_sigmoid(float v)
{
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, spk_exp(-v)));
}

__device__ __forceinline__ float spk_tanh(float v)
{
    const float a = fabsf(v);
    if (a < 0.625f) {
        const float z = __fmul_rn(v, v);
        float p = -5.70498872745e-3f;
        p = __fadd_rn(__fmul_rn(p, z), 2.06390887954e-2f);
        p = __fadd_rn(__fmul_rn(p, z), -5.37397155531e-2f);
        p = __fadd_rn(__fmul_rn(p, z), 1.33314422036e-1f);
        p = __fadd_rn(__fmul_rn(p, z), -3.33332819422e-1f);
        return __fadd_rn(__fmul_rn(__fmul_rn(p, z), v), v);
    }
    const float t = __fsub_rn(1.0f, __fdiv_rn(2.0f, __fadd_rn(spk_exp(__fmul_rn(2.0f, a)), 1.0f)));
    return v < 0.0f ? -t : t;
}

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

extern "C" __global__ void __launch_bounds__(THREADS)
spk_lstm_recurrence(const float *__restrict__ gates, // [batch * steps, 4H]: x·Wᵀ of this direction, row b*steps + t
                    const float *__restrict__ r,     // [4H, H] packed
                    const float *__restrict__ bias,  // [4H] packed, Wb + Rb
                    float *output,                   // this direction's first column of [batch, steps, 2H]
                    u64 *state,                      // this direction's [tiles, 2, MAX_TILE_ROWS, H] words
                    unsigned *status,                // 0, or why the launch gave up
                    int batch, int steps, int direction, int first_tile, int tile_rows, unsigned flag_base,
                    u64 timeout_ns)
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
    const int j = tid / CHUNKS;                 // gate row within the block: unit * 4 + gate
    const int unit = tid / UNIT_LANES;          // unit within the block
    const int unit_lane = tid % UNIT_LANES;     // = the batch row this lane owns
    const int unit_base = (tid % 32) - unit_lane; // first lane of this unit in the warp
    const int hidden_unit = group * UNITS + unit;
    const bool owner = unit_lane < rows;

    // This thread's slice of R, held for the whole sequence.
    float4 weights[FLOAT4_PER_CHUNK];
    {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(group * GATE_ROWS + j) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            weights[k] = row[k * CHUNKS + q];
    }
    const float4 b4 = reinterpret_cast<const float4 *>(bias)[hidden_unit];

    // Initial h is zero; rows past `rows` stay zero for the whole launch.
    for (int i = tid; i < 2 * MAX_TILE_ROWS * HIDDEN; i += THREADS)
        (&h_buffers[0][0])[i] = 0.0f;

    const int gate_stride = 4 * HIDDEN;
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
    auto gates_at = [&](int step) -> float4 {
        int t = direction ? steps - 1 - step : step;
        size_t index = ((size_t)(row0 + unit_lane) * steps + t) * gate_stride + hidden_unit * 4;
        return __ldg(gates4 + index / 4);
    };
    float4 gx = owner ? gates_at(0) : make_float4(0.f, 0.f, 0.f, 0.f);
    float c = 0.0f;
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
        }
        __syncthreads();

        // The next step's input projection, loaded while this step computes.
        float4 gx_next = gx;
        if (owner && step + 1 < steps)
            gx_next = gates_at(step + 1);

        // Dot products of every row; the owner lane of row b collects its unit's four gates.
        float pi = 0.0f, pf = 0.0f, pc = 0.0f, po = 0.0f;
        for (int b = 0; b < rows; b++) {
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
            const float gi = spk_sigmoid((gx.x + pi) + b4.x);
            const float gf = spk_sigmoid((gx.y + pf) + b4.y);
            const float gc = spk_tanh((gx.z + pc) + b4.z);
            const float go = spk_sigmoid((gx.w + po) + b4.w);
            c = fmaf(gf, c, gi * gc);
            const float h = go * spk_tanh(c);
            const int b = unit_lane;
            output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + hidden_unit] = h;
            const u64 word = ((u64)(flag_base + (unsigned)step + 1u) << 32) | __float_as_uint(h);
            publish_word(tile_state + (step & 1) * (MAX_TILE_ROWS * HIDDEN) + b * HIDDEN + hidden_unit, word);
            SPK_TRACE_STEP(step, t, row0 + b, hidden_unit, c, h);
        }
        gx = gx_next;
    }
}

// Zeroes `words` 64-bit words of exchange state (once per forward pass).
extern "C" __global__ void spk_lstm_clear(u64 *state, u64 words)
{
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += (u64)gridDim.x * blockDim.x)
        state[i] = 0ull;
}
