/* The reference forward pass against a hand-worked case and a plain scalar
 * implementation written straight from the formulas (ONNX layout, no
 * transposes, no vectors); thread independence; layer outputs and traces; the
 * kernel activation stand-ins against libm. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "core/rng.h"
#include "lstm/activations.h"
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
                        xw += get3(x, b, t, k) * get3(l->W, d, r, k);
                    for (int64_t k = 0; k < H; k++)
                        hr += h[k] * get3(l->R, d, r, k);
                    pre[r] = (xw + hr) + (get2(l->B, d, r) + get2(l->B, d, 4 * H + r));
                }
                for (int64_t u = 0; u < H; u++) {
                    double i = 1 / (1 + exp(-pre[u])), o = 1 / (1 + exp(-pre[H + u]));
                    double f = 1 / (1 + exp(-pre[2 * H + u])), g = tanh(pre[3 * H + u]);
                    c[u] = f * c[u] + i * g;
                    h[u] = o * tanh(c[u]);
                    const int64_t idx[3] = {b, t, d * H + u};
                    spk_tensor_set_f64(y, idx, h[u]);
                }
            }
        }
    free(h);
    free(c);
    free(pre);
}

/* The same in float with expf/tanhf. */
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
                        xw += (float)get3(x, b, t, k) * (float)get3(l->W, d, r, k);
                    for (int64_t k = 0; k < H; k++)
                        hr += h[k] * (float)get3(l->R, d, r, k);
                    pre[r] = (xw + hr) + ((float)get2(l->B, d, r) + (float)get2(l->B, d, 4 * H + r));
                }
                for (int64_t u = 0; u < H; u++) {
                    float i = 1 / (1 + expf(-pre[u])), o = 1 / (1 + expf(-pre[H + u]));
                    float f = 1 / (1 + expf(-pre[2 * H + u])), g = tanhf(pre[3 * H + u]);
                    c[u] = f * c[u] + i * g;
                    h[u] = o * tanhf(c[u]);
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

/* Odd H (vector tails), odd batch, two layers: the same sums in the same order
 * as the naive loops, so the results agree exactly. */
TEST(matches_naive_exactly)
{
    struct stack s;
    stack_random(&s, 2, 3, 5, 11, 2.0);
    const int64_t xs[3] = {3, 6, 3};
    spk_tensor *x = filled(SPK_F32, 3, xs, 12, 2.0);
    for (int p = 0; p < 2; p++) {
        spk_dtype dtype = p ? SPK_F32 : SPK_F64;
        spk_tensor *truth = naive_stack(s.l, 2, x, dtype);
        spk_lstm_reference_options opt = spk_lstm_reference_defaults();
        opt.precision = dtype;
        spk_lstm_reference_result res;
        CHECK(spk_lstm_reference(s.l, 2, x, &opt, &res) == 0);
        CHECK(res.y && res.y->dtype == dtype);
        CHECK(max_diff(res.y, truth) == 0);
        double norm = 0;
        spk_tensor_norm(res.y, &norm);
        CHECK(norm > 0.1);
        spk_lstm_reference_result_free(&res);
        spk_tensor_free(truth);
    }
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
    spk_lstm_reference_options opt = spk_lstm_reference_defaults();
    spk_lstm_reference_result r64, r32;
    CHECK(spk_lstm_reference(s.l, 2, x, &opt, &r64) == 0);
    opt.precision = SPK_F32;
    CHECK(spk_lstm_reference(s.l, 2, x, &opt, &r32) == 0);
    double d = max_diff(r32.y, r64.y);
    CHECK(d > 0 && d < 1e-5);
    spk_tensor *truth = naive_stack(s.l, 2, x, SPK_F64);
    CHECK(max_diff(r64.y, truth) == 0);
    spk_tensor_free(truth);
    spk_lstm_reference_result_free(&r64);
    spk_lstm_reference_result_free(&r32);
    spk_tensor_free(x);
    stack_free(&s);
}

TEST(threads_do_not_change_bits)
{
    struct stack s;
    stack_random(&s, 3, 7, 12, 5, 3.0);
    const int64_t xs[3] = {5, 9, 7};
    spk_tensor *x = filled(SPK_F32, 3, xs, 6, 2.0);
    for (int p = 0; p < 2; p++) {
        spk_lstm_reference_options opt = spk_lstm_reference_defaults();
        opt.precision = p ? SPK_F32 : SPK_F64;
        spk_lstm_reference_result one, four;
        opt.threads = 1;
        CHECK(spk_lstm_reference(s.l, 3, x, &opt, &one) == 0);
        opt.threads = 4;
        CHECK(spk_lstm_reference(s.l, 3, x, &opt, &four) == 0);
        CHECK(bitwise_equal(one.y, four.y));
        spk_lstm_reference_result_free(&one);
        spk_lstm_reference_result_free(&four);
    }
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

int main(void)
{
    RUN(hand_worked_h1);
    RUN(matches_naive_exactly);
    RUN(f32_close_to_f64);
    RUN(threads_do_not_change_bits);
    RUN(layers_out_and_trace_agree_with_y);
    RUN(errors_name_the_problem);
    RUN(kernel_activation_error);
    return CHECK_SUMMARY();
}
