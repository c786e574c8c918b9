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

/* {hidden, units, gate_block, threads, row_group, max_tile_rows, tile_rows} */
static const spk_persistent_variant variants[] = {
    {128, 4, 1, 128, 1, 32, 0},  {128, 8, 1, 256, 1, 32, 0},  {128, 4, 1, 64, 1, 16, 0},
    {128, 4, 1, 128, 1, 8, 0},   {64, 4, 1, 128, 1, 32, 0},   {64, 8, 1, 256, 1, 32, 0},
    {256, 4, 1, 128, 1, 16, 0},  {256, 8, 1, 256, 1, 16, 0},  {128, 16, 1, 512, 1, 32, 0}, {128, 16, 1, 256, 1, 16, 0}, {256, 16, 1, 512, 1, 16, 0},
    /* row groups (reduce-scatter), one gate row a thread */
    {128, 16, 1, 512, 8, 32, 0}, {128, 16, 1, 512, 4, 32, 0}, {128, 16, 1, 512, 8, 16, 0},
    {128, 8, 1, 256, 8, 32, 0},  {128, 4, 1, 128, 8, 32, 0},  {64, 8, 1, 256, 8, 32, 0},   {256, 16, 1, 512, 8, 16, 0},
    /* gate blocks: a unit's four gate rows per thread */
    {128, 16, 4, 128, 8, 32, 0}, {128, 16, 4, 128, 8, 16, 0}, {128, 32, 4, 256, 8, 16, 0},
    {128, 32, 4, 256, 8, 32, 0}, {128, 8, 4, 64, 8, 32, 0},   {128, 8, 4, 64, 8, 16, 0},
    {128, 4, 4, 32, 8, 32, 0},   {128, 16, 4, 128, 4, 16, 0}, {64, 16, 4, 128, 8, 32, 0},  {256, 16, 4, 128, 8, 16, 0}, {256, 32, 4, 256, 8, 16, 0},
};
#define NVARIANTS (int)(sizeof variants / sizeof *variants)

/* The plain variant: hidden 128, units 4, one gate row a thread, 128 threads, row groups of 1, 32 rows. */
static spk_persistent_variant plain(void)
{
    spk_persistent_variant v = {.hidden = 128, .units = 4, .gate_block = 1, .threads = 128, .row_group = 1,
                                .max_tile_rows = 32};
    return v;
}

static void use_fresh_cache(void)
{
    setenv("SPK_CACHE_DIR", check_scratch_dir("kernel-compile"), 1);
    spk_cache_reset();
}

/* ptxas's line "N bytes stack frame, N bytes spill stores, N bytes spill loads"
 * of a log compiled with -v, copied into `line`: the first entry of the file
 * that uses local memory, else the recurrence entry's (which must be there). */
static bool recurrence_report(const char *log, char *line, size_t size)
{
    if (!strstr(log, "Compiling entry function 'spk_lstm_recurrence'"))
        return false;
    const char *chosen = NULL;
    for (const char *entry = strstr(log, "Compiling entry function '"); entry;
         entry = strstr(entry + 1, "Compiling entry function '")) {
        const char *frame = strstr(entry, "bytes stack frame");
        if (!frame)
            return false;
        const char *start = frame;
        while (start > entry && start[-1] != '.' && start[-1] != '\n')
            start--;
        const char *end = strchr(frame, '\n');
        char text[256];
        snprintf(text, sizeof text, "%.*s", end ? (int)(end - start) : (int)strlen(start), start);
        const bool clean = strstr(text, " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") != NULL;
        if (!clean || (!chosen && strncmp(entry, "Compiling entry function 'spk_lstm_recurrence'", 46) == 0))
            chosen = start;
        if (!clean)
            break;
    }
    if (!chosen)
        return false;
    const char *end = strchr(chosen, '\n');
    snprintf(line, size, "%.*s", end ? (int)(end - chosen) : (int)strlen(chosen), chosen);
    return true;
}

/* Compiles a variant (or its trace build) with ptxas's verbose report, uncached. */
static spk_module *compile_verbose(const spk_persistent_variant *v, const char *arch, bool trace)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/lstm_recurrence.cu", spk_kernel_dir());
    spk_define defines[SPK_KERNEL_OPTIONS_MAX + 1];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    int n = spk_kernel_defines(&spk_persistent_family, v, defines, text);
    defines[n] = (spk_define){"SPK_DEBUG_TRACE", "1"};
    const char *options[] = {"--ptxas-options=-v"};
    spk_compile_options o = {0};
    o.file = path;
    o.defines = defines;
    o.ndefines = n + (trace ? 1 : 0);
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
                    fprintf(stderr, "  variant %d (units %d threads %d) %s trace %d:%s\n", i,
                            variants[i].units, variants[i].threads, arches[a], trace, line);
                spk_module_release(m);
            }
        }
    }
}

/* The trace build adds three kernel parameters; the normal build has none of them. */
TEST(trace_code_only_in_the_trace_build)
{
    spk_persistent_variant v = plain();
    spk_module *normal = spk_persistent_variant_compile(&v, SPK_BUILD_PLAIN, "compute_90");
    spk_module *traced = spk_persistent_variant_compile(&v, SPK_BUILD_TRACE, "compute_90");
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
    spk_persistent_variant v = spk_persistent_variant_for_batch(128, 1);
    CHECK(v.units == 4 && v.threads == 128 && v.max_tile_rows == 32);
    v = spk_persistent_variant_for_batch(128, 32);
    CHECK(v.units == 4 && v.threads == 128 && v.row_group == 8);
    v = spk_persistent_variant_for_batch(128, 64);
    CHECK(v.units == 16 && v.gate_block == 4 && v.threads == 128);
    v = spk_persistent_variant_for_batch(128, 256);
    CHECK(v.units == 8 && v.gate_block == 4 && v.threads == 64);
    /* every hidden size of the fixtures too: the rows were measured at 128 */
    int hiddens[] = {16, 32, 64, 128, 256};
    int64_t batches[] = {1, 2, 4, 8, 33, 64, 256, 4096};
    for (int h = 0; h < 5; h++)
        for (int b = 0; b < 8; b++) {
            v = spk_persistent_variant_for_batch(hiddens[h], batches[b]);
            CHECK(v.hidden == hiddens[h]);
            CHECK(spk_persistent_variant_check(&v, NULL) == 0);
        }
}

TEST(every_variant_compiles_for_sm80_and_sm90)
{
    const char *arches[] = {"sm_80", "sm_90", "compute_90"};
    for (int i = 0; i < NVARIANTS; i++) {
        CHECK(spk_persistent_variant_check(&variants[i], NULL) == 0);
        for (int a = 0; a < 3; a++) {
            spk_module *m = spk_persistent_variant_compile(&variants[i], SPK_BUILD_PLAIN, arches[a]);
            if (!m) {
                fprintf(stderr, "  variant %d (hidden %d units %d threads %d rows %d) %s: %s\n", i,
                        variants[i].hidden, variants[i].units, variants[i].threads, variants[i].max_tile_rows, arches[a],
                        spk_last_error());
                CHECK(m != NULL);
                continue;
            }
            size_t bytes = 0;
            const char *code = spk_module_code(m, &bytes);
            CHECK(code != NULL && bytes > 0);
            CHECK(strcmp(spk_module_arch(m), arches[a]) == 0);
            if (spk_module_is_ptx(m)) {
                /* Both entries are extern "C", the exchange publishes 64-bit relaxed words and
                 * polls them in 16-byte pairs, and ex2.approx is the exponential. */
                CHECK(memmem(code, bytes, ".entry spk_lstm_recurrence", 26) != NULL);
                CHECK(memmem(code, bytes, ".entry spk_lstm_clear", 21) != NULL);
                CHECK(memmem(code, bytes, "ex2.approx.ftz.f32", 18) != NULL);
                CHECK(memmem(code, bytes, "st.relaxed.gpu.global.u64", 25) != NULL);
                CHECK(memmem(code, bytes, "ld.relaxed.gpu.global.v2.u64", 28) != NULL);
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
        spk_persistent_variant v = {.hidden = atoi(bad[i].hidden), .units = atoi(bad[i].units),
                                    .gate_block = atoi(bad[i].gate_block), .threads = atoi(bad[i].threads),
                                    .row_group = atoi(bad[i].row_group), .max_tile_rows = atoi(bad[i].rows)};
        CHECK(spk_persistent_variant_check(&v, NULL) != 0);
    }
}

TEST(geometry_is_derived_from_the_variant)
{
    spk_persistent_geometry g;
    spk_persistent_variant v = plain();
    CHECK(spk_persistent_variant_check(&v, &g) == 0);
    CHECK(g.groups == 32 && g.gate_rows == 16 && g.chunks == 8);
    CHECK(g.state_tile == 2 * 32 * 128); /* two parity slots of 32 rows */
    CHECK(g.smem_bytes == 2 * 32 * 128 * 4);
    spk_persistent_variant v8 = {128, 8, 1, 256, 1, 32, 0};
    CHECK(spk_persistent_variant_check(&v8, &g) == 0);
    CHECK(g.groups == 16 && g.gate_rows == 32 && g.chunks == 8);
    spk_persistent_variant v64 = {128, 4, 1, 64, 1, 16, 0};
    CHECK(spk_persistent_variant_check(&v64, &g) == 0);
    CHECK(g.chunks == 4 && g.state_tile == 2 * 16 * 128);
    spk_persistent_variant bad = {128, 4, 1, 64, 1, 32, 0};
    CHECK(spk_persistent_variant_check(&bad, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.max_tile_rows");
    /* gate blocks: 16 units x 8 chunks = 128 threads, up to 4 rows per lane */
    spk_persistent_variant b16 = {128, 16, 4, 128, 8, 32, 0};
    CHECK(spk_persistent_variant_check(&b16, &g) == 0);
    CHECK(g.groups == 8 && g.gate_rows == 64 && g.chunks == 8 && g.state_tile == 2 * 32 * 128);
    spk_persistent_variant b32 = {128, 32, 4, 256, 8, 16, 0};
    CHECK(spk_persistent_variant_check(&b32, &g) == 0);
    CHECK(g.groups == 4 && g.chunks == 8);
    b32.gate_block = 1;
    CHECK(spk_persistent_variant_check(&b32, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units");
    spk_persistent_variant b4 = {128, 16, 4, 128, 4, 32, 0};
    CHECK(spk_persistent_variant_check(&b4, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.max_tile_rows");
    spk_persistent_variant rg = {128, 4, 1, 64, 8, 16, 0};
    CHECK(spk_persistent_variant_check(&rg, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.row_group 8 must be at most the 4 chunks");
    spk_persistent_variant gb = {128, 16, 2, 128, 8, 32, 0};
    CHECK(spk_persistent_variant_check(&gb, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.gate_block");
    spk_persistent_variant bad_units = {128, 3, 1, 96, 1, 8, 0};
    CHECK(spk_persistent_variant_check(&bad_units, NULL) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units");
}

TEST(defines_name_every_macro)
{
    spk_persistent_variant v = {.hidden = 256, .units = 8, .gate_block = 1, .threads = 256, .row_group = 1,
                                .max_tile_rows = 16};
    spk_define d[SPK_KERNEL_OPTIONS_MAX];
    char text[SPK_KERNEL_OPTIONS_MAX][16];
    int n = spk_kernel_defines(&spk_persistent_family, &v, d, text);
    const char *expected[][2] = {{"HIDDEN", "256"}, {"UNITS", "8"}, {"GATE_BLOCK", "1"},
                                 {"THREADS", "256"}, {"ROW_GROUP", "1"}, {"MAX_TILE_ROWS", "16"}};
    CHECK(n == 6);
    for (int i = 0; i < n && i < 6; i++)
        CHECK(strcmp(d[i].name, expected[i][0]) == 0 && strcmp(d[i].value, expected[i][1]) == 0);
    /* options out of range, with the table's messages */
    spk_kernel_choice c = {0};
    int units = spk_kernel_option_index(&spk_persistent_family, "units");
    CHECK(spk_kernel_choice_set_int(&spk_persistent_family, &c, units, 5) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units must be 4, 8, 16 or 32");
    CHECK(spk_kernel_option_index(&spk_persistent_family, "gather") < 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel: unknown option 'gather' (known: hidden, units,");
}

/* Options left out take the batch's default: all of it when none is
 * given; the fitted sizes the row's while what they follow is. */
TEST(options_left_out_take_the_batch_default)
{
    spk_kernel_choice none = {0};
    spk_persistent_variant v;
    for (int64_t batch = 1; batch <= 4096; batch = batch * 3 + 1) {
        spk_persistent_variant row = spk_persistent_variant_for_batch(128, batch);
        CHECK(spk_persistent_variant_resolve(128, batch, &none, &v) == 0 && memcmp(&row, &v, sizeof v) == 0);
    }
    /* batch 64 (16 units, gate blocks, row groups of 8): units 4 given keeps the gate blocks, refits the rest */
    spk_kernel_choice c = {0};
    CHECK(spk_kernel_choice_set_int(&spk_persistent_family, &c, spk_kernel_option_index(&spk_persistent_family,
                                                                                        "units"), 4) == 0);
    CHECK(spk_persistent_variant_resolve(128, 64, &c, &v) == 0);
    CHECK(v.units == 4 && v.gate_block == 4 && v.threads == 32 && v.row_group == 8 && v.max_tile_rows == 32);
    /* units 32 at batch 1 (one gate row a thread): the gate blocks it needs */
    spk_kernel_choice w = {0};
    CHECK(spk_kernel_choice_set_int(&spk_persistent_family, &w, spk_kernel_option_index(&spk_persistent_family,
                                                                                        "units"), 32) == 0);
    CHECK(spk_persistent_variant_resolve(128, 1, &w, &v) == 0);
    CHECK(v.units == 32 && v.gate_block == 4);
    /* an explicit contradiction: the rule's message */
    CHECK(spk_kernel_choice_set_int(&spk_persistent_family, &w, spk_kernel_option_index(&spk_persistent_family,
                                                                                        "gate_block"), 1) == 0);
    CHECK(spk_persistent_variant_resolve(128, 1, &w, &v) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "kernel.units 32 needs kernel.gate_block 4");
}

/* What a script leaves out: threads, the row group and the tile rows of a layout. */
TEST(fit_fills_threads_row_group_and_tile_rows)
{
    spk_persistent_variant v = plain();
    v.units = 16;
    v.gate_block = 4;
    v.row_group = v.threads = v.max_tile_rows = 0;
    spk_persistent_variant_fit(&v);
    CHECK(v.threads == 128 && v.row_group == 8 && v.max_tile_rows == 32);
    CHECK(spk_persistent_variant_check(&v, NULL) == 0);
    v = plain();
    v.units = 4;
    v.gate_block = 4;
    v.row_group = 4;
    v.threads = v.max_tile_rows = 0;
    spk_persistent_variant_fit(&v);
    CHECK(v.threads == 32 && v.row_group == 4 && v.max_tile_rows == 16);
    CHECK(spk_persistent_variant_check(&v, NULL) == 0);
    v = plain();
    v.units = 16;
    v.row_group = v.threads = v.max_tile_rows = 0;
    spk_persistent_variant_fit(&v);
    CHECK(v.threads == 512 && v.row_group == 1 && v.max_tile_rows == 32);
    v = plain();
    v.hidden = 256;
    v.units = 32;
    v.gate_block = 4;
    v.row_group = v.threads = v.max_tile_rows = 0;
    spk_persistent_variant_fit(&v);
    CHECK(v.threads == 256 && v.row_group == 8 && v.max_tile_rows == 24);
    CHECK(spk_persistent_variant_check(&v, NULL) == 0);
}

TEST(heights_are_8_16_32_within_the_variant)
{
    int64_t h[SPK_SCHEDULE_MAX_HEIGHTS];
    spk_persistent_variant v = plain();
    CHECK(spk_persistent_variant_heights(&v, h) == 3 && h[0] == 8 && h[1] == 16 && h[2] == 32);
    v.max_tile_rows = 16;
    CHECK(spk_persistent_variant_heights(&v, h) == 2 && h[0] == 8 && h[1] == 16);
    v.max_tile_rows = 12;
    CHECK(spk_persistent_variant_heights(&v, h) == 2 && h[0] == 8 && h[1] == 12);
    v.max_tile_rows = 4;
    CHECK(spk_persistent_variant_heights(&v, h) == 1 && h[0] == 4);
}

TEST(schedule_fits_capacity_and_variant)
{
    spk_persistent_variant v = plain();
    int64_t h[SPK_SCHEDULE_MAX_HEIGHTS];
    int n = spk_persistent_variant_heights(&v, h);
    spk_schedule s;
    /* Batch 32, capacity 350 -> tile 8, 4 tiles, concurrent. */
    CHECK(spk_schedule_new(&s, 32, 350, 350, 32, h, n) == 0);
    CHECK(s.tile_rows == 8 && s.tiles == 4 && s.concurrent);
    CHECK(spk_persistent_schedule_fits(&s, &v, 350, 350) == 0);
    /* The same schedule on a device that holds fewer blocks is refused before launch. */
    CHECK(spk_persistent_schedule_fits(&s, &v, 200, 200) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "co-resident blocks");
    /* Batch 65, capacity 65: sequential, tile 32, two launches. */
    CHECK(spk_schedule_new(&s, 65, 65, 65, 32, h, n) == 0);
    CHECK(!s.concurrent && s.tile_rows == 32 && s.tiles_per_launch == 2);
    CHECK(spk_persistent_schedule_fits(&s, &v, 65, 65) == 0);
    /* A tile taller than the variant carries. */
    spk_persistent_variant small = {128, 4, 1, 128, 1, 16, 0};
    CHECK(spk_persistent_schedule_fits(&s, &small, 65, 65) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "tile_rows");
    /* Groups of another variant. */
    spk_persistent_variant v8 = {128, 8, 1, 256, 1, 32, 0};
    CHECK(spk_persistent_schedule_fits(&s, &v8, 65, 65) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "groups");
    /* Concurrent needs a known concurrent capacity. */
    CHECK(spk_schedule_new(&s, 32, 350, 350, 32, h, n) == 0);
    CHECK(spk_persistent_schedule_fits(&s, &v, 350, SPK_SCHEDULE_UNKNOWN) != 0);
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
    RUN(options_left_out_take_the_batch_default);
    RUN(fit_fills_threads_row_group_and_tile_rows);
    RUN(heights_are_8_16_32_within_the_variant);
    RUN(schedule_fits_capacity_and_variant);
    return CHECK_SUMMARY();
}
