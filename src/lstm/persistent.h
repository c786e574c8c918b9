/* The GPU LSTM stack on the persistent recurrence kernel
 * (kernels/lstm_recurrence.cu, docs/design.md): packed weights on the device, per layer a cuBLAS
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
#include "cuda/timeline.h"
#include "lstm/device_layers.h"
#include "lstm/kernel_options.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"

/* ---- Kernel variants (macros of kernels/lstm_recurrence.cu) ------------ */

/* One int per option of spk_persistent_family (persistent.c's option table
 * says what each takes and means; the kernel's macro in brackets). */
typedef struct spk_persistent_variant {
    int hidden;     /* [HIDDEN] */
    int units;      /* [UNITS] hidden units a block */
    int gate_block; /* [GATE_BLOCK] gate rows a thread holds */
    int threads;    /* [THREADS] = units * (4 / gate_block) * chunks */
    int row_group;  /* [ROW_GROUP] rows reduced together over the chunk lanes */
    int tile_rows;  /* [MAX_TILE_ROWS] the most batch rows a block carries */
} spk_persistent_variant;

extern const spk_kernel_family spk_persistent_family;

/* Launch geometry and defines derived from a variant, as the kernel derives it. */
typedef struct spk_persistent_geometry {
    int groups;         /* blocks per tile: hidden / units */
    int gate_rows;      /* 4 * units packed rows of R per block */
    int chunks;         /* threads / (gate_rows / gate_block) k-chunks per gate row */
    int64_t state_tile; /* 64-bit words per tile: 2 * tile_rows * hidden */
    size_t smem_bytes;  /* the kernel's static shared memory: 2 h buffers */
} spk_persistent_geometry;

/* The default variant for a batch (a table in persistent.c, from
 * tools/persistent_sweep.lua on the H200), fitted to `hidden`. */
spk_persistent_variant spk_persistent_variant_for_batch(int hidden, int64_t batch);
/* The variant a plan of this batch compiles for the options a script gave
 * (the rest by each option's default rule), checked. */
int spk_persistent_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given,
                                   spk_persistent_variant *out);
/* Fills what is left 0: threads (the widest split that divides the hidden
 * size), row_group (1 for gate_block 1, chunks for gate_block 4) and tile
 * rows (what that split can carry, at most 32). */
void spk_persistent_variant_fit(spk_persistent_variant *v);
/* Checks a variant against the kernel's static_asserts and derives its
 * geometry and defines (out may be NULL). Messages name the option, e.g.
 * "kernel.threads 96 must be units * 4 * chunks with chunks 2, 4 or 8". */
int spk_persistent_variant_check(const spk_persistent_variant *v, spk_persistent_geometry *out);

/* Compiles the recurrence source (kernels/lstm_recurrence.cu in spk_kernel_dir())
 * for `arch` ("sm_90", "compute_80", or NULL for the current device). */
spk_module *spk_persistent_variant_compile(const spk_persistent_variant *v, const char *arch);
/* The same variant's trace build (SPK_DEBUG_TRACE=1: three more kernel
 * parameters, h and c of chosen steps written to a trace buffer). */
spk_module *spk_persistent_variant_compile_trace(const spk_persistent_variant *v, const char *arch);

#define SPK_LSTM_RECURRENCE_KERNEL "spk_lstm_recurrence"
#define SPK_LSTM_CLEAR_KERNEL "spk_lstm_clear"

/* The tile heights the schedule tries, limited to what a variant carries:
 * 8, 16, 32 (those <= tile_rows), else tile_rows alone. */
int spk_persistent_variant_heights(const spk_persistent_variant *v, int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS]);

/* Checks that a schedule suits a variant and a device capacity before any
 * launch: tile_rows <= the variant's, groups == the variant's, every launch's
 * blocks (tiles_per_launch * groups) within `capacity`, and a concurrent
 * schedule's two simultaneous launches within `concurrent_capacity`
 * (SPK_SCHEDULE_UNKNOWN: concurrent is refused). */
int spk_persistent_schedule_fits(const spk_schedule *s, const spk_persistent_variant *v, int64_t capacity,
                           int64_t concurrent_capacity);

/* ---- The plan through the kernel stack (kernel_stack.h) ----------------- */

/* The kernel's arguments in the contract's names (gates, r, bias, output,
 * state, status, batch, steps, direction, first_tile, tile_rows, flag_base,
 * timeout_ns), and its trace build's (then trace, trace_slot, trace_slots). */
#define SPK_PERSISTENT_NARGS 13
extern const int spk_persistent_args[SPK_PERSISTENT_NARGS];
extern const int spk_persistent_trace_args[SPK_PERSISTENT_NARGS + 3];
/* The description the plan gives the kernel stack (no device needed): per
 * layer the schedule's cooperative launches of direction 0, then of
 * direction 1 (grid (groups, tiles), block threads, first_tile the launch's),
 * concurrent as the schedule, tile_rows the schedule's, state_words tiles *
 * STATE_TILE a direction, the packing "ifco" units, the kernel's status
 * codes. `launches` has room for `max` (2 * the schedule's launches). */
int spk_persistent_stack_desc(const spk_persistent_variant *v, const spk_schedule *s, uint64_t timeout_ns,
                              spk_kernel_stack_desc *out, spk_kernel_stack_launch *launches, int max);

/* ---- Plans ------------------------------------------------------------- */

typedef struct spk_persistent_plan_options {
    const spk_lstm_layer *layers; /* host f32/f64 weights, ONNX layout (lstm.h) */
    int count;
    int64_t batch, steps;
    spk_kernel_choice kernel; /* the kernel options a script gave; the rest: the batch's default */
    /* Optional schedule made elsewhere (checked); NULL: spk_schedule_new's
     * rule on the capacity. */
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
} spk_persistent_plan_options;

typedef struct spk_persistent_plan spk_persistent_plan;

typedef struct spk_persistent_plan_info {
    spk_persistent_variant variant;
    spk_persistent_geometry geometry;
    spk_schedule schedule;
    int64_t capacity;            /* co-resident blocks used for the schedule */
    int64_t device_capacity;     /* occupancy x SMs of the compiled variant */
    int64_t concurrent_capacity; /* what two simultaneous launches share */
    int blocks_per_sm;
    spk_kernel_attrs attrs;      /* registers, local (spill) bytes, smem, ... */
    char arch[16];
    spk_lstm_gpu_shape shape; /* layers, sizes, the input projections' math */
} spk_persistent_plan_info;

/* Validates the layers (shapes, dtypes, finite values), resolves the kernel
 * options (spk_persistent_variant_resolve), compiles the variant,
 * builds the schedule, packs and uploads the weights and allocates every
 * buffer. Needs a device. */
spk_persistent_plan *spk_persistent_plan_new(const spk_persistent_plan_options *options);
void spk_persistent_plan_free(spk_persistent_plan *plan);
const spk_persistent_plan_info *spk_persistent_plan_get_info(const spk_persistent_plan *plan);

/* Enqueues one forward pass on the plan's stream: x is a contiguous device f32
 * [batch, steps, input] tensor, the result goes to the plan's output buffer. */
int spk_persistent_plan_enqueue(spk_persistent_plan *plan, const spk_tensor *x);
/* Waits for the plan's streams and fails if a launch gave up (timeout). */
int spk_persistent_plan_finish(spk_persistent_plan *plan);
/* x host or device f32 [batch, steps, input] (any strides); returns a new
 * [batch, steps, 2H] f32 tensor on x's device. Synchronous. */
spk_tensor *spk_persistent_plan_forward(spk_persistent_plan *plan, const spk_tensor *x);
/* Captures one forward on x into a CUDA graph, replays it `warmup` times,
 * then `rounds` times, each timed with events: ms[rounds]. */
int spk_persistent_plan_time(spk_persistent_plan *plan, const spk_tensor *x, int rounds, int warmup, double *ms);

/* ---- Traces (the kernel's SPK_DEBUG_TRACE build; spk_lstm_trace: kernel_stack.h) ---- */

/* As spk_persistent_plan_forward, through the variant's trace build (compiled on
 * first use; its capacity is checked against the plan's schedule), and also
 * *trace_h, *trace_c: new host f32 [count, batch, H] tensors. */
spk_tensor *spk_persistent_plan_forward_trace(spk_persistent_plan *plan, const spk_tensor *x, const spk_lstm_trace *trace,
                                        spk_tensor **trace_h, spk_tensor **trace_c);

/* Shape checks of forward's input (needs no device). */
int spk_persistent_plan_check_input(const spk_persistent_plan_info *info, const spk_tensor *x);

/* ---- Step timelines (the kernel's SPK_TIMELINE build, docs/timeline.md) -- */

/* The stages the timeline build stamps (kernels/lstm_timeline_stages.cuh);
 * the wait waits for the publish of the previous step. */
const spk_timeline_stages *spk_persistent_timeline_stages(void);
/* The variant's timeline build (SPK_TIMELINE=1: seven more kernel
 * parameters, spk_timeline_args), for `arch` as spk_persistent_variant_compile. */
spk_module *spk_persistent_variant_compile_timeline(const spk_persistent_variant *v, const char *arch);
/* Checks a selection against a plan (needs no device): its layers and steps,
 * the blocks of a direction (groups * tiles, block group + groups * tile)
 * and the warps of a block. */
int spk_persistent_timeline_check(const spk_persistent_plan_info *info, const spk_timeline_selection *sel);

/* What the timeline build of a plan's variant runs with (compiled on first use). */
typedef struct spk_persistent_timeline_build {
    spk_kernel_attrs attrs; /* registers, spills, ... */
    int64_t capacity;       /* co-resident blocks of the build (the plan's schedule fits it) */
} spk_persistent_timeline_build;

/* As spk_persistent_plan_forward through the timeline build (compiled on
 * first use; its capacity is checked against the plan's schedule), recording
 * `sel` (checked): the same output bits, and *stamps, *clock the decoded
 * stamps; build, if not NULL, what that build runs with. */
spk_tensor *spk_persistent_plan_forward_timeline(spk_persistent_plan *plan, const spk_tensor *x,
                                                 const spk_timeline_selection *sel, spk_tensor **stamps,
                                                 spk_timeline_clock *clock, spk_persistent_timeline_build *build);
/* As spk_persistent_plan_time through the timeline build recording `sel`. */
int spk_persistent_plan_time_timeline(spk_persistent_plan *plan, const spk_tensor *x,
                                      const spk_timeline_selection *sel, int rounds, int warmup, double *ms);

#endif
