/* Elementwise arithmetic (+ - * / ^ %) and comparisons of host tensors with
 * NumPy's dtype promotion and broadcasting (the rules are in core/tensor.h),
 * negation and absolute value, and assignment with broadcasting. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"

/* ---- elementwise ------------------------------------------------------- */

const char *spk_binop_name(spk_binop op)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge",
                                         "pow", "mod"};
    return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "?";
}

static bool is_comparison(spk_binop op) { return op >= SPK_OP_EQ && op <= SPK_OP_GE; }

/* The table in tensor.h: equal dtypes stay; any two different ones of f32,
 * f64, i32 and u64 meet only in f64. */
spk_dtype spk_dtype_promote(spk_dtype a, spk_dtype b) { return a == b ? a : SPK_F64; }

spk_dtype spk_binop_dtype(spk_binop op, spk_dtype a, spk_dtype b)
{
    spk_dtype p = spk_dtype_promote(a, b);
    if (is_comparison(op))
        return SPK_I32;
    if (op == SPK_OP_DIV)
        return p == SPK_F32 ? SPK_F32 : SPK_F64;
    return p;
}

int spk_scalar_dtype(spk_dtype t, spk_scalar s, spk_dtype *out)
{
    if (dtype_is_float(t)) {
        *out = t;
        return 0;
    }
    if (!s.is_integer) {
        *out = SPK_F64;
        return 0;
    }
    if (t == SPK_I32 && (s.i < INT32_MIN || s.i > INT32_MAX)) /* a u64 takes any: the same 64 bits */
        return spk_fail("the integer %" PRId64 " does not fit the tensor's dtype %s (convert the tensor with to(), "
                        "or write the number as a float)", s.i, spk_dtype_name(t));
    *out = t;
    return 0;
}

int spk_broadcast_shape(const spk_tensor *a, const spk_tensor *b, int *ndim, int64_t *shape)
{
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int k = 0; k < n; k++) {
        int da = a->ndim - n + k, db = b->ndim - n + k;
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char ta[160], tb[160];
            return spk_fail("shapes %s and %s do not broadcast (sizes %" PRId64 " and %" PRId64
                            " meet and neither is 1)",
                            spk_shape_string(a, ta, sizeof ta), spk_shape_string(b, tb, sizeof tb), sa, sb);
        }
        shape[k] = sa == 1 ? sb : sa;
    }
    *ndim = n;
    return 0;
}

/* Walks an output shape in row-major order with the positions of two
 * operands whose strides are 0 along the dims they repeat. */
typedef struct pair_iter {
    int ndim;
    int64_t idx[SPK_MAX_DIMS], shape[SPK_MAX_DIMS], sa[SPK_MAX_DIMS], sb[SPK_MAX_DIMS];
    int64_t pa, pb;
} pair_iter;

static void broadcast_strides(const spk_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    for (int k = 0; k < ndim; k++) {
        int d = t->ndim - ndim + k;
        strides[k] = d >= 0 && t->shape[d] == shape[k] ? t->strides[d] : 0;
    }
}

static void pair_init(pair_iter *it, int ndim, const int64_t *shape, const spk_tensor *a, const spk_tensor *b)
{
    it->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        it->idx[k] = 0;
        it->shape[k] = shape[k];
    }
    broadcast_strides(a, ndim, shape, it->sa);
    broadcast_strides(b, ndim, shape, it->sb);
    it->pa = a->offset;
    it->pb = b->offset;
}

static inline void pair_next(pair_iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            it->pa += it->sa[d];
            it->pb += it->sb[d];
            return;
        }
        it->pa -= it->sa[d] * (it->shape[d] - 1);
        it->pb -= it->sb[d] * (it->shape[d] - 1);
        it->idx[d] = 0;
    }
}

/* NumPy's remainder (npy_divmod): fmod moved to the divisor's sign, a zero
 * result signed as the divisor, x % 0 NaN. */
static inline double mod_f64(double x, double y)
{
    double m = fmod(x, y);
    if (y == 0)
        return m;
    if (m != 0)
        return (y < 0) != (m < 0) ? m + y : m;
    return copysign(0.0, y);
}

static inline float mod_f32(float x, float y)
{
    float m = fmodf(x, y);
    if (y == 0)
        return m;
    if (m != 0)
        return (y < 0) != (m < 0) ? m + y : m;
    return copysignf(0.0f, y);
}

static inline double apply_f64(spk_binop op, double x, double y)
{
    switch (op) {
    case SPK_OP_ADD: return x + y;
    case SPK_OP_SUB: return x - y;
    case SPK_OP_MUL: return x * y;
    case SPK_OP_DIV: return x / y;
    case SPK_OP_POW: return pow(x, y);
    case SPK_OP_MOD: return mod_f64(x, y);
    default: return NAN;
    }
}

static inline float apply_f32(spk_binop op, float x, float y)
{
    switch (op) {
    case SPK_OP_ADD: return x + y;
    case SPK_OP_SUB: return x - y;
    case SPK_OP_MUL: return x * y;
    case SPK_OP_DIV: return x / y;
    case SPK_OP_POW: return powf(x, y);
    case SPK_OP_MOD: return mod_f32(x, y);
    default: return NAN;
    }
}

/* x^y by squaring, wrapping in uint64 (the low bits are those of the
 * dtype's own wrapping arithmetic). */
static inline uint64_t pow_wrapping(uint64_t x, uint64_t y)
{
    uint64_t r = 1;
    for (; y; y >>= 1, x *= x)
        if (y & 1)
            r *= x;
    return r;
}

/* Floored remainder of integers (the divisor's sign), 0 for x % 0. */
static inline uint64_t mod_int(uint64_t x, uint64_t y, spk_dtype dt)
{
    if (y == 0)
        return 0;
    if (dt == SPK_U64)
        return x % y;
    int64_t a = (int64_t)x, b = (int64_t)y, r = a % b; /* i32 values: no overflow in int64 */
    return (uint64_t)(r != 0 && (r < 0) != (b < 0) ? r + b : r);
}

/* Integer arithmetic wraps: done in uint64, where overflow is defined, and
 * cut to the result's width (dtype dt) when stored. A negative exponent sets
 * *bad. */
static inline uint64_t apply_int(spk_binop op, uint64_t x, uint64_t y, spk_dtype dt, bool *bad)
{
    switch (op) {
    case SPK_OP_ADD: return x + y;
    case SPK_OP_SUB: return x - y;
    case SPK_OP_MUL: return x * y;
    case SPK_OP_POW:
        if (dt == SPK_I32 && (int64_t)y < 0) {
            *bad = true;
            return 0;
        }
        return pow_wrapping(x, y);
    case SPK_OP_MOD: return mod_int(x, y, dt);
    default: return 0;
    }
}

/* A comparison from the sign of x - y (-1, 0, 1), or `unordered` (a NaN). */
static inline int32_t compare_result(spk_binop op, int sign, bool unordered)
{
    if (unordered)
        return op == SPK_OP_NE;
    switch (op) {
    case SPK_OP_EQ: return sign == 0;
    case SPK_OP_NE: return sign != 0;
    case SPK_OP_LT: return sign < 0;
    case SPK_OP_LE: return sign <= 0;
    case SPK_OP_GT: return sign > 0;
    case SPK_OP_GE: return sign >= 0;
    default: return 0;
    }
}

static inline int32_t compare_f64(spk_binop op, double x, double y)
{
    return compare_result(op, (x > y) - (x < y), isnan(x) || isnan(y));
}

static spk_tensor *binary_impl(spk_binop op, const spk_tensor *a, const spk_tensor *b)
{
    const char *what = spk_binop_name(op);
    if (require_host(a, what) || require_host(b, what))
        return NULL;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    if (spk_broadcast_shape(a, b, &ndim, shape)) {
        spk_error_prefix("%s", what);
        return NULL;
    }
    spk_dtype rt = spk_binop_dtype(op, a->dtype, b->dtype);
    /* comparisons happen in the promoted dtype, arithmetic in the result's */
    spk_dtype ct = is_comparison(op) ? spk_dtype_promote(a->dtype, b->dtype) : rt;
    spk_tensor *out = spk_tensor_new(rt, ndim, shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(out);
    const void *ab = a->storage->data, *bb = b->storage->data;
    void *ob = out->storage->data;
    if (!is_comparison(op) && a->dtype == b->dtype && a->dtype == rt && spk_tensor_same_shape(a, b) &&
        spk_tensor_is_contiguous(a) && spk_tensor_is_contiguous(b)) {
        if (rt == SPK_F32) {
            const float *x = (const float *)ab + a->offset, *y = (const float *)bb + b->offset;
            float *o = ob;
            for (int64_t i = 0; i < n; i++)
                o[i] = apply_f32(op, x[i], y[i]);
            return out;
        }
        if (rt == SPK_F64) {
            const double *x = (const double *)ab + a->offset, *y = (const double *)bb + b->offset;
            double *o = ob;
            for (int64_t i = 0; i < n; i++)
                o[i] = apply_f64(op, x[i], y[i]);
            return out;
        }
    }
    pair_iter it;
    pair_init(&it, ndim, shape, a, b);
    bool bad = false;
    for (int64_t i = 0; i < n; i++, pair_next(&it)) {
        if (is_comparison(op)) {
            int32_t r;
            if (ct == SPK_I32) {
                int64_t x = load_i64(ab, a->dtype, it.pa), y = load_i64(bb, b->dtype, it.pb);
                r = compare_result(op, (x > y) - (x < y), false);
            } else if (ct == SPK_U64) {
                uint64_t x = (uint64_t)load_i64(ab, a->dtype, it.pa), y = (uint64_t)load_i64(bb, b->dtype, it.pb);
                r = compare_result(op, (x > y) - (x < y), false);
            } else { /* f32 values compare the same in f64 */
                r = compare_f64(op, load_f64(ab, a->dtype, it.pa), load_f64(bb, b->dtype, it.pb));
            }
            ((int32_t *)ob)[i] = r;
        } else if (ct == SPK_F32) {
            ((float *)ob)[i] = apply_f32(op, (float)load_f64(ab, a->dtype, it.pa), (float)load_f64(bb, b->dtype, it.pb));
        } else if (ct == SPK_F64) {
            ((double *)ob)[i] = apply_f64(op, load_f64(ab, a->dtype, it.pa), load_f64(bb, b->dtype, it.pb));
        } else {
            uint64_t v = apply_int(op, (uint64_t)load_i64(ab, a->dtype, it.pa), (uint64_t)load_i64(bb, b->dtype, it.pb),
                                   rt, &bad);
            store_i64(ob, rt, i, (int64_t)v);
        }
    }
    if (bad) {
        spk_tensor_free(out);
        return spk_fail_null("pow: integers to negative integer powers are not allowed (convert to a float dtype "
                             "with to(), as in NumPy)");
    }
    return out;
}

/* What every binary operation checks first: its operands are there
 * (`present`) and it is one spk knows. */
static int check_binop(spk_binop op, bool present)
{
    if (!present)
        return spk_fail("%s: tensor is NULL", spk_binop_name(op));
    if ((unsigned)op > SPK_OP_LAST)
        return spk_fail("binary: unknown operation %d", (int)op);
    return 0;
}

spk_tensor *spk_tensor_binary(spk_binop op, const spk_tensor *a, const spk_tensor *b)
{
    if (check_binop(op, a && b))
        return NULL;
    return binary_impl(op, a, b);
}

/* An integer tensor compared with an integer: exact for every int64 value,
 * which need not fit the tensor's dtype. */
static spk_tensor *compare_integer(spk_binop op, const spk_tensor *a, int64_t v, bool scalar_first)
{
    spk_tensor *out = spk_tensor_new(SPK_I32, a->ndim, a->shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(a);
    const void *ab = a->storage->data;
    iter it;
    iter_init(&it, a);
    for (int64_t i = 0; i < n; i++, iter_next(&it)) {
        int sign;
        if (a->dtype == SPK_U64) { /* v is the u64 of the same bits, as set and get have it */
            uint64_t x = ((const uint64_t *)ab)[it.pos];
            sign = (x > (uint64_t)v) - (x < (uint64_t)v);
        } else {
            int64_t x = load_i64(ab, a->dtype, it.pos);
            sign = (x > v) - (x < v);
        }
        ((int32_t *)out->storage->data)[i] = compare_result(op, scalar_first ? -sign : sign, false);
    }
    return out;
}

spk_tensor *spk_tensor_binary_scalar(spk_binop op, const spk_tensor *a, spk_scalar s, bool scalar_first)
{
    const char *what = spk_binop_name(op);
    if (check_binop(op, a != NULL) || require_host(a, what))
        return NULL;
    if (is_comparison(op) && s.is_integer && !dtype_is_float(a->dtype))
        return compare_integer(op, a, s.i, scalar_first);
    spk_dtype sd;
    if (a->dtype == SPK_U64 && s.is_integer) {
        sd = SPK_U64; /* the u64 of the same bits; u64 / u64 divides in f64 */
    } else if (op == SPK_OP_DIV && !dtype_is_float(a->dtype)) {
        sd = SPK_F64; /* integers divide in f64, where any integer has a value */
    } else if (spk_scalar_dtype(a->dtype, s, &sd)) {
        spk_error_prefix("%s", what);
        return NULL;
    }
    /* the scalar as a 0-d tensor of the dtype it takes, broadcast */
    spk_tensor *st = spk_tensor_new(sd, 0, NULL);
    if (!st)
        return NULL;
    store_scalar(st->storage->data, sd, 0, s);
    spk_tensor *out = scalar_first ? binary_impl(op, st, a) : binary_impl(op, a, st);
    spk_tensor_free(st);
    return out;
}

spk_tensor *spk_tensor_add(const spk_tensor *a, const spk_tensor *b) { return spk_tensor_binary(SPK_OP_ADD, a, b); }
spk_tensor *spk_tensor_sub(const spk_tensor *a, const spk_tensor *b) { return spk_tensor_binary(SPK_OP_SUB, a, b); }
spk_tensor *spk_tensor_mul(const spk_tensor *a, const spk_tensor *b) { return spk_tensor_binary(SPK_OP_MUL, a, b); }
spk_tensor *spk_tensor_div(const spk_tensor *a, const spk_tensor *b) { return spk_tensor_binary(SPK_OP_DIV, a, b); }

spk_tensor *spk_tensor_scale(const spk_tensor *a, double s)
{
    return spk_tensor_binary_scalar(SPK_OP_MUL, a, spk_scalar_float(s), false);
}

typedef enum { UNARY_NEG, UNARY_ABS } unary;

static spk_tensor *unary_op(const spk_tensor *a, unary u, const char *what)
{
    if (!a)
        return spk_fail_null("%s: tensor is NULL", what);
    if (require_host(a, what))
        return NULL;
    spk_tensor *out = spk_tensor_new(a->dtype, a->ndim, a->shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(a);
    const void *ab = a->storage->data;
    void *ob = out->storage->data;
    iter it;
    iter_init(&it, a);
    for (int64_t i = 0; i < n; i++, iter_next(&it)) {
        switch (a->dtype) {
        case SPK_F32: {
            float v = ((const float *)ab)[it.pos];
            ((float *)ob)[i] = u == UNARY_NEG ? -v : fabsf(v);
            break;
        }
        case SPK_F64: {
            double v = ((const double *)ab)[it.pos];
            ((double *)ob)[i] = u == UNARY_NEG ? -v : fabs(v);
            break;
        }
        case SPK_I32: {
            /* in uint32, where -INT32_MIN wraps to itself as in two's complement */
            int32_t v = ((const int32_t *)ab)[it.pos];
            uint32_t m = 0u - (uint32_t)v;
            ((int32_t *)ob)[i] = u == UNARY_NEG || v < 0 ? (int32_t)m : v;
            break;
        }
        case SPK_U64: {
            uint64_t v = ((const uint64_t *)ab)[it.pos];
            ((uint64_t *)ob)[i] = u == UNARY_NEG ? 0u - v : v;
            break;
        }
        }
    }
    return out;
}

spk_tensor *spk_tensor_neg(const spk_tensor *a) { return unary_op(a, UNARY_NEG, "neg"); }
spk_tensor *spk_tensor_abs(const spk_tensor *a) { return unary_op(a, UNARY_ABS, "abs"); }

int spk_tensor_assign(spk_tensor *dst, const spk_tensor *src)
{
    if (require_host(dst, "assign (destination)") || require_host(src, "assign (source)"))
        return -1;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    char sd[160], ss[160];
    /* Leading dims of size 1 beyond dst's are dropped, as NumPy does. */
    spk_tensor trimmed = *src;
    while (trimmed.ndim > dst->ndim && trimmed.shape[0] == 1) {
        memmove(trimmed.shape, trimmed.shape + 1, sizeof trimmed.shape[0] * (size_t)(trimmed.ndim - 1));
        memmove(trimmed.strides, trimmed.strides + 1, sizeof trimmed.strides[0] * (size_t)(trimmed.ndim - 1));
        trimmed.ndim--;
    }
    if (spk_broadcast_shape(dst, &trimmed, &ndim, shape) || ndim != dst->ndim ||
        memcmp(shape, dst->shape, sizeof shape[0] * (size_t)ndim) != 0)
        return spk_fail("assign: a tensor of shape %s does not broadcast to %s", spk_shape_string(src, ss, sizeof ss),
                        spk_shape_string(dst, sd, sizeof sd));
    src = &trimmed;
    /* Reading and writing the same storage in one pass would see values it
     * already wrote where the views overlap; read from a copy instead. */
    spk_tensor *copy = NULL;
    if (src->storage == dst->storage) {
        copy = spk_tensor_clone(src);
        if (!copy)
            return -1;
        src = copy;
    }
    int64_t n = spk_tensor_numel(dst);
    pair_iter it;
    pair_init(&it, ndim, shape, dst, src);
    for (int64_t i = 0; i < n; i++, pair_next(&it))
        convert_one(dst->storage->data, dst->dtype, it.pa, src->storage->data, src->dtype, it.pb);
    spk_tensor_free(copy);
    return 0;
}
