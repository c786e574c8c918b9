// The thread-block-cluster LSTM recurrence for sm_90 (Hopper): one cluster
// per (batch tile, direction), both directions in one launch, h exchanged
// through distributed shared memory with one cluster barrier per step.
// Compiled by NVRTC; every size is a macro:
//   HIDDEN          hidden units H (16 .. 256)
//   CLUSTER         blocks per cluster (1, 2, 4, 8; 16 needs the non-portable
//                   cluster size attribute, which the host sets)
//   THREADS         threads per block = GATE_ROWS / GATE_BLOCK * CHUNKS, CHUNKS
//                   (k-chunks per gate row) 2, 4 or 8, whole warps, at most 1024
//   GATE_BLOCK      gate rows a thread holds: 1, or 4 (the four gates of a
//                   unit, needs DIRECT_PUSH and weights in registers): one
//                   float4 of h feeds 16 FMAs instead of 4, and a row's four
//                   gate sums end in the same lanes (no gather shuffles); the
//                   persistent kernel's gate blocks, the same bits as it with
//                   the same CHUNKS (kernels/lstm_gate_block.cuh)
//   TILE_ROWS       the most batch rows a tile carries (1 .. 32); the launch's
//                   tile_rows (<= TILE_ROWS) sizes the shared memory
//   WEIGHTS_SHARED  0: each thread keeps its slice of R in registers;
//                   1: the block's slice of R lives in shared memory
//   ROW_GROUP       rows whose partial dots a thread forms at once (1, 2, 4,
//                   8, at most CHUNKS; default CHUNKS): fewer registers when
//                   smaller, fewer shuffles when larger; the results are the
//                   same bits for every value
//   MIN_BLOCKS      __launch_bounds__' blocks per SM (register budget)
//   CELL_IN_LANES   0: sums go through the `pre` buffer and a __syncthreads to
//                   cell threads; 1: the lanes that hold a row's sums gather
//                   the unit's four gates with three shuffles and finish the
//                   cell themselves (no `pre`, no block barrier before the
//                   cell); tiles are padded to whole row groups in h
//   LATE_STORE      1: h goes to the output after the step's exchange is
//                   under way (after the cluster arrive), so the release of the
//                   barrier does not wait for global stores
//   VECTOR_PUSH     0: every cell stores its h into every block (CLUSTER
//                   scalar DSMEM stores per cell); 1: cells write h into
//                   their own block, __syncthreads, then one 16-byte store per
//                   (row, 4 units, peer block): 4x fewer remote stores
//   MBARRIER_EXCHANGE  1 (needs VECTOR_PUSH or DIRECT_PUSH): no cluster
//                   barrier per step; pushes are st.async with complete_tx on
//                   the receiver's mbarrier, and each block waits only for the
//                   bytes of its next h (see "The mbarrier exchange" below)
//   DIRECT_PUSH     1 (needs MBARRIER_EXCHANGE and CELL_IN_LANES): every lane
//                   that holds one of a row's gate sums gathers the other
//                   three and finishes the cell (copies of the same cell, the
//                   same bits); the copies split the blocks between them and
//                   st.async their h straight into each block, their own
//                   included. The step has no block barrier at all: a warp
//                   goes from its mbarrier wait to its pushes on its own
//   GATES_AHEAD     steps ahead that a cell's x·Wᵀ is fetched: 1 (a register
//                   load one step ahead) or 2 .. 4 (needs DIRECT_PUSH):
//                   cp.async into a ring of GATES_AHEAD stages in shared
//                   memory, each thread its own, so the fetch has
//                   GATES_AHEAD - 1 whole steps to land (global latency
//                   above a step's time otherwise stalls the cell)
//   WARP_PUSH       1 (needs DIRECT_PUSH and GATE_BLOCK 4): the direct pushes
//                   of a warp go as 16-byte st.async, four consecutive units
//                   of one row each, gathered with four shuffles: 4x fewer
//                   remote stores for the same bytes, still no block barrier
//   DIRECTIONS      directions a block runs: 1 (grid z = the direction), or 2
//                   (needs DIRECT_PUSH and weights in registers): threads
//                   [0, THREADS) run the forward direction of the tile and
//                   [THREADS, 2*THREADS) the backward one, each with its own
//                   shared memory (mbarriers, h, stages) after the other's;
//                   a step has no block barrier, so the two only share the
//                   SM: while one waits for its h, the other computes
//   ROW_PHASES      1, or 2 (needs DIRECT_PUSH and two row groups a tile,
//                   TILE_ROWS >= 2 * ROW_GROUP): the tile's row groups split
//                   in two halves that take turns, each with its own pair of
//                   mbarriers. A step computes and pushes the first half's
//                   rows, then the second's; while the second half computes,
//                   the first half's h crosses the cluster, so its next wait
//                   finds it there. Batch rows are independent, and the
//                   weights in registers serve both halves
// None of these changes a sum or a cell: every option gives the same bits,
// except CHUNKS (and GATE_BLOCK, which sets it for a given THREADS): another
// chunk split adds the same products in another order.
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

//
// The mbarrier exchange (MBARRIER_EXCHANGE 1). Each block owns two mbarriers
// full[0], full[1] (arrival count 1); full[q] completes a phase when the peers'
// bytes of h[q] for one step have landed: rows * (HIDDEN - UNITS) * 4 bytes,
// armed by thread 0 with arrive.expect_tx. Step s pushes into h[(s+1)&1]
// (st.async ... mbarrier::complete_tx, whose completion is a release at
// cluster scope) and step s+1 waits on full[(s+1)&1] (try_wait.acquire.cluster)
// before reading it; a block's own units reach its h through plain stores
// and the __syncthreads before the pushes.
//  - Arming: full[1] (step 0's pushes) and full[0] (step 1's) are armed before
//    the initial cluster barrier; at step s >= 1 thread 0, right after its wait
//    on full[s&1], re-arms it for step s+1's pushes. Those come from peers that
//    received this block's step-s pushes, issued after this block's step-s
//    __syncthreads, i.e. after the re-arm: the tx-count never runs ahead of
//    its phase, and no phase can complete before every thread of the block
//    has seen the previous one (the parity waits never miss a phase).
//  - Wait parity: full[s&1] is waited on at steps s = 1, 3, 5, ... (buffer 1)
//    and 2, 4, ... (buffer 0); the k-th wait is for phase k, k = (s-1) >> 1.
//  - Write after read: block X pushes into Y's h[q] at step s+2 only after it
//    waited for Y's step-s+1 bytes, which Y pushed after the __syncthreads of
//    step s+1, after Y's reads of h[q] at step s+1.
//  - DIRECT_PUSH: a block's own units come through st.async as well (the
//    tx-count covers all rows * HIDDEN * 4 bytes), so no __syncthreads is
//    needed. Every warp owns units and pushes them to every block, so a
//    warp passes its wait at step s+1 only after every warp of every block
//    pushed step s, which each did after its own reads of step s: the write
//    after read argument above holds warp by warp. Pushes of a phase may reach
//    a barrier before its re-arm (the tx-count goes below zero), but never
//    before the previous phase completed, and the phase cannot complete
//    without the re-arm's arrival.
//  - ROW_PHASES 2: each half of the tile's row groups has its own full[0],
//    full[1], armed for its rows' bytes, and its pushes complete_tx there. A
//    half's pushes write only its rows of h, which only its reads touch, so
//    the arguments above hold for each half on its own; a half without rows
//    (a short last tile) never arms, waits or pushes.
//  - Exit: after the last step every block takes one cluster barrier, so no
//    block leaves while a peer may still store into its shared memory.
//  - Never hanging: a wait gives up after about a second (globaltimer),
//    reports STATUS_EXCHANGE_TIMEOUT and stops waiting; the output is then
//    invalid and the host says so, but the launch ends.

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
static_assert(PUSH == 1 || PUSH == 2, "PUSH must be 1 (direct) or 2 (warp); kernels/lstm_cluster_baseline.cu has the scalar pushes");
#define WEIGHTS_SHARED 0
#define CELL_IN_LANES 1
#define LATE_STORE 1
#define VECTOR_PUSH 0
#define MBARRIER_EXCHANGE 1
#define DIRECT_PUSH 1
#define WARP_PUSH (PUSH == 2)
#define DIRECTIONS 1

#define UNITS (HIDDEN / CLUSTER)
#define GATE_ROWS (4 * UNITS)
#define CHUNKS (THREADS / (GATE_ROWS / GATE_BLOCK))
#define FLOAT4_PER_CHUNK (HIDDEN / (4 * CHUNKS))
#define WARP_UNITS (32 / CHUNKS) /* gate blocks: units a warp holds */
#define WARP_ITEMS (WARP_UNITS / 4 * ROW_GROUP * CLUSTER) /* 16-byte pushes a warp makes per slot */
#ifndef ROW_GROUP
#define ROW_GROUP CHUNKS
#endif
#define PRE_STRIDE (GATE_ROWS + 4)
#define CELLS ((TILE_ROWS * UNITS + THREADS - 1) / THREADS)
#define GROUPS ((TILE_ROWS + ROW_GROUP - 1) / ROW_GROUP)
#define PADDED_ROWS (CELL_IN_LANES ? GROUPS * ROW_GROUP : TILE_ROWS)
#define SLOTS (CELL_IN_LANES ? GROUPS : CELLS) /* cells a thread may own */
#define BARRIER_FLOATS (MBARRIER_EXCHANGE ? 4 * ROW_PHASES : 0) /* two 8-byte mbarriers a phase */
#define PHASE_SLOT(p) ((p) * SLOTS / ROW_PHASES) /* phase p owns slots PHASE_SLOT(p) .. PHASE_SLOT(p + 1) - 1 */
#define RING_FLOATS (GATES_AHEAD > 1 ? GATES_AHEAD * SLOTS * THREADS * 4 : 0) /* the gates' cp.async stages */
#define STATUS_BAD_GEOMETRY 2u
#define STATUS_NEEDS_SM90 3u
#define STATUS_EXCHANGE_TIMEOUT 4u
#define EXCHANGE_TIMEOUT_NS 1000000000ull
#define FULL_MASK 0xffffffffu

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

__device__ __forceinline__ void store_cluster4(unsigned address, float4 v)
{
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w)
                 : "memory");
}

// ---- mbarriers (PTX ISA 8.0, sm_90) ----------------------------------------

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival (the phase's only one) that also expects `bytes` of transactions.
__device__ __forceinline__ void mbarrier_arm(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done != 0;
}

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Waits for the phase of `parity`; false after EXCHANGE_TIMEOUT_NS.
__device__ __forceinline__ bool mbarrier_wait(unsigned bar, unsigned parity)
{
    if (mbarrier_try_wait(bar, parity))
        return true;
    const unsigned long long start = global_ns();
    while (!mbarrier_try_wait(bar, parity))
        if (global_ns() - start > EXCHANGE_TIMEOUT_NS)
            return false;
    return true;
}

// 16 bytes into a peer's shared memory, counted on the peer's mbarrier.
__device__ __forceinline__ void store_async4(unsigned address, float4 v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                     address),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
                 : "memory");
}

// 4 bytes into a block's shared memory (a peer's or this block's own), counted
// on that block's mbarrier.
__device__ __forceinline__ void store_async1(unsigned address, float v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(address),
                 "f"(v), "r"(bar)
                 : "memory");
}

// ---- cp.async (sm_80+): the gates' stages --------------------------------

// 16 bytes of global memory into this thread's stage, bypassing L1.
__device__ __forceinline__ void copy_async16(float4 *stage, const float4 *source)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(stage)),
                 "l"(__cvta_generic_to_global(source))
                 : "memory");
}

__device__ __forceinline__ void copy_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void copy_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// ---- dot products --------------------------------------------------------

typedef const float4 (&weight_slice)[FLOAT4_PER_CHUNK];
#define WEIGHT(k) (w[k])

// The G rows b0 .. b0+G-1 of this thread's gate row: G partial dots over the
// thread's chunk, then the reduce-scatter / all-reduce over the chunk lanes
// (the order of kernels/lstm_reduce.cuh, written out: the plain kernel keeps
// its codegen at 64 registers). Returns the full sum of row b0 + spk_scatter_row<G, CHUNKS>(q).
template <int G>
__device__ __forceinline__ float row_sums(weight_slice w, const float *h, int b0, int q)
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
            n = half;
        } else {
            v[0] += __shfl_xor_sync(FULL_MASK, v[0], mask);
        }
    }
    return v[0];
}

// The `pre` form: lane q < G of gate row j writes its row's sum.
template <int G>
__device__ __forceinline__ void row_group(weight_slice w, const float *h, float *pre, int b0, int j, int q)
{
    const float s = row_sums<G>(w, h, b0, q);
    if (q < G)
        pre[(b0 + spk_scatter_row<G, CHUNKS>(q)) * PRE_STRIDE + j] = s;
}

// ---- the recurrence ---------------------------------------------------------

#define SPK_CLUSTER_SUPPORTED 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS * DIRECTIONS, MIN_BLOCKS)
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
    extern __shared__ float4 block_smem4[];
    // tid: the thread within its direction (all of the block with DIRECTIONS 1)
    const int tid = DIRECTIONS == 2 ? (int)threadIdx.x % THREADS : (int)threadIdx.x;
    const int direction = DIRECTIONS == 2 ? (int)threadIdx.x / THREADS : (int)blockIdx.z;
    const int row0 = blockIdx.y * tile_rows;
    const int rows = min(tile_rows, batch - row0);
    const unsigned rank = cluster_rank();

    // Shared memory of a direction: [2 mbarriers a phase], [weights], h[2][padded rows][H],
    // [pre[tile_rows][PRE_STRIDE]], [gate stages[GATES_AHEAD][SLOTS][THREADS] float4]; with DIRECTIONS 2
    // the backward's after the forward's (`need` bytes each, a multiple of 16).
    const int weight_floats = WEIGHTS_SHARED ? GATE_ROWS * HIDDEN : 0;
    const int padded_rows = CELL_IN_LANES ? (tile_rows + ROW_GROUP - 1) / ROW_GROUP * ROW_GROUP : tile_rows;
    const int pre_floats = CELL_IN_LANES ? 0 : tile_rows * PRE_STRIDE;
    const unsigned need =
        4u * (unsigned)(BARRIER_FLOATS + weight_floats + 2 * padded_rows * HIDDEN + pre_floats + RING_FLOATS);
    // Uniform over the cluster (arguments, the tile, the cluster shape), so an
    // early exit never leaves a peer waiting at a barrier.
    if (cluster_blocks() != CLUSTER || blockDim.x != THREADS * DIRECTIONS || gridDim.x != CLUSTER ||
        gridDim.z != 2 / DIRECTIONS || tile_rows < 1 || tile_rows > TILE_ROWS || rows < 1 || steps < 1 ||
        dynamic_smem_bytes() < DIRECTIONS * need) {
        if (tid == 0)
            atomicCAS(status, 0u, STATUS_BAD_GEOMETRY);
        return;
    }
    float4 *smem4 = block_smem4 + (DIRECTIONS == 2 ? direction * (need / 16) : 0);
    float *smem = reinterpret_cast<float *>(smem4) + BARRIER_FLOATS;
    float *h_buffers = smem + weight_floats;
    const int h_floats = padded_rows * HIDDEN;
#if GATES_AHEAD > 1
    // (GATES_AHEAD > 1 implies the lanes form: no `pre`)
    float4 *stages = reinterpret_cast<float4 *>(h_buffers + 2 * h_floats);
#define STAGE(a, k) (stages + ((a) * SLOTS + (k)) * THREADS + tid)
#endif

    gates += (size_t)direction * batch * steps * 4 * HIDDEN;
    r += (size_t)direction * 4 * HIDDEN * HIDDEN;
    bias += (size_t)direction * 4 * HIDDEN;
    output += (size_t)direction * HIDDEN;

    const int q = tid % CHUNKS;
    const int j = tid / CHUNKS;
    const int first_unit = (int)rank * UNITS;

    // This thread's slice of R, for the whole sequence.
#if   GATE_BLOCK == 4
    float4 w[4][FLOAT4_PER_CHUNK]; // the four gate rows of unit j
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const float4 *row = reinterpret_cast<const float4 *>(r + (size_t)(rank * GATE_ROWS + j * 4 + p) * HIDDEN);
#pragma unroll
        for (int k = 0; k < FLOAT4_PER_CHUNK; k++)
            w[p][k] = row[k * CHUNKS + q];
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

    // The cells this thread owns, slot k = (row slot_row(k), unit slot_unit(k)):
    //  - `pre` form: cell i = tid + k*THREADS is (row i / UNITS, unit i % UNITS);
    //  - lanes form: the unit of this thread's gate row j/4; the lane of gate 0
    //    with chunk q < ROW_GROUP owns row k*ROW_GROUP + scatter_row(q) of
    //    every group k (the lanes of gates 1..3 own nothing).
    //  - direct pushes: every lane of the unit holds a copy of the cell of its
    //    row; copy (gate p, chunk q) = p * CHUNKS / G + q / G pushes to blocks
    //    copy, copy + COPIES, ... and copy 0 (the lanes form's owner) stores
    //    the output.
    //  - gate blocks: every lane of the unit holds the four sums of its row
    //    after the reduce-scatter; copy q / G of the row pushes as above.
    const int lane_row = spk_scatter_row<ROW_GROUP, CHUNKS>(q);
#if GATE_BLOCK == 4
    const int lane_unit = j;
#else
    const int lane_unit = j >> 2;
    const int unit_lane0 = (tid & 31) & ~(4 * CHUNKS - 1); // lane of gate 0, chunk 0 of this unit
#endif
#define COPIES (4 / GATE_BLOCK * CHUNKS / ROW_GROUP)
    const int copy = (GATE_BLOCK == 4 ? 0 : (j & 3) * (CHUNKS / ROW_GROUP)) + q / ROW_GROUP;
    const bool cell_lane = true;
    const bool store_lane = copy == 0;
#define SLOT_ROW(k) ((k) * ROW_GROUP + lane_row)
#define SLOT_UNIT(k) lane_unit
#define SLOT_OWNED(k) (cell_lane && SLOT_ROW(k) < rows)
#define SLOT_STORES(k) (store_lane && SLOT_OWNED(k))
    float c[SLOTS], hv[SLOTS];
    float4 gx[SLOTS], b4[SLOTS];
    const float4 *gates4 = reinterpret_cast<const float4 *>(gates);
// x·Wᵀ of (row b, unit u) of this block at time t (a macro: a lambda here changes the codegen)
#define GATES_AT(b, u, t) (gates4 + ((size_t)(row0 + (b)) * steps + (t)) * HIDDEN + first_unit + (u))
#pragma unroll
    for (int k = 0; k < SLOTS; k++) {
        c[k] = hv[k] = 0.0f;
        gx[k] = b4[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (SLOT_OWNED(k)) {
            b4[k] = reinterpret_cast<const float4 *>(bias)[first_unit + SLOT_UNIT(k)];
            const int t = direction ? steps - 1 : 0;
            if (GATES_AHEAD == 1)
                gx[k] = __ldg(GATES_AT(SLOT_ROW(k), SLOT_UNIT(k), t));
        }
    }
#if GATES_AHEAD > 1
    // Stage a holds step s's gates for s % GATES_AHEAD == a; one commit group
    // per step (empty past the end), so waiting for all but the newest
    // GATES_AHEAD - 1 groups at step s means step s's has landed.
    int stage = 0;
    for (int a = 0; a < GATES_AHEAD; a++) {
#pragma unroll
        for (int k = 0; k < SLOTS; k++)
            if (SLOT_OWNED(k) && a < steps) {
                const int t = direction ? steps - 1 - a : a;
                copy_async16(STAGE(a, k), GATES_AT(SLOT_ROW(k), SLOT_UNIT(k), t));
            }
        copy_async_commit();
    }
#endif

    // Zero h (rows past `rows` stay zero); no push may land before this.
    for (int i = tid; i < 2 * h_floats; i += THREADS)
        h_buffers[i] = 0.0f;
    // full[phase][q] at full0 + 16 phase + 8q
    const unsigned full0 = (unsigned)__cvta_generic_to_shared(smem4);
    // Rows of a phase (ROW_PHASES 1: the tile's). Direct pushes bring this
    // block's own units through the mbarrier too. A phase without rows (the
    // last tile's second half, say) never arms, waits or pushes.
#define PHASE_ROWS(p)                                                                                                 \
    (ROW_PHASES == 1 ? rows                                                                                         \
                     : max(0, min(rows, PHASE_SLOT((p) + 1) * ROW_GROUP) - PHASE_SLOT(p) * ROW_GROUP))
#define PHASE_HAS_ROWS(p) (ROW_PHASES == 1 || PHASE_ROWS(p) > 0) /* rows >= 1: the geometry check */
    unsigned exchange_bytes[ROW_PHASES];
#pragma unroll
    for (int phase = 0; phase < ROW_PHASES; phase++)
        exchange_bytes[phase] = (unsigned)(PHASE_ROWS(phase) * (DIRECT_PUSH ? HIDDEN : HIDDEN - UNITS) * 4);
    bool waiting = true; // false once a wait timed out: the launch then just runs to its end
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
                mbarrier_arm(full0 + 16 * phase + 8, exchange_bytes[phase]); // step 0's pushes, into h[1]
            if (steps > 2)
                mbarrier_arm(full0 + 16 * phase, exchange_bytes[phase]); // step 1's pushes, into h[0]
        }
    }
    cluster_arrive();
    cluster_wait();

    for (int step = 0; step < steps; step++) {
        const int t = direction ? steps - 1 - step : step;
        const int parity = step & 1;
        const float *h = h_buffers + parity * h_floats;
        const bool last = step + 1 == steps;

        // The phases of the step in turn (ROW_PHASES 1: a plain block, the code of a kernel without phases).
#if ROW_PHASES == 1
        {
            const int phase = 0;
#else
#pragma unroll
        for (int phase = 0; phase < ROW_PHASES; phase++) {
#endif
            if (step > 0 && PHASE_HAS_ROWS(phase)) {
                const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)parity;
                if (waiting && !mbarrier_wait(bar, (unsigned)((step - 1) >> 1) & 1u)) {
                    waiting = false;
                    atomicCAS(status, 0u, STATUS_EXCHANGE_TIMEOUT);
                }
                if (tid == 0 && step + 2 < steps)
                    mbarrier_arm(bar, exchange_bytes[phase]); // step+1's pushes, into this same buffer
            }

#if GATES_AHEAD > 1
            if (phase == 0) {
                copy_async_wait<GATES_AHEAD - 1>(); // this thread's copies of step `step` have landed
#pragma unroll
                for (int k = 0; k < SLOTS; k++)
                    if (SLOT_OWNED(k))
                        gx[k] = *STAGE(stage, k);
            }
#endif
            // 1+2. per row group: sums, the unit's four gates into the lane of
            // gate 0 (same chunk lane, so the same row), the cell there.
#pragma unroll
            for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
#if GATE_BLOCK == 4
                // the four gate sums of ROW_GROUP rows, reduce-scattered over the
                // chunk lanes: lane q ends with all four of row SLOT_ROW(k)
                if (k * ROW_GROUP < rows) {
                    float v[ROW_GROUP][4];
                    // each row's first float4 of h is loaded one row ahead, so the load's latency
                    // passes under the previous row's FMAs (rows of a group past `rows` are zeros in h)
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
                    spk_reduce_scatter<ROW_GROUP, 4, CHUNKS>(v, q);
                    if (SLOT_OWNED(k))
                        hv[k] = spk_lstm_cell(gx[k], v[0][0], v[0][1], v[0][2], v[0][3], b4[k], c[k]);
                }
#else
                if (k * ROW_GROUP < rows) {
                    const float s = row_sums<ROW_GROUP>(w, h, k * ROW_GROUP, q);
                    const float pi = __shfl_sync(FULL_MASK, s, unit_lane0 + q);
                    const float pf = __shfl_sync(FULL_MASK, s, unit_lane0 + CHUNKS + q);
                    const float pc = __shfl_sync(FULL_MASK, s, unit_lane0 + 2 * CHUNKS + q);
                    const float po = __shfl_sync(FULL_MASK, s, unit_lane0 + 3 * CHUNKS + q);
                    if (SLOT_OWNED(k))
                        hv[k] = spk_lstm_cell(gx[k], pi, pf, pc, po, b4[k], c[k]);
                }
#endif
            }

            // h to the output (now, or once the exchange is under way) and, unless
            // this is the last step, into h[parity^1] of every block.
            const int next_offset = (parity ^ 1) * h_floats;
#pragma unroll
            for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
                if (SLOT_OWNED(k)) {
                    const int b = SLOT_ROW(k), u = SLOT_UNIT(k);
                    if (SLOT_STORES(k) && (!LATE_STORE || last))
                        output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv[k];
                    if (!last) {
#if WARP_PUSH
                        // below, a warp's units at once
#else
                        const unsigned local =
                            (unsigned)__cvta_generic_to_shared(h_buffers + next_offset + b * HIDDEN + first_unit + u);
                        const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)(parity ^ 1);
                        for (int g = copy; g < CLUSTER; g += COPIES) {
                            const unsigned target = (rank + (unsigned)g) % CLUSTER;
                            store_async1(map_rank(local, target), hv[k], map_rank(bar, target));
                        }
#endif
                    }
                }
            }
#if WARP_PUSH
            // Per slot, the warp's WARP_UNITS units of its ROW_GROUP rows as float4
            // (4 consecutive units of one row), each to every block: item i of a
            // slot is (block i % CLUSTER, row (i / CLUSTER) % G, quad i / (CLUSTER * G)),
            // its four values shuffled from the lanes that hold them.
            if (!last) {
                const int lane = tid & 31;
                const int warp_units = first_unit + (tid >> 5) * WARP_UNITS; // the warp's first unit
                const unsigned bar = full0 + 16u * (unsigned)phase + 8u * (unsigned)(parity ^ 1);
#pragma unroll
                for (int k = PHASE_SLOT(phase); k < PHASE_SLOT(phase + 1); k++) {
                    if (k * ROW_GROUP < rows) {
#pragma unroll
                        for (int item0 = 0; item0 < WARP_ITEMS; item0 += 32) {
                            const int item = item0 + lane;
                            const int g = item % CLUSTER, rq = item / CLUSTER;
                            const int e = rq % ROW_GROUP, quad = (rq / ROW_GROUP) % (WARP_UNITS / 4);
                            const int from = quad * 4 * CHUNKS + spk_scatter_row<ROW_GROUP, CHUNKS>(e);
                            float4 v;
                            v.x = __shfl_sync(FULL_MASK, hv[k], from);
                            v.y = __shfl_sync(FULL_MASK, hv[k], from + CHUNKS);
                            v.z = __shfl_sync(FULL_MASK, hv[k], from + 2 * CHUNKS);
                            v.w = __shfl_sync(FULL_MASK, hv[k], from + 3 * CHUNKS);
                            const int b = k * ROW_GROUP + e;
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
#endif
        } // phases
        if (last)
            break;


        // 3. the exchange completes (one cluster barrier, or the mbarrier wait
        // at the top of the next step) while the next inputs load.
        const int t_fetch = direction ? t - GATES_AHEAD : t + GATES_AHEAD; // the step whose gates load now
#pragma unroll
        for (int k = 0; k < SLOTS; k++) {
            if (SLOT_OWNED(k)) {
                const int b = SLOT_ROW(k), u = SLOT_UNIT(k);
                if (LATE_STORE && SLOT_STORES(k))
                    output[((size_t)(row0 + b) * steps + t) * (2 * HIDDEN) + first_unit + u] = hv[k];
#if GATES_AHEAD > 1
                // the stage read at the top of this step (its value is in gx[k]) takes step + GATES_AHEAD's
                if (step + GATES_AHEAD < steps)
                    copy_async16(STAGE(stage, k), GATES_AT(b, u, t_fetch));
#else
                gx[k] = __ldg(GATES_AT(b, u, t_fetch));
#endif
            }
        }
#if GATES_AHEAD > 1
        copy_async_commit();
        stage = stage + 1 == GATES_AHEAD ? 0 : stage + 1;
#endif
    }
    // Nobody leaves while a peer may still store into its shared memory.
    cluster_arrive();
    cluster_wait();
#endif
}
