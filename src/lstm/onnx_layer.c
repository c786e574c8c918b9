/* One LSTM node of a stack (lstm/onnx_graph.h): ONNX's rules for the node
 * beyond its schema (onnx_rules.c has that), what spk computes, and the
 * layer's weights.
 *
 * ONNX's rules: direction is one of the operator's words, spelled as the
 * operator defines them; X, W, R, B, initial_h, initial_c and P share one
 * element type T (float16, float or double); initial_h and initial_c are
 * [num_directions, batch, hidden_size] ([batch, num_directions, hidden_size]
 * with layout 1), P [num_directions, 3*hidden_size]. What spk computes:
 * bidirectional, the default activations, no clip, input_forget 0, layout 0
 * or 1, no sequence_lens, zero initial states and peepholes. */
#include "lstm/onnx_graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

#define LAYER_FMT "%s: layer %d (LSTM node '%s'): "

static bool bytes_eq(ProtobufCBinaryData b, const char *s)
{
    size_t n = strlen(s);
    return b.len == n && memcmp(b.data, s, n) == 0;
}

/* Activation names compare as ONNX Runtime compares them, without case. */
static bool bytes_eq_nocase(ProtobufCBinaryData b, const char *s)
{
    size_t n = strlen(s);
    return b.len == n && strncasecmp((const char *)b.data, s, n) == 0;
}

static int check_direction(graph *g, const Onnx__NodeProto *n, int layer)
{
    const Onnx__AttributeProto *a = graph_attr(g, n, "direction");
    if (a && bytes_eq(a->s, "bidirectional"))
        return 0;
    char dir[32] = "forward";
    if (a)
        snprintf(dir, sizeof dir, "%.*s", (int)(a->s.len < 24 ? a->s.len : 24),
                 a->s.data ? (const char *)a->s.data : "");
    if (a && !bytes_eq(a->s, "forward") && !bytes_eq(a->s, "reverse"))
        return spk_fail(LAYER_FMT "direction is \"%s\"; ONNX's LSTM takes \"forward\", \"reverse\" or "
                        "\"bidirectional\", spelled so", g->file, layer, node_name(n), dir);
    return spk_fail(LAYER_FMT "direction is \"%s\"; spk's stacks are bidirectional", g->file, layer, node_name(n),
                    dir);
}

/* The attributes spk computes one value of. */
static int check_computation(graph *g, const Onnx__NodeProto *n, int layer, int64_t *layout)
{
    const char *who = node_name(n);
    const Onnx__AttributeProto *a = graph_attr(g, n, "activations");
    if (a) {
        static const char *const defaults[3] = {"Sigmoid", "Tanh", "Tanh"};
        bool ok = a->n_strings == 6;
        for (size_t i = 0; ok && i < 6; i++)
            ok = bytes_eq_nocase(a->strings[i], defaults[i % 3]);
        if (!ok) {
            char list[200] = "";
            size_t at = 0;
            for (size_t i = 0; i < a->n_strings && i < 8 && at < sizeof list; i++)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%.*s", i ? ", " : "",
                                       (int)(a->strings[i].len < 16 ? a->strings[i].len : 16),
                                       a->strings[i].data ? (const char *)a->strings[i].data : "");
            return spk_fail(LAYER_FMT "activations are [%s]; spk computes the defaults (Sigmoid, Tanh, Tanh for "
                            "each direction)", g->file, layer, who, list);
        }
    }
    if ((a = graph_attr(g, n, "clip")))
        return spk_fail(LAYER_FMT "clip = %g; spk does not clip the cell's inputs", g->file, layer, who, a->f);
    int64_t v;
    if (graph_attr_int(g, n, "input_forget", 0, &v))
        return -1;
    if (v != 0)
        return spk_fail(LAYER_FMT "input_forget = %" PRId64 "; spk computes input_forget = 0", g->file, layer, who, v);
    if (graph_attr_int(g, n, "layout", 0, layout))
        return -1;
    if (*layout != 0 && *layout != 1)
        return spk_fail(LAYER_FMT "layout = %" PRId64 ", expected 0 or 1", g->file, layer, who, *layout);
    if (input_of(n, 4))
        return spk_fail(LAYER_FMT "sequence_lens ('%s') is given; spk runs every sequence for all steps", g->file,
                        layer, who, input_of(n, 4));
    return 0;
}

static const char *const input_names[8] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};

/* X, W, R, B, initial_h, initial_c and P: one element type, a float type. */
static int check_types(graph *g, const Onnx__NodeProto *n, int layer)
{
    int first = -1, type = 0;
    for (int i = 0; i < 8; i++) {
        const char *in = input_of(n, (size_t)i);
        if (!in || i == 4) /* sequence_lens is int32 */
            continue;
        int t = graph_elem_type(g, in, 0);
        if (t < 0) {
            graph_in_context(g, "layer %d (LSTM node '%s'): %s", layer, node_name(n), input_names[i]);
            return -1;
        }
        if (t == 0)
            continue;
        char a[32], b[32];
        if (first < 0) {
            if (t != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && t != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE &&
                t != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16)
                return spk_fail(LAYER_FMT "%s ('%s') is %s; ONNX's LSTM computes in FLOAT16, FLOAT or DOUBLE",
                                g->file, layer, node_name(n), input_names[i], in,
                                spk_onnx_type_name(t, a, sizeof a));
            first = i;
            type = t;
        } else if (t != type) {
            return spk_fail(LAYER_FMT "%s ('%s') is %s but %s is %s; ONNX's LSTM takes X, W, R, B, initial_h, "
                            "initial_c and P of one element type", g->file, layer, node_name(n), input_names[i], in,
                            spk_onnx_type_name(t, a, sizeof a), input_names[first],
                            spk_onnx_type_name(type, b, sizeof b));
        }
    }
    return 0;
}

/* initial_h, initial_c and P: provably zero. */
static int check_zero_states(graph *g, const Onnx__NodeProto *n, int layer)
{
    static const char *const states[3] = {"initial_h", "initial_c", "P (peepholes)"};
    for (int i = 0; i < 3; i++) {
        const char *in = input_of(n, (size_t)(5 + i));
        if (!in)
            continue;
        char why[300] = "";
        int rc = graph_is_zero(g, in, why, sizeof why, 0);
        if (rc < 0) {
            graph_in_context(g, "layer %d (LSTM node '%s'): %s", layer, node_name(n), states[i]);
            return -1;
        }
        if (rc == 0)
            return spk_fail(LAYER_FMT "%s ('%s') %s; spk computes %s", g->file, layer, node_name(n), states[i], in,
                            why, i < 2 ? "from zero initial states" : "without peepholes");
    }
    return 0;
}

int graph_check_lstm(graph *g, const Onnx__NodeProto *n, int layer, int64_t *layout)
{
    if (check_direction(g, n, layer) || check_computation(g, n, layer, layout) || check_types(g, n, layer))
        return -1;
    return check_zero_states(g, n, layer);
}

/* An optional input's shape against what ONNX's LSTM needs: `want` of
 * `rank` sizes, those with known[i] false unchecked. A shape spk cannot
 * follow is not checked. */
static int check_state_shape(graph *g, const Onnx__NodeProto *n, int layer, int input, const int64_t *want,
                             const bool *known, int rank, const char *formula)
{
    const char *in = input_of(n, (size_t)input);
    shape s;
    if (!in)
        return 0;
    if (graph_value_shape(g, in, &s, 0)) {
        spk_clear_error();
        return 0;
    }
    bool ok = s.ndim == rank;
    for (int i = 0; ok && i < rank; i++)
        ok = !known[i] || !sym_known(s.d[i]) || s.d[i].coef == want[i];
    if (ok)
        return 0;
    char got[160], need[96] = "[";
    size_t at = 1;
    for (int i = 0; i < rank && at < sizeof need; i++) {
        if (known[i])
            at += (size_t)snprintf(need + at, sizeof need - at, "%s%" PRId64, i ? ", " : "", want[i]);
        else
            at += (size_t)snprintf(need + at, sizeof need - at, "%sbatch", i ? ", " : "");
    }
    if (at < sizeof need)
        snprintf(need + at, sizeof need - at, "]");
    return spk_fail(LAYER_FMT "%s ('%s') has shape %s; ONNX's LSTM needs %s = %s", g->file, layer, node_name(n),
                    input_names[input], in, graph_shape_string(g, &s, got, sizeof got), formula, need);
}

static int check_state_shapes(graph *g, const Onnx__NodeProto *n, int layer, int64_t hidden)
{
    int64_t layout;
    if (graph_attr_int(g, n, "layout", 0, &layout))
        return -1;
    int64_t batch = 0;
    bool batch_known = false;
    shape xs;
    if (graph_value_shape(g, input_of(n, 0), &xs, 0) == 0 && xs.ndim == 3 && sym_known(xs.d[layout ? 0 : 1])) {
        batch = xs.d[layout ? 0 : 1].coef;
        batch_known = true;
    }
    spk_clear_error();
    const int64_t state0[3] = {2, batch, hidden}, state1[3] = {batch, 2, hidden}, peep[2] = {2, 3 * hidden};
    const bool known0[3] = {true, batch_known, true}, known1[3] = {batch_known, true, true}, both[2] = {true, true};
    const char *formula = layout ? "[batch_size, num_directions, hidden_size]"
                                 : "[num_directions, batch_size, hidden_size]";
    for (int i = 5; i <= 6; i++)
        if (check_state_shape(g, n, layer, i, layout ? state1 : state0, layout ? known1 : known0, 3, formula))
            return -1;
    return check_state_shape(g, n, layer, 7, peep, both, 2, "[num_directions, 3*hidden_size]");
}

int graph_lstm_weights(graph *g, const Onnx__NodeProto *n, int layer, spk_lstm_weights *out)
{
    spk_tensor *t[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        const char *in = input_of(n, (size_t)(1 + i));
        if (!in) {
            if (i < 2) {
                spk_fail(LAYER_FMT "input %s is missing", g->file, layer, node_name(n), input_names[1 + i]);
                goto fail;
            }
            continue;
        }
        const spk_tensor *f = graph_fold(g, in, 0);
        if (!f) {
            graph_in_context(g, "layer %d (LSTM node '%s'): %s ('%s')", layer, node_name(n), input_names[1 + i],
                             in);
            goto fail;
        }
        t[i] = spk_tensor_clone(f);
        if (!t[i])
            goto fail;
    }
    if (!t[2]) { /* no B: zero biases */
        const int64_t dims[2] = {2, t[1]->ndim == 3 ? 2 * t[1]->shape[1] : 0};
        t[2] = spk_tensor_new(t[0]->dtype, 2, dims);
        if (!t[2])
            goto fail;
    }
    int64_t hidden;
    if (graph_attr_int(g, n, "hidden_size", -1, &hidden))
        goto fail;
    if (hidden != -1 && (t[1]->ndim != 3 || t[1]->shape[2] != hidden)) {
        char got[64];
        spk_fail(LAYER_FMT "hidden_size = %" PRId64 " but R has shape %s", g->file, layer, node_name(n), hidden,
                 spk_shape_string(t[1], got, sizeof got));
        goto fail;
    }
    if (t[1]->ndim == 3 && check_state_shapes(g, n, layer, t[1]->shape[2]))
        goto fail;
    *out = (spk_lstm_weights){t[0], t[1], t[2]};
    return 0;
fail:
    for (int i = 0; i < 3; i++)
        spk_tensor_free(t[i]);
    return -1;
}
