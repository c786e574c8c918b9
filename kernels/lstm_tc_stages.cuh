// The stages of kernels/lstm_tc.cu, the tensor-core recurrence: the weights
// split into registers once, then a step per row phase: wait for h, the
// products, the cells, publish h; then the next gates. Each stage is a
// function; the split forms (TC_SPLIT) and the m-tiles a warp (WARP_MT) pick
// their code by `if constexpr`. Every index comes from kernels/lstm_tc_layout.cuh,
// the mappings the CPU emulation (tests/c/test_tc_layout.c) checks. Included
// after the kernel's macros and the primitives (cluster_sync.cuh).
#ifndef SPK_LSTM_TC_STAGES_CUH
#define SPK_LSTM_TC_STAGES_CUH

// ---- the splits -------------------------------------------------------------------

// TF32 rounding to nearest, ties away from zero (cvt.rna): half an ulp added to
// the magnitude, the 13 bits below TF32's mantissa cleared.
__device__ __forceinline__ unsigned tc_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

// x = big + small, both TF32; small = x - big (exact in FP32), rounded to TF32.
__device__ __forceinline__ void tc_split_tf32(float x, unsigned &big, unsigned &small)
{
    big = tc_tf32(x);
    small = tc_tf32(__fsub_rn(x, __uint_as_float(big)));
}

// Two floats as f16x2, round to nearest even; `low` in the low half (the
// fragment element of the lower k). cvt.rn.f16x2.f32 d, a, b puts a high.
__device__ __forceinline__ unsigned tc_pack_f16(float low, float high)
{
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(high), "f"(low));
    return d;
}

__device__ __forceinline__ float tc_f16_low(unsigned v)
{
    float f;
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.f32.f16 %0, lo;\n}" : "=f"(f) : "r"(v));
    return f;
}

__device__ __forceinline__ float tc_f16_high(unsigned v)
{
    float f;
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.f32.f16 %0, hi;\n}" : "=f"(f) : "r"(v));
    return f;
}

// x0, x1 = big + small * 2^-11, big and small f16x2: small = (x - big) * 2^11
// (both exact in FP32) rounded to FP16. |x| < 2^15 (R is scaled so, |h| < 1).
__device__ __forceinline__ void tc_split_f16(float x0, float x1, unsigned &big, unsigned &small)
{
    big = tc_pack_f16(x0, x1);
    small = tc_pack_f16(__fmul_rn(__fsub_rn(x0, tc_f16_low(big)), 2048.0f),
                        __fmul_rn(__fsub_rn(x1, tc_f16_high(big)), 2048.0f));
}

// d += A·B over one mma (the split form's shape); not volatile, so the
// compiler may interleave independent mmas.
__device__ __forceinline__ void tc_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
    if constexpr (TC_SPLIT == TC_SPLIT_F16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 8 bytes into a block's shared memory (a peer's or this block's), counted on that block's mbarrier.
__device__ __forceinline__ void tc_store_async2(unsigned address, unsigned a, unsigned b, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];" ::"r"(address),
                 "r"(a), "r"(b), "r"(bar)
                 : "memory");
}

// ---- the packing -----------------------------------------------------------------

// The packed row of unit u's gate q (0 i, 1 f, 2 c, 3 o): layout units, any order.
__device__ __forceinline__ int tc_gate_position(int q)
{
    return q == 0 ? SPK_GATE_I : q == 1 ? SPK_GATE_F : q == 2 ? SPK_GATE_C : SPK_GATE_O;
}

__device__ __forceinline__ float tc_component(const float4 &v, int position)
{
    return position == 0 ? v.x : position == 1 ? v.y : position == 2 ? v.z : v.w;
}

// A unit's four packed values (gates or bias) in the cell's order i, f, c, o.
__device__ __forceinline__ float4 tc_gate_float4(float4 v)
{
    return make_float4(tc_component(v, SPK_GATE_I), tc_component(v, SPK_GATE_F), tc_component(v, SPK_GATE_C),
                       tc_component(v, SPK_GATE_O));
}

// Rows of a phase's n-tiles that the tile holds (a short last tile holds fewer).
__device__ __forceinline__ int tc_phase_rows(int p, int rows)
{
    return max(0, min(rows, PHASE_NT(p + 1) * 8) - PHASE_NT(p) * 8);
}

// ---- stage: the weights ----------------------------------------------------------------

// This warp's A fragments of R, split, for the whole sequence: m-tile mt,
// k-step ks, register j (kernels/lstm_tc_layout.cuh). f16: each A row (g and g + 8
// of each m-tile; its 4 lanes t hold the whole row) is scaled by 2^shift so
// its largest magnitude lies in [2^14, 2^15), unscale[mt][j & 1] = 2^-shift.
__device__ __forceinline__ void tc_load_weights(unsigned (&a_big)[WARP_MT][KSTEPS][4],
                                                unsigned (&a_small)[WARP_MT][KSTEPS][4], float (&unscale)[WARP_MT][2],
                                                const float *r, int first_unit, int warp, int lane)
{
#pragma unroll
    for (int mt = 0; mt < WARP_MT; mt++) {
        const float *row[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int ar = tc_a_row(lane, j);
            row[j] = r + (size_t)((first_unit + tc_row_unit(WARP_MT, warp, ar)) * 4 +
                                  tc_gate_position(tc_row_gate(WARP_MT, mt, ar))) *
                             H;
        }
        if constexpr (TC_SPLIT == TC_SPLIT_F16) {
            float scale[2];
#pragma unroll
            for (int j = 0; j < 2; j++) {
                float m = 0.0f;
#pragma unroll
                for (int ks = 0; ks < KSTEPS; ks++)
#pragma unroll
                    for (int e = 0; e < 4; e++) // elements of registers j and j + 2
                        m = fmaxf(m, fabsf(row[j][tc_a_col(TC_SPLIT, lane, ks, j + 2 * (e >> 1), e & 1)]));
                m = fmaxf(m, __shfl_xor_sync(FULL_MASK, m, 1));
                m = fmaxf(m, __shfl_xor_sync(FULL_MASK, m, 2));
                const int shift = max(-64, min(64, 14 - ((int)((__float_as_uint(m) >> 23) & 255u) - 127)));
                scale[j] = __uint_as_float((unsigned)(127 + shift) << 23);
                unscale[mt][j] = __uint_as_float((unsigned)(127 - shift) << 23);
            }
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float *src = row[j & 1];
                    tc_split_f16(__fmul_rn(src[tc_a_col(TC_SPLIT, lane, ks, j, 0)], scale[j & 1]),
                                 __fmul_rn(src[tc_a_col(TC_SPLIT, lane, ks, j, 1)], scale[j & 1]), a_big[mt][ks][j],
                                 a_small[mt][ks][j]);
                }
        } else {
            unscale[mt][0] = unscale[mt][1] = 1.0f;
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ks++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    tc_split_tf32(row[j & 1][tc_a_col(TC_SPLIT, lane, ks, j, 0)], a_big[mt][ks][j], a_small[mt][ks][j]);
        }
    }
}

// ---- stage: the gates -------------------------------------------------------------------

// Cell k of this thread: batch row tc_cell_row(k) of the tile (its unit is the thread's).
__device__ __forceinline__ int tc_cell_row(int k, int lane)
{
    return (k / (CELLS / NT)) * 8 + tc_cell_col(WARP_MT, lane, k % (CELLS / NT));
}

#define TC_STAGE(a, k) (stages + ((a) * CELLS + (k)) * THREADS + tid)
__device__ __forceinline__ const float4 *tc_gates_at(const float4 *gates4, int row0, int steps, int b, int unit, int t)
{
    return gates4 + ((size_t)(row0 + b) * steps + t) * H + unit;
}

// The first GATES_AHEAD - FETCH_EARLY steps' x·Wᵀ of each cell into the stages,
// one cp.async commit group a step (empty past the end): waiting for all but the
// newest GATES_AHEAD - 1 - FETCH_EARLY groups at step s means step s's has landed
// (a step commits one group: at its end, or with FETCH_EARLY after its take).
__device__ __forceinline__ void tc_prime_gates(int direction, int steps, int row0, int rows, int unit, int lane,
                                               const float4 *gates4, float4 *stages, int tid)
{
    for (int a = 0; a < GATES_AHEAD - FETCH_EARLY; a++) {
#pragma unroll
        for (int k = 0; k < CELLS; k++)
            if (tc_cell_row(k, lane) < rows && a < steps)
                copy_async16(TC_STAGE(a, k),
                             tc_gates_at(gates4, row0, steps, tc_cell_row(k, lane), unit, direction ? steps - 1 - a : a));
        copy_async_commit();
    }
}

// This step's x·Wᵀ of each cell from its stage (zero for rows past the tile's).
__device__ __forceinline__ void tc_take_gates(int stage, int row0, int rows, int lane, float4 *stages, int tid,
                                              float4 (&gx)[CELLS])
{
    copy_async_wait<GATES_AHEAD - 1 - FETCH_EARLY>();
#pragma unroll
    for (int k = 0; k < CELLS; k++)
        gx[k] = tc_cell_row(k, lane) < rows ? tc_gate_float4(*TC_STAGE(stage, k)) : make_float4(0.f, 0.f, 0.f, 0.f);
}

// The x·Wᵀ of step step + LEAD (LEAD = GATES_AHEAD - FETCH_EARLY) into its stage
// (step j's is j % GATES_AHEAD): at the end of step `step`, the stage it just read;
// with FETCH_EARLY at its start, after its take, the stage step - 1 read. Returns
// the next step's stage.
__device__ __forceinline__ int tc_fetch_gates(int step, int t, int steps, int direction, int row0, int rows, int unit,
                                              int lane, const float4 *gates4, float4 *stages, int tid, int stage)
{
    constexpr int LEAD = GATES_AHEAD - FETCH_EARLY;
    const int t_fetch = direction ? t - LEAD : t + LEAD;
    const int into = (stage + LEAD) % GATES_AHEAD;
#pragma unroll
    for (int k = 0; k < CELLS; k++)
        if (tc_cell_row(k, lane) < rows && step + LEAD < steps)
            copy_async16(TC_STAGE(into, k), tc_gates_at(gates4, row0, steps, tc_cell_row(k, lane), unit, t_fetch));
    copy_async_commit();
    return stage + 1 == GATES_AHEAD ? 0 : stage + 1;
}

// ---- stage: the exchange's barriers ------------------------------------------------------

// The bytes each row phase's pushes of h bring into a block (none for a phase
// without rows), and the barriers that count them: thread 0 sets up
// full[phase][parity] (at full0 + 16 phase + 8 parity) and arms them for step
// 0's pushes (into h[1]) and step 1's (into h[0]). The cluster barrier after
// this makes them visible before any peer pushes.
__device__ __forceinline__ void tc_setup_exchange(unsigned (&exchange_bytes)[ROW_PHASES], int rows, int steps, int tid,
                                                  unsigned full0)
{
#pragma unroll
    for (int p = 0; p < ROW_PHASES; p++)
        exchange_bytes[p] = (unsigned)(tc_phase_rows(p, rows) * H * UNIT_BYTES);
    if (tid == 0) {
#pragma unroll
        for (int p = 0; p < ROW_PHASES; p++) {
            mbarrier_init(full0 + 16 * p, 1);
            mbarrier_init(full0 + 16 * p + 8, 1);
        }
        mbarrier_init_fence();
#pragma unroll
        for (int p = 0; p < ROW_PHASES; p++) {
            if (exchange_bytes[p] == 0)
                continue;
            if (steps > 1)
                mbarrier_arm(full0 + 16 * p + 8, exchange_bytes[p]); // step 0's pushes, into h[1]
            if (steps > 2)
                mbarrier_arm(full0 + 16 * p, exchange_bytes[p]); // step 1's pushes, into h[0]
        }
    }
}

// ---- stage: wait for h --------------------------------------------------------------------

// Step `step` (>= 1) of a phase with rows waits until every block's pushes of
// its h have landed, then thread 0 re-arms the barrier for step + 2's pushes
// into the same buffer. A wait past EXCHANGE_TIMEOUT_NS reports and stops
// waiting: returns whether to wait again.
__device__ __forceinline__ bool tc_wait_for_h(int step, int p, int parity, int steps, int tid, unsigned full0,
                                              unsigned bytes, bool waiting, unsigned *status)
{
    if (step > 0 && bytes > 0) {
        const unsigned bar = full0 + 16u * (unsigned)p + 8u * (unsigned)parity;
        if (waiting && !mbarrier_wait(bar, (unsigned)((step - 1) >> 1) & 1u)) {
            waiting = false;
            atomicCAS(status, 0u, STATUS_EXCHANGE_TIMEOUT);
        }
        if (tid == 0 && step + 2 < steps)
            mbarrier_arm(bar, bytes); // step + 1's pushes, into this same buffer
    }
    return waiting;
}

// ---- stage: the products ------------------------------------------------------------------

// The pre-activations R·h of phase p's n-tiles, pre[mt][nt][e] (accumulator
// element e, kernels/lstm_tc_layout.cuh), from this step's h buffer. A slice of
// SLICE_STEPS k-steps: its mmas start from zero, small products first; its sum
// is added to the FP32 accumulators in slice order.
__device__ __forceinline__ void tc_products(int p, float (&pre)[WARP_MT][NT][4],
                                            const unsigned (&a_big)[WARP_MT][KSTEPS][4],
                                            const unsigned (&a_small)[WARP_MT][KSTEPS][4],
                                            const float (&unscale)[WARP_MT][2], const unsigned long long *h, int lane)
{
    float big[WARP_MT][NT][4], small[WARP_MT][NT][4];
#pragma unroll
    for (int s = 0; s < KSTEPS; s += SLICE_STEPS) {
#pragma unroll
        for (int nt = PHASE_NT(p); nt < PHASE_NT(p + 1); nt++) {
            uint4 b[SLICE_STEPS]; // {b0 big, b0 small, b1 big, b1 small}
#pragma unroll
            for (int q = 0; q < SLICE_STEPS; q++)
                b[q] = *reinterpret_cast<const uint4 *>(h + (nt * 8 + (lane >> 2)) * ROW_WORDS + tc_b_word(lane, s + q));
#pragma unroll
            for (int mt = 0; mt < WARP_MT; mt++) {
                float d[4] = {0.f, 0.f, 0.f, 0.f}, e[4] = {0.f, 0.f, 0.f, 0.f};
                if constexpr (TC_PRODUCTS == 3) {
                    // tf32: all three into d (the big product last); f16: the two small ones into e (scaled by 2^11)
#pragma unroll
                    for (int q = 0; q < SLICE_STEPS; q++)
                        tc_mma(TC_SPLIT == TC_SPLIT_F16 ? e : d, a_small[mt][s + q], b[q].x, b[q].z);
#pragma unroll
                    for (int q = 0; q < SLICE_STEPS; q++)
                        tc_mma(TC_SPLIT == TC_SPLIT_F16 ? e : d, a_big[mt][s + q], b[q].y, b[q].w);
                }
#pragma unroll
                for (int q = 0; q < SLICE_STEPS; q++)
                    tc_mma(d, a_big[mt][s + q], b[q].x, b[q].z);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    big[mt][nt][i] = s == 0 ? d[i] : big[mt][nt][i] + d[i];
                    small[mt][nt][i] = s == 0 ? e[i] : small[mt][nt][i] + e[i];
                }
            }
        }
    }
#pragma unroll
    for (int nt = PHASE_NT(p); nt < PHASE_NT(p + 1); nt++)
#pragma unroll
        for (int mt = 0; mt < WARP_MT; mt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                pre[mt][nt][i] = TC_SPLIT == TC_SPLIT_F16
                                     ? __fmul_rn(fmaf(small[mt][nt][i], 1.0f / 2048.0f, big[mt][nt][i]),
                                                 unscale[mt][i >> 1])
                                     : big[mt][nt][i];
}

// ---- stage: the products by wgmma (TC_MMA_WGMMA) ----------------------------------------
#if TC_MMA == TC_MMA_WGMMA
// d (+)= A·B by wgmma m64nNk16, f32 += f16 x f16: A (R's fragments) from registers, B (h)
// through a descriptor, K-major (imm-trans-b 0); ACCUMULATE false starts from zero (scale-d
// false, d write-only). One specialisation a shape the kernel issues.
template <int N, bool ACCUMULATE> struct tc_wgmma_op;
template <> struct tc_wgmma_op<8, false> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(0)
                     : "memory");
    }
};
template <> struct tc_wgmma_op<8, true> {
    static __device__ __forceinline__ void run(float (&d)[4], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1)
                     : "memory");
    }
};
template <> struct tc_wgmma_op<16, false> {
    static __device__ __forceinline__ void run(float (&d)[8], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(0)
                     : "memory");
    }
};
template <> struct tc_wgmma_op<16, true> {
    static __device__ __forceinline__ void run(float (&d)[8], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1)
                     : "memory");
    }
};
template <> struct tc_wgmma_op<32, false> {
    static __device__ __forceinline__ void run(float (&d)[16], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(0)
                     : "memory");
    }
};
template <> struct tc_wgmma_op<32, true> {
    static __device__ __forceinline__ void run(float (&d)[16], const unsigned (&a)[4], unsigned long long desc)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1)
                     : "memory");
    }
};

// A shared-memory matrix descriptor (kernels/lstm_tc_layout.cuh, "h in shared memory for
// wgmma"): start address, leading offset (along K) and stride offset (8-row groups), each
// in 16-byte units; no swizzle, base offset 0.
__device__ __forceinline__ unsigned long long tc_wg_desc(unsigned address)
{
    return (unsigned long long)((address & 0x3ffffu) >> 4) | ((unsigned long long)(tc_wg_lbo() >> 4) << 16) |
           ((unsigned long long)(tc_wg_group_bytes(H) >> 4) << 32);
}

// Keeps the compiler from moving a use of an accumulator above the wgmma wait.
template <int N>
__device__ __forceinline__ void tc_wg_pin(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

// Phase p's pre-activations by the warpgroup's wgmmas: for each slice of
// SLICE_STEPS k-steps, R's big part times both parts of h (N = 16 P: big·big in
// the first 8 P columns, big·small after them) from zero; R's small part times
// h's big part (N = 8 P) in one chain over all of K, in registers of its own
// (its terms are 2^-11 of the big ones: the tensor core's truncation there is far
// below FP32's; writing it onto the big·small registers instead makes ptxas
// serialise the wgmmas). The slices are added in order, as tc_products adds its.
// h arrived through st.async (the mbarrier's acquire): the proxy fence orders it
// before wgmma's reads.
__device__ __forceinline__ void tc_products_wgmma(int p, float (&pre)[WARP_MT][NT][4],
                                                  const unsigned (&a_big)[WARP_MT][KSTEPS][4],
                                                  const unsigned (&a_small)[WARP_MT][KSTEPS][4],
                                                  const float (&unscale)[WARP_MT][2], unsigned h_address)
{
    constexpr int P = NT / ROW_PHASES, SLICES = KSTEPS / SLICE_STEPS;
    const int first = PHASE_NT(p);
    const unsigned base = h_address + (unsigned)(tc_wg_group(first, P, first, 0) * tc_wg_group_bytes(H));
    float acc[SLICES][8 * P], e[4 * P];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int s = 0; s < SLICES; s++) {
        tc_wgmma_op<16 * P, false>::run(acc[s], a_big[0][s * SLICE_STEPS],
                                        tc_wg_desc(base + (unsigned)tc_wg_kstep_byte(s * SLICE_STEPS)));
#pragma unroll
        for (int q = 1; q < SLICE_STEPS; q++)
            tc_wgmma_op<16 * P, true>::run(acc[s], a_big[0][s * SLICE_STEPS + q],
                                           tc_wg_desc(base + (unsigned)tc_wg_kstep_byte(s * SLICE_STEPS + q)));
    }
    tc_wgmma_op<8 * P, false>::run(e, a_small[0][0], tc_wg_desc(base));
#pragma unroll
    for (int ks = 1; ks < KSTEPS; ks++)
        tc_wgmma_op<8 * P, true>::run(e, a_small[0][ks], tc_wg_desc(base + (unsigned)tc_wg_kstep_byte(ks)));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int s = 0; s < SLICES; s++)
        tc_wg_pin(acc[s]);
    tc_wg_pin(e);
#pragma unroll
    for (int j = 0; j < P; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float big = acc[0][4 * j + i], small = acc[0][4 * P + 4 * j + i];
#pragma unroll
            for (int s = 1; s < SLICES; s++) {
                big += acc[s][4 * j + i];
                small += acc[s][4 * P + 4 * j + i];
            }
            small += e[4 * j + i];
            pre[0][first + j][i] = __fmul_rn(fmaf(small, 1.0f / 2048.0f, big), unscale[0][i >> 1]);
        }
}
#endif

// ---- stage: the cells --------------------------------------------------------------------

// Phase p's cells: each thread's four gate sums of a cell (two m-tiles: in its
// own accumulators; one m-tile: two of them from lane ^ 4), spk's cell, h to
// the output (and the trace).
__device__ __forceinline__ void tc_cells(int p, const float (&pre)[WARP_MT][NT][4], const float4 (&gx)[CELLS],
                                         const float4 &b4, float (&c)[CELLS], float (&hv)[CELLS], int t, int steps,
                                         int batch, int row0, int rows, int unit, int lane, float *output, float *trace,
                                         const int *trace_slot, int trace_slots)
{
#pragma unroll
    for (int nt = PHASE_NT(p); nt < PHASE_NT(p + 1); nt++) {
#pragma unroll
        for (int cc = 0; cc < CELLS / NT; cc++) {
            const int k = nt * (CELLS / NT) + cc;
            float q[4];
            if constexpr (WARP_MT == 2) {
#pragma unroll
                for (int g4 = 0; g4 < 4; g4++)
                    q[g4] = pre[g4 >> 1][nt][tc_mt2_element(g4, cc)];
            } else {
                float s[2];
                tc_mt1_sends(pre[0][nt], lane, s);
                const float ra = __shfl_xor_sync(FULL_MASK, s[0], 4), rb = __shfl_xor_sync(FULL_MASK, s[1], 4);
                tc_mt1_gates(pre[0][nt], ra, rb, lane, q);
            }
            const float4 kept = spk_cell_gates<TC_CELL>(gx[k], b4); // (fused: x·Wᵀ + bias)
            hv[k] = spk_lstm_cell_form<TC_CELL>(kept, q[0], q[1], q[2], q[3], b4, c[k]);
            const int b = tc_cell_row(k, lane);
            if (b < rows) {
                output[((size_t)(row0 + b) * steps + t) * (2 * H) + unit] = hv[k];
                if (trace != nullptr && trace_slot[t] >= 0) {
                    const int e = trace_slot[t];
                    trace[((size_t)e * batch + row0 + b) * H + unit] = hv[k];
                    trace[((size_t)(trace_slots + e) * batch + row0 + b) * H + unit] = c[k];
                }
            }
        }
    }
}

// ---- stage: publish h ---------------------------------------------------------------------

// Phase p's h, split once, into h_next of every block of the cluster (this one
// included), counted on each block's mbarrier `bar` (the same offset in every
// block). tf32: an item a cell; f16: an item a unit pair, its two threads
// swapping their h first (kernels/lstm_tc_layout.cuh).
__device__ __forceinline__ void tc_publish(int p, const float (&hv)[CELLS], int rows, int first_unit, int warp,
                                           int lane, unsigned rank, unsigned long long *h_next, unsigned bar)
{
#pragma unroll
    for (int nt = PHASE_NT(p); nt < PHASE_NT(p + 1); nt++) {
        if constexpr (TC_SPLIT == TC_SPLIT_F16) {
            const int kept = tc_pair_kept_cell(WARP_MT, lane);
            const int cpt = CELLS / NT;
            const float mine = hv[nt * cpt + (cpt == 2 ? kept : 0)];
            const float send = hv[nt * cpt + (cpt == 2 ? kept ^ 1 : 0)];
            const float other = __shfl_xor_sync(FULL_MASK, send, tc_pair_lane_xor(WARP_MT));
            const bool high = tc_pair_is_high(WARP_MT, lane) != 0;
            unsigned big, small;
            tc_split_f16(high ? other : mine, high ? mine : other, big, small);
            const int b = nt * 8 + tc_pair_col(lane);
            if (b < rows) {
                const int item = (first_unit + tc_pair_unit(WARP_MT, warp, lane)) >> 1;
                if constexpr (TC_MMA == TC_MMA_WGMMA) {
                    // The pair's two threads: one pushes the big part, the other the small, each to every block.
                    const int part = tc_push_copy(TC_SPLIT, WARP_MT, lane);
                    const unsigned local =
                        (unsigned)__cvta_generic_to_shared(h_next) +
                        (unsigned)(tc_wg_group(PHASE_NT(p), NT / ROW_PHASES, nt, part) * tc_wg_group_bytes(H) +
                                   tc_wg_core_byte(tc_pair_col(lane), 2 * item));
                    const float word = __uint_as_float(part ? small : big);
#pragma unroll
                    for (int d = 0; d < CLUSTER; d++) {
                        const unsigned target = (rank + (unsigned)d) % CLUSTER;
                        store_async1(map_rank(local, target), word, map_rank(bar, target));
                    }
                } else {
                    const unsigned local =
                        (unsigned)__cvta_generic_to_shared(h_next + b * ROW_WORDS + tc_item_word(item));
                    constexpr int copies = tc_push_copies(TC_SPLIT, WARP_MT);
#pragma unroll
                    for (int d = 0; d < CLUSTER / copies; d++) {
                        const unsigned target =
                            (rank + (unsigned)(d * copies + tc_push_copy(TC_SPLIT, WARP_MT, lane))) % CLUSTER;
                        tc_store_async2(map_rank(local, target), big, small, map_rank(bar, target));
                    }
                }
            }
        } else {
#pragma unroll
            for (int cc = 0; cc < CELLS / NT; cc++) {
                const int k = nt * (CELLS / NT) + cc;
                unsigned big, small;
                tc_split_tf32(hv[k], big, small);
                const int b = tc_cell_row(k, lane);
                if (b < rows) {
                    const int item = first_unit + tc_cell_unit(WARP_MT, warp, lane);
                    const unsigned local =
                        (unsigned)__cvta_generic_to_shared(h_next + b * ROW_WORDS + tc_item_word(item));
#pragma unroll
                    for (int d = 0; d < CLUSTER; d++) {
                        const unsigned target = (rank + (unsigned)d) % CLUSTER;
                        tc_store_async2(map_rank(local, target), big, small, map_rank(bar, target));
                    }
                }
            }
        }
    }
}

#endif
