/* The tensor-core recurrence (kernels/lstm_tc.cu) emulated on the CPU: its
 * index arithmetic (kernels/lstm_tc_layout.cuh, the same functions the kernel
 * calls), its splits written as the kernel's instructions compute them, and
 * an mma written from the PTX ISA's fragment tables (independently of the
 * layout header), for whole blocks of every variant: R's fragments as the
 * kernel loads them, h pushed by every block's cells into the shared-memory
 * rows as the kernel's pushes place them, the B fragments the kernel loads
 * from there, the products, the gather of a unit's four gates, each cell once.
 * Compared with a direct f64 product R·h (exactly, with values whose split is
 * exact; within the split's error bound otherwise), so a layout mistake is
 * found here, not on a GPU. Then the error model per dot product against
 * f64: 3xTF32 and FP16x3 beside the FP32 kernels' FMA chains, with the tensor
 * core's sums modelled exactly rounded and truncating (SPK_VERBOSE=1 prints
 * the table docs/kernels.md quotes). */
#include "check.h"

#include <stdint.h>

#include "lstm_tc_layout.cuh"

/* ---- numbers as the GPU forms them ------------------------------------------ */

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

/* TF32, round to nearest, ties away (the kernel's tc_tf32). */
static uint32_t tf32(float x) { return (bits_of(x) + 0x1000u) & 0xffffe000u; }
static void split_tf32(float x, uint32_t *big, uint32_t *small)
{
    *big = tf32(x);
    *small = tf32(x - float_of(*big));
}

/* cvt.rn.f16x2.f32 (low in the low half) and back. */
static uint16_t f16_bits(float x)
{
    _Float16 h = (_Float16)x;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static float f16_value(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}
static uint32_t pack_f16(float low, float high) { return (uint32_t)f16_bits(low) | (uint32_t)f16_bits(high) << 16; }
static float f16_low(uint32_t v) { return f16_value((uint16_t)(v & 0xffffu)); }
static float f16_high(uint32_t v) { return f16_value((uint16_t)(v >> 16)); }
static void split_f16(float x0, float x1, uint32_t *big, uint32_t *small)
{
    *big = pack_f16(x0, x1);
    *small = pack_f16((x0 - f16_low(*big)) * 2048.0f, (x1 - f16_high(*big)) * 2048.0f);
}

/* ---- mma, from the PTX ISA's fragment tables ---------------------------------
 * The tensor core's sum: the products are exact; TC_SUM_ROUNDED adds them and
 * the accumulator exactly and rounds once; TC_SUM_TRUNCATED aligns every term
 * to the largest one's exponent, drops the bits below 24 of it, and truncates
 * the sum toward zero (what the tensor cores are documented to do, taken
 * pessimistically). */
enum { TC_SUM_ROUNDED, TC_SUM_TRUNCATED };
static int tc_sum_model = TC_SUM_ROUNDED;
static int shifted_b = 0;    /* the control: B fragments read one item over */
static int swapped_desc = 0; /* the wgmma control: the descriptor's two offsets swapped */

static float tc_sum(const double *terms, int n)
{
    if (tc_sum_model == TC_SUM_ROUNDED) {
        long double s = 0; /* 64 bits: exact for these terms but for far-apart exponents */
        for (int i = 0; i < n; i++)
            s += terms[i];
        return (float)s;
    }
    double m = 0;
    for (int i = 0; i < n; i++)
        m = fmax(m, fabs(terms[i]));
    if (m == 0)
        return 0.0f;
    int e;
    frexp(m, &e); /* m in [2^(e-1), 2^e) */
    const double ulp = ldexp(1.0, e - 24);
    double s = 0;
    for (int i = 0; i < n; i++)
        s += trunc(terms[i] / ulp) * ulp;
    frexp(s, &e);
    const double q = ldexp(1.0, e - 24);
    return (float)(trunc(s / q) * q);
}

/* Element i of a lane's A (or B) fragment: its value, row and column. tf32
 * operands are read as the tensor core reads them, their top 19 bits. */
static double a_elem(int split, const uint32_t *a, int lane, int i, int *row, int *col)
{
    const int g = lane >> 2, t = lane & 3;
    if (split == TC_SPLIT_F16) { /* i = 0..7: register i / 2, half i % 2 */
        *row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
        *col = i < 4 ? 2 * t + (i & 1) : 2 * t + (i & 1) + 8;
        return (i & 1) ? f16_high(a[i / 2]) : f16_low(a[i / 2]);
    }
    *row = (i == 0 || i == 2) ? g : g + 8;
    *col = i < 2 ? t : t + 4;
    return float_of(a[i] & 0xffffe000u);
}

static double b_elem(int split, const uint32_t *b, int lane, int i, int *row, int *col)
{
    const int g = lane >> 2, t = lane & 3;
    if (split == TC_SPLIT_F16) { /* i = 0..3: register i / 2, half i % 2 */
        *row = i < 2 ? 2 * t + (i & 1) : 2 * t + (i & 1) + 8;
        *col = g;
        return (i & 1) ? f16_high(b[i / 2]) : f16_low(b[i / 2]);
    }
    *row = i == 0 ? t : t + 4;
    *col = g;
    return float_of(b[i] & 0xffffe000u);
}

/* d += A·B for one warp: a[lane][4], b[lane][2], d[lane][4]. */
static void mma(int split, float d[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    const int K = split == TC_SPLIT_F16 ? 16 : 8;
    double A[16][16] = {{0}}, B[16][8] = {{0}};
    for (int lane = 0; lane < 32; lane++) {
        int row, col;
        for (int i = 0; i < (split == TC_SPLIT_F16 ? 8 : 4); i++) {
            const double v = a_elem(split, a[lane], lane, i, &row, &col);
            A[row][col] = v;
        }
        for (int i = 0; i < (split == TC_SPLIT_F16 ? 4 : 2); i++) {
            const double v = b_elem(split, b[lane], lane, i, &row, &col);
            B[row][col] = v;
        }
    }
    for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < 4; i++) {
            const int row = i < 2 ? lane >> 2 : (lane >> 2) + 8, col = 2 * (lane & 3) + (i & 1);
            double terms[17];
            terms[0] = d[lane][i];
            for (int k = 0; k < K; k++)
                terms[1 + k] = A[row][k] * B[k][col];
            d[lane][i] = tc_sum(terms, 1 + K);
        }
}

/* ---- wgmma, from the PTX ISA's description -------------------------------------
 * wgmma.mma_async m64nNk16 .f32.f16.f16 with A from registers: warp w of the
 * warpgroup holds rows 16w .. 16w + 15 of A in mma.m16n8k16's A layout
 * (register j: row g + 8 (j & 1), columns 2t, 2t + 1 (+ 8 for j >= 2)); B
 * (K x N) read from shared memory through the descriptor: start address, leading
 * byte offset and stride byte offset in 16-byte units at bits 0, 16, 32; K-major
 * without swizzle: element (k, n) at start + (n / 8) SBO + (k / 8) LBO + (n % 8) 16
 * + (k % 8) 2; D: warp w's rows 16w + g (registers 4j, 4j + 1) and + 8 (4j + 2,
 * 4j + 3) of column chunk j, columns 8j + 2t + (r & 1). smem is the block's image
 * in 4-byte words, addressed by byte. */
static float f16_at(const uint32_t *smem, unsigned byte)
{
    const uint32_t w = smem[byte / 4];
    return byte & 2 ? f16_high(w) : f16_low(w);
}

static void wgmma(int n, float d[4][32][32], const uint32_t a[4][32][4], uint64_t desc, const uint32_t *smem,
                  int accumulate)
{
    const unsigned start = (unsigned)(desc & 0x3fffu) << 4, lbo = (unsigned)((desc >> 16) & 0x3fffu) << 4,
                   sbo = (unsigned)((desc >> 32) & 0x3fffu) << 4;
    static double A[64][16], B[16][256];
    for (int w = 0; w < 4; w++)
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 4; j++)
                for (int e = 0; e < 2; e++) {
                    const int row = 16 * w + (lane >> 2) + 8 * (j & 1), col = 2 * (lane & 3) + e + 8 * (j >> 1);
                    A[row][col] = e ? f16_high(a[w][lane][j]) : f16_low(a[w][lane][j]);
                }
    for (int k = 0; k < 16; k++)
        for (int col = 0; col < n; col++)
            B[k][col] = f16_at(smem, start + (unsigned)(col / 8) * sbo + (unsigned)(k / 8) * lbo +
                                         (unsigned)(col % 8) * 16 + (unsigned)(k % 8) * 2);
    for (int w = 0; w < 4; w++)
        for (int lane = 0; lane < 32; lane++)
            for (int r = 0; r < n / 2; r++) {
                const int row = 16 * w + (lane >> 2) + 8 * ((r >> 1) & 1), col = 8 * (r >> 2) + 2 * (lane & 3) + (r & 1);
                double terms[17];
                terms[0] = accumulate ? d[w][lane][r] : 0.0;
                for (int k = 0; k < 16; k++)
                    terms[1 + k] = A[row][k] * B[k][col];
                d[w][lane][r] = tc_sum(terms, 17);
            }
}

/* ---- a block of the kernel, one step -------------------------------------------- */

#define MAX_H 128
#define MAX_T 32

typedef struct tc_config {
    int split, cluster, tile_rows, warp_mt, slice, hidden;
    int position[4]; /* the packed position of gates i, f, c, o (SPK_GATE_*) */
    int mma;         /* TC_MMA_SYNC (0 reads as it) or TC_MMA_WGMMA */
    int phases;      /* ROW_PHASES (0 reads as 1): the wgmma layout's groups go by phase */
} tc_config;

static int is_wgmma(const tc_config *c) { return c->mma == TC_MMA_WGMMA; }
static int phases_of(const tc_config *c) { return c->phases > 0 ? c->phases : 1; }

typedef struct tc_shape {
    int units, warps, ksteps, nt, cpt, cells, row_words;
} tc_shape;

static tc_shape shape_of(const tc_config *c)
{
    tc_shape s;
    s.units = c->hidden / c->cluster;
    s.warps = s.units / (4 * c->warp_mt);
    s.ksteps = c->hidden / tc_kstep(c->split);
    s.nt = (c->tile_rows + 7) / 8;
    s.cpt = tc_cells_per_tile(c->warp_mt);
    s.cells = s.nt * s.cpt;
    s.row_words = tc_row_words(c->split, c->hidden);
    return s;
}

/* The row phase of n-tile nt: its first n-tile and how many it has (PHASE_NT of the kernel). */
static int phase_first(const tc_shape *s, const tc_config *c, int nt, int *count)
{
    const int phases = phases_of(c);
    for (int p = 0; p < phases; p++) {
        const int first = p * s->nt / phases, next = (p + 1) * s->nt / phases;
        if (nt >= first && nt < next) {
            *count = next - first;
            return first;
        }
    }
    *count = 0;
    return -1;
}

/* tc_cell_row of the stages header: cell k's batch row in the tile. */
static int cell_row(const tc_shape *s, const tc_config *c, int k, int lane)
{
    return (k / s->cpt) * 8 + tc_cell_col(c->warp_mt, lane, k % s->cpt);
}

/* The kernel's tc_load_weights for one warp: a_big/a_small[mt][ks][lane][4], unscale[mt][lane][2]. */
static void load_weights(const tc_config *c, const tc_shape *s, const float *r, int rank, int warp,
                         uint32_t (*a_big)[16][32][4], uint32_t (*a_small)[16][32][4], float (*unscale)[32][2])
{
    const int H = c->hidden, first_unit = rank * s->units;
    for (int mt = 0; mt < c->warp_mt; mt++) {
        float scale[32][2];
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 2; j++)
                scale[lane][j] = unscale[mt][lane][j] = 1.0f;
        const float *rows[32][2];
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < 2; j++) {
                const int ar = tc_a_row(lane, j);
                rows[lane][j] = r + (size_t)((first_unit + tc_row_unit(c->warp_mt, warp, ar)) * 4 +
                                             c->position[tc_row_gate(c->warp_mt, mt, ar)]) *
                                        H;
            }
        if (c->split == TC_SPLIT_F16) {
            float m[32][2];
            for (int lane = 0; lane < 32; lane++)
                for (int j = 0; j < 2; j++) {
                    m[lane][j] = 0.0f;
                    for (int ks = 0; ks < s->ksteps; ks++)
                        for (int e = 0; e < 4; e++)
                            m[lane][j] =
                                fmaxf(m[lane][j], fabsf(rows[lane][j][tc_a_col(c->split, lane, ks, j + 2 * (e >> 1), e & 1)]));
                }
            for (int lane = 0; lane < 32; lane++) /* the two xor shuffles: the max over the group's 4 lanes */
                for (int j = 0; j < 2; j++) {
                    float v = 0.0f;
                    for (int x = 0; x < 4; x++)
                        v = fmaxf(v, m[(lane & ~3) | x][j]);
                    int shift = 14 - ((int)((bits_of(v) >> 23) & 255u) - 127);
                    shift = shift < -64 ? -64 : shift > 64 ? 64 : shift;
                    scale[lane][j] = float_of((uint32_t)(127 + shift) << 23);
                    unscale[mt][lane][j] = float_of((uint32_t)(127 - shift) << 23);
                }
        }
        for (int lane = 0; lane < 32; lane++)
            for (int ks = 0; ks < s->ksteps; ks++)
                for (int j = 0; j < 4; j++) {
                    const float *src = rows[lane][j & 1];
                    if (c->split == TC_SPLIT_F16)
                        split_f16(src[tc_a_col(c->split, lane, ks, j, 0)] * scale[lane][j & 1],
                                  src[tc_a_col(c->split, lane, ks, j, 1)] * scale[lane][j & 1],
                                  &a_big[mt][ks][lane][j], &a_small[mt][ks][lane][j]);
                    else
                        split_tf32(src[tc_a_col(c->split, lane, ks, j, 0)], &a_big[mt][ks][lane][j],
                                   &a_small[mt][ks][lane][j]);
                }
    }
}

/* Every block's pushes of h (h[b * H + u], rows < `rows`) that land in block `rank`:
 * smem[(b * row_words + word) * 2 + {0, 1}]; written[] counts each word's writes. */
static void push_all(const tc_config *c, const tc_shape *s, const float *h, int rows, int rank, uint32_t *smem,
                     int *written)
{
    const int H = c->hidden;
    for (int src = 0; src < c->cluster; src++)
        for (int warp = 0; warp < s->warps; warp++) {
            float hv[32][2 * 4];
            for (int lane = 0; lane < 32; lane++)
                for (int k = 0; k < s->cells; k++) {
                    const int b = cell_row(s, c, k, lane);
                    hv[lane][k] = b < rows ? h[b * H + src * s->units + tc_cell_unit(c->warp_mt, warp, lane)] : NAN;
                }
            for (int nt = 0; nt < s->nt; nt++)
                for (int lane = 0; lane < 32; lane++) {
                    const int first_unit = src * s->units;
                    if (c->split == TC_SPLIT_F16) {
                        const int kept = tc_pair_kept_cell(c->warp_mt, lane);
                        const int partner = lane ^ tc_pair_lane_xor(c->warp_mt);
                        const int pk = tc_pair_kept_cell(c->warp_mt, partner);
                        const float mine = hv[lane][nt * s->cpt + (s->cpt == 2 ? kept : 0)];
                        const float other = hv[partner][nt * s->cpt + (s->cpt == 2 ? pk ^ 1 : 0)];
                        const int high = tc_pair_is_high(c->warp_mt, lane);
                        uint32_t big, small;
                        split_f16(high ? other : mine, high ? mine : other, &big, &small);
                        const int b = nt * 8 + tc_pair_col(lane);
                        if (b >= rows)
                            continue;
                        const int item = (first_unit + tc_pair_unit(c->warp_mt, warp, lane)) >> 1;
                        if (is_wgmma(c)) { /* the pair's two threads: one part each, to every block */
                            int count;
                            const int first = phase_first(s, c, nt, &count);
                            const int part = tc_push_copy(c->split, c->warp_mt, lane);
                            const int byte = tc_wg_group(first, count, nt, part) * tc_wg_group_bytes(H) +
                                             tc_wg_core_byte(tc_pair_col(lane), 2 * item);
                            for (int d = 0; d < c->cluster; d++)
                                if ((src + d) % c->cluster == rank) {
                                    smem[byte / 4] = part ? small : big;
                                    written[byte / 4]++;
                                }
                            continue;
                        }
                        const int copies = tc_push_copies(c->split, c->warp_mt);
                        for (int d = 0; d < c->cluster / copies; d++) {
                            const int target = (src + d * copies + tc_push_copy(c->split, c->warp_mt, lane)) % c->cluster;
                            if (target != rank)
                                continue;
                            const int w = b * s->row_words + tc_item_word(item);
                            smem[2 * w] = big;
                            smem[2 * w + 1] = small;
                            written[w]++;
                        }
                    } else {
                        for (int cc = 0; cc < s->cpt; cc++) {
                            const int k = nt * s->cpt + cc, b = cell_row(s, c, k, lane);
                            if (b >= rows)
                                continue;
                            uint32_t big, small;
                            split_tf32(hv[lane][k], &big, &small);
                            const int item = first_unit + tc_cell_unit(c->warp_mt, warp, lane);
                            for (int d = 0; d < c->cluster; d++)
                                if ((src + d) % c->cluster == rank) {
                                    const int w = b * s->row_words + tc_item_word(item);
                                    smem[2 * w] = big;
                                    smem[2 * w + 1] = small;
                                    written[w]++;
                                }
                        }
                    }
                }
        }
}

/* The kernel's tc_products for one warp and n-tile: pre[mt][lane][4]. */
static void products(const tc_config *c, const tc_shape *s, const uint32_t *smem, int nt,
                     uint32_t (*a_big)[16][32][4], uint32_t (*a_small)[16][32][4], float (*unscale)[32][2],
                     int nproducts, float pre[2][32][4])
{
    float big[2][32][4], small[2][32][4];
    for (int k0 = 0; k0 < s->ksteps; k0 += c->slice) {
        uint32_t bb[2][32][2], bs[2][32][2];
        for (int q = 0; q < c->slice; q++)
            for (int lane = 0; lane < 32; lane++) {
                const uint32_t *w = smem + 2 * ((nt * 8 + (lane >> 2)) * s->row_words + tc_b_word(lane, k0 + q) + 2 * shifted_b);
                bb[q][lane][0] = w[0], bs[q][lane][0] = w[1], bb[q][lane][1] = w[2], bs[q][lane][1] = w[3];
            }
        for (int mt = 0; mt < c->warp_mt; mt++) {
            float d[32][4] = {{0}}, e[32][4] = {{0}};
            float (*small_into)[4] = c->split == TC_SPLIT_F16 ? e : d;
            if (nproducts == 3) {
                for (int q = 0; q < c->slice; q++)
                    mma(c->split, small_into, (const uint32_t(*)[4])a_small[mt][k0 + q], (const uint32_t(*)[2])bb[q]);
                for (int q = 0; q < c->slice; q++)
                    mma(c->split, small_into, (const uint32_t(*)[4])a_big[mt][k0 + q], (const uint32_t(*)[2])bs[q]);
            }
            for (int q = 0; q < c->slice; q++)
                mma(c->split, d, (const uint32_t(*)[4])a_big[mt][k0 + q], (const uint32_t(*)[2])bb[q]);
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < 4; i++) {
                    big[mt][lane][i] = k0 == 0 ? d[lane][i] : big[mt][lane][i] + d[lane][i];
                    small[mt][lane][i] = k0 == 0 ? e[lane][i] : small[mt][lane][i] + e[lane][i];
                }
        }
    }
    for (int mt = 0; mt < c->warp_mt; mt++)
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < 4; i++)
                pre[mt][lane][i] = c->split == TC_SPLIT_F16
                                       ? fmaf(small[mt][lane][i], 1.0f / 2048.0f, big[mt][lane][i]) * unscale[mt][lane][i >> 1]
                                       : big[mt][lane][i];
}

/* The kernel's tc_products_wgmma for one warpgroup (warps w0 .. w0 + 3) and phase p:
 * pre[w - w0][nt][lane][4] for the phase's n-tiles. */
static void products_wgmma(const tc_config *c, const tc_shape *s, const uint32_t *smem, int p,
                           uint32_t (*a_big)[2][16][32][4], uint32_t (*a_small)[2][16][32][4],
                           float (*unscale)[2][32][2], float pre[4][4][32][4])
{
    const int H = c->hidden, phases = phases_of(c), P = s->nt / phases, first = p * s->nt / phases;
    const int slices = s->ksteps / c->slice;
    static float acc[8][4][32][32], e[4][32][32];
    static uint32_t a[4][32][4];
    const unsigned base = (unsigned)(tc_wg_group(first, P, first, 0) * tc_wg_group_bytes(H));
    for (int ks = 0; ks < s->ksteps; ks++) {
        const unsigned at = base + (unsigned)tc_wg_kstep_byte(ks);
        const unsigned lbo = (unsigned)tc_wg_lbo(), sbo = (unsigned)tc_wg_group_bytes(H);
        const uint64_t desc = (uint64_t)((at & 0x3ffffu) >> 4) | (uint64_t)((swapped_desc ? sbo : lbo) >> 4) << 16 |
                              (uint64_t)((swapped_desc ? lbo : sbo) >> 4) << 32; /* the kernel's tc_wg_desc */
        for (int w = 0; w < 4; w++)
            memcpy(a[w], a_big[w][0][ks], sizeof a[w]);
        wgmma(16 * P, acc[ks / c->slice], (const uint32_t(*)[32][4])a, desc, smem, ks % c->slice != 0);
        for (int w = 0; w < 4; w++)
            memcpy(a[w], a_small[w][0][ks], sizeof a[w]);
        wgmma(8 * P, e, (const uint32_t(*)[32][4])a, desc, smem, ks != 0);
    }
    for (int w = 0; w < 4; w++)
        for (int lane = 0; lane < 32; lane++)
            for (int j = 0; j < P; j++)
                for (int i = 0; i < 4; i++) {
                    float big = acc[0][w][lane][4 * j + i], small = acc[0][w][lane][4 * P + 4 * j + i];
                    for (int sl = 1; sl < slices; sl++) {
                        big += acc[sl][w][lane][4 * j + i];
                        small += acc[sl][w][lane][4 * P + 4 * j + i];
                    }
                    small += e[w][lane][4 * j + i];
                    pre[w][first + j][lane][i] = fmaf(small, 1.0f / 2048.0f, big) * unscale[w][0][lane][i >> 1];
                }
}

typedef struct tc_result {
    int cells, wrong, duplicate, missing, bad_writes;
    double max_rel; /* max |pre - f64| / sum |R h| */
    char first[200];
} tc_result;

/* One step of block `rank`: every cell's four gate sums against f64. */
static tc_result emulate_block(const tc_config *c, const float *r, const float *h, int rows, int rank, int exact)
{
    tc_shape s = shape_of(c);
    tc_result res = {0};
    const int H = c->hidden;
    static uint32_t a_big[2][16][32][4], a_small[2][16][32][4];
    static float unscale[2][32][2];
    static uint32_t smem[2 * 8 * 4 * (MAX_H + 8)];
    static int written[8 * 4 * (MAX_H + 8)];
    static int seen[MAX_T][MAX_H];
    memset(smem, 0, sizeof smem);
    memset(written, 0, sizeof written);
    memset(seen, 0, sizeof seen);
    push_all(c, &s, h, rows, rank, smem, written);
    if (is_wgmma(c)) { /* each word of a group, decoded from its byte: written once where its row is the tile's */
        for (int w = 0; w < s.nt * 2 * 16 * H / 4; w++) {
            const int byte = 4 * w, g = byte / tc_wg_group_bytes(H), within = byte % tc_wg_group_bytes(H);
            int nt = 0, count = 0;
            for (int t = 0; t < s.nt; t++) {
                const int first = phase_first(&s, c, t, &count);
                if (g >= 2 * first && g < 2 * (first + count))
                    nt = first + (g - 2 * first) % count;
            }
            const int want = nt * 8 + (within % 128) / 16 < rows ? 1 : 0;
            if (written[w] != want)
                res.bad_writes++;
        }
    } else {
        for (int b = 0; b < s.nt * 8; b++)
            for (int w = 0; w < s.row_words; w++) {
                const int want = b < rows && w < tc_row_items(c->split, H) ? 1 : 0;
                if (written[b * s.row_words + w] != want)
                    res.bad_writes++;
            }
    }
    static float pre_all[32][4][2][32][4]; /* [warp][nt][mt][lane][element] */
    if (is_wgmma(c)) {
        static uint32_t wa_big[4][2][16][32][4], wa_small[4][2][16][32][4];
        static float wunscale[4][2][32][2], wpre[4][4][32][4];
        for (int w0 = 0; w0 < s.warps; w0 += 4) {
            for (int w = 0; w < 4; w++)
                load_weights(c, &s, r, rank, w0 + w, wa_big[w], wa_small[w], wunscale[w]);
            for (int p = 0; p < phases_of(c); p++)
                products_wgmma(c, &s, smem, p, wa_big, wa_small, wunscale, wpre);
            for (int w = 0; w < 4; w++)
                for (int nt = 0; nt < s.nt; nt++)
                    memcpy(pre_all[w0 + w][nt][0], wpre[w][nt], sizeof wpre[w][nt]);
        }
    } else {
        for (int warp = 0; warp < s.warps; warp++) {
            load_weights(c, &s, r, rank, warp, a_big, a_small, unscale);
            for (int nt = 0; nt < s.nt; nt++)
                products(c, &s, smem, nt, a_big, a_small, unscale, 3, pre_all[warp][nt]);
        }
    }
    for (int warp = 0; warp < s.warps; warp++) {
        for (int nt = 0; nt < s.nt; nt++) {
            float(*pre)[32][4] = pre_all[warp][nt];
            for (int lane = 0; lane < 32; lane++)
                for (int cc = 0; cc < s.cpt; cc++) {
                    float q[4];
                    if (c->warp_mt == 2) {
                        for (int g4 = 0; g4 < 4; g4++)
                            q[g4] = pre[g4 >> 1][lane][tc_mt2_element(g4, cc)];
                    } else {
                        float theirs[2]; /* what lane ^ 4 sends it */
                        tc_mt1_sends(pre[0][lane ^ 4], lane ^ 4, theirs);
                        tc_mt1_gates(pre[0][lane], theirs[0], theirs[1], lane, q);
                    }
                    const int k = nt * s.cpt + cc, b = cell_row(&s, c, k, lane);
                    const int unit = rank * s.units + tc_cell_unit(c->warp_mt, warp, lane);
                    if (b >= rows)
                        continue;
                    res.cells++;
                    if (seen[b][unit]++)
                        res.duplicate++;
                    for (int g4 = 0; g4 < 4; g4++) {
                        const float *row = r + (size_t)(unit * 4 + c->position[g4]) * H;
                        double dot = 0, mag = 0;
                        for (int kk = 0; kk < H; kk++) {
                            dot += (double)row[kk] * h[b * H + kk];
                            mag += fabs((double)row[kk] * h[b * H + kk]);
                        }
                        const double rel = fabs(q[g4] - dot) / (mag > 0 ? mag : 1);
                        if (rel > res.max_rel)
                            res.max_rel = rel;
                        if (exact ? q[g4] != dot : !(rel <= 0x1p-19)) {
                            if (!res.wrong++)
                                snprintf(res.first, sizeof res.first,
                                         "rank %d warp %d lane %d row %d unit %d gate %d: %.9g, f64 %.9g", rank, warp,
                                         lane, b, unit, g4, q[g4], dot);
                        }
                    }
                }
        }
    }
    for (int b = 0; b < rows; b++)
        for (int u = rank * s.units; u < (rank + 1) * s.units; u++)
            if (!seen[b][u])
                res.missing++;
    return res;
}

/* ---- data ----------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) /* [0, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1p-53;
}
static double normal(void) { return sqrt(-2 * log(1 - uniform())) * cos(6.283185307179586 * uniform()); }

/* R [4H, H] and h [T, H] (rows past `rows` zero): exact = values whose split is
 * exact and whose sums are exact (multiples of 2^-8 of 7 and 8 bits), else
 * PyTorch's initialisation and h = tanh of a normal. */
static void fill(float *r, float *h, int H, int rows, int exact)
{
    const double bound = 1 / sqrt((double)H);
    for (int i = 0; i < 4 * H * H; i++)
        r[i] = exact ? (float)((int)(uniform() * 255) - 127) / 256.0f : (float)((2 * uniform() - 1) * bound);
    for (int b = 0; b < MAX_T; b++)
        for (int k = 0; k < H; k++)
            h[b * H + k] = b >= rows ? 0.0f : exact ? (float)((int)(uniform() * 511) - 255) / 256.0f : (float)tanh(normal());
}

static const int orders[2][4] = {{0, 1, 2, 3}, {0, 3, 1, 2}}; /* ifco, and iofc's positions of i, f, c, o */

/* 1 (and the first five on stderr) if a block's emulation found anything wrong. */
static int report(const tc_config *c, int rank, const tc_result *res, int failures)
{
    if (!res->wrong && !res->duplicate && !res->missing && !res->bad_writes)
        return 0;
    if (failures < 5)
        fprintf(stderr,
                "  %s split %d H %d cluster %d warp_mt %d tile %d phases %d slice %d rank %d: %d of %d cells wrong "
                "(%s), %d twice, %d missing, %d words written other than once\n",
                is_wgmma(c) ? "wgmma" : "mma.sync", c->split, c->hidden, c->cluster, c->warp_mt, c->tile_rows,
                phases_of(c), c->slice, rank, res->wrong, res->cells, res->first, res->duplicate, res->missing,
                res->bad_writes);
    return 1;
}

/* Every variant the kernel's static_asserts allow at hidden 64 and 128 and tiles of
 * 1 to 32 rows: each block of the cluster (tiles short and full), against f64. */
static int run_layouts(int exact, int model, int *configs)
{
    static float r[4 * MAX_H * MAX_H], h[MAX_T * MAX_H];
    int failures = 0;
    const int tiles[] = {1, 5, 8, 13, 16, 24, 32};
    tc_sum_model = model;
    for (int split = TC_SPLIT_TF32; split <= TC_SPLIT_F16; split++)
        for (int hidden = 64; hidden <= 128; hidden *= 2)
            for (int cluster = 2; cluster <= 16; cluster *= 2)
                for (int mt = 1; mt <= 2; mt++)
                    for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
                        const int units = hidden / cluster;
                        if (units % (4 * mt) != 0 || units / (4 * mt) > 32)
                            continue;
                        tc_config c = {split, cluster, tiles[ti], mt, 1 + (int)(ti & 1), hidden, {0, 1, 2, 3}, TC_MMA_SYNC, 1};
                        if ((hidden / tc_kstep(split)) % c.slice)
                            c.slice = 1;
                        memcpy(c.position, orders[ti % 2], sizeof c.position);
                        const int rows = tiles[ti] - (int)(ti % 3 == 2); /* a short tile now and then */
                        fill(r, h, hidden, rows > 0 ? rows : 1, exact);
                        for (int rank = 0; rank < cluster; rank += (cluster > 4 ? 3 : 1)) {
                            tc_result res = emulate_block(&c, r, h, rows > 0 ? rows : 1, rank, exact);
                            (*configs)++;
                            failures += report(&c, rank, &res, failures);
                        }
                    }
    /* wgmma: FP16x3, one m-tile a warp, whole warpgroups, 1 or 2 phases of at most 2 n-tiles, slices 1 to 8 */
    for (int hidden = 64; hidden <= 128; hidden *= 2)
        for (int cluster = 2; cluster <= 8; cluster *= 2)
            for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++)
                for (int phases = 1; phases <= 2; phases++) {
                    const int nt = (tiles[ti] + 7) / 8;
                    if ((hidden / cluster / 4) % 4 != 0 || nt % phases != 0 || nt / phases > 2)
                        continue;
                    tc_config c = {TC_SPLIT_F16, cluster, tiles[ti], 1, 1 << (int)(ti % 4), hidden, {0, 1, 2, 3},
                                   TC_MMA_WGMMA, phases};
                    if ((hidden / 16) % c.slice)
                        c.slice = 1;
                    memcpy(c.position, orders[ti % 2], sizeof c.position);
                    const int rows = tiles[ti] - (int)(ti % 3 == 2);
                    fill(r, h, hidden, rows > 0 ? rows : 1, exact);
                    for (int rank = 0; rank < cluster; rank += (cluster > 4 ? 3 : 1)) {
                        tc_result res = emulate_block(&c, r, h, rows > 0 ? rows : 1, rank, exact);
                        (*configs)++;
                        failures += report(&c, rank, &res, failures);
                    }
                }
    return failures;
}

TEST(tc_layout_exact)
{
    int configs = 0;
    CHECK(run_layouts(1, TC_SUM_ROUNDED, &configs) == 0);
    CHECK(configs > 100);
}

TEST(tc_layout_random_rounded)
{
    int configs = 0;
    CHECK(run_layouts(0, TC_SUM_ROUNDED, &configs) == 0);
}

TEST(tc_layout_random_truncated)
{
    int configs = 0;
    CHECK(run_layouts(0, TC_SUM_TRUNCATED, &configs) == 0);
}

/* The check sees a wrong layout: B fragments read one item over. */
TEST(tc_layout_control)
{
    static float r[4 * MAX_H * MAX_H], h[MAX_T * MAX_H];
    tc_config c = {TC_SPLIT_F16, 4, 16, 1, 1, 128, {0, 1, 2, 3}, TC_MMA_SYNC, 1};
    fill(r, h, 128, 16, 1);
    tc_sum_model = TC_SUM_ROUNDED;
    tc_result ok = emulate_block(&c, r, h, 16, 1, 1);
    CHECK(ok.wrong == 0 && ok.cells == 16 * 32);
    shifted_b = 1;
    tc_result bad = emulate_block(&c, r, h, 16, 1, 1);
    shifted_b = 0;
    CHECK(bad.wrong > 0);
    /* wgmma: the descriptor's leading and stride offsets swapped */
    tc_config w = {TC_SPLIT_F16, 2, 16, 1, 4, 128, {0, 1, 2, 3}, TC_MMA_WGMMA, 1};
    tc_result wok = emulate_block(&w, r, h, 16, 1, 1);
    CHECK(wok.wrong == 0 && wok.bad_writes == 0 && wok.cells == 16 * 64);
    swapped_desc = 1;
    tc_result wbad = emulate_block(&w, r, h, 16, 1, 1);
    swapped_desc = 0;
    CHECK(wbad.wrong > 0);
}

/* ---- the error model, one dot product at a time ------------------------------------
 * The kernel's sequence of mmas for one gate row and one batch row (the block
 * emulation above gives the same numbers for its cells), against f64. */

/* One mma's sum for one output: c + sum of the products of a k-step. */
static float kstep_sum(float c, const double *a, const double *b, int k0, int n)
{
    double terms[17];
    terms[0] = c;
    for (int k = 0; k < n; k++)
        terms[1 + k] = a[k0 + k] * b[k0 + k];
    return tc_sum(terms, 1 + n);
}

/* R·h (length H) as the kernel computes it: split form, slice, products (3 or 1). */
static float dot_tc(int split, int slice, int nproducts, const float *r, const float *h, int H)
{
    double ab[MAX_H], as[MAX_H], bb[MAX_H], bs[MAX_H];
    float unscale = 1.0f;
    if (split == TC_SPLIT_F16) {
        float m = 0;
        for (int k = 0; k < H; k++)
            m = fmaxf(m, fabsf(r[k]));
        int shift = 14 - ((int)((bits_of(m) >> 23) & 255u) - 127);
        shift = shift < -64 ? -64 : shift > 64 ? 64 : shift;
        const float scale = float_of((uint32_t)(127 + shift) << 23);
        unscale = float_of((uint32_t)(127 - shift) << 23);
        for (int k = 0; k < H; k += 2) {
            uint32_t big, small;
            split_f16(r[k] * scale, r[k + 1] * scale, &big, &small);
            ab[k] = f16_low(big), ab[k + 1] = f16_high(big), as[k] = f16_low(small), as[k + 1] = f16_high(small);
            split_f16(h[k], h[k + 1], &big, &small);
            bb[k] = f16_low(big), bb[k + 1] = f16_high(big), bs[k] = f16_low(small), bs[k + 1] = f16_high(small);
        }
    } else {
        for (int k = 0; k < H; k++) {
            uint32_t big, small;
            split_tf32(r[k], &big, &small);
            ab[k] = float_of(big), as[k] = float_of(small);
            split_tf32(h[k], &big, &small);
            bb[k] = float_of(big), bs[k] = float_of(small);
        }
    }
    const int K = tc_kstep(split);
    float big = 0, small = 0;
    for (int k0 = 0; k0 < H; k0 += slice * K) {
        float d = 0, e = 0;
        float *into = split == TC_SPLIT_F16 ? &e : &d;
        if (nproducts == 3) {
            for (int q = 0; q < slice; q++)
                *into = kstep_sum(*into, as, bb, k0 + q * K, K);
            for (int q = 0; q < slice; q++)
                *into = kstep_sum(*into, ab, bs, k0 + q * K, K);
        }
        for (int q = 0; q < slice; q++)
            d = kstep_sum(d, ab, bb, k0 + q * K, K);
        big = k0 == 0 ? d : big + d;
        small = k0 == 0 ? e : small + e;
    }
    return split == TC_SPLIT_F16 ? fmaf(small, 1.0f / 2048.0f, big) * unscale : big;
}

/* FP16x3 in the wgmma form's order: per slice of `slice` k-steps, big·big and
 * big·small each summed by the tensor core from zero (separate columns of one
 * wgmma), the slices added in order; small·big one chain over all of K. */
static float dot_tc_wgmma(int slice, const float *r, const float *h, int H)
{
    double ab[MAX_H], as[MAX_H], bb[MAX_H], bs[MAX_H];
    float m = 0;
    for (int k = 0; k < H; k++)
        m = fmaxf(m, fabsf(r[k]));
    int shift = 14 - ((int)((bits_of(m) >> 23) & 255u) - 127);
    shift = shift < -64 ? -64 : shift > 64 ? 64 : shift;
    const float scale = float_of((uint32_t)(127 + shift) << 23), unscale = float_of((uint32_t)(127 - shift) << 23);
    for (int k = 0; k < H; k += 2) {
        uint32_t big, small;
        split_f16(r[k] * scale, r[k + 1] * scale, &big, &small);
        ab[k] = f16_low(big), ab[k + 1] = f16_high(big), as[k] = f16_low(small), as[k + 1] = f16_high(small);
        split_f16(h[k], h[k + 1], &big, &small);
        bb[k] = f16_low(big), bb[k + 1] = f16_high(big), bs[k] = f16_low(small), bs[k + 1] = f16_high(small);
    }
    float big = 0, small = 0, e = 0;
    for (int k0 = 0; k0 < H; k0 += slice * 16) {
        float d = 0, f = 0;
        for (int q = 0; q < slice; q++) {
            d = kstep_sum(d, ab, bb, k0 + q * 16, 16);
            f = kstep_sum(f, ab, bs, k0 + q * 16, 16);
        }
        big = k0 == 0 ? d : big + d;
        small = k0 == 0 ? f : small + f;
    }
    for (int k0 = 0; k0 < H; k0 += 16)
        e = kstep_sum(e, as, bb, k0, 16);
    return fmaf(small + e, 1.0f / 2048.0f, big) * unscale;
}

/* The FP32 kernels' sum of a gate row: 4 FMA chains over k, (a0 + a1) + (a2 + a3). */
static float dot_fp32(const float *r, const float *h, int H)
{
    float a[4] = {0, 0, 0, 0};
    for (int k = 0; k < H; k += 4)
        for (int i = 0; i < 4; i++)
            a[i] = fmaf(r[k + i], h[k + i], a[i]);
    return (a[0] + a[1]) + (a[2] + a[3]);
}

typedef struct error_row {
    const char *name;
    int split, slice, products, model; /* split 0: the FP32 chains; -1: FP16x3 in the wgmma form's order */
    double rel_l2, max_rel;
} error_row;

static void measure_errors(error_row *rows, int n, int dots)
{
    const int H = 128;
    static float r[MAX_H], h[MAX_H];
    double *err2 = calloc((size_t)n, sizeof *err2), ref2 = 0;
    rng_state = 12345;
    for (int i = 0; i < n; i++)
        rows[i].max_rel = 0;
    for (int d = 0; d < dots; d++) {
        const double bound = 1 / sqrt((double)H);
        for (int k = 0; k < H; k++) {
            r[k] = (float)((2 * uniform() - 1) * bound);
            h[k] = (float)tanh(normal());
        }
        double exact = 0, mag = 0;
        for (int k = 0; k < H; k++) {
            exact += (double)r[k] * h[k];
            mag += fabs((double)r[k] * h[k]);
        }
        ref2 += exact * exact;
        for (int i = 0; i < n; i++) {
            tc_sum_model = rows[i].model;
            const float got = rows[i].split == 0   ? dot_fp32(r, h, H)
                              : rows[i].split < 0 ? dot_tc_wgmma(rows[i].slice, r, h, H)
                                                  : dot_tc(rows[i].split, rows[i].slice, rows[i].products, r, h, H);
            err2[i] += (got - exact) * (got - exact);
            if (fabs(got - exact) / mag > rows[i].max_rel)
                rows[i].max_rel = fabs(got - exact) / mag;
        }
    }
    for (int i = 0; i < n; i++)
        rows[i].rel_l2 = sqrt(err2[i] / ref2);
    free(err2);
}

TEST(tc_error_model)
{
    error_row rows[] = {
        {"FP32, 4 FMA chains (the SIMT kernels)", 0, 0, 0, TC_SUM_ROUNDED, 0, 0},
        {"3xTF32, slice 1, sums rounded", TC_SPLIT_TF32, 1, 3, TC_SUM_ROUNDED, 0, 0},
        {"3xTF32, slice 1, sums truncated", TC_SPLIT_TF32, 1, 3, TC_SUM_TRUNCATED, 0, 0},
        {"3xTF32, slice 2, sums truncated", TC_SPLIT_TF32, 2, 3, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3, slice 1, sums rounded", TC_SPLIT_F16, 1, 3, TC_SUM_ROUNDED, 0, 0},
        {"FP16x3, slice 1, sums truncated", TC_SPLIT_F16, 1, 3, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3, slice 2, sums truncated", TC_SPLIT_F16, 2, 3, TC_SUM_TRUNCATED, 0, 0},
        {"1xTF32 (the big product alone)", TC_SPLIT_TF32, 1, 1, TC_SUM_TRUNCATED, 0, 0},
        {"1xFP16 (the big product alone)", TC_SPLIT_F16, 1, 1, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3 wgmma, slice 1, sums truncated", -1, 1, 3, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3 wgmma, slice 2, sums truncated", -1, 2, 3, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3 wgmma, slice 4, sums truncated", -1, 4, 3, TC_SUM_TRUNCATED, 0, 0},
        {"FP16x3 wgmma, slice 8, sums truncated", -1, 8, 3, TC_SUM_TRUNCATED, 0, 0},
    };
    const int n = (int)(sizeof rows / sizeof rows[0]);
    measure_errors(rows, n, 20000);
    if (check_verbose())
        for (int i = 0; i < n; i++)
            printf("  %-42s rel_l2 %.3e  max |err| / sum |r h| %.3e\n", rows[i].name, rows[i].rel_l2, rows[i].max_rel);
    /* FP32's accuracy: every split form within 1.5x the FP32 chains' error; the big product alone is not */
    for (int i = 1; i <= 6; i++)
        CHECK(rows[i].rel_l2 <= 1.5 * rows[0].rel_l2);
    CHECK(rows[7].rel_l2 > 10 * rows[0].rel_l2 && rows[8].rel_l2 > 10 * rows[0].rel_l2);
    /* the wgmma form's slices of 1 and 2 k-steps hold FP32's accuracy here; 4 and 8 (the truncation
     * taken pessimistically over 64 and 128 products) do not, and grow with the slice */
    for (int i = 9; i < n; i++)
        if (rows[i].slice <= 2)
            CHECK(rows[i].rel_l2 <= 1.5 * rows[0].rel_l2);
    CHECK(rows[11].rel_l2 > rows[10].rel_l2 && rows[12].rel_l2 > rows[11].rel_l2);
}

/* The scalar model above and the block emulation agree: one cell's gate, computed both ways. */
TEST(tc_error_model_matches_block)
{
    static float r[4 * MAX_H * MAX_H], h[MAX_T * MAX_H];
    for (int split = TC_SPLIT_TF32; split <= TC_SPLIT_F16; split++) {
        tc_config c = {split, 4, 8, 1, 1, 128, {0, 1, 2, 3}, TC_MMA_SYNC, 1};
        fill(r, h, 128, 8, 0);
        tc_sum_model = TC_SUM_TRUNCATED;
        /* block 0, warp 0, lane 0: unit 0, batch row 0 (g even: column 2t = 0) */
        tc_shape s = shape_of(&c);
        static uint32_t a_big[2][16][32][4], a_small[2][16][32][4], smem[2 * 8 * 4 * (MAX_H + 8)];
        static int written[8 * 4 * (MAX_H + 8)];
        static float unscale[2][32][2];
        memset(smem, 0, sizeof smem);
        push_all(&c, &s, h, 8, 0, smem, written);
        load_weights(&c, &s, r, 0, 0, a_big, a_small, unscale);
        float pre[2][32][4];
        products(&c, &s, smem, 0, a_big, a_small, unscale, 3, pre);
        /* lane 0 holds row g = 0 (unit 0, gate i) and g + 8 (unit 0, gate f) of column 0 */
        CHECK(pre[0][0][0] == dot_tc(split, 1, 3, r + 0 * 128, h, 128));
        CHECK(pre[0][0][2] == dot_tc(split, 1, 3, r + 1 * 128, h, 128));
    }
}

int main(void)
{
    RUN(tc_layout_exact);
    RUN(tc_layout_random_rounded);
    RUN(tc_layout_random_truncated);
    RUN(tc_layout_control);
    RUN(tc_error_model);
    RUN(tc_error_model_matches_block);
    return CHECK_SUMMARY();
}
