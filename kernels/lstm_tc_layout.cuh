/* Where every value of the tensor-core recurrence (kernels/lstm_tc.cu) sits:
 * which gate row of R a warp's mma fragments hold, which cell a thread's
 * accumulators finish, where an h item lands in shared memory and which
 * lanes push it. Plain C and CUDA (index arithmetic only), so the kernel and
 * its CPU emulation (tests/c/test_tc_layout.c: these mappings fed through an
 * mma written from the PTX ISA's fragment tables, compared with a direct
 * product) run the same formulas. docs/kernels.md has the design.
 *
 * Names: lane = %laneid, g = lane / 4 (the PTX ISA's groupID), t = lane % 4
 * (threadID_in_group). A block's warps each own WARP_MT m-tiles of 16 gate
 * rows (R is mma's A operand, M = gate rows) over the whole of K = H, and the
 * tile's batch rows in n-tiles of 8 (h is the B operand, N = batch rows).
 * Split forms: TC_SPLIT_TF32 (3xTF32, mma m16n8k8 .tf32, a k-step of 8) and
 * TC_SPLIT_F16 (FP16x3 with scaled small parts, mma m16n8k16 .f16, a k-step
 * of 16). Gates are numbered 0 i, 1 f, 2 c, 3 o (the cell's order). */
#ifndef SPK_LSTM_TC_LAYOUT_H
#define SPK_LSTM_TC_LAYOUT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TC_FN static constexpr __host__ __device__ __forceinline__
#else
#define TC_FN static inline
#endif

#define TC_SPLIT_TF32 1
#define TC_SPLIT_F16 2

/* K of one mma: 8 (tf32) or 16 (f16). */
TC_FN int tc_kstep(int split) { return split == TC_SPLIT_F16 ? 16 : 8; }

/* Units a warp owns: 4 a m-tile (16 gate rows). */
TC_FN int tc_warp_units(int warp_mt) { return 4 * warp_mt; }

/* The gate of A row r (0..15) of m-tile mt. Two m-tiles a warp: m-tile 0 holds
 * i (rows 0-7) and f (8-15) of the warp's 8 units, m-tile 1 c and o, so a
 * thread's accumulator rows g and g + 8 of both m-tiles are one unit's four
 * gates. One m-tile: row g holds unit g / 2's i (g even) or c (g odd), row
 * g + 8 its f or o, so lanes g and g ^ 1 hold one unit's four gates. */
TC_FN int tc_row_gate(int warp_mt, int mt, int r)
{
    return warp_mt == 2 ? mt * 2 + (r >> 3) : ((r & 1) << 1) + (r >> 3);
}

/* The block-local unit of A row r of m-tile mt of warp `warp`. */
TC_FN int tc_row_unit(int warp_mt, int warp, int r) { return warp * tc_warp_units(warp_mt) + ((r & 7) >> (warp_mt == 2 ? 0 : 1)); }

/* A fragment register j (0..3) of `lane`: its row (PTX ISA, m16n8k8 .tf32 and
 * m16n8k16 .f16 alike: registers 0 and 2 row g, 1 and 3 row g + 8). */
TC_FN int tc_a_row(int lane, int j) { return (lane >> 2) + 8 * (j & 1); }

/* ... and the column (k) of its element e (e = 0 only for tf32; f16 packs two,
 * e = 0 in the low half) at k-step ks. */
TC_FN int tc_a_col(int split, int lane, int ks, int j, int e)
{
    const int t = lane & 3;
    return split == TC_SPLIT_F16 ? ks * 16 + 2 * t + e + 8 * (j >> 1) : ks * 8 + t + 4 * (j >> 1);
}

/* Accumulator element e (0..3) of `lane`: row g (e < 2) or g + 8, column 2t + (e & 1). */
TC_FN int tc_d_row(int lane, int e) { return (lane >> 2) + 8 * (e >> 1); }
TC_FN int tc_d_col(int lane, int e) { return 2 * (lane & 3) + (e & 1); }

/* ---- h in shared memory ------------------------------------------------------
 * A batch row of h is a row of 8-byte items, {big, small}: tf32, item i is unit
 * i (big and small as 32-bit words); f16, item i is units 2i and 2i + 1 (big
 * and small as f16x2 words, unit 2i in the low half). Within a k-step's block
 * of 8 items the items are stored in the order 0 4 1 5 2 6 3 7, so lane t's
 * B fragments of a k-step (items t and t + 4: k = t, t + 4 for tf32; k =
 * 2t.., 2t + 8.. for f16) are one 16-byte word {b0 big, b0 small, b1 big, b1
 * small}. A row is padded by 8 items: 8 lanes of a 16-byte load (two rows of
 * 64 bytes) then fall in distinct banks. */
TC_FN int tc_row_items(int split, int hidden) { return split == TC_SPLIT_F16 ? hidden / 2 : hidden; }
TC_FN int tc_row_words(int split, int hidden) { return tc_row_items(split, hidden) + 8; } /* 8-byte words */

/* The 8-byte word of item i within its batch row. */
TC_FN int tc_item_word(int i) { return (i >> 3) * 8 + (i & 3) * 2 + ((i >> 2) & 1); }

/* The first 8-byte word of lane's 16-byte B load at k-step ks, within the batch row of n = g. */
TC_FN int tc_b_word(int lane, int ks) { return ks * 8 + 2 * (lane & 3); }

/* ---- h in shared memory for wgmma (TC_MMA_WGMMA, FP16x3, one m-tile a warp) ----
 * wgmma reads its B operand (h: N = batch rows, K = units) from shared memory
 * through a matrix descriptor, in the canonical K-major layout without
 * swizzle: core matrices of 8 rows x 16 bytes (8 batch rows x 8 units of
 * f16, 128 bytes each), 128 bytes apart along K (the descriptor's leading
 * offset) and one 8-row group after another 16 H bytes apart (its stride
 * offset). A group is one part (big or small) of one n-tile; phase p's
 * groups are its n-tiles' big parts, then their small parts, so one wgmma
 * with N = 16 x (the phase's n-tiles) multiplies R's big part by both parts
 * of h, and one with half that N R's small part by h's big part. */
#define TC_MMA_SYNC 1
#define TC_MMA_WGMMA 2
TC_FN int tc_wg_lbo(void) { return 128; }
TC_FN int tc_wg_group_bytes(int hidden) { return 16 * hidden; } /* the stride offset */
/* The group of part `part` (0 big, 1 small) of n-tile nt, in a phase of `phase_nts`
 * n-tiles starting at n-tile first_nt. */
TC_FN int tc_wg_group(int first_nt, int phase_nts, int nt, int part)
{
    return 2 * first_nt + part * phase_nts + (nt - first_nt);
}
/* The byte of unit k (even: a unit pair's f16x2 word) of batch row n (0..7) within its group. */
TC_FN int tc_wg_core_byte(int n, int k) { return (k >> 3) * 128 + (n & 7) * 16 + (k & 7) * 2; }
/* The first byte of a k-step's (16 units') core matrices within a group. */
TC_FN int tc_wg_kstep_byte(int ks) { return ks * 2 * 128; }

/* ---- the cells a thread finishes -------------------------------------------
 * Per n-tile: two m-tiles a warp, two cells a thread (unit g of the warp's,
 * batch columns 2t and 2t + 1, c = 0, 1); one m-tile, one cell (unit g / 2,
 * column 2t + (g & 1)) after two shuffles with lane ^ 4. */
TC_FN int tc_cells_per_tile(int warp_mt) { return warp_mt == 2 ? 2 : 1; }
TC_FN int tc_cell_unit(int warp_mt, int warp, int lane)
{
    return warp * tc_warp_units(warp_mt) + (warp_mt == 2 ? (lane >> 2) : (lane >> 3));
}
TC_FN int tc_cell_col(int warp_mt, int lane, int c)
{
    return 2 * (lane & 3) + (warp_mt == 2 ? c : ((lane >> 2) & 1));
}

/* Two m-tiles: gate q of cell c is accumulator element tc_mt2_element(q, c)
 * of m-tile q / 2. */
TC_FN int tc_mt2_element(int q, int c) { return 2 * (q & 1) + c; }

/* One m-tile: what lane sends to lane ^ 4 (its two gates of the column the
 * partner finishes), and its cell's four gates from its own elements d and the
 * two it receives (ra, rb). Even g holds i and f of columns 2t, 2t + 1 and
 * keeps 2t; odd g holds c and o and keeps 2t + 1. */
TC_FN void tc_mt1_sends(const float d[4], int lane, float s[2])
{
    const int odd = (lane >> 2) & 1;
    s[0] = odd ? d[0] : d[1];
    s[1] = odd ? d[2] : d[3];
}
TC_FN void tc_mt1_gates(const float d[4], float ra, float rb, int lane, float q[4])
{
    const int odd = (lane >> 2) & 1;
    q[0] = odd ? ra : d[0];
    q[1] = odd ? rb : d[2];
    q[2] = odd ? d[1] : ra;
    q[3] = odd ? d[3] : rb;
}

/* ---- the pushes ------------------------------------------------------------
 * tf32: each cell is an item of its own, pushed by its thread to every block.
 * f16: an item is a unit pair of one batch row; the thread of the pair's first
 * unit and that of its second swap their h (lane ^ tc_pair_lane_xor), and
 * both build the item. Two m-tiles: the pair is (g & ~1, g | 1) of column 2t +
 * (g & 1) (a thread keeps its cell c = g & 1, sends c ^ 1), each thread
 * pushes its item to every block. One m-tile: both threads of a pair hold the
 * same item and split the blocks between them (copy = which of the two). */
TC_FN int tc_pair_lane_xor(int warp_mt) { return warp_mt == 2 ? 4 : 8; }
/* The cell whose h a thread keeps (f16, two m-tiles: c = g & 1; else 0). */
TC_FN int tc_pair_kept_cell(int warp_mt, int lane) { return warp_mt == 2 ? ((lane >> 2) & 1) : 0; }
/* Whether the thread's own h is the pair's second unit (the high half). */
TC_FN int tc_pair_is_high(int warp_mt, int lane) { return warp_mt == 2 ? ((lane >> 2) & 1) : ((lane >> 3) & 1); }
/* The block-local first unit of the pair. */
TC_FN int tc_pair_unit(int warp_mt, int warp, int lane) { return tc_cell_unit(warp_mt, warp, lane) & ~1; }
/* The pair's batch column within its n-tile. */
TC_FN int tc_pair_col(int lane) { return 2 * (lane & 3) + ((lane >> 2) & 1); }
/* How many threads push one item, and which of them this is. */
TC_FN int tc_push_copies(int split, int warp_mt) { return split == TC_SPLIT_F16 && warp_mt == 1 ? 2 : 1; }
TC_FN int tc_push_copy(int split, int warp_mt, int lane)
{
    return tc_push_copies(split, warp_mt) == 2 ? ((lane >> 3) & 1) : 0;
}

/* The step's stages, as the timeline build stamps them: their lists. */
#include "lstm_tc_timeline_stages.cuh"

#endif
