/* LSTM stacks in ONNX models: finding the chain of LSTM nodes in a model's
 * main graph and returning its layers in spk's layout (which is ONNX's W, R
 * and B per layer), and writing a stack as an ONNX model.
 *
 * Reading. Every LSTM node of the main graph belongs to one chain: layer k+1's
 * input X is layer k's output Y through Transpose and Reshape nodes (also
 * Identity, Dropout without training_mode) that bring Y's [T, 2, B, H]
 * (layout 0; [B, T, 2, H] with layout 1) to [T, B, 2H] ([B, T, 2H]) with the
 * forward direction's features first. Each node must be what spk computes:
 * direction "bidirectional", default activations (Sigmoid, Tanh, Tanh), no
 * clip, input_forget 0, no sequence_lens, and initial_h, initial_c and P
 * absent or provably zero. W, R and B may be initializers, or built from them
 * by Identity, Cast, Slice, Concat, Split, Squeeze, Unsqueeze, Reshape and
 * Transpose (how torch.export-based exporters reorder PyTorch's gates); the
 * integer inputs of those nodes may come from Shape, Gather, Slice, Concat and
 * arithmetic over shapes, followed symbolically. Folding allocates at most
 * 16 times the bytes of the tensors it reads, plus 16 MiB.
 *
 * Writing. The model takes x [batch, steps, in] and returns y [batch, steps,
 * 2H], as spk.lstm.reference does: Transpose to [steps, batch, in], one
 * bidirectional LSTM node per layer with Transpose [0, 2, 1, 3] and Reshape
 * [0, 0, -1] after it, and Transpose back. Weights are FLOAT (f32 layers) or
 * DOUBLE (f64 layers); IR version 8, opset 14. */
#ifndef SPK_LSTM_ONNX_STACK_H
#define SPK_LSTM_ONNX_STACK_H

#include "core/onnx.h"
#include "lstm/lstm.h"

#define SPK_LSTM_ONNX_MAX_LAYERS 64

/* The stack in `model`: `out` receives *count (at most `max`) layers of owned
 * tensors, validated as a stack (spk_lstm_validate). */
int spk_lstm_from_onnx(spk_onnx_model *model, spk_lstm_weights *out, int max, int *count);
/* The same for the file at `path` (external data beside it). */
int spk_lstm_load_onnx(const char *path, spk_lstm_weights *out, int max, int *count);
/* Writes the stack as an ONNX model. */
int spk_lstm_save_onnx(const char *path, const spk_lstm_layer *layers, int count);

#endif
