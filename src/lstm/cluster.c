/* The GPU LSTM stack on the cluster recurrence: see cluster.h and the long
 * comment at the top of kernels/lstm_cluster.cu. */
#include "lstm/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/cluster.h"
#include "lstm/device_layers.h"

#define STATUS_BAD_GEOMETRY 2u
#define STATUS_NEEDS_SM90 3u
#define STATUS_EXCHANGE_TIMEOUT 4u

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

/* Directions a block of the variant runs (1 for any value the check refuses). */
static int block_directions(const spk_cluster_variant *v) { return v->directions == 2 ? 2 : 1; }

void spk_cluster_variant_fit(spk_cluster_variant *v)
{
    if (v->hidden < 1)
        return; /* the check names it */
    if (v->gate_block == 0)
        v->gate_block = 1;
    if (v->gates_ahead == 0)
        v->gates_ahead = 1;
    if (v->directions == 0)
        v->directions = 1;
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
        /* a block of both directions holds twice the threads of one */
        int chunks = best_chunks(v->hidden, v->cluster, gate_block, 512 / block_directions(v));
        if (chunks == 0)
            chunks = best_chunks(v->hidden, v->cluster, gate_block, 1024 / block_directions(v));
        if (chunks != 0)
            v->threads = block_threads(v->hidden, v->cluster, gate_block, chunks);
    }
    int blocks = v->cluster > 0 && v->hidden % v->cluster == 0 ? 4 * (v->hidden / v->cluster) / gate_block : 0;
    int chunks = blocks > 0 && v->threads % blocks == 0 ? v->threads / blocks : 0;
    if (v->direct_push)
        v->vector_push = false;
    else if (v->mbarrier_exchange)
        v->vector_push = true;
    if (v->max_tile_rows == 0)
        v->max_tile_rows = 32;
    if (v->row_group == 0) {
        v->row_group = chunks > 0 ? chunks : 1;
        /* lanes form: a tile is padded to whole groups; no padding past the
         * tile, and with row phases a group for each */
        int phases = v->row_phases == 2 ? 2 : 1;
        while (v->cell_in_lanes && v->row_group > 1 && v->row_group * phases > v->max_tile_rows)
            v->row_group /= 2;
    }
    /* ptxas spills at 64 registers (2 blocks of 512 threads) with these options */
    bool wide = (v->mbarrier_exchange && !(v->cell_in_lanes && v->max_tile_rows == 1)) ||
                (v->max_tile_rows > 1 && v->vector_push && !v->cell_in_lanes) ||
                (v->cell_in_lanes && v->max_tile_rows > 8);
    int weights = chunks > 0 ? gate_block * v->hidden / chunks : 0; /* registers of R a thread */
    bool two_fit = weights > 0 && weights <= 16 && 2 * v->threads * block_directions(v) <= 2048;
    if (v->min_blocks == 0)
        v->min_blocks = two_fit && !v->weights_shared && !wide ? 2 : 1;
}

/* The plan's default per batch: the fastest variant of each batch in
 * `build/spk run tools/cluster_sweep.lua` on the H200, 2026-11-30
 * (docs/results/2026-11-30-h200/cluster_sweep_placement.txt picked the rows;
 * cluster_sweep_c2.txt checks them at commit 2153187, bench_cell.txt has
 * batch 1 and 8). ms per forward (4 layers, H 128, input 60, 589 steps,
 * median of CUDA graph replays) against cuDNN's best algorithm in the same
 * run ("gb4": gate blocks, a thread holds its unit's four gate rows; "warp":
 * their direct pushes packed per warp into 16-byte st.async; "gaN": x·Wᵀ
 * fetched N steps ahead through cp.async stages; "c2 ... 256": cluster 2, 64
 * units a block, 256 threads):
 *   batch 1    c8 warp 128 ga2 t1 (8 chunks)     1.055  (persist_static 3.75)
 *   batch 8    c4 warp 128 ga3 t1 (4 chunks)     1.367  (persist_static_small_h 9.57)
 *   batch 16   c4 warp 128 ga3 t2 (4 chunks)     2.003  (persist_static_small_h 9.85)
 *   batch 32   c2 warp 256 ga3 t1 (4 chunks)     2.492  (persist_static_small_h 11.08)
 *   batch 48   c4 warp 128 ga3 t2 (4 chunks)     3.315  (persist_static_small_h 11.54)
 *   batch 64   c2 warp 256 ga3 t2 (4 chunks)     3.718  (persist_static_small_h 12.08)
 *   batch 128  c2 gb4 256 ga3 t4 (4 chunks)      6.129  (persist_static_small_h 13.90)
 *   batch 256  c2 gb4 256 ga3 ph2 t8 (4 chunks) 11.706  (persist_static_small_h 26.14)
 * Every row uses direct pushes (no block barrier in a step) and gate blocks.
 * Batch 256 runs its 8-row tiles in two row phases (kernel.row_phases 2:
 * rows 0-3 and 4-7 take turns), 11.706 against 11.999 ms in one phase, the
 * same run (cluster_sweep_phases.txt, which also has the smaller tiles, where
 * the halves' row groups of 1-2 rows cost more than they hide: batch 64, tile
 * 2: 4.214 against 3.643 ms).
 * What decides a row is placement: a block of 256 threads at ~200-240
 * registers is alone on its SM, and 66 clusters of 2 (30 of 4) fit at once.
 * Blocks of 128 threads may share an SM (62 clusters of 4 at once), but only
 * 30 clusters of 4 find an SM a block, and the rest then share: batch 60 in
 * 30 clusters of 4 rows takes 3.87 ms, batch 64 in 32 clusters 4.88, and
 * Nsight Compute saw the SMs active 62% of that kernel's time against 96%
 * with cluster 2. So each row takes the smallest tile whose clusters all run
 * at once, one block an SM where it fits.
 * Above 256 the 8-chunk gate blocks of cluster 8 (168 registers) keep 16-row
 * tiles in few waves.
 * chunks 0: the fit's (the most within 512 threads). */
static const struct {
    int64_t max_batch;
    int cluster, tile_rows, gate_block, chunks, gates_ahead, row_phases; /* tile_rows 0: the schedule picks */
    bool cell_in_lanes, late_store, vector_push, mbarrier_exchange, direct_push, warp_push;
} batch_table[] = {
    {1, 8, 1, 4, 8, 2, 1, true, true, false, true, true, true},
    {8, 4, 1, 4, 4, 3, 1, true, true, false, true, true, true},
    {16, 4, 2, 4, 4, 3, 1, true, true, false, true, true, true},
    {32, 2, 1, 4, 4, 3, 1, true, true, false, true, true, true},
    {48, 4, 2, 4, 4, 3, 1, true, true, false, true, true, true},
    {64, 2, 2, 4, 4, 3, 1, true, true, false, true, true, true},
    {128, 2, 4, 4, 4, 3, 1, true, true, false, true, true, false},
    {256, 2, 8, 4, 4, 3, 2, true, true, false, true, true, false},
    {INT64_MAX, 8, 16, 4, 8, 1, 1, true, true, false, true, true, true},
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

spk_cluster_variant spk_cluster_variant_for_batch(int hidden, int64_t batch, int64_t *tile_rows)
{
    size_t n = sizeof batch_table / sizeof *batch_table, i = 0;
    while (i + 1 < n && batch > batch_table[i].max_batch)
        i++;
    spk_cluster_variant v = {.hidden = hidden,
                             .cluster = batch_table[i].cluster,
                             .gate_block = batch_table[i].gate_block,
                             .gates_ahead = batch_table[i].gates_ahead,
                             .row_phases = batch_table[i].row_phases,
                             .max_tile_rows = batch_table[i].tile_rows,
                             .cell_in_lanes = batch_table[i].cell_in_lanes,
                             .late_store = batch_table[i].late_store,
                             .vector_push = batch_table[i].vector_push,
                             .mbarrier_exchange = batch_table[i].mbarrier_exchange,
                             .direct_push = batch_table[i].direct_push,
                             .warp_push = batch_table[i].warp_push};
    /* The row's chunks, or the fewest more, that keep a thread's weights
     * (gate_block * hidden / chunks) within the row's at hidden 128 (64 or
     * 128 registers; the variants measured use 120-235 in all) and the block
     * within 256 threads. A gate-block row that finds none tries one gate row
     * a thread from 2 chunks (64 weights); a hidden size with neither, or one
     * the row's cluster does not divide, gets the generic fit. */
    bool fits = hidden > 0 && hidden % v.cluster == 0 && !(v.vector_push && (hidden / v.cluster) % 4 != 0);
    if (fits && batch_table[i].chunks > 0) {
        v.threads = row_threads(hidden, v.cluster, v.gate_block, batch_table[i].chunks,
                                v.gate_block * 128 / batch_table[i].chunks);
        if (v.threads == 0 && v.gate_block == 4) {
            v.gate_block = 1;
            v.warp_push = false;
            /* (gates_ahead stays: it needs only the direct pushes) */
            v.threads = row_threads(hidden, v.cluster, 1, 2, 64);
        }
        fits = v.threads > 0;
    }
    if (!fits) {
        spk_cluster_variant generic = {.hidden = hidden};
        v = generic;
    }
    spk_cluster_variant_fit(&v);
    if (tile_rows)
        *tile_rows = batch_table[i].tile_rows > 0 && v.max_tile_rows == batch_table[i].tile_rows
                         ? batch_table[i].tile_rows
                         : 0;
    return v;
}

size_t spk_cluster_smem_bytes(const spk_cluster_variant *v, int tile_rows)
{
    size_t units = (size_t)(v->hidden / v->cluster), gate_rows = 4 * units;
    size_t weights = v->weights_shared ? gate_rows * (size_t)v->hidden : 0;
    size_t group = v->row_group > 0 ? (size_t)v->row_group : 1;
    size_t padded = v->cell_in_lanes ? ((size_t)tile_rows + group - 1) / group * group : (size_t)tile_rows;
    size_t pre = v->cell_in_lanes ? 0 : (size_t)tile_rows * (gate_rows + 4);
    size_t barriers = v->mbarrier_exchange ? 4 * (size_t)(v->row_phases == 2 ? 2 : 1) : 0; /* 2 x 8 bytes a phase */
    /* the gates' stages: a float4 per thread, slot (row group) and step ahead */
    size_t slots = ((size_t)v->max_tile_rows + group - 1) / group;
    size_t stages = v->gates_ahead > 1 ? (size_t)v->gates_ahead * slots * (size_t)v->threads * 4 : 0;
    /* each direction of a block with its own */
    return 4 * (size_t)block_directions(v) * (barriers + weights + 2 * padded * (size_t)v->hidden + pre + stages);
}

int spk_cluster_variant_check(const spk_cluster_variant *v, spk_cluster_geometry *out)
{
    if (v->hidden < 1)
        return spk_fail("kernel.hidden must be positive, got %d", v->hidden);
    if (v->cluster != 1 && v->cluster != 2 && v->cluster != 4 && v->cluster != 8 && v->cluster != 16)
        return spk_fail("kernel.cluster %d must be 1, 2, 4, 8 or 16", v->cluster);
    if (v->hidden % v->cluster != 0)
        return spk_fail("kernel: hidden %d is not divisible by kernel.cluster %d", v->hidden, v->cluster);
    if (v->gate_block != 1 && v->gate_block != 4)
        return spk_fail("kernel.gate_block %d must be 1 or 4", v->gate_block);
    if (v->gates_ahead < 1 || v->gates_ahead > 4 || (v->gates_ahead > 1 && !v->direct_push))
        return spk_fail("kernel.gates_ahead %d must be 1 .. 4 (more than 1 needs direct pushes, kernel.push "
                        "\"direct\" or \"warp\")", v->gates_ahead);
    /* (whole warps of gate blocks make the units whole quads: units * chunks % 32 == 0) */
    if (v->warp_push && (!v->direct_push || v->gate_block != 4))
        return spk_fail("kernel: warp pushes (kernel.push \"warp\") need kernel.gate_block 4");
    if (v->gate_block == 4 && (!v->direct_push || v->weights_shared))
        return spk_fail("kernel.gate_block 4 needs direct pushes (kernel.push \"direct\") and kernel.weights "
                        "\"registers\"");
    int gate_rows = 4 * (v->hidden / v->cluster);
    int blocks = gate_rows / v->gate_block;
    int chunks = v->threads / blocks;
    if (v->threads < 1 || v->threads % blocks != 0 || (chunks != 2 && chunks != 4 && chunks != 8))
        return spk_fail("kernel.threads %d must be %d * chunks with chunks 2, 4 or 8 (hidden %d, cluster %d: "
                        "%d gate rows per block, %d a thread)", v->threads, blocks, v->hidden, v->cluster, gate_rows,
                        v->gate_block);
    if (v->threads % 32 != 0 || v->threads > 1024)
        return spk_fail("kernel.threads %d must be whole warps and at most 1024", v->threads);
    if (v->hidden % (4 * chunks) != 0)
        return spk_fail("kernel: hidden %d must be a multiple of %d (4 * chunks) for %d threads", v->hidden,
                        4 * chunks, v->threads);
    if (v->max_tile_rows < 1 || v->max_tile_rows > 32)
        return spk_fail("kernel.tile_rows must be 1 .. 32, got %d", v->max_tile_rows);
    if ((v->row_group != 1 && v->row_group != 2 && v->row_group != 4 && v->row_group != 8) || v->row_group > chunks)
        return spk_fail("kernel.row_group %d must be 1, 2, 4 or 8 and at most the %d chunks", v->row_group, chunks);
    if (v->directions != 1 && v->directions != 2)
        return spk_fail("kernel.directions %d must be 1 or 2 (directions a block runs)", v->directions);
    if (v->directions == 2 && (!v->direct_push || v->weights_shared || 2 * v->threads > 1024))
        return spk_fail("kernel.directions 2 needs direct pushes (kernel.push \"direct\" or \"warp\"), kernel.weights "
                        "\"registers\" and 2 * threads <= 1024 (threads %d)", v->threads);
    if (v->row_phases != 1 && v->row_phases != 2)
        return spk_fail("kernel.row_phases %d must be 1 or 2 (halves of a tile that take turns)", v->row_phases);
    if (v->row_phases == 2 && !v->direct_push)
        return spk_fail("kernel.row_phases 2 needs direct pushes (kernel.push \"direct\" or \"warp\")");
    if (v->row_phases == 2 && (v->max_tile_rows + v->row_group - 1) / v->row_group < 2)
        return spk_fail("kernel.row_phases 2 needs two row groups a tile: tile_rows %d, row_group %d (give "
                        "tile_rows >= %d or a smaller row_group)", v->max_tile_rows, v->row_group,
                        v->row_group + 1);
    int block = v->threads * v->directions; /* threads of a block */
    if (v->min_blocks < 1 || v->min_blocks * block > 2048)
        return spk_fail("kernel.min_blocks %d must be 1 .. %d for blocks of %d threads", v->min_blocks, 2048 / block,
                        block);
    if (v->direct_push && (!v->mbarrier_exchange || !v->cell_in_lanes || v->vector_push))
        return spk_fail("kernel: direct pushes (kernel.push \"direct\") need kernel.exchange \"mbarrier\" and "
                        "kernel.cell \"lanes\"");
    if (v->mbarrier_exchange && !v->vector_push && !v->direct_push)
        return spk_fail("kernel: the mbarrier exchange needs vector or direct pushes (kernel.push \"vector\" or "
                        "\"direct\")");
    if (v->vector_push && (v->hidden / v->cluster) % 4 != 0)
        return spk_fail("kernel: vector pushes need a multiple of 4 units per block (hidden %d / cluster %d = %d)",
                        v->hidden, v->cluster, v->hidden / v->cluster);
    size_t smem = spk_cluster_smem_bytes(v, v->max_tile_rows);
    if (smem > 227u * 1024u)
        return spk_fail("kernel: hidden %d with tile_rows %d needs %zu bytes of shared memory, at most 232448",
                        v->hidden, v->max_tile_rows, smem);
    if (out) {
        out->units = v->hidden / v->cluster;
        out->gate_rows = gate_rows;
        out->chunks = chunks;
        out->cells = (v->max_tile_rows * out->units + v->threads - 1) / v->threads;
        out->weight_bytes = v->weights_shared ? 4u * (size_t)gate_rows * (size_t)v->hidden : 0;
    }
    return 0;
}

void spk_cluster_variant_defines_fill(const spk_cluster_variant *v, spk_cluster_variant_defines *out)
{
    static const char *names[SPK_CLUSTER_VARIANT_DEFINES] = {
        "HIDDEN",         "CLUSTER",       "THREADS",    "TILE_ROWS",   "ROW_GROUP",         "MIN_BLOCKS",
        "WEIGHTS_SHARED", "CELL_IN_LANES", "LATE_STORE", "VECTOR_PUSH", "MBARRIER_EXCHANGE", "DIRECT_PUSH",
        "GATE_BLOCK",     "WARP_PUSH",     "GATES_AHEAD", "DIRECTIONS", "ROW_PHASES"};
    int values[SPK_CLUSTER_VARIANT_DEFINES] = {v->hidden,
                                               v->cluster,
                                               v->threads,
                                               v->max_tile_rows,
                                               v->row_group,
                                               v->min_blocks,
                                               v->weights_shared ? 1 : 0,
                                               v->cell_in_lanes ? 1 : 0,
                                               v->late_store ? 1 : 0,
                                               v->vector_push ? 1 : 0,
                                               v->mbarrier_exchange ? 1 : 0,
                                               v->direct_push ? 1 : 0,
                                               v->gate_block,
                                               v->warp_push ? 1 : 0,
                                               v->gates_ahead,
                                               v->directions,
                                               v->row_phases};
    for (int i = 0; i < SPK_CLUSTER_VARIANT_DEFINES; i++) {
        snprintf(out->text[i], sizeof out->text[i], "%d", values[i]);
        out->defines[i].name = names[i];
        out->defines[i].value = out->text[i];
    }
}

spk_module *spk_cluster_variant_compile(const spk_cluster_variant *v, const char *arch)
{
    if (spk_cluster_variant_check(v, NULL) != 0)
        return NULL;
    const char *kernels = spk_kernel_dir();
    if (!kernels)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_cluster.cu", kernels);
    spk_cluster_variant_defines d;
    spk_cluster_variant_defines_fill(v, &d);
    spk_compile_options opts = {0};
    opts.file = path;
    opts.defines = d.defines;
    opts.ndefines = SPK_CLUSTER_VARIANT_DEFINES;
    opts.arch = arch;
    return spk_compile(&opts);
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
                              const int64_t *max_active, int count, int64_t forced, int directions)
{
    if (directions != 1 && directions != 2)
        return spk_fail("cluster schedule: directions must be 1 or 2, got %d", directions);
    const int64_t per_tile = 2 / directions; /* clusters a tile takes */
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

/* ---- plans --------------------------------------------------------------- */

struct spk_cluster_plan {
    spk_cluster_plan_info info;
    spk_module *module;
    spk_kernel *kernel;
    spk_lstm_gpu_buffers buffers; /* layers, gates, output */
    spk_tensor *status;           /* i32 [1]: the kernel's unsigned status word */
    spk_lstm_gpu_runner runner;   /* forward and time on this plan */
    spk_stream *stream;
};

void spk_cluster_plan_free(spk_cluster_plan *p)
{
    if (!p)
        return;
    spk_lstm_gpu_buffers_free(&p->buffers);
    spk_tensor_free(p->status);
    spk_kernel_free(p->kernel);
    spk_module_release(p->module);
    spk_stream_release(p->stream);
    free(p);
}

const spk_cluster_plan_info *spk_cluster_plan_get_info(const spk_cluster_plan *p) { return &p->info; }

static spk_launch_config launch_config(const spk_cluster_plan *p, int64_t tiles, int64_t tile_rows)
{
    spk_launch_config cfg = {0};
    cfg.grid[0] = (unsigned)p->info.variant.cluster;
    cfg.grid[1] = (unsigned)tiles;
    cfg.grid[2] = (unsigned)(2 / p->info.variant.directions);
    cfg.block[0] = (unsigned)(p->info.variant.threads * p->info.variant.directions);
    cfg.block[1] = cfg.block[2] = 1;
    cfg.cluster[0] = (unsigned)p->info.variant.cluster;
    cfg.cluster[1] = cfg.cluster[2] = 1;
    cfg.smem = spk_cluster_smem_bytes(&p->info.variant, (int)tile_rows);
    cfg.stream = p->stream;
    return cfg;
}

static int enqueue_runner(void *plan, const spk_tensor *x) { return spk_cluster_plan_enqueue(plan, x); }
static int finish_runner(void *plan) { return spk_cluster_plan_finish(plan); }

spk_cluster_plan *spk_cluster_plan_new(const spk_cluster_plan_options *o)
{
    spk_lstm_gpu_shape shape;
    if (spk_lstm_gpu_shape_check(o->layers, o->count, o->batch, o->steps, o->variant.hidden, o->math, &shape) != 0)
        return NULL;
    spk_cluster_geometry geometry;
    if (spk_cluster_variant_check(&o->variant, &geometry) != 0)
        return NULL;
    if (o->tile_rows < 0 || o->tile_rows > o->variant.max_tile_rows)
        return spk_fail_null("lstm stack: tile_rows %lld must be 1 .. %d", (long long)o->tile_rows,
                             o->variant.max_tile_rows);
    if (o->batch * o->steps > INT32_MAX / 4)
        return spk_fail_null("lstm stack: batch %lld x steps %lld is too large for 32-bit kernel indices",
                             (long long)o->batch, (long long)o->steps);
    if (spk_lstm_check_math(o->math) != 0 || spk_lstm_check_finite(o->layers, o->count) != 0)
        return NULL;
    int device;
    spk_device_props props;
    if (spk_cuda_require() != 0 || spk_device_current(&device) != 0 || spk_device_props_get(device, &props) != 0) {
        spk_error_prefix("lstm stack (backend cluster)");
        return NULL;
    }
    if (props.cc_major < 9)
        return spk_fail_null("lstm stack: the cluster backend needs compute capability 9.0 (this device: %d.%d)",
                             props.cc_major, props.cc_minor);

    spk_cluster_plan *p = calloc(1, sizeof *p);
    if (!p)
        return spk_fail_null("lstm stack: out of memory");
    spk_cluster_plan_info *info = &p->info;
    info->variant = o->variant;
    info->geometry = geometry;
    info->shape = shape;
    info->sms = props.sms;

    if (!(p->stream = spk_stream_new()))
        goto fail;
    if (!(p->module = spk_cluster_variant_compile(&o->variant, NULL)))
        goto fail;
    snprintf(info->arch, sizeof info->arch, "%s", spk_module_arch(p->module));
    if (!(p->kernel = spk_module_kernel(p->module, SPK_LSTM_CLUSTER_KERNEL)) ||
        spk_kernel_attributes(p->kernel, &info->attrs) != 0)
        goto fail;
    if (o->variant.cluster > 8 && spk_kernel_allow_nonportable_cluster(p->kernel, true) != 0)
        goto fail;

    {
        int64_t heights[SPK_CLUSTER_MAX_HEIGHTS + 1], active[SPK_CLUSTER_MAX_HEIGHTS + 1];
        /* a forced height up to the kernel's rows is taken as it is (the
         * kernel loops over its rows); otherwise the candidates are the
         * powers of two up to the kernel's rows */
        int n;
        if (o->tile_rows > 0 && o->tile_rows <= o->variant.max_tile_rows) {
            heights[0] = o->tile_rows;
            n = 1;
        } else {
            n = spk_cluster_heights(o->variant.max_tile_rows, heights);
        }
        for (int i = 0; i < n; i++) {
            spk_launch_config cfg = launch_config(p, (o->batch + heights[i] - 1) / heights[i], heights[i]);
            int clusters;
            if (spk_kernel_max_active_clusters(p->kernel, &cfg, &clusters) != 0)
                goto fail;
            active[i] = clusters;
        }
        if (spk_cluster_schedule_pick(&info->schedule, o->batch, heights, active, n, o->tile_rows,
                                      o->variant.directions) != 0)
            goto fail;
        info->smem_bytes = spk_cluster_smem_bytes(&o->variant, (int)info->schedule.tile_rows);
    }

    if (spk_lstm_gpu_buffers_new(&p->buffers, o->layers, &info->shape, SPK_I32, 1, &p->status, p->stream) != 0)
        goto fail;
    p->runner = (spk_lstm_gpu_runner){.plan = p, .shape = &info->shape, .stream = p->stream,
                                      .output = p->buffers.output, .enqueue = enqueue_runner,
                                      .finish = finish_runner};
    return p;
fail:
    spk_error_prefix("lstm stack");
    spk_cluster_plan_free(p);
    return NULL;
}

/* One launch runs both directions of every tile of a layer. */
static int launch_layer(void *plan, int layer)
{
    spk_cluster_plan *p = plan;
    const spk_cluster_plan_info *info = &p->info;
    const spk_cluster_schedule *s = &info->schedule;
    spk_lstm_device_layer *pl = &p->buffers.layers[layer];
    spk_launch_config cfg = launch_config(p, s->tiles, s->tile_rows);
    spk_storage *uses[5] = {p->buffers.gates->storage, pl->r->storage, pl->bias->storage,
                            p->buffers.output->storage, p->status->storage};
    cfg.uses = uses;
    cfg.nuses = 5;
    spk_arg args[8] = {
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(p->buffers.gates)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(pl->r)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(pl->bias)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(p->buffers.output)}},
        {SPK_ARG_PTR, {.ptr = spk_tensor_data(p->status)}},
        {SPK_ARG_I32, {.i32 = (int32_t)info->shape.batch}},
        {SPK_ARG_I32, {.i32 = (int32_t)info->shape.steps}},
        {SPK_ARG_I32, {.i32 = (int32_t)s->tile_rows}},
    };
    if (spk_kernel_launch(p->kernel, &cfg, args, 8) != 0) {
        spk_error_prefix("layer %d cluster recurrence", layer + 1);
        return -1;
    }
    return 0;
}

int spk_cluster_plan_enqueue(spk_cluster_plan *p, const spk_tensor *x)
{
    if (spk_lstm_gpu_check_enqueue(&p->info.shape, x) != 0)
        return -1;
    if (spk_tensor_zero_device(p->status, p->stream) != 0)
        return -1;
    return spk_lstm_gpu_enqueue_layers(&p->buffers, &p->info.shape, x, p->stream, launch_layer, p);
}

int spk_cluster_plan_finish(spk_cluster_plan *p)
{
    if (spk_stream_synchronize(p->stream) != 0)
        return -1;
    uint32_t status = 0;
    if (spk_memcpy_d2h(&status, spk_tensor_data(p->status), sizeof status, p->stream) != 0)
        return -1;
    static const spk_lstm_gpu_status known[] = {
        {STATUS_BAD_GEOMETRY, "the cluster kernel refused its launch geometry (cluster shape, block size, "
                              "tile rows or shared memory); the output is not valid"},
        {STATUS_EXCHANGE_TIMEOUT, "the cluster kernel's mbarrier exchange timed out (a wait of over a second); "
                                  "the output is not valid"},
        {STATUS_NEEDS_SM90, "the cluster kernel was built for an architecture below sm_90 and did not run"},
    };
    return spk_lstm_gpu_check_status(status, known, (int)(sizeof known / sizeof *known), "cluster");
}

spk_tensor *spk_cluster_plan_forward(spk_cluster_plan *p, const spk_tensor *x)
{
    return spk_lstm_gpu_forward(&p->runner, x);
}

int spk_cluster_plan_time(spk_cluster_plan *p, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    return spk_lstm_gpu_time(&p->runner, x, rounds, warmup, ms);
}
