/* NVRTC compiles every variant of kernels/lstm_cluster.cu for sm_90 (no GPU
 * needed) and reports ptxas' registers and spills; the kernel's static_asserts
 * reject what the C check rejects; the fitted defaults, shared memory sizes
 * and the tile-height choice of the cluster plan. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "cuda/runtime.h"
#include "lstm/cluster.h"

/* A variant spk_cluster_variant_check refuses, with `message` in the error
 * (a macro: failures name the caller's line). */
#define CHECK_REFUSED(v, message)                                                                                     \
    do {                                                                                                               \
        CHECK(spk_cluster_variant_check(&(v), NULL) != 0);                                                            \
        CHECK_STR_CONTAINS(spk_last_error(), message);                                                                 \
    } while (0)

static void use_fresh_cache(void)
{
    static char dir[] = "/tmp/spk-cluster-compile-XXXXXX";
    if (mkdtemp(dir))
        setenv("SPK_CACHE_DIR", dir, 1);
    spk_cache_reset();
}

static spk_cluster_variant variant(int hidden, int cluster, int threads, int rows, bool shared)
{
    spk_cluster_variant v = {.hidden = hidden, .cluster = cluster, .threads = threads, .max_tile_rows = rows,
                             .weights_shared = shared};
    spk_cluster_variant_fit(&v);
    return v;
}

/* ptxas' "Used N registers" and "N bytes spill stores" from an NVRTC log. */
static void ptxas_figures(const char *log, int *registers, int *spill_stores)
{
    *registers = -1;
    *spill_stores = -1;
    const char *r = strstr(log, "Used ");
    if (r)
        *registers = atoi(r + 5);
    const char *s = strstr(log, "bytes spill stores");
    if (s) {
        while (s > log && s[-1] == ' ')
            s--;
        while (s > log && s[-1] >= '0' && s[-1] <= '9')
            s--;
        *spill_stores = atoi(s);
    }
}

/* The registers and spill bytes ptxas reported; where its log has no
 * figures (the H200 machine's NVRTC leaves some logs empty), the loaded
 * kernel's registers and local memory per thread, on a device of the same
 * arch (-1 where neither is known). */
static void module_figures(spk_module *m, int *registers, int *spills)
{
    ptxas_figures(spk_module_log(m), registers, spills);
    if ((*registers >= 0 && *spills >= 0) || !spk_cuda_available())
        return;
    spk_kernel *k = spk_module_kernel(m, "spk_lstm_cluster");
    spk_kernel_attrs a;
    if (k && spk_kernel_attributes(k, &a) == 0) {
        if (*registers < 0)
            *registers = a.registers;
        if (*spills < 0)
            *spills = (int)a.local_bytes;
    } else {
        fprintf(stderr, "  no ptxas figures and no kernel attributes: %s\n", spk_last_error());
    }
    spk_kernel_free(k);
}

static spk_module *compile_verbose(const spk_cluster_variant *v)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_cluster.cu", spk_kernel_dir());
    spk_cluster_variant_defines d;
    spk_cluster_variant_defines_fill(v, &d);
    const char *options[] = {"--ptxas-options=-v"};
    spk_compile_options o = {0};
    o.file = path;
    o.defines = d.defines;
    o.ndefines = SPK_CLUSTER_VARIANT_DEFINES;
    o.options = options;
    o.noptions = 1;
    o.arch = "sm_90";
    o.no_cache = true;
    return spk_compile(&o);
}

/* The variant compiles for sm_90 with no spills and at most the registers
 * its __launch_bounds__ budget gives (min_blocks blocks a SM); prints
 * ptxas' figures under `label`. */
static void check_compiles_within_budget(const spk_cluster_variant *v, const char *label)
{
    spk_module *m = compile_verbose(v);
    if (!m) {
        fprintf(stderr, "  %s: %s\n", label, spk_last_error());
        CHECK(m != NULL);
        return;
    }
    int registers, spills;
    module_figures(m, &registers, &spills);
    bool within = registers > 0 && registers <= 65536 / (v->threads * v->min_blocks) && spills == 0;
    if (check_verbose() || !within)
        fprintf(stderr, "  %s: cluster %2d threads %4d gate_block %d tile_rows %2d row_group %d min_blocks %d "
                        "cell %-6s store %-4s push %-6s exchange %-8s gates_ahead %d: %3d registers, %3d bytes "
                        "spill stores, smem %zu\n",
                label, v->cluster, v->threads, v->gate_block, v->max_tile_rows, v->row_group, v->min_blocks,
                v->cell_in_lanes ? "lanes" : "shared", v->late_store ? "late" : "step",
                v->warp_push ? "warp" : v->direct_push ? "direct" : v->vector_push ? "vector" : "scalar",
                v->mbarrier_exchange ? "mbarrier" : "barrier", v->gates_ahead, registers, spills,
                spk_cluster_smem_bytes(v, v->max_tile_rows));
    CHECK(within);
    spk_module_release(m);
}

TEST(every_variant_compiles_for_sm90_without_spills)
{
    struct {
        int hidden, cluster, threads, rows;
        bool shared;
        bool may_spill; /* 128 floats of R per thread: no room in 64 registers is expected */
    } cases[] = {
        {128, 8, 0, 32, false, false},  {128, 8, 0, 16, false, false},  {128, 8, 0, 8, false, false},
        {128, 8, 0, 1, false, false},   {128, 16, 0, 32, false, false}, {128, 16, 0, 1, false, false},
        {128, 8, 256, 32, false, false}, {128, 8, 0, 32, true, false},   {128, 16, 0, 16, true, false},
        {64, 8, 0, 32, false, false},   {64, 16, 0, 8, false, false},   {256, 8, 0, 32, false, false},
        {256, 16, 0, 32, false, false}, {256, 8, 0, 16, true, true},    {32, 8, 0, 32, false, false},
        {16, 8, 0, 32, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spk_cluster_variant v = variant(cases[i].hidden, cases[i].cluster, cases[i].threads, cases[i].rows,
                                        cases[i].shared);
        CHECK(spk_cluster_variant_check(&v, NULL) == 0);
        spk_module *m = compile_verbose(&v);
        if (!m) {
            fprintf(stderr, "  hidden %d cluster %d threads %d rows %d: %s\n", v.hidden, v.cluster, v.threads,
                    v.max_tile_rows, spk_last_error());
            CHECK(m != NULL);
            continue;
        }
        size_t bytes = 0;
        const char *code = spk_module_code(m, &bytes);
        CHECK(bytes > 4 && memcmp(code, "\x7f" "ELF", 4) == 0);
        CHECK(memmem(code, bytes, "spk_lstm_cluster", 16) != NULL);
        int registers, spills;
        module_figures(m, &registers, &spills);
        bool fits = registers > 0 && spills >= 0 && (cases[i].may_spill || spills == 0);
        if (check_verbose() || !fits)
            fprintf(stderr, "  hidden %3d cluster %2d threads %4d tile_rows %2d weights %-9s row_group %d "
                            "min_blocks %d: %3d registers, %3d bytes spill stores, smem %zu bytes at %d rows\n",
                    v.hidden, v.cluster, v.threads, v.max_tile_rows, v.weights_shared ? "shared" : "registers",
                    v.row_group, v.min_blocks, registers, spills, spk_cluster_smem_bytes(&v, v.max_tile_rows),
                    v.max_tile_rows);
        CHECK(fits);
        spk_module_release(m);
    }
}

/* The plan's default for (hidden, batch) is valid and compiles for sm_90
 * without spills. */
static void check_default_compiles(int hidden, int64_t batch)
{
    int64_t tile_rows = -1;
    spk_cluster_variant v = spk_cluster_variant_for_batch(hidden, batch, &tile_rows);
    CHECK(spk_cluster_variant_check(&v, NULL) == 0);
    CHECK(tile_rows >= 0 && tile_rows <= v.max_tile_rows);
    spk_module *m = compile_verbose(&v);
    CHECK(m != NULL);
    if (!m)
        return;
    int registers, spills;
    module_figures(m, &registers, &spills);
    if (spills != 0)
        fprintf(stderr, "  hidden %d batch %lld default: cluster %d threads %d tile_rows %d min_blocks %d: %d "
                        "registers, %d bytes spill stores; ptxas said:\n%s\n",
                hidden, (long long)batch, v.cluster, v.threads, v.max_tile_rows, v.min_blocks, registers, spills,
                spk_module_log(m));
    CHECK(spills == 0);
    spk_module_release(m);
}

/* The step-latency options (and the per-batch defaults) compile for sm_90
 * without spills, at the register budget the fit gives them. */
TEST(latency_options_compile_without_spills)
{
    struct {
        int cluster, rows;
        bool lanes, late, vector, mbarrier, direct;
    } cases[] = {
        {8, 1, true, false, false, false, false}, {8, 1, true, true, false, false, false},
        {8, 1, false, true, false, false, false}, {8, 1, true, true, true, false, false},
        {8, 1, true, true, true, true, false}, {8, 1, false, false, true, true, false},
        {8, 8, true, true, false, false, false}, {8, 8, true, true, true, false, false},
        {8, 8, true, true, true, true, false}, {8, 16, true, true, true, true, false},
        {8, 32, true, true, true, true, false}, {8, 32, false, true, true, false, false},
        {8, 16, false, true, true, false, false}, {8, 32, false, true, false, false, false},
        {16, 1, true, true, true, true, false}, {16, 8, true, true, true, false, false},
        {16, 16, false, false, true, true, false}, {4, 1, true, false, true, true, false},
        {16, 1, true, true, false, true, true}, {16, 2, true, true, false, true, true},
        {8, 8, true, true, false, true, true}, {8, 1, true, false, false, true, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spk_cluster_variant v = {.hidden = 128, .cluster = cases[i].cluster, .max_tile_rows = cases[i].rows,
                                 .cell_in_lanes = cases[i].lanes, .late_store = cases[i].late,
                                 .vector_push = cases[i].vector, .mbarrier_exchange = cases[i].mbarrier,
                                 .direct_push = cases[i].direct};
        spk_cluster_variant_fit(&v);
        CHECK(spk_cluster_variant_check(&v, NULL) == 0);
        check_compiles_within_budget(&v, "latency options");
    }
    for (int64_t batch = 1; batch <= 1024; batch *= 2)
        check_default_compiles(128, batch);
    /* the rows at other hidden sizes too */
    static const int hiddens[] = {16, 64, 256};
    static const int64_t batches[] = {1, 8, 32, 64};
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
            check_default_compiles(hiddens[h], batches[b]);
}

/* The PTX (compute_90) of a variant; NULL, checked, when it does not compile. */
static spk_module *compile_ptx(const spk_cluster_variant *v, const char **code, size_t *bytes)
{
    spk_module *m = spk_cluster_variant_compile(v, "compute_90");
    CHECK(m != NULL);
    if (m)
        *code = spk_module_code(m, bytes);
    return m;
}

static bool ptx_has(const char *code, size_t bytes, const char *needle)
{
    if (memmem(code, bytes, needle, strlen(needle)))
        return true;
    fprintf(stderr, "  missing in PTX: %s\n", needle);
    return false;
}

/* kernels/lstm_cluster.cu with these defines (the rest at their defaults)
 * does not compile, and the compiler's log carries `message` (a
 * static_assert's). */
static void check_kernel_refuses(const spk_define *defines, int count, const char *message)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_cluster.cu", spk_kernel_dir());
    spk_compile_options o = {0};
    o.file = path;
    o.defines = defines;
    o.ndefines = count;
    o.arch = "sm_90";
    spk_module *m = spk_compile(&o);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), message);
    spk_module_release(m);
}

/* The PTX of the mbarrier exchange: async 16-byte pushes counted on the
 * peer's mbarrier, cluster-scope acquire waits, one cluster barrier before
 * the loop and one after it (none per step). */
TEST(ptx_of_the_mbarrier_exchange)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 8, .max_tile_rows = 8, .cell_in_lanes = true,
                             .mbarrier_exchange = true};
    spk_cluster_variant_fit(&v);
    CHECK(v.vector_push);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (!m)
        return;
    const char *needles[] = {"st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32",
                             "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
                             "mbarrier.arrive.expect_tx", "fence.mbarrier_init.release.cluster", "%globaltimer"};
    for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
        CHECK(ptx_has(code, bytes, needles[i]));
    int arrives = 0;
    for (const char *p = code; (p = memmem(p, bytes - (size_t)(p - code), "barrier.cluster.arrive", 22)); p++)
        arrives++;
    CHECK(arrives == 2);
    CHECK(memmem(code, bytes, "st.shared::cluster.f32", 22) == NULL);
    spk_module_release(m);
}

/* The PTX of the direct pushes: 4-byte st.async counted on the receiver's
 * mbarrier, no 16-byte pushes, and no block barrier (bar.sync) at all: the
 * two cluster barriers around the loop are the only ones. */
TEST(ptx_of_the_direct_pushes)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 16, .max_tile_rows = 1, .cell_in_lanes = true,
                             .mbarrier_exchange = true, .direct_push = true};
    spk_cluster_variant_fit(&v);
    CHECK(!v.vector_push && spk_cluster_variant_check(&v, NULL) == 0);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (!m)
        return;
    CHECK(ptx_has(code, bytes, "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32"));
    CHECK(memmem(code, bytes, "complete_tx::bytes.v4.f32", 25) == NULL);
    CHECK(memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL);
    spk_module_release(m);
    /* and the check refuses direct pushes without their two companions */
    spk_cluster_variant lone = {.hidden = 128, .cluster = 16, .max_tile_rows = 1, .direct_push = true};
    spk_cluster_variant_fit(&lone);
    CHECK_REFUSED(lone, "kernel.push \"direct\"");
}

/* The PTX of the default variant uses the cluster instructions the design
 * rests on: DSMEM stores through mapa, the split release/acquire barrier. */
TEST(ptx_uses_dsmem_stores_and_the_split_cluster_barrier)
{
    spk_cluster_variant v = variant(128, 8, 0, 32, false);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (!m)
        return;
    const char *needles[] = {".entry spk_lstm_cluster", "mapa.shared::cluster.u32", "st.shared::cluster.f32",
                             "barrier.cluster.arrive.release", "barrier.cluster.wait.acquire",
                             "ex2.approx.ftz.f32", "%cluster_ctarank"};
    for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
        CHECK(ptx_has(code, bytes, needles[i]));
    spk_module_release(m);
}

TEST(static_asserts_reject_what_the_check_rejects)
{
    struct {
        const char *hidden, *cluster, *threads, *rows, *message;
    } bad[] = {
        {"128", "3", "512", "32", "CLUSTER must be"},
        {"128", "8", "384", "32", "THREADS must be GATE_ROWS / GATE_BLOCK * CHUNKS"},
        {"128", "8", "512", "33", "TILE_ROWS must be"},
        {"100", "8", "512", "8", "HIDDEN must be a multiple of CLUSTER"},
        {"16", "16", "32", "8", "HIDDEN must split into float4 groups"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spk_define d[4] = {{"HIDDEN", bad[i].hidden}, {"CLUSTER", bad[i].cluster}, {"THREADS", bad[i].threads},
                           {"TILE_ROWS", bad[i].rows}};
        check_kernel_refuses(d, 4, bad[i].message);
        spk_cluster_variant v = {.hidden = atoi(bad[i].hidden), .cluster = atoi(bad[i].cluster),
                                 .threads = atoi(bad[i].threads), .gate_block = 1,
                                 .max_tile_rows = atoi(bad[i].rows), .row_group = 1, .min_blocks = 1};
        CHECK(spk_cluster_variant_check(&v, NULL) != 0);
    }
}

/* Gate blocks (GATE_BLOCK 4): the check and the kernel refuse them without
 * direct pushes, or with weights in shared memory; the variants of the sweep
 * compile without spills within their register budget; the PTX has no block
 * barrier and no gather (only butterfly shuffles: a row's four sums end in
 * the lanes that finish its cell); the batch table's rows use them. */
TEST(gate_blocks)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 8, .gate_block = 4, .max_tile_rows = 1};
    spk_cluster_variant_fit(&v);
    CHECK(v.threads == 128 && spk_cluster_variant_check(&v, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gate_block 4 needs direct pushes");
    v.gate_block = 2;
    CHECK_REFUSED(v, "kernel.gate_block 2 must be 1 or 4");
    spk_cluster_variant shared = {.hidden = 128, .cluster = 8, .gate_block = 4, .max_tile_rows = 1,
                                  .weights_shared = true, .cell_in_lanes = true, .mbarrier_exchange = true,
                                  .direct_push = true};
    spk_cluster_variant_fit(&shared);
    CHECK_REFUSED(shared, "kernel.weights \"registers\"");
    /* the kernel's own asserts */
    spk_define plain[] = {{"THREADS", "128"}, {"GATE_BLOCK", "4"}};
    check_kernel_refuses(plain, 2, "GATE_BLOCK 4 needs DIRECT_PUSH");
    plain[1].value = "2";
    check_kernel_refuses(plain, 2, "GATE_BLOCK must be 1 or 4");

    struct {
        int cluster, threads, rows, chunks;
    } cases[] = {{8, 128, 1, 8}, {8, 128, 2, 8}, {8, 128, 4, 8}, {8, 128, 8, 8}, {8, 128, 16, 8},
                 {4, 128, 1, 4}, {4, 128, 4, 4}, {16, 64, 1, 8},  {4, 256, 8, 8},  {8, 64, 4, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spk_cluster_variant g = {.hidden = 128, .cluster = cases[i].cluster, .threads = cases[i].threads,
                                 .gate_block = 4, .max_tile_rows = cases[i].rows, .cell_in_lanes = true,
                                 .late_store = true, .mbarrier_exchange = true, .direct_push = true};
        spk_cluster_variant_fit(&g);
        spk_cluster_geometry geometry;
        CHECK(spk_cluster_variant_check(&g, &geometry) == 0);
        CHECK(geometry.chunks == cases[i].chunks && geometry.gate_rows == 4 * 128 / cases[i].cluster);
        check_compiles_within_budget(&g, "gate blocks");
    }

    spk_cluster_variant one = {.hidden = 128, .cluster = 8, .gate_block = 4, .max_tile_rows = 1,
                               .cell_in_lanes = true, .mbarrier_exchange = true, .direct_push = true};
    spk_cluster_variant_fit(&one);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&one, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32"));
        CHECK(ptx_has(code, bytes, "shfl.sync.bfly.b32"));
        CHECK(memmem(code, bytes, "shfl.sync.idx", 13) == NULL);
        CHECK(memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL);
        spk_module_release(m);
    }

    /* the batch table: gate blocks at every batch; batch 1 cluster 8 (8 chunks), warp pushes, the gates 2
     * steps ahead; 2-8 cluster 4 (4 chunks), warp pushes, 3 ahead; 9-16 the same at tile 2; 17-32 cluster 2
     * (256 threads, 4 chunks), tile 1; 33-48 cluster 4, tile 2; 49-64 cluster 2, tile 2; 65-128 and 129-256
     * cluster 2, tiles 4 and 8, 4-byte pushes; above 256 cluster 8, tile 16, warp pushes, 1 ahead */
    int64_t tile_rows = -1;
    spk_cluster_geometry geometry;
    spk_cluster_variant b1 = spk_cluster_variant_for_batch(128, 1, &tile_rows);
    CHECK(spk_cluster_variant_check(&b1, &geometry) == 0);
    CHECK(b1.gate_block == 4 && b1.cluster == 8 && b1.threads == 128 && geometry.chunks == 8 && tile_rows == 1);
    CHECK(b1.warp_push && b1.gates_ahead == 2);
    spk_cluster_variant b8 = spk_cluster_variant_for_batch(128, 8, &tile_rows);
    CHECK(spk_cluster_variant_check(&b8, &geometry) == 0);
    CHECK(b8.gate_block == 4 && b8.cluster == 4 && b8.threads == 128 && geometry.chunks == 4 && tile_rows == 1);
    CHECK(b8.warp_push && b8.gates_ahead == 3);
    spk_cluster_variant b16 = spk_cluster_variant_for_batch(128, 16, &tile_rows);
    CHECK(b16.cluster == 4 && b16.warp_push && tile_rows == 2);
    spk_cluster_variant b32 = spk_cluster_variant_for_batch(128, 32, &tile_rows);
    CHECK(spk_cluster_variant_check(&b32, &geometry) == 0);
    CHECK(b32.gate_block == 4 && b32.cluster == 2 && b32.threads == 256 && geometry.chunks == 4);
    CHECK(b32.warp_push && b32.gates_ahead == 3 && tile_rows == 1);
    spk_cluster_variant b48 = spk_cluster_variant_for_batch(128, 48, &tile_rows);
    CHECK(b48.cluster == 4 && b48.threads == 128 && tile_rows == 2);
    spk_cluster_variant b64 = spk_cluster_variant_for_batch(128, 64, &tile_rows);
    CHECK(spk_cluster_variant_check(&b64, &geometry) == 0);
    CHECK(b64.gate_block == 4 && b64.cluster == 2 && b64.threads == 256 && b64.warp_push && tile_rows == 2);
    spk_cluster_variant b128 = spk_cluster_variant_for_batch(128, 128, &tile_rows);
    CHECK(b128.cluster == 2 && !b128.warp_push && b128.direct_push && tile_rows == 4 && b128.row_phases == 1);
    spk_cluster_variant b256 = spk_cluster_variant_for_batch(128, 256, &tile_rows);
    CHECK(spk_cluster_variant_check(&b256, &geometry) == 0);
    CHECK(b256.gate_block == 4 && b256.cluster == 2 && !b256.warp_push && geometry.chunks == 4 && tile_rows == 8);
    CHECK(b256.gates_ahead == 3 && b256.row_phases == 2 && b256.row_group == 4); /* two halves of 4 rows */
    spk_cluster_variant b257 = spk_cluster_variant_for_batch(128, 257, &tile_rows);
    CHECK(spk_cluster_variant_check(&b257, &geometry) == 0);
    CHECK(b257.cluster == 8 && b257.warp_push && geometry.chunks == 8 && b257.gates_ahead == 1 && tile_rows == 16);
    CHECK(b257.row_phases == 1);
    /* hidden 16 at batch 16 (cluster 4): no whole warp of gate blocks: one gate row a thread, 4-byte direct
     * pushes; at batch 32 (cluster 2, 8 units a block) gate blocks make one warp */
    spk_cluster_variant narrow = spk_cluster_variant_for_batch(16, 16, &tile_rows);
    CHECK(spk_cluster_variant_check(&narrow, NULL) == 0);
    CHECK(narrow.gate_block == 1 && narrow.direct_push && !narrow.warp_push);
    spk_cluster_variant narrow2 = spk_cluster_variant_for_batch(16, 32, &tile_rows);
    CHECK(spk_cluster_variant_check(&narrow2, NULL) == 0);
    CHECK(narrow2.gate_block == 4 && narrow2.cluster == 2 && narrow2.threads == 32);
    /* hidden 64 at batch 8: the row's 4 chunks, 64 weights a thread, 64 threads */
    spk_cluster_variant small = spk_cluster_variant_for_batch(64, 8, &tile_rows);
    CHECK(spk_cluster_variant_check(&small, &geometry) == 0);
    CHECK(small.gate_block == 4 && small.threads == 64 && geometry.chunks == 4);
}

/* Warp pushes (WARP_PUSH): refused without gate blocks; 16-byte st.async
 * and still no block barrier. (Whole warps of gate blocks already make the
 * units of a block whole quads: units * chunks is a multiple of 32.) */
TEST(warp_pushes)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 8, .threads = 128, .max_tile_rows = 4, .cell_in_lanes = true,
                             .mbarrier_exchange = true, .direct_push = true, .warp_push = true};
    spk_cluster_variant_fit(&v);
    CHECK_REFUSED(v, "kernel.push \"warp\") need kernel.gate_block 4");
    v.gate_block = 4;
    CHECK(spk_cluster_variant_check(&v, NULL) == 0);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32"));
        CHECK(memmem(code, bytes, "complete_tx::bytes.f32", 22) == NULL);
        CHECK(memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL);
        spk_module_release(m);
    }
    spk_define d[] = {{"THREADS", "128"}, {"GATE_BLOCK", "1"}, {"WARP_PUSH", "1"}, {"CELL_IN_LANES", "1"},
                      {"MBARRIER_EXCHANGE", "1"}, {"DIRECT_PUSH", "1"}};
    check_kernel_refuses(d, 6, "WARP_PUSH needs DIRECT_PUSH, GATE_BLOCK 4");
    for (int rows = 1; rows <= 16; rows *= 2) {
        spk_cluster_variant w = v;
        w.max_tile_rows = rows;
        w.row_group = 0;
        w.min_blocks = 0;
        spk_cluster_variant_fit(&w);
        CHECK(spk_cluster_variant_check(&w, NULL) == 0);
        check_compiles_within_budget(&w, "warp pushes");
    }
}

/* The gates fetched 2 .. 4 steps ahead (GATES_AHEAD): refused past 4 or
 * without direct pushes; their stages in the shared-memory size; cp.async
 * and a wait for all but the newest GATES_AHEAD - 1 groups in the PTX. */
TEST(gates_ahead)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 8, .threads = 128, .gate_block = 4, .max_tile_rows = 4,
                             .cell_in_lanes = true, .mbarrier_exchange = true, .direct_push = true, .warp_push = true,
                             .gates_ahead = 3};
    spk_cluster_variant_fit(&v);
    CHECK(v.row_group == 4 && spk_cluster_variant_check(&v, NULL) == 0);
    /* mbarriers, two h buffers of 4 rows, 3 stages x 1 slot x 128 threads of float4 */
    CHECK(spk_cluster_smem_bytes(&v, 4) == 16u + 4u * 2 * 4 * 128 + 3u * 128 * 16);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "cp.async.cg.shared.global"));
        CHECK(ptx_has(code, bytes, "cp.async.wait_group 2"));
        CHECK(ptx_has(code, bytes, "cp.async.commit_group"));
        spk_module_release(m);
    }
    spk_cluster_variant one = v;
    one.gates_ahead = 1;
    CHECK(spk_cluster_smem_bytes(&one, 4) == 16u + 4u * 2 * 4 * 128);
    m = compile_ptx(&one, &code, &bytes);
    if (m) {
        CHECK(memmem(code, bytes, "cp.async", 8) == NULL);
        spk_module_release(m);
    }
    spk_cluster_variant far = v;
    far.gates_ahead = 5;
    CHECK_REFUSED(far, "kernel.gates_ahead 5 must be 1 .. 4");
    spk_cluster_variant plain = {.hidden = 128, .cluster = 8, .max_tile_rows = 4, .gates_ahead = 2};
    spk_cluster_variant_fit(&plain);
    CHECK_REFUSED(plain, "needs direct pushes");
    spk_define d[] = {{"GATES_AHEAD", "2"}};
    check_kernel_refuses(d, 1, "GATES_AHEAD must be 1 .. 4 (more than 1 needs DIRECT_PUSH)");
}

/* Both directions in a block (DIRECTIONS 2): refused without direct pushes
 * or past 1024 threads a block; twice the shared memory (a direction's own
 * after the other's); the launch bounds of a 2 * THREADS block; still no
 * block barrier in a step. */
TEST(directions_in_a_block)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 4, .threads = 128, .gate_block = 4, .max_tile_rows = 2,
                             .cell_in_lanes = true, .mbarrier_exchange = true, .direct_push = true, .warp_push = true,
                             .gates_ahead = 3, .directions = 2};
    spk_cluster_variant_fit(&v);
    CHECK(spk_cluster_variant_check(&v, NULL) == 0 && v.directions == 2);
    spk_cluster_variant one = v;
    one.directions = 1;
    CHECK(spk_cluster_smem_bytes(&v, 2) == 2 * spk_cluster_smem_bytes(&one, 2));
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, ".maxntid 256, 1, 1"));
        CHECK(memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL);
        spk_module_release(m);
    }
    check_compiles_within_budget(&v, "both directions");
    spk_cluster_variant three = v;
    three.directions = 3;
    CHECK_REFUSED(three, "kernel.directions 3 must be 1 or 2");
    spk_cluster_variant plain = {.hidden = 128, .cluster = 8, .max_tile_rows = 4, .directions = 2};
    spk_cluster_variant_fit(&plain);
    CHECK_REFUSED(plain, "kernel.directions 2 needs direct pushes");
    spk_cluster_variant wide = v;
    wide.cluster = 1;
    wide.threads = 1024; /* cluster 1, 8 chunks: 1024 threads a direction */
    CHECK_REFUSED(wide, "2 * threads <= 1024");
    spk_define d[] = {{"DIRECTIONS", "2"}};
    check_kernel_refuses(d, 1, "DIRECTIONS must be 1, or 2 with DIRECT_PUSH");
    /* a tile's clusters: one with both directions in a block, two otherwise */
    int64_t h[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = spk_cluster_heights(32, h);
    int64_t active30[6] = {30, 30, 30, 30, 30, 30};
    spk_cluster_schedule s;
    CHECK(spk_cluster_schedule_pick(&s, 64, h, active30, n, 0, 2) == 0);
    CHECK(s.tile_rows == 4 && s.tiles == 16 && s.clusters == 16 && s.waves == 1);
    CHECK(spk_cluster_schedule_pick(&s, 64, h, active30, n, 0, 1) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 8 && s.clusters == 16);
    CHECK(spk_cluster_schedule_pick(&s, 64, h, active30, n, 0, 3) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "directions must be 1 or 2");
}

static int ptx_count(const char *code, size_t bytes, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *at = code, *end = code + bytes; (at = memmem(at, (size_t)(end - at), needle, len)); at += len)
        n++;
    return n;
}

/* kernel.row_phases 2: the tile's row groups in two halves, each with its own
 * pair of mbarriers; a row group for each half. */
TEST(row_phases_take_turns)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 2, .threads = 256, .gate_block = 4, .max_tile_rows = 8,
                             .cell_in_lanes = true, .late_store = true, .mbarrier_exchange = true,
                             .direct_push = true, .gates_ahead = 3, .row_phases = 2};
    spk_cluster_variant_fit(&v);
    CHECK(spk_cluster_variant_check(&v, NULL) == 0 && v.row_group == 4);
    spk_cluster_variant one = v;
    one.row_phases = 1;
    CHECK(spk_cluster_smem_bytes(&v, 8) == spk_cluster_smem_bytes(&one, 8) + 16); /* two more mbarriers */
    size_t bytes, one_bytes;
    const char *code, *one_code;
    spk_module *m = compile_ptx(&v, &code, &bytes), *m1 = compile_ptx(&one, &one_code, &one_bytes);
    if (m && m1) {
        CHECK(ptx_count(code, bytes, "mbarrier.init.shared::cta.b64") == 4);
        CHECK(ptx_count(one_code, one_bytes, "mbarrier.init.shared::cta.b64") == 2);
        CHECK(memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL);
    }
    spk_module_release(m);
    spk_module_release(m1);
    check_compiles_within_budget(&v, "two row phases, tile 8");
    /* tiles of 2: one row a group */
    spk_cluster_variant two = {.hidden = 128, .cluster = 2, .threads = 256, .gate_block = 4, .max_tile_rows = 2,
                               .cell_in_lanes = true, .late_store = true, .mbarrier_exchange = true,
                               .direct_push = true, .warp_push = true, .gates_ahead = 3, .row_phases = 2};
    spk_cluster_variant_fit(&two);
    CHECK(two.row_group == 1 && spk_cluster_variant_check(&two, NULL) == 0);
    check_compiles_within_budget(&two, "two row phases, tile 2");
    spk_cluster_variant grouped = two;
    grouped.row_group = 2;
    CHECK_REFUSED(grouped, "kernel.row_phases 2 needs two row groups a tile: tile_rows 2, row_group 2");
    spk_cluster_variant single = two;
    single.max_tile_rows = 1;
    CHECK_REFUSED(single, "needs two row groups a tile: tile_rows 1, row_group 1");
    spk_cluster_variant three = v;
    three.row_phases = 3;
    CHECK_REFUSED(three, "kernel.row_phases 3 must be 1 or 2");
    spk_cluster_variant plain = {.hidden = 128, .cluster = 8, .max_tile_rows = 8, .row_phases = 2};
    spk_cluster_variant_fit(&plain);
    CHECK_REFUSED(plain, "kernel.row_phases 2 needs direct pushes");
    spk_define d[] = {{"ROW_PHASES", "2"}};
    check_kernel_refuses(d, 1, "ROW_PHASES must be 1, or 2 with DIRECT_PUSH");
}

TEST(defaults_fit_the_hidden_size)
{
    spk_cluster_geometry g;
    spk_cluster_variant v = variant(128, 0, 0, 0, false);
    CHECK(v.cluster == 8 && v.threads == 512 && v.max_tile_rows == 32 && v.row_group == 8 && v.min_blocks == 2);
    CHECK(spk_cluster_variant_check(&v, &g) == 0);
    CHECK(g.units == 16 && g.gate_rows == 64 && g.chunks == 8 && g.cells == 1);
    v = variant(128, 16, 0, 0, false);
    CHECK(v.threads == 256 && spk_cluster_variant_check(&v, &g) == 0 && g.units == 8 && g.chunks == 8);
    v = variant(256, 8, 0, 0, false); /* 1024 threads would cap registers at 64: chunks 4 */
    CHECK(v.threads == 512 && v.min_blocks == 1 && spk_cluster_variant_check(&v, &g) == 0 && g.chunks == 4);
    v = variant(16, 0, 0, 0, false);
    CHECK(v.cluster == 8 && v.threads == 32 && spk_cluster_variant_check(&v, &g) == 0 && g.chunks == 4);
    v = variant(128, 3, 0, 0, false);
    CHECK_REFUSED(v, "kernel.cluster 3 must be 1, 2, 4, 8 or 16");
    v = variant(100, 8, 0, 0, false);
    CHECK_REFUSED(v, "not divisible by kernel.cluster 8");
    v = variant(128, 8, 512, 0, false);
    v.row_group = 16;
    CHECK_REFUSED(v, "kernel.row_group");
}

TEST(shared_memory_is_weights_two_h_buffers_and_padded_pre_activations)
{
    spk_cluster_variant v = variant(128, 8, 0, 32, false);
    CHECK(spk_cluster_smem_bytes(&v, 32) == 4u * (2 * 32 * 128 + 32 * (64 + 4)));
    CHECK(spk_cluster_smem_bytes(&v, 1) == 4u * (2 * 128 + 68));
    v.weights_shared = true;
    CHECK(spk_cluster_smem_bytes(&v, 8) == 4u * (64 * 128 + 2 * 8 * 128 + 8 * 68));
    /* lanes form: no pre-activations, h padded to whole row groups; mbarriers: 16 bytes */
    spk_cluster_variant lanes = {.hidden = 128, .cluster = 8, .max_tile_rows = 32, .cell_in_lanes = true};
    spk_cluster_variant_fit(&lanes);
    CHECK(lanes.row_group == 8);
    CHECK(spk_cluster_smem_bytes(&lanes, 3) == 4u * (2 * 8 * 128));
    CHECK(spk_cluster_smem_bytes(&lanes, 16) == 4u * (2 * 16 * 128));
    lanes.mbarrier_exchange = true;
    CHECK(spk_cluster_smem_bytes(&lanes, 16) == 16u + 4u * (2 * 16 * 128));
    spk_cluster_variant one = {.hidden = 128, .cluster = 8, .max_tile_rows = 1, .cell_in_lanes = true};
    spk_cluster_variant_fit(&one);
    CHECK(one.row_group == 1 && one.min_blocks == 2);
    CHECK(spk_cluster_smem_bytes(&one, 1) == 4u * (2 * 128));
}

TEST(option_checks_and_the_batch_table)
{
    spk_cluster_variant v = {.hidden = 128, .cluster = 8, .mbarrier_exchange = true};
    spk_cluster_variant_fit(&v);
    CHECK(v.vector_push && spk_cluster_variant_check(&v, NULL) == 0);
    v.vector_push = false;
    CHECK_REFUSED(v, "needs vector or direct pushes");
    spk_cluster_variant narrow = {.hidden = 16, .cluster = 8, .vector_push = true};
    spk_cluster_variant_fit(&narrow);
    CHECK_REFUSED(narrow, "multiple of 4 units");
    /* every batch gets a valid variant; rows are monotone in tile height */
    int64_t previous = 0;
    for (int64_t batch = 1; batch <= 4096; batch = batch * 3 + 1) {
        int64_t tile_rows = -1;
        spk_cluster_variant d = spk_cluster_variant_for_batch(128, batch, &tile_rows);
        CHECK(spk_cluster_variant_check(&d, NULL) == 0);
        CHECK(tile_rows >= previous);
        previous = tile_rows;
    }
    /* hidden 256 at batch 32: gate blocks would hold 256 (4 chunks) or need 512 threads (8), one gate row a
     * thread 128 weights (2 chunks) or 1024 threads (4): the generic fit */
    int64_t tile_rows = -1;
    spk_cluster_variant big = spk_cluster_variant_for_batch(256, 32, &tile_rows);
    CHECK(spk_cluster_variant_check(&big, NULL) == 0 && big.cluster == 8 && !big.direct_push && tile_rows == 0);
    /* hidden 16 at batch 8: no whole warp of gate blocks (4 units of a block), so one gate row a thread,
     * with the chunks the fit gives (2 would not make a whole warp) */
    spk_cluster_variant tiny = spk_cluster_variant_for_batch(16, 8, &tile_rows);
    CHECK(spk_cluster_variant_check(&tiny, NULL) == 0 && tiny.direct_push && tiny.threads == 32 && tile_rows == 1);
    /* hidden 256 at batch 1: 2 chunks would hold 128 weights a thread, 4 need 512 threads: the generic fit */
    spk_cluster_variant wide = spk_cluster_variant_for_batch(256, 1, &tile_rows);
    CHECK(spk_cluster_variant_check(&wide, NULL) == 0 && !wide.direct_push && tile_rows == 0);
}

TEST(tile_height_is_the_smallest_whose_clusters_all_run_at_once)
{
    int64_t h[SPK_CLUSTER_MAX_HEIGHTS + 1];
    int n = spk_cluster_heights(32, h);
    CHECK(n == 6 && h[0] == 1 && h[5] == 32);
    CHECK(spk_cluster_heights(12, h) == 5 && h[3] == 8 && h[4] == 12);
    int64_t active16[6] = {16, 16, 16, 16, 16, 16};
    spk_cluster_schedule s;
    /* batch 1: one row per tile, 2 clusters */
    CHECK(spk_cluster_schedule_pick(&s, 1, h, active16, 6, 0, 1) == 0);
    CHECK(s.tile_rows == 1 && s.tiles == 1 && s.clusters == 2 && s.waves == 1);
    /* batch 32 with 16 clusters at once: 8 tiles of 4 rows */
    CHECK(spk_cluster_schedule_pick(&s, 32, h, active16, 6, 0, 1) == 0);
    CHECK(s.tile_rows == 4 && s.tiles == 8 && s.clusters == 16 && s.waves == 1);
    /* batch 256: 16 clusters hold only tiles of 32 rows */
    CHECK(spk_cluster_schedule_pick(&s, 256, h, active16, 6, 0, 1) == 0);
    CHECK(s.tile_rows == 32 && s.tiles == 8 && s.clusters == 16 && s.waves == 1);
    /* batch 1000: nothing fits at once; the largest height, in waves */
    CHECK(spk_cluster_schedule_pick(&s, 1000, h, active16, 6, 0, 1) == 0);
    CHECK(s.tile_rows == 32 && s.tiles == 32 && s.clusters == 64 && s.waves == 4);
    /* a forced height, even past what fits */
    CHECK(spk_cluster_schedule_pick(&s, 33, h, active16, 6, 8, 1) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 5 && s.clusters == 10);
    CHECK(spk_cluster_schedule_pick(&s, 33, h, active16, 6, 3, 1) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "tile_rows 3");
    /* occupancy that shrinks with the tile's shared memory */
    int64_t shrinking[6] = {33, 33, 33, 16, 16, 0};
    CHECK(spk_cluster_schedule_pick(&s, 64, h, shrinking, 6, 0, 1) == 0);
    CHECK(s.tile_rows == 4 && s.clusters == 32);
    CHECK(spk_cluster_schedule_pick(&s, 64, h, shrinking, 6, 32, 1) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "not one cluster");
}

TEST(plans_refuse_bad_input_before_the_device)
{
    spk_cluster_plan_options o = {0};
    o.variant = variant(128, 8, 0, 32, false);
    CHECK(spk_cluster_plan_new(&o) == NULL); /* no layers */
}

int main(void)
{
    use_fresh_cache();
    RUN(every_variant_compiles_for_sm90_without_spills);
    RUN(latency_options_compile_without_spills);
    RUN(ptx_of_the_mbarrier_exchange);
    RUN(ptx_of_the_direct_pushes);
    RUN(ptx_uses_dsmem_stores_and_the_split_cluster_barrier);
    RUN(static_asserts_reject_what_the_check_rejects);
    RUN(gate_blocks);
    RUN(warp_pushes);
    RUN(gates_ahead);
    RUN(directions_in_a_block);
    RUN(row_phases_take_turns);
    RUN(defaults_fit_the_hidden_size);
    RUN(shared_memory_is_weights_two_h_buffers_and_padded_pre_activations);
    RUN(option_checks_and_the_batch_table);
    RUN(tile_height_is_the_smallest_whose_clusters_all_run_at_once);
    RUN(plans_refuse_bad_input_before_the_device);
    return CHECK_SUMMARY();
}
