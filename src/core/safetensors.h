/* .safetensors files (F32, F64, I32, U64): an 8-byte little-endian header
 * length, a JSON header of name -> {dtype, shape, data_offsets}, the data.
 * Malformed or lying files are refused with a message naming the file and the
 * problem. */
#ifndef SPK_SAFETENSORS_H
#define SPK_SAFETENSORS_H

#include <stddef.h>

#include "core/tensor.h"

typedef struct spk_named_tensor {
    char *name;
    spk_tensor *tensor;
} spk_named_tensor;

typedef struct spk_tensor_list {
    size_t count;
    spk_named_tensor *items; /* in file order */
} spk_tensor_list;

int spk_safetensors_load(const char *path, spk_tensor_list *out);
int spk_safetensors_parse(const void *bytes, size_t size, const char *name, spk_tensor_list *out);
/* Writes tensors sorted by name (as the reference implementation does). */
int spk_safetensors_save(const char *path, const spk_tensor_list *list);
void spk_tensor_list_free(spk_tensor_list *list); /* frees names and tensors */

#endif
