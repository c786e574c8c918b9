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

#endif
