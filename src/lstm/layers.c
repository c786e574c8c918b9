/* Layer stacks: shape validation, random initialisation, PyTorch conversion. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "lstm/lstm.h"

/* "[2, 512, 60]" for an expected shape. */
static char *dims_string(char *buf, size_t size, int ndim, const int64_t *dims)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

static bool has_shape(const spk_tensor *t, int ndim, const int64_t *dims)
{
    if (t->ndim != ndim)
        return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != dims[i])
            return false;
    return true;
}

static int shape_error(int layer, const char *name, const spk_tensor *t, int ndim, const int64_t *dims)
{
    char want[128], got[128];
    dims_string(want, sizeof want, ndim, dims);
    spk_shape_string(t, got, sizeof got);
    return spk_fail("layer %d: %s has shape %s, expected %s", layer + 1, name, got, want);
}

/* The sizes a stack of hidden size H is made of: 4H gate rows, 8H biases and
 * 2H inputs of every layer after the first. H from a script or a file can be
 * anything, so the products are checked instead of wrapping. */
typedef struct gate_sizes {
    int64_t two, four, eight;
} gate_sizes;

static int gate_sizes_of(int64_t hidden, gate_sizes *g, const char *what)
{
    if (__builtin_mul_overflow(hidden, 2, &g->two) || __builtin_mul_overflow(hidden, 4, &g->four) ||
        __builtin_mul_overflow(hidden, 8, &g->eight))
        return spk_fail("%s: hidden size %lld is too large (8 * hidden, the bias length, overflows int64)", what,
                        (long long)hidden);
    return 0;
}

static int check_tensor(int layer, const char *name, const spk_tensor *t)
{
    if (!t)
        return spk_fail("layer %d: %s is missing", layer + 1, name);
    if (!spk_tensor_is_host(t))
        return spk_fail("layer %d: %s is not a host tensor", layer + 1, name);
    if (t->dtype != SPK_F32 && t->dtype != SPK_F64)
        return spk_fail("layer %d: %s has dtype %s, expected f32 or f64", layer + 1, name,
                        spk_dtype_name(t->dtype));
    return 0;
}

int spk_lstm_validate(const spk_lstm_layer *layers, int count, spk_lstm_dims *out)
{
    if (!layers || count < 1)
        return spk_fail("an LSTM stack needs at least one layer, got %d", count);
    int64_t hidden = 0, input = 0;
    gate_sizes g = {0, 0, 0};
    for (int k = 0; k < count; k++) {
        const spk_lstm_layer *l = &layers[k];
        if (check_tensor(k, "W", l->W) || check_tensor(k, "R", l->R) || check_tensor(k, "B", l->B))
            return -1;
        if (k == 0) {
            /* Layer 1 fixes H (from R) and the stack's input width (from W). */
            const spk_tensor *R = l->R;
            int64_t rows;
            if (R->ndim != 3 || R->shape[0] != 2 || R->shape[2] < 1 || __builtin_mul_overflow(R->shape[2], 4, &rows) ||
                R->shape[1] != rows) {
                char got[128];
                return spk_fail("layer 1: R has shape %s, expected [2, 4H, H]",
                                spk_shape_string(R, got, sizeof got));
            }
            hidden = R->shape[2];
            if (gate_sizes_of(hidden, &g, "layer 1: R"))
                return -1;
            if (l->W->ndim != 3 || l->W->shape[2] < 1) {
                char got[128];
                return spk_fail("layer 1: W has shape %s, expected [2, %lld, in]",
                                spk_shape_string(l->W, got, sizeof got), (long long)g.four);
            }
            input = l->W->shape[2];
        }
        int64_t in = k == 0 ? input : g.two;
        const int64_t w[3] = {2, g.four, in}, r[3] = {2, g.four, hidden}, b[2] = {2, g.eight};
        if (!has_shape(l->W, 3, w))
            return shape_error(k, "W", l->W, 3, w);
        if (!has_shape(l->R, 3, r))
            return shape_error(k, "R", l->R, 3, r);
        if (!has_shape(l->B, 2, b))
            return shape_error(k, "B", l->B, 2, b);
    }
    if (out) {
        out->layers = count;
        out->hidden = hidden;
        out->input = input;
    }
    return 0;
}

void spk_lstm_weights_free(spk_lstm_weights *w)
{
    if (!w)
        return;
    spk_tensor_free(w->W);
    spk_tensor_free(w->R);
    spk_tensor_free(w->B);
    w->W = w->R = w->B = NULL;
}

int spk_lstm_random(int count, int64_t input, int64_t hidden, uint64_t seed, double scale,
                    spk_dtype dtype, spk_lstm_weights *out)
{
    if (count < 1 || input < 1 || hidden < 1)
        return spk_fail("lstm random: layers, input and hidden must be positive (got %d, %lld, %lld)",
                        count, (long long)input, (long long)hidden);
    if (dtype != SPK_F32 && dtype != SPK_F64)
        return spk_fail("lstm random: dtype must be f32 or f64, got %s", spk_dtype_name(dtype));
    if (!(scale >= 0) || isinf(scale))
        return spk_fail("lstm random: scale must be finite and >= 0, got %g", scale);
    gate_sizes g = {0, 0, 0};
    if (gate_sizes_of(hidden, &g, "lstm random"))
        return -1;
    memset(out, 0, sizeof *out * (size_t)count);
    spk_rng rng;
    spk_rng_seed(&rng, seed);
    double bound = scale / sqrt((double)hidden);
    for (int k = 0; k < count; k++) {
        int64_t in = k == 0 ? input : g.two;
        const int64_t w[3] = {2, g.four, in}, r[3] = {2, g.four, hidden}, b[2] = {2, g.eight};
        out[k].W = spk_tensor_new(dtype, 3, w);
        if (!out[k].W)
            spk_error_prefix("lstm random: layer %d W [2, 4 * %lld, %lld]", k + 1, (long long)hidden, (long long)in);
        out[k].R = out[k].W ? spk_tensor_new(dtype, 3, r) : NULL;
        if (out[k].W && !out[k].R)
            spk_error_prefix("lstm random: layer %d R [2, 4 * %lld, %lld]", k + 1, (long long)hidden,
                             (long long)hidden);
        out[k].B = out[k].R ? spk_tensor_new(dtype, 2, b) : NULL;
        if (!out[k].W || !out[k].R || !out[k].B || spk_rng_fill_uniform(&rng, out[k].W, -bound, bound) ||
            spk_rng_fill_uniform(&rng, out[k].R, -bound, bound) ||
            spk_rng_fill_uniform(&rng, out[k].B, -bound, bound)) {
            for (int j = 0; j <= k; j++)
                spk_lstm_weights_free(&out[j]);
            return -1;
        }
    }
    return 0;
}

/* Copies `src` into dst[index] along dimension 0 (dst is contiguous). */
static int copy_into(spk_tensor *dst, int64_t index, int64_t length, const spk_tensor *src)
{
    spk_tensor *part = spk_tensor_narrow(dst, 0, index, length);
    if (!part)
        return -1;
    spk_tensor *view = part;
    if (src->ndim != part->ndim) {
        /* a [4H] bias into a [1, 4H] slot of a [2, 8H] tensor, say */
        view = spk_tensor_view(part, src->ndim, src->shape);
        spk_tensor_free(part);
        if (!view)
            return -1;
    }
    int rc = spk_tensor_copy(view, src);
    spk_tensor_free(view);
    return rc;
}

static const char *torch_name(int which, int direction, char *buf, size_t size, int layer)
{
    static const char *names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    snprintf(buf, size, "%s_l%d%s", names[which], layer, direction ? "_reverse" : "");
    return buf;
}

int spk_lstm_from_torch(const spk_lstm_torch_layer *torch, int layer, spk_lstm_weights *out)
{
    memset(out, 0, sizeof *out);
    const spk_tensor *parts[4][2] = {
        {torch->weight_ih[0], torch->weight_ih[1]},
        {torch->weight_hh[0], torch->weight_hh[1]},
        {torch->bias_ih[0], torch->bias_ih[1]},
        {torch->bias_hh[0], torch->bias_hh[1]},
    };
    char name[64];
    for (int which = 0; which < 4; which++)
        for (int d = 0; d < 2; d++) {
            const spk_tensor *t = parts[which][d];
            torch_name(which, d, name, sizeof name, layer);
            if (!t)
                return spk_fail("layer %d: %s is missing", layer + 1, name);
            if (check_tensor(layer, name, t))
                return -1;
        }
    const spk_tensor *hh = parts[1][0];
    int64_t rows;
    if (hh->ndim != 2 || hh->shape[1] < 1 || __builtin_mul_overflow(hh->shape[1], 4, &rows) || hh->shape[0] != rows) {
        char got[128];
        return spk_fail("layer %d: weight_hh_l%d has shape %s, expected [4H, H]", layer + 1, layer,
                        spk_shape_string(hh, got, sizeof got));
    }
    int64_t hidden = hh->shape[1];
    gate_sizes g = {0, 0, 0};
    if (gate_sizes_of(hidden, &g, "weight_hh"))
        return -1;
    const spk_tensor *ih = parts[0][0];
    if (ih->ndim != 2 || ih->shape[1] < 1) {
        char got[128];
        return spk_fail("layer %d: weight_ih_l%d has shape %s, expected [%lld, in]", layer + 1, layer,
                        spk_shape_string(ih, got, sizeof got), (long long)g.four);
    }
    int64_t in = ih->shape[1];
    const int64_t want[4][2] = {{g.four, in}, {g.four, hidden}, {g.four, 0}, {g.four, 0}};
    for (int which = 0; which < 4; which++)
        for (int d = 0; d < 2; d++) {
            int ndim = which < 2 ? 2 : 1;
            if (!has_shape(parts[which][d], ndim, want[which]))
                return shape_error(layer, torch_name(which, d, name, sizeof name, layer), parts[which][d],
                                   ndim, want[which]);
        }

    spk_dtype dtype = ih->dtype;
    const int64_t w[3] = {2, g.four, in}, r[3] = {2, g.four, hidden}, b[2] = {2, g.eight};
    out->W = spk_tensor_new(dtype, 3, w);
    out->R = spk_tensor_new(dtype, 3, r);
    out->B = spk_tensor_new(dtype, 2, b);
    if (!out->W || !out->R || !out->B)
        goto fail;
    for (int which = 0; which < 4; which++)
        for (int d = 0; d < 2; d++) {
            spk_tensor *onnx = spk_lstm_reorder_gates(parts[which][d], 0, SPK_GATES_TORCH, SPK_GATES_ONNX);
            if (!onnx)
                goto fail;
            int rc;
            if (which == 0)
                rc = copy_into(out->W, d, 1, onnx);
            else if (which == 1)
                rc = copy_into(out->R, d, 1, onnx);
            else {
                /* B row d is [bias_ih (4H), bias_hh (4H)] */
                spk_tensor *row = spk_tensor_select(out->B, 0, d);
                spk_tensor *slot = row ? spk_tensor_narrow(row, 0, (which - 2) * g.four, g.four) : NULL;
                rc = slot ? spk_tensor_copy(slot, onnx) : -1;
                spk_tensor_free(slot);
                spk_tensor_free(row);
            }
            spk_tensor_free(onnx);
            if (rc)
                goto fail;
        }
    return 0;
fail:
    spk_lstm_weights_free(out);
    return -1;
}

int spk_lstm_to_torch(const spk_lstm_layer *layer, spk_tensor *out[8])
{
    memset(out, 0, 8 * sizeof *out);
    spk_lstm_dims dims;
    if (spk_lstm_validate(layer, 1, &dims))
        return -1;
    gate_sizes sizes = {0, 0, 0};
    if (gate_sizes_of(dims.hidden, &sizes, "to_torch"))
        return -1;
    int64_t g = sizes.four;
    for (int d = 0; d < 2; d++) {
        spk_tensor *w = spk_tensor_select(layer->W, 0, d);
        spk_tensor *r = spk_tensor_select(layer->R, 0, d);
        spk_tensor *b = spk_tensor_select(layer->B, 0, d);
        spk_tensor *wb = b ? spk_tensor_narrow(b, 0, 0, g) : NULL;
        spk_tensor *rb = b ? spk_tensor_narrow(b, 0, g, g) : NULL;
        spk_tensor **slot = out + 4 * d;
        if (w && r && wb && rb) {
            slot[0] = spk_lstm_reorder_gates(w, 0, SPK_GATES_ONNX, SPK_GATES_TORCH);
            slot[1] = spk_lstm_reorder_gates(r, 0, SPK_GATES_ONNX, SPK_GATES_TORCH);
            slot[2] = spk_lstm_reorder_gates(wb, 0, SPK_GATES_ONNX, SPK_GATES_TORCH);
            slot[3] = spk_lstm_reorder_gates(rb, 0, SPK_GATES_ONNX, SPK_GATES_TORCH);
        }
        spk_tensor_free(w);
        spk_tensor_free(r);
        spk_tensor_free(b);
        spk_tensor_free(wb);
        spk_tensor_free(rb);
        if (!slot[0] || !slot[1] || !slot[2] || !slot[3]) {
            for (int i = 0; i < 8; i++) {
                spk_tensor_free(out[i]);
                out[i] = NULL;
            }
            return -1;
        }
    }
    return 0;
}
