/* The name index of an ONNX model's main graph (lstm/onnx_graph.h): values by
 * name, dim_param symbols, node attributes and the evaluation budget. */
#include "lstm/onnx_graph.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

#define MAX_EVAL_DEPTH 64     /* nodes between an LSTM input and the initializers it comes from */
#define MAX_EVAL_STEPS 200000 /* node visits per model */

/* ---- the graph's names ----------------------------------------------------- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

value *graph_lookup(graph *g, const char *name)
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
    value *v = info ? graph_lookup(g, info->name) : NULL;
    if (v && info->type && !v->type)
        v->type = info->type;
}

int graph_init(graph *g, spk_onnx_model *model)
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
    return graph_check_rules(g);
}

void graph_free(graph *g)
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
int graph_symbol_id(graph *g, const char *name)
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

static const char *graph_symbol_name(const graph *g, int32_t id)
{
    return id >= 1 && id <= g->nsymbols ? g->symbols[id - 1] : "?";
}

/* "589", "2*batch", "?" into buf. */
static const char *graph_sym_string(const graph *g, sym a, char *buf, size_t size)
{
    size_t n = 0;
    if (a.coef != 1 || a.n == 0)
        n += (size_t)snprintf(buf, size, "%" PRId64 "%s", a.coef, a.n ? "*" : "");
    for (int i = 0; i < a.n && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "*" : "", graph_symbol_name(g, a.s[i]));
    return buf;
}

const char *graph_shape_string(const graph *g, const shape *s, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < s->ndim && n < size; i++) {
        char one[64];
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", graph_sym_string(g, s->d[i], one, sizeof one));
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* Puts "file: context: " before the current message, which may begin with
 * the file's name already (the core's messages do). */
void graph_in_context(const graph *g, const char *fmt, ...)
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

/* A node's attribute, NULL when absent. A scan of many attributes costs node
 * visits (see step), so a node with a huge list cannot make the evaluation
 * quadratic. */
const Onnx__AttributeProto *graph_attr(graph *g, const Onnx__NodeProto *n, const char *name)
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
int graph_attr_int(graph *g, const Onnx__NodeProto *n, const char *name, int64_t def, int64_t *out)
{
    const Onnx__AttributeProto *a = graph_attr(g, n, name);
    *out = def;
    if (!a)
        return 0;
    if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return attr_type_fail(g, n, name, "an integer");
    *out = a->i;
    return 0;
}

/* An INTS attribute into out (at most max): 1 if present, 0 if absent. */
int graph_attr_ints(graph *g, const Onnx__NodeProto *n, const char *name, int64_t *out, size_t max,
                     size_t *count)
{
    const Onnx__AttributeProto *a = graph_attr(g, n, name);
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

value *graph_visit(graph *g, const char *name, int depth)
{
    value *v = graph_lookup(g, name);
    if (!v)
        return spk_fail_null("%s: no value named '%s' in the graph", g->file, name ? name : "");
    return graph_step(g, depth, name) ? NULL : v;
}

int graph_step(graph *g, int depth, const char *name)
{
    if (++g->steps > MAX_EVAL_STEPS)
        return spk_fail("%s: following '%s' took more than %d node visits: the graph is too tangled to evaluate",
                        g->file, name, MAX_EVAL_STEPS);
    if (depth > MAX_EVAL_DEPTH)
        return spk_fail("%s: '%s' is computed through more than %d nodes, deeper than spk follows", g->file, name,
                        MAX_EVAL_DEPTH);
    return 0;
}

