/* The reference forward pass of a bidirectional LSTM stack on the CPU, in f64
 * or f32 (numerics in lstm.h). One pool of threads runs the whole stack,
 * layer after layer. In a layer the work is split into teams, each a
 * direction and a range of batch rows; a team's threads split the hidden
 * units (each owns whole unit chunks, all four gates), so each projects its
 * own columns of x·Wᵀ, one slab of steps at a time, and runs its units'
 * cells; where a team has several threads they meet at a barrier after every
 * step (h of the step is complete). Where teams have one thread, threads
 * claim teams as they finish. Which thread computes an output never changes
 * how it is computed, so the bits do not depend on the thread count, nor on
 * the vector unit (core/cpu.h): every lane does the same scalar operations. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cancel.h"
#include "core/cpu.h"
#include "core/error.h"
#include "lstm/lstm.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

struct ref_team {
    int d;              /* direction */
    int64_t row0, rows; /* batch rows */
    void *h[2];         /* [rows, H] each: h before and after a step */
    spk_cpu_barrier barrier;
};

struct ref_thread {
    int team;               /* its team, where teams have several threads; else -1 */
    int64_t chunk0, chunks; /* its unit chunks */
    void *Wp, *Rp, *bias, *G, *c;
    int packed_layer, packed_dir; /* what Wp, Rp and bias hold (-1: nothing yet) */
    double project_ms, step_ms, wait_ms; /* with a profile */
};

/* Everything a layer's threads share; pointers are float* or double*. */
struct ref_plan {
    int64_t batch, steps, hidden, slab_steps;
    int layers;
    const int64_t *input;                  /* K of each layer */
    const void **W, **R, **B;              /* each layer's weights, contiguous, in the precision */
    const void **in;                       /* each layer's input [B, T, K] */
    void **out;                            /* each layer's output [B, T, 2H] */
    int trace_layer, trace_direction, trace_count;
    const int64_t *trace_steps;
    void *trace_h, *trace_c; /* [trace_count, B, H] */
    int team_size, team_count;
    struct ref_team *teams;
    struct ref_thread *workers;
    atomic_int_fast64_t *next_team; /* per layer, where teams have one thread */
    spk_cpu_barrier all;
    bool profiled;
};

static double clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Adds the time since *since to *part and restarts the clock (profiles only). */
static inline void lap(const struct ref_plan *p, double *since, double *part)
{
    if (!p->profiled)
        return;
    double now = clock_ms();
    *part += now - *since;
    *since = now;
}

/* One instantiation per precision and vector unit; ROWS batch rows a
 * register block (four gate vectors each) fit the unit's registers. VFMA(a,
 * b, c) = a·b + c rounded once in every lane: the unit's instruction, or in
 * the portable form fma() a lane (a processor's own instruction where it has
 * one); KEEP(...) keeps vectors in registers (x86 only). */
#define PORTABLE_FMA(fma, a, b, c)                                                                     \
    __extension__({                                                                                  \
        __typeof__(b) m_, a_ = (a) - (__typeof__(b)){0};                                             \
        for (int l_ = 0; l_ < LANES; l_++)                                                           \
            m_[l_] = fma(a_[l_], (b)[l_], (c)[l_]);                                                  \
        m_;                                                                                          \
    })
#define KEEP(a, b, c, d) ((void)0)
#define VFMA(a, b, c) PORTABLE_FMA(__builtin_fma, a, b, c)
#define IS_DOUBLE 1
#define LANES 2
#define ROWS 2
#define SUFFIX f64_portable
#include "lstm/reference_impl.h"
#undef VFMA
#define VFMA(a, b, c) PORTABLE_FMA(__builtin_fmaf, a, b, c)
#define IS_DOUBLE 0
#define LANES 4
#define SUFFIX f32_portable
#include "lstm/reference_impl.h"

#undef VFMA
#undef KEEP

#if defined(__x86_64__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#define KEEP(a, b, c, d) __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d))
#define VFMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define IS_DOUBLE 1
#define LANES 4
#define SUFFIX f64_avx2
#include "lstm/reference_impl.h"
#undef VFMA
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define IS_DOUBLE 0
#define LANES 8
#define SUFFIX f32_avx2
#include "lstm/reference_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
#undef ROWS
#define ROWS 4
#undef VFMA
#undef KEEP
#define KEEP(a, b, c, d) __asm__("" : "+v"(a), "+v"(b), "+v"(c), "+v"(d))
#define VFMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define IS_DOUBLE 1
#define LANES 8
#define SUFFIX f64_avx512
#include "lstm/reference_impl.h"
#undef VFMA
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define IS_DOUBLE 0
#define LANES 16
#define SUFFIX f32_avx512
#include "lstm/reference_impl.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#undef VFMA
#undef KEEP
#endif
#undef ROWS

typedef void (*ref_worker)(void *plan, int index);

static ref_worker worker_for(bool f64, spk_cpu_vector v)
{
    switch (v) {
#if defined(__x86_64__)
    case SPK_CPU_VECTOR_AVX512:
        return f64 ? worker_f64_avx512 : worker_f32_avx512;
    case SPK_CPU_VECTOR_AVX2:
        return f64 ? worker_f64_avx2 : worker_f32_avx2;
#endif
    default:
        return f64 ? worker_f64_portable : worker_f32_portable;
    }
}

/* ---- the split of a layer's work ------------------------------------------ */

/* As many teams as keep every thread busy, the fewest threads a team (a
 * barrier a step costs more the more threads meet at it): row groups =
 * min(batch, threads / 2), two directions each; the threads left over share
 * a team's unit chunks, as long as all teams' threads fit the CPUs (a team
 * whose threads outnumber the cores waits a time slice at every step).
 * Returns the threads the split uses. */
struct split {
    int64_t groups, team_size;
};

static int split_work(int threads, int cpus, int team_threads, int64_t batch, int64_t chunk_count, struct split *s)
{
    int64_t half = threads / 2 > 0 ? threads / 2 : 1;
    s->groups = batch < half ? batch : half;
    s->team_size = (threads < cpus ? threads : cpus) / (2 * s->groups);
    if (team_threads > 0) { /* asked for: as many groups as such teams fill the threads */
        s->team_size = team_threads < half ? team_threads : half;
        s->groups = threads / (2 * s->team_size);
        s->groups = s->groups < 1 ? 1 : s->groups > batch ? batch : s->groups;
    }
    if (s->team_size < 1)
        s->team_size = 1;
    if (s->team_size > chunk_count)
        s->team_size = chunk_count;
    int64_t used = s->team_size > 1 ? 2 * s->groups * s->team_size : (2 * s->groups < threads ? 2 * s->groups : threads);
    return (int)used;
}

/* ---- one arena for every buffer of a call ---------------------------------- */

struct arena {
    char *base;
    size_t used;
    bool overflow;
};

/* Reserves (base == NULL: counts) `count` elements of `elem` bytes, 64-byte aligned. */
static void *arena_take(struct arena *a, int64_t count, size_t elem)
{
    size_t bytes;
    if (count < 0 || __builtin_mul_overflow((size_t)count, elem, &bytes) || bytes > SIZE_MAX - 64 - a->used) {
        a->overflow = true;
        return NULL;
    }
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (bytes + 63) / 64 * 64;
    return p;
}

/* Lays out the teams' and threads' buffers (counting only, when a->base is NULL). */
static void lay_out(struct ref_plan *p, struct arena *a, int threads, int64_t lanes, int64_t k_max, size_t elem)
{
    const int64_t H = p->hidden, gates = 4 * lanes;
    int64_t rows_max = (p->batch + p->team_count / 2 - 1) / (p->team_count / 2);
    for (int i = 0; i < p->team_count; i++)
        for (int b = 0; b < 2; b++)
            p->teams[i].h[b] = arena_take(a, p->teams[i].rows * H, elem);
    for (int i = 0; i < threads; i++) {
        struct ref_thread *w = &p->workers[i];
        w->Wp = arena_take(a, w->chunks * k_max * gates, elem);
        w->Rp = arena_take(a, w->chunks * H * gates, elem);
        w->bias = arena_take(a, w->chunks * gates, elem);
        w->G = arena_take(a, rows_max * p->slab_steps * w->chunks * gates, elem);
        w->c = arena_take(a, rows_max * w->chunks * lanes, elem);
    }
}

/* The slab of steps projected at once: its G within ~256 KiB a thread (in
 * the core's cache while the steps read it), at least one step. */
#define SLAB_BYTES ((int64_t)256 << 10)

/* Teams, threads and their buffers for `threads` threads; the arena is
 * p->teams' owner (freed by the caller). */
static int plan_threads(struct ref_plan *p, int threads, int team_threads, int64_t lanes, int64_t k_max, size_t elem,
                        void **arena_out)
{
    const int64_t chunk_count = (p->hidden + lanes - 1) / lanes;
    struct split s;
    split_work(threads, spk_cpu_count(), team_threads, p->batch, chunk_count, &s);
    p->team_size = (int)s.team_size;
    p->team_count = (int)(2 * s.groups);
    int64_t rows_max = (p->batch + s.groups - 1) / s.groups;
    int64_t chunks_max = (chunk_count + s.team_size - 1) / s.team_size;
    int64_t per_step = rows_max * chunks_max * 4 * lanes * (int64_t)elem;
    p->slab_steps = SLAB_BYTES / per_step < 1 ? 1 : SLAB_BYTES / per_step;
    if (p->slab_steps > p->steps)
        p->slab_steps = p->steps;
    p->teams = calloc((size_t)p->team_count, sizeof *p->teams);
    p->workers = calloc((size_t)threads, sizeof *p->workers);
    p->next_team = calloc((size_t)p->layers, sizeof *p->next_team);
    if (!p->teams || !p->workers || !p->next_team)
        return spk_fail("lstm reference: out of memory");
    for (int i = 0; i < p->team_count; i++) {
        int64_t g = i / 2;
        p->teams[i].d = i % 2;
        p->teams[i].row0 = g * p->batch / s.groups;
        p->teams[i].rows = (g + 1) * p->batch / s.groups - p->teams[i].row0;
        spk_cpu_barrier_init(&p->teams[i].barrier, p->team_size);
    }
    for (int i = 0; i < threads; i++) {
        struct ref_thread *w = &p->workers[i];
        w->packed_layer = w->packed_dir = -1;
        w->team = -1;
        if (p->team_size == 1) {
            w->chunks = chunk_count;
        } else if (i < p->team_count * p->team_size) {
            int64_t j = i % p->team_size;
            w->team = i / p->team_size;
            w->chunk0 = j * chunk_count / s.team_size;
            w->chunks = (j + 1) * chunk_count / s.team_size - w->chunk0;
        }
    }
    spk_cpu_barrier_init(&p->all, threads);
    struct arena a = {0};
    lay_out(p, &a, threads, lanes, k_max, elem);
    if (a.overflow)
        return spk_fail("lstm reference: the buffers for batch %lld and %lld steps are too large",
                        (long long)p->batch, (long long)p->steps);
    a.base = aligned_alloc(64, a.used ? a.used : 64);
    if (!a.base)
        return spk_fail("lstm reference: out of memory for %zu bytes of buffers", a.used);
    a.used = 0;
    lay_out(p, &a, threads, lanes, k_max, elem);
    *arena_out = a.base;
    return 0;
}

/* ---- the entry point ----------------------------------------------------------- */

spk_lstm_reference_options spk_lstm_reference_defaults(void)
{
    spk_lstm_reference_options o;
    memset(&o, 0, sizeof o);
    o.precision = SPK_F64;
    return o;
}

void spk_lstm_reference_result_free(spk_lstm_reference_result *r)
{
    if (!r)
        return;
    spk_tensor_free(r->y);
    for (int i = 0; i < r->layer_count; i++)
        spk_tensor_free(r->layer_outputs[i]);
    free(r->layer_outputs);
    spk_tensor_free(r->trace_h);
    spk_tensor_free(r->trace_c);
    memset(r, 0, sizeof *r);
}

/* A contiguous copy of t in `dtype` (a new reference). */
static spk_tensor *as_contiguous(const spk_tensor *t, spk_dtype dtype)
{
    spk_tensor *converted = t->dtype == dtype ? spk_tensor_contiguous(t) : spk_tensor_to_dtype(t, dtype);
    if (!converted || spk_tensor_is_contiguous(converted))
        return converted;
    spk_tensor *c = spk_tensor_contiguous(converted);
    spk_tensor_free(converted);
    return c;
}

static int check_call(const spk_lstm_layer *layers, int count, const spk_tensor *x,
                      const spk_lstm_reference_options *opt, spk_lstm_dims *dims)
{
    if (spk_lstm_validate(layers, count, dims))
        return -1;
    if (opt->precision != SPK_F32 && opt->precision != SPK_F64)
        return spk_fail("lstm reference: precision must be f32 or f64, got %s", spk_dtype_name(opt->precision));
    char got[128];
    if (!x)
        return spk_fail("lstm reference: input missing");
    if (!spk_tensor_is_host(x) || (x->dtype != SPK_F32 && x->dtype != SPK_F64))
        return spk_fail("lstm reference: input must be an f32 or f64 host tensor");
    if (x->ndim != 3 || x->shape[0] < 1 || x->shape[1] < 1 || x->shape[2] != dims->input)
        return spk_fail("lstm reference: input has shape %s, expected [batch, steps, %lld]",
                        spk_shape_string(x, got, sizeof got), (long long)dims->input);
    if (opt->trace_count < 0 || (opt->trace_count > 0 && !opt->trace_steps))
        return spk_fail("lstm reference: trace steps missing");
    if (opt->trace_count > 0) {
        if (opt->trace_layer < 0 || opt->trace_layer >= count)
            return spk_fail("lstm reference: trace layer %d is outside 1..%d", opt->trace_layer + 1, count);
        if (opt->trace_direction != 0 && opt->trace_direction != 1)
            return spk_fail("lstm reference: trace direction must be 0 (forward) or 1 (reverse)");
        for (int e = 0; e < opt->trace_count; e++)
            if (opt->trace_steps[e] < 0 || opt->trace_steps[e] >= x->shape[1])
                return spk_fail("lstm reference: trace step %lld is outside 1..%lld",
                                (long long)opt->trace_steps[e] + 1, (long long)x->shape[1]);
    }
    spk_cpu_vector unit;
    return spk_cpu_vector_resolve(opt->vector, &unit);
}

/* The tensors of a call: each layer's weights in the precision, the input,
 * the layer outputs (all kept, or two taking turns) and the trace. */
struct call_tensors {
    spk_tensor **weights; /* W, R, B of each layer */
    spk_tensor *in, *turns[2];
    int count;
};

static void call_tensors_free(struct call_tensors *t)
{
    for (int i = 0; t->weights && i < 3 * t->count; i++)
        spk_tensor_free(t->weights[i]);
    free(t->weights);
    spk_tensor_free(t->in);
    spk_tensor_free(t->turns[0]);
    spk_tensor_free(t->turns[1]);
    memset(t, 0, sizeof *t);
}

/* Fills the plan's per-layer arrays (allocated here, freed with free()). */
static int prepare_tensors(const spk_lstm_layer *layers, int count, const spk_tensor *x, const spk_lstm_dims *dims,
                           const spk_lstm_reference_options *opt, struct ref_plan *p, struct call_tensors *t,
                           spk_lstm_reference_result *out)
{
    const spk_dtype prec = opt->precision;
    const int64_t shape[3] = {x->shape[0], x->shape[1], 2 * dims->hidden};
    t->count = count;
    t->weights = calloc((size_t)(3 * count), sizeof *t->weights);
    void **arrays = calloc((size_t)(5 * count), sizeof(void *));
    int64_t *input = calloc((size_t)count, sizeof *input);
    p->input = input;
    p->W = (const void **)arrays;
    if (!t->weights || !arrays || !input)
        return spk_fail("lstm reference: out of memory");
    p->R = p->W + count, p->B = p->R + count, p->in = p->B + count, p->out = arrays + 4 * count;
    if (opt->layers_out && !(out->layer_outputs = calloc((size_t)count, sizeof *out->layer_outputs)))
        return spk_fail("lstm reference: out of memory");
    out->layer_count = opt->layers_out ? count : 0;
    if (!(t->in = as_contiguous(x, prec)))
        return -1;
    for (int k = 0; k < count; k++) {
        for (int part = 0; part < 3; part++) {
            const spk_tensor *w = part == 0 ? layers[k].W : part == 1 ? layers[k].R : layers[k].B;
            if (!(t->weights[3 * k + part] = as_contiguous(w, prec)))
                return -1;
            p->W[k + part * count] = spk_tensor_data(t->weights[3 * k + part]);
        }
        spk_tensor *y = NULL;
        if (opt->layers_out)
            y = out->layer_outputs[k] = spk_tensor_new(prec, 3, shape);
        else
            y = t->turns[k % 2] ? t->turns[k % 2] : (t->turns[k % 2] = spk_tensor_new(prec, 3, shape));
        if (!y)
            return -1;
        input[k] = k == 0 ? dims->input : 2 * dims->hidden;
        p->out[k] = spk_tensor_data(y);
        p->in[k] = k == 0 ? spk_tensor_data(t->in) : p->out[k - 1];
    }
    if (opt->trace_count > 0) {
        const int64_t trace_shape[3] = {opt->trace_count, x->shape[0], dims->hidden};
        out->trace_h = spk_tensor_new(prec, 3, trace_shape);
        out->trace_c = spk_tensor_new(prec, 3, trace_shape);
        if (!out->trace_h || !out->trace_c)
            return -1;
        p->trace_layer = opt->trace_layer, p->trace_direction = opt->trace_direction;
        p->trace_count = opt->trace_count, p->trace_steps = opt->trace_steps;
        p->trace_h = spk_tensor_data(out->trace_h), p->trace_c = spk_tensor_data(out->trace_c);
    }
    return 0;
}

static void report_profile(const struct ref_plan *p, int threads, spk_cpu_vector unit, double wall_ms,
                           spk_lstm_reference_profile *out)
{
    memset(out, 0, sizeof *out);
    out->vector = unit;
    out->threads = threads;
    out->teams = p->team_count;
    out->team_threads = p->team_size;
    out->slab_steps = p->slab_steps;
    out->wall_ms = wall_ms;
    for (int i = 0; i < threads; i++) {
        out->project_ms += p->workers[i].project_ms;
        out->step_ms += p->workers[i].step_ms;
        out->wait_ms += p->workers[i].wait_ms;
    }
    const double rows = (double)p->batch * (double)p->steps * 2 * 4 * (double)p->hidden; /* gate rows, both directions */
    for (int k = 0; k < p->layers; k++) {
        out->project_flops += 2 * rows * (double)p->input[k];
        out->step_flops += 2 * rows * (double)p->hidden;
    }
}

/* The default thread count takes at most one thread for this much work (a
 * few hundred microseconds of one core): fewer where a call is smaller, as
 * starting and meeting threads would cost more than they save. */
#define DEFAULT_WORK_FLOPS 8e6

/* Starts the threads, splits the work over those there are, runs it. */
static int run_plan(struct ref_plan *p, const spk_lstm_reference_options *opt, int64_t k_max)
{
    int threads = opt->threads;
    if (threads <= 0) {
        if (spk_cpu_threads_default(&threads, NULL))
            return -1;
        double flops = 0, rows = (double)p->batch * (double)p->steps * 8 * (double)p->hidden;
        for (int k = 0; k < p->layers; k++)
            flops += 2 * rows * (double)(p->input[k] + p->hidden);
        if (flops / DEFAULT_WORK_FLOPS < threads)
            threads = flops < DEFAULT_WORK_FLOPS ? 1 : (int)(flops / DEFAULT_WORK_FLOPS);
    }
    spk_cpu_vector unit;
    if (spk_cpu_vector_resolve(opt->vector, &unit))
        return -1;
    const bool f64 = opt->precision == SPK_F64;
    const size_t elem = f64 ? sizeof(double) : sizeof(float);
    const int64_t lanes = spk_cpu_vector_bytes(unit) / (int64_t)elem;
    struct split s;
    int want = split_work(threads, spk_cpu_count(), opt->team_threads, p->batch, (p->hidden + lanes - 1) / lanes, &s);
    int have = 0;
    spk_cpu_pool *pool = spk_cpu_pool_start(want, &have);
    if (!pool)
        return -1;
    void *arena = NULL;
    if (plan_threads(p, have, opt->team_threads, lanes, k_max, elem, &arena)) {
        spk_cpu_pool_run(pool, NULL, NULL);
        free(arena);
        return -1;
    }
    p->profiled = opt->profile != NULL;
    double start = p->profiled ? clock_ms() : 0;
    spk_cpu_pool_run(pool, worker_for(f64, unit), p);
    if (opt->profile)
        report_profile(p, have, unit, clock_ms() - start, opt->profile);
    free(arena);
    return spk_cancel_check();
}

int spk_lstm_reference(const spk_lstm_layer *layers, int count, const spk_tensor *x,
                       const spk_lstm_reference_options *options, spk_lstm_reference_result *out)
{
    memset(out, 0, sizeof *out);
    spk_lstm_reference_options opt = options ? *options : spk_lstm_reference_defaults();
    spk_lstm_dims dims;
    if (check_call(layers, count, x, &opt, &dims))
        return -1;
    struct ref_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.batch = x->shape[0], plan.steps = x->shape[1], plan.hidden = dims.hidden, plan.layers = count;
    struct call_tensors tensors;
    memset(&tensors, 0, sizeof tensors);
    int64_t k_max = dims.input > 2 * dims.hidden ? dims.input : 2 * dims.hidden;
    int rc = prepare_tensors(layers, count, x, &dims, &opt, &plan, &tensors, out);
    if (rc == 0)
        rc = run_plan(&plan, &opt, k_max);
    if (rc == 0 && opt.layers_out) {
        out->y = spk_tensor_clone(out->layer_outputs[count - 1]); /* y does not alias the last layer's output */
        rc = out->y ? 0 : -1;
    } else if (rc == 0) {
        out->y = tensors.turns[(count - 1) % 2];
        tensors.turns[(count - 1) % 2] = NULL;
    }
    call_tensors_free(&tensors);
    free((void *)plan.input);
    free((void *)plan.W);
    free(plan.teams);
    free(plan.workers);
    free(plan.next_team);
    if (rc)
        spk_lstm_reference_result_free(out);
    return rc;
}
