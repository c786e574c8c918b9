/* The GPU LSTM stack on the thread-block-cluster recurrence (sm_90,
 * kernels/lstm_cluster.cu): packed weights on the device, per layer the
 * cuBLAS input projections of both directions, then ONE cluster launch that
 * runs both directions of every tile (grid (cluster, tiles, 2)). Clusters
 * never wait on each other, so a launch may hold more clusters than fit at
 * once: they run in waves, and no capacity error exists.
 *
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_CLUSTER_H
#define SPK_LSTM_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "cuda/timeline.h"
#include "lstm/device_layers.h"
#include "lstm/kernel_options.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"

/* ---- Kernel variants ------------------------------------------------------ */

/* kernel.push: how a step's h reaches the blocks of the cluster, and so which
 * source compiles. */
enum {
    SPK_PUSH_SCALAR = 0, /* kernels/lstm_cluster_baseline.cu: every cell stores its h into every block, and the
                            cluster synchronises with one barrier a step (the plain reference form) */
    SPK_PUSH_DIRECT = 1, /* kernels/lstm_cluster.cu: the lanes holding a cell st.async its h into their share of
                            the blocks, each block waits on its mbarrier for its bytes; no block barrier a step */
    SPK_PUSH_WARP = 2,   /* the same, a warp's pushes packed four units of a row into one 16-byte st.async */
};

/* One int per option of spk_cluster_family (cluster.c's option table says
 * what each takes and means; the macro of the kernel source in brackets). */
typedef struct spk_cluster_variant {
    int hidden;      /* [HIDDEN] */
    int push;        /* [PUSH] SPK_PUSH_*: also picks the source */
    int cluster;     /* [CLUSTER] blocks a cluster */
    int gate_block;  /* [GATE_BLOCK] gate rows a thread holds */
    int gates_ahead; /* [GATES_AHEAD] steps ahead a cell's x·Wᵀ is fetched */
    int row_phases;  /* [ROW_PHASES] halves of a tile taking turns */
    int tile_rows;   /* [TILE_ROWS] the most rows a tile carries */
    int threads;     /* [THREADS] threads a block */
    int row_group;   /* [ROW_GROUP] rows whose partial dots a thread forms at once */
    int min_blocks;  /* [MIN_BLOCKS] __launch_bounds__' blocks an SM */
    int early_gates; /* [EARLY_GATES] the next step's gates taken before the wait, the re-arm after publish */
    int cell;        /* [CELL] the cell's form: SPK_CELL_* */
} spk_cluster_variant;

/* kernel.cell: the cell's instructions (kernels/lstm_cell.cuh). */
enum {
    SPK_CELL_REFERENCE = 0, /* the persistent kernel's and the baseline's */
    SPK_CELL_TRIMMED = 1,   /* fewer dependent instructions, the same bits for every input */
    SPK_CELL_FUSED = 2,     /* the bias added to x·Wᵀ off the step's chain, the tanh polynomial in FMAs: other
                               bits, within the FP32 bound */
};

/* The options, their values, defaults and rules (cluster.c). */
extern const spk_kernel_family spk_cluster_family;

/* What a variant derives: the sizes the plan launches with and the kernel
 * compiles with, computed here only. */
typedef struct spk_cluster_sizes {
    const char *file;     /* the source in spk_kernel_dir() */
    int units;            /* hidden units a block: hidden / cluster */
    int gate_rows;        /* 4 * units */
    int chunks;           /* k-chunks a gate row: threads / (gate_rows / gate_block) */
    int slots;            /* (row, unit) cells a thread owns at tile_rows */
    int registers;        /* the register budget a thread: 65536 / (threads * min_blocks) */
    size_t smem_bytes;    /* dynamic shared memory of a launch of tile_rows rows */
} spk_cluster_sizes;

/* Checks a variant (its option values and rules, then what only the sizes
 * can say: threads, row groups, shared memory) and derives its sizes for
 * launches of `tile_rows` rows (<= v->tile_rows; 0: v->tile_rows). Messages
 * name the option ("kernel.threads 384 must be 64 * chunks ..."). out may be
 * NULL. */
int spk_cluster_variant_derive(const spk_cluster_variant *v, int tile_rows, spk_cluster_sizes *out);

/* Fills the sizes left 0 (threads, row_group, min_blocks; cluster and
 * tile_rows for a variant built from scratch) from the other options and the
 * hidden size. */
void spk_cluster_variant_fit(spk_cluster_variant *v);

/* The plan's default for a batch: the batch table's row (cluster.c), fitted
 * to `hidden`; *tile_rows gets the launch's tile height (0: the schedule
 * picks, up to the variant's tile_rows). */
spk_cluster_variant spk_cluster_variant_for_batch(int hidden, int64_t batch, int64_t *tile_rows);
/* The variant a plan of this batch compiles for the options a script gave
 * (the rest by each option's default rule), checked; *tile_rows as above. */
int spk_cluster_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given, spk_cluster_variant *out,
                                int64_t *tile_rows);

/* Compiles the variant's source for `arch` ("sm_90"; NULL: the device's). */
spk_module *spk_cluster_variant_compile(const spk_cluster_variant *v, const char *arch);

#define SPK_LSTM_CLUSTER_KERNEL "spk_lstm_cluster"

/* ---- Schedules ------------------------------------------------------------ */

#define SPK_CLUSTER_MAX_HEIGHTS 6 /* 1, 2, 4, 8, 16, 32 */

typedef struct spk_cluster_schedule {
    int64_t batch;
    int64_t tile_rows;
    int64_t tiles;       /* per direction: ceil(batch / tile_rows) */
    int64_t clusters;    /* tiles * 2 (one a direction), all in one launch per layer */
    int64_t max_active;  /* clusters of this shape the device runs at once */
    int64_t waves;       /* ceil(clusters / max_active) */
} spk_cluster_schedule;

/* The tile heights worth trying: 1, 2, 4, ..., up to max_tile_rows (and
 * max_tile_rows itself). Returns how many. */
int spk_cluster_heights(int max_tile_rows, int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1]);
/* Picks the tile height: `forced` > 0 takes that height; otherwise the
 * smallest of `heights` (ascending) whose tiles * 2 clusters (one a
 * direction) all run at once (max_active[i] of them fit), else the largest
 * height (fewest waves). Needs no device. */
int spk_cluster_schedule_pick(spk_cluster_schedule *out, int64_t batch, const int64_t *heights,
                              const int64_t *max_active, int count, int64_t forced);

/* ---- The plan through the kernel stack (kernel_stack.h) ----------------- */

/* The kernel's arguments in the contract's names: gates, r, bias, output,
 * status, batch, steps, tile_rows (both directions in one launch). */
#define SPK_CLUSTER_NARGS 8
extern const int spk_cluster_args[SPK_CLUSTER_NARGS];
/* The description the plan gives the kernel stack (no device needed): per
 * layer one launch of both directions, grid (cluster, tiles, 2), clusters
 * (cluster, 1, 1), the dynamic shared memory of the schedule's tile height,
 * not co-resident (clusters never wait on each other, so they run in
 * waves), no state, the packing "ifco" units, the kernel's status codes. */
int spk_cluster_stack_desc(const spk_cluster_variant *v, const spk_cluster_schedule *s, spk_kernel_stack_desc *out,
                           spk_kernel_stack_launch *launch);

/* ---- Plans ------------------------------------------------------------- */

typedef struct spk_cluster_plan_options {
    const spk_lstm_layer *layers;
    int count;
    int64_t batch, steps;
    spk_kernel_choice kernel; /* the kernel options a script gave; the rest: the batch's default */
    /* The input projections' cuBLAS math: SPK_MATH_FP32 (0, the default) or
     * SPK_MATH_TF32. The recurrence (R·h and the cell) is FP32 strict either way:
     * its per-step product of a few rows has no MMA form in the kernel. */
    spk_math_mode math;
} spk_cluster_plan_options;

typedef struct spk_cluster_plan spk_cluster_plan;

typedef struct spk_cluster_plan_info {
    spk_cluster_variant variant;
    spk_cluster_sizes sizes; /* at the schedule's tile height */
    spk_cluster_schedule schedule;
    spk_kernel_attrs attrs;
    int sms;
    char arch[16];
    spk_lstm_gpu_shape shape; /* layers, sizes, the input projections' math */
} spk_cluster_plan_info;

/* Resolves the kernel options (spk_cluster_variant_resolve). Refuses (before
 * any device work, in this order) bad shapes and dtypes, a variant the
 * options do not make, batch or steps < 1, a math other
 * than FP32 or TF32, non-finite weights; then needs a device of compute capability >= 9.0 ("the cluster
 * backend needs compute capability 9.0 (this device: 8.0)"). */
spk_cluster_plan *spk_cluster_plan_new(const spk_cluster_plan_options *options);
void spk_cluster_plan_free(spk_cluster_plan *plan);
const spk_cluster_plan_info *spk_cluster_plan_get_info(const spk_cluster_plan *plan);
int spk_cluster_plan_enqueue(spk_cluster_plan *plan, const spk_tensor *x); /* contiguous device x */
int spk_cluster_plan_finish(spk_cluster_plan *plan);
spk_tensor *spk_cluster_plan_forward(spk_cluster_plan *plan, const spk_tensor *x);
int spk_cluster_plan_time(spk_cluster_plan *plan, const spk_tensor *x, int rounds, int warmup, double *ms);

/* ---- Step timelines (docs/timeline.md) ----------------------------------- */

/* The stages the variant's timeline build stamps (kernels/lstm_timeline_stages.cuh):
 * the baseline's, or the direct pushes' with one or two row phases; the
 * waits wait for the publish of the previous step. */
const spk_timeline_stages *spk_cluster_timeline_stages(const spk_cluster_variant *v);
/* The variant's timeline build (SPK_TIMELINE=1: seven more kernel parameters,
 * spk_timeline_args), for `arch` as spk_cluster_variant_compile. */
spk_module *spk_cluster_variant_compile_timeline(const spk_cluster_variant *v, const char *arch);
/* Checks a selection against a plan (needs no device): its layers and steps,
 * the blocks of a direction (cluster * tiles, block rank + cluster * tile)
 * and the warps of a block. */
int spk_cluster_timeline_check(const spk_cluster_plan_info *info, const spk_timeline_selection *sel);

/* What the timeline build of a plan's variant runs with (compiled on first use). */
typedef struct spk_cluster_timeline_build {
    spk_kernel_attrs attrs;     /* registers, spills, ... */
    int64_t max_active;         /* clusters of the schedule's shape that run at once */
    int64_t waves;              /* of the schedule's clusters */
} spk_cluster_timeline_build;

/* As spk_cluster_plan_forward through the timeline build (compiled on first
 * use), recording `sel` (checked): the same output bits, and *stamps, *clock
 * the decoded stamps (spk_timeline_decode with the variant's stages); build,
 * if not NULL, what that build runs with. */
spk_tensor *spk_cluster_plan_forward_timeline(spk_cluster_plan *plan, const spk_tensor *x,
                                              const spk_timeline_selection *sel, spk_tensor **stamps,
                                              spk_timeline_clock *clock, spk_cluster_timeline_build *build);
/* As spk_cluster_plan_time through the timeline build recording `sel`. */
int spk_cluster_plan_time_timeline(spk_cluster_plan *plan, const spk_tensor *x, const spk_timeline_selection *sel,
                                   int rounds, int warmup, double *ms);

#endif
