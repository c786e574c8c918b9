/* ONNX model files: the protobuf read with protobuf-c over the onnx.proto
 * schema (C code generated at build time into $(BUILD)/gen/onnx.pb-c.h), and
 * the values of its tensors.
 *
 * A file is checked before protobuf-c unpacks it: at most SPK_ONNX_MAX_BYTES,
 * every field's wire type and length within its message, messages nested at
 * most SPK_ONNX_MAX_DEPTH deep (protobuf-c recurses once per level), no
 * singular message field given twice (protobuf-c would merge the copies, in
 * time quadratic in their number). protobuf-c then allocates through a
 * counting allocator that refuses more than SPK_ONNX_UNPACK_FACTOR times the
 * file's size plus SPK_ONNX_UNPACK_SLACK in all. A tensor is allocated only
 * once its bytes are known to be present (in the file, or in the range of its
 * external-data file) and to match its shape. Messages name the file, and the
 * byte, message and field, or the tensor.
 *
 * Conventions as in core/tensor.h: NULL or -1 on failure, message in
 * spk_last_error(). */
#ifndef SPK_ONNX_H
#define SPK_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "onnx.pb-c.h"

#define SPK_ONNX_MAX_BYTES ((uint64_t)INT32_MAX) /* protobuf's 2 GiB limit on one message */
#define SPK_ONNX_MAX_DEPTH 100                   /* as protobuf's C++ and Python readers */
#define SPK_ONNX_UNPACK_FACTOR 32
#define SPK_ONNX_UNPACK_SLACK ((size_t)16 << 20)

/* Where the bytes of tensors stored outside the model come from. `location`
 * is the tensor's external_data "location", already checked to be a relative
 * path that stays inside the model's folder. */
typedef struct spk_onnx_external {
    /* The size of the external file, or -1 with a message. */
    int (*size)(void *ctx, const char *location, uint64_t *size);
    /* n bytes at `offset` (within the size reported) into dst, or -1. */
    int (*read)(void *ctx, const char *location, uint64_t offset, void *dst, size_t n);
    void *ctx;
} spk_onnx_external;

typedef struct spk_onnx_model spk_onnx_model;

/* Reads and unpacks `path`; external data is looked for beside it. */
spk_onnx_model *spk_onnx_load(const char *path);
/* Unpacks an in-memory image (copied where needed: `bytes` may go afterwards).
 * `name` is used in messages; `external` may be NULL (no external data). */
spk_onnx_model *spk_onnx_parse(const void *bytes, size_t size, const char *name,
                               const spk_onnx_external *external);
void spk_onnx_free(spk_onnx_model *model);

const Onnx__ModelProto *spk_onnx_proto(const spk_onnx_model *model);
const char *spk_onnx_name(const spk_onnx_model *model); /* the file, for messages */

/* The values of a FLOAT, FLOAT16 (converted exactly to f32) or DOUBLE tensor,
 * as a new contiguous host tensor, read from the tensor itself or its
 * external data. Every size is checked before the allocation. */
spk_tensor *spk_onnx_tensor_values(spk_onnx_model *model, const Onnx__TensorProto *t);
/* The values of an INT64 or INT32 tensor of at most `max` elements into
 * out[]; its shape into dims[] (at most SPK_MAX_DIMS, *ndim). */
int spk_onnx_tensor_ints(spk_onnx_model *model, const Onnx__TensorProto *t, int64_t *out, size_t max,
                         size_t *count, int64_t *dims, int *ndim);
/* The shape of a tensor (its dims, checked: at most SPK_MAX_DIMS, none
 * negative). Reads no data. */
int spk_onnx_tensor_shape(const spk_onnx_model *model, const Onnx__TensorProto *t, int64_t *dims, int *ndim);

/* ONNX's rules for where a tensor keeps its values, as onnx.checker has them:
 * exactly one value field (raw_data or the data type's typed field), none
 * for a tensor in external data or with no element. The readers above check
 * them first. Reads no data. */
int spk_onnx_tensor_check(const spk_onnx_model *model, const Onnx__TensorProto *t);

/* "FLOAT", "INT64", ... or "data type 42". */
const char *spk_onnx_type_name(int32_t data_type, char *buf, size_t size);

/* Packs `model` and writes it to `path`. */
int spk_onnx_save(const char *path, const Onnx__ModelProto *model);

#endif
