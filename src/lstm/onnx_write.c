/* Writing an LSTM stack as an ONNX model (see lstm/onnx_stack.h). */
#include "lstm/onnx_stack.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/version.h"

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

/* An attribute of `type` named `name`, its value still to be set. */
static Onnx__AttributeProto *new_attr(arena *a, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *p = arena_alloc(a, sizeof *p);
    if (!p)
        return NULL;
    onnx__attribute_proto__init(p);
    p->name = (char *)name;
    p->has_type = 1;
    p->type = type;
    return p;
}

static Onnx__AttributeProto *ints_attr(arena *a, const char *name, const int64_t *v, size_t n)
{
    Onnx__AttributeProto *p = new_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = arena_alloc(a, n * sizeof *copy);
    if (!p || !copy)
        return NULL;
    memcpy(copy, v, n * sizeof *copy);
    p->n_ints = n;
    p->ints = copy;
    return p;
}

static Onnx__AttributeProto *int_attr(arena *a, const char *name, int64_t v)
{
    Onnx__AttributeProto *p = new_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!p)
        return NULL;
    p->has_i = 1;
    p->i = v;
    return p;
}

static Onnx__AttributeProto *string_attr(arena *a, const char *name, const char *s)
{
    Onnx__AttributeProto *p = new_attr(a, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!p)
        return NULL;
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
