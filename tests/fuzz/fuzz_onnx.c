/* libFuzzer target: the ONNX reader and the LSTM-stack finder. spk.lstm.load
 * on a .onnx file runs spk_onnx_load and spk_lstm_from_onnx; this target runs
 * the same code on fuzzed bytes (spk_onnx_parse), reads every initializer's
 * values as the finder would, and, for stacks it returns, checks them and
 * runs a one-step reference forward pass on them.
 *
 * Input: the model's bytes, optionally followed by SEPARATOR and the bytes
 * of its external-data file, which answers to the location "model.onnx.data"
 * (any other location is a missing file). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/onnx.h"
#include "lstm/onnx_stack.h"

#define SEPARATOR "\n--spk-file--\n"
#define MAX_REFERENCE_WORK 2000000 /* multiply-adds; bigger stacks are only checked */

typedef struct memory_file {
    const uint8_t *data;
    size_t size;
} memory_file;

static int mem_size(void *ctx, const char *location, uint64_t *size)
{
    memory_file *f = ctx;
    if (!f->data || strcmp(location, "model.onnx.data") != 0)
        return spk_fail("%s: cannot open: No such file or directory", location);
    *size = f->size;
    return 0;
}

static int mem_read(void *ctx, const char *location, uint64_t offset, void *dst, size_t n)
{
    memory_file *f = ctx;
    if (!f->data || strcmp(location, "model.onnx.data") != 0)
        return spk_fail("%s: cannot open: No such file or directory", location);
    if (offset > f->size || n > f->size - offset)
        abort(); /* the reader checks every range against the size first */
    memcpy(dst, f->data + offset, n);
    return 0;
}

static void run_reference(const spk_lstm_weights *w, int count)
{
    spk_lstm_layer layers[SPK_LSTM_ONNX_MAX_LAYERS];
    for (int k = 0; k < count; k++)
        layers[k] = (spk_lstm_layer){w[k].W, w[k].R, w[k].B};
    spk_lstm_dims dims;
    if (spk_lstm_validate(layers, count, &dims) || dims.layers != count)
        abort(); /* the finder returns validated stacks only */
    int64_t work = 0;
    for (int k = 0; k < count; k++)
        work += 2 * 4 * dims.hidden * ((k == 0 ? dims.input : 2 * dims.hidden) + dims.hidden);
    if (work > MAX_REFERENCE_WORK)
        return;
    const int64_t shape[3] = {1, 2, dims.input};
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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const size_t sep_len = sizeof SEPARATOR - 1;
    const uint8_t *sep = size >= sep_len ? memmem(data, size, SEPARATOR, sep_len) : NULL;
    size_t model_size = sep ? (size_t)(sep - data) : size;
    memory_file file = {sep ? sep + sep_len : NULL, sep ? size - model_size - sep_len : 0};
    spk_onnx_external external = {mem_size, mem_read, &file};

    spk_clear_error();
    spk_onnx_model *m = spk_onnx_parse(data, model_size, "fuzz.onnx", &external);
    if (!m) {
        if (!spk_last_error()[0])
            abort(); /* every refusal has a message */
        return 0;
    }
    const Onnx__GraphProto *g = spk_onnx_proto(m)->graph;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        int64_t ints[64], dims[SPK_MAX_DIMS];
        size_t count;
        int ndim;
        if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
            (void)spk_onnx_tensor_ints(m, t, ints, 64, &count, dims, &ndim);
        else
            spk_tensor_free(spk_onnx_tensor_values(m, t));
    }
    spk_lstm_weights w[SPK_LSTM_ONNX_MAX_LAYERS];
    int count = 0;
    spk_clear_error();
    if (spk_lstm_from_onnx(m, w, SPK_LSTM_ONNX_MAX_LAYERS, &count) == 0) {
        run_reference(w, count);
        for (int k = 0; k < count; k++)
            spk_lstm_weights_free(&w[k]);
    } else if (!spk_last_error()[0] || count != 0) {
        abort();
    }
    spk_onnx_free(m);
    return 0;
}
