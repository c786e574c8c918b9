/* The split-TF32 GEMM's TMA form on the CPU: its host plan (what it accepts,
 * tensor maps, tiles, edges), the index functions the kernel runs
 * (kernels/gemm_3xtf32_tma.cuh) against models of what TMA writes and what
 * wgmma reads, the split's bits, an emulation of the kernel's arithmetic
 * against f64 (the error class), and its compile for sm_90a (registers,
 * spills, no serialised wgmma). No GPU needed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "cuda/gemm_3xtf32_tma.h"
#include "cuda/runtime.h"
#include "gemm_3xtf32_tma.cuh"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* A small deterministic generator (xorshift), uniform in [-1, 1). */
static uint64_t rng_state = 88172645463325252ull;
static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

/* The projections' shape: x [M, K] shared by both directions, W [2, 512, K]. */
static spk_gemm_tma_plan projection_plan(int64_t m, int64_t k, int *rc)
{
    spk_gemm_tma_matrix a = {.address = 0x10000, .rows = m, .k = k, .row_stride = k, .k_stride = 1};
    spk_gemm_tma_matrix b = {.address = 0x20000, .rows = 512, .k = k, .row_stride = k, .k_stride = 1,
                             .matrix_stride = 512 * k};
    spk_gemm_tma_c c = {.address = 0x40000, .c_sm = 512, .c_sn = 1, .c_sb = m * 512};
    spk_gemm_tma_plan p;
    *rc = spk_gemm_tma_plan_make(&a, &b, 2, &c, 132, &p);
    return p;
}

TEST(plan_of_the_projections)
{
    int rc;
    spk_gemm_tma_plan p = projection_plan(150784, 256, &rc);
    CHECK(rc == 0);
    CHECK(p.row_tiles == 1178 && p.col_tiles == 4 && p.k_tiles == 8);
    CHECK(p.tiles == 1178 * 4 * 2);
    CHECK(p.grid == 132 && p.threads == 288);
    /* every launch an H100/H200 block's opt-in maximum, which this build's layout fits */
    CHECK(p.smem == SPK_TMA_SMEM_LIMIT && p.smem == 232448 && SPK_TMA_SMEM_BYTES <= p.smem);
    CHECK(p.a.dims[0] == 256 && p.a.dims[1] == 150784 && p.a.dims[2] == 1 && !p.a_batched);
    CHECK(p.a.strides[0] == 1024 && p.a.strides[1] == 1024ull * 150784);
    CHECK(p.b.dims[0] == 256 && p.b.dims[1] == 512 && p.b.dims[2] == 2 && p.b_batched);
    CHECK(p.b.strides[0] == 1024 && p.b.strides[1] == 512ull * 1024);
    CHECK(p.a.box[0] == 32 && p.a.box[1] == 128 && p.a.box[2] == 1 && p.b.box[1] == 128);
    CHECK(p.c_vec2 == 1);
    /* C [2, M, 512] suits TMA's store: columns, rows, both matrices; boxes of 32 columns x 64 rows */
    CHECK(p.c_tma == 1);
    CHECK(p.c.dims[0] == 512 && p.c.dims[1] == 150784 && p.c.dims[2] == 2);
    CHECK(p.c.strides[0] == 2048 && p.c.strides[1] == 2048ull * 150784);
    CHECK(p.c.box[0] == SPK_TMA_C_BOX_COLS && p.c.box[0] * 4 == 128 && p.c.box[1] == 64 && p.c.box[2] == 1);
    /* The first layer: k = 60 is two k-tiles, the second one 28 past the end (TMA's zeros). */
    p = projection_plan(150784, 60, &rc);
    CHECK(rc == 0 && p.k_tiles == 2 && p.a.strides[0] == 240 && p.a.dims[0] == 60);
    /* batch 1: 589 rows, the last row tile 77 rows deep; fewer tiles than SMs */
    p = projection_plan(589, 256, &rc);
    CHECK(rc == 0 && p.row_tiles == 5 && p.tiles == 40 && p.grid == 40);
    for (int64_t m = 1; m <= 1000; m += 37) {
        p = projection_plan(m, 60, &rc);
        CHECK(rc == 0 && p.row_tiles == (m + 127) / 128 && p.row_tiles * 128 >= m && (p.row_tiles - 1) * 128 < m);
    }
}

TEST(plan_refuses_what_the_form_cannot_read)
{
    spk_gemm_tma_matrix a = {.address = 0x10000, .rows = 300, .k = 64, .row_stride = 64, .k_stride = 1};
    spk_gemm_tma_matrix b = {.address = 0x20000, .rows = 200, .k = 64, .row_stride = 64, .k_stride = 1};
    spk_gemm_tma_c c = {.address = 0x40000, .c_sm = 200, .c_sn = 1};
    spk_gemm_tma_plan p;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &c, 132, &p) == 0);
    spk_gemm_tma_matrix x = a;
    x.k_stride = 300; /* a transposed a */
    CHECK(spk_gemm_tma_plan_make(&x, &b, 1, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "a must run along k with unit stride");
    x = a;
    x.address += 4; /* one float off */
    CHECK(spk_gemm_tma_plan_make(&x, &b, 1, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "a must start 16-byte aligned");
    x = b;
    x.k = 61, x.row_stride = 61; /* packed rows of 61 floats */
    spk_gemm_tma_matrix y = a;
    y.k = 61, y.row_stride = 64;
    CHECK(spk_gemm_tma_plan_make(&y, &x, 1, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "b's rows must be a multiple of 4 floats apart (61)");
    y.k = 60;
    CHECK(spk_gemm_tma_plan_make(&y, &b, 1, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "a has k = 60, b k = 64");
    x = b;
    x.matrix_stride = 6; /* matrices of a batch 6 floats apart */
    CHECK(spk_gemm_tma_plan_make(&a, &x, 2, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "b's matrices must be a multiple of 4 floats apart");
    x = a;
    x.row_stride = (int64_t)1 << 38; /* 2^40 bytes between rows */
    CHECK(spk_gemm_tma_plan_make(&x, &b, 1, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "2^40");
    /* C: float2 stores only where column pairs are contiguous and aligned */
    spk_gemm_tma_c odd = c;
    odd.c_sm = 201;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &odd, 132, &p) == 0 && p.c_vec2 == 0);
    odd = c, odd.c_sn = 300;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &odd, 132, &p) == 0 && p.c_vec2 == 0);
    odd = c, odd.address += 4;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &odd, 132, &p) == 0 && p.c_vec2 == 0);
    /* C through TMA's store only where a tensor map takes it and nothing of the old C is kept */
    CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &c, 132, &p) == 0 && p.c_tma == 1);
    CHECK(p.c.dims[0] == 200 && p.c.dims[1] == 300 && p.c.dims[2] == 1 && p.c.strides[0] == 800);
    const struct {
        int64_t c_sm, c_sn, c_sb;
        uintptr_t address;
        float beta;
        const char *why;
    } no_map[] = {
        {200, 1, 0, 0x40000, 1.0f, "beta 1: TMA's store would lose the old C"},
        {202, 1, 0, 0x40000, 0.0f, "rows 808 bytes apart: not a multiple of 16"},
        {1, 300, 0, 0x40000, 0.0f, "C transposed: columns not unit stride"},
        {200, 1, 0, 0x40008, 0.0f, "start 8-byte aligned"},
        {100, 1, 0, 0x40000, 0.0f, "rows closer than n columns"},
    };
    for (size_t i = 0; i < sizeof no_map / sizeof *no_map; i++) {
        spk_gemm_tma_c x = {.address = no_map[i].address, .c_sm = no_map[i].c_sm, .c_sn = no_map[i].c_sn,
                            .c_sb = no_map[i].c_sb, .beta = no_map[i].beta};
        CHECK(spk_gemm_tma_plan_make(&a, &b, 1, &x, 132, &p) == 0);
        if (p.c_tma)
            fprintf(stderr, "  C with %s takes TMA's store\n", no_map[i].why);
        CHECK(p.c_tma == 0);
    }
    /* a batch whose matrices are 6 floats past the packed size apart: not 16-byte multiples */
    spk_gemm_tma_matrix bb = b;
    bb.matrix_stride = 200 * 64;
    spk_gemm_tma_c cb = {.address = 0x40000, .c_sm = 200, .c_sn = 1, .c_sb = 300 * 200 + 6};
    CHECK(spk_gemm_tma_plan_make(&a, &bb, 2, &cb, 132, &p) == 0 && p.c_tma == 0);
    cb.c_sb = 300 * 200;
    CHECK(spk_gemm_tma_plan_make(&a, &bb, 2, &cb, 132, &p) == 0 && p.c_tma == 1 && p.c.dims[2] == 2 &&
          p.c.strides[1] == 4ull * 300 * 200);
}

/* ---- the kernel's index functions against models of TMA and wgmma -------- */

/* What TMA writes for a box of a [rows][k] f32 matrix (row stride ld) at
 * (k0, row0), 128 rows x 32 k, with the 128-byte swizzle into a 1024-byte
 * aligned buffer: element (r, c) at 128 r + 16 ((c / 4) ^ (r % 8)) + 4 (c % 4),
 * zero outside the matrix. Written independently of spk_tma_swizzled. */
static void tma_box(unsigned char *smem, const float *x, int64_t rows, int64_t k, int64_t ld, int64_t row0,
                    int64_t k0)
{
    for (int r = 0; r < 128; r++)
        for (int c = 0; c < 32; c++) {
            float v = row0 + r < rows && k0 + c < k ? x[(row0 + r) * ld + k0 + c] : 0.0f;
            int chunk = (c / 4) ^ (r % 8);
            memcpy(smem + 128 * r + 16 * chunk + 4 * (c % 4), &v, 4);
        }
}

/* An m x k matrix of distinct values: element (i, p) = i * 1000 + p + 1. */
static float *numbered(int64_t rows, int64_t k)
{
    float *x = malloc(sizeof(float) * (size_t)(rows * k));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t p = 0; p < k; p++)
            x[i * k + p] = (float)(i * 1000 + p + 1);
    return x;
}

TEST(a_fragments_read_the_box_tma_wrote)
{
    /* The edge tile of m = 300 (rows 256..383, 44 real) and the k-tile 32..63 of k = 60. */
    const int64_t m = 300, k = 60, row0 = 256, k0 = 32;
    float *a = numbered(m, k);
    static unsigned char smem[128 * 128];
    tma_box(smem, a, m, k, k, row0, k0);
    static int seen[128][32];
    memset(seen, 0, sizeof seen);
    int wrong = 0, conflicts = 0;
    for (unsigned wg = 0; wg < 2; wg++)
        for (unsigned w = 0; w < 4; w++)
            for (unsigned q = 0; q < SPK_TMA_KSTEPS; q++)
                for (unsigned v = 0; v < 4; v++) {
                    int banks[32] = {0};
                    for (unsigned lane = 0; lane < 32; lane++) {
                        unsigned off = spk_tma_a_offset(wg, w, lane, q, v);
                        float got;
                        memcpy(&got, smem + off, 4);
                        /* wgmma's A fragment: row 16 w + lane / 4 (+ 8), k lane % 4 (+ 4) of the k-step */
                        int r = 64 * wg + 16 * w + lane / 4 + 8 * (v & 1), c = 8 * q + lane % 4 + 4 * (v >> 1);
                        float want = row0 + r < m && k0 + c < k ? a[(row0 + r) * k + k0 + c] : 0.0f;
                        if (got != want && wrong++ < 3)
                            fprintf(stderr, "  wg %u warp %u lane %u q %u v %u: got %g, want %g\n", wg, w, lane, q, v,
                                    got, want);
                        seen[r][c]++;
                        banks[(off / 4) % 32]++;
                    }
                    for (int i = 0; i < 32; i++)
                        conflicts += banks[i] > 1;
                }
    CHECK(wrong == 0);
    CHECK(conflicts == 0); /* each load of a warp touches 32 distinct banks */
    int once = 0;
    for (int r = 0; r < 128; r++)
        for (int c = 0; c < 32; c++)
            once += seen[r][c] == 1;
    CHECK(once == 128 * 32); /* every element of the box by exactly one thread */
    free(a);
}

/* What wgmma reads through a K-major descriptor with the 128-byte swizzle
 * (the canonical layout ((8, n), 2) : ((128 B, SBO), 16 B) in PTX's terms):
 * element (n, kk) of the k-step at start + (n / 8) SBO + 128 (n % 8) +
 * 16 (kk / 4) + 4 (kk % 4), then bits 4-6 of the address XOR bits 7-9. */
static unsigned wgmma_b_address(unsigned long long desc, unsigned n, unsigned kk)
{
    unsigned start = (unsigned)(desc & 0x3fff) << 4, sbo = (unsigned)((desc >> 32) & 0x3fff) << 4;
    unsigned addr = start + (n / 8) * sbo + 128 * (n % 8) + 16 * (kk / 4) + 4 * (kk % 4);
    return addr ^ (((addr >> 7) & 7) << 4);
}

TEST(b_descriptors_read_the_box_tma_wrote)
{
    /* b [200, 60] (n = 200: the second column tile is 72 rows deep), the k-tile 32..63. */
    const int64_t n = 200, k = 60, col0 = 128, k0 = 32;
    float *b = numbered(n, k);
    static unsigned char smem[2048 + 128 * 128];
    const unsigned base = 2048; /* 1024-byte aligned, as the kernel rounds its stages */
    tma_box(smem + base, b, n, k, k, col0, k0);
    unsigned long long desc0 = spk_tma_desc(base);
    CHECK((desc0 >> 62) == 1);                      /* the 128-byte swizzle */
    CHECK(((desc0 >> 16) & 0x3fff) == 1);           /* leading offset: unused with a swizzle, 1 */
    CHECK(((desc0 >> 32) & 0x3fff) << 4 == 1024u);  /* 8 rows of 128 bytes */
    CHECK(((desc0 >> 49) & 7) == 0);                /* base offset: the stage is 1024-byte aligned */
    int wrong = 0;
    for (unsigned q = 0; q < SPK_TMA_KSTEPS; q++) {
        unsigned long long desc = desc0 + 2 * q; /* as the kernel advances it: 32 bytes a k-step */
        CHECK(desc == spk_tma_desc(base + 32 * q));
        for (unsigned nn = 0; nn < 128; nn++)
            for (unsigned kk = 0; kk < 8; kk++) {
                float got;
                memcpy(&got, smem + wgmma_b_address(desc, nn, kk), 4);
                int64_t row = col0 + nn, col = k0 + 8 * q + kk;
                float want = row < n && col < k ? b[row * k + col] : 0.0f;
                if (got != want && wrong++ < 3)
                    fprintf(stderr, "  q %u n %u k %u: got %g, want %g\n", q, nn, kk, got, want);
            }
    }
    CHECK(wrong == 0);
    free(b);
}

TEST(accumulators_cover_the_tile_once)
{
    static int seen[128][128];
    memset(seen, 0, sizeof seen);
    for (unsigned wg = 0; wg < 2; wg++)
        for (unsigned w = 0; w < 4; w++)
            for (unsigned lane = 0; lane < 32; lane++)
                for (unsigned i = 0; i < 64; i++) {
                    unsigned r = 64 * wg + spk_tma_acc_row(w, lane, i), c = spk_tma_acc_col(lane, i);
                    CHECK(r < 128 && c < 128);
                    if (r < 128 && c < 128)
                        seen[r][c]++;
                    if (i % 2 == 0) /* the pairs the epilogue stores as float2 */
                        CHECK(spk_tma_acc_row(w, lane, i + 1) == spk_tma_acc_row(w, lane, i) &&
                              spk_tma_acc_col(lane, i + 1) == c + 1 && c % 2 == 0);
                }
    int once = 0;
    for (int r = 0; r < 128; r++)
        for (int c = 0; c < 128; c++)
            once += seen[r][c] == 1;
    CHECK(once == 128 * 128);
}

/* What TMA's bulk store reads for a box of C (32 columns x 64 rows, the
 * 128-byte swizzle) from a 1024-byte aligned buffer: element (r, c) at
 * 128 r + 16 ((c / 4) ^ (r % 8)) + 4 (c % 4), written independently of
 * spk_tma_swizzled; box b of a warpgroup's half 8 KB further per box. */
static unsigned tma_store_reads(unsigned box, unsigned r, unsigned c)
{
    return box * 64 * 128 + 128 * r + 16 * ((c / 4) ^ (r % 8)) + 4 * (c % 4);
}

TEST(c_buffer_is_what_tma_stores_read)
{
    /* Every accumulator of a warpgroup to its own 4-byte word of the half's
     * 32 KB, the one the store reads for its row and column; per float2
     * store of a warp, each half-warp (16 lanes, 128 bytes) within two
     * wavefronts of the 32 banks. */
    static int owner[SPK_TMA_C_HALF_BYTES / 4];
    memset(owner, 0, sizeof owner);
    int wrong = 0, worst = 0;
    for (unsigned w = 0; w < 4; w++)
        for (unsigned i = 0; i < 64; i += 2) {
            for (unsigned half_warp = 0; half_warp < 2; half_warp++) {
                int words[32] = {0};
                for (unsigned lane = 16 * half_warp; lane < 16 * half_warp + 16; lane++)
                    for (unsigned e = 0; e < 2; e++) {
                        unsigned r = spk_tma_acc_row(w, lane, i + e), c = spk_tma_acc_col(lane, i + e);
                        unsigned off = spk_tma_c_offset(r, c);
                        if (e == 1 && off != spk_tma_c_offset(r, c - 1) + 4)
                            wrong++; /* the pair is one 8-byte store */
                        if (off != tma_store_reads(c / 32, r, c % 32) && wrong++ < 3)
                            fprintf(stderr, "  warp %u lane %u value %u: at %u, TMA reads (%u, %u) at %u\n", w, lane,
                                    i + e, off, r, c, tma_store_reads(c / 32, r, c % 32));
                        if (off < sizeof owner)
                            owner[off / 4]++;
                        words[(off / 4) % 32]++;
                    }
                for (int b = 0; b < 32; b++)
                    worst = words[b] > worst ? words[b] : worst;
            }
        }
    CHECK(wrong == 0);
    int once = 0;
    for (size_t x = 0; x < sizeof owner / sizeof *owner; x++)
        once += owner[x] == 1;
    CHECK(once == SPK_TMA_C_HALF_BYTES / 4);
    /* The accumulators' layout puts rows r and r ^ 1 of a half-warp on the
     * same banks after the swizzle: two wavefronts, not one (1,024 of the
     * shared memory's cycles a tile for both halves). */
    CHECK(worst == 2);
}

TEST(tile_order_visits_every_tile_once)
{
    const int col_tiles = 4, count = 2, row_tiles = 7;
    int seen[7][2][4] = {{{0}}};
    for (long long t = 0; t < (long long)row_tiles * col_tiles * count; t++) {
        int rt, z, ct;
        spk_tma_tile_of(t, col_tiles, count, &rt, &z, &ct);
        CHECK(rt >= 0 && rt < row_tiles && z >= 0 && z < count && ct >= 0 && ct < col_tiles);
        if (rt >= 0 && rt < row_tiles && z >= 0 && z < count && ct >= 0 && ct < col_tiles)
            seen[rt][z][ct]++;
        CHECK(rt == t / (col_tiles * count)); /* both directions' columns of a row tile in a row */
    }
    for (int r = 0; r < row_tiles; r++)
        for (int z = 0; z < count; z++)
            for (int c = 0; c < col_tiles; c++)
                CHECK(seen[r][z][c] == 1);
}

/* B resident: the plans that take it, and the walk of its blocks. */
static spk_gemm_tma_plan f16_projection_plan(int64_t m, int64_t k, int sms)
{
    spk_gemm_tma_matrix a = {.address = 0x10000, .rows = m, .k = k, .row_stride = k, .k_stride = 1};
    spk_gemm_tma_matrix b = {.address = 0x20000, .rows = 512, .k = k, .row_stride = k, .k_stride = 1,
                             .matrix_stride = 512 * k, .f16 = 1};
    spk_gemm_tma_c c = {.address = 0x40000, .c_sm = 512, .c_sn = 1, .c_sb = m * 512};
    spk_gemm_tma_plan p;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 2, &c, sms, &p) == 0);
    return p;
}

TEST(plan_keeps_b_resident_where_its_panel_fits)
{
    /* TF32 parts, K = 60: a panel of 64 KB (2 k-tiles, both parts); 8
     * columns (4 column tiles x 2 matrices), 16 row groups on 132 SMs */
    int rc;
    spk_gemm_tma_plan p = projection_plan(150784, 60, &rc);
    CHECK(rc == 0 && p.b_resident == 1 && p.grid == 128);
    CHECK(spk_tma_res_panel_bytes(2, SPK_TMA_TILE_BYTES) == SPK_TMA_RES_PANEL_LIMIT);
    /* K = 256's panels do not fit: 256 KB of TF32 parts, 128 KB of FP16 ones */
    p = projection_plan(150784, 256, &rc);
    CHECK(rc == 0 && p.b_resident == 0 && p.grid == 132);
    p = f16_projection_plan(150784, 256, 132);
    CHECK(p.b_resident == 0 && p.grid == 132);
    /* FP16 parts up to K = 128 fit (hidden 64's layers after the first) */
    CHECK(f16_projection_plan(150784, 128, 132).b_resident == 1);
    CHECK(f16_projection_plan(150784, 136, 132).b_resident == 0);
    /* batches whose blocks would walk fewer than 4 row tiles stream (batch
     * 1: 5 row tiles; batch 8: 37 for 16 row groups); batch 32's 148 keep B */
    p = projection_plan(589, 60, &rc);
    CHECK(rc == 0 && p.b_resident == 0 && p.grid == 40);
    p = projection_plan(589 * 8, 60, &rc);
    CHECK(rc == 0 && p.b_resident == 0);
    p = projection_plan(589 * 32, 60, &rc);
    CHECK(rc == 0 && p.b_resident == 1 && p.grid == 128);
    /* more columns than SMs: streamed */
    CHECK(f16_projection_plan(150784, 128, 7).b_resident == 0);
    /* the largest panel, its stages and C's buffer within the block's limit */
    CHECK(SPK_TMA_RES_SMEM_BYTES <= SPK_TMA_SMEM_LIMIT && SPK_TMA_RES_PANEL_LIMIT % 1024u == 0);
}

TEST(resident_walk_visits_every_tile_once)
{
    /* the kernel's walk (spk_tma_res_column, spk_tma_res_first_row, then
     * spk_tma_res_row_stride at a time) over grids of whole row groups and
     * row tiles that divide them or not */
    const int shapes[][3] = {{1178, 4, 2}, {148, 4, 2}, {64, 4, 2}, {67, 4, 2}, {9, 1, 1}, {33, 2, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int row_tiles = shapes[i][0], col_tiles = shapes[i][1], count = shapes[i][2];
        const int columns = col_tiles * count, groups = 132 / columns;
        const unsigned grid = (unsigned)(groups * columns);
        static int seen[1178][4][3];
        memset(seen, 0, sizeof seen);
        for (unsigned blk = 0; blk < grid; blk++) {
            int z, ct, walked = 0;
            spk_tma_res_column(blk, col_tiles, count, &z, &ct);
            CHECK(z >= 0 && z < count && ct >= 0 && ct < col_tiles && z * col_tiles + ct == (int)(blk % columns));
            for (int rt = spk_tma_res_first_row(blk, columns); rt < row_tiles;
                 rt += spk_tma_res_row_stride(grid, columns)) {
                CHECK(rt >= 0 && rt % groups == (int)blk / columns);
                if (rt >= 0 && z >= 0 && z < count && ct >= 0 && ct < col_tiles)
                    seen[rt][ct][z]++;
                walked++;
            }
            /* the blocks of a row group walk the same row tiles, one column each */
            CHECK(walked == (row_tiles - (int)blk / columns + groups - 1) / groups);
        }
        for (int r = 0; r < row_tiles; r++)
            for (int c = 0; c < col_tiles; c++)
                for (int z = 0; z < count; z++)
                    CHECK(seen[r][c][z] == 1);
    }
}

/* ---- the split's bits --------------------------------------------------- */

TEST(split_parts_are_tf32_and_sum_to_x)
{
    enum { N = 4096 };
    static float x[N + 8], hi[N + 8], lo[N + 8];
    for (int i = 0; i < N; i++)
        x[i] = (float)(uniform() * pow(2.0, (double)(i % 60) - 30));
    x[N] = INFINITY, x[N + 1] = -INFINITY, x[N + 2] = NAN, x[N + 3] = float_of(0x7fffffffu); /* CUDA's NaN */
    x[N + 4] = 3.4028234e38f, x[N + 5] = 0.0f, x[N + 6] = -0.0f, x[N + 7] = 1e-40f;      /* max, zeros, subnormal */
    spk_tf32_split_host(x, hi, lo, N + 8);
    int bad = 0;
    for (int i = 0; i < N + 8; i++) {
        bool tf32 = (bits_of(hi[i]) & 0x1fffu) == 0 && (bits_of(lo[i]) & 0x1fffu) == 0;
        if (isfinite(x[i])) {
            double sum = (double)hi[i] + (double)lo[i];
            /* 2^-22 of x, or for subnormals the TF32 grid there (2^-136) */
            bool close = fabs(sum - x[i]) <= ldexp(fabs((double)x[i]), -22) + ldexp(1.0, -136);
            bool hi_nearest = fabs((double)x[i] - hi[i]) <= ldexp(fabs((double)x[i]), -11) + ldexp(1.0, -137);
            bool ok = tf32 && close && hi_nearest && isfinite(hi[i]);
            if (!ok && bad++ < 3)
                fprintf(stderr, "  x %a: hi %a, lo %a\n", x[i], hi[i], lo[i]);
        } else {
            /* whole into hi, payload and sign kept: no NaN turned into a zero */
            if (!(bits_of(hi[i]) == bits_of(x[i]) && lo[i] == 0.0f) && bad++ < 3)
                fprintf(stderr, "  x %08x: hi %08x, lo %a\n", bits_of(x[i]), bits_of(hi[i]), lo[i]);
        }
    }
    CHECK(bad == 0);
    /* The kernel's own rounding of A: ties away from zero, 13 bits cleared. */
    CHECK(spk_tf32_round_bits(0x3f800fffu) == 0x3f800000u);
    CHECK(spk_tf32_round_bits(0x3f801000u) == 0x3f802000u);
    CHECK(spk_tf32_round_bits(0xbf801000u) == 0xbf802000u);
}

/* ---- the FP16 parts' form ------------------------------------------------ */

TEST(f16_bits_round_to_nearest_even)
{
    /* every half back to itself through its float (NaNs stay NaN) */
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        float f = spk_f16_value((unsigned short)h);
        unsigned short back = spk_f16_bits(f);
        bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        if ((nan ? (back & 0x7fffu) <= 0x7c00u : back != h) && bad++ < 3)
            fprintf(stderr, "  half %04x: float %a, back %04x\n", h, f, back);
    }
    CHECK(bad == 0);
    CHECK(spk_f16_bits(65504.0f) == 0x7bffu && spk_f16_bits(65519.99f) == 0x7bffu && spk_f16_bits(65520.0f) == 0x7c00u);
    CHECK(spk_f16_bits(1.0f + 0x1p-11f) == 0x3c00u);            /* a tie to the even 1.0 */
    CHECK(spk_f16_bits(1.0f + 3 * 0x1p-11f) == 0x3c02u);        /* a tie to the even 1 + 2^-9 */
    CHECK(spk_f16_bits(0x1p-25f) == 0 && spk_f16_bits(0x1.000002p-25f) == 1); /* half the smallest subnormal */
    CHECK(spk_f16_bits(-0x1.ffcp-15f) == 0x8400u && spk_f16_bits(-0x1.ff8p-15f) == 0x83ffu); /* to the smallest normal */
#if defined(__FLT16_MAX__)
    /* against the compiler's _Float16 on random floats of every exponent */
    rng_state = 0x9e3779b97f4a7c15ull;
    bad = 0;
    for (int i = 0; i < 2000000; i++) {
        unsigned u = (unsigned)(rng_state >> 11) ^ (unsigned)(uniform() * 4294967296.0);
        float f = float_of(u);
        if (f != f)
            continue;
        _Float16 ref = (_Float16)f;
        unsigned short rb;
        memcpy(&rb, &ref, 2);
        if (spk_f16_bits(f) != rb && bad++ < 3)
            fprintf(stderr, "  float %a: %04x, _Float16 %04x\n", f, spk_f16_bits(f), rb);
    }
    CHECK(bad == 0);
#endif
}

TEST(f16_parts_scale_and_sum_to_x)
{
    CHECK(spk_f16_scale_exponent(1.0f) == 14 && spk_f16_scale_exponent(0.088f) == 18);
    CHECK(spk_f16_scale_exponent(0.0f) == 0 && spk_f16_scale_exponent(INFINITY) == 0 &&
          spk_f16_scale_exponent(NAN) == 0 && spk_f16_scale_exponent(-3.0f) == 13);
    CHECK(spk_f16_scale_exponent(1e30f) == -85 && spk_f16_scale_exponent(1e-36f) == 100);
    for (float m = 1e-6f; m < 1e6f; m *= 3.7f) {
        float scaled = m * spk_pow2f(spk_f16_scale_exponent(m));
        CHECK(scaled >= 16384.0f && scaled < 32768.0f);
    }
    enum { N = 4096 };
    static float x[N];
    static uint16_t hi[N], lo[N];
    rng_state = 1234567ull;
    for (int i = 0; i < N; i++)
        x[i] = (float)(uniform() / sqrt(128.0) * pow(2.0, -20.0 * (i % 7 == 0) * (uniform() + 1.0)));
    x[5] = INFINITY, x[6] = -NAN;
    int e = spk_f16_split_host(x, hi, lo, N);
    CHECK(e >= 17 && e <= 18); /* the largest finite |x|, under 1/sqrt(128), sets it */
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double s = ldexp((double)x[i], e), sum = (double)spk_f16_value(hi[i]) + spk_f16_value(lo[i]);
        bool ok = i == 5 || i == 6 ? (spk_f16_value(hi[i]) == (float)s || s != s) && lo[i] == 0 &&
                                         ((hi[i] & 0x7c00u) == 0x7c00u)
                                   : fabs(sum - s) <= ldexp(fabs(s), -22) + ldexp(1.0, -25);
        if (!ok && bad++ < 3)
            fprintf(stderr, "  x %a: hi %04x, lo %04x\n", x[i], hi[i], lo[i]);
    }
    CHECK(bad == 0);
}

TEST(f16_a_fragments_read_the_box_tma_wrote)
{
    /* every float of the 128 x 32 A tile read by exactly one thread, register
     * and half of the two k-steps of 16, each pair within a 16-byte chunk,
     * and a warp's 32 pairs of one register in two wavefronts (no conflict) */
    static int owner[SPK_TMA_BM * SPK_TMA_BK];
    memset(owner, 0, sizeof owner);
    int worst = 0;
    for (unsigned wg = 0; wg < 2; wg++)
        for (unsigned w = 0; w < 4; w++)
            for (unsigned q = 0; q < SPK_TMA16_KSTEPS; q++)
                for (unsigned r = 0; r < 4; r++) {
                    int banks[32] = {0};
                    for (unsigned l = 0; l < 32; l++) {
                        unsigned off = spk_tma16_a_offset(wg, w, l, q, r);
                        CHECK(off % 8 == 0 && off / 16 == (off + 4) / 16);
                        for (unsigned h = 0; h < 2; h++) {
                            unsigned row = SPK_TMA_WG_ROWS * wg + spk_tma16_a_row(w, l, r);
                            unsigned col = 16 * q + spk_tma16_a_col(l, r, h);
                            CHECK(off + 4 * h == spk_tma_swizzled(row, col));
                            owner[row * SPK_TMA_BK + col]++;
                        }
                        banks[(off / 4) % 32]++, banks[(off / 4 + 1) % 32]++;
                    }
                    for (int b = 0; b < 32; b++)
                        worst = banks[b] > worst ? banks[b] : worst;
                }
    int once = 0;
    for (int i = 0; i < SPK_TMA_BM * SPK_TMA_BK; i++)
        once += owner[i] == 1;
    CHECK(once == SPK_TMA_BM * SPK_TMA_BK);
    CHECK(worst <= 2); /* 256 bytes a warp: two wavefronts at the least */
    /* the descriptor: start >> 4, leading offset 1, stride 512 >> 4, the 64-byte swizzle */
    unsigned long long d = spk_tma16_desc(0x12400u);
    CHECK((d & 0x3fffu) == (0x12400u >> 4) && ((d >> 16) & 0x3fffu) == 1 && ((d >> 32) & 0x3fffu) == 32 &&
          (d >> 62) == 2);
    CHECK(SPK_TMA16_B_TILE_BYTES % 512 == 0 && SPK_TMA_TILE_BYTES % 1024 == 0 && SPK_TMA16_STAGE_BYTES % 1024 == 0);
}

TEST(f16_plan_reads_b_as_halves)
{
    spk_gemm_tma_matrix a = {.address = 0x10000, .rows = 150784, .k = 256, .row_stride = 256, .k_stride = 1};
    spk_gemm_tma_matrix b = {.address = 0x20000, .rows = 512, .k = 256, .row_stride = 256, .k_stride = 1,
                             .matrix_stride = 512 * 256, .f16 = 1};
    spk_gemm_tma_c c = {.address = 0x40000, .c_sm = 512, .c_sn = 1, .c_sb = 150784ll * 512};
    spk_gemm_tma_plan p;
    CHECK(spk_gemm_tma_plan_make(&a, &b, 2, &c, 132, &p) == 0);
    CHECK(p.b.f16 == 1 && p.a.f16 == 0 && p.b.strides[0] == 512 && p.b.strides[1] == 512ull * 512 &&
          p.b.box[0] == SPK_TMA_BK && p.b.box[1] == SPK_TMA_BN && p.b_batched == 1);
    CHECK(p.a.strides[0] == 1024);
    b.k = a.k = 60, b.row_stride = 60, b.matrix_stride = 512 * 60; /* 120-byte rows: not for TMA */
    CHECK(spk_gemm_tma_plan_make(&a, &b, 2, &c, 132, &p) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "b's rows must be a multiple of 8 halves apart (60)");
}

/* ---- the arithmetic, emulated, against f64 ------------------------------ */

/* The tensor core's sum as modelled here: the exact products and the
 * accumulator added, the result cut (toward zero) to FP32: the truncation
 * the kernel's short slices guard against. */
static float tc_sum(double exact)
{
    float f = (float)exact; /* nearest */
    if (fabs((double)f) > fabs(exact))
        f = nextafterf(f, 0.0f);
    return f;
}

/* One output element as the kernel computes it: A split in registers (hi
 * rounded, lo = x - hi, the tensor core reading lo's top 19 bits), B's parts
 * from spk_tf32_split_host, per slice of `slice` k-steps the products from
 * zero in the kernel's order (small_first: every small product of the slice,
 * then the big ones; else small, small, big per k-step), each wgmma's sum cut
 * to FP32, then one rounded FP32 add into acc. */
static float emulate_dot(const float *a, const float *bh, const float *bl, int k, int slice, int small_first)
{
    int steps = (k + 7) / 8;
    float acc = 0.0f;
    for (int s0 = 0; s0 < steps; s0 += slice) {
        double d = 0.0;
        for (int it = 0; it < 3 * slice; it++) {
            int pass = small_first ? it / slice : it % 3, q = s0 + (small_first ? it % slice : it / 3);
            if (q >= steps)
                continue;
            double sum = d;
            for (int p = 8 * q; p < 8 * q + 8 && p < k; p++) {
                float ah = float_of(spk_tf32_round_bits(bits_of(a[p])));
                float al = float_of(bits_of(a[p] - ah) & 0xffffe000u);
                float x = pass == 0 ? al : ah, y = pass == 1 ? bl[p] : bh[p]; /* lo·hi, hi·lo, hi·hi */
                sum += (double)x * (double)y;
            }
            d = tc_sum(sum);
        }
        acc += (float)d;
    }
    return acc;
}

/* rel_l2 against f64 of the emulated kernel (slice, order), of TF32 alone
 * and of one FP32 chain, on the projections' operands (x ~ U(-1.7, 1.7), W
 * ~ U(+-1/sqrt(128))), 96 x 64 outputs. */
static void error_class(int k, int slice, int small_first, double *split, double *tf32, double *fp32)
{
    rng_state = 88172645463325252ull; /* the same operands for every variant */
    const int rows = 96, cols = 64;
    float *a = malloc(sizeof(float) * rows * k), *b = malloc(sizeof(float) * cols * k);
    float *bh = malloc(sizeof(float) * cols * k), *bl = malloc(sizeof(float) * cols * k);
    for (int i = 0; i < rows * k; i++)
        a[i] = (float)(uniform() * 1.7);
    for (int i = 0; i < cols * k; i++)
        b[i] = (float)(uniform() / sqrt(128.0));
    spk_tf32_split_host(b, bh, bl, cols * k);
    double e3 = 0, e1 = 0, ef = 0, ref2 = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double ref = 0, one = 0;
            float chain = 0.0f;
            for (int p = 0; p < k; p++) {
                ref += (double)a[i * k + p] * b[j * k + p];
                one += (double)float_of(spk_tf32_round_bits(bits_of(a[i * k + p]))) * bh[j * k + p];
                chain = chain + a[i * k + p] * b[j * k + p]; /* one FP32 chain, rounded each step */
            }
            double v3 = emulate_dot(a + i * k, bh + j * k, bl + j * k, k, slice, small_first);
            e3 += (v3 - ref) * (v3 - ref);
            e1 += (one - ref) * (one - ref);
            ef += ((double)chain - ref) * ((double)chain - ref);
            ref2 += ref * ref;
        }
    *split = sqrt(e3 / ref2), *tf32 = sqrt(e1 / ref2), *fp32 = sqrt(ef / ref2);
    free(a), free(b), free(bh), free(bl);
}

TEST(emulated_arithmetic_is_of_fp32_class)
{
    int ks[] = {60, 256};
    for (int i = 0; i < 2; i++) {
        double split, tf32, fp32;
        error_class(ks[i], SPK_TMA_SLICE_STEPS, SPK_TMA_SMALL_FIRST, &split, &tf32, &fp32);
        if (check_verbose())
            printf("  k %d: rel_l2 against f64: split-TF32 (emulated) %.3g, TF32 %.3g, one FP32 chain %.3g\n", ks[i],
                   split, tf32, fp32);
        CHECK(split < 4e-7);         /* FP32's class (2^-24 = 6e-8 a rounding) */
        CHECK(split < 1.5 * fp32);   /* no worse than a plain FP32 chain, within the model */
        CHECK(tf32 > 1e-4);          /* the check tells TF32 apart */
        /* Why the small products come first: the other order truncates at the
         * big products' scale twice as often in a slice of two k-steps. */
        double interleaved, t, f;
        error_class(ks[i], 2, 0, &interleaved, &t, &f);
        double first;
        error_class(ks[i], 2, 1, &first, &t, &f);
        if (check_verbose())
            printf("  k %d, slices of 2 k-steps: small products first %.3g, small, small, big a k-step %.3g\n", ks[i],
                   first, interleaved);
        CHECK(first < interleaved);
    }
}

/* The FP16 parts' form, one output element: A scaled by 2^a_exponent and
 * split (spk_f16_split_value), B's parts from spk_f16_split_host (scaled by
 * 2^b_exponent), per slice of `slice` k-steps of 16 the small products
 * first, then the big ones, each wgmma's sum cut to FP32, one rounded add
 * into acc, and the scales taken off at the end. */
static float emulate_dot16(const float *a, const uint16_t *bh, const uint16_t *bl, int k, int slice, int a_exponent,
                           int b_exponent)
{
    int steps = (k + 15) / 16;
    float acc = 0.0f, scale = spk_pow2f(a_exponent);
    for (int s0 = 0; s0 < steps; s0 += slice) {
        double d = 0.0;
        for (int it = 0; it < 3 * slice; it++) {
            int pass = it / slice, q = s0 + it % slice;
            if (q >= steps)
                continue;
            double sum = d;
            for (int p = 16 * q; p < 16 * q + 16 && p < k; p++) {
                unsigned short ah, al;
                spk_f16_split_value(a[p] * scale, &ah, &al);
                float x = spk_f16_value(pass == 0 ? al : ah), y = spk_f16_value(pass == 1 ? bl[p] : bh[p]);
                sum += (double)x * (double)y;
            }
            d = tc_sum(sum);
        }
        acc += (float)d;
    }
    return acc * spk_pow2f(-(a_exponent + b_exponent));
}

/* rel_l2 against f64 of the FP16 parts' form on the later layers'
 * operands (h = tanh(3 u) (0.5 + 0.5 u'), u, u' ~ U(-1, 1); W ~ U(+-1/sqrt(128))),
 * and of one FP32 chain. */
static void error_class16(int k, int slice, int a_exponent, double *split, double *fp32)
{
    rng_state = 88172645463325252ull;
    const int rows = 96, cols = 64;
    float *a = malloc(sizeof(float) * rows * k), *b = malloc(sizeof(float) * cols * k);
    uint16_t *bh = malloc(sizeof(uint16_t) * cols * k), *bl = malloc(sizeof(uint16_t) * cols * k);
    for (int i = 0; i < rows * k; i++) /* h = o tanh(c): many near zero */
        a[i] = (float)(tanh(3.0 * uniform()) * (0.5 + 0.5 * uniform()));
    for (int i = 0; i < cols * k; i++)
        b[i] = (float)(uniform() / sqrt(128.0));
    int b_exponent = spk_f16_split_host(b, bh, bl, cols * k);
    double e3 = 0, ef = 0, ref2 = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double ref = 0;
            float chain = 0.0f;
            for (int p = 0; p < k; p++) {
                ref += (double)a[i * k + p] * b[j * k + p];
                chain = chain + a[i * k + p] * b[j * k + p];
            }
            double v = emulate_dot16(a + i * k, bh + j * k, bl + j * k, k, slice, a_exponent, b_exponent);
            e3 += (v - ref) * (v - ref);
            ef += ((double)chain - ref) * ((double)chain - ref);
            ref2 += ref * ref;
        }
    *split = sqrt(e3 / ref2), *fp32 = sqrt(ef / ref2);
    free(a), free(b), free(bh), free(bl);
}

TEST(emulated_f16_parts_are_of_fp32_class)
{
    for (int slice = 1; slice <= 2; slice++)
        for (int e = 0; e <= 14; e += 14) {
            double split, fp32;
            error_class16(256, slice, e, &split, &fp32);
            if (check_verbose())
                printf("  k 256, FP16 parts, slices of %d k-steps of 16, A scaled 2^%d: rel_l2 %.3g, one FP32 chain "
                       "%.3g\n",
                       slice, e, split, fp32);
            CHECK(split < 1.5 * fp32);
        }
}

/* ---- which form a process's stack plans take ----------------------------- */

TEST(form_choice_defaults_to_f16_parts_and_names_a_bad_value)
{
    spk_3xtf32_form form = SPK_3XTF32_CLASSIC;
    CHECK(spk_gemm_3xtf32_form_wanted(NULL, &form) == 0 && form == SPK_3XTF32_TMA_F16); /* unset: the default */
    form = SPK_3XTF32_CLASSIC;
    CHECK(spk_gemm_3xtf32_form_wanted("", &form) == 0 && form == SPK_3XTF32_TMA_F16);
    CHECK(spk_gemm_3xtf32_form_wanted("classic", &form) == 0 && form == SPK_3XTF32_CLASSIC);
    CHECK(spk_gemm_3xtf32_form_wanted("tma", &form) == 0 && form == SPK_3XTF32_TMA);
    CHECK(spk_gemm_3xtf32_form_wanted("f16", &form) == 0 && form == SPK_3XTF32_TMA_F16);
    CHECK(spk_gemm_3xtf32_form_wanted("TMA", &form) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "$SPK_GEMM_3XTF32 is \"TMA\"; it takes \"tma\"");
    CHECK(spk_gemm_3xtf32_form_wanted("fast", &form) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "or \"classic\"");
}

/* ---- the compile: ptxas's figures ----------------------------------------- */

static char tmp_root[256];

/* ptxas -v's report of the TMA kernel under these defines. */
static bool compile_report(const spk_define *defines, int ndefines, int *registers, char *line, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/gemm_3xtf32_tma.cu", spk_kernel_dir());
    const char *options[] = {"--ptxas-options=-v"};
    spk_compile_options o = {.file = path, .defines = defines, .ndefines = ndefines, .options = options,
                             .noptions = 1, .arch = "sm_90a", .no_cache = true};
    spk_module *m = spk_compile(&o);
    if (!m) {
        fprintf(stderr, "  %s\n", spk_last_error());
        return false;
    }
    /* every entry of the file (both parts' forms, streamed and B resident):
     * the most registers any uses, and the first that spills (else the
     * last entry's line) */
    const char *log = spk_module_log(m);
    int entries = 0;
    bool ok = true;
    *registers = 0;
    for (const char *entry = strstr(log, "Compiling entry function '"); entry;
         entry = strstr(entry + 1, "Compiling entry function '")) {
        const char *frame = strstr(entry, "bytes stack frame"), *used = strstr(entry, "Used ");
        int regs = 0;
        if (!frame || !used || sscanf(used, "Used %d registers", &regs) != 1) {
            ok = false;
            break;
        }
        entries++;
        *registers = regs > *registers ? regs : *registers;
        const char *start = frame;
        while (start > entry && start[-1] != '\n')
            start--;
        const char *end = strchr(frame, '\n');
        if (!strstr(line, "spill") || strstr(line, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"))
            snprintf(line, size, "%.*s", end ? (int)(end - start) : (int)strlen(start), start);
    }
    if (entries != 4) {
        fprintf(stderr, "  ptxas reported %d entries of gemm_3xtf32_tma.cu, not 4\n", entries);
        ok = false;
    }
    /* ptxas says when it had to serialise wgmmas or wait for their registers */
    if (strstr(log, "serialized") || strstr(log, "C7515") || strstr(log, "C7517") || strstr(log, "C7519")) {
        fprintf(stderr, "  ptxas: %s\n", log);
        ok = false;
    }
    spk_module_release(m);
    return ok;
}

/* A tunable's default as the header sets it, as text. */
#define TMA_TEXT(x) #x
#define TMA_DEFAULT(x) TMA_TEXT(x)

TEST(tma_form_compiles_without_spills_for_each_variant)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", tmp_root);
    setenv("SPK_CACHE_DIR", dir, 1);
    spk_cache_reset();
    /* The default, and the variants tools/gemm_3xtf32_check.lua times (a
     * slice of 4 k-steps holds 32 A registers across 12 wgmmas: it spills at
     * the 168 registers 9 warps leave a thread, so it is no variant); C by
     * the consumers' own stores with 3 or 4 stages (4 do not fit beside the
     * buffer of C through TMA's store). */
    const char *variants[][4] = {{NULL, NULL, NULL, NULL}, {"1", "1", "3", "1"}, {"2", "0", "3", "1"},
                                 {"2", "1", "3", "0"},     {"2", "1", "4", "0"}, {"1", "1", "4", "0"}};
    for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
        spk_define d[4] = {{"SPK_TMA_SLICE_STEPS", variants[i][0]}, {"SPK_TMA_SMALL_FIRST", variants[i][1]},
                           {"SPK_TMA_STAGES", variants[i][2]}, {"SPK_TMA_STORE_C", variants[i][3]}};
        int regs = 0;
        char line[256] = "";
        bool ok = compile_report(d, variants[i][0] ? 4 : 0, &regs, line, sizeof line);
        CHECK(ok);
        if (check_verbose())
            printf("  slice %s, small first %s, stages %s, C by TMA %s: %d registers; %s\n",
                   variants[i][0] ? variants[i][0] : TMA_DEFAULT(SPK_TMA_SLICE_STEPS),
                   variants[i][1] ? variants[i][1] : TMA_DEFAULT(SPK_TMA_SMALL_FIRST),
                   variants[i][2] ? variants[i][2] : TMA_DEFAULT(SPK_TMA_STAGES),
                   variants[i][3] ? variants[i][3] : TMA_DEFAULT(SPK_TMA_STORE_C), regs, line);
        CHECK(strstr(line, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") != NULL);
        /* one block an SM: 9 warps, 3 on one SM sub-partition's 16K registers */
        CHECK(regs > 0 && regs <= 168);
    }
}

int main(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/spk-test-gemm3x-XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(plan_of_the_projections);
    RUN(plan_refuses_what_the_form_cannot_read);
    RUN(a_fragments_read_the_box_tma_wrote);
    RUN(b_descriptors_read_the_box_tma_wrote);
    RUN(accumulators_cover_the_tile_once);
    RUN(c_buffer_is_what_tma_stores_read);
    RUN(tile_order_visits_every_tile_once);
    RUN(plan_keeps_b_resident_where_its_panel_fits);
    RUN(resident_walk_visits_every_tile_once);
    RUN(split_parts_are_tf32_and_sum_to_x);
    RUN(emulated_arithmetic_is_of_fp32_class);
    RUN(emulated_f16_parts_are_of_fp32_class);
    RUN(f16_bits_round_to_nearest_even);
    RUN(f16_parts_scale_and_sum_to_x);
    RUN(f16_a_fragments_read_the_box_tma_wrote);
    RUN(f16_plan_reads_b_as_halves);
    RUN(form_choice_defaults_to_f16_parts_and_names_a_bad_value);
    RUN(tma_form_compiles_without_spills_for_each_variant);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_root);
    return CHECK_SUMMARY();
}
