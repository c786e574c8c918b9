/* The host side of the split-TF32 GEMM's TMA form (kernels/gemm_3xtf32_tma.cu)
 * as plain functions of sizes, strides and addresses: what the form accepts,
 * the tensor maps it encodes, its tiles and launch. Needs no device, so the C
 * tests check it (tests/c/test_gemm_3xtf32.c); src/cuda/gemm_3xtf32_tma.c
 * applies it. */
#ifndef SPK_CUDA_GEMM_3XTF32_TMA_H
#define SPK_CUDA_GEMM_3XTF32_TMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One operand as the kernel reads it: op(X) as `rows` x `k` (A: m x k; B, read
 * as its transpose: n x k), element (i, p) of matrix z at
 * address + 4 (z matrix_stride + i row_stride + p k_stride); matrix_stride 0:
 * one matrix for every matrix of the batch. */
typedef struct spk_gemm_tma_matrix {
    uintptr_t address;
    int64_t rows, k;
    int64_t row_stride, k_stride, matrix_stride;
} spk_gemm_tma_matrix;

/* A tensor map's parameters (cuTensorMapEncodeTiled, f32, rank 3, 128-byte
 * swizzle, zeros out of range): sizes innermost first (k, rows, matrices;
 * C's: columns, rows, matrices), strides in bytes (between rows, between
 * matrices), the box (32 k x 128 rows x 1 matrix; C's 32 columns x 64 rows). */
typedef struct spk_gemm_tma_map {
    uint64_t dims[3];
    uint64_t strides[2];
    uint32_t box[3];
} spk_gemm_tma_map;

/* A launch of the TMA form. */
typedef struct spk_gemm_tma_plan {
    int64_t row_tiles, col_tiles, k_tiles, tiles; /* tiles = row_tiles * col_tiles * count */
    unsigned grid;                                /* persistent blocks: min(tiles, SMs) */
    unsigned threads;
    size_t smem;              /* SPK_TMA_SMEM_LIMIT: whatever the kernel's variant lays out */
    spk_gemm_tma_map a, b;    /* b: the map of b's hi and of b's lo (same layout) */
    int a_batched, b_batched; /* the operand holds a matrix per matrix of the batch */
    int c_vec2;               /* C's column pairs are contiguous and 8-byte aligned */
    int c_tma;                /* C suits a tensor map and beta is 0: map c is set, the
                                 SPK_TMA_STORE_C variant stores through it */
    spk_gemm_tma_map c;
} spk_gemm_tma_plan;

/* C (i, j) of matrix z at c_address + 4 (z c_sb + i c_sm + j c_sn); beta,
 * the old C's factor (TMA's store only overwrites: 0 alone suits it). */
typedef struct spk_gemm_tma_c {
    uintptr_t address;
    int64_t c_sm, c_sn, c_sb;
    float beta;
} spk_gemm_tma_c;

/* The plan of C[z] = op(A[z]) op(B[z]) for z < count on a device of `sms`
 * SMs; fails, saying why (the first requirement not met), where the form
 * cannot run it: k unit stride, 16-byte aligned addresses, row and matrix
 * strides multiples of 4 floats, sizes within the tensor maps' and the
 * kernel's 32-bit ranges, a.k == b.k >= 1. */
int spk_gemm_tma_plan_make(const spk_gemm_tma_matrix *a, const spk_gemm_tma_matrix *b, int64_t count,
                           const spk_gemm_tma_c *c, int sms, spk_gemm_tma_plan *out);

/* Whether a process's stack plans of math 3xtf32 want this form (their
 * weights split), given $SPK_GEMM_3XTF32's value `env` (NULL or "" when
 * unset): "tma" yes, "classic" no, unset the build's default (yes); another
 * value fails, naming it. The device's part of the choice (compute
 * capability 9.0) is spk_gemm_3xtf32_split_weights's (cuda/runtime.h). */
int spk_gemm_3xtf32_form_wanted(const char *env, bool *tma);

/* hi[i] + lo[i] = x[i] on the host, as the device's split kernel computes it
 * (kernels/gemm_3xtf32_tma.cuh's spk_tf32_split_value). */
void spk_tf32_split_host(const float *x, float *hi, float *lo, int64_t n);

#endif
