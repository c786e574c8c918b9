/* The LSTM stack on the CPU: layer validation, gate packing, the reference
 * forward pass, and the tile schedules of the persistent kernel.
 *
 * Weights are in ONNX LSTM layout, per layer and both
 * directions stacked: W [2, 4H, in], R [2, 4H, H], B [2, 8H] (the 4H input
 * biases Wb, then the 4H recurrent biases Rb). Gate row blocks are in ONNX
 * order i, o, f, c: row g*H + u is gate g of hidden unit u.
 *
 * Conventions as in core/tensor.h: 0-based indices, -1/NULL on failure with the
 * message in spk_last_error(). Messages name layers from 1 (as Lua scripts
 * count them), e.g. "layer 2: R has shape [2, 512, 64], expected [2, 512, 128]". */
#ifndef SPK_LSTM_H
#define SPK_LSTM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/cpu.h"
#include "core/tensor.h"

/* ---- Layers ------------------------------------------------------------- */

/* One layer's weights, borrowed (not owned). f32 or f64. */
typedef struct spk_lstm_layer {
    const spk_tensor *W; /* [2, 4H, in] */
    const spk_tensor *R; /* [2, 4H, H] */
    const spk_tensor *B; /* [2, 8H] */
} spk_lstm_layer;

typedef struct spk_lstm_dims {
    int layers;
    int64_t hidden; /* H */
    int64_t input;  /* in of layer 1; every later layer takes 2H */
} spk_lstm_dims;

/* Checks the shapes and dtypes of a stack of `count` layers (count >= 1) and
 * derives H from layer 1's R and `in` from its W. */
int spk_lstm_validate(const spk_lstm_layer *layers, int count, spk_lstm_dims *out);

/* Owned tensors of one layer (spk_lstm_weights_free releases them). */
typedef struct spk_lstm_weights {
    spk_tensor *W, *R, *B;
} spk_lstm_weights;
void spk_lstm_weights_free(spk_lstm_weights *w);

/* Reproducible initialisation like PyTorch's nn.LSTM default: every value
 * uniform in [-scale/sqrt(H), scale/sqrt(H)) from one generator seeded with
 * `seed` (core/rng.h). Draw order: layer 1's W (direction 0 then 1, row-major),
 * its R, its B, then layer 2's W, R, B, and so on. `out` receives `count` layers. */
int spk_lstm_random(int count, int64_t input, int64_t hidden, uint64_t seed, double scale,
                    spk_dtype dtype, spk_lstm_weights *out);

/* ---- Gate orders and packing ------------------------------------------- */

/* The gate orders spk names, each spelled here only (spk.core.lstm.gate_orders
 * hands them to Lua): a gate order is a 4-letter permutation of the letters
 * of SPK_GATES_ONNX (i input, o output, f forget, c cell candidate). */
#define SPK_GATES_ONNX "iofc"            /* ONNX's, the order spk keeps weights in */
#define SPK_GATES_TORCH "ifco"           /* PyTorch's and cuDNN's (their g is c) */
#define SPK_GATES_PACKED SPK_GATES_TORCH /* the built-in kernels' packed rows */
/* Returns 0 if `order` is a gate order. */
int spk_lstm_gate_order_check(const char *order);

/* Packs W [2, 4H, K] (rows in gate order `from`, H = rows / 4) so each hidden
 * unit's four gates are adjacent: row g*H + u goes to row u*4 + p, where p is
 * the position in `to` of the gate at position g in `from`. Returns a new
 * contiguous tensor of W's dtype. */
spk_tensor *spk_lstm_pack_directions(const spk_tensor *W, const char *from, const char *to);
/* The inverse: packed rows u*4 + p (gate order `to`) back to g*H + u (order `from`). */
spk_tensor *spk_lstm_unpack_directions(const spk_tensor *packed, const char *from, const char *to);
/* B [2, 8H] (Wb then Rb, gate order `from`) to [2, 4H] packed as above, each
 * entry Wb + Rb of the same row, summed in B's dtype. */
spk_tensor *spk_lstm_pack_bias(const spk_tensor *B, const char *from, const char *to);

/* The packed layouts a recurrence kernel may ask for (docs/kernels.md):
 * "units", each hidden unit's four gate rows adjacent (row u*4 + p, what
 * spk_lstm_pack_directions makes; the built-in kernels' layout), or "rows",
 * four gate blocks (row p*H + u, ONNX's layout in the gate order `to`). */
typedef enum { SPK_LSTM_LAYOUT_UNITS = 0, SPK_LSTM_LAYOUT_ROWS = 1 } spk_lstm_layout;
/* "units" or "rows"; anything else fails naming both. */
int spk_lstm_layout_from_name(const char *name, spk_lstm_layout *out);
const char *spk_lstm_layout_name(spk_lstm_layout layout);
/* W [2, 4H, K] (gate order `from`) in `layout` and gate order `to`: row
 * g*H + u goes to row u*4 + p (units) or p*H + u (rows), p the position in
 * `to` of gate g of `from`. */
spk_tensor *spk_lstm_pack_layout(const spk_tensor *W, const char *from, const char *to, spk_lstm_layout layout);
/* B [2, 8H] to [2, 4H]: Wb + Rb of each row (summed in B's dtype), placed as
 * spk_lstm_pack_layout places rows. */
spk_tensor *spk_lstm_pack_bias_layout(const spk_tensor *B, const char *from, const char *to, spk_lstm_layout layout);

/* Reorders the four gate blocks along dimension `dim` (size 4H): block g of
 * order `from` goes to the position of that gate in `to`. For PyTorch
 * (SPK_GATES_TORCH, its g is our c) to ONNX (SPK_GATES_ONNX) and back. */
spk_tensor *spk_lstm_reorder_gates(const spk_tensor *t, int dim, const char *from, const char *to);

/* PyTorch nn.LSTM state-dict tensors of one layer: weight_ih [4H, in],
 * weight_hh [4H, H], bias_ih [4H], bias_hh [4H], forward then reverse
 * (index 0 and 1), gates i, f, g, o. */
typedef struct spk_lstm_torch_layer {
    const spk_tensor *weight_ih[2], *weight_hh[2], *bias_ih[2], *bias_hh[2];
} spk_lstm_torch_layer;

/* To ONNX layout: W = stack(weight_ih, weight_ih_reverse), R likewise, B per
 * direction [bias_ih, bias_hh], gates reordered to i, o, f, c. `layer` (0-based)
 * only names the layer in messages. */
int spk_lstm_from_torch(const spk_lstm_torch_layer *torch, int layer, spk_lstm_weights *out);
/* From ONNX layout; the eight tensors are new and owned by the caller, in the
 * order weight_ih, weight_hh, bias_ih, bias_hh (forward), then the same reverse. */
int spk_lstm_to_torch(const spk_lstm_layer *layer, spk_tensor *out[8]);

/* ---- The reference forward pass ---------------------------------------- */

/* Numerics, in the chosen precision (the one place they are written down):
 *   pre = (x·Wᵀ + h·Rᵀ) + (Wb + Rb), each of the two dot products summed from
 *   zero in index order, one fused multiply-add a term (acc = fma(a, b, acc):
 *   each term rounded once), the biases summed once (Wb + Rb) per row;
 *   i = σ(pre_i), o = σ(pre_o), f = σ(pre_f), c~ = tanh(pre_c), σ(v) =
 *   1 / (1 + exp(-v)), with spk's own exp and tanh of the precision
 *   (lstm/cpu_math_impl.h: within 2.5 ulp of the true values, each lane of
 *   a vector the scalar function's bits, the polynomials by fused
 *   multiply-adds);
 *   c = fma(f, c, i*c~), h = o*tanh(c); zero initial h and c.
 * Only the fused multiply-adds named here are fused (the code is compiled
 * with -ffp-contract=off, so the compiler fuses nothing on its own).
 * The forward direction runs t = 0..T-1 and writes features 0..H-1, the
 * reverse runs t = T-1..0 and writes features H..2H-1 at the same t.
 * Threads split the work by direction, batch rows and hidden units
 * (reference.c), never inside a sum, and every vector unit computes each
 * lane with the same scalar operations, so the result is bitwise the same
 * for any `threads` and any `vector`. */
typedef struct spk_lstm_reference_options {
    spk_dtype precision; /* SPK_F64 (x and weights promoted) or SPK_F32 */
    int threads;         /* at most this many; <= 0: SPK_THREADS, else the CPUs the process may use
                            (core/cpu.h), fewer for a call of a few MFLOP (reference.c) */
    spk_cpu_vector vector; /* SPK_CPU_VECTOR_AUTO: the widest this CPU has; another: that one or an error */
    int team_threads;      /* threads sharing a team's units (a barrier a step); 0: reference.c's rule */
    bool layers_out;     /* keep every layer's output in the result */
    /* Trace h and c of one layer and direction at chosen time positions
     * (the t at which h is written, whatever the direction). */
    int trace_layer;            /* 0-based; ignored when trace_count == 0 */
    int trace_direction;        /* 0 forward, 1 reverse */
    int trace_count;            /* 0: no trace */
    const int64_t *trace_steps; /* trace_count time positions, 0-based */
    struct spk_lstm_reference_profile *profile; /* where to report how the call ran, or NULL */
} spk_lstm_reference_options;

/* How a call ran: the split of the work and where the threads' time went.
 * The parts are sums over the threads of wall time (ms) spent projecting
 * (x·Wᵀ), in the recurrence's steps (h·Rᵀ and the cells) and waiting at
 * barriers; flops count a multiply-add as two. */
typedef struct spk_lstm_reference_profile {
    spk_cpu_vector vector; /* the unit used */
    int threads;           /* threads that ran (the pool) */
    int teams, team_threads;
    int64_t slab_steps;
    double wall_ms, project_ms, step_ms, wait_ms;
    double project_flops, step_flops;
} spk_lstm_reference_profile;

typedef struct spk_lstm_reference_result {
    spk_tensor *y;        /* [B, T, 2H] in the precision's dtype */
    int layer_count;      /* layers in `layer_outputs` (0 unless layers_out) */
    spk_tensor **layer_outputs; /* each [B, T, 2H]; y is a copy of the last */
    spk_tensor *trace_h;  /* [trace_count, B, H], NULL without a trace */
    spk_tensor *trace_c;
} spk_lstm_reference_result;

/* Default options: f64, the default threads, the widest vector unit, no layer outputs, no trace. */
spk_lstm_reference_options spk_lstm_reference_defaults(void);
/* x [B, T, in] f32 or f64 (any strides). On success `out` owns new tensors. */
int spk_lstm_reference(const spk_lstm_layer *layers, int count, const spk_tensor *x,
                       const spk_lstm_reference_options *options, spk_lstm_reference_result *out);
void spk_lstm_reference_result_free(spk_lstm_reference_result *result);

/* ---- Tile schedules of the persistent kernel ------------ */

/* A batch is cut into `tiles` tiles of `tile_rows` rows; each tile is run by
 * `groups` co-resident blocks. Launches cover tiles_per_launch tiles each, in
 * order; the launch ranges use 0-based tile indices. */
typedef struct spk_schedule {
    int64_t batch;
    int64_t groups;
    int64_t tile_rows;
    int64_t tiles;
    int64_t tiles_per_launch;
    bool concurrent; /* both directions at once (reverse on a side stream) */
} spk_schedule;

#define SPK_SCHEDULE_UNKNOWN (-1) /* concurrent capacity not known */
#define SPK_SCHEDULE_MAX_HEIGHTS 16

/* The rule: for each height in `heights` (in order), the first with
 * tiles * 2 * groups <= min(capacity, concurrent_capacity) runs both directions
 * concurrently in one launch each. Otherwise the largest height, sequential
 * directions, tiles_per_launch = capacity / groups. An unknown concurrent
 * capacity (SPK_SCHEDULE_UNKNOWN) selects the sequential form. Fewer than
 * `groups` co-resident blocks (capacity < groups) is an error naming both. */
int spk_schedule_new(spk_schedule *out, int64_t batch, int64_t capacity, int64_t concurrent_capacity,
                     int64_t groups, const int64_t *heights, int height_count);

/* Number of launches per direction: ceil(tiles / tiles_per_launch). */
int64_t spk_schedule_launch_count(const spk_schedule *s);
/* Launch `index` (0-based): its first tile (0-based) and tile count. */
int spk_schedule_launch(const spk_schedule *s, int64_t index, int64_t *first, int64_t *count);

/* Validates a schedule made elsewhere (a script) against `batch`: positive
 * sizes, tiles * tile_rows covers the batch without an empty tile, and the
 * `launch_count` ranges (first, count) cover tiles 0..tiles-1 in order without
 * overlap or gap, each count in 1..tiles_per_launch. Messages count launches
 * from 1 and name tiles by their 0-based index. */
int spk_schedule_check(const spk_schedule *s, int64_t batch, const int64_t *firsts,
                       const int64_t *counts, int64_t launch_count);

#endif
