/* The split-TF32 GEMM's TMA form (kernels/gemm_3xtf32_tma.cu): spk_gemm with
 * B given as its two TF32 parts (b, b_lo: spk_tf32_split), on compute
 * capability 9.0. This file checks what the form accepts, encodes the tensor
 * maps through the driver (cuTensorMapEncodeTiled, reached with
 * cudaGetDriverEntryPointByVersion: spk links the CUDA runtime, not libcuda)
 * and launches the persistent kernel; the split itself is here too. */
#include "cuda/gemm_3xtf32_tma.h"

#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"
#include "gemm_3xtf32_tma.cuh"

/* Whether stack plans of math 3xtf32 keep their weights split and project
 * with this form by default (on compute capability 9.0; elsewhere, and when
 * false, the forms of src/cuda/gemm_3xtf32.c). On the H200 it was correct and
 * faster than the classic form on every shape measured (docs/performance.md).
 * $SPK_GEMM_3XTF32 overrides it for a process: "tma" or "classic". */
static const bool tma_form_by_default = true;

int spk_gemm_3xtf32_form_wanted(const char *env, bool *tma)
{
    *tma = tma_form_by_default;
    if (!env || !*env)
        return 0;
    if (strcmp(env, "tma") == 0)
        *tma = true;
    else if (strcmp(env, "classic") == 0)
        *tma = false;
    else
        return spk_fail("gemm 3xtf32: $SPK_GEMM_3XTF32 is \"%.64s\"; it takes \"tma\" (split weights, the TMA "
                        "form) or \"classic\"",
                        env);
    return 0;
}

int spk_gemm_3xtf32_split_weights(bool *out)
{
    bool want = false, wg = false;
    if (spk_gemm_3xtf32_form_wanted(getenv("SPK_GEMM_3XTF32"), &want))
        return -1;
    if (want && spk_gemm_3xtf32_device_has_wgmma(&wg))
        return -1;
    *out = want && wg;
    return 0;
}

/* ---- the plan: what the form accepts, its maps and tiles (no device) ------ */

static int map_of(const spk_gemm_tma_matrix *x, const char *name, int64_t count, spk_gemm_tma_map *map,
                  int *batched)
{
    if (x->k_stride != 1)
        return spk_fail("gemm 3xtf32 (TMA form): %s must run along k with unit stride (its k stride is %lld)", name,
                        (long long)x->k_stride);
    if (x->address % 16 != 0)
        return spk_fail("gemm 3xtf32 (TMA form): %s must start 16-byte aligned", name);
    if (x->row_stride % 4 != 0 || x->row_stride < 1)
        return spk_fail("gemm 3xtf32 (TMA form): %s's rows must be a multiple of 4 floats apart (%lld)", name,
                        (long long)x->row_stride);
    if (x->rows > INT32_MAX || x->k > INT32_MAX)
        return spk_fail("gemm 3xtf32 (TMA form): %s is %lld x %lld, beyond 2^31 - 1", name, (long long)x->rows,
                        (long long)x->k);
    *batched = x->matrix_stride != 0 && count > 1;
    if (*batched && (x->matrix_stride % 4 != 0 || x->matrix_stride < 0))
        return spk_fail("gemm 3xtf32 (TMA form): %s's matrices must be a multiple of 4 floats apart (%lld)", name,
                        (long long)x->matrix_stride);
    /* One matrix (or one shared by the batch): a third dimension of size 1,
     * its stride what a packed batch would have. */
    const uint64_t stride_limit = 1ull << 40, row_bytes = 4 * (uint64_t)x->row_stride;
    uint64_t matrix_bytes = *batched ? 4 * (uint64_t)x->matrix_stride : row_bytes * (uint64_t)x->rows;
    if (row_bytes >= stride_limit || (*batched && matrix_bytes >= stride_limit))
        return spk_fail("gemm 3xtf32 (TMA form): %s's strides reach 2^40 bytes, beyond a tensor map's", name);
    if (matrix_bytes >= stride_limit)
        matrix_bytes = row_bytes; /* a dimension of size 1: any stride the map takes */
    *map = (spk_gemm_tma_map){.dims = {(uint64_t)x->k, (uint64_t)x->rows, *batched ? (uint64_t)count : 1},
                              .strides = {row_bytes, matrix_bytes},
                              .box = {SPK_TMA_BK, SPK_TMA_BM, 1}};
    return 0;
}

/* C's map for TMA's bulk store (the SPK_TMA_STORE_C variant), where C suits
 * one: columns with unit stride, a 16-byte aligned start, rows (and matrices
 * of a batch) multiples of 16 bytes apart and under 2^40, rows no closer
 * than n columns, and beta 0. Else c_tma stays 0 and the kernel stores
 * directly. */
static void c_map_of(const spk_gemm_tma_c *c, int64_t m, int64_t n, int64_t count, spk_gemm_tma_plan *out)
{
    const uint64_t stride_limit = 1ull << 40;
    const bool batched = count > 1;
    if (c->beta != 0.0f || c->c_sn != 1 || c->address % 16 != 0 || c->c_sm % 4 != 0 || c->c_sm < n ||
        (batched && (c->c_sb % 4 != 0 || c->c_sb < c->c_sm * m)) || m > INT32_MAX || n > INT32_MAX)
        return;
    const uint64_t row_bytes = 4 * (uint64_t)c->c_sm;
    uint64_t matrix_bytes = batched ? 4 * (uint64_t)c->c_sb : row_bytes * (uint64_t)m;
    if (row_bytes >= stride_limit || (batched && matrix_bytes >= stride_limit))
        return;
    if (matrix_bytes >= stride_limit)
        matrix_bytes = row_bytes; /* one matrix: a dimension of size 1 takes any stride */
    out->c = (spk_gemm_tma_map){.dims = {(uint64_t)n, (uint64_t)m, batched ? (uint64_t)count : 1},
                                .strides = {row_bytes, matrix_bytes},
                                .box = {SPK_TMA_C_BOX_COLS, SPK_TMA_WG_ROWS, 1}};
    out->c_tma = 1;
}

int spk_gemm_tma_plan_make(const spk_gemm_tma_matrix *a, const spk_gemm_tma_matrix *b, int64_t count,
                           const spk_gemm_tma_c *c, int sms, spk_gemm_tma_plan *out)
{
    memset(out, 0, sizeof *out);
    if (a->k != b->k || a->k < 1)
        return spk_fail("gemm 3xtf32 (TMA form): a has k = %lld, b k = %lld; they must agree and be at least 1",
                        (long long)a->k, (long long)b->k);
    if (a->rows < 1 || b->rows < 1 || count < 1 || count > INT32_MAX || sms < 1)
        return spk_fail("gemm 3xtf32 (TMA form): %lld x %lld x %lld matrices on %d SMs: nothing to launch",
                        (long long)a->rows, (long long)b->rows, (long long)count, sms);
    if (map_of(a, "a", count, &out->a, &out->a_batched) || map_of(b, "b", count, &out->b, &out->b_batched))
        return -1;
    out->row_tiles = (a->rows + SPK_TMA_BM - 1) / SPK_TMA_BM;
    out->col_tiles = (b->rows + SPK_TMA_BN - 1) / SPK_TMA_BN;
    out->k_tiles = (a->k + SPK_TMA_BK - 1) / SPK_TMA_BK;
    out->tiles = out->row_tiles * out->col_tiles * count;
    out->grid = out->tiles < sms ? (unsigned)out->tiles : (unsigned)sms;
    out->threads = SPK_TMA_THREADS;
    out->smem = SPK_TMA_SMEM_LIMIT;
    out->c_vec2 = c->c_sn == 1 && c->c_sm % 2 == 0 && (count == 1 || c->c_sb % 2 == 0) && c->address % 8 == 0;
    c_map_of(c, a->rows, b->rows, count, out);
    return 0;
}

void spk_tf32_split_host(const float *x, float *hi, float *lo, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        spk_tf32_split_value(x[i], &hi[i], &lo[i]);
}

/* ---- from spk_gemm_args ----------------------------------------------------- */

/* op(X) of a tensor as the kernel reads it (B read as its transpose). */
static spk_gemm_tma_matrix matrix_of(const spk_tensor *t, bool trans, int64_t rows, int64_t k)
{
    spk_gemm_strides s = spk_gemm_matrix_strides(t, trans);
    return (spk_gemm_tma_matrix){.address = (uintptr_t)spk_tensor_data(t), .rows = rows, .k = k, .row_stride = s.s0,
                                 .k_stride = s.s1, .matrix_stride = s.batch};
}

int spk_gemm_split_layout_check(const spk_tensor *b, const spk_tensor *b_lo)
{
    if (b_lo->dtype != SPK_F32 || b_lo->ndim != b->ndim)
        return spk_fail("gemm: b_lo must be f32 of b's rank (%d)", b->ndim);
    for (int d = 0; d < b->ndim; d++)
        if (b_lo->shape[d] != b->shape[d] || b_lo->strides[d] != b->strides[d])
            return spk_fail("gemm: b_lo must have b's shape and strides (dimension %d: %lld, stride %lld against "
                            "%lld, %lld)",
                            d + 1, (long long)b_lo->shape[d], (long long)b_lo->strides[d], (long long)b->shape[d],
                            (long long)b->strides[d]);
    return 0;
}

static int same_layout(const spk_tensor *b, const spk_tensor *b_lo)
{
    if (spk_gemm_split_layout_check(b, b_lo))
        return -1;
    if (!spk_tensor_is_device(b_lo) || !spk_tensor_is_device(b) || b_lo->storage->device != b->storage->device)
        return spk_fail("gemm: b_lo must be on b's device");
    return 0;
}

static int sms_of_current_device(int *sms)
{
    int device = 0;
    if (spk_device_current(&device))
        return -1;
    return spk_cuda_check(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device),
                          "cudaDeviceGetAttribute(multiprocessors)");
}

static int plan_of(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, int sms,
                   spk_gemm_tma_plan *p)
{
    spk_gemm_tma_matrix a = matrix_of(g->a, g->transa, m, k);
    spk_gemm_tma_matrix b = matrix_of(g->b, !g->transb, n, k);
    spk_gemm_tma_matrix b_lo = matrix_of(g->b_lo, !g->transb, n, k);
    if (b_lo.address % 16 != 0)
        return spk_fail("gemm 3xtf32 (TMA form): b_lo must start 16-byte aligned");
    spk_gemm_strides cs = spk_gemm_matrix_strides(g->c, false);
    spk_gemm_tma_c c = {.address = (uintptr_t)spk_tensor_data(g->c), .c_sm = cs.s0, .c_sn = cs.s1, .c_sb = cs.batch,
                        .beta = g->beta};
    return spk_gemm_tma_plan_make(&a, &b, count, &c, sms, p);
}

bool spk_gemm_3xtf32_split_fits(const spk_gemm_args *g)
{
    int64_t m, n, k, count;
    spk_gemm_tma_plan p;
    bool fits = g->b_lo && spk_gemm_check(g, &m, &n, &k, &count) == 0 && same_layout(g->b, g->b_lo) == 0 &&
                (m == 0 || n == 0 || count == 0 || plan_of(g, m, n, k, count, 1, &p) == 0);
    spk_clear_error();
    return fits;
}

/* ---- the driver's encoder and the launch ----------------------------------- */

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled;
static pthread_once_t encode_once = PTHREAD_ONCE_INIT;
static cudaError_t encode_lookup_error = cudaSuccess;
static enum cudaDriverEntryPointQueryResult encode_lookup_result = cudaDriverEntryPointSuccess;

static void find_encoder(void)
{
    void *fn = NULL;
    encode_lookup_error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                                           &encode_lookup_result);
    if (encode_lookup_error == cudaSuccess && encode_lookup_result == cudaDriverEntryPointSuccess)
        encode_tiled = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    cudaGetLastError();
}

static int encoder(PFN_cuTensorMapEncodeTiled_v12000 *out)
{
    pthread_once(&encode_once, find_encoder);
    if (!encode_tiled)
        return spk_fail("gemm 3xtf32 (TMA form): the driver has no cuTensorMapEncodeTiled (%s, lookup result %d)",
                        cudaGetErrorString(encode_lookup_error), (int)encode_lookup_result);
    *out = encode_tiled;
    return 0;
}

int spk_gemm_3xtf32_tma_prepare(void)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    return encoder(&fn) || !spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_TMA) ||
                   !spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_SPLIT)
               ? -1
               : 0;
}

static int encode(CUtensorMap *map, const spk_gemm_tma_map *p, void *address, const char *name)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    if (encoder(&fn))
        return -1;
    const cuuint32_t element_strides[3] = {1, 1, 1};
    CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, address, p->dims, p->strides, p->box, element_strides,
                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return spk_fail("gemm 3xtf32 (TMA form): cuTensorMapEncodeTiled for %s failed (CUresult %d; sizes %llu x %llu "
                        "x %llu, strides %llu, %llu bytes)",
                        name, (int)r, (unsigned long long)p->dims[0], (unsigned long long)p->dims[1],
                        (unsigned long long)p->dims[2], (unsigned long long)p->strides[0],
                        (unsigned long long)p->strides[1]);
    return 0;
}

/* The kernel's parameters: four tensor maps (A, B's parts, C), then the
 * scalars and C. */
#define TMA_PARAMS 18
static const size_t tma_param_sizes[TMA_PARAMS] = {sizeof(CUtensorMap), sizeof(CUtensorMap), sizeof(CUtensorMap),
                                                   sizeof(CUtensorMap), 4, 4, 4, 4, 4, 4, sizeof(void *), 8, 8, 8,
                                                   4, 4, 4, 4};

int spk_gemm_3xtf32_split(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s)
{
    if (same_layout(g->b, g->b_lo))
        return -1;
    bool wg = false;
    if (spk_gemm_3xtf32_device_has_wgmma(&wg))
        return -1;
    if (!wg)
        return spk_fail("gemm: b_lo (B split beforehand) runs on the TMA form, which needs compute capability 9.0");
    int sms = 0;
    spk_gemm_tma_plan p;
    if (sms_of_current_device(&sms) || plan_of(g, m, n, k, count, sms, &p))
        return -1;
    CUtensorMap maps[4];
    memset(&maps[3], 0, sizeof maps[3]); /* C's, where it has none: never read */
    const spk_gemm_tma_map *params[3] = {&p.a, &p.b, &p.b};
    const spk_tensor *tensors[3] = {g->a, g->b, g->b_lo};
    const char *names[3] = {"a", "b", "b_lo"};
    for (int i = 0; i < 3; i++)
        if (encode(&maps[i], params[i], spk_tensor_data(tensors[i]), names[i]))
            return -1;
    /* C's map serves the SPK_TMA_STORE_C variant alone; where the driver
     * refuses it the kernel stores C itself, as the default does. */
    if (p.c_tma && encode(&maps[3], &p.c, spk_tensor_data(g->c), "c")) {
        spk_clear_error();
        p.c_tma = 0;
    }
    spk_kernel *kernel = spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_TMA);
    if (!kernel)
        return -1;
    int nparams = 0;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    if (spk_kernel_params(kernel, &nparams, sizes, SPK_MAX_KERNEL_ARGS))
        return -1;
    if (nparams != TMA_PARAMS || memcmp(sizes, tma_param_sizes, sizeof tma_param_sizes) != 0)
        return spk_fail("gemm 3xtf32 (TMA form): the kernel takes %d parameters, not the %d this host passes", nparams,
                        TMA_PARAMS);
    int32_t m32 = (int32_t)m, n32 = (int32_t)n, k32 = (int32_t)k, count32 = (int32_t)count;
    void *c = spk_tensor_data(g->c);
    spk_gemm_strides cs = spk_gemm_matrix_strides(g->c, false);
    long long c_sm = cs.s0, c_sn = cs.s1, c_sb = cs.batch;
    float alpha = g->alpha, beta = g->beta;
    void *args[TMA_PARAMS] = {&maps[0], &maps[1], &maps[2], &maps[3], &m32, &n32, &k32, &count32, &p.a_batched,
                              &p.b_batched, &c, &c_sm, &c_sn, &c_sb, &alpha, &beta, &p.c_vec2, &p.c_tma};
    spk_storage *uses[] = {g->a->storage, g->b->storage, g->b_lo->storage, g->c->storage};
    spk_launch_config cfg = {.grid = {p.grid, 1, 1}, .block = {p.threads, 1, 1}, .smem = p.smem, .stream = s,
                             .uses = uses, .nuses = 4};
    if (spk_kernel_launch_raw(kernel, &cfg, args)) {
        spk_error_prefix("gemm 3xtf32 (TMA form, %lld x %lld x %lld)", (long long)m, (long long)n, (long long)k);
        return -1;
    }
    return 0;
}

/* ---- the split ------------------------------------------------------------- */

int spk_tf32_split(const spk_tensor *x, spk_tensor **hi, spk_tensor **lo, spk_stream *s)
{
    *hi = *lo = NULL;
    if (!x || x->dtype != SPK_F32)
        return spk_fail("tf32 split: x must be an f32 tensor%s", x ? "" : " (got none)");
    if (!spk_tensor_is_contiguous(x))
        return spk_fail("tf32 split: x must be contiguous (use :contiguous())");
    int64_t n = spk_tensor_numel(x);
    if (!spk_tensor_is_device(x)) {
        *hi = spk_tensor_new(SPK_F32, x->ndim, x->shape);
        *lo = spk_tensor_new(SPK_F32, x->ndim, x->shape);
        if (!*hi || !*lo)
            goto fail;
        spk_tf32_split_host(spk_tensor_data(x), spk_tensor_data(*hi), spk_tensor_data(*lo), n);
        return 0;
    }
    if (!(s = spk_stream_or_default(s)))
        return -1;
    *hi = spk_device_tensor_new(SPK_F32, x->ndim, x->shape, s);
    *lo = spk_device_tensor_new(SPK_F32, x->ndim, x->shape, s);
    if (!*hi || !*lo)
        goto fail;
    if (n == 0)
        return 0;
    int prev = 0;
    cudaGetDevice(&prev);
    if (prev != x->storage->device)
        cudaSetDevice(x->storage->device);
    spk_kernel *kernel = spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_SPLIT);
    int rc = -1;
    if (kernel) {
        long long blocks = (n + 255) / 256;
        spk_arg args[4] = {{SPK_ARG_PTR, {.ptr = spk_tensor_data(x)}}, {SPK_ARG_PTR, {.ptr = spk_tensor_data(*hi)}},
                           {SPK_ARG_PTR, {.ptr = spk_tensor_data(*lo)}}, {SPK_ARG_I64, {.i64 = n}}};
        spk_storage *uses[] = {x->storage, (*hi)->storage, (*lo)->storage};
        spk_launch_config cfg = {.grid = {(unsigned)(blocks < 4096 ? blocks : 4096), 1, 1}, .block = {256, 1, 1},
                                 .stream = s, .uses = uses, .nuses = 3};
        rc = spk_kernel_launch(kernel, &cfg, args, 4);
    }
    if (prev != x->storage->device)
        cudaSetDevice(prev);
    if (rc == 0)
        return 0;
fail:
    spk_error_prefix("tf32 split");
    spk_tensor_free(*hi);
    spk_tensor_free(*lo);
    *hi = *lo = NULL;
    return -1;
}
