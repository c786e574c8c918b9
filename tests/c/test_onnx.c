/* The ONNX reader (core/onnx.h) and the LSTM-stack reader and writer
 * (lstm/onnx_stack.h) on crafted files: wire-format checks before unpacking
 * (truncation, nesting, wire types, lengths, duplicated messages), the
 * unpack budget, tensor values (raw, typed, FLOAT16, external data and its
 * lies), and save -> load round trips. The differential checks against an
 * independent evaluation of the graphs are in tests/spec/onnx_spec.lua. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/onnx.h"
#include "lstm/onnx_stack.h"

static char dir[256];

static char *path_in_dir(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* ---- a protobuf writer for malformed files ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
    if (n == 0)
        return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void key(buf *b, unsigned field, unsigned wire)
{
    varint(b, (uint64_t)field << 3 | wire);
}

/* field: length-delimited `inner` */
static void submessage(buf *b, unsigned field, const buf *inner)
{
    key(b, field, 2);
    varint(b, inner->n);
    put(b, inner->p, inner->n);
}

/* ---- helpers ---- */

static spk_lstm_weights stack1[4];

static int random_stack(int layers, int64_t input, int64_t hidden, spk_dtype dtype, spk_lstm_layer *view)
{
    if (spk_lstm_random(layers, input, hidden, 7, 1.0, dtype, stack1))
        return -1;
    for (int k = 0; k < layers; k++)
        view[k] = (spk_lstm_layer){stack1[k].W, stack1[k].R, stack1[k].B};
    return 0;
}

static void free_stack(spk_lstm_weights *w, int count)
{
    for (int k = 0; k < count; k++)
        spk_lstm_weights_free(&w[k]);
}

static bool same(const spk_tensor *a, const spk_tensor *b)
{
    if (!spk_tensor_same_shape(a, b) || a->dtype != b->dtype)
        return false;
    for (int64_t i = 0; i < spk_tensor_numel(a); i++)
        if (spk_tensor_flat_get(a, i) != spk_tensor_flat_get(b, i))
            return false;
    return true;
}

static uint8_t *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    *size = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

static int parse_stack(const void *bytes, size_t size, spk_lstm_weights *out, int *count)
{
    spk_onnx_model *m = spk_onnx_parse(bytes, size, "crafted.onnx", NULL);
    *count = 0;
    if (!m)
        return -1;
    int rc = spk_lstm_from_onnx(m, out, 4, count);
    spk_onnx_free(m);
    return rc;
}

/* ---- save and load ---- */

TEST(save_load_round_trip)
{
    spk_lstm_layer view[3];
    CHECK(random_stack(3, 4, 3, SPK_F32, view) == 0);
    char *path = path_in_dir("stack.onnx");
    CHECK(spk_lstm_save_onnx(path, view, 3) == 0);
    spk_lstm_weights back[4];
    int count = 0;
    CHECK(spk_lstm_load_onnx(path, back, 4, &count) == 0);
    CHECK(count == 3);
    for (int k = 0; k < count && k < 3; k++) {
        CHECK(same(back[k].W, view[k].W));
        CHECK(same(back[k].R, view[k].R));
        CHECK(same(back[k].B, view[k].B));
    }
    free_stack(back, count);
    free_stack(stack1, 3);
}

TEST(save_load_f64)
{
    spk_lstm_layer view[2];
    CHECK(random_stack(2, 3, 2, SPK_F64, view) == 0);
    char *path = path_in_dir("stack64.onnx");
    CHECK(spk_lstm_save_onnx(path, view, 2) == 0);
    spk_lstm_weights back[4];
    int count = 0;
    CHECK(spk_lstm_load_onnx(path, back, 4, &count) == 0);
    CHECK(count == 2);
    CHECK(count == 2 && back[0].W->dtype == SPK_F64 && same(back[1].R, view[1].R));
    free_stack(back, count);
    free_stack(stack1, 2);
}

TEST(save_refuses_mixed_dtypes)
{
    spk_lstm_layer view[2];
    CHECK(random_stack(2, 3, 2, SPK_F32, view) == 0);
    spk_tensor *b64 = spk_tensor_to_dtype(view[1].B, SPK_F64);
    view[1].B = b64;
    CHECK(spk_lstm_save_onnx(path_in_dir("mixed.onnx"), view, 2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: B is f64 but layer 1's W is f32");
    spk_tensor_free(b64);
    free_stack(stack1, 2);
}

/* Every prefix of a saved model is refused with a message, or (where the cut
 * falls between top-level fields) reads as a valid message: then it loads
 * the same stack or fails with a message. Never a crash or a leak. */
TEST(every_truncation)
{
    spk_lstm_layer view[1];
    CHECK(random_stack(1, 2, 1, SPK_F32, view) == 0);
    char *path = path_in_dir("small.onnx");
    CHECK(spk_lstm_save_onnx(path, view, 1) == 0);
    size_t size = 0;
    uint8_t *bytes = read_all(path, &size);
    CHECK(bytes && size > 100);
    int refused = 0, loaded = 0;
    for (size_t n = 0; bytes && n < size; n++) {
        spk_lstm_weights back[4];
        int count;
        spk_clear_error();
        if (parse_stack(bytes, n, back, &count) == 0) {
            loaded++;
            CHECK(count == 1 && same(back[0].W, view[0].W) && same(back[0].B, view[0].B));
            free_stack(back, count);
        } else {
            refused++;
            CHECK(strstr(spk_last_error(), "crafted.onnx") != NULL);
        }
    }
    CHECK(refused > (int)size / 2);
    free(bytes);
    free_stack(stack1, 1);
}

TEST(truncated_file_names_the_byte)
{
    spk_lstm_layer view[1];
    CHECK(random_stack(1, 2, 1, SPK_F32, view) == 0);
    char *path = path_in_dir("cut.onnx");
    CHECK(spk_lstm_save_onnx(path, view, 1) == 0);
    CHECK(truncate(path, 60) == 0);
    spk_lstm_weights back[4];
    int count;
    CHECK(spk_lstm_load_onnx(path, back, 4, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), path);
    CHECK_STR_CONTAINS(spk_last_error(), "not a valid ONNX file: byte");
    free_stack(stack1, 1);
}

/* ---- the wire checks ---- */

static void check_refused(const buf *b, const char *problem)
{
    spk_onnx_model *m = spk_onnx_parse(b->p, b->n, "crafted.onnx", NULL);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "crafted.onnx");
    CHECK_STR_CONTAINS(spk_last_error(), problem);
    spk_onnx_free(m);
}

TEST(nesting_beyond_the_limit)
{
    /* graph(7) -> node(1) -> attribute(5) -> g(6) -> node -> ... */
    buf inner = {0};
    for (int level = 0; level < 60; level++) {
        buf attr = {0}, node = {0}, graph = {0};
        if (inner.n)
            submessage(&attr, 6, &inner); /* AttributeProto.g */
        submessage(&node, 5, &attr);      /* NodeProto.attribute */
        submessage(&graph, 1, &node);     /* GraphProto.node */
        free(inner.p);
        free(attr.p);
        free(node.p);
        inner = graph;
    }
    buf model = {0};
    submessage(&model, 7, &inner);
    check_refused(&model, "messages nested more than 100 deep");
    free(inner.p);
    free(model.p);
}

TEST(singular_message_given_twice)
{
    buf graph = {0}, model = {0};
    submessage(&model, 7, &graph);
    submessage(&model, 7, &graph);
    check_refused(&model, "field 'graph' of onnx.ModelProto: given twice");
    free(model.p);
}

TEST(wire_type_mismatch)
{
    buf model = {0};
    key(&model, 7, 0); /* graph as a varint */
    varint(&model, 5);
    check_refused(&model, "field 'graph' of onnx.ModelProto: varint value, expected length-delimited");
    free(model.p);
}

TEST(length_past_the_end)
{
    buf model = {0};
    key(&model, 7, 2);
    varint(&model, 1000);
    put(&model, "abc", 3);
    check_refused(&model, "claims 1000 bytes, 3 remain in the message");
    free(model.p);
}

TEST(length_past_the_parent)
{
    /* a node claiming more bytes than its graph holds */
    buf graph = {0}, model = {0};
    key(&graph, 1, 2);
    varint(&graph, 10);
    put(&graph, "0123456789", 10);
    graph.n -= 4; /* the graph's length stops inside the node */
    submessage(&model, 7, &graph);
    put(&model, "6789", 4);
    check_refused(&model, "claims 10 bytes, 6 remain");
    free(graph.p);
    free(model.p);
}

TEST(groups_and_bad_keys)
{
    buf model = {0};
    key(&model, 200, 3); /* a field number the schema lacks */
    check_refused(&model, "wire type 3 (groups are not used by ONNX)");
    free(model.p);
    buf zero = {0};
    key(&zero, 0, 0);
    varint(&zero, 1);
    check_refused(&zero, "field number 0");
    free(zero.p);
    buf varint_long = {0};
    key(&varint_long, 1, 0);
    put(&varint_long, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    check_refused(&varint_long, "truncated or malformed varint");
    free(varint_long.p);
}

TEST(packed_values_must_be_whole)
{
    /* TensorProto.float_data (4, packed floats) with 6 bytes, in an initializer */
    buf tensor = {0}, graph = {0}, model = {0};
    key(&tensor, 4, 2);
    varint(&tensor, 6);
    put(&tensor, "abcdef", 6);
    submessage(&graph, 5, &tensor);
    submessage(&model, 7, &graph);
    check_refused(&model, "packed values of 4 bytes in 6 bytes");
    free(tensor.p);
    free(graph.p);
    free(model.p);
}

TEST(no_graph)
{
    buf model = {0};
    key(&model, 1, 0);
    varint(&model, 8); /* ir_version only */
    check_refused(&model, "not an ONNX model: it has no graph");
    free(model.p);
}

TEST(unpack_budget)
{
    /* half a million empty nodes: 2 bytes each on the wire, about 150 bytes
     * each unpacked, more than 32 times the file */
    buf graph = {0}, model = {0};
    for (int i = 0; i < 500000; i++)
        put(&graph, "\x0a\x00", 2);
    submessage(&model, 7, &graph);
    check_refused(&model, "would take more than");
    free(graph.p);
    free(model.p);
}

TEST(unknown_fields_are_skipped)
{
    spk_lstm_layer view[1];
    CHECK(random_stack(1, 2, 1, SPK_F32, view) == 0);
    char *path = path_in_dir("extra.onnx");
    CHECK(spk_lstm_save_onnx(path, view, 1) == 0);
    size_t size;
    uint8_t *bytes = read_all(path, &size);
    buf b = {0};
    put(&b, bytes, size);
    key(&b, 99, 0); /* a field this schema lacks, as newer ONNX versions add */
    varint(&b, 12345);
    key(&b, 98, 2);
    varint(&b, 3);
    put(&b, "xyz", 3);
    spk_lstm_weights back[4];
    int count;
    CHECK(parse_stack(b.p, b.n, back, &count) == 0);
    CHECK(count == 1 && same(back[0].R, view[0].R));
    free_stack(back, count);
    free(bytes);
    free(b.p);
    free_stack(stack1, 1);
}

TEST(not_a_regular_file)
{
    spk_lstm_weights back[4];
    int count;
    CHECK(spk_lstm_load_onnx(dir, back, 4, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "not a regular file");
    char *fifo = path_in_dir("fifo.onnx");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(spk_lstm_load_onnx(fifo, back, 4, &count) == -1); /* returns at once: no writer needed */
    CHECK_STR_CONTAINS(spk_last_error(), "not a regular file");
    CHECK(spk_lstm_load_onnx(path_in_dir("absent.onnx"), back, 4, &count) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "cannot open: No such file or directory");
}

/* ---- tensor values ---- */

/* A model whose graph holds one initializer `t`, parsed with `ext`. */
static spk_onnx_model *model_with(Onnx__TensorProto *t, const spk_onnx_external *ext)
{
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.n_initializer = 1;
    g.initializer = &t;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.graph = &g;
    size_t n = onnx__model_proto__get_packed_size(&m);
    uint8_t *bytes = malloc(n);
    onnx__model_proto__pack(&m, bytes);
    spk_onnx_model *model = spk_onnx_parse(bytes, n, "t.onnx", ext);
    free(bytes);
    return model;
}

static const Onnx__TensorProto *first_initializer(const spk_onnx_model *m)
{
    return spk_onnx_proto(m)->graph->initializer[0];
}

static void init_tensor(Onnx__TensorProto *t, int32_t type, int64_t *dims, size_t ndim)
{
    onnx__tensor_proto__init(t);
    t->name = "w";
    t->has_data_type = 1;
    t->data_type = type;
    t->n_dims = ndim;
    t->dims = dims;
}

TEST(float_raw_and_typed)
{
    int64_t dims[2] = {2, 3};
    float values[6] = {1, -2, 3.5f, 0, 1e-30f, -7};
    Onnx__TensorProto t;
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, 2);
    t.has_raw_data = 1;
    t.raw_data = (ProtobufCBinaryData){sizeof values, (uint8_t *)values};
    spk_onnx_model *m = model_with(&t, NULL);
    CHECK(m != NULL);
    spk_tensor *v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v && v->dtype == SPK_F32 && v->ndim == 2 && v->shape[1] == 3);
    for (int i = 0; v && i < 6; i++)
        CHECK(spk_tensor_flat_get(v, i) == (double)values[i]);
    spk_tensor_free(v);
    spk_onnx_free(m);

    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, 2);
    t.n_float_data = 6;
    t.float_data = values;
    m = model_with(&t, NULL);
    v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v && spk_tensor_flat_get(v, 4) == (double)1e-30f);
    spk_tensor_free(v);
    spk_onnx_free(m);
}

TEST(float16_exact)
{
    int64_t dims[1] = {6};
    /* 1, -2, 65504, 2^-24 (smallest subnormal), 2^-14 (smallest normal), inf */
    uint16_t halves[6] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x7C00};
    const double want[6] = {1, -2, 65504, ldexp(1, -24), ldexp(1, -14), INFINITY};
    Onnx__TensorProto t;
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, dims, 1);
    t.has_raw_data = 1;
    t.raw_data = (ProtobufCBinaryData){sizeof halves, (uint8_t *)halves};
    spk_onnx_model *m = model_with(&t, NULL);
    spk_tensor *v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v && v->dtype == SPK_F32);
    for (int i = 0; v && i < 6; i++)
        CHECK(spk_tensor_flat_get(v, i) == want[i]);
    spk_tensor_free(v);
    spk_onnx_free(m);
    /* the same values in int32_data */
    int32_t widened[6];
    for (int i = 0; i < 6; i++)
        widened[i] = halves[i];
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, dims, 1);
    t.n_int32_data = 6;
    t.int32_data = widened;
    m = model_with(&t, NULL);
    v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    for (int i = 0; v && i < 6; i++)
        CHECK(spk_tensor_flat_get(v, i) == want[i]);
    spk_tensor_free(v);
    spk_onnx_free(m);
}

static void check_value_refused(Onnx__TensorProto *t, const spk_onnx_external *ext, const char *problem)
{
    spk_onnx_model *m = model_with(t, ext);
    CHECK(m != NULL);
    spk_tensor *v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "tensor 'w'");
    CHECK_STR_CONTAINS(spk_last_error(), problem);
    spk_tensor_free(v);
    spk_onnx_free(m);
}

TEST(lying_tensors)
{
    float values[4] = {1, 2, 3, 4};
    Onnx__TensorProto t;
    int64_t more[2] = {2, 3};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, more, 2);
    t.has_raw_data = 1;
    t.raw_data = (ProtobufCBinaryData){sizeof values, (uint8_t *)values};
    check_value_refused(&t, NULL, "its shape needs 24 bytes, raw_data holds 16");
    /* a shape of 2^80 elements over 16 bytes: refused before any allocation */
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, huge, 2);
    t.has_raw_data = 1;
    t.raw_data = (ProtobufCBinaryData){sizeof values, (uint8_t *)values};
    check_value_refused(&t, NULL, "more elements than memory can");
    int64_t big[2] = {(int64_t)1 << 30, 4};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, big, 2);
    t.n_float_data = 4;
    t.float_data = values;
    check_value_refused(&t, NULL, "its shape needs 4294967296 values, the tensor holds 4");
    int64_t negative[1] = {-4};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, negative, 1);
    check_value_refused(&t, NULL, "dimension 0 is -4, negative");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, nine, 9);
    check_value_refused(&t, NULL, "has 9 dimensions, more than 8");
    int64_t four[1] = {4};
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, four, 1);
    check_value_refused(&t, NULL, "data type BFLOAT16");
}

/* External data from memory: one file "w.bin". */
typedef struct memory_file {
    const uint8_t *data;
    uint64_t size;
} memory_file;

static int mem_size(void *ctx, const char *location, uint64_t *size)
{
    if (strcmp(location, "w.bin") != 0)
        return spk_fail("%s: cannot open: No such file or directory", location);
    *size = ((memory_file *)ctx)->size;
    return 0;
}

static int mem_read(void *ctx, const char *location, uint64_t offset, void *dst, size_t n)
{
    memory_file *f = ctx;
    if (strcmp(location, "w.bin") != 0 || offset > f->size || n > f->size - offset)
        return spk_fail("%s: read past the end", location);
    memcpy(dst, f->data + offset, n);
    return 0;
}

static void set_external(Onnx__TensorProto *t, Onnx__StringStringEntryProto *entries,
                         Onnx__StringStringEntryProto **list, const char *location, const char *offset,
                         const char *length)
{
    size_t n = 0;
    const char *keys[3] = {"location", "offset", "length"}, *values[3] = {location, offset, length};
    for (int i = 0; i < 3; i++) {
        if (!values[i])
            continue;
        onnx__string_string_entry_proto__init(&entries[n]);
        entries[n].key = (char *)keys[i];
        entries[n].value = (char *)values[i];
        list[n] = &entries[n];
        n++;
    }
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    t->n_external_data = n;
    t->external_data = list;
}

TEST(external_data)
{
    double file[8];
    for (int i = 0; i < 8; i++)
        file[i] = i * 0.5;
    memory_file mf = {(const uint8_t *)file, sizeof file};
    spk_onnx_external ext = {mem_size, mem_read, &mf};
    int64_t dims[1] = {3};
    Onnx__TensorProto t;
    Onnx__StringStringEntryProto entries[3], *list[3];
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, dims, 1);
    set_external(&t, entries, list, "w.bin", "16", "24");
    spk_onnx_model *m = model_with(&t, &ext);
    spk_tensor *v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v && v->dtype == SPK_F64 && spk_tensor_flat_get(v, 0) == 1.0 && spk_tensor_flat_get(v, 2) == 2.0);
    spk_tensor_free(v);
    spk_onnx_free(m);
    /* without a length: the rest of the file from the offset must match */
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, dims, 1);
    set_external(&t, entries, list, "w.bin", "40", NULL);
    m = model_with(&t, &ext);
    v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    CHECK(v && spk_tensor_flat_get(v, 2) == 3.5);
    spk_tensor_free(v);
    spk_onnx_free(m);

    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, dims, 1);
    set_external(&t, entries, list, "w.bin", "48", "24");
    check_value_refused(&t, &ext, "external data claims 24 bytes at offset 48 of 'w.bin', which holds 64");
    set_external(&t, entries, list, "w.bin", "65", NULL);
    check_value_refused(&t, &ext, "external data offset 65 is past the end of 'w.bin' (64 bytes)");
    set_external(&t, entries, list, "w.bin", "0", "16");
    check_value_refused(&t, &ext, "its shape needs 24 bytes, its external data holds 16");
    set_external(&t, entries, list, "w.bin", "1e3", NULL);
    check_value_refused(&t, &ext, "external_data 'offset' is '1e3', not a byte count");
    set_external(&t, entries, list, "missing.bin", NULL, NULL);
    check_value_refused(&t, &ext, "external data file 'missing.bin': missing.bin: cannot open");
    set_external(&t, entries, list, "/etc/passwd", NULL, NULL);
    check_value_refused(&t, &ext, "is absolute");
    set_external(&t, entries, list, "a/../../w.bin", NULL, NULL);
    check_value_refused(&t, &ext, "leaves the model's folder");
    set_external(&t, entries, list, NULL, "0", NULL);
    check_value_refused(&t, &ext, "external data without a location");
    set_external(&t, entries, list, "w.bin", NULL, NULL);
    check_value_refused(&t, NULL, "not available here");
}

TEST(integer_tensors)
{
    int64_t dims[1] = {3}, values[3] = {0, 0, -1};
    Onnx__TensorProto t;
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, dims, 1);
    t.n_int64_data = 3;
    t.int64_data = values;
    spk_onnx_model *m = model_with(&t, NULL);
    int64_t out[4], shape[SPK_MAX_DIMS];
    size_t count = 0;
    int ndim = -1;
    CHECK(m && spk_onnx_tensor_ints(m, first_initializer(m), out, 4, &count, shape, &ndim) == 0);
    CHECK(count == 3 && ndim == 1 && out[2] == -1);
    CHECK(m && spk_onnx_tensor_ints(m, first_initializer(m), out, 2, &count, shape, &ndim) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "holds 3 integers; spk follows shapes and indices of at most 2");
    spk_onnx_free(m);
}

/* ---- external data on disk, behind symbolic links ---- */

/* Writes `name` (in dir) as a model of one DOUBLE [3] initializer whose data
 * is the first 24 bytes of the external file `location`. */
static void write_external_model(const char *name, const char *location)
{
    int64_t dims[1] = {3};
    Onnx__TensorProto t, *tp = &t;
    Onnx__StringStringEntryProto entries[3], *list[3];
    init_tensor(&t, ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, dims, 1);
    set_external(&t, entries, list, location, "0", "24");
    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    g.n_initializer = 1;
    g.initializer = &tp;
    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.graph = &g;
    CHECK(spk_onnx_save(path_in_dir(name), &m) == 0);
}

static void write_doubles(const char *name, double first)
{
    double v[3] = {first, first + 1, first + 2};
    FILE *f = fopen(path_in_dir(name), "wb");
    CHECK(f && fwrite(v, sizeof v, 1, f) == 1);
    if (f)
        fclose(f);
}

/* The first value of the model's initializer, NAN (and the message) if refused. */
static double external_value(const char *model)
{
    spk_onnx_model *m = spk_onnx_load(path_in_dir(model));
    spk_tensor *v = m ? spk_onnx_tensor_values(m, first_initializer(m)) : NULL;
    double first = v ? spk_tensor_flat_get(v, 0) : NAN;
    spk_tensor_free(v);
    spk_onnx_free(m);
    return first;
}

TEST(external_data_links)
{
    CHECK(mkdir(path_in_dir("links"), 0700) == 0 && mkdir(path_in_dir("links/model"), 0700) == 0);
    CHECK(mkdir(path_in_dir("links/elsewhere"), 0700) == 0 && mkdir(path_in_dir("links/model/sub"), 0700) == 0);
    write_doubles("links/secret.bin", 100);
    write_doubles("links/elsewhere/w.bin", 200);
    write_doubles("links/model/w.bin", 1);
    write_doubles("links/model/sub/w.bin", 2);
    /* plain files inside the folder, and a link that stays inside, load */
    write_external_model("links/model/plain.onnx", "w.bin");
    CHECK(external_value("links/model/plain.onnx") == 1.0);
    write_external_model("links/model/nested.onnx", "sub/w.bin");
    CHECK(external_value("links/model/nested.onnx") == 2.0);
    CHECK(symlink("sub/w.bin", path_in_dir("links/model/inside.bin")) == 0);
    write_external_model("links/model/inside.onnx", "inside.bin");
    CHECK(external_value("links/model/inside.onnx") == 2.0);
    /* a file link out of the folder, relative or absolute */
    CHECK(symlink("../secret.bin", path_in_dir("links/model/out.bin")) == 0);
    write_external_model("links/model/out.onnx", "out.bin");
    CHECK(isnan(external_value("links/model/out.onnx")));
    CHECK_STR_CONTAINS(spk_last_error(), "out.bin: resolves to ");
    CHECK_STR_CONTAINS(spk_last_error(), "secret.bin, outside the model's folder");
    CHECK(symlink(path_in_dir("links/secret.bin"), path_in_dir("links/model/abs.bin")) == 0);
    write_external_model("links/model/abs.onnx", "abs.bin");
    CHECK(isnan(external_value("links/model/abs.onnx")));
    CHECK_STR_CONTAINS(spk_last_error(), "outside the model's folder");
    /* a folder link on the way out */
    CHECK(symlink("../elsewhere", path_in_dir("links/model/away")) == 0);
    write_external_model("links/model/away.onnx", "away/w.bin");
    CHECK(isnan(external_value("links/model/away.onnx")));
    CHECK_STR_CONTAINS(spk_last_error(), "elsewhere/w.bin, outside the model's folder");
    /* links that stay inside, however many, load */
    CHECK(symlink(".", path_in_dir("links/model/self")) == 0);
    write_external_model("links/model/self.onnx", "self/self/w.bin");
    CHECK(external_value("links/model/self.onnx") == 1.0);
    /* a model reached through a link: the folder of the model's resolved
     * location counts too (a cache such as Hugging Face's links both files
     * from a snapshot folder into its blobs), and so does the folder named */
    CHECK(mkdir(path_in_dir("links/blobs"), 0700) == 0 && mkdir(path_in_dir("links/snapshot"), 0700) == 0);
    write_external_model("links/blobs/guid1", "data.bin");
    write_doubles("links/blobs/guid2", 7);
    CHECK(symlink("../blobs/guid1", path_in_dir("links/snapshot/model.onnx")) == 0);
    CHECK(symlink("../blobs/guid2", path_in_dir("links/snapshot/data.bin")) == 0);
    CHECK(external_value("links/snapshot/model.onnx") == 7.0);
    /* ... but not a data file that leaves both */
    CHECK(mkdir(path_in_dir("links/snapshot2"), 0700) == 0);
    CHECK(symlink("../blobs/guid1", path_in_dir("links/snapshot2/model.onnx")) == 0);
    CHECK(symlink("../elsewhere/w.bin", path_in_dir("links/snapshot2/data.bin")) == 0);
    CHECK(isnan(external_value("links/snapshot2/model.onnx")));
    CHECK_STR_CONTAINS(spk_last_error(), "elsewhere/w.bin, outside the model's folder");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", check_scratch_dir("test-onnx"));
    RUN(save_load_round_trip);
    RUN(save_load_f64);
    RUN(save_refuses_mixed_dtypes);
    RUN(every_truncation);
    RUN(truncated_file_names_the_byte);
    RUN(nesting_beyond_the_limit);
    RUN(singular_message_given_twice);
    RUN(wire_type_mismatch);
    RUN(length_past_the_end);
    RUN(length_past_the_parent);
    RUN(groups_and_bad_keys);
    RUN(packed_values_must_be_whole);
    RUN(no_graph);
    RUN(unpack_budget);
    RUN(unknown_fields_are_skipped);
    RUN(not_a_regular_file);
    RUN(float_raw_and_typed);
    RUN(float16_exact);
    RUN(lying_tensors);
    RUN(external_data);
    RUN(external_data_links);
    RUN(integer_tensors);
    return CHECK_SUMMARY();
}
