/* Tensors: a dtype, up to SPK_MAX_DIMS dimensions with strides and an offset
 * (all in elements), over reference-counted storage. Views share storage.
 *
 * The core knows nothing of CUDA: storage on a device is opaque memory with a
 * release callback supplied by the layer that allocated it (src/cuda/). Every
 * host-side operation below refuses device tensors with an error.
 *
 * Conventions: indices here are 0-based (the Lua bindings translate 1-based
 * indices); functions returning a pointer return NULL on failure and functions
 * returning int return 0 on success, -1 on failure; the message is in
 * spk_last_error(). */
#ifndef SPK_TENSOR_H
#define SPK_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPK_MAX_DIMS 8

typedef enum { SPK_F32 = 0, SPK_F64 = 1, SPK_I32 = 2, SPK_U64 = 3 } spk_dtype;

/* Where storage lives: SPK_HOST, or a CUDA device ordinal (>= 0). */
#define SPK_HOST (-1)

typedef struct spk_storage spk_storage;
struct spk_storage {
    void *data;
    size_t bytes;
    int device;   /* SPK_HOST or a CUDA device ordinal */
    int refcount; /* owners: tensors (views included) and external holders */
    /* Frees `data` when the last reference goes; NULL means free() for host. */
    void (*release)(spk_storage *storage);
    void *context; /* for `release` (e.g. the stream that last used it) */
};

typedef struct spk_tensor {
    spk_storage *storage;
    spk_dtype dtype;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int64_t strides[SPK_MAX_DIMS]; /* in elements */
    int64_t offset;                /* in elements */
} spk_tensor;

/* A number: an integer (exact in int64) or a float, kept apart because
 * promotion treats them differently (see Elementwise below). */
typedef struct spk_scalar {
    bool is_integer; /* i holds the value; else f does */
    int64_t i;
    double f;
} spk_scalar;

static inline spk_scalar spk_scalar_int(int64_t v) { return (spk_scalar){true, v, (double)v}; }
static inline spk_scalar spk_scalar_float(double v) { return (spk_scalar){false, 0, v}; }

/* dtypes */
size_t spk_dtype_size(spk_dtype dtype);
const char *spk_dtype_name(spk_dtype dtype);           /* "f32", "f64", "i32", "u64" */
int spk_dtype_from_name(const char *name, spk_dtype *out); /* 0 or -1 with message */

/* Storage */
spk_storage *spk_storage_new_host(size_t bytes);       /* zero-filled */
/* Wraps externally allocated memory; `release` is called once when the last
 * reference goes. */
spk_storage *spk_storage_wrap(void *data, size_t bytes, int device,
                              void (*release)(spk_storage *), void *context);
void spk_storage_retain(spk_storage *storage);
void spk_storage_release(spk_storage *storage);

/* Creation (host, contiguous, zero-filled unless stated) */
spk_tensor *spk_tensor_new(spk_dtype dtype, int ndim, const int64_t *shape);
/* A contiguous tensor over the given storage (retains it), e.g. device memory. */
spk_tensor *spk_tensor_on_storage(spk_storage *storage, spk_dtype dtype, int ndim,
                                  const int64_t *shape);
/* Filled with value; an integer dtype takes only integers it can hold
 * (full(i32, 1.5) and full(i32, 2^40) are errors naming the value). */
spk_tensor *spk_tensor_full(spk_dtype dtype, int ndim, const int64_t *shape, double value);
spk_tensor *spk_tensor_full_scalar(spk_dtype dtype, int ndim, const int64_t *shape, spk_scalar value);
/* [start, stop) by step, length ceil((stop - start) / step), 1-D. start,
 * stop and step must be finite and step non-zero; for an integer dtype,
 * start and step must be integers and every value must fit the dtype. */
spk_tensor *spk_tensor_arange(spk_dtype dtype, double start, double stop, double step);
void spk_tensor_free(spk_tensor *t); /* releases its storage reference; NULL is fine */

/* Properties */
int64_t spk_tensor_numel(const spk_tensor *t);
bool spk_tensor_is_contiguous(const spk_tensor *t);
bool spk_tensor_is_host(const spk_tensor *t);
/* Address of element 0 of the view (storage data + offset). */
void *spk_tensor_data(const spk_tensor *t);
bool spk_tensor_same_shape(const spk_tensor *a, const spk_tensor *b);
/* "[2, 3, 4]" into buf; returns buf. */
char *spk_shape_string(const spk_tensor *t, char *buf, size_t size);

/* Views: share storage (retained), work on host and device tensors alike. */
spk_tensor *spk_tensor_narrow(const spk_tensor *t, int dim, int64_t start, int64_t length);
spk_tensor *spk_tensor_select(const spk_tensor *t, int dim, int64_t index); /* drops dim */
/* Python-style start:stop:step on one dim (negative indices count from the end).
 * Sizes, strides and offsets of views are computed with overflow checks: a
 * view that cannot be addressed in int64 is an error, never a wrapped stride. */
spk_tensor *spk_tensor_slice(const spk_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
spk_tensor *spk_tensor_transpose(const spk_tensor *t, int dim0, int dim1);
/* Reshape of contiguous data; one entry of shape may be -1 (inferred). */
spk_tensor *spk_tensor_view(const spk_tensor *t, int ndim, const int64_t *shape);

/* Copies (host) */
spk_tensor *spk_tensor_contiguous(const spk_tensor *t); /* new reference to t's data if already contiguous */
spk_tensor *spk_tensor_clone(const spk_tensor *t);      /* always a fresh contiguous copy */
spk_tensor *spk_tensor_to_dtype(const spk_tensor *t, spk_dtype dtype);
/* Elementwise copy src -> dst of the same shape, converting dtype. */
int spk_tensor_copy(spk_tensor *dst, const spk_tensor *src);

/* Elements (host), 0-based multi-index of length ndim. */
int spk_tensor_index_offset(const spk_tensor *t, int nidx, const int64_t *idx, int64_t *elem_offset);
double spk_tensor_get_f64(const spk_tensor *t, const int64_t *idx);
void spk_tensor_set_f64(spk_tensor *t, const int64_t *idx, double value);
/* Exact access for integer dtypes (u64 values above 2^63 wrap to negative). */
int64_t spk_tensor_get_i64(const spk_tensor *t, const int64_t *idx);
void spk_tensor_set_i64(spk_tensor *t, const int64_t *idx, int64_t value);
/* Element at linear position i in row-major order of the view. */
double spk_tensor_flat_get(const spk_tensor *t, int64_t i);
/* Every element of the view set to value (integer dtypes: as spk_tensor_full). */
int spk_tensor_fill(spk_tensor *t, double value);
int spk_tensor_fill_scalar(spk_tensor *t, spk_scalar value);

/* ---- Elementwise arithmetic and comparisons (host) ---------------------
 *
 * Dtype promotion is NumPy's (np.result_type) for these four dtypes:
 *
 *          f32  f64  i32  u64
 *     f32  f32  f64  f64  f64
 *     f64  f64  f64  f64  f64
 *     i32  f64  f64  i32  f64
 *     u64  f64  f64  f64  u64
 *
 * (i32 with f32 is f64 because f32 cannot hold every i32; i32 with u64 is f64
 * because no integer dtype holds both.) Then per operation:
 *   add, sub, mul: the promoted dtype. Integers wrap around (two's complement
 *     for i32, modulo 2^64 for u64), as NumPy's arrays do; f32 is computed in f32.
 *   div: true division, as NumPy's `/`: f32 if the promoted dtype is f32, else
 *     f64 (so i32 / i32 is f64; x / 0 is ±Inf or NaN, never an error).
 *   eq, ne, lt, le, gt, ge: compared in the promoted dtype (NaN is unequal to
 *     everything); the result is i32 holding 1 or 0 (spk has no bool dtype).
 *   pow: the promoted dtype, as NumPy's `**`: floats by pow (powf for f32);
 *     integers by repeated squaring, wrapping, with x^0 = 1, and a negative
 *     integer exponent is an error (NumPy: "Integers to negative integer
 *     powers are not allowed").
 *   mod: the promoted dtype, as NumPy's `%` (np.remainder) and Lua's: the
 *     result takes the divisor's sign (floored division); x % 0 is NaN for
 *     floats and 0 for integers, as NumPy gives them. A zero result of a
 *     float mod has the divisor's sign.
 * Shapes broadcast as in NumPy: aligned from the last dim, each pair of sizes
 * equal or one of them 1 (which repeats).
 *
 * A scalar (a Lua number) beside a tensor is "weak", as in NumPy 2 (NEP 50):
 *   an integer takes the tensor's dtype; with an i32 tensor it must fit
 *     (-2^31 .. 2^31-1), else the operation is an error naming the value
 *     (x_i32 + 2^40); with a u64 tensor it is the u64 of the same 64 bits,
 *     the one mapping every u64 path has (set, fill, full and get, tolist,
 *     sum, min and max read and write values past 2^63 as the negative
 *     integers of their bits): u64 + -1 wraps as u64 + (2^64 - 1), and
 *     u:eq(u:max()) holds where the maximum is;
 *   a float takes the tensor's dtype if that is f32 or f64 (x_f32 * 0.1 is
 *     f32, 0.1 rounded to f32 first), and f64 with an integer tensor
 *     (x_i32 * 0.5 is f64, so nothing is truncated);
 *   div of an integer tensor happens in f64, so any number divides it;
 *   comparisons with an integer are exact for integer tensors whatever its
 *     value (i32 == 2^40 is 0, as in NumPy 2; u64 > -1 compares with
 *     2^64 - 1, so it is 0 everywhere, by the mapping above). */
typedef enum {
    SPK_OP_ADD, SPK_OP_SUB, SPK_OP_MUL, SPK_OP_DIV,
    SPK_OP_EQ, SPK_OP_NE, SPK_OP_LT, SPK_OP_LE, SPK_OP_GT, SPK_OP_GE,
    SPK_OP_POW, SPK_OP_MOD
} spk_binop;
#define SPK_OP_LAST SPK_OP_MOD

const char *spk_binop_name(spk_binop op); /* "add", ..., "ge" */
spk_dtype spk_dtype_promote(spk_dtype a, spk_dtype b);
/* The dtype of `op`'s result for operands of dtypes a and b. */
spk_dtype spk_binop_dtype(spk_binop op, spk_dtype a, spk_dtype b);
/* The dtype a scalar takes beside a tensor of dtype t (the rules above);
 * -1 with a message naming the value when an integer does not fit t. */
int spk_scalar_dtype(spk_dtype t, spk_scalar s, spk_dtype *out);
/* The shape a and b broadcast to; -1 with a message naming both shapes. */
int spk_broadcast_shape(const spk_tensor *a, const spk_tensor *b, int *ndim, int64_t *shape);

spk_tensor *spk_tensor_binary(spk_binop op, const spk_tensor *a, const spk_tensor *b);
/* a op s, or s op a when scalar_first. */
spk_tensor *spk_tensor_binary_scalar(spk_binop op, const spk_tensor *a, spk_scalar s, bool scalar_first);
spk_tensor *spk_tensor_add(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_sub(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_mul(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_div(const spk_tensor *a, const spk_tensor *b);
/* a * s with s a float scalar (the rules above: an integer tensor gives f64). */
spk_tensor *spk_tensor_scale(const spk_tensor *a, double s);
/* Negation and absolute value keep the dtype; integers wrap (-INT32_MIN and
 * |INT32_MIN| are INT32_MIN, -1 in u64 is 2^64 - 1), as in NumPy. */
spk_tensor *spk_tensor_neg(const spk_tensor *a);
spk_tensor *spk_tensor_abs(const spk_tensor *a);
/* dst[...] = src, src broadcast to dst's shape (extra leading dims of size 1
 * dropped, as NumPy does) and converted to its dtype (floats to integers
 * truncate toward zero and saturate, NaN gives 0). */
int spk_tensor_assign(spk_tensor *dst, const spk_tensor *src);

/* ---- Reductions (host) ---------------------------------------------------
 *
 * Over one dim (0-based; SPK_ALL_DIMS for every element). keepdim keeps the
 * reduced dim with size 1. Result dtypes (NumPy's where spk has the dtype):
 *
 *                   f32  f64  i32  u64
 *     sum           f32  f64  f64  u64   (NumPy: i32 sums to int64; spk has
 *                                         no i64, and f64 is exact below 2^53)
 *     mean, norm    f32  f64  f64  f64
 *     min, max      f32  f64  i32  u64
 *     argmin/argmax i32  i32  i32  i32   (0-based here; NumPy gives int64)
 *     any, all      i32  i32  i32  i32   (1 or 0; NumPy gives bool)
 *
 * Float sums accumulate in f64 and are rounded once to the result dtype;
 * integer sums are exact (u64 wraps modulo 2^64). min and max propagate NaN,
 * and argmin/argmax give the first NaN's position, as NumPy does; ties give
 * the first position.
 *
 * Empty reductions (a tensor with no element, or a dim of size 0), NumPy 2's
 * rule (NumPy 2.3 and later for the +Inf norm): a sum is 0; every norm with
 * p >= 0 or p = +Inf is 0 (the empty vector is the zero vector); a mean
 * over an empty dim is NaN and the mean of an empty tensor an error; min,
 * max, argmin, argmax and the -Inf norm (min |x|) have no value there and
 * are errors naming the reduction.
 * any is whether an element is non-zero (NaN is), all whether every one is;
 * over nothing, any is 0 and all is 1.
 *
 * norm(p): p = 2 (sqrt of the sum of squares), 1 (sum of |x|), any other
 * finite p > 0 ((sum |x|^p)^(1/p)), 0 (the count of non-zero elements),
 * +Inf (max |x|) and -Inf (min |x|), as NumPy's vector norms; negative
 * finite p and NaN are refused. */
typedef enum {
    SPK_RED_SUM, SPK_RED_MEAN, SPK_RED_MIN, SPK_RED_MAX, SPK_RED_NORM, SPK_RED_ARGMIN, SPK_RED_ARGMAX,
    SPK_RED_ANY, SPK_RED_ALL
} spk_reduction;
#define SPK_RED_LAST SPK_RED_ALL

#define SPK_ALL_DIMS (-1)

const char *spk_reduction_name(spk_reduction r); /* "sum", ..., "argmax" */
spk_dtype spk_reduction_dtype(spk_reduction r, spk_dtype in);
/* 0 if p is a norm order spk computes, else -1 with a message naming it. */
int spk_norm_order_check(double p);
/* The reduced tensor (p is used by SPK_RED_NORM only). For SPK_RED_MIN and
 * SPK_RED_MAX, `indices` (may be NULL) receives the 0-based positions (i32)
 * of the values along `dim`, as argmin/argmax give them. */
spk_tensor *spk_tensor_reduce(const spk_tensor *t, spk_reduction r, int dim, bool keepdim, double p,
                              spk_tensor **indices);
/* Every element reduced to one value, computed in f64 and not rounded to the
 * result dtype: an integer for sum, min and max of integer tensors (exact;
 * a u64 above 2^63 reads as a negative int64) and for argmin/argmax (the
 * 0-based flat position in row-major order), a float otherwise. Empty
 * tensors: sum 0, norm 0 (p finite); mean and the others are errors. */
int spk_tensor_reduce_value(const spk_tensor *t, spk_reduction r, double p, spk_scalar *out);

/* Whole-tensor reductions as doubles (spk_tensor_reduce_value). */
int spk_tensor_sum(const spk_tensor *t, double *out);
int spk_tensor_mean(const spk_tensor *t, double *out);
int spk_tensor_min(const spk_tensor *t, double *out);
int spk_tensor_max(const spk_tensor *t, double *out);
int spk_tensor_norm(const spk_tensor *t, double *out); /* L2 */

/* Readable text: header "tensor(f32, [2, 3])" and values, summarised with "..."
 * past `edge` items per dim when numel > threshold. Returns a malloc'd string.
 * Floats print in the shortest form that reads back as the same value of
 * their dtype (1 and 1 + 1e-12 in f64 differ in print as in value). */
char *spk_tensor_format(const spk_tensor *t, int64_t threshold, int edge);
/* As spk_tensor_format with floats to `digits` significant digits (1..17);
 * 0 is the shortest exact form above. */
char *spk_tensor_format_digits(const spk_tensor *t, int64_t threshold, int edge, int digits);
/* One float as spk_tensor_format_digits prints it ("nan", "inf", "-inf" for
 * the special values) into buf; returns buf. */
char *spk_format_float(double v, spk_dtype dtype, int digits, char *buf, size_t size);

/* ---- NumPy's other everyday functions (tensor_view.c, tensor_math.c,
 * tensor_reduce.c). NumPy's names and meanings, 0-based dims here. ------ */

/* Views. squeeze: without dim (SPK_ALL_DIMS) every size-1 dim goes; with
 * one, that dim must have size 1 (as NumPy; a dim of another size is an
 * error). unsqueeze: a size-1 dim inserted at position dim (0 .. ndim).
 * permute: dims[k] is the input dim that becomes dim k (a permutation of
 * 0 .. ndim-1), as NumPy's transpose(axes). */
spk_tensor *spk_tensor_squeeze(const spk_tensor *t, int dim);
spk_tensor *spk_tensor_unsqueeze(const spk_tensor *t, int dim);
spk_tensor *spk_tensor_permute(const spk_tensor *t, const int *dims);

/* num values from start to stop, both included, evenly spaced: start + i *
 * step with step = (stop - start) / (num - 1) computed in f64 and the last
 * value exactly stop, as NumPy's linspace (endpoint=True); float dtypes. */
spk_tensor *spk_tensor_linspace(spk_dtype dtype, double start, double stop, int64_t num);
/* n x m with ones on the main diagonal, zeros elsewhere. */
spk_tensor *spk_tensor_eye(spk_dtype dtype, int64_t n, int64_t m);

/* cat: the tensors joined along an existing dim (every other size equal);
 * stack: along a new dim at position dim (every shape equal). The result's
 * dtype is the promotion of all (equal dtypes stay, else f64). */
spk_tensor *spk_tensor_cat(int count, const spk_tensor *const *tensors, int dim);
spk_tensor *spk_tensor_stack(int count, const spk_tensor *const *tensors, int dim);
/* Copies the parts (converting dtype) one after another along `dim` of out,
 * which they fill: every other size equal to out's, theirs along dim summing
 * to out's (cat's copy). */
int spk_tensor_copy_joined(spk_tensor *out, int dim, int count, const spk_tensor *const *parts);

/* Elementwise functions of one tensor. exp, log and sqrt: f32 stays f32
 * (expf, logf, sqrtf), everything else gives f64, as NumPy's ufuncs; log of
 * a negative number and sqrt of one are NaN, log(0) is -Inf. isnan and
 * isfinite: i32 1 or 0 (integers are never NaN and always finite). */
typedef enum { SPK_FN_EXP, SPK_FN_LOG, SPK_FN_SQRT, SPK_FN_ISNAN, SPK_FN_ISFINITE } spk_unary;
#define SPK_FN_LAST SPK_FN_ISFINITE
const char *spk_unary_name(spk_unary f); /* "exp", ..., "isfinite" */
spk_tensor *spk_tensor_unary(spk_unary f, const spk_tensor *a);

/* A tensor or a number where either may stand (tensor NULL: the number). */
typedef struct spk_operand {
    const spk_tensor *tensor;
    spk_scalar scalar;
} spk_operand;

/* where(cond, a, b): a where cond is non-zero, else b, the three broadcast
 * together. The dtype: a and b promoted (a number beside a tensor as in
 * arithmetic; two numbers: i32 for two integers that fit it, else f64). */
spk_tensor *spk_tensor_where(const spk_tensor *cond, spk_operand a, spk_operand b);

/* The matrix product, as NumPy's matmul: 2-d @ 2-d; a 1-d operand is a row
 * (first) or a column (second) vector and that dim leaves the result; more
 * dims are batches, broadcast. The dtype is the promotion of both (i32 @ i32
 * is i32, wrapping); float products accumulate in f64 and are rounded once,
 * integer ones wrap as their dtype's arithmetic. */
spk_tensor *spk_tensor_matmul(const spk_tensor *a, const spk_tensor *b);

/* A reduction over several dims at once (0-based, distinct; ndims 0 is
 * every dim), keepdim keeping each with size 1. Every reduction but argmin
 * and argmax (one dim only, as NumPy); values as spk_tensor_reduce. */
spk_tensor *spk_tensor_reduce_dims(const spk_tensor *t, spk_reduction r, int ndims, const int *dims, bool keepdim,
                                   double p);

#endif
