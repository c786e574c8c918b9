/* The split-TF32 ("3xtf32") GEMM: spk_gemm's math SPK_MATH_3XTF32 runs
 * kernels/gemm_3xtf32.cu (NVRTC, compiled and loaded once per device) in place
 * of cuBLAS. The kernel's long comment says how the split and the sums keep
 * FP32's accuracy; this file turns a checked spk_gemm_args into its strides
 * and launch. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "core/error.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

/* The kernel's configuration (its macros): warps along m and n, mma tiles a
 * warp along m (16 rows each) and n (8 columns), k-tile stages of 32 floats,
 * blocks an SM (launch bounds) and k-steps of 8 a slice. The tile, the
 * threads and the shared memory derive from it, here and in the kernel. */
static const struct {
    int warps_m, warps_n, wm, wn, stages, min_blocks, slice_steps;
} config = {2, 2, 4, 4, 3, 2, 2};
enum { K_TILE = 32, ROW_PAD = 4 };
#define THREADS (32 * config.warps_m * config.warps_n)
#define TILE_M (config.warps_m * config.wm * 16)
#define TILE_N (config.warps_n * config.wn * 8)
#define SMEM_BYTES ((size_t)config.stages * (TILE_M + TILE_N) * (K_TILE + ROW_PAD) * sizeof(float))

#define MAX_DEVICES 64
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static spk_kernel *kernels[MAX_DEVICES];

spk_module *spk_gemm_3xtf32_compile(const char *arch)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/gemm_3xtf32.cu", spk_kernel_dir());
    const char *names[] = {"SPK_GEMM_WARPS_M", "SPK_GEMM_WARPS_N", "SPK_GEMM_WM", "SPK_GEMM_WN",
                           "SPK_GEMM_STAGES", "SPK_GEMM_MIN_BLOCKS", "SPK_GEMM_SLICE_STEPS"};
    int values[] = {config.warps_m, config.warps_n, config.wm, config.wn,
                    config.stages, config.min_blocks, config.slice_steps};
    enum { NDEF = sizeof names / sizeof names[0] };
    char text[NDEF][16];
    spk_define defines[NDEF];
    for (int i = 0; i < NDEF; i++) {
        snprintf(text[i], sizeof text[i], "%d", values[i]);
        defines[i] = (spk_define){names[i], text[i]};
    }
    spk_compile_options opts = {.file = path, .defines = defines, .ndefines = NDEF, .arch = arch};
    return spk_compile(&opts);
}

/* The kernel for the current device, compiled and loaded on first use. */
static spk_kernel *kernel_for_current_device(void)
{
    int device = 0;
    if (spk_device_current(&device))
        return NULL;
    if (device < 0 || device >= MAX_DEVICES)
        return spk_fail_null("gemm 3xtf32: device %d is beyond the %d this build supports", device, MAX_DEVICES);
    pthread_mutex_lock(&lock);
    spk_kernel *k = kernels[device];
    if (!k) {
        spk_module *m = spk_gemm_3xtf32_compile(NULL);
        if (m) {
            k = spk_module_kernel(m, "spk_gemm_3xtf32");
            spk_module_release(m); /* the kernel keeps it */
            if (k && spk_kernel_set_max_dynamic_smem(k, SMEM_BYTES)) {
                spk_kernel_free(k);
                k = NULL;
            }
        }
        if (!k)
            spk_error_prefix("gemm 3xtf32");
        kernels[device] = k;
    }
    pthread_mutex_unlock(&lock);
    return k;
}

int spk_gemm_prepare(spk_math_mode math)
{
    if (spk_cuda_require())
        return -1;
    if (math == SPK_MATH_3XTF32)
        return kernel_for_current_device() ? 0 : -1;
    int device = 0;
    return spk_device_current(&device) ? -1 : spk_blas_prepare(device);
}

void spk_gemm_3xtf32_release(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_DEVICES; i++) {
        spk_kernel_free(kernels[i]);
        kernels[i] = NULL;
    }
    pthread_mutex_unlock(&lock);
}

/* Strides of the matrix dimensions of t (the last two) and between the
 * matrices of a 3-D t (0 for a 2-D one, which every matrix of a batch shares). */
typedef struct strides3 {
    long long s0, s1, batch;
} strides3;

static strides3 matrix_strides(const spk_tensor *t, bool trans)
{
    int d = t->ndim - 2;
    strides3 s = {t->strides[d], t->strides[d + 1], t->ndim == 3 ? t->strides[0] : 0};
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

int spk_gemm_3xtf32(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s)
{
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return spk_fail("gemm 3xtf32: %lld x %lld x %lld is beyond 2^31 - 1 in a dimension", (long long)m,
                        (long long)n, (long long)k);
    int64_t row_tiles = (m + TILE_M - 1) / TILE_M, col_tiles = (n + TILE_N - 1) / TILE_N;
    if (row_tiles > 65535 || count > 65535)
        return spk_fail("gemm 3xtf32: %lld row tiles or %lld matrices, the launch takes at most 65535 of each",
                        (long long)row_tiles, (long long)count);
    spk_kernel *kernel = kernel_for_current_device();
    if (!kernel)
        return -1;
    /* op(A) is [m, k]: rows i, columns p; op(B) is [k, n], read as its
     * transpose [n, k] so both operands run along k. */
    strides3 a = matrix_strides(g->a, g->transa);
    strides3 b = matrix_strides(g->b, !g->transb);
    strides3 c = matrix_strides(g->c, false);
    spk_arg args[] = {
        {SPK_ARG_I32, {.i32 = (int32_t)m}},
        {SPK_ARG_I32, {.i32 = (int32_t)n}},
        {SPK_ARG_I32, {.i32 = (int32_t)k}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(g->a)}},
        {SPK_ARG_I64, {.i64 = a.s0}},
        {SPK_ARG_I64, {.i64 = a.s1}},
        {SPK_ARG_I64, {.i64 = a.batch}},
        {SPK_ARG_I32, {.i32 = vector_ok(g->a, a.s0, a.s1, a.batch, k)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(g->b)}},
        {SPK_ARG_I64, {.i64 = b.s0}},
        {SPK_ARG_I64, {.i64 = b.s1}},
        {SPK_ARG_I64, {.i64 = b.batch}},
        {SPK_ARG_I32, {.i32 = vector_ok(g->b, b.s0, b.s1, b.batch, k)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(g->c)}},
        {SPK_ARG_I64, {.i64 = c.s0}},
        {SPK_ARG_I64, {.i64 = c.s1}},
        {SPK_ARG_I64, {.i64 = c.batch}},
        {SPK_ARG_F32, {.f32 = g->alpha}},
        {SPK_ARG_F32, {.f32 = g->beta}},
    };
    spk_storage *uses[] = {g->a->storage, g->b->storage, g->c->storage};
    spk_launch_config cfg = {.grid = {(unsigned)col_tiles, (unsigned)row_tiles, (unsigned)count},
                             .block = {THREADS, 1, 1},
                             .smem = SMEM_BYTES,
                             .stream = s,
                             .uses = uses,
                             .nuses = 3};
    if (spk_kernel_launch(kernel, &cfg, args, (int)(sizeof args / sizeof args[0]))) {
        spk_error_prefix("gemm 3xtf32 (%lld x %lld x %lld)", (long long)m, (long long)n, (long long)k);
        return -1;
    }
    return 0;
}
