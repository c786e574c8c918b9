/* Tensors as text: a header with the dtype and shape, then the values as
 * NumPy prints them, summarised with "..." past a threshold. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_internal.h"
#include "core/text.h"

/* ---- formatting -------------------------------------------------------- */

char *spk_format_float(double v, spk_dtype dtype, int digits, char *buf, size_t size)
{
    if (isnan(v)) { /* whatever its sign bit, as NumPy prints it */
        snprintf(buf, size, "nan");
        return buf;
    }
    if (digits > 0 || isinf(v)) {
        snprintf(buf, size, "%.*g", digits > 0 ? digits : 1, v);
        return buf;
    }
    /* The fewest significant digits that read back as the same value of the
     * dtype: f32 needs at most 9, f64 at most 17. */
    int most = dtype == SPK_F32 ? 9 : 17, p = 1;
    for (; p < most; p++) {
        snprintf(buf, size, "%.*g", p, v);
        double back = strtod(buf, NULL);
        if (dtype == SPK_F32 ? (float)back == (float)v : back == v)
            break;
    }
    /* Integer parts below 10^6 in full (50, not 5e+01), as %g writes them. */
    int digits_before = 1;
    for (double m = fabs(v); m >= 10.0 && digits_before < 6; m /= 10)
        digits_before++;
    if (fabs(v) < 1e6 && p < digits_before)
        p = digits_before;
    snprintf(buf, size, "%.*g", p, v);
    return buf;
}

static void format_value(spk_text *sb, const spk_tensor *t, int64_t off, int digits)
{
    const void *base = t->storage->data;
    char text[64];
    switch (t->dtype) {
    case SPK_F32:
    case SPK_F64:
        spk_text_printf(sb, "%s", spk_format_float(load_f64(base, t->dtype, off), t->dtype, digits, text, sizeof text));
        break;
    case SPK_I32: spk_text_printf(sb, "%" PRId32, ((const int32_t *)base)[off]); break;
    case SPK_U64: spk_text_printf(sb, "%" PRIu64, ((const uint64_t *)base)[off]); break;
    }
}

/* The separator after a row of dim `dim`: one newline per row, blank lines
 * between higher-dim blocks, as NumPy prints. */
static void row_break(spk_text *sb, const spk_tensor *t, int dim)
{
    spk_text_printf(sb, ",\n");
    for (int k = 0; k < t->ndim - dim - 2; k++)
        spk_text_printf(sb, "\n");
    for (int k = 0; k <= dim; k++)
        spk_text_printf(sb, " ");
}

typedef struct format_style {
    bool summarise;
    int edge, digits;
} format_style;

static void format_dim(spk_text *sb, const spk_tensor *t, int dim, int64_t off, const format_style *style)
{
    int64_t n = t->shape[dim];
    int64_t edge = style->edge;
    bool cut = style->summarise && n > 2 * edge;
    bool last_dim = dim == t->ndim - 1;
    spk_text_printf(sb, "[");
    for (int64_t i = 0; i < n; i++) {
        if (cut && i == edge) {
            spk_text_printf(sb, "...");
            if (last_dim)
                spk_text_printf(sb, ", ");
            else
                row_break(sb, t, dim);
            i = n - edge;
        }
        if (last_dim)
            format_value(sb, t, off + i * t->strides[dim], style->digits);
        else
            format_dim(sb, t, dim + 1, off + i * t->strides[dim], style);
        if (i + 1 < n) {
            if (last_dim)
                spk_text_printf(sb, ", ");
            else
                row_break(sb, t, dim);
        }
    }
    spk_text_printf(sb, "]");
}

char *spk_tensor_format_digits(const spk_tensor *t, int64_t threshold, int edge, int digits)
{
    if (!t)
        return spk_fail_null("format: tensor is NULL");
    if (digits < 0 || digits > 17)
        return spk_fail_null("format: digits %d is out of range [0, 17] (0: the shortest exact form)", digits);
    spk_text sb = {0};
    char shape[160];
    spk_text_printf(&sb, "tensor(%s, %s", spk_dtype_name(t->dtype), spk_shape_string(t, shape, sizeof shape));
    if (t->storage->device != SPK_HOST) {
        spk_text_printf(&sb, ", cuda:%d)", t->storage->device);
    } else {
        spk_text_printf(&sb, ")\n");
        int64_t n = spk_tensor_numel(t);
        format_style style = {n > threshold, edge < 1 ? 1 : edge, digits};
        if (t->ndim == 0)
            format_value(&sb, t, t->offset, digits);
        else if (n == 0)
            spk_text_printf(&sb, "[]");
        else
            format_dim(&sb, t, 0, t->offset, &style);
    }
    if (sb.failed) {
        free(sb.data);
        return spk_fail_null("out of memory formatting a tensor");
    }
    return sb.data;
}

char *spk_tensor_format(const spk_tensor *t, int64_t threshold, int edge)
{
    return spk_tensor_format_digits(t, threshold, edge, 0);
}
