/* The GPU LSTM stack on the persistent recurrence kernel: see persistent.h and
 * the long comment at the top of kernels/lstm_recurrence.cu. */
#include "lstm/persistent.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "lstm/device_layers.h"
#include "lstm_timeline_stages.cuh"

#define STATUS_TIMEOUT 1u
#define STATUS_BAD_GEOMETRY 2u

/* ---- options ------------------------------------------------------------- */

/* The persistent kernel's options (docs/design.md says why each exists and
 * which measurement keeps it); spk_persistent_variant_check checks what
 * needs the derived sizes. */
#define FIELD(name) offsetof(spk_persistent_variant, name)
enum { O_HIDDEN, O_UNITS, O_GATE_BLOCK, O_THREADS, O_ROW_GROUP, O_TILE_ROWS, O_COUNT };
#define ON(o) (1u << (o))

static const spk_kernel_option options[O_COUNT] = {
    [O_HIDDEN] = {"hidden", "HIDDEN", {NULL}, 1, 1 << 20, 0, SPK_DEFAULT_LAYERS, 0, 0, FIELD(hidden),
                  "hidden units, the layers' own"},
    [O_UNITS] = {"units", "UNITS", {NULL}, 4, 32, SPK_BIT(4) | SPK_BIT(8) | SPK_BIT(16) | SPK_BIT(32),
                 SPK_DEFAULT_BATCH, 4, 0, FIELD(units), "hidden units a block; hidden / units blocks a tile"},
    [O_GATE_BLOCK] = {"gate_block", "GATE_BLOCK", {NULL}, 1, 4, SPK_BIT(1) | SPK_BIT(4), SPK_DEFAULT_BATCH, 1, 0,
                      FIELD(gate_block), "gate rows a thread holds: one, or its unit's four"},
    [O_THREADS] = {"threads", "THREADS", {NULL}, 32, 1024, 0, SPK_DEFAULT_FIT, 0, ON(O_UNITS) | ON(O_GATE_BLOCK),
                   FIELD(threads), "threads a block: units * 4 / gate_block * chunks"},
    [O_ROW_GROUP] = {"row_group", "ROW_GROUP", {NULL}, 1, 8, SPK_BIT(1) | SPK_BIT(2) | SPK_BIT(4) | SPK_BIT(8),
                     SPK_DEFAULT_FIT, 0, ON(O_UNITS) | ON(O_GATE_BLOCK) | ON(O_THREADS), FIELD(row_group),
                     "batch rows reduced together over the chunk lanes"},
    [O_TILE_ROWS] = {"tile_rows", "MAX_TILE_ROWS", {NULL}, 1, 32, 0, SPK_DEFAULT_FIT, 0,
                     ON(O_UNITS) | ON(O_GATE_BLOCK) | ON(O_THREADS) | ON(O_ROW_GROUP), FIELD(tile_rows),
                     "the most batch rows a block carries"},
};

static const spk_kernel_rule rules[] = {
    {"units", SPK_BIT(32), "gate_block", SPK_BIT(4), "kernel.units 32 needs kernel.gate_block 4"},
};

const spk_kernel_family spk_persistent_family = {"persistent", options, O_COUNT, rules,
                                                 (int)(sizeof rules / sizeof *rules)};

/* ---- variants ------------------------------------------------------------ */

/* The default variant per batch: the first row whose max_batch covers the
 * batch, the fastest variant of each batch in tools/persistent_sweep.lua on
 * the H200 (docs/design.md, "Why each default", has the figures). Threads
 * and tile rows come from spk_persistent_variant_fit. */
static const struct {
    int64_t max_batch;
    int units, gate_block, row_group;
} batch_table[] = {
    {1, 4, 1, 1},
    {32, 4, 1, 8},
    {64, 16, 4, 8},
    {INT64_MAX, 8, 4, 8},
};

static spk_persistent_variant plain_variant(int hidden)
{
    spk_persistent_variant v = {.hidden = hidden, .units = 4, .gate_block = 1, .row_group = 1};
    spk_persistent_variant_fit(&v);
    return v;
}

spk_persistent_variant spk_persistent_variant_for_batch(int hidden, int64_t batch)
{
    size_t n = sizeof batch_table / sizeof *batch_table, i = 0;
    while (i + 1 < n && batch > batch_table[i].max_batch)
        i++;
    spk_persistent_variant v = {.hidden = hidden, .units = batch_table[i].units,
                                .gate_block = batch_table[i].gate_block, .row_group = batch_table[i].row_group};
    spk_persistent_variant_fit(&v);
    if (spk_persistent_variant_check(&v, NULL) == 0)
        return v;
    /* The row was measured at hidden 128; a hidden size it does not fit
     * (e.g. 16: fewer chunks than its row group) keeps the row's units and
     * layout with the row group the fit picks, else the plain variant. */
    spk_clear_error();
    v.threads = 0;
    v.tile_rows = 0;
    v.row_group = 0;
    spk_persistent_variant_fit(&v);
    if (spk_persistent_variant_check(&v, NULL) == 0)
        return v;
    spk_clear_error();
    return plain_variant(hidden);
}

int spk_persistent_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given,
                                   spk_persistent_variant *out)
{
    spk_persistent_variant row = spk_persistent_variant_for_batch(hidden, batch);
    memset(out, 0, sizeof *out);
    spk_kernel_resolve(&spk_persistent_family, &row, given, out);
    spk_persistent_variant_fit(out);
    return spk_persistent_variant_check(out, NULL);
}

void spk_persistent_variant_fit(spk_persistent_variant *v)
{
    /* The most chunks per gate row (so the most threads) that still divide
     * the hidden size and give whole warps; tile rows follow, as each of a
     * unit's 4 * chunks lanes owns one row. */
    int block = v->gate_block == 4 ? 4 : 1;
    int chunk_threads = 4 * v->units / block;
    if (v->threads == 0 && chunk_threads > 0) {
        int chunks = 8;
        while (chunks > 2 && (v->hidden % (4 * chunks) != 0 || (chunk_threads * chunks) % 32 != 0))
            chunks /= 2;
        v->threads = chunk_threads * chunks;
    }
    if (v->row_group == 0)
        v->row_group = block == 4 && chunk_threads > 0 && v->threads % chunk_threads == 0 ? v->threads / chunk_threads
                                                                                          : 1;
    if (v->tile_rows == 0) {
        v->tile_rows = 32;
        if (chunk_threads > 0 && v->threads % chunk_threads == 0) {
            int most = block == 4 ? 4 * v->row_group : 4 * (v->threads / chunk_threads);
            /* and the two h buffers within 48 KiB of shared memory */
            if (v->hidden > 0 && most > 6144 / v->hidden)
                most = 6144 / v->hidden;
            if (v->tile_rows > most)
                v->tile_rows = most;
        }
    }
}

int spk_persistent_variant_check(const spk_persistent_variant *v, spk_persistent_geometry *out)
{
    if (v->hidden < 1)
        return spk_fail("kernel.hidden must be positive, got %d", v->hidden);
    if (spk_kernel_check_rules(&spk_persistent_family, v) != 0)
        return -1;
    if (v->hidden % 2 != 0)
        return spk_fail("kernel.hidden %d must be even", v->hidden);
    if (v->hidden % v->units != 0)
        return spk_fail("kernel.hidden %d must be a multiple of kernel.units %d", v->hidden, v->units);
    int gate_rows = 4 * v->units;
    int chunk_threads = gate_rows / v->gate_block;
    int chunks = v->threads / chunk_threads;
    if (v->threads < 1 || v->threads % chunk_threads != 0 || (chunks != 2 && chunks != 4 && chunks != 8) ||
        v->threads % 32 != 0 || v->threads > 1024)
        return spk_fail("kernel.threads %d must be units * %d * chunks with chunks 2, 4 or 8, whole warps "
                        "(units %d, gate_block %d: %d, %d or %d)",
                        v->threads, 4 / v->gate_block, v->units, v->gate_block, chunk_threads * 2, chunk_threads * 4,
                        chunk_threads * 8);
    if (v->row_group > chunks)
        return spk_fail("kernel.row_group %d must be at most the %d chunks of %d threads", v->row_group, chunks,
                        v->threads);
    if (v->hidden % (4 * chunks) != 0)
        return spk_fail("kernel.hidden %d must be a multiple of %d (4 * chunks) for %d threads", v->hidden,
                        4 * chunks, v->threads);
    int most_rows = v->gate_block == 4 ? 4 * v->row_group : 4 * chunks;
    if (v->tile_rows < 1 || v->tile_rows > most_rows)
        return spk_fail("kernel.tile_rows (the most rows a block carries) must be 1..%d for %d threads, %d units, "
                        "gate_block %d and row_group %d, got %d", most_rows, v->threads, v->units, v->gate_block,
                        v->row_group, v->tile_rows);
    size_t smem = 2u * (size_t)v->tile_rows * (size_t)v->hidden * sizeof(float);
    if (smem > 48u * 1024u)
        return spk_fail("kernel: hidden %d with tile_rows %d needs %zu bytes of shared memory, at most 49152 "
                        "(use tile_rows <= %d)", v->hidden, v->tile_rows, smem, 6144 / v->hidden);
    if (out) {
        memset(out, 0, sizeof *out);
        out->groups = v->hidden / v->units;
        out->gate_rows = gate_rows;
        out->chunks = chunks;
        out->state_tile = 2 * (int64_t)v->tile_rows * v->hidden;
        out->smem_bytes = smem;
    }
    return 0;
}

static spk_module *compile_variant(const spk_persistent_variant *v, const char *arch, const char *build)
{
    if (spk_persistent_variant_check(v, NULL) != 0)
        return NULL;
    const char *kernels = spk_kernel_dir();
    if (!kernels)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_recurrence.cu", kernels);
    spk_define defines[SPK_KERNEL_OPTIONS_MAX + 1];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    int n = spk_kernel_defines(&spk_persistent_family, v, defines, text);
    defines[n] = (spk_define){build, "1"};
    spk_compile_options opts = {0};
    opts.file = path;
    opts.defines = defines;
    opts.ndefines = n + (build ? 1 : 0);
    opts.arch = arch;
    return spk_compile(&opts);
}

spk_module *spk_persistent_variant_compile(const spk_persistent_variant *v, const char *arch)
{
    return compile_variant(v, arch, NULL);
}

spk_module *spk_persistent_variant_compile_trace(const spk_persistent_variant *v, const char *arch)
{
    return compile_variant(v, arch, "SPK_DEBUG_TRACE");
}

spk_module *spk_persistent_variant_compile_timeline(const spk_persistent_variant *v, const char *arch)
{
    return compile_variant(v, arch, "SPK_TIMELINE");
}

int spk_persistent_variant_heights(const spk_persistent_variant *v, int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS])
{
    static const int64_t tried[] = {8, 16, 32};
    int n = 0;
    for (size_t i = 0; i < sizeof tried / sizeof *tried; i++)
        if (tried[i] <= v->tile_rows)
            heights[n++] = tried[i];
    if (n == 0 || heights[n - 1] != v->tile_rows)
        heights[n++] = v->tile_rows;
    return n;
}

int spk_persistent_schedule_fits(const spk_schedule *s, const spk_persistent_variant *v, int64_t capacity,
                           int64_t concurrent_capacity)
{
    spk_persistent_geometry g;
    if (spk_persistent_variant_check(v, &g) != 0)
        return -1;
    if (s->groups != g.groups)
        return spk_fail("schedule: groups %lld, the kernel variant has %d (hidden %d / units %d)",
                        (long long)s->groups, g.groups, v->hidden, v->units);
    if (s->tile_rows > v->tile_rows)
        return spk_fail("schedule: tile_rows %lld exceeds the kernel's %d (kernel.tile_rows)",
                        (long long)s->tile_rows, v->tile_rows);
    int64_t blocks = s->tiles_per_launch * s->groups;
    if (blocks > capacity)
        return spk_fail("schedule: a launch of %lld tiles needs %lld co-resident blocks, the device holds %lld",
                        (long long)s->tiles_per_launch, (long long)blocks, (long long)capacity);
    if (s->concurrent) {
        if (concurrent_capacity == SPK_SCHEDULE_UNKNOWN)
            return spk_fail("schedule: concurrent directions need a known concurrent capacity");
        int64_t room = capacity < concurrent_capacity ? capacity : concurrent_capacity;
        if (2 * blocks > room)
            return spk_fail("schedule: concurrent directions need %lld co-resident blocks, the device holds %lld",
                            (long long)(2 * blocks), (long long)room);
    }
    return 0;
}

/* ---- the plan's description ----------------------------------------------- */

/* The kernel's parameters (kernels/lstm_recurrence.cu), and its trace
 * build's three more. */
#define PERSISTENT_ARGS                                                                                              \
    SPK_RA_GATES, SPK_RA_R, SPK_RA_BIAS, SPK_RA_OUTPUT, SPK_RA_STATE, SPK_RA_STATUS, SPK_RA_BATCH, SPK_RA_STEPS,    \
        SPK_RA_DIRECTION, SPK_RA_FIRST_TILE, SPK_RA_TILE_ROWS, SPK_RA_FLAG_BASE, SPK_RA_TIMEOUT_NS
const int spk_persistent_args[SPK_PERSISTENT_NARGS] = {PERSISTENT_ARGS};
const int spk_persistent_trace_args[SPK_PERSISTENT_NARGS + 3] = {PERSISTENT_ARGS, SPK_RA_TRACE, SPK_RA_TRACE_SLOT,
                                                                 SPK_RA_TRACE_SLOTS};

static const spk_kernel_stack_status persistent_statuses[] = {
    {STATUS_TIMEOUT, "a recurrence block waited longer than the timeout for a step flag "
                     "(a block of its tile was not running); the output is not valid"},
    {STATUS_BAD_GEOMETRY, "the recurrence kernel refused its tile geometry; the output is not valid"},
};

int spk_persistent_stack_desc(const spk_persistent_variant *v, const spk_schedule *s, uint64_t timeout_ns,
                              spk_kernel_stack_desc *out, spk_kernel_stack_launch *launches, int max)
{
    spk_persistent_geometry g;
    if (spk_persistent_variant_check(v, &g) != 0)
        return -1;
    int64_t n = spk_schedule_launch_count(s);
    if (n < 1)
        return spk_fail("lstm stack: the schedule has no launches");
    if (2 * n > max)
        return spk_fail("lstm stack: the schedule's %lld launches a direction are more than %d", (long long)n, max / 2);
    /* Direction 0's launches, then direction 1's: the order the plan makes them. */
    for (int d = 0; d < 2; d++)
        for (int64_t i = 0; i < n; i++) {
            int64_t first, tiles;
            if (spk_schedule_launch(s, i, &first, &tiles) != 0)
                return -1;
            launches[d * n + i] = (spk_kernel_stack_launch){.direction = d,
                                                            .grid = {(unsigned)g.groups, (unsigned)tiles, 1},
                                                            .block = {(unsigned)v->threads, 1, 1},
                                                            .cooperative = true,
                                                            .first_tile = (int32_t)first};
        }
    *out = (spk_kernel_stack_desc){.name = "persistent recurrence",
                                   .args = spk_persistent_args,
                                   .nargs = SPK_PERSISTENT_NARGS,
                                   .launches = launches,
                                   .nlaunches = (int)(2 * n),
                                   .concurrent = s->concurrent,
                                   .tile_rows = (int32_t)s->tile_rows,
                                   .state_words = s->tiles * g.state_tile,
                                   .timeout_ns = timeout_ns,
                                   .packing = spk_lstm_packing_builtin(),
                                   .statuses = persistent_statuses,
                                   .nstatuses = (int)(sizeof persistent_statuses / sizeof *persistent_statuses)};
    return 0;
}

/* ---- plans --------------------------------------------------------------- */

struct spk_persistent_plan {
    spk_persistent_plan_info info;
    spk_kernel_stack *stack; /* the weights, buffers, launches, forward and time */
    spk_module *trace_module; /* the trace build, compiled on the first traced forward */
    /* The timeline build (the stack holds its kernel), compiled on first use. */
    bool timeline_ready;
    spk_persistent_timeline_build timeline_build;
};

void spk_persistent_plan_free(spk_persistent_plan *p)
{
    if (!p)
        return;
    spk_kernel_stack_free(p->stack);
    spk_module_release(p->trace_module);
    free(p);
}

const spk_persistent_plan_info *spk_persistent_plan_get_info(const spk_persistent_plan *plan) { return &plan->info; }

int spk_persistent_plan_check_input(const spk_persistent_plan_info *info, const spk_tensor *x)
{
    return spk_lstm_check_x(info->shape.batch, info->shape.steps, info->shape.input, x);
}

spk_persistent_plan *spk_persistent_plan_new(const spk_persistent_plan_options *o)
{
    spk_lstm_dims dims;
    if (spk_lstm_validate(o->layers, o->count, &dims) != 0)
        return NULL;
    spk_persistent_variant variant;
    if (spk_persistent_variant_resolve((int)dims.hidden, o->batch, &o->kernel, &variant) != 0)
        return NULL;
    spk_lstm_gpu_shape shape;
    if (spk_lstm_gpu_shape_check(o->layers, o->count, o->batch, o->steps, variant.hidden, o->math, &shape) != 0)
        return NULL;
    spk_persistent_geometry geometry;
    if (spk_persistent_variant_check(&variant, &geometry) != 0)
        return NULL;
    /* Flags: layer l step s carries l*steps + s + 1, which must fit 32 bits. */
    if ((int64_t)o->count * o->steps >= (int64_t)UINT32_MAX)
        return spk_fail_null("lstm stack: %d layers x %lld steps overflow the 32-bit step flags", o->count,
                             (long long)o->steps);
    if (o->batch * o->steps > INT32_MAX)
        return spk_fail_null("lstm stack: batch %lld x steps %lld is too large for 32-bit kernel indices",
                             (long long)o->batch, (long long)o->steps);
    if (spk_lstm_check_math(o->math) != 0 || spk_lstm_check_finite(o->layers, o->count) != 0)
        return NULL;
    if (spk_cuda_require() != 0) {
        spk_error_prefix("lstm stack (backend persistent)");
        return NULL;
    }

    spk_persistent_plan *p = calloc(1, sizeof *p);
    if (!p)
        return spk_fail_null("lstm stack: out of memory");
    spk_persistent_plan_info *info = &p->info;
    info->variant = variant;
    info->shape = shape;
    info->geometry = geometry;
    spk_module *module = NULL;
    spk_kernel *recurrence = NULL;
    spk_kernel_stack_launch *launches = NULL;

    if (!(module = spk_persistent_variant_compile(&variant, NULL)))
        goto fail;
    snprintf(info->arch, sizeof info->arch, "%s", spk_module_arch(module));
    if (!(recurrence = spk_module_kernel(module, SPK_LSTM_RECURRENCE_KERNEL)))
        goto fail;
    if (spk_kernel_attributes(recurrence, &info->attrs) != 0 ||
        spk_kernel_occupancy(recurrence, variant.threads, 0, &info->blocks_per_sm) != 0)
        goto fail;
    int device_capacity;
    if (spk_kernel_cooperative_capacity(recurrence, variant.threads, 0, &device_capacity) != 0)
        goto fail;
    info->device_capacity = device_capacity;
    if (o->capacity > device_capacity) {
        spk_fail("lstm stack: capacity %lld exceeds the %d blocks the device holds for this kernel",
                 (long long)o->capacity, device_capacity);
        goto fail;
    }
    info->capacity = o->capacity > 0 ? o->capacity : device_capacity;
    /* Both directions' launches are the same kernel drawing on the same block
     * slots, so together they fit when their sum is within the capacity: the
     * schedule's rule 2 * tiles * groups <= min(capacity, concurrent) with
     * the concurrent capacity equal to the capacity. */
    info->concurrent_capacity = info->capacity;

    if (o->schedule) {
        info->schedule = *o->schedule;
        int64_t count = spk_schedule_launch_count(&info->schedule);
        if (count < 1) {
            spk_fail("lstm stack: the schedule has no launches");
            goto fail;
        }
        int64_t *firsts = calloc((size_t)count, sizeof *firsts), *counts = calloc((size_t)count, sizeof *counts);
        int rc = (!firsts || !counts) ? spk_fail("lstm stack: out of memory") : 0;
        for (int64_t i = 0; rc == 0 && i < count; i++)
            rc = spk_schedule_launch(&info->schedule, i, &firsts[i], &counts[i]);
        if (rc == 0)
            rc = spk_schedule_check(&info->schedule, o->batch, firsts, counts, count);
        free(firsts);
        free(counts);
        if (rc != 0)
            goto fail;
    } else {
        int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS];
        int n = spk_persistent_variant_heights(&variant, heights);
        if (spk_schedule_new(&info->schedule, o->batch, info->capacity, info->concurrent_capacity, geometry.groups,
                             heights, n) != 0)
            goto fail;
    }
    if (spk_persistent_schedule_fits(&info->schedule, &variant, info->capacity, info->concurrent_capacity) != 0)
        goto fail;

    int max = 2 * (int)spk_schedule_launch_count(&info->schedule);
    spk_kernel_stack_desc desc;
    if (max < 2 || !(launches = calloc((size_t)max, sizeof *launches))) {
        spk_fail("lstm stack: out of memory");
        goto fail;
    }
    if (spk_persistent_stack_desc(&variant, &info->schedule, o->timeout_ns, &desc, launches, max) != 0)
        goto fail;
    spk_kernel_stack_options so = {.layers = o->layers, .count = o->count, .batch = o->batch, .steps = o->steps,
                                   .math = o->math, .module = module, .entry = SPK_LSTM_RECURRENCE_KERNEL,
                                   .clear_entry = SPK_LSTM_CLEAR_KERNEL, .desc = &desc};
    if (!(p->stack = spk_kernel_stack_new(&so)))
        goto fail;
    free(launches);
    spk_kernel_free(recurrence);
    spk_module_release(module);
    return p;
fail:
    spk_error_prefix("lstm stack");
    free(launches);
    spk_kernel_free(recurrence);
    spk_module_release(module);
    spk_persistent_plan_free(p);
    return NULL;
}

int spk_persistent_plan_enqueue(spk_persistent_plan *p, const spk_tensor *x)
{
    return spk_kernel_stack_enqueue(p->stack, x);
}

int spk_persistent_plan_finish(spk_persistent_plan *p) { return spk_kernel_stack_finish(p->stack); }

spk_tensor *spk_persistent_plan_forward(spk_persistent_plan *p, const spk_tensor *x)
{
    return spk_kernel_stack_forward(p->stack, x);
}

int spk_persistent_plan_time(spk_persistent_plan *p, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_kernel_stack_time(p->stack, x, rounds, warmup, ms);
}

/* Compiles the trace build once; its occupancy can be lower (more registers),
 * so the plan's schedule must also fit its capacity before any launch. */
static int prepare_trace_kernel(spk_persistent_plan *p)
{
    if (p->trace_module)
        return 0;
    const spk_persistent_plan_info *info = &p->info;
    spk_module *m = spk_persistent_variant_compile_trace(&info->variant, NULL);
    if (!m)
        return -1;
    spk_kernel *k = spk_module_kernel(m, SPK_LSTM_RECURRENCE_KERNEL);
    int capacity = 0;
    if (!k || spk_kernel_cooperative_capacity(k, info->variant.threads, 0, &capacity) != 0)
        goto fail;
    int64_t room = info->capacity < capacity ? info->capacity : capacity;
    if (spk_persistent_schedule_fits(&info->schedule, &info->variant, room, room) != 0) {
        spk_error_prefix("lstm stack: the trace build of the kernel holds %d co-resident blocks", capacity);
        goto fail;
    }
    if (spk_kernel_stack_set_trace_kernel(p->stack, m, SPK_LSTM_RECURRENCE_KERNEL, spk_persistent_trace_args,
                                          SPK_PERSISTENT_NARGS + 3) != 0)
        goto fail;
    spk_kernel_free(k);
    p->trace_module = m;
    return 0;
fail:
    spk_kernel_free(k);
    spk_module_release(m);
    return -1;
}

spk_tensor *spk_persistent_plan_forward_trace(spk_persistent_plan *p, const spk_tensor *x, const spk_lstm_trace *trace,
                                        spk_tensor **trace_h, spk_tensor **trace_c)
{
    *trace_h = *trace_c = NULL;
    const spk_persistent_plan_info *info = &p->info;
    if (spk_lstm_trace_check(trace, info->shape.layers, info->shape.steps) != 0 ||
        spk_persistent_plan_check_input(info, x) != 0 || prepare_trace_kernel(p) != 0)
        return NULL;
    return spk_kernel_stack_forward_trace(p->stack, x, trace, trace_h, trace_c);
}

/* ---- step timelines ------------------------------------------------------- */

#define STAGE_NAME(name, text) text,
#define STAGE_WAITS(name, text) (SPK_RECURRENCE_##name == SPK_RECURRENCE_WAIT ? SPK_RECURRENCE_PUBLISH : -1),
static const char *const stage_names[] = {SPK_RECURRENCE_STAGES(STAGE_NAME)};
/* The wait (the gather) is for every block's publish of the previous step. */
static const int stage_waits[] = {SPK_RECURRENCE_STAGES(STAGE_WAITS)};
static const spk_timeline_stages recurrence_stages = {SPK_RECURRENCE_STAGE_COUNT, stage_names, stage_waits};

const spk_timeline_stages *spk_persistent_timeline_stages(void)
{
    return &recurrence_stages;
}

int spk_persistent_timeline_check(const spk_persistent_plan_info *info, const spk_timeline_selection *sel)
{
    return spk_timeline_selection_check(sel, info->shape.layers, info->shape.steps,
                                        (int64_t)info->geometry.groups * info->schedule.tiles,
                                        info->variant.threads / 32);
}

/* Compiles the timeline build once; its occupancy can be lower (more
 * registers), so the plan's schedule must also fit its capacity. */
static int prepare_timeline(spk_persistent_plan *p)
{
    if (p->timeline_ready)
        return 0;
    const spk_persistent_plan_info *info = &p->info;
    spk_persistent_timeline_build b = {0};
    int capacity = 0;
    int rc = -1;
    spk_module *m = spk_persistent_variant_compile_timeline(&info->variant, NULL);
    spk_kernel *k = m ? spk_module_kernel(m, SPK_LSTM_RECURRENCE_KERNEL) : NULL;
    if (!k || spk_kernel_attributes(k, &b.attrs) != 0 ||
        spk_kernel_cooperative_capacity(k, info->variant.threads, 0, &capacity) != 0) {
        spk_error_prefix("lstm stack: the persistent kernel's timeline build");
        goto done;
    }
    int64_t room = info->capacity < capacity ? info->capacity : capacity;
    if (spk_persistent_schedule_fits(&info->schedule, &info->variant, room, room) != 0) {
        spk_error_prefix("lstm stack: the persistent kernel's timeline build holds %d co-resident blocks", capacity);
        goto done;
    }
    if (spk_kernel_stack_set_timeline_kernel(p->stack, m, SPK_LSTM_RECURRENCE_KERNEL) != 0)
        goto done;
    b.capacity = capacity;
    p->timeline_build = b;
    p->timeline_ready = true;
    rc = 0;
done:
    spk_kernel_free(k);
    spk_module_release(m);
    return rc;
}

spk_tensor *spk_persistent_plan_forward_timeline(spk_persistent_plan *p, const spk_tensor *x,
                                                 const spk_timeline_selection *sel, spk_tensor **stamps,
                                                 spk_timeline_clock *clock, spk_persistent_timeline_build *build)
{
    *stamps = NULL;
    if (spk_persistent_plan_check_input(&p->info, x) != 0 || spk_persistent_timeline_check(&p->info, sel) != 0 ||
        prepare_timeline(p) != 0)
        return NULL;
    spk_tensor *y = spk_kernel_stack_forward_timeline(p->stack, x, sel, &recurrence_stages, stamps, clock);
    if (!y)
        spk_error_prefix("lstm stack (persistent)");
    else if (build)
        *build = p->timeline_build;
    return y;
}

int spk_persistent_plan_time_timeline(spk_persistent_plan *p, const spk_tensor *x,
                                      const spk_timeline_selection *sel, int rounds, int warmup, double *ms)
{
    if (spk_persistent_timeline_check(&p->info, sel) != 0 || prepare_timeline(p) != 0)
        return -1;
    return spk_kernel_stack_time_timeline(p->stack, x, sel, &recurrence_stages, rounds, warmup, ms);
}
