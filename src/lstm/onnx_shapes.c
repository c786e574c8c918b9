/* Shapes and integer vectors of an ONNX graph's values, with symbolic sizes
 * (lstm/onnx_graph.h): shape inference through the nodes a stack's plumbing
 * uses, and the integer arithmetic over shapes that exporters emit. */
#include "lstm/onnx_graph.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

/* ---- shapes -------------------------------------------------------------------- */


static int tensor_shape(graph *g, const Onnx__TensorProto *t, shape *out)
{
    int64_t dims[SPK_MAX_DIMS];
    if (spk_onnx_tensor_shape(g->model, t, dims, &out->ndim))
        return -1;
    for (int i = 0; i < out->ndim; i++)
        out->d[i] = sym_const(dims[i]);
    return 0;
}

/* A value's shape as the graph declares it (inputs, outputs, value_info). */
static int declared_shape(graph *g, const value *v, shape *out)
{
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type || !t->tensor_type->shape)
        return spk_fail("%s: the shape of '%s' is not known (no type information, and spk does not infer it "
                        "through this node)", g->file, v->name);
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    if (s->n_dim > SPK_MAX_DIMS)
        return spk_fail("%s: '%s' has %zu dimensions, more than %d", g->file, v->name, s->n_dim, SPK_MAX_DIMS);
    out->ndim = (int)s->n_dim;
    for (size_t i = 0; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = s->dim[i];
        int32_t anonymous = -(int32_t)((size_t)(v - g->values) * SPK_MAX_DIMS + i + 1);
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
            out->d[i] = sym_const(d->dim_value);
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   *d->dim_param) {
            int id = graph_symbol_id(g, d->dim_param);
            if (id < 0)
                return -1;
            out->d[i] = (sym){1, 1, {id}};
        } else {
            out->d[i] = (sym){1, 1, {anonymous}};
        }
    }
    return 0;
}

static int shape_numel(const shape *s, sym *out)
{
    sym n = sym_const(1);
    for (int i = 0; i < s->ndim; i++)
        if (sym_mul(n, s->d[i], &n))
            return -1;
    *out = n;
    return 0;
}

/* Reshape's output shape: 0 copies the input's size (unless allowzero), one
 * -1 takes what is left. */
int graph_resolve_reshape(graph *g, const char *name, const shape *in, const ints *target, bool allowzero,
                           shape *out)
{
    if (target->rank != 1 || target->n > SPK_MAX_DIMS)
        return spk_fail("%s: Reshape to '%s': the shape must list at most %d sizes", g->file, name, SPK_MAX_DIMS);
    int infer = -1;
    sym known = sym_const(1);
    out->ndim = target->n;
    for (int i = 0; i < target->n; i++) {
        sym e = target->v[i];
        if (sym_known(e) && e.coef == 0 && !allowzero) {
            if (i >= in->ndim)
                return spk_fail("%s: Reshape to '%s': size 0 at position %d copies a dimension the input lacks",
                                g->file, name, i);
            e = in->d[i];
        } else if (sym_known(e) && e.coef == -1) {
            if (infer >= 0)
                return spk_fail("%s: Reshape to '%s': more than one -1 in its shape", g->file, name);
            infer = i;
            continue;
        } else if (sym_known(e) && e.coef < 0) {
            return spk_fail("%s: Reshape to '%s': negative size %" PRId64, g->file, name, e.coef);
        }
        out->d[i] = e;
        if (sym_mul(known, e, &known))
            return spk_fail("%s: Reshape to '%s': its sizes are too complex to follow", g->file, name);
    }
    sym total;
    if (shape_numel(in, &total))
        return spk_fail("%s: Reshape to '%s': the input's sizes are too complex to follow", g->file, name);
    if (infer >= 0 && sym_div(total, known, &out->d[infer]))
        return spk_fail("%s: Reshape to '%s': cannot infer its -1 size", g->file, name);
    sym result;
    if (shape_numel(out, &result) || !sym_eq(result, total)) {
        char a[160], b[160];
        return spk_fail("%s: Reshape to '%s' changes the element count: %s to %s", g->file, name,
                        graph_shape_string(g, in, a, sizeof a), graph_shape_string(g, out, b, sizeof b));
    }
    return 0;
}

/* Normalises an axis in [-rank, rank). */
int graph_axis_in(const graph *g, const Onnx__NodeProto *n, int64_t axis, int rank, int *out)
{
    if (axis < -rank || axis >= rank)
        return spk_fail("%s: %s node '%s': axis %" PRId64 " is out of range for rank %d", g->file, op_of(n),
                        node_name(n), axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return 0;
}

/* The axes of Squeeze/Unsqueeze: input 1 (opset 13) or attribute 'axes'. */
static int axes_of(graph *g, const Onnx__NodeProto *n, int64_t *axes, size_t *count, bool *given, int depth)
{
    const char *in = input_of(n, 1);
    *given = false;
    if (in) {
        ints v;
        if (graph_eval_ints(g, in, &v, depth + 1))
            return -1;
        for (int i = 0; i < v.n; i++) {
            if (!sym_known(v.v[i]))
                return spk_fail("%s: %s node '%s': its axes are not constant", g->file, op_of(n), node_name(n));
            axes[i] = v.v[i].coef;
        }
        *count = (size_t)v.n;
        *given = true;
        return 0;
    }
    int rc = graph_attr_ints(g, n, "axes", axes, SPK_MAX_DIMS, count);
    if (rc < 0)
        return -1;
    *given = rc == 1;
    return 0;
}

/* The shape after Unsqueeze (unsqueeze true) or Squeeze. */
int graph_squeeze_shape(graph *g, const Onnx__NodeProto *n, const shape *in, bool unsqueeze, shape *out, int depth)
{
    int64_t axes[MAX_INTS];
    size_t count = 0;
    bool given;
    if (axes_of(g, n, axes, &count, &given, depth))
        return -1;
    bool mark[SPK_MAX_DIMS] = {false};
    if (unsqueeze) {
        int rank = in->ndim + (int)count;
        if (!given || rank > SPK_MAX_DIMS)
            return spk_fail("%s: Unsqueeze node '%s': needs axes, and a result of at most %d dimensions", g->file,
                            node_name(n), SPK_MAX_DIMS);
        for (size_t i = 0; i < count; i++) {
            int a;
            if (graph_axis_in(g, n, axes[i], rank, &a))
                return -1;
            if (mark[a])
                return spk_fail("%s: Unsqueeze node '%s': axis %d is given twice", g->file, node_name(n), a);
            mark[a] = true;
        }
        out->ndim = rank;
        for (int i = 0, j = 0; i < rank; i++)
            out->d[i] = mark[i] ? sym_const(1) : in->d[j++];
        return 0;
    }
    for (size_t i = 0; i < count; i++) {
        int a;
        if (graph_axis_in(g, n, axes[i], in->ndim, &a))
            return -1;
        if (!sym_known(in->d[a]) || in->d[a].coef != 1)
            return spk_fail("%s: Squeeze node '%s': dimension %d is not of size 1", g->file, node_name(n), a);
        mark[a] = true;
    }
    out->ndim = 0;
    for (int i = 0; i < in->ndim; i++) {
        bool drop = given ? mark[i] : (sym_known(in->d[i]) && in->d[i].coef == 1);
        if (!drop)
            out->d[out->ndim++] = in->d[i];
    }
    return 0;
}

/* The permutation of a Transpose node (default: reversed axes). */
int graph_transpose_perm(graph *g, const Onnx__NodeProto *n, int rank, int *perm)
{
    int64_t p[SPK_MAX_DIMS];
    size_t count;
    int rc = graph_attr_ints(g, n, "perm", p, SPK_MAX_DIMS, &count);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i;
        return 0;
    }
    bool seen[SPK_MAX_DIMS] = {false};
    if ((int)count != rank)
        return spk_fail("%s: Transpose node '%s': perm has %zu entries for rank %d", g->file, node_name(n), count,
                        rank);
    for (int i = 0; i < rank; i++) {
        if (p[i] < 0 || p[i] >= rank || seen[p[i]])
            return spk_fail("%s: Transpose node '%s': perm is not a permutation of 0..%d", g->file, node_name(n),
                            rank - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    return 0;
}

/* Shapes of LSTM outputs: Y [T, 2, B, H] (layout 1: [B, T, 2, H]), Y_h and
 * Y_c [2, B, H] ([B, 2, H]). */
static int lstm_output_shape(graph *g, const value *v, const Onnx__NodeProto *n, shape *out, int depth)
{
    int64_t layout, hidden;
    if (graph_attr_int(g, n, "layout", 0, &layout) || graph_attr_int(g, n, "hidden_size", -1, &hidden))
        return -1;
    const Onnx__AttributeProto *dir = graph_attr(g, n, "direction");
    int64_t directions = dir && dir->has_s && dir->s.len == 13 && memcmp(dir->s.data, "bidirectional", 13) == 0
                             ? 2 : 1;
    const char *x = input_of(n, 0);
    shape xs;
    if (!x || graph_value_shape(g, x, &xs, depth + 1) || xs.ndim != 3) {
        /* unknown: the sizes stay symbols of this LSTM's input */
        const value *xv = x ? graph_lookup(g, x) : NULL;
        int32_t base = (int32_t)((size_t)((xv ? xv : v) - g->values) * SPK_MAX_DIMS);
        xs.ndim = 3;
        for (int i = 0; i < 3; i++)
            xs.d[i] = (sym){1, 1, {-(base + i + 1)}};
        spk_clear_error();
    }
    sym H;
    if (hidden >= 1) {
        H = sym_const(hidden);
    } else {
        shape rs;
        const char *r = input_of(n, 2);
        if (!r || graph_value_shape(g, r, &rs, depth + 1) || rs.ndim != 3)
            return spk_fail("%s: LSTM node '%s': hidden size unknown", g->file, node_name(n));
        H = rs.d[2];
    }
    sym T = layout ? xs.d[1] : xs.d[0], B = layout ? xs.d[0] : xs.d[1], D = sym_const(directions);
    if (v->slot == 0) {
        out->ndim = 4;
        sym y0[4] = {T, D, B, H}, y1[4] = {B, T, D, H};
        memcpy(out->d, layout ? y1 : y0, sizeof y0);
    } else {
        out->ndim = 3;
        sym h0[3] = {D, B, H}, h1[3] = {B, D, H};
        memcpy(out->d, layout ? h1 : h0, sizeof h0);
    }
    return 0;
}

/* Shape inference through the few nodes the stack's plumbing uses; 1 when the
 * node is not one of them (the declared shape is used then). */
static int infer_shape(graph *g, const value *v, const Onnx__NodeProto *n, shape *out, int depth)
{
    const char *in = input_of(n, 0);
    if (!default_domain(n))
        return 1;
    const char *op = op_of(n);
    if (strcmp(op, "LSTM") == 0)
        return lstm_output_shape(g, v, n, out, depth);
    if (strcmp(op, "Constant") == 0) {
        const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
        if (a && a->t)
            return tensor_shape(g, a->t, out);
        if (a && (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ||
                  a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)) {
            out->ndim = 1;
            out->d[0] = sym_const((int64_t)(a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS ? a->n_ints
                                                                                                  : a->n_floats));
            return 0;
        }
        if (a && (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
                  a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)) {
            out->ndim = 0;
            return 0;
        }
        return 1;
    }
    if (!in)
        return 1;
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0 || (strcmp(op, "Dropout") == 0 && v->slot == 0))
        return graph_value_shape(g, in, out, depth + 1);
    if (strcmp(op, "Transpose") == 0) {
        shape s;
        int perm[SPK_MAX_DIMS];
        if (graph_value_shape(g, in, &s, depth + 1) || graph_transpose_perm(g, n, s.ndim, perm))
            return -1;
        out->ndim = s.ndim;
        for (int i = 0; i < s.ndim; i++)
            out->d[i] = s.d[perm[i]];
        return 0;
    }
    if (strcmp(op, "Reshape") == 0) {
        shape s;
        ints target;
        int64_t allowzero;
        const char *to = input_of(n, 1);
        if (!to || graph_value_shape(g, in, &s, depth + 1) || graph_eval_ints(g, to, &target, depth + 1) ||
            graph_attr_int(g, n, "allowzero", 0, &allowzero))
            return -1;
        return graph_resolve_reshape(g, v->name, &s, &target, allowzero != 0, out);
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        shape s;
        if (graph_value_shape(g, in, &s, depth + 1))
            return -1;
        return graph_squeeze_shape(g, n, &s, op[0] == 'U', out, depth);
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        ints dims;
        if (graph_eval_ints(g, in, &dims, depth + 1))
            return -1;
        if (dims.rank != 1 || dims.n > SPK_MAX_DIMS)
            return spk_fail("%s: ConstantOfShape node '%s': its shape is not a list of at most %d sizes", g->file,
                            node_name(n), SPK_MAX_DIMS);
        out->ndim = dims.n;
        memcpy(out->d, dims.v, (size_t)dims.n * sizeof *dims.v);
        return 0;
    }
    return 1;
}

int graph_value_shape(graph *g, const char *name, shape *out, int depth)
{
    value *v = graph_visit(g, name, depth);
    if (!v)
        return -1;
    if (v->folded) {
        out->ndim = v->folded->ndim;
        for (int i = 0; i < out->ndim; i++)
            out->d[i] = sym_const(v->folded->shape[i]);
        return 0;
    }
    if (v->kind == V_INIT)
        return tensor_shape(g, initializer(g, v), out);
    if (v->kind == V_NODE) {
        if (v->folding)
            return spk_fail("%s: '%s' depends on itself", g->file, name);
        v->folding = true;
        int rc = infer_shape(g, v, node_at(g, v), out, depth);
        v->folding = false;
        if (rc <= 0)
            return rc;
    }
    return declared_shape(g, v, out);
}
/* ---- integer vectors (shapes, indices) ------------------------------------------ */

static int ints_from_tensor(graph *g, const Onnx__TensorProto *t, ints *out)
{
    int64_t buf[MAX_INTS], dims[SPK_MAX_DIMS];
    size_t count;
    int ndim;
    if (spk_onnx_tensor_ints(g->model, t, buf, MAX_INTS, &count, dims, &ndim))
        return -1;
    if (ndim > 1)
        return spk_fail("%s: tensor '%s' has %d dimensions; spk follows integer scalars and vectors only", g->file,
                        t->name ? t->name : "", ndim);
    g->read_bytes += count * 8;
    out->rank = ndim;
    out->n = (int)count;
    for (size_t i = 0; i < count; i++)
        out->v[i] = sym_const(buf[i]);
    return 0;
}

int graph_node_fail(graph *g, const Onnx__NodeProto *n, const char *what)
{
    return spk_fail("%s: %s node '%s': %s", g->file, op_of(n), node_name(n), what);
}

int graph_const_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, int *count, int depth)
{
    ints v;
    if (graph_eval_ints(g, name, &v, depth + 1))
        return -1;
    for (int i = 0; i < v.n; i++) {
        if (!sym_known(v.v[i]))
            return graph_node_fail(g, n, "a slice bound or index is not constant");
        out[i] = v.v[i].coef;
    }
    *count = v.n;
    return 0;
}

int graph_slice_params(graph *g, const Onnx__NodeProto *n, int rank, slice_params *p, int depth)
{
    int ns, ne, na = -1, nst = -1;
    if (input_of(n, 1)) {
        if (graph_const_ints(g, n, input_of(n, 1), p->starts, &ns, depth) ||
            !input_of(n, 2) || graph_const_ints(g, n, input_of(n, 2), p->ends, &ne, depth))
            return input_of(n, 2) ? -1 : graph_node_fail(g, n, "no ends");
        if (input_of(n, 3) && graph_const_ints(g, n, input_of(n, 3), p->axes, &na, depth))
            return -1;
        if (input_of(n, 4) && graph_const_ints(g, n, input_of(n, 4), p->steps, &nst, depth))
            return -1;
    } else {
        size_t c1, c2, c3;
        if (graph_attr_ints(g, n, "starts", p->starts, MAX_INTS, &c1) < 0 ||
            graph_attr_ints(g, n, "ends", p->ends, MAX_INTS, &c2) < 0)
            return -1;
        int rc = graph_attr_ints(g, n, "axes", p->axes, MAX_INTS, &c3);
        if (rc < 0)
            return -1;
        ns = (int)c1;
        ne = (int)c2;
        na = rc ? (int)c3 : -1;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns) || ns > rank)
        return graph_node_fail(g, n, "starts, ends, axes and steps differ in length");
    p->count = ns;
    bool seen[SPK_MAX_DIMS] = {false};
    for (int i = 0; i < ns; i++) {
        int a;
        if (graph_axis_in(g, n, na >= 0 ? p->axes[i] : i, rank, &a))
            return -1;
        if (seen[a])
            return graph_node_fail(g, n, "an axis is sliced twice");
        seen[a] = true;
        p->axes[i] = a;
        if (nst < 0)
            p->steps[i] = 1;
        if (p->steps[i] == 0 || p->steps[i] == INT64_MIN)
            return graph_node_fail(g, n, "a step is zero");
    }
    return 0;
}

/* ONNX's clamping (the same as Python's): start, count. */
static void slice_range(int64_t size, int64_t start, int64_t end, int64_t stepv, int64_t *first, int64_t *count)
{
    if (start < 0)
        start = start < -size ? (stepv < 0 ? -1 : 0) : start + size;
    else if (start >= size)
        start = stepv < 0 ? size - 1 : size;
    if (end < 0)
        end = end < -size ? (stepv < 0 ? -1 : 0) : end + size;
    else if (end >= size)
        end = stepv < 0 ? size - 1 : size;
    *first = start;
    *count = 0;
    if (stepv > 0 && start < end)
        *count = (end - start - 1) / stepv + 1;
    else if (stepv < 0 && end < start)
        *count = (start - end - 1) / (-stepv) + 1;
}

/* Elementwise integer arithmetic with scalar broadcasting. */
static int ints_arith(graph *g, const Onnx__NodeProto *n, char op, const ints *a, const ints *b, ints *out)
{
    if (a->n != b->n && a->n != 1 && b->n != 1)
        return graph_node_fail(g, n, "operand lengths do not broadcast");
    out->n = a->n > b->n ? a->n : b->n;
    out->rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < out->n; i++) {
        sym x = a->v[a->n == 1 ? 0 : i], y = b->v[b->n == 1 ? 0 : i], r;
        bool ok;
        if (op == '*') {
            ok = sym_mul(x, y, &r) == 0;
        } else if (op == '/') {
            if (sym_known(x) && sym_known(y)) {
                ok = y.coef != 0 && !(x.coef == INT64_MIN && y.coef == -1);
                if (ok) {
                    /* ONNX's integer Div truncates, as C does */
                    r = sym_const(x.coef / y.coef);
                }
            } else {
                ok = sym_div(x, y, &r) == 0;
            }
        } else {
            /* + and - of symbolic sizes only when one side is 0 */
            if (sym_known(x) && sym_known(y)) {
                int64_t v;
                ok = op == '+' ? !__builtin_add_overflow(x.coef, y.coef, &v)
                               : !__builtin_sub_overflow(x.coef, y.coef, &v);
                r = sym_const(v);
            } else if (sym_known(y) && y.coef == 0) {
                ok = true;
                r = x;
            } else if (op == '+' && sym_known(x) && x.coef == 0) {
                ok = true;
                r = y;
            } else {
                ok = false;
            }
        }
        if (!ok)
            return graph_node_fail(g, n, "integer arithmetic spk cannot follow (symbolic sizes, overflow or "
                                         "division by 0)");
        out->v[i] = r;
    }
    return 0;
}

/* Gather of entries of an integer vector. */
static int eval_gather(graph *g, const Onnx__NodeProto *n, const char *in, ints *out, int depth)
{
    ints a;
    int64_t axis, idx[MAX_INTS];
    int count;
    ints indices;
    if (graph_attr_int(g, n, "axis", 0, &axis) || graph_eval_ints(g, in, &a, depth + 1))
        return -1;
    if (a.rank != 1 || (axis != 0 && axis != -1))
        return graph_node_fail(g, n, "gathers from something other than a vector");
    if (!input_of(n, 1) || graph_eval_ints(g, input_of(n, 1), &indices, depth + 1) ||
        graph_const_ints(g, n, input_of(n, 1), idx, &count, depth))
        return input_of(n, 1) ? -1 : graph_node_fail(g, n, "no indices");
    out->rank = indices.rank;
    out->n = count;
    for (int i = 0; i < count; i++) {
        int64_t k = idx[i] < 0 ? idx[i] + a.n : idx[i];
        if (k < 0 || k >= a.n)
            return graph_node_fail(g, n, "an index is out of range");
        out->v[i] = a.v[k];
    }
    return 0;
}

/* Slice of an integer vector. */
static int eval_slice(graph *g, const Onnx__NodeProto *n, const char *in, ints *out, int depth)
{
    ints a;
    slice_params p;
    if (graph_eval_ints(g, in, &a, depth + 1))
        return -1;
    if (a.rank != 1)
        return graph_node_fail(g, n, "slices a scalar");
    if (graph_slice_params(g, n, 1, &p, depth))
        return -1;
    int64_t first = 0, count = a.n, stepv = 1;
    if (p.count == 1) {
        stepv = p.steps[0];
        slice_range(a.n, p.starts[0], p.ends[0], stepv, &first, &count);
    }
    out->rank = 1;
    out->n = (int)count;
    for (int64_t i = 0; i < count; i++)
        out->v[i] = a.v[first + i * stepv];
    return 0;
}

static int eval_ints_node(graph *g, const value *v, const Onnx__NodeProto *n, ints *out, int depth)
{
    const char *op = op_of(n), *in = input_of(n, 0);
    if (!default_domain(n))
        return graph_node_fail(g, n, "an operator of another domain");
    if (strcmp(op, "Constant") == 0) {
        const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
        if (a && a->t)
            return ints_from_tensor(g, a->t, out);
        if (a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            *out = (ints){0, 1, {sym_const(a->i)}};
            return 0;
        }
        if (a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS && a->n_ints <= MAX_INTS) {
            out->rank = 1;
            out->n = (int)a->n_ints;
            for (size_t i = 0; i < a->n_ints; i++)
                out->v[i] = sym_const(a->ints[i]);
            return 0;
        }
        return graph_node_fail(g, n, "not an integer constant spk reads");
    }
    if (!in)
        return graph_node_fail(g, n, "its input is missing");
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0)
        return graph_eval_ints(g, in, out, depth + 1);
    if (strcmp(op, "Shape") == 0) {
        shape s;
        int64_t start, end;
        if (graph_value_shape(g, in, &s, depth + 1) || graph_attr_int(g, n, "start", 0, &start) ||
            graph_attr_int(g, n, "end", INT64_MAX, &end))
            return -1;
        int64_t first, count;
        slice_range(s.ndim, start, end, 1, &first, &count);
        out->rank = 1;
        out->n = (int)count;
        memcpy(out->v, s.d + first, (size_t)count * sizeof *s.d);
        return 0;
    }
    ints a, b;
    if (strcmp(op, "Gather") == 0)
        return eval_gather(g, n, in, out, depth);
    if (strcmp(op, "Slice") == 0)
        return eval_slice(g, n, in, out, depth);
    if (strcmp(op, "Concat") == 0) {
        out->rank = 1;
        out->n = 0;
        for (size_t i = 0; i < n->n_input; i++) {
            if (!input_of(n, i))
                continue;
            if (graph_eval_ints(g, input_of(n, i), &a, depth + 1))
                return -1;
            if (a.rank != 1 || out->n + a.n > MAX_INTS)
                return graph_node_fail(g, n, "concatenates something other than short vectors");
            memcpy(out->v + out->n, a.v, (size_t)a.n * sizeof *a.v);
            out->n += a.n;
        }
        return 0;
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 || strcmp(op, "Reshape") == 0) {
        if (graph_eval_ints(g, in, out, depth + 1))
            return -1;
        shape s = {out->rank, {sym_const(out->n)}}, r;
        if (op[0] == 'R') {
            ints target;
            if (!input_of(n, 1) || graph_eval_ints(g, input_of(n, 1), &target, depth + 1))
                return input_of(n, 1) ? -1 : graph_node_fail(g, n, "no shape");
            if (graph_resolve_reshape(g, v->name, &s, &target, false, &r))
                return -1;
        } else if (graph_squeeze_shape(g, n, &s, op[0] == 'U', &r, depth)) {
            return -1;
        }
        if (r.ndim > 1 || (r.ndim == 0 && out->n != 1))
            return graph_node_fail(g, n, "makes an integer tensor of more than one dimension");
        out->rank = r.ndim;
        return 0;
    }
    char arith = strcmp(op, "Mul") == 0 ? '*' : strcmp(op, "Div") == 0 ? '/' : strcmp(op, "Add") == 0 ? '+'
                 : strcmp(op, "Sub") == 0 ? '-' : 0;
    if (arith) {
        if (!input_of(n, 1) || graph_eval_ints(g, in, &a, depth + 1) ||
            graph_eval_ints(g, input_of(n, 1), &b, depth + 1))
            return input_of(n, 1) ? -1 : graph_node_fail(g, n, "an operand is missing");
        return ints_arith(g, n, arith, &a, &b, out);
    }
    return spk_fail("%s: '%s' comes from a %s node ('%s'), which spk does not evaluate", g->file, v->name, op,
                    node_name(n));
}

int graph_eval_ints(graph *g, const char *name, ints *out, int depth)
{
    value *v = graph_visit(g, name, depth);
    if (!v)
        return -1;
    if (v->kind == V_INIT)
        return ints_from_tensor(g, initializer(g, v), out);
    if (v->kind == V_INPUT)
        return spk_fail("%s: '%s' is a graph input, not a constant", g->file, name);
    if (v->folding)
        return spk_fail("%s: '%s' depends on itself", g->file, name);
    v->folding = true;
    int rc = eval_ints_node(g, v, node_at(g, v), out, depth);
    v->folding = false;
    return rc;
}

/* ---- element types ------------------------------------------------------------------- */

/* The element type the graph declares for a value (inputs, outputs,
 * value_info), 0 when it declares none. */
static int declared_elem_type(const value *v)
{
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->has_elem_type)
        return 0;
    return t->tensor_type->elem_type;
}

static int node_elem_type(graph *g, const value *v, const Onnx__NodeProto *n, int depth)
{
    if (!default_domain(n))
        return 0;
    const char *op = op_of(n), *in = input_of(n, 0);
    if (strcmp(op, "Constant") == 0) {
        const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
        if (!a)
            return 0;
        if (a->t)
            return a->t->data_type;
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT ||
            a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
            return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        if (a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
            a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
            return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        return 0;
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        const Onnx__AttributeProto *a = graph_attr(g, n, "value");
        return a && a->t ? a->t->data_type : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    }
    if (strcmp(op, "Cast") == 0) {
        int64_t to;
        if (graph_attr_int(g, n, "to", 0, &to))
            return -1;
        return to > 0 && to <= INT32_MAX ? (int)to : 0;
    }
    if (strcmp(op, "Shape") == 0)
        return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    if (strcmp(op, "LSTM") == 0) /* Y, Y_h, Y_c are of its T, which W has */
        return input_of(n, 1) ? graph_elem_type(g, input_of(n, 1), depth + 1) : 0;
    if (strcmp(op, "Dropout") == 0 && v->slot == 1)
        return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    static const char *const same_as_input[] = {"Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze",
                                                "Slice", "Split", "Flatten", "Expand", "Tile", "Gather",
                                                "Concat", "Dropout", "Add", "Sub", "Mul", "Div"};
    for (size_t i = 0; in && i < sizeof same_as_input / sizeof *same_as_input; i++)
        if (strcmp(op, same_as_input[i]) == 0)
            return graph_elem_type(g, in, depth + 1);
    return 0;
}

int graph_elem_type(graph *g, const char *name, int depth)
{
    value *v = graph_visit(g, name, depth);
    if (!v)
        return -1;
    if (v->kind == V_INIT)
        return initializer(g, v)->data_type;
    if (v->kind == V_INPUT)
        return declared_elem_type(v);
    if (v->folding)
        return spk_fail("%s: '%s' depends on itself", g->file, name);
    v->folding = true;
    int type = node_elem_type(g, v, node_at(g, v), depth);
    v->folding = false;
    return type != 0 ? type : declared_elem_type(v);
}
