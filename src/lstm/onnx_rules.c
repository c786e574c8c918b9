/* ONNX's own rules for the nodes of a model's main graph, as onnx.checker
 * has them (lstm/onnx_graph.h): every node's attributes named, each at most
 * once, each holding one value of its declared type; and, for the operators
 * spk evaluates, the operator's schema at the model's opset: how many inputs
 * and outputs, which inputs may not be empty, which attributes exist and of
 * what type. A model that breaks them is refused before spk reads a value,
 * with the node and the rule named: runtimes differ on such files (a
 * repeated attribute is the first copy in one, the last in another), so
 * there is no one function such a model computes. */
#include "lstm/onnx_graph.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define ANY INT32_MAX  /* no upper bound: variadic inputs or outputs */
#define LATEST INT32_MAX

enum {
    A_FLOAT = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT,
    A_INT = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT,
    A_STRING = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING,
    A_TENSOR = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR,
    A_SPARSE = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR,
    A_FLOATS = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS,
    A_INTS = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS,
    A_STRINGS = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS,
};

typedef struct attr_rule {
    const char *name;
    int type;
} attr_rule;

/* One version of an operator's schema, for opsets since..until. */
typedef struct op_rule {
    const char *op;
    int since, until;
    int min_in, max_in;
    int single; /* the first `single` inputs are required: not empty */
    int min_out, max_out;
    attr_rule attrs[9];
    const char *required; /* an attribute the node must have, NULL for none */
} op_rule;

#define LSTM_ATTRS                                                                                             \
    {"activation_alpha", A_FLOATS}, {"activation_beta", A_FLOATS}, {"activations", A_STRINGS}, {"clip", A_FLOAT}, \
        {"direction", A_STRING}, {"hidden_size", A_INT}, {"input_forget", A_INT}
#define ARITH(op)                                                                                         \
    {op, 1, 6, 2, 2, 2, 1, 1, {{"axis", A_INT}, {"broadcast", A_INT}, {"consumed_inputs", A_INTS}}, NULL}, \
        {op, 7, LATEST, 2, 2, 2, 1, 1, {{0}}, NULL}

/* The operators spk evaluates (between layers, in weights, in zero states),
 * from ONNX's operator documents (onnx/defs). */
static const op_rule rules[] = {
    {"LSTM", 1, 6, 3, 8, 3, 0, 3, {LSTM_ATTRS, {"output_sequence", A_INT}}, NULL},
    {"LSTM", 7, 13, 3, 8, 3, 0, 3, {LSTM_ATTRS}, NULL},
    {"LSTM", 14, LATEST, 3, 8, 3, 0, 3, {LSTM_ATTRS, {"layout", A_INT}}, NULL},
    {"Transpose", 1, LATEST, 1, 1, 1, 1, 1, {{"perm", A_INTS}}, NULL},
    {"Reshape", 1, 4, 1, 1, 1, 1, 1, {{"shape", A_INTS}, {"consumed_inputs", A_INTS}}, NULL},
    {"Reshape", 5, 13, 2, 2, 2, 1, 1, {{0}}, NULL},
    {"Reshape", 14, LATEST, 2, 2, 2, 1, 1, {{"allowzero", A_INT}}, NULL},
    {"Identity", 1, LATEST, 1, 1, 1, 1, 1, {{0}}, NULL},
    {"Dropout", 1, 6, 1, 1, 1, 1, 2, {{"is_test", A_INT}, {"ratio", A_FLOAT}, {"consumed_inputs", A_INTS}}, NULL},
    {"Dropout", 7, 11, 1, 1, 1, 1, 2, {{"ratio", A_FLOAT}}, NULL},
    {"Dropout", 12, LATEST, 1, 3, 1, 1, 2, {{"seed", A_INT}}, NULL},
    {"Constant", 1, LATEST, 0, 0, 0, 1, 1,
     {{"value", A_TENSOR}, {"sparse_value", A_SPARSE}, {"value_float", A_FLOAT}, {"value_floats", A_FLOATS},
      {"value_int", A_INT}, {"value_ints", A_INTS}, {"value_string", A_STRING}, {"value_strings", A_STRINGS}}, NULL},
    {"ConstantOfShape", 9, LATEST, 1, 1, 1, 1, 1, {{"value", A_TENSOR}}, NULL},
    {"Cast", 1, 5, 1, 1, 1, 1, 1, {{"to", A_STRING}}, "to"},
    {"Cast", 6, 18, 1, 1, 1, 1, 1, {{"to", A_INT}}, "to"},
    {"Cast", 19, LATEST, 1, 1, 1, 1, 1, {{"to", A_INT}, {"saturate", A_INT}, {"round_mode", A_STRING}}, "to"},
    {"Slice", 1, 9, 1, 1, 1, 1, 1, {{"starts", A_INTS}, {"ends", A_INTS}, {"axes", A_INTS}}, NULL},
    {"Slice", 10, LATEST, 3, 5, 3, 1, 1, {{0}}, NULL},
    /* axis is required from opset 4; before, it defaulted to 1, a default spk does not take either */
    {"Concat", 1, LATEST, 1, ANY, 0, 1, 1, {{"axis", A_INT}}, "axis"},
    {"Split", 1, 1, 1, 2, 1, 1, ANY, {{"axis", A_INT}, {"split", A_INTS}}, NULL},
    {"Split", 2, 12, 1, 1, 1, 1, ANY, {{"axis", A_INT}, {"split", A_INTS}}, NULL},
    {"Split", 13, 17, 1, 2, 1, 1, ANY, {{"axis", A_INT}}, NULL},
    {"Split", 18, LATEST, 1, 2, 1, 1, ANY, {{"axis", A_INT}, {"num_outputs", A_INT}}, NULL},
    {"Squeeze", 1, 12, 1, 1, 1, 1, 1, {{"axes", A_INTS}}, NULL},
    {"Squeeze", 13, LATEST, 1, 2, 1, 1, 1, {{0}}, NULL},
    {"Unsqueeze", 1, 12, 1, 1, 1, 1, 1, {{"axes", A_INTS}}, NULL},
    {"Unsqueeze", 13, LATEST, 2, 2, 2, 1, 1, {{0}}, NULL},
    {"Flatten", 1, LATEST, 1, 1, 1, 1, 1, {{"axis", A_INT}}, NULL},
    {"Shape", 1, 14, 1, 1, 1, 1, 1, {{0}}, NULL},
    {"Shape", 15, LATEST, 1, 1, 1, 1, 1, {{"start", A_INT}, {"end", A_INT}}, NULL},
    {"Gather", 1, LATEST, 2, 2, 2, 1, 1, {{"axis", A_INT}}, NULL},
    {"Expand", 8, LATEST, 2, 2, 2, 1, 1, {{0}}, NULL},
    {"Tile", 1, 5, 3, 3, 3, 1, 1, {{0}}, NULL},
    {"Tile", 6, LATEST, 2, 2, 2, 1, 1, {{0}}, NULL},
    ARITH("Add"),
    ARITH("Sub"),
    ARITH("Mul"),
    ARITH("Div"),
};

static const char *attr_type_name(int type)
{
    switch (type) {
    case A_FLOAT: return "a FLOAT";
    case A_INT: return "an INT";
    case A_STRING: return "a STRING";
    case A_TENSOR: return "a TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "a GRAPH";
    case A_SPARSE: return "a SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "a TYPE_PROTO";
    case A_FLOATS: return "FLOATS";
    case A_INTS: return "INTS";
    case A_STRINGS: return "STRINGS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS: return "TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS: return "GRAPHS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "of no type";
    }
}

/* The version of the default domain the model imports, LATEST when none. */
static int default_opset(const graph *g)
{
    const Onnx__ModelProto *m = spk_onnx_proto(g->model);
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version)
            return o->version < 1 ? 1 : o->version > INT32_MAX - 1 ? LATEST : (int)o->version;
    }
    return LATEST;
}

static int rule_fail(const graph *g, const Onnx__NodeProto *n, const char *what, const char *rule)
{
    return spk_fail("%s: %s node '%s': %s; %s", g->file, op_of(n), node_name(n), what, rule);
}

/* The value fields an attribute holds: one, of its declared type. */
static int check_attribute_value(const graph *g, const Onnx__NodeProto *n, const Onnx__AttributeProto *a,
                                 bool typed)
{
    const struct {
        bool used;
        int type;
    } fields[] = {{a->has_f, A_FLOAT},
                  {a->has_i, A_INT},
                  {a->has_s, A_STRING},
                  {a->t != NULL, A_TENSOR},
                  {a->g != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH},
                  {a->sparse_tensor != NULL, A_SPARSE},
                  {a->tp != NULL, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO},
                  {a->n_floats > 0, A_FLOATS},
                  {a->n_ints > 0, A_INTS},
                  {a->n_strings > 0, A_STRINGS},
                  {a->n_tensors > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS},
                  {a->n_graphs > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS},
                  {a->n_sparse_tensors > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS},
                  {a->n_type_protos > 0, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS}};
    int used = 0, first = 0, second = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        if (!fields[i].used)
            continue;
        if (used == 0)
            first = fields[i].type;
        else if (used == 1)
            second = fields[i].type;
        used++;
    }
    char what[200];
    if (used > 1) {
        snprintf(what, sizeof what, "attribute '%s' holds both %s and %s value", a->name, attr_type_name(first),
                 attr_type_name(second));
        return rule_fail(g, n, what, "ONNX gives an attribute one value");
    }
    if (typed && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) {
        snprintf(what, sizeof what, "attribute '%s' has no type", a->name);
        return rule_fail(g, n, what, "ONNX (IR version 2 and later) requires one");
    }
    if (used == 1 && typed && first != (int)a->type) {
        snprintf(what, sizeof what, "attribute '%s' is declared %s but holds %s value", a->name,
                 attr_type_name((int)a->type), attr_type_name(first));
        return rule_fail(g, n, what, "ONNX requires the type to name the value held");
    }
    return 0;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every attribute named, no name twice (sorted, so a node of many
 * attributes costs n log n), each attribute's value well-formed. */
static int check_attributes(const graph *g, const Onnx__NodeProto *n, bool typed)
{
    if (n->n_attribute == 0)
        return 0;
    const char **names = malloc(n->n_attribute * sizeof *names); /* bounded by the file's size */
    if (!names)
        return spk_fail("out of memory");
    int rc = 0;
    for (size_t i = 0; i < n->n_attribute && rc == 0; i++) {
        const Onnx__AttributeProto *a = n->attribute[i];
        names[i] = a->name ? a->name : "";
        if (!*names[i])
            rc = rule_fail(g, n, "an attribute has no name", "ONNX requires every attribute to be named");
        else if (a->ref_attr_name && *a->ref_attr_name)
            rc = rule_fail(g, n, "an attribute refers to a function's attribute (ref_attr_name)",
                           "ONNX allows that only inside a function");
        else
            rc = check_attribute_value(g, n, a, typed);
    }
    if (rc == 0) {
        qsort(names, n->n_attribute, sizeof *names, compare_names);
        for (size_t i = 1; i < n->n_attribute && rc == 0; i++) {
            if (strcmp(names[i], names[i - 1]) != 0)
                continue;
            char what[160];
            snprintf(what, sizeof what, "attribute '%.64s' is given more than once", names[i]);
            rc = rule_fail(g, n, what, "ONNX allows an attribute once in a node (runtimes differ on which copy "
                                       "they take)");
        }
    }
    free(names);
    return rc;
}

static const op_rule *rule_of(const Onnx__NodeProto *n, int opset, bool *known_op)
{
    *known_op = false;
    if (!default_domain(n))
        return NULL;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        if (strcmp(rules[i].op, op_of(n)) != 0)
            continue;
        *known_op = true;
        if (rules[i].since <= opset && opset <= rules[i].until)
            return &rules[i];
    }
    return NULL;
}

static void range_words(int lo, int hi, const char *unit, char *buf, size_t size)
{
    if (lo == hi)
        snprintf(buf, size, "%d %s%s", lo, unit, lo == 1 ? "" : "s");
    else if (hi == ANY)
        snprintf(buf, size, "%d or more %ss", lo, unit);
    else
        snprintf(buf, size, "%d to %d %ss", lo, hi, unit);
}

/* The node against its operator's schema at the model's opset. */
static int check_schema(const graph *g, const Onnx__NodeProto *n, const op_rule *r)
{
    char what[200], rule[200], range[48], at[48];
    if (r->until == LATEST)
        snprintf(at, sizeof at, "opset %d and later", r->since);
    else
        snprintf(at, sizeof at, "opsets %d to %d", r->since, r->until);
    if ((int64_t)n->n_input < r->min_in || (int64_t)n->n_input > r->max_in) {
        range_words(r->min_in, r->max_in, "input", range, sizeof range);
        snprintf(what, sizeof what, "%zu inputs", n->n_input);
        snprintf(rule, sizeof rule, "%s (%s) takes %s", r->op, at, range);
        return rule_fail(g, n, what, rule);
    }
    if ((int64_t)n->n_output < r->min_out || (int64_t)n->n_output > r->max_out) {
        range_words(r->min_out, r->max_out, "output", range, sizeof range);
        snprintf(what, sizeof what, "%zu outputs", n->n_output);
        snprintf(rule, sizeof rule, "%s (%s) gives %s", r->op, at, range);
        return rule_fail(g, n, what, rule);
    }
    for (int i = 0; i < r->single && (size_t)i < n->n_input; i++) {
        if (input_of(n, (size_t)i))
            continue;
        snprintf(what, sizeof what, "input %d is empty (\"\")", i);
        snprintf(rule, sizeof rule, "%s requires input %d (an empty name marks an optional input left out)", r->op,
                 i);
        return rule_fail(g, n, what, rule);
    }
    bool has_required = !r->required;
    for (size_t k = 0; k < n->n_attribute && !has_required; k++)
        has_required = strcmp(n->attribute[k]->name, r->required) == 0;
    if (!has_required) {
        snprintf(what, sizeof what, "attribute '%s' is missing", r->required);
        snprintf(rule, sizeof rule, "%s (%s) requires it", r->op, at);
        return rule_fail(g, n, what, rule);
    }
    for (size_t k = 0; k < n->n_attribute; k++) {
        const Onnx__AttributeProto *a = n->attribute[k];
        const attr_rule *found = NULL;
        for (size_t j = 0; j < sizeof r->attrs / sizeof *r->attrs && r->attrs[j].name && !found; j++)
            if (strcmp(r->attrs[j].name, a->name) == 0)
                found = &r->attrs[j];
        if (!found) {
            size_t len = (size_t)snprintf(rule, sizeof rule, "%s (%s) has ", r->op, at);
            for (size_t j = 0; j < sizeof r->attrs / sizeof *r->attrs && r->attrs[j].name && len < sizeof rule; j++)
                len += (size_t)snprintf(rule + len, sizeof rule - len, "%s%s", j ? ", " : "", r->attrs[j].name);
            if (!r->attrs[0].name && len < sizeof rule)
                snprintf(rule + len, sizeof rule - len, "no attributes");
            snprintf(what, sizeof what, "unknown attribute '%.64s'", a->name);
            return rule_fail(g, n, what, rule);
        }
        if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED && (int)a->type != found->type) {
            snprintf(what, sizeof what, "attribute '%s' is %s", a->name, attr_type_name((int)a->type));
            snprintf(rule, sizeof rule, "%s's %s is %s", r->op, found->name, attr_type_name(found->type));
            return rule_fail(g, n, what, rule);
        }
    }
    return 0;
}

/* An operator spk evaluates, at an opset none of its versions covers. */
static int check_unknown_version(const graph *g, const Onnx__NodeProto *n, int opset)
{
    char what[96];
    snprintf(what, sizeof what, "the model imports opset %d", opset);
    return rule_fail(g, n, what, "ONNX defines no version of this operator there");
}

int graph_check_rules(graph *g)
{
    const Onnx__ModelProto *m = spk_onnx_proto(g->model);
    const Onnx__GraphProto *gp = g->g;
    bool typed = !m->has_ir_version || m->ir_version >= 2;
    int opset = default_opset(g);
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (spk_onnx_tensor_check(g->model, gp->initializer[i]))
            return -1;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || !*n->op_type)
            return spk_fail("%s: node '%s' has no op_type; ONNX requires one", g->file, node_name(n));
        if (check_attributes(g, n, typed))
            return -1;
        for (size_t k = 0; k < n->n_attribute; k++)
            if (n->attribute[k]->t && spk_onnx_tensor_check(g->model, n->attribute[k]->t))
                return -1;
        bool known_op;
        const op_rule *r = rule_of(n, opset, &known_op);
        if (r ? check_schema(g, n, r) : known_op ? check_unknown_version(g, n, opset) : 0)
            return -1;
    }
    return 0;
}
