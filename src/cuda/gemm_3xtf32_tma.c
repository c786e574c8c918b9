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

/* Which form stack plans of math 3xtf32 take by default (on compute
 * capability 9.0; elsewhere the forms of src/cuda/gemm_3xtf32.c): the TMA
 * form with FP16 parts for the layers after the first (TF32 parts for the
 * first), which on the H200 held the TF32 parts' accuracy and was faster at
 * every batch measured (docs/performance.md). $SPK_GEMM_3XTF32 overrides it
 * for a process: "f16", "tma" (TF32 parts for every layer) or "classic". */
static const spk_3xtf32_form default_form = SPK_3XTF32_TMA_F16;

int spk_gemm_3xtf32_form_wanted(const char *env, spk_3xtf32_form *form)
{
    *form = default_form;
    if (!env || !*env)
        return 0;
    if (strcmp(env, "tma") == 0)
        *form = SPK_3XTF32_TMA;
    else if (strcmp(env, "f16") == 0)
        *form = SPK_3XTF32_TMA_F16;
    else if (strcmp(env, "classic") == 0)
        *form = SPK_3XTF32_CLASSIC;
    else
        return spk_fail("gemm 3xtf32: $SPK_GEMM_3XTF32 is \"%.64s\"; it takes \"tma\" (split weights, the TMA "
                        "form), \"f16\" (the same, FP16 parts after the first layer) or \"classic\"",
                        env);
    return 0;
}

int spk_gemm_3xtf32_plan_form(spk_3xtf32_form *out)
{
    spk_3xtf32_form want = default_form;
    bool wg = false;
    if (spk_gemm_3xtf32_form_wanted(getenv("SPK_GEMM_3XTF32"), &want))
        return -1;
    if (want != SPK_3XTF32_CLASSIC && spk_gemm_3xtf32_device_has_wgmma(&wg))
        return -1;
    *out = wg ? want : SPK_3XTF32_CLASSIC;
    return 0;
}

int spk_gemm_3xtf32_split_weights(bool *out)
{
    spk_3xtf32_form form;
    if (spk_gemm_3xtf32_plan_form(&form))
        return -1;
    *out = form != SPK_3XTF32_CLASSIC;
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
    const int64_t per16 = x->f16 ? 8 : 4; /* elements in 16 bytes */
    const uint64_t elem = x->f16 ? 2 : 4;
    if (x->row_stride % per16 != 0 || x->row_stride < 1)
        return spk_fail("gemm 3xtf32 (TMA form): %s's rows must be a multiple of %lld %s apart (%lld)", name,
                        (long long)per16, x->f16 ? "halves" : "floats", (long long)x->row_stride);
    if (x->rows > INT32_MAX || x->k > INT32_MAX)
        return spk_fail("gemm 3xtf32 (TMA form): %s is %lld x %lld, beyond 2^31 - 1", name, (long long)x->rows,
                        (long long)x->k);
    *batched = x->matrix_stride != 0 && count > 1;
    if (*batched && (x->matrix_stride % per16 != 0 || x->matrix_stride < 0))
        return spk_fail("gemm 3xtf32 (TMA form): %s's matrices must be a multiple of %lld %s apart (%lld)", name,
                        (long long)per16, x->f16 ? "halves" : "floats", (long long)x->matrix_stride);
    /* One matrix (or one shared by the batch): a third dimension of size 1,
     * its stride what a packed batch would have. */
    const uint64_t stride_limit = 1ull << 40, row_bytes = elem * (uint64_t)x->row_stride;
    uint64_t matrix_bytes = *batched ? elem * (uint64_t)x->matrix_stride : row_bytes * (uint64_t)x->rows;
    if (row_bytes >= stride_limit || (*batched && matrix_bytes >= stride_limit))
        return spk_fail("gemm 3xtf32 (TMA form): %s's strides reach 2^40 bytes, beyond a tensor map's", name);
    if (matrix_bytes >= stride_limit)
        matrix_bytes = row_bytes; /* a dimension of size 1: any stride the map takes */
    *map = (spk_gemm_tma_map){.dims = {(uint64_t)x->k, (uint64_t)x->rows, *batched ? (uint64_t)count : 1},
                              .strides = {row_bytes, matrix_bytes},
                              .box = {SPK_TMA_BK, SPK_TMA_BM, 1},
                              .f16 = x->f16};
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

/* B resident (kernels/gemm_3xtf32_tma.cuh) where B's panel fits, a row
 * group of blocks holds every column, and each block walks
 * SPK_TMA_RES_MIN_ROW_TILES row tiles or more, so that loading its panel
 * once is a small part of its work; the grid is then as many whole row
 * groups as the SMs hold. */
#define SPK_TMA_RES_MIN_ROW_TILES 4

static void resident_of(spk_gemm_tma_plan *p, int64_t count, int sms)
{
    const unsigned b_tile = p->b.f16 ? SPK_TMA16_B_TILE_BYTES : SPK_TMA_TILE_BYTES;
    const int64_t columns = p->col_tiles * count;
    if (p->k_tiles > SPK_TMA_RES_PANEL_LIMIT / (2 * b_tile) || columns > sms)
        return;
    const int64_t groups = sms / columns;
    if (p->row_tiles < SPK_TMA_RES_MIN_ROW_TILES * groups)
        return;
    p->b_resident = 1;
    p->grid = (unsigned)(groups * columns);
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
    resident_of(out, count, sms);
    return 0;
}

int spk_f16_split_host(const float *x, uint16_t *hi, uint16_t *lo, int64_t n)
{
    float max_abs = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        if (a > max_abs && a - a == 0.0f)
            max_abs = a;
    }
    const int exponent = spk_f16_scale_exponent(max_abs);
    const float scale = spk_pow2f(exponent);
    for (int64_t i = 0; i < n; i++) {
        unsigned short h, l;
        spk_f16_split_value(x[i] * scale, &h, &l);
        hi[i] = h;
        lo[i] = l;
    }
    return exponent;
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

/* The plan of g with B's TF32 parts (b16 NULL: g->b and g->b_lo) or its
 * FP16 parts b16 (laid out as g->b, two bytes an element). */
static int plan_of(const spk_gemm_args *g, const spk_f16_parts *b16, int64_t m, int64_t n, int64_t k, int64_t count,
                   int sms, spk_gemm_tma_plan *p)
{
    spk_gemm_tma_matrix a = matrix_of(g->a, g->transa, m, k);
    spk_gemm_tma_matrix b = matrix_of(g->b, !g->transb, n, k);
    uintptr_t lo_address = (uintptr_t)spk_tensor_data(b16 ? b16->lo : g->b_lo);
    if (b16) {
        b.address = (uintptr_t)spk_tensor_data(b16->hi);
        b.f16 = 1;
    }
    if (lo_address % 16 != 0)
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
                (m == 0 || n == 0 || count == 0 || plan_of(g, NULL, m, n, k, count, 1, &p) == 0);
    spk_clear_error();
    return fits;
}

/* b16 against g->b: its parts hold g->b's elements, which are contiguous,
 * on its device. */
static int parts_match(const spk_gemm_args *g, const spk_f16_parts *b16)
{
    if (!b16 || !b16->hi || !b16->lo)
        return spk_fail("gemm 3xf16: B's FP16 parts are missing");
    if (b16->hi->dtype != SPK_I32 || b16->lo->dtype != SPK_I32 || !spk_tensor_is_contiguous(b16->hi) ||
        !spk_tensor_is_contiguous(b16->lo))
        return spk_fail("gemm 3xf16: B's FP16 parts must be contiguous i32 tensors (spk_f16_split's), got %s and %s",
                        spk_dtype_name(b16->hi->dtype), spk_dtype_name(b16->lo->dtype));
    const int64_t n = spk_tensor_numel(g->b);
    if (!spk_tensor_is_contiguous(g->b) || spk_tensor_numel(b16->hi) * 2 != n || spk_tensor_numel(b16->lo) * 2 != n)
        return spk_fail("gemm 3xf16: B's FP16 parts must hold b's %lld elements, b contiguous", (long long)n);
    if (!spk_tensor_is_device(b16->hi) || !spk_tensor_is_device(b16->lo) ||
        b16->hi->storage->device != g->b->storage->device || b16->lo->storage->device != g->b->storage->device)
        return spk_fail("gemm 3xf16: B's FP16 parts must be on b's device");
    return 0;
}

bool spk_gemm_3xf16_fits(const spk_gemm_args *g, const spk_f16_parts *b16)
{
    int64_t m, n, k, count;
    spk_gemm_tma_plan p;
    bool fits = b16 && spk_gemm_check(g, &m, &n, &k, &count) == 0 && parts_match(g, b16) == 0 &&
                (m == 0 || n == 0 || count == 0 || plan_of(g, b16, m, n, k, count, 1, &p) == 0);
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
    spk_3xtf32_form form;
    return encoder(&fn) || spk_gemm_3xtf32_plan_form(&form) || !spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_TMA) ||
                   !spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_TMA_RESIDENT) ||
                   !spk_gemm_3xtf32_kernel(SPK_GEMM_3XTF32_SPLIT) ||
                   (form == SPK_3XTF32_TMA_F16 && (!spk_gemm_3xtf32_kernel(SPK_GEMM_3XF16_TMA) ||
                                                   !spk_gemm_3xtf32_kernel(SPK_GEMM_3XF16_TMA_RESIDENT)))
               ? -1
               : 0;
}

static int encode(CUtensorMap *map, const spk_gemm_tma_map *p, void *address, const char *name)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    if (encoder(&fn))
        return -1;
    const cuuint32_t element_strides[3] = {1, 1, 1};
    CUresult r = fn(map, p->f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, address,
                    p->dims, p->strides, p->box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                    p->f16 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
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

/* The launch of either parts' form (b16 NULL: TF32's, g->b and g->b_lo). */
static int launch_tma(const spk_gemm_args *g, const spk_f16_parts *b16, int a_exponent, int64_t m, int64_t n,
                      int64_t k, int64_t count, spk_stream *s)
{
    bool wg = false;
    if (spk_gemm_3xtf32_device_has_wgmma(&wg))
        return -1;
    if (!wg)
        return spk_fail("gemm: %s (B split beforehand) runs on the TMA form, which needs compute capability 9.0",
                        b16 ? "b16" : "b_lo");
    int sms = 0;
    spk_gemm_tma_plan p;
    if (sms_of_current_device(&sms) || plan_of(g, b16, m, n, k, count, sms, &p))
        return -1;
    CUtensorMap maps[4];
    memset(&maps[3], 0, sizeof maps[3]); /* C's, where it has none: never read */
    const spk_gemm_tma_map *params[3] = {&p.a, &p.b, &p.b};
    const spk_tensor *tensors[3] = {g->a, b16 ? b16->hi : g->b, b16 ? b16->lo : g->b_lo};
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
    spk_kernel *kernel =
        spk_gemm_3xtf32_kernel(p.b_resident ? (b16 ? SPK_GEMM_3XF16_TMA_RESIDENT : SPK_GEMM_3XTF32_TMA_RESIDENT)
                                            : (b16 ? SPK_GEMM_3XF16_TMA : SPK_GEMM_3XTF32_TMA));
    if (!kernel)
        return -1;
    const int want = b16 ? TMA_PARAMS + 1 : TMA_PARAMS;
    int nparams = 0;
    size_t sizes[SPK_MAX_KERNEL_ARGS];
    if (spk_kernel_params(kernel, &nparams, sizes, SPK_MAX_KERNEL_ARGS))
        return -1;
    if (nparams != want || memcmp(sizes, tma_param_sizes, sizeof tma_param_sizes) != 0 ||
        (b16 && sizes[TMA_PARAMS] != 4))
        return spk_fail("gemm 3xtf32 (TMA form): the kernel takes %d parameters, not the %d this host passes", nparams,
                        want);
    int32_t m32 = (int32_t)m, n32 = (int32_t)n, k32 = (int32_t)k, count32 = (int32_t)count;
    void *c = spk_tensor_data(g->c);
    spk_gemm_strides cs = spk_gemm_matrix_strides(g->c, false);
    long long c_sm = cs.s0, c_sn = cs.s1, c_sb = cs.batch;
    /* The FP16 parts' products carry 2^(a_exponent + B's exponent): alpha takes it off. */
    float alpha = b16 ? g->alpha * spk_pow2f(-(a_exponent + b16->exponent)) : g->alpha, beta = g->beta;
    float a_scale = spk_pow2f(a_exponent);
    void *args[TMA_PARAMS + 1] = {&maps[0], &maps[1], &maps[2], &maps[3], &m32, &n32, &k32, &count32,
                                  &p.a_batched, &p.b_batched, &c, &c_sm, &c_sn, &c_sb, &alpha, &beta, &p.c_vec2,
                                  &p.c_tma, &a_scale};
    spk_storage *uses[] = {g->a->storage, tensors[1]->storage, tensors[2]->storage, g->c->storage};
    spk_launch_config cfg = {.grid = {p.grid, 1, 1}, .block = {p.threads, 1, 1}, .smem = p.smem, .stream = s,
                             .uses = uses, .nuses = 4};
    if (spk_kernel_launch_raw(kernel, &cfg, args)) {
        spk_error_prefix("gemm %s (TMA form, %lld x %lld x %lld)", spk_math_mode_name(SPK_MATH_3XTF32),
                         (long long)m, (long long)n, (long long)k);
        if (b16)
            spk_error_prefix("FP16 parts");
        return -1;
    }
    return 0;
}

int spk_gemm_3xtf32_split(const spk_gemm_args *g, int64_t m, int64_t n, int64_t k, int64_t count, spk_stream *s)
{
    if (same_layout(g->b, g->b_lo))
        return -1;
    return launch_tma(g, NULL, 0, m, n, k, count, s);
}

int spk_gemm_3xf16(const spk_gemm_args *g, const spk_f16_parts *b16, int a_exponent)
{
    int64_t m, n, k, count;
    if (spk_gemm_check(g, &m, &n, &k, &count) || parts_match(g, b16))
        return -1;
    if (g->b_lo)
        return spk_fail("gemm: b_lo and b16 are B's parts of two forms; give one");
    if (g->math != SPK_MATH_3XTF32)
        return spk_fail("gemm: b16 (B's FP16 parts) needs math \"%s\", got \"%s\"", spk_math_mode_name(SPK_MATH_3XTF32),
                        spk_math_mode_name(g->math));
    if (a_exponent < -100 || a_exponent > 100 || b16->exponent < -100 || b16->exponent > 100 ||
        a_exponent + b16->exponent < -126 || a_exponent + b16->exponent > 126)
        return spk_fail("gemm 3xf16: A's scale 2^%d and B's 2^%d must each lie in 2^-100 .. 2^100 and their product "
                        "in 2^-126 .. 2^126",
                        a_exponent, b16->exponent);
    if (m == 0 || n == 0 || count == 0)
        return 0;
    spk_stream *s = spk_stream_or_default(g->stream);
    return s ? launch_tma(g, b16, a_exponent, m, n, k, count, s) : -1;
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

int spk_f16_exponent_of(float max_abs) { return spk_f16_scale_exponent(max_abs); }

void spk_f16_parts_free(spk_f16_parts *p)
{
    if (!p)
        return;
    spk_tensor_free(p->hi);
    spk_tensor_free(p->lo);
    p->hi = p->lo = NULL;
}

int spk_f16_split(const spk_tensor *x, spk_f16_parts *out, spk_stream *s)
{
    *out = (spk_f16_parts){0};
    if (!x || x->dtype != SPK_F32)
        return spk_fail("f16 split: x must be an f32 tensor%s", x ? "" : " (got none)");
    if (!spk_tensor_is_contiguous(x) || x->ndim < 1 || x->shape[x->ndim - 1] % 2 != 0)
        return spk_fail("f16 split: x must be contiguous with an even last dimension");
    const bool device = spk_tensor_is_device(x);
    spk_tensor *host = device ? spk_tensor_to_host(x, s) : NULL;
    const spk_tensor *src = device ? host : x;
    int64_t shape[SPK_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        shape[d] = x->shape[d];
    shape[x->ndim - 1] /= 2;
    spk_tensor *hi = src ? spk_tensor_new(SPK_I32, x->ndim, shape) : NULL;
    spk_tensor *lo = hi ? spk_tensor_new(SPK_I32, x->ndim, shape) : NULL;
    if (lo)
        out->exponent = spk_f16_split_host(spk_tensor_data(src), spk_tensor_data(hi), spk_tensor_data(lo),
                                           spk_tensor_numel(x));
    spk_tensor_free(host);
    if (lo && device) {
        out->hi = spk_tensor_to_device(hi, s);
        out->lo = out->hi ? spk_tensor_to_device(lo, s) : NULL;
        spk_tensor_free(hi);
        spk_tensor_free(lo);
    } else {
        out->hi = hi;
        out->lo = lo;
    }
    if (out->hi && out->lo)
        return 0;
    spk_error_prefix("f16 split");
    spk_f16_parts_free(out);
    return -1;
}
