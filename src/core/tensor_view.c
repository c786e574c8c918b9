/* Views of tensors: narrow, select, slice, transpose, view, squeeze,
 * unsqueeze and permute share their storage and work on host and device
 * tensors alike. */
#include <inttypes.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"

/* ---- views ------------------------------------------------------------- */

/* A view of t starting `index` steps of `stride` further on, refusing an
 * offset that int64 cannot hold. */
static spk_tensor *view_at(const spk_tensor *t, int64_t index, int64_t stride, const char *what)
{
    int64_t delta, offset;
    if (__builtin_mul_overflow(index, stride, &delta) || __builtin_add_overflow(t->offset, delta, &offset))
        return spk_fail_null("%s: the offset of index %" PRId64 " (stride %" PRId64 ") overflows int64", what, index,
                             stride);
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    v->offset = offset;
    return v;
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
    spk_tensor *v = view_at(t, start, t->strides[dim], "narrow");
    if (!v)
        return NULL;
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
    spk_tensor *v = view_at(t, index, t->strides[dim], "select");
    if (!v)
        return NULL;
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
    int64_t stride = t->strides[dim];
    if (length > 1 && __builtin_mul_overflow(t->strides[dim], step, &stride))
        return spk_fail_null("slice: step %" PRId64 " of dim %d times its stride %" PRId64 " overflows int64",
                             step, dim, t->strides[dim]);
    spk_tensor *v = view_at(t, length > 0 ? start : 0, t->strides[dim], "slice");
    if (!v)
        return NULL;
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

/* ---- squeeze, unsqueeze, permute ------------------------------------------ */

spk_tensor *spk_tensor_squeeze(const spk_tensor *t, int dim)
{
    if (dim != SPK_ALL_DIMS) {
        if (check_dim(t, dim, "squeeze"))
            return NULL;
        if (t->shape[dim] != 1)
            return spk_fail_null("squeeze: dim %d has size %" PRId64 ", not 1", dim, t->shape[dim]);
    }
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 1 && (dim == SPK_ALL_DIMS || d == dim))
            continue;
        v->shape[n] = t->shape[d];
        v->strides[n] = t->strides[d];
        n++;
    }
    for (int d = n; d < SPK_MAX_DIMS; d++)
        v->shape[d] = v->strides[d] = 0;
    v->ndim = n;
    return v;
}

spk_tensor *spk_tensor_unsqueeze(const spk_tensor *t, int dim)
{
    if (t->ndim == SPK_MAX_DIMS)
        return spk_fail_null("unsqueeze: the tensor has %d dims already, the most there are", SPK_MAX_DIMS);
    if (dim < 0 || dim > t->ndim)
        return spk_fail_null("unsqueeze: dim %d is out of range [0, %d]", dim, t->ndim);
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    for (int d = t->ndim; d > dim; d--) {
        v->shape[d] = t->shape[d - 1];
        v->strides[d] = t->strides[d - 1];
    }
    v->shape[dim] = 1;
    /* a size-1 dim's stride is never used; this one keeps the view contiguous */
    v->strides[dim] = dim < t->ndim ? t->strides[dim] * (t->shape[dim] > 0 ? t->shape[dim] : 1) : 1;
    v->ndim = t->ndim + 1;
    return v;
}

spk_tensor *spk_tensor_permute(const spk_tensor *t, const int *dims)
{
    bool seen[SPK_MAX_DIMS] = {false};
    for (int k = 0; k < t->ndim; k++) {
        if (dims[k] < 0 || dims[k] >= t->ndim)
            return spk_fail_null("permute: dim %d is out of range [0, %d]", dims[k], t->ndim - 1);
        if (seen[dims[k]])
            return spk_fail_null("permute: dim %d is given twice (a permutation names each dim once)", dims[k]);
        seen[dims[k]] = true;
    }
    spk_tensor *v = view_of(t);
    if (!v)
        return NULL;
    for (int k = 0; k < t->ndim; k++) {
        v->shape[k] = t->shape[dims[k]];
        v->strides[k] = t->strides[dims[k]];
    }
    return v;
}
