/* Step timelines: see timeline.h and docs/timeline.md. */
#include "cuda/timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MAGIC 0x31454d49544b5053ull /* kernels/spk_timeline.cuh: SPK_TIMELINE_MAGIC */
#define KERNEL_MARKS_WORD 9
#define NAME_MAX_CHARS 31
#define RATE_PAIR_SAMPLES 64
/* ns a reading may sit outside its interval: the two timer reads of a stamp
 * are separate instructions, and clock64 counts whole cycles. */
#define READ_SLACK_NS 2.0

enum { H_MAGIC, H_MARKS, H_DIRECTION, H_FIRST_STEP, H_STEPS, H_FIRST_BLOCK, H_BLOCKS, H_WARP, H_LAYER };

struct spk_timeline {
    spk_timeline_selection selection;
    int stages;
    spk_tensor *buffer; /* device u64 [words] */
};

/* ---- checks ------------------------------------------------------------- */

int spk_timeline_stages_check(const spk_timeline_stages *st)
{
    if (!st || st->count < 1 || st->count > SPK_TIMELINE_MAX_STAGES || !st->names)
        return spk_fail("timeline: a kernel's step has 1 to %d stages, got %d", SPK_TIMELINE_MAX_STAGES,
                        st ? st->count : 0);
    static const char *reserved[] = {"start", "block", "step"};
    for (int k = 0; k < st->count; k++) {
        const char *name = st->names[k];
        size_t len = name ? strlen(name) : 0;
        if (len < 1 || len > NAME_MAX_CHARS)
            return spk_fail("timeline: stage %d needs a name of 1 to %d characters", k + 1, NAME_MAX_CHARS);
        for (size_t r = 0; r < sizeof reserved / sizeof *reserved; r++)
            if (strcmp(name, reserved[r]) == 0)
                return spk_fail("timeline: stage %d is named '%s', which names a column of its own", k + 1, name);
        for (int j = 0; j < k; j++)
            if (strcmp(name, st->names[j]) == 0)
                return spk_fail("timeline: stages %d and %d are both named '%s'", j + 1, k + 1, name);
        if (st->waits_for && (st->waits_for[k] < -1 || st->waits_for[k] >= st->count))
            return spk_fail("timeline: stage '%s' waits for stage %d, outside 1..%d", name, st->waits_for[k] + 1,
                            st->count);
    }
    return 0;
}

static int check_bounds(const spk_timeline_selection *sel)
{
    if (sel->direction != 0 && sel->direction != 1)
        return spk_fail("timeline.direction must be forward or reverse");
    if (sel->layer < 0)
        return spk_fail("timeline.layer must be a layer number (from 1), got %d", sel->layer + 1);
    if (sel->first_step < 0 || sel->steps < 1 || sel->steps > SPK_TIMELINE_MAX_STEPS)
        return spk_fail("timeline.step_range must be a range {first, last} of 1 to %d steps from step 1, got %d steps "
                        "from step %d", SPK_TIMELINE_MAX_STEPS, sel->steps, sel->first_step + 1);
    if (sel->first_block < 0 || sel->blocks < 1 || sel->blocks > SPK_TIMELINE_MAX_BLOCKS)
        return spk_fail("timeline.blocks must be a range {first, last} of 1 to %d blocks from block 0, got %d blocks "
                        "from block %d", SPK_TIMELINE_MAX_BLOCKS, sel->blocks, sel->first_block);
    if (sel->warp < 0 || sel->warp > 31)
        return spk_fail("timeline.warp must be a warp of the block (0 .. 31), got %d", sel->warp);
    return 0;
}

int spk_timeline_selection_check(const spk_timeline_selection *sel, int64_t layers, int64_t steps, int64_t blocks,
                                 int warps)
{
    if (check_bounds(sel) != 0)
        return -1;
    if (sel->layer >= layers)
        return spk_fail("timeline.layer: layer %d is past the last layer, %lld", sel->layer + 1, (long long)layers);
    int64_t last_step = (int64_t)sel->first_step + sel->steps;
    if (last_step > steps)
        return spk_fail("timeline.step_range: step %lld is past the last step, %lld", (long long)last_step,
                        (long long)steps);
    int64_t last_block = (int64_t)sel->first_block + sel->blocks - 1;
    if (last_block >= blocks)
        return spk_fail("timeline.blocks: block %lld is past the last block of a direction, %lld",
                        (long long)last_block, (long long)blocks - 1);
    if (sel->warp >= warps)
        return spk_fail("timeline.warp: warp %d is past the last warp of a block, %d", sel->warp, warps - 1);
    return 0;
}

size_t spk_timeline_words(const spk_timeline_selection *sel, int stages)
{
    return SPK_TIMELINE_HEADER_WORDS + 2 * (size_t)sel->blocks +
           (size_t)sel->blocks * (size_t)sel->steps * (size_t)(stages + 1) * 2;
}

/* ---- the device buffer ---------------------------------------------------- */

static void fill_header(uint64_t *words, const spk_timeline_selection *sel, int stages)
{
    memset(words, 0, SPK_TIMELINE_HEADER_WORDS * sizeof *words);
    words[H_MAGIC] = MAGIC;
    words[H_MARKS] = (uint64_t)(stages + 1);
    words[H_DIRECTION] = (uint64_t)sel->direction;
    words[H_FIRST_STEP] = (uint64_t)sel->first_step;
    words[H_STEPS] = (uint64_t)sel->steps;
    words[H_FIRST_BLOCK] = (uint64_t)sel->first_block;
    words[H_BLOCKS] = (uint64_t)sel->blocks;
    words[H_WARP] = (uint64_t)sel->warp;
    words[H_LAYER] = (uint64_t)sel->layer;
}

spk_timeline *spk_timeline_new(const spk_timeline_selection *sel, const spk_timeline_stages *stages, spk_stream *s)
{
    if (spk_timeline_stages_check(stages) != 0 || check_bounds(sel) != 0)
        return NULL;
    size_t words = spk_timeline_words(sel, stages->count);
    if (words * sizeof(uint64_t) > SPK_TIMELINE_MAX_BYTES)
        return spk_fail_null("timeline: %d blocks x %d steps x %d marks need %zu MiB, more than the %zu MiB a "
                             "recording may take; record fewer steps or blocks",
                             sel->blocks, sel->steps, stages->count + 1, (words * sizeof(uint64_t)) >> 20,
                             SPK_TIMELINE_MAX_BYTES >> 20);
    spk_timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return spk_fail_null("timeline: out of memory");
    tl->selection = *sel;
    tl->stages = stages->count;
    int64_t shape[1] = {(int64_t)words};
    tl->buffer = spk_device_tensor_new(SPK_U64, 1, shape, s);
    uint64_t header[SPK_TIMELINE_HEADER_WORDS];
    fill_header(header, sel, stages->count);
    if (!tl->buffer || spk_memcpy_h2d(spk_tensor_data(tl->buffer), header, sizeof header, s) != 0) {
        spk_error_prefix("timeline");
        spk_timeline_free(tl);
        return NULL;
    }
    spk_storage_use(tl->buffer->storage, spk_stream_or_default(s));
    return tl;
}

void spk_timeline_free(spk_timeline *tl)
{
    if (tl)
        spk_tensor_free(tl->buffer);
    free(tl);
}

const spk_timeline_selection *spk_timeline_selection_of(const spk_timeline *tl)
{
    return tl ? &tl->selection : NULL;
}

spk_storage *spk_timeline_storage(const spk_timeline *tl)
{
    return tl ? tl->buffer->storage : NULL;
}

void spk_timeline_selection_args(const spk_timeline_selection *sel, void *buffer, int layer, int64_t block_offset,
                                 spk_arg out[SPK_TIMELINE_ARGS])
{
    bool records = sel && buffer && layer == sel->layer;
    /* Block b of this launch is block block_offset + b of the direction; its
     * slot b - (first_block - block_offset) is negative or past the end for
     * blocks outside the selection, which the kernel's unsigned compare drops. */
    int64_t first = sel ? (int64_t)sel->first_block - block_offset : 0;
    if (first < INT32_MIN || first > INT32_MAX) { /* no block of this launch is selected */
        records = false;
        first = 0;
    }
    /* The kernel's order (kernels/spk_timeline.cuh: SPK_TIMELINE_PARAMS). */
    out[0] = (spk_arg){SPK_ARG_PTR, {.ptr = records ? buffer : NULL}};
    out[1] = (spk_arg){SPK_ARG_I32, {.i32 = sel ? sel->direction : 0}};
    out[2] = (spk_arg){SPK_ARG_I32, {.i32 = sel ? sel->first_step : 0}};
    out[3] = (spk_arg){SPK_ARG_I32, {.i32 = sel ? sel->steps : 0}};
    out[4] = (spk_arg){SPK_ARG_I32, {.i32 = (int32_t)first}};
    out[5] = (spk_arg){SPK_ARG_I32, {.i32 = sel ? sel->blocks : 0}};
    out[6] = (spk_arg){SPK_ARG_I32, {.i32 = sel ? sel->warp : 0}};
}

void spk_timeline_args(const spk_timeline *tl, int layer, int64_t block_offset, spk_arg out[SPK_TIMELINE_ARGS])
{
    spk_timeline_selection_args(tl ? &tl->selection : NULL, tl ? spk_tensor_data(tl->buffer) : NULL, layer,
                                block_offset, out);
}

spk_tensor *spk_timeline_read(const spk_timeline *tl, spk_stream *s)
{
    spk_tensor *host = spk_tensor_to_host(tl->buffer, s);
    if (!host)
        spk_error_prefix("timeline: reading the stamps");
    return host;
}

/* ---- columns --------------------------------------------------------------- */

int spk_timeline_column_count(const spk_timeline_stages *stages)
{
    return 2 + 3 * (stages->count + 1);
}

int spk_timeline_column(const spk_timeline_stages *stages, int column, char *name, size_t size, const char **unit,
                        const char **about)
{
    int marks = stages->count + 1;
    if (column < 0 || column >= spk_timeline_column_count(stages))
        return spk_fail("timeline: column %d is outside 1..%d", column + 1, spk_timeline_column_count(stages));
    if (column < 2) {
        snprintf(name, size, "%s", column == 0 ? "block" : "step");
        *unit = "";
        *about = column == 0 ? "the block's index within its direction (the kernel's numbering, from 0)"
                             : "the step, from 1, in the order the direction runs its steps";
        return 0;
    }
    int kind = (column - 2) / marks, mark = (column - 2) % marks;
    const char *mark_name = mark == 0 ? "start" : stages->names[mark - 1];
    static const char *suffix[3] = {"", "_cycles", "_globaltimer"};
    static const char *units[3] = {"ns", "cycles", "ns"};
    static const char *abouts[2][3] = {
        {"when the step started: clock64 on the common time base (ns from the earliest globaltimer stamp)",
         "clock64 when the step started, from the block's first stamp",
         "the globaltimer when the step started, from the earliest globaltimer stamp"},
        {"when the stage ended: clock64 on the common time base (ns from the earliest globaltimer stamp)",
         "clock64 when the stage ended, from the block's first stamp",
         "the globaltimer when the stage ended, from the earliest globaltimer stamp (NaN where the kernel "
         "reads it at a step's start only)"}};
    snprintf(name, size, "%s%s", mark_name, suffix[kind]);
    *unit = units[kind];
    *about = abouts[mark == 0 ? 0 : 1][kind];
    return 0;
}

/* ---- the decode -------------------------------------------------------------- */

typedef struct sample {
    double cycles; /* clock64 from the block's first stamp */
    double ns;     /* globaltimer from the origin */
} sample;

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int by_cycles(const void *a, const void *b)
{
    double x = ((const sample *)a)->cycles, y = ((const sample *)b)->cycles;
    return (x > y) - (x < y);
}

static int header_field(const uint64_t *w, int field, int64_t max, const char *what, int64_t *out)
{
    if (w[field] > (uint64_t)max)
        return spk_fail("timeline: the buffer's header gives %s %llu, more than %lld", what,
                        (unsigned long long)w[field], (long long)max);
    *out = (int64_t)w[field];
    return 0;
}

/* A decode in progress: the buffer's parts and what the passes below find. */
typedef struct decoding {
    const uint64_t *anchor; /* (globaltimer, clock64) of each block at its start */
    const uint64_t *rec;    /* [blocks][steps][marks] (globaltimer, clock64) stamps */
    int64_t blocks, steps, marks, first_block, first_step;
    uint64_t origin;        /* time 0: the earliest globaltimer reading */
    int64_t records, stamps, readings;
    uint64_t *first_clock;  /* each block's first clock64 (UINT64_MAX: the block stamped nothing) */
    int64_t *block_readings; /* globaltimer readings a block (its step starts and its anchor) */
    sample *samples;        /* every block's readings in clock order, block after block */
    double *offset;         /* each block's globaltimer at its first clock64 */
    double quantum;         /* the globaltimer's step, ns */
} decoding;

static uint64_t stamp(const decoding *d, int64_t b, int64_t k, int64_t m, int field)
{
    return d->rec[(((size_t)b * (size_t)d->steps + (size_t)k) * (size_t)d->marks + (size_t)m) * 2 + (size_t)field];
}
static bool stamped(const decoding *d, int64_t b, int64_t k, int64_t m)
{
    return stamp(d, b, k, m, 0) != 0 || stamp(d, b, k, m, 1) != 0;
}
static bool has_time(const decoding *d, int64_t b, int64_t k, int64_t m) { return stamp(d, b, k, m, 0) != 0; }
static bool has_anchor(const decoding *d, int64_t b) { return d->anchor[2 * b] != 0 && d->anchor[2 * b + 1] != 0; }
static bool ran(const decoding *d, int64_t b) { return d->first_clock[b] != UINT64_MAX; }

/* The header's selection, checked against the buffer's size and the stages. */
static int read_header(const spk_tensor *raw, const spk_timeline_stages *stages, spk_timeline_clock *clock,
                       decoding *d)
{
    if (!raw || !spk_tensor_is_host(raw) || raw->dtype != SPK_U64 || raw->ndim != 1 || !spk_tensor_is_contiguous(raw))
        return spk_fail("timeline: the raw stamps must be a contiguous host u64 tensor [words]");
    const uint64_t *w = spk_tensor_data(raw);
    int64_t words = raw->shape[0];
    if (words < SPK_TIMELINE_HEADER_WORDS || w[H_MAGIC] != MAGIC)
        return spk_fail("timeline: the buffer does not start with a timeline header (%lld words)", (long long)words);
    int64_t marks = 0, direction = 0, first_step = 0, steps = 0, first_block = 0, blocks = 0, warp = 0, layer = 0;
    if (header_field(w, H_MARKS, SPK_TIMELINE_MAX_MARKS, "marks", &marks) ||
        header_field(w, H_DIRECTION, 1, "direction", &direction) ||
        header_field(w, H_FIRST_STEP, INT32_MAX, "first step", &first_step) ||
        header_field(w, H_STEPS, SPK_TIMELINE_MAX_STEPS, "steps", &steps) ||
        header_field(w, H_FIRST_BLOCK, INT32_MAX, "first block", &first_block) ||
        header_field(w, H_BLOCKS, SPK_TIMELINE_MAX_BLOCKS, "blocks", &blocks) ||
        header_field(w, H_WARP, 31, "warp", &warp) || header_field(w, H_LAYER, INT32_MAX, "layer", &layer))
        return -1;
    if (steps < 1 || blocks < 1)
        return spk_fail("timeline: the buffer's header selects %lld steps of %lld blocks; a recording has at least "
                        "one of each", (long long)steps, (long long)blocks);
    if (marks != stages->count + 1)
        return spk_fail("timeline: the buffer holds %lld marks a step, the %d stages described need %d",
                        (long long)marks, stages->count, stages->count + 1);
    int64_t expected = SPK_TIMELINE_HEADER_WORDS + 2 * blocks + blocks * steps * marks * 2;
    if (words != expected)
        return spk_fail("timeline: the buffer has %lld words; its header (%lld blocks x %lld steps x %lld marks, and "
                        "an anchor a block) needs %lld", (long long)words, (long long)blocks, (long long)steps,
                        (long long)marks, (long long)expected);
    clock->selection = (spk_timeline_selection){(int)layer,      (int)direction, (int)first_step, (int)steps,
                                                (int)first_block, (int)blocks,    (int)warp};
    if (w[KERNEL_MARKS_WORD] == 0)
        return spk_fail("timeline: the kernel stamped nothing: no block %lld..%lld of the %s direction ran with "
                        "warp %lld (is the launch the recorded layer's, and its kernel the timeline build?)",
                        (long long)first_block, (long long)(first_block + blocks - 1),
                        direction ? "reverse" : "forward", (long long)warp);
    if (w[KERNEL_MARKS_WORD] != (uint64_t)marks)
        return spk_fail("timeline: the kernel stamps %llu marks a step, the %d stages described need %d",
                        (unsigned long long)w[KERNEL_MARKS_WORD], stages->count, stages->count + 1);
    d->anchor = w + SPK_TIMELINE_HEADER_WORDS;
    d->rec = d->anchor + 2 * blocks;
    d->blocks = blocks, d->steps = steps, d->marks = marks, d->first_block = first_block, d->first_step = first_step;
    return 0;
}

/* The records, stamps and readings; every block's first clock; the origin. */
static int scan_records(decoding *d, spk_timeline_clock *clock)
{
    d->origin = UINT64_MAX;
    for (int64_t b = 0; b < d->blocks; b++) {
        d->first_clock[b] = UINT64_MAX;
        for (int64_t k = 0; k < d->steps; k++) {
            bool any = false;
            for (int64_t m = 0; m < d->marks; m++) {
                if (!stamped(d, b, k, m))
                    continue;
                any = true;
                d->stamps++;
                if (stamp(d, b, k, m, 1) < d->first_clock[b])
                    d->first_clock[b] = stamp(d, b, k, m, 1);
                if (has_time(d, b, k, m)) {
                    d->block_readings[b]++;
                    d->readings++;
                    if (stamp(d, b, k, m, 0) < d->origin)
                        d->origin = stamp(d, b, k, m, 0);
                }
            }
            d->records += any;
        }
        if (ran(d, b)) {
            clock->blocks++;
            if (has_anchor(d, b)) {
                d->block_readings[b]++;
                d->readings++;
            }
        }
    }
    /* Time 0 is the earliest reading of a record (an anchor's where no record has one). */
    for (int64_t b = 0; b < d->blocks && d->origin == UINT64_MAX; b++)
        if (ran(d, b) && has_anchor(d, b))
            for (int64_t a = 0; a < d->blocks; a++)
                if (ran(d, a) && has_anchor(d, a) && d->anchor[2 * a] < d->origin)
                    d->origin = d->anchor[2 * a];
    if (d->records == 0)
        return spk_fail("timeline: the kernel ran but stamped no step %lld..%lld (are the steps in the kernel's "
                        "loop?)", (long long)d->first_step + 1, (long long)(d->first_step + d->steps));
    for (int64_t b = 0; b < d->blocks; b++)
        if (ran(d, b) && d->block_readings[b] == 0)
            return spk_fail("timeline: block %lld stamped clock64 but never the globaltimer, so its clock cannot be "
                            "placed (does the kernel call SPK_TIMELINE_START where a step starts?)",
                            (long long)(d->first_block + b));
    return 0;
}

/* The globaltimer's step: the greatest common divisor of every reading's
 * distance from the origin (a timer that moves in steps of q ns reads
 * multiples of q apart, however sparse the stamps). */
static double timer_quantum(const decoding *d)
{
    uint64_t step = 0;
    for (int64_t b = 0; b < d->blocks; b++) {
        uint64_t a = d->anchor[2 * b];
        if (ran(d, b) && has_anchor(d, b))
            step = gcd(step, a > d->origin ? a - d->origin : d->origin - a);
        for (int64_t k = 0; k < d->steps && step != 1; k++)
            for (int64_t m = 0; m < d->marks; m++)
                if (has_time(d, b, k, m))
                    step = gcd(step, stamp(d, b, k, m, 0) - d->origin);
    }
    return step ? (double)step : 1;
}

/* Each block's readings in clock order, and the sums of a least-squares
 * fit of one rate for all blocks with an offset each. */
static void collect_samples(decoding *d, double *sxy, double *sxx)
{
    int64_t at = 0;
    *sxy = *sxx = 0;
    for (int64_t b = 0; b < d->blocks; b++) {
        sample *s = d->samples + at;
        int64_t n = 0;
        if (ran(d, b) && has_anchor(d, b)) {
            /* before the block's first record: cycles from there below 0 */
            s[n].cycles = (double)(int64_t)(d->anchor[2 * b + 1] - d->first_clock[b]);
            s[n].ns = (double)(int64_t)(d->anchor[2 * b] - d->origin);
            n++;
        }
        for (int64_t k = 0; k < d->steps; k++)
            for (int64_t m = 0; m < d->marks; m++)
                if (has_time(d, b, k, m)) {
                    s[n].cycles = (double)(stamp(d, b, k, m, 1) - d->first_clock[b]);
                    s[n].ns = (double)(stamp(d, b, k, m, 0) - d->origin);
                    n++;
                }
        at += n;
        if (n == 0)
            continue;
        qsort(s, (size_t)n, sizeof *s, by_cycles);
        double mc = 0, mg = 0;
        for (int64_t i = 0; i < n; i++) {
            mc += s[i].cycles;
            mg += s[i].ns;
        }
        mc /= (double)n;
        mg /= (double)n;
        for (int64_t i = 0; i < n; i++) {
            *sxy += (s[i].cycles - mc) * (s[i].ns - mg);
            *sxx += (s[i].cycles - mc) * (s[i].cycles - mc);
        }
    }
}

/* The rate every reading allows: a pair i < j of a block bounds it by
 * (g_j - g_i -+ (quantum - 1 + 2 slack)) / (c_j - c_i); the first and last
 * RATE_PAIR_SAMPLES samples of each block span the most time, so their pairs
 * bound it tightest. */
static void rate_bounds(const decoding *d, double *rate_lo, double *rate_hi)
{
    *rate_lo = 0, *rate_hi = INFINITY;
    int64_t at = 0;
    for (int64_t b = 0; b < d->blocks; b++) {
        const sample *s = d->samples + at;
        int64_t n = d->block_readings[b];
        at += n;
        int64_t head = n < RATE_PAIR_SAMPLES ? n : RATE_PAIR_SAMPLES;
        for (int64_t i = 0; i < head; i++)
            for (int64_t j = n - head > i ? n - head : i + 1; j < n; j++) {
                double dc = s[j].cycles - s[i].cycles, dg = s[j].ns - s[i].ns;
                if (dc <= 0)
                    continue;
                *rate_lo = fmax(*rate_lo, (dg - (d->quantum - 1) - 2 * READ_SLACK_NS) / dc);
                *rate_hi = fmin(*rate_hi, (dg + (d->quantum - 1) + 2 * READ_SLACK_NS) / dc);
            }
    }
}

/* ns a clock64 cycle: the rate given, else the middle of the bounds where
 * the timer's step is what limits the readings (coarser than the slack) and
 * the bounds agree, else the least-squares slope. */
static int clock_rate(decoding *d, double cycles_per_ns, spk_timeline_clock *clock, double *ns_per_cycle)
{
    double sxy, sxx, rate_lo, rate_hi;
    collect_samples(d, &sxy, &sxx);
    rate_bounds(d, &rate_lo, &rate_hi);
    if (cycles_per_ns > 0) {
        *ns_per_cycle = 1 / cycles_per_ns;
    } else if (d->quantum > 2 * READ_SLACK_NS && rate_lo > 0 && rate_lo <= rate_hi && isfinite(rate_hi) && sxx > 0) {
        *ns_per_cycle = (rate_lo + rate_hi) / 2;
        clock->fitted = true;
    } else if (sxx > 0 && sxy > 0) {
        *ns_per_cycle = sxy / sxx;
        clock->fitted = true;
    } else {
        return spk_fail("timeline: the globaltimer did not advance within a block over the %lld readings, so "
                        "clock64 cannot be related to it: record more steps, or give the clock rate",
                        (long long)d->readings);
    }
    return 0;
}

/* Each block's offset: the middle of the interval every one of its readings
 * allows (true time in [g - slack, g + quantum - 1 + slack]), or, where the
 * readings disagree with the rate, the mean plus half a quantum. */
static void block_offsets(decoding *d, double ns_per_cycle)
{
    int64_t at = 0;
    for (int64_t b = 0; b < d->blocks; b++) {
        const sample *s = d->samples + at;
        int64_t n = d->block_readings[b];
        at += n;
        if (n == 0)
            continue;
        double lo = -INFINITY, hi = INFINITY, mean = 0;
        for (int64_t i = 0; i < n; i++) {
            double base = s[i].ns - ns_per_cycle * s[i].cycles;
            lo = fmax(lo, base - READ_SLACK_NS);
            hi = fmin(hi, base + d->quantum - 1 + READ_SLACK_NS);
            mean += base;
        }
        d->offset[b] = lo <= hi ? (lo + hi) / 2 : mean / (double)n + (d->quantum - 1) / 2;
    }
}

/* One row a record: block, step, and per mark its aligned time, clock64 and
 * globaltimer (NaN where not stamped); returns the largest distance of an
 * aligned time outside its reading's interval. */
static double write_rows(const decoding *d, double ns_per_cycle, int columns, double *row)
{
    double residual = 0;
    int64_t marks = d->marks;
    for (int64_t b = 0; b < d->blocks; b++)
        for (int64_t k = 0; k < d->steps; k++) {
            bool any = false;
            for (int64_t m = 0; m < marks; m++)
                any = any || stamped(d, b, k, m);
            if (!any)
                continue;
            row[0] = (double)(d->first_block + b);
            row[1] = (double)(d->first_step + k + 1);
            for (int64_t m = 0; m < marks; m++) {
                double *aligned = row + 2 + m, *cycles = row + 2 + marks + m, *global = row + 2 + 2 * marks + m;
                if (!stamped(d, b, k, m)) {
                    *aligned = *cycles = *global = NAN;
                    continue;
                }
                *cycles = (double)(stamp(d, b, k, m, 1) - d->first_clock[b]);
                *aligned = ns_per_cycle * *cycles + d->offset[b];
                if (!has_time(d, b, k, m)) {
                    *global = NAN;
                    continue;
                }
                *global = (double)(stamp(d, b, k, m, 0) - d->origin);
                residual = fmax(residual, fmax(*global - *aligned, *aligned - (*global + d->quantum - 1)));
            }
            row += columns;
        }
    return residual;
}

static void decoding_free(decoding *d)
{
    free(d->first_clock);
    free(d->block_readings);
    free(d->samples);
    free(d->offset);
}

spk_tensor *spk_timeline_decode(const spk_tensor *raw, const spk_timeline_stages *stages, double cycles_per_ns,
                                spk_timeline_clock *clock)
{
    memset(clock, 0, sizeof *clock);
    if (spk_timeline_stages_check(stages) != 0)
        return NULL;
    if (!(cycles_per_ns >= 0) || !isfinite(cycles_per_ns))
        return spk_fail_null("timeline: the clock rate must be a finite number of cycles a ns (0: fit it)");
    decoding d = {0};
    if (read_header(raw, stages, clock, &d) != 0)
        return NULL;
    spk_tensor *out = NULL;
    if (!(d.first_clock = malloc((size_t)d.blocks * sizeof *d.first_clock)) ||
        !(d.block_readings = calloc((size_t)d.blocks, sizeof *d.block_readings)))
        goto oom;
    if (scan_records(&d, clock) != 0)
        goto fail;
    if (!(d.samples = malloc((size_t)d.readings * sizeof *d.samples)) ||
        !(d.offset = calloc((size_t)d.blocks, sizeof *d.offset)))
        goto oom;
    d.quantum = timer_quantum(&d);
    double ns_per_cycle = 0;
    if (clock_rate(&d, cycles_per_ns, clock, &ns_per_cycle) != 0)
        goto fail;
    block_offsets(&d, ns_per_cycle);
    int columns = spk_timeline_column_count(stages);
    int64_t shape[2] = {d.records, columns};
    if (!(out = spk_tensor_new(SPK_F64, 2, shape)))
        goto fail;
    clock->residual_ns = write_rows(&d, ns_per_cycle, columns, spk_tensor_data(out));
    clock->cycles_per_ns = 1 / ns_per_cycle;
    clock->quantum_ns = d.quantum;
    clock->origin = d.origin;
    clock->records = d.records;
    clock->stamps = d.stamps;
    decoding_free(&d);
    return out;
oom:
    spk_fail("timeline: out of memory decoding %lld blocks x %lld steps", (long long)d.blocks, (long long)d.steps);
fail:
    decoding_free(&d);
    spk_tensor_free(out);
    return NULL;
}
