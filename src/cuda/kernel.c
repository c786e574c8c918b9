/* Kernels from modules: attributes, occupancy, argument checking and launches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cluster.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

struct spk_kernel {
    spk_module *module;
    cudaKernel_t handle;
    char *name;
    int nparams; /* -1 until asked */
    size_t param_sizes[SPK_MAX_KERNEL_ARGS];
};

spk_kernel *spk_module_kernel(spk_module *m, const char *name)
{
    void *library;
    if (spk_module_library(m, &library))
        return NULL;
    cudaKernel_t handle;
    cudaError_t err = cudaLibraryGetKernel(&handle, (cudaLibrary_t)library, name);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return spk_fail_null("spk.cuda: module has no kernel named \"%s\" (%s; kernels must be "
                             "declared extern \"C\" __global__)", name, cudaGetErrorString(err));
    }
    spk_kernel *k = calloc(1, sizeof *k);
    if (!k || !(k->name = strdup(name))) {
        free(k);
        return spk_fail_null("out of memory allocating a kernel");
    }
    k->module = m;
    spk_module_retain(m);
    k->handle = handle;
    k->nparams = -1;
    return k;
}

void spk_kernel_free(spk_kernel *k)
{
    if (!k)
        return;
    spk_module_release(k->module);
    free(k->name);
    free(k);
}

const char *spk_kernel_name(const spk_kernel *k) { return k->name; }
void *spk_kernel_handle(const spk_kernel *k) { return k->handle; }

static int kernel_check(spk_kernel *k, cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    spk_cuda_check(err, what);
    spk_error_prefix("kernel %s", k->name);
    return -1;
}

int spk_kernel_attributes(spk_kernel *k, spk_kernel_attrs *out)
{
    struct cudaFuncAttributes a;
    if (kernel_check(k, cudaFuncGetAttributes(&a, (const void *)k->handle), "cudaFuncGetAttributes"))
        return -1;
    memset(out, 0, sizeof *out);
    out->registers = a.numRegs;
    out->local_bytes = a.localSizeBytes;
    out->static_smem = a.sharedSizeBytes;
    out->const_bytes = a.constSizeBytes;
    out->max_threads = a.maxThreadsPerBlock;
    out->max_dynamic_smem = a.maxDynamicSharedSizeBytes;
    out->ptx_version = a.ptxVersion;
    out->binary_version = a.binaryVersion;
    return 0;
}

int spk_kernel_set_max_dynamic_smem(spk_kernel *k, size_t bytes)
{
    return kernel_check(k, cudaFuncSetAttribute((const void *)k->handle, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)bytes), "cudaFuncSetAttribute(max dynamic shared memory)");
}

/* Dynamic shared memory above the default 48 KiB must be opted into first. */
static int allow_smem(spk_kernel *k, size_t dyn_smem)
{
    if (dyn_smem <= 48 * 1024)
        return 0;
    struct cudaFuncAttributes a;
    if (kernel_check(k, cudaFuncGetAttributes(&a, (const void *)k->handle), "cudaFuncGetAttributes"))
        return -1;
    if ((size_t)a.maxDynamicSharedSizeBytes >= dyn_smem)
        return 0;
    return spk_kernel_set_max_dynamic_smem(k, dyn_smem);
}

int spk_kernel_occupancy(spk_kernel *k, int block_threads, size_t dyn_smem, int *blocks_per_sm)
{
    if (block_threads <= 0)
        return spk_fail("kernel %s: block size %d must be positive", k->name, block_threads);
    if (allow_smem(k, dyn_smem))
        return -1;
    return kernel_check(k, cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, (const void *)k->handle,
                                                                         block_threads, dyn_smem),
                        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
}

int spk_kernel_cooperative_capacity(spk_kernel *k, int block_threads, size_t dyn_smem, int *blocks)
{
    int per_sm, dev, sms;
    if (spk_kernel_occupancy(k, block_threads, dyn_smem, &per_sm) || spk_device_current(&dev) ||
        spk_cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute"))
        return -1;
    *blocks = per_sm * sms;
    return 0;
}

int spk_kernel_params(spk_kernel *k, int *count, size_t *sizes, int max)
{
    if (k->nparams < 0) {
        /* The runtime has no parameter count: ask by index until it refuses. */
        int n = 0;
        for (; n < SPK_MAX_KERNEL_ARGS; n++) {
            size_t offset, size;
            cudaError_t err = cudaFuncGetParamInfo((const void *)k->handle, (size_t)n, &offset, &size);
            if (err == cudaErrorInvalidValue)
                break;
            if (kernel_check(k, err, "cudaFuncGetParamInfo"))
                return -1;
            k->param_sizes[n] = size;
        }
        cudaGetLastError();
        k->nparams = n;
    }
    *count = k->nparams;
    for (int i = 0; i < k->nparams && i < max; i++)
        sizes[i] = k->param_sizes[i];
    return 0;
}

size_t spk_arg_size(spk_arg_kind kind)
{
    switch (kind) {
    case SPK_ARG_U32: case SPK_ARG_I32: case SPK_ARG_F32: return 4;
    case SPK_ARG_U64: case SPK_ARG_I64: case SPK_ARG_F64: return 8;
    case SPK_ARG_PTR: return sizeof(void *);
    }
    return 0;
}

const char *spk_arg_kind_name(spk_arg_kind kind)
{
    static const char *names[] = {"u32", "i32", "u64", "i64", "f32", "f64", "pointer"};
    return (unsigned)kind < sizeof names / sizeof *names ? names[kind] : "?";
}

int spk_pack_args(const char *kernel_name, const spk_arg *args, int nargs, const size_t *param_sizes, int nparams,
                  void **out)
{
    const char *name = kernel_name ? kernel_name : "?";
    if (nargs != nparams)
        return spk_fail("kernel %s takes %d argument%s, got %d", name, nparams, nparams == 1 ? "" : "s", nargs);
    for (int i = 0; i < nargs; i++) {
        size_t size = spk_arg_size(args[i].kind);
        if (size == 0)
            return spk_fail("kernel %s: argument %d has an unknown kind", name, i + 1);
        if (size != param_sizes[i])
            return spk_fail("kernel %s: argument %d is %s (%zu bytes), parameter %d is %zu bytes", name, i + 1,
                            spk_arg_kind_name(args[i].kind), size, i + 1, param_sizes[i]);
        out[i] = (void *)&args[i].v;
    }
    return 0;
}

int spk_kernel_launch_raw(spk_kernel *k, const spk_launch_config *cfg, void **args)
{
    spk_stream *s = spk_stream_or_default(cfg->stream);
    if (!s)
        return -1;
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof lc);
    lc.gridDim = (dim3){cfg->grid[0] ? cfg->grid[0] : 1, cfg->grid[1] ? cfg->grid[1] : 1, cfg->grid[2] ? cfg->grid[2] : 1};
    lc.blockDim = (dim3){cfg->block[0] ? cfg->block[0] : 1, cfg->block[1] ? cfg->block[1] : 1,
                         cfg->block[2] ? cfg->block[2] : 1};
    lc.dynamicSmemBytes = cfg->smem;
    lc.stream = (cudaStream_t)spk_stream_handle(s);
    cudaLaunchAttribute attrs[2];
    unsigned nattrs = 0;
    if (cfg->cooperative) {
        attrs[nattrs].id = cudaLaunchAttributeCooperative;
        attrs[nattrs].val.cooperative = 1;
        nattrs++;
    }
    if (cfg->cluster[0] || cfg->cluster[1] || cfg->cluster[2]) {
        attrs[nattrs].id = cudaLaunchAttributeClusterDimension;
        attrs[nattrs].val.clusterDim.x = cfg->cluster[0] ? cfg->cluster[0] : 1;
        attrs[nattrs].val.clusterDim.y = cfg->cluster[1] ? cfg->cluster[1] : 1;
        attrs[nattrs].val.clusterDim.z = cfg->cluster[2] ? cfg->cluster[2] : 1;
        nattrs++;
    }
    lc.attrs = nattrs ? attrs : NULL;
    lc.numAttrs = nattrs;
    if (allow_smem(k, cfg->smem) || spk_kernel_allow_cluster(k, cfg->cluster))
        return -1;
    if (kernel_check(k, cudaLaunchKernelExC(&lc, (const void *)k->handle, args), "launch"))
        return -1;
    for (int i = 0; i < cfg->nuses; i++)
        spk_storage_use(cfg->uses[i], s);
    return 0;
}

int spk_kernel_launch(spk_kernel *k, const spk_launch_config *cfg, const spk_arg *args, int nargs)
{
    int nparams;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    void *packed[SPK_MAX_KERNEL_ARGS];
    if (nargs > SPK_MAX_KERNEL_ARGS)
        return spk_fail("kernel %s: %d arguments is more than the %d supported", k->name, nargs, SPK_MAX_KERNEL_ARGS);
    if (spk_kernel_params(k, &nparams, sizes, SPK_MAX_KERNEL_ARGS) ||
        spk_pack_args(k->name, args, nargs, sizes, nparams, packed))
        return -1;
    return spk_kernel_launch_raw(k, cfg, packed);
}
