/* The tensor-core recurrence as a kernel family: see tensor_core.h and the
 * comment at the top of kernels/lstm_tc.cu. */
#include "lstm/tensor_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cluster.h"
#include "cuda/math_modes.h"
#include "lstm/device_layers.h"
#include "lstm/lstm.h"
#include "lstm_tc_timeline_stages.cuh"

/* ---- options ------------------------------------------------------------- */

/* Every rule about one option and about pairs of options is written here
 * once; spk_tc_variant_derive checks what needs the sizes. docs/kernels.md
 * says why each form exists and what it costs. */
#define FIELD(name) offsetof(spk_tc_variant, name)
enum { O_HIDDEN, O_SPLIT, O_PRODUCTS, O_CLUSTER, O_TILE_ROWS, O_WARP_MT, O_ROW_PHASES, O_GATES_AHEAD,
       O_SLICE_STEPS, O_EXCLUSIVE_SM, O_MMA, O_FETCH_EARLY, O_CELL, O_COUNT };
_Static_assert(O_COUNT <= SPK_KERNEL_OPTIONS_MAX, "a kernel choice holds every option");
#define ON(o) (1u << (o))
#define TWO_NTILES (((uint64_t)1 << 33) - ((uint64_t)1 << 9)) /* tile_rows 9 .. 32 */

static const spk_kernel_option options[O_COUNT] = {
    [O_HIDDEN] = {"hidden", "SPK_HIDDEN", {NULL}, 1, 1 << 20, 0, SPK_DEFAULT_LAYERS, 0, 0, FIELD(hidden),
                  "hidden units, the layers' own"},
    /* no macro: TC_SPLIT (the value + 1) is an extra define */
    [O_SPLIT] = {"split", NULL, {SPK_MATH_TF32_NAME, "f16"}, 0, 0, 0, SPK_DEFAULT_BATCH, SPK_TC_SPLIT_F16, 0, FIELD(split),
                 "the parts R and h are split into: FP16x3 (scaled small parts) or 3xTF32"},
    [O_PRODUCTS] = {"products", "TC_PRODUCTS", {NULL}, 1, 3, SPK_BIT(1) | SPK_BIT(3), SPK_DEFAULT_BATCH, 3, 0,
                    FIELD(products), "3, or 1: the big product alone (not FP32-accurate; what the split costs)"},
    [O_CLUSTER] = {"cluster", "CLUSTER", {NULL}, 2, 16, SPK_BIT(2) | SPK_BIT(4) | SPK_BIT(8) | SPK_BIT(16),
                   SPK_DEFAULT_BATCH, 4, 0, FIELD(cluster), "blocks a cluster; each owns hidden / cluster units"},
    [O_TILE_ROWS] = {"tile_rows", "TILE_ROWS", {NULL}, 1, 32, 0, SPK_DEFAULT_BATCH, 16, 0, FIELD(tile_rows),
                     "batch rows a tile (n-tiles of 8)"},
    [O_WARP_MT] = {"warp_mt", "WARP_MT", {NULL}, 1, 2, SPK_BIT(1) | SPK_BIT(2), SPK_DEFAULT_BATCH, 1, 0,
                   FIELD(warp_mt), "m-tiles of 16 gate rows a warp"},
    [O_ROW_PHASES] = {"row_phases", "ROW_PHASES", {NULL}, 1, 2, SPK_BIT(1) | SPK_BIT(2), SPK_DEFAULT_BATCH, 1, 0,
                      FIELD(row_phases), "halves of a tile's n-tiles that take turns"},
    [O_GATES_AHEAD] = {"gates_ahead", "GATES_AHEAD", {NULL}, 1, 4, 0, SPK_DEFAULT_BATCH, 2, 0, FIELD(gates_ahead),
                       "steps ahead the x·Wᵀ is fetched (cp.async stages)"},
    [O_SLICE_STEPS] = {"slice_steps", "SLICE_STEPS", {NULL}, 1, 8, SPK_BIT(1) | SPK_BIT(2) | SPK_BIT(4) | SPK_BIT(8),
                       SPK_DEFAULT_FIT, 0, ON(O_CLUSTER) | ON(O_WARP_MT) | ON(O_MMA), FIELD(slice_steps),
                       "mma k-steps summed in the tensor core before the FP32 add"},
    /* no macro: the launch's */
    [O_EXCLUSIVE_SM] = {"exclusive_sm", NULL, {NULL}, 0, 1, 0, SPK_DEFAULT_BATCH, 1, 0, FIELD(exclusive_sm),
                        "1: the launch asks for more than half an SM's shared memory, a block an SM"},
    /* no macro: TC_MMA (the value + 1) is an extra define */
    [O_MMA] = {"mma", NULL, {"sync", "wgmma"}, 0, 0, 0, SPK_DEFAULT_BATCH, SPK_TC_MMA_SYNC, 0, FIELD(mma),
               "mma.sync (each warp its products) or wgmma (a warpgroup's four m-tiles in one instruction, "
               "R from registers, h from shared memory)"},
    [O_FETCH_EARLY] = {"fetch_early", "FETCH_EARLY", {NULL}, 0, 1, 0, SPK_DEFAULT_BATCH, 0, 0, FIELD(fetch_early),
                       "1: the x·Wᵀ of a step ahead fetched before the wait for h, off the step's chain"},
    [O_CELL] = {"cell", "TC_CELL", {SPK_CELL_WORDS}, 0, 0, 0, SPK_DEFAULT_BATCH, SPK_CELL_REFERENCE, 0, FIELD(cell),
                SPK_CELL_HELP},
};

#define WGMMA SPK_BIT(SPK_TC_MMA_WGMMA)
static const spk_kernel_rule rules[] = {
    {"mma", WGMMA, "split", SPK_BIT(SPK_TC_SPLIT_F16), "kernel.mma \"wgmma\" needs kernel.split \"f16\""},
    {"mma", WGMMA, "products", SPK_BIT(3), "kernel.mma \"wgmma\" needs kernel.products 3"},
    {"mma", WGMMA, "warp_mt", SPK_BIT(1), "kernel.mma \"wgmma\" needs kernel.warp_mt 1"},
    {"slice_steps", SPK_BIT(4) | SPK_BIT(8), "mma", WGMMA, "kernel.slice_steps 4 or 8 needs kernel.mma \"wgmma\""},
    {"fetch_early", SPK_BIT(1), "gates_ahead", SPK_BIT(2) | SPK_BIT(3) | SPK_BIT(4),
     "kernel.fetch_early 1 needs kernel.gates_ahead 2 .. 4"},
    {"row_phases", SPK_BIT(2), "tile_rows", TWO_NTILES,
     "kernel.row_phases 2 needs two n-tiles a tile: kernel.tile_rows 9 .. 32"},
};

const spk_kernel_family spk_tensor_core_family = {"tensor_core", options, O_COUNT, rules,
                                                  (int)(sizeof rules / sizeof *rules)};

/* ---- variants ------------------------------------------------------------ */

/* The default per batch (the first row whose max_batch holds it): one wave
 * of clusters on the H200 with a block an SM (exclusive_sm), since a cluster
 * past the co-resident ones waits for a whole second wave; one n-tile a
 * block where the batch allows, the smallest blocks that fit; wgmma where
 * the sweep measured it faster (docs/kernels.md, "The tensor-core
 * recurrence", has the figures; tools/tc_sweep.lua measures the
 * alternatives). The H200 holds 66 clusters of 2, 30 of 4 and 14 of 8 at
 * once with a block an SM. */
struct tc_row {
    int cluster, tile_rows, row_phases, mma;
};
static const struct {
    int64_t max_batch;
    struct tc_row f16, tf32;
} batch_table[] = {
    {56, {8, 8, 1, SPK_TC_MMA_SYNC}, {8, 8, 1, SPK_TC_MMA_SYNC}},          /* <= 14 clusters of 8 */
    {120, {2, 4, 1, SPK_TC_MMA_WGMMA}, {4, 8, 1, SPK_TC_MMA_SYNC}},        /* <= 60 of 2, <= 30 of 4 */
    {128, {2, 4, 1, SPK_TC_MMA_WGMMA}, {4, 16, 2, SPK_TC_MMA_SYNC}},       /* 64 of 2, 16 of 4 */
    {256, {2, 8, 1, SPK_TC_MMA_WGMMA}, {4, 16, 2, SPK_TC_MMA_SYNC}},       /* <= 64 of 2, <= 32 of 4 */
    {INT64_MAX, {2, 16, 2, SPK_TC_MMA_SYNC}, {4, 16, 2, SPK_TC_MMA_SYNC}}, /* two waves and more */
};

/* wgmma's slice when none is given: one k-step (the mma.sync form's
 * accuracy) in blocks of up to 256 threads; four in blocks of 512, whose 128
 * registers a thread spill at two and make ptxas serialise the wgmmas at
 * one. */
static int wgmma_slice_steps(int threads) { return threads <= 256 ? 1 : 4; }

static int block_threads(const spk_tc_variant *v)
{
    int units = v->cluster > 0 ? v->hidden / v->cluster : 0;
    return 32 * (units / (4 * (v->warp_mt > 0 ? v->warp_mt : 1)));
}

/* Whether the wgmma form's shape holds: whole warpgroups, one or two n-tiles a row phase. */
static bool wgmma_fits(const spk_tc_variant *v)
{
    int n_tiles = (v->tile_rows + 7) / 8, phases = v->row_phases > 0 ? v->row_phases : 1;
    return block_threads(v) % 128 == 0 && n_tiles % phases == 0 && n_tiles / phases <= 2;
}

/* The batch's row. 3xTF32 holds 128 registers of R a thread: blocks of 512
 * threads (a cluster of 2) would spill, so a split "tf32" given with no
 * cluster takes the row's tf32 shape (clusters of 4 and more). */
static spk_tc_variant row_for_batch(int hidden, int64_t batch, const spk_kernel_choice *given)
{
    size_t n = sizeof batch_table / sizeof *batch_table, i = 0;
    while (i + 1 < n && batch > batch_table[i].max_batch)
        i++;
    bool tf32 = (given->given & ON(O_SPLIT)) && given->values[O_SPLIT] == SPK_TC_SPLIT_TF32;
    const struct tc_row *row = tf32 && !(given->given & ON(O_CLUSTER)) ? &batch_table[i].tf32 : &batch_table[i].f16;
    spk_tc_variant v = {.hidden = hidden, .split = SPK_TC_SPLIT_F16, .products = 3, .cluster = row->cluster,
                        .tile_rows = row->tile_rows, .warp_mt = 1, .row_phases = row->row_phases, .gates_ahead = 2,
                        .exclusive_sm = 1, .mma = row->mma, .fetch_early = 1, .cell = SPK_CELL_REFERENCE};
    v.slice_steps = v.mma == SPK_TC_MMA_WGMMA ? wgmma_slice_steps(block_threads(&v)) : 1;
    return v;
}

int spk_tc_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given, spk_tc_variant *out)
{
    spk_tc_variant row = row_for_batch(hidden, batch, given);
    memset(out, 0, sizeof *out);
    spk_kernel_resolve(&spk_tensor_core_family, &row, given, out);
    /* a row's wgmma gives way to mma.sync where the options given leave no whole warpgroups or more
     * than two n-tiles a row phase */
    if (!(given->given & ON(O_MMA)) && out->mma == SPK_TC_MMA_WGMMA && !wgmma_fits(out)) {
        out->mma = SPK_TC_MMA_SYNC;
        if (!(given->given & ON(O_SLICE_STEPS)))
            out->slice_steps = 0;
    }
    if (out->slice_steps == 0) /* what it follows changed */
        out->slice_steps = out->mma == SPK_TC_MMA_WGMMA ? wgmma_slice_steps(block_threads(out)) : 1;
    return spk_tc_variant_derive(out, NULL);
}

int spk_tc_variant_derive(const spk_tc_variant *v, spk_tc_sizes *out)
{
    if (v->hidden < 1)
        return spk_fail("kernel.hidden must be positive, got %d", v->hidden);
    if (spk_kernel_check_rules(&spk_tensor_core_family, v) != 0)
        return -1;
    spk_tc_sizes s = {0};
    const bool f16 = v->split == SPK_TC_SPLIT_F16, wgmma = v->mma == SPK_TC_MMA_WGMMA;
    s.units = v->hidden / v->cluster;
    s.threads = block_threads(v);
    s.warps = s.threads / 32;
    if (v->hidden % 16 != 0 || v->hidden % v->cluster != 0 || s.units % (4 * v->warp_mt) != 0 || s.warps < 1)
        return spk_fail("kernel: hidden %d does not split into kernel.cluster %d blocks of warps of %d units "
                        "(kernel.warp_mt %d): hidden must be a multiple of 16 and of 4 * warp_mt * cluster",
                        v->hidden, v->cluster, 4 * v->warp_mt, v->warp_mt);
    if (s.threads > 1024)
        return spk_fail("kernel: kernel.cluster %d at hidden %d makes blocks of %d threads (at most 1024): take a "
                        "larger cluster", v->cluster, v->hidden, (int)s.threads);
    s.n_tiles = (v->tile_rows + 7) / 8;
    s.cells = s.n_tiles * (v->warp_mt == 2 ? 2 : 1);
    s.row_words = (f16 ? v->hidden / 2 : v->hidden) + 8;
    s.k_steps = v->hidden / (f16 ? 16 : 8);
    s.r_registers = v->warp_mt * s.k_steps * 8;
    if (s.r_registers > 128)
        return spk_fail("kernel: a thread would hold %d registers of R (kernel.split \"%s\", kernel.warp_mt %d, "
                        "hidden %d): at most 128; take warp_mt 1 or split \"f16\"", (int)s.r_registers,
                        options[O_SPLIT].words[v->split], v->warp_mt, v->hidden);
    if (s.k_steps % v->slice_steps != 0)
        return spk_fail("kernel.slice_steps %d must divide the %d k-steps", v->slice_steps, (int)s.k_steps);
    if (wgmma && !wgmma_fits(v))
        return spk_fail("kernel.mma \"wgmma\" needs whole warpgroups (kernel.cluster %d at hidden %d gives %d warps) "
                        "and one or two n-tiles a row phase (kernel.tile_rows %d, kernel.row_phases %d)",
                        v->cluster, v->hidden, (int)s.warps, v->tile_rows, v->row_phases);
    s.buffer_bytes = wgmma ? s.n_tiles * 2 * 16 * v->hidden : 8 * s.n_tiles * 8 * s.row_words;
    s.smem_bytes = 128 + 2 * s.buffer_bytes + 16 * (int64_t)v->gates_ahead * s.cells * s.threads;
    if (s.smem_bytes > 227 * 1024)
        return spk_fail("kernel: %lld bytes of shared memory (at most 232448): fewer kernel.tile_rows or "
                        "kernel.gates_ahead", (long long)s.smem_bytes);
    s.launch_smem = v->exclusive_sm && s.smem_bytes < SPK_TC_EXCLUSIVE_SMEM ? SPK_TC_EXCLUSIVE_SMEM : s.smem_bytes;
    if (out)
        *out = s;
    return 0;
}

/* ---- the family ----------------------------------------------------------- */

typedef struct tc_state {
    spk_tc_variant variant;
    spk_tc_sizes sizes;
    int64_t batch, tiles;
    int max_active, sms;
} tc_state;
SPK_FAMILY_STATE_TYPE(tc_state)

static int resolve(spk_family_state *st, const spk_family_request *r)
{
    tc_state *c = state_of(st);
    if (spk_tc_variant_resolve(r->hidden, r->batch, &r->kernel, &c->variant) != 0 ||
        spk_tc_variant_derive(&c->variant, &c->sizes) != 0)
        return -1;
    c->batch = r->batch;
    c->tiles = (r->batch + c->variant.tile_rows - 1) / c->variant.tile_rows;
    return 0;
}

#define SIZE(name) SPK_FIELD_MEMBER(spk_tc_sizes, name)
static const spk_field_member size_members[] = {SIZE(units),     SIZE(warps),     SIZE(threads),      SIZE(n_tiles),
                                                SIZE(cells),     SIZE(row_words), SIZE(buffer_bytes), SIZE(k_steps),
                                                SIZE(r_registers), SIZE(smem_bytes), SIZE(launch_smem)};
#undef SIZE

static void variant_fields(const spk_family_state *st, spk_fields *out)
{
    spk_fields_text(out, "file", "lstm_tc.cu");
    spk_fields_members(out, &cstate_of(st)->sizes, size_members, (int)(sizeof size_members / sizeof *size_members));
    spk_fields_int(out, "tiles", cstate_of(st)->tiles); /* of the batch the variant was resolved for */
}

/* TC_SPLIT and TC_MMA (the word's index + 1), the shared memory the kernel
 * checks it needs, and the packing the kernel reads (units layout, the
 * packed gate order). */
static int extra_defines(const spk_family_state *st, spk_define *out, char text[][16])
{
    const tc_state *c = cstate_of(st);
    static const struct {
        char gate;
        const char *macro;
    } gate_macros[] = {{'i', "SPK_GATE_I"}, {'f', "SPK_GATE_F"}, {'c', "SPK_GATE_C"}, {'o', "SPK_GATE_O"}};
    int n = 0;
    snprintf(text[n], 16, "%d", c->variant.split + 1);
    out[n] = (spk_define){"TC_SPLIT", text[n]}, n++;
    snprintf(text[n], 16, "%d", c->variant.mma + 1);
    out[n] = (spk_define){"TC_MMA", text[n]}, n++;
    snprintf(text[n], 16, "%lld", (long long)c->sizes.smem_bytes);
    out[n] = (spk_define){"TC_EXPECTED_SMEM", text[n]}, n++;
    for (int g = 0; g < 4; g++) {
        snprintf(text[n], 16, "%d", (int)(strchr(SPK_GATES_PACKED, gate_macros[g].gate) - SPK_GATES_PACKED));
        out[n] = (spk_define){gate_macros[g].macro, text[n]}, n++;
    }
    out[n] = (spk_define){"SPK_PACK_ROWS", "0"}, n++;
    _Static_assert(8 <= SPK_FAMILY_EXTRA_DEFINES, "the tensor-core kernel's extra defines fit");
    return n;
}

static int check_device(spk_family_state *st, const spk_device_props *props)
{
    if (props->cc_major != 9 || props->cc_minor != 0)
        return spk_fail("lstm stack: the tensor_core backend needs compute capability 9.0 (sm_90a; this device: "
                        "%d.%d)", props->cc_major, props->cc_minor);
    state_of(st)->sms = props->sms;
    return 0;
}

/* The arch-specific target: the wgmma form needs it, the mma.sync form
 * compiles the same for it. */
static spk_module *compile(const spk_family_state *st, spk_kernel_build build, const char *arch)
{
    char target[32] = "sm_90a";
    if (arch) {
        size_t n = strlen(arch);
        snprintf(target, sizeof target, "%s%s", arch, n > 0 && arch[n - 1] == 'a' ? "" : "a");
    }
    spk_define defines[SPK_FAMILY_DEFINES];
    char text[SPK_FAMILY_DEFINES][16];
    int n = spk_family_defines(&spk_tensor_core_kernels, st, defines, text);
    return spk_family_compile_defines("lstm_tc.cu", defines, n, build, target);
}

static const int tc_args[] = {SPK_RA_GATES, SPK_RA_R,          SPK_RA_BIAS,        SPK_RA_OUTPUT,
                              SPK_RA_STATUS, SPK_RA_BATCH,     SPK_RA_STEPS,       SPK_RA_TRACE,
                              SPK_RA_TRACE_SLOT, SPK_RA_TRACE_SLOTS, SPK_RA_TRACE_DIRECTION};

static spk_launch_config launch_config(const tc_state *c)
{
    spk_launch_config cfg = {0};
    cfg.grid[0] = (unsigned)c->variant.cluster, cfg.grid[1] = (unsigned)c->tiles, cfg.grid[2] = 2;
    cfg.block[0] = (unsigned)c->sizes.threads, cfg.block[1] = cfg.block[2] = 1;
    cfg.cluster[0] = (unsigned)c->variant.cluster, cfg.cluster[1] = cfg.cluster[2] = 1;
    cfg.smem = c->sizes.launch_smem;
    return cfg;
}

/* How many clusters fit at once: how many waves the launch takes. */
static int active_clusters(const tc_state *c, spk_kernel *kernel, int *clusters)
{
    spk_launch_config cfg = launch_config(c);
    return spk_kernel_max_active_clusters(kernel, &cfg, clusters);
}

static int describe(spk_family_state *st, spk_kernel *kernel, const spk_family_request *r, spk_kernel_stack_desc *desc)
{
    (void)r;
    tc_state *c = state_of(st);
    if (active_clusters(c, kernel, &c->max_active) != 0)
        return -1;
    if (c->max_active < 1)
        return spk_fail("lstm stack: not one cluster of the tensor-core kernel fits the device (%zu bytes of shared "
                        "memory, %d threads a block)", (size_t)c->sizes.launch_smem, (int)c->sizes.threads);
    spk_kernel_stack_launch *launch = malloc(sizeof *launch);
    if (!launch)
        return spk_fail("lstm stack: out of memory");
    spk_launch_config cfg = launch_config(c);
    *launch = (spk_kernel_stack_launch){.direction = -1, .smem = cfg.smem};
    memcpy(launch->grid, cfg.grid, sizeof launch->grid);
    memcpy(launch->block, cfg.block, sizeof launch->block);
    memcpy(launch->cluster, cfg.cluster, sizeof launch->cluster);
    *desc = (spk_kernel_stack_desc){.name = "tensor-core recurrence",
                                    .args = tc_args,
                                    .nargs = (int)(sizeof tc_args / sizeof *tc_args),
                                    .launches = launch,
                                    .nlaunches = 1,
                                    .tile_rows = c->variant.tile_rows,
                                    .packing = spk_lstm_packing_builtin(),
                                    .statuses = spk_builtin_statuses,
                                    .nstatuses = spk_builtin_nstatuses};
    return 0;
}

static int64_t clusters_of(const tc_state *c) { return 2 * c->tiles; }
/* The waves the launch takes with `active` clusters at once (0: none fits). */
static int64_t waves_of(const tc_state *c, int active)
{
    return active > 0 ? (clusters_of(c) + active - 1) / active : 0;
}

static int check_build(const spk_family_state *st, spk_kernel_build build, spk_kernel *kernel, spk_fields *out)
{
    (void)build;
    const tc_state *c = cstate_of(st);
    int clusters = 0;
    if (active_clusters(c, kernel, &clusters) != 0)
        return -1;
    if (clusters < 1)
        return spk_fail("lstm stack: the tensor-core kernel's timeline build: not one cluster fits the device");
    spk_fields_int(out, "max_active_clusters", clusters);
    spk_fields_int(out, "waves", waves_of(c, clusters));
    return 0;
}

#define STAGE_NAME(name, text) text,
static const char *const plain_names[] = {TC_STAGES(STAGE_NAME)};
static const char *const phased_names[] = {TC_PHASED_STAGES(STAGE_NAME)};
static const char *const early_names[] = {TC_EARLY_STAGES(STAGE_NAME)};
static const char *const early_phased_names[] = {TC_EARLY_PHASED_STAGES(STAGE_NAME)};
/* A wait is for every block's publish of its phase at the previous step. */
#define WAITS(prefix, name)                                                                                          \
    (prefix##name == prefix##WAIT ? prefix##PUBLISH : prefix##name == prefix##WAIT_2 ? prefix##PUBLISH_2 : -1),
#define PLAIN_WAITS(name, text) (TC_STAGE_##name == TC_STAGE_WAIT ? TC_STAGE_PUBLISH : -1),
#define EARLY_WAITS(name, text) (TC_EARLY_STAGE_##name == TC_EARLY_STAGE_WAIT ? TC_EARLY_STAGE_PUBLISH : -1),
#define PHASED_WAITS(name, text) WAITS(TC_PHASED_STAGE_, name)
#define EARLY_PHASED_WAITS(name, text) WAITS(TC_EARLY_PHASED_STAGE_, name)
static const int plain_waits[] = {TC_STAGES(PLAIN_WAITS)};
static const int phased_waits[] = {TC_PHASED_STAGES(PHASED_WAITS)};
static const int early_waits[] = {TC_EARLY_STAGES(EARLY_WAITS)};
static const int early_phased_waits[] = {TC_EARLY_PHASED_STAGES(EARLY_PHASED_WAITS)};
static const spk_timeline_stages stage_lists[2][2] = {
    {{TC_STAGE_COUNT, plain_names, plain_waits}, {TC_PHASED_STAGE_COUNT, phased_names, phased_waits}},
    {{TC_EARLY_STAGE_COUNT, early_names, early_waits},
     {TC_EARLY_PHASED_STAGE_COUNT, early_phased_names, early_phased_waits}},
};

static const spk_timeline_stages *stages(const spk_family_state *st)
{
    const spk_tc_variant *v = &cstate_of(st)->variant;
    return &stage_lists[v->fetch_early == 1][v->row_phases == 2];
}

/* Blocks are numbered rank + cluster * tile; a group is a cluster. */
static void timeline_geometry(const spk_family_state *st, int64_t *blocks, int *warps, int *group)
{
    const tc_state *c = cstate_of(st);
    *blocks = (int64_t)c->variant.cluster * c->tiles;
    *warps = c->sizes.threads / 32;
    *group = c->variant.cluster;
}

static void plan_fields(const spk_family_state *st, spk_fields *kernel, spk_fields *schedule)
{
    const tc_state *c = cstate_of(st);
    spk_fields_int(kernel, "smem", (int64_t)c->sizes.launch_smem);
    spk_fields_int(kernel, "max_active_clusters", c->max_active);
    spk_fields_int(kernel, "sms", c->sms);
    spk_fields_int(schedule, "batch", c->batch);
    spk_fields_int(schedule, "tile_rows", c->variant.tile_rows);
    spk_fields_int(schedule, "tiles", c->tiles);
    spk_fields_int(schedule, "clusters", clusters_of(c));
    spk_fields_int(schedule, "max_active_clusters", c->max_active);
    spk_fields_int(schedule, "waves", waves_of(c, c->max_active));
    spk_fields_int(schedule, "launches", 1); /* per layer: both directions, every tile */
}

static void variant_text(const spk_family_state *st, char *out, size_t size)
{
    const tc_state *c = cstate_of(st);
    const spk_tc_variant *v = &c->variant;
    int64_t waves = waves_of(c, c->max_active);
    char extra[128] = "";
    size_t n = 0;
    if (v->products == 1)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", big product only");
    if (v->warp_mt == 2)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", 2 m-tiles a warp");
    if (v->row_phases == 2)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", 2 row phases");
    if (v->fetch_early == 1)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", fetch early");
    if (v->cell != SPK_CELL_REFERENCE)
        n += (size_t)snprintf(extra + n, sizeof extra - n, ", %s cell", options[O_CELL].words[v->cell]);
    if (v->exclusive_sm == 0)
        snprintf(extra + n, sizeof extra - n, ", shared SMs");
    snprintf(out, size, "%s %s, cluster %d, %d threads, tile %d, %lld clusters in %lld wave%s, gates %d steps ahead, "
             "slice %d%s", v->split == SPK_TC_SPLIT_F16 ? "FP16x3" : "3xTF32", options[O_MMA].words[v->mma],
             v->cluster, (int)c->sizes.threads, v->tile_rows, (long long)clusters_of(c), (long long)waves,
             waves == 1 ? "" : "s", v->gates_ahead, v->slice_steps, extra);
}

static void name(const spk_family_state *st, const spk_lstm_gpu_shape *shape, char *out, size_t size)
{
    const tc_state *c = cstate_of(st);
    snprintf(out, size, "lstm stack (tensor_core %s %s, cluster %d, %d layers, batch %d, steps %d, tile_rows %d%s)",
             options[O_SPLIT].words[c->variant.split], options[O_MMA].words[c->variant.mma], c->variant.cluster,
             (int)shape->layers, (int)shape->batch, (int)shape->steps, c->variant.tile_rows,
             spk_lstm_math_suffix(shape->math));
}

const spk_family spk_tensor_core_kernels = {
    .backend = "tensor_core",
    .title = "tensor-core recurrence",
    .summary = "the tensor_core backend: each step's R·h as split-precision tensor-core products, FP32 accurate",
    .help = "Hopper thread-block clusters (compute capability 9.0, sm_90a), as the cluster backend, with each\n"
            "step's R·h as tensor-core products of split parts (kernel.split \"f16\": FP16x3 with scaled small\n"
            "parts; \"tf32\": 3xTF32), R resident in registers, the cell in FP32, h exchanged through\n"
            "distributed shared memory; both directions in one launch a layer (kernels/lstm_tc.cu). Within\n"
            "FP32's bound; bitwise deterministic. plan.schedule: tile_rows, tiles, clusters,\n"
            "max_active_clusters, waves; a timeline's blocks are numbered rank + cluster * tile.",
    .options = &spk_tensor_core_family,
    .accepts = SPK_PLAN_TRACE, /* its arguments take the trace */
    .entry = "spk_lstm_tc",
    .resolve = resolve,
    .variant_fields = variant_fields,
    .check = spk_family_check_indices,
    .check_device = check_device,
    .compile = compile,
    .extra_defines = extra_defines,
    .describe = describe,
    .check_build = check_build,
    .stages = stages,
    .timeline_geometry = timeline_geometry,
    .plan_fields = plan_fields,
    .variant_text = variant_text,
    .name = name,
};
