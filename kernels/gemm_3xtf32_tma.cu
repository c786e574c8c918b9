// C = alpha * A · Bᵀ + beta * C in split-TF32 arithmetic (the arithmetic of
// kernels/gemm_3xtf32.cu: x = hi + lo, three TF32 products a term, each
// short slice of k-steps summed from zero by the tensor core and added to the
// FP32 accumulator by a rounded FADD), at the rate of Hopper's warpgroup
// tensor-core instructions (wgmma, compute capability 9.0a; compiled for
// another target the kernel only traps, and the host launches it on 9.0 alone).
//
// What makes it faster than kernels/gemm_3xtf32_wgmma.cu:
//   - B comes split: its big and small TF32 parts are two tensors made once
//     (the stack's weights, when its plan is built: spk_tf32_split), so no
//     block splits B, and wgmma reads each part straight from the stage TMA
//     wrote;
//   - A (the big operand: the projections' activations) is split in
//     registers, as wgmma's A fragment: each thread loads its 16 values of a
//     k-tile once and feeds the three products from registers;
//   - a producer warp keeps SPK_TMA_STAGES k-tiles in flight with TMA
//     (cp.async.bulk.tensor, 128-byte swizzle), one full and one empty
//     mbarrier a stage; the two consumer warpgroups wait only on those, never
//     on each other or on a block barrier, so one's FP32 adds and epilogue
//     run under the other's wgmmas;
//   - the grid is persistent (a block an SM, tiles b, b + grid, ...): the
//     producer loads the next tile's stages during this tile's epilogue;
//   - where B's panel is small (the _resident entries), each block keeps
//     one column's panel in shared memory and its stages carry A alone.
//
// Operands. A: a TMA tensor map of [count_a][m][k] f32 (k unit stride);
// b_hi, b_lo: maps of [count_b][n][k] (B's rows, k unit stride), the parts
// of spk_tf32_split. Out of range (m, n or k past the end, e.g. k = 60 in
// k-tiles of 32) TMA fills zeros. C (i, j) of matrix z is
// c[z*c_sb + i*c_sm + j*c_sn]; c_vec2: c_sn is 1 and pairs of columns are
// 8-byte aligned (float2 stores). A matrix of a batch uses A's matrix z when
// a_batched (else A's only one) and B's likewise. map_c: C as [count][m][n]
// (n unit stride) in boxes of 32 columns x 64 rows, through which the
// SPK_TMA_STORE_C variant stores where c_tma (C suits such a map and beta is
// 0: the host decides); elsewhere it is unused.
//
// Geometry (tiles, fragments, swizzle, descriptors, tile order) is in
// kernels/gemm_3xtf32_tma.cuh, shared with the host and its C tests.
#include "gemm_3xtf32_tma.cuh"

static_assert(SPK_TMA_KSTEPS % SPK_TMA_SLICE_STEPS == 0, "a k-tile holds whole slices");
static_assert(SPK_TMA_BM == SPK_TMA_BN, "A's and B's k-tiles are the same 16 KB");

// A CUtensorMap (128 bytes, 64-byte aligned), as the host encodes it.
struct __align__(64) spk_tma_map {
    unsigned long long opaque[16];
};

static __device__ __forceinline__ unsigned spk_tma_smem(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void spk_mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

static __device__ __forceinline__ void spk_mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void spk_mbar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Until the phase of the given parity has completed (a fresh barrier's
// phase "before the first", parity 1, counts as completed).
static __device__ __forceinline__ void spk_mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// One box (32 k x 128 rows of matrix z) into shared memory at dst, counted
// on the mbarrier bar.
static __device__ __forceinline__ void spk_tma_load(unsigned dst, const spk_tma_map *map, unsigned bar, int k0,
                                                    int row0, int z)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
                 "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(k0), "r"(row0), "r"(z)
                 : "memory");
}

#if SPK_TMA_STORE_C
// C's box at (col0, row0) of matrix z from shared memory at src (TMA's bulk
// store, counted in this thread's bulk group).
static __device__ __forceinline__ void spk_tma_store_box(const spk_tma_map *map, unsigned src, int col0, int row0,
                                                         int z)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                     reinterpret_cast<unsigned long long>(map)),
                 "r"(src), "r"(col0), "r"(row0), "r"(z)
                 : "memory");
}

// The 128 threads of warpgroup wg meet (named barrier 1 + wg, as immediates
// so that ptxas counts 3 barriers; the producer warp takes no part).
static __device__ __forceinline__ void spk_tma_wg_sync(int wg)
{
    if (wg == 0)
        asm volatile("bar.sync 1, 128;" ::: "memory");
    else
        asm volatile("bar.sync 2, 128;" ::: "memory");
}

#endif

// The m64n128 accumulator as a wgmma's first operand: its 64 registers in
// the instruction, and as the asm's in-out operands %0 .. %63.
#define SPK_TMA_D64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define SPK_TMA_D64_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (+)= A · B for one k-step: A from registers (tf32 bits), B through its
// shared-memory descriptor; scale_d 0 starts d from zero.
static __device__ __forceinline__ void spk_tma_mma(float (&d)[64], const unsigned (&a)[4], unsigned long long desc,
                                                   int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 " SPK_TMA_D64 ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : SPK_TMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

// d (+)= A · B for one k-step of 16, FP16 parts: A from registers (f16
// pairs), B K-major through its descriptor (imm-trans-b 0).
static __device__ __forceinline__ void spk_tma16_mma(float (&d)[64], const unsigned (&a)[4], unsigned long long desc,
                                                     int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " SPK_TMA_D64 ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : SPK_TMA_D64_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
}

// Keeps the compiler from moving accesses of registers across the wgmma
// fences and waits (see kernels/gemm_3xtf32_wgmma.cu).
static __device__ __forceinline__ void spk_tma_pin(float (&d)[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

static __device__ __forceinline__ void spk_tma_pin4(unsigned (&a)[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        asm volatile("" : "+r"(a[i])::"memory");
}

// The tiles a block takes, in order: streamed, tiles b, b + grid, ... (the
// tile order of kernels/gemm_3xtf32_tma.cuh); B resident, the row tiles of
// one column (spk_tma_res_column's), from spk_tma_res_first_row a row
// group's stride at a time. at() gives the current one (row tile; streamed,
// its matrix and column tile too), false past the last.
template <bool RESIDENT> struct spk_tma_walk {
    long long t; // the tile
    __device__ __forceinline__ spk_tma_walk(int) : t(blockIdx.x) {}
    __device__ __forceinline__ bool at(long long tiles, int, int col_tiles, int count, int *rt, int *z, int *ct) const
    {
        if (t >= tiles)
            return false;
        spk_tma_tile_of(t, col_tiles, count, rt, z, ct);
        return true;
    }
    __device__ __forceinline__ void next(int) { t += gridDim.x; }
};
template <> struct spk_tma_walk<true> {
    int t; // the row tile
    __device__ __forceinline__ spk_tma_walk(int columns) : t(spk_tma_res_first_row(blockIdx.x, columns)) {}
    __device__ __forceinline__ bool at(long long, int row_tiles, int, int, int *rt, int *, int *) const
    {
        *rt = t;
        return t < row_tiles;
    }
    __device__ __forceinline__ void next(int columns) { t += spk_tma_res_row_stride(gridDim.x, columns); }
};

// The producer: one thread issues every stage of this block's tiles.
// Streamed, a stage is A's tile, then B's hi and lo tiles of B_TILE_BYTES
// each; B resident, the panel (each k-tile's hi and lo tile) comes first on
// its own barrier, and a stage is A's tile alone.
template <bool RESIDENT, unsigned B_TILE_BYTES>
static __device__ __forceinline__ void spk_tma_produce(const spk_tma_map *map_a, const spk_tma_map *map_b_hi,
                                                       const spk_tma_map *map_b_lo, unsigned panel,
                                                       unsigned stages, unsigned nstages, unsigned stage_bytes,
                                                       unsigned bars, long long tiles, int row_tiles, int col_tiles,
                                                       int count, int k_tiles, int a_batched, int b_batched)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map_a)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map_b_hi)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(map_b_lo)) : "memory");
    int rt, z, ct;
    if constexpr (RESIDENT) {
        spk_tma_res_column(blockIdx.x, col_tiles, count, &z, &ct);
        const unsigned panel_full = bars + 16 * nstages;
        spk_mbar_expect_tx(panel_full, spk_tma_res_panel_bytes(k_tiles, B_TILE_BYTES));
        for (int kt = 0; kt < k_tiles; kt++) {
            const unsigned dst = panel + 2 * B_TILE_BYTES * kt;
            spk_tma_load(dst, map_b_hi, panel_full, kt * SPK_TMA_BK, ct * SPK_TMA_BN, b_batched ? z : 0);
            spk_tma_load(dst + B_TILE_BYTES, map_b_lo, panel_full, kt * SPK_TMA_BK, ct * SPK_TMA_BN,
                         b_batched ? z : 0);
        }
    }
    unsigned s = 0, phase = 0;
    for (spk_tma_walk<RESIDENT> walk(col_tiles * count); walk.at(tiles, row_tiles, col_tiles, count, &rt, &z, &ct);
         walk.next(col_tiles * count)) {
        for (int kt = 0; kt < k_tiles; kt++) {
            const unsigned full = bars + 8 * s, empty = bars + 8 * (nstages + s);
            spk_mbar_wait(empty, phase ^ 1); // the consumers are done with the stage's last tile
            spk_mbar_expect_tx(full, stage_bytes);
            const unsigned dst = stages + s * stage_bytes;
            spk_tma_load(dst, map_a, full, kt * SPK_TMA_BK, rt * SPK_TMA_BM, a_batched ? z : 0);
            if constexpr (!RESIDENT) {
                spk_tma_load(dst + SPK_TMA_TILE_BYTES, map_b_hi, full, kt * SPK_TMA_BK, ct * SPK_TMA_BN,
                             b_batched ? z : 0);
                spk_tma_load(dst + SPK_TMA_TILE_BYTES + B_TILE_BYTES, map_b_lo, full, kt * SPK_TMA_BK,
                             ct * SPK_TMA_BN, b_batched ? z : 0);
            }
            if (++s == nstages) {
                s = 0;
                phase ^= 1;
            }
        }
    }
}

// One product of either form: TF32's k-step of 8 or FP16's of 16.
template <bool F16>
static __device__ __forceinline__ void spk_tma_mma_of(float (&d)[64], const unsigned (&a)[4], unsigned long long desc,
                                                      int scale_d)
{
    if constexpr (F16)
        spk_tma16_mma(d, a, desc, scale_d);
    else
        spk_tma_mma(d, a, desc, scale_d);
}

// One slice of STEPS k-steps (from k-step q0 of the stage): d = the slice's
// three products from zero, small ones first (or, SPK_TMA_SMALL_FIRST 0 in
// the TF32 form, small, small, big a k-step), then acc += d. A k-step is 32
// bytes further along B's rows in both forms (8 floats, 16 halves): 2 in the
// descriptor's address (16-byte units).
template <bool F16, int KSTEPS, int STEPS>
static __device__ __forceinline__ void spk_tma_slice(float (&acc)[64], float (&d)[64], unsigned (&hi)[KSTEPS][4],
                                                     unsigned (&lo)[KSTEPS][4], unsigned long long desc_hi,
                                                     unsigned long long desc_lo, int q0)
{
#pragma unroll
    for (int q = q0; q < q0 + STEPS; q++) {
        spk_tma_pin4(hi[q]);
        spk_tma_pin4(lo[q]);
    }
    spk_tma_pin(d);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    if (F16 || SPK_TMA_SMALL_FIRST) {
#pragma unroll
        for (int q = q0; q < q0 + STEPS; q++)
            spk_tma_mma_of<F16>(d, lo[q], desc_hi + 2 * q, q > q0);
#pragma unroll
        for (int q = q0; q < q0 + STEPS; q++)
            spk_tma_mma_of<F16>(d, hi[q], desc_lo + 2 * q, 1);
#pragma unroll
        for (int q = q0; q < q0 + STEPS; q++)
            spk_tma_mma_of<F16>(d, hi[q], desc_hi + 2 * q, 1);
    } else {
#pragma unroll
        for (int q = q0; q < q0 + STEPS; q++) {
            spk_tma_mma_of<F16>(d, lo[q], desc_hi + 2 * q, q > q0);
            spk_tma_mma_of<F16>(d, hi[q], desc_lo + 2 * q, 1);
            spk_tma_mma_of<F16>(d, hi[q], desc_hi + 2 * q, 1);
        }
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    spk_tma_pin(d);
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] += d[i];
}

// A tile's C from acc: rows of this thread's warp, pairs of columns. A whole
// tile of float2 columns with beta 0 (the projections' every tile but the
// last row's) takes the unchecked stores.
static __device__ __forceinline__ void spk_tma_store(const float (&acc)[64], float *c, long long c_sm, long long c_sn,
                                                     int m, int n, int row0, int col0, int warp, int lane,
                                                     float alpha, float beta, int c_vec2)
{
    const int wg = warp >> 2, w = warp & 3;
    if (c_vec2 && beta == 0.0f && row0 + SPK_TMA_BM <= m && col0 + SPK_TMA_BN <= n) {
#pragma unroll
        for (int i = 0; i < 64; i += 2) {
            const int r = row0 + SPK_TMA_WG_ROWS * wg + (int)spk_tma_acc_row(w, lane, i);
            const int col = col0 + (int)spk_tma_acc_col(lane, i);
            *reinterpret_cast<float2 *>(c + (long long)r * c_sm + col) = make_float2(alpha * acc[i], alpha * acc[i + 1]);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
        const int r = row0 + SPK_TMA_WG_ROWS * wg + (int)spk_tma_acc_row(w, lane, i);
        const int col = col0 + (int)spk_tma_acc_col(lane, i);
        if (r >= m || col >= n)
            continue;
        float *out = c + (long long)r * c_sm + (long long)col * c_sn;
        float v0 = alpha * acc[i], v1 = alpha * acc[i + 1];
        if (c_vec2 && col + 1 < n) {
            float2 *o2 = reinterpret_cast<float2 *>(out);
            if (beta != 0.0f) {
                float2 old = *o2;
                v0 += beta * old.x;
                v1 += beta * old.y;
            }
            *o2 = make_float2(v0, v1);
        } else {
            *out = beta == 0.0f ? v0 : v0 + beta * *out;
            if (col + 1 < n) {
                float *out1 = out + c_sn;
                *out1 = beta == 0.0f ? v1 : v1 + beta * *out1;
            }
        }
    }
}

#if SPK_TMA_STORE_C
// A tile's C through shared memory and TMA (SPK_TMA_STORE_C): this
// warpgroup's 64 x 128 half into its buffer (once the bulk store of its last
// tile has read it), then one thread stores the four boxes and goes on: the
// write runs under the next tile's products.
static __device__ __forceinline__ void spk_tma_store_async(const float (&acc)[64], const spk_tma_map *map_c,
                                                           unsigned half, int row0, int col0, int z, int wg, int w,
                                                           int lane, float alpha)
{
    const bool leader = w == 0 && lane == 0;
    if (leader)
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    spk_tma_wg_sync(wg);
#pragma unroll
    for (int i = 0; i < 64; i += 2) {
        const unsigned dst = half + spk_tma_c_offset(spk_tma_acc_row(w, lane, i), spk_tma_acc_col(lane, i));
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(dst), "f"(alpha * acc[i]), "f"(alpha * acc[i + 1])
                     : "memory");
    }
    // the generic proxy's writes made visible to TMA's (the async proxy), then all of them done
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    spk_tma_wg_sync(wg);
    if (leader) {
#pragma unroll
        for (int b = 0; b < SPK_TMA_BN / SPK_TMA_C_BOX_COLS; b++)
            spk_tma_store_box(map_c, half + b * (SPK_TMA_C_HALF_BYTES / 4), col0 + b * SPK_TMA_C_BOX_COLS,
                              row0 + SPK_TMA_WG_ROWS * wg, z);
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
}
#endif

// A k-tile's products, FP16 parts: this thread's 8 pairs of A values, each
// scaled by a_scale and split in registers, then the slices.
static __device__ __forceinline__ void spk_tma_ktile_f16(float (&acc)[64], float (&d)[64], const unsigned char *a_tile,
                                                         unsigned b_hi, int wg, int w, int lane, float a_scale)
{
    const unsigned long long desc_hi = spk_tma16_desc(b_hi), desc_lo = spk_tma16_desc(b_hi + SPK_TMA16_B_TILE_BYTES);
    unsigned hi[SPK_TMA16_KSTEPS][4], lo[SPK_TMA16_KSTEPS][4];
#pragma unroll
    for (int q = 0; q < SPK_TMA16_KSTEPS; q++)
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float2 x = *reinterpret_cast<const float2 *>(a_tile + spk_tma16_a_offset(wg, w, lane, q, r));
            spk_tma16_split(__fmul_rn(x.x, a_scale), __fmul_rn(x.y, a_scale), hi[q][r], lo[q][r]);
        }
#pragma unroll
    for (int q0 = 0; q0 < SPK_TMA16_KSTEPS; q0 += SPK_TMA16_SLICE_STEPS)
        spk_tma_slice<true, SPK_TMA16_KSTEPS, SPK_TMA16_SLICE_STEPS>(acc, d, hi, lo, desc_hi, desc_lo, q0);
}

// The layout of a form's stages.
template <bool F16> struct spk_tma_layout {
    static constexpr unsigned stages = SPK_TMA_STAGES, stage_bytes = SPK_TMA_STAGE_BYTES,
                              b_tile_bytes = SPK_TMA_TILE_BYTES, smem_bytes = SPK_TMA_SMEM_BYTES;
};
template <> struct spk_tma_layout<true> {
    static constexpr unsigned stages = SPK_TMA16_STAGES, stage_bytes = SPK_TMA16_STAGE_BYTES,
                              b_tile_bytes = SPK_TMA16_B_TILE_BYTES, smem_bytes = SPK_TMA16_SMEM_BYTES;
};

// A full and an empty mbarrier a stage (and, B resident, the panel's), made
// visible to TMA (the async proxy).
template <bool RESIDENT> static __device__ __forceinline__ void spk_tma_init_barriers(unsigned bars, unsigned nstages)
{
    for (int s = 0; s < (int)nstages; s++) {
        spk_mbar_init(bars + 8 * s, 1);                                  // full: the producer's arrive + bytes
        spk_mbar_init(bars + 8 * (nstages + s), SPK_TMA_CONSUMER_WARPS); // empty: a warp each
    }
    if (RESIDENT)
        spk_mbar_init(bars + 16 * nstages, 1); // the panel's: the producer's arrive + bytes
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Both forms' kernel: F16 chooses the parts (TF32's or FP16's, A scaled by
// a_scale), RESIDENT the schedule (B's panel kept in shared memory).
template <bool F16, bool RESIDENT>
static __device__ __forceinline__ void spk_tma_gemm(const spk_tma_map &map_a, const spk_tma_map &map_b_hi,
                                                    const spk_tma_map &map_b_lo, const spk_tma_map &map_c, int m,
                                                    int n, int k, int count, int a_batched, int b_batched, float *c,
                                                    long long c_sm, long long c_sn, long long c_sb, float alpha,
                                                    float beta, int c_vec2, int c_tma, float a_scale)
{
    using layout = spk_tma_layout<F16>;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char spk_tma_smem_raw[];
    unsigned given;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(given));
    // Streamed: the variant's stages of A and B; B resident: the panel,
    // then A's stages in what is left (kernels/gemm_3xtf32_tma.cuh).
    const unsigned panel_bytes =
        RESIDENT ? spk_tma_res_panel_bytes((k + SPK_TMA_BK - 1) / SPK_TMA_BK, layout::b_tile_bytes) : 0u;
    constexpr unsigned nstages = RESIDENT ? SPK_TMA_RES_STAGES : layout::stages;
    constexpr unsigned stage_bytes = RESIDENT ? SPK_TMA_TILE_BYTES : layout::stage_bytes;
    constexpr unsigned needed = RESIDENT ? SPK_TMA_RES_SMEM_BYTES : layout::smem_bytes;
    if (given < needed || panel_bytes > SPK_TMA_RES_PANEL_LIMIT)
        asm volatile("trap;"); // a host that gives less than this variant's layout needs, or a panel past it
    // The panel and the stages 1024-byte aligned (the swizzle's period), C's buffer, the barriers.
    const unsigned raw = spk_tma_smem(spk_tma_smem_raw);
    const unsigned panel = (raw + 1023u) & ~1023u;
    const unsigned stages = panel + panel_bytes;
    const unsigned c_buffer = stages + nstages * stage_bytes;
    const unsigned bars = c_buffer + SPK_TMA_C_BYTES;
    const unsigned char *stage_ptr = spk_tma_smem_raw + (stages - raw);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int col_tiles = (n + SPK_TMA_BN - 1) / SPK_TMA_BN, row_tiles = (m + SPK_TMA_BM - 1) / SPK_TMA_BM;
    const int k_tiles = (k + SPK_TMA_BK - 1) / SPK_TMA_BK;
    const long long tiles = (long long)row_tiles * col_tiles * count;

    if (threadIdx.x == 0)
        spk_tma_init_barriers<RESIDENT>(bars, nstages);
    __syncthreads(); // the last block-wide barrier: the roles never meet again

    if (warp == SPK_TMA_CONSUMER_WARPS) {
        if (lane == 0)
            spk_tma_produce<RESIDENT, layout::b_tile_bytes>(&map_a, &map_b_hi, &map_b_lo, panel, stages, nstages,
                                                            stage_bytes, bars, tiles, row_tiles, col_tiles, count,
                                                            k_tiles, a_batched, b_batched);
        return;
    }

    const int wg = warp >> 2, w = warp & 3;
    float acc[64], d[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        d[i] = 0.0f;
    if (RESIDENT)
        spk_mbar_wait(bars + 16 * nstages, 0); // the panel, once
    unsigned s = 0, phase = 0;
    int rt, z, ct;
    if (RESIDENT)
        spk_tma_res_column(blockIdx.x, col_tiles, count, &z, &ct);
    for (spk_tma_walk<RESIDENT> walk(col_tiles * count); walk.at(tiles, row_tiles, col_tiles, count, &rt, &z, &ct);
         walk.next(col_tiles * count)) {
#pragma unroll
        for (int i = 0; i < 64; i++)
            acc[i] = 0.0f;
        for (int kt = 0; kt < k_tiles; kt++) {
            spk_mbar_wait(bars + 8 * s, phase);
            __syncwarp();
            const unsigned char *a_tile = stage_ptr + s * stage_bytes;
            const unsigned b_hi = RESIDENT ? panel + 2 * layout::b_tile_bytes * kt
                                           : stages + s * stage_bytes + SPK_TMA_TILE_BYTES;
            if constexpr (F16)
                spk_tma_ktile_f16(acc, d, a_tile, b_hi, wg, w, lane, a_scale);
            else {
                // The k-tile's A values, split in registers: hi rounded to TF32,
                // lo = x - hi (the tensor core reads its top 19 bits). Written
                // here rather than in a function of its own: so the TF32 form's
                // machine code is the one it had before the FP16 form.
                const unsigned long long desc_hi = spk_tma_desc(b_hi),
                                         desc_lo = spk_tma_desc(b_hi + SPK_TMA_TILE_BYTES);
                unsigned hi[SPK_TMA_KSTEPS][4], lo[SPK_TMA_KSTEPS][4];
#pragma unroll
                for (int q = 0; q < SPK_TMA_KSTEPS; q++)
#pragma unroll
                    for (int v = 0; v < 4; v++) {
                        const float x = *reinterpret_cast<const float *>(a_tile + spk_tma_a_offset(wg, w, lane, q, v));
                        hi[q][v] = spk_tf32_round_bits(__float_as_uint(x));
                        lo[q][v] = __float_as_uint(x - __uint_as_float(hi[q][v]));
                    }
#pragma unroll
                for (int q0 = 0; q0 < SPK_TMA_KSTEPS; q0 += SPK_TMA_SLICE_STEPS)
                    spk_tma_slice<false, SPK_TMA_KSTEPS, SPK_TMA_SLICE_STEPS>(acc, d, hi, lo, desc_hi, desc_lo,
                                                                              q0);
            }
            // This warp's wgmmas and loads of the stage are complete: hand it back.
            __syncwarp();
            if (lane == 0)
                spk_mbar_arrive(bars + 8 * (nstages + s));
            if (++s == nstages) {
                s = 0;
                phase ^= 1;
            }
        }
#if SPK_TMA_STORE_C
        if (c_tma) {
            spk_tma_store_async(acc, &map_c, c_buffer + wg * SPK_TMA_C_HALF_BYTES, rt * SPK_TMA_BM, ct * SPK_TMA_BN, z,
                                wg, w, lane, alpha);
            continue;
        }
#endif
        spk_tma_store(acc, c + (long long)z * c_sb, c_sm, c_sn, m, n, rt * SPK_TMA_BM, ct * SPK_TMA_BN, warp, lane,
                      alpha, beta, c_vec2);
    }
#if SPK_TMA_STORE_C
    // the last bulk stores complete before the block (and its shared memory) ends
    if (c_tma && w == 0 && lane == 0)
        asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
#else
    // wgmma and TMA in this form exist on sm_90a alone; the host launches this kernel nowhere else.
    asm volatile("trap;");
#endif
}

extern "C" __global__ void __launch_bounds__(SPK_TMA_THREADS, 1)
spk_gemm_3xtf32_tma(const __grid_constant__ spk_tma_map map_a, const __grid_constant__ spk_tma_map map_b_hi,
                    const __grid_constant__ spk_tma_map map_b_lo, const __grid_constant__ spk_tma_map map_c, int m,
                    int n, int k, int count, int a_batched, int b_batched, float *c, long long c_sm, long long c_sn,
                    long long c_sb, float alpha, float beta, int c_vec2, int c_tma)
{
    spk_tma_gemm<false, false>(map_a, map_b_hi, map_b_lo, map_c, m, n, k, count, a_batched, b_batched, c, c_sm, c_sn,
                               c_sb, alpha, beta, c_vec2, c_tma, 1.0f);
}

// The FP16 parts' form: b_hi, b_lo maps of f16 (64-byte swizzle), B's parts
// scaled by 2^s_b; A scaled by a_scale = 2^s_a in registers; alpha carries
// the caller's factor times 2^-(s_a + s_b).
extern "C" __global__ void __launch_bounds__(SPK_TMA_THREADS, 1)
spk_gemm_3xf16_tma(const __grid_constant__ spk_tma_map map_a, const __grid_constant__ spk_tma_map map_b_hi,
                   const __grid_constant__ spk_tma_map map_b_lo, const __grid_constant__ spk_tma_map map_c, int m,
                   int n, int k, int count, int a_batched, int b_batched, float *c, long long c_sm, long long c_sn,
                   long long c_sb, float alpha, float beta, int c_vec2, int c_tma, float a_scale)
{
    spk_tma_gemm<true, false>(map_a, map_b_hi, map_b_lo, map_c, m, n, k, count, a_batched, b_batched, c, c_sm, c_sn,
                              c_sb, alpha, beta, c_vec2, c_tma, a_scale);
}

// The same two forms with B resident (kernels/gemm_3xtf32_tma.cuh): the
// host launches them on whole row groups of blocks where B's panel fits.
extern "C" __global__ void __launch_bounds__(SPK_TMA_THREADS, 1)
spk_gemm_3xtf32_tma_resident(const __grid_constant__ spk_tma_map map_a, const __grid_constant__ spk_tma_map map_b_hi,
                             const __grid_constant__ spk_tma_map map_b_lo, const __grid_constant__ spk_tma_map map_c,
                             int m, int n, int k, int count, int a_batched, int b_batched, float *c, long long c_sm,
                             long long c_sn, long long c_sb, float alpha, float beta, int c_vec2, int c_tma)
{
    spk_tma_gemm<false, true>(map_a, map_b_hi, map_b_lo, map_c, m, n, k, count, a_batched, b_batched, c, c_sm, c_sn,
                              c_sb, alpha, beta, c_vec2, c_tma, 1.0f);
}

extern "C" __global__ void __launch_bounds__(SPK_TMA_THREADS, 1)
spk_gemm_3xf16_tma_resident(const __grid_constant__ spk_tma_map map_a, const __grid_constant__ spk_tma_map map_b_hi,
                            const __grid_constant__ spk_tma_map map_b_lo, const __grid_constant__ spk_tma_map map_c,
                            int m, int n, int k, int count, int a_batched, int b_batched, float *c, long long c_sm,
                            long long c_sn, long long c_sb, float alpha, float beta, int c_vec2, int c_tma,
                            float a_scale)
{
    spk_tma_gemm<true, true>(map_a, map_b_hi, map_b_lo, map_c, m, n, k, count, a_batched, b_batched, c, c_sm, c_sn,
                             c_sb, alpha, beta, c_vec2, c_tma, a_scale);
}
