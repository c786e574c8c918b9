/* What the GPU stack plans share (persistent.c, cluster.c): the finite check
 * of host weights, the packed layers on the device, and the cuBLAS input
 * projections of a layer into the [2, B*T, 4H] gates buffer.
 *
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_DEVICE_LAYERS_H
#define SPK_LSTM_DEVICE_LAYERS_H

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "lstm/lstm.h"

/* Fails on the first NaN or infinity: "layer 2: W has a non-finite value
 * (nan) at flat index 5". Needs no device. */
int spk_lstm_check_finite(const spk_lstm_layer *layers, int count);

/* One layer packed for the recurrence kernels (gates [i, f, c, o] adjacent per
 * unit, see spk_lstm_pack_directions), f32 on the device. */
typedef struct spk_lstm_device_layer {
    int64_t input;
    spk_tensor *w;    /* [2, 4H, input] */
    spk_tensor *r;    /* [2, 4H, H] */
    spk_tensor *bias; /* [2, 4H]: Wb + Rb */
} spk_lstm_device_layer;

/* Packs and uploads `count` layers on s; NULL on failure (the message names
 * the layer). */
spk_lstm_device_layer *spk_lstm_device_layers_new(const spk_lstm_layer *layers, int count, spk_stream *s);
void spk_lstm_device_layers_free(spk_lstm_device_layer *layers, int count);

/* gates[d] = a · W[d]ᵀ for both directions (cuBLAS on s, in `math`:
 * SPK_MATH_FP32 strict or SPK_MATH_TF32 tensor cores): a is the layer's
 * input as a device [B*T, input] view, gates [2, B*T, 4H]. */
int spk_lstm_project(const spk_lstm_device_layer *layer, const spk_tensor *a, spk_tensor *gates, spk_math_mode math,
                     spk_stream *s);

/* The projection math a GPU stack plan accepts: "fp32" (default) or "tf32";
 * fails naming both otherwise. Needs no device. */
int spk_lstm_check_math(spk_math_mode math);
/* "fp32" or "tf32" (the names spk_math_mode_from_name reads). */
const char *spk_lstm_math_name(spk_math_mode math);

/* Shape and dtype of a forward's x: f32 [batch, steps, input]. */
int spk_lstm_check_x(int64_t batch, int64_t steps, int64_t input, const spk_tensor *x);

/* A plan as forward and time drive it: `enqueue` puts one forward pass of a
 * contiguous device x on `stream` (result in `output`), `finish` waits for
 * the plan's streams and reports what the kernels flagged. */
typedef struct spk_lstm_gpu_runner {
    void *plan;
    int64_t batch, steps, input;
    spk_stream *stream;
    spk_tensor *output; /* [batch, steps, 2H] */
    int (*enqueue)(void *plan, const spk_tensor *x);
    int (*finish)(void *plan);
} spk_lstm_gpu_runner;

/* x host or device f32 (any strides): a new [B, T, 2H] tensor on x's side. */
spk_tensor *spk_lstm_gpu_forward(const spk_lstm_gpu_runner *r, const spk_tensor *x);
/* Captures one forward on x into a CUDA graph, replays it `warmup` times,
 * then `rounds` times, each timed with events: ms[rounds]. */
int spk_lstm_gpu_time(const spk_lstm_gpu_runner *r, const spk_tensor *x, int rounds, int warmup, double *ms);

#endif
