/* The cluster kernels' option table and variants: NVRTC compiles every
 * option set that stays, of kernels/lstm_cluster.cu and
 * kernels/lstm_cluster_baseline.cu, for sm_90 (no GPU needed) with no spills
 * within its register budget; the kernels' static_asserts reject what the C
 * check rejects; options left out take the batch's default by their rules;
 * the shared memory sizes and the tile-height choice of the cluster plan. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "cuda/runtime.h"
#include "lstm/cluster.h"
#include "lstm/stack_plan.h"

/* A variant spk_cluster_variant_derive refuses, with `message` in the error
 * (a macro: failures name the caller's line). */
#define CHECK_REFUSED(v, message)                                                                                     \
    do {                                                                                                               \
        CHECK(spk_cluster_variant_derive(&(v), 0, NULL) != 0);                                                        \
        CHECK_STR_CONTAINS(spk_last_error(), message);                                                                 \
    } while (0)

static void use_fresh_cache(void)
{
    setenv("SPK_CACHE_DIR", check_scratch_dir("cluster-compile"), 1);
    spk_cache_reset();
}

/* A variant built from scratch: the rest fitted. */
static spk_cluster_variant variant(int hidden, int push, int cluster, int threads, int rows, int gate_block)
{
    spk_cluster_variant v = {.hidden = hidden, .push = push, .cluster = cluster, .threads = threads,
                             .max_tile_rows = rows, .gate_block = gate_block};
    spk_cluster_variant_fit(&v);
    return v;
}

/* The options a script gives, by name ("push", "warp"), for resolve. */
static spk_kernel_choice choose(const char *name, const char *word, int value)
{
    spk_kernel_choice c = {0};
    int i = spk_kernel_option_index(&spk_cluster_family, name);
    CHECK(i >= 0);
    if (i >= 0)
        CHECK((word ? spk_kernel_choice_set_word(&spk_cluster_family, &c, i, word)
                    : spk_kernel_choice_set_int(&spk_cluster_family, &c, i, value)) == 0);
    return c;
}

static void also(spk_kernel_choice *c, const char *name, const char *word, int value)
{
    int i = spk_kernel_option_index(&spk_cluster_family, name);
    CHECK(i >= 0);
    if (i >= 0)
        CHECK((word ? spk_kernel_choice_set_word(&spk_cluster_family, c, i, word)
                    : spk_kernel_choice_set_int(&spk_cluster_family, c, i, value)) == 0);
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
    spk_cluster_sizes sizes;
    if (spk_cluster_variant_derive(v, 0, &sizes) != 0)
        return NULL;
    const char *kernels = spk_kernel_dir();
    if (!kernels)
        return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kernels, sizes.file);
    spk_define defines[SPK_KERNEL_OPTIONS_MAX];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    const char *options[] = {"--ptxas-options=-v"};
    spk_compile_options o = {0};
    o.file = path;
    o.defines = defines;
    o.ndefines = spk_kernel_defines(&spk_cluster_family, v, defines, text);
    o.options = options;
    o.noptions = 1;
    o.arch = "sm_90";
    o.no_cache = true;
    return spk_compile(&o);
}

static const char *push_name(int push)
{
    return push == SPK_PUSH_WARP ? "warp" : push ? "direct" : "scalar";
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
    size_t bytes = 0;
    const char *code = spk_module_code(m, &bytes);
    CHECK(bytes > 4 && memcmp(code, "\x7f" "ELF", 4) == 0);
    CHECK(memmem(code, bytes, "spk_lstm_cluster", 16) != NULL);
    int registers, spills;
    module_figures(m, &registers, &spills);
    spk_cluster_sizes sizes;
    CHECK(spk_cluster_variant_derive(v, 0, &sizes) == 0);
    bool within = registers > 0 && registers <= sizes.registers && spills == 0;
    if (check_verbose() || !within)
        fprintf(stderr, "  %s: hidden %3d push %-6s cluster %2d threads %4d gate_block %d tile_rows %2d row_group %d "
                        "min_blocks %d gates_ahead %d row_phases %d early_gates %d cell %d: %3d registers (budget "
                        "%d), %3d bytes spill stores, smem %zu\n",
                label, v->hidden, push_name(v->push), v->cluster, v->threads, v->gate_block, v->max_tile_rows,
                v->row_group, v->min_blocks, v->gates_ahead, v->row_phases, v->early_gates, v->cell, registers,
                sizes.registers, spills, sizes.smem_bytes);
    CHECK(within);
    spk_module_release(m);
}

/* The baseline (scalar pushes, a cluster barrier a step) across hidden
 * sizes, cluster sizes, threads and tile heights. */
TEST(baseline_variants_compile_for_sm90_without_spills)
{
    struct {
        int hidden, cluster, threads, rows;
    } cases[] = {
        {128, 8, 0, 32},  {128, 8, 0, 16},  {128, 8, 0, 8},  {128, 8, 0, 1},  {128, 16, 0, 32}, {128, 16, 0, 1},
        {128, 8, 256, 32}, {64, 8, 0, 32},  {64, 16, 0, 8},  {256, 8, 0, 32}, {256, 16, 0, 32}, {32, 8, 0, 32},
        {16, 8, 0, 32},   {128, 4, 0, 8},   {128, 2, 0, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spk_cluster_variant v = variant(cases[i].hidden, SPK_PUSH_SCALAR, cases[i].cluster, cases[i].threads,
                                        cases[i].rows, 0);
        CHECK(spk_cluster_variant_derive(&v, 0, NULL) == 0);
        check_compiles_within_budget(&v, "baseline");
    }
}

/* The plan's default for (hidden, batch) is valid and compiles for sm_90
 * without spills within its budget. */
static void check_default_compiles(int hidden, int64_t batch)
{
    int64_t tile_rows = -1;
    spk_cluster_variant v = spk_cluster_variant_for_batch(hidden, batch);
    tile_rows = v.tile_rows;
    CHECK(spk_cluster_variant_derive(&v, 0, NULL) == 0);
    CHECK(tile_rows >= 0 && tile_rows <= v.max_tile_rows);
    char label[64];
    snprintf(label, sizeof label, "default hidden %d batch %lld", hidden, (long long)batch);
    check_compiles_within_budget(&v, label);
}

/* Every option set of the direct pushes that stays (one gate row a thread
 * or gate blocks, warp pushes, the gates fetched ahead, row phases, cluster
 * sizes, tile heights) and every per-batch default compiles within budget. */
TEST(direct_push_option_sets_compile_without_spills)
{
    struct {
        int push, cluster, threads, rows, gate_block, gates_ahead, row_phases;
    } cases[] = {
        {SPK_PUSH_DIRECT, 8, 0, 1, 1, 1, 1},    {SPK_PUSH_DIRECT, 8, 0, 8, 1, 1, 1},
        {SPK_PUSH_DIRECT, 8, 0, 16, 1, 1, 1},   {SPK_PUSH_DIRECT, 16, 0, 1, 1, 1, 1},
        {SPK_PUSH_DIRECT, 16, 64, 2, 1, 1, 1},  {SPK_PUSH_DIRECT, 4, 0, 1, 1, 1, 1},
        {SPK_PUSH_DIRECT, 8, 128, 1, 1, 1, 1},  {SPK_PUSH_DIRECT, 4, 0, 8, 1, 3, 1},
        {SPK_PUSH_DIRECT, 8, 0, 8, 1, 1, 2},    {SPK_PUSH_DIRECT, 8, 128, 1, 4, 1, 1},
        {SPK_PUSH_DIRECT, 8, 128, 8, 4, 1, 1},  {SPK_PUSH_DIRECT, 8, 128, 16, 4, 1, 1},
        {SPK_PUSH_DIRECT, 4, 128, 4, 4, 3, 1},  {SPK_PUSH_DIRECT, 16, 64, 1, 4, 1, 1},
        {SPK_PUSH_DIRECT, 4, 256, 8, 4, 1, 1},  {SPK_PUSH_DIRECT, 8, 64, 4, 4, 1, 1},
        {SPK_PUSH_DIRECT, 2, 256, 8, 4, 3, 2},  {SPK_PUSH_DIRECT, 2, 256, 4, 4, 3, 1},
        {SPK_PUSH_WARP, 8, 128, 1, 4, 2, 1},    {SPK_PUSH_WARP, 16, 64, 2, 4, 1, 1},
        {SPK_PUSH_WARP, 8, 128, 8, 4, 1, 1},    {SPK_PUSH_WARP, 4, 128, 4, 4, 4, 1},
        {SPK_PUSH_WARP, 2, 256, 2, 4, 3, 2},    {SPK_PUSH_WARP, 8, 128, 16, 4, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        spk_cluster_variant v = {.hidden = 128, .push = cases[i].push, .cluster = cases[i].cluster,
                                 .threads = cases[i].threads, .max_tile_rows = cases[i].rows,
                                 .gate_block = cases[i].gate_block, .gates_ahead = cases[i].gates_ahead,
                                 .row_phases = cases[i].row_phases};
        spk_cluster_variant_fit(&v);
        CHECK(spk_cluster_variant_derive(&v, 0, NULL) == 0);
        check_compiles_within_budget(&v, "direct pushes");
    }
    for (int64_t batch = 1; batch <= 1024; batch *= 2)
        check_default_compiles(128, batch);
    static const int hiddens[] = {16, 64, 256};
    static const int64_t batches[] = {1, 8, 32, 64};
    for (size_t h = 0; h < sizeof hiddens / sizeof *hiddens; h++)
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
            check_default_compiles(hiddens[h], batches[b]);
}

/* The step variants (kernel.early_gates, kernel.cell) on the shapes of the
 * batch table's rows at batch 1, 8, 32, 64, 128 and 256 compile within
 * budget without spills: each alone and the two together at batch 1 to 32,
 * the combined forms at the wider rows. */
TEST(step_variants_compile_without_spills)
{
    struct {
        int push, cluster, threads, rows, gate_block, gates_ahead, row_phases;
    } rows[] = {
        {SPK_PUSH_WARP, 8, 128, 1, 4, 2, 1},   {SPK_PUSH_WARP, 4, 128, 1, 4, 3, 1},
        {SPK_PUSH_WARP, 2, 256, 1, 4, 3, 1},   {SPK_PUSH_WARP, 2, 256, 2, 4, 3, 1},
        {SPK_PUSH_DIRECT, 2, 256, 4, 4, 3, 1}, {SPK_PUSH_DIRECT, 2, 256, 8, 4, 3, 2},
    };
    struct {
        int early, cell, combined;
    } forms[] = {{1, SPK_CELL_REFERENCE, 0}, {0, SPK_CELL_TRIMMED, 0}, {0, SPK_CELL_FUSED, 0},
                 {1, SPK_CELL_TRIMMED, 1}, {1, SPK_CELL_FUSED, 1}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
            if (i >= 3 && !forms[f].combined)
                continue;
            spk_cluster_variant v = {.hidden = 128, .push = rows[i].push, .cluster = rows[i].cluster,
                                     .threads = rows[i].threads, .max_tile_rows = rows[i].rows,
                                     .gate_block = rows[i].gate_block, .gates_ahead = rows[i].gates_ahead,
                                     .row_phases = rows[i].row_phases, .early_gates = forms[f].early,
                                     .cell = forms[f].cell};
            spk_cluster_variant_fit(&v);
            CHECK(spk_cluster_variant_derive(&v, 0, NULL) == 0);
            check_compiles_within_budget(&v, "step variant");
        }
}

/* The PTX (compute_90) of a variant; NULL, checked, when it does not compile. */
static spk_module *compile_ptx(const spk_cluster_variant *v, const char **code, size_t *bytes)
{
    spk_module *m = spk_cluster_variant_compile(v, SPK_BUILD_PLAIN, "compute_90");
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

static int ptx_count(const char *code, size_t bytes, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *at = code, *end = code + bytes; (at = memmem(at, (size_t)(end - at), needle, len)); at += len)
        n++;
    return n;
}

static bool no_block_barrier(const char *code, size_t bytes)
{
    return memmem(code, bytes, "bar.sync", 8) == NULL && memmem(code, bytes, "barrier.sync", 12) == NULL;
}

/* `file` with these defines (the rest at their defaults) does not compile,
 * and the compiler's log carries `message` (a static_assert's). */
static void check_kernel_refuses(const char *file, const spk_define *defines, int count, const char *message)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", spk_kernel_dir(), file);
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

/* The baseline's PTX: DSMEM stores through mapa and the split
 * release/acquire cluster barrier; no st.async, no mbarrier. */
TEST(ptx_of_the_baseline)
{
    spk_cluster_variant v = variant(128, SPK_PUSH_SCALAR, 8, 0, 32, 0);
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
    CHECK(memmem(code, bytes, "st.async", 8) == NULL && memmem(code, bytes, "mbarrier", 8) == NULL);
    spk_module_release(m);
}

/* The direct pushes' PTX: 4-byte st.async counted on the receiver's
 * mbarrier, cluster-scope acquire waits, one cluster barrier before the loop
 * and one after it, and no block barrier at all; the warp pushes' 16-byte
 * st.async instead. */
TEST(ptx_of_the_direct_and_warp_pushes)
{
    spk_cluster_variant d = variant(128, SPK_PUSH_DIRECT, 16, 0, 1, 1);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&d, &code, &bytes);
    if (m) {
        const char *needles[] = {"st.async.shared::cluster.mbarrier::complete_tx::bytes.f32",
                                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
                                 "mbarrier.arrive.expect_tx", "fence.mbarrier_init.release.cluster", "%globaltimer"};
        for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
            CHECK(ptx_has(code, bytes, needles[i]));
        CHECK(memmem(code, bytes, "complete_tx::bytes.v4.f32", 25) == NULL);
        CHECK(ptx_count(code, bytes, "barrier.cluster.arrive") == 2);
        CHECK(memmem(code, bytes, "st.shared::cluster.f32", 22) == NULL);
        CHECK(no_block_barrier(code, bytes));
        spk_module_release(m);
    }
    spk_cluster_variant w = variant(128, SPK_PUSH_WARP, 8, 128, 4, 4);
    m = compile_ptx(&w, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32"));
        CHECK(memmem(code, bytes, "complete_tx::bytes.f32", 22) == NULL);
        CHECK(ptx_has(code, bytes, "shfl.sync.bfly.b32"));
        CHECK(no_block_barrier(code, bytes));
        spk_module_release(m);
    }
    /* gate blocks with 4-byte pushes: butterfly shuffles only (a row's four sums end in its lanes) */
    spk_cluster_variant g = variant(128, SPK_PUSH_DIRECT, 8, 128, 1, 4);
    m = compile_ptx(&g, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "shfl.sync.bfly.b32"));
        CHECK(memmem(code, bytes, "shfl.sync.idx", 13) == NULL);
        spk_module_release(m);
    }
}

/* The kernels' static_asserts: the last guard behind the C checks. */
TEST(static_asserts_reject_what_the_check_rejects)
{
    struct {
        const char *hidden, *cluster, *threads, *rows, *message;
    } bad[] = {
        {"128", "3", "512", "32", "CLUSTER must be"},
        {"128", "8", "384", "32", "THREADS must be GATE_ROWS"},
        {"128", "8", "512", "33", "TILE_ROWS must be"},
        {"100", "8", "512", "8", "HIDDEN must be a multiple of CLUSTER"},
        {"16", "16", "32", "8", "HIDDEN must split into float4 groups"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spk_define d[4] = {{"HIDDEN", bad[i].hidden}, {"CLUSTER", bad[i].cluster}, {"THREADS", bad[i].threads},
                           {"TILE_ROWS", bad[i].rows}};
        check_kernel_refuses("lstm_cluster_baseline.cu", d, 4, bad[i].message);
        check_kernel_refuses("lstm_cluster.cu", d, 4, bad[i].message);
        spk_cluster_variant v = {.hidden = atoi(bad[i].hidden), .cluster = atoi(bad[i].cluster),
                                 .threads = atoi(bad[i].threads), .gate_block = 1, .gates_ahead = 1,
                                 .row_phases = 1, .max_tile_rows = atoi(bad[i].rows), .row_group = 1, .min_blocks = 1};
        CHECK(spk_cluster_variant_derive(&v, 0, NULL) != 0);
    }
    spk_define scalar[] = {{"PUSH", "0"}};
    check_kernel_refuses("lstm_cluster.cu", scalar, 1, "PUSH must be 1 (direct) or 2 (warp)");
    spk_define direct[] = {{"PUSH", "1"}};
    check_kernel_refuses("lstm_cluster_baseline.cu", direct, 1, "the baseline has scalar pushes (PUSH 0)");
    spk_define blocks[] = {{"THREADS", "128"}, {"GATE_BLOCK", "4"}};
    check_kernel_refuses("lstm_cluster_baseline.cu", blocks, 2, "one gate row a thread");
    spk_define two[] = {{"THREADS", "128"}, {"GATE_BLOCK", "2"}};
    check_kernel_refuses("lstm_cluster.cu", two, 2, "GATE_BLOCK must be 1 or 4");
    spk_define warp[] = {{"THREADS", "128"}, {"GATE_BLOCK", "1"}, {"PUSH", "2"}};
    check_kernel_refuses("lstm_cluster.cu", warp, 3, "PUSH 2 (warp) needs GATE_BLOCK 4");
    spk_define ahead[] = {{"GATES_AHEAD", "5"}};
    check_kernel_refuses("lstm_cluster.cu", ahead, 1, "GATES_AHEAD must be 1 .. 4");
    spk_define phases[] = {{"ROW_PHASES", "2"}, {"TILE_ROWS", "1"}, {"ROW_GROUP", "1"}};
    check_kernel_refuses("lstm_cluster.cu", phases, 3, "ROW_PHASES must be 1, or 2 with TILE_ROWS >= 2 * ROW_GROUP");
}

/* The option table: values out of range and broken rules are refused with
 * the table's messages; the defines come from it. */
TEST(option_table_checks_and_messages)
{
    spk_kernel_choice c = {0};
    int push = spk_kernel_option_index(&spk_cluster_family, "push");
    CHECK(push >= 0);
    CHECK(spk_kernel_choice_set_word(&spk_cluster_family, &c, push, "vector") != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.push must be \"scalar\", \"direct\" or \"warp\"");
    CHECK_STR_CONTAINS(spk_last_error(), "got \"vector\"");
    CHECK(spk_kernel_choice_set_int(&spk_cluster_family, &c, push, 1) != 0);
    int cluster = spk_kernel_option_index(&spk_cluster_family, "cluster");
    CHECK(spk_kernel_choice_set_int(&spk_cluster_family, &c, cluster, 3) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.cluster must be 1, 2, 4, 8 or 16");
    CHECK(spk_kernel_option_index(&spk_cluster_family, "store") < 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel: unknown option 'store' (known: hidden, push,");
    int cell = spk_kernel_option_index(&spk_cluster_family, "cell");
    CHECK(spk_kernel_choice_set_word(&spk_cluster_family, &c, cell, "fast") != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.cell must be \"reference\", \"trimmed\" or \"fused\"");
    int early = spk_kernel_option_index(&spk_cluster_family, "early_gates");
    CHECK(spk_kernel_choice_set_int(&spk_cluster_family, &c, early, 2) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.early_gates must be 0 .. 1");
    int ahead = spk_kernel_option_index(&spk_cluster_family, "gates_ahead");
    CHECK(spk_kernel_choice_set_int(&spk_cluster_family, &c, ahead, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gates_ahead must be 1 .. 4");

    spk_cluster_variant v = variant(128, SPK_PUSH_SCALAR, 8, 0, 4, 4);
    CHECK_REFUSED(v, "kernel.gate_block 4 needs kernel.push \"direct\" or \"warp\"");
    v = variant(128, SPK_PUSH_WARP, 8, 0, 4, 1);
    CHECK_REFUSED(v, "kernel.push \"warp\" needs kernel.gate_block 4");
    v = variant(128, SPK_PUSH_SCALAR, 8, 0, 4, 1);
    v.gates_ahead = 2;
    CHECK_REFUSED(v, "kernel.gates_ahead 2 .. 4 needs kernel.push \"direct\" or \"warp\"");
    v.gates_ahead = 1;
    v.row_phases = 2;
    CHECK_REFUSED(v, "kernel.row_phases 2 needs kernel.push \"direct\" or \"warp\"");
    v.row_phases = 1;
    v.early_gates = 1;
    CHECK_REFUSED(v, "kernel.early_gates 1 needs kernel.push \"direct\" or \"warp\"");
    v.early_gates = 0;
    v.cell = SPK_CELL_TRIMMED;
    CHECK_REFUSED(v, "kernel.cell \"trimmed\" or \"fused\" needs kernel.push \"direct\" or \"warp\"");

    v = variant(128, SPK_PUSH_DIRECT, 8, 0, 1, 1);
    v.row_phases = 2;
    CHECK_REFUSED(v, "kernel.row_phases 2 needs two row groups a tile: max_tile_rows 1, row_group 1");
    v = variant(128, SPK_PUSH_DIRECT, 8, 384, 4, 1);
    v.row_group = 1;
    CHECK_REFUSED(v, "kernel.threads 384 must be 64 * chunks");
    v = variant(100, SPK_PUSH_SCALAR, 8, 512, 4, 1);
    CHECK_REFUSED(v, "not divisible by kernel.cluster 8");
    v = variant(128, SPK_PUSH_SCALAR, 8, 512, 4, 1);
    v.row_group = 16;
    CHECK_REFUSED(v, "kernel.row_group must be 1, 2, 4 or 8");

    /* every option with a macro becomes a define, with its value */
    spk_define d[SPK_KERNEL_OPTIONS_MAX];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    v = spk_cluster_variant_for_batch(128, 1);
    int n = spk_kernel_defines(&spk_cluster_family, &v, d, text);
    CHECK(n == spk_cluster_family.count - 1); /* tile_rows is the launch's: no macro */
    bool push_seen = false, mapped_seen = false;
    for (int i = 0; i < n; i++) {
        if (strcmp(d[i].name, "PUSH") == 0)
            push_seen = strcmp(d[i].value, "1") == 0;
        if (strcmp(d[i].name, "MAPPED_PUSHES") == 0)
            mapped_seen = strcmp(d[i].value, "2") == 0;
    }
    CHECK(push_seen && mapped_seen);
    /* and spk help's list names every option */
    char help[4096];
    CHECK(spk_kernel_family_describe(&spk_cluster_family, help, sizeof help) < (int)sizeof help);
    for (int i = 0; i < spk_cluster_family.count; i++)
        CHECK_STR_CONTAINS(help, spk_cluster_family.options[i].name);
    CHECK_STR_CONTAINS(help, "kernel.push \"warp\" needs kernel.gate_block 4");
}

/* Options left out take the batch's default: the whole row when none is
 * given; a row value that breaks a rule with a given option its fallback;
 * the fitted sizes the row's while what they follow is. */
TEST(options_left_out_take_the_batch_default)
{
    spk_kernel_choice none = {0};
    for (int64_t batch = 1; batch <= 4096; batch = batch * 3 + 1) {
        spk_cluster_variant row = spk_cluster_variant_for_batch(128, batch), v;
        CHECK(spk_cluster_variant_resolve(128, batch, &none, &v) == 0);
        CHECK(memcmp(&row, &v, sizeof v) == 0);
    }
    /* batch 1 (direct pushes, gate blocks, 2 ahead): one gate row a thread keeps them, refits the threads */
    spk_cluster_variant v;
    spk_kernel_choice c = choose("gate_block", NULL, 1);
    CHECK(spk_cluster_variant_resolve(128, 1, &c, &v) == 0);
    CHECK(v.push == SPK_PUSH_DIRECT && v.gates_ahead == 2 && v.cluster == 8 && v.max_tile_rows == 1 && v.tile_rows == 1);
    CHECK(v.threads == 512); /* refitted: one gate row a thread, 8 chunks */
    CHECK(v.early_gates == 1 && v.cell == SPK_CELL_TRIMMED); /* the row's, which the direct pushes take */
    /* the scalar pushes: the baseline, every option it lacks at its plain value */
    c = choose("push", "scalar", 0);
    CHECK(spk_cluster_variant_resolve(128, 256, &c, &v) == 0);
    CHECK(v.gate_block == 1 && v.gates_ahead == 1 && v.row_phases == 1 && v.cluster == 2 && v.max_tile_rows == 8);
    CHECK(v.early_gates == 0 && v.cell == SPK_CELL_REFERENCE);
    spk_cluster_sizes sizes;
    CHECK(spk_cluster_variant_derive(&v, 0, &sizes) == 0 && strcmp(sizes.file, "lstm_cluster_baseline.cu") == 0);
    /* a tile height given: the launch's and what the kernel carries, the row's options kept */
    c = choose("tile_rows", NULL, 4);
    CHECK(spk_cluster_variant_resolve(128, 8, &c, &v) == 0);
    CHECK(v.tile_rows == 4 && v.max_tile_rows == 4 && v.push == SPK_PUSH_DIRECT && v.cluster == 4 && v.threads == 128);
    CHECK(v.mapped_pushes == 2);
    CHECK(v.row_group == 4 && v.min_blocks == 1);
    /* the kernel's most rows given: the schedule picks the launch's */
    c = choose("max_tile_rows", NULL, 8);
    CHECK(spk_cluster_variant_resolve(128, 8, &c, &v) == 0);
    CHECK(v.tile_rows == 0 && v.max_tile_rows == 8);
    /* a launch taller than the kernel's tile is refused, naming both */
    c = choose("max_tile_rows", NULL, 2);
    also(&c, "tile_rows", NULL, 4);
    CHECK(spk_cluster_variant_resolve(128, 8, &c, &v) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.tile_rows 4 is more than the kernel carries (kernel.max_tile_rows 2)");
    /* an explicit contradiction is refused with the rule's message */
    c = choose("push", "scalar", 0);
    also(&c, "gate_block", NULL, 4);
    CHECK(spk_cluster_variant_resolve(128, 1, &c, &v) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gate_block 4 needs kernel.push");
    /* a cluster size given refits the threads */
    c = choose("cluster", NULL, 16);
    CHECK(spk_cluster_variant_resolve(128, 1, &c, &v) == 0);
    CHECK(v.cluster == 16 && v.threads == 64 && v.push == SPK_PUSH_DIRECT);
    /* the scalar pushes given where the row maps its pushes: mapped_pushes falls back to 0 */
    c = choose("push", "scalar", 0);
    CHECK(spk_cluster_variant_resolve(128, 1, &c, &v) == 0);
    CHECK(v.mapped_pushes == 0);
}

/* The batch table's rows, and where a hidden size leaves a row. */
TEST(the_batch_table)
{
    int64_t tile_rows = -1;
    spk_cluster_sizes s;
    spk_cluster_variant b1 = spk_cluster_variant_for_batch(128, 1);
    tile_rows = b1.tile_rows;
    CHECK(spk_cluster_variant_derive(&b1, 0, &s) == 0);
    CHECK(b1.gate_block == 4 && b1.cluster == 8 && b1.threads == 128 && s.chunks == 8 && tile_rows == 1);
    CHECK(b1.push == SPK_PUSH_DIRECT && b1.mapped_pushes == 2 && b1.gates_ahead == 2);
    spk_cluster_variant b8 = spk_cluster_variant_for_batch(128, 8);
    tile_rows = b8.tile_rows;
    CHECK(spk_cluster_variant_derive(&b8, 0, &s) == 0);
    CHECK(b8.gate_block == 4 && b8.cluster == 4 && b8.threads == 128 && s.chunks == 4 && tile_rows == 1);
    CHECK(b8.push == SPK_PUSH_DIRECT && b8.mapped_pushes == 2 && b8.gates_ahead == 3);
    spk_cluster_variant b16 = spk_cluster_variant_for_batch(128, 16);
    tile_rows = b16.tile_rows;
    CHECK(b16.cluster == 4 && b16.push == SPK_PUSH_DIRECT && b16.mapped_pushes == 2 && tile_rows == 2);
    spk_cluster_variant b32 = spk_cluster_variant_for_batch(128, 32);
    tile_rows = b32.tile_rows;
    CHECK(spk_cluster_variant_derive(&b32, 0, &s) == 0);
    CHECK(b32.gate_block == 4 && b32.cluster == 2 && b32.threads == 256 && s.chunks == 4);
    CHECK(b32.push == SPK_PUSH_DIRECT && b32.mapped_pushes == 2 && b32.gates_ahead == 3 && tile_rows == 1);
    spk_cluster_variant b48 = spk_cluster_variant_for_batch(128, 48);
    tile_rows = b48.tile_rows;
    CHECK(b48.cluster == 4 && b48.threads == 128 && tile_rows == 2 && b48.mapped_pushes == 1);
    spk_cluster_variant b64 = spk_cluster_variant_for_batch(128, 64);
    tile_rows = b64.tile_rows;
    CHECK(b64.gate_block == 4 && b64.cluster == 2 && b64.threads == 256 && b64.push == SPK_PUSH_DIRECT && tile_rows == 2);
    CHECK(b64.mapped_pushes == 2);
    spk_cluster_variant b128 = spk_cluster_variant_for_batch(128, 128);
    tile_rows = b128.tile_rows;
    CHECK(b128.cluster == 2 && b128.push == SPK_PUSH_DIRECT && tile_rows == 4 && b128.row_phases == 1);
    CHECK(b128.mapped_pushes == 0);
    spk_cluster_variant b256 = spk_cluster_variant_for_batch(128, 256);
    tile_rows = b256.tile_rows;
    CHECK(spk_cluster_variant_derive(&b256, 0, &s) == 0);
    CHECK(b256.gate_block == 4 && b256.cluster == 2 && b256.push == SPK_PUSH_DIRECT && s.chunks == 4 && tile_rows == 8);
    CHECK(b256.gates_ahead == 3 && b256.row_phases == 2 && b256.row_group == 4); /* two halves of 4 rows */
    spk_cluster_variant b257 = spk_cluster_variant_for_batch(128, 257);
    tile_rows = b257.tile_rows;
    CHECK(spk_cluster_variant_derive(&b257, 0, &s) == 0);
    CHECK(b257.cluster == 8 && b257.push == SPK_PUSH_WARP && s.chunks == 8 && b257.gates_ahead == 1 && tile_rows == 16);
    /* hidden 16 at batch 16 (cluster 4): no whole warp of gate blocks: one gate row a thread, 4-byte direct
     * pushes; at batch 32 (cluster 2, 8 units a block) gate blocks make one warp */
    spk_cluster_variant narrow = spk_cluster_variant_for_batch(16, 16);
    tile_rows = narrow.tile_rows;
    CHECK(spk_cluster_variant_derive(&narrow, 0, NULL) == 0);
    CHECK(narrow.gate_block == 1 && narrow.push == SPK_PUSH_DIRECT && narrow.early_gates == 1);
    spk_cluster_variant narrow2 = spk_cluster_variant_for_batch(16, 32);
    tile_rows = narrow2.tile_rows;
    CHECK(narrow2.gate_block == 4 && narrow2.cluster == 2 && narrow2.threads == 32);
    /* hidden 256 at batch 1 and 32: no row fits: the baseline, the schedule picking the tile height */
    spk_cluster_variant wide = spk_cluster_variant_for_batch(256, 1);
    tile_rows = wide.tile_rows;
    CHECK(spk_cluster_variant_derive(&wide, 0, NULL) == 0 && wide.push == SPK_PUSH_SCALAR && tile_rows == 0);
    CHECK(wide.early_gates == 0 && wide.cell == SPK_CELL_REFERENCE);
    spk_cluster_variant big = spk_cluster_variant_for_batch(256, 32);
    tile_rows = big.tile_rows;
    CHECK(spk_cluster_variant_derive(&big, 0, NULL) == 0 && big.cluster == 8 && big.push == SPK_PUSH_SCALAR);
    /* every batch gets a valid variant, the gates early and the trimmed cell (the fused cell would change the
     * defaults' bits); rows are monotone in tile height */
    int64_t previous = 0;
    for (int64_t batch = 1; batch <= 4096; batch = batch * 3 + 1) {
        spk_cluster_variant d = spk_cluster_variant_for_batch(128, batch);
        tile_rows = d.tile_rows;
        CHECK(spk_cluster_variant_derive(&d, 0, NULL) == 0);
        CHECK(d.early_gates == 1 && d.cell == SPK_CELL_TRIMMED);
        CHECK(tile_rows >= previous);
        previous = tile_rows;
    }
}

TEST(fit_and_shared_memory)
{
    spk_cluster_sizes s;
    spk_cluster_variant v = variant(128, SPK_PUSH_SCALAR, 0, 0, 0, 0);
    CHECK(v.cluster == 8 && v.threads == 512 && v.max_tile_rows == 32 && v.row_group == 8 && v.min_blocks == 2);
    CHECK(spk_cluster_variant_derive(&v, 0, &s) == 0);
    CHECK(s.units == 16 && s.gate_rows == 64 && s.chunks == 8 && s.slots == 1 && s.registers == 64);
    /* the baseline: two h buffers and the pre-activations [rows][gate_rows + 4] */
    CHECK(s.smem_bytes == 4u * (2 * 32 * 128 + 32 * (64 + 4)));
    CHECK(spk_cluster_variant_derive(&v, 1, &s) == 0 && s.smem_bytes == 4u * (2 * 128 + 68));
    v = variant(256, SPK_PUSH_SCALAR, 8, 0, 0, 0); /* 1024 threads would cap registers at 64: chunks 4 */
    CHECK(v.threads == 512 && v.min_blocks == 1 && spk_cluster_variant_derive(&v, 0, &s) == 0 && s.chunks == 4);
    v = variant(16, SPK_PUSH_SCALAR, 0, 0, 0, 0);
    CHECK(v.cluster == 8 && v.threads == 32 && spk_cluster_variant_derive(&v, 0, &s) == 0 && s.chunks == 4);
    /* direct pushes: no pre-activations, h padded to whole row groups, 16 bytes of mbarriers a phase */
    spk_cluster_variant d = variant(128, SPK_PUSH_DIRECT, 8, 0, 32, 1);
    CHECK(d.row_group == 8 && d.min_blocks == 1);
    CHECK(spk_cluster_variant_derive(&d, 3, &s) == 0 && s.smem_bytes == 16u + 4u * (2 * 8 * 128));
    CHECK(spk_cluster_variant_derive(&d, 16, &s) == 0 && s.smem_bytes == 16u + 4u * (2 * 16 * 128));
    spk_cluster_variant one = variant(128, SPK_PUSH_DIRECT, 8, 0, 1, 1);
    CHECK(one.row_group == 1 && one.min_blocks == 2);
    CHECK(spk_cluster_variant_derive(&one, 1, &s) == 0 && s.smem_bytes == 16u + 4u * (2 * 128));
    /* the gates' stages: 3 stages x 1 slot x 128 threads of float4 */
    spk_cluster_variant ahead = {.hidden = 128, .push = SPK_PUSH_WARP, .cluster = 8, .threads = 128, .gate_block = 4,
                                 .max_tile_rows = 4, .gates_ahead = 3};
    spk_cluster_variant_fit(&ahead);
    CHECK(ahead.row_group == 4 && spk_cluster_variant_derive(&ahead, 4, &s) == 0);
    CHECK(s.smem_bytes == 16u + 4u * 2 * 4 * 128 + 3u * 128 * 16);
    /* two row phases: two more mbarriers */
    spk_cluster_variant halves = {.hidden = 128, .push = SPK_PUSH_DIRECT, .cluster = 2, .threads = 256,
                                  .gate_block = 4, .max_tile_rows = 8, .gates_ahead = 3, .row_phases = 2};
    spk_cluster_variant_fit(&halves);
    CHECK(halves.row_group == 4 && spk_cluster_variant_derive(&halves, 0, &s) == 0);
    spk_cluster_variant whole = halves;
    whole.row_phases = 1;
    spk_cluster_sizes w;
    CHECK(spk_cluster_variant_derive(&whole, 0, &w) == 0 && s.smem_bytes == w.smem_bytes + 16);
    /* a launch taller than the kernel's tile */
    CHECK(spk_cluster_variant_derive(&halves, 9, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "the kernel carries 1 .. 8");
}

/* The PTX of the gates fetched ahead: cp.async into stages and a wait for
 * all but the newest GATES_AHEAD - 1 groups; none at one step ahead. Two row
 * phases: four mbarriers. */
TEST(ptx_of_gates_ahead_and_row_phases)
{
    spk_cluster_variant v = {.hidden = 128, .push = SPK_PUSH_WARP, .cluster = 8, .threads = 128, .gate_block = 4,
                             .max_tile_rows = 4, .gates_ahead = 3};
    spk_cluster_variant_fit(&v);
    size_t bytes;
    const char *code;
    spk_module *m = compile_ptx(&v, &code, &bytes);
    if (m) {
        CHECK(ptx_has(code, bytes, "cp.async.cg.shared.global"));
        CHECK(ptx_has(code, bytes, "cp.async.wait_group 2"));
        CHECK(ptx_has(code, bytes, "cp.async.commit_group"));
        spk_module_release(m);
    }
    v.gates_ahead = 1;
    m = compile_ptx(&v, &code, &bytes);
    if (m) {
        CHECK(memmem(code, bytes, "cp.async", 8) == NULL);
        spk_module_release(m);
    }
    spk_cluster_variant halves = {.hidden = 128, .push = SPK_PUSH_DIRECT, .cluster = 2, .threads = 256,
                                  .gate_block = 4, .max_tile_rows = 8, .gates_ahead = 3, .row_phases = 2};
    spk_cluster_variant_fit(&halves);
    spk_cluster_variant whole = halves;
    whole.row_phases = 1;
    size_t one_bytes;
    const char *one_code;
    m = compile_ptx(&halves, &code, &bytes);
    spk_module *m1 = compile_ptx(&whole, &one_code, &one_bytes);
    if (m && m1) {
        CHECK(ptx_count(code, bytes, "mbarrier.init.shared::cta.b64") == 4);
        CHECK(ptx_count(one_code, one_bytes, "mbarrier.init.shared::cta.b64") == 2);
        CHECK(no_block_barrier(code, bytes));
    }
    spk_module_release(m);
    spk_module_release(m1);
}

/* The trimmed and fused cells: fewer floating-point instructions than the
 * reference's. */
TEST(ptx_of_the_cell_forms)
{
    int counts[3] = {0, 0, 0};
    for (int form = 0; form < 3; form++) {
        spk_cluster_variant c = {.hidden = 128, .push = SPK_PUSH_WARP, .cluster = 8, .threads = 128, .gate_block = 4,
                                 .tile_rows = 1, .gates_ahead = 2, .cell = form};
        spk_cluster_variant_fit(&c);
        size_t bytes;
        const char *code;
        spk_module *m = compile_ptx(&c, &code, &bytes);
        if (m) {
            counts[form] = ptx_count(code, bytes, ".f32 \t%f") + ptx_count(code, bytes, "fma.rn.f32") +
                           ptx_count(code, bytes, "mul.rn.f32") + ptx_count(code, bytes, "add.rn.f32") +
                           ptx_count(code, bytes, "selp.f32") + ptx_count(code, bytes, "sub.rn.f32");
            spk_module_release(m);
        }
    }
    if (check_verbose())
        fprintf(stderr, "  floating-point PTX instructions: reference %d, trimmed %d, fused %d\n", counts[0],
                counts[1], counts[2]);
    CHECK(counts[1] > 0 && counts[1] < counts[0]);
    CHECK(counts[2] > 0 && counts[2] < counts[1]);
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
    CHECK(spk_cluster_schedule_pick(&s, 1, h, active16, 6, 0) == 0);
    CHECK(s.tile_rows == 1 && s.tiles == 1 && s.clusters == 2 && s.waves == 1);
    /* batch 32 with 16 clusters at once: 8 tiles of 4 rows */
    CHECK(spk_cluster_schedule_pick(&s, 32, h, active16, 6, 0) == 0);
    CHECK(s.tile_rows == 4 && s.tiles == 8 && s.clusters == 16 && s.waves == 1);
    /* batch 256: 16 clusters hold only tiles of 32 rows */
    CHECK(spk_cluster_schedule_pick(&s, 256, h, active16, 6, 0) == 0);
    CHECK(s.tile_rows == 32 && s.tiles == 8 && s.clusters == 16 && s.waves == 1);
    /* batch 1000: nothing fits at once; the largest height, in waves */
    CHECK(spk_cluster_schedule_pick(&s, 1000, h, active16, 6, 0) == 0);
    CHECK(s.tile_rows == 32 && s.tiles == 32 && s.clusters == 64 && s.waves == 4);
    /* a forced height, even past what fits */
    CHECK(spk_cluster_schedule_pick(&s, 33, h, active16, 6, 8) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 5 && s.clusters == 10);
    CHECK(spk_cluster_schedule_pick(&s, 33, h, active16, 6, 3) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "tile_rows 3");
    /* occupancy that shrinks with the tile's shared memory */
    int64_t shrinking[6] = {33, 33, 33, 16, 16, 0};
    CHECK(spk_cluster_schedule_pick(&s, 64, h, shrinking, 6, 0) == 0);
    CHECK(s.tile_rows == 4 && s.clusters == 32);
    CHECK(spk_cluster_schedule_pick(&s, 64, h, shrinking, 6, 32) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "not one cluster");
}

TEST(plans_refuse_bad_input_before_the_device)
{
    spk_stack_plan_options o = {.family = &spk_cluster_kernels};
    CHECK(spk_stack_plan_new(&o) == NULL); /* no layers */
}

int main(void)
{
    use_fresh_cache();
    RUN(baseline_variants_compile_for_sm90_without_spills);
    RUN(direct_push_option_sets_compile_without_spills);
    RUN(ptx_of_the_baseline);
    RUN(ptx_of_the_direct_and_warp_pushes);
    RUN(static_asserts_reject_what_the_check_rejects);
    RUN(option_table_checks_and_messages);
    RUN(options_left_out_take_the_batch_default);
    RUN(the_batch_table);
    RUN(fit_and_shared_memory);
    RUN(ptx_of_gates_ahead_and_row_phases);
    RUN(step_variants_compile_without_spills);
    RUN(ptx_of_the_cell_forms);
    RUN(tile_height_is_the_smallest_whose_clusters_all_run_at_once);
    RUN(plans_refuse_bad_input_before_the_device);
    return CHECK_SUMMARY();
}
