/* LSTM stacks in ONNX models (see lstm/onnx_stack.h): the chain of LSTM
 * nodes of the main graph, what each node must compute, and the layers'
 * weights, over the evaluator of lstm/onnx_graph.h. */
#include "lstm/onnx_stack.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "lstm/onnx_graph.h"

#define MAX_PATH 16 /* nodes between two LSTM layers */

/* ---- the chain of LSTM nodes ------------------------------------------------------- */

typedef struct layer_node {
    const Onnx__NodeProto *n;
    int pred;                /* the layer_node whose Y feeds this one's X, -1 if none */
    int path[MAX_PATH];      /* nodes from that Y to this X, in order */
    int path_len;
    char why[320];           /* where X comes from, when pred is -1 */
    int64_t layout;
} layer_node;

static bool is_lstm(const Onnx__NodeProto *n)
{
    return is_op(n, "LSTM");
}

/* Follows X of list[k] back through Transpose, Reshape, Identity and Dropout. */
static void find_pred(graph *g, layer_node *list, int count, int k)
{
    layer_node *L = &list[k];
    const char *name = input_of(L->n, 0);
    int rev[MAX_PATH], len = 0;
    L->pred = -1;
    if (!name) {
        snprintf(L->why, sizeof L->why, "has no input X");
        return;
    }
    for (;;) {
        const value *v = graph_lookup(g, name);
        if (!v) {
            snprintf(L->why, sizeof L->why, "takes '%s', which no node produces", name);
            return;
        }
        if (v->kind != V_NODE) {
            snprintf(L->why, sizeof L->why, "takes the graph %s '%s'", v->kind == V_INPUT ? "input" : "initializer",
                     name);
            return;
        }
        const Onnx__NodeProto *n = node_at(g, v);
        if (is_lstm(n)) {
            for (int j = 0; j < count; j++)
                if (list[j].n == n) {
                    if (v->slot != 0) {
                        snprintf(L->why, sizeof L->why, "takes output %d of LSTM node '%s' (Y_h or Y_c, not Y)",
                                 v->slot, node_name(n));
                        return;
                    }
                    L->pred = j;
                    L->path_len = len;
                    for (int i = 0; i < len; i++)
                        L->path[i] = rev[len - 1 - i];
                    return;
                }
        }
        bool passes = default_domain(n) && v->slot == 0 &&
                      (strcmp(op_of(n), "Transpose") == 0 || strcmp(op_of(n), "Reshape") == 0 ||
                       strcmp(op_of(n), "Identity") == 0 ||
                       (strcmp(op_of(n), "Dropout") == 0 && !input_of(n, 2)));
        if (!passes || len == MAX_PATH || !input_of(n, 0)) {
            snprintf(L->why, sizeof L->why, "comes from %s node '%s'%s", op_of(n), node_name(n),
                     passes ? " (too many nodes from the previous LSTM)" : "");
            return;
        }
        rev[len++] = v->index;
        name = input_of(n, 0);
    }
}

/* An axis of a value between two layers: which of T, D (direction), B, H it
 * holds, outermost first, and its size. */
typedef struct axis {
    int nlabels;
    char labels[4];
    sym size;
} axis;

static const char *axes_string(const axis *a, int n, char *buf, size_t size)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < n && at < size; i++) {
        at += (size_t)snprintf(buf + at, size - at, "%s", i ? ", " : "");
        for (int j = 0; j < a[i].nlabels && at < size; j++)
            at += (size_t)snprintf(buf + at, size - at, "%s%c", j ? "*" : "", a[i].labels[j]);
        if (a[i].nlabels == 0 && at < size)
            at += (size_t)snprintf(buf + at, size - at, "1");
    }
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/* Checks that the path from layer `from`'s Y to layer `to`'s X gives
 * [T, B, D*H] (or [B, T, D*H] for a layout-1 layer), D before H. */
static int check_link(graph *g, layer_node *list, int to, int layer)
{
    layer_node *next = &list[to], *prev = &list[next->pred];
    const char *y = prev->n->output[0], *want = next->layout ? "BT" : "TB";
    shape ys;
    if (graph_value_shape(g, y, &ys, 0))
        return -1;
    if (ys.ndim != 4)
        return spk_fail("%s: LSTM node '%s': its output Y is not of rank 4", g->file, node_name(prev->n));
    axis ax[SPK_MAX_DIMS];
    int nax = 4;
    const char *order = prev->layout ? "BTDH" : "TDBH";
    for (int i = 0; i < 4; i++)
        ax[i] = (axis){1, {order[i]}, ys.d[i]};
    for (int p = 0; p < next->path_len; p++) {
        const Onnx__NodeProto *n = g->g->node[next->path[p]];
        if (is_op(n, "Transpose")) {
            int perm[SPK_MAX_DIMS];
            if (graph_transpose_perm(g, n, nax, perm))
                return -1;
            axis t[SPK_MAX_DIMS];
            for (int i = 0; i < nax; i++)
                t[i] = ax[perm[i]];
            memcpy(ax, t, sizeof t);
        } else if (is_op(n, "Reshape")) {
            shape in = {nax, {{0}}}, out;
            for (int i = 0; i < nax; i++)
                in.d[i] = ax[i].size;
            ints target;
            int64_t allowzero;
            if (graph_eval_ints(g, input_of(n, 1) ? input_of(n, 1) : "", &target, 1) ||
                graph_attr_int(g, n, "allowzero", 0, &allowzero) ||
                graph_resolve_reshape(g, n->output[0], &in, &target, allowzero != 0, &out)) {
                graph_in_context(g, "layers %d to %d: the Reshape node '%s' between them", layer, layer + 1,
                                 node_name(n));
                return -1;
            }
            /* group consecutive input axes into each output axis by size */
            axis merged[SPK_MAX_DIMS];
            int src = 0;
            for (int i = 0; i < out.ndim; i++) {
                merged[i] = (axis){0, {0}, out.d[i]};
                sym prod = sym_const(1);
                while (!sym_eq(prod, out.d[i]) ||
                       (src < nax && sym_known(ax[src].size) && ax[src].size.coef == 1 && out.d[i].coef == 1 &&
                        out.d[i].n == 0 && merged[i].nlabels == 0)) {
                    if (src == nax || sym_mul(prod, ax[src].size, &prod) ||
                        merged[i].nlabels + ax[src].nlabels > 4)
                        goto broken;
                    memcpy(merged[i].labels + merged[i].nlabels, ax[src].labels, (size_t)ax[src].nlabels);
                    merged[i].nlabels += ax[src].nlabels;
                    src++;
                }
            }
            for (; src < nax; src++) /* trailing size-1 axes */
                if (!sym_known(ax[src].size) || ax[src].size.coef != 1 || ax[src].nlabels)
                    goto broken;
            memcpy(ax, merged, sizeof merged);
            nax = out.ndim;
        }
        /* Identity and Dropout change nothing */
    }
    if (nax == 3 && ax[0].nlabels == 1 && ax[0].labels[0] == want[0] && ax[1].nlabels == 1 &&
        ax[1].labels[0] == want[1] && ax[2].nlabels == 2 && ax[2].labels[0] == 'D' && ax[2].labels[1] == 'H')
        return 0;
broken:;
    char got[96];
    return spk_fail("%s: the LSTM chain breaks between layer %d ('%s') and layer %d ('%s'): the nodes between "
                    "them make %s of Y's axes (T steps, D directions, B batch, H hidden), where layer %d needs "
                    "[%c, %c, D*H] (the forward direction's features first)",
                    g->file, layer, node_name(prev->n), layer + 1, node_name(next->n),
                    nax <= SPK_MAX_DIMS ? axes_string(ax, nax, got, sizeof got) : "?", layer + 1, want[0], want[1]);
}

/* Op types of a graph's nodes, for the message of a model without LSTM. */
static void list_ops(const Onnx__GraphProto *gp, char *buf, size_t size)
{
    size_t at = 0;
    int shown = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < gp->n_node && shown < 8; i++) {
        const char *op = op_of(gp->node[i]);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(op_of(gp->node[j]), op) == 0;
        if (seen)
            continue;
        at += (size_t)snprintf(buf + at, at < size ? size - at : 0, "%s%s", shown ? ", " : "", op);
        shown++;
    }
    if (shown == 8 && at < size)
        snprintf(buf + at, size - at, ", ...");
}

/* Whether an LSTM node hides in a subgraph (If, Loop, Scan) or a function. */
static bool lstm_elsewhere(const Onnx__GraphProto *gp, int depth)
{
    if (depth > SPK_ONNX_MAX_DEPTH)
        return false;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (depth > 0 && is_lstm(n))
            return true;
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g && lstm_elsewhere(at->g, depth + 1))
                return true;
            for (size_t k = 0; k < at->n_graphs; k++)
                if (lstm_elsewhere(at->graphs[k], depth + 1))
                    return true;
        }
    }
    return false;
}

/* Pushes the producers of the names a subgraph (If, Loop, Scan) reads, which
 * may be the outer graph's values. */
static void push_subgraph_inputs(graph *g, const Onnx__GraphProto *sub, int32_t *stack, size_t *top, bool *seen,
                                 int depth)
{
    if (depth > SPK_ONNX_MAX_DEPTH)
        return;
    for (size_t i = 0; i < sub->n_node; i++) {
        const Onnx__NodeProto *n = sub->node[i];
        for (size_t k = 0; k < n->n_input; k++) {
            const value *v = graph_lookup(g, input_of(n, k));
            if (v && v->kind == V_NODE && !seen[v->index]) {
                seen[v->index] = true;
                stack[(*top)++] = v->index;
            }
        }
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g)
                push_subgraph_inputs(g, at->g, stack, top, seen, depth + 1);
            for (size_t j = 0; j < at->n_graphs; j++)
                push_subgraph_inputs(g, at->graphs[j], stack, top, seen, depth + 1);
        }
    }
}

/* Whether a graph output depends on an output of `last`: the nodes the
 * outputs read, transitively, each visited once. */
static int feeds_output(graph *g, const Onnx__NodeProto *last, bool *feeds)
{
    const Onnx__GraphProto *gp = g->g;
    bool *seen = calloc(gp->n_node ? gp->n_node : 1, sizeof *seen);
    int32_t *stack = malloc((gp->n_node ? gp->n_node : 1) * sizeof *stack); /* each node pushed once */
    if (!seen || !stack) {
        free(seen);
        free(stack);
        return spk_fail("out of memory");
    }
    size_t top = 0;
    for (size_t i = 0; i < gp->n_output; i++) {
        const value *v = graph_lookup(g, gp->output[i]->name);
        if (v && v->kind == V_NODE && !seen[v->index]) {
            seen[v->index] = true;
            stack[top++] = v->index;
        }
    }
    *feeds = false;
    while (top > 0 && !*feeds) {
        const Onnx__NodeProto *n = gp->node[stack[--top]];
        *feeds = n == last;
        for (size_t k = 0; k < n->n_input; k++) {
            const value *v = graph_lookup(g, input_of(n, k));
            if (v && v->kind == V_NODE && !seen[v->index]) {
                seen[v->index] = true;
                stack[top++] = v->index;
            }
        }
        for (size_t a = 0; a < n->n_attribute; a++) {
            const Onnx__AttributeProto *at = n->attribute[a];
            if (at->g)
                push_subgraph_inputs(g, at->g, stack, &top, seen, 1);
            for (size_t j = 0; j < at->n_graphs; j++)
                push_subgraph_inputs(g, at->graphs[j], stack, &top, seen, 1);
        }
    }
    free(seen);
    free(stack);
    return 0;
}

/* The last layer must be computed: some graph output depends on it. */
static int check_used(graph *g, const Onnx__NodeProto *last, int layers)
{
    bool feeds = false;
    if (feeds_output(g, last, &feeds))
        return -1;
    if (feeds)
        return 0;
    const Onnx__GraphProto *gp = g->g;
    char outs[160] = "";
    size_t at = 0;
    for (size_t i = 0; i < gp->n_output && i < 4 && at < sizeof outs; i++)
        at += (size_t)snprintf(outs + at, sizeof outs - at, "%s'%.40s'", i ? ", " : "",
                               gp->output[i]->name ? gp->output[i]->name : "");
    return spk_fail("%s: layer %d (LSTM node '%s'): no graph output depends on it (the outputs: %s%s); the model "
                    "does not compute this stack", g->file, layers, node_name(last), gp->n_output ? outs : "none",
                    gp->n_output > 4 ? ", ..." : "");
}

static int find_stack(graph *g, spk_lstm_weights *out, int max, int *count)
{
    const Onnx__GraphProto *gp = g->g;
    layer_node *list = NULL;
    int n = 0, rc = -1;
    for (size_t i = 0; i < gp->n_node; i++)
        n += is_lstm(gp->node[i]);
    if (n == 0) {
        const Onnx__ModelProto *m = spk_onnx_proto(g->model);
        bool in_function = false;
        for (size_t f = 0; f < m->n_functions && !in_function; f++)
            for (size_t i = 0; i < m->functions[f]->n_node && !in_function; i++)
                in_function = is_lstm(m->functions[f]->node[i]);
        char ops[200];
        list_ops(gp, ops, sizeof ops);
        return spk_fail("%s: no LSTM node in the model's graph (%zu nodes%s%s%s)%s", g->file, gp->n_node,
                        gp->n_node ? ": " : "", ops, "",
                        in_function             ? "; there is one in a model-local function, which spk does not inline"
                        : lstm_elsewhere(gp, 0) ? "; there is one in a subgraph (If, Loop or Scan), which spk does not "
                                                  "read"
                                                : "");
    }
    if (n > max)
        return spk_fail("%s: %d LSTM nodes, more than the %d layers spk stacks", g->file, n, max);
    list = calloc((size_t)n, sizeof *list);
    if (!list)
        return spk_fail("out of memory");
    int k = 0;
    for (size_t i = 0; i < gp->n_node; i++)
        if (is_lstm(gp->node[i]))
            list[k++].n = gp->node[i];
    for (k = 0; k < n; k++)
        find_pred(g, list, n, k);
    /* one head; every other layer after exactly one */
    int head = -1, order[SPK_LSTM_ONNX_MAX_LAYERS];
    for (k = 0; k < n; k++) {
        if (list[k].pred >= 0)
            continue;
        if (head >= 0) {
            spk_fail("%s: the LSTM nodes do not form one chain: LSTM node '%s' %s, not the output Y of another "
                     "LSTM node through Transpose and Reshape (the first layer is LSTM node '%s')",
                     g->file, node_name(list[k].n), list[k].why, node_name(list[head].n));
            goto done;
        }
        head = k;
    }
    if (head < 0) {
        spk_fail("%s: the LSTM nodes feed each other in a cycle", g->file);
        goto done;
    }
    int len = 0;
    for (int at = head; at >= 0 && len <= n;) {
        order[len++] = at;
        int next = -1;
        for (k = 0; k < n; k++) {
            if (list[k].pred != at)
                continue;
            if (next >= 0) {
                spk_fail("%s: the LSTM chain branches: LSTM nodes '%s' and '%s' both take the output of '%s'", g->file,
                         node_name(list[next].n), node_name(list[k].n), node_name(list[at].n));
                goto done;
            }
            next = k;
        }
        at = next;
    }
    if (len != n) {
        spk_fail("%s: the LSTM nodes do not form one chain (%d of %d follow from the first)", g->file, len, n);
        goto done;
    }
    if (check_used(g, list[order[n - 1]].n, n))
        goto done;
    for (k = 0; k < n; k++)
        if (graph_check_lstm(g, list[order[k]].n, k + 1, &list[order[k]].layout))
            goto done;
    for (k = 1; k < n; k++)
        if (check_link(g, list, order[k], k))
            goto done;
    for (k = 0; k < n; k++) {
        if (graph_lstm_weights(g, list[order[k]].n, k + 1, &out[k])) {
            for (int j = 0; j < k; j++)
                spk_lstm_weights_free(&out[j]);
            goto done;
        }
    }
    spk_lstm_layer view[SPK_LSTM_ONNX_MAX_LAYERS];
    for (k = 0; k < n; k++)
        view[k] = (spk_lstm_layer){out[k].W, out[k].R, out[k].B};
    if (spk_lstm_validate(view, n, NULL)) {
        graph_in_context(g, "the stack");
        for (k = 0; k < n; k++)
            spk_lstm_weights_free(&out[k]);
        goto done;
    }
    *count = n;
    rc = 0;
done:
    free(list);
    return rc;
}

int spk_lstm_from_onnx(spk_onnx_model *model, spk_lstm_weights *out, int max, int *count)
{
    graph g;
    *count = 0;
    if (max > SPK_LSTM_ONNX_MAX_LAYERS)
        max = SPK_LSTM_ONNX_MAX_LAYERS;
    int rc = graph_init(&g, model);
    if (rc == 0)
        rc = find_stack(&g, out, max, count);
    graph_free(&g);
    return rc;
}

int spk_lstm_load_onnx(const char *path, spk_lstm_weights *out, int max, int *count)
{
    *count = 0;
    spk_onnx_model *m = spk_onnx_load(path);
    if (!m)
        return -1;
    int rc = spk_lstm_from_onnx(m, out, max, count);
    spk_onnx_free(m);
    return rc;
}
