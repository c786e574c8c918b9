/* The one plan of the GPU LSTM stack: a kernel stack (kernel_stack.h: the
 * packed weights, the batched input projections, the launches, the status
 * word, traces, timing) around either a built-in kernel family (family.h:
 * the persistent and the cluster kernels, the variant resolved from the
 * batch and the options given) or a kernel of one's own (a module and its
 * description, docs/kernels.md). What a family adds, this runs the same way
 * for every family: its trace and timeline builds (compiled on first use and
 * checked against the plan), the selection a timeline records, and the
 * plan's information as named fields.
 *
 * Conventions as in core/tensor.h: -1/NULL on failure with spk_last_error(). */
#ifndef SPK_LSTM_STACK_PLAN_H
#define SPK_LSTM_STACK_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda/timeline.h"
#include "lstm/family.h"
#include "lstm/kernel_stack.h"
#include "lstm/lstm.h"

typedef struct spk_stack_plan_options {
    const spk_family *family;
    const spk_lstm_layer *layers; /* host f32/f64 weights, ONNX layout (lstm.h) */
    int count;
    int64_t batch, steps;
    spk_math_mode math;           /* the input projections' (cuda/math_modes.h, SPK_MATH_STACKS) */
    spk_kernel_choice kernel;     /* the kernel options a script gave; the rest: the batch's default */
    /* The family's plan options (family.h: SPK_PLAN_*); a family that does
     * not take one refuses it. */
    const spk_schedule *schedule;
    int64_t capacity;
    uint64_t timeout_ns;
} spk_stack_plan_options;

typedef struct spk_stack_plan spk_stack_plan;

/* The variant a plan of the family compiles for this batch and the options
 * given (family.h: resolve), into *state; no device. */
int spk_family_variant(const spk_family *f, int hidden, int64_t batch, const spk_kernel_choice *kernel,
                       spk_family_state *state);

/* Validates the layers (shapes, dtypes, finite values), resolves the
 * variant, runs the family's checks and then needs a device: compiles the
 * plain build, has the family describe its launches, and builds the kernel
 * stack (which checks the kernel's parameters and the launches'
 * co-residency before any launch). */
spk_stack_plan *spk_stack_plan_new(const spk_stack_plan_options *o);
/* A plan of a kernel of one's own: the kernel stack of `o` (its
 * description, module and entry), no family; `stages` (copied, checked;
 * NULL: none) are what its timeline build stamps, which the caller compiles
 * (SPK_TIMELINE=1) and hands over with spk_stack_plan_set_timeline_build
 * before the first timeline forward or timing. */
spk_stack_plan *spk_stack_plan_of_kernel(const spk_kernel_stack_options *o, const spk_timeline_stages *stages);
/* A kernel of one's own's timeline build: `module`'s kernel `entry`, checked
 * against the plan (spk_kernel_stack_set_timeline_kernel: the plan's
 * parameters, then the seven of a recording) and held; what it runs with
 * (registers, spills) is the build a timeline forward reports. */
int spk_stack_plan_set_timeline_build(spk_stack_plan *p, spk_module *module, const char *entry);
void spk_stack_plan_free(spk_stack_plan *p);

const spk_family *spk_stack_plan_family(const spk_stack_plan *p);        /* NULL: a kernel of one's own */
const spk_family_state *spk_stack_plan_state(const spk_stack_plan *p);
const spk_kernel_stack_info *spk_stack_plan_info(const spk_stack_plan *p);
/* Whether forward takes a trace (the family's SPK_PLAN_TRACE, or a kernel
 * of one's own taking the trace arguments) and a timeline (a family with stages, or a
 * kernel of one's own that names them). */
bool spk_stack_plan_traceable(const spk_stack_plan *p);
const spk_timeline_stages *spk_stack_plan_stages(const spk_stack_plan *p); /* NULL: no timeline build */
/* What a timeline of the plan records: blocks a direction, warps a block,
 * blocks a group (a tile's, a cluster). */
void spk_stack_plan_timeline_geometry(const spk_stack_plan *p, int64_t *blocks, int *warps, int *group);
/* plan.kernel's fields (the options, the variant's sizes, the compiled
 * kernel's registers, spills, ...) and plan.schedule's (a family's; none for
 * a kernel of one's own). */
void spk_stack_plan_fields(const spk_stack_plan *p, spk_fields *kernel, spk_fields *schedule);
/* plan.variant (what runs, in words, with the math's suffix) and __tostring. */
void spk_stack_plan_variant_text(const spk_stack_plan *p, char *out, size_t size);
void spk_stack_plan_name(const spk_stack_plan *p, char *out, size_t size);

/* x host or device f32 [batch, steps, input] (any strides); a new [batch,
 * steps, 2H] f32 tensor on x's side. */
spk_tensor *spk_stack_plan_forward(spk_stack_plan *p, const spk_tensor *x);
/* CUDA-graph replays of one forward: ms[rounds] after `warmup` untimed. */
int spk_stack_plan_time(spk_stack_plan *p, const spk_tensor *x, int rounds, int warmup, double *ms);
/* As forward, through the trace build (compiled on first use; checked
 * against the plan), and *trace_h, *trace_c: new host f32 [count, batch, H]. */
spk_tensor *spk_stack_plan_forward_trace(spk_stack_plan *p, const spk_tensor *x, const spk_lstm_trace *trace,
                                         spk_tensor **trace_h, spk_tensor **trace_c);
/* Checks a timeline selection against the plan (no device): its layers and
 * steps, the blocks of a direction and the warps of a block. */
int spk_stack_plan_timeline_check(const spk_stack_plan *p, const spk_timeline_selection *sel);
/* As forward through the timeline build (compiled on first use), recording
 * `sel` (checked): the same output bits, and *stamps, *clock the decoded
 * stamps; *build what that build runs with (registers, spills, the family's). */
spk_tensor *spk_stack_plan_forward_timeline(spk_stack_plan *p, const spk_tensor *x, const spk_timeline_selection *sel,
                                            spk_tensor **stamps, spk_timeline_clock *clock, spk_fields *build);
/* As time through the timeline build recording `sel`. */
int spk_stack_plan_time_timeline(spk_stack_plan *p, const spk_tensor *x, const spk_timeline_selection *sel, int rounds,
                                 int warmup, double *ms);

#endif
