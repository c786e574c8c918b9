/* The evaluator behind lstm/onnx_stack.h, shared by its units: a name index
 * of a model's main graph (onnx_graph.c), shapes and integer vectors with
 * symbolic sizes (onnx_shapes.c), constant folding of weights and proofs that
 * a value is zero (onnx_fold.c), ONNX's rules for every node (onnx_rules.c),
 * one LSTM node's checks and weights (onnx_layer.c). The chain of LSTM nodes
 * is in onnx_stack.c, the writer in onnx_write.c. Internal to
 * src/lstm: only the ONNX units include it. */
#ifndef SPK_LSTM_ONNX_GRAPH_H
#define SPK_LSTM_ONNX_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/onnx.h"
#include "core/tensor.h"
#include "lstm/lstm.h"

#define MAX_INTS 64           /* entries of a shape or index vector the evaluator follows */
#define MAX_SYMS 4            /* symbolic sizes in one product */

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

static inline sym sym_const(int64_t v)
{
    return (sym){v, 0, {0}};
}

static inline bool sym_known(sym a)
{
    return a.n == 0;
}

static inline bool sym_eq(sym a, sym b)
{
    if (a.coef != b.coef || a.n != b.n)
        return false;
    for (int i = 0; i < a.n; i++)
        if (a.s[i] != b.s[i])
            return false;
    return true;
}

/* 0 or -1 (too many symbols or an overflow; no message: callers say what). */
static inline int sym_mul(sym a, sym b, sym *out)
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
static inline int sym_div(sym a, sym b, sym *out)
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
enum { V_INIT = 1, V_INPUT, V_NODE };

typedef struct value {
    const char *name;
    int kind;
    int index; /* initializer, graph input or node */
    int slot;  /* output slot of a node */
    const Onnx__TypeProto *type;
    spk_tensor *folded; /* memo of graph_fold() */
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

/* ---- nodes ------------------------------------------------------------------- */

static inline const Onnx__NodeProto *node_at(const graph *g, const value *v)
{
    return v && v->kind == V_NODE ? g->g->node[v->index] : NULL;
}

static inline const char *node_name(const Onnx__NodeProto *n)
{
    return n->name && *n->name ? n->name : (n->n_output && n->output[0][0] ? n->output[0] : "(unnamed)");
}

static inline const char *op_of(const Onnx__NodeProto *n)
{
    return n->op_type ? n->op_type : "";
}

static inline bool default_domain(const Onnx__NodeProto *n)
{
    return !n->domain || !*n->domain || strcmp(n->domain, "ai.onnx") == 0;
}

static inline bool is_op(const Onnx__NodeProto *n, const char *op)
{
    return default_domain(n) && strcmp(op_of(n), op) == 0;
}

/* Input i, or NULL when absent or empty (an optional input left out). */
static inline const char *input_of(const Onnx__NodeProto *n, size_t i)
{
    return i < n->n_input && n->input[i] && *n->input[i] ? n->input[i] : NULL;
}

static inline const Onnx__TensorProto *initializer(const graph *g, const value *v)
{
    return g->g->initializer[v->index];
}

/* Slice parameters of a node: inputs 1-4 (opset 10) or attributes. */
typedef struct slice_params {
    int count;
    int64_t starts[MAX_INTS], ends[MAX_INTS], axes[MAX_INTS], steps[MAX_INTS];
} slice_params;

/* ---- the graph (onnx_graph.c) ---------------------------------------------------- */

/* Indexes model's main graph; graph_free releases it (also after a failure). */
int graph_init(graph *g, spk_onnx_model *model);
void graph_free(graph *g);
/* The value of that name, NULL when none. */
value *graph_lookup(graph *g, const char *name);
/* The id of a dim_param name, interned on first sight; -1 on an error. */
int graph_symbol_id(graph *g, const char *name);
/* "[589, 2*batch, ?]" into buf. */
const char *graph_shape_string(const graph *g, const shape *s, char *buf, size_t size);
/* A node's attribute, NULL when absent; an INT attribute (def when absent);
 * an INTS attribute into out, at most max (1 if present, 0 if absent). */
const Onnx__AttributeProto *graph_attr(graph *g, const Onnx__NodeProto *n, const char *name);
int graph_attr_int(graph *g, const Onnx__NodeProto *n, const char *name, int64_t def, int64_t *out);
int graph_attr_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, size_t max,
                    size_t *count);
/* ONNX's rules for every node of the main graph (onnx_rules.c): attributes
 * named once each, holding one value of their type; for the operators spk
 * evaluates, inputs, outputs and attributes as the operator's schema at the
 * model's opset has them; every initializer's values in one field. */
int graph_check_rules(graph *g);
/* Counts a node visit against the model's budget and depth limit. */
int graph_step(graph *g, int depth, const char *name);
/* The value of that name, its visit counted (graph_step); NULL and a message
 * when there is none or the budget is spent. */
value *graph_visit(graph *g, const char *name, int depth);
/* Puts "file: context: " before the current message, which may begin with
 * the file's name already (the core's messages do). */
void graph_in_context(const graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "file: Op node 'name': what" as the error; -1. */
int graph_node_fail(graph *g, const Onnx__NodeProto *n, const char *what);

/* ---- shapes and integer vectors (onnx_shapes.c) ---------------------------------- */

int graph_value_shape(graph *g, const char *name, shape *out, int depth);
int graph_eval_ints(graph *g, const char *name, ints *out, int depth);
/* Integers that must be constant (slice bounds, indices, split sizes). */
int graph_const_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, int *count, int depth);
int graph_resolve_reshape(graph *g, const char *name, const shape *in, const ints *target, bool allowzero,
                          shape *out);
int graph_axis_in(const graph *g, const Onnx__NodeProto *n, int64_t axis, int rank, int *out);
int graph_squeeze_shape(graph *g, const Onnx__NodeProto *n, const shape *in, bool unsqueeze, shape *out, int depth);
int graph_transpose_perm(graph *g, const Onnx__NodeProto *n, int rank, int *perm);
int graph_slice_params(graph *g, const Onnx__NodeProto *n, int rank, slice_params *p, int depth);
/* A value's ONNX element type (TensorProto.DataType), as its producers give
 * it (initializers, Constant, Cast, the nodes that keep their input's type),
 * else as the graph declares it; 0 when not known, -1 on an error. */
int graph_elem_type(graph *g, const char *name, int depth);

/* ---- constants (onnx_fold.c) ------------------------------------------------------ */

/* The value folded into a tensor the graph owns (memoised); NULL on an error. */
spk_tensor *graph_fold(graph *g, const char *name, int depth);
/* 1 when the value is provably all zeros, 0 when not or not provably (why
 * says where it comes from), -1 on an error. */
int graph_is_zero(graph *g, const char *name, char *why, size_t size, int depth);

/* ---- one LSTM node (onnx_layer.c) -------------------------------------------------- */

/* Checks that layer `layer` (from 1, for messages) follows ONNX's LSTM rules
 * beyond its schema and is what spk computes; its layout into *layout. */
int graph_check_lstm(graph *g, const Onnx__NodeProto *n, int layer, int64_t *layout);
/* The layer's W, R and B as owned contiguous tensors (no B: zeros), with
 * hidden_size and the states' shapes checked against R. */
int graph_lstm_weights(graph *g, const Onnx__NodeProto *n, int layer, spk_lstm_weights *out);

#endif
