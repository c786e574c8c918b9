/* libFuzzer target: the .safetensors reader on arbitrary bytes. A file is
 * refused with a message naming it, or read into tensors whose sizes add up
 * to at most the data section (offsets are checked and may not overlap); it
 * must never crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spk_tensor_list list = {0};
    if (spk_safetensors_parse(data, size, "fuzz.safetensors", &list)) {
        const char *msg = spk_last_error();
        if (!msg || strstr(msg, "fuzz.safetensors") == NULL)
            abort();
        if (list.count != 0 || list.items != NULL) /* nothing is handed out on failure */
            abort();
        return 0;
    }
    size_t total = 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < list.count; i++) {
        const spk_tensor *t = list.items[i].tensor;
        if (!t || !list.items[i].name)
            abort();
        size_t bytes = (size_t)spk_tensor_numel(t) * spk_dtype_size(t->dtype);
        total += bytes;
        const uint8_t *p = spk_tensor_data(t);
        for (size_t k = 0; k < bytes; k++)
            sink ^= p[k];
    }
    (void)sink;
    if (total > size)
        abort();
    spk_tensor_list_free(&list);
    return 0;
}
