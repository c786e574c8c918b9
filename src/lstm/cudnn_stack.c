/* The cuDNN backend of the LSTM stack (see cudnn_stack.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cudnn_rnn.h"
#include "cuda/nvtx.h"
#include "lstm/cudnn_stack.h"
#include "lstm/device_layers.h"

/* ---- Names ---------------------------------------------------------------- */

static const char *const algo_names[SPK_CUDNN_ALGO_COUNT] = {
    [SPK_CUDNN_STANDARD] = "standard",
    [SPK_CUDNN_PERSIST_STATIC] = "persist_static",
    [SPK_CUDNN_PERSIST_DYNAMIC] = "persist_dynamic",
    [SPK_CUDNN_PERSIST_STATIC_SMALL_H] = "persist_static_small_h",
};
static const char *const layout_names[] = {"batch_major", "seq_major"};

static int name_index(const char *name, const char *const *names, int count)
{
    for (int i = 0; name && i < count; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

static int unknown_name(const char *what, const char *name, const char *const *names, int count)
{
    char known[256] = "";
    size_t n = 0;
    for (int i = 0; i < count && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", names[i]);
    return spk_fail("unknown cuDNN %s '%s' (expected %s)", what, name ? name : "(null)", known);
}

const char *spk_cudnn_algo_name(spk_cudnn_algo algo)
{
    return algo >= 0 && algo < SPK_CUDNN_ALGO_COUNT ? algo_names[algo] : "?";
}

int spk_cudnn_algo_from_name(const char *name, spk_cudnn_algo *out)
{
    int i = name_index(name, algo_names, SPK_CUDNN_ALGO_COUNT);
    if (i < 0)
        return unknown_name("algorithm", name, algo_names, SPK_CUDNN_ALGO_COUNT);
    *out = (spk_cudnn_algo)i;
    return 0;
}

const char *spk_cudnn_layout_name(spk_cudnn_layout layout)
{
    return layout == SPK_CUDNN_BATCH_MAJOR || layout == SPK_CUDNN_SEQ_MAJOR ? layout_names[layout] : "?";
}

int spk_cudnn_layout_from_name(const char *name, spk_cudnn_layout *out)
{
    int i = name_index(name, layout_names, 2);
    if (i < 0)
        return unknown_name("layout", name, layout_names, 2);
    *out = (spk_cudnn_layout)i;
    return 0;
}

/* cuDNN's maths are those of the one list (cuda/math_modes.h) that it has. */
static spk_math_mode math_mode(spk_cudnn_math math) { return math == SPK_CUDNN_MATH_TF32 ? SPK_MATH_TF32 : SPK_MATH_FP32; }

const char *spk_cudnn_math_name(spk_cudnn_math math)
{
    return math == SPK_CUDNN_MATH_FP32 || math == SPK_CUDNN_MATH_TF32 ? spk_math_mode_name(math_mode(math)) : "?";
}

int spk_cudnn_math_from_name(const char *name, spk_cudnn_math *out)
{
    spk_math_mode m;
    if (name && spk_math_mode_from_name(name, &m) == 0 && (spk_math_mode_where(m) & SPK_MATH_CUDNN)) {
        *out = m == SPK_MATH_TF32 ? SPK_CUDNN_MATH_TF32 : SPK_CUDNN_MATH_FP32;
        return 0;
    }
    const char *names[SPK_MATH_COUNT];
    int count = 0;
    for (int i = 0; i < SPK_MATH_COUNT; i++)
        if (spk_math_mode_where((spk_math_mode)i) & SPK_MATH_CUDNN)
            names[count++] = spk_math_mode_names[i];
    return unknown_name("math mode", name, names, count);
}

/* ---- Where cuDNN's parameters come from ----------------------------------- */

int spk_cudnn_onnx_gate(int cudnn_gate)
{
    /* cuDNN i, f, g, o; ONNX i, o, f, c (c is cuDNN's g). */
    static const int onnx_of[4] = {0, 2, 3, 1};
    return cudnn_gate >= 0 && cudnn_gate < 4 ? onnx_of[cudnn_gate] : -1;
}

int spk_cudnn_param_source_of(int pseudo_layer, int lin_layer_id, int64_t hidden, spk_cudnn_param_source *out)
{
    if (pseudo_layer < 0)
        return spk_fail("cuDNN pseudo-layer %d is negative", pseudo_layer);
    if (lin_layer_id < 0 || lin_layer_id > 7)
        return spk_fail("cuDNN LSTM linear layer id %d is outside 0..7", lin_layer_id);
    if (hidden < 1)
        return spk_fail("hidden size %lld is not positive", (long long)hidden);
    out->layer = pseudo_layer / 2;
    out->direction = pseudo_layer % 2;
    out->recurrent = lin_layer_id >= 4;
    out->cudnn_gate = lin_layer_id % 4;
    out->onnx_gate = spk_cudnn_onnx_gate(out->cudnn_gate);
    out->first_row = out->onnx_gate * hidden;
    out->rows = hidden;
    out->bias_offset = (out->recurrent ? 4 * hidden : 0) + out->onnx_gate * hidden;
    return 0;
}

/* ---- Descriptors (no device needed) ---------------------------------------- */

typedef struct descriptors {
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t x, y;
    cudnnTensorDescriptor_t h, c;
    /* seq_major only: [B, T, in] -> [T, B, in] and [T, B, 2H] -> [B, T, 2H]. */
    cudnnTensorDescriptor_t x_from, x_to, y_from, y_to;
} descriptors;

static void descriptors_destroy(descriptors *d)
{
    if (d->rnn)
        cudnnDestroyRNNDescriptor(d->rnn);
    if (d->x)
        cudnnDestroyRNNDataDescriptor(d->x);
    if (d->y)
        cudnnDestroyRNNDataDescriptor(d->y);
    cudnnTensorDescriptor_t *tensors[] = {&d->h, &d->c, &d->x_from, &d->x_to, &d->y_from, &d->y_to};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        if (*tensors[i])
            cudnnDestroyTensorDescriptor(*tensors[i]);
    memset(d, 0, sizeof *d);
}

static int set_tensor(cudnnTensorDescriptor_t *desc, int ndim, const int *dims, const int *strides)
{
    if (spk_cudnn_check(cudnnCreateTensorDescriptor(desc), "cudnnCreateTensorDescriptor"))
        return -1;
    return spk_cudnn_check(cudnnSetTensorNdDescriptor(*desc, CUDNN_DATA_FLOAT, ndim, dims, strides),
                           "cudnnSetTensorNdDescriptor");
}

static const cudnnRNNAlgo_t cudnn_algos[SPK_CUDNN_ALGO_COUNT] = {
    [SPK_CUDNN_STANDARD] = CUDNN_RNN_ALGO_STANDARD,
    [SPK_CUDNN_PERSIST_STATIC] = CUDNN_RNN_ALGO_PERSIST_STATIC,
    [SPK_CUDNN_PERSIST_DYNAMIC] = CUDNN_RNN_ALGO_PERSIST_DYNAMIC,
    [SPK_CUDNN_PERSIST_STATIC_SMALL_H] = CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H,
};

static int descriptors_build(descriptors *d, const spk_lstm_dims *dims, const spk_cudnn_stack_options *o)
{
    memset(d, 0, sizeof *d);
    const int B = (int)o->batch, T = (int)o->steps, H = (int)dims->hidden, in = (int)dims->input;
    const int L = dims->layers;
    cudnnMathType_t math = o->math == SPK_CUDNN_MATH_TF32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    if (spk_cudnn_check(cudnnCreateRNNDescriptor(&d->rnn), "cudnnCreateRNNDescriptor"))
        goto fail;
    /* Padded I/O is what the unpacked layouts require; every length is T, so nothing is padded. */
    if (spk_cudnn_check(cudnnSetRNNDescriptor_v8(d->rnn, cudnn_algos[o->algo], CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                                 CUDNN_BIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                                 CUDNN_DATA_FLOAT, math, in, H, H, L, NULL,
                                                 CUDNN_RNN_PADDED_IO_ENABLED),
                        "cudnnSetRNNDescriptor_v8"))
        goto fail;

    int *lengths = malloc((size_t)B * sizeof *lengths);
    if (!lengths) {
        spk_fail("cudnn: out of host memory for %d sequence lengths", B);
        goto fail;
    }
    for (int b = 0; b < B; b++)
        lengths[b] = T;
    float fill = 0.0f;
    cudnnRNNDataLayout_t layout = o->layout == SPK_CUDNN_SEQ_MAJOR ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED
                                                                    : CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED;
    int rc = spk_cudnn_check(cudnnCreateRNNDataDescriptor(&d->x), "cudnnCreateRNNDataDescriptor") ||
             spk_cudnn_check(cudnnSetRNNDataDescriptor(d->x, CUDNN_DATA_FLOAT, layout, T, B, in, lengths, &fill),
                             "cudnnSetRNNDataDescriptor (x)") ||
             spk_cudnn_check(cudnnCreateRNNDataDescriptor(&d->y), "cudnnCreateRNNDataDescriptor") ||
             spk_cudnn_check(cudnnSetRNNDataDescriptor(d->y, CUDNN_DATA_FLOAT, layout, T, B, 2 * H, lengths, &fill),
                             "cudnnSetRNNDataDescriptor (y)");
    free(lengths);
    if (rc)
        goto fail;

    const int state_dims[3] = {2 * L, B, H}, state_strides[3] = {B * H, H, 1};
    if (set_tensor(&d->h, 3, state_dims, state_strides) || set_tensor(&d->c, 3, state_dims, state_strides))
        goto fail;

    if (o->layout == SPK_CUDNN_SEQ_MAJOR) {
        /* Four dimensions (a trailing 1) keep cudnnTransformTensor on its general path. */
        const int xd[4] = {T, B, in, 1}, x_from[4] = {in, T * in, 1, 1}, x_to[4] = {B * in, in, 1, 1};
        const int yd[4] = {B, T, 2 * H, 1}, y_from[4] = {2 * H, B * 2 * H, 1, 1}, y_to[4] = {T * 2 * H, 2 * H, 1, 1};
        if (set_tensor(&d->x_from, 4, xd, x_from) || set_tensor(&d->x_to, 4, xd, x_to) ||
            set_tensor(&d->y_from, 4, yd, y_from) || set_tensor(&d->y_to, 4, yd, y_to))
            goto fail;
    }
    return 0;
fail:
    descriptors_destroy(d);
    return -1;
}

/* ---- Checks ------------------------------------------------------------------ */

spk_cudnn_stack_options spk_cudnn_stack_defaults(void)
{
    spk_cudnn_stack_options o = {
        .batch = 1, .steps = 589, .algo = SPK_CUDNN_STANDARD, .layout = SPK_CUDNN_BATCH_MAJOR,
        .math = SPK_CUDNN_MATH_FP32, .stream = NULL,
    };
    return o;
}

/* Largest element count of one buffer cuDNN indexes with int32 arithmetic. */
#define INT32_LIMIT 2147483647LL

int spk_cudnn_stack_check(const spk_lstm_layer *layers, int count, const spk_cudnn_stack_options *o,
                          spk_lstm_dims *dims_out)
{
    if (!o)
        return spk_fail("cudnn stack: no options");
    if (o->algo < 0 || o->algo >= SPK_CUDNN_ALGO_COUNT)
        return spk_fail("cudnn stack: algorithm %d is not one of the %d known", (int)o->algo, SPK_CUDNN_ALGO_COUNT);
    if (o->layout != SPK_CUDNN_BATCH_MAJOR && o->layout != SPK_CUDNN_SEQ_MAJOR)
        return spk_fail("cudnn stack: layout %d is not batch_major or seq_major", (int)o->layout);
    if (o->math != SPK_CUDNN_MATH_FP32 && o->math != SPK_CUDNN_MATH_TF32)
        return spk_fail("cudnn stack: math mode %d is not one of cuDNN's (%s or %s)", (int)o->math,
                        spk_cudnn_math_name(SPK_CUDNN_MATH_FP32), spk_cudnn_math_name(SPK_CUDNN_MATH_TF32));
    if (o->batch < 1)
        return spk_fail("cudnn stack: batch must be at least 1, got %lld", (long long)o->batch);
    if (o->steps < 1)
        return spk_fail("cudnn stack: steps must be at least 1, got %lld", (long long)o->steps);
    spk_lstm_dims dims;
    if (spk_lstm_validate(layers, count, &dims))
        return -1;
    /* As the other GPU plans: non-finite weights are refused here, once,
     * rather than turning every output into NaN. */
    if (spk_lstm_check_finite(layers, count))
        return -1;
    int64_t widest = dims.input > 2 * dims.hidden ? dims.input : 2 * dims.hidden;
    if (o->batch > INT32_LIMIT || o->steps > INT32_LIMIT || 2 * dims.hidden * count > INT32_LIMIT ||
        o->batch * o->steps > INT32_LIMIT / widest)
        return spk_fail("cudnn stack: batch %lld x steps %lld x width %lld is beyond cuDNN's 32-bit sizes",
                        (long long)o->batch, (long long)o->steps, (long long)widest);
    /* cuDNN checks the configuration itself when the descriptors are set. */
    descriptors d;
    if (descriptors_build(&d, &dims, o)) {
        spk_error_prefix("cudnn %s", spk_cudnn_algo_name(o->algo));
        return -1;
    }
    descriptors_destroy(&d);
    if (dims_out)
        *dims_out = dims;
    return 0;
}

/* ---- The plan ---------------------------------------------------------------- */

struct spk_cudnn_stack {
    spk_cudnn_stack_options options; /* options.stream: retained */
    spk_lstm_dims dims;
    int device;
    descriptors desc;
    spk_storage *weights, *workspace, *reserve, *lengths;
    spk_storage *x_seq, *y_seq; /* seq_major staging, [T, B, in] and [T, B, 2H] */
    size_t weight_bytes, workspace_bytes, reserve_bytes;
};

void spk_cudnn_stack_free(spk_cudnn_stack *p)
{
    if (!p)
        return;
    descriptors_destroy(&p->desc);
    spk_storage *storages[] = {p->weights, p->workspace, p->reserve, p->lengths, p->x_seq, p->y_seq};
    for (size_t i = 0; i < sizeof storages / sizeof *storages; i++)
        if (storages[i])
            spk_storage_release(storages[i]);
    spk_stream_release(p->options.stream);
    free(p);
}

void spk_cudnn_stack_get_info(const spk_cudnn_stack *p, spk_cudnn_stack_info *out)
{
    out->algo = p->options.algo;
    out->layout = p->options.layout;
    out->math = p->options.math;
    out->batch = p->options.batch;
    out->steps = p->options.steps;
    out->dims = p->dims;
    out->device = p->device;
    out->weight_bytes = p->weight_bytes;
    out->workspace_bytes = p->workspace_bytes;
    out->reserve_bytes = p->reserve_bytes;
}

/* A contiguous host f32 copy of a layer tensor (f32 or f64, any strides). */
static spk_tensor *host_f32(const spk_tensor *t)
{
    return spk_tensor_to_dtype(t, SPK_F32);
}

/* Copies one cuDNN matrix (rows x cols, row-major, as cuDNN lays it out) and
 * its bias into the host image of the weight space. */
static int place_param(spk_cudnn_stack *p, cudnnHandle_t handle, unsigned char *image, int pseudo, int lin,
                       spk_tensor *const *W, spk_tensor *const *R, spk_tensor *const *B,
                       cudnnTensorDescriptor_t mdesc, cudnnTensorDescriptor_t bdesc)
{
    spk_cudnn_param_source src;
    if (spk_cudnn_param_source_of(pseudo, lin, p->dims.hidden, &src))
        return -1;
    void *maddr = NULL, *baddr = NULL;
    if (spk_cudnn_check(cudnnGetRNNWeightParams(handle, p->desc.rnn, pseudo, p->weight_bytes, p->weights->data, lin,
                                                mdesc, &maddr, bdesc, &baddr),
                        "cudnnGetRNNWeightParams"))
        return -1;
    const spk_tensor *M = src.recurrent ? R[src.layer] : W[src.layer];
    const int64_t cols = M->shape[2], H = p->dims.hidden;
    const int64_t expect[2] = {H * cols, H};
    cudnnTensorDescriptor_t descs[2] = {mdesc, bdesc};
    void *addrs[2] = {maddr, baddr};
    for (int k = 0; k < 2; k++) {
        cudnnDataType_t dtype;
        int nd = 0, dims[8], strides[8];
        if (!addrs[k])
            return spk_fail("cudnnGetRNNWeightParams: no %s for pseudo-layer %d, linear layer %d",
                            k ? "bias" : "matrix", pseudo, lin);
        if (spk_cudnn_check(cudnnGetTensorNdDescriptor(descs[k], 8, &dtype, &nd, dims, strides),
                            "cudnnGetTensorNdDescriptor"))
            return -1;
        int64_t numel = 1;
        for (int i = 0; i < nd; i++)
            numel *= dims[i];
        /* Row-major and dense, as ONNX rows are: the innermost stride is 1 and numel matches. */
        if (dtype != CUDNN_DATA_FLOAT || numel != expect[k] || (nd > 0 && strides[nd - 1] != 1))
            return spk_fail("cudnnGetRNNWeightParams: pseudo-layer %d, linear layer %d: %s has %lld elements, "
                            "expected %lld", pseudo, lin, k ? "bias" : "matrix", (long long)numel,
                            (long long)expect[k]);
        ptrdiff_t at = (unsigned char *)addrs[k] - (unsigned char *)p->weights->data;
        if (at < 0 || (size_t)at + (size_t)expect[k] * sizeof(float) > p->weight_bytes)
            return spk_fail("cudnnGetRNNWeightParams: pseudo-layer %d, linear layer %d lies outside the weight space",
                            pseudo, lin);
        float *dst = (float *)(image + at);
        if (k == 0) {
            const float *m = spk_tensor_data(M);
            memcpy(dst, m + ((int64_t)src.direction * 4 * H + src.first_row) * cols,
                   (size_t)(H * cols) * sizeof(float));
        } else {
            const float *b = spk_tensor_data(B[src.layer]);
            memcpy(dst, b + (int64_t)src.direction * 8 * H + src.bias_offset, (size_t)H * sizeof(float));
        }
    }
    return 0;
}

/* Fills cuDNN's weight space from the ONNX layers (one host image, one copy). */
static int place_weights(spk_cudnn_stack *p, cudnnHandle_t handle, const spk_lstm_layer *layers, spk_stream *s)
{
    int L = p->dims.layers, rc = -1;
    spk_tensor **W = calloc((size_t)L * 3, sizeof *W), **R = W ? W + L : NULL, **B = W ? W + 2 * L : NULL;
    unsigned char *image = calloc(1, p->weight_bytes ? p->weight_bytes : 1);
    cudnnTensorDescriptor_t mdesc = NULL, bdesc = NULL;
    if (!W || !image) {
        spk_fail("cudnn: out of host memory for a %zu-byte weight image", p->weight_bytes);
        goto done;
    }
    for (int k = 0; k < L; k++)
        if (!(W[k] = host_f32(layers[k].W)) || !(R[k] = host_f32(layers[k].R)) || !(B[k] = host_f32(layers[k].B)))
            goto done;
    if (spk_cudnn_check(cudnnCreateTensorDescriptor(&mdesc), "cudnnCreateTensorDescriptor") ||
        spk_cudnn_check(cudnnCreateTensorDescriptor(&bdesc), "cudnnCreateTensorDescriptor"))
        goto done;
    for (int pseudo = 0; pseudo < 2 * L; pseudo++)
        for (int lin = 0; lin < 8; lin++)
            if (place_param(p, handle, image, pseudo, lin, W, R, B, mdesc, bdesc))
                goto done;
    if (spk_memcpy_h2d(p->weights->data, image, p->weight_bytes, s))
        goto done;
    spk_storage_use(p->weights, s);
    rc = 0;
done:
    if (mdesc)
        cudnnDestroyTensorDescriptor(mdesc);
    if (bdesc)
        cudnnDestroyTensorDescriptor(bdesc);
    for (int k = 0; W && k < 3 * L; k++)
        spk_tensor_free(W[k]);
    free(W);
    /* The copy has left `image` once spk_memcpy_h2d returns (pageable source), but
     * wait anyway so no set-up work is still queued when the plan is handed out. */
    if (rc == 0)
        rc = spk_stream_synchronize(s);
    free(image);
    return rc;
}

static spk_storage *device_buffer(size_t bytes, spk_stream *s)
{
    return bytes ? spk_device_storage_new(bytes, s) : NULL;
}

static int setup(spk_cudnn_stack *p, const spk_lstm_layer *layers, spk_stream *s)
{
    cudnnHandle_t handle;
    if (spk_cudnn_handle(s, &handle))
        return -1;
    if (p->options.algo == SPK_CUDNN_PERSIST_DYNAMIC &&
        spk_cudnn_check(cudnnBuildRNNDynamic(handle, p->desc.rnn, (int)p->options.batch), "cudnnBuildRNNDynamic"))
        return -1;
    if (spk_cudnn_check(cudnnGetRNNWeightSpaceSize(handle, p->desc.rnn, &p->weight_bytes),
                        "cudnnGetRNNWeightSpaceSize") ||
        spk_cudnn_check(cudnnGetRNNTempSpaceSizes(handle, p->desc.rnn, CUDNN_FWD_MODE_INFERENCE, p->desc.x,
                                                  &p->workspace_bytes, &p->reserve_bytes),
                        "cudnnGetRNNTempSpaceSizes"))
        return -1;
    const int64_t B = p->options.batch, T = p->options.steps, H = p->dims.hidden, in = p->dims.input;
    if (!(p->weights = device_buffer(p->weight_bytes, s)))
        return -1;
    if (p->workspace_bytes && !(p->workspace = device_buffer(p->workspace_bytes, s)))
        return -1;
    if (p->reserve_bytes && !(p->reserve = device_buffer(p->reserve_bytes, s)))
        return -1;
    if (!(p->lengths = device_buffer((size_t)B * sizeof(int32_t), s)))
        return -1;
    if (p->options.layout == SPK_CUDNN_SEQ_MAJOR &&
        (!(p->x_seq = device_buffer((size_t)(B * T * in) * sizeof(float), s)) ||
         !(p->y_seq = device_buffer((size_t)(B * T * 2 * H) * sizeof(float), s))))
        return -1;

    int32_t *lengths = malloc((size_t)B * sizeof *lengths);
    if (!lengths)
        return spk_fail("cudnn: out of host memory for %lld sequence lengths", (long long)B);
    for (int64_t b = 0; b < B; b++)
        lengths[b] = (int32_t)T;
    int rc = spk_memcpy_h2d(p->lengths->data, lengths, (size_t)B * sizeof *lengths, s);
    spk_storage_use(p->lengths, s);
    if (rc == 0)
        rc = place_weights(p, handle, layers, s); /* waits for s, so `lengths` has been read */
    free(lengths);
    return rc;
}

/* One forward pass on zeros, waited for: cuDNN reports an unsupported
 * algorithm and shape at cudnnRNNForward at the latest. */
static int probe(spk_cudnn_stack *p, spk_stream *s)
{
    const int64_t xs[3] = {p->options.batch, p->options.steps, p->dims.input};
    const int64_t ys[3] = {p->options.batch, p->options.steps, 2 * p->dims.hidden};
    spk_tensor *x = spk_device_tensor_new(SPK_F32, 3, xs, s);
    spk_tensor *y = x ? spk_device_tensor_new(SPK_F32, 3, ys, s) : NULL;
    int rc = y ? spk_cudnn_stack_forward_into(p, x, y, s) : -1;
    if (rc == 0)
        rc = spk_stream_synchronize(s);
    spk_tensor_free(x);
    spk_tensor_free(y);
    return rc;
}

spk_cudnn_stack *spk_cudnn_stack_new(const spk_lstm_layer *layers, int count, const spk_cudnn_stack_options *o)
{
    spk_lstm_dims dims;
    if (spk_cudnn_stack_check(layers, count, o, &dims))
        return NULL;
    if (spk_cuda_require())
        return NULL;
    spk_stream *s = spk_stream_or_default(o->stream);
    if (!s)
        return NULL;
    spk_cudnn_stack *p = calloc(1, sizeof *p);
    if (!p)
        return spk_fail_null("cudnn: out of host memory for a plan");
    p->options = *o;
    p->options.stream = s;
    spk_stream_retain(s);
    p->dims = dims;
    p->device = spk_stream_device(s);
    if (spk_device_set(p->device) || descriptors_build(&p->desc, &dims, o) || setup(p, layers, s) || probe(p, s)) {
        spk_error_prefix("cudnn %s (batch %lld, steps %lld, input %lld, hidden %lld, layers %d, %s, %s)",
                         spk_cudnn_algo_name(o->algo), (long long)o->batch, (long long)o->steps,
                         (long long)dims.input, (long long)dims.hidden, dims.layers,
                         spk_cudnn_layout_name(o->layout), spk_cudnn_math_name(o->math));
        spk_cudnn_stack_free(p);
        return NULL;
    }
    return p;
}

/* ---- Forward ----------------------------------------------------------------- */

static int check_shape(const spk_tensor *t, const char *name, int64_t b, int64_t steps, int64_t width)
{
    char got[128];
    if (!t)
        return spk_fail("cudnn stack: %s is missing", name);
    if (t->dtype != SPK_F32)
        return spk_fail("cudnn stack: %s has dtype %s, expected f32", name, spk_dtype_name(t->dtype));
    if (t->ndim != 3 || t->shape[0] != b || t->shape[1] != steps || t->shape[2] != width)
        return spk_fail("cudnn stack: %s has shape %s, expected [%lld, %lld, %lld]", name,
                        spk_shape_string(t, got, sizeof got), (long long)b, (long long)steps, (long long)width);
    return 0;
}

int spk_cudnn_stack_check_io(const spk_cudnn_stack *p, const spk_tensor *x, const spk_tensor *y)
{
    const int64_t B = p->options.batch, T = p->options.steps;
    if (check_shape(x, "x", B, T, p->dims.input))
        return -1;
    return y ? check_shape(y, "y", B, T, 2 * p->dims.hidden) : 0;
}

static int check_on_device(const spk_cudnn_stack *p, const spk_tensor *t, const char *name)
{
    if (!spk_tensor_is_device(t) || t->storage->device != p->device)
        return spk_fail("cudnn stack: %s must be on device %d (the plan's)", name, p->device);
    if (!spk_tensor_is_contiguous(t))
        return spk_fail("cudnn stack: %s must be contiguous", name);
    return 0;
}

/* dst = src through two strided descriptors of the same dims (a transpose).
 * cudnnTransformTensor is deprecated in cuDNN 9 but still the one-call,
 * stream-ordered (so capturable) way to do this without a kernel of our own. */
static int transform(cudnnHandle_t handle, cudnnTensorDescriptor_t from, const void *src,
                     cudnnTensorDescriptor_t to, void *dst, const char *what)
{
    const float one = 1.0f, zero = 0.0f;
    char label[96];
    snprintf(label, sizeof label, "cudnnTransformTensor (%s)", what);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    cudnnStatus_t st = cudnnTransformTensor(handle, &one, from, src, &zero, to, dst);
#pragma GCC diagnostic pop
    return spk_cudnn_check(st, label);
}

static int forward_into(spk_cudnn_stack *p, const spk_tensor *x, spk_tensor *y, spk_stream *s)
{
    if (spk_cudnn_stack_check_io(p, x, y) || check_on_device(p, x, "x") || check_on_device(p, y, "y"))
        return -1;
    if (!s)
        s = p->options.stream;
    if (spk_stream_device(s) != p->device)
        return spk_fail("cudnn stack: the stream is on device %d, the plan on device %d", spk_stream_device(s),
                        p->device);
    cudnnHandle_t handle;
    if (spk_cudnn_handle(s, &handle))
        return -1;
    const void *xin = spk_tensor_data(x);
    void *yout = spk_tensor_data(y);
    if (p->options.layout == SPK_CUDNN_SEQ_MAJOR) {
        if (transform(handle, p->desc.x_from, xin, p->desc.x_to, p->x_seq->data, "x to seq_major"))
            return -1;
        xin = p->x_seq->data;
        yout = p->y_seq->data;
    }
    if (spk_cudnn_check(cudnnRNNForward(handle, p->desc.rnn, CUDNN_FWD_MODE_INFERENCE, p->lengths->data, p->desc.x,
                                        xin, p->desc.y, yout, p->desc.h, NULL, NULL, p->desc.c, NULL, NULL,
                                        p->weight_bytes, p->weights->data, p->workspace_bytes,
                                        p->workspace ? p->workspace->data : NULL, p->reserve_bytes,
                                        p->reserve ? p->reserve->data : NULL),
                        "cudnnRNNForward"))
        return -1;
    if (p->options.layout == SPK_CUDNN_SEQ_MAJOR &&
        transform(handle, p->desc.y_from, p->y_seq->data, p->desc.y_to, spk_tensor_data(y), "y from seq_major"))
        return -1;
    /* Keep every buffer alive until s (or a graph captured from it) is done with it. */
    spk_storage *used[] = {x->storage, y->storage, p->weights, p->workspace, p->reserve,
                           p->lengths, p->x_seq, p->y_seq};
    for (size_t i = 0; i < sizeof used / sizeof *used; i++)
        if (used[i])
            spk_storage_use(used[i], s);
    return 0;
}

int spk_cudnn_stack_forward_into(spk_cudnn_stack *p, const spk_tensor *x, spk_tensor *y, spk_stream *s)
{
    /* cudnnRNNForward runs every layer in one call: one range for the pass */
    spk_nvtx_pushf("forward pass: cudnn %s", algo_names[p->options.algo]);
    int rc = forward_into(p, x, y, s);
    spk_nvtx_pop();
    return rc;
}

spk_tensor *spk_cudnn_stack_forward(spk_cudnn_stack *p, const spk_tensor *x, spk_stream *s)
{
    if (spk_cudnn_stack_check_io(p, x, NULL))
        return NULL;
    bool host = spk_tensor_is_host(x);
    if (!host && check_on_device(p, x, "x"))
        return NULL;
    if (!s)
        s = p->options.stream;
    if (spk_device_set(p->device))
        return NULL;
    const int64_t shape[3] = {p->options.batch, p->options.steps, 2 * p->dims.hidden};
    spk_tensor *xd = host ? spk_tensor_to_device(x, s) : NULL;
    spk_tensor *y = (!host || xd) ? spk_device_tensor_new(SPK_F32, 3, shape, s) : NULL;
    spk_tensor *out = NULL;
    if (y && spk_cudnn_stack_forward_into(p, host ? xd : x, y, s) == 0)
        out = host ? spk_tensor_to_host(y, s) : y;
    if (out != y)
        spk_tensor_free(y);
    spk_tensor_free(xd);
    return out;
}

/* ---- Which algorithms work -------------------------------------------------- */

int spk_cudnn_algorithms(const spk_lstm_layer *layers, int count, const spk_cudnn_stack_options *options,
                         spk_cudnn_algo_result out[SPK_CUDNN_ALGO_COUNT])
{
    if (!options)
        return spk_fail("cudnn algorithms: no options");
    spk_cudnn_stack_options o = *options;
    o.algo = SPK_CUDNN_STANDARD;
    if (spk_cudnn_stack_check(layers, count, &o, NULL) || spk_cuda_require())
        return -1;
    for (int a = 0; a < SPK_CUDNN_ALGO_COUNT; a++) {
        o.algo = (spk_cudnn_algo)a;
        out[a].algo = o.algo;
        spk_clear_error();
        spk_cudnn_stack *p = spk_cudnn_stack_new(layers, count, &o);
        out[a].ok = p != NULL;
        snprintf(out[a].reason, sizeof out[a].reason, "%s", p ? "" : spk_last_error());
        spk_cudnn_stack_free(p);
    }
    spk_clear_error();
    return 0;
}
