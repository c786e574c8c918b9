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
#include "lstm/family.h"
#include "lstm_timeline_stages.cuh"


/* ---- options ------------------------------------------------------------- */

/* The persistent kernel's options (docs/design.md says why each exists and
 * which measurement keeps it); spk_persistent_variant_check checks what
 * needs the derived sizes. */
#define FIELD(name) offsetof(spk_persistent_variant, name)
enum { O_HIDDEN, O_UNITS, O_GATE_BLOCK, O_THREADS, O_ROW_GROUP, O_MAX_TILE_ROWS, O_TILE_ROWS, O_COUNT };
_Static_assert(O_COUNT <= SPK_KERNEL_OPTIONS_MAX, "a kernel choice holds every option");
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
    [O_MAX_TILE_ROWS] = {"max_tile_rows", "MAX_TILE_ROWS", {NULL}, 1, 32, 0, SPK_DEFAULT_FIT, 0,
                         ON(O_UNITS) | ON(O_GATE_BLOCK) | ON(O_THREADS) | ON(O_ROW_GROUP) | ON(O_TILE_ROWS),
                         FIELD(max_tile_rows), "the most batch rows a tile carries (the kernel's, at most 32)"},
    /* no macro: the schedule's, not the kernel's */
    [O_TILE_ROWS] = {"tile_rows", NULL, {NULL}, 0, 32, 0, SPK_DEFAULT_FIT, 0, ON(O_MAX_TILE_ROWS), FIELD(tile_rows),
                     "batch rows a tile carries (0: the schedule picks 8, 16 or 32 up to max_tile_rows)"},
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
    v.max_tile_rows = 0;
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
    if (v->max_tile_rows == 0) {
        v->max_tile_rows = 32;
        if (chunk_threads > 0 && v->threads % chunk_threads == 0) {
            int most = block == 4 ? 4 * v->row_group : 4 * (v->threads / chunk_threads);
            /* and the two h buffers within 48 KiB of shared memory */
            if (v->hidden > 0 && most > 6144 / v->hidden)
                most = 6144 / v->hidden;
            if (v->max_tile_rows > most)
                v->max_tile_rows = most;
            /* a tile height given is what the kernel carries, where it can */
            if (v->tile_rows > 0 && v->tile_rows <= v->max_tile_rows)
                v->max_tile_rows = v->tile_rows;
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
    if (v->max_tile_rows < 1 || v->max_tile_rows > most_rows)
        return spk_fail("kernel.max_tile_rows (the most rows a tile carries) must be 1..%d for %d threads, %d units, "
                        "gate_block %d and row_group %d, got %d", most_rows, v->threads, v->units, v->gate_block,
                        v->row_group, v->max_tile_rows);
    if (v->tile_rows > v->max_tile_rows)
        return spk_fail("kernel.tile_rows %d is more than the kernel carries (kernel.max_tile_rows %d)", v->tile_rows,
                        v->max_tile_rows);
    size_t smem = 2u * (size_t)v->max_tile_rows * (size_t)v->hidden * sizeof(float);
    if (smem > 48u * 1024u)
        return spk_fail("kernel: hidden %d with max_tile_rows %d needs %zu bytes of shared memory, at most 49152 "
                        "(use max_tile_rows <= %d)", v->hidden, v->max_tile_rows, smem, 6144 / v->hidden);
    if (out) {
        memset(out, 0, sizeof *out);
        out->groups = v->hidden / v->units;
        out->gate_rows = gate_rows;
        out->chunks = chunks;
        out->state_tile = 2 * (int64_t)v->max_tile_rows * v->hidden;
        out->smem_bytes = smem;
    }
    return 0;
}

spk_module *spk_persistent_variant_compile(const spk_persistent_variant *v, spk_kernel_build build, const char *arch)
{
    if (spk_persistent_variant_check(v, NULL) != 0)
        return NULL;
    return spk_family_compile_source("lstm_recurrence.cu", &spk_persistent_family, v, build, arch);
}

int spk_persistent_variant_heights(const spk_persistent_variant *v, int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS])
{
    static const int64_t tried[] = {8, 16, 32};
    if (v->tile_rows > 0) {
        heights[0] = v->tile_rows;
        return 1;
    }
    int n = 0;
    for (size_t i = 0; i < sizeof tried / sizeof *tried; i++)
        if (tried[i] <= v->max_tile_rows)
            heights[n++] = tried[i];
    if (n == 0 || heights[n - 1] != v->max_tile_rows)
        heights[n++] = v->max_tile_rows;
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
    if (s->tile_rows > v->max_tile_rows)
        return spk_fail("schedule: tile_rows %lld exceeds the kernel's %d (kernel.max_tile_rows)",
                        (long long)s->tile_rows, v->max_tile_rows);
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

/* The kernel's parameters (kernels/lstm_recurrence.cu); its trace build takes
 * trace, trace_slot and trace_slots after them. */
const int spk_persistent_args[SPK_PERSISTENT_NARGS] = {
    SPK_RA_GATES,     SPK_RA_R,          SPK_RA_BIAS,      SPK_RA_OUTPUT,    SPK_RA_STATE,
    SPK_RA_STATUS,    SPK_RA_BATCH,      SPK_RA_STEPS,     SPK_RA_DIRECTION, SPK_RA_FIRST_TILE,
    SPK_RA_TILE_ROWS, SPK_RA_FLAG_BASE,  SPK_RA_TIMEOUT_NS};

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
                                   .statuses = spk_builtin_statuses,
                                   .nstatuses = spk_builtin_nstatuses};
    return 0;
}

/* ---- the family ----------------------------------------------------------- */

/* What a plan of the family keeps (family.h). */
typedef struct persistent_state {
    spk_persistent_variant variant;
    spk_persistent_geometry geometry;
    spk_schedule schedule;
    int64_t capacity;            /* co-resident blocks the schedule is made for */
    int64_t device_capacity;     /* occupancy x SMs of the compiled variant */
    int64_t concurrent_capacity; /* what two simultaneous launches share */
    int blocks_per_sm;
} persistent_state;
SPK_FAMILY_STATE_TYPE(persistent_state)

static int resolve(spk_family_state *st, const spk_family_request *r)
{
    persistent_state *p = state_of(st);
    return spk_persistent_variant_resolve(r->hidden, r->batch, &r->kernel, &p->variant) != 0
               ? -1
               : spk_persistent_variant_check(&p->variant, &p->geometry);
}

static void variant_fields(const spk_family_state *st, spk_fields *out)
{
    const spk_persistent_geometry *g = &cstate_of(st)->geometry;
    spk_fields_text(out, "file", "lstm_recurrence.cu");
    spk_fields_int(out, "groups", g->groups);
    spk_fields_int(out, "chunks", g->chunks);
    spk_fields_int(out, "state_tile", g->state_tile);
    spk_fields_int(out, "smem_bytes", (int64_t)g->smem_bytes);
}

static int check(const spk_family_state *st, const spk_family_request *r)
{
    (void)st;
    /* Flags: layer l step s carries l*steps + s + 1, which must fit 32 bits. */
    if ((int64_t)r->layers * r->steps >= (int64_t)UINT32_MAX)
        return spk_fail("lstm stack: %d layers x %lld steps overflow the 32-bit step flags", r->layers,
                        (long long)r->steps);
    return 0;
}

static spk_module *compile(const spk_family_state *st, spk_kernel_build build, const char *arch)
{
    return spk_persistent_variant_compile(&cstate_of(st)->variant, build, arch);
}

/* A schedule made elsewhere, checked against the batch. */
static int check_given_schedule(const spk_schedule *s, int64_t batch)
{
    int64_t count = spk_schedule_launch_count(s);
    if (count < 1)
        return spk_fail("lstm stack: the schedule has no launches");
    int64_t *firsts = calloc((size_t)count, sizeof *firsts), *counts = calloc((size_t)count, sizeof *counts);
    int rc = (!firsts || !counts) ? spk_fail("lstm stack: out of memory") : 0;
    for (int64_t i = 0; rc == 0 && i < count; i++)
        rc = spk_schedule_launch(s, i, &firsts[i], &counts[i]);
    if (rc == 0)
        rc = spk_schedule_check(s, batch, firsts, counts, count);
    free(firsts);
    free(counts);
    return rc;
}

/* The capacity the schedule is made for and the schedule (given, checked,
 * or spk_schedule_new's rule on that capacity). */
static int plan_schedule(persistent_state *p, spk_kernel *kernel, const spk_family_request *r)
{
    const spk_persistent_variant *v = &p->variant;
    int device_capacity;
    if (spk_kernel_occupancy(kernel, v->threads, 0, &p->blocks_per_sm) != 0 ||
        spk_kernel_cooperative_capacity(kernel, v->threads, 0, &device_capacity) != 0)
        return -1;
    p->device_capacity = device_capacity;
    if (r->capacity > device_capacity)
        return spk_fail("lstm stack: capacity %lld exceeds the %d blocks the device holds for this kernel",
                        (long long)r->capacity, device_capacity);
    p->capacity = r->capacity > 0 ? r->capacity : device_capacity;
    /* Both directions' launches are the same kernel drawing on the same block
     * slots, so together they fit when their sum is within the capacity: the
     * schedule's rule 2 * tiles * groups <= min(capacity, concurrent) with
     * the concurrent capacity equal to the capacity. */
    p->concurrent_capacity = p->capacity;
    if (r->schedule) {
        p->schedule = *r->schedule;
        if (check_given_schedule(&p->schedule, r->batch) != 0)
            return -1;
    } else {
        int64_t heights[SPK_SCHEDULE_MAX_HEIGHTS];
        int n = spk_persistent_variant_heights(v, heights);
        if (spk_schedule_new(&p->schedule, r->batch, p->capacity, p->concurrent_capacity, p->geometry.groups, heights,
                             n) != 0)
            return -1;
    }
    return spk_persistent_schedule_fits(&p->schedule, v, p->capacity, p->concurrent_capacity);
}

static int describe(spk_family_state *st, spk_kernel *kernel, const spk_family_request *r, spk_kernel_stack_desc *desc)
{
    persistent_state *p = state_of(st);
    if (plan_schedule(p, kernel, r) != 0)
        return -1;
    int max = 2 * (int)spk_schedule_launch_count(&p->schedule);
    spk_kernel_stack_launch *launches = max >= 2 ? calloc((size_t)max, sizeof *launches) : NULL;
    if (!launches)
        return spk_fail("lstm stack: out of memory");
    if (spk_persistent_stack_desc(&p->variant, &p->schedule, r->timeout_ns, desc, launches, max) != 0) {
        free(launches);
        return -1;
    }
    return 0;
}

/* A trace or timeline build holds fewer co-resident blocks where it takes
 * more registers: the plan's schedule must fit it too. */
static int check_build(const spk_family_state *st, spk_kernel_build build, spk_kernel *kernel, spk_fields *out)
{
    const persistent_state *p = cstate_of(st);
    int capacity = 0;
    if (spk_kernel_cooperative_capacity(kernel, p->variant.threads, 0, &capacity) != 0)
        return -1;
    int64_t room = p->capacity < capacity ? p->capacity : capacity;
    if (spk_persistent_schedule_fits(&p->schedule, &p->variant, room, room) != 0) {
        spk_error_prefix("lstm stack: the %s build of the persistent kernel holds %d co-resident blocks",
                         build == SPK_BUILD_TRACE ? "trace" : "timeline", capacity);
        return -1;
    }
    spk_fields_int(out, "capacity", capacity);
    return 0;
}

#define STAGE_NAME(name, text) text,
#define STAGE_WAITS(name, text) (SPK_RECURRENCE_##name == SPK_RECURRENCE_WAIT ? SPK_RECURRENCE_PUBLISH : -1),
static const char *const stage_names[] = {SPK_RECURRENCE_STAGES(STAGE_NAME)};
/* The wait (the gather) is for every block's publish of the previous step. */
static const int stage_waits[] = {SPK_RECURRENCE_STAGES(STAGE_WAITS)};
static const spk_timeline_stages recurrence_stages = {SPK_RECURRENCE_STAGE_COUNT, stage_names, stage_waits};

const spk_timeline_stages *spk_persistent_timeline_stages(void) { return &recurrence_stages; }

static const spk_timeline_stages *stages(const spk_family_state *st)
{
    (void)st;
    return &recurrence_stages;
}

/* Blocks are numbered group + groups * tile; a group is a tile's blocks. */
static void timeline_geometry(const spk_family_state *st, int64_t *blocks, int *warps, int *group)
{
    const persistent_state *p = cstate_of(st);
    *blocks = (int64_t)p->geometry.groups * p->schedule.tiles;
    *warps = p->variant.threads / 32;
    *group = p->geometry.groups;
}

static void plan_fields(const spk_family_state *st, spk_fields *kernel, spk_fields *schedule)
{
    const persistent_state *p = cstate_of(st);
    spk_fields_int(kernel, "occupancy", p->blocks_per_sm);
    spk_fields_int(kernel, "device_capacity", p->device_capacity);
    spk_fields_int(kernel, "capacity", p->capacity);
    spk_fields_int(kernel, "concurrent_capacity", p->concurrent_capacity);
    spk_schedule_fields(&p->schedule, schedule);
}

static void variant_text(const spk_family_state *st, char *out, size_t size)
{
    const persistent_state *p = cstate_of(st);
    const spk_persistent_variant *v = &p->variant;
    char layout[64] = "";
    if (v->gate_block != 1 || v->row_group != 1)
        snprintf(layout, sizeof layout, ", gate block %d, row group %d", v->gate_block, v->row_group);
    snprintf(out, size, "units %d, %d threads%s, tile %lld %s", v->units, v->threads, layout,
             (long long)p->schedule.tile_rows, p->schedule.concurrent ? "concurrent" : "sequential");
}

static void name(const spk_family_state *st, const spk_lstm_gpu_shape *shape, char *out, size_t size)
{
    const spk_schedule *s = &cstate_of(st)->schedule;
    snprintf(out, size, "lstm stack (persistent, %d layers, batch %d, steps %d, tile_rows %d, %s%s)",
             (int)shape->layers, (int)shape->batch, (int)shape->steps, (int)s->tile_rows,
             s->concurrent ? "concurrent" : "sequential", spk_lstm_math_suffix(shape->math));
}

const spk_family spk_persistent_kernels = {
    .backend = "persistent",
    .title = "persistent recurrence",
    .summary = "the persistent backend: a cooperative launch per layer and direction, h through global memory",
    .help = "Per layer and direction a cooperative launch runs the whole sequence (kernels/lstm_recurrence.cu),\n"
            "h exchanged through flagged words in global memory. Its plans also take schedule = s\n"
            "(spk.schedule.new or by hand), capacity = n (schedule as if the device held n blocks) and\n"
            "timeout_ms = 10000 (a poll waiting longer fails the forward); plan:forward(x, {trace = {layer =,\n"
            "direction =, steps =}}) records h and c through the kernel's trace build, as spk.lstm.reference\n"
            "traces them. plan.schedule is the tile schedule in use, with :launches(); a timeline's blocks\n"
            "are numbered group + groups * tile.",
    .options = &spk_persistent_family,
    .accepts = SPK_PLAN_SCHEDULE | SPK_PLAN_CAPACITY | SPK_PLAN_TIMEOUT | SPK_PLAN_TRACE,
    .entry = SPK_LSTM_RECURRENCE_KERNEL,
    .clear_entry = SPK_LSTM_CLEAR_KERNEL,
    .resolve = resolve,
    .variant_fields = variant_fields,
    .check = check,
    .compile = compile,
    .describe = describe,
    .check_build = check_build,
    .stages = stages,
    .timeline_geometry = timeline_geometry,
    .plan_fields = plan_fields,
    .variant_text = variant_text,
    .name = name,
};
