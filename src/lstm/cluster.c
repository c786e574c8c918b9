/* The GPU LSTM stack on the cluster recurrence: see cluster.h and the long
 * comment at the top of kernels/lstm_cluster.cu. */
#include "lstm/cluster.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cluster.h"
#include "lstm/device_layers.h"
#include "lstm/family.h"
#include "lstm_timeline_stages.cuh"


/* ---- options ------------------------------------------------------------- */

/* The cluster kernels' options: every rule about a single option and about
 * pairs of options is written here once; spk_cluster_variant_derive checks
 * what needs the derived sizes. docs/design.md says why each exists and
 * which measurement keeps it. */
#define FIELD(name) offsetof(spk_cluster_variant, name)
enum { O_HIDDEN, O_PUSH, O_CLUSTER, O_GATE_BLOCK, O_GATES_AHEAD, O_ROW_PHASES, O_MAX_TILE_ROWS, O_TILE_ROWS,
       O_THREADS, O_ROW_GROUP, O_MIN_BLOCKS, O_EARLY_GATES, O_CELL, O_MAPPED_PUSHES, O_COUNT };
_Static_assert(O_COUNT <= SPK_KERNEL_OPTIONS_MAX, "a kernel choice holds every option");
#define ON(o) (1u << (o))
#define FAST_PUSHES (SPK_BIT(SPK_PUSH_DIRECT) | SPK_BIT(SPK_PUSH_WARP))

static const spk_kernel_option options[O_COUNT] = {
    [O_HIDDEN] = {"hidden", "HIDDEN", {NULL}, 1, 1 << 20, 0, SPK_DEFAULT_LAYERS, 0, 0, FIELD(hidden),
                  "hidden units, the layers' own"},
    [O_PUSH] = {"push", "PUSH", {"scalar", "direct", "warp"}, 0, 0, 0, SPK_DEFAULT_BATCH, SPK_PUSH_DIRECT, 0,
                FIELD(push),
                "how h reaches the blocks: stores and a cluster barrier (the baseline), st.async from a "
                "cell's lanes, or per warp"},
    [O_CLUSTER] = {"cluster", "CLUSTER", {NULL}, 1, 16, SPK_BIT(1) | SPK_BIT(2) | SPK_BIT(4) | SPK_BIT(8) | SPK_BIT(16),
                   SPK_DEFAULT_BATCH, 8, 0, FIELD(cluster), "blocks a cluster; each owns hidden / cluster units"},
    [O_GATE_BLOCK] = {"gate_block", "GATE_BLOCK", {NULL}, 1, 4, SPK_BIT(1) | SPK_BIT(4), SPK_DEFAULT_BATCH, 1, 0,
                      FIELD(gate_block), "gate rows a thread holds: one, or its unit's four"},
    [O_GATES_AHEAD] = {"gates_ahead", "GATES_AHEAD", {NULL}, 1, 4, 0, SPK_DEFAULT_BATCH, 1, 0, FIELD(gates_ahead),
                       "steps ahead a cell's x·Wᵀ is fetched (2 .. 4: cp.async stages)"},
    [O_ROW_PHASES] = {"row_phases", "ROW_PHASES", {NULL}, 1, 2, SPK_BIT(1) | SPK_BIT(2), SPK_DEFAULT_BATCH, 1, 0, FIELD(row_phases),
                      "halves of a tile's row groups that take turns"},
    [O_MAX_TILE_ROWS] = {"max_tile_rows", "TILE_ROWS", {NULL}, 1, 32, 0, SPK_DEFAULT_FIT, 0, ON(O_TILE_ROWS),
                         FIELD(max_tile_rows), "the most batch rows a tile carries (the kernel's: its shared memory)"},
    /* no macro: the launch's, not the kernel's */
    [O_TILE_ROWS] = {"tile_rows", NULL, {NULL}, 0, 32, 0, SPK_DEFAULT_FIT, 0, ON(O_MAX_TILE_ROWS), FIELD(tile_rows),
                     "batch rows a tile carries (0: the schedule picks, up to max_tile_rows)"},
    [O_THREADS] = {"threads", "THREADS", {NULL}, 32, 1024, 0, SPK_DEFAULT_FIT, 0,
                   ON(O_PUSH) | ON(O_CLUSTER) | ON(O_GATE_BLOCK), FIELD(threads),
                   "threads a block: 4 * hidden / cluster / gate_block * chunks"},
    [O_ROW_GROUP] = {"row_group", "ROW_GROUP", {NULL}, 1, 8, SPK_BIT(1) | SPK_BIT(2) | SPK_BIT(4) | SPK_BIT(8),
                     SPK_DEFAULT_FIT, 0,
                     ON(O_PUSH) | ON(O_CLUSTER) | ON(O_GATE_BLOCK) | ON(O_ROW_PHASES) | ON(O_MAX_TILE_ROWS) |
                         ON(O_THREADS),
                     FIELD(row_group), "rows whose partial dots a thread forms at once"},
    [O_MIN_BLOCKS] = {"min_blocks", "MIN_BLOCKS", {NULL}, 1, 64, 0, SPK_DEFAULT_FIT, 0,
                      ON(O_PUSH) | ON(O_CLUSTER) | ON(O_GATE_BLOCK) | ON(O_GATES_AHEAD) | ON(O_ROW_PHASES) |
                          ON(O_MAX_TILE_ROWS) | ON(O_THREADS) | ON(O_ROW_GROUP) | ON(O_EARLY_GATES) | ON(O_CELL) |
                          ON(O_MAPPED_PUSHES),
                      FIELD(min_blocks), "blocks an SM the register budget is made for"},
    [O_EARLY_GATES] = {"early_gates", "EARLY_GATES", {NULL}, 0, 1, 0, SPK_DEFAULT_BATCH, 0, 0, FIELD(early_gates),
                       "1: the next step's gates taken, and the exchange re-armed, off the wait's path"},
    [O_CELL] = {"cell", "CELL", {SPK_CELL_WORDS}, 0, 0, 0, SPK_DEFAULT_BATCH, SPK_CELL_REFERENCE, 0, FIELD(cell),
                SPK_CELL_HELP},
    [O_MAPPED_PUSHES] = {"mapped_pushes", "MAPPED_PUSHES", {NULL}, 0, 2, 0, SPK_DEFAULT_BATCH, 0, 0,
                         FIELD(mapped_pushes),
                         "1: a lane's peers mapped once, each push one predicated st.async (no branch); 2: the "
                         "same, a step's push addresses made under the exchange before it (direct pushes)"},
};

static const spk_kernel_rule rules[] = {
    {"gate_block", SPK_BIT(4), "push", FAST_PUSHES, "kernel.gate_block 4 needs kernel.push \"direct\" or \"warp\""},
    {"push", SPK_BIT(SPK_PUSH_WARP), "gate_block", SPK_BIT(4), "kernel.push \"warp\" needs kernel.gate_block 4"},
    {"gates_ahead", SPK_BIT(2) | SPK_BIT(3) | SPK_BIT(4), "push", FAST_PUSHES,
     "kernel.gates_ahead 2 .. 4 needs kernel.push \"direct\" or \"warp\""},
    {"row_phases", SPK_BIT(2), "push", FAST_PUSHES, "kernel.row_phases 2 needs kernel.push \"direct\" or \"warp\""},
    {"early_gates", SPK_BIT(1), "push", FAST_PUSHES, "kernel.early_gates 1 needs kernel.push \"direct\" or \"warp\""},
    {"cell", SPK_BIT(SPK_CELL_TRIMMED) | SPK_BIT(SPK_CELL_FUSED), "push", FAST_PUSHES,
     "kernel.cell \"trimmed\" or \"fused\" needs kernel.push \"direct\" or \"warp\""},
    {"mapped_pushes", SPK_BIT(1), "push", FAST_PUSHES,
     "kernel.mapped_pushes 1 needs kernel.push \"direct\" or \"warp\""},
    {"mapped_pushes", SPK_BIT(2), "push", SPK_BIT(SPK_PUSH_DIRECT),
     "kernel.mapped_pushes 2 needs kernel.push \"direct\""},
};

const spk_kernel_family spk_cluster_family = {"cluster", options, O_COUNT, rules,
                                              (int)(sizeof rules / sizeof *rules)};

/* ---- variants ------------------------------------------------------------ */

/* Threads of a block: its gate rows split into blocks of `gate_block`, each over `chunks` lanes. */
static int block_threads(int hidden, int cluster, int gate_block, int chunks)
{
    return 4 * (hidden / cluster) / gate_block * chunks;
}

static bool valid_threads(int hidden, int cluster, int gate_block, int chunks, int limit)
{
    if (cluster < 1 || hidden % cluster != 0)
        return false;
    int threads = block_threads(hidden, cluster, gate_block, chunks);
    return hidden % (4 * chunks) == 0 && threads % 32 == 0 && threads <= limit;
}

/* The most chunks (8, 4, 2) giving a valid block of at most `limit` threads; 0 if none. */
static int best_chunks(int hidden, int cluster, int gate_block, int limit)
{
    for (int chunks = 8; chunks >= 2; chunks /= 2)
        if (valid_threads(hidden, cluster, gate_block, chunks, limit))
            return chunks;
    return 0;
}

void spk_cluster_variant_fit(spk_cluster_variant *v)
{
    if (v->hidden < 1)
        return; /* the check names it */
    if (v->gate_block == 0)
        v->gate_block = 1;
    if (v->gates_ahead == 0)
        v->gates_ahead = 1;
    if (v->row_phases == 0)
        v->row_phases = 1;
    int gate_block = v->gate_block == 4 ? 4 : 1; /* the check names any other value */
    if (v->cluster == 0) {
        static const int sizes[] = {8, 4, 2, 1};
        v->cluster = 8;
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            if (best_chunks(v->hidden, sizes[i], gate_block, 1024) != 0) {
                v->cluster = sizes[i];
                break;
            }
    }
    if (v->threads == 0 && v->cluster > 0 && v->hidden % v->cluster == 0) {
        int chunks = best_chunks(v->hidden, v->cluster, gate_block, 512);
        if (chunks == 0)
            chunks = best_chunks(v->hidden, v->cluster, gate_block, 1024);
        if (chunks != 0)
            v->threads = block_threads(v->hidden, v->cluster, gate_block, chunks);
    }
    int blocks = v->cluster > 0 && v->hidden % v->cluster == 0 ? 4 * (v->hidden / v->cluster) / gate_block : 0;
    int chunks = blocks > 0 && v->threads % blocks == 0 ? v->threads / blocks : 0;
    if (v->max_tile_rows == 0)
        v->max_tile_rows = v->tile_rows > 0 ? v->tile_rows : 32; /* a tile height given is what the kernel carries */
    bool lanes = v->push != SPK_PUSH_SCALAR; /* the cell in the reducing lanes, tiles padded to row groups */
    if (v->row_group == 0) {
        v->row_group = chunks > 0 ? chunks : 1;
        /* no padding past the tile, and with row phases a group for each */
        int phases = v->row_phases == 2 ? 2 : 1;
        while (lanes && v->row_group > 1 && v->row_group * phases > v->max_tile_rows)
            v->row_group /= 2;
    }
    /* ptxas spills at 64 registers (two blocks an SM) past one row with the mbarrier exchange */
    bool wide = lanes && v->max_tile_rows > 1;
    int weights = chunks > 0 ? gate_block * v->hidden / chunks : 0; /* registers of R a thread */
    bool two_fit = weights > 0 && weights <= 16 && 2 * v->threads <= 2048;
    if (v->min_blocks == 0)
        v->min_blocks = two_fit && !wide ? 2 : 1;
}

/* The plan's default per batch, row by row: the fastest variant of each
 * batch's sweep on the H200 (docs/design.md, "Why each default", names the
 * sweep and the figures behind each row). What decides a row is placement:
 * each row takes the smallest tile whose clusters all run at once, one
 * block an SM where it fits. chunks 0: the fit's. Every row takes the gates
 * early and the trimmed cell, which keep the bits (docs/design.md says why
 * they are defaults and the fused cell is not). */
static const struct {
    int64_t max_batch;
    int push, cluster, tile_rows, gate_block, chunks, gates_ahead, row_phases, early_gates, cell, mapped_pushes;
} batch_table[] = {
    {1, SPK_PUSH_DIRECT, 8, 1, 4, 8, 2, 1, 1, SPK_CELL_TRIMMED, 2},
    {8, SPK_PUSH_DIRECT, 4, 1, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 2},
    {16, SPK_PUSH_DIRECT, 4, 2, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 2},
    {32, SPK_PUSH_DIRECT, 2, 1, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 2},
    {48, SPK_PUSH_DIRECT, 4, 2, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 1},
    {64, SPK_PUSH_DIRECT, 2, 2, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 2},
    {128, SPK_PUSH_DIRECT, 2, 4, 4, 4, 3, 1, 1, SPK_CELL_TRIMMED, 0},
    {256, SPK_PUSH_DIRECT, 2, 8, 4, 4, 3, 2, 1, SPK_CELL_TRIMMED, 0},
    {INT64_MAX, SPK_PUSH_WARP, 8, 16, 4, 8, 1, 1, 1, SPK_CELL_TRIMMED, 0},
};

/* Threads of the fewest chunks from `chunks` up whose block holds at most
 * `max_weights` weights a thread within 256 threads; 0 if none. */
static int row_threads(int hidden, int cluster, int gate_block, int chunks, int max_weights)
{
    for (; chunks <= 8; chunks *= 2)
        if (gate_block * hidden / chunks <= max_weights && valid_threads(hidden, cluster, gate_block, chunks, 256))
            return block_threads(hidden, cluster, gate_block, chunks);
    return 0;
}

spk_cluster_variant spk_cluster_variant_for_batch(int hidden, int64_t batch)
{
    size_t n = sizeof batch_table / sizeof *batch_table, i = 0;
    while (i + 1 < n && batch > batch_table[i].max_batch)
        i++;
    spk_cluster_variant v = {.hidden = hidden,
                             .push = batch_table[i].push,
                             .cluster = batch_table[i].cluster,
                             .gate_block = batch_table[i].gate_block,
                             .gates_ahead = batch_table[i].gates_ahead,
                             .row_phases = batch_table[i].row_phases,
                             .max_tile_rows = batch_table[i].tile_rows,
                             .early_gates = batch_table[i].early_gates,
                             .cell = batch_table[i].cell,
                             .mapped_pushes = batch_table[i].mapped_pushes};
    /* The row's chunks, or the fewest more, that keep a thread's weights
     * (gate_block * hidden / chunks) within the row's at hidden 128 and the
     * block within 256 threads. A gate-block row that finds none tries one
     * gate row a thread from 2 chunks (64 weights); a hidden size with
     * neither, or one the row's cluster does not divide, gets the generic
     * fit (the baseline kernel, the schedule picking the tile height). */
    bool fits = hidden > 0 && hidden % v.cluster == 0;
    if (fits && batch_table[i].chunks > 0) {
        v.threads = row_threads(hidden, v.cluster, v.gate_block, batch_table[i].chunks,
                                v.gate_block * 128 / batch_table[i].chunks);
        if (v.threads == 0 && v.gate_block == 4) {
            v.gate_block = 1;
            v.push = SPK_PUSH_DIRECT; /* gates_ahead stays: it needs only the direct pushes */
            v.threads = row_threads(hidden, v.cluster, 1, 2, 64);
        }
        fits = v.threads > 0;
    }
    if (!fits) {
        spk_cluster_variant generic = {.hidden = hidden, .push = SPK_PUSH_SCALAR};
        v = generic;
    }
    spk_cluster_variant_fit(&v);
    /* the row's tiles are launched at the row's height, the generic fit's at the schedule's pick */
    v.tile_rows = v.max_tile_rows == batch_table[i].tile_rows ? batch_table[i].tile_rows : 0;
    return v;
}

int spk_cluster_variant_resolve(int hidden, int64_t batch, const spk_kernel_choice *given, spk_cluster_variant *out)
{
    spk_cluster_variant row = spk_cluster_variant_for_batch(hidden, batch);
    memset(out, 0, sizeof *out);
    spk_kernel_resolve(&spk_cluster_family, &row, given, out);
    spk_cluster_variant_fit(out);
    return spk_cluster_variant_derive(out, 0, NULL);
}

/* Dynamic shared memory of a launch of `tile_rows` rows: the baseline's two
 * h buffers and pre-activations [tile_rows][gate_rows + 4]; the direct
 * pushes' two mbarriers a phase, two h buffers padded to whole row groups and
 * the gates' cp.async stages (a float4 a thread, slot and step ahead). */
static size_t smem_bytes(const spk_cluster_variant *v, int tile_rows)
{
    size_t units = (size_t)(v->hidden / v->cluster), gate_rows = 4 * units, rows = (size_t)tile_rows;
    size_t hidden = (size_t)v->hidden;
    if (v->push == SPK_PUSH_SCALAR)
        return 4 * (2 * rows * hidden + rows * (gate_rows + 4));
    size_t group = v->row_group > 0 ? (size_t)v->row_group : 1;
    size_t padded = (rows + group - 1) / group * group;
    size_t barriers = 4 * (size_t)(v->row_phases == 2 ? 2 : 1);
    size_t slots = ((size_t)v->max_tile_rows + group - 1) / group;
    size_t stages = v->gates_ahead > 1 ? (size_t)v->gates_ahead * slots * (size_t)v->threads * 4 : 0;
    return 4 * (barriers + 2 * padded * hidden + stages);
}

int spk_cluster_variant_derive(const spk_cluster_variant *v, int tile_rows, spk_cluster_sizes *out)
{
    if (v->hidden < 1)
        return spk_fail("kernel.hidden must be positive, got %d", v->hidden);
    if (spk_kernel_check_rules(&spk_cluster_family, v) != 0)
        return -1;
    if (v->hidden % v->cluster != 0)
        return spk_fail("kernel: hidden %d is not divisible by kernel.cluster %d", v->hidden, v->cluster);
    int gate_rows = 4 * (v->hidden / v->cluster);
    int blocks = gate_rows / v->gate_block;
    int chunks = blocks > 0 ? v->threads / blocks : 0;
    if (blocks < 1 || v->threads % blocks != 0 || (chunks != 2 && chunks != 4 && chunks != 8))
        return spk_fail("kernel.threads %d must be %d * chunks with chunks 2, 4 or 8 (hidden %d, cluster %d: "
                        "%d gate rows per block, %d a thread)", v->threads, blocks, v->hidden, v->cluster, gate_rows,
                        v->gate_block);
    if (v->threads % 32 != 0)
        return spk_fail("kernel.threads %d must be whole warps", v->threads);
    if (v->hidden % (4 * chunks) != 0)
        return spk_fail("kernel: hidden %d must be a multiple of %d (4 * chunks) for %d threads", v->hidden,
                        4 * chunks, v->threads);
    if (v->row_group > chunks)
        return spk_fail("kernel.row_group %d must be at most the %d chunks", v->row_group, chunks);
    if (v->row_phases == 2 && (v->max_tile_rows + v->row_group - 1) / v->row_group < 2)
        return spk_fail("kernel.row_phases 2 needs two row groups a tile: max_tile_rows %d, row_group %d (give "
                        "max_tile_rows >= %d or a smaller row_group)", v->max_tile_rows, v->row_group,
                        v->row_group + 1);
    if (v->min_blocks * v->threads > 2048)
        return spk_fail("kernel.min_blocks %d must be 1 .. %d for blocks of %d threads", v->min_blocks,
                        2048 / v->threads, v->threads);
    if (v->tile_rows > v->max_tile_rows)
        return spk_fail("kernel.tile_rows %d is more than the kernel carries (kernel.max_tile_rows %d)", v->tile_rows,
                        v->max_tile_rows);
    if (tile_rows == 0)
        tile_rows = v->tile_rows > 0 ? v->tile_rows : v->max_tile_rows;
    if (tile_rows < 1 || tile_rows > v->max_tile_rows)
        return spk_fail("cluster plan: a launch of %d rows a tile, the kernel carries 1 .. %d", tile_rows,
                        v->max_tile_rows);
    size_t largest = smem_bytes(v, v->max_tile_rows);
    if (largest > 227u * 1024u)
        return spk_fail("kernel: hidden %d with max_tile_rows %d needs %zu bytes of shared memory, at most 232448",
                        v->hidden, v->max_tile_rows, largest);
    if (out) {
        memset(out, 0, sizeof *out);
        out->file = v->push == SPK_PUSH_SCALAR ? "lstm_cluster_baseline.cu" : "lstm_cluster.cu";
        out->units = v->hidden / v->cluster;
        out->gate_rows = gate_rows;
        out->chunks = chunks;
        out->slots = v->push == SPK_PUSH_SCALAR ? (v->max_tile_rows * out->units + v->threads - 1) / v->threads
                                                : (v->max_tile_rows + v->row_group - 1) / v->row_group;
        int budget = 65536 / (v->threads * v->min_blocks);
        out->registers = budget < 255 ? budget : 255;
        out->smem_bytes = smem_bytes(v, tile_rows);
    }
    return 0;
}

spk_module *spk_cluster_variant_compile(const spk_cluster_variant *v, spk_kernel_build build, const char *arch)
{
    spk_cluster_sizes sizes;
    if (spk_cluster_variant_derive(v, 0, &sizes) != 0)
        return NULL;
    return spk_family_compile_source(sizes.file, &spk_cluster_family, v, build, arch);
}

/* ---- schedules ----------------------------------------------------------- */

int spk_cluster_heights(int max_tile_rows, int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1])
{
    int n = 0;
    for (int64_t h = 1; h <= 32 && h <= max_tile_rows; h *= 2)
        heights[n++] = h;
    if (n == 0 || heights[n - 1] != max_tile_rows)
        heights[n++] = max_tile_rows;
    return n;
}

int spk_cluster_schedule_pick(spk_cluster_schedule *out, int64_t batch, const int64_t *heights,
                              const int64_t *max_active, int count, int64_t forced)
{
    const int64_t per_tile = 2; /* clusters a tile takes: one a direction */
    if (batch < 1)
        return spk_fail("cluster schedule: batch must be at least 1, got %lld", (long long)batch);
    if (count < 1)
        return spk_fail("cluster schedule: no tile heights to choose from");
    int pick = -1;
    if (forced > 0) {
        for (int i = 0; i < count; i++)
            if (heights[i] == forced)
                pick = i;
        if (pick < 0)
            return spk_fail("cluster schedule: tile_rows %lld is not one of the kernel's heights (at most %lld rows)",
                            (long long)forced, (long long)heights[count - 1]);
    } else {
        for (int i = 0; i < count && pick < 0; i++) {
            int64_t tiles = (batch + heights[i] - 1) / heights[i];
            if (max_active[i] > 0 && per_tile * tiles <= max_active[i])
                pick = i;
        }
        if (pick < 0)
            pick = count - 1;
    }
    memset(out, 0, sizeof *out);
    out->batch = batch;
    out->tile_rows = heights[pick];
    out->tiles = (batch + out->tile_rows - 1) / out->tile_rows;
    out->clusters = per_tile * out->tiles;
    out->max_active = max_active[pick];
    if (out->max_active < 1)
        return spk_fail("cluster schedule: not one cluster of tile height %lld fits the device (shared memory "
                        "or registers)", (long long)out->tile_rows);
    out->waves = (out->clusters + out->max_active - 1) / out->max_active;
    return 0;
}

/* ---- the plan's description ----------------------------------------------- */

const int spk_cluster_args[SPK_CLUSTER_NARGS] = {SPK_RA_GATES, SPK_RA_R,     SPK_RA_BIAS,  SPK_RA_OUTPUT,
                                                 SPK_RA_STATUS, SPK_RA_BATCH, SPK_RA_STEPS, SPK_RA_TILE_ROWS};

/* A launch of `tiles` tiles of `tile_rows` rows: grid (cluster, tiles, 2). */
static spk_kernel_stack_launch cluster_launch(const spk_cluster_variant *v, int64_t tiles, int64_t tile_rows)
{
    return (spk_kernel_stack_launch){.direction = -1,
                                     .grid = {(unsigned)v->cluster, (unsigned)tiles, 2},
                                     .block = {(unsigned)v->threads, 1, 1},
                                     .cluster = {(unsigned)v->cluster, 1, 1},
                                     .smem = smem_bytes(v, (int)tile_rows)};
}

int spk_cluster_stack_desc(const spk_cluster_variant *v, const spk_cluster_schedule *s, spk_kernel_stack_desc *out,
                           spk_kernel_stack_launch *launch)
{
    if (spk_cluster_variant_derive(v, (int)s->tile_rows, NULL) != 0)
        return -1;
    *launch = cluster_launch(v, s->tiles, s->tile_rows);
    *out = (spk_kernel_stack_desc){.name = "cluster recurrence",
                                   .args = spk_cluster_args,
                                   .nargs = SPK_CLUSTER_NARGS,
                                   .launches = launch,
                                   .nlaunches = 1,
                                   .tile_rows = (int32_t)s->tile_rows,
                                   .packing = spk_lstm_packing_builtin(),
                                   .statuses = spk_builtin_statuses,
                                   .nstatuses = spk_builtin_nstatuses};
    return 0;
}

/* ---- the family ----------------------------------------------------------- */

/* What a plan of the family keeps (family.h). */
typedef struct cluster_state {
    spk_cluster_variant variant;
    spk_cluster_sizes sizes;       /* at the variant's tile height, then the schedule's once described */
    spk_cluster_schedule schedule;
    int sms;
} cluster_state;
SPK_FAMILY_STATE_TYPE(cluster_state)

static int resolve(spk_family_state *st, const spk_family_request *r)
{
    cluster_state *c = state_of(st);
    return spk_cluster_variant_resolve(r->hidden, r->batch, &r->kernel, &c->variant) != 0
               ? -1
               : spk_cluster_variant_derive(&c->variant, 0, &c->sizes);
}

static void variant_fields(const spk_family_state *st, spk_fields *out)
{
    const cluster_state *c = cstate_of(st);
    const spk_cluster_sizes *z = &c->sizes;
    spk_fields_text(out, "file", z->file);
    spk_fields_int(out, "units", z->units);
    spk_fields_int(out, "gate_rows", z->gate_rows);
    spk_fields_int(out, "chunks", z->chunks);
    spk_fields_int(out, "slots", z->slots);
    spk_fields_int(out, "register_budget", z->registers);
    spk_fields_int(out, "smem_bytes", (int64_t)z->smem_bytes);
}

static int check_device(spk_family_state *st, const spk_device_props *props)
{
    if (props->cc_major < 9)
        return spk_fail("lstm stack: the cluster backend needs compute capability 9.0 (this device: %d.%d)",
                        props->cc_major, props->cc_minor);
    state_of(st)->sms = props->sms;
    return 0;
}

static spk_module *compile(const spk_family_state *st, spk_kernel_build build, const char *arch)
{
    return spk_cluster_variant_compile(&cstate_of(st)->variant, build, arch);
}

static spk_launch_config launch_config(const spk_cluster_variant *v, int64_t tiles, int64_t tile_rows)
{
    spk_kernel_stack_launch l = cluster_launch(v, tiles, tile_rows);
    spk_launch_config cfg = {0};
    memcpy(cfg.grid, l.grid, sizeof cfg.grid);
    memcpy(cfg.block, l.block, sizeof cfg.block);
    memcpy(cfg.cluster, l.cluster, sizeof cfg.cluster);
    cfg.smem = l.smem;
    return cfg;
}

/* The tile height: a forced one up to the kernel's rows is taken as it is
 * (the kernel loops over its rows); otherwise the powers of two up to the
 * kernel's rows, the smallest whose clusters all run at once. */
static int plan_schedule(cluster_state *c, spk_kernel *kernel, int64_t batch)
{
    const spk_cluster_variant *v = &c->variant;
    int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = 1;
    if (v->tile_rows > 0)
        heights[0] = v->tile_rows;
    else
        n = spk_cluster_heights(v->max_tile_rows, heights);
    for (int i = 0; i < n; i++) {
        spk_launch_config cfg = launch_config(v, (batch + heights[i] - 1) / heights[i], heights[i]);
        int clusters;
        if (spk_kernel_max_active_clusters(kernel, &cfg, &clusters) != 0)
            return -1;
        active[i] = clusters;
    }
    if (spk_cluster_schedule_pick(&c->schedule, batch, heights, active, n, v->tile_rows) != 0)
        return -1;
    return spk_cluster_variant_derive(v, (int)c->schedule.tile_rows, &c->sizes);
}

static int describe(spk_family_state *st, spk_kernel *kernel, const spk_family_request *r, spk_kernel_stack_desc *desc)
{
    cluster_state *c = state_of(st);
    if (plan_schedule(c, kernel, r->batch) != 0)
        return -1;
    spk_kernel_stack_launch *launch = malloc(sizeof *launch);
    if (!launch)
        return spk_fail("lstm stack: out of memory");
    if (spk_cluster_stack_desc(&c->variant, &c->schedule, desc, launch) != 0) {
        free(launch);
        return -1;
    }
    return 0;
}

/* The timeline build takes more registers and may fit fewer clusters at
 * once: more waves, the same bits. */
static int check_build(const spk_family_state *st, spk_kernel_build build, spk_kernel *kernel, spk_fields *out)
{
    (void)build;
    const cluster_state *c = cstate_of(st);
    const spk_cluster_schedule *s = &c->schedule;
    int clusters = 0;
    spk_launch_config cfg = launch_config(&c->variant, s->tiles, s->tile_rows);
    if (spk_kernel_max_active_clusters(kernel, &cfg, &clusters) != 0)
        return -1;
    if (clusters < 1)
        return spk_fail("lstm stack: the cluster kernel's timeline build: not one cluster of tile height %lld fits "
                        "the device",
                        (long long)s->tile_rows);
    spk_fields_int(out, "max_active_clusters", clusters);
    spk_fields_int(out, "waves", (s->clusters + clusters - 1) / clusters);
    return 0;
}

#define STAGE_NAME(name, text) text,
static const char *const cluster_names[] = {SPK_CLUSTER_STAGES(STAGE_NAME)};
static const char *const phased_names[] = {SPK_CLUSTER_PHASED_STAGES(STAGE_NAME)};
static const char *const baseline_names[] = {SPK_CLUSTER_BASELINE_STAGES(STAGE_NAME)};
/* Every wait is for every block's publish (of its phase) at the previous step. */
#define CLUSTER_WAITS(name, text) (SPK_CLUSTER_##name == SPK_CLUSTER_WAIT ? SPK_CLUSTER_PUBLISH : -1),
#define PHASED_WAITS(name, text)                                                                                    \
    (SPK_CLUSTER_PHASED_##name == SPK_CLUSTER_PHASED_WAIT     ? SPK_CLUSTER_PHASED_PUBLISH                         \
     : SPK_CLUSTER_PHASED_##name == SPK_CLUSTER_PHASED_WAIT_2 ? SPK_CLUSTER_PHASED_PUBLISH_2                       \
                                                              : -1),
#define BASELINE_WAITS(name, text)                                                                                  \
    (SPK_CLUSTER_BASELINE_##name == SPK_CLUSTER_BASELINE_WAIT ? SPK_CLUSTER_BASELINE_PUBLISH : -1),
static const int cluster_waits[] = {SPK_CLUSTER_STAGES(CLUSTER_WAITS)};
static const int phased_waits[] = {SPK_CLUSTER_PHASED_STAGES(PHASED_WAITS)};
static const int baseline_waits[] = {SPK_CLUSTER_BASELINE_STAGES(BASELINE_WAITS)};
static const spk_timeline_stages cluster_stages = {SPK_CLUSTER_STAGE_COUNT, cluster_names, cluster_waits};
static const spk_timeline_stages phased_stages = {SPK_CLUSTER_PHASED_STAGE_COUNT, phased_names, phased_waits};
static const spk_timeline_stages baseline_stages = {SPK_CLUSTER_BASELINE_STAGE_COUNT, baseline_names,
                                                    baseline_waits};

const spk_timeline_stages *spk_cluster_timeline_stages(const spk_cluster_variant *v)
{
    if (v->push == SPK_PUSH_SCALAR)
        return &baseline_stages;
    return v->row_phases == 2 ? &phased_stages : &cluster_stages;
}

static const spk_timeline_stages *stages(const spk_family_state *st)
{
    return spk_cluster_timeline_stages(&cstate_of(st)->variant);
}

/* Blocks are numbered rank + cluster * tile; a group is a cluster. */
static void timeline_geometry(const spk_family_state *st, int64_t *blocks, int *warps, int *group)
{
    const cluster_state *c = cstate_of(st);
    *blocks = (int64_t)c->variant.cluster * c->schedule.tiles;
    *warps = c->variant.threads / 32;
    *group = c->variant.cluster;
}

static void plan_fields(const spk_family_state *st, spk_fields *kernel, spk_fields *schedule)
{
    const cluster_state *c = cstate_of(st);
    const spk_cluster_schedule *s = &c->schedule;
    spk_fields_int(kernel, "smem", (int64_t)c->sizes.smem_bytes);
    spk_fields_int(kernel, "max_active_clusters", s->max_active);
    spk_fields_int(kernel, "sms", c->sms);
    spk_cluster_schedule_fields(s, schedule);
}

#define MEMBER(name) SPK_FIELD_MEMBER(spk_cluster_schedule, name)
static const spk_field_member schedule_members[] = {MEMBER(batch), MEMBER(tile_rows), MEMBER(tiles), MEMBER(clusters),
                                                    {"max_active_clusters", offsetof(spk_cluster_schedule, max_active)},
                                                    MEMBER(waves)};
#undef MEMBER

void spk_cluster_schedule_fields(const spk_cluster_schedule *s, spk_fields *out)
{
    spk_fields_members(out, s, schedule_members, (int)(sizeof schedule_members / sizeof *schedule_members));
    spk_fields_int(out, "launches", 1); /* per layer: both directions, every tile */
}

static void variant_text(const spk_family_state *st, char *out, size_t size)
{
    const cluster_state *c = cstate_of(st);
    const spk_cluster_variant *v = &c->variant;
    const spk_cluster_schedule *s = &c->schedule;
    static const char *const pushes[] = {"scalar push, cluster barrier", "direct push", "warp push"};
    char options[160];
    size_t n = (size_t)snprintf(options, sizeof options, "%s", pushes[v->push]);
    if (v->gate_block > 1)
        n += (size_t)snprintf(options + n, sizeof options - n, ", gate block %d", v->gate_block);
    if (v->gates_ahead > 1)
        n += (size_t)snprintf(options + n, sizeof options - n, ", gates %d steps ahead", v->gates_ahead);
    if (v->row_phases == 2)
        n += (size_t)snprintf(options + n, sizeof options - n, ", 2 row phases");
    if (v->early_gates == 1)
        n += (size_t)snprintf(options + n, sizeof options - n, ", early gates");
    if (v->cell != SPK_CELL_REFERENCE)
        n += (size_t)snprintf(options + n, sizeof options - n, ", %s cell",
                              spk_cluster_family.options[O_CELL].words[v->cell]);
    if (v->mapped_pushes > 0)
        snprintf(options + n, sizeof options - n, v->mapped_pushes == 2 ? ", mapped pushes, addresses ahead"
                                                                         : ", mapped pushes");
    snprintf(out, size, "cluster %d, %d threads, tile %lld, %lld clusters in %lld wave%s, %s", v->cluster, v->threads,
             (long long)s->tile_rows, (long long)s->clusters, (long long)s->waves, s->waves == 1 ? "" : "s", options);
}

static void name(const spk_family_state *st, const spk_lstm_gpu_shape *shape, char *out, size_t size)
{
    const cluster_state *c = cstate_of(st);
    snprintf(out, size, "lstm stack (cluster %d, %d layers, batch %d, steps %d, tile_rows %d, %d clusters%s)",
             c->variant.cluster, (int)shape->layers, (int)shape->batch, (int)shape->steps,
             (int)c->schedule.tile_rows, (int)c->schedule.clusters, spk_lstm_math_suffix(shape->math));
}

const spk_family spk_cluster_kernels = {
    .backend = "cluster",
    .title = "cluster recurrence",
    .summary = "the cluster backend: thread-block clusters exchanging h through distributed shared memory",
    .help = "Hopper thread-block clusters (compute capability 9.0), h exchanged through distributed shared\n"
            "memory, both directions in one launch per layer. Two sources: kernels/lstm_cluster.cu\n"
            "(kernel.push \"direct\" or \"warp\": st.async pushes and mbarrier waits, no block barrier in a\n"
            "step) and kernels/lstm_cluster_baseline.cu (kernel.push \"scalar\": the plain form, a cluster\n"
            "barrier a step, the reference the others are checked against). plan.schedule: tile_rows, tiles,\n"
            "clusters, max_active_clusters, waves; a timeline's blocks are numbered rank + cluster * tile.",
    .options = &spk_cluster_family,
    .accepts = 0,
    .entry = SPK_LSTM_CLUSTER_KERNEL,
    .resolve = resolve,
    .variant_fields = variant_fields,
    .check = spk_family_check_indices,
    .check_device = check_device,
    .compile = compile,
    .describe = describe,
    .check_build = check_build,
    .stages = stages,
    .timeline_geometry = timeline_geometry,
    .plan_fields = plan_fields,
    .variant_text = variant_text,
    .name = name,
};
