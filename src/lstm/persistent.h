/* The persistent recurrence kernel family (kernels/lstm_recurrence.cu,
 * docs/design.md): its variants and options, the tile schedule's fit, and
 * the description the one plan (stack_plan.h) runs on the kernel stack: per
 * layer the cooperative recurrence launches of the tile schedule (the reverse
 * direction on a side stream when the schedule is concurrent).
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
#include "lstm/family.h"
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
    int max_tile_rows; /* [MAX_TILE_ROWS] the most batch rows a tile carries */
    int tile_rows;  /* batch rows a tile carries (0: the schedule picks); the schedule's, no macro */
} spk_persistent_variant;

extern const spk_kernel_family spk_persistent_family;

/* Launch geometry and defines derived from a variant, as the kernel derives it. */
typedef struct spk_persistent_geometry {
    int groups;         /* blocks per tile: hidden / units */
    int gate_rows;      /* 4 * units packed rows of R per block */
    int chunks;         /* threads / (gate_rows / gate_block) k-chunks per gate row */
    int64_t state_tile; /* 64-bit words per tile: 2 * max_tile_rows * hidden */
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
 * size), row_group (1 for gate_block 1, chunks for gate_block 4) and
 * max_tile_rows (a tile_rows given, else what that split can carry, at most
 * 32). */
void spk_persistent_variant_fit(spk_persistent_variant *v);
/* Checks a variant against the kernel's static_asserts and derives its
 * geometry and defines (out may be NULL). Messages name the option, e.g.
 * "kernel.threads 96 must be units * 4 * chunks with chunks 2, 4 or 8". */
int spk_persistent_variant_check(const spk_persistent_variant *v, spk_persistent_geometry *out);

/* Compiles a build of the recurrence source (kernels/lstm_recurrence.cu in
 * spk_kernel_dir()) for `arch` ("sm_90", "compute_80", or NULL for the
 * current device): the plain build, the trace build (SPK_DEBUG_TRACE=1: three
 * more kernel parameters, h and c of chosen steps written to a trace buffer)
 * or the timeline build (SPK_TIMELINE=1, docs/timeline.md). */
spk_module *spk_persistent_variant_compile(const spk_persistent_variant *v, spk_kernel_build build, const char *arch);

#define SPK_LSTM_RECURRENCE_KERNEL "spk_lstm_recurrence"
#define SPK_LSTM_CLEAR_KERNEL "spk_lstm_clear"

/* The tile heights the schedule tries: the variant's tile_rows alone where
 * it names one, else those of 8, 16, 32 the variant carries (<=
 * max_tile_rows), else max_tile_rows alone. */
int spk_persistent_variant_heights(const spk_persistent_variant *v, int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS]);

/* Checks that a schedule suits a variant and a device capacity before any
 * launch: tile_rows <= the variant's max_tile_rows, groups == the variant's, every launch's
 * blocks (tiles_per_launch * groups) within `capacity`, and a concurrent
 * schedule's two simultaneous launches within `concurrent_capacity`
 * (SPK_SCHEDULE_UNKNOWN: concurrent is refused). */
int spk_persistent_schedule_fits(const spk_schedule *s, const spk_persistent_variant *v, int64_t capacity,
                           int64_t concurrent_capacity);

/* ---- The plan's description (kernel_stack.h) ----------------------------- */

/* The kernel's arguments in the contract's names (gates, r, bias, output,
 * state, status, batch, steps, direction, first_tile, tile_rows, flag_base,
 * timeout_ns); its trace build takes trace, trace_slot, trace_slots after them. */
#define SPK_PERSISTENT_NARGS 13
extern const int spk_persistent_args[SPK_PERSISTENT_NARGS];
/* The description the plan gives the kernel stack (no device needed): per
 * layer the schedule's cooperative launches of direction 0, then of
 * direction 1 (grid (groups, tiles), block threads, first_tile the launch's),
 * concurrent as the schedule, tile_rows the schedule's, state_words tiles *
 * STATE_TILE a direction, the built-in packing, the built-in status codes.
 * `launches` has room for `max` (2 * the schedule's launches). */
int spk_persistent_stack_desc(const spk_persistent_variant *v, const spk_schedule *s, uint64_t timeout_ns,
                              spk_kernel_stack_desc *out, spk_kernel_stack_launch *launches, int max);

/* The stages the timeline build stamps (kernels/lstm_timeline_stages.cuh);
 * the wait waits for the publish of the previous step. The plans are the
 * family's (spk_persistent_kernels, family.h). */
const spk_timeline_stages *spk_persistent_timeline_stages(void);

#endif
