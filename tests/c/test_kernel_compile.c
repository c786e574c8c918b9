/* NVRTC compiles every variant of kernels/lstm_recurrence.cu for sm_80 and
 * sm_90 (no GPU needed), the kernel's static_asserts reject what the C checks
 * reject, and the C side's derived geometry and schedule checks. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "cuda/runtime.h"
#include "lstm/persistent.h"

static const spk_lstm_variant variants[] = {
    {128, 4, 128, 32, false, 2, 1, 1},  {128, 8, 256, 32, false, 2, 1, 1},  {128, 4, 64, 16, false, 2, 1, 1},
    {128, 4, 128, 8, false, 2, 1, 1},   {64, 4, 128, 32, false, 2, 1, 1},   {64, 8, 256, 32, false, 2, 1, 1},
    {256, 4, 128, 16, false, 2, 1, 1},  {256, 8, 256, 16, false, 2, 1, 1},  {128, 4, 128, 32, true, 2, 1, 1},
    {128, 4, 128, 32, false, 1, 1, 1},  {128, 8, 256, 32, false, 1, 1, 1},  {128, 4, 128, 32, true, 1, 1, 1},
    {128, 16, 512, 32, false, 2, 1, 1}, {128, 16, 256, 16, false, 2, 1, 1}, {256, 16, 512, 16, false, 2, 1, 1},
    /* row groups (reduce-scatter) in the seed's layout */
    {128, 16, 512, 32, false, 2, 1, 8}, {128, 16, 512, 32, false, 2, 1, 4}, {128, 16, 512, 16, false, 2, 1, 8},
    {128, 8, 256, 32, false, 2, 1, 8},  {128, 4, 128, 32, false, 2, 1, 8},  {128, 4, 128, 32, false, 1, 1, 2},
    {64, 8, 256, 32, false, 2, 1, 8},   {256, 16, 512, 16, false, 2, 1, 8},
    /* gate blocks: a unit's four gate rows per thread */
    {128, 16, 128, 32, false, 2, 4, 8}, {128, 16, 128, 16, false, 2, 4, 8}, {128, 32, 256, 16, false, 2, 4, 8},
    {128, 32, 256, 32, false, 2, 4, 8}, {128, 8, 64, 32, false, 2, 4, 8},   {128, 8, 64, 16, false, 2, 4, 8},
    {128, 4, 32, 32, false, 2, 4, 8},   {128, 16, 128, 16, false, 2, 4, 4}, {128, 16, 128, 32, true, 1, 4, 8},
    {64, 16, 128, 32, false, 2, 4, 8},  {256, 16, 128, 16, false, 2, 4, 8}, {256, 32, 256, 16, false, 2, 4, 8},
};
#define NVARIANTS (int)(sizeof variants / sizeof *variants)

static void use_fresh_cache(void)
{
    static char dir[] = "/tmp/spk-kernel-compile-XXXXXX";
    if (mkdtemp(dir))
        setenv("SPK_CACHE_DIR", dir, 1);
    spk_cache_reset();
}

/* ptxas's line "N bytes stack frame, N bytes spill stores, N bytes spill loads"
 * of the recurrence entry in a log compiled with -v, copied into `line`. */
static bool recurrence_report(const char *log, char *line, size_t size)
{
    const char *entry = strstr(log, "Compiling entry function 'spk_lstm_recurrence'");
    const char *frame = entry ? strstr(entry, "bytes stack frame") : NULL;
    if (!frame)
        return false;
    const char *start = frame, *end = strchr(frame, '\n');
    while (start > entry && start[-1] != '.' && start[-1] != '\n')
        start--;
    size_t n = end ? (size_t)(end - start) : strlen(start);
    snprintf(line, size, "%.*s", (int)n, start);
    return true;
}

/* Compiles a variant (or its trace build) with ptxas's verbose report, uncached. */
static spk_module *compile_verbose(const spk_lstm_variant *v, const char *arch, bool trace)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_recurrence.cu", spk_kernel_dir());
    spk_lstm_variant_defines d;
    spk_lstm_variant_defines_fill(v, &d);
    spk_define defines[SPK_LSTM_VARIANT_DEFINES + 1];
    memcpy(defines, d.defines, sizeof d.defines);
    defines[SPK_LSTM_VARIANT_DEFINES] = (spk_define){"SPK_DEBUG_TRACE", "1"};
    const char *options[] = {"--ptxas-options=-v"};
    spk_compile_options o = {0};
    o.file = path;
    o.defines = defines;
    o.ndefines = SPK_LSTM_VARIANT_DEFINES + (trace ? 1 : 0);
    o.options = options;
    o.noptions = 1;
    o.arch = arch;
    o.no_cache = true;
    return spk_compile(&o);
}

/* No local memory at all (stack frame and spills 0) in any variant or trace
 * build: plans report local bytes as spills and the specs require 0. */
TEST(every_variant_and_trace_build_has_no_local_memory)
{
    const char *arches[] = {"sm_80", "sm_90"};
    for (int i = 0; i < NVARIANTS; i++) {
        for (int a = 0; a < 2; a++) {
            for (int trace = 0; trace < 2; trace++) {
                spk_module *m = compile_verbose(&variants[i], arches[a], trace);
                CHECK(m != NULL);
                if (!m) {
                    fprintf(stderr, "  variant %d %s trace %d: %s\n", i, arches[a], trace, spk_last_error());
                    continue;
                }
                char line[256];
                CHECK(recurrence_report(spk_module_log(m), line, sizeof line));
                bool clean = strstr(line, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") != NULL;
                CHECK(clean);
                if (!clean)
                    fprintf(stderr, "  variant %d (units %d threads %d gather %d) %s trace %d:%s\n", i,
                            variants[i].units, variants[i].threads, variants[i].gather, arches[a], trace, line);
                spk_module_release(m);
            }
        }
    }
}

/* The trace build adds three kernel parameters; the normal build has none of them. */
TEST(trace_code_only_in_the_trace_build)
{
    spk_lstm_variant v = spk_lstm_variant_default();
    spk_module *normal = spk_lstm_variant_compile(&v, "compute_90");
    spk_module *traced = spk_lstm_variant_compile_trace(&v, "compute_90");
    CHECK(normal != NULL && traced != NULL);
    if (normal && traced) {
        size_t nb = 0, tb = 0;
        const char *n = spk_module_code(normal, &nb), *t = spk_module_code(traced, &tb);
        CHECK(memmem(n, nb, "spk_lstm_recurrence_param_12", 28) != NULL);
        CHECK(memmem(n, nb, "spk_lstm_recurrence_param_13", 28) == NULL);
        CHECK(memmem(t, tb, "spk_lstm_recurrence_param_15", 28) != NULL);
        CHECK(memmem(t, tb, "spk_lstm_recurrence_param_16", 28) == NULL);
        CHECK(strcmp(spk_module_key(normal), spk_module_key(traced)) != 0);
    }
    spk_module_release(normal);
    spk_module_release(traced);
}

TEST(trace_requests_are_checked)
{
    int64_t steps[3] = {0, 4, 2};
    spk_lstm_trace t = {.layer = 1, .direction = 1, .count = 3, .steps = steps};
    CHECK(spk_lstm_trace_check(&t, 2, 5) == 0);
    steps[1] = 5; /* time position 6 of 5 */
    CHECK(spk_lstm_trace_check(&t, 2, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "step 6 is outside 1..5");
    steps[1] = -1;
    CHECK(spk_lstm_trace_check(&t, 2, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "step 0 is outside 1..5");
    steps[1] = 1;
    t.layer = 2;
    CHECK(spk_lstm_trace_check(&t, 2, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 3 is outside 1..2");
    t.layer = 0;
    t.direction = 2;
    CHECK(spk_lstm_trace_check(&t, 2, 5) != 0);
    t.direction = 0;
    t.count = 0;
    CHECK(spk_lstm_trace_check(&t, 2, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "1 to 1024");
}

TEST(the_batch_table_gives_valid_variants)
{
    spk_lstm_variant v = spk_lstm_variant_for_batch(128, 1);
    CHECK(v.units == 4 && v.threads == 128 && v.max_tile_rows == 32);
    v = spk_lstm_variant_for_batch(128, 32);
    CHECK(v.units == 4 && v.threads == 128 && v.row_group == 8);
    v = spk_lstm_variant_for_batch(128, 64);
    CHECK(v.units == 16 && v.gate_block == 4 && v.threads == 128 && v.gather == 2);
    v = spk_lstm_variant_for_batch(128, 256);
    CHECK(v.units == 8 && v.gate_block == 4 && v.threads == 64);
    /* every hidden size of the fixtures too: the rows were measured at 128 */
    int hiddens[] = {16, 32, 64, 128, 256};
    int64_t batches[] = {1, 2, 4, 8, 33, 64, 256, 4096};
    for (int h = 0; h < 5; h++)
        for (int b = 0; b < 8; b++) {
            v = spk_lstm_variant_for_batch(hiddens[h], batches[b]);
            CHECK(v.hidden == hiddens[h]);
            CHECK(spk_lstm_variant_check(&v, NULL) == 0);
        }
}

TEST(every_variant_compiles_for_sm80_and_sm90)
{
    const char *arches[] = {"sm_80", "sm_90", "compute_90"};
    for (int i = 0; i < NVARIANTS; i++) {
        CHECK(spk_lstm_variant_check(&variants[i], NULL) == 0);
        for (int a = 0; a < 3; a++) {
            spk_module *m = spk_lstm_variant_compile(&variants[i], arches[a]);
            if (!m) {
                fprintf(stderr, "  variant %d (hidden %d units %d threads %d rows %d acq_rel %d) %s: %s\n", i,
                        variants[i].hidden, variants[i].units, variants[i].threads, variants[i].max_tile_rows,
                        variants[i].acq_rel, arches[a], spk_last_error());
                CHECK(m != NULL);
                continue;
            }
            size_t bytes = 0;
            const char *code = spk_module_code(m, &bytes);
            CHECK(code != NULL && bytes > 0);
            CHECK(strcmp(spk_module_arch(m), arches[a]) == 0);
            if (spk_module_is_ptx(m)) {
                /* Both entries are extern "C", the exchange uses the 64-bit relaxed or
                 * release/acquire accesses, and ex2.approx is the exponential. */
                CHECK(memmem(code, bytes, ".entry spk_lstm_recurrence", 26) != NULL);
                CHECK(memmem(code, bytes, ".entry spk_lstm_clear", 21) != NULL);
                CHECK(memmem(code, bytes, "ex2.approx.ftz.f32", 18) != NULL);
                /* the seed's gather polls single words, the paired one 16-byte pairs */
                const char *st = variants[i].acq_rel ? "st.release.gpu.global.u64" : "st.relaxed.gpu.global.u64";
                const char *ld = variants[i].gather == 1
                                     ? (variants[i].acq_rel ? "ld.acquire.gpu.global.u64" : "ld.relaxed.gpu.global.u64")
                                     : (variants[i].acq_rel ? "ld.acquire.gpu.global.v2.u64"
                                                            : "ld.relaxed.gpu.global.v2.u64");
                CHECK(memmem(code, bytes, st, strlen(st)) != NULL);
                CHECK(memmem(code, bytes, ld, strlen(ld)) != NULL);
            } else {
                CHECK(bytes > 4 && memcmp(code, "\x7f" "ELF", 4) == 0);
                CHECK(memmem(code, bytes, "spk_lstm_recurrence", 19) != NULL);
            }
            spk_module_release(m);
        }
    }
}

/* The kernel's own static_asserts catch a geometry the C check would refuse,
 * so the two stay tied together. */
TEST(kernel_static_asserts_reject_bad_geometry)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_recurrence.cu", spk_kernel_dir());
    struct {
        const char *hidden, *units, *threads, *rows, *gate_block, *row_group, *message;
    } bad[] = {
        {"128", "4", "96", "32", "1", "1", "THREADS"},        /* chunks 6 */
        {"128", "5", "160", "32", "1", "1", "UNITS"},         /* units not 4 or 8 */
        {"128", "4", "128", "33", "1", "1", "MAX_TILE_ROWS"}, /* more rows than a unit's lanes */
        {"256", "4", "128", "32", "1", "1", "shared memory"}, /* two h buffers over 48 KiB */
        {"128", "32", "1024", "32", "1", "1", "UNITS"},       /* 32 units per block without gate blocks */
        {"128", "16", "512", "32", "1", "3", "ROW_GROUP"},    /* not a power of two */
        {"128", "4", "64", "16", "1", "8", "ROW_GROUP"},      /* more rows than the 4 chunks */
        {"128", "16", "128", "32", "4", "4", "MAX_TILE_ROWS"}, /* 4 rows per lane at most: 16 */
        {"128", "16", "128", "32", "2", "8", "GATE_BLOCK"},   /* 2 gate rows per thread: not a layout */
        {"128", "16", "512", "32", "4", "8", "CHUNKS"},       /* 32 chunks */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        spk_define d[6] = {{"HIDDEN", bad[i].hidden},      {"UNITS", bad[i].units},
                           {"THREADS", bad[i].threads},    {"MAX_TILE_ROWS", bad[i].rows},
                           {"GATE_BLOCK", bad[i].gate_block}, {"ROW_GROUP", bad[i].row_group}};
        spk_compile_options o = {0};
        o.file = path;
        o.defines = d;
        o.ndefines = 6;
        o.arch = "sm_90";
        spk_module *m = spk_compile(&o);
        CHECK(m == NULL);
        CHECK_STR_CONTAINS(spk_last_error(), bad[i].message);
        spk_module_release(m);
        spk_lstm_variant v = {atoi(bad[i].hidden), atoi(bad[i].units),      atoi(bad[i].threads),
                              atoi(bad[i].rows),   false, 2, atoi(bad[i].gate_block), atoi(bad[i].row_group)};
        CHECK(spk_lstm_variant_check(&v, NULL) != 0);
    }
}

TEST(geometry_is_derived_from_the_variant)
{
    spk_lstm_geometry g;
    spk_lstm_variant v = spk_lstm_variant_default();
    CHECK(spk_lstm_variant_check(&v, &g) == 0);
    CHECK(g.groups == 32 && g.gate_rows == 16 && g.chunks == 8);
    CHECK(g.state_tile == 2 * 32 * 128); /* the seed's STATE_TILE */
    CHECK(g.smem_bytes == 2 * 32 * 128 * 4);
    spk_lstm_variant v8 = {128, 8, 256, 32, false, 2, 1, 1};
    CHECK(spk_lstm_variant_check(&v8, &g) == 0);
    CHECK(g.groups == 16 && g.gate_rows == 32 && g.chunks == 8);
    spk_lstm_variant v64 = {128, 4, 64, 16, false, 2, 1, 1};
    CHECK(spk_lstm_variant_check(&v64, &g) == 0);
    CHECK(g.chunks == 4 && g.state_tile == 2 * 16 * 128);
    spk_lstm_variant bad = {128, 4, 64, 32, false, 2, 1, 1};
    CHECK(spk_lstm_variant_check(&bad, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.tile_rows");
    /* gate blocks: 16 units x 8 chunks = 128 threads, up to 4 rows per lane */
    spk_lstm_variant b16 = {128, 16, 128, 32, false, 2, 4, 8};
    CHECK(spk_lstm_variant_check(&b16, &g) == 0);
    CHECK(g.groups == 8 && g.gate_rows == 64 && g.chunks == 8 && g.state_tile == 2 * 32 * 128);
    spk_lstm_variant b32 = {128, 32, 256, 16, false, 2, 4, 8};
    CHECK(spk_lstm_variant_check(&b32, &g) == 0);
    CHECK(g.groups == 4 && g.chunks == 8);
    b32.gate_block = 1;
    CHECK(spk_lstm_variant_check(&b32, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units");
    spk_lstm_variant b4 = {128, 16, 128, 32, false, 2, 4, 4};
    CHECK(spk_lstm_variant_check(&b4, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.tile_rows");
    spk_lstm_variant rg = {128, 4, 64, 16, false, 2, 1, 8};
    CHECK(spk_lstm_variant_check(&rg, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.row_group 8 must be at most the 4 chunks");
    spk_lstm_variant gb = {128, 16, 128, 32, false, 2, 2, 8};
    CHECK(spk_lstm_variant_check(&gb, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gate_block");
    spk_lstm_variant bad_units = {128, 3, 96, 8, false, 2, 1, 1};
    CHECK(spk_lstm_variant_check(&bad_units, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units");
}

TEST(defines_name_every_macro)
{
    spk_lstm_variant v = {256, 8, 256, 16, true, 1, 1, 1};
    spk_lstm_variant_defines d;
    spk_lstm_variant_defines_fill(&v, &d);
    CHECK(strcmp(d.defines[0].name, "HIDDEN") == 0 && strcmp(d.defines[0].value, "256") == 0);
    CHECK(strcmp(d.defines[1].name, "UNITS") == 0 && strcmp(d.defines[1].value, "8") == 0);
    CHECK(strcmp(d.defines[2].name, "THREADS") == 0 && strcmp(d.defines[2].value, "256") == 0);
    CHECK(strcmp(d.defines[3].name, "MAX_TILE_ROWS") == 0 && strcmp(d.defines[3].value, "16") == 0);
    CHECK(strcmp(d.defines[4].name, "SPK_ACQ_REL") == 0 && strcmp(d.defines[4].value, "1") == 0);
    CHECK(strcmp(d.defines[5].name, "GATHER") == 0 && strcmp(d.defines[5].value, "1") == 0);
    CHECK(strcmp(d.defines[6].name, "GATE_BLOCK") == 0 && strcmp(d.defines[6].value, "1") == 0);
    CHECK(strcmp(d.defines[7].name, "ROW_GROUP") == 0 && strcmp(d.defines[7].value, "1") == 0);
    spk_lstm_variant g3 = {128, 4, 128, 32, false, 3, 1, 1};
    CHECK(spk_lstm_variant_check(&g3, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gather");
}

/* What a script leaves out: threads, the row group and the tile rows of a layout. */
TEST(fit_fills_threads_row_group_and_tile_rows)
{
    spk_lstm_variant v = spk_lstm_variant_default();
    v.units = 16;
    v.gate_block = 4;
    v.row_group = 0;
    spk_lstm_variant_fit(&v, false, false);
    CHECK(v.threads == 128 && v.row_group == 8 && v.max_tile_rows == 32);
    CHECK(spk_lstm_variant_check(&v, NULL) == 0);
    v = spk_lstm_variant_default();
    v.units = 4;
    v.gate_block = 4;
    v.row_group = 4;
    spk_lstm_variant_fit(&v, false, false);
    CHECK(v.threads == 32 && v.row_group == 4 && v.max_tile_rows == 16);
    CHECK(spk_lstm_variant_check(&v, NULL) == 0);
    v = spk_lstm_variant_default();
    v.units = 16;
    v.row_group = 0;
    spk_lstm_variant_fit(&v, false, false);
    CHECK(v.threads == 512 && v.row_group == 1 && v.max_tile_rows == 32);
    v = spk_lstm_variant_default();
    v.hidden = 256;
    v.units = 32;
    v.gate_block = 4;
    v.row_group = 0;
    spk_lstm_variant_fit(&v, false, false);
    CHECK(v.threads == 256 && v.row_group == 8 && v.max_tile_rows == 24);
    CHECK(spk_lstm_variant_check(&v, NULL) == 0);
}

TEST(heights_follow_the_seed_within_the_variant)
{
    int64_t h[SPK_SCHEDULE_MAX_HEIGHTS];
    spk_lstm_variant v = spk_lstm_variant_default();
    CHECK(spk_lstm_variant_heights(&v, h) == 3 && h[0] == 8 && h[1] == 16 && h[2] == 32);
    v.max_tile_rows = 16;
    CHECK(spk_lstm_variant_heights(&v, h) == 2 && h[0] == 8 && h[1] == 16);
    v.max_tile_rows = 12;
    CHECK(spk_lstm_variant_heights(&v, h) == 2 && h[0] == 8 && h[1] == 12);
    v.max_tile_rows = 4;
    CHECK(spk_lstm_variant_heights(&v, h) == 1 && h[0] == 4);
}

TEST(schedule_fits_capacity_and_variant)
{
    spk_lstm_variant v = spk_lstm_variant_default();
    int64_t h[SPK_SCHEDULE_MAX_HEIGHTS];
    int n = spk_lstm_variant_heights(&v, h);
    spk_schedule s;
    /* The seed's vectors: batch 32, capacity 350 -> tile 8, 4 tiles, concurrent. */
    CHECK(spk_schedule_new(&s, 32, 350, 350, 32, h, n) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 4 && s.concurrent);
    CHECK(spk_lstm_schedule_fits(&s, &v, 350, 350) == 0);
    /* The same schedule on a device that holds fewer blocks is refused before launch. */
    CHECK(spk_lstm_schedule_fits(&s, &v, 200, 200) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "co-resident blocks");
    /* Batch 65, capacity 65: sequential, tile 32, two launches. */
    CHECK(spk_schedule_new(&s, 65, 65, 65, 32, h, n) == 0);
    CHECK(!s.concurrent && s.tile_rows == 32 && s.tiles_per_launch == 2);
    CHECK(spk_lstm_schedule_fits(&s, &v, 65, 65) == 0);
    /* A tile taller than the variant carries. */
    spk_lstm_variant small = {128, 4, 128, 16, false, 2, 1, 1};
    CHECK(spk_lstm_schedule_fits(&s, &small, 65, 65) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "tile_rows");
    /* Groups of another variant. */
    spk_lstm_variant v8 = {128, 8, 256, 32, false, 2, 1, 1};
    CHECK(spk_lstm_schedule_fits(&s, &v8, 65, 65) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "groups");
    /* Concurrent needs a known concurrent capacity. */
    CHECK(spk_schedule_new(&s, 32, 350, 350, 32, h, n) == 0);
    CHECK(spk_lstm_schedule_fits(&s, &v, 350, SPK_SCHEDULE_UNKNOWN) != 0);
}

int main(void)
{
    use_fresh_cache();
    RUN(every_variant_compiles_for_sm80_and_sm90);
    RUN(every_variant_and_trace_build_has_no_local_memory);
    RUN(trace_code_only_in_the_trace_build);
    RUN(trace_requests_are_checked);
    RUN(the_batch_table_gives_valid_variants);
    RUN(kernel_static_asserts_reject_bad_geometry);
    RUN(geometry_is_derived_from_the_variant);
    RUN(defines_name_every_macro);
    RUN(fit_fills_threads_row_group_and_tile_rows);
    RUN(heights_follow_the_seed_within_the_variant);
    RUN(schedule_fits_capacity_and_variant);
    return CHECK_SUMMARY();
}
