/* libFuzzer target: the .npy reader on arbitrary bytes. A file is either
 * refused with a message or read into a tensor whose data size equals what
 * the file holds (so no allocation exceeds the input); it must never crash,
 * leak or read out of bounds. Every byte of an accepted tensor is read, so
 * a storage smaller than its shape claims shows up under ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/npy.h"
#include "core/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spk_tensor *t = spk_npy_parse(data, size, "fuzz.npy");
    if (!t) {
        /* Every refusal explains itself. */
        const char *msg = spk_last_error();
        if (!msg || strstr(msg, "fuzz.npy") == NULL)
            abort();
        return 0;
    }
    int64_t numel = spk_tensor_numel(t);
    size_t bytes = (size_t)numel * spk_dtype_size(t->dtype);
    if (bytes > size || !spk_tensor_is_contiguous(t))
        abort();
    /* Touch every element: a wrong storage size shows up under ASan. */
    volatile uint8_t sink = 0;
    const uint8_t *p = spk_tensor_data(t);
    for (size_t i = 0; i < bytes; i++)
        sink ^= p[i];
    (void)sink;
    spk_tensor_free(t);
    return 0;
}
