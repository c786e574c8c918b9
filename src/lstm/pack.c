/* Gate orders and the packed layouts of the recurrence kernels: each hidden
 * unit's four gate rows adjacent (row u*4 + p, the built-in kernels': one
 * block owning a few units reads one contiguous slab of W, R and the
 * pre-summed bias), or four gate blocks (row p*H + u), in any gate order. */
#include <string.h>

#include "core/cancel.h"
#include "core/error.h"
#include "lstm/lstm.h"

int spk_lstm_gate_order_check(const char *order)
{
    static const char letters[] = SPK_GATES_ONNX;
    if (!order)
        return spk_fail("gate order missing, expected a permutation of \"%s\"", SPK_GATES_ONNX);
    bool seen[4] = {false, false, false, false};
    size_t n = strlen(order);
    for (size_t i = 0; i < n && n == 4; i++) {
        const char *at = strchr(letters, order[i]);
        if (!at || !order[i] || seen[at - letters])
            break;
        seen[at - letters] = true;
    }
    if (n != 4 || !seen[0] || !seen[1] || !seen[2] || !seen[3])
        return spk_fail("gate order \"%s\" is not a permutation of \"%s\"", order, SPK_GATES_ONNX);
    return 0;
}

/* position[g] = where the gate at position g of `from` sits in `to`. */
static int gate_positions(const char *from, const char *to, int position[4])
{
    if (spk_lstm_gate_order_check(from) || spk_lstm_gate_order_check(to))
        return -1;
    for (int g = 0; g < 4; g++)
        position[g] = (int)(strchr(to, from[g]) - to);
    return 0;
}

static spk_tensor *host_contiguous(const spk_tensor *t, const char *what)
{
    if (!t)
        return spk_fail_null("%s: tensor missing", what);
    if (!spk_tensor_is_host(t))
        return spk_fail_null("%s: not a host tensor", what);
    return spk_tensor_contiguous(t);
}

static int check_directions(const spk_tensor *W, const char *what)
{
    char got[128];
    if (W->ndim != 3 || W->shape[0] != 2 || W->shape[1] < 4 || W->shape[1] % 4 != 0)
        return spk_fail("%s: expected [2, 4H, K], got %s", what, spk_shape_string(W, got, sizeof got));
    return 0;
}

int spk_lstm_layout_from_name(const char *name, spk_lstm_layout *out)
{
    if (name && strcmp(name, "units") == 0)
        *out = SPK_LSTM_LAYOUT_UNITS;
    else if (name && strcmp(name, "rows") == 0)
        *out = SPK_LSTM_LAYOUT_ROWS;
    else
        return spk_fail("packing layout must be \"units\" (row u*4 + p) or \"rows\" (row p*H + u), got \"%s\"",
                        name ? name : "(none)");
    return 0;
}

const char *spk_lstm_layout_name(spk_lstm_layout layout) { return layout == SPK_LSTM_LAYOUT_ROWS ? "rows" : "units"; }

/* The packed row of gate position p of unit u. */
static int64_t packed_row(spk_lstm_layout layout, int64_t hidden, int64_t u, int p)
{
    return layout == SPK_LSTM_LAYOUT_ROWS ? p * hidden + u : u * 4 + p;
}

/* unpack == false: row g*H + u -> packed_row(u, position[g]); true: the inverse. */
static spk_tensor *move_rows(const spk_tensor *W, const char *from, const char *to, spk_lstm_layout layout, bool unpack,
                             const char *what)
{
    int position[4];
    if (gate_positions(from, to, position) || !W || check_directions(W, what))
        return W ? NULL : spk_fail_null("%s: tensor missing", what);
    spk_tensor *src = host_contiguous(W, what);
    if (!src)
        return NULL;
    spk_tensor *dst = spk_tensor_new(src->dtype, 3, src->shape);
    if (!dst) {
        spk_tensor_free(src);
        return NULL;
    }
    int64_t hidden = src->shape[1] / 4, k = src->shape[2];
    size_t row = (size_t)k * spk_dtype_size(src->dtype);
    const char *s = spk_tensor_data(src);
    char *d = spk_tensor_data(dst);
    for (int64_t dir = 0; dir < 2; dir++)
        for (int g = 0; g < 4; g++)
            for (int64_t u = 0; u < hidden; u++) {
                if (spk_cancel_requested()) /* a row copy outweighs the poll */
                    goto cancelled;
                int64_t onnx = dir * 4 * hidden + g * hidden + u;
                int64_t packed = dir * 4 * hidden + packed_row(layout, hidden, u, position[g]);
                if (unpack)
                    memcpy(d + onnx * row, s + packed * row, row);
                else
                    memcpy(d + packed * row, s + onnx * row, row);
            }
    spk_tensor_free(src);
    return dst;
cancelled:
    spk_tensor_free(src);
    spk_tensor_free(dst);
    spk_cancel_check();
    return NULL;
}

spk_tensor *spk_lstm_pack_directions(const spk_tensor *W, const char *from, const char *to)
{
    return move_rows(W, from, to, SPK_LSTM_LAYOUT_UNITS, false, "pack_directions");
}

spk_tensor *spk_lstm_unpack_directions(const spk_tensor *packed, const char *from, const char *to)
{
    return move_rows(packed, from, to, SPK_LSTM_LAYOUT_UNITS, true, "unpack_directions");
}

spk_tensor *spk_lstm_pack_layout(const spk_tensor *W, const char *from, const char *to, spk_lstm_layout layout)
{
    return move_rows(W, from, to, layout, false, "pack_layout");
}

/* The gate positions from -> to for a tensor `what` reorders, or -1 (an
 * unknown order, or no tensor). */
static int gates_for(const spk_tensor *t, const char *from, const char *to, int position[4], const char *what)
{
    if (gate_positions(from, to, position))
        return -1;
    return t ? 0 : spk_fail("%s: tensor missing", what);
}

spk_tensor *spk_lstm_pack_bias(const spk_tensor *B, const char *from, const char *to)
{
    return spk_lstm_pack_bias_layout(B, from, to, SPK_LSTM_LAYOUT_UNITS);
}

spk_tensor *spk_lstm_pack_bias_layout(const spk_tensor *B, const char *from, const char *to, spk_lstm_layout layout)
{
    int position[4];
    if (gates_for(B, from, to, position, "pack_bias") != 0)
        return NULL;
    char got[128];
    if (B->ndim != 2 || B->shape[0] != 2 || B->shape[1] < 8 || B->shape[1] % 8 != 0)
        return spk_fail_null("pack_bias: expected [2, 8H], got %s", spk_shape_string(B, got, sizeof got));
    if (B->dtype != SPK_F32 && B->dtype != SPK_F64)
        return spk_fail_null("pack_bias: dtype %s, expected f32 or f64", spk_dtype_name(B->dtype));
    spk_tensor *src = host_contiguous(B, "pack_bias");
    if (!src)
        return NULL;
    int64_t hidden = src->shape[1] / 8;
    const int64_t shape[2] = {2, 4 * hidden};
    spk_tensor *dst = spk_tensor_new(src->dtype, 2, shape);
    if (!dst) {
        spk_tensor_free(src);
        return NULL;
    }
    for (int64_t dir = 0; dir < 2; dir++)
        for (int g = 0; g < 4; g++)
            for (int64_t u = 0; u < hidden; u++) {
                if (spk_cancel_due(u)) {
                    spk_tensor_free(src);
                    spk_tensor_free(dst);
                    spk_cancel_check();
                    return NULL;
                }
                int64_t wb = dir * 8 * hidden + g * hidden + u, rb = wb + 4 * hidden;
                int64_t packed = dir * 4 * hidden + packed_row(layout, hidden, u, position[g]);
                if (src->dtype == SPK_F32) {
                    const float *s = spk_tensor_data(src);
                    ((float *)spk_tensor_data(dst))[packed] = s[wb] + s[rb];
                } else {
                    const double *s = spk_tensor_data(src);
                    ((double *)spk_tensor_data(dst))[packed] = s[wb] + s[rb];
                }
            }
    spk_tensor_free(src);
    return dst;
}

spk_tensor *spk_lstm_reorder_gates(const spk_tensor *t, int dim, const char *from, const char *to)
{
    int position[4];
    if (gates_for(t, from, to, position, "reorder_gates") != 0)
        return NULL;
    char got[128];
    if (dim < 0 || dim >= t->ndim || t->shape[dim] % 4 != 0 || t->shape[dim] == 0)
        return spk_fail_null("reorder_gates: dimension %d of %s is not 4H", dim, spk_shape_string(t, got, sizeof got));
    spk_tensor *src = host_contiguous(t, "reorder_gates");
    if (!src)
        return NULL;
    spk_tensor *dst = spk_tensor_new(src->dtype, src->ndim, src->shape);
    if (!dst) {
        spk_tensor_free(src);
        return NULL;
    }
    int64_t outer = 1, inner = 1, hidden = src->shape[dim] / 4;
    for (int i = 0; i < dim; i++)
        outer *= src->shape[i];
    for (int i = dim + 1; i < src->ndim; i++)
        inner *= src->shape[i];
    size_t block = (size_t)(hidden * inner) * spk_dtype_size(src->dtype);
    const char *s = spk_tensor_data(src);
    char *d = spk_tensor_data(dst);
    for (int64_t o = 0; o < outer; o++) {
        if (spk_cancel_requested()) { /* four block copies outweigh the poll */
            spk_tensor_free(src);
            spk_tensor_free(dst);
            spk_cancel_check();
            return NULL;
        }
        for (int g = 0; g < 4; g++)
            memcpy(d + (size_t)(o * 4 + position[g]) * block, s + (size_t)(o * 4 + g) * block, block);
    }
    spk_tensor_free(src);
    return dst;
}
