/* cuBLAS sgemm for row-major tensors.
 *
 * cuBLAS is column-major. A row-major matrix X (r x c, row stride ld) is the
 * column-major matrix X^T with leading dimension ld, so row-major
 * C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T: call
 * gemm with the operands swapped and m and n exchanged. A transposed view
 * (column stride ld, element stride 1 down a column) is the same memory read
 * the other way, so it is handled by flipping its op instead of copying.
 * A 3-D c, [count, m, n], is a batch: one cublasGemmStridedBatchedEx over
 * its matrices, with a 2-D a or b shared by all of them.
 *
 * Precision: the handle stays in CUBLAS_DEFAULT_MATH and each call names its
 * compute type in cublasGemmEx: CUBLAS_COMPUTE_32F (FP32 inputs, products and
 * sums, no TF32; the default), CUBLAS_COMPUTE_32F_FAST_TF32 (SPK_MATH_TF32)
 * or CUBLAS_COMPUTE_32F_PEDANTIC (SPK_MATH_PEDANTIC); SPK_MATH_3XTF32 is
 * gemm_3xtf32.c's kernel. The maths' names: cuda/math_modes.h. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

#define MATH_NAME(NAME, name, where, held_to, help) name,
#define MATH_WHERE(NAME, name, where, held_to, help) where,
#define MATH_HELD_TO(NAME, name, where, held_to, help) SPK_MATH_##held_to,
#define MATH_HELP(NAME, name, where, held_to, help) help,
const char *const spk_math_mode_names[] = {SPK_MATH_MODES(MATH_NAME) NULL};
static const unsigned math_where[] = {SPK_MATH_MODES(MATH_WHERE)};
static const spk_math_mode math_held_to[] = {SPK_MATH_MODES(MATH_HELD_TO)};
static const char *const math_help[] = {SPK_MATH_MODES(MATH_HELP)};

static bool in_list(spk_math_mode math) { return (int)math >= 0 && math < SPK_MATH_COUNT; }

void spk_math_mode_choices(unsigned where, char *out, size_t size)
{
    size_t n = 0;
    int count = 0, total = 0;
    out[0] = '\0';
    for (int i = 0; i < SPK_MATH_COUNT; i++)
        total += (math_where[i] & where) == where;
    for (int i = 0; i < SPK_MATH_COUNT && n < size; i++)
        if ((math_where[i] & where) == where) {
            count++;
            n += (size_t)snprintf(out + n, size - n, "%s\"%s\"", count == 1 ? "" : count == total ? " or " : ", ",
                                  spk_math_mode_names[i]);
        }
}

int spk_math_mode_from_name(const char *name, spk_math_mode *out)
{
    for (int i = 0; name && i < SPK_MATH_COUNT; i++)
        if (strcmp(name, spk_math_mode_names[i]) == 0) {
            *out = (spk_math_mode)i;
            return 0;
        }
    char choices[128];
    spk_math_mode_choices(0, choices, sizeof choices);
    return spk_fail("math must be %s, got \"%s\"", choices, name ? name : "(none)");
}

const char *spk_math_mode_name(spk_math_mode math) { return in_list(math) ? spk_math_mode_names[math] : "unknown"; }
unsigned spk_math_mode_where(spk_math_mode math) { return in_list(math) ? math_where[math] : 0; }
spk_math_mode spk_math_mode_held_to(spk_math_mode math) { return in_list(math) ? math_held_to[math] : math; }
const char *spk_math_mode_help(spk_math_mode math) { return in_list(math) ? math_help[math] : "unknown"; }

/* How a tensor reads as a row-major matrix, or as a batch of them: its
 * rows x cols (after the requested transpose), whether cuBLAS must transpose
 * it, and for a 3-D tensor [count, r, c] the element stride between matrices. */
typedef struct operand {
    int64_t rows, cols; /* of op(X) */
    int64_t ld;
    bool row_major;     /* the matrix's column stride is 1 */
    int64_t count;      /* matrices: shape[0] of a 3-D tensor; 0 for a 2-D one */
    int64_t stride;     /* between matrices (3-D) */
} operand;

static int describe(const spk_tensor *t, const char *name, bool trans, bool output, operand *out)
{
    if (!t)
        return spk_fail("gemm: %s is missing", name);
    if (t->dtype != SPK_F32)
        return spk_fail("gemm: %s is %s, gemm needs f32", name, spk_dtype_name(t->dtype));
    if (t->ndim != 2 && t->ndim != 3)
        return spk_fail("gemm: %s has %d dimension%s, gemm needs 2 (a matrix) or 3 (a batch of them)", name,
                        t->ndim, t->ndim == 1 ? "" : "s");
    int d = t->ndim - 2; /* the matrix's dimensions are d and d + 1 */
    int64_t r = t->shape[d], c = t->shape[d + 1];
    int64_t sr = t->strides[d], sc = t->strides[d + 1];
    if (sc == 1 && sr >= (c > 1 ? c : 1)) {
        out->row_major = true;
        out->ld = sr > 0 ? sr : 1;
    } else if (!output && sr == 1 && sc >= (r > 1 ? r : 1)) {
        out->row_major = false;
        out->ld = sc;
    } else {
        return spk_fail("gemm: %s must have contiguous rows%s (strides %lld, %lld)", name,
                        output ? "" : " or be a transpose of such", (long long)sr, (long long)sc);
    }
    out->rows = trans ? c : r;
    out->cols = trans ? r : c;
    out->count = d ? t->shape[0] : 0;
    out->stride = d ? t->strides[0] : 0;
    if (d && out->stride < 0)
        return spk_fail("gemm: %s has a negative stride between matrices (%lld)", name, (long long)out->stride);
    /* cuBLAS writes the matrices of c in parallel: they must not share elements. */
    if (d && output && out->count > 1 && out->stride < r * out->ld)
        return spk_fail("gemm: the matrices of c overlap (stride %lld between matrices of %lld rows x %lld)",
                        (long long)out->stride, (long long)r, (long long)out->ld);
    return 0;
}

int spk_gemm_check(const spk_gemm_args *g, int64_t *m, int64_t *n, int64_t *k, int64_t *count)
{
    operand a, b, c;
    if (describe(g->a, "a", g->transa, false, &a) || describe(g->b, "b", g->transb, false, &b) ||
        describe(g->c, "c", false, true, &c))
        return -1;
    if (a.cols != b.rows)
        return spk_fail("gemm: op(a) is %lld x %lld and op(b) is %lld x %lld: inner sizes differ",
                        (long long)a.rows, (long long)a.cols, (long long)b.rows, (long long)b.cols);
    if (c.rows != a.rows || c.cols != b.cols)
        return spk_fail("gemm: c is %lld x %lld, op(a) op(b) is %lld x %lld", (long long)c.rows,
                        (long long)c.cols, (long long)a.rows, (long long)b.cols);
    /* A batch: c is [count, m, n]; a and b are [count, ...] or one matrix used by all. */
    if (!c.count && (a.count || b.count))
        return spk_fail("gemm: %s is a batch of matrices but c is one matrix; give c as [%lld, %lld, %lld]",
                        a.count ? "a" : "b", (long long)(a.count ? a.count : b.count), (long long)c.rows,
                        (long long)c.cols);
    if ((a.count && a.count != c.count) || (b.count && b.count != c.count))
        return spk_fail("gemm: c holds %lld matrices but %s holds %lld", (long long)c.count,
                        a.count && a.count != c.count ? "a" : "b",
                        (long long)(a.count && a.count != c.count ? a.count : b.count));
    if (g->b_lo && spk_gemm_split_layout_check(g->b, g->b_lo))
        return -1;
    /* Shapes first, so that mistakes show the same way with or without a GPU. */
    const spk_tensor *all[4] = {g->a, g->b, g->c, g->b_lo};
    const char *names[4] = {"a", "b", "c", "b_lo"};
    for (int i = 0; i < (g->b_lo ? 4 : 3); i++)
        if (!spk_tensor_is_device(all[i]))
            return spk_fail("gemm: %s is a host tensor; move it to the GPU with :cuda()", names[i]);
    if (g->a->storage->device != g->c->storage->device || g->b->storage->device != g->c->storage->device ||
        (g->b_lo && g->b_lo->storage->device != g->c->storage->device))
        return spk_fail("gemm: a, b%s and c must be on the same device", g->b_lo ? ", b_lo" : "");
    const int64_t limit = 2147483647;
    if (a.rows > limit || b.cols > limit || a.cols > limit || a.ld > limit || b.ld > limit || c.ld > limit ||
        c.count > limit)
        return spk_fail("gemm: a size or stride exceeds cuBLAS's 32-bit limit");
    *m = a.rows;
    *n = b.cols;
    *k = a.cols;
    if (count)
        *count = c.count ? c.count : 1;
    return 0;
}

#define MAX_DEVICES 64
static cublasHandle_t handles[MAX_DEVICES];
static void *workspaces[MAX_DEVICES];
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *cublas_status_name(cublasStatus_t st)
{
    const char *name = cublasGetStatusName(st);
    return name ? name : "unknown cuBLAS status";
}

/* One handle per device, with a fixed workspace, so gemm needs no allocation
 * at call time and can be captured into a graph. */
static int handle_for(int device, cublasHandle_t *out)
{
    if (device < 0 || device >= MAX_DEVICES)
        return spk_fail("gemm: device %d is out of range", device);
    pthread_mutex_lock(&handle_lock);
    int rc = 0;
    if (!handles[device]) {
        cublasHandle_t h;
        cublasStatus_t st = cublasCreate(&h);
        if (st != CUBLAS_STATUS_SUCCESS) {
            rc = spk_fail("gemm: cublasCreate: %s", cublas_status_name(st));
        } else {
            const size_t workspace_bytes = 32u << 20; /* cuBLAS's recommendation for Hopper */
            void *workspace = NULL;
            if (cudaMalloc(&workspace, workspace_bytes) == cudaSuccess) {
                cublasSetWorkspace(h, workspace, workspace_bytes);
                workspaces[device] = workspace;
            }
            cudaGetLastError();
            cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
            handles[device] = h;
        }
    }
    *out = handles[device];
    pthread_mutex_unlock(&handle_lock);
    return rc;
}

void spk_blas_release(void)
{
    pthread_mutex_lock(&handle_lock);
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (handles[d])
            cublasDestroy(handles[d]);
        if (workspaces[d])
            cudaFree(workspaces[d]);
        handles[d] = NULL;
        workspaces[d] = NULL;
    }
    cudaGetLastError();
    pthread_mutex_unlock(&handle_lock);
}

int spk_blas_prepare(int device)
{
    cublasHandle_t h;
    return handle_for(device, &h);
}

int spk_gemm(const spk_gemm_args *g)
{
    int64_t m, n, k, count;
    if (spk_gemm_check(g, &m, &n, &k, &count))
        return -1;
    if (spk_cuda_require())
        return -1;
    spk_stream *s = spk_stream_or_default(g->stream);
    if (!s)
        return -1;
    int device = g->c->storage->device;
    if (g->b_lo && g->math != SPK_MATH_3XTF32)
        return spk_fail("gemm: b_lo (the small part of a split b) needs math \"3xtf32\", got \"%s\"",
                        spk_math_mode_name(g->math));
    if (g->math == SPK_MATH_3XTF32) {
        if (m == 0 || n == 0 || count == 0)
            return 0;
        int prev_device = 0;
        cudaGetDevice(&prev_device);
        if (prev_device != device)
            cudaSetDevice(device);
        int rc = g->b_lo ? spk_gemm_3xtf32_split(g, m, n, k, count, s) : spk_gemm_3xtf32(g, m, n, k, count, s);
        if (prev_device != device)
            cudaSetDevice(prev_device);
        return rc;
    }
    cublasHandle_t h = NULL;
    if (handle_for(device, &h))
        return -1;
    operand a, b, c;
    describe(g->a, "a", g->transa, false, &a);
    describe(g->b, "b", g->transb, false, &b);
    describe(g->c, "c", false, true, &c);
    /* A row-major operand is its column-major transpose; op() flips again. */
    cublasOperation_t op_a = (g->transa == a.row_major) ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = (g->transb == b.row_major) ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasComputeType_t compute = g->math == SPK_MATH_TF32       ? CUBLAS_COMPUTE_32F_FAST_TF32
                                  : g->math == SPK_MATH_PEDANTIC ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                                 : CUBLAS_COMPUTE_32F;
    if (m == 0 || n == 0 || count == 0)
        return 0;
    /* Column-major C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m). */
    cublasSetStream(h, (cudaStream_t)spk_stream_handle(s));
    float alpha = g->alpha, beta = g->beta;
    int prev_device = 0;
    cudaGetDevice(&prev_device);
    if (prev_device != device)
        cudaSetDevice(device);
    cublasStatus_t st;
    if (!c.count) {
        st = cublasGemmEx(h, op_b, op_a, (int)n, (int)m, (int)k, &alpha, spk_tensor_data(g->b), CUDA_R_32F, (int)b.ld,
                          spk_tensor_data(g->a), CUDA_R_32F, (int)a.ld, &beta, spk_tensor_data(g->c), CUDA_R_32F,
                          (int)c.ld, compute, CUBLAS_GEMM_DEFAULT);
    } else {
        /* One launch for the whole batch: its tiles fill the SMs' last wave
         * that separate calls each leave part empty. A 2-D operand is shared
         * by every matrix (stride 0). */
        st = cublasGemmStridedBatchedEx(h, op_b, op_a, (int)n, (int)m, (int)k, &alpha, spk_tensor_data(g->b),
                                        CUDA_R_32F, (int)b.ld, b.stride, spk_tensor_data(g->a), CUDA_R_32F, (int)a.ld,
                                        a.stride, &beta, spk_tensor_data(g->c), CUDA_R_32F, (int)c.ld, c.stride,
                                        (int)count, compute, CUBLAS_GEMM_DEFAULT);
    }
    if (prev_device != device)
        cudaSetDevice(prev_device);
    if (st != CUBLAS_STATUS_SUCCESS)
        return spk_fail("gemm: %s (%lld x %lld x %lld%s): %s",
                        c.count ? "cublasGemmStridedBatchedEx" : "cublasGemmEx", (long long)m, (long long)n,
                        (long long)k, c.count ? ", batched" : "", cublas_status_name(st));
    spk_storage_use(g->a->storage, s);
    spk_storage_use(g->b->storage, s);
    spk_storage_use(g->c->storage, s);
    return 0;
}
