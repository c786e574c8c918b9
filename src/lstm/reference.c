/* The reference forward pass of a bidirectional LSTM stack on the CPU, in f64
 * or f32 (numerics in lstm.h). Per layer: transpose W and R of both directions
 * into the chosen precision, then run every (batch row, direction) item on a
 * pool of threads; an item first projects all its steps (x·Wᵀ), then runs the
 * recurrence. Layers run one after the other, as the reverse output at t = 0
 * is the last thing a layer computes. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cancel.h"
#include "core/error.h"
#include "lstm/lstm.h"

/* What every item of one layer shares (read-only, except disjoint writes to
 * `out` and the trace). Pointers are float* or double* by precision. */
struct layer_job {
    int64_t batch, steps, input, hidden;
    const void *in; /* [B, T, input] */
    void *out;      /* [B, T, 2H] */
    const void *Wt[2], *Rt[2], *bias[2];
    int trace_count, trace_direction;
    const int64_t *trace_steps;
    void *trace_h, *trace_c; /* [trace_count, B, H], or NULL */
    atomic_int_fast64_t next_item;
    bool f64;
};

struct scratch {
    void *gates, *acc, *h, *c;
};

#define REAL float
#define LANES 4
#define SUFFIX f32
#define EXP expf
#define TANH tanhf
#include "lstm/reference_impl.h"
#undef REAL
#undef LANES
#undef SUFFIX
#undef EXP
#undef TANH

#define REAL double
#define LANES 2
#define SUFFIX f64
#define EXP exp
#define TANH tanh
#include "lstm/reference_impl.h"
#undef REAL
#undef LANES
#undef SUFFIX
#undef EXP
#undef TANH

/* 64-byte aligned, zeroed, size rounded up as aligned_alloc wants. */
static void *aligned_zeroed(size_t bytes)
{
    size_t size = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, size ? size : 64);
    if (p)
        memset(p, 0, size ? size : 64);
    return p;
}

static void scratch_free(struct scratch *s)
{
    free(s->gates);
    free(s->acc);
    free(s->h);
    free(s->c);
}

static int scratch_new(struct scratch *s, int64_t steps, int64_t hidden, size_t elem)
{
    s->gates = aligned_zeroed((size_t)(steps * 4 * hidden) * elem);
    s->acc = aligned_zeroed((size_t)(4 * hidden) * elem);
    s->h = aligned_zeroed((size_t)hidden * elem);
    s->c = aligned_zeroed((size_t)hidden * elem);
    if (!s->gates || !s->acc || !s->h || !s->c) {
        scratch_free(s);
        return spk_fail("lstm reference: out of memory for %lld steps", (long long)steps);
    }
    return 0;
}

struct worker {
    struct layer_job *job;
    struct scratch scratch;
    pthread_t thread;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct layer_job *job = w->job;
    int64_t items = job->batch * 2;
    while (!spk_cancel_requested()) {
        int64_t item = atomic_fetch_add(&job->next_item, 1);
        if (item >= items)
            break;
        int64_t b = item / 2;
        int d = (int)(item % 2);
        if (job->f64)
            run_item_f64(job, b, d, &w->scratch);
        else
            run_item_f32(job, b, d, &w->scratch);
    }
    return NULL;
}

/* Runs every item of `job` on `count` workers (the caller's thread is one).
 * -1 with "interrupted" when cancellation was requested meanwhile (on this
 * thread, where the message is read). */
static int run_layer(struct layer_job *job, struct worker *workers, int count)
{
    atomic_store(&job->next_item, 0);
    int started = 0;
    for (int i = 0; i < count; i++)
        workers[i].job = job;
    for (int i = 1; i < count; i++, started++)
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) != 0)
            break;
    work(&workers[0]);
    for (int i = 1; i <= started; i++)
        pthread_join(workers[i].thread, NULL);
    return spk_cancel_check();
}

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

/* Transposed weights and summed bias of one layer, both directions. */
struct prepared {
    void *Wt[2], *Rt[2], *bias[2];
};

static void prepared_free(struct prepared *p)
{
    for (int d = 0; d < 2; d++) {
        free(p->Wt[d]);
        free(p->Rt[d]);
        free(p->bias[d]);
        p->Wt[d] = p->Rt[d] = p->bias[d] = NULL;
    }
}

static int prepare_layer(const spk_lstm_layer *layer, int64_t input, int64_t hidden, spk_dtype precision,
                         struct prepared *p)
{
    memset(p, 0, sizeof *p);
    size_t elem = spk_dtype_size(precision);
    int64_t N = 4 * hidden;
    spk_tensor *W = as_contiguous(layer->W, precision);
    spk_tensor *R = as_contiguous(layer->R, precision);
    spk_tensor *B = as_contiguous(layer->B, precision);
    int rc = 0;
    if (!W || !R || !B) {
        rc = -1;
        goto done;
    }
    for (int d = 0; d < 2; d++) {
        p->Wt[d] = aligned_zeroed((size_t)(input * N) * elem);
        p->Rt[d] = aligned_zeroed((size_t)(hidden * N) * elem);
        p->bias[d] = aligned_zeroed((size_t)N * elem);
        if (!p->Wt[d] || !p->Rt[d] || !p->bias[d]) {
            rc = spk_fail("lstm reference: out of memory for the weights");
            goto done;
        }
        const char *w = (const char *)spk_tensor_data(W) + (size_t)(d * N * input) * elem;
        const char *r = (const char *)spk_tensor_data(R) + (size_t)(d * N * hidden) * elem;
        const char *b = (const char *)spk_tensor_data(B) + (size_t)(d * 2 * N) * elem;
        if (precision == SPK_F64) {
            prepare_f64((const double *)w, N, input, p->Wt[d]);
            prepare_f64((const double *)r, N, hidden, p->Rt[d]);
            sum_bias_f64((const double *)b, N, p->bias[d]);
        } else {
            prepare_f32((const float *)w, N, input, p->Wt[d]);
            prepare_f32((const float *)r, N, hidden, p->Rt[d]);
            sum_bias_f32((const float *)b, N, p->bias[d]);
        }
    }
done:
    if (rc)
        prepared_free(p);
    spk_tensor_free(W);
    spk_tensor_free(R);
    spk_tensor_free(B);
    return rc;
}

int spk_lstm_reference(const spk_lstm_layer *layers, int count, const spk_tensor *x,
                       const spk_lstm_reference_options *options, spk_lstm_reference_result *out)
{
    memset(out, 0, sizeof *out);
    spk_lstm_reference_options opt = options ? *options : spk_lstm_reference_defaults();
    spk_lstm_dims dims;
    if (spk_lstm_validate(layers, count, &dims))
        return -1;
    if (opt.precision != SPK_F32 && opt.precision != SPK_F64)
        return spk_fail("lstm reference: precision must be f32 or f64, got %s", spk_dtype_name(opt.precision));
    char got[128];
    if (!x)
        return spk_fail("lstm reference: input missing");
    if (!spk_tensor_is_host(x) || (x->dtype != SPK_F32 && x->dtype != SPK_F64))
        return spk_fail("lstm reference: input must be an f32 or f64 host tensor");
    if (x->ndim != 3 || x->shape[0] < 1 || x->shape[1] < 1 || x->shape[2] != dims.input)
        return spk_fail("lstm reference: input has shape %s, expected [batch, steps, %lld]",
                        spk_shape_string(x, got, sizeof got), (long long)dims.input);
    const int64_t batch = x->shape[0], steps = x->shape[1], H = dims.hidden;
    if (opt.trace_count < 0 || (opt.trace_count > 0 && !opt.trace_steps))
        return spk_fail("lstm reference: trace steps missing");
    if (opt.trace_count > 0) {
        if (opt.trace_layer < 0 || opt.trace_layer >= count)
            return spk_fail("lstm reference: trace layer %d is outside 1..%d", opt.trace_layer + 1, count);
        if (opt.trace_direction != 0 && opt.trace_direction != 1)
            return spk_fail("lstm reference: trace direction must be 0 (forward) or 1 (reverse)");
        for (int e = 0; e < opt.trace_count; e++)
            if (opt.trace_steps[e] < 0 || opt.trace_steps[e] >= steps)
                return spk_fail("lstm reference: trace step %lld is outside 1..%lld",
                                (long long)opt.trace_steps[e] + 1, (long long)steps);
    }
    int threads = opt.threads;
    if (threads <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        threads = online > 0 ? (int)online : 1;
    }
    if (threads > batch * 2)
        threads = (int)(batch * 2);

    spk_dtype precision = opt.precision;
    size_t elem = spk_dtype_size(precision);
    const int64_t out_shape[3] = {batch, steps, 2 * H};
    struct worker *workers = calloc((size_t)threads, sizeof *workers);
    spk_tensor *in = NULL, *prev = NULL, *cur = NULL;
    struct prepared prep;
    memset(&prep, 0, sizeof prep);
    int rc = -1, ready = 0;
    if (!workers) {
        spk_fail("lstm reference: out of memory");
        goto done;
    }
    for (; ready < threads; ready++)
        if (scratch_new(&workers[ready].scratch, steps, H, elem))
            goto done;
    if (opt.layers_out) {
        out->layer_outputs = calloc((size_t)count, sizeof *out->layer_outputs);
        if (!out->layer_outputs) {
            spk_fail("lstm reference: out of memory");
            goto done;
        }
        out->layer_count = count;
    }
    if (opt.trace_count > 0) {
        const int64_t trace_shape[3] = {opt.trace_count, batch, H};
        out->trace_h = spk_tensor_new(precision, 3, trace_shape);
        out->trace_c = spk_tensor_new(precision, 3, trace_shape);
        if (!out->trace_h || !out->trace_c)
            goto done;
    }
    in = as_contiguous(x, precision);
    if (!in)
        goto done;

    for (int k = 0; k < count; k++) {
        int64_t input = k == 0 ? dims.input : 2 * H;
        if (prepare_layer(&layers[k], input, H, precision, &prep))
            goto done;
        cur = spk_tensor_new(precision, 3, out_shape);
        if (!cur)
            goto done;
        struct layer_job job = {
            .batch = batch, .steps = steps, .input = input, .hidden = H,
            .in = spk_tensor_data(k == 0 ? in : prev), .out = spk_tensor_data(cur),
            .Wt = {prep.Wt[0], prep.Wt[1]}, .Rt = {prep.Rt[0], prep.Rt[1]},
            .bias = {prep.bias[0], prep.bias[1]},
            .f64 = precision == SPK_F64,
        };
        if (opt.trace_count > 0 && opt.trace_layer == k) {
            job.trace_count = opt.trace_count;
            job.trace_direction = opt.trace_direction;
            job.trace_steps = opt.trace_steps;
            job.trace_h = spk_tensor_data(out->trace_h);
            job.trace_c = spk_tensor_data(out->trace_c);
        }
        if (run_layer(&job, workers, threads))
            goto done;
        prepared_free(&prep);
        /* With layers_out the result owns every layer's output and prev is
         * borrowed from it; otherwise prev is owned here. */
        if (opt.layers_out)
            out->layer_outputs[k] = cur;
        else
            spk_tensor_free(prev);
        prev = cur;
        cur = NULL;
    }
    if (opt.layers_out) {
        out->y = spk_tensor_clone(prev); /* y does not alias the last layer's output */
        prev = NULL;
        if (!out->y)
            goto done;
    } else {
        out->y = prev;
        prev = NULL;
    }
    rc = 0;
done:
    for (int i = 0; i < ready; i++)
        scratch_free(&workers[i].scratch);
    free(workers);
    prepared_free(&prep);
    spk_tensor_free(in);
    if (!opt.layers_out)
        spk_tensor_free(prev);
    spk_tensor_free(cur);
    if (rc)
        spk_lstm_reference_result_free(out);
    return rc;
}
