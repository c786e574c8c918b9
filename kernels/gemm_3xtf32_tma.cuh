/* The geometry of the split-TF32 GEMM's TMA form (kernels/gemm_3xtf32_tma.cu):
 * tiles, stages, the shared-memory layout that TMA writes and wgmma reads,
 * the register fragments, the tile order, and the split itself. Included by
 * the kernel, by its host (src/cuda/gemm_3xtf32_tma.c) and by the kernels of
 * tools/wgmma_rate.lua, so that the C tests (tests/c/test_gemm_3xtf32.c)
 * check on the CPU the very index functions the kernel runs, and the tool
 * times its layout. C and CUDA C++; each tunable can be overridden
 * with a define (tools/gemm_3xtf32_check.lua times the variants). */
#ifndef SPK_GEMM_3XTF32_TMA_CUH
#define SPK_GEMM_3XTF32_TMA_CUH

#if defined(__CUDACC__)
#define SPK_TMA_FN static __host__ __device__ __forceinline__
#else
#define SPK_TMA_FN static inline
#endif

/* A block computes a 128 x 128 tile of C: two consumer warpgroups of 64 rows
 * each (one m64n128k8 wgmma per product and k-step) and one producer warp. */
#define SPK_TMA_BM 128
#define SPK_TMA_BN 128
#define SPK_TMA_WG_ROWS 64
#define SPK_TMA_CONSUMER_WARPS 8
#define SPK_TMA_THREADS (32 * (SPK_TMA_CONSUMER_WARPS + 1))
/* A k-tile is 32 floats: one 128-byte row of TMA's 128-byte swizzle, four
 * k-steps of 8. A stage holds A's, B hi's and B lo's k-tile (16 KB each). */
#define SPK_TMA_BK 32
#define SPK_TMA_KSTEPS (SPK_TMA_BK / 8)
#define SPK_TMA_TILE_BYTES (SPK_TMA_BM * SPK_TMA_BK * 4)
#define SPK_TMA_STAGE_BYTES (3 * SPK_TMA_TILE_BYTES)
#ifndef SPK_TMA_STAGES
#define SPK_TMA_STAGES 3
#endif
/* k-steps whose products the tensor core sums from zero before one FP32 add
 * (1, 2 or 4), and their order: 1 = every small product of the slice, then
 * the big ones; 0 = small, small, big per k-step (the mma.sync form's). */
#ifndef SPK_TMA_SLICE_STEPS
#define SPK_TMA_SLICE_STEPS 2
#endif
#ifndef SPK_TMA_SMALL_FIRST
#define SPK_TMA_SMALL_FIRST 1
#endif
/* How a tile's C leaves the block: 0 = each consumer thread's float2 stores
 * to global memory, 1 = the accumulators into a shared-memory buffer (64 KB,
 * each warpgroup's 64 x 128 half as four boxes of 32 columns with the
 * 128-byte swizzle) that one thread of the warpgroup hands to TMA's bulk
 * store, so the next tile's products start while C is written (where C
 * suits a tensor map and beta is 0; else the stores of 0). 1 leaves room
 * for 3 stages (docs/performance.md has both timed). */
#ifndef SPK_TMA_STORE_C
#define SPK_TMA_STORE_C 1
#endif
#define SPK_TMA_C_BOX_COLS 32
#define SPK_TMA_C_HALF_BYTES (SPK_TMA_WG_ROWS * SPK_TMA_BN * 4)
#define SPK_TMA_C_BYTES (SPK_TMA_STORE_C ? 2 * SPK_TMA_C_HALF_BYTES : 0)
/* Dynamic shared memory: the stages (1024-byte aligned, as the swizzle needs:
 * up to 1024 bytes are skipped to get there), C's buffer (1024-byte aligned
 * after them), and a full and an empty mbarrier a stage. */
#define SPK_TMA_BARRIER_BYTES (2 * SPK_TMA_STAGES * 8)
#define SPK_TMA_SMEM_BYTES (SPK_TMA_STAGES * SPK_TMA_STAGE_BYTES + SPK_TMA_C_BYTES + 1024 + SPK_TMA_BARRIER_BYTES)
/* What the host gives every launch: a block's opt-in maximum on compute
 * capability 9.0, so a variant compiled from another kernel folder (more
 * stages, C's buffer) runs with the same host; the kernel traps if it is
 * given less than it needs. */
#define SPK_TMA_SMEM_LIMIT 232448
#if SPK_TMA_SMEM_BYTES > SPK_TMA_SMEM_LIMIT
#error "gemm_3xtf32_tma: the stages and C's buffer exceed a block's 227 KB (SPK_TMA_STORE_C 1 takes 3 stages at most)"
#endif

/* Byte offset of element (r, c), c < 32, in a [rows][32] f32 tile as TMA
 * writes it with CU_TENSOR_MAP_SWIZZLE_128B into 1024-byte aligned shared
 * memory: row r at 128 r, its 16-byte chunk c / 4 moved to (c / 4) ^ (r % 8). */
SPK_TMA_FN unsigned spk_tma_swizzled(unsigned r, unsigned c)
{
    return r * 128u + ((((c >> 2) ^ r) & 7u) << 4) + ((c & 3u) << 2);
}

/* wgmma's A fragment from registers (m64 x k8, tf32), warp w (0..3) of the
 * warpgroup, lane l, value v (0..3): row 16 w + l / 4 (+ 8 for v odd),
 * column l % 4 (+ 4 for v >= 2) of the 64 x 8 k-step. */
SPK_TMA_FN unsigned spk_tma_a_row(unsigned warp, unsigned lane, unsigned v)
{
    return 16u * warp + (lane >> 2) + 8u * (v & 1u);
}
SPK_TMA_FN unsigned spk_tma_a_col(unsigned lane, unsigned v) { return (lane & 3u) + 4u * (v >> 1); }

/* Where value v of k-step q of a consumer thread sits in the stage's A tile
 * (warpgroup wg, warp w of it): the byte offset the kernel loads from. */
SPK_TMA_FN unsigned spk_tma_a_offset(unsigned wg, unsigned warp, unsigned lane, unsigned q, unsigned v)
{
    return spk_tma_swizzled(SPK_TMA_WG_ROWS * wg + spk_tma_a_row(warp, lane, v), 8u * q + spk_tma_a_col(lane, v));
}

/* The m64n128 f32 accumulator, value i (0..63) of lane l in warp w: row
 * 16 w + l / 4 (+ 8 for i % 4 >= 2), column 8 (i / 4) + 2 (l % 4) + i % 2. */
SPK_TMA_FN unsigned spk_tma_acc_row(unsigned warp, unsigned lane, unsigned i)
{
    return 16u * warp + (lane >> 2) + 8u * ((i >> 1) & 1u);
}
SPK_TMA_FN unsigned spk_tma_acc_col(unsigned lane, unsigned i) { return 8u * (i >> 2) + 2u * (lane & 3u) + (i & 1u); }

/* Byte offset of element (r, c) (r < 64, c < 128) of a warpgroup's half of
 * C's buffer, as TMA's bulk store reads it: box c / 32 (32 columns x 64
 * rows, the 128-byte swizzle) at 8 KB (c / 32). */
SPK_TMA_FN unsigned spk_tma_c_offset(unsigned r, unsigned c)
{
    return (c / SPK_TMA_C_BOX_COLS) * (SPK_TMA_WG_ROWS * 128u) + spk_tma_swizzled(r, c % SPK_TMA_C_BOX_COLS);
}

/* wgmma's shared-memory descriptor of a K-major B tile with the 128-byte
 * swizzle, starting at shared address `addr` (1024-byte aligned, plus 32
 * bytes a k-step): start address >> 4 in bits 0-13, leading offset 1 (unused
 * with a swizzle) in 16-29, stride offset 1024 >> 4 (8 rows of 128 bytes) in
 * 32-45, base offset 0, layout 1 (128-byte swizzle) in 62-63. */
#define SPK_TMA_DESC_SBO 1024u
SPK_TMA_FN unsigned long long spk_tma_desc(unsigned addr)
{
    return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) |
           ((unsigned long long)(SPK_TMA_DESC_SBO >> 4) << 32) | (1ull << 62);
}

/* The tiles in the order the persistent blocks take them (block b: tiles
 * b, b + grid, ...): columns fastest, then the matrices of a batch, then
 * rows, so the blocks running at once share A's row tiles in L2. */
SPK_TMA_FN void spk_tma_tile_of(long long t, int col_tiles, int count, int *row_tile, int *matrix, int *col_tile)
{
    *col_tile = (int)(t % col_tiles);
    long long rest = t / col_tiles;
    *matrix = (int)(rest % count);
    *row_tile = (int)(rest / count);
}

/* x rounded to TF32 on its bits: half an ulp added to the magnitude, the 13
 * low bits cleared (ties away from zero, as cvt.rna); the kernels' split is
 * hi = this, lo = x - hi (exact). */
SPK_TMA_FN unsigned spk_tf32_round_bits(unsigned bits) { return (bits + 0x1000u) & 0xffffe000u; }

/* The split of a prepared operand (spk_tf32_split, on the host and in
 * kernels/gemm_3xtf32.cu's spk_tf32_split alike): hi = x rounded to TF32,
 * lo = x - hi rounded to TF32 too (the tensor core would truncate it), so
 * hi + lo is x within 2^-22 of it. An Inf or NaN goes whole into hi, lo 0
 * (rounding would carry a NaN's payload into its sign); a finite x that
 * rounds up to Inf is truncated instead. */
SPK_TMA_FN int spk_tf32_finite_bits(unsigned bits) { return (bits & 0x7f800000u) != 0x7f800000u; }

SPK_TMA_FN void spk_tf32_split_value(float x, float *hi, float *lo)
{
    union {
        float f;
        unsigned u;
    } v, h, l;
    v.f = x;
    if (!spk_tf32_finite_bits(v.u)) {
        *hi = x;
        *lo = 0.0f;
        return;
    }
    h.u = spk_tf32_round_bits(v.u);
    if (!spk_tf32_finite_bits(h.u))
        h.u = v.u & 0xffffe000u;
    l.f = x - h.f;
    l.u = spk_tf32_round_bits(l.u);
    *hi = h.f;
    *lo = l.f;
}

/* ---- the FP16 parts' form (spk_gemm_3xf16_tma) --------------------------- */

/* The same tiles, warps and A stage; B's parts are f16, each scaled by a
 * power of two (spk_f16_scale_exponent) so that its largest magnitude lies
 * in [2^14, 2^15), and A is scaled in registers by a power of two from a
 * bound the caller guarantees (the layers after the first project h, |h| <=
 * 1). Split there as hi = A rounded to FP16, lo = A - hi rounded to FP16,
 * the products are FP16's m64n128k16 at twice TF32's rate: two k-steps a
 * k-tile, B's tiles 32 k x 128 rows x 2 bytes (8 KB, 64-byte rows in TMA's
 * 64-byte swizzle). Every value the scaling leaves at 2^-3 or more of the
 * scale's range keeps lo normal, so a term is kept to 2^-22 of itself as in
 * the TF32 parts, and the rest to 2^-25 in scaled units (2^-40 of the
 * largest). */
#define SPK_TMA16_KSTEPS (SPK_TMA_BK / 16)
#define SPK_TMA16_B_TILE_BYTES (SPK_TMA_BN * SPK_TMA_BK * 2)
#define SPK_TMA16_STAGE_BYTES (SPK_TMA_TILE_BYTES + 2 * SPK_TMA16_B_TILE_BYTES)
#ifndef SPK_TMA16_STAGES
#define SPK_TMA16_STAGES 4
#endif
/* k-steps of 16 a slice (1 or 2): the small products of the slice, then its
 * big ones, summed from zero by the tensor core before one FP32 add. Two
 * (a k-tile a slice) measured as accurate as one and faster
 * (docs/performance.md). */
#ifndef SPK_TMA16_SLICE_STEPS
#define SPK_TMA16_SLICE_STEPS 2
#endif
#define SPK_TMA16_BARRIER_BYTES (2 * SPK_TMA16_STAGES * 8)
#define SPK_TMA16_SMEM_BYTES                                                                                           \
    (SPK_TMA16_STAGES * SPK_TMA16_STAGE_BYTES + SPK_TMA_C_BYTES + 1024 + SPK_TMA16_BARRIER_BYTES)
#if SPK_TMA16_SMEM_BYTES > SPK_TMA_SMEM_LIMIT
#error "gemm_3xtf32_tma: the FP16 form's stages and C's buffer exceed a block's 227 KB (5 stages at most)"
#endif

/* wgmma's A fragment from registers (m64 x k16, f16 pairs), warp w of the
 * warpgroup, lane l, register r (0..3), half h (0: the low 16 bits): row
 * 16 w + l / 4 (+ 8 for r odd), column 2 (l % 4) + h (+ 8 for r >= 2). */
SPK_TMA_FN unsigned spk_tma16_a_row(unsigned warp, unsigned lane, unsigned r)
{
    return 16u * warp + (lane >> 2) + 8u * (r & 1u);
}
SPK_TMA_FN unsigned spk_tma16_a_col(unsigned lane, unsigned r, unsigned h)
{
    return 2u * (lane & 3u) + h + 8u * (r >> 1);
}

/* Where the pair of register r of k-step q sits in the stage's f32 A tile
 * (warpgroup wg, warp w): the byte offset of its first float; the second is
 * the next 4 bytes (an even column stays in its 16-byte chunk). */
SPK_TMA_FN unsigned spk_tma16_a_offset(unsigned wg, unsigned warp, unsigned lane, unsigned q, unsigned r)
{
    return spk_tma_swizzled(SPK_TMA_WG_ROWS * wg + spk_tma16_a_row(warp, lane, r), 16u * q + spk_tma16_a_col(lane, r, 0));
}

/* wgmma's descriptor of a K-major f16 B tile with the 64-byte swizzle at
 * shared address `addr` (512-byte aligned, plus 32 bytes a k-step): start
 * >> 4 in bits 0-13, leading offset 1 (unused with a swizzle), stride offset
 * 512 >> 4 (8 rows of 64 bytes) in 32-45, layout 2 (64-byte swizzle) in 62-63. */
#define SPK_TMA16_DESC_SBO 512u
SPK_TMA_FN unsigned long long spk_tma16_desc(unsigned addr)
{
    return (unsigned long long)((addr & 0x3ffffu) >> 4) | (1ull << 16) |
           ((unsigned long long)(SPK_TMA16_DESC_SBO >> 4) << 32) | (2ull << 62);
}

/* FP16's bits of a float, rounded to nearest even (as cvt.rn.f16.f32):
 * overflow to Inf, subnormals kept, NaN quiet with its sign. */
SPK_TMA_FN unsigned short spk_f16_bits(float x)
{
    union {
        float f;
        unsigned u;
    } v;
    v.f = x;
    const unsigned sign = (v.u >> 16) & 0x8000u, mag = v.u & 0x7fffffffu;
    if (mag > 0x7f800000u)
        return (unsigned short)(sign | 0x7e00u);
    if (mag >= 0x477ff000u) /* 65520 and above round to Inf */
        return (unsigned short)(sign | 0x7c00u);
    if (mag < 0x33000000u) /* below half the smallest subnormal (2^-25): zero */
        return (unsigned short)sign;
    const int e = (int)(mag >> 23) - 127;
    unsigned m = (mag & 0x7fffffu) | 0x800000u; /* 24 significant bits */
    int shift = e >= -14 ? 13 : 13 + (-14 - e); /* bits dropped: to 11 (normal) or fewer (subnormal) */
    unsigned kept = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    /* normal: exponent field e + 15, the implicit bit carried in by the add; subnormal: kept as is */
    unsigned bits = e >= -14 ? ((unsigned)(e + 14) << 10) + kept : kept;
    return (unsigned short)(sign | bits);
}

SPK_TMA_FN float spk_f16_value(unsigned short h)
{
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    union {
        float f;
        unsigned u;
    } v;
    if (e == 31)
        v.u = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
        v.f = (float)m * (1.0f / 16777216.0f); /* m 2^-24, exact */
        v.u |= sign;
    } else
        v.u = sign | ((e + 112u) << 23) | (m << 13);
    return v.f;
}

/* The power of two s that puts a largest magnitude max_abs in [2^14, 2^15)
 * (0 for 0, a non-finite or a subnormal max_abs), within [-100, 100] so that
 * 2^s and the products' 2^-(s_a + s_b) stay normal floats. */
SPK_TMA_FN int spk_f16_scale_exponent(float max_abs)
{
    union {
        float f;
        unsigned u;
    } v;
    v.f = max_abs < 0.0f ? -max_abs : max_abs;
    const int e = (int)(v.u >> 23); /* biased: max_abs in [2^(e - 127), 2^(e - 126)) */
    if (e == 0 || e == 255)
        return 0;
    int s = 14 - (e - 127);
    return s < -100 ? -100 : s > 100 ? 100 : s;
}

/* 2^s as a float, for |s| <= 126. */
SPK_TMA_FN float spk_pow2f(int s)
{
    union {
        float f;
        unsigned u;
    } v;
    v.u = (unsigned)(127 + s) << 23;
    return v.f;
}

/* The split of a scaled value into FP16 parts: hi = x rounded to FP16, lo =
 * x - hi (exact in FP32) rounded to FP16; an Inf or NaN goes whole into hi,
 * lo 0. */
SPK_TMA_FN void spk_f16_split_value(float x, unsigned short *hi, unsigned short *lo)
{
    *hi = spk_f16_bits(x);
    const float h = spk_f16_value(*hi);
    *lo = (h - h == 0.0f) ? spk_f16_bits(x - h) : (unsigned short)0;
}

#if defined(__CUDACC__)
/* The same split on the device, as the kernel (and tools/wgmma_rate.lua)
 * runs it: two scaled floats as FP16 parts, each pair packed as wgmma's A
 * fragment holds it (the lower k in the low half; cvt.rn.f16x2.f32 d, a, b
 * puts a high), as spk_f16_split_value for every finite x: lo = x - hi. An
 * Inf's lo is NaN here: no test for it, since the form's A is h, never
 * infinite, and the test costs time (docs/performance.md). */
static __device__ __forceinline__ void spk_tma16_split(float x0, float x1, unsigned &hi, unsigned &lo)
{
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(hi) : "f"(x1), "f"(x0));
    float h0, h1;
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}" : "=f"(h0), "=f"(h1) : "r"(hi));
    const float r0 = __fsub_rn(x0, h0), r1 = __fsub_rn(x1, h1);
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(lo) : "f"(r1), "f"(r0));
}
#endif

/* ---- B resident: a block's whole panel of B in shared memory ------------- */

/* Each 128 x 128 tile reads B's parts for all of K through the L2 again, the
 * same for every tile of a column (16 of the TF32 form's 48 KB a k-tile are
 * A). Where B's panel (its 128 rows over all of K, both parts) is small, each
 * block keeps one panel resident, loaded once, and walks the row tiles of
 * that column: block b takes column b % columns (matrices of a batch
 * included: column tiles x count) and rows b / columns, + groups, ...; the
 * stages then carry A alone, 16 KB each, SPK_TMA_RES_STAGES of them beside
 * C's buffer. The host takes this schedule where the panel fits and every
 * block walks enough row tiles (src/cuda/gemm_3xtf32_tma.c); elsewhere the
 * streamed schedule above. */
#define SPK_TMA_RES_PANEL_LIMIT (64u * 1024u)
#define SPK_TMA_RES_STAGES 6
#define SPK_TMA_RES_BARRIER_BYTES ((2 * SPK_TMA_RES_STAGES + 1) * 8)
#define SPK_TMA_RES_SMEM_BYTES                                                                                         \
    (1024 + SPK_TMA_RES_PANEL_LIMIT + SPK_TMA_RES_STAGES * SPK_TMA_TILE_BYTES + SPK_TMA_C_BYTES +                      \
     SPK_TMA_RES_BARRIER_BYTES)
#if SPK_TMA_RES_SMEM_BYTES > SPK_TMA_SMEM_LIMIT
#error "gemm_3xtf32_tma: B's resident panel, its stages and C's buffer exceed a block's 227 KB"
#endif

/* The panel's bytes: a k-tile's hi then lo tile, for every k-tile. */
SPK_TMA_FN unsigned spk_tma_res_panel_bytes(int k_tiles, unsigned b_tile_bytes)
{
    return 2u * b_tile_bytes * (unsigned)k_tiles;
}

/* A resident block's walk: block b of `grid`, `columns` = column tiles x
 * count of them per row group. Its column (matrix z, column tile ct), its
 * first row tile and the stride to the next (the number of row groups). */
SPK_TMA_FN void spk_tma_res_column(unsigned b, int col_tiles, int count, int *z, int *ct)
{
    const int column = (int)(b % (unsigned)(col_tiles * count));
    *z = column / col_tiles;
    *ct = column % col_tiles;
}
SPK_TMA_FN int spk_tma_res_first_row(unsigned b, int columns) { return (int)(b / (unsigned)columns); }
SPK_TMA_FN int spk_tma_res_row_stride(unsigned grid, int columns) { return (int)(grid / (unsigned)columns); }

#endif
