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
static int shifted_b = 0; /* the control: B fragments read one item over */

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

/* ---- a block of the kernel, one step -------------------------------------------- */

#define MAX_H 128
#define MAX_T 32

typedef struct tc_config {
    int split, cluster, tile_rows, warp_mt, slice, hidden;
    int position[4]; /* the packed position of gates i, f, c, o (SPK_GATE_*) */
} tc_config;

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
    for (int b = 0; b < s.nt * 8; b++)
        for (int w = 0; w < s.row_words; w++) {
            const int want = b < rows && w < tc_row_items(c->split, H) ? 1 : 0;
            if (written[b * s.row_words + w] != want)
                res.bad_writes++;
        }
    for (int warp = 0; warp < s.warps; warp++) {
        load_weights(c, &s, r, rank, warp, a_big, a_small, unscale);
        for (int nt = 0; nt < s.nt; nt++) {
            float pre[2][32][4];
            products(c, &s, smem, nt, a_big, a_small, unscale, 3, pre);
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
                        tc_config c = {split, cluster, tiles[ti], mt, 1 + (int)(ti & 1), hidden, {0, 1, 2, 3}};
                        if ((hidden / tc_kstep(split)) % c.slice)
                            c.slice = 1;
                        memcpy(c.position, orders[ti % 2], sizeof c.position);
                        const int rows = tiles[ti] - (int)(ti % 3 == 2); /* a short tile now and then */
                        fill(r, h, hidden, rows > 0 ? rows : 1, exact);
                        for (int rank = 0; rank < cluster; rank += (cluster > 4 ? 3 : 1)) {
                            tc_result res = emulate_block(&c, r, h, rows > 0 ? rows : 1, rank, exact);
                            (*configs)++;
                            if (res.wrong || res.duplicate || res.missing || res.bad_writes) {
                                if (failures++ < 5)
                                    fprintf(stderr,
                                            "  split %d H %d cluster %d warp_mt %d tile %d slice %d rank %d: %d of %d "
                                            "cells wrong (%s), %d twice, %d missing, %d words written other than once\n",
                                            split, hidden, cluster, mt, tiles[ti], c.slice, rank, res.wrong, res.cells,
                                            res.first, res.duplicate, res.missing, res.bad_writes);
                            }
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
    tc_config c = {TC_SPLIT_F16, 4, 16, 1, 1, 128, {0, 1, 2, 3}};
    fill(r, h, 128, 16, 1);
    tc_sum_model = TC_SUM_ROUNDED;
    tc_result ok = emulate_block(&c, r, h, 16, 1, 1);
    CHECK(ok.wrong == 0 && ok.cells == 16 * 32);
    shifted_b = 1;
    tc_result bad = emulate_block(&c, r, h, 16, 1, 1);
    shifted_b = 0;
    CHECK(bad.wrong > 0);
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
    int split, slice, products, model; /* split 0: the FP32 chains */
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
            const float got = rows[i].split == 0 ? dot_fp32(r, h, H)
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
}

/* The scalar model above and the block emulation agree: one cell's gate, computed both ways. */
TEST(tc_error_model_matches_block)
{
    static float r[4 * MAX_H * MAX_H], h[MAX_T * MAX_H];
    for (int split = TC_SPLIT_TF32; split <= TC_SPLIT_F16; split++) {
        tc_config c = {split, 4, 8, 1, 1, 128, {0, 1, 2, 3}};
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
