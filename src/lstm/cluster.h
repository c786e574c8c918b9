/* The thread-block-cluster recurrence kernel family (sm_90,
 * kernels/lstm_cluster.cu, kernels/lstm_cluster_baseline.cu): its variants
 * and options, its schedule, and the description the one plan
 * (stack_plan.h) runs on the kernel stack: per layer ONE cluster launch that
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
#include "lstm/family.h"
#include "lstm/kernel_options.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"
#include "lstm_cell_forms.cuh"

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
    int max_tile_rows; /* [TILE_ROWS] the most rows a tile carries */
    int tile_rows;   /* rows a tile of the launch carries (0: the schedule picks); the launch's, no macro */
    int threads;     /* [THREADS] threads a block */
    int row_group;   /* [ROW_GROUP] rows whose partial dots a thread forms at once */
    int min_blocks;  /* [MIN_BLOCKS] __launch_bounds__' blocks an SM */
    int early_gates; /* [EARLY_GATES] the next step's gates taken before the wait, the re-arm after publish */
    int cell;        /* [CELL] the cell's form: SPK_CELL_* (lstm_cell_forms.cuh) */
    int mapped_pushes; /* [MAPPED_PUSHES] 1: the peers' addresses mapped once a lane, predicated pushes; 2: the
                          step's addresses made before it (direct pushes) */
} spk_cluster_variant;

/* The options, their values, defaults and rules (cluster.c). */
extern const spk_kernel_family spk_cluster_family;

/* What a variant derives: the sizes the plan launches with and the kernel
 * compiles with, computed here only. */
typedef struct spk_cluster_sizes {
    const char *file;     /* the source in spk_kernel_dir() */
    int units;            /* hidden units a block: hidden / cluster */
    int gate_rows;        /* 4 * units */
    int chunks;           /* k-chunks a gate row: threads / (gate_rows / gate_block) */
    int slots;            /* (row, unit) cells a thread owns at max_tile_rows */
    int registers;        /* the register budget a thread: 65536 / (threads * min_blocks) */
    size_t smem_bytes;    /* dynamic shared memory of a launch of tile_rows rows */
} spk_cluster_sizes;

/* Checks a variant (its option values and rules, then what only the sizes
 * can say: threads, row groups, shared memory) and derives its sizes for
 * launches of `tile_rows` rows (<= v->max_tile_rows; 0: the variant's
 * tile_rows, or max_tile_rows where that is 0). Messages
 * name the option ("kernel.threads 384 must be 64 * chunks ..."). out may be
 * NULL. */
int spk_cluster_variant_derive(const spk_cluster_variant *v, int tile_rows, spk_cluster_sizes *out);

/* Fills the sizes left 0 (threads, row_group, min_blocks; cluster and
 * max_tile_rows for a variant built from scratch) from the other options and the
 * hidden size. */
void spk_cluster_variant_fit(spk_cluster_variant *v);

/* The plan's default for a batch: the batch table's row (cluster.c), fitted
 * to `hidden`; its tile_rows the launch's tile height (0: the schedule picks,
 * up to the variant's max_tile_rows). */
spk_cluster_variant spk_cluster_variant_for_batch(int hidden, int64_t batch);
/* The variant a plan of this batch compiles for the options a script gave
 * (the rest by each option's default rule), checked. */
int spk_cluster_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given, spk_cluster_variant *out);

/* Compiles a build of the variant's source for `arch` ("sm_90"; NULL: the
 * device's): the plain build or the timeline build (SPK_TIMELINE=1). */
spk_module *spk_cluster_variant_compile(const spk_cluster_variant *v, spk_kernel_build build, const char *arch);

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
/* Its fields (batch, tile_rows, tiles, clusters, max_active_clusters, waves,
 * launches): plan.schedule and spk.core.cluster_schedule_pick's result. */
void spk_cluster_schedule_fields(const spk_cluster_schedule *s, spk_fields *out);

/* The tile heights worth trying: 1, 2, 4, ..., up to max_tile_rows (and
 * max_tile_rows itself). Returns how many. */
int spk_cluster_heights(int max_tile_rows, int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1]);
/* Picks the tile height: `forced` > 0 takes that height; otherwise the
 * smallest of `heights` (ascending) whose tiles * 2 clusters (one a
 * direction) all run at once (max_active[i] of them fit), else the largest
 * height (fewest waves). Needs no device. */
int spk_cluster_schedule_pick(spk_cluster_schedule *out, int64_t batch, const int64_t *heights,
                              const int64_t *max_active, int count, int64_t forced);

/* ---- The plan's description (kernel_stack.h) ----------------------------- */

/* The kernel's arguments in the contract's names: gates, r, bias, output,
 * status, batch, steps, tile_rows (both directions in one launch). */
#define SPK_CLUSTER_NARGS 8
extern const int spk_cluster_args[SPK_CLUSTER_NARGS];
/* The description the plan gives the kernel stack (no device needed): per
 * layer one launch of both directions, grid (cluster, tiles, 2), clusters
 * (cluster, 1, 1), the dynamic shared memory of the schedule's tile height,
 * not co-resident (clusters never wait on each other, so they run in
 * waves), no state, the built-in packing, the built-in status codes. */
int spk_cluster_stack_desc(const spk_cluster_variant *v, const spk_cluster_schedule *s, spk_kernel_stack_desc *out,
                           spk_kernel_stack_launch *launch);

/* The stages the variant's timeline build stamps (kernels/lstm_timeline_stages.cuh):
 * the baseline's, or the direct pushes' with one or two row phases; the
 * waits wait for the publish of the previous step. The plans are the
 * family's (spk_cluster_kernels, family.h). */
const spk_timeline_stages *spk_cluster_timeline_stages(const spk_cluster_variant *v);

#endif
