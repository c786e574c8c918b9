/* ONNX model files: checks of the protobuf wire format before protobuf-c
 * unpacks it, a counting allocator for the unpack, tensor values from the
 * file or from external data, and writing (see core/onnx.h). */
#include "core/onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data is little-endian; this reader copies it as the host's"
#endif

/* ---- reading files -------------------------------------------------------
 * The one place this file touches the disk. Files are opened as core/file.h
 * says (never blocking, a regular file only); with `roots`, only a file
 * whose resolved location lies inside one of them (external data). With
 * `dst`, reads exactly `length` bytes at `offset`, which must lie within the
 * file; reports its size. */
static int read_file_at(const char *path, const char *const *roots, int nroots, uint64_t offset, uint64_t length,
                        void *dst, uint64_t *file_size)
{
    struct stat st;
    int fd = nroots ? spk_file_open_within(path, roots, nroots, "the model's folder", &st) : spk_file_open(path, &st);
    if (fd < 0)
        return -1;
    int rc = -1;
    uint64_t size = (uint64_t)st.st_size;
    *file_size = size;
    if (dst) {
        if (offset > size || length > size - offset) {
            spk_fail("%s: %" PRIu64 " bytes at offset %" PRIu64 " are past its end (%" PRIu64 " bytes)", path,
                     length, offset, size);
            goto done;
        }
        uint8_t *p = dst;
        uint64_t done_bytes = 0;
        while (done_bytes < length) {
            size_t chunk = length - done_bytes > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(length - done_bytes);
            ssize_t n = pread(fd, p + done_bytes, chunk, (off_t)(offset + done_bytes));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                spk_fail("%s: read failed: %s", path, n < 0 ? strerror(errno) : "unexpected end of file");
                goto done;
            }
            done_bytes += (uint64_t)n;
        }
    }
    rc = 0;
done:
    close(fd);
    return rc;
}

/* ---- the wire format, checked before unpacking -------------------------- */

typedef struct wire_frame {
    const ProtobufCMessageDescriptor *desc;
    size_t end;    /* where the message ends */
    uint64_t seen; /* singular message fields met, by field index (first 64) */
} wire_frame;

/* A varint of at most 10 bytes (the tenth holding only bit 63) at p, before
 * end. Returns its length, 0 if it is truncated or too long. */
static size_t read_varint(const uint8_t *p, const uint8_t *end, uint64_t *value)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 10 && p + i < end; i++) {
        uint8_t b = p[i];
        if (i == 9 && b > 1)
            return 0;
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *value = v;
            return i + 1;
        }
    }
    return 0;
}

static const char *wire_type_name(int wire)
{
    switch (wire) {
    case 0: return "varint";
    case 1: return "64-bit";
    case 2: return "length-delimited";
    case 5: return "32-bit";
    default: return "group";
    }
}

/* The wire type a field's values have (packed repeated scalars are also
 * accepted as length-delimited, with elem_size 4 or 8, or 0 for varints). */
static int expected_wire(const ProtobufCFieldDescriptor *f, size_t *elem_size)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        *elem_size = 4;
        return 5;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        *elem_size = 8;
        return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        *elem_size = 0;
        return 2;
    default: /* int32, int64, uint32, uint64, sint32, sint64, bool, enum */
        *elem_size = 0;
        return 0;
    }
}

static int wire_fail(const char *name, size_t at, const wire_frame *frame, const char *what, const char *field)
{
    if (field)
        return spk_fail("%s: not a valid ONNX file: byte %zu: field '%s' of %s: %s", name, at, field,
                        frame->desc->name, what);
    return spk_fail("%s: not a valid ONNX file: byte %zu (in %s): %s", name, at, frame->desc->name, what);
}

/* Walks the whole message tree without recursion or allocation. */
static int check_wire(const uint8_t *data, size_t size, const char *name)
{
    wire_frame stack[SPK_ONNX_MAX_DEPTH];
    int depth = 1;
    stack[0] = (wire_frame){&onnx__model_proto__descriptor, size, 0};
    size_t pos = 0;
    const uint8_t *const base = data;
    while (depth > 0) {
        wire_frame *top = &stack[depth - 1];
        if (pos == top->end) {
            depth--;
            continue;
        }
        const uint8_t *end = base + top->end;
        size_t field_at = pos;
        uint64_t key;
        size_t n = read_varint(base + pos, end, &key);
        if (n == 0 || n > 5 || key > UINT32_MAX)
            return wire_fail(name, field_at, top, "truncated or malformed field key", NULL);
        pos += n;
        uint32_t number = (uint32_t)(key >> 3);
        int wire = (int)(key & 7);
        if (number == 0)
            return wire_fail(name, field_at, top, "field number 0", NULL);
        const ProtobufCFieldDescriptor *field = protobuf_c_message_descriptor_get_field(top->desc, number);
        const char *fname = field ? field->name : NULL;
        char what[160];
        size_t elem_size = 0;
        if (field) {
            int want = expected_wire(field, &elem_size);
            bool packed = wire == 2 && want != 2 && field->label == PROTOBUF_C_LABEL_REPEATED;
            if (wire != want && !packed) {
                snprintf(what, sizeof what, "%s value, expected %s", wire_type_name(wire), wire_type_name(want));
                return wire_fail(name, field_at, top, what, fname);
            }
        }
        uint64_t len;
        switch (wire) {
        case 0:
            n = read_varint(base + pos, end, &len);
            if (n == 0)
                return wire_fail(name, field_at, top, "truncated or malformed varint", fname);
            pos += n;
            break;
        case 1:
        case 5: {
            size_t width = wire == 1 ? 8 : 4;
            if ((size_t)(end - (base + pos)) < width) {
                snprintf(what, sizeof what, "truncated %s value", wire_type_name(wire));
                return wire_fail(name, field_at, top, what, fname);
            }
            pos += width;
            break;
        }
        case 2: {
            n = read_varint(base + pos, end, &len);
            if (n == 0)
                return wire_fail(name, field_at, top, "truncated or malformed length", fname);
            pos += n;
            size_t room = top->end - pos;
            if (len > room) {
                snprintf(what, sizeof what, "claims %" PRIu64 " bytes, %zu remain in the message", len, room);
                return wire_fail(name, field_at, top, what, fname);
            }
            if (field && field->type == PROTOBUF_C_TYPE_MESSAGE) {
                size_t index = (size_t)(field - top->desc->fields);
                if (field->label != PROTOBUF_C_LABEL_REPEATED && index < 64) {
                    if (top->seen & ((uint64_t)1 << index))
                        return wire_fail(name, field_at, top, "given twice (a singular message field)", fname);
                    top->seen |= (uint64_t)1 << index;
                }
                if (depth == SPK_ONNX_MAX_DEPTH) {
                    snprintf(what, sizeof what, "messages nested more than %d deep", SPK_ONNX_MAX_DEPTH);
                    return wire_fail(name, field_at, top, what, fname);
                }
                stack[depth++] = (wire_frame){field->descriptor, pos + (size_t)len, 0};
                continue; /* pos is at the submessage's first field */
            }
            if (field && field->type != PROTOBUF_C_TYPE_STRING && field->type != PROTOBUF_C_TYPE_BYTES) {
                /* packed scalars: whole elements only */
                if (elem_size && len % elem_size) {
                    snprintf(what, sizeof what, "packed values of %zu bytes in %" PRIu64 " bytes", elem_size, len);
                    return wire_fail(name, field_at, top, what, fname);
                }
                if (!elem_size) {
                    const uint8_t *p = base + pos, *stop = p + len;
                    while (p < stop) {
                        uint64_t ignored;
                        size_t m = read_varint(p, stop, &ignored);
                        if (m == 0)
                            return wire_fail(name, (size_t)(p - base), top, "truncated packed varint", fname);
                        p += m;
                    }
                }
            }
            pos += (size_t)len;
            break;
        }
        default:
            snprintf(what, sizeof what, "wire type %d (groups are not used by ONNX)", wire);
            return wire_fail(name, field_at, top, what, fname);
        }
        if (pos > top->end)
            return wire_fail(name, field_at, top, "value runs past the end of its message", fname);
    }
    return 0;
}

/* ---- the counting allocator --------------------------------------------- */

typedef struct budget {
    size_t used, limit;
    bool exceeded;
} budget;

#define BLOCK_HEADER 16 /* keeps max_align_t alignment */

static void *budget_alloc(void *ctx, size_t n)
{
    budget *b = ctx;
    if (n > b->limit || b->limit - n < b->used || b->limit - n - b->used < BLOCK_HEADER) {
        b->exceeded = true;
        return NULL;
    }
    uint8_t *p = malloc(n + BLOCK_HEADER);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof n);
    b->used += n + BLOCK_HEADER;
    return p + BLOCK_HEADER;
}

static void budget_free(void *ctx, void *pointer)
{
    if (!pointer)
        return;
    budget *b = ctx;
    uint8_t *p = (uint8_t *)pointer - BLOCK_HEADER;
    size_t n;
    memcpy(&n, p, sizeof n);
    b->used -= n + BLOCK_HEADER;
    free(p);
}

/* ---- models -------------------------------------------------------------- */

struct spk_onnx_model {
    Onnx__ModelProto *proto;
    char *name;
    spk_onnx_external external;
    bool has_external;
    /* Of a file loaded from disk, the folders its external data may lie in:
     * the model's folder as named, and the folder of the model file's
     * resolved location (where a cache links model files from, as Hugging
     * Face's does). */
    char *folders[2];
    budget budget;
    ProtobufCAllocator allocator;
};

static spk_onnx_model *parse_into(spk_onnx_model *m, const uint8_t *bytes, size_t size)
{
    if (size > SPK_ONNX_MAX_BYTES) {
        spk_fail("%s: %zu bytes, more than protobuf's limit of 2 GiB for one message (keep the weights in "
                 "external data)", m->name, size);
        return NULL;
    }
    if (check_wire(bytes, size, m->name))
        return NULL;
    size_t limit = size > (SIZE_MAX - SPK_ONNX_UNPACK_SLACK) / SPK_ONNX_UNPACK_FACTOR
                       ? SIZE_MAX
                       : size * SPK_ONNX_UNPACK_FACTOR + SPK_ONNX_UNPACK_SLACK;
    m->budget = (budget){0, limit, false};
    m->allocator = (ProtobufCAllocator){budget_alloc, budget_free, &m->budget};
    m->proto = onnx__model_proto__unpack(&m->allocator, size, bytes);
    if (!m->proto) {
        if (m->budget.exceeded)
            spk_fail("%s: unpacking its %zu bytes would take more than %zu MiB (%d times the file plus %zu MiB): "
                     "refused", m->name, size, limit >> 20, SPK_ONNX_UNPACK_FACTOR, SPK_ONNX_UNPACK_SLACK >> 20);
        else
            spk_fail("%s: not a valid ONNX file (protobuf-c could not unpack it)", m->name);
        return NULL;
    }
    if (!m->proto->graph) {
        spk_fail("%s: not an ONNX model: it has no graph", m->name);
        return NULL;
    }
    return m;
}

static spk_onnx_model *model_new(const char *name)
{
    spk_onnx_model *m = calloc(1, sizeof *m);
    if (!m)
        return spk_fail_null("out of memory");
    m->name = strdup(name ? name : "(model)");
    if (!m->name) {
        free(m);
        return spk_fail_null("out of memory");
    }
    return m;
}

void spk_onnx_free(spk_onnx_model *m)
{
    if (!m)
        return;
    if (m->proto)
        onnx__model_proto__free_unpacked(m->proto, &m->allocator);
    free(m->name);
    free(m->folders[0]);
    free(m->folders[1]);
    free(m);
}

spk_onnx_model *spk_onnx_parse(const void *bytes, size_t size, const char *name, const spk_onnx_external *external)
{
    spk_onnx_model *m = model_new(name);
    if (!m)
        return NULL;
    if (external) {
        m->external = *external;
        m->has_external = true;
    }
    if (!parse_into(m, bytes, size)) {
        spk_onnx_free(m);
        return NULL;
    }
    return m;
}

/* External data of a model on disk: files in the model's folder. */
static char *external_path(const spk_onnx_model *m, const char *location)
{
    size_t n = strlen(m->folders[0]) + strlen(location) + 2;
    char *path = malloc(n);
    if (!path)
        return spk_fail_null("out of memory");
    snprintf(path, n, "%s/%s", m->folders[0], location);
    return path;
}

static int disk_size(void *ctx, const char *location, uint64_t *size)
{
    const spk_onnx_model *m = ctx;
    char *path = external_path(m, location);
    if (!path)
        return -1;
    int rc = read_file_at(path, (const char *const *)m->folders, 2, 0, 0, NULL, size);
    free(path);
    return rc;
}

static int disk_read(void *ctx, const char *location, uint64_t offset, void *dst, size_t n)
{
    const spk_onnx_model *m = ctx;
    char *path = external_path(m, location);
    if (!path)
        return -1;
    uint64_t size;
    int rc = read_file_at(path, (const char *const *)m->folders, 2, offset, n, dst, &size);
    free(path);
    return rc;
}

/* The folder part of a path ("." for none). */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
}

spk_onnx_model *spk_onnx_load(const char *path)
{
    spk_onnx_model *m = model_new(path);
    if (!m)
        return NULL;
    uint8_t *bytes = NULL;
    uint64_t size, again;
    if (read_file_at(path, NULL, 0, 0, 0, NULL, &size))
        goto fail;
    if (size > SPK_ONNX_MAX_BYTES) {
        spk_fail("%s: %" PRIu64 " bytes, more than protobuf's limit of 2 GiB for one message", path, size);
        goto fail;
    }
    bytes = malloc(size ? (size_t)size : 1); /* the file's own size, at most 2 GiB */
    if (!bytes) {
        spk_fail("%s: out of memory reading %" PRIu64 " bytes", path, size);
        goto fail;
    }
    if (read_file_at(path, NULL, 0, 0, size, bytes, &again))
        goto fail;
    char *real = realpath(path, NULL);
    m->folders[0] = folder_of(path);
    m->folders[1] = real ? folder_of(real) : NULL;
    free(real);
    if (!m->folders[0]) {
        spk_fail("out of memory");
        goto fail;
    }
    m->external = (spk_onnx_external){disk_size, disk_read, m};
    m->has_external = true;
    if (!parse_into(m, bytes, (size_t)size))
        goto fail;
    free(bytes);
    return m;
fail:
    free(bytes);
    spk_onnx_free(m);
    return NULL;
}

const Onnx__ModelProto *spk_onnx_proto(const spk_onnx_model *m)
{
    return m->proto;
}

const char *spk_onnx_name(const spk_onnx_model *m)
{
    return m->name;
}

/* ---- tensors -------------------------------------------------------------- */

const char *spk_onnx_type_name(int32_t data_type, char *buf, size_t size)
{
    static const char *names[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",    "INT16",
                                  "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",   "DOUBLE",
                                  "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    if (data_type >= 0 && (size_t)data_type < sizeof names / sizeof *names)
        return names[data_type];
    snprintf(buf, size, "data type %d", (int)data_type);
    return buf;
}

static const char *tensor_label(const Onnx__TensorProto *t)
{
    return t->name && *t->name ? t->name : "(unnamed)";
}

int spk_onnx_tensor_shape(const spk_onnx_model *m, const Onnx__TensorProto *t, int64_t *dims, int *ndim)
{
    if (t->n_dims > SPK_MAX_DIMS)
        return spk_fail("%s: tensor '%s' has %zu dimensions, more than %d", m->name, tensor_label(t), t->n_dims,
                        SPK_MAX_DIMS);
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return spk_fail("%s: tensor '%s': dimension %zu is %" PRId64 ", negative", m->name, tensor_label(t), i,
                            t->dims[i]);
        dims[i] = t->dims[i];
    }
    *ndim = (int)t->n_dims;
    return 0;
}

/* Elements of the shape, refusing totals whose bytes would overflow. */
static int element_count(const spk_onnx_model *m, const Onnx__TensorProto *t, const int64_t *dims, int ndim,
                         size_t elem, uint64_t *out)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)dims[i];
        if (d && n > (uint64_t)INT64_MAX / elem / d)
            return spk_fail("%s: tensor '%s': its shape holds more elements than memory can", m->name,
                            tensor_label(t));
        n *= d;
    }
    *out = n;
    return 0;
}

/* The typed field ONNX keeps a data type's values in, NULL for none. */
static const char *typed_field(int32_t type)
{
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64: return "float_data";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return "int32_data";
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return "int64_data";
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128: return "double_data";
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return "uint64_data";
    case ONNX__TENSOR_PROTO__DATA_TYPE__STRING: return "string_data";
    default: return NULL;
    }
}

int spk_onnx_tensor_check(const spk_onnx_model *m, const Onnx__TensorProto *t)
{
    const struct {
        const char *name;
        size_t count;
    } fields[] = {{"raw_data", t->has_raw_data ? t->raw_data.len : 0}, {"float_data", t->n_float_data},
                  {"int32_data", t->n_int32_data}, {"int64_data", t->n_int64_data},
                  {"double_data", t->n_double_data}, {"uint64_data", t->n_uint64_data},
                  {"string_data", t->n_string_data}};
    const char *present[7];
    int n = 0;
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        if (fields[i].count)
            present[n++] = fields[i].name;
    bool empty = false;
    for (size_t i = 0; i < t->n_dims; i++)
        empty = empty || t->dims[i] == 0;
    const char *rule = "; ONNX keeps a tensor's values in exactly one field";
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL && n > 0)
        return spk_fail("%s: tensor '%s' is stored externally and also holds %s%s", m->name, tensor_label(t),
                        present[0], rule);
    if (n > 1)
        return spk_fail("%s: tensor '%s' holds values in both %s and %s%s", m->name, tensor_label(t), present[0],
                        present[1], rule);
    if (empty && n > 0)
        return spk_fail("%s: tensor '%s' has no element but holds %s; ONNX gives a 0-element tensor no data",
                        m->name, tensor_label(t), present[0]);
    const char *want = typed_field(t->data_type);
    if (n == 1 && strcmp(present[0], "raw_data") != 0 && (!want || strcmp(present[0], want) != 0)) {
        char buf[32];
        return spk_fail("%s: tensor '%s' of data type %s holds its values in %s; ONNX keeps them in %s", m->name,
                        tensor_label(t), spk_onnx_type_name(t->data_type, buf, sizeof buf), present[0],
                        want ? want : "raw_data");
    }
    if (n == 1 && t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__STRING && strcmp(present[0], "raw_data") == 0)
        return spk_fail("%s: tensor '%s' of data type STRING holds raw_data; ONNX keeps strings in string_data",
                        m->name, tensor_label(t));
    return 0;
}

/* The key=value entries of an external tensor: location, offset, length. */
typedef struct external_ref {
    const char *location;
    uint64_t offset, length;
    bool has_length;
} external_ref;

static int parse_decimal(const spk_onnx_model *m, const Onnx__TensorProto *t, const char *key, const char *s,
                         uint64_t *out)
{
    uint64_t v = 0;
    if (!s || !*s)
        return spk_fail("%s: tensor '%s': external_data '%s' is empty", m->name, tensor_label(t), key);
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return spk_fail("%s: tensor '%s': external_data '%s' is '%s', not a byte count", m->name,
                            tensor_label(t), key, s);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return 0;
}

/* A location must name a file inside the model's folder: relative, without
 * ".." components (as ONNX's checker and ONNX Runtime require). */
static int check_location(const spk_onnx_model *m, const Onnx__TensorProto *t, const char *loc)
{
    if (!loc || !*loc)
        return spk_fail("%s: tensor '%s': external data without a location", m->name, tensor_label(t));
    if (loc[0] == '/')
        return spk_fail("%s: tensor '%s': external data location '%s' is absolute; it must be relative to "
                        "the model's folder", m->name, tensor_label(t), loc);
    for (const char *p = loc; *p;) {
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return spk_fail("%s: tensor '%s': external data location '%s' leaves the model's folder", m->name,
                            tensor_label(t), loc);
        p += n + (q != NULL);
    }
    return 0;
}

static int external_entries(const spk_onnx_model *m, const Onnx__TensorProto *t, external_ref *ref)
{
    *ref = (external_ref){0};
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        const char *key = e->key ? e->key : "";
        if (strcmp(key, "location") == 0)
            ref->location = e->value;
        else if (strcmp(key, "offset") == 0 && parse_decimal(m, t, key, e->value, &ref->offset))
            return -1;
        else if (strcmp(key, "length") == 0) {
            if (parse_decimal(m, t, key, e->value, &ref->length))
                return -1;
            ref->has_length = true;
        }
    }
    return check_location(m, t, ref->location);
}

/* Copies `bytes` bytes of the tensor's data (raw_data, or its external file)
 * into dst; the caller checked that the tensor holds exactly that many. */
static int raw_bytes(spk_onnx_model *m, const Onnx__TensorProto *t, void *dst, uint64_t bytes)
{
    if (t->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        if (bytes)
            memcpy(dst, t->raw_data.data, (size_t)bytes);
        return 0;
    }
    external_ref ref;
    if (external_entries(m, t, &ref))
        return -1;
    if (m->external.read(m->external.ctx, ref.location, ref.offset, dst, (size_t)bytes)) {
        spk_error_prefix("%s: tensor '%s': external data '%s'", m->name, tensor_label(t), ref.location);
        return -1;
    }
    return 0;
}

/* How many bytes of raw data the tensor holds (in raw_data or in the range of
 * its external file), with every external check made; *raw false if its
 * values are in a typed field instead. */
static int raw_size(spk_onnx_model *m, const Onnx__TensorProto *t, bool *raw, uint64_t *bytes)
{
    if (spk_onnx_tensor_check(m, t))
        return -1;
    if (t->segment)
        return spk_fail("%s: tensor '%s' is stored in segments, which spk does not read", m->name, tensor_label(t));
    if (t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
        external_ref ref;
        if (external_entries(m, t, &ref))
            return -1;
        if (!m->has_external)
            return spk_fail("%s: tensor '%s' is in external data file '%s', which is not available here", m->name,
                            tensor_label(t), ref.location);
        uint64_t size;
        if (m->external.size(m->external.ctx, ref.location, &size)) {
            spk_error_prefix("%s: tensor '%s': external data file '%s'", m->name, tensor_label(t), ref.location);
            return -1;
        }
        if (ref.offset > size)
            return spk_fail("%s: tensor '%s': external data offset %" PRIu64 " is past the end of '%s' (%" PRIu64
                            " bytes)", m->name, tensor_label(t), ref.offset, ref.location, size);
        uint64_t length = ref.has_length ? ref.length : size - ref.offset;
        if (length > size - ref.offset)
            return spk_fail("%s: tensor '%s': external data claims %" PRIu64 " bytes at offset %" PRIu64
                            " of '%s', which holds %" PRIu64, m->name, tensor_label(t), length, ref.offset,
                            ref.location, size);
        *raw = true;
        *bytes = length;
        return 0;
    }
    *raw = t->has_raw_data;
    *bytes = t->has_raw_data ? t->raw_data.len : 0;
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: normalise */
        exp = 113;
        while (!(man & 0x400)) {
            man <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static int count_mismatch(const spk_onnx_model *m, const Onnx__TensorProto *t, const char *where, uint64_t have,
                          uint64_t want, const char *unit)
{
    return spk_fail("%s: tensor '%s': its shape needs %" PRIu64 " %s, %s holds %" PRIu64, m->name, tensor_label(t),
                    want, unit, where, have);
}

spk_tensor *spk_onnx_tensor_values(spk_onnx_model *m, const Onnx__TensorProto *t)
{
    int64_t dims[SPK_MAX_DIMS];
    int ndim;
    if (spk_onnx_tensor_shape(m, t, dims, &ndim))
        return NULL;
    int32_t type = t->data_type;
    size_t elem;
    spk_dtype dtype;
    switch (type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: elem = 4; dtype = SPK_F32; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: elem = 8; dtype = SPK_F64; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: elem = 2; dtype = SPK_F32; break;
    default: {
        char buf[32];
        return spk_fail_null("%s: tensor '%s' has data type %s; spk reads FLOAT, FLOAT16 and DOUBLE weights", m->name,
                             tensor_label(t), spk_onnx_type_name(type, buf, sizeof buf));
    }
    }
    uint64_t count, bytes;
    bool raw;
    if (element_count(m, t, dims, ndim, 8, &count) || raw_size(m, t, &raw, &bytes))
        return NULL;
    uint64_t typed = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT    ? t->n_float_data
                     : type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ? t->n_double_data
                                                                     : t->n_int32_data;
    if (raw && bytes != count * elem)
        return count_mismatch(m, t, t->data_location ? "its external data" : "raw_data", bytes, count * elem,
                              "bytes"),
               NULL;
    if (!raw && typed != count)
        return count_mismatch(m, t, "the tensor", typed, count, "values"), NULL;
    /* Every size now matches data that is present: allocate. */
    spk_tensor *out = spk_tensor_new(dtype, ndim, dims);
    if (!out)
        return NULL;
    void *data = spk_tensor_data(out);
    if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) {
        float *f = data;
        if (raw) {
            uint16_t *h = malloc(bytes ? (size_t)bytes : 1);
            if (!h || raw_bytes(m, t, h, bytes)) {
                if (!h)
                    spk_fail("out of memory");
                free(h);
                spk_tensor_free(out);
                return NULL;
            }
            for (uint64_t i = 0; i < count; i++)
                f[i] = half_to_float(h[i]);
            free(h);
        } else {
            for (uint64_t i = 0; i < count; i++)
                f[i] = half_to_float((uint16_t)t->int32_data[i]);
        }
        return out;
    }
    if (raw) {
        if (raw_bytes(m, t, data, bytes)) {
            spk_tensor_free(out);
            return NULL;
        }
    } else if (count) {
        memcpy(data, type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? (void *)t->float_data : (void *)t->double_data,
               (size_t)(count * elem));
    }
    return out;
}

int spk_onnx_tensor_ints(spk_onnx_model *m, const Onnx__TensorProto *t, int64_t *out, size_t max, size_t *count_out,
                         int64_t *dims, int *ndim)
{
    if (spk_onnx_tensor_shape(m, t, dims, ndim))
        return -1;
    int32_t type = t->data_type;
    if (type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32) {
        char buf[32];
        return spk_fail("%s: tensor '%s' has data type %s, expected INT64 or INT32", m->name, tensor_label(t),
                        spk_onnx_type_name(type, buf, sizeof buf));
    }
    size_t elem = type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : 4;
    uint64_t count, bytes;
    bool raw;
    if (element_count(m, t, dims, *ndim, 8, &count))
        return -1;
    if (count > max)
        return spk_fail("%s: tensor '%s' holds %" PRIu64 " integers; spk follows shapes and indices of at most %zu",
                        m->name, tensor_label(t), count, max);
    if (raw_size(m, t, &raw, &bytes))
        return -1;
    uint64_t typed = elem == 8 ? t->n_int64_data : t->n_int32_data;
    if (raw && bytes != count * elem)
        return count_mismatch(m, t, t->data_location ? "its external data" : "raw_data", bytes, count * elem,
                              "bytes");
    if (!raw && typed != count)
        return count_mismatch(m, t, "the tensor", typed, count, "values");
    if (raw) {
        uint8_t buf[8 * 64];
        uint8_t *p = count * elem <= sizeof buf ? buf : malloc((size_t)(count * elem));
        if (!p)
            return spk_fail("out of memory");
        int rc = raw_bytes(m, t, p, count * elem);
        for (uint64_t i = 0; rc == 0 && i < count; i++) {
            if (elem == 8) {
                memcpy(&out[i], p + 8 * i, 8);
            } else {
                int32_t v;
                memcpy(&v, p + 4 * i, 4);
                out[i] = v;
            }
        }
        if (p != buf)
            free(p);
        if (rc)
            return -1;
    } else {
        for (uint64_t i = 0; i < count; i++)
            out[i] = elem == 8 ? t->int64_data[i] : t->int32_data[i];
    }
    *count_out = (size_t)count;
    return 0;
}

/* ---- writing --------------------------------------------------------------- */

int spk_onnx_save(const char *path, const Onnx__ModelProto *model)
{
    size_t size = onnx__model_proto__get_packed_size(model);
    if (size > SPK_ONNX_MAX_BYTES)
        return spk_fail("%s: the model would take %zu bytes, more than protobuf's 2 GiB limit", path, size);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return spk_fail("%s: out of memory packing %zu bytes", path, size);
    size_t packed = onnx__model_proto__pack(model, buf);
    int rc = packed == size ? spk_file_write(path, buf, size)
                            : spk_fail("%s: protobuf-c packed %zu bytes of %zu", path, packed, size);
    free(buf);
    return rc;
}
