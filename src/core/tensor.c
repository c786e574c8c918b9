/* Host tensors: storage reference counting, views, copies, element access,
 * elementwise arithmetic, reductions and text formatting. */
#include "core/tensor.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- dtypes ------------------------------------------------------------ */

size_t spk_dtype_size(spk_dtype dtype)
{
    switch (dtype) {
    case SPK_F32: return 4;
    case SPK_F64: return 8;
    case SPK_I32: return 4;
    case SPK_U64: return 8;
    }
    return 0;
}

const char *spk_dtype_name(spk_dtype dtype)
{
    switch (dtype) {
    case SPK_F32: return "f32";
    case SPK_F64: return "f64";
    case SPK_I32: return "i32";
    case SPK_U64: return "u64";
    }
    return "?";
}

int spk_dtype_from_name(const char *name, spk_dtype *out)
{
    static const spk_dtype all[] = {SPK_F32, SPK_F64, SPK_I32, SPK_U64};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (name && strcmp(name, spk_dtype_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return spk_fail("unknown dtype '%s' (expected f32, f64, i32 or u64)", name ? name : "(null)");
}

static bool dtype_valid(spk_dtype dtype)
{
    return dtype == SPK_F32 || dtype == SPK_F64 || dtype == SPK_I32 || dtype == SPK_U64;
}

static bool dtype_is_float(spk_dtype dtype)
{
    return dtype == SPK_F32 || dtype == SPK_F64;
}

/* ---- storage ----------------------------------------------------------- */

spk_storage *spk_storage_new_host(size_t bytes)
{
    spk_storage *s = calloc(1, sizeof *s);
    if (!s)
        return spk_fail_null("out of memory allocating tensor storage");
    /* calloc(0) may return NULL; one byte keeps `data` a valid pointer. */
    s->data = calloc(bytes ? bytes : 1, 1);
    if (!s->data) {
        free(s);
        return spk_fail_null("out of memory allocating %zu bytes of tensor storage", bytes);
    }
    s->bytes = bytes;
    s->device = SPK_HOST;
    s->refcount = 1;
    return s;
}

spk_storage *spk_storage_wrap(void *data, size_t bytes, int device,
                              void (*release)(spk_storage *), void *context)
{
    if (device < SPK_HOST)
        return spk_fail_null("storage device %d is neither host (-1) nor a device ordinal", device);
    spk_storage *s = calloc(1, sizeof *s);
    if (!s)
        return spk_fail_null("out of memory allocating tensor storage");
    s->data = data;
    s->bytes = bytes;
    s->device = device;
    s->refcount = 1;
    s->release = release;
    s->context = context;
    return s;
}

void spk_storage_retain(spk_storage *storage)
{
    if (storage)
        storage->refcount++;
}

void spk_storage_release(spk_storage *storage)
{
    if (!storage || --storage->refcount > 0)
        return;
    if (storage->release)
        storage->release(storage);
    else if (storage->device == SPK_HOST)
        free(storage->data);
    free(storage);
}

/* ---- shapes ------------------------------------------------------------ */

static int check_ndim(int ndim)
{
    if (ndim < 0 || ndim > SPK_MAX_DIMS)
        return spk_fail("tensor rank %d is out of range [0, %d]", ndim, SPK_MAX_DIMS);
    return 0;
}

/* Number of elements of a shape, refusing negative sizes and totals whose
 * byte size would not fit in memory addressing. The non-zero sizes must
 * multiply within that limit too, even when another size is 0: strides and
 * element counts of views are products of them. */
static int shape_numel(int ndim, const int64_t *shape, size_t elem_size, int64_t *out)
{
    if (check_ndim(ndim))
        return -1;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return spk_fail("size %" PRId64 " of dim %d is negative", shape[d], d);
    }
    uint64_t limit = (uint64_t)INT64_MAX / (elem_size ? elem_size : 1);
    if (limit > SIZE_MAX / (elem_size ? elem_size : 1))
        limit = SIZE_MAX / (elem_size ? elem_size : 1);
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            empty = true;
            continue;
        }
        if ((uint64_t)shape[d] > limit / n)
            return spk_fail("tensor shape is too large (element count overflows)");
        n *= (uint64_t)shape[d];
    }
    *out = empty ? 0 : (int64_t)n;
    return 0;
}

char *spk_shape_string(const spk_tensor *t, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    size_t used = 0;
    int n = snprintf(buf, size, "[");
    used = n > 0 ? (size_t)n : 0;
    for (int d = 0; d < t->ndim && used < size; d++) {
        n = snprintf(buf + used, size - used, "%s%" PRId64, d ? ", " : "", t->shape[d]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

static void set_contiguous_strides(spk_tensor *t)
{
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->strides[d] = stride;
        stride *= t->shape[d] > 0 ? t->shape[d] : 1;
    }
}

/* ---- creation ---------------------------------------------------------- */

spk_tensor *spk_tensor_on_storage(spk_storage *storage, spk_dtype dtype, int ndim,
                                  const int64_t *shape)
{
    if (!storage)
        return spk_fail_null("tensor storage is NULL");
    if (!dtype_valid(dtype))
        return spk_fail_null("invalid dtype %d", (int)dtype);
    int64_t numel;
    if (shape_numel(ndim, shape, spk_dtype_size(dtype), &numel))
        return NULL;
    size_t need = (size_t)numel * spk_dtype_size(dtype);
    if (need > storage->bytes)
        return spk_fail_null("storage of %zu bytes is too small for %" PRId64 " %s elements (%zu bytes)",
                             storage->bytes, numel, spk_dtype_name(dtype), need);
    spk_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return spk_fail_null("out of memory allocating a tensor");
    t->storage = storage;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        t->shape[d] = shape[d];
    set_contiguous_strides(t);
    t->offset = 0;
    spk_storage_retain(storage);
    return t;
}

spk_tensor *spk_tensor_new(spk_dtype dtype, int ndim, const int64_t *shape)
{
    if (!dtype_valid(dtype))
        return spk_fail_null("invalid dtype %d", (int)dtype);
    int64_t numel;
    if (shape_numel(ndim, shape, spk_dtype_size(dtype), &numel))
        return NULL;
    spk_storage *s = spk_storage_new_host((size_t)numel * spk_dtype_size(dtype));
    if (!s)
        return NULL;
    spk_tensor *t = spk_tensor_on_storage(s, dtype, ndim, shape);
    spk_storage_release(s); /* the tensor holds the only reference now */
    return t;
}

void spk_tensor_free(spk_tensor *t)
{
    if (!t)
        return;
    spk_storage_release(t->storage);
    free(t);
}

static int fill_scalar(spk_tensor *t, spk_scalar value, const char *what);

spk_tensor *spk_tensor_full_scalar(spk_dtype dtype, int ndim, const int64_t *shape, spk_scalar value)
{
    spk_tensor *t = spk_tensor_new(dtype, ndim, shape);
    if (t && fill_scalar(t, value, "full")) {
        spk_tensor_free(t);
        return NULL;
    }
    return t;
}

spk_tensor *spk_tensor_full(spk_dtype dtype, int ndim, const int64_t *shape, double value)
{
    return spk_tensor_full_scalar(dtype, ndim, shape, spk_scalar_float(value));
}

/* ---- properties -------------------------------------------------------- */

int64_t spk_tensor_numel(const spk_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

bool spk_tensor_is_contiguous(const spk_tensor *t)
{
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return true;
        if (t->shape[d] != 1 && t->strides[d] != expected)
            return false;
        expected *= t->shape[d];
    }
    return true;
}

bool spk_tensor_is_host(const spk_tensor *t)
{
    return t && t->storage && t->storage->device == SPK_HOST;
}

void *spk_tensor_data(const spk_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)spk_dtype_size(t->dtype);
}

bool spk_tensor_same_shape(const spk_tensor *a, const spk_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static int require_host(const spk_tensor *t, const char *what)
{
    if (!t)
        return spk_fail("%s: tensor is NULL", what);
    if (t->storage->device != SPK_HOST)
        return spk_fail("%s needs a host tensor, but this one is on CUDA device %d (copy it to the host first)",
                        what, t->storage->device);
    return 0;
}

static int require_same_shape(const spk_tensor *a, const spk_tensor *b, const char *what)
{
    if (spk_tensor_same_shape(a, b))
        return 0;
    char sa[160], sb[160];
    return spk_fail("%s: shapes differ: %s vs %s", what, spk_shape_string(a, sa, sizeof sa),
                    spk_shape_string(b, sb, sizeof sb));
}

/* ---- views ------------------------------------------------------------- */

static spk_tensor *view_of(const spk_tensor *t)
{
    spk_tensor *v = malloc(sizeof *v);
    if (!v)
        return spk_fail_null("out of memory allocating a tensor view");
    *v = *t;
    spk_storage_retain(v->storage);
    return v;
}

/* *offset += index * stride, refusing what int64 cannot hold. */
static int offset_add(int64_t *offset, int64_t index, int64_t stride, const char *what)
{
    int64_t delta;
    if (__builtin_mul_overflow(index, stride, &delta) || __builtin_add_overflow(*offset, delta, offset))
        return spk_fail("%s: the offset of index %" PRId64 " (stride %" PRId64 ") overflows int64", what, index,
                        stride);
    return 0;
}

static int check_dim(const spk_tensor *t, int dim, const char *what)
{
    if (t->ndim == 0)
        return spk_fail("%s: dim %d is invalid for a 0-d tensor", what, dim);
    if (dim < 0 || dim >= t->ndim)
        return spk_fail("%s: dim %d is out of range [0, %d]", what, dim, t->ndim - 1);
    return 0;
}

spk_tensor *spk_tensor_narrow(const spk_tensor *t, int dim, int64_t start, int64_t length)
{
    if (check_dim(t, dim, "narrow"))
        return NULL;
    int64_t size = t->shape[dim];
    if (start < 0 || start > size)
        return spk_fail_null("narrow: start %" PRId64 " of dim %d is out of range [0, %" PRId64 "]",
                             start, dim, size);
    if (length < 0 || length > size - start)
        return spk_fail_null("narrow: length %" PRId64 " of dim %d is out of range [0, %" PRId64 "] for start %" PRId64,
                             length, dim, size - start, start);
    int64_t offset = t->offset;
    if (offset_add(&offset, start, t->strides[dim], "narrow"))
        return NULL;
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset = offset;
    v->shape[dim] = length;
    return v;
}

spk_tensor *spk_tensor_select(const spk_tensor *t, int dim, int64_t index)
{
    if (check_dim(t, dim, "select"))
        return NULL;
    int64_t size = t->shape[dim];
    if (index < 0 || index >= size) {
        if (size == 0)
            return spk_fail_null("select: index %" PRId64 " of dim %d is out of range (dim %d is empty)",
                                 index, dim, dim);
        return spk_fail_null("select: index %" PRId64 " of dim %d is out of range [0, %" PRId64 "]",
                             index, dim, size - 1);
    }
    int64_t offset = t->offset;
    if (offset_add(&offset, index, t->strides[dim], "select"))
        return NULL;
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset = offset;
    for (int d = dim; d < t->ndim - 1; d++) {
        v->shape[d] = t->shape[d + 1];
        v->strides[d] = t->strides[d + 1];
    }
    v->ndim--;
    v->shape[v->ndim] = 0;
    v->strides[v->ndim] = 0;
    return v;
}

/* Python's slice index adjustment (PySlice_AdjustIndices). */
spk_tensor *spk_tensor_slice(const spk_tensor *t, int dim, int64_t start, int64_t stop, int64_t step)
{
    if (check_dim(t, dim, "slice"))
        return NULL;
    if (step == 0)
        return spk_fail_null("slice: step of dim %d must not be zero", dim);
    if (step == INT64_MIN)
        return spk_fail_null("slice: step of dim %d is too large", dim);
    int64_t size = t->shape[dim];
    if (start < 0) {
        start = start < -size ? (step < 0 ? -1 : 0) : start + size;
    } else if (start >= size) {
        start = step < 0 ? size - 1 : size;
    }
    if (stop < 0) {
        stop = stop < -size ? (step < 0 ? -1 : 0) : stop + size;
    } else if (stop >= size) {
        stop = step < 0 ? size - 1 : size;
    }
    int64_t length = 0;
    if (step > 0 && start < stop)
        length = (stop - start - 1) / step + 1;
    else if (step < 0 && stop < start)
        length = (start - stop - 1) / (-step) + 1;
    /* With fewer than two elements the stride is never used; keeping the
     * base's spares a product that a huge step would overflow. */
    int64_t stride = t->strides[dim], offset = t->offset;
    if (length > 1 && __builtin_mul_overflow(t->strides[dim], step, &stride))
        return spk_fail_null("slice: step %" PRId64 " of dim %d times its stride %" PRId64 " overflows int64",
                             step, dim, t->strides[dim]);
    if (length > 0 && offset_add(&offset, start, t->strides[dim], "slice"))
        return NULL;
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset = offset;
    v->shape[dim] = length;
    v->strides[dim] = stride;
    return v;
}

spk_tensor *spk_tensor_transpose(const spk_tensor *t, int dim0, int dim1)
{
    if (check_dim(t, dim0, "transpose") || check_dim(t, dim1, "transpose"))
        return NULL;
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->shape[dim0] = t->shape[dim1];
    v->shape[dim1] = t->shape[dim0];
    v->strides[dim0] = t->strides[dim1];
    v->strides[dim1] = t->strides[dim0];
    return v;
}

spk_tensor *spk_tensor_view(const spk_tensor *t, int ndim, const int64_t *shape)
{
    if (check_ndim(ndim))
        return NULL;
    if (!spk_tensor_is_contiguous(t))
        return spk_fail_null("view needs contiguous data; call contiguous()");
    int64_t numel = spk_tensor_numel(t);
    int infer = -1;
    int64_t known = 1;
    int64_t resolved[SPK_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        resolved[d] = shape[d];
        if (shape[d] == -1) {
            if (infer >= 0)
                return spk_fail_null("view: only one dim may be -1 (dims %d and %d are)", infer, d);
            infer = d;
        } else if (shape[d] < 0) {
            return spk_fail_null("view: size %" PRId64 " of dim %d is negative", shape[d], d);
        } else {
            if (shape[d] != 0 && known > INT64_MAX / shape[d])
                return spk_fail_null("view: shape is too large (element count overflows)");
            known *= shape[d];
        }
    }
    char sbuf[160];
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return spk_fail_null("view: cannot infer dim %d: %" PRId64 " elements of %s do not divide into %" PRId64,
                                 infer, numel, spk_shape_string(t, sbuf, sizeof sbuf), known);
        resolved[infer] = numel / known;
        known = numel;
    }
    if (known != numel)
        return spk_fail_null("view: shape has %" PRId64 " elements but the tensor %s has %" PRId64,
                             known, spk_shape_string(t, sbuf, sizeof sbuf), numel);
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->ndim = ndim;
    for (int d = 0; d < SPK_MAX_DIMS; d++) {
        v->shape[d] = d < ndim ? resolved[d] : 0;
        v->strides[d] = 0;
    }
    set_contiguous_strides(v);
    return v;
}

/* ---- element access ----------------------------------------------------- */

/* Walks a tensor's elements in row-major order of its view, yielding each
 * element's storage offset. */
typedef struct iter {
    int ndim;
    int64_t idx[SPK_MAX_DIMS];
    int64_t shape[SPK_MAX_DIMS];
    int64_t strides[SPK_MAX_DIMS];
    int64_t pos;
} iter;

static void iter_init(iter *it, const spk_tensor *t)
{
    it->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        it->idx[d] = 0;
        it->shape[d] = t->shape[d];
        it->strides[d] = t->strides[d];
    }
    it->pos = t->offset;
}

static inline void iter_next(iter *it)
{
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            it->pos += it->strides[d];
            return;
        }
        it->pos -= it->strides[d] * (it->shape[d] - 1);
        it->idx[d] = 0;
    }
}

static inline double load_f64(const void *base, spk_dtype dtype, int64_t i)
{
    switch (dtype) {
    case SPK_F32: return ((const float *)base)[i];
    case SPK_F64: return ((const double *)base)[i];
    case SPK_I32: return ((const int32_t *)base)[i];
    case SPK_U64: return (double)((const uint64_t *)base)[i];
    }
    return NAN;
}

static inline int64_t load_i64(const void *base, spk_dtype dtype, int64_t i)
{
    switch (dtype) {
    case SPK_F32: {
        double v = ((const float *)base)[i];
        return isnan(v) ? 0 : v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
    }
    case SPK_F64: {
        double v = ((const double *)base)[i];
        return isnan(v) ? 0 : v >= 9223372036854775807.0 ? INT64_MAX : v <= -9223372036854775808.0 ? INT64_MIN : (int64_t)v;
    }
    case SPK_I32: return ((const int32_t *)base)[i];
    case SPK_U64: return (int64_t)((const uint64_t *)base)[i];
    }
    return 0;
}

/* Float to integer conversions saturate (NaN becomes 0) rather than invoke
 * undefined behaviour. */
static inline void store_f64(void *base, spk_dtype dtype, int64_t i, double v)
{
    switch (dtype) {
    case SPK_F32: ((float *)base)[i] = (float)v; break;
    case SPK_F64: ((double *)base)[i] = v; break;
    case SPK_I32:
        ((int32_t *)base)[i] = isnan(v) ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
        break;
    case SPK_U64:
        ((uint64_t *)base)[i] = isnan(v) || v <= 0 ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
        break;
    }
}

static inline void store_i64(void *base, spk_dtype dtype, int64_t i, int64_t v)
{
    switch (dtype) {
    case SPK_F32: ((float *)base)[i] = (float)v; break;
    case SPK_F64: ((double *)base)[i] = (double)v; break;
    case SPK_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case SPK_U64: ((uint64_t *)base)[i] = (uint64_t)v; break;
    }
}

static void store_scalar(void *base, spk_dtype dtype, int64_t i, spk_scalar v)
{
    if (v.is_integer)
        store_i64(base, dtype, i, v.i);
    else
        store_f64(base, dtype, i, v.f);
}

/* An unsigned value read from u64 stays exact when moved between integer
 * dtypes; conversions touching floats go through double. */
static inline void convert_one(void *dst, spk_dtype dt, int64_t di, const void *src, spk_dtype st, int64_t si)
{
    if (!dtype_is_float(dt) && !dtype_is_float(st))
        store_i64(dst, dt, di, load_i64(src, st, si));
    else
        store_f64(dst, dt, di, load_f64(src, st, si));
}

int spk_tensor_index_offset(const spk_tensor *t, int nidx, const int64_t *idx, int64_t *elem_offset)
{
    if (nidx != t->ndim)
        return spk_fail("index has %d entries but the tensor has %d dims", nidx, t->ndim);
    int64_t off = t->offset;
    for (int d = 0; d < nidx; d++) {
        if (idx[d] < 0 || idx[d] >= t->shape[d]) {
            if (t->shape[d] == 0)
                return spk_fail("index %" PRId64 " of dim %d is out of range (dim %d is empty)", idx[d], d, d);
            return spk_fail("index %" PRId64 " of dim %d is out of range [0, %" PRId64 "]",
                            idx[d], d, t->shape[d] - 1);
        }
        off += idx[d] * t->strides[d];
    }
    *elem_offset = off;
    return 0;
}

double spk_tensor_get_f64(const spk_tensor *t, const int64_t *idx)
{
    int64_t off;
    if (require_host(t, "get") || spk_tensor_index_offset(t, t->ndim, idx, &off))
        return NAN;
    return load_f64(t->storage->data, t->dtype, off);
}

void spk_tensor_set_f64(spk_tensor *t, const int64_t *idx, double value)
{
    int64_t off;
    if (require_host(t, "set") || spk_tensor_index_offset(t, t->ndim, idx, &off))
        return;
    store_f64(t->storage->data, t->dtype, off, value);
}

int64_t spk_tensor_get_i64(const spk_tensor *t, const int64_t *idx)
{
    int64_t off;
    if (require_host(t, "get") || spk_tensor_index_offset(t, t->ndim, idx, &off))
        return 0;
    return load_i64(t->storage->data, t->dtype, off);
}

void spk_tensor_set_i64(spk_tensor *t, const int64_t *idx, int64_t value)
{
    int64_t off;
    if (require_host(t, "set") || spk_tensor_index_offset(t, t->ndim, idx, &off))
        return;
    store_i64(t->storage->data, t->dtype, off, value);
}

static int64_t flat_offset(const spk_tensor *t, int64_t i)
{
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (i % n) * t->strides[d];
        i /= n;
    }
    return off;
}

double spk_tensor_flat_get(const spk_tensor *t, int64_t i)
{
    if (require_host(t, "flat_get"))
        return NAN;
    int64_t n = spk_tensor_numel(t);
    if (i < 0 || i >= n) {
        spk_fail("flat index %" PRId64 " is out of range [0, %" PRId64 ")", i, n);
        return NAN;
    }
    return load_f64(t->storage->data, t->dtype, flat_offset(t, i));
}

/* Whether `value` can be stored in `dtype` without changing it: floats take
 * any number (f32 rounds); integer dtypes take integers they hold, a u64 also
 * a negative int64 standing for its two's complement (as Lua writes values
 * above 2^63), and floats only when integral and in range. */
static int check_storable(spk_dtype dtype, spk_scalar v, const char *what)
{
    if (dtype_is_float(dtype))
        return 0;
    if (v.is_integer) {
        if (dtype == SPK_I32 && (v.i < INT32_MIN || v.i > INT32_MAX))
            return spk_fail("%s: %" PRId64 " does not fit in i32", what, v.i);
        return 0;
    }
    if (v.f != floor(v.f)) /* NaN and fractions; Inf is caught by the range */
        return spk_fail("%s: %s needs an integer, got %.17g", what, spk_dtype_name(dtype), v.f);
    bool fits = dtype == SPK_I32 ? v.f >= -2147483648.0 && v.f <= 2147483647.0
                                 : v.f >= 0 && v.f < 18446744073709551616.0;
    if (!fits)
        return spk_fail("%s: %.17g does not fit in %s", what, v.f, spk_dtype_name(dtype));
    return 0;
}

static int fill_scalar(spk_tensor *t, spk_scalar value, const char *what)
{
    if (require_host(t, what) || check_storable(t->dtype, value, what))
        return -1;
    int64_t n = spk_tensor_numel(t);
    void *base = t->storage->data;
    if (spk_tensor_is_contiguous(t)) {
        int64_t o = t->offset;
        if (t->dtype == SPK_F32) {
            float v = (float)value.f, *p = (float *)base + o;
            for (int64_t i = 0; i < n; i++)
                p[i] = v;
        } else if (t->dtype == SPK_F64) {
            double *p = (double *)base + o;
            for (int64_t i = 0; i < n; i++)
                p[i] = value.f;
        } else {
            for (int64_t i = 0; i < n; i++)
                store_scalar(base, t->dtype, o + i, value);
        }
        return 0;
    }
    iter it;
    iter_init(&it, t);
    for (int64_t i = 0; i < n; i++, iter_next(&it))
        store_scalar(base, t->dtype, it.pos, value);
    return 0;
}

int spk_tensor_fill_scalar(spk_tensor *t, spk_scalar value) { return fill_scalar(t, value, "fill"); }
int spk_tensor_fill(spk_tensor *t, double value) { return fill_scalar(t, spk_scalar_float(value), "fill"); }

spk_tensor *spk_tensor_arange(spk_dtype dtype, double start, double stop, double step)
{
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
        return spk_fail_null("arange: start, stop and step must be finite (got %g, %g, %g)", start, stop, step);
    if (step == 0)
        return spk_fail_null("arange: step must not be zero");
    double len = ceil((stop - start) / step);
    if (!(len > 0))
        len = 0;
    if (len > 9.0e15)
        return spk_fail_null("arange: %g elements is too many", len);
    int64_t n = (int64_t)len;
    if (!dtype_is_float(dtype)) {
        /* every value start + i * step is then an integer; the ends bound them */
        if (start != floor(start) || step != floor(step))
            return spk_fail_null("arange: %s needs an integer start and step, got %.17g and %.17g",
                                 spk_dtype_name(dtype), start, step);
        if (n > 0 && (check_storable(dtype, spk_scalar_float(start), "arange") ||
                      check_storable(dtype, spk_scalar_float(start + (double)(n - 1) * step), "arange")))
            return NULL;
    }
    spk_tensor *t = spk_tensor_new(dtype, 1, &n);
    if (!t)
        return NULL;
    for (int64_t i = 0; i < n; i++)
        store_f64(t->storage->data, dtype, i, start + (double)i * step);
    return t;
}

/* ---- copies ------------------------------------------------------------ */

int spk_tensor_copy(spk_tensor *dst, const spk_tensor *src)
{
    if (require_host(dst, "copy (destination)") || require_host(src, "copy (source)") ||
        require_same_shape(dst, src, "copy"))
        return -1;
    int64_t n = spk_tensor_numel(src);
    void *db = dst->storage->data;
    const void *sb = src->storage->data;
    bool dc = spk_tensor_is_contiguous(dst), sc = spk_tensor_is_contiguous(src);
    if (dc && sc && dst->dtype == src->dtype) {
        size_t es = spk_dtype_size(src->dtype);
        memmove((char *)db + dst->offset * (int64_t)es, (const char *)sb + src->offset * (int64_t)es,
                (size_t)n * es);
        return 0;
    }
    if (dc && sc) {
        for (int64_t i = 0; i < n; i++)
            convert_one(db, dst->dtype, dst->offset + i, sb, src->dtype, src->offset + i);
        return 0;
    }
    iter di, si;
    iter_init(&di, dst);
    iter_init(&si, src);
    for (int64_t i = 0; i < n; i++, iter_next(&di), iter_next(&si))
        convert_one(db, dst->dtype, di.pos, sb, src->dtype, si.pos);
    return 0;
}

spk_tensor *spk_tensor_to_dtype(const spk_tensor *t, spk_dtype dtype)
{
    if (require_host(t, "to"))
        return NULL;
    spk_tensor *out = spk_tensor_new(dtype, t->ndim, t->shape);
    if (!out)
        return NULL;
    if (spk_tensor_copy(out, t)) {
        spk_tensor_free(out);
        return NULL;
    }
    return out;
}

spk_tensor *spk_tensor_clone(const spk_tensor *t)
{
    if (require_host(t, "clone"))
        return NULL;
    return spk_tensor_to_dtype(t, t->dtype);
}

spk_tensor *spk_tensor_contiguous(const spk_tensor *t)
{
    if (spk_tensor_is_contiguous(t))
        return view_of(t);
    if (require_host(t, "contiguous"))
        return NULL;
    return spk_tensor_clone(t);
}

/* ---- elementwise ------------------------------------------------------- */

const char *spk_binop_name(spk_binop op)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"};
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

static inline double apply_f64(spk_binop op, double x, double y)
{
    switch (op) {
    case SPK_OP_ADD: return x + y;
    case SPK_OP_SUB: return x - y;
    case SPK_OP_MUL: return x * y;
    case SPK_OP_DIV: return x / y;
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
    default: return NAN;
    }
}

/* Integer arithmetic wraps: done in uint64, where overflow is defined, and
 * cut to the result's width when stored. */
static inline uint64_t apply_int(spk_binop op, uint64_t x, uint64_t y)
{
    switch (op) {
    case SPK_OP_ADD: return x + y;
    case SPK_OP_SUB: return x - y;
    case SPK_OP_MUL: return x * y;
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
            uint64_t v = apply_int(op, (uint64_t)load_i64(ab, a->dtype, it.pa), (uint64_t)load_i64(bb, b->dtype, it.pb));
            store_i64(ob, rt, i, (int64_t)v);
        }
    }
    return out;
}

spk_tensor *spk_tensor_binary(spk_binop op, const spk_tensor *a, const spk_tensor *b)
{
    if (!a || !b)
        return spk_fail_null("%s: tensor is NULL", spk_binop_name(op));
    if ((unsigned)op > SPK_OP_GE)
        return spk_fail_null("binary: unknown operation %d", (int)op);
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
    if (!a)
        return spk_fail_null("%s: tensor is NULL", what);
    if ((unsigned)op > SPK_OP_GE)
        return spk_fail_null("binary: unknown operation %d", (int)op);
    if (require_host(a, what))
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

/* ---- reductions -------------------------------------------------------- */

const char *spk_reduction_name(spk_reduction r)
{
    static const char *const names[] = {"sum", "mean", "min", "max", "norm", "argmin", "argmax"};
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
    case SPK_RED_ARGMAX: return SPK_I32;
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
    *a = (accum){r, p, dtype, 0, 0.0, 0, -1, false};
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
    }
    return spk_scalar_float(NAN);
}

static int reduce_checks(const spk_tensor *t, spk_reduction r, double p)
{
    const char *what = spk_reduction_name(r);
    if (!t)
        return spk_fail("%s: tensor is NULL", what);
    if ((unsigned)r > SPK_RED_ARGMAX)
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
    /* The groups: the elements sharing every index but `dim`'s (one group
     * of every element for SPK_ALL_DIMS), visited in row-major order. */
    spk_tensor outer = *t;
    int64_t inner = spk_tensor_numel(t), inner_stride = 0;
    if (dim != SPK_ALL_DIMS) {
        inner = t->shape[dim];
        inner_stride = t->strides[dim];
        for (int d = dim; d < t->ndim - 1; d++) {
            outer.shape[d] = t->shape[d + 1];
            outer.strides[d] = t->strides[d + 1];
        }
        outer.ndim--;
    } else {
        outer.ndim = 0;
    }
    int ndim = 0;
    int64_t shape[SPK_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        if (dim == SPK_ALL_DIMS || d == dim) {
            if (keepdim)
                shape[ndim++] = 1;
        } else {
            shape[ndim++] = t->shape[d];
        }
    }
    if (inner == 0 && needs_element(r, p)) {
        if (dim == SPK_ALL_DIMS)
            return spk_fail_null("%s of an empty tensor is undefined", what);
        return spk_fail_null("%s over dim %d, which is empty, is undefined", what, dim);
    }
    bool positions = r == SPK_RED_ARGMIN || r == SPK_RED_ARGMAX || (indices && (r == SPK_RED_MIN || r == SPK_RED_MAX));
    if (positions && inner > INT32_MAX)
        return spk_fail_null("%s: %" PRId64 " positions do not fit in i32", what, inner);
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
    const void *base = t->storage->data;
    int64_t groups = spk_tensor_numel(out);
    iter og;
    iter_init(&og, &outer);
    for (int64_t g = 0; g < groups; g++, iter_next(&og)) {
        accum a;
        accum_start(&a, r, p, t->dtype);
        if (dim == SPK_ALL_DIMS) {
            iter it;
            iter_init(&it, t);
            for (int64_t k = 0; k < inner; k++, iter_next(&it))
                accum_add(&a, base, it.pos, k);
        } else {
            for (int64_t k = 0; k < inner; k++)
                accum_add(&a, base, og.pos + k * inner_stride, k);
        }
        store_scalar(out->storage->data, rt, g, accum_result(&a));
        if (pos_out)
            ((int32_t *)pos_out->storage->data)[g] = (int32_t)a.best;
    }
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

/* ---- formatting -------------------------------------------------------- */

typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_append(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_append(strbuf *sb, const char *fmt, ...)
{
    if (sb->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            sb->failed = true;
            return;
        }
        if ((size_t)n < sb->cap - sb->len) {
            sb->len += (size_t)n;
            return;
        }
        size_t cap = sb->cap * 2 + (size_t)n + 64;
        char *p = realloc(sb->data, cap);
        if (!p) {
            sb->failed = true;
            return;
        }
        sb->data = p;
        sb->cap = cap;
    }
}

/* NaN prints as "nan" whatever its sign bit, as NumPy prints it. */
static void format_float(strbuf *sb, double v)
{
    if (isnan(v))
        sb_append(sb, "nan");
    else
        sb_append(sb, "%g", v);
}

static void format_value(strbuf *sb, const spk_tensor *t, int64_t off)
{
    const void *base = t->storage->data;
    switch (t->dtype) {
    case SPK_F32: format_float(sb, (double)((const float *)base)[off]); break;
    case SPK_F64: format_float(sb, ((const double *)base)[off]); break;
    case SPK_I32: sb_append(sb, "%" PRId32, ((const int32_t *)base)[off]); break;
    case SPK_U64: sb_append(sb, "%" PRIu64, ((const uint64_t *)base)[off]); break;
    }
}

static void format_dim(strbuf *sb, const spk_tensor *t, int dim, int64_t off, bool summarise, int edge)
{
    int64_t n = t->shape[dim];
    bool cut = summarise && n > 2 * (int64_t)edge;
    sb_append(sb, "[");
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == edge) {
            if (dim == t->ndim - 1)
                sb_append(sb, "..., ");
            else {
                sb_append(sb, "...,\n");
                for (int k = 0; k < t->ndim - dim - 2; k++)
                    sb_append(sb, "\n");
                for (int k = 0; k <= dim; k++)
                    sb_append(sb, " ");
            }
            i = n - edge;
        }
        if (dim == t->ndim - 1)
            format_value(sb, t, off + i * t->strides[dim]);
        else
            format_dim(sb, t, dim + 1, off + i * t->strides[dim], summarise, edge);
        if (i + 1 < n) {
            if (dim == t->ndim - 1) {
                sb_append(sb, ", ");
            } else {
                /* One newline per row, blank lines between higher-dim blocks, as NumPy prints. */
                sb_append(sb, ",\n");
                for (int k = 0; k < t->ndim - dim - 2; k++)
                    sb_append(sb, "\n");
                for (int k = 0; k <= dim; k++)
                    sb_append(sb, " ");
            }
        }
    }
    sb_append(sb, "]");
}

char *spk_tensor_format(const spk_tensor *t, int64_t threshold, int edge)
{
    if (!t)
        return spk_fail_null("format: tensor is NULL");
    strbuf sb = {malloc(256), 0, 256, false};
    if (!sb.data)
        return spk_fail_null("out of memory formatting a tensor");
    sb.data[0] = '\0';
    char shape[160];
    sb_append(&sb, "tensor(%s, %s", spk_dtype_name(t->dtype), spk_shape_string(t, shape, sizeof shape));
    if (t->storage->device != SPK_HOST) {
        sb_append(&sb, ", cuda:%d)", t->storage->device);
    } else {
        sb_append(&sb, ")\n");
        int64_t n = spk_tensor_numel(t);
        if (t->ndim == 0)
            format_value(&sb, t, t->offset);
        else if (n == 0)
            sb_append(&sb, "[]");
        else
            format_dim(&sb, t, 0, t->offset, n > threshold, edge < 1 ? 1 : edge);
    }
    if (sb.failed) {
        free(sb.data);
        return spk_fail_null("out of memory formatting a tensor");
    }
    return sb.data;
}
