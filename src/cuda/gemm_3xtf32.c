/* The split-TF32 ("3xtf32") GEMM: spk_gemm's math SPK_MATH_3XTF32 runs
 * spk's kernels (NVRTC, compiled and loaded once per device) in place of
 * cuBLAS. The kernel's long comment says how the split and the sums keep
 * FP32's accuracy; this file turns a checked spk_gemm_args into its strides
 * and launch. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"
#include "gemm_3xtf32_config.cuh"
#include "gemm_3xtf32_tma.cuh"

/* The kernels of math 3xtf32. The wgmma form (kernels/gemm_3xtf32_wgmma.cu,
 * compiled for sm_90a) runs on compute capability 9.0 when both operands run
 * along k with unit stride and 16-byte alignment; the mma.sync form
 * (kernels/gemm_3xtf32.cu, sm_80 and up) takes every other case. The TMA
 * form (kernels/gemm_3xtf32_tma.cu, sm_90a; src/cuda/gemm_3xtf32_tma.c) takes
 * B already split (spk_gemm_args.b_lo), with the split kernel
 * (kernels/gemm_3xtf32.cu's spk_tf32_split) that makes the parts. Their
 * tiles, threads and shared memory come from kernels/gemm_3xtf32_config.cuh
 * and kernels/gemm_3xtf32_tma.cuh, which the kernels include too. */
typedef enum { FORM_MMA = SPK_GEMM_3XTF32_MMA, FORM_WGMMA = SPK_GEMM_3XTF32_WGMMA } kernel_form;

typedef struct form_launch {
    int threads, tile_m, tile_n;
    size_t smem;
} form_launch;

static form_launch launch_of(kernel_form form)
{
    if (form == FORM_WGMMA)
        return (form_launch){SPK_WG_THREADS, SPK_WG_BM, SPK_WG_BN, SPK_WG_SMEM_BYTES};
    return (form_launch){SPK_GEMM_THREADS, SPK_GEMM_BM, SPK_GEMM_BN, SPK_GEMM_SMEM_BYTES};
}

static const struct {
    const char *file, *entry, *arch; /* arch NULL: the device's */
    size_t smem;                     /* dynamic shared memory the kernel is allowed */
} forms[SPK_GEMM_3XTF32_FORMS] = {
    [SPK_GEMM_3XTF32_MMA] = {"gemm_3xtf32.cu", "spk_gemm_3xtf32", NULL, SPK_GEMM_SMEM_BYTES},
    [SPK_GEMM_3XTF32_WGMMA] = {"gemm_3xtf32_wgmma.cu", "spk_gemm_3xtf32_wgmma", "sm_90a", SPK_WG_SMEM_BYTES},
    [SPK_GEMM_3XTF32_TMA] = {"gemm_3xtf32_tma.cu", "spk_gemm_3xtf32_tma", "sm_90a", SPK_TMA_SMEM_LIMIT},
    [SPK_GEMM_3XTF32_SPLIT] = {"gemm_3xtf32.cu", "spk_tf32_split", NULL, 0},
    [SPK_GEMM_3XF16_TMA] = {"gemm_3xtf32_tma.cu", "spk_gemm_3xf16_tma", "sm_90a", SPK_TMA_SMEM_LIMIT},
    [SPK_GEMM_3XTF32_TMA_RESIDENT] = {"gemm_3xtf32_tma.cu", "spk_gemm_3xtf32_tma_resident", "sm_90a",
                                      SPK_TMA_SMEM_LIMIT},
    [SPK_GEMM_3XF16_TMA_RESIDENT] = {"gemm_3xtf32_tma.cu", "spk_gemm_3xf16_tma_resident", "sm_90a",
                                     SPK_TMA_SMEM_LIMIT},
};

#define MAX_DEVICES 64
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static spk_kernel *kernels[MAX_DEVICES][SPK_GEMM_3XTF32_FORMS];

static spk_module *compile_form(int form, const char *arch)
{
    const char *kernel_dir = spk_kernel_dir();
    if (!kernel_dir)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kernel_dir, forms[form].file);
    spk_compile_options opts = {.file = path, .arch = arch ? arch : forms[form].arch};
    return spk_compile(&opts);
}

spk_module *spk_gemm_3xtf32_compile(const char *arch) { return compile_form(FORM_MMA, arch); }

spk_module *spk_gemm_3xtf32_wgmma_compile(void) { return compile_form(FORM_WGMMA, NULL); }

spk_module *spk_gemm_3xtf32_tma_compile(void) { return compile_form(SPK_GEMM_3XTF32_TMA, NULL); }

int spk_gemm_3xtf32_device_has_wgmma(bool *out)
{
    char arch[32];
    if (spk_device_arch(arch, sizeof arch))
        return -1;
    *out = strcmp(arch, "sm_90") == 0;
    return 0;
}

spk_kernel *spk_gemm_3xtf32_kernel(int form)
{
    int device = 0;
    if (spk_device_current(&device))
        return NULL;
    if (device < 0 || device >= MAX_DEVICES)
        return spk_fail_null("gemm 3xtf32: device %d is beyond the %d this build supports", device, MAX_DEVICES);
    pthread_mutex_lock(&lock);
    spk_kernel *k = kernels[device][form];
    if (!k) {
        spk_module *m = compile_form(form, NULL);
        if (m) {
            k = spk_module_kernel(m, forms[form].entry);
            spk_module_release(m); /* the kernel keeps it */
            if (k && forms[form].smem > 48 * 1024 && spk_kernel_set_max_dynamic_smem(k, forms[form].smem)) {
                spk_kernel_free(k);
                k = NULL;
            }
        }
        if (!k)
            spk_error_prefix("gemm 3xtf32");
        kernels[device][form] = k;
    }
    pthread_mutex_unlock(&lock);
    return k;
}

int spk_gemm_prepare(spk_math_mode math)
{
    if (spk_cuda_require())
        return -1;
    if (math == SPK_MATH_3XTF32) {
        bool wg = false, split = false;
        if (spk_gemm_3xtf32_device_has_wgmma(&wg) || spk_gemm_3xtf32_split_weights(&split) ||
            !spk_gemm_3xtf32_kernel(FORM_MMA))
            return -1;
        if (wg && !spk_gemm_3xtf32_kernel(FORM_WGMMA))
            return -1;
        /* A plan that keeps its weights split: the split and TMA kernels, the tensor-map encoder. */
        return split && spk_gemm_3xtf32_tma_prepare() ? -1 : 0;
    }
    int device = 0;
    return spk_device_current(&device) ? -1 : spk_blas_prepare(device);
}

void spk_gemm_3xtf32_release(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_DEVICES; i++)
        for (int f = 0; f < SPK_GEMM_3XTF32_FORMS; f++) {
            spk_kernel_free(kernels[i][f]);
            kernels[i][f] = NULL;
        }
    pthread_mutex_unlock(&lock);
}

spk_gemm_strides spk_gemm_matrix_strides(const spk_tensor *t, bool trans)
{
    int d = t->ndim - 2;
    spk_gemm_strides s = {t->strides[d], t->strides[d + 1], t->ndim == 3 ? t->strides[0] : 0};
    if (trans) {
        long long x = s.s0;
        s.s0 = s.s1;
        s.s1 = x;
    }
    return s;
}

/* 16-byte chunks along k: unit k stride, every row start (and matrix start)
 * a multiple of 4 floats from a 16-byte aligned base, k a multiple of 4. */
static int vector_ok(const spk_tensor *t, long long s_row, long long s_k, long long s_batch, int64_t k)
{
    uintptr_t base = (uintptr_t)spk_tensor_data(t);
    return s_k == 1 && k % 4 == 0 && s_row % 4 == 0 && s_batch % 4 == 0 && base % 16 == 0;
}

#define ARG(kind, field, value) args[nargs++] = (spk_arg){kind, {.field = (value)}}

/* An operand's kernel arguments into args (returns how many): its pointer,
 * row and batch strides, and for the mma form its k stride and whether it
 * is read in vectors. */
static int operand_args(spk_arg *args, kernel_form form, const spk_tensor *t, spk_gemm_strides st, int vec)
{
    int nargs = 0;
    ARG(SPK_ARG_PTR, ptr, spk_tensor_data(t));
    ARG(SPK_ARG_I64, i64, st.s0);
    if (form == FORM_MMA)
        ARG(SPK_ARG_I64, i64, st.s1);
    ARG(SPK_ARG_I64, i64, st.batch);
    if (form == FORM_MMA)
        ARG(SPK_ARG_I32, i32, vec);
    return nargs;
}

int spk_gemm_3xtf32(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s)
{
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return spk_fail("gemm 3xtf32: %lld x %lld x %lld is beyond 2^31 - 1 in a dimension", (long long)m,
                        (long long)n, (long long)k);
    /* op(A) is [m, k]: rows i, columns p; op(B) is [k, n], read as its
     * transpose [n, k] so both operands run along k. */
    spk_gemm_strides a = spk_gemm_matrix_strides(g->a, g->transa);
    spk_gemm_strides b = spk_gemm_matrix_strides(g->b, !g->transb);
    spk_gemm_strides c = spk_gemm_matrix_strides(g->c, false);
    int vec_a = vector_ok(g->a, a.s0, a.s1, a.batch, k), vec_b = vector_ok(g->b, b.s0, b.s1, b.batch, k);
    bool wg = false;
    if (spk_gemm_3xtf32_device_has_wgmma(&wg))
        return -1;
    kernel_form form = wg && vec_a && vec_b ? FORM_WGMMA : FORM_MMA;
    form_launch l = launch_of(form);
    int64_t row_tiles = (m + l.tile_m - 1) / l.tile_m, col_tiles = (n + l.tile_n - 1) / l.tile_n;
    if (row_tiles > 65535 || count > 65535)
        return spk_fail("gemm 3xtf32: %lld row tiles or %lld matrices, the launch takes at most 65535 of each",
                        (long long)row_tiles, (long long)count);
    spk_kernel *kernel = spk_gemm_3xtf32_kernel(form);
    if (!kernel)
        return -1;
    spk_arg args[19];
    int nargs = 0;
    ARG(SPK_ARG_I32, i32, (int32_t)m);
    ARG(SPK_ARG_I32, i32, (int32_t)n);
    ARG(SPK_ARG_I32, i32, (int32_t)k);
    nargs += operand_args(args + nargs, form, g->a, a, vec_a);
    nargs += operand_args(args + nargs, form, g->b, b, vec_b);
    ARG(SPK_ARG_PTR, ptr, spk_tensor_data(g->c));
    ARG(SPK_ARG_I64, i64, c.s0);
    ARG(SPK_ARG_I64, i64, c.s1);
    ARG(SPK_ARG_I64, i64, c.batch);
    ARG(SPK_ARG_F32, f32, g->alpha);
    ARG(SPK_ARG_F32, f32, g->beta);
#undef ARG
    spk_storage *uses[] = {g->a->storage, g->b->storage, g->c->storage};
    spk_launch_config cfg = {.grid = {(unsigned)col_tiles, (unsigned)row_tiles, (unsigned)count},
                             .block = {(unsigned)l.threads, 1, 1},
                             .smem = l.smem,
                             .stream = s,
                             .uses = uses,
                             .nuses = 3};
    if (spk_kernel_launch(kernel, &cfg, args, nargs)) {
        spk_error_prefix("gemm 3xtf32 (%lld x %lld x %lld)", (long long)m, (long long)n, (long long)k);
        return -1;
    }
    return 0;
}
