/* What the GPU stack plans share (persistent.c, cluster.c): the finite check
 * of host weights, the packed layers on the device, the cuBLAS input
 * projections of a layer into the [2, B*T, 4H] gates buffer, the checks a
 * plan makes first, its buffers, the layer loop of a forward pass, and the
 * forward and time drivers.
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

/* How a plan's recurrence kernel takes its weights: the gate order of the
 * packed rows and their layout (lstm.h: units, row u*4 + p, or rows, row
 * p*H + u). W, R, the summed bias and so the input projections' gates all
 * follow it. */
typedef struct spk_lstm_packing {
    char order[5]; /* a gate order (lstm.h) */
    spk_lstm_layout layout;
} spk_lstm_packing;
/* The built-in kernels' packing: SPK_GATES_PACKED, units. */
spk_lstm_packing spk_lstm_packing_builtin(void);
/* Checks the order (spk_lstm_gate_order_check) and the layout. */
int spk_lstm_packing_check(const spk_lstm_packing *packing);

/* One layer packed for a recurrence kernel (spk_lstm_packing), f32 on the
 * device. */
typedef struct spk_lstm_device_layer {
    int64_t input;
    spk_tensor *w;    /* [2, 4H, input] */
    spk_tensor *r;    /* [2, 4H, H] */
    spk_tensor *bias; /* [2, 4H]: Wb + Rb */
    /* math 3xtf32 where the plan keeps its weights split
     * (spk_gemm_3xtf32_split_weights): w's TF32 parts (spk_tf32_split), made
     * once; else NULL */
    spk_tensor *w_hi, *w_lo;
    /* the same where the plan's form is SPK_3XTF32_TMA_F16 and the layer is
     * not the first (its input is the layer before's h, |h| <= 1): w's FP16
     * parts (spk_f16_split); else empty */
    spk_f16_parts w16;
} spk_lstm_device_layer;

/* Packs and uploads `count` layers on s; NULL on failure (the message names
 * the layer). */
spk_lstm_device_layer *spk_lstm_device_layers_new(const spk_lstm_layer *layers, int count,
                                                  const spk_lstm_packing *packing, spk_stream *s);
void spk_lstm_device_layers_free(spk_lstm_device_layer *layers, int count);

/* gates[d] = a · W[d]ᵀ for both directions (spk_gemm on s, in `math`:
 * SPK_MATH_FP32 strict, SPK_MATH_TF32 tensor cores, or SPK_MATH_3XTF32 split
 * TF32 on tensor cores with FP32 sums, from w16 (a, the layer before's h,
 * scaled by h's bound: spk_f16_exponent_of(1)) or else w_hi and w_lo where
 * the layer has them and a suits their kernel): a is the layer's
 * input as a device [B*T, input] view, gates [2, B*T, 4H]. */
int spk_lstm_project(const spk_lstm_device_layer *layer, const spk_tensor *a, spk_tensor *gates, spk_math_mode math,
                     spk_stream *s);

/* The projection math a GPU stack plan accepts: "fp32" (default), "tf32" or
 * "3xtf32"; fails naming them otherwise. Needs no device. */
int spk_lstm_check_math(spk_math_mode math);
/* The math's name (spk_math_mode_name: what spk_math_mode_from_name reads). */
const char *spk_lstm_math_name(spk_math_mode math);
/* What a plan's description adds for its math: "" for fp32, else
 * ", tf32 projections" or ", 3xtf32 projections" (spk.lstm.math_suffix says
 * the same in Lua). */
const char *spk_lstm_math_suffix(spk_math_mode math);

/* Shape and dtype of a forward's x: f32 [batch, steps, input]. */
int spk_lstm_check_x(int64_t batch, int64_t steps, int64_t input, const spk_tensor *x);

/* The stack and forward shape a GPU stack plan reports (its info's `shape`). */
typedef struct spk_lstm_gpu_shape {
    int64_t layers, hidden, input, batch, steps;
    spk_math_mode math; /* the input projections' math */
} spk_lstm_gpu_shape;

/* The checks every GPU stack plan makes first, in this order: the layers
 * (spk_lstm_validate), batch and steps at least 1, the layers' hidden size
 * against the kernel variant's. Fills *shape (math as given, not checked).
 * Needs no device. */
int spk_lstm_gpu_shape_check(const spk_lstm_layer *layers, int count, int64_t batch, int64_t steps,
                             int variant_hidden, spk_math_mode math, spk_lstm_gpu_shape *shape);

/* The device memory every GPU stack plan holds: its packed layers, the gates
 * [2, B*T, 4H] of a layer's input projections and the output [B, T, 2H]
 * (the next layer's input). */
typedef struct spk_lstm_gpu_buffers {
    spk_lstm_device_layer *layers;
    int count;
    spk_tensor *gates;
    spk_tensor *output;
} spk_lstm_gpu_buffers;

/* Uploads the layers in `packing`, then allocates in this order the gates,
 * the plan's own `*words` (words_dtype [words_numel]: its kernel's status
 * word and exchange state) and the output on s, and waits for s. On failure
 * the caller frees what was made (spk_lstm_gpu_buffers_free and *words). */
int spk_lstm_gpu_buffers_new(spk_lstm_gpu_buffers *b, const spk_lstm_layer *layers, const spk_lstm_gpu_shape *shape,
                             const spk_lstm_packing *packing, spk_dtype words_dtype, int64_t words_numel,
                             spk_tensor **words, spk_stream *s);
/* Frees the layers, the gates and the output (b itself belongs to the plan). */
void spk_lstm_gpu_buffers_free(spk_lstm_gpu_buffers *b);

/* An enqueue's x: the forward's shape and dtype, contiguous on the device. */
int spk_lstm_gpu_check_enqueue(const spk_lstm_gpu_shape *shape, const spk_tensor *x);
/* Enqueues the layers in order on s: a layer's input projections into the
 * gates (from x for the first layer, else from the output), then
 * `recur(plan, layer)`, the plan's recurrence launches, which write the
 * output. Errors name the layer's projection; recur names its own. */
int spk_lstm_gpu_enqueue_layers(const spk_lstm_gpu_buffers *b, const spk_lstm_gpu_shape *shape, const spk_tensor *x,
                                spk_stream *s, int (*recur)(void *plan, int layer), void *plan);

/* A status code a plan's kernel reports and what it means. */
typedef struct spk_lstm_gpu_status {
    unsigned code;
    const char *message; /* after "lstm stack: " */
} spk_lstm_gpu_status;
/* 0 for code 0; else fails with the message of `code` in known[count], or
 * "lstm stack: the <kernel> kernel reported status <code>". */
int spk_lstm_gpu_check_status(unsigned code, const spk_lstm_gpu_status *known, int count, const char *kernel);

/* A plan as forward and time drive it: `enqueue` puts one forward pass of a
 * contiguous device x on `stream` (result in `output`), `finish` waits for
 * the plan's streams and reports what the kernels flagged. */
typedef struct spk_lstm_gpu_runner {
    void *plan;
    const spk_lstm_gpu_shape *shape;
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
