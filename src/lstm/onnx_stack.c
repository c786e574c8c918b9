/* LSTM stacks in ONNX models (see lstm/onnx_stack.h): a name index of the
 * main graph, a small evaluator (constant folding of weights, integer shape
 * arithmetic with symbolic sizes, proofs that initial states are zero), the
 * chain of LSTM nodes, and the writer. */
#include "lstm/onnx_stack.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/version.h"

#define MAX_INTS 64           /* entries of a shape or index vector the evaluator follows */
#define MAX_EVAL_DEPTH 64     /* nodes between an LSTM input and the initializers it comes from */
#define MAX_EVAL_STEPS 200000 /* node visits per model */
#define MAX_SYMS 4            /* symbolic sizes in one product */
#define MAX_PATH 16           /* nodes between two LSTM layers */
#define FOLD_FACTOR 16
#define FOLD_SLACK ((uint64_t)16 << 20)

/* ---- symbolic integers: coef * s[0] * ... * s[n-1] ----------------------- */

/* Symbols: ids >= 1 name a dim_param (symbols[id - 1]); ids < 0 are a value's
 * dimension of unknown size, -(value index * SPK_MAX_DIMS + axis + 1). */
typedef struct sym {
    int64_t coef;
    int n;
    int32_t s[MAX_SYMS];
} sym;

typedef struct ints {
    int rank; /* 0 (a scalar, n == 1) or 1 */
    int n;
    sym v[MAX_INTS];
} ints;

typedef struct shape {
    int ndim;
    sym d[SPK_MAX_DIMS];
} shape;

static sym sym_const(int64_t v)
{
    return (sym){v, 0, {0}};
}

static bool sym_known(sym a)
{
    return a.n == 0;
}

static bool sym_eq(sym a, sym b)
{
    if (a.coef != b.coef || a.n != b.n)
        return false;
    for (int i = 0; i < a.n; i++)
        if (a.s[i] != b.s[i])
            return false;
    return true;
}

/* 0 or -1 (too many symbols or an overflow; no message: callers say what). */
static int sym_mul(sym a, sym b, sym *out)
{
    sym r;
    if (__builtin_mul_overflow(a.coef, b.coef, &r.coef) || a.n + b.n > MAX_SYMS)
        return -1;
    r.n = 0;
    int i = 0, j = 0;
    while (i < a.n || j < b.n) /* merge, keeping the ids sorted */
        r.s[r.n++] = (j >= b.n || (i < a.n && a.s[i] <= b.s[j])) ? a.s[i++] : b.s[j++];
    if (r.coef == 0)
        r.n = 0;
    *out = r;
    return 0;
}

/* a / b when it is exact: b's symbols among a's, coefficients dividing. */
static int sym_div(sym a, sym b, sym *out)
{
    if (b.coef == 0 || (b.coef == -1 && a.coef == INT64_MIN) || a.coef % b.coef)
        return -1;
    sym r = {a.coef / b.coef, 0, {0}};
    int j = 0;
    for (int i = 0; i < a.n; i++) {
        if (j < b.n && a.s[i] == b.s[j])
            j++;
        else
            r.s[r.n++] = a.s[i];
    }
    if (j != b.n)
        return -1;
    *out = r;
    return 0;
}

/* ---- the graph's names ----------------------------------------------------- */

enum { V_INIT = 1, V_INPUT, V_NODE };

typedef struct value {
    const char *name;
    int kind;
    int index; /* initializer, graph input or node */
    int slot;  /* output slot of a node */
    const Onnx__TypeProto *type;
    spk_tensor *folded; /* memo of fold() */
    bool folding;
} value;

typedef struct graph {
    spk_onnx_model *model;
    const char *file;
    const Onnx__GraphProto *g;
    value *values;
    size_t count;
    int32_t *table; /* open addressing: value index + 1, 0 empty */
    size_t mask;
    char **symbols; /* dim_param names, by id - 1 */
    int nsymbols, capsymbols;
    int32_t *symtab; /* open addressing over symbols: id, 0 empty */
    size_t symmask;
    uint64_t steps;
    uint64_t read_bytes, folded_bytes;
} graph;

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static value *lookup(graph *g, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (size_t i = hash_name(name) & g->mask;; i = (i + 1) & g->mask) {
        int32_t at = g->table[i];
        if (at == 0)
            return NULL;
        if (strcmp(g->values[at - 1].name, name) == 0)
            return &g->values[at - 1];
    }
}

static int add_value(graph *g, const char *name, int kind, int index, int slot)
{
    if (!name || !*name)
        return 0;
    size_t i = hash_name(name) & g->mask;
    for (;; i = (i + 1) & g->mask) {
        int32_t at = g->table[i];
        if (at == 0)
            break;
        value *v = &g->values[at - 1];
        if (strcmp(v->name, name) == 0) {
            if (kind == V_INPUT) /* an input that is also an initializer: the initializer is its value */
                return 0;
            return spk_fail("%s: value '%s' is defined twice in the graph", g->file, name);
        }
    }
    g->values[g->count] = (value){name, kind, index, slot, NULL, NULL, false};
    g->table[i] = (int32_t)++g->count;
    return 0;
}

static void declare_type(graph *g, const Onnx__ValueInfoProto *info)
{
    value *v = info ? lookup(g, info->name) : NULL;
    if (v && info->type && !v->type)
        v->type = info->type;
}

static int graph_init(graph *g, spk_onnx_model *model)
{
    memset(g, 0, sizeof *g);
    g->model = model;
    g->file = spk_onnx_name(model);
    g->g = spk_onnx_proto(model)->graph;
    const Onnx__GraphProto *gp = g->g;
    uint64_t total = gp->n_initializer + gp->n_input;
    for (size_t i = 0; i < gp->n_node; i++)
        total += gp->node[i]->n_output;
    if (total > INT32_MAX / SPK_MAX_DIMS - 1) /* anonymous symbol ids stay in int32 */
        return spk_fail("%s: the graph defines too many values (%" PRIu64 ")", g->file, total);
    size_t cap = 16;
    while (cap < 2 * total)
        cap *= 2;
    /* both bounded by the number of names the file holds */
    g->values = calloc(total ? total : 1, sizeof *g->values);
    g->table = calloc(cap, sizeof *g->table);
    if (!g->values || !g->table)
        return spk_fail("%s: out of memory indexing the graph", g->file);
    g->mask = cap - 1;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (add_value(g, gp->initializer[i]->name, V_INIT, (int)i, 0))
            return -1;
    for (size_t i = 0; i < gp->n_input; i++)
        if (add_value(g, gp->input[i]->name, V_INPUT, (int)i, 0))
            return -1;
    for (size_t i = 0; i < gp->n_node; i++)
        for (size_t o = 0; o < gp->node[i]->n_output; o++)
            if (add_value(g, gp->node[i]->output[o], V_NODE, (int)i, (int)o))
                return -1;
    for (size_t i = 0; i < gp->n_input; i++)
        declare_type(g, gp->input[i]);
    for (size_t i = 0; i < gp->n_output; i++)
        declare_type(g, gp->output[i]);
    for (size_t i = 0; i < gp->n_value_info; i++)
        declare_type(g, gp->value_info[i]);
    return 0;
}

static void graph_free(graph *g)
{
    for (size_t i = 0; i < g->count; i++)
        spk_tensor_free(g->values[i].folded);
    free(g->values);
    free(g->table);
    free(g->symbols);
    free(g->symtab);
}

/* The id of a dim_param name, interned on first sight. The table grows with
 * the distinct names the file holds. */
static int symbol_id(graph *g, const char *name)
{
    if (g->symtab) {
        for (size_t i = hash_name(name) & g->symmask; g->symtab[i]; i = (i + 1) & g->symmask)
            if (strcmp(g->symbols[g->symtab[i] - 1], name) == 0)
                return g->symtab[i];
    }
    if (g->nsymbols == g->capsymbols) {
        if (g->capsymbols > INT32_MAX / 4)
            return spk_fail("%s: too many distinct dimension names", g->file);
        int cap = g->capsymbols ? 2 * g->capsymbols : 16;
        char **grown = realloc(g->symbols, (size_t)cap * sizeof *grown);
        int32_t *table = calloc(2 * (size_t)cap, sizeof *table);
        if (!grown || !table) {
            if (grown)
                g->symbols = grown;
            free(table);
            return spk_fail("out of memory");
        }
        g->symbols = grown;
        g->capsymbols = cap;
        free(g->symtab);
        g->symtab = table;
        g->symmask = 2 * (size_t)cap - 1;
        for (int id = 1; id <= g->nsymbols; id++) {
            size_t i = hash_name(g->symbols[id - 1]) & g->symmask;
            while (g->symtab[i])
                i = (i + 1) & g->symmask;
            g->symtab[i] = id;
        }
    }
    g->symbols[g->nsymbols++] = (char *)name; /* the model owns the string */
    size_t i = hash_name(name) & g->symmask;
    while (g->symtab[i])
        i = (i + 1) & g->symmask;
    g->symtab[i] = g->nsymbols;
    return g->nsymbols;
}

static const char *symbol_name(const graph *g, int32_t id)
{
    return id >= 1 && id <= g->nsymbols ? g->symbols[id - 1] : "?";
}

/* "589", "2*batch", "?" into buf. */
static const char *sym_string(const graph *g, sym a, char *buf, size_t size)
{
    size_t n = 0;
    if (a.coef != 1 || a.n == 0)
        n += (size_t)snprintf(buf, size, "%" PRId64 "%s", a.coef, a.n ? "*" : "");
    for (int i = 0; i < a.n && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "*" : "", symbol_name(g, a.s[i]));
    return buf;
}

static const char *shape_string(const graph *g, const shape *s, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->ndim && n < size; i++) {
        char one[64];
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", sym_string(g, s->d[i], one, sizeof one));
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* Puts "file: context: " before the current message, which may begin with
 * the file's name already (the core's messages do). */
static void in_context(const graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void in_context(const graph *g, const char *fmt, ...)
{
    char context[256], rest[SPK_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    const char *msg = spk_last_error();
    size_t n = strlen(g->file);
    if (strncmp(msg, g->file, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    snprintf(rest, sizeof rest, "%s", msg);
    spk_fail("%s: %s: %s", g->file, context, rest);
}

/* ---- nodes and attributes ---------------------------------------------------- */

static const Onnx__NodeProto *node_at(const graph *g, const value *v)
{
    return v && v->kind == V_NODE ? g->g->node[v->index] : NULL;
}

static const char *node_name(const Onnx__NodeProto *n)
{
    return n->name && *n->name ? n->name : (n->n_output && n->output[0][0] ? n->output[0] : "(unnamed)");
}

static const char *op_of(const Onnx__NodeProto *n)
{
    return n->op_type ? n->op_type : "";
}

static bool default_domain(const Onnx__NodeProto *n)
{
    return !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
}

static bool is_op(const Onnx__NodeProto *n, const char *op)
{
    return default_domain(n) && strcmp(op_of(n), op) == 0;
}

/* Input i, or NULL when absent or empty (an optional input left out). */
static const char *input_of(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && *n->input[i] ? n->input[i] : NULL;
}

/* A node's attribute, NULL when absent. A scan of many attributes costs node
 * visits (see step), so a node with a huge list cannot make the evaluation
 * quadratic. */
static const Onnx__AttributeProto *attr_of(graph *g, const Onnx__NodeProto *n, const char *name)
{
    g->steps += n->n_attribute / 8;
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static int attr_type_fail(graph *g, const Onnx__NodeProto *n, const char *name, const char *want)
{
    return spk_fail("%s: %s node '%s': attribute '%s' is not %s", g->file, op_of(n), node_name(n), name, want);
}

/* An INT attribute, `def` when absent. */
static int attr_int(graph *g, const Onnx__NodeProto *n, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = attr_of(g, n, name);
    *out = def;
    if (!a)
        return 0;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return attr_type_fail(g, n, name, "an integer");
    *out = a->i;
    return 0;
}

/* An INTS attribute into out (at most max): 1 if present, 0 if absent. */
static int attr_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, size_t max,
                     size_t *count)
{
    const Onnx__AttributeProto *a = attr_of(g, n, name);
    *count = 0;
    if (!a)
        return 0;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
        return attr_type_fail(g, n, name, "a list of integers");
    if (a->n_ints > max)
        return spk_fail("%s: %s node '%s': attribute '%s' has %zu entries, more than %zu", g->file, op_of(n),
                        node_name(n), name, a->n_ints, max);
    if (a->n_ints)
        memcpy(out, a->ints, a->n_ints * sizeof *out);
    *count = a->n_ints;
    return 1;
}

/* ---- budgets ------------------------------------------------------------------ */

static int step(graph *g, int depth, const char *name)
{
    if (++g->steps > MAX_EVAL_STEPS)
        return spk_fail("%s: following '%s' took more than %d node visits: the graph is too tangled to evaluate",
                        g->file, name, MAX_EVAL_STEPS);
    if (depth > MAX_EVAL_DEPTH)
        return spk_fail("%s: '%s' is computed through more than %d nodes, deeper than spk follows", g->file, name,
                        MAX_EVAL_DEPTH);
    return 0;
}

/* Accounts for a tensor folding is about to allocate. */
static int charge(graph *g, const spk_tensor *like, int ndim, const int64_t *dims, const char *name)
{
    uint64_t bytes = spk_dtype_size(like->dtype);
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(bytes, (uint64_t)dims[i], &bytes))
            bytes = UINT64_MAX;
    uint64_t limit = g->read_bytes > (UINT64_MAX - FOLD_SLACK) / FOLD_FACTOR ? UINT64_MAX
                                                                              : g->read_bytes * FOLD_FACTOR + FOLD_SLACK;
    if (bytes > limit || g->folded_bytes > limit - bytes)
        return spk_fail("%s: folding '%s' would allocate more than %d times the %" PRIu64
                        " bytes of constants it reads (plus %" PRIu64 " MiB): refused", g->file, name, FOLD_FACTOR,
                        g->read_bytes, FOLD_SLACK >> 20);
    g->folded_bytes += bytes;
    return 0;
}

/* ---- shapes -------------------------------------------------------------------- */

static int value_shape(graph *g, const char *name, shape *out, int depth);
static int eval_ints(graph *g, const char *name, ints *out, int depth);

static const Onnx__TensorProto *initializer(const graph *g, const value *v)
{
    return g->g->initializer[v->index];
}

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
            int id = symbol_id(g, d->dim_param);
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
static int resolve_reshape(graph *g, const char *name, const shape *in, const ints *target, bool allowzero,
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
                        shape_string(g, in, a, sizeof a), shape_string(g, out, b, sizeof b));
    }
    return 0;
}

/* Normalises an axis in [-rank, rank). */
static int axis_in(const graph *g, const Onnx__NodeProto *n, int64_t axis, int rank, int *out)
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
        if (eval_ints(g, in, &v, depth + 1))
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
    int rc = attr_ints(g, n, "axes", axes, SPK_MAX_DIMS, count);
    if (rc < 0)
        return -1;
    *given = rc == 1;
    return 0;
}

/* The shape after Unsqueeze (unsqueeze true) or Squeeze. */
static int squeeze_shape(graph *g, const Onnx__NodeProto *n, const shape *in, bool unsqueeze, shape *out, int depth)
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
            if (axis_in(g, n, axes[i], rank, &a))
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
        if (axis_in(g, n, axes[i], in->ndim, &a))
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
static int transpose_perm(graph *g, const Onnx__NodeProto *n, int rank, int *perm)
{
    int64_t p[SPK_MAX_DIMS];
    size_t count;
    int rc = attr_ints(g, n, "perm", p, SPK_MAX_DIMS, &count);
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
    if (attr_int(g, n, "layout", 0, &layout) || attr_int(g, n, "hidden_size", -1, &hidden))
        return -1;
    const Onnx__AttributeProto *dir = attr_of(g, n, "direction");
    int64_t directions = dir && dir->has_s && dir->s.len == 13 && memcmp(dir->s.data, "bidirectional", 13) == 0
                             ? 2 : 1;
    const char *x = input_of(n, 0);
    shape xs;
    if (!x || value_shape(g, x, &xs, depth + 1) || xs.ndim != 3) {
        /* unknown: the sizes stay symbols of this LSTM's input */
        const value *xv = x ? lookup(g, x) : NULL;
        int32_t base = xv ? (int32_t)((size_t)(xv - g->values) * SPK_MAX_DIMS) : (int32_t)((size_t)(v - g->values) * SPK_MAX_DIMS);
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
        if (!r || value_shape(g, r, &rs, depth + 1) || rs.ndim != 3)
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
        return value_shape(g, in, out, depth + 1);
    if (strcmp(op, "Transpose") == 0) {
        shape s;
        int perm[SPK_MAX_DIMS];
        if (value_shape(g, in, &s, depth + 1) || transpose_perm(g, n, s.ndim, perm))
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
        if (!to || value_shape(g, in, &s, depth + 1) || eval_ints(g, to, &target, depth + 1) ||
            attr_int(g, n, "allowzero", 0, &allowzero))
            return -1;
        return resolve_reshape(g, v->name, &s, &target, allowzero != 0, out);
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        shape s;
        if (value_shape(g, in, &s, depth + 1))
            return -1;
        return squeeze_shape(g, n, &s, op[0] == 'U', out, depth);
    }
    if (strcmp(op, "ConstantOfShape") == 0) {
        ints dims;
        if (eval_ints(g, in, &dims, depth + 1))
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

static int value_shape(graph *g, const char *name, shape *out, int depth)
{
    value *v = lookup(g, name);
    if (!v)
        return spk_fail("%s: no value named '%s' in the graph", g->file, name ? name : "");
    if (step(g, depth, name))
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

static int ints_fail(graph *g, const Onnx__NodeProto *n, const char *what)
{
    return spk_fail("%s: %s node '%s': %s", g->file, op_of(n), node_name(n), what);
}

static int const_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, int *count, int depth)
{
    ints v;
    if (eval_ints(g, name, &v, depth + 1))
        return -1;
    for (int i = 0; i < v.n; i++) {
        if (!sym_known(v.v[i]))
            return ints_fail(g, n, "a slice bound or index is not constant");
        out[i] = v.v[i].coef;
    }
    *count = v.n;
    return 0;
}

/* Slice parameters of a node: inputs 1-4 (opset 10) or attributes. */
typedef struct slice_params {
    int count;
    int64_t starts[MAX_INTS], ends[MAX_INTS], axes[MAX_INTS], steps[MAX_INTS];
} slice_params;

static int slice_params_of(graph *g, const Onnx__NodeProto *n, int rank, slice_params *p, int depth)
{
    int ns, ne, na = -1, nst = -1;
    if (input_of(n, 1)) {
        if (const_ints(g, n, input_of(n, 1), p->starts, &ns, depth) ||
            !input_of(n, 2) || const_ints(g, n, input_of(n, 2), p->ends, &ne, depth))
            return input_of(n, 2) ? -1 : ints_fail(g, n, "no ends");
        if (input_of(n, 3) && const_ints(g, n, input_of(n, 3), p->axes, &na, depth))
            return -1;
        if (input_of(n, 4) && const_ints(g, n, input_of(n, 4), p->steps, &nst, depth))
            return -1;
    } else {
        size_t c1, c2, c3;
        if (attr_ints(g, n, "starts", p->starts, MAX_INTS, &c1) < 0 ||
            attr_ints(g, n, "ends", p->ends, MAX_INTS, &c2) < 0)
            return -1;
        int rc = attr_ints(g, n, "axes", p->axes, MAX_INTS, &c3);
        if (rc < 0)
            return -1;
        ns = (int)c1;
        ne = (int)c2;
        na = rc ? (int)c3 : -1;
    }
    if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns) || ns > rank)
        return ints_fail(g, n, "starts, ends, axes and steps differ in length");
    p->count = ns;
    bool seen[SPK_MAX_DIMS] = {false};
    for (int i = 0; i < ns; i++) {
        int a;
        if (axis_in(g, n, na >= 0 ? p->axes[i] : i, rank, &a))
            return -1;
        if (seen[a])
            return ints_fail(g, n, "an axis is sliced twice");
        seen[a] = true;
        p->axes[i] = a;
        if (nst < 0)
            p->steps[i] = 1;
        if (p->steps[i] == 0 || p->steps[i] == INT64_MIN)
            return ints_fail(g, n, "a step is zero");
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
        return ints_fail(g, n, "operand lengths do not broadcast");
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
                ok = op == '+' ? !__builtin_add_overflow(x.coef, y.coef, &v) : !__builtin_sub_overflow(x.coef, y.coef, &v);
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
            return ints_fail(g, n, "integer arithmetic spk cannot follow (symbolic sizes, overflow or division by 0)");
        out->v[i] = r;
    }
    return 0;
}

static int eval_ints_node(graph *g, const value *v, const Onnx__NodeProto *n, ints *out, int depth)
{
    const char *op = op_of(n), *in = input_of(n, 0);
    if (!default_domain(n))
        return ints_fail(g, n, "an operator of another domain");
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
        return ints_fail(g, n, "not an integer constant spk reads");
    }
    if (!in)
        return ints_fail(g, n, "its input is missing");
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Cast") == 0)
        return eval_ints(g, in, out, depth + 1);
    if (strcmp(op, "Shape") == 0) {
        shape s;
        int64_t start, end;
        if (value_shape(g, in, &s, depth + 1) || attr_int(g, n, "start", 0, &start) ||
            attr_int(g, n, "end", INT64_MAX, &end))
            return -1;
        int64_t first, count;
        slice_range(s.ndim, start, end, 1, &first, &count);
        out->rank = 1;
        out->n = (int)count;
        memcpy(out->v, s.d + first, (size_t)count * sizeof *s.d);
        return 0;
    }
    ints a, b;
    if (strcmp(op, "Gather") == 0) {
        int64_t axis, idx[MAX_INTS];
        int count;
        ints indices;
        if (attr_int(g, n, "axis", 0, &axis) || eval_ints(g, in, &a, depth + 1))
            return -1;
        if (a.rank != 1 || (axis != 0 && axis != -1))
            return ints_fail(g, n, "gathers from something other than a vector");
        if (!input_of(n, 1) || eval_ints(g, input_of(n, 1), &indices, depth + 1) ||
            const_ints(g, n, input_of(n, 1), idx, &count, depth))
            return input_of(n, 1) ? -1 : ints_fail(g, n, "no indices");
        out->rank = indices.rank;
        out->n = count;
        for (int i = 0; i < count; i++) {
            int64_t k = idx[i] < 0 ? idx[i] + a.n : idx[i];
            if (k < 0 || k >= a.n)
                return ints_fail(g, n, "an index is out of range");
            out->v[i] = a.v[k];
        }
        return 0;
    }
    if (strcmp(op, "Slice") == 0) {
        slice_params p;
        if (eval_ints(g, in, &a, depth + 1))
            return -1;
        if (a.rank != 1)
            return ints_fail(g, n, "slices a scalar");
        if (slice_params_of(g, n, 1, &p, depth))
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
    if (strcmp(op, "Concat") == 0) {
        out->rank = 1;
        out->n = 0;
        for (size_t i = 0; i < n->n_input; i++) {
            if (!input_of(n, i))
                continue;
            if (eval_ints(g, input_of(n, i), &a, depth + 1))
                return -1;
            if (a.rank != 1 || out->n + a.n > MAX_INTS)
                return ints_fail(g, n, "concatenates something other than short vectors");
            memcpy(out->v + out->n, a.v, (size_t)a.n * sizeof *a.v);
            out->n += a.n;
        }
        return 0;
    }
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 || strcmp(op, "Reshape") == 0) {
        if (eval_ints(g, in, out, depth + 1))
            return -1;
        shape s = {out->rank, {sym_const(out->n)}}, r;
        if (op[0] == 'R') {
            ints target;
            if (!input_of(n, 1) || eval_ints(g, input_of(n, 1), &target, depth + 1))
                return input_of(n, 1) ? -1 : ints_fail(g, n, "no shape");
            if (resolve_reshape(g, v->name, &s, &target, false, &r))
                return -1;
        } else if (squeeze_shape(g, n, &s, op[0] == 'U', &r, depth)) {
            return -1;
        }
        if (r.ndim > 1 || (r.ndim == 0 && out->n != 1))
            return ints_fail(g, n, "makes an integer tensor of more than one dimension");
        out->rank = r.ndim;
        return 0;
    }
    char arith = strcmp(op, "Mul") == 0 ? '*' : strcmp(op, "Div") == 0 ? '/' : strcmp(op, "Add") == 0 ? '+'
                 : strcmp(op, "Sub") == 0 ? '-' : 0;
    if (arith) {
        if (!input_of(n, 1) || eval_ints(g, in, &a, depth + 1) || eval_ints(g, input_of(n, 1), &b, depth + 1))
            return input_of(n, 1) ? -1 : ints_fail(g, n, "an operand is missing");
        return ints_arith(g, n, arith, &a, &b, out);
    }
    return spk_fail("%s: '%s' comes from a %s node ('%s'), which spk does not evaluate", g->file, v->name, op,
                    node_name(n));
}

static int eval_ints(graph *g, const char *name, ints *out, int depth)
{
    value *v = lookup(g, name);
    if (!v)
        return spk_fail("%s: no value named '%s' in the graph", g->file, name ? name : "");
    if (step(g, depth, name))
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

/* ---- constant folding of weights ------------------------------------------------ */

static spk_tensor *fold(graph *g, const char *name, int depth);

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
    if (attr_int(g, n, "axis", 0, &axis))
        return NULL;
    const spk_tensor *parts[MAX_INTS];
    int count = 0;
    for (size_t i = 0; i < n->n_input; i++) {
        if (!input_of(n, i))
            continue;
        if (count == MAX_INTS)
            return ints_fail(g, n, "more inputs than spk folds"), NULL;
        parts[count] = fold(g, input_of(n, i), depth + 1);
        if (!parts[count])
            return NULL;
        count++;
    }
    if (count == 0)
        return ints_fail(g, n, "no inputs"), NULL;
    const spk_tensor *first = parts[0];
    int a;
    if (axis_in(g, n, axis, first->ndim, &a))
        return NULL;
    int64_t dims[SPK_MAX_DIMS];
    memcpy(dims, first->shape, sizeof dims);
    dims[a] = 0;
    spk_dtype dtype = first->dtype;
    for (int i = 0; i < count; i++) {
        const spk_tensor *p = parts[i];
        if (p->ndim != first->ndim)
            return ints_fail(g, n, "its inputs differ in rank"), NULL;
        for (int d = 0; d < p->ndim; d++)
            if (d != a && p->shape[d] != first->shape[d])
                return ints_fail(g, n, "its inputs differ in size off the concatenation axis"), NULL;
        if (p->dtype == SPK_F64)
            dtype = SPK_F64;
        if (__builtin_add_overflow(dims[a], p->shape[a], &dims[a]))
            return ints_fail(g, n, "its result is too large"), NULL;
    }
    spk_tensor like = {.dtype = dtype};
    if (charge(g, &like, first->ndim, dims, v->name))
        return NULL;
    spk_tensor *out = spk_tensor_new(dtype, first->ndim, dims);
    if (!out)
        return NULL;
    int64_t at = 0;
    for (int i = 0; i < count; i++) {
        spk_tensor *slot = spk_tensor_narrow(out, a, at, parts[i]->shape[a]);
        int rc = slot ? spk_tensor_copy(slot, parts[i]) : -1;
        spk_tensor_free(slot);
        if (rc) {
            spk_tensor_free(out);
            return NULL;
        }
        at += parts[i]->shape[a];
    }
    return out;
}

static spk_tensor *fold_slice(graph *g, const Onnx__NodeProto *n, const spk_tensor *t, int depth)
{
    slice_params p;
    if (slice_params_of(g, n, t->ndim, &p, depth))
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
    if (attr_int(g, n, "axis", 0, &axis))
        return NULL;
    int a;
    if (axis_in(g, n, axis, t->ndim, &a))
        return NULL;
    if (input_of(n, 1)) {
        if (const_ints(g, n, input_of(n, 1), sizes, &count, depth))
            return NULL;
    } else {
        size_t c;
        int rc = attr_ints(g, n, "split", sizes, MAX_INTS, &c);
        if (rc < 0)
            return NULL;
        count = (int)c;
    }
    int64_t at = 0, length;
    if (count) {
        if (count != (int)n->n_output)
            return ints_fail(g, n, "split sizes and outputs differ in number"), NULL;
        int64_t total = 0;
        for (int i = 0; i < count; i++) {
            if (sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total))
                return ints_fail(g, n, "a split size is negative"), NULL;
            if (i < v->slot)
                at += sizes[i];
        }
        if (total != t->shape[a])
            return ints_fail(g, n, "split sizes do not add up to the dimension"), NULL;
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

static spk_tensor *fold_node(graph *g, const value *v, const Onnx__NodeProto *n, int depth)
{
    const char *op = op_of(n), *in = input_of(n, 0);
    if (!default_domain(n))
        return ints_fail(g, n, "an operator of another domain"), NULL;
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
        return ints_fail(g, n, "not a floating-point constant"), NULL;
    }
    if (!in)
        return ints_fail(g, n, "its input is missing"), NULL;
    if (strcmp(op, "Concat") == 0)
        return fold_concat(g, v, n, depth);
    const spk_tensor *t = fold(g, in, depth + 1);
    if (!t)
        return NULL;
    if (strcmp(op, "Identity") == 0)
        return alias(t);
    if (strcmp(op, "Cast") == 0) {
        int64_t to;
        if (attr_int(g, n, "to", 0, &to))
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
    if (strcmp(op, "Transpose") == 0) {
        int perm[SPK_MAX_DIMS];
        if (transpose_perm(g, n, t->ndim, perm))
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
    if (strcmp(op, "Reshape") == 0 || strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 ||
        strcmp(op, "Flatten") == 0) {
        shape s = {t->ndim, {{0}}}, r;
        for (int i = 0; i < t->ndim; i++)
            s.d[i] = sym_const(t->shape[i]);
        if (op[0] == 'R') {
            ints target;
            int64_t allowzero;
            if (!input_of(n, 1))
                return ints_fail(g, n, "no shape"), NULL;
            if (eval_ints(g, input_of(n, 1), &target, depth + 1) || attr_int(g, n, "allowzero", 0, &allowzero) ||
                resolve_reshape(g, v->name, &s, &target, allowzero != 0, &r))
                return NULL;
        } else if (op[0] == 'F') {
            int64_t axis;
            int ax;
            if (attr_int(g, n, "axis", 1, &axis) || axis_in(g, n, axis, t->ndim + 1, &ax))
                return NULL;
            r.ndim = 2;
            r.d[0] = r.d[1] = sym_const(1);
            for (int i = 0; i < t->ndim; i++)
                r.d[i < ax ? 0 : 1].coef *= t->shape[i]; /* within numel: no overflow */
        } else if (squeeze_shape(g, n, &s, op[0] == 'U', &r, depth)) {
            return NULL;
        }
        int64_t dims[SPK_MAX_DIMS];
        for (int i = 0; i < r.ndim; i++) {
            if (!sym_known(r.d[i]))
                return ints_fail(g, n, "its shape is not constant"), NULL;
            dims[i] = r.d[i].coef;
        }
        return reshaped(g, t, r.ndim, dims, v->name);
    }
    return spk_fail_null("%s: '%s' comes from a %s node ('%s'), which spk does not fold into constants", g->file,
                         v->name, op, node_name(n));
}

static spk_tensor *fold(graph *g, const char *name, int depth)
{
    value *v = lookup(g, name);
    if (!v)
        return spk_fail_null("%s: no value named '%s' in the graph", g->file, name ? name : "");
    if (v->folded)
        return v->folded;
    if (step(g, depth, name))
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
static int is_zero(graph *g, const char *name, char *why, size_t size, int depth)
{
    value *v = lookup(g, name);
    if (!v)
        return spk_fail("%s: no value named '%s' in the graph", g->file, name);
    if (step(g, depth, name))
        return -1;
    if (v->kind == V_INPUT) {
        snprintf(why, size, "comes from the graph input '%s'", name);
        return 0;
    }
    if (v->kind == V_INIT) {
        const spk_tensor *t = fold(g, name, depth + 1);
        if (!t)
            return -1;
        if (!tensor_is_zero(t))
            snprintf(why, size, "is the initializer '%s', which is not all zeros", name);
        return tensor_is_zero(t);
    }
    const Onnx__NodeProto *n = node_at(g, v);
    const char *op = op_of(n), *in = input_of(n, 0);
    if (default_domain(n) && (strcmp(op, "ConstantOfShape") == 0 || strcmp(op, "Constant") == 0)) {
        const Onnx__AttributeProto *a = attr_of(g, n, "value");
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
            return is_zero(g, in, why, size, depth + 1);
    if (is_op(n, "Concat")) {
        for (size_t i = 0; i < n->n_input; i++) {
            int rc = input_of(n, i) ? is_zero(g, input_of(n, i), why, size, depth + 1) : 1;
            if (rc != 1)
                return rc;
        }
        return 1;
    }
    snprintf(why, size, "comes from %s node '%s', which spk does not evaluate", op, node_name(n));
    return 0;
}

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
        const value *v = lookup(g, name);
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
    if (value_shape(g, y, &ys, 0))
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
            if (transpose_perm(g, n, nax, perm))
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
            if (eval_ints(g, input_of(n, 1) ? input_of(n, 1) : "", &target, 1) ||
                attr_int(g, n, "allowzero", 0, &allowzero) ||
                resolve_reshape(g, n->output[0], &in, &target, allowzero != 0, &out)) {
                in_context(g, "layers %d to %d: the Reshape node '%s' between them", layer, layer + 1,
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

/* ---- what spk computes: the attributes and optional inputs of a layer -------------- */

static bool bytes_eq(ProtobufCBinaryData b, const char *s)
{
    size_t n = strlen(s);
    return b.len == n && strncasecmp((const char *)b.data, s, n) == 0;
}

static int check_layer(graph *g, layer_node *L, int layer)
{
    const Onnx__NodeProto *n = L->n;
    const char *who = node_name(n);
    static const char *const known[] = {"activation_alpha", "activation_beta", "activations", "clip",
                                        "direction", "hidden_size", "input_forget", "layout"};
    if (n->n_attribute > sizeof known / sizeof *known)
        return spk_fail("%s: layer %d (LSTM node '%s'): %zu attributes, more than LSTM has (names repeat)", g->file,
                        layer, who, n->n_attribute);
    for (size_t i = 0; i < n->n_attribute; i++) {
        const char *name = n->attribute[i]->name ? n->attribute[i]->name : "";
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof *known && !ok; k++)
            ok = strcmp(name, known[k]) == 0;
        if (!ok)
            return spk_fail("%s: layer %d (LSTM node '%s'): unknown attribute '%s'", g->file, layer, who, name);
    }
    const Onnx__AttributeProto *a = attr_of(g, n, "direction");
    if (!a || !bytes_eq(a->s, "bidirectional")) {
        char dir[32] = "forward";
        if (a)
            snprintf(dir, sizeof dir, "%.*s", (int)(a->s.len < 24 ? a->s.len : 24),
                     a->s.data ? (const char *)a->s.data : "");
        return spk_fail("%s: layer %d (LSTM node '%s'): direction is \"%s\"; spk's stacks are bidirectional", g->file,
                        layer, who, dir);
    }
    if ((a = attr_of(g, n, "activations"))) {
        static const char *const defaults[3] = {"Sigmoid", "Tanh", "Tanh"};
        bool ok = a->n_strings == 6;
        for (size_t i = 0; ok && i < 6; i++)
            ok = bytes_eq(a->strings[i], defaults[i % 3]);
        if (!ok) {
            char list[200] = "";
            size_t at = 0;
            for (size_t i = 0; i < a->n_strings && i < 8 && at < sizeof list; i++)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%.*s", i ? ", " : "",
                                       (int)(a->strings[i].len < 16 ? a->strings[i].len : 16),
                                       a->strings[i].data ? (const char *)a->strings[i].data : "");
            return spk_fail("%s: layer %d (LSTM node '%s'): activations are [%s]; spk computes the defaults (Sigmoid, "
                            "Tanh, Tanh for each direction)", g->file, layer, who, list);
        }
    }
    if ((a = attr_of(g, n, "clip")))
        return spk_fail("%s: layer %d (LSTM node '%s'): clip = %g; spk does not clip the cell's inputs", g->file,
                        layer, who, a->f);
    int64_t v;
    if (attr_int(g, n, "input_forget", 0, &v))
        return -1;
    if (v != 0)
        return spk_fail("%s: layer %d (LSTM node '%s'): input_forget = %" PRId64 "; spk computes input_forget = 0",
                        g->file, layer, who, v);
    if (attr_int(g, n, "layout", 0, &L->layout))
        return -1;
    if (L->layout != 0 && L->layout != 1)
        return spk_fail("%s: layer %d (LSTM node '%s'): layout = %" PRId64 ", expected 0 or 1", g->file, layer, who,
                        L->layout);
    if (input_of(n, 4))
        return spk_fail("%s: layer %d (LSTM node '%s'): sequence_lens ('%s') is given; spk runs every sequence "
                        "for all steps", g->file, layer, who, input_of(n, 4));
    static const char *const states[3] = {"initial_h", "initial_c", "P (peepholes)"};
    for (int i = 0; i < 3; i++) {
        const char *in = input_of(n, (size_t)(5 + i));
        if (!in)
            continue;
        char why[300] = "";
        int rc = is_zero(g, in, why, sizeof why, 0);
        if (rc < 0) {
            in_context(g, "layer %d (LSTM node '%s'): %s", layer, who, states[i]);
            return -1;
        }
        if (rc == 0)
            return spk_fail("%s: layer %d (LSTM node '%s'): %s ('%s') %s; spk computes %s", g->file, layer, who,
                            states[i], in, why, i < 2 ? "from zero initial states" : "without peepholes");
    }
    return 0;
}

/* W, R and B of a layer as owned contiguous tensors. */
static int layer_weights(graph *g, layer_node *L, int layer, spk_lstm_weights *out)
{
    static const char *const parts[3] = {"W", "R", "B"};
    spk_tensor *t[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        const char *in = input_of(L->n, (size_t)(1 + i));
        if (!in) {
            if (i < 2)
                return spk_fail("%s: layer %d (LSTM node '%s'): input %s is missing", g->file, layer,
                                node_name(L->n), parts[i]);
            continue;
        }
        const spk_tensor *f = fold(g, in, 0);
        if (!f) {
            in_context(g, "layer %d (LSTM node '%s'): %s ('%s')", layer, node_name(L->n), parts[i], in);
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
    if (attr_int(g, L->n, "hidden_size", -1, &hidden))
        goto fail;
    if (hidden != -1 && (t[1]->ndim != 3 || t[1]->shape[2] != hidden)) {
        char got[64];
        spk_fail("%s: layer %d (LSTM node '%s'): hidden_size = %" PRId64 " but R has shape %s", g->file, layer,
                 node_name(L->n), hidden, spk_shape_string(t[1], got, sizeof got));
        goto fail;
    }
    *out = (spk_lstm_weights){t[0], t[1], t[2]};
    return 0;
fail:
    for (int i = 0; i < 3; i++)
        spk_tensor_free(t[i]);
    return -1;
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
    for (k = 0; k < n; k++)
        if (check_layer(g, &list[order[k]], k + 1))
            goto done;
    for (k = 1; k < n; k++)
        if (check_link(g, list, order[k], k))
            goto done;
    for (k = 0; k < n; k++) {
        if (layer_weights(g, &list[order[k]], k + 1, &out[k])) {
            for (int j = 0; j < k; j++)
                spk_lstm_weights_free(&out[j]);
            goto done;
        }
    }
    spk_lstm_layer view[SPK_LSTM_ONNX_MAX_LAYERS];
    for (k = 0; k < n; k++)
        view[k] = (spk_lstm_layer){out[k].W, out[k].R, out[k].B};
    if (spk_lstm_validate(view, n, NULL)) {
        in_context(g, "the stack");
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

/* ---- writing ------------------------------------------------------------------------ */

/* Everything a written model points to, freed together. */
typedef struct arena {
    void **blocks;
    size_t count, cap;
} arena;

static void *arena_alloc(arena *a, size_t size)
{
    if (a->count == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        void **grown = realloc(a->blocks, cap * sizeof *grown);
        if (!grown)
            return NULL;
        a->blocks = grown;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p)
        a->blocks[a->count++] = p;
    return p;
}

static char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *arena_printf(arena *a, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(a, strlen(buf) + 1);
    if (s)
        strcpy(s, buf);
    return s;
}

static void arena_free(arena *a)
{
    for (size_t i = 0; i < a->count; i++)
        free(a->blocks[i]);
    free(a->blocks);
}

static Onnx__TensorProto *weight_proto(arena *a, const char *name, const spk_tensor *t, spk_dtype dtype)
{
    Onnx__TensorProto *p = arena_alloc(a, sizeof *p);
    int64_t *dims = arena_alloc(a, (size_t)t->ndim * sizeof *dims);
    spk_tensor *c = spk_tensor_to_dtype(t, dtype); /* a contiguous copy */
    if (!p || !dims || !c) {
        spk_tensor_free(c);
        return NULL;
    }
    size_t bytes = (size_t)spk_tensor_numel(c) * spk_dtype_size(dtype);
    uint8_t *data = arena_alloc(a, bytes);
    if (!data) {
        spk_tensor_free(c);
        return NULL;
    }
    memcpy(data, spk_tensor_data(c), bytes);
    spk_tensor_free(c);
    onnx__tensor_proto__init(p);
    memcpy(dims, t->shape, (size_t)t->ndim * sizeof *dims);
    p->n_dims = (size_t)t->ndim;
    p->dims = dims;
    p->has_data_type = 1;
    p->data_type = dtype == SPK_F64 ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    p->name = (char *)name;
    p->has_raw_data = 1;
    p->raw_data = (ProtobufCBinaryData){bytes, data};
    return p;
}

static Onnx__AttributeProto *ints_attr(arena *a, const char *name, const int64_t *v, size_t n)
{
    Onnx__AttributeProto *p = arena_alloc(a, sizeof *p);
    int64_t *copy = arena_alloc(a, n * sizeof *copy);
    if (!p || !copy)
        return NULL;
    onnx__attribute_proto__init(p);
    memcpy(copy, v, n * sizeof *copy);
    p->name = (char *)name;
    p->has_type = 1;
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    p->n_ints = n;
    p->ints = copy;
    return p;
}

static Onnx__AttributeProto *int_attr(arena *a, const char *name, int64_t v)
{
    Onnx__AttributeProto *p = arena_alloc(a, sizeof *p);
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = (char *)name;
    p->has_type = 1;
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    p->has_i = 1;
    p->i = v;
    return p;
}

static Onnx__AttributeProto *string_attr(arena *a, const char *name, const char *s)
{
    Onnx__AttributeProto *p = arena_alloc(a, sizeof *p);
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = (char *)name;
    p->has_type = 1;
    p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    p->has_s = 1;
    p->s = (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
    return p;
}

/* A node with up to 4 inputs (NULL-terminated), one output, up to 2 attributes. */
static Onnx__NodeProto *make_node(arena *a, const char *op, const char *name, const char *const *inputs,
                                  const char *output, Onnx__AttributeProto *a1, Onnx__AttributeProto *a2)
{
    Onnx__NodeProto *n = arena_alloc(a, sizeof *n);
    char **in = arena_alloc(a, 4 * sizeof *in), **out = arena_alloc(a, sizeof *out);
    Onnx__AttributeProto **attrs = arena_alloc(a, 2 * sizeof *attrs);
    if (!n || !in || !out || !attrs || !output)
        return NULL;
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    n->name = (char *)name;
    for (n->n_input = 0; n->n_input < 4 && inputs[n->n_input]; n->n_input++)
        in[n->n_input] = (char *)inputs[n->n_input];
    n->input = in;
    out[0] = (char *)output;
    n->n_output = 1;
    n->output = out;
    if (a1)
        attrs[n->n_attribute++] = a1;
    if (a2)
        attrs[n->n_attribute++] = a2;
    n->attribute = attrs;
    return n;
}

/* A tensor type [d0, d1, d2] where a NULL name means the size in dims[i]. */
static Onnx__ValueInfoProto *value_info(arena *a, const char *name, int32_t elem, const char *const *params,
                                        const int64_t *dims)
{
    Onnx__ValueInfoProto *v = arena_alloc(a, sizeof *v);
    Onnx__TypeProto *type = arena_alloc(a, sizeof *type);
    Onnx__TypeProto__Tensor *tensor = arena_alloc(a, sizeof *tensor);
    Onnx__TensorShapeProto *shape = arena_alloc(a, sizeof *shape);
    Onnx__TensorShapeProto__Dimension **d = arena_alloc(a, 3 * sizeof *d);
    if (!v || !type || !tensor || !shape || !d)
        return NULL;
    for (int i = 0; i < 3; i++) {
        d[i] = arena_alloc(a, sizeof **d);
        if (!d[i])
            return NULL;
        onnx__tensor_shape_proto__dimension__init(d[i]);
        if (params[i]) {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[i]->dim_param = (char *)params[i];
        } else {
            d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[i]->dim_value = dims[i];
        }
    }
    onnx__tensor_shape_proto__init(shape);
    shape->n_dim = 3;
    shape->dim = d;
    onnx__type_proto__tensor__init(tensor);
    tensor->has_elem_type = 1;
    tensor->elem_type = elem;
    tensor->shape = shape;
    onnx__type_proto__init(type);
    type->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    type->tensor_type = tensor;
    onnx__value_info_proto__init(v);
    v->name = (char *)name;
    v->type = type;
    return v;
}

int spk_lstm_save_onnx(const char *path, const spk_lstm_layer *layers, int count)
{
    spk_lstm_dims dims;
    if (count > SPK_LSTM_ONNX_MAX_LAYERS)
        return spk_fail("%s: %d layers, more than %d", path, count, SPK_LSTM_ONNX_MAX_LAYERS);
    if (spk_lstm_validate(layers, count, &dims))
        return -1;
    static const char *const part_names[3] = {"W", "R", "B"};
    spk_dtype dtype = layers[0].W->dtype;
    for (int k = 0; k < count; k++) {
        const spk_tensor *parts[3] = {layers[k].W, layers[k].R, layers[k].B};
        for (int i = 0; i < 3; i++)
            if (parts[i]->dtype != dtype)
                return spk_fail("%s: layer %d: %s is %s but layer 1's W is %s; an ONNX LSTM stack has one element "
                                "type (convert the layers with :to(\"%s\"))", path, k + 1, part_names[i],
                                spk_dtype_name(parts[i]->dtype), spk_dtype_name(dtype), spk_dtype_name(dtype));
    }
    int32_t elem = dtype == SPK_F64 ? ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    arena a = {0};
    int rc = -1;
    size_t nnodes = 2 + 3 * (size_t)count, ninit = 1 + 3 * (size_t)count;
    Onnx__NodeProto **nodes = arena_alloc(&a, nnodes * sizeof *nodes);
    Onnx__TensorProto **inits = arena_alloc(&a, ninit * sizeof *inits);
    if (!nodes || !inits)
        goto oom;
    /* the [0, 0, -1] of every Reshape: [T, B, 2, H] -> [T, B, 2H] */
    {
        Onnx__TensorProto *p = arena_alloc(&a, sizeof *p);
        int64_t *shape_dims = arena_alloc(&a, sizeof *shape_dims), *vals = arena_alloc(&a, 3 * sizeof *vals);
        if (!p || !shape_dims || !vals)
            goto oom;
        onnx__tensor_proto__init(p);
        shape_dims[0] = 3;
        vals[0] = vals[1] = 0;
        vals[2] = -1;
        p->n_dims = 1;
        p->dims = shape_dims;
        p->has_data_type = 1;
        p->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
        p->n_int64_data = 3;
        p->int64_data = vals;
        p->name = "merge_directions";
        inits[0] = p;
    }
    static const int64_t to_steps_first[3] = {1, 0, 2}, directions_inward[4] = {0, 2, 1, 3};
    size_t nn = 0;
    const char *prev = "x_steps_first";
    nodes[nn++] = make_node(&a, "Transpose", "to_steps_first", (const char *[]){"x", NULL}, prev,
                            ints_attr(&a, "perm", to_steps_first, 3), NULL);
    for (int k = 0; k < count; k++) {
        static const char *const parts[3] = {"W", "R", "B"};
        const spk_tensor *t[3] = {layers[k].W, layers[k].R, layers[k].B};
        const char *names[3];
        for (int i = 0; i < 3; i++) {
            names[i] = arena_printf(&a, "l%d_%s", k, parts[i]);
            if (!names[i] || !(inits[1 + 3 * k + i] = weight_proto(&a, names[i], t[i], dtype)))
                goto oom;
        }
        const char *y = arena_printf(&a, "l%d_Y", k), *yt = arena_printf(&a, "l%d_Y_tbdh", k);
        const char *out = arena_printf(&a, "l%d_out", k);
        nodes[nn++] = make_node(&a, "LSTM", arena_printf(&a, "lstm_%d", k),
                                (const char *[]){prev, names[0], names[1], names[2]}, y,
                                string_attr(&a, "direction", "bidirectional"), int_attr(&a, "hidden_size", dims.hidden));
        nodes[nn++] = make_node(&a, "Transpose", arena_printf(&a, "l%d_directions_inward", k),
                                (const char *[]){y, NULL}, yt, ints_attr(&a, "perm", directions_inward, 4), NULL);
        nodes[nn++] = make_node(&a, "Reshape", arena_printf(&a, "l%d_merge_directions", k),
                                (const char *[]){yt, "merge_directions", NULL}, out, NULL, NULL);
        prev = out;
    }
    nodes[nn++] = make_node(&a, "Transpose", "to_batch_first", (const char *[]){prev, NULL}, "y",
                            ints_attr(&a, "perm", to_steps_first, 3), NULL);
    for (size_t i = 0; i < nn; i++)
        if (!nodes[i])
            goto oom;
    Onnx__ValueInfoProto *in = value_info(&a, "x", elem, (const char *[]){"batch", "steps", NULL},
                                          (const int64_t[]){0, 0, dims.input});
    Onnx__ValueInfoProto *outv = value_info(&a, "y", elem, (const char *[]){"batch", "steps", NULL},
                                            (const int64_t[]){0, 0, 2 * dims.hidden});
    Onnx__GraphProto *graph = arena_alloc(&a, sizeof *graph);
    Onnx__OperatorSetIdProto *opset = arena_alloc(&a, sizeof *opset);
    Onnx__OperatorSetIdProto **opsets = arena_alloc(&a, sizeof *opsets);
    if (!in || !outv || !graph || !opset || !opsets)
        goto oom;
    onnx__graph_proto__init(graph);
    graph->name = "spk_lstm_stack";
    graph->n_node = nn;
    graph->node = nodes;
    graph->n_initializer = ninit;
    graph->initializer = inits;
    graph->n_input = 1;
    graph->input = &in;
    graph->n_output = 1;
    graph->output = &outv;
    onnx__operator_set_id_proto__init(opset);
    opset->domain = "";
    opset->has_version = 1;
    opset->version = 14;
    opsets[0] = opset;
    Onnx__ModelProto model;
    onnx__model_proto__init(&model);
    model.has_ir_version = 1;
    model.ir_version = 8;
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.producer_name = "spk";
    model.producer_version = SPK_VERSION;
    model.graph = graph;
    rc = spk_onnx_save(path, &model);
    arena_free(&a);
    return rc;
oom:
    arena_free(&a);
    return spk_fail("%s: out of memory building the model", path);
}
