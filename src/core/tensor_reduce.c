/* Reductions of host tensors: sum, mean, min, max, norm, argmin, argmax, any
 * and all over one dim, several or every element (the result dtypes are in
 * core/tensor.h). */
#include <inttypes.h>
#include <math.h>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"

/* ---- reductions -------------------------------------------------------- */

const char *spk_reduction_name(spk_reduction r)
{
    static const char *const names[] = {"sum", "mean", "min", "max", "norm", "argmin", "argmax", "any", "all"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

spk_dtype spk_reduction_dtype(spk_reduction r, spk_dtype in)
{
    switch (r) {
    case SPK_RED_SUM: return in == SPK_I32 ? SPK_F64 : in;
    case SPK_RED_MEAN:
    case SPK_RED_NORM: return in == SPK_F32 ? SPK_F32 : SPK_F64;
    case SPK_RED_MIN:
    case SPK_RED_MAX: return in;
    case SPK_RED_ARGMIN:
    case SPK_RED_ARGMAX:
    case SPK_RED_ANY:
    case SPK_RED_ALL: return SPK_I32;
    }
    return in;
}

int spk_norm_order_check(double p)
{
    if (isnan(p) || (isfinite(p) && p < 0))
        return spk_fail("norm: p = %g is not supported (p >= 0, math.huge or -math.huge: 2 is the Euclidean "
                        "norm, 1 the sum of |x|, 0 the count of non-zeros, +-Inf the max/min of |x|)", p);
    return 0;
}

/* Reductions that need at least one element (src/core/tensor.h: empty
 * reductions). A norm of nothing is 0, the -Inf norm (min |x|) excepted. */
static bool needs_element(spk_reduction r, double p)
{
    return r == SPK_RED_MIN || r == SPK_RED_MAX || r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX ||
           (r == SPK_RED_NORM && isinf(p) && p < 0);
}

/* One group's running value. */
typedef struct accum {
    spk_reduction r;
    double p;
    spk_dtype dtype;
    int64_t count;
    double f;     /* float sums, and the best float value so far */
    uint64_t u;   /* integer sums (wrapping), and the best integer's bits */
    int64_t best; /* position of the best value, -1 before the first */
    bool nan;     /* the best is a NaN: it stays */
} accum;

static void accum_start(accum *a, spk_reduction r, double p, spk_dtype dtype)
{
    *a = (accum){r, p, dtype, 0, 0.0, r == SPK_RED_ALL, -1, false};
}

/* Keeps the better of the best so far and v at `index` (max: larger). */
static inline void keep_best_f64(accum *a, double v, int64_t index, bool max)
{
    if (a->nan)
        return;
    if (isnan(v)) {
        a->nan = true;
        a->f = v;
        a->best = index;
    } else if (a->best < 0 || (max ? v > a->f : v < a->f)) {
        a->f = v;
        a->best = index;
    }
}

static inline void accum_add(accum *a, const void *base, int64_t pos, int64_t index)
{
    spk_dtype dt = a->dtype;
    a->count++;
    switch (a->r) {
    case SPK_RED_SUM:
        if (dtype_is_float(dt))
            a->f += load_f64(base, dt, pos);
        else
            a->u += (uint64_t)load_i64(base, dt, pos);
        return;
    case SPK_RED_MEAN: a->f += load_f64(base, dt, pos); return;
    case SPK_RED_NORM: {
        double v = fabs(load_f64(base, dt, pos));
        if (a->p == 2)
            a->f += v * v;
        else if (a->p == 1)
            a->f += v;
        else if (a->p == 0)
            a->f += v != 0; /* NaN counts, as NumPy's x != 0 */
        else if (isinf(a->p))
            keep_best_f64(a, v, index, a->p > 0);
        else
            a->f += pow(v, a->p);
        return;
    }
    case SPK_RED_ANY:
    case SPK_RED_ALL: {
        bool nonzero = dtype_is_float(dt) ? load_f64(base, dt, pos) != 0 : load_i64(base, dt, pos) != 0;
        a->u = a->r == SPK_RED_ANY ? (a->u | nonzero) : (a->u & nonzero);
        return;
    }
    case SPK_RED_MIN:
    case SPK_RED_MAX:
    case SPK_RED_ARGMIN:
    case SPK_RED_ARGMAX: {
        bool max = a->r == SPK_RED_MAX || a->r == SPK_RED_ARGMAX;
        if (dtype_is_float(dt)) {
            keep_best_f64(a, load_f64(base, dt, pos), index, max);
        } else if (dt == SPK_U64) {
            uint64_t v = ((const uint64_t *)base)[pos];
            if (a->best < 0 || (max ? v > a->u : v < a->u)) {
                a->u = v;
                a->best = index;
            }
        } else {
            int64_t v = load_i64(base, dt, pos), b = (int64_t)a->u;
            if (a->best < 0 || (max ? v > b : v < b)) {
                a->u = (uint64_t)v;
                a->best = index;
            }
        }
        return;
    }
    }
}

static spk_scalar accum_result(const accum *a)
{
    switch (a->r) {
    case SPK_RED_SUM: return dtype_is_float(a->dtype) ? spk_scalar_float(a->f) : spk_scalar_int((int64_t)a->u);
    case SPK_RED_MEAN: return spk_scalar_float(a->f / (double)a->count); /* 0 / 0 is NaN */
    case SPK_RED_NORM:
        if (a->p == 2)
            return spk_scalar_float(sqrt(a->f));
        if (a->p == 1 || a->p == 0 || isinf(a->p))
            return spk_scalar_float(a->f);
        return spk_scalar_float(pow(a->f, 1.0 / a->p));
    case SPK_RED_MIN:
    case SPK_RED_MAX: return dtype_is_float(a->dtype) ? spk_scalar_float(a->f) : spk_scalar_int((int64_t)a->u);
    case SPK_RED_ARGMIN:
    case SPK_RED_ARGMAX: return spk_scalar_int(a->best);
    case SPK_RED_ANY:
    case SPK_RED_ALL: return spk_scalar_int((int64_t)a->u);
    }
    return spk_scalar_float(NAN);
}

static int reduce_checks(const spk_tensor *t, spk_reduction r, double p)
{
    const char *what = spk_reduction_name(r);
    if (!t)
        return spk_fail("%s: tensor is NULL", what);
    if ((unsigned)r > SPK_RED_LAST)
        return spk_fail("reduce: unknown reduction %d", (int)r);
    if (require_host(t, what))
        return -1;
    if (r == SPK_RED_NORM && spk_norm_order_check(p))
        return -1;
    return 0;
}

int spk_tensor_reduce_value(const spk_tensor *t, spk_reduction r, double p, spk_scalar *out)
{
    if (reduce_checks(t, r, p))
        return -1;
    int64_t n = spk_tensor_numel(t);
    if (n == 0 && (needs_element(r, p) || r == SPK_RED_MEAN))
        return spk_fail("%s of an empty tensor is undefined", spk_reduction_name(r));
    accum a;
    accum_start(&a, r, p, t->dtype);
    const void *base = t->storage->data;
    iter it;
    iter_init(&it, t);
    for (int64_t i = 0; i < n; i++, iter_next(&it))
        accum_add(&a, base, it.pos, i);
    *out = accum_result(&a);
    return 0;
}

/* The groups of a reduction over the dims marked in `reduced`: `outer` walks
 * the groups (the kept dims), `inner` one group's elements (the reduced
 * dims), both in row-major order of the dims they keep; `shape` and `ndim`
 * the result's (a reduced dim as 1 where keepdim). Returns the elements a
 * group holds. */
static int64_t split_dims(const spk_tensor *t, const bool *reduced, bool keepdim, spk_tensor *outer,
                          spk_tensor *inner, int64_t *shape, int *ndim)
{
    *outer = *inner = *t;
    outer->ndim = inner->ndim = 0;
    *ndim = 0;
    int64_t count = 1;
    for (int d = 0; d < t->ndim; d++) {
        spk_tensor *part = reduced[d] ? inner : outer;
        part->shape[part->ndim] = t->shape[d];
        part->strides[part->ndim] = t->strides[d];
        part->ndim++;
        if (reduced[d])
            count *= t->shape[d];
        if (!reduced[d] || keepdim)
            shape[(*ndim)++] = reduced[d] ? 1 : t->shape[d];
    }
    return count;
}

/* Each group's result into `out` (row-major over the groups) and, where
 * pos_out is not NULL, the position its min or max stands at. */
static void reduce_groups(const spk_tensor *t, spk_reduction r, double p, const spk_tensor *outer, spk_tensor *inner,
                          int64_t count, spk_tensor *out, spk_tensor *pos_out)
{
    const void *base = t->storage->data;
    int64_t groups = spk_tensor_numel(out);
    iter og;
    iter_init(&og, outer);
    for (int64_t g = 0; g < groups; g++, iter_next(&og)) {
        accum a;
        accum_start(&a, r, p, t->dtype);
        inner->offset = og.pos;
        iter it;
        iter_init(&it, inner);
        for (int64_t k = 0; k < count; k++, iter_next(&it))
            accum_add(&a, base, it.pos, k);
        store_scalar(out->storage->data, out->dtype, g, accum_result(&a));
        if (pos_out)
            ((int32_t *)pos_out->storage->data)[g] = (int32_t)a.best;
    }
}

spk_tensor *spk_tensor_reduce(const spk_tensor *t, spk_reduction r, int dim, bool keepdim, double p,
                              spk_tensor **indices)
{
    if (indices)
        *indices = NULL;
    if (reduce_checks(t, r, p))
        return NULL;
    const char *what = spk_reduction_name(r);
    if (dim != SPK_ALL_DIMS && check_dim(t, dim, what))
        return NULL;
    bool reduced[SPK_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++)
        reduced[d] = dim == SPK_ALL_DIMS || d == dim;
    spk_tensor outer, inner;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int64_t count = split_dims(t, reduced, keepdim, &outer, &inner, shape, &ndim);
    if (count == 0 && needs_element(r, p)) {
        if (dim == SPK_ALL_DIMS)
            return spk_fail_null("%s of an empty tensor is undefined", what);
        return spk_fail_null("%s over dim %d, which is empty, is undefined", what, dim);
    }
    bool positions = r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX || (indices && (r == SPK_RED_MIN || r == SPK_RED_MAX));
    if (positions && count > INT32_MAX)
        return spk_fail_null("%s: %" PRId64 " positions do not fit in i32", what, count);
    spk_dtype rt = spk_reduction_dtype(r, t->dtype);
    spk_tensor *out = spk_tensor_new(rt, ndim, shape);
    if (!out)
        return NULL;
    spk_tensor *pos_out = NULL;
    if (indices && (r == SPK_RED_MIN || r == SPK_RED_MAX)) {
        pos_out = spk_tensor_new(SPK_I32, ndim, shape);
        if (!pos_out) {
            spk_tensor_free(out);
            return NULL;
        }
    }
    reduce_groups(t, r, p, &outer, &inner, count, out, pos_out);
    if (indices)
        *indices = pos_out;
    return out;
}

static int reduce_double(const spk_tensor *t, spk_reduction r, double p, double *out)
{
    spk_scalar v;
    if (spk_tensor_reduce_value(t, r, p, &v))
        return -1;
    *out = v.is_integer ? (double)v.i : v.f;
    return 0;
}

int spk_tensor_sum(const spk_tensor *t, double *out) { return reduce_double(t, SPK_RED_SUM, 0, out); }
int spk_tensor_mean(const spk_tensor *t, double *out) { return reduce_double(t, SPK_RED_MEAN, 0, out); }
int spk_tensor_min(const spk_tensor *t, double *out) { return reduce_double(t, SPK_RED_MIN, 0, out); }
int spk_tensor_max(const spk_tensor *t, double *out) { return reduce_double(t, SPK_RED_MAX, 0, out); }
int spk_tensor_norm(const spk_tensor *t, double *out) { return reduce_double(t, SPK_RED_NORM, 2, out); }

/* ---- over several dims --------------------------------------------------- */

/* `dims` checked (in range, distinct) into a mask of the reduced dims. */
static int reduced_dims(const spk_tensor *t, spk_reduction r, int ndims, const int *dims, bool *reduced)
{
    const char *what = spk_reduction_name(r);
    for (int d = 0; d < t->ndim; d++)
        reduced[d] = ndims == 0;
    for (int k = 0; k < ndims; k++) {
        if (check_dim(t, dims[k], what))
            return -1;
        if (reduced[dims[k]])
            return spk_fail("%s: dim %d is given twice", what, dims[k]);
        reduced[dims[k]] = true;
    }
    return 0;
}

spk_tensor *spk_tensor_reduce_dims(const spk_tensor *t, spk_reduction r, int ndims, const int *dims, bool keepdim,
                                   double p)
{
    if (reduce_checks(t, r, p))
        return NULL;
    const char *what = spk_reduction_name(r);
    if (r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX)
        return spk_fail_null("%s takes one dim (a position along several dims is not defined, as in NumPy)", what);
    if (ndims < 0 || ndims > t->ndim)
        return spk_fail_null("%s: %d dims given for a %d-d tensor", what, ndims, t->ndim);
    bool reduced[SPK_MAX_DIMS];
    if (reduced_dims(t, r, ndims, dims, reduced))
        return NULL;
    spk_tensor outer, inner;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int64_t count = split_dims(t, reduced, keepdim, &outer, &inner, shape, &ndim);
    if (count == 0 && needs_element(r, p))
        return spk_fail_null("%s over empty dims is undefined", what);
    spk_dtype rt = spk_reduction_dtype(r, t->dtype);
    spk_tensor *out = spk_tensor_new(rt, ndim, shape);
    if (!out)
        return NULL;
    reduce_groups(t, r, p, &outer, &inner, count, out, NULL);
    return out;
}
