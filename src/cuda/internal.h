/* Shared between the files of src/cuda; not part of the public API. */
#ifndef SPK_CUDA_INTERNAL_H
#define SPK_CUDA_INTERNAL_H

#include <cuda_runtime.h>

/* 0 on cudaSuccess; else clears the (non-sticky) error and fails with
 * "spk.cuda: <what>: <description> (<name>)". */
int spk_cuda_check(cudaError_t err, const char *what);

/* The module's cudaLibrary_t, loading it on first use (needs a device). */
typedef struct spk_module spk_module;
int spk_module_library(spk_module *m, void **library);

#endif
