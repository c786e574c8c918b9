/* Shared pieces of the GPU stack plans: see device_layers.h. */
#include "lstm/device_layers.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/nvtx.h"

static int check_finite(const spk_tensor *t, int layer, const char *name)
{
    int64_t n = spk_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = spk_tensor_flat_get(t, i);
        if (!isfinite(v))
            return spk_fail("layer %d: %s has a non-finite value (%g) at flat index %lld", layer + 1, name, v,
                            (long long)i);
    }
    return 0;
}

int spk_lstm_check_finite(const spk_lstm_layer *layers, int count)
{
    for (int l = 0; l < count; l++)
        if (check_finite(layers[l].W, l, "W") || check_finite(layers[l].R, l, "R") ||
            check_finite(layers[l].B, l, "B"))
            return -1;
    return 0;
}

/* A packed host tensor (f32) uploaded to the device; takes `host`. */
static spk_tensor *upload_f32(spk_tensor *host, spk_stream *s)
{
    if (!host)
        return NULL;
    spk_tensor *f = spk_tensor_to_dtype(host, SPK_F32);
    spk_tensor_free(host);
    if (!f)
        return NULL;
    spk_tensor *d = spk_tensor_to_device(f, s);
    spk_tensor_free(f);
    return d;
}

void spk_lstm_device_layers_free(spk_lstm_device_layer *layers, int count)
{
    for (int i = 0; layers && i < count; i++) {
        spk_tensor_free(layers[i].w);
        spk_tensor_free(layers[i].r);
        spk_tensor_free(layers[i].bias);
        spk_tensor_free(layers[i].w_hi);
        spk_tensor_free(layers[i].w_lo);
        spk_f16_parts_free(&layers[i].w16);
    }
    free(layers);
}

spk_lstm_packing spk_lstm_packing_builtin(void)
{
    return (spk_lstm_packing){.order = SPK_GATES_PACKED, .layout = SPK_LSTM_LAYOUT_UNITS};
}

int spk_lstm_packing_check(const spk_lstm_packing *packing)
{
    if (spk_lstm_gate_order_check(packing->order) != 0)
        return -1;
    if (packing->layout != SPK_LSTM_LAYOUT_UNITS && packing->layout != SPK_LSTM_LAYOUT_ROWS)
        return spk_fail("packing layout %d is neither units nor rows", (int)packing->layout);
    return 0;
}

spk_lstm_device_layer *spk_lstm_device_layers_new(const spk_lstm_layer *layers, int count,
                                                  const spk_lstm_packing *packing, spk_stream *s)
{
    if (spk_lstm_packing_check(packing) != 0)
        return NULL;
    const char *to = packing->order;
    spk_lstm_layout layout = packing->layout;
    spk_lstm_device_layer *out = calloc((size_t)count, sizeof *out);
    if (!out)
        return spk_fail_null("lstm stack: out of memory");
    for (int l = 0; l < count; l++) {
        spk_lstm_device_layer *pl = &out[l];
        pl->input = layers[l].W->shape[2];
        if (!(pl->w = upload_f32(spk_lstm_pack_layout(layers[l].W, SPK_GATES_ONNX, to, layout), s)) ||
            !(pl->r = upload_f32(spk_lstm_pack_layout(layers[l].R, SPK_GATES_ONNX, to, layout), s)) ||
            !(pl->bias = upload_f32(spk_lstm_pack_bias_layout(layers[l].B, SPK_GATES_ONNX, to, layout), s))) {
            spk_error_prefix("layer %d", l + 1);
            spk_lstm_device_layers_free(out, count);
            return NULL;
        }
    }
    return out;
}

int spk_lstm_check_math(spk_math_mode math)
{
    if (spk_math_mode_where(math) & SPK_MATH_STACKS)
        return 0;
    char choices[128];
    spk_math_mode_choices(SPK_MATH_STACKS, choices, sizeof choices);
    if ((int)math < 0 || math >= SPK_MATH_COUNT)
        return spk_fail("lstm stack: math must be %s (the input projections), got mode %d", choices, (int)math);
    return spk_fail("lstm stack: math must be %s (the input projections), got \"%s\"", choices,
                    spk_math_mode_name(math));
}

const char *spk_lstm_math_name(spk_math_mode math) { return spk_math_mode_name(math); }

#define MATH_SUFFIX(NAME, name, where, held_to, help) ", " name " projections",
static const char *const math_suffixes[] = {SPK_MATH_MODES(MATH_SUFFIX)};

const char *spk_lstm_math_suffix(spk_math_mode math)
{
    if (math == SPK_MATH_FP32 || (int)math < 0 || math >= SPK_MATH_COUNT)
        return "";
    return math_suffixes[math];
}

int spk_lstm_project(const spk_lstm_device_layer *layer, const spk_tensor *a, spk_tensor *gates, spk_math_mode math,
                     spk_stream *s)
{
    /* Both directions in one batched GEMM, a shared by the two: gates[d] =
     * a w[d]^T. One launch fills the last wave of tiles that two leave part
     * empty (docs/results/2026-11-30-h200/bench_batched.txt). */
    spk_gemm_args ga = {.a = a, .b = layer->w, .c = gates, .transa = false, .transb = true, .alpha = 1.0f,
                        .beta = 0.0f, .math = math, .stream = s};
    /* A layer with FP16 parts projects h, |h| <= 1: scaled as its bound
     * says, the small values' lo parts stay normal (unscaled, they cost
     * FP32's accuracy: docs/performance.md) and |h| up to 4 stays in range. */
    if (math == SPK_MATH_3XTF32 && layer->w16.hi && spk_gemm_3xf16_fits(&ga, &layer->w16))
        return spk_gemm_3xf16(&ga, &layer->w16, spk_f16_exponent_of(1.0f));
    if (math == SPK_MATH_3XTF32 && layer->w_lo) {
        spk_gemm_args split = ga;
        split.b = layer->w_hi;
        split.b_lo = layer->w_lo;
        if (spk_gemm_3xtf32_split_fits(&split)) /* else (an unaligned x) the other 3xtf32 kernels */
            return spk_gemm(&split);
    }
    return spk_gemm(&ga);
}

int spk_lstm_check_x(int64_t batch, int64_t steps, int64_t input, const spk_tensor *x)
{
    if (!x)
        return spk_fail("lstm stack forward: x is missing");
    if (x->dtype != SPK_F32)
        return spk_fail("lstm stack forward: x has dtype %s, expected f32", spk_dtype_name(x->dtype));
    char got[128];
    if (x->ndim != 3 || x->shape[0] != batch || x->shape[1] != steps || x->shape[2] != input)
        return spk_fail("lstm stack forward: x has shape %s, expected [%lld, %lld, %lld]",
                        spk_shape_string(x, got, sizeof got), (long long)batch, (long long)steps,
                        (long long)input);
    return 0;
}

int spk_lstm_gpu_shape_check(const spk_lstm_layer *layers, int count, int64_t batch, int64_t steps,
                             int variant_hidden, spk_math_mode math, spk_lstm_gpu_shape *shape)
{
    spk_lstm_dims dims;
    if (spk_lstm_validate(layers, count, &dims) != 0)
        return -1;
    if (batch < 1 || steps < 1)
        return spk_fail("lstm stack: batch and steps must be at least 1, got batch %lld, steps %lld",
                        (long long)batch, (long long)steps);
    if (dims.hidden != variant_hidden)
        return spk_fail("lstm stack: the layers have hidden size %lld, the kernel variant %d (kernel.hidden)",
                        (long long)dims.hidden, variant_hidden);
    shape->layers = count;
    shape->hidden = dims.hidden;
    shape->input = dims.input;
    shape->batch = batch;
    shape->steps = steps;
    shape->math = math;
    return 0;
}

int spk_lstm_gpu_buffers_new(spk_lstm_gpu_buffers *b, const spk_lstm_layer *layers, const spk_lstm_gpu_shape *shape,
                             const spk_lstm_packing *packing, spk_dtype words_dtype, int64_t words_numel,
                             spk_tensor **words, spk_stream *s)
{
    b->count = (int)shape->layers;
    /* The projections' GEMM made ready now (a 3xtf32 kernel's compile and
     * load), so that a forward can be captured in a graph. */
    if (spk_gemm_prepare(shape->math))
        return -1;
    if (!(b->layers = spk_lstm_device_layers_new(layers, b->count, packing, s)))
        return -1;
    spk_3xtf32_form form = SPK_3XTF32_CLASSIC;
    if (shape->math == SPK_MATH_3XTF32 && spk_gemm_3xtf32_plan_form(&form))
        return -1;
    for (int l = 0; form != SPK_3XTF32_CLASSIC && l < b->count; l++) {
        spk_lstm_device_layer *dl = &b->layers[l];
        if (spk_tf32_split(dl->w, &dl->w_hi, &dl->w_lo, s) ||
            (form == SPK_3XTF32_TMA_F16 && l > 0 && spk_f16_split(dl->w, &dl->w16, s))) {
            spk_error_prefix("layer %d", l + 1);
            return -1;
        }
    }
    int64_t H = shape->hidden, B = shape->batch, T = shape->steps;
    int64_t gshape[3] = {2, B * T, 4 * H};
    int64_t wshape[1] = {words_numel};
    int64_t yshape[3] = {B, T, 2 * H};
    if (!(b->gates = spk_device_tensor_new(SPK_F32, 3, gshape, s)) ||
        !(*words = spk_device_tensor_new(words_dtype, 1, wshape, s)) ||
        !(b->output = spk_device_tensor_new(SPK_F32, 3, yshape, s)))
        return -1;
    return spk_stream_synchronize(s) != 0 ? -1 : 0;
}

void spk_lstm_gpu_buffers_free(spk_lstm_gpu_buffers *b)
{
    spk_lstm_device_layers_free(b->layers, b->count);
    spk_tensor_free(b->gates);
    spk_tensor_free(b->output);
    b->layers = NULL;
    b->gates = b->output = NULL;
}

int spk_lstm_gpu_check_enqueue(const spk_lstm_gpu_shape *shape, const spk_tensor *x)
{
    if (spk_lstm_check_x(shape->batch, shape->steps, shape->input, x) != 0)
        return -1;
    if (!spk_tensor_is_device(x) || !spk_tensor_is_contiguous(x))
        return spk_fail("lstm stack: enqueue needs a contiguous device x");
    return 0;
}

int spk_lstm_gpu_enqueue_layers(const spk_lstm_gpu_buffers *b, const spk_lstm_gpu_shape *shape, const spk_tensor *x,
                                spk_stream *s, int (*recur)(void *plan, int layer), void *plan)
{
    for (int l = 0; l < b->count; l++) {
        spk_nvtx_pushf("layer %d", l + 1);
        int64_t a_shape[2] = {shape->batch * shape->steps, b->layers[l].input};
        spk_tensor *a = spk_tensor_view(l == 0 ? x : b->output, 2, a_shape);
        /* Both projections read the whole previous output before this layer's
         * recurrence (enqueued after them on the same stream) overwrites it. */
        spk_nvtx_push("projections");
        int rc = a ? spk_lstm_project(&b->layers[l], a, b->gates, shape->math, s) : -1;
        spk_nvtx_pop();
        if (rc && a)
            spk_error_prefix("layer %d projection", l + 1);
        spk_tensor_free(a);
        rc = rc || recur(plan, l) != 0;
        spk_nvtx_pop();
        if (rc)
            return -1;
    }
    return 0;
}

int spk_lstm_gpu_check_status(unsigned code, const spk_lstm_gpu_status *known, int count, const char *kernel)
{
    if (code == 0)
        return 0;
    for (int i = 0; i < count; i++)
        if (known[i].code == code)
            return spk_fail("lstm stack: %s", known[i].message);
    return spk_fail("lstm stack: the %s kernel reported status %u", kernel, code);
}

spk_tensor *spk_lstm_gpu_forward(const spk_lstm_gpu_runner *p, const spk_tensor *x)
{
    if (spk_lstm_check_x(p->shape->batch, p->shape->steps, p->shape->input, x) != 0)
        return NULL;
    bool host = !spk_tensor_is_device(x);
    spk_tensor *dx = NULL;
    if (host) {
        dx = spk_tensor_to_device(x, p->stream);
    } else if (spk_tensor_is_contiguous(x)) {
        dx = spk_tensor_view(x, x->ndim, x->shape);
    } else {
        dx = spk_device_tensor_new(SPK_F32, x->ndim, x->shape, p->stream);
        if (dx && spk_tensor_copy_device(dx, x, p->stream) != 0) {
            spk_tensor_free(dx);
            dx = NULL;
        }
    }
    if (!dx)
        return NULL;
    int rc = p->enqueue(p->plan, dx);
    spk_tensor_free(dx);
    if (rc != 0 || p->finish(p->plan) != 0)
        return NULL;
    if (host)
        return spk_tensor_to_host(p->output, p->stream);
    spk_tensor *y = spk_device_tensor_new(SPK_F32, p->output->ndim, p->output->shape, p->stream);
    if (y && (spk_tensor_copy_device(y, p->output, p->stream) != 0 || spk_stream_synchronize(p->stream) != 0)) {
        spk_tensor_free(y);
        return NULL;
    }
    return y;
}

int spk_lstm_gpu_time(const spk_lstm_gpu_runner *p, const spk_tensor *x, int rounds, int warmup, double *ms)
{
    if (rounds < 1 || warmup < 0)
        return spk_fail("lstm stack time: rounds must be >= 1 and warmup >= 0, got %d and %d", rounds, warmup);
    if (spk_lstm_check_x(p->shape->batch, p->shape->steps, p->shape->input, x) != 0)
        return -1;
    spk_tensor *dx = spk_tensor_is_device(x) && spk_tensor_is_contiguous(x) ? spk_tensor_view(x, x->ndim, x->shape)
                                                                            : NULL;
    if (!dx && !spk_tensor_is_device(x))
        dx = spk_tensor_to_device(x, p->stream);
    if (!dx)
        return spk_fail("lstm stack time: x must be a host tensor or a contiguous device tensor");
    int rc = -1;
    spk_graph *graph = NULL;
    spk_event *start = spk_event_new(true), *end = spk_event_new(true);
    if (!start || !end || spk_stream_synchronize(p->stream) != 0)
        goto done;
    if (spk_graph_capture_begin(p->stream) != 0)
        goto done;
    if (p->enqueue(p->plan, dx) != 0) {
        spk_graph_capture_abort(p->stream);
        goto done;
    }
    if (!(graph = spk_graph_capture_end(p->stream)))
        goto done;
    for (int i = 0; i < warmup; i++)
        if (spk_graph_replay(graph, p->stream) != 0)
            goto done;
    if (p->finish(p->plan) != 0)
        goto done;
    for (int i = 0; i < rounds; i++) {
        float t;
        if (spk_event_record(start, p->stream) || spk_graph_replay(graph, p->stream) ||
            spk_event_record(end, p->stream) || spk_event_synchronize(end) || spk_event_elapsed_ms(start, end, &t))
            goto done;
        ms[i] = t;
    }
    rc = p->finish(p->plan);
done:
    spk_graph_free(graph);
    spk_event_free(start);
    spk_event_free(end);
    spk_tensor_free(dx);
    return rc;
}
