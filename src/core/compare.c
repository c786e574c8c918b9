/* Comparison metrics between a result and a truth of the same shape. */
#include "core/compare.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "core/cancel.h"
#include "core/error.h"

static double load(const spk_tensor *t, int64_t off)
{
    const void *base = t->storage->data;
    switch (t->dtype) {
    case SPK_F32: return ((const float *)base)[off];
    case SPK_F64: return ((const double *)base)[off];
    case SPK_I32: return ((const int32_t *)base)[off];
    case SPK_U64: return (double)((const uint64_t *)base)[off];
    }
    return NAN;
}

static int check_pair(const spk_tensor *a, const spk_tensor *b, const char *what)
{
    if (!a || !b)
        return spk_fail("%s: tensor is NULL", what);
    if (!spk_tensor_is_host(a) || !spk_tensor_is_host(b))
        return spk_fail("%s needs host tensors, but %s is on CUDA device %d (copy it to the host first)", what,
                        spk_tensor_is_host(a) ? "the second" : "the first",
                        spk_tensor_is_host(a) ? b->storage->device : a->storage->device);
    if (!spk_tensor_same_shape(a, b)) {
        char sa[160], sb[160];
        return spk_fail("%s: shapes differ: %s vs %s", what, spk_shape_string(a, sa, sizeof sa),
                        spk_shape_string(b, sb, sizeof sb));
    }
    return 0;
}

/* Walks two same-shaped views together in row-major order. */
typedef struct pair_iter {
    int ndim;
    int64_t idx[SPK_MAX_DIMS];
    int64_t oa, ob;
    const spk_tensor *a, *b;
} pair_iter;

static void pair_init(pair_iter *it, const spk_tensor *a, const spk_tensor *b)
{
    memset(it, 0, sizeof *it);
    it->ndim = a->ndim;
    it->a = a;
    it->b = b;
    it->oa = a->offset;
    it->ob = b->offset;
}

static void pair_next(pair_iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->idx[d] < it->a->shape[d]) {
            it->oa += it->a->strides[d];
            it->ob += it->b->strides[d];
            return;
        }
        it->oa -= it->a->strides[d] * (it->a->shape[d] - 1);
        it->ob -= it->b->strides[d] * (it->b->shape[d] - 1);
        it->idx[d] = 0;
    }
}

/* Floats mapped onto integers so that adjacent representable values differ
 * by one; +0 and -0 both map to 0. Distances are returned as doubles. */
static double ulp_distance_f32(float x, float y)
{
    uint32_t ux, uy;
    memcpy(&ux, &x, 4);
    memcpy(&uy, &y, 4);
    uint32_t mx = ux & 0x7FFFFFFFu, my = uy & 0x7FFFFFFFu;
    bool nx = ux >> 31, ny = uy >> 31;
    if (nx == ny)
        return mx > my ? (double)(mx - my) : (double)(my - mx);
    return (double)mx + (double)my;
}

static double ulp_distance_f64(double x, double y)
{
    uint64_t ux, uy;
    memcpy(&ux, &x, 8);
    memcpy(&uy, &y, 8);
    uint64_t mx = ux & UINT64_C(0x7FFFFFFFFFFFFFFF), my = uy & UINT64_C(0x7FFFFFFFFFFFFFFF);
    bool nx = ux >> 63, ny = uy >> 63;
    if (nx == ny)
        return mx > my ? (double)(mx - my) : (double)(my - mx);
    return (double)(mx + my); /* both below 2^63: no overflow */
}

int spk_compare(const spk_tensor *a, const spk_tensor *b, spk_comparison *out)
{
    if (check_pair(a, b, "compare"))
        return -1;
    /* ULPs in the less precise dtype: f32 if either side is f32. */
    bool in_f32 = a->dtype == SPK_F32 || b->dtype == SPK_F32;
    spk_comparison r;
    memset(&r, 0, sizeof r);
    r.worst_flat = -1;
    r.a_worst = r.b_worst = NAN;
    double diff_sq = 0, ref_sq = 0;
    int64_t n = spk_tensor_numel(a);
    pair_iter it;
    pair_init(&it, a, b);
    for (int64_t i = 0; i < n; i++, pair_next(&it)) {
        if (spk_cancel_due(i))
            return spk_cancel_check();
        double x = load(a, it.oa), y = load(b, it.ob);
        bool xn = isnan(x), yn = isnan(y);
        if (xn || yn) {
            if (xn != yn)
                r.nan_mismatch++;
            continue;
        }
        if (isinf(x) || isinf(y)) {
            if (x != y)
                r.inf_mismatch++;
            continue;
        }
        double d = fabs(x - y);
        if (d > r.max_abs || r.worst_flat < 0) {
            r.max_abs = d;
            r.worst_flat = i;
            memcpy(r.worst, it.idx, sizeof r.worst);
            r.a_worst = x;
            r.b_worst = y;
        }
        double ay = fabs(y);
        double rel = d / (ay > DBL_MIN ? ay : DBL_MIN);
        if (rel > r.max_rel)
            r.max_rel = rel;
        diff_sq += d * d;
        ref_sq += y * y;
        double ulp = in_f32 ? ulp_distance_f32((float)x, (float)y) : ulp_distance_f64(x, y);
        if (ulp > r.max_ulp)
            r.max_ulp = ulp;
    }
    r.rel_l2 = ref_sq > 0 ? sqrt(diff_sq) / sqrt(ref_sq) : sqrt(diff_sq);
    r.count = n;
    *out = r;
    return 0;
}

int spk_allclose(const spk_tensor *a, const spk_tensor *b, double rtol, double atol, bool *out)
{
    if (check_pair(a, b, "allclose"))
        return -1;
    if (!(rtol >= 0) || !(atol >= 0))
        return spk_fail("allclose: rtol (%g) and atol (%g) must be non-negative", rtol, atol);
    int64_t n = spk_tensor_numel(a);
    pair_iter it;
    pair_init(&it, a, b);
    bool close = true;
    for (int64_t i = 0; i < n && close; i++, pair_next(&it)) {
        if (spk_cancel_due(i))
            return spk_cancel_check();
        double x = load(a, it.oa), y = load(b, it.ob);
        if (isnan(x) || isnan(y))
            close = isnan(x) && isnan(y);
        else if (isinf(x) || isinf(y))
            close = x == y;
        else
            close = fabs(x - y) <= atol + rtol * fabs(y);
    }
    *out = close;
    return 0;
}
