/* The reference forward pass against a hand-worked case and a plain scalar
 * implementation written straight from the formulas (ONNX layout, no
 * transposes, no vectors, spk's scalar exp and tanh: the same bits on every
 * vector unit and thread count; with libm's: within ulps); layer outputs and
 * traces; the CPU path's activations and the kernel's stand-ins against libm. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "core/rng.h"
#include "lstm/activations.h"
#include "lstm/cpu_math.h"
#include "lstm/lstm.h"

static spk_tensor *filled(spk_dtype dtype, int ndim, const int64_t *shape, uint64_t seed, double bound)
{
    spk_tensor *t = spk_tensor_new(dtype, ndim, shape);
    spk_rng rng;
    spk_rng_seed(&rng, seed);
    spk_rng_fill_uniform(&rng, t, -bound, bound);
    return t;
}

static double get3(const spk_tensor *t, int64_t a, int64_t b, int64_t c)
{
    const int64_t idx[3] = {a, b, c};
    return spk_tensor_get_f64(t, idx);
}

static double get2(const spk_tensor *t, int64_t a, int64_t b)
{
    const int64_t idx[2] = {a, b};
    return spk_tensor_get_f64(t, idx);
}

/* Max |a - b| over two same-shape tensors (inf if shapes differ). */
static double max_diff(const spk_tensor *a, const spk_tensor *b)
{
    if (!a || !b || !spk_tensor_same_shape(a, b))
        return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < spk_tensor_numel(a); i++) {
        double d = fabs(spk_tensor_flat_get(a, i) - spk_tensor_flat_get(b, i));
        if (!(d <= m))
            m = d;
    }
    return m;
}

static bool bitwise_equal(const spk_tensor *a, const spk_tensor *b)
{
    if (!a || !b || !spk_tensor_same_shape(a, b) || a->dtype != b->dtype)
        return false;
    for (int64_t i = 0; i < spk_tensor_numel(a); i++) {
        double x = spk_tensor_flat_get(a, i), y = spk_tensor_flat_get(b, i);
        if (memcmp(&x, &y, sizeof x) != 0)
            return false;
    }
    return true;
}

/* The activations a naive stack uses: spk's (the reference's bits) or libm's. */
static bool naive_libm;

static double naive_sigmoid(double v)
{
    return naive_libm ? 1 / (1 + exp(-v)) : spk_cpu_sigmoid_f64(v);
}

static double naive_tanh(double v)
{
    return naive_libm ? tanh(v) : spk_cpu_tanh_f64(v);
}

static float naive_sigmoidf(float v)
{
    return naive_libm ? 1 / (1 + expf(-v)) : spk_cpu_sigmoid_f32(v);
}

static float naive_tanhf(float v)
{
    return naive_libm ? tanhf(v) : spk_cpu_tanh_f32(v);
}

/* Straight from the ONNX LSTM equations, one layer in double, for y [B, T, 2H] (f64). */
static void naive_layer_f64(const spk_lstm_layer *l, const spk_tensor *x, spk_tensor *y)
{
    int64_t B = x->shape[0], T = x->shape[1], K = x->shape[2], H = l->R->shape[2];
    double *h = calloc((size_t)H, sizeof *h), *c = calloc((size_t)H, sizeof *c);
    double *pre = calloc((size_t)(4 * H), sizeof *pre);
    for (int64_t b = 0; b < B; b++)
        for (int d = 0; d < 2; d++) {
            for (int64_t u = 0; u < H; u++)
                h[u] = c[u] = 0;
            for (int64_t s = 0; s < T; s++) {
                int64_t t = d ? T - 1 - s : s;
                for (int64_t r = 0; r < 4 * H; r++) {
                    double xw = 0, hr = 0;
                    for (int64_t k = 0; k < K; k++)
                        xw = fma(get3(x, b, t, k), get3(l->W, d, r, k), xw);
                    for (int64_t k = 0; k < H; k++)
                        hr = fma(h[k], get3(l->R, d, r, k), hr);
                    pre[r] = (xw + hr) + (get2(l->B, d, r) + get2(l->B, d, 4 * H + r));
                }
                for (int64_t u = 0; u < H; u++) {
                    double i = naive_sigmoid(pre[u]), o = naive_sigmoid(pre[H + u]);
                    double f = naive_sigmoid(pre[2 * H + u]), g = naive_tanh(pre[3 * H + u]);
                    c[u] = naive_libm ? f * c[u] + i * g : fma(f, c[u], i * g);
                    h[u] = o * naive_tanh(c[u]);
                    const int64_t idx[3] = {b, t, d * H + u};
                    spk_tensor_set_f64(y, idx, h[u]);
                }
            }
        }
    free(h);
    free(c);
    free(pre);
}

/* The same in float. */
static void naive_layer_f32(const spk_lstm_layer *l, const spk_tensor *x, spk_tensor *y)
{
    int64_t B = x->shape[0], T = x->shape[1], K = x->shape[2], H = l->R->shape[2];
    float *h = calloc((size_t)H, sizeof *h), *c = calloc((size_t)H, sizeof *c);
    float *pre = calloc((size_t)(4 * H), sizeof *pre);
    for (int64_t b = 0; b < B; b++)
        for (int d = 0; d < 2; d++) {
            for (int64_t u = 0; u < H; u++)
                h[u] = c[u] = 0;
            for (int64_t s = 0; s < T; s++) {
                int64_t t = d ? T - 1 - s : s;
                for (int64_t r = 0; r < 4 * H; r++) {
                    float xw = 0, hr = 0;
                    for (int64_t k = 0; k < K; k++)
                        xw = fmaf((float)get3(x, b, t, k), (float)get3(l->W, d, r, k), xw);
                    for (int64_t k = 0; k < H; k++)
                        hr = fmaf(h[k], (float)get3(l->R, d, r, k), hr);
                    pre[r] = (xw + hr) + ((float)get2(l->B, d, r) + (float)get2(l->B, d, 4 * H + r));
                }
                for (int64_t u = 0; u < H; u++) {
                    float i = naive_sigmoidf(pre[u]), o = naive_sigmoidf(pre[H + u]);
                    float f = naive_sigmoidf(pre[2 * H + u]), g = naive_tanhf(pre[3 * H + u]);
                    c[u] = naive_libm ? f * c[u] + i * g : fmaf(f, c[u], i * g);
                    h[u] = o * naive_tanhf(c[u]);
                    const int64_t idx[3] = {b, t, d * H + u};
                    spk_tensor_set_f64(y, idx, h[u]);
                }
            }
        }
    free(h);
    free(c);
    free(pre);
}

static spk_tensor *naive_stack(const spk_lstm_layer *layers, int count, const spk_tensor *x, spk_dtype dtype)
{
    spk_tensor *in = spk_tensor_to_dtype(x, dtype);
    for (int k = 0; k < count; k++) {
        int64_t H = layers[k].R->shape[2];
        const int64_t shape[3] = {x->shape[0], x->shape[1], 2 * H};
        spk_tensor *out = spk_tensor_new(dtype, 3, shape);
        if (dtype == SPK_F64)
            naive_layer_f64(&layers[k], in, out);
        else
            naive_layer_f32(&layers[k], in, out);
        spk_tensor_free(in);
        in = out;
    }
    return in;
}

struct stack {
    spk_lstm_weights w[4];
    spk_lstm_layer l[4];
    int count;
};

static void stack_random(struct stack *s, int count, int64_t in, int64_t H, uint64_t seed, double scale)
{
    s->count = count;
    CHECK(spk_lstm_random(count, in, H, seed, scale, SPK_F32, s->w) == 0);
    for (int k = 0; k < count; k++)
        s->l[k] = (spk_lstm_layer){s->w[k].W, s->w[k].R, s->w[k].B};
}

static void stack_free(struct stack *s)
{
    for (int k = 0; k < s->count; k++)
        spk_lstm_weights_free(&s->w[k]);
}

/* H = 1, in = 1, T = 2, one layer, worked by hand in double. */
TEST(hand_worked_h1)
{
    const int64_t ws[3] = {2, 4, 1}, bs[2] = {2, 8}, xs[3] = {1, 2, 1};
    spk_tensor *W = spk_tensor_new(SPK_F64, 3, ws), *R = spk_tensor_new(SPK_F64, 3, ws);
    spk_tensor *B = spk_tensor_new(SPK_F64, 2, bs), *x = spk_tensor_new(SPK_F64, 3, xs);
    const double w[2][4] = {{0.5, -0.25, 0.75, 1.0}, {-0.5, 0.3, 0.2, -1.5}}; /* rows i o f c */
    const double r[2][4] = {{0.1, 0.2, -0.3, 0.4}, {0.6, -0.1, 0.25, 0.05}};
    const double bias[2][8] = {{0.1, 0, 0.2, 0, 0.01, 0.02, 0.03, 0.04}, {0, -0.1, 0.1, 0.3, 0, 0, 0, 0.05}};
    for (int d = 0; d < 2; d++) {
        for (int g = 0; g < 4; g++) {
            const int64_t i[3] = {d, g, 0};
            spk_tensor_set_f64(W, i, w[d][g]);
            spk_tensor_set_f64(R, i, r[d][g]);
        }
        for (int j = 0; j < 8; j++) {
            const int64_t i[2] = {d, j};
            spk_tensor_set_f64(B, i, bias[d][j]);
        }
    }
    const double xv[2] = {1.5, -2.0};
    for (int t = 0; t < 2; t++) {
        const int64_t i[3] = {0, t, 0};
        spk_tensor_set_f64(x, i, xv[t]);
    }
    double expected[2][2]; /* [t][direction] */
    for (int d = 0; d < 2; d++) {
        double h = 0, c = 0;
        for (int s = 0; s < 2; s++) {
            int t = d ? 1 - s : s;
            double pre[4];
            for (int g = 0; g < 4; g++)
                pre[g] = xv[t] * w[d][g] + h * r[d][g] + bias[d][g] + bias[d][4 + g];
            double ig = 1 / (1 + exp(-pre[0])), og = 1 / (1 + exp(-pre[1])), fg = 1 / (1 + exp(-pre[2]));
            c = fg * c + ig * tanh(pre[3]);
            h = og * tanh(c);
            expected[t][d] = h;
        }
    }
    spk_lstm_layer layer = {W, R, B};
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    spk_lstm_reference_result res;
    CHECK(spk_lstm_reference(&layer, 1, x, &opt, &res) == 0);
    CHECK(res.y->dtype == SPK_F64 && res.y->shape[0] == 1 && res.y->shape[1] == 2 && res.y->shape[2] == 2);
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 2; d++)
            CHECK_NEAR(get3(res.y, 0, t, d), expected[t][d], 1e-15);
    spk_lstm_reference_result_free(&res);
    spk_tensor_free(W);
    spk_tensor_free(R);
    spk_tensor_free(B);
    spk_tensor_free(x);
}

/* The reference of `dtype` with `threads` threads on vector unit `unit`;
 * threads > 2 make teams of two or more (a barrier a step) as on many cores. */
static spk_tensor *reference_y(const struct stack *s, const spk_tensor *x, spk_dtype dtype, int threads,
                               spk_cpu_vector unit)
{
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    opt.precision = dtype;
    opt.threads = threads;
    opt.vector = unit;
    opt.team_threads = threads > 2 ? threads / 2 : 0;
    spk_lstm_reference_result res;
    if (spk_lstm_reference(s->l, s->count, x, &opt, &res) != 0) {
        fprintf(stderr, "  reference: %s\n", spk_last_error());
        return NULL;
    }
    spk_tensor *y = res.y;
    res.y = NULL;
    spk_lstm_reference_result_free(&res);
    return y;
}

/* Shapes that reach every split of the work: odd H (vector tails in every
 * unit width), odd batch, batch 1 with teams of several threads (a barrier a
 * step), more threads than work, two and three layers. */
static const struct {
    int layers;
    int64_t input, hidden, batch, steps;
} shapes[] = {{2, 3, 5, 3, 6}, {3, 7, 12, 5, 9}, {2, 9, 67, 1, 7}, {1, 4, 33, 2, 5}, {2, 5, 40, 7, 4}};
static const int thread_counts[] = {1, 2, 3, 4, 7, 16};

/* Every vector unit this CPU has and every thread count give the naive
 * loops' bits (the same sums in the same order, spk's activations). */
TEST(matches_naive_exactly_on_every_unit_and_thread_count)
{
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        struct stack s;
        stack_random(&s, shapes[i].layers, shapes[i].input, shapes[i].hidden, 11 + i, 2.0);
        const int64_t xs[3] = {shapes[i].batch, shapes[i].steps, shapes[i].input};
        spk_tensor *x = filled(SPK_F32, 3, xs, 12 + i, 2.0);
        for (int p = 0; p < 2; p++) {
            spk_dtype dtype = p ? SPK_F32 : SPK_F64;
            naive_libm = false;
            spk_tensor *truth = naive_stack(s.l, s.count, x, dtype);
            double norm = 0;
            spk_tensor_norm(truth, &norm);
            CHECK(norm > 0.1);
            for (int u = SPK_CPU_VECTOR_PORTABLE; u < SPK_CPU_VECTOR_COUNT; u++) {
                if (!spk_cpu_vector_available((spk_cpu_vector)u))
                    continue;
                for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
                    spk_tensor *y = reference_y(&s, x, dtype, thread_counts[t], (spk_cpu_vector)u);
                    bool same = y && y->dtype == dtype && bitwise_equal(y, truth);
                    if (!same)
                        fprintf(stderr, "  shape %zu, %s, %s, %d threads: max diff %g\n", i, spk_dtype_name(dtype),
                                spk_cpu_vector_name((spk_cpu_vector)u), thread_counts[t], max_diff(y, truth));
                    CHECK(same);
                    spk_tensor_free(y);
                }
            }
            spk_tensor_free(truth);
        }
        spk_tensor_free(x);
        stack_free(&s);
    }
}

/* With libm's exp and tanh the naive loops differ from the reference by
 * rounding alone: ulp-level in f64, well inside f32's budget. */
TEST(close_to_naive_with_libm)
{
    struct stack s;
    stack_random(&s, 3, 7, 24, 5, 1.0);
    const int64_t xs[3] = {3, 30, 7};
    spk_tensor *x = filled(SPK_F32, 3, xs, 6, 2.0);
    naive_libm = true;
    for (int p = 0; p < 2; p++) {
        spk_dtype dtype = p ? SPK_F32 : SPK_F64;
        spk_tensor *libm = naive_stack(s.l, s.count, x, dtype);
        spk_tensor *y = reference_y(&s, x, dtype, 0, SPK_CPU_VECTOR_AUTO);
        double d = max_diff(y, libm);
        if (check_verbose())
            printf("# %s reference against libm's activations: max abs %.3g\n", spk_dtype_name(dtype), d);
        CHECK(d > 0 && d < (p ? 2e-6 : 1e-14));
        spk_tensor_free(y);
        spk_tensor_free(libm);
    }
    naive_libm = false;
    spk_tensor_free(x);
    stack_free(&s);
}

/* H = 64 (full vector blocks), f32 against f64: the f32 path is close but not
 * the f64 one. */
TEST(f32_close_to_f64)
{
    struct stack s;
    stack_random(&s, 2, 60, 64, 3, 1.0);
    const int64_t xs[3] = {2, 40, 60};
    spk_tensor *x = filled(SPK_F32, 3, xs, 4, 1.5);
    spk_tensor *y64 = reference_y(&s, x, SPK_F64, 0, SPK_CPU_VECTOR_AUTO);
    spk_tensor *y32 = reference_y(&s, x, SPK_F32, 0, SPK_CPU_VECTOR_AUTO);
    double d = max_diff(y32, y64);
    CHECK(d > 0 && d < 1e-5);
    spk_tensor_free(y64);
    spk_tensor_free(y32);
    spk_tensor_free(x);
    stack_free(&s);
}

/* The pyannote-shaped layer (hidden 128) at batch 1 and 8 with 16 threads
 * (teams of eight and of one thread) against one thread, f64 and f32. */
TEST(threads_do_not_change_bits)
{
    struct stack s;
    stack_random(&s, 2, 60, 128, 5, 1.0);
    for (int64_t batch = 1; batch <= 8; batch += 7) {
        const int64_t xs[3] = {batch, 12, 60};
        spk_tensor *x = filled(SPK_F32, 3, xs, 6, 2.0);
        for (int p = 0; p < 2; p++) {
            spk_dtype dtype = p ? SPK_F32 : SPK_F64;
            spk_tensor *one = reference_y(&s, x, dtype, 1, SPK_CPU_VECTOR_AUTO);
            spk_tensor *many = reference_y(&s, x, dtype, 16, SPK_CPU_VECTOR_AUTO);
            spk_tensor *some = reference_y(&s, x, dtype, 5, SPK_CPU_VECTOR_AUTO);
            CHECK(bitwise_equal(one, many));
            CHECK(bitwise_equal(one, some));
            /* the rule's own split (teams of one here, or of several on many cores) */
            spk_lstm_reference_profile prof;
            spk_lstm_reference_options opt = spk_lstm_reference_defaults();
            opt.precision = dtype;
            opt.threads = 16;
            opt.profile = &prof;
            spk_lstm_reference_result res;
            CHECK(spk_lstm_reference(s.l, s.count, x, &opt, &res) == 0);
            CHECK(bitwise_equal(one, res.y));
            spk_lstm_reference_result_free(&res);
            /* teams of eight at batch 1: a barrier a step, every thread in one */
            opt.team_threads = 8;
            CHECK(spk_lstm_reference(s.l, s.count, x, &opt, &res) == 0);
            CHECK(bitwise_equal(one, res.y));
            CHECK(batch != 1 || (prof.threads == 16 && prof.teams == 2 && prof.team_threads == 8));
            CHECK(prof.project_flops > 0 && prof.step_flops > 0 && prof.wall_ms > 0);
            spk_lstm_reference_result_free(&res);
            spk_tensor_free(one);
            spk_tensor_free(many);
            spk_tensor_free(some);
        }
        spk_tensor_free(x);
    }
    stack_free(&s);
}

/* A unit the CPU lacks, or a bad SPK_THREADS, is an error naming it. */
TEST(vector_units_and_threads_setting)
{
    struct stack s;
    stack_random(&s, 1, 4, 6, 8, 1.0);
    const int64_t xs[3] = {2, 3, 4};
    spk_tensor *x = filled(SPK_F32, 3, xs, 9, 1.0);
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    spk_lstm_reference_result res;
    for (int u = SPK_CPU_VECTOR_AVX2; u < SPK_CPU_VECTOR_COUNT; u++) {
        opt.vector = (spk_cpu_vector)u;
        int rc = spk_lstm_reference(s.l, 1, x, &opt, &res);
        if (spk_cpu_vector_available((spk_cpu_vector)u)) {
            CHECK(rc == 0);
            spk_lstm_reference_result_free(&res);
        } else {
            CHECK(rc == -1);
            CHECK_STR_CONTAINS(spk_last_error(), "is not available on this CPU (it has: portable");
        }
    }
    opt.vector = SPK_CPU_VECTOR_AUTO;
    const char *old = getenv("SPK_THREADS");
    char *saved = old ? strdup(old) : NULL;
    setenv("SPK_THREADS", "two", 1);
    CHECK(spk_lstm_reference(s.l, 1, x, &opt, &res) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "SPK_THREADS must be a whole number of threads in 1..4096, got \"two\"");
    opt.threads = 2; /* the option wins over the variable */
    CHECK(spk_lstm_reference(s.l, 1, x, &opt, &res) == 0);
    spk_lstm_reference_result_free(&res);
    setenv("SPK_THREADS", "3", 1);
    int n = 0;
    const char *source = NULL;
    CHECK(spk_cpu_threads_default(&n, &source) == 0 && n == 3 && strcmp(source, "SPK_THREADS") == 0);
    unsetenv("SPK_THREADS");
    CHECK(spk_cpu_threads_default(&n, &source) == 0 && n == spk_cpu_count() && strcmp(source, "cpus") == 0);
    if (saved)
        setenv("SPK_THREADS", saved, 1);
    free(saved);
    spk_cpu_vector v;
    CHECK(spk_cpu_vector_from_name("avx3", &v) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "\"auto\", \"portable\", \"avx2\" or \"avx512\", got \"avx3\"");
    spk_tensor_free(x);
    stack_free(&s);
}

TEST(layers_out_and_trace_agree_with_y)
{
    struct stack s;
    stack_random(&s, 3, 4, 6, 8, 1.0);
    const int64_t xs[3] = {2, 5, 4};
    spk_tensor *x = filled(SPK_F32, 3, xs, 9, 1.0);
    const int64_t steps[3] = {4, 0, 2};
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    opt.layers_out = true;
    opt.trace_layer = 2;
    opt.trace_direction = 1;
    opt.trace_count = 3;
    opt.trace_steps = steps;
    spk_lstm_reference_result res;
    CHECK(spk_lstm_reference(s.l, 3, x, &opt, &res) == 0);
    CHECK(res.layer_count == 3);
    CHECK(bitwise_equal(res.layer_outputs[2], res.y));
    CHECK(res.layer_outputs[2] != res.y);
    CHECK(max_diff(res.layer_outputs[1], res.y) > 0);
    /* layer 2 alone on layer 1's output gives layer 2's output */
    spk_lstm_reference_result second;
    spk_lstm_reference_options plain = spk_lstm_reference_defaults();
    CHECK(spk_lstm_reference(&s.l[1], 1, res.layer_outputs[0], &plain, &second) == 0);
    CHECK(bitwise_equal(second.y, res.layer_outputs[1]));
    spk_lstm_reference_result_free(&second);
    /* h of the reverse direction at each traced t is y's slice; c is in range */
    CHECK(res.trace_h && res.trace_h->shape[0] == 3 && res.trace_h->shape[1] == 2 && res.trace_h->shape[2] == 6);
    int bad = 0;
    for (int e = 0; e < 3; e++)
        for (int64_t b = 0; b < 2; b++)
            for (int64_t u = 0; u < 6; u++) {
                if (get3(res.trace_h, e, b, u) != get3(res.y, b, steps[e], 6 + u))
                    bad++;
                double c = get3(res.trace_c, e, b, u);
                /* |h| = |o tanh(c)| <= |tanh(c)| */
                if (fabs(get3(res.trace_h, e, b, u)) > fabs(tanh(c)) + 1e-15)
                    bad++;
            }
    CHECK(bad == 0);
    spk_lstm_reference_result_free(&res);
    spk_tensor_free(x);
    stack_free(&s);
}

TEST(errors_name_the_problem)
{
    struct stack s;
    stack_random(&s, 2, 4, 6, 8, 1.0);
    const int64_t xs[3] = {2, 5, 3};
    spk_tensor *x = spk_tensor_new(SPK_F32, 3, xs);
    spk_lstm_reference_result res;
    CHECK(spk_lstm_reference(s.l, 2, x, NULL, &res) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "input has shape [2, 5, 3], expected [batch, steps, 4]");
    const int64_t good[3] = {2, 5, 4};
    spk_tensor *x2 = spk_tensor_new(SPK_F32, 3, good);
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    const int64_t steps[1] = {5};
    opt.trace_count = 1;
    opt.trace_steps = steps;
    CHECK(spk_lstm_reference(s.l, 2, x2, &opt, &res) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "trace step 6 is outside 1..5");
    opt.trace_layer = 2;
    CHECK(spk_lstm_reference(s.l, 2, x2, &opt, &res) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "trace layer 3 is outside 1..2");
    s.l[1].R = s.l[0].W;
    CHECK(spk_lstm_reference(s.l, 2, x2, NULL, &res) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: R has shape [2, 24, 4], expected [2, 24, 6]");
    spk_tensor_free(x);
    spk_tensor_free(x2);
    stack_free(&s);
}

/* The kernel's activation stand-ins against libm over [-20, 20]. The bounds
 * leave a margin over the figures measured and written in activations.h. */
TEST(kernel_activation_error)
{
    const int n = 4000000;
    double sig_max = 0, tanh_max = 0, tanh_poly_max = 0, sig_at = 0, tanh_at = 0;
    for (int i = 0; i <= n; i++) {
        float v = (float)(-20.0 + 40.0 * i / n);
        double es = fabs((double)spk_kernel_sigmoid(v) - (double)(1.0f / (1.0f + expf(-v))));
        double et = fabs((double)spk_kernel_tanh(v) - (double)tanhf(v));
        if (es > sig_max)
            sig_max = es, sig_at = v;
        if (et > tanh_max)
            tanh_max = et, tanh_at = v;
        if (fabsf(v) < 0.625f && et > tanh_poly_max)
            tanh_poly_max = et;
    }
    if (check_verbose() || !(sig_max < 2e-7 && tanh_max < 3e-7))
        printf("# kernel sigmoid: max abs error %.3g at %.6g; tanh: %.3g at %.6g (polynomial side %.3g)\n", sig_max,
               sig_at, tanh_max, tanh_at, tanh_poly_max);
    CHECK(sig_max < 2e-7);
    CHECK(tanh_max < 3e-7);
    CHECK(tanh_poly_max < 1.2e-7);
    /* saturation: finite and exact at the ends */
    CHECK(spk_kernel_sigmoid(200.0f) == 1.0f);
    CHECK(spk_kernel_sigmoid(-200.0f) >= 0.0f && spk_kernel_sigmoid(-200.0f) < 1e-37f);
    CHECK(spk_kernel_tanh(100.0f) == 1.0f && spk_kernel_tanh(-100.0f) == -1.0f);
    CHECK(spk_kernel_tanh(0.0f) == 0.0f);
}

/* |got - want| in units in the last place of want, in the precision of got:
 * want from long double (x87's 64-bit significand on x86-64) for f64, from
 * double for f32, so the figure is the error against the true value, the
 * same whichever libm's last bits are. */
static double ulps_f64(double got, long double want)
{
    if (want == 0)
        return got == 0 ? 0 : INFINITY;
    int e;
    frexpl(want, &e);
    return (double)(fabsl((long double)got - want) / ldexpl(1.0L, e - 53));
}

static double ulps_f32(float got, double want)
{
    if (want == 0)
        return got == 0 ? 0 : INFINITY;
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24);
}

/* spk's exp, sigmoid and tanh against the true values over [-40, 40]
 * (8,000,001 points) and near 0, in ulps; the bounds leave a margin over the
 * figures measured (printed with SPK_VERBOSE=1; glibc's exp, sigmoid and tanh
 * in f64 measure 0.51, 2.36 and 2.13 the same way). Then the special values
 * the LSTM relies on. */
TEST(cpu_math_against_true_values)
{
    double e64 = 0, s64 = 0, t64 = 0, e32 = 0, s32 = 0, t32 = 0;
    const int n = 8000000;
    for (int i = 0; i <= n + 200000; i++) {
        double v = i <= n ? -40.0 + 80.0 * i / n : ldexp(1.0 + (i - n) / 2e5, -(i - n) % 60);
        long double lv = v;
        float f = (float)v;
        double df = f;
        e64 = fmax(e64, ulps_f64(spk_cpu_exp_f64(v), expl(lv)));
        s64 = fmax(s64, ulps_f64(spk_cpu_sigmoid_f64(v), 1.0L / (1.0L + expl(-lv))));
        t64 = fmax(t64, ulps_f64(spk_cpu_tanh_f64(v), tanhl(lv)));
        e32 = fmax(e32, ulps_f32(spk_cpu_exp_f32(f), exp(df)));
        s32 = fmax(s32, ulps_f32(spk_cpu_sigmoid_f32(f), 1 / (1 + exp(-df))));
        t32 = fmax(t32, ulps_f32(spk_cpu_tanh_f32(f), tanh(df)));
    }
    if (check_verbose())
        printf("# ulps from the true values: f64 exp %.2f, sigmoid %.2f, tanh %.2f; f32 exp %.2f, sigmoid %.2f, "
               "tanh %.2f\n", e64, s64, t64, e32, s32, t32);
    CHECK(e64 < 1.25 && s64 < 3 && t64 < 3);
    CHECK(e32 < 1.25 && s32 < 3 && t32 < 3);
    CHECK(spk_cpu_tanh_f64(INFINITY) == 1 && spk_cpu_tanh_f64(-INFINITY) == -1 && spk_cpu_tanh_f64(30) == 1);
    CHECK(isnan(spk_cpu_tanh_f64(NAN)) && isnan(spk_cpu_sigmoid_f64(NAN)) && isnan(spk_cpu_exp_f64(NAN)));
    CHECK(spk_cpu_sigmoid_f64(INFINITY) == 1 && spk_cpu_sigmoid_f64(-INFINITY) < 1e-307);
    CHECK(spk_cpu_sigmoid_f64(800) == 1 && spk_cpu_sigmoid_f64(-800) >= 0);
    CHECK(signbit(spk_cpu_tanh_f64(-0.0)) && spk_cpu_tanh_f64(-0.0) == 0 && spk_cpu_tanh_f64(1e-300) == 1e-300);
    CHECK(spk_cpu_tanh_f32(INFINITY) == 1 && spk_cpu_tanh_f32(-1e30f) == -1 && isnan(spk_cpu_tanh_f32(NAN)));
    CHECK(spk_cpu_sigmoid_f32(INFINITY) == 1 && spk_cpu_sigmoid_f32(-INFINITY) < 1e-37f);
    CHECK(isnan(spk_cpu_sigmoid_f32(NAN)) && signbit(spk_cpu_tanh_f32(-0.0f)));
}

int main(void)
{
    RUN(hand_worked_h1);
    RUN(matches_naive_exactly_on_every_unit_and_thread_count);
    RUN(close_to_naive_with_libm);
    RUN(f32_close_to_f64);
    RUN(threads_do_not_change_bits);
    RUN(vector_units_and_threads_setting);
    RUN(layers_out_and_trace_agree_with_y);
    RUN(errors_name_the_problem);
    RUN(kernel_activation_error);
    RUN(cpu_math_against_true_values);
    return CHECK_SUMMARY();
}
