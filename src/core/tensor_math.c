/* NumPy's other everyday functions on host tensors: linspace and eye, cat and
 * stack, exp, log, sqrt, isnan and isfinite, where, and matmul (the meanings
 * are in core/tensor.h). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/cancel.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"

/* ---- creation ------------------------------------------------------------ */

spk_tensor *spk_tensor_linspace(spk_dtype dtype, double start, double stop, int64_t num)
{
    if (!dtype_is_float(dtype))
        return spk_fail_null("linspace: dtype %s: the values are fractions, give f32 or f64 (and convert with to())",
                             spk_dtype_name(dtype));
    if (!isfinite(start) || !isfinite(stop))
        return spk_fail_null("linspace: start and stop must be finite (got %g, %g)", start, stop);
    if (num < 0)
        return spk_fail_null("linspace: num must be >= 0, got %" PRId64, num);
    spk_tensor *t = spk_tensor_new(dtype, 1, &num);
    if (!t)
        return NULL;
    double step = num > 1 ? (stop - start) / (double)(num - 1) : 0.0;
    for (int64_t i = 0; i < num; i++)
        store_f64(t->storage->data, dtype, i, start + (double)i * step);
    if (num > 1)
        store_f64(t->storage->data, dtype, num - 1, stop);
    return t;
}

spk_tensor *spk_tensor_eye(spk_dtype dtype, int64_t n, int64_t m)
{
    int64_t shape[2] = {n, m};
    spk_tensor *t = spk_tensor_new(dtype, 2, shape);
    if (!t)
        return NULL;
    for (int64_t i = 0; i < n && i < m; i++)
        store_i64(t->storage->data, dtype, i * m + i, 1);
    return t;
}

/* ---- cat and stack --------------------------------------------------------- */

static int check_joined(const char *what, int count, const spk_tensor *const *ts, int dim, spk_dtype *dtype)
{
    if (count < 1)
        return spk_fail("%s: give at least one tensor", what);
    char s0[160], sk[160];
    for (int k = 0; k < count; k++) {
        if (require_host(ts[k], what))
            return -1;
        if (ts[k]->ndim != ts[0]->ndim)
            return spk_fail("%s: tensor %d has %d dims, tensor 1 has %d", what, k + 1, ts[k]->ndim, ts[0]->ndim);
        for (int d = 0; d < ts[0]->ndim; d++) {
            if (d != dim && ts[k]->shape[d] != ts[0]->shape[d])
                return spk_fail("%s: tensor %d is %s and tensor 1 %s: %s", what, k + 1,
                                spk_shape_string(ts[k], sk, sizeof sk), spk_shape_string(ts[0], s0, sizeof s0),
                                dim >= 0 ? "the sizes must be equal but along the joined dim" : "the shapes must be equal");
        }
        *dtype = k == 0 ? ts[0]->dtype : spk_dtype_promote(*dtype, ts[k]->dtype);
    }
    return 0;
}

spk_tensor *spk_tensor_cat(int count, const spk_tensor *const *tensors, int dim)
{
    spk_dtype dtype = SPK_F32;
    if (count >= 1 && tensors[0] && check_dim(tensors[0], dim, "cat"))
        return NULL;
    if (check_joined("cat", count, tensors, dim, &dtype))
        return NULL;
    int64_t shape[SPK_MAX_DIMS];
    memcpy(shape, tensors[0]->shape, sizeof shape);
    shape[dim] = 0;
    for (int k = 0; k < count; k++) {
        if (__builtin_add_overflow(shape[dim], tensors[k]->shape[dim], &shape[dim]))
            return spk_fail_null("cat: the joined size overflows");
    }
    spk_tensor *out = spk_tensor_new(dtype, tensors[0]->ndim, shape);
    if (out && spk_tensor_copy_joined(out, dim, count, tensors)) {
        spk_tensor_free(out);
        return NULL;
    }
    return out;
}

int spk_tensor_copy_joined(spk_tensor *out, int dim, int count, const spk_tensor *const *parts)
{
    int64_t at = 0;
    for (int k = 0; k < count; k++) {
        spk_tensor *part = spk_tensor_narrow(out, dim, at, parts[k]->shape[dim]);
        int rc = part ? spk_tensor_copy(part, parts[k]) : -1;
        spk_tensor_free(part);
        if (rc)
            return -1;
        at += parts[k]->shape[dim];
    }
    return 0;
}

spk_tensor *spk_tensor_stack(int count, const spk_tensor *const *tensors, int dim)
{
    spk_dtype dtype;
    if (check_joined("stack", count, tensors, -1, &dtype))
        return NULL;
    const spk_tensor **views = calloc((size_t)count, sizeof *views);
    if (!views)
        return spk_fail_null("out of memory stacking %d tensors", count);
    spk_tensor *out = NULL;
    int made = 0;
    for (; made < count; made++) {
        views[made] = spk_tensor_unsqueeze(tensors[made], dim);
        if (!views[made]) {
            spk_error_prefix("stack");
            break;
        }
    }
    if (made == count)
        out = spk_tensor_cat(count, views, dim);
    for (int k = 0; k < made; k++)
        spk_tensor_free((spk_tensor *)views[k]);
    free(views);
    return out;
}

/* ---- functions of one tensor --------------------------------------------------- */

const char *spk_unary_name(spk_unary f)
{
    static const char *const names[] = {"exp", "log", "sqrt", "isnan", "isfinite"};
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "?";
}

static inline double unary_f64(spk_unary f, double v)
{
    switch (f) {
    case SPK_FN_EXP: return exp(v);
    case SPK_FN_LOG: return log(v);
    case SPK_FN_SQRT: return sqrt(v);
    case SPK_FN_ISNAN: return isnan(v);
    case SPK_FN_ISFINITE: return isfinite(v);
    }
    return NAN;
}

static inline float unary_f32(spk_unary f, float v)
{
    switch (f) {
    case SPK_FN_EXP: return expf(v);
    case SPK_FN_LOG: return logf(v);
    case SPK_FN_SQRT: return sqrtf(v);
    default: return NAN;
    }
}

spk_tensor *spk_tensor_unary(spk_unary f, const spk_tensor *a)
{
    if ((unsigned)f > SPK_FN_LAST)
        return spk_fail_null("unary: unknown function %d", (int)f);
    const char *what = spk_unary_name(f);
    if (require_host(a, what))
        return NULL;
    bool test = f == SPK_FN_ISNAN || f == SPK_FN_ISFINITE;
    spk_dtype rt = test ? SPK_I32 : a->dtype == SPK_F32 ? SPK_F32 : SPK_F64;
    spk_tensor *out = spk_tensor_new(rt, a->ndim, a->shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(a);
    const void *ab = a->storage->data;
    void *ob = out->storage->data;
    iter it;
    iter_init(&it, a);
    for (int64_t i = 0; i < n; i++, iter_next(&it)) {
        if (rt == SPK_F32)
            ((float *)ob)[i] = unary_f32(f, ((const float *)ab)[it.pos]);
        else if (test)
            ((int32_t *)ob)[i] = dtype_is_float(a->dtype) ? (int32_t)unary_f64(f, load_f64(ab, a->dtype, it.pos))
                                                           : f == SPK_FN_ISFINITE;
        else
            ((double *)ob)[i] = unary_f64(f, load_f64(ab, a->dtype, it.pos));
    }
    return out;
}

/* ---- where ------------------------------------------------------------------ */

/* Walks an output shape with the positions of up to three operands broadcast
 * to it (stride 0 along the dims they repeat). */
typedef struct multi_iter {
    int ndim, count;
    int64_t idx[SPK_MAX_DIMS], shape[SPK_MAX_DIMS], strides[3][SPK_MAX_DIMS], pos[3];
} multi_iter;

static void multi_init(multi_iter *it, int ndim, const int64_t *shape, int count, const spk_tensor *const *ts)
{
    it->ndim = ndim;
    it->count = count;
    for (int k = 0; k < ndim; k++) {
        it->idx[k] = 0;
        it->shape[k] = shape[k];
    }
    for (int j = 0; j < count; j++) {
        for (int k = 0; k < ndim; k++) {
            int d = ts[j]->ndim - ndim + k;
            it->strides[j][k] = d >= 0 && ts[j]->shape[d] == shape[k] ? ts[j]->strides[d] : 0;
        }
        it->pos[j] = ts[j]->offset;
    }
}

static inline void multi_next(multi_iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        bool carry = ++it->idx[d] >= it->shape[d];
        for (int j = 0; j < it->count; j++)
            it->pos[j] += carry ? -it->strides[j][d] * (it->shape[d] - 1) : it->strides[j][d];
        if (!carry)
            return;
        it->idx[d] = 0;
    }
}

/* The dtype of a where's result (tensor.h). */
static int where_dtype(spk_operand a, spk_operand b, spk_dtype *out)
{
    if (a.tensor && b.tensor) {
        *out = spk_dtype_promote(a.tensor->dtype, b.tensor->dtype);
        return 0;
    }
    if (a.tensor || b.tensor)
        return spk_scalar_dtype(a.tensor ? a.tensor->dtype : b.tensor->dtype, a.tensor ? b.scalar : a.scalar, out);
    bool small = a.scalar.is_integer && b.scalar.is_integer && a.scalar.i >= INT32_MIN && a.scalar.i <= INT32_MAX &&
                 b.scalar.i >= INT32_MIN && b.scalar.i <= INT32_MAX;
    *out = small ? SPK_I32 : SPK_F64;
    return 0;
}

/* A number as a 0-d tensor of dtype (a tensor operand: a new reference). */
static spk_tensor *operand_tensor(spk_operand o, spk_dtype dtype)
{
    if (o.tensor)
        return view_of(o.tensor);
    spk_tensor *t = spk_tensor_new(dtype, 0, NULL);
    if (t)
        store_scalar(t->storage->data, dtype, 0, o.scalar);
    return t;
}

static void where_fill(spk_tensor *out, const spk_tensor *const *ts)
{
    multi_iter it;
    multi_init(&it, out->ndim, out->shape, 3, ts);
    int64_t n = spk_tensor_numel(out);
    const spk_tensor *c = ts[0];
    for (int64_t i = 0; i < n; i++, multi_next(&it)) {
        bool pick = dtype_is_float(c->dtype) ? load_f64(c->storage->data, c->dtype, it.pos[0]) != 0
                                             : load_i64(c->storage->data, c->dtype, it.pos[0]) != 0;
        int j = pick ? 1 : 2;
        convert_one(out->storage->data, out->dtype, i, ts[j]->storage->data, ts[j]->dtype, it.pos[j]);
    }
}

spk_tensor *spk_tensor_where(const spk_tensor *cond, spk_operand a, spk_operand b)
{
    if (require_host(cond, "where") || (a.tensor && require_host(a.tensor, "where")) ||
        (b.tensor && require_host(b.tensor, "where")))
        return NULL;
    spk_dtype rt;
    if (where_dtype(a, b, &rt)) {
        spk_error_prefix("where");
        return NULL;
    }
    const spk_tensor *ts[3] = {cond, operand_tensor(a, rt), operand_tensor(b, rt)};
    spk_tensor *out = NULL;
    int ndim, ndim2;
    int64_t shape[SPK_MAX_DIMS], shape2[SPK_MAX_DIMS];
    if (ts[1] && ts[2] && spk_broadcast_shape(ts[1], ts[2], &ndim, shape) == 0) {
        spk_tensor both = {.storage = ts[1]->storage, .dtype = rt, .ndim = ndim};
        memcpy(both.shape, shape, sizeof shape);
        if (spk_broadcast_shape(cond, &both, &ndim2, shape2) == 0)
            out = spk_tensor_new(rt, ndim2, shape2);
    }
    if (out)
        where_fill(out, ts);
    else if (ts[1] && ts[2])
        spk_error_prefix("where");
    spk_tensor_free((spk_tensor *)ts[1]);
    spk_tensor_free((spk_tensor *)ts[2]);
    return out;
}

/* ---- matmul -------------------------------------------------------------------- */

/* The operands as NumPy's matmul sees them: at least 2-d (a 1-d a is [1, k],
 * a 1-d b is [k, 1]), with the result's shape. */
typedef struct matmul_shape {
    spk_tensor a, b;  /* views as stacks of matrices */
    int batch_ndim;   /* the broadcast batch dims */
    int64_t batch[SPK_MAX_DIMS];
    int64_t n, k, m;
    int out_ndim;
    int64_t out[SPK_MAX_DIMS];
} matmul_shape;

static int matmul_plan(const spk_tensor *a, const spk_tensor *b, matmul_shape *s)
{
    char sa[160], sb[160];
    if (a->ndim == 0 || b->ndim == 0)
        return spk_fail("matmul: a 0-d operand has no matrix dims (multiply with * instead)");
    s->a = *a;
    s->b = *b;
    if (a->ndim == 1) {
        s->a.ndim = 2;
        s->a.shape[1] = a->shape[0], s->a.strides[1] = a->strides[0];
        s->a.shape[0] = 1, s->a.strides[0] = 0;
    }
    if (b->ndim == 1) {
        s->b.ndim = 2;
        s->b.shape[0] = b->shape[0], s->b.strides[0] = b->strides[0];
        s->b.shape[1] = 1, s->b.strides[1] = 0;
    }
    s->n = s->a.shape[s->a.ndim - 2];
    s->k = s->a.shape[s->a.ndim - 1];
    s->m = s->b.shape[s->b.ndim - 1];
    if (s->b.shape[s->b.ndim - 2] != s->k)
        return spk_fail("matmul: %s @ %s: the inner sizes %" PRId64 " and %" PRId64 " differ",
                        spk_shape_string(a, sa, sizeof sa), spk_shape_string(b, sb, sizeof sb), s->k,
                        s->b.shape[s->b.ndim - 2]);
    spk_tensor ba = s->a, bb = s->b; /* the batch dims alone */
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (spk_broadcast_shape(&ba, &bb, &s->batch_ndim, s->batch)) {
        spk_error_prefix("matmul: the batch dims of %s and %s", spk_shape_string(a, sa, sizeof sa),
                         spk_shape_string(b, sb, sizeof sb));
        return -1;
    }
    s->out_ndim = s->batch_ndim;
    memcpy(s->out, s->batch, sizeof s->batch);
    if (a->ndim > 1)
        s->out[s->out_ndim++] = s->n;
    if (b->ndim > 1)
        s->out[s->out_ndim++] = s->m;
    return 0;
}

/* One n x m product of the matrices at element offsets pa, pb into out from
 * element `at` on (row-major); polls for cancellation once a row. */
static int matmul_one(const matmul_shape *s, int64_t pa, int64_t pb, spk_tensor *out, int64_t at)
{
    const spk_tensor *a = &s->a, *b = &s->b;
    int64_t ra = a->strides[a->ndim - 2], ka = a->strides[a->ndim - 1];
    int64_t kb = b->strides[b->ndim - 2], cb = b->strides[b->ndim - 1];
    const void *ab = a->storage->data, *bb = b->storage->data;
    bool floats = dtype_is_float(out->dtype);
    for (int64_t i = 0; i < s->n; i++) {
        if (spk_cancel_check())
            return -1;
        for (int64_t j = 0; j < s->m; j++) {
            int64_t x = pa + i * ra, y = pb + j * cb;
            double f = 0;
            uint64_t u = 0;
            for (int64_t l = 0; l < s->k; l++, x += ka, y += kb) {
                if (floats)
                    f += load_f64(ab, a->dtype, x) * load_f64(bb, b->dtype, y);
                else
                    u += (uint64_t)load_i64(ab, a->dtype, x) * (uint64_t)load_i64(bb, b->dtype, y);
            }
            if (floats)
                store_f64(out->storage->data, out->dtype, at + i * s->m + j, f);
            else
                store_i64(out->storage->data, out->dtype, at + i * s->m + j, (int64_t)u);
        }
    }
    return 0;
}

spk_tensor *spk_tensor_matmul(const spk_tensor *a, const spk_tensor *b)
{
    if (require_host(a, "matmul") || require_host(b, "matmul"))
        return NULL;
    matmul_shape s;
    if (matmul_plan(a, b, &s))
        return NULL;
    spk_tensor *out = spk_tensor_new(spk_dtype_promote(a->dtype, b->dtype), s.out_ndim, s.out);
    if (!out)
        return NULL;
    /* the batch dims of both, broadcast, walked together */
    spk_tensor ba = s.a, bb = s.b;
    ba.ndim -= 2;
    bb.ndim -= 2;
    const spk_tensor *pair[2] = {&ba, &bb};
    multi_iter it;
    multi_init(&it, s.batch_ndim, s.batch, 2, pair);
    int64_t batches = 1;
    for (int d = 0; d < s.batch_ndim; d++)
        batches *= s.batch[d];
    for (int64_t g = 0; g < batches; g++, multi_next(&it)) {
        if (matmul_one(&s, it.pos[0], it.pos[1], out, g * s.n * s.m)) {
            spk_tensor_free(out);
            return NULL;
        }
    }
    return out;
}
