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
#include "lstm/device_layers.h"
#include "lstm/lstm.h"

/* ---- Kernel variants (macros of kernels/lstm_cluster.cu) ---------------- */

typedef struct spk_cluster_variant {
    int hidden;          /* HIDDEN */
    int cluster;         /* CLUSTER: blocks per cluster, 1, 2, 4, 8 or 16 */
    int threads;         /* THREADS = 4 * (hidden / cluster) / gate_block * chunks, chunks 2, 4 or 8, whole
                            warps, <= 1024 */
    int gate_block;      /* GATE_BLOCK: gate rows a thread holds, 1 or 4 (the four gates of a unit; needs
                            direct_push and weights in registers) */
    int max_tile_rows;   /* TILE_ROWS: the most rows a tile carries, 1 .. 32 */
    int row_group;       /* ROW_GROUP: 1, 2, 4 or 8, at most chunks */
    int min_blocks;      /* MIN_BLOCKS: __launch_bounds__ blocks per SM */
    bool weights_shared; /* WEIGHTS_SHARED: R in shared memory instead of registers */
    /* Step-latency options; each gives the same bits as the plain kernel: */
    bool cell_in_lanes;     /* CELL_IN_LANES: the lanes holding a row's sums finish its cell (no `pre`) */
    bool late_store;        /* LATE_STORE: h to the output after the cluster arrive */
    bool vector_push;       /* VECTOR_PUSH: 16-byte DSMEM pushes of the block's h (units % 4 == 0) */
    bool mbarrier_exchange; /* MBARRIER_EXCHANGE: st.async + mbarrier waits, no cluster barrier per step
                               (implies vector_push unless direct_push) */
    bool direct_push;       /* DIRECT_PUSH: every lane holding a copy of a cell st.asyncs its h into its
                               share of the blocks; no block barrier in a step (needs mbarrier_exchange and
                               cell_in_lanes; replaces vector_push) */
    bool warp_push;         /* WARP_PUSH: the direct pushes of a warp as 16-byte st.async (four consecutive
                               units of one row; needs direct_push and gate_block 4) */
    int gates_ahead;        /* GATES_AHEAD: steps ahead a cell's x·Wᵀ is fetched, 1 (a register load) or
                               2 .. 4 (cp.async into shared-memory stages; needs direct_push) */
    int directions;         /* DIRECTIONS: directions a block runs, 1 or 2 (both directions of a tile in one
                               block of 2 * threads, each with its own shared memory: one direction computes
                               while the other waits for its h; needs direct_push, weights in registers) */
    int row_phases;         /* ROW_PHASES: 1, or 2: the tile's row groups in two halves that take turns, each
                               with its own mbarriers (one half computes while the other's h crosses the
                               cluster); needs direct_push and two row groups a tile */
} spk_cluster_variant;

typedef struct spk_cluster_geometry {
    int units;              /* hidden units per block: hidden / cluster */
    int gate_rows;          /* 4 * units */
    int chunks;             /* threads / (gate_rows / gate_block) */
    int cells;              /* (row, unit) cells per thread at max_tile_rows */
    size_t weight_bytes;    /* shared memory for R (weights_shared), else 0 */
} spk_cluster_geometry;

/* What a script left out, fitted to `hidden`: gate_block 1, gates_ahead 1, directions 1, row_phases 1, cluster 8 where
 * it divides (else the largest of 4, 2, 1 that gives whole warps), threads =
 * the most chunks (8, 4, 2) within 512 threads (256 a direction with directions 2), tile rows 32, row_group = chunks
 * (with cell_in_lanes: at most the largest power of two <= tile rows, as a
 * tile is padded to whole row groups; with row_phases 2 at most half the
 * tile rows, so each phase has a group), min_blocks 2 where each thread holds
 * at most 16 weights and none of the options ptxas spills with at 64
 * registers is set (mbarrier_exchange, except in the lanes form with one
 * row; vector_push without cell_in_lanes past one row; cell_in_lanes past
 * 8 rows), else 1;
 * mbarrier_exchange sets vector_push unless direct_push is set (which clears it).
 * Fields already set (non-zero) are kept. */
void spk_cluster_variant_fit(spk_cluster_variant *v);
/* Checks a variant against the kernel's static_asserts; messages name the
 * field ("kernel.cluster 3 must be 1, 2, 4, 8 or 16"). out may be NULL. */
int spk_cluster_variant_check(const spk_cluster_variant *v, spk_cluster_geometry *out);
/* Dynamic shared memory of a launch with tiles of `tile_rows` rows. */
size_t spk_cluster_smem_bytes(const spk_cluster_variant *v, int tile_rows);

#define SPK_CLUSTER_VARIANT_DEFINES 17
typedef struct spk_cluster_variant_defines {
    spk_define defines[SPK_CLUSTER_VARIANT_DEFINES];
    char text[SPK_CLUSTER_VARIANT_DEFINES][16];
} spk_cluster_variant_defines;
void spk_cluster_variant_defines_fill(const spk_cluster_variant *v, spk_cluster_variant_defines *out);
/* Compiles kernels/lstm_cluster.cu for `arch` ("sm_90"; NULL: the device's). */
spk_module *spk_cluster_variant_compile(const spk_cluster_variant *v, const char *arch);

#define SPK_LSTM_CLUSTER_KERNEL "spk_lstm_cluster"

/* The plan's default for a batch (no kernel options given): a row of a small
 * table (cluster.c's batch_table, from tools/cluster_sweep.lua on the H200),
 * fitted to `hidden`; *tile_rows gets the row's tile height (0: the schedule
 * picks). */
spk_cluster_variant spk_cluster_variant_for_batch(int hidden, int64_t batch, int64_t *tile_rows);

/* ---- Schedules ------------------------------------------------------------ */

#define SPK_CLUSTER_MAX_HEIGHTS 6 /* 1, 2, 4, 8, 16, 32 */

typedef struct spk_cluster_schedule {
    int64_t batch;
    int64_t tile_rows;
    int64_t tiles;       /* per direction: ceil(batch / tile_rows) */
    int64_t clusters;    /* tiles * 2 / directions, all in one launch per layer */
    int64_t max_active;  /* clusters of this shape the device runs at once */
    int64_t waves;       /* ceil(clusters / max_active) */
} spk_cluster_schedule;

/* The tile heights worth trying: 1, 2, 4, ..., up to max_tile_rows (and
 * max_tile_rows itself). Returns how many. */
int spk_cluster_heights(int max_tile_rows, int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1]);
/* Picks the tile height: `forced` > 0 takes that height; otherwise the
 * smallest of `heights` (ascending) whose tiles * 2 / directions clusters
 * (directions: a block's, 1 or 2) all run at once (max_active[i] of them
 * fit), else the largest height (fewest waves). Needs no device. */
int spk_cluster_schedule_pick(spk_cluster_schedule *out, int64_t batch, const int64_t *heights,
                              const int64_t *max_active, int count, int64_t forced, int directions);

/* ---- Plans ------------------------------------------------------------- */

typedef struct spk_cluster_plan_options {
    const spk_lstm_layer *layers;
    int count;
    int64_t batch, steps;
    spk_cluster_variant variant; /* fitted and checked */
    int64_t tile_rows;           /* > 0: this tile height; 0: spk_cluster_schedule_pick's choice */
    /* The input projections' cuBLAS math: SPK_MATH_FP32 (0, the default) or
     * SPK_MATH_TF32. The recurrence (R·h and the cell) is FP32 strict either way:
     * its per-step product of a few rows has no MMA form in the kernel. */
    spk_math_mode math;
} spk_cluster_plan_options;

typedef struct spk_cluster_plan spk_cluster_plan;

typedef struct spk_cluster_plan_info {
    spk_cluster_variant variant;
    spk_cluster_geometry geometry;
    spk_cluster_schedule schedule;
    size_t smem_bytes;     /* dynamic shared memory per block */
    spk_kernel_attrs attrs;
    int sms;
    char arch[16];
    spk_lstm_gpu_shape shape; /* layers, sizes, the input projections' math */
} spk_cluster_plan_info;

/* Refuses (before any device work, in this order) bad shapes and dtypes,
 * batch or steps < 1, a hidden size the variant does not fit, a math other
 * than FP32 or TF32, non-finite weights; then needs a device of compute capability >= 9.0 ("the cluster
 * backend needs compute capability 9.0 (this device: 8.0)"). */
spk_cluster_plan *spk_cluster_plan_new(const spk_cluster_plan_options *options);
void spk_cluster_plan_free(spk_cluster_plan *plan);
const spk_cluster_plan_info *spk_cluster_plan_get_info(const spk_cluster_plan *plan);
int spk_cluster_plan_enqueue(spk_cluster_plan *plan, const spk_tensor *x); /* contiguous device x */
int spk_cluster_plan_finish(spk_cluster_plan *plan);
spk_tensor *spk_cluster_plan_forward(spk_cluster_plan *plan, const spk_tensor *x);
int spk_cluster_plan_time(spk_cluster_plan *plan, const spk_tensor *x, int rounds, int warmup, double *ms);

#endif
