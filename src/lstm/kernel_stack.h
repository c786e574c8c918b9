/* The GPU LSTM stack around any recurrence kernel that keeps the contract of
 * docs/kernels.md: the built-in persistent and cluster plans are built on it,
 * and so is spk.lstm.kernel_stack, a stack around a kernel of one's own.
 *
 * A kernel takes, in an order it declares, arguments named by the contract
 * (spk_recurrence_args below: the input projections, the packed R and bias,
 * the output, exchange state, a status word, sizes, ...). Per layer the plan
 * computes both directions' input projections in one batched cuBLAS GEMM,
 * then makes the layer's launches: a kernel that takes `direction` is
 * launched once per direction (the reverse one on a side stream when the
 * plan is concurrent), any other once for both. Before any launch the
 * kernel's parameters are checked against the argument list (count, sizes)
 * and every launch whose blocks must be co-resident against the device's
 * capacity.
 *
 * What is pure here (the argument values, the checks) needs no device.
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_KERNEL_STACK_H
#define SPK_LSTM_KERNEL_STACK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/ptx.h"
#include "cuda/runtime.h"
#include "cuda/timeline.h"
#include "lstm/device_layers.h"
#include "lstm/lstm.h"

/* ---- the contract's arguments ------------------------------------------- */

typedef enum spk_recurrence_arg {
    SPK_RA_GATES,           /* const float *: x·Wᵀ of the layer's input */
    SPK_RA_R,               /* const float *: the packed recurrent weights */
    SPK_RA_BIAS,            /* const float *: Wb + Rb, packed */
    SPK_RA_OUTPUT,          /* float *: where h goes */
    SPK_RA_STATE,           /* unsigned long long *: exchange state, zero at the start of a pass */
    SPK_RA_STATUS,          /* unsigned *: 0, or why the kernel gave up */
    SPK_RA_BATCH,           /* int */
    SPK_RA_STEPS,           /* int */
    SPK_RA_HIDDEN,          /* int */
    SPK_RA_LAYER,           /* int, from 0 */
    SPK_RA_DIRECTION,       /* int: 0 forward, 1 reverse; taking it means one launch per direction */
    SPK_RA_FIRST_TILE,      /* int: the launch's first batch tile */
    SPK_RA_TILE_ROWS,       /* int: batch rows a tile */
    SPK_RA_FLAG_BASE,       /* unsigned: layer * steps */
    SPK_RA_TIMEOUT_NS,      /* unsigned long long: the longest wait (0: never give up) */
    SPK_RA_TRACE,           /* float *: the trace buffer, or NULL */
    SPK_RA_TRACE_SLOT,      /* const int *: [steps] slot of each time position, -1 not traced; or NULL */
    SPK_RA_TRACE_SLOTS,     /* int */
    SPK_RA_TRACE_DIRECTION, /* int: the traced direction, -1 none */
    SPK_RA_COUNT
} spk_recurrence_arg;

typedef struct spk_recurrence_arg_info {
    const char *name;      /* "gates": the name a kernel's argument list uses */
    spk_arg_kind kind;     /* what the plan passes */
    const char *c_type;    /* how the kernel declares it */
    const char *meaning;   /* in a launch of one direction */
    const char *both;      /* in a launch of both directions, where it differs (NULL: the same) */
} spk_recurrence_arg_info;

/* The contract's arguments, indexed by spk_recurrence_arg. */
extern const spk_recurrence_arg_info spk_recurrence_args[SPK_RA_COUNT];
/* The index of an argument name, or -1 with a message listing the names. */
int spk_recurrence_arg_find(const char *name);

#define SPK_KERNEL_STACK_MAX_ARGS 32

/* Checks a kernel's parameters, read from its PTX, against an argument list
 * (each args[i] an spk_recurrence_arg): the same count, then for each
 * parameter the size and the class (a float, an integer or pointer) of the
 * argument. No argument twice, and not both `direction` and
 * `trace_direction`. Messages name the kernel, the parameter and the
 * argument: "kernel k: parameter 7 is a f32 (4 bytes), but args[7] is
 * \"batch\", which the contract passes as an int (4 bytes): ...". */
int spk_recurrence_check_params(const char *kernel, const int *args, int nargs, const spk_ptx_param *params,
                                int nparams);
/* The same against the sizes a loaded kernel reports (spk_kernel_params). */
int spk_recurrence_check_sizes(const char *kernel, const int *args, int nargs, const size_t *sizes, int nparams);
/* Whether the list takes `arg`. */
bool spk_recurrence_takes(const int *args, int nargs, int arg);

/* ---- a plan's description ------------------------------------------------ */

/* One launch of a layer. */
typedef struct spk_kernel_stack_launch {
    int direction;          /* 0 or 1; -1: both (a kernel without the direction argument) */
    unsigned grid[3], block[3], cluster[3]; /* cluster all 0: no cluster */
    size_t smem;            /* dynamic shared memory, bytes */
    bool cooperative;       /* a cooperative launch: every block co-resident */
    bool co_resident;       /* the launch's blocks (or clusters) wait on each other: all must fit at once */
    int32_t first_tile;     /* the first_tile argument */
} spk_kernel_stack_launch;

/* A status code a kernel may write, and what it means (after "lstm stack: "). */
typedef spk_lstm_gpu_status spk_kernel_stack_status;

typedef struct spk_kernel_stack_desc {
    const char *name;                        /* the kernel, in messages */
    const int *args;                         /* the kernel's parameters, in order (spk_recurrence_arg) */
    int nargs;
    const spk_kernel_stack_launch *launches; /* a layer's launches, in order */
    int nlaunches;
    bool concurrent;        /* launches of direction 1 run on a side stream, beside those of direction 0 */
    int32_t tile_rows;      /* the tile_rows argument */
    int64_t state_words;    /* 64-bit words of state a direction */
    uint64_t timeout_ns;    /* the timeout_ns argument */
    spk_lstm_packing packing;
    const spk_kernel_stack_status *statuses; /* the codes the kernel writes */
    int nstatuses;
    /* A forward pass fills the output with a poison before each layer's
     * launches and checks after them that none is left and that the layer
     * wrote no NaN from finite inputs (a kernel of one's own; the built-in
     * kernels leave it off: it costs a fill and a scan a layer). */
    bool check_writes;
    /* > 0: a pass still running this long after it was enqueued is reported
     * as a kernel that does not give up (the device stays busy); 0: the
     * plan waits (the built-in kernels, whose waits are bounded). */
    uint64_t watchdog_ns;
} spk_kernel_stack_desc;

/* Checks a description against a shape, without a device: the argument list
 * (spk_recurrence_arg values, no repeats), at least one launch, each launch's
 * direction (a kernel with `direction`: 0 or 1, and every launch of
 * direction 1 after those of direction 0; without it: -1), positive grid and
 * block, a cooperative launch without a cluster, the packing, tile_rows >= 1
 * when taken, state_words >= 0 (and > 0 when the kernel takes `state`). */
int spk_kernel_stack_desc_check(const spk_kernel_stack_desc *d);

/* The device addresses a launch's arguments point into. */
typedef struct spk_kernel_stack_addresses {
    void *gates;       /* [2, B*T, 4H] */
    void *r, *bias;    /* the layer's [2, 4H, H] and [2, 4H] */
    void *output;      /* [B, T, 2H] */
    void *words;       /* u64 [2 * state_words + 1]: direction 0's state, direction 1's, the status word */
    /* A traced forward: the trace buffer [2, slots, B, H] and the slot table,
     * for trace_layer (from 0) and trace_direction; trace NULL: none. */
    void *trace, *trace_slot;
    int trace_slots, trace_layer, trace_direction;
} spk_kernel_stack_addresses;

/* The arguments of launch `l` of layer `layer`, in the kernel's order, into
 * out[0 .. d->nargs) (args: the kernel's list, d->args or a trace build's).
 * Pure: the plan launches exactly these. */
void spk_kernel_stack_args(const spk_kernel_stack_desc *d, const int *args, int nargs, const spk_lstm_gpu_shape *shape,
                           const spk_kernel_stack_addresses *a, int layer, const spk_kernel_stack_launch *l,
                           spk_arg *out);

/* What a device holds of a launch at once: blocks (a launch without
 * clusters) or clusters; computed by the plan from the kernel. */
typedef int (*spk_kernel_stack_capacity_fn)(void *ctx, const spk_kernel_stack_launch *l, int64_t *capacity);

/* The co-residency rule, before any launch: a cooperative or co-resident
 * launch must fit the capacity (its blocks, or with clusters its clusters);
 * on a concurrent plan the largest co-resident launch of each stream must
 * fit together; and a cluster launch needs room for one cluster at least.
 * Messages name the launch, what it needs and what the device holds. */
int spk_kernel_stack_check_residency(const spk_kernel_stack_desc *d, spk_kernel_stack_capacity_fn capacity, void *ctx);

/* ---- plans ---------------------------------------------------------------- */

typedef struct spk_kernel_stack_options {
    const spk_lstm_layer *layers; /* host f32/f64 weights, ONNX layout */
    int count;
    int64_t batch, steps;
    spk_math_mode math;           /* the input projections' */
    spk_module *module;           /* the compiled kernel (a cubin or PTX for this device) */
    const char *entry;            /* its extern "C" __global__ function */
    /* Optional: a kernel of `module` clearing the state words
     * (u64 *words, u64 count) before a pass; NULL: a memset. */
    const char *clear_entry;
    const spk_kernel_stack_desc *desc; /* copied */
} spk_kernel_stack_options;

typedef struct spk_kernel_stack spk_kernel_stack;

typedef struct spk_kernel_stack_info {
    spk_lstm_gpu_shape shape;
    spk_kernel_attrs attrs;
    char arch[16];
    int64_t capacity;       /* of the first launch: its blocks or clusters the device holds at once */
    int nlaunches;          /* a layer's */
    bool concurrent;
} spk_kernel_stack_info;

/* Validates the layers (spk_lstm_gpu_shape_check at the layers' hidden
 * size), the description, math and finite weights, needs a device, loads the
 * kernel, checks its parameters and every launch's co-residency, uploads the
 * packed weights and allocates every buffer. */
spk_kernel_stack *spk_kernel_stack_new(const spk_kernel_stack_options *o);
void spk_kernel_stack_free(spk_kernel_stack *ks);
const spk_kernel_stack_info *spk_kernel_stack_get_info(const spk_kernel_stack *ks);
/* The kernel's name in messages (the description's, or its entry). */
const char *spk_kernel_stack_name(const spk_kernel_stack *ks);
/* The plan's kernel (owned by the plan) and its main stream. */
spk_kernel *spk_kernel_stack_kernel(spk_kernel_stack *ks);
spk_stream *spk_kernel_stack_stream(spk_kernel_stack *ks);

/* Enqueues one forward pass of a contiguous device x (f32 [B, T, in]) on the
 * plan's stream, the result in its output buffer. */
int spk_kernel_stack_enqueue(spk_kernel_stack *ks, const spk_tensor *x);
/* Waits for the plan's streams; fails on a status the kernel wrote. */
int spk_kernel_stack_finish(spk_kernel_stack *ks);
/* x host or device f32 [B, T, in] (any strides): a new [B, T, 2H] tensor on
 * x's side. With check_writes, also the write check's verdict. */
spk_tensor *spk_kernel_stack_forward(spk_kernel_stack *ks, const spk_tensor *x);
/* CUDA-graph replays of one forward: ms[rounds] after `warmup` untimed. */
int spk_kernel_stack_time(spk_kernel_stack *ks, const spk_tensor *x, int rounds, int warmup, double *ms);

/* ---- traces ---------------------------------------------------------------- */

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

/* A trace build: `module`'s kernel `entry`, taking `args` (the trace
 * arguments among them), used for traced forwards instead of the plan's
 * kernel; its co-residency is checked first. The plan keeps a reference. A
 * plan whose own kernel takes trace arguments needs none. */
int spk_kernel_stack_set_trace_kernel(spk_kernel_stack *ks, spk_module *module, const char *entry, const int *args,
                                      int nargs);
/* Whether a traced forward can run: the plan's kernel or its trace build
 * takes the trace arguments. */
bool spk_kernel_stack_traceable(const spk_kernel_stack *ks);
/* As spk_kernel_stack_forward, recording h and c of `trace`: *trace_h,
 * *trace_c new host f32 [count, B, H] (the kernel's trace arguments get the
 * buffer and slot table; see spk_kernel_stack_addresses). */
spk_tensor *spk_kernel_stack_forward_trace(spk_kernel_stack *ks, const spk_tensor *x, const spk_lstm_trace *trace,
                                           spk_tensor **trace_h, spk_tensor **trace_c);

/* ---- step timelines (docs/timeline.md) ----------------------------------- */

/* A timeline build: `module`'s kernel `entry`, taking the plan's arguments
 * followed by the SPK_TIMELINE_ARGS parameters of a recording
 * (spk_timeline_args); its parameters and co-residency are checked first. The
 * plan keeps a reference. */
int spk_kernel_stack_set_timeline_kernel(spk_kernel_stack *ks, spk_module *module, const char *entry);
/* As spk_kernel_stack_forward through the timeline build, recording `sel`
 * (which the caller has checked against the plan) with `stages`: the same
 * output, and *stamps, *clock the decoded stamps (spk_timeline_decode). A
 * build's block numbering is its launch's own: the block offset is 0. */
spk_tensor *spk_kernel_stack_forward_timeline(spk_kernel_stack *ks, const spk_tensor *x,
                                              const spk_timeline_selection *sel, const spk_timeline_stages *stages,
                                              spk_tensor **stamps, spk_timeline_clock *clock);
/* What a timeline of a kernel of one's own records, from its description
 * (the SPK_TIMELINE_SETUP block a kernel passes is its own numbering within
 * a direction): blocks a direction, the blocks of the direction-0 launches
 * of a kernel taking `direction`, half those of a kernel launched once for
 * both; warps a block, the first launch's threads in whole warps; the blocks
 * of a group (what a selection records when it names none), the first
 * launch's cluster, else the blocks of one direction of a co-resident or
 * cooperative launch, else 1. Pure. */
void spk_kernel_stack_timeline_geometry(const spk_kernel_stack_desc *d, int64_t *blocks, int *warps, int *group);
/* As spk_kernel_stack_time through the timeline build, recording `sel`. */
int spk_kernel_stack_time_timeline(spk_kernel_stack *ks, const spk_tensor *x, const spk_timeline_selection *sel,
                                   const spk_timeline_stages *stages, int rounds, int warmup, double *ms);

#endif
