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

spk_tensor *spk_tensor_full(spk_dtype dtype, int ndim, const int64_t *shape, double value)
{
    spk_tensor *t = spk_tensor_new(dtype, ndim, shape);
    if (t && value != 0.0 && spk_tensor_fill(t, value)) {
        spk_tensor_free(t);
        return NULL;
    }
    return t;
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
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset += start * t->strides[dim];
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
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset += index * t->strides[dim];
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
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    if (length > 0)
        v->offset += start * t->strides[dim];
    v->shape[dim] = length;
    v->strides[dim] = t->strides[dim] * step;
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

int spk_tensor_fill(spk_tensor *t, double value)
{
    if (require_host(t, "fill"))
        return -1;
    int64_t n = spk_tensor_numel(t);
    void *base = t->storage->data;
    if (spk_tensor_is_contiguous(t)) {
        int64_t o = t->offset;
        if (t->dtype == SPK_F32) {
            float v = (float)value, *p = (float *)base + o;
            for (int64_t i = 0; i < n; i++)
                p[i] = v;
        } else if (t->dtype == SPK_F64) {
            double *p = (double *)base + o;
            for (int64_t i = 0; i < n; i++)
                p[i] = value;
        } else {
            for (int64_t i = 0; i < n; i++)
                store_f64(base, t->dtype, o + i, value);
        }
        return 0;
    }
    iter it;
    iter_init(&it, t);
    for (int64_t i = 0; i < n; i++, iter_next(&it))
        store_f64(base, t->dtype, it.pos, value);
    return 0;
}

spk_tensor *spk_tensor_arange(spk_dtype dtype, double start, double stop, double step)
{
    if (!(step != 0) || isnan(step))
        return spk_fail_null("arange: step must be non-zero");
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step))
        return spk_fail_null("arange: start, stop and step must be finite");
    double len = ceil((stop - start) / step);
    if (!(len > 0))
        len = 0;
    if (len > 9.0e15)
        return spk_fail_null("arange: %g elements is too many", len);
    int64_t n = (int64_t)len;
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

typedef enum { OP_ADD, OP_SUB, OP_MUL } binop;

static inline double apply_f(binop op, double x, double y)
{
    switch (op) {
    case OP_ADD: return x + y;
    case OP_SUB: return x - y;
    case OP_MUL: return x * y;
    }
    return NAN;
}

/* Integer arithmetic wraps (done in uint64 so overflow is defined). */
static inline int64_t apply_i(binop op, int64_t x, int64_t y)
{
    uint64_t a = (uint64_t)x, b = (uint64_t)y;
    switch (op) {
    case OP_ADD: return (int64_t)(a + b);
    case OP_SUB: return (int64_t)(a - b);
    case OP_MUL: return (int64_t)(a * b);
    }
    return 0;
}

static spk_tensor *binary(const spk_tensor *a, const spk_tensor *b, binop op, const char *what)
{
    if (require_host(a, what) || require_host(b, what) || require_same_shape(a, b, what))
        return NULL;
    spk_dtype rt = (a->dtype == SPK_F64 || b->dtype == SPK_F64) ? SPK_F64 : a->dtype;
    spk_tensor *out = spk_tensor_new(rt, a->ndim, a->shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(a);
    const void *ab = a->storage->data, *bb = b->storage->data;
    void *ob = out->storage->data;
    bool contiguous = spk_tensor_is_contiguous(a) && spk_tensor_is_contiguous(b);
    if (contiguous && a->dtype == b->dtype && rt == SPK_F32) {
        const float *x = (const float *)ab + a->offset, *y = (const float *)bb + b->offset;
        float *o = ob;
        for (int64_t i = 0; i < n; i++)
            o[i] = op == OP_ADD ? x[i] + y[i] : op == OP_SUB ? x[i] - y[i] : x[i] * y[i];
        return out;
    }
    if (contiguous && a->dtype == b->dtype && rt == SPK_F64) {
        const double *x = (const double *)ab + a->offset, *y = (const double *)bb + b->offset;
        double *o = ob;
        for (int64_t i = 0; i < n; i++)
            o[i] = op == OP_ADD ? x[i] + y[i] : op == OP_SUB ? x[i] - y[i] : x[i] * y[i];
        return out;
    }
    bool integer = !dtype_is_float(a->dtype) && !dtype_is_float(b->dtype);
    iter ai, bi;
    iter_init(&ai, a);
    iter_init(&bi, b);
    for (int64_t i = 0; i < n; i++, iter_next(&ai), iter_next(&bi)) {
        if (integer)
            store_i64(ob, rt, i, apply_i(op, load_i64(ab, a->dtype, ai.pos), load_i64(bb, b->dtype, bi.pos)));
        else if (rt == SPK_F32) /* f32 result: round each operand and the result to f32 */
            ((float *)ob)[i] = (float)apply_f(op, (float)load_f64(ab, a->dtype, ai.pos),
                                              (float)load_f64(bb, b->dtype, bi.pos));
        else
            store_f64(ob, rt, i, apply_f(op, load_f64(ab, a->dtype, ai.pos), load_f64(bb, b->dtype, bi.pos)));
    }
    return out;
}

spk_tensor *spk_tensor_add(const spk_tensor *a, const spk_tensor *b) { return binary(a, b, OP_ADD, "add"); }
spk_tensor *spk_tensor_sub(const spk_tensor *a, const spk_tensor *b) { return binary(a, b, OP_SUB, "sub"); }
spk_tensor *spk_tensor_mul(const spk_tensor *a, const spk_tensor *b) { return binary(a, b, OP_MUL, "mul"); }

spk_tensor *spk_tensor_scale(const spk_tensor *a, double s)
{
    if (require_host(a, "scale"))
        return NULL;
    spk_tensor *out = spk_tensor_new(a->dtype, a->ndim, a->shape);
    if (!out)
        return NULL;
    int64_t n = spk_tensor_numel(a);
    const void *ab = a->storage->data;
    void *ob = out->storage->data;
    if (spk_tensor_is_contiguous(a) && a->dtype == SPK_F32) {
        const float *x = (const float *)ab + a->offset;
        float *o = ob, f = (float)s;
        for (int64_t i = 0; i < n; i++)
            o[i] = x[i] * f;
        return out;
    }
    iter it;
    iter_init(&it, a);
    for (int64_t i = 0; i < n; i++, iter_next(&it)) {
        if (a->dtype == SPK_F32)
            ((float *)ob)[i] = ((const float *)ab)[it.pos] * (float)s;
        else
            store_f64(ob, a->dtype, i, load_f64(ab, a->dtype, it.pos) * s);
    }
    return out;
}

spk_tensor *spk_tensor_abs(const spk_tensor *a)
{
    if (require_host(a, "abs"))
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
        case SPK_F32: ((float *)ob)[i] = fabsf(((const float *)ab)[it.pos]); break;
        case SPK_F64: ((double *)ob)[i] = fabs(((const double *)ab)[it.pos]); break;
        case SPK_I32: {
            int32_t v = ((const int32_t *)ab)[it.pos];
            /* |INT32_MIN| does not fit; it wraps to itself as in two's complement. */
            ((int32_t *)ob)[i] = v < 0 ? (int32_t)(0u - (uint32_t)v) : v;
            break;
        }
        case SPK_U64: ((uint64_t *)ob)[i] = ((const uint64_t *)ab)[it.pos]; break;
        }
    }
    return out;
}

/* ---- reductions -------------------------------------------------------- */

typedef enum { RED_SUM, RED_MIN, RED_MAX, RED_SUMSQ } reduction;

static int reduce(const spk_tensor *t, reduction r, const char *what, double *out)
{
    if (require_host(t, what))
        return -1;
    int64_t n = spk_tensor_numel(t);
    if (n == 0 && (r == RED_MIN || r == RED_MAX))
        return spk_fail("%s of an empty tensor is undefined", what);
    const void *base = t->storage->data;
    double acc = r == RED_MIN ? INFINITY : r == RED_MAX ? -INFINITY : 0.0;
    bool saw_nan = false;
    iter it;
    iter_init(&it, t);
    bool contiguous = spk_tensor_is_contiguous(t);
    for (int64_t i = 0; i < n; i++) {
        double v = load_f64(base, t->dtype, contiguous ? t->offset + i : it.pos);
        if (!contiguous)
            iter_next(&it);
        switch (r) {
        case RED_SUM: acc += v; break;
        case RED_SUMSQ: acc += v * v; break;
        case RED_MIN:
            if (isnan(v))
                saw_nan = true;
            else if (v < acc)
                acc = v;
            break;
        case RED_MAX:
            if (isnan(v))
                saw_nan = true;
            else if (v > acc)
                acc = v;
            break;
        }
    }
    /* min/max propagate NaN, as NumPy does. */
    *out = saw_nan ? NAN : acc;
    return 0;
}

int spk_tensor_sum(const spk_tensor *t, double *out) { return reduce(t, RED_SUM, "sum", out); }
int spk_tensor_min(const spk_tensor *t, double *out) { return reduce(t, RED_MIN, "min", out); }
int spk_tensor_max(const spk_tensor *t, double *out) { return reduce(t, RED_MAX, "max", out); }

int spk_tensor_mean(const spk_tensor *t, double *out)
{
    if (require_host(t, "mean"))
        return -1;
    int64_t n = spk_tensor_numel(t);
    if (n == 0)
        return spk_fail("mean of an empty tensor is undefined");
    double s;
    if (reduce(t, RED_SUM, "mean", &s))
        return -1;
    *out = s / (double)n;
    return 0;
}

int spk_tensor_norm(const spk_tensor *t, double *out)
{
    double s;
    if (reduce(t, RED_SUMSQ, "norm", &s))
        return -1;
    *out = sqrt(s);
    return 0;
}

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

static void format_value(strbuf *sb, const spk_tensor *t, int64_t off)
{
    const void *base = t->storage->data;
    switch (t->dtype) {
    case SPK_F32: sb_append(sb, "%g", (double)((const float *)base)[off]); break;
    case SPK_F64: sb_append(sb, "%g", ((const double *)base)[off]); break;
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
