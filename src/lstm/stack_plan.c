/* The one plan of the GPU LSTM stack: see stack_plan.h. */
#include "lstm/stack_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lstm/device_layers.h"

struct spk_stack_plan {
    const spk_family *family; /* NULL: a kernel of one's own */
    spk_family_state state;
    spk_family_request request;
    spk_kernel_stack *stack;
    const int *args; /* the plain build's parameters (the family's static list) */
    int nargs;
    bool trace_ready, timeline_ready;
    spk_fields timeline_build; /* what the timeline build runs with */
    /* A kernel of one's own: the stages its timeline build stamps (count 0:
     * none), their names' storage, and what a recording of it covers. */
    spk_timeline_stages own_stages;
    const char *own_names[SPK_TIMELINE_MAX_STAGES];
    char own_text[SPK_TIMELINE_MAX_STAGES][32];
    int own_waits[SPK_TIMELINE_MAX_STAGES];
    int64_t own_blocks;
    int own_warps, own_group;
};

/* The family's resolve into a zeroed state. */
static int resolve(const spk_family *f, spk_family_state *state, const spk_family_request *r)
{
    memset(state, 0, sizeof *state);
    return f->resolve(state, r);
}

int spk_family_variant(const spk_family *f, int hidden, int64_t batch, const spk_kernel_choice *kernel,
                       spk_family_state *state)
{
    spk_family_request r = {.hidden = hidden, .batch = batch};
    if (kernel)
        r.kernel = *kernel;
    return resolve(f, state, &r);
}

/* The hidden size a variant was resolved for (its option "hidden": a
 * script may give another, which the layers then refuse). */
static int variant_hidden(const spk_family *f, const spk_family_state *st)
{
    for (int i = 0; i < f->options->count; i++)
        if (strcmp(f->options->options[i].name, "hidden") == 0)
            return spk_kernel_option_get(&f->options->options[i], st->bytes);
    return 0;
}

/* The checks of a plan of a family before any device work, in this order:
 * the layers, the variant, the stack's shape, the family's own, the plan
 * options it takes, the math, finite weights. */
static int check_request(const spk_stack_plan_options *o, spk_stack_plan *p, spk_lstm_gpu_shape *shape)
{
    const spk_family *f = o->family;
    spk_lstm_dims dims;
    if (!f)
        return spk_fail("lstm stack: no kernel family");
    if (spk_lstm_validate(o->layers, o->count, &dims) != 0)
        return -1;
    p->request = (spk_family_request){.hidden = (int)dims.hidden, .batch = o->batch, .steps = o->steps,
                                      .layers = o->count, .kernel = o->kernel, .schedule = o->schedule,
                                      .capacity = o->capacity, .timeout_ns = o->timeout_ns};
    if (resolve(f, &p->state, &p->request) != 0 ||
        spk_lstm_gpu_shape_check(o->layers, o->count, o->batch, o->steps, variant_hidden(f, &p->state), o->math,
                                 shape) != 0 ||
        (f->check && f->check(&p->state, &p->request) != 0))
        return -1;
    if ((o->schedule && !(f->accepts & SPK_PLAN_SCHEDULE)) || (o->capacity && !(f->accepts & SPK_PLAN_CAPACITY)) ||
        (o->timeout_ns && !(f->accepts & SPK_PLAN_TIMEOUT)))
        return spk_fail("lstm stack: the %s kernels take no schedule, capacity or timeout", f->backend);
    if (o->batch * o->steps > INT32_MAX)
        return spk_fail("lstm stack: batch %lld x steps %lld is too large for 32-bit kernel indices",
                        (long long)o->batch, (long long)o->steps);
    return spk_lstm_check_math(o->math) != 0 || spk_lstm_check_finite(o->layers, o->count) != 0 ? -1 : 0;
}

/* The device the family needs (compute capability, ...). */
static int check_device(spk_stack_plan *p)
{
    int device;
    spk_device_props props;
    if (spk_cuda_require() != 0 ||
        (p->family->check_device && (spk_device_current(&device) != 0 || spk_device_props_get(device, &props) != 0))) {
        spk_error_prefix("lstm stack (backend %s)", p->family->backend);
        return -1;
    }
    return p->family->check_device ? p->family->check_device(&p->state, &props) : 0;
}

/* Compiles the plain build, has the family describe its launches from it,
 * and builds the stack. */
static int build_stack(spk_stack_plan *p, const spk_stack_plan_options *o)
{
    const spk_family *f = p->family;
    spk_kernel_stack_desc desc = {0};
    spk_kernel *kernel = NULL;
    spk_module *module = f->compile(&p->state, SPK_BUILD_PLAIN, NULL);
    int rc = -1;
    if (!module || !(kernel = spk_module_kernel(module, f->entry)) ||
        f->describe(&p->state, kernel, &p->request, &desc) != 0)
        goto done;
    p->args = desc.args;
    p->nargs = desc.nargs;
    spk_kernel_stack_options so = {.layers = o->layers, .count = o->count, .batch = o->batch, .steps = o->steps,
                                   .math = o->math, .module = module, .entry = f->entry,
                                   .clear_entry = f->clear_entry, .desc = &desc};
    rc = (p->stack = spk_kernel_stack_new(&so)) ? 0 : -1;
done:
    free((void *)desc.launches);
    spk_kernel_free(kernel);
    spk_module_release(module);
    return rc;
}

spk_stack_plan *spk_stack_plan_new(const spk_stack_plan_options *o)
{
    spk_stack_plan *p = calloc(1, sizeof *p);
    if (!p)
        return spk_fail_null("lstm stack: out of memory");
    p->family = o->family;
    spk_lstm_gpu_shape shape;
    if (check_request(o, p, &shape) != 0 || check_device(p) != 0) {
        spk_stack_plan_free(p);
        return NULL;
    }
    if (build_stack(p, o) != 0) {
        spk_error_prefix("lstm stack");
        spk_stack_plan_free(p);
        return NULL;
    }
    return p;
}

/* A copy of a kernel of one's own's stages, checked. */
static int copy_stages(spk_stack_plan *p, const spk_timeline_stages *stages)
{
    if (spk_timeline_stages_check(stages) != 0)
        return -1;
    for (int k = 0; k < stages->count; k++) {
        snprintf(p->own_text[k], sizeof p->own_text[k], "%s", stages->names[k]);
        p->own_names[k] = p->own_text[k];
        p->own_waits[k] = stages->waits_for ? stages->waits_for[k] : -1;
    }
    p->own_stages = (spk_timeline_stages){stages->count, p->own_names, p->own_waits};
    return 0;
}

spk_stack_plan *spk_stack_plan_of_kernel(const spk_kernel_stack_options *o, const spk_timeline_stages *stages)
{
    spk_stack_plan *p = calloc(1, sizeof *p);
    if (!p)
        return spk_fail_null("lstm stack: out of memory");
    if ((stages && copy_stages(p, stages) != 0) || !(p->stack = spk_kernel_stack_new(o))) {
        free(p);
        return NULL;
    }
    if (stages)
        spk_kernel_stack_timeline_geometry(o->desc, &p->own_blocks, &p->own_warps, &p->own_group);
    return p;
}

void spk_stack_plan_free(spk_stack_plan *p)
{
    if (p)
        spk_kernel_stack_free(p->stack);
    free(p);
}

const spk_family *spk_stack_plan_family(const spk_stack_plan *p) { return p->family; }
const spk_family_state *spk_stack_plan_state(const spk_stack_plan *p) { return &p->state; }
const spk_kernel_stack_info *spk_stack_plan_info(const spk_stack_plan *p) { return spk_kernel_stack_get_info(p->stack); }

bool spk_stack_plan_traceable(const spk_stack_plan *p)
{
    return p->family ? (p->family->accepts & SPK_PLAN_TRACE) != 0 : spk_kernel_stack_traceable(p->stack);
}

const spk_timeline_stages *spk_stack_plan_stages(const spk_stack_plan *p)
{
    if (!p->family)
        return p->own_stages.count ? &p->own_stages : NULL;
    return p->family->stages ? p->family->stages(&p->state) : NULL;
}

void spk_stack_plan_timeline_geometry(const spk_stack_plan *p, int64_t *blocks, int *warps, int *group)
{
    *blocks = 0, *warps = 0, *group = 0;
    if (!p->family && p->own_stages.count)
        *blocks = p->own_blocks, *warps = p->own_warps, *group = p->own_group;
    else if (p->family && p->family->timeline_geometry)
        p->family->timeline_geometry(&p->state, blocks, warps, group);
}

/* The plan's kernel in messages: the family's backend or the kernel's own name. */
static const char *kernel_title(const spk_stack_plan *p)
{
    return p->family ? p->family->backend : spk_kernel_stack_name(p->stack);
}

/* The compiled kernel's own fields, every plan's. */
static void attribute_fields(const spk_kernel_stack_info *info, spk_fields *kernel)
{
    spk_fields_int(kernel, "registers", info->attrs.registers);
    spk_fields_int(kernel, "spills", (int64_t)info->attrs.local_bytes);
    spk_fields_int(kernel, "static_smem", (int64_t)info->attrs.static_smem);
    spk_fields_text(kernel, "arch", info->arch);
}

void spk_stack_plan_fields(const spk_stack_plan *p, spk_fields *kernel, spk_fields *schedule)
{
    const spk_kernel_stack_info *info = spk_stack_plan_info(p);
    kernel->count = schedule->count = 0;
    attribute_fields(info, kernel);
    if (!p->family) {
        spk_fields_int(kernel, "max_threads", info->attrs.max_threads);
        spk_fields_int(kernel, "capacity", info->capacity);
        spk_fields_int(kernel, "launches", info->nlaunches);
        spk_fields_bool(kernel, "concurrent", info->concurrent);
        spk_fields_bool(kernel, "traceable", spk_kernel_stack_traceable(p->stack));
        return;
    }
    spk_fields_options(kernel, p->family->options, p->state.bytes);
    p->family->variant_fields(&p->state, kernel);
    p->family->plan_fields(&p->state, kernel, schedule);
}

void spk_stack_plan_variant_text(const spk_stack_plan *p, char *out, size_t size)
{
    const spk_kernel_stack_info *info = spk_stack_plan_info(p);
    if (!p->family) {
        snprintf(out, size, "%d launch%s a layer%s", info->nlaunches, info->nlaunches == 1 ? "" : "es",
                 info->concurrent ? ", concurrent" : "");
        return;
    }
    char text[240];
    p->family->variant_text(&p->state, text, sizeof text);
    snprintf(out, size, "%s%s", text, spk_lstm_math_suffix(info->shape.math));
}

void spk_stack_plan_name(const spk_stack_plan *p, char *out, size_t size)
{
    const spk_kernel_stack_info *i = spk_stack_plan_info(p);
    if (p->family) {
        p->family->name(&p->state, &i->shape, out, size);
        return;
    }
    snprintf(out, size, "lstm stack (kernel, %d layers, batch %d, steps %d, %d launch%s a layer%s%s)",
             (int)i->shape.layers, (int)i->shape.batch, (int)i->shape.steps, i->nlaunches,
             i->nlaunches == 1 ? "" : "es", i->concurrent ? ", concurrent" : "", spk_lstm_math_suffix(i->shape.math));
}

spk_tensor *spk_stack_plan_forward(spk_stack_plan *p, const spk_tensor *x) { return spk_kernel_stack_forward(p->stack, x); }

int spk_stack_plan_time(spk_stack_plan *p, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_kernel_stack_time(p->stack, x, rounds, warmup, ms);
}

/* ---- the trace and timeline builds ------------------------------------------ */

/* Compiles a build once and checks it against the plan; *kernel_out and
 * *module_out on success (the caller hands them to the stack). */
static int compile_build(spk_stack_plan *p, spk_kernel_build build, spk_module **module_out, spk_kernel **kernel_out,
                         spk_fields *fields)
{
    const spk_family *f = p->family;
    spk_module *m = f->compile(&p->state, build, NULL);
    spk_kernel *k = m ? spk_module_kernel(m, f->entry) : NULL;
    spk_kernel_attrs attrs;
    if (!k || spk_kernel_attributes(k, &attrs) != 0 || f->check_build(&p->state, build, k, fields) != 0) {
        spk_kernel_free(k);
        spk_module_release(m);
        return -1;
    }
    spk_fields_int(fields, "registers", attrs.registers);
    spk_fields_int(fields, "spills", (int64_t)attrs.local_bytes);
    *module_out = m;
    *kernel_out = k;
    return 0;
}

static int prepare_trace(spk_stack_plan *p)
{
    /* a kernel of one's own, or a family's whose plain build takes the trace arguments, traces itself */
    if (!p->family || p->trace_ready || spk_kernel_stack_traceable(p->stack))
        return 0;
    if (!(p->family->accepts & SPK_PLAN_TRACE))
        return spk_fail("lstm stack: the %s kernels have no trace build", p->family->backend);
    int args[SPK_KERNEL_STACK_MAX_ARGS];
    if (p->nargs + 3 > SPK_KERNEL_STACK_MAX_ARGS)
        return spk_fail("lstm stack: the trace build takes too many arguments");
    memcpy(args, p->args, sizeof *args * (size_t)p->nargs);
    args[p->nargs] = SPK_RA_TRACE, args[p->nargs + 1] = SPK_RA_TRACE_SLOT, args[p->nargs + 2] = SPK_RA_TRACE_SLOTS;
    spk_fields fields = {0};
    spk_module *m;
    spk_kernel *k;
    if (compile_build(p, SPK_BUILD_TRACE, &m, &k, &fields) != 0)
        return -1;
    int rc = spk_kernel_stack_set_trace_kernel(p->stack, m, p->family->entry, args, p->nargs + 3);
    spk_kernel_free(k);
    spk_module_release(m);
    p->trace_ready = rc == 0;
    return rc;
}

spk_tensor *spk_stack_plan_forward_trace(spk_stack_plan *p, const spk_tensor *x, const spk_lstm_trace *trace,
                                         spk_tensor **trace_h, spk_tensor **trace_c)
{
    *trace_h = *trace_c = NULL;
    const spk_lstm_gpu_shape *sh = &spk_stack_plan_info(p)->shape;
    if (spk_lstm_trace_check(trace, sh->layers, sh->steps) != 0 ||
        spk_lstm_check_x(sh->batch, sh->steps, sh->input, x) != 0 || prepare_trace(p) != 0)
        return NULL;
    return spk_kernel_stack_forward_trace(p->stack, x, trace, trace_h, trace_c);
}

int spk_stack_plan_timeline_check(const spk_stack_plan *p, const spk_timeline_selection *sel)
{
    if (!spk_stack_plan_stages(p))
        return spk_fail("lstm stack: the plan has no timeline build");
    const spk_lstm_gpu_shape *sh = &spk_stack_plan_info(p)->shape;
    int64_t blocks;
    int warps, group;
    spk_stack_plan_timeline_geometry(p, &blocks, &warps, &group);
    return spk_timeline_selection_check(sel, sh->layers, sh->steps, blocks, warps);
}

static int prepare_timeline(spk_stack_plan *p)
{
    if (p->timeline_ready)
        return 0;
    if (!p->family)
        return spk_fail("lstm stack: kernel %s's timeline build has not been given (spk_stack_plan_set_timeline_build)",
                        kernel_title(p));
    spk_fields fields = {0};
    spk_module *m;
    spk_kernel *k;
    int rc = compile_build(p, SPK_BUILD_TIMELINE, &m, &k, &fields);
    if (rc == 0) {
        rc = spk_kernel_stack_set_timeline_kernel(p->stack, m, p->family->entry);
        spk_kernel_free(k);
        spk_module_release(m);
    }
    if (rc != 0) {
        spk_error_prefix("lstm stack: the %s kernel's timeline build", p->family->backend);
        return -1;
    }
    p->timeline_build = fields;
    p->timeline_ready = true;
    return 0;
}

spk_tensor *spk_stack_plan_forward_timeline(spk_stack_plan *p, const spk_tensor *x, const spk_timeline_selection *sel,
                                            spk_tensor **stamps, spk_timeline_clock *clock, spk_fields *build)
{
    *stamps = NULL;
    const spk_lstm_gpu_shape *sh = &spk_stack_plan_info(p)->shape;
    if (spk_lstm_check_x(sh->batch, sh->steps, sh->input, x) != 0 || spk_stack_plan_timeline_check(p, sel) != 0 ||
        prepare_timeline(p) != 0)
        return NULL;
    spk_tensor *y = spk_kernel_stack_forward_timeline(p->stack, x, sel, spk_stack_plan_stages(p), stamps, clock);
    if (!y)
        spk_error_prefix("lstm stack (%s)", kernel_title(p));
    else if (build)
        *build = p->timeline_build;
    return y;
}

int spk_stack_plan_time_timeline(spk_stack_plan *p, const spk_tensor *x, const spk_timeline_selection *sel, int rounds,
                                 int warmup, double *ms)
{
    if (spk_stack_plan_timeline_check(p, sel) != 0 || prepare_timeline(p) != 0)
        return -1;
    return spk_kernel_stack_time_timeline(p->stack, x, sel, spk_stack_plan_stages(p), rounds, warmup, ms);
}

int spk_stack_plan_set_timeline_build(spk_stack_plan *p, spk_module *module, const char *entry)
{
    if (p->family)
        return spk_fail("lstm stack: the %s kernels compile their own timeline build", p->family->backend);
    if (!p->own_stages.count)
        return spk_fail("lstm stack: kernel %s names no timeline stages (its spec's timeline = {stages = ...})",
                        kernel_title(p));
    spk_kernel *k = spk_module_kernel(module, entry);
    spk_kernel_attrs attrs;
    int rc = k && spk_kernel_attributes(k, &attrs) == 0 ? spk_kernel_stack_set_timeline_kernel(p->stack, module, entry)
                                                        : -1;
    spk_kernel_free(k);
    if (rc != 0)
        return -1;
    p->timeline_build = (spk_fields){0};
    spk_fields_int(&p->timeline_build, "registers", attrs.registers);
    spk_fields_int(&p->timeline_build, "spills", (int64_t)attrs.local_bytes);
    p->timeline_ready = true;
    return 0;
}
