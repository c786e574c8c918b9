/* The tensor-core recurrence kernel family (sm_90a, kernels/lstm_tc.cu): each
 * step's R·h as split-precision tensor-core products (FP16x3 or 3xTF32, FP32
 * accurate), the cell in FP32, h exchanged through the cluster's distributed
 * shared memory; one cluster a (batch tile, direction), both directions in
 * one launch a layer. docs/kernels.md has the design; tensor_core.c has the
 * options, the per-batch defaults and the launch rule, the one place they
 * are written (lua/spk/tensor_core.lua reads them through the family).
 * Conventions as in core/tensor.h: -1 on failure with spk_last_error(). */
#ifndef SPK_LSTM_TENSOR_CORE_H
#define SPK_LSTM_TENSOR_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "lstm/family.h"
#include "lstm/kernel_options.h"
#include "lstm_cell_forms.cuh"

/* kernel.split: the parts R and h are split into (TC_SPLIT is the value + 1). */
enum { SPK_TC_SPLIT_TF32 = 0, SPK_TC_SPLIT_F16 = 1 };
/* kernel.mma: the tensor-core instruction (TC_MMA is the value + 1). */
enum { SPK_TC_MMA_SYNC = 0, SPK_TC_MMA_WGMMA = 1 };

/* One int per option of spk_tensor_core_family (tensor_core.c's option
 * table says what each is; [MACRO] where it sets one). */
typedef struct spk_tc_variant {
    int hidden;       /* [SPK_HIDDEN] */
    int split;        /* SPK_TC_SPLIT_* */
    int products;     /* [TC_PRODUCTS] 3, or 1 (the big product alone) */
    int cluster;      /* [CLUSTER] blocks a cluster */
    int tile_rows;    /* [TILE_ROWS] batch rows a tile */
    int warp_mt;      /* [WARP_MT] m-tiles of 16 gate rows a warp */
    int row_phases;   /* [ROW_PHASES] halves of a tile's n-tiles taking turns */
    int gates_ahead;  /* [GATES_AHEAD] steps ahead the x·Wᵀ is fetched */
    int slice_steps;  /* [SLICE_STEPS] k-steps summed in the tensor core before the FP32 add */
    int exclusive_sm; /* 1: the launch asks for more than half an SM's shared memory (a block an SM) */
    int mma;          /* SPK_TC_MMA_* */
    int fetch_early;  /* [FETCH_EARLY] the next x·Wᵀ fetched before the wait for h */
    int cell;         /* [TC_CELL] the cell's form: SPK_CELL_* (lstm_cell_forms.cuh) */
} spk_tc_variant;

extern const spk_kernel_family spk_tensor_core_family;

/* What a variant implies at its hidden size (the kernel's own formulas; its
 * TC_EXPECTED_SMEM check keeps smem_bytes equal to what it needs). */
typedef struct spk_tc_sizes { /* int64_t each: plan.kernel's fields, read as members */
    int64_t units;         /* hidden units a block */
    int64_t warps, threads;
    int64_t n_tiles;       /* n-tiles of 8 batch rows a tile */
    int64_t cells;         /* cells a thread */
    int64_t row_words;     /* 8-byte words of a row of h (mma.sync's buffer) */
    int64_t buffer_bytes;  /* one h buffer */
    int64_t k_steps;       /* mma k-steps over the hidden size */
    int64_t r_registers;   /* registers of R a thread */
    int64_t smem_bytes;    /* what the kernel needs */
    int64_t launch_smem;   /* what the launch asks for (exclusive_sm: at least SPK_TC_EXCLUSIVE_SMEM) */
} spk_tc_sizes;

/* Dynamic shared memory an exclusive_sm launch asks for at least: more than
 * half of the 228 KiB an SM has, so a second block never fits beside it. */
#define SPK_TC_EXCLUSIVE_SMEM ((int64_t)115 * 1024)

/* The variant of a batch for the options given (each left out: the batch's
 * row), checked. */
int spk_tc_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given, spk_tc_variant *out);
/* The sizes of a variant, after every check that needs them. */
int spk_tc_variant_derive(const spk_tc_variant *v, spk_tc_sizes *out);

#endif
