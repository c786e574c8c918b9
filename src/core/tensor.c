/* Host tensors: dtypes, storage reference counting, creation, element
 * access and copies. Views are in tensor_view.c, elementwise operations in
 * tensor_elementwise.c, reductions in tensor_reduce.c, text in
 * tensor_format.c; the helpers they share in tensor_internal.h. */
#include "core/tensor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_internal.h"

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

static int require_same_shape(const spk_tensor *a, const spk_tensor *b, const char *what)
{
    if (spk_tensor_same_shape(a, b))
        return 0;
    char sa[160], sb[160];
    return spk_fail("%s: shapes differ: %s vs %s", what, spk_shape_string(a, sa, sizeof sa),
                    spk_shape_string(b, sb, sizeof sb));
}

/* ---- element access ----------------------------------------------------- */

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
