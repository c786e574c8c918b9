/* Step timelines without a GPU: the checks of stages and selections, the
 * launch arguments, the decode of synthetic buffers (known clocks, rates and
 * globaltimer quanta: the alignment must recover the true times), and NVRTC:
 * kernels/spk_timeline.cuh compiles for sm_90 with SPK_TIMELINE on and off,
 * a build with it off is the kernel without its timeline lines instruction
 * for instruction (PTX and cubin), and a build with it on has the same
 * floating-point instructions, for every kernel in kernels/ that includes it;
 * and the built-in kernels' timeline builds: every per-batch default and
 * each kernel form compiles instrumented with the plain build's
 * floating-point instructions, their stage lists, and the plans' checks of a
 * selection. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/file.h"
#include "cuda/runtime.h"
#include "cuda/timeline.h"
#include "cuda/timeline_demo.h"
#include "lstm/cluster.h"
#include "lstm/stack_plan.h"
#include "lstm/persistent.h"

#define MAGIC 0x31454d49544b5053ull

static const char *const three_names[] = {"wait", "dot", "publish"};
static const int three_waits[] = {2, -1, -1};
static const spk_timeline_stages three = {3, three_names, three_waits};

static void use_fresh_cache(void)
{
    setenv("SPK_CACHE_DIR", check_scratch_dir("timeline-test"), 1);
    spk_cache_reset();
}

TEST(stages_are_checked)
{
    CHECK(spk_timeline_stages_check(&three) == 0);
    const char *dup[] = {"a", "b", "a"};
    spk_timeline_stages s = {3, dup, NULL};
    CHECK(spk_timeline_stages_check(&s) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "stages 1 and 3 are both named 'a'");
    const char *reserved[] = {"step"};
    s = (spk_timeline_stages){1, reserved, NULL};
    CHECK(spk_timeline_stages_check(&s) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "names a column of its own");
    const char *empty[] = {""};
    s = (spk_timeline_stages){1, empty, NULL};
    CHECK(spk_timeline_stages_check(&s) != 0);
    s = (spk_timeline_stages){0, three_names, NULL};
    CHECK(spk_timeline_stages_check(&s) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "1 to 31 stages");
    int bad_wait[] = {3, -1, -1};
    s = (spk_timeline_stages){3, three_names, bad_wait};
    CHECK(spk_timeline_stages_check(&s) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "waits for stage 4");
}

TEST(selections_are_checked_against_the_kernel)
{
    spk_timeline_selection sel = {0, 0, 10, 20, 0, 8, 0};
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) == 0);
    sel.layer = 4;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 5 is past the last layer, 4");
    sel.layer = 0;
    sel.first_step = 580;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "step 600 is past the last step, 589");
    sel.first_step = 0;
    sel.first_block = 4;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "block 11 is past the last block of a direction, 7");
    sel.first_block = 0;
    sel.warp = 4;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "warp 4 is past the last warp of a block, 3");
    sel.warp = 0;
    sel.direction = 2;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    sel.direction = 1;
    sel.steps = 0;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "timeline.step_range");
    sel.steps = 1;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 8, 4) == 0);
    /* the buffer's size */
    spk_timeline_selection s2 = {0, 0, 0, 5, 0, 3, 0};
    CHECK(spk_timeline_words(&s2, 3) == SPK_TIMELINE_HEADER_WORDS + 2 * 3 + 3 * 5 * 4 * 2);
}

TEST(launch_arguments_follow_the_parameters)
{
    spk_timeline_selection sel = {2, 1, 100, 16, 8, 8, 3};
    int buffer;
    spk_arg a[SPK_TIMELINE_ARGS];
    spk_timeline_selection_args(&sel, &buffer, 2, 0, a);
    CHECK(a[0].kind == SPK_ARG_PTR && a[0].v.ptr == &buffer);
    CHECK(a[1].kind == SPK_ARG_I32 && a[1].v.i32 == 1);
    CHECK(a[2].v.i32 == 100 && a[3].v.i32 == 16);
    CHECK(a[4].v.i32 == 8 && a[5].v.i32 == 8 && a[6].v.i32 == 3);
    /* a launch whose block 0 is block 12 of the direction: slots 4..7 of the selection */
    spk_timeline_selection_args(&sel, &buffer, 2, 12, a);
    CHECK(a[0].v.ptr == &buffer && a[4].v.i32 == -4);
    /* another layer's launch records nothing */
    spk_timeline_selection_args(&sel, &buffer, 1, 0, a);
    CHECK(a[0].v.ptr == NULL);
    /* no timeline at all */
    spk_timeline_args(NULL, 0, 0, a);
    CHECK(a[0].kind == SPK_ARG_PTR && a[0].v.ptr == NULL);
    for (int i = 1; i < SPK_TIMELINE_ARGS; i++)
        CHECK(a[i].kind == SPK_ARG_I32);
}

/* ---- synthetic buffers ----------------------------------------------------- */

/* A small deterministic generator (the test's own, so the data never changes). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

typedef struct synthetic {
    spk_tensor *raw;
    double *truth; /* [blocks][steps][marks]: true ns after base */
    uint64_t base;
    int blocks, steps, marks;
} synthetic;

/* A recording of `blocks` blocks x `steps` steps with `stages` stages: every
 * block's clock64 starts at its own origin, runs at `ghz` cycles a ns, and
 * the globaltimer is the true time rounded down to `quantum` ns. Marks where
 * skip(b, k, m) is true stay unstamped. */
static bool every_mark_reads_the_globaltimer;
static bool no_anchors; /* a buffer whose SETUP wrote no anchor */

static synthetic make_synthetic(int blocks, int steps, int stages, double ghz, uint64_t quantum,
                                bool (*skip)(int b, int k, int m))
{
    synthetic s = {0};
    s.blocks = blocks, s.steps = steps, s.marks = stages + 1;
    s.base = 1764580000000000000ull; /* an epoch-like globaltimer */
    int64_t words = SPK_TIMELINE_HEADER_WORDS + 2 * blocks + (int64_t)blocks * steps * s.marks * 2;
    s.raw = spk_tensor_new(SPK_U64, 1, &words);
    uint64_t *w = spk_tensor_data(s.raw);
    memset(w, 0, (size_t)words * sizeof *w);
    w[0] = MAGIC, w[1] = (uint64_t)s.marks, w[2] = 0, w[3] = 0, w[4] = (uint64_t)steps, w[5] = 0;
    w[6] = (uint64_t)blocks, w[7] = 0, w[8] = 0, w[9] = (uint64_t)s.marks;
    s.truth = calloc((size_t)blocks * steps * s.marks, sizeof *s.truth);
    for (int b = 0; b < blocks; b++) {
        double t = 5000 + 37.0 * b + 400 * uniform(); /* each block starts a little apart */
        uint64_t clock0 = 1000000000000ull * (uint64_t)(b + 1) + (uint64_t)(uniform() * 1e9);
        if (!no_anchors) { /* the anchor, written at SETUP a while before the first recorded step */
            double t0 = t - 3000 - 2000 * uniform();
            uint64_t *anchor = w + SPK_TIMELINE_HEADER_WORDS + 2 * b;
            anchor[0] = (s.base + (uint64_t)floor(t0)) / quantum * quantum;
            anchor[1] = clock0 + (uint64_t)llround(t0 * ghz);
        }
        for (int k = 0; k < steps; k++)
            for (int m = 0; m < s.marks; m++) {
                t += 20 + 300 * uniform();
                s.truth[((size_t)b * steps + k) * s.marks + m] = t;
                if (skip && skip(b, k, m))
                    continue;
                uint64_t *at = w + SPK_TIMELINE_HEADER_WORDS + 2 * blocks + (((size_t)b * steps + k) * s.marks + m) * 2;
                uint64_t now = s.base + (uint64_t)floor(t);
                /* the kernel reads the globaltimer where a step starts (SPK_TIMELINE_START) */
                at[0] = m == 0 || every_mark_reads_the_globaltimer ? now / quantum * quantum : 0;
                at[1] = clock0 + (uint64_t)llround(t * ghz);
            }
    }
    return s;
}

static void free_synthetic(synthetic *s)
{
    spk_tensor_free(s->raw);
    free(s->truth);
}

static double cell(const spk_tensor *t, int64_t r, int64_t c)
{
    return ((const double *)spk_tensor_data(t))[r * t->shape[1] + c];
}

/* The aligned times against the truth (both from the same origin): the
 * largest error, in ns. */
static double alignment_error(const synthetic *s, const spk_tensor *t, const spk_timeline_clock *clock)
{
    double worst = 0;
    for (int64_t r = 0; r < t->shape[0]; r++) {
        int b = (int)cell(t, r, 0), k = (int)cell(t, r, 1) - 1;
        for (int m = 0; m < s->marks; m++) {
            double aligned = cell(t, r, 2 + m);
            if (isnan(aligned))
                continue;
            double truth = s->truth[((size_t)b * s->steps + k) * s->marks + m] - (double)(clock->origin - s->base);
            worst = fmax(worst, fabs(aligned - truth));
        }
    }
    return worst;
}

TEST(decode_recovers_the_true_times)
{
    static const uint64_t quanta[] = {1, 32, 1000, 1, 32, 1000};
    for (size_t i = 0; i < sizeof quanta / sizeof *quanta; i++) {
        every_mark_reads_the_globaltimer = i >= 3;
        no_anchors = i == 2; /* one case as an older buffer would be: the steps' readings alone */
        synthetic s = make_synthetic(8, 64, 3, 1.98, quanta[i], NULL);
        spk_timeline_clock clock;
        spk_tensor *t = spk_timeline_decode(s.raw, &three, 0, &clock);
        CHECK(t != NULL);
        if (!t) {
            fprintf(stderr, "  %s\n", spk_last_error());
            free_synthetic(&s);
            continue;
        }
        CHECK(t->dtype == SPK_F64 && t->shape[0] == 8 * 64 && t->shape[1] == spk_timeline_column_count(&three));
        CHECK(clock.fitted && clock.blocks == 8 && clock.records == 8 * 64 && clock.stamps == 8 * 64 * 4);
        CHECK(clock.blocks == 8);
        CHECK_NEAR(clock.cycles_per_ns, 1.98, 1.98 * (quanta[i] == 1 ? 3e-6 : 2e-4));
        CHECK(clock.quantum_ns == (double)quanta[i]);
        double error = alignment_error(&s, t, &clock);
        fprintf(stderr, "  quantum %4llu ns, globaltimer at %s: rate %.6f cycles/ns, aligned within %.2f ns of the "
                        "truth, residual %.2f ns\n", (unsigned long long)quanta[i],
                every_mark_reads_the_globaltimer ? "every mark" : "each start", clock.cycles_per_ns, error,
                clock.residual_ns);
        /* within a nanosecond or two where the timer has ns steps, a small part of a step otherwise */
        CHECK(error <= fmax(2.0, 0.03 * (double)quanta[i]));
        /* rows: block and step, cycles from the block's first stamp, globaltimer from the origin */
        CHECK(cell(t, 0, 0) == 0 && cell(t, 0, 1) == 1 && cell(t, 64, 0) == 1 && cell(t, 64, 1) == 1);
        CHECK(cell(t, 0, 2 + 4) == 0);                   /* start_cycles of block 0's first step */
        CHECK(cell(t, 511, 1) == 64 && cell(t, 511, 0) == 7);
        double min_global = INFINITY;
        for (int64_t r = 0; r < t->shape[0]; r++)
            min_global = fmin(min_global, cell(t, r, 2 + 8));
        CHECK(min_global == 0);
        /* globaltimer columns: NaN at the marks the kernel does not read it */
        CHECK(isnan(cell(t, 0, 2 + 8 + 1)) == !every_mark_reads_the_globaltimer);
        CHECK(!isnan(cell(t, 0, 2 + 1)));
        spk_tensor_free(t);
        free_synthetic(&s);
    }
    every_mark_reads_the_globaltimer = no_anchors = false;
}

TEST(decode_with_a_given_rate)
{
    synthetic s = make_synthetic(2, 16, 3, 1.755, 1, NULL);
    spk_timeline_clock clock;
    spk_tensor *t = spk_timeline_decode(s.raw, &three, 1.755, &clock);
    CHECK(t != NULL && !clock.fitted && clock.cycles_per_ns == 1.755);
    if (t)
        CHECK(alignment_error(&s, t, &clock) <= 1.0);
    spk_tensor_free(t);
    free_synthetic(&s);
}

TEST(decode_one_step_through_the_anchors)
{
    /* one recorded step: one reading a block besides its anchor */
    every_mark_reads_the_globaltimer = false;
    synthetic s = make_synthetic(4, 1, 3, 1.98, 32, NULL);
    spk_timeline_clock clock;
    spk_tensor *t = spk_timeline_decode(s.raw, &three, 0, &clock);
    CHECK(t != NULL && clock.fitted);
    if (t) {
        CHECK(t->shape[0] == 4);
        CHECK_NEAR(clock.cycles_per_ns, 1.98, 1.98 * 0.02);
        fprintf(stderr, "  one step: rate %.5f cycles/ns, aligned within %.2f ns\n", clock.cycles_per_ns,
                alignment_error(&s, t, &clock));
        CHECK(alignment_error(&s, t, &clock) <= 32);
    }
    spk_tensor_free(t);
    free_synthetic(&s);
    /* without anchors one reading a block fixes no rate */
    no_anchors = true;
    s = make_synthetic(4, 1, 3, 1.98, 32, NULL);
    no_anchors = false;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "the globaltimer did not advance");
    t = spk_timeline_decode(s.raw, &three, 1.98, &clock);
    CHECK(t != NULL && !clock.fitted);
    spk_tensor_free(t);
    free_synthetic(&s);
}

static bool skip_some(int b, int k, int m)
{
    return (b == 1 && k == 3) || (b == 0 && k == 5 && m == 3) || (b == 2);
}

TEST(decode_leaves_unstamped_marks_and_records_out)
{
    synthetic s = make_synthetic(3, 8, 3, 2.0, 1, skip_some);
    spk_timeline_clock clock;
    spk_tensor *t = spk_timeline_decode(s.raw, &three, 0, &clock);
    CHECK(t != NULL);
    if (t) {
        /* block 2 never stamped, block 1 lost step 4: 8 + 7 records */
        CHECK(t->shape[0] == 15 && clock.blocks == 2);
        CHECK(cell(t, 5, 0) == 0 && cell(t, 5, 1) == 6);
        CHECK(isnan(cell(t, 5, 2 + 3)) && isnan(cell(t, 5, 2 + 4 + 3)) && isnan(cell(t, 5, 2 + 8 + 3)));
        CHECK(!isnan(cell(t, 5, 2 + 2)));
        CHECK(cell(t, 8 + 3, 0) == 1 && cell(t, 8 + 3, 1) == 5);
    }
    spk_tensor_free(t);
    free_synthetic(&s);
}

TEST(decode_refuses_what_does_not_match)
{
    spk_timeline_clock clock;
    synthetic s = make_synthetic(2, 4, 3, 2.0, 1, NULL);
    uint64_t *w = spk_tensor_data(s.raw);
    static const char *const two_names[] = {"a", "b"};
    spk_timeline_stages two = {2, two_names, NULL};
    CHECK(spk_timeline_decode(s.raw, &two, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "the buffer holds 4 marks a step, the 2 stages described need 3");
    w[9] = 3;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "the kernel stamps 3 marks a step");
    w[9] = 0;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "the kernel stamped nothing");
    w[9] = 4;
    w[6] = 3;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "needs");
    w[6] = 0;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "a recording has at least one of each");
    w[6] = 2;
    w[0] = 7;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "does not start with a timeline header");
    w[0] = MAGIC;
    CHECK(spk_timeline_decode(s.raw, &three, -1, &clock) == NULL);
    /* a timer that never moves within a block: no rate can be fitted */
    for (int64_t i = SPK_TIMELINE_HEADER_WORDS; i < s.raw->shape[0]; i += 2)
        if (w[i])
            w[i] = s.base;
    CHECK(spk_timeline_decode(s.raw, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "the globaltimer did not advance");
    spk_tensor *t = spk_timeline_decode(s.raw, &three, 2.0, &clock);
    CHECK(t != NULL); /* with a given rate it decodes */
    spk_tensor_free(t);
    /* a block without any globaltimer reading cannot be placed */
    w[SPK_TIMELINE_HEADER_WORDS] = 0; /* block 0's anchor */
    for (int64_t i = SPK_TIMELINE_HEADER_WORDS + 2 * 2; i < SPK_TIMELINE_HEADER_WORDS + 2 * 2 + 4 * 4 * 2; i += 2)
        w[i] = 0;
    CHECK(spk_timeline_decode(s.raw, &three, 2.0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "block 0 stamped clock64 but never the globaltimer");
    spk_tensor *f = spk_tensor_new(SPK_F64, 1, (int64_t[]){20});
    CHECK(spk_timeline_decode(f, &three, 0, &clock) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "contiguous host u64 tensor");
    spk_tensor_free(f);
    free_synthetic(&s);
}

TEST(columns_are_named)
{
    CHECK(spk_timeline_column_count(&three) == 2 + 3 * 4);
    const char *expected[] = {"block", "step", "start", "wait", "dot", "publish", "start_cycles", "wait_cycles",
                              "dot_cycles", "publish_cycles", "start_globaltimer", "wait_globaltimer",
                              "dot_globaltimer", "publish_globaltimer"};
    for (int i = 0; i < 14; i++) {
        char name[64];
        const char *unit, *about;
        CHECK(spk_timeline_column(&three, i, name, sizeof name, &unit, &about) == 0);
        CHECK(strcmp(name, expected[i]) == 0);
        CHECK(strlen(about) > 10);
        CHECK(strcmp(unit, i < 2 ? "" : i < 6 ? "ns" : i < 10 ? "cycles" : "ns") == 0);
    }
    char name[8];
    const char *unit, *about;
    CHECK(spk_timeline_column(&three, 14, name, sizeof name, &unit, &about) != 0);
}

/* ---- NVRTC ----------------------------------------------------------------- */

static char *read_text(const char *path)
{
    size_t len;
    return spk_file_read(path, (size_t)16 << 20, "a kernel source", &len);
}

/* The source without its timeline: the include line, SPK_TIMELINE_PARAMS and
 * every SPK_TIMELINE_SETUP(...); / _START(...); / _STAMP(...); statement. */
static char *strip_timeline(const char *source)
{
    size_t n = strlen(source);
    char *out = malloc(n + 1), *o = out;
    const char *p = source;
    while (*p) {
        if (strncmp(p, "#include \"spk_timeline.cuh\"", 27) == 0) {
            p += 27;
        } else if (strncmp(p, "SPK_TIMELINE_PARAMS", 19) == 0) {
            p += 19;
        } else if (strncmp(p, "SPK_TIMELINE_SETUP(", 19) == 0 || strncmp(p, "SPK_TIMELINE_STAMP(", 19) == 0 ||
                   strncmp(p, "SPK_TIMELINE_START(", 19) == 0) {
            int depth = 0;
            p += 18;
            do {
                depth += *p == '(';
                depth -= *p == ')';
                p++;
            } while (*p && depth > 0);
            while (*p == ' ')
                p++;
            if (*p == ';')
                p++;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static spk_module *compile_quietly(const char *path, const char *source, bool timeline, const char *arch, bool quiet)
{
    spk_define defines[1] = {{"SPK_TIMELINE", "1"}};
    spk_compile_options o = {0};
    o.file = path;
    o.source = source;
    o.defines = defines;
    o.ndefines = timeline ? 1 : 0;
    o.arch = arch;
    o.no_cache = true;
    spk_module *m = spk_compile(&o);
    if (!m && !quiet)
        fprintf(stderr, "  %s: %s\n", path, spk_last_error());
    return m;
}

static spk_module *compile(const char *path, const char *source, bool timeline, const char *arch)
{
    return compile_quietly(path, source, timeline, arch, false);
}

static bool same_code(spk_module *a, spk_module *b)
{
    size_t na, nb;
    const void *ca = spk_module_code(a, &na), *cb = spk_module_code(b, &nb);
    return na == nb && memcmp(ca, cb, na) == 0;
}

static bool has_text(const char *p, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(p + i, needle, n) == 0)
            return true;
    return false;
}

/* Counts of every floating-point instruction of a PTX text, one line per
 * opcode ("fma.rn.f32 112\n..."), into out. */
static void float_ops(const char *ptx, size_t size, char *out, size_t out_size)
{
    enum { MAX = 64 };
    char names[MAX][32];
    int counts[MAX], n = 0;
    const char *p = ptx, *end = ptx + size;
    while (p < end) {
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (!line_end)
            line_end = end;
        const char *q = p;
        while (q < line_end && (*q == ' ' || *q == '\t'))
            q++;
        if (*q == '@') /* a predicated instruction: skip the guard */
            while (q < line_end && *q != ' ' && *q != '\t')
                q++;
        while (q < line_end && (*q == ' ' || *q == '\t'))
            q++;
        const char *word_end = q;
        while (word_end < line_end && *word_end != ' ' && *word_end != '\t')
            word_end++;
        size_t len = (size_t)(word_end - q);
        bool is_float = len > 4 && len < 32 && *q != '.' && *q != '/' &&
                        (has_text(q, len, ".f32") || has_text(q, len, ".f64"));
        if (is_float && strncmp(q, "ld.", 3) != 0 && strncmp(q, "st.", 3) != 0 && strncmp(q, "mov.", 4) != 0) {
            int i = 0;
            while (i < n && !(strlen(names[i]) == len && strncmp(names[i], q, len) == 0))
                i++;
            if (i == n && n < MAX) {
                memcpy(names[n], q, len);
                names[n][len] = '\0';
                counts[n++] = 0;
            }
            if (i < n)
                counts[i]++;
        }
        p = line_end + 1;
    }
    /* sorted by name, so two listings compare as text */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char t[32];
                int c = counts[i];
                memcpy(t, names[i], 32), memcpy(names[i], names[j], 32), memcpy(names[j], t, 32);
                counts[i] = counts[j], counts[j] = c;
            }
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < n && at < out_size; i++)
        at += (size_t)snprintf(out + at, out_size - at, "%s %d\n", names[i], counts[i]);
}

static int count_text(const char *text, size_t size, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = text; p + len <= text + size; p++)
        if (memcmp(p, needle, len) == 0)
            n++;
    return n;
}

/* One kernel file that includes spk_timeline.cuh, with its default macros. */
static void check_kernel_file(const char *path)
{
    char *source = read_text(path);
    CHECK(source != NULL);
    if (!source)
        return;
    char *stripped = strip_timeline(source);
    spk_module *off = compile(path, NULL, false, "compute_90"), *on = compile(path, NULL, true, "compute_90"),
               *plain = compile(path, stripped, false, "compute_90");
    spk_module *off_bin = compile(path, NULL, false, "sm_90"), *on_bin = compile(path, NULL, true, "sm_90"),
               *plain_bin = compile(path, stripped, false, "sm_90");
    CHECK(off && on && plain && off_bin && on_bin && plain_bin);
    if (off && on && plain && off_bin && on_bin && plain_bin) {
        /* off: the kernel without its timeline, to the byte */
        CHECK(same_code(off, plain));
        CHECK(same_code(off_bin, plain_bin));
        size_t n_off, n_on, n_off_bin, n_on_bin;
        const char *ptx_off = spk_module_code(off, &n_off), *ptx_on = spk_module_code(on, &n_on);
        spk_module_code(off_bin, &n_off_bin);
        spk_module_code(on_bin, &n_on_bin);
        /* on: stamps (clock64 at every mark, the globaltimer at the starts) and the same floating-point work */
        int stamps_on = count_text(ptx_on, n_on, "%clock64"), stamps_off = count_text(ptx_off, n_off, "%clock64");
        int starts = count_text(ptx_on, n_on, "%globaltimer") - count_text(ptx_off, n_off, "%globaltimer");
        CHECK(stamps_on > stamps_off);
        CHECK(starts >= 1 && starts < stamps_on - stamps_off);
        static char ops_off[8192], ops_on[8192];
        float_ops(ptx_off, n_off, ops_off, sizeof ops_off);
        float_ops(ptx_on, n_on, ops_on, sizeof ops_on);
        CHECK(strlen(ops_off) > 0);
        CHECK(strcmp(ops_off, ops_on) == 0);
        if (strcmp(ops_off, ops_on) != 0)
            fprintf(stderr, "  %s: floating-point instructions differ:\noff:\n%son:\n%s", path, ops_off, ops_on);
        fprintf(stderr, "  %s: off = uninstrumented (PTX %zu bytes, cubin %zu); on: %d stamps (%d starts) in the PTX, "
                        "cubin %zu\n", path, n_off, n_off_bin, stamps_on - stamps_off, starts, n_on_bin);
    }
    spk_module_release(off), spk_module_release(on), spk_module_release(plain);
    spk_module_release(off_bin), spk_module_release(on_bin), spk_module_release(plain_bin);
    free(stripped);
    free(source);
}

TEST(every_instrumented_kernel_costs_nothing_when_off)
{
    DIR *d = opendir(spk_kernel_dir());
    CHECK(d != NULL);
    if (!d)
        return;
    int kernels = 0;
    bool demo = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".cu") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", spk_kernel_dir(), e->d_name);
        char *text = read_text(path);
        bool uses = text && strstr(text, "#include \"spk_timeline.cuh\"");
        free(text);
        if (!uses)
            continue;
        kernels++;
        demo = demo || strcmp(e->d_name, "timeline_demo.cu") == 0;
        check_kernel_file(path);
    }
    closedir(d);
    CHECK(demo);
    fprintf(stderr, "  %d kernel file(s) include spk_timeline.cuh\n", kernels);
}

TEST(the_header_compiles_alone_on_and_off)
{
    static const char *source =
        "#include \"spk_timeline.cuh\"\n"
        "extern \"C\" __global__ void k(float *y, int steps SPK_TIMELINE_PARAMS)\n"
        "{\n"
        "    SPK_TIMELINE_SETUP(2, 0, (int)blockIdx.x, (int)threadIdx.x);\n"
        "    float v = 0;\n"
        "    for (int s = 0; s < steps; s++) {\n"
        "        SPK_TIMELINE_START(s);\n"
        "        v = v * 0.5f + 1;\n"
        "        SPK_TIMELINE_STAMP(s, 1);\n"
        "        v = v + y[s];\n"
        "        SPK_TIMELINE_STAMP(s, 2);\n"
        "    }\n"
        "    y[threadIdx.x] = v;\n"
        "}\n";
    char path[4096];
    snprintf(path, sizeof path, "%s/timeline_header_check.cu", spk_kernel_dir());
    for (int on = 0; on <= 1; on++) {
        spk_module *m = compile(path, source, on, "sm_90");
        CHECK(m != NULL);
        spk_module_release(m);
    }
    /* a stage count outside 1..31 is refused by the header itself */
    static const char *bad =
        "#include \"spk_timeline.cuh\"\n"
        "extern \"C\" __global__ void k(int steps SPK_TIMELINE_PARAMS)\n"
        "{ SPK_TIMELINE_SETUP(40, 0, 0, 0); SPK_TIMELINE_START(0); }\n";
    spk_module *m = compile_quietly(path, bad, true, "sm_90", true);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "1 to 31 stages");
    spk_module_release(m);
}

TEST(demo_checks_its_shape)
{
    spk_timeline_demo_geometry g;
    spk_timeline_demo_shape s = {8, 20, 589};
    CHECK(spk_timeline_demo_check(&s, &g) == 0);
    CHECK(g.hidden == 64 && g.threads == 64 && g.tile_rows == 8 && g.tiles == 3 && g.blocks == 24);
    s.cluster = 4, s.batch = 1;
    CHECK(spk_timeline_demo_check(&s, &g) == 0);
    CHECK(g.threads == 128 && g.tile_rows == 1 && g.tiles == 1 && g.blocks == 4);
    s.cluster = 3;
    CHECK(spk_timeline_demo_check(&s, &g) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "cluster must be 2, 4 or 8");
    s.cluster = 2, s.steps = 0;
    CHECK(spk_timeline_demo_check(&s, &g) != 0);
    const spk_timeline_stages *st = spk_timeline_demo_stages();
    CHECK(spk_timeline_stages_check(st) == 0 && st->count == 5);
    CHECK(strcmp(st->names[0], "wait") == 0 && st->waits_for[0] == 4 && strcmp(st->names[4], "publish") == 0);
    for (int c = 2; c <= 8; c *= 2)
        for (int on = 0; on <= 1; on++) {
            spk_module *m = spk_timeline_demo_compile(c, on, "sm_90");
            CHECK(m != NULL);
            if (!m)
                fprintf(stderr, "  cluster %d: %s\n", c, spk_last_error());
            spk_module_release(m);
        }
}

/* ---- the built-in kernels -------------------------------------------------- */

static spk_module *cluster_build(const void *v, bool timeline, const char *arch)
{
    return spk_cluster_variant_compile(v, timeline ? SPK_BUILD_TIMELINE : SPK_BUILD_PLAIN, arch);
}

static spk_module *persistent_build(const void *v, bool timeline, const char *arch)
{
    return spk_persistent_variant_compile(v, timeline ? SPK_BUILD_TIMELINE : SPK_BUILD_PLAIN, arch);
}

/* A variant's plain and timeline builds: both compile (PTX for compute_90,
 * the timeline build's cubin for sm_90 through ptxas), the timeline build
 * stamps (clock64 at the marks, the globaltimer at the starts and its
 * anchor) and both have the same floating-point instructions. */
static void check_builds(const char *name, spk_module *(*build)(const void *, bool, const char *), const void *v)
{
    spk_module *off = build(v, false, "compute_90"), *on = build(v, true, "compute_90"), *on_bin = build(v, true, "sm_90");
    CHECK(off && on && on_bin);
    if (!off || !on || !on_bin) {
        fprintf(stderr, "  %s: %s\n", name, spk_last_error());
    } else {
        size_t n_off, n_on, n_bin;
        const char *ptx_off = spk_module_code(off, &n_off), *ptx_on = spk_module_code(on, &n_on);
        spk_module_code(on_bin, &n_bin);
        int stamps = count_text(ptx_on, n_on, "%clock64") - count_text(ptx_off, n_off, "%clock64");
        int readings = count_text(ptx_on, n_on, "%globaltimer") - count_text(ptx_off, n_off, "%globaltimer");
        CHECK(stamps >= 6 && readings >= 2 && readings < stamps);
        static char ops_off[8192], ops_on[8192];
        float_ops(ptx_off, n_off, ops_off, sizeof ops_off);
        float_ops(ptx_on, n_on, ops_on, sizeof ops_on);
        CHECK(strlen(ops_off) > 0 && strcmp(ops_off, ops_on) == 0);
        if (strcmp(ops_off, ops_on) != 0)
            fprintf(stderr, "  %s: floating-point instructions differ:\noff:\n%son:\n%s", name, ops_off, ops_on);
        if (check_verbose())
            fprintf(stderr, "  %s: %d stamps (%d globaltimer readings) in the PTX, cubin %zu bytes\n", name, stamps,
                    readings, n_bin);
    }
    spk_module_release(off), spk_module_release(on), spk_module_release(on_bin);
}

TEST(built_in_timeline_builds_keep_the_arithmetic)
{
    /* every row of the cluster batch table (hidden 128), the baseline, one gate row a thread, two row phases */
    static const int64_t cluster_batches[] = {1, 8, 16, 32, 48, 64, 128, 256, 512};
    spk_kernel_choice none = {0};
    for (size_t i = 0; i < sizeof cluster_batches / sizeof *cluster_batches; i++) {
        spk_cluster_variant v;
        CHECK(spk_cluster_variant_resolve(128, cluster_batches[i], &none, &v) == 0);
        char name[64];
        snprintf(name, sizeof name, "cluster default, batch %lld", (long long)cluster_batches[i]);
        check_builds(name, cluster_build, &v);
    }
    static const struct {
        const char *name, *option, *word;
        int value;
        int64_t batch;
    } forms[] = {
        {"cluster baseline (push scalar), batch 8", "push", "scalar", 0, 8},
        {"cluster direct, one gate row a thread, batch 8", "gate_block", NULL, 1, 8},
        {"cluster baseline, hidden 128, batch 1", "push", "scalar", 0, 1},
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        spk_kernel_choice c = {0};
        int option = spk_kernel_option_index(&spk_cluster_family, forms[i].option);
        CHECK(option >= 0);
        CHECK((forms[i].word ? spk_kernel_choice_set_word(&spk_cluster_family, &c, option, forms[i].word)
                             : spk_kernel_choice_set_int(&spk_cluster_family, &c, option, forms[i].value)) == 0);
        spk_cluster_variant v;
        CHECK(spk_cluster_variant_resolve(128, forms[i].batch, &c, &v) == 0);
        check_builds(forms[i].name, cluster_build, &v);
    }
    /* every row of the persistent batch table */
    static const int64_t persistent_batches[] = {1, 8, 64, 256};
    for (size_t i = 0; i < sizeof persistent_batches / sizeof *persistent_batches; i++) {
        spk_persistent_variant v;
        CHECK(spk_persistent_variant_resolve(128, persistent_batches[i], &none, &v) == 0);
        char name[64];
        snprintf(name, sizeof name, "persistent default, batch %lld", (long long)persistent_batches[i]);
        check_builds(name, persistent_build, &v);
    }
}

static bool stage_is(const spk_timeline_stages *st, int k, const char *name, int waits_for)
{
    return k < st->count && strcmp(st->names[k], name) == 0 && st->waits_for[k] == waits_for;
}

TEST(built_in_stage_lists)
{
    spk_cluster_variant v;
    spk_kernel_choice none = {0};
    CHECK(spk_cluster_variant_resolve(128, 1, &none, &v) == 0);
    const spk_timeline_stages *st = spk_cluster_timeline_stages(&v);
    CHECK(spk_timeline_stages_check(st) == 0 && st->count == 7);
    CHECK(stage_is(st, 0, "wait", 5) && stage_is(st, 1, "gates", -1) && stage_is(st, 2, "dot", -1) &&
          stage_is(st, 3, "reduce", -1) && stage_is(st, 4, "cell", -1) && stage_is(st, 5, "publish", -1) &&
          stage_is(st, 6, "fetch", -1));
    CHECK(spk_cluster_variant_resolve(128, 256, &none, &v) == 0 && v.row_phases == 2);
    st = spk_cluster_timeline_stages(&v);
    CHECK(spk_timeline_stages_check(st) == 0 && st->count == 12);
    CHECK(stage_is(st, 0, "wait", 5) && stage_is(st, 6, "wait_2", 10) && stage_is(st, 10, "publish_2", -1) &&
          stage_is(st, 11, "fetch", -1));
    v.push = SPK_PUSH_SCALAR;
    st = spk_cluster_timeline_stages(&v);
    CHECK(spk_timeline_stages_check(st) == 0 && st->count == 7);
    CHECK(stage_is(st, 0, "fetch", -1) && stage_is(st, 1, "wait", 6) && stage_is(st, 4, "sync", -1) &&
          stage_is(st, 6, "publish", -1));
    st = spk_persistent_timeline_stages();
    CHECK(spk_timeline_stages_check(st) == 0 && st->count == 6);
    CHECK(stage_is(st, 0, "wait", 5) && stage_is(st, 1, "fetch", -1) && stage_is(st, 5, "publish", -1));
}

TEST(plans_check_a_selection_against_their_launch)
{
    /* the families' geometry of a resolved variant: a cluster of 8 blocks of 128 threads at batch 1 */
    spk_family_state st;
    CHECK(spk_family_variant(&spk_cluster_kernels, 128, 1, NULL, &st) == 0);
    int64_t blocks;
    int warps, group;
    spk_cluster_kernels.timeline_geometry(&st, &blocks, &warps, &group);
    CHECK(group == 8 && warps == 4);
    /* a cluster plan of 4 layers x 589 steps and 3 tiles: 24 blocks a direction */
    spk_timeline_selection sel = {3, 1, 525, 64, 16, 8, 3};
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 3 * group, warps) == 0);
    sel.first_block = 17;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 3 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "timeline.blocks: block 24 is past the last block of a direction, 23");
    sel.first_block = 0, sel.warp = 4;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 3 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "timeline.warp: warp 4 is past the last warp of a block, 3");
    sel.warp = 0, sel.first_step = 526;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 3 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "timeline.step_range: step 590 is past the last step, 589");
    sel.first_step = 0, sel.layer = 4;
    CHECK(spk_timeline_selection_check(&sel, 4, 589, 3 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "timeline.layer: layer 5 is past the last layer, 4");
    /* a persistent plan at batch 1: 32 groups of 4 units a tile, 4 warps a block */
    CHECK(spk_family_variant(&spk_persistent_kernels, 128, 1, NULL, &st) == 0);
    spk_persistent_kernels.timeline_geometry(&st, &blocks, &warps, &group);
    CHECK(group == 32 && warps == 4);
    sel = (spk_timeline_selection){1, 0, 0, 50, 32, 32, 3};
    CHECK(spk_timeline_selection_check(&sel, 2, 50, 2 * group, warps) == 0);
    sel.blocks = 33;
    CHECK(spk_timeline_selection_check(&sel, 2, 50, 2 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "block 64 is past the last block of a direction, 63");
    sel.blocks = 32, sel.layer = 2;
    CHECK(spk_timeline_selection_check(&sel, 2, 50, 2 * group, warps) != 0);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 3 is past the last layer, 2");
}

int main(void)
{
    use_fresh_cache();
    RUN(stages_are_checked);
    RUN(selections_are_checked_against_the_kernel);
    RUN(launch_arguments_follow_the_parameters);
    RUN(decode_recovers_the_true_times);
    RUN(decode_with_a_given_rate);
    RUN(decode_one_step_through_the_anchors);
    RUN(decode_leaves_unstamped_marks_and_records_out);
    RUN(decode_refuses_what_does_not_match);
    RUN(columns_are_named);
    RUN(every_instrumented_kernel_costs_nothing_when_off);
    RUN(the_header_compiles_alone_on_and_off);
    RUN(demo_checks_its_shape);
    RUN(built_in_timeline_builds_keep_the_arithmetic);
    RUN(built_in_stage_lists);
    RUN(plans_check_a_selection_against_their_launch);
    return CHECK_SUMMARY();
}
