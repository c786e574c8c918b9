/* Tensors as text: a header with the dtype and shape, then the values as
 * NumPy prints them, summarised with "..." past a threshold. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"

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
