/* The GPU LSTM stack on the persistent recurrence kernel (DESIGN.md §3,
 * kernels/lstm_recurrence.cu): packed weights on the device, per layer a cuBLAS
 * input projection per direction, then the cooperative recurrence launches of
 * the tile schedule (the reverse direction on a side stream when the schedule
 * is concurrent). Buffers are allocated once per plan and reused.
 *
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_PERSISTENT_H
#define SPK_LSTM_PERSISTENT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "lstm/device_layers.h"
#include "lstm/lstm.h"

/* ---- Kernel variants (macros of kernels/lstm_recurrence.cu) ------------ */

typedef struct spk_lstm_variant {
    int hidden;        /* HIDDEN: 64, 128 or 256 */
    int units;         /* UNITS: hidden units per block, 4, 8 or 16 (32 with gate_block 4) */
    int threads;       /* THREADS = units * (4 / gate_block) * chunks, chunks 2, 4 or 8 */
    int max_tile_rows; /* MAX_TILE_ROWS: 1 .. 4 * chunks (gate_block 4: 1 .. 4 * row_group), two h
                          buffers within 48 KiB */
    bool acq_rel;      /* SPK_ACQ_REL: release/acquire exchange instead of relaxed */
    int gather;        /* GATHER: 1 the seed's per-word waits, 2 paired 16-byte polls (default) */
    int gate_block;    /* GATE_BLOCK: gate rows per thread, 1 (the seed's layout) or 4 (a unit's four) */
    int row_group;     /* ROW_GROUP: rows reduced together over the chunk lanes, 1, 2, 4 or 8 (<= chunks);
                          1 is the seed's all-reduce per row; 0 in spk_lstm_variant_fit: choose */
} spk_lstm_variant;

/* Launch geometry derived from a variant, as the kernel derives it. */
typedef struct spk_lstm_geometry {
    int groups;         /* blocks per tile: hidden / units */
    int gate_rows;      /* 4 * units packed rows of R per block */
    int chunks;         /* threads / (gate_rows / gate_block) k-chunks per gate row */
    int64_t state_tile; /* 64-bit words per tile: 2 * max_tile_rows * hidden */
    size_t smem_bytes;  /* the kernel's static shared memory: 2 h buffers */
} spk_lstm_geometry;

/* hidden 128, units 4, threads 128, max_tile_rows 32, relaxed exchange, gather 2, gate_block 1,
 * row_group 1. */
spk_lstm_variant spk_lstm_variant_default(void);
/* The fastest variant known for a batch (a table in persistent.c, from
 * tools/persistent_sweep.lua on the H200), fitted to `hidden`. */
spk_lstm_variant spk_lstm_variant_for_batch(int hidden, int64_t batch);
/* Checks a variant against the kernel's static_asserts and derives its geometry
 * (out may be NULL). Messages name the field, e.g. "kernel.threads 96 must be
 * units * 4 * chunks with chunks 2, 4 or 8". */
/* Fills what a script left out: threads (the widest split that divides the
 * hidden size), row_group when 0 (1 for gate_block 1, chunks for gate_block 4)
 * and tile rows (capped by what that split can carry). */
void spk_lstm_variant_fit(spk_lstm_variant *v, bool threads_given, bool tile_rows_given);
int spk_lstm_variant_check(const spk_lstm_variant *v, spk_lstm_geometry *out);

#define SPK_LSTM_VARIANT_DEFINES 8
/* The NVRTC defines of a variant; `text` holds their values. */
typedef struct spk_lstm_variant_defines {
    spk_define defines[SPK_LSTM_VARIANT_DEFINES];
    char text[SPK_LSTM_VARIANT_DEFINES][16];
} spk_lstm_variant_defines;
void spk_lstm_variant_defines_fill(const spk_lstm_variant *v, spk_lstm_variant_defines *out);

/* Compiles the recurrence source (kernels/lstm_recurrence.cu in spk_kernel_dir())
 * for `arch` ("sm_90", "compute_80", or NULL for the current device). */
spk_module *spk_lstm_variant_compile(const spk_lstm_variant *v, const char *arch);
/* The same variant's trace build (SPK_DEBUG_TRACE=1: three more kernel
 * parameters, h and c of chosen steps written to a trace buffer). */
spk_module *spk_lstm_variant_compile_trace(const spk_lstm_variant *v, const char *arch);

#define SPK_LSTM_RECURRENCE_KERNEL "spk_lstm_recurrence"
#define SPK_LSTM_CLEAR_KERNEL "spk_lstm_clear"

/* The tile heights the seed tries, limited to what a variant carries:
 * 8, 16, 32 (those <= max_tile_rows), else max_tile_rows alone. */
int spk_lstm_variant_heights(const spk_lstm_variant *v, int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS]);

/* Checks that a schedule suits a variant and a device capacity before any
 * launch: tile_rows <= max_tile_rows, groups == the variant's, every launch's
 * blocks (tiles_per_launch * groups) within `capacity`, and a concurrent
 * schedule's two simultaneous launches within `concurrent_capacity`
 * (SPK_SCHEDULE_UNKNOWN: concurrent is refused). */
int spk_lstm_schedule_fits(const spk_schedule *s, const spk_lstm_variant *v, int64_t capacity,
                           int64_t concurrent_capacity);

/* ---- Plans ------------------------------------------------------------- */

typedef struct spk_lstm_plan_options {
    const spk_lstm_layer *layers; /* host f32/f64 weights, ONNX layout (lstm.h) */
    int count;
    int64_t batch, steps;
    spk_lstm_variant variant;
    /* Optional schedule made elsewhere (checked); NULL: the seed's rule on
     * the capacity. */
    const spk_schedule *schedule;
    /* > 0: use this many co-resident blocks instead of the occupancy figure
     * (must not exceed it); for forcing sequential schedules. */
    int64_t capacity;
    /* A poll that waits longer gives up (the forward then fails); 0: never. */
    uint64_t timeout_ns;
    /* The input projections' cuBLAS math: SPK_MATH_FP32 (0, the default) or
     * SPK_MATH_TF32 (tensor cores, TF32 inputs, FP32 sums). The recurrent
     * product and the cell are FP32 strict either way. */
    spk_math_mode math;
} spk_lstm_plan_options;

typedef struct spk_lstm_plan spk_lstm_plan;

typedef struct spk_lstm_plan_info {
    spk_lstm_variant variant;
    spk_lstm_geometry geometry;
    spk_schedule schedule;
    int64_t capacity;            /* co-resident blocks used for the schedule */
    int64_t device_capacity;     /* occupancy x SMs of the compiled variant */
    int64_t concurrent_capacity; /* what two simultaneous launches share */
    int blocks_per_sm;
    spk_kernel_attrs attrs;      /* registers, local (spill) bytes, smem, ... */
    char arch[16];
    spk_lstm_gpu_shape shape; /* layers, sizes, the input projections' math */
} spk_lstm_plan_info;

/* Validates the layers (shapes, dtypes, finite values), compiles the variant,
 * builds the schedule, packs and uploads the weights and allocates every
 * buffer. Needs a device. */
spk_lstm_plan *spk_lstm_plan_new(const spk_lstm_plan_options *options);
void spk_lstm_plan_free(spk_lstm_plan *plan);
const spk_lstm_plan_info *spk_lstm_plan_get_info(const spk_lstm_plan *plan);

/* Enqueues one forward pass on the plan's stream: x is a contiguous device f32
 * [batch, steps, input] tensor, the result goes to the plan's output buffer. */
int spk_lstm_plan_enqueue(spk_lstm_plan *plan, const spk_tensor *x);
/* Waits for the plan's streams and fails if a launch gave up (timeout). */
int spk_lstm_plan_finish(spk_lstm_plan *plan);
/* x host or device f32 [batch, steps, input] (any strides); returns a new
 * [batch, steps, 2H] f32 tensor on x's device. Synchronous. */
spk_tensor *spk_lstm_plan_forward(spk_lstm_plan *plan, const spk_tensor *x);
/* Captures one forward on x into a CUDA graph, replays it `warmup` times,
 * then `rounds` times, each timed with events: ms[rounds]. */
int spk_lstm_plan_time(spk_lstm_plan *plan, const spk_tensor *x, int rounds, int warmup, double *ms);

/* ---- Traces (the kernel's SPK_DEBUG_TRACE build) ------------------------ */

#define SPK_LSTM_TRACE_MAX_STEPS 1024
/* h and c of one layer and direction at chosen time positions, as the CPU
 * reference traces them (lstm.h: spk_lstm_reference_options). */
typedef struct spk_lstm_trace {
    int layer;            /* 0-based */
    int direction;        /* 0 forward, 1 reverse */
    int count;            /* 1 .. SPK_LSTM_TRACE_MAX_STEPS */
    const int64_t *steps; /* `count` time positions t, 0-based (repeats allowed) */
} spk_lstm_trace;

/* Checks a trace against a stack of `layers` layers and `steps` steps; the
 * messages count layers and steps from 1 (needs no device). */
int spk_lstm_trace_check(const spk_lstm_trace *trace, int64_t layers, int64_t steps);

/* As spk_lstm_plan_forward, through the variant's trace build (compiled on
 * first use; its capacity is checked against the plan's schedule), and also
 * *trace_h, *trace_c: new host f32 [count, batch, H] tensors. */
spk_tensor *spk_lstm_plan_forward_trace(spk_lstm_plan *plan, const spk_tensor *x, const spk_lstm_trace *trace,
                                        spk_tensor **trace_h, spk_tensor **trace_c);

/* Shape checks of forward's input (needs no device). */
int spk_lstm_plan_check_input(const spk_lstm_plan_info *info, const spk_tensor *x);

#endif
