/* Step timelines: the host side of kernels/spk_timeline.cuh. What a timeline
 * build records (a selection), the device buffer it stamps into, the launch
 * arguments its parameters take, and the decode of the stamps into a host
 * tensor [records, columns], with the alignment of every block's clock64 to
 * one time base. The contract, the buffer layout and the alignment:
 * docs/timeline.md. Conventions as in runtime.h (0 / -1, NULL on failure,
 * the message in spk_last_error()).
 *
 * A plan with an instrumented kernel (its SPK_TIMELINE=1 build):
 *   spk_timeline_selection_check(&sel, layers, steps, blocks, warps);
 *   spk_timeline *tl = spk_timeline_new(&sel, &stages, stream);
 *   every launch: its usual arguments, then spk_timeline_args(tl, layer, first_block_of_launch, args + n)
 *                 (with tl's storage among the launch's uses)
 *   spk_tensor *raw = spk_timeline_read(tl, stream);
 *   spk_tensor *stamps = spk_timeline_decode(raw, &stages, 0, &clock);
 * The decode needs no device, so recorded buffers can be decoded anywhere. */
#ifndef SPK_CUDA_TIMELINE_H
#define SPK_CUDA_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/runtime.h"

/* The kernel parameters SPK_TIMELINE_PARAMS adds. */
#define SPK_TIMELINE_ARGS 7
/* As in kernels/spk_timeline.cuh. */
#define SPK_TIMELINE_HEADER_WORDS 16
#define SPK_TIMELINE_MAX_MARKS 32
#define SPK_TIMELINE_MAX_STAGES (SPK_TIMELINE_MAX_MARKS - 1)
/* Bounds of one recording: a buffer of at most SPK_TIMELINE_MAX_BYTES. */
#define SPK_TIMELINE_MAX_STEPS 65536
#define SPK_TIMELINE_MAX_BLOCKS 4096
#define SPK_TIMELINE_MAX_BYTES ((size_t)256 << 20)

/* What one recording covers. */
typedef struct spk_timeline_selection {
    int layer;       /* 0-based; only the launches of this layer record */
    int direction;   /* 0 forward, 1 reverse */
    int first_step;  /* 0-based, in the order the direction runs its steps */
    int steps;       /* steps first_step .. first_step + steps - 1 */
    int first_block; /* the kernel's block index within the direction (0-based) */
    int blocks;      /* blocks first_block .. first_block + blocks - 1 */
    int warp;        /* the warp whose lane 0 stamps (0-based) */
} spk_timeline_selection;

/* A kernel's stages, in the order a step runs them. Mark 0 is the start of a
 * step, mark k the end of stage k (1-based), so a record has count + 1 marks. */
typedef struct spk_timeline_stages {
    int count;                /* 1 .. SPK_TIMELINE_MAX_STAGES */
    const char *const *names; /* `count` distinct names; none is "start", "block" or "step" */
    /* waits_for[k]: the stage (0-based) whose end, in every block of the
     * recording at the previous step, stage k (0-based) waits for (the
     * exchange of h), or -1; NULL: no stage waits for the other blocks.
     * The decode does not use it; the critical path does (lua/spk/timeline.lua). */
    const int *waits_for;
} spk_timeline_stages;

/* Names must be 1..31 characters; a stage waits for a stage of the previous step. */
int spk_timeline_stages_check(const spk_timeline_stages *stages);
/* Checks a selection against a kernel: `layers` layers, `steps` steps a
 * direction, `blocks` blocks a direction, `warps` warps a block. Messages
 * count layers and steps from 1, blocks and warps from 0, as the Lua side
 * does ("timeline.step_range: step 600 is past the last step, 589"). */
int spk_timeline_selection_check(const spk_timeline_selection *sel, int64_t layers, int64_t steps, int64_t blocks,
                                 int warps);
/* 64-bit words of the buffer for a selection and a stage count (the header included). */
size_t spk_timeline_words(const spk_timeline_selection *sel, int stages);

/* ---- the device buffer (needs a device) ---------------------------------- */

typedef struct spk_timeline spk_timeline;

/* A zeroed buffer on the current device for the selection, its header
 * written, enqueued on s (NULL: default stream). Checks the stages and the
 * bounds; spk_timeline_selection_check is the plan's (it knows the kernel). */
spk_timeline *spk_timeline_new(const spk_timeline_selection *sel, const spk_timeline_stages *stages, spk_stream *s);
void spk_timeline_free(spk_timeline *tl);
const spk_timeline_selection *spk_timeline_selection_of(const spk_timeline *tl);
/* The buffer's storage, for spk_launch_config.uses (NULL for tl NULL). */
spk_storage *spk_timeline_storage(const spk_timeline *tl);
/* The SPK_TIMELINE_ARGS arguments of a launch of layer `layer` (0-based)
 * whose block 0 is block `block_offset` of the direction: tl's buffer and
 * selection when the layer is the selection's, else a NULL buffer (the launch
 * records nothing); tl NULL: a NULL buffer. Needs no device. */
void spk_timeline_args(const spk_timeline *tl, int layer, int64_t block_offset, spk_arg out[SPK_TIMELINE_ARGS]);
/* The same for a selection and a buffer (device pointer) of one's own. */
void spk_timeline_selection_args(const spk_timeline_selection *sel, void *buffer, int layer, int64_t block_offset,
                                 spk_arg out[SPK_TIMELINE_ARGS]);
/* A host copy of the buffer (u64 [words]); waits for s. */
spk_tensor *spk_timeline_read(const spk_timeline *tl, spk_stream *s);

/* ---- the decode (needs no device) ----------------------------------------- */

/* How the decode put every block's stamps on one time base. */
typedef struct spk_timeline_clock {
    double cycles_per_ns;   /* clock64 cycles a globaltimer ns (the SM clock in GHz) */
    bool fitted;            /* fitted from the stamps (false: the rate was given) */
    double quantum_ns;      /* the globaltimer's step: the greatest common divisor of its readings' distances */
    double residual_ns;     /* the largest distance of an aligned stamp outside the interval its
                             * globaltimer reading allows ([g, g + quantum - 1]); 0 for a perfect fit */
    uint64_t origin;        /* the earliest globaltimer reading: time 0 of the ns columns */
    int blocks;             /* blocks with stamps */
    int64_t records;        /* rows of the decoded tensor */
    int64_t stamps;         /* marks stamped */
    spk_timeline_selection selection; /* as the buffer's header gave it */
} spk_timeline_clock;

/* The stamps of a raw buffer (a host u64 tensor [words] as spk_timeline_read
 * returns it, or one a test builds) as a host f64 tensor [records, columns]:
 * one row for every (block, step) of the selection with at least one mark
 * stamped, in block then step order; columns as spk_timeline_column names
 * them, NaN where a mark was not stamped. cycles_per_ns > 0 aligns with that
 * clock rate instead of the fitted one. Errors name what does not match
 * (magic, marks, size, a kernel that stamped nothing or another number of marks). */
spk_tensor *spk_timeline_decode(const spk_tensor *raw, const spk_timeline_stages *stages, double cycles_per_ns,
                                spk_timeline_clock *clock);

/* Columns of a decoded tensor: block, step, then for each mark m (start, then
 * the stages): its aligned time, then its cycles, then its globaltimer. */
int spk_timeline_column_count(const spk_timeline_stages *stages);
/* Column i (0-based): its name into name[size] ("block", "step", "start",
 * "dot", "start_cycles", "dot_globaltimer", ...), its unit ("", "ns",
 * "cycles") and a one-line description. */
int spk_timeline_column(const spk_timeline_stages *stages, int column, char *name, size_t size, const char **unit,
                        const char **about);

#endif
