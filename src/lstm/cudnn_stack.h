/* The cuDNN backend of the LSTM stack: a plan running a bidirectional
 * multi-layer LSTM through cuDNN 9's cudnnRNNForward (inference mode, double
 * bias, linear input, zero initial h and c, FP32 data), from layers in ONNX
 * layout (lstm.h).
 *
 * A plan fixes the layers, batch, steps, algorithm, data layout and math
 * mode. At creation it places the weights in cuDNN's weight space (one
 * buffer), allocates the workspace, reserve space and device sequence lengths
 * once, builds PERSIST_DYNAMIC for the batch, and runs one forward pass on a
 * zero input and waits for it, so an algorithm cuDNN refuses for the shape
 * fails here, with a message naming the algorithm, the shape and cuDNN's
 * status, rather than at the first forward.
 *
 * Forward passes are only enqueued on a stream: no allocation, host copy or
 * synchronisation happens in spk_cudnn_stack_forward_into, so it can be
 * captured into a CUDA graph.
 *
 * Layouts: the plan's input and output are always [B, T, in] and [B, T, 2H].
 * "batch_major" hands them to cuDNN as they are
 * (CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED). "seq_major" runs cuDNN on
 * [T, B, *] buffers (SEQ_MAJOR_UNPACKED) held by the plan, transposing in and
 * out with cudnnTransformTensor; those two copies are part of its time.
 *
 * Math: "fp32" is CUDNN_FMA_MATH (FP32 products and sums, no TF32: what
 * PyTorch uses when TF32 is off); "tf32" is CUDNN_TENSOR_OP_MATH (tensor
 * cores with TF32 inputs; ALLOW_CONVERSION is not used because it also
 * permits FP16 down-conversion).
 *
 * Conventions as in core/tensor.h: -1/NULL on failure, the message in
 * spk_last_error(). Everything that needs no device is checked before any
 * CUDA or cuDNN call. */
#ifndef SPK_LSTM_CUDNN_STACK_H
#define SPK_LSTM_CUDNN_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "lstm/lstm.h"

/* ---- Names ---------------------------------------------------------------- */

/* In the order of cuDNN's cudnnRNNAlgo_t. */
typedef enum {
    SPK_CUDNN_STANDARD = 0,
    SPK_CUDNN_PERSIST_STATIC = 1,
    SPK_CUDNN_PERSIST_DYNAMIC = 2,
    SPK_CUDNN_PERSIST_STATIC_SMALL_H = 3,
    SPK_CUDNN_ALGO_COUNT = 4
} spk_cudnn_algo;

typedef enum { SPK_CUDNN_BATCH_MAJOR = 0, SPK_CUDNN_SEQ_MAJOR = 1 } spk_cudnn_layout;
typedef enum { SPK_CUDNN_MATH_FP32 = 0, SPK_CUDNN_MATH_TF32 = 1 } spk_cudnn_math;

/* "standard", "persist_static", "persist_dynamic", "persist_static_small_h". */
const char *spk_cudnn_algo_name(spk_cudnn_algo algo);
/* 0, or -1 with a message listing the known names. */
int spk_cudnn_algo_from_name(const char *name, spk_cudnn_algo *out);
const char *spk_cudnn_layout_name(spk_cudnn_layout layout); /* "batch_major", "seq_major" */
int spk_cudnn_layout_from_name(const char *name, spk_cudnn_layout *out);
const char *spk_cudnn_math_name(spk_cudnn_math math);       /* the maths of cuda/math_modes.h cuDNN has */
int spk_cudnn_math_from_name(const char *name, spk_cudnn_math *out);

/* ---- Where cuDNN's parameters come from (pure, no device) ----------------- */

/* The ONNX gate block (0..3 in ONNX order i, o, f, c) holding cuDNN's gate
 * `cudnn_gate` (0..3 in cuDNN order i, f, g, o): i <- 0, f <- 2, g <- 3,
 * o <- 1. -1 for a gate outside 0..3. */
int spk_cudnn_onnx_gate(int cudnn_gate);

/* What cudnnGetRNNWeightParams(pseudo_layer, lin_layer_id) addresses, in the
 * ONNX tensors of one layer with hidden size H. pseudo_layer = 2*layer +
 * direction; lin_layer_id 0-3 are the input matrices of gates i, f, g, o (from
 * W, biases from Wb), 4-7 the recurrent ones (from R, biases from Rb). */
typedef struct spk_cudnn_param_source {
    int layer;           /* 0-based */
    int direction;       /* 0 forward, 1 reverse */
    bool recurrent;      /* R and Rb rather than W and Wb */
    int cudnn_gate;      /* 0..3: i, f, g, o */
    int onnx_gate;       /* 0..3: i, o, f, c */
    int64_t first_row;   /* of W[direction] or R[direction]: onnx_gate * H */
    int64_t rows;        /* H */
    int64_t bias_offset; /* into B[direction]: (recurrent ? 4H : 0) + onnx_gate * H */
} spk_cudnn_param_source;

int spk_cudnn_param_source_of(int pseudo_layer, int lin_layer_id, int64_t hidden,
                              spk_cudnn_param_source *out);

/* ---- The plan ------------------------------------------------------------- */

typedef struct spk_cudnn_stack_options {
    int64_t batch;          /* >= 1 */
    int64_t steps;          /* >= 1 */
    spk_cudnn_algo algo;    /* default SPK_CUDNN_STANDARD */
    spk_cudnn_layout layout;/* default SPK_CUDNN_BATCH_MAJOR */
    spk_cudnn_math math;    /* default SPK_CUDNN_MATH_FP32 */
    spk_stream *stream;     /* where set-up and (by default) forward run; NULL: default stream */
} spk_cudnn_stack_options;

/* batch 1, steps 589, standard, batch_major, fp32, default stream. */
spk_cudnn_stack_options spk_cudnn_stack_defaults(void);

/* Checks the layers (spk_lstm_validate), the options and the sizes cuDNN
 * takes as int32, and builds cuDNN's descriptors (which needs no device) to
 * let cuDNN check the configuration. Touches no device. `dims` may be NULL. */
int spk_cudnn_stack_check(const spk_lstm_layer *layers, int count, const spk_cudnn_stack_options *options,
                          spk_lstm_dims *dims);

typedef struct spk_cudnn_stack spk_cudnn_stack;

/* spk_cudnn_stack_check, then (on the current device) the set-up described
 * above. Weights are host f32 or f64 tensors; they are copied (as f32). */
spk_cudnn_stack *spk_cudnn_stack_new(const spk_lstm_layer *layers, int count,
                                     const spk_cudnn_stack_options *options);
void spk_cudnn_stack_free(spk_cudnn_stack *plan); /* NULL is fine */

typedef struct spk_cudnn_stack_info {
    spk_cudnn_algo algo;
    spk_cudnn_layout layout;
    spk_cudnn_math math;
    int64_t batch, steps;
    spk_lstm_dims dims;
    int device;
    size_t weight_bytes, workspace_bytes, reserve_bytes;
} spk_cudnn_stack_info;
void spk_cudnn_stack_get_info(const spk_cudnn_stack *plan, spk_cudnn_stack_info *out);

/* Checks that x is an f32 [batch, steps, input] tensor (any device), and y,
 * when not NULL, an f32 [batch, steps, 2H] one. Needs no device. */
int spk_cudnn_stack_check_io(const spk_cudnn_stack *plan, const spk_tensor *x, const spk_tensor *y);

/* Enqueues the stack on s (NULL: the plan's stream): x and y contiguous f32
 * device tensors on the plan's device, shapes as in check_io. Capturable. */
int spk_cudnn_stack_forward_into(spk_cudnn_stack *plan, const spk_tensor *x, spk_tensor *y, spk_stream *s);

/* x on the host or the plan's device; returns a new [B, T, 2H] f32 tensor on
 * x's side (a host result waits for s). */
spk_tensor *spk_cudnn_stack_forward(spk_cudnn_stack *plan, const spk_tensor *x, spk_stream *s);

/* ---- Which algorithms work -------------------------------------------------- */

typedef struct spk_cudnn_algo_result {
    spk_cudnn_algo algo;
    bool ok;
    char reason[1024]; /* "" when ok, else why the plan could not be built */
} spk_cudnn_algo_result;

/* Builds a plan for every algorithm with the other options of `options`
 * (algo ignored) and records which cuDNN accepts on the current device.
 * Fails (rather than listing four failures) when the request itself is
 * invalid or there is no device. */
int spk_cudnn_algorithms(const spk_lstm_layer *layers, int count, const spk_cudnn_stack_options *options,
                         spk_cudnn_algo_result out[SPK_CUDNN_ALGO_COUNT]);

#endif
