/* Shared between the files of src/cuda; not part of the public API. */
#ifndef SPK_CUDA_INTERNAL_H
#define SPK_CUDA_INTERNAL_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/runtime.h"

/* 0 on cudaSuccess; else clears the (non-sticky) error and fails with
 * "spk.cuda: <what>: <description> (<name>)". */
int spk_cuda_check(cudaError_t err, const char *what);

/* The module's cudaLibrary_t, loading it on first use (needs a device). */
typedef struct spk_module spk_module;
int spk_module_library(spk_module *m, void **library);

/* The 3xtf32 gemm of spk_gemm, after its checks: m, n, k and count as
 * spk_gemm_check gave them, on stream s of the current device. */
int spk_gemm_3xtf32(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s);
/* The same with B given as its TF32 parts (g->b, g->b_lo): the TMA form
 * (src/cuda/gemm_3xtf32_tma.c). */
int spk_gemm_3xtf32_split(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s);
/* b_lo against b: f32, b's shape and strides (no device needed). */
int spk_gemm_split_layout_check(const spk_tensor *b, const spk_tensor *b_lo);
/* Loads the split and TMA kernels (both parts' forms) and finds the
 * driver's tensor-map encoder. */
int spk_gemm_3xtf32_tma_prepare(void);

/* The 3xtf32 kernels, each compiled and loaded once per device on first use
 * (src/cuda/gemm_3xtf32.c holds the table of their files and entries). */
enum {
    SPK_GEMM_3XTF32_MMA,   /* kernels/gemm_3xtf32.cu: mma.sync, any layout */
    SPK_GEMM_3XTF32_WGMMA, /* kernels/gemm_3xtf32_wgmma.cu: both operands split per block */
    SPK_GEMM_3XTF32_TMA,   /* kernels/gemm_3xtf32_tma.cu: B split beforehand, TMA stages */
    SPK_GEMM_3XTF32_SPLIT, /* kernels/gemm_3xtf32.cu's spk_tf32_split */
    SPK_GEMM_3XF16_TMA,    /* kernels/gemm_3xtf32_tma.cu's FP16 parts */
    SPK_GEMM_3XTF32_TMA_RESIDENT, /* the TMA form with B's panel resident */
    SPK_GEMM_3XF16_TMA_RESIDENT,  /* its FP16 parts, B's panel resident */
    SPK_GEMM_3XTF32_FORMS
};
spk_kernel *spk_gemm_3xtf32_kernel(int form);
/* Whether the current device runs the sm_90a forms (compute capability 9.0). */
int spk_gemm_3xtf32_device_has_wgmma(bool *out);

/* Strides of op(X)'s two dimensions (rows, columns; trans swaps them) and
 * between the matrices of a 3-D X (0 for a 2-D one, which every matrix of a
 * batch shares), in elements. */
typedef struct spk_gemm_strides {
    long long s0, s1, batch;
} spk_gemm_strides;
spk_gemm_strides spk_gemm_matrix_strides(const spk_tensor *t, bool trans);

#endif
