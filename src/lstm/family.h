/* A built-in recurrence kernel family: what the one plan of the built-in
 * kernels (stack_plan.h) needs to run a kernel on the kernel stack
 * (kernel_stack.h), written once per family as a record of data and short
 * functions: its option table, the variant a batch resolves to, the compile
 * of each build, the kernel stack's description (the schedule and the
 * launches), the timeline stages and the plan's information. The persistent
 * family is persistent.c's, the cluster family cluster.c's; spk_families
 * lists them, and a new family is one more record there and its kernel file
 * (docs/design.md, "Adding a kernel family").
 *
 * A family keeps what a plan of it resolved and measured in its state (up to
 * SPK_FAMILY_STATE_BYTES, its own struct: the variant, its sizes, the
 * schedule); the plan hands the state to every function below.
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_FAMILY_H
#define SPK_LSTM_FAMILY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/runtime.h"
#include "cuda/timeline.h"
#include "lstm/fields.h"
#include "lstm/kernel_options.h"
#include "lstm/kernel_stack.h"

/* The builds of a family's kernel source. */
typedef enum spk_kernel_build {
    SPK_BUILD_PLAIN,    /* the plan's kernel */
    SPK_BUILD_TRACE,    /* SPK_DEBUG_TRACE=1: records h and c of chosen steps (families with SPK_PLAN_TRACE) */
    SPK_BUILD_TIMELINE, /* SPK_TIMELINE=1: stamps the stage boundaries (docs/timeline.md) */
} spk_kernel_build;

/* The plan options a family takes beyond layers, batch, steps, math and kernel. */
#define SPK_PLAN_SCHEDULE 1u /* schedule: a tile schedule made elsewhere (checked) */
#define SPK_PLAN_CAPACITY 2u /* capacity: fewer co-resident blocks than the device holds */
#define SPK_PLAN_TIMEOUT 4u  /* timeout_ms: the longest wait before the kernel gives up */
#define SPK_PLAN_TRACE 8u    /* forward{trace =}: the plain build if its arguments take the trace, else the trace build */

/* What a plan asks of its family. */
typedef struct spk_family_request {
    int hidden;
    int64_t batch, steps;
    int layers;
    spk_kernel_choice kernel;    /* the options a script gave; the rest: the batch's default */
    const spk_schedule *schedule; /* SPK_PLAN_SCHEDULE; NULL: the family's rule */
    int64_t capacity;             /* SPK_PLAN_CAPACITY; 0: the device's */
    uint64_t timeout_ns;          /* SPK_PLAN_TIMEOUT; 0: never give up */
} spk_family_request;

#define SPK_FAMILY_STATE_BYTES 640
typedef struct spk_family_state {
    _Alignas(16) unsigned char bytes[SPK_FAMILY_STATE_BYTES];
} spk_family_state;

/* A family's own state struct `type` (its variant first): checked to fit,
 * and its accessors state_of(st) and cstate_of(st). */
#define SPK_FAMILY_STATE_TYPE(type)                                                                                    \
    _Static_assert(sizeof(type) <= SPK_FAMILY_STATE_BYTES, #type " outgrows spk_family_state");                       \
    static inline type *state_of(spk_family_state *st) { return (type *)(void *)st->bytes; }                           \
    static inline const type *cstate_of(const spk_family_state *st) { return (const type *)(const void *)st->bytes; }

typedef struct spk_family {
    const char *backend; /* spk.lstm.stack's backend name: "persistent" */
    const char *title;   /* the kernel in messages: "persistent recurrence" */
    const char *summary; /* one line for help */
    const char *help;    /* what help "<backend>" says beyond every plan's API: a paragraph */
    const spk_kernel_family *options;
    unsigned accepts;    /* SPK_PLAN_* */
    const char *entry;   /* the kernel function */
    const char *clear_entry; /* a kernel clearing the state words (NULL: a memset) */

    /* The variant a plan of this batch compiles for the options given (each
     * option left out by its default rule), checked, into the state (zeroed
     * by the plan); no device. Also what spk.lstm.kernel_variant reports. */
    int (*resolve)(spk_family_state *st, const spk_family_request *r);
    /* The variant's options are the options table's; these are what it
     * derives (sizes, the source file), no device. */
    void (*variant_fields)(const spk_family_state *st, spk_fields *out);
    /* The checks of a request that need the variant, before any device work
     * (32-bit index limits, step flags); NULL: none. */
    int (*check)(const spk_family_state *st, const spk_family_request *r);
    /* What the family needs of the device (compute capability 9.0); NULL: nothing. */
    int (*check_device)(spk_family_state *st, const spk_device_props *props);
    /* Compiles a build of the variant for `arch` (NULL: the current device's). */
    spk_module *(*compile)(const spk_family_state *st, spk_kernel_build build, const char *arch);
    /* The defines the variant compiles with beyond its options' (a word
     * option's encoding, derived sizes, the packing's gate positions), at
     * most SPK_FAMILY_EXTRA_DEFINES; NULL: none. Returns how many. */
    int (*extra_defines)(const spk_family_state *st, spk_define *out, char text[][16]);
    /* From the compiled plain build: the schedule, and the kernel stack's
     * description, its launches allocated (malloc; the plan frees
     * desc->launches once the stack has copied them). */
    int (*describe)(spk_family_state *st, spk_kernel *kernel, const spk_family_request *r, spk_kernel_stack_desc *desc);
    /* A trace or timeline build's kernel against the plan (its occupancy may
     * be lower), and what that build runs with (waves, capacity; the plan
     * adds its registers and spills). A trace build takes the plain build's
     * arguments and then trace, trace_slot and trace_slots. */
    int (*check_build)(const spk_family_state *st, spk_kernel_build build, spk_kernel *kernel, spk_fields *out);
    /* The timeline build's stages; NULL: the family has no timeline build. */
    const spk_timeline_stages *(*stages)(const spk_family_state *st);
    /* What a timeline records: blocks a direction, warps a block, the blocks of a group (a tile, a cluster). */
    void (*timeline_geometry)(const spk_family_state *st, int64_t *blocks, int *warps, int *group);
    /* plan.kernel's measured fields (beyond the options, the variant's
     * fields and the kernel's attributes) and plan.schedule. */
    void (*plan_fields)(const spk_family_state *st, spk_fields *kernel, spk_fields *schedule);
    /* plan.variant: what runs, in words (the math's suffix is added by the plan). */
    void (*variant_text)(const spk_family_state *st, char *out, size_t size);
    /* __tostring of an open plan: "lstm stack (persistent, 4 layers, ...)". */
    void (*name)(const spk_family_state *st, const spk_lstm_gpu_shape *shape, char *out, size_t size);
} spk_family;

/* The built-in families, NULL-terminated: the persistent, the cluster and the tensor-core kernels. */
extern const spk_family *const spk_families[];
/* The family of a backend name, or NULL with "backend x has no kernel
 * options (persistent, cluster, tensor_core)". */
const spk_family *spk_family_find(const char *backend);

extern const spk_family spk_persistent_kernels;
extern const spk_family spk_cluster_kernels;
extern const spk_family spk_tensor_core_kernels;

/* What the built-in kernels share: the status codes they write
 * (kernels/spk_status.cuh), and compiling a source of the kernel folder with
 * a variant's defines and a build's. */
extern const spk_kernel_stack_status spk_builtin_statuses[];
extern const int spk_builtin_nstatuses;
spk_module *spk_family_compile_source(const char *file, const spk_kernel_family *options, const void *variant,
                                      spk_kernel_build build, const char *arch);

/* Every define a plan of the family compiles with: its options' (as
 * spk_kernel_defines writes them), then its extra_defines. Returns how many. */
#define SPK_FAMILY_EXTRA_DEFINES 8
#define SPK_FAMILY_DEFINES (SPK_KERNEL_OPTIONS_MAX + SPK_FAMILY_EXTRA_DEFINES)
int spk_family_defines(const spk_family *f, const spk_family_state *st, spk_define *out, char text[][16]);
/* A `check` for kernels that index x·Wᵀ and h with 32-bit integers: batch x
 * steps x 4 within INT32_MAX. */
int spk_family_check_indices(const spk_family_state *st, const spk_family_request *r);
/* Compiles a source of the kernel folder with these defines and a build's. */
spk_module *spk_family_compile_defines(const char *file, const spk_define *defines, int count,
                                       spk_kernel_build build, const char *arch);

#endif
