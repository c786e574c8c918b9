/* libFuzzer target: the weight-folder loader. spk.lstm.load (lua/spk/lstm.lua)
 * reads l<k>_W.npy, l<k>_R.npy and l<k>_B.npy with the .npy reader and hands
 * the tensors to spk_lstm_validate; this target runs those same C pieces on
 * fuzzed files, then, for stacks that validate, the packing and a one-step
 * reference forward pass on them (whatever values the files hold).
 *
 * Input: the files of a folder concatenated, separated by SEPARATOR, in the
 * order l0_W, l0_R, l0_B, l1_W, ... (at most MAX_LAYERS layers); a missing
 * file or a short final layer is what a folder with a missing file gives. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/npy.h"
#include "core/tensor.h"
#include "lstm/lstm.h"

#define SEPARATOR "\n--spk-file--\n"
#define MAX_LAYERS 3
#define MAX_FILES (3 * MAX_LAYERS)
#define MAX_REFERENCE_WORK 2000000 /* multiply-adds; bigger stacks are only validated */

static void run_reference(const spk_lstm_layer *layers, int count, const spk_lstm_dims *dims)
{
    int64_t work = 0;
    for (int k = 0; k < count; k++)
        work += 2 * 4 * dims->hidden * ((k == 0 ? dims->input : 2 * dims->hidden) + dims->hidden);
    if (work > MAX_REFERENCE_WORK)
        return;
    const int64_t shape[3] = {1, 2, dims->input};
    spk_tensor *x = spk_tensor_full(SPK_F32, 3, shape, 0.5);
    if (!x)
        abort();
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    opt.threads = 1;
    opt.precision = SPK_F32;
    spk_lstm_reference_result result = {0};
    if (spk_lstm_reference(layers, count, x, &opt, &result) == 0)
        spk_lstm_reference_result_free(&result);
    spk_tensor_free(x);

    /* The persistent backend packs every layer's W, R and B this way. */
    for (int k = 0; k < count; k++) {
        spk_tensor *w = spk_lstm_pack_directions(layers[k].W, "iofc", "ifco");
        spk_tensor *r = spk_lstm_pack_directions(layers[k].R, "iofc", "ifco");
        spk_tensor *b = spk_lstm_pack_bias(layers[k].B, "iofc", "ifco");
        if (!w || !r || !b)
            abort(); /* validated layers always pack */
        spk_tensor_free(w);
        spk_tensor_free(r);
        spk_tensor_free(b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    spk_tensor *files[MAX_FILES] = {0};
    int nfiles = 0;
    const size_t sep_len = sizeof SEPARATOR - 1;
    size_t start = 0;
    while (nfiles < MAX_FILES && start <= size) {
        const uint8_t *found = size - start >= sep_len
                                   ? memmem(data + start, size - start, SEPARATOR, sep_len)
                                   : NULL;
        size_t end = found ? (size_t)(found - data) : size;
        files[nfiles++] = spk_npy_parse(data + start, end - start, "fuzz.npy");
        if (!found)
            break;
        start = end + sep_len;
    }

    /* As the Lua loader: layers while all three files read. */
    spk_lstm_layer layers[MAX_LAYERS];
    int count = 0;
    while (count < MAX_LAYERS && 3 * count + 2 < nfiles && files[3 * count] && files[3 * count + 1] &&
           files[3 * count + 2]) {
        layers[count] = (spk_lstm_layer){files[3 * count], files[3 * count + 1], files[3 * count + 2]};
        count++;
    }
    spk_lstm_dims dims;
    if (count > 0 && spk_lstm_validate(layers, count, &dims) == 0) {
        if (dims.layers != count || dims.hidden < 1 || dims.input < 1)
            abort();
        run_reference(layers, count, &dims);
    } else if (count > 0 && !spk_last_error()) {
        abort();
    }
    for (int i = 0; i < nfiles; i++)
        spk_tensor_free(files[i]);
    return 0;
}
