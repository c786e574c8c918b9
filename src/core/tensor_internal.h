/* Helpers shared by the tensor core's files (tensor.c, tensor_view.c,
 * tensor_elementwise.c, tensor_math.c, tensor_reduce.c, tensor_format.c):
 * dtype tests, element loads and stores in every dtype, the row-major walk
 * of a view, and the argument checks their functions share. Not part of
 * the API (core/tensor.h is). */
#ifndef SPK_TENSOR_INTERNAL_H
#define SPK_TENSOR_INTERNAL_H

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor.h"

static inline bool dtype_valid(spk_dtype dtype)
{
    return dtype == SPK_F32 || dtype == SPK_F64 || dtype == SPK_I32 || dtype == SPK_U64;
}

static inline bool dtype_is_float(spk_dtype dtype)
{
    return dtype == SPK_F32 || dtype == SPK_F64;
}

static inline int check_ndim(int ndim)
{
    if (ndim < 0 || ndim > SPK_MAX_DIMS)
        return spk_fail("tensor rank %d is out of range [0, %d]", ndim, SPK_MAX_DIMS);
    return 0;
}

static inline void set_contiguous_strides(spk_tensor *t)
{
    int64_t stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        t->strides[d] = stride;
        stride *= t->shape[d] > 0 ? t->shape[d] : 1;
    }
}

static inline int require_host(const spk_tensor *t, const char *what)
{
    if (!t)
        return spk_fail("%s: tensor is NULL", what);
    if (t->storage->device != SPK_HOST)
        return spk_fail("%s needs a host tensor, but this one is on CUDA device %d (copy it to the host first)",
                        what, t->storage->device);
    return 0;
}

static inline spk_tensor *view_of(const spk_tensor *t)
{
    spk_tensor *v = malloc(sizeof *v);
    if (!v)
        return spk_fail_null("out of memory allocating a tensor view");
    *v = *t;
    spk_storage_retain(v->storage);
    return v;
}

static inline int check_dim(const spk_tensor *t, int dim, const char *what)
{
    if (t->ndim == 0)
        return spk_fail("%s: dim %d is invalid for a 0-d tensor", what, dim);
    if (dim < 0 || dim >= t->ndim)
        return spk_fail("%s: dim %d is out of range [0, %d]", what, dim, t->ndim - 1);
    return 0;
}

/* Walks a tensor's elements in row-major order of its view, yielding each
 * element's storage offset. */
typedef struct iter {
    int ndim;
    int64_t idx[SPK_MAX_DIMS];
    int64_t shape[SPK_MAX_DIMS];
    int64_t strides[SPK_MAX_DIMS];
    int64_t pos;
} iter;

static inline void iter_init(iter *it, const spk_tensor *t)
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

static inline void store_scalar(void *base, spk_dtype dtype, int64_t i, spk_scalar v)
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

#endif
