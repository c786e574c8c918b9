/* Constant folding of an ONNX graph's weights, and proofs that a state is
 * zero (lstm/onnx_graph.h). */
#include "lstm/onnx_graph.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

/* Folding allocates at most FOLD_FACTOR times the bytes of the constants it
 * reads, plus FOLD_SLACK. */
#define FOLD_FACTOR 16
#define FOLD_SLACK ((uint64_t)16 << 20)

/* Accounts for a tensor folding is about to allocate. */
static int charge(graph *g, const spk_tensor *like, int ndim, const int64_t *dims, const char *name)
{
    uint64_t bytes = spk_dtype_size(like->dtype);
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(bytes, (uint64_t)dims[i], &bytes))
            bytes = UINT64_MAX;
    uint64_t limit = g->read_bytes > (UINT64_MAX - FOLD_SLACK) / FOLD_FACTOR
                         ? UINT64_MAX : g->read_bytes * FOLD_FACTOR + FOLD_SLACK;
    if (bytes > limit || g->folded_bytes > limit - bytes)
        return spk_fail("%s: folding '%s' would allocate more than %d times the %" PRIu64
                        " bytes of constants it reads (plus %" PRIu64 " MiB): refused", g->file, name, FOLD_FACTOR,
                        g->read_bytes, FOLD_SLACK >> 20);
    g->folded_bytes += bytes;
    return 0;
}
/* ---- constant folding of weights ------------------------------------------------ */


/* A new tensor sharing t's storage and layout. */
static spk_tensor *alias(const spk_tensor *t)
{
    spk_tensor *a = malloc(sizeof *a);
    if (!a)
        return spk_fail_null("out of memory");
    *a = *t;
    spk_storage_retain(a->storage);
    return a;
}

/* t's data reshaped; a contiguous copy first where t is a strided view. */
static spk_tensor *reshaped(graph *g, const spk_tensor *t, int ndim, const int64_t *dims, const char *name)
{
    if (spk_tensor_is_contiguous(t))
        return spk_tensor_view(t, ndim, dims);
    if (charge(g, t, t->ndim, t->shape, name))
        return NULL;
    spk_tensor *c = spk_tensor_contiguous(t);
    spk_tensor *r = c ? spk_tensor_view(c, ndim, dims) : NULL;
    spk_tensor_free(c);
    return r;
}

static spk_tensor *fold_concat(graph *g, const value *v, const Onnx__NodeProto *n, int depth)
{
    int64_t axis;
    if (graph_attr_int(g, n, "axis", 0, &axis))
        return NULL;
    const spk_tensor *parts[MAX_INTS];
    int count = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!input_of(n, i))
            continue;
        if (count == MAX_INTS)
            return graph_node_fail(g, n, "more inputs than spk folds"), NULL;
        parts[count] = graph_fold(g, input_of(n, i), depth + 1);
        if (!parts[count])
            return NULL;
        count++;
    }
    if (count == 0)
        return graph_node_fail(g, n, "no inputs"), NULL;
    const spk_tensor *first = parts[0];
    int a;
    if (graph_axis_in(g, n, axis, first->ndim, &a))
        return NULL;
    int64_t dims[SPK_MAX_DIMS];
    memcpy(dims, first->shape, sizeof dims);
    dims[a] = 0;
    spk_dtype dtype = first->dtype;
    for (int i = 0; i < count; i++) {
        const spk_tensor *p = parts[i];
        if (p->ndim != first->ndim)
            return graph_node_fail(g, n, "its inputs differ in rank"), NULL;
        for (int d = 0; d < p->ndim; d++)
            if (d != a && p->shape[d] != first->shape[d])
                return graph_node_fail(g, n, "its inputs differ in size off the concatenation axis"), NULL;
        if (p->dtype == SPK_F64)
            dtype = SPK_F64;
        if (__builtin_add_overflow(dims[a], p->shape[a], &dims[a]))
            return graph_node_fail(g, n, "its result is too large"), NULL;
    }
    spk_tensor like = {.dtype = dtype};
    if (charge(g, &like, first->ndim, dims, v->name))
        return NULL;
    spk_tensor *out = spk_tensor_new(dtype, first->ndim, dims);
    if (out && spk_tensor_copy_joined(out, a, count, parts)) {
        spk_tensor_free(out);
        return NULL;
    }
    return out;
}

static spk_tensor *fold_slice(graph *g, const Onnx__NodeProto *n, const spk_tensor *t, int depth)
{
    slice_params p;
    if (graph_slice_params(g, n, t->ndim, &p, depth))
        return NULL;
    spk_tensor *cur = alias(t);
    for (int i = 0; cur && i < p.count; i++) {
        spk_tensor *next = spk_tensor_slice(cur, (int)p.axes[i], p.starts[i], p.ends[i], p.steps[i]);
        spk_tensor_free(cur);
        cur = next;
    }
    return cur;
}

static spk_tensor *fold_split(graph *g, const value *v, const Onnx__NodeProto *n, const spk_tensor *t, int depth)
{
    int64_t axis, sizes[MAX_INTS];
    int count = 0;
    if (graph_attr_int(g, n, "axis", 0, &axis))
        return NULL;
    int a;
    if (graph_axis_in(g, n, axis, t->ndim, &a))
        return NULL;
    if (input_of(n, 1)) {
        if (graph_const_ints(g, n, input_of(n, 1), sizes, &count, depth))
            return NULL;
    } else {
        size_t c;
        int rc = graph_attr_ints(g, n, "split", sizes, MAX_INTS, &c);
        if (rc < 0)
            return NULL;
        count = (int)c;
    }
    int64_t at = 0, length;
    if (count) {
        if (count != (int)n->n_output)
            return graph_node_fail(g, n, "split sizes and outputs differ in number"), NULL;
        int64_t total = 0;
        for (int i = 0; i < count; i++) {
            if (sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total))
                return graph_node_fail(g, n, "a split size is negative"), NULL;
            if (i < v->slot)
                at += sizes[i];
        }
        if (total != t->shape[a])
            return graph_node_fail(g, n, "split sizes do not add up to the dimension"), NULL;
        length = sizes[v->slot];
    } else {
        /* equal parts (num_outputs = the outputs); the last may be smaller */
        int64_t parts = (int64_t)n->n_output, chunk = (t->shape[a] + parts - 1) / parts;
        at = chunk * v->slot;
        if (at > t->shape[a])
            at = t->shape[a];
        length = t->shape[a] - at < chunk ? t->shape[a] - at : chunk;
    }
    return spk_tensor_narrow(t, a, at, length);
}

/* Transpose as a view of t. */
static spk_tensor *fold_transpose(graph *g, const Onnx__NodeProto *n, const spk_tensor *t)
{
    int perm[SPK_MAX_DIMS];
    if (graph_transpose_perm(g, n, t->ndim, perm))
        return NULL;
    /* the view whose axis i is t's axis perm[i], by swaps */
    int where[SPK_MAX_DIMS]; /* where[a]: the position of t's axis a in cur */
    int at[SPK_MAX_DIMS];    /* at[i]: t's axis at position i of cur */
    for (int i = 0; i < t->ndim; i++)
        where[i] = at[i] = i;
    spk_tensor *cur = alias(t);
    for (int i = 0; cur && i < t->ndim; i++) {
        int j = where[perm[i]];
        if (j == i)
            continue;
        spk_tensor *next = spk_tensor_transpose(cur, i, j);
        spk_tensor_free(cur);
        cur = next;
        int ai = at[i], aj = at[j];
        at[i] = aj;
        at[j] = ai;
        where[aj] = i;
        where[ai] = j;
    }
    return cur;
}

/* Reshape, Unsqueeze, Squeeze and Flatten: t's data in a new shape. */
static spk_tensor *fold_reshape(graph *g, const value *v, const Onnx__NodeProto *n, const spk_tensor *t, int depth)
{
    const char *op = op_of(n);
    shape s = {t->ndim, {{0}}}, r;
    for (int i = 0; i < t->ndim; i++)
        s.d[i] = sym_const(t->shape[i]);
    if (op[0] == 'R') {
        ints target;
        int64_t allowzero;
        if (!input_of(n, 1))
            return graph_node_fail(g, n, "no shape"), NULL;
        if (graph_eval_ints(g, input_of(n, 1), &target, depth + 1) ||
            graph_attr_int(g, n, "allowzero", 0, &allowzero) || graph_resolve_reshape(g, v->name, &s, &target, allowzero != 0, &r))
            return NULL;
    } else if (op[0] == 'F') {
        int64_t axis;
        int ax;
        if (graph_attr_int(g, n, "axis", 1, &axis) || graph_axis_in(g, n, axis, t->ndim + 1, &ax))
            return NULL;
        r.ndim = 2;
        r.d[0] = r.d[1] = sym_const(1);
        for (int i = 0; i < t->ndim; i++)
            r.d[i < ax ? 0 : 1].coef *= t->shape[i]; /* within numel: no overflow */
    } else if (graph_squeeze_shape(g, n, &s, op[0] == 'U', &r, depth)) {
        return NULL;
    }
    int64_t dims[SPK_MAX_DIMS];
    for (int i = 0; i < r.ndim; i++) {
        if (!sym_known(r.d[i]))
            return graph_node_fail(g, n, "its shape is not constant"), NULL;
        dims[i] = r.d[i].coef;
    }
    return reshaped(g, t, r.ndim, dims, v->name);
}

static spk_tensor *fold_node(graph *g, const value *v, const Onnx__NodeProto *n, int depth)
{
    const char *op = op_of(n), *in = input_of(n, 0);
    if (!default_domain(n))
        return graph_node_fail(g, n, "an operator of another domain"), NULL;
    if (strcmp(op, "Constant") == 0) {
        const Onnx__AttributeProto *a = n->n_attribute == 1 ? n->attribute[0] : NULL;
        if (a && a->t) {
            spk_tensor *t = spk_onnx_tensor_values(g->model, a->t);
            if (t)
                g->read_bytes += (uint64_t)spk_tensor_numel(t) * spk_dtype_size(t->dtype);
            return t;
        }
        if (a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
            return spk_tensor_full(SPK_F32, 0, NULL, a->f);
        if (a && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) {
            int64_t len = (int64_t)a->n_floats;
            spk_tensor *t = spk_tensor_new(SPK_F32, 1, &len);
            if (t && len)
                memcpy(spk_tensor_data(t), a->floats, a->n_floats * sizeof *a->floats);
            g->read_bytes += a->n_floats * sizeof *a->floats;
            return t;
        }
        return graph_node_fail(g, n, "not a floating-point constant"), NULL;
    }
    if (!in)
        return graph_node_fail(g, n, "its input is missing"), NULL;
    if (strcmp(op, "Concat") == 0)
        return fold_concat(g, v, n, depth);
    const spk_tensor *t = graph_fold(g, in, depth + 1);
    if (!t)
        return NULL;
    if (strcmp(op, "Identity") == 0)
        return alias(t);
    if (strcmp(op, "Cast") == 0) {
        int64_t to;
        if (graph_attr_int(g, n, "to", 0, &to))
            return NULL;
        spk_dtype dtype = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? SPK_F32 : SPK_F64;
        if (to != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && to != ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
            char buf[32];
            return spk_fail_null("%s: Cast node '%s' casts to %s; spk folds casts to FLOAT and DOUBLE", g->file,
                                 node_name(n), spk_onnx_type_name((int32_t)to, buf, sizeof buf));
        }
        if (dtype == t->dtype)
            return alias(t);
        if (charge(g, &(spk_tensor){.dtype = dtype}, t->ndim, t->shape, v->name))
            return NULL;
        return spk_tensor_to_dtype(t, dtype);
    }
    if (strcmp(op, "Slice") == 0)
        return fold_slice(g, n, t, depth);
    if (strcmp(op, "Split") == 0)
        return fold_split(g, v, n, t, depth);
    if (strcmp(op, "Transpose") == 0)
        return fold_transpose(g, n, t);
    if (strcmp(op, "Reshape") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 ||
        strcmp(op, "Flatten") == 0)
        return fold_reshape(g, v, n, t, depth);
    return spk_fail_null("%s: '%s' comes from a %s node ('%s'), which spk does not fold into constants", g->file,
                         v->name, op, node_name(n));
}

spk_tensor *graph_fold(graph *g, const char *name, int depth)
{
    value *v = graph_lookup(g, name);
    if (!v)
        return spk_fail_null("%s: no value named '%s' in the graph", g->file, name ? name : "");
    if (v->folded)
        return v->folded;
    if (graph_step(g, depth, name))
        return NULL;
    spk_tensor *t;
    if (v->kind == V_INIT) {
        t = spk_onnx_tensor_values(g->model, initializer(g, v));
        if (t)
            g->read_bytes += (uint64_t)spk_tensor_numel(t) * spk_dtype_size(t->dtype);
    } else if (v->kind == V_INPUT) {
        return spk_fail_null("%s: '%s' is a graph input, not a constant", g->file, name);
    } else {
        if (v->folding)
            return spk_fail_null("%s: '%s' depends on itself", g->file, name);
        v->folding = true;
        t = fold_node(g, v, node_at(g, v), depth);
        v->folding = false;
    }
    v->folded = t;
    return t;
}
/* ---- zero states ------------------------------------------------------------------ */

static bool tensor_is_zero(const spk_tensor *t)
{
    int64_t n = spk_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (spk_tensor_flat_get(t, i) != 0.0)
            return false;
    return true;
}

/* 1 when `name` is provably all zeros, 0 when not or not provably (why says
 * where it comes from), -1 on an error. */
int graph_is_zero(graph *g, const char *name, char *why, size_t size, int depth)
{
    value *v = graph_visit(g, name, depth);
    if (!v)
        return -1;
    if (v->kind == V_INPUT) {
        snprintf(why, size, "comes from the graph input '%s'", name);
        return 0;
    }
    if (v->kind == V_INIT) {
        const spk_tensor *t = graph_fold(g, name, depth + 1);
        if (!t)
            return -1;
        if (!tensor_is_zero(t))
            snprintf(why, size, "is the initializer '%s', which is not all zeros", name);
        return tensor_is_zero(t);
    }
    const Onnx__NodeProto *n = node_at(g, v);
    const char *op = op_of(n), *in = input_of(n, 0);
    if (default_domain(n) && (strcmp(op, "ConstantOfShape") == 0 || strcmp(op, "Constant") == 0)) {
        const Onnx__AttributeProto *a = graph_attr(g, n, "value");
        if (!a && strcmp(op, "ConstantOfShape") == 0) /* without a value: zeros */
            return 1;
        if (a && a->t) {
            spk_tensor *t = spk_onnx_tensor_values(g->model, a->t);
            if (!t)
                return -1;
            bool zero = tensor_is_zero(t);
            spk_tensor_free(t);
            if (!zero)
                snprintf(why, size, "comes from %s node '%s', which is not all zeros", op, node_name(n));
            return zero;
        }
    }
    static const char *const passes[] = {"Expand", "Slice", "Gather", "Reshape", "Squeeze", "Unsqueeze", "Transpose",
                                         "Identity", "Cast", "Split", "Tile", "Flatten"};
    for (size_t i = 0; default_domain(n) && in && i < sizeof passes / sizeof *passes; i++)
        if (strcmp(op, passes[i]) == 0)
            return graph_is_zero(g, in, why, size, depth + 1);
    if (is_op(n, "Concat")) {
        for (size_t i = 0; i < n->n_input; i++) {
            int rc = input_of(n, i) ? graph_is_zero(g, input_of(n, i), why, size, depth + 1) : 1;
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    snprintf(why, size, "comes from %s node '%s', which spk does not evaluate", op, node_name(n));
    return 0;
}
