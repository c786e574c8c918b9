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

/* The forms of a stack plan's 3xtf32 projections. */
typedef enum { SPK_3XTF32_CLASSIC, SPK_3XTF32_TMA, SPK_3XTF32_TMA_F16 } spk_3xtf32_form;

/* One operand as the kernel reads it: op(X) as `rows` x `k` (A: m x k; B, read
 * as its transpose: n x k), element (i, p) of matrix z at
 * address + 4 (z matrix_stride + i row_stride + p k_stride) (2 for f16);
 * matrix_stride 0: one matrix for every matrix of the batch. */
typedef struct spk_gemm_tma_matrix {
    uintptr_t address;
    int64_t rows, k;
    int64_t row_stride, k_stride, matrix_stride;
    unsigned f16; /* 1: B's FP16 parts (2-byte elements; f32 otherwise) */
} spk_gemm_tma_matrix;

/* A tensor map's parameters (cuTensorMapEncodeTiled, f32 with the 128-byte
 * swizzle or f16 with the 64-byte one, rank 3, zeros out of range): sizes innermost first (k, rows, matrices;
 * C's: columns, rows, matrices), strides in bytes (between rows, between
 * matrices), the box (32 k x 128 rows x 1 matrix; C's 32 columns x 64 rows). */
typedef struct spk_gemm_tma_map {
    uint64_t dims[3];
    uint64_t strides[2];
    uint32_t box[3];
    unsigned f16;
} spk_gemm_tma_map;

/* A launch of the TMA form. */
typedef struct spk_gemm_tma_plan {
    int64_t row_tiles, col_tiles, k_tiles, tiles; /* tiles = row_tiles * col_tiles * count */
    unsigned grid;                                /* persistent blocks: min(tiles, SMs), or whole row
                                                     groups of them where B is resident */
    unsigned threads;
    size_t smem;              /* SPK_TMA_SMEM_LIMIT: whatever the kernel's variant lays out */
    spk_gemm_tma_map a, b;    /* b: the map of b's hi and of b's lo (same layout) */
    int a_batched, b_batched; /* the operand holds a matrix per matrix of the batch */
    int c_vec2;               /* C's column pairs are contiguous and 8-byte aligned */
    int c_tma;                /* C suits a tensor map and beta is 0: map c is set, the
                                 SPK_TMA_STORE_C variant stores through it */
    int b_resident;           /* each block keeps one column's panel of B (grid: whole row
                                 groups of blocks; kernels/gemm_3xtf32_tma.cuh) */
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

/* Which form a process's stack plans of math 3xtf32 want, given
 * $SPK_GEMM_3XTF32's value `env` (NULL or "" when unset): "tma" the TMA form
 * with TF32 parts, "f16" the TMA form with FP16 parts for the layers after
 * the first (their input is h, |h| <= 1), "classic" the forms of
 * src/cuda/gemm_3xtf32.c, unset the build's default; another value fails,
 * naming it. The device's part of the choice (compute capability 9.0) is
 * spk_gemm_3xtf32_plan_form's (cuda/runtime.h). */
int spk_gemm_3xtf32_form_wanted(const char *env, spk_3xtf32_form *form);

/* The FP16 parts of n floats: x 2^exponent split as
 * kernels/gemm_3xtf32_tma.cuh's spk_f16_split_value, exponent =
 * spk_f16_scale_exponent of the largest finite |x| (returned). */
int spk_f16_split_host(const float *x, uint16_t *hi, uint16_t *lo, int64_t n);

/* hi[i] + lo[i] = x[i] on the host, as the device's split kernel computes it
 * (kernels/gemm_3xtf32_tma.cuh's spk_tf32_split_value). */
void spk_tf32_split_host(const float *x, float *hi, float *lo, int64_t n);

#endif
