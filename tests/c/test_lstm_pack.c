/* Gate orders, packing (its reference checks), PyTorch conversion and layer
 * validation. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "core/rng.h"
#include "lstm/lstm.h"

static spk_tensor *filled(spk_dtype dtype, int ndim, const int64_t *shape, uint64_t seed)
{
    spk_tensor *t = spk_tensor_new(dtype, ndim, shape);
    spk_rng rng;
    spk_rng_seed(&rng, seed);
    spk_rng_fill_uniform(&rng, t, -1, 1);
    return t;
}

static double at3(const spk_tensor *t, int64_t a, int64_t b, int64_t c)
{
    const int64_t idx[3] = {a, b, c};
    return spk_tensor_get_f64(t, idx);
}

static double at2(const spk_tensor *t, int64_t a, int64_t b)
{
    const int64_t idx[2] = {a, b};
    return spk_tensor_get_f64(t, idx);
}

static bool bitwise_equal(const spk_tensor *a, const spk_tensor *b)
{
    if (!spk_tensor_same_shape(a, b) || a->dtype != b->dtype)
        return false;
    for (int64_t i = 0; i < spk_tensor_numel(a); i++) {
        double x = spk_tensor_flat_get(a, i), y = spk_tensor_flat_get(b, i);
        if (memcmp(&x, &y, sizeof x) != 0)
            return false;
    }
    return true;
}

/* The 24 orders of "iofc". */
static int permutations(char out[24][5])
{
    const char *g = "iofc";
    int n = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++)
                    if (a != b && a != c && a != d && b != c && b != d && c != d) {
                        out[n][0] = g[a], out[n][1] = g[b], out[n][2] = g[c], out[n][3] = g[d];
                        out[n][4] = '\0';
                        n++;
                    }
    return n;
}

TEST(gate_orders_are_checked)
{
    CHECK(spk_lstm_gate_order_check("iofc") == 0);
    CHECK(spk_lstm_gate_order_check("cfoi") == 0);
    CHECK(spk_lstm_gate_order_check("iofx") == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "\"iofx\" is not a permutation of \"iofc\"");
    CHECK(spk_lstm_gate_order_check("ioff") == -1);
    CHECK(spk_lstm_gate_order_check("iof") == -1);
    CHECK(spk_lstm_gate_order_check("iofcc") == -1);
    CHECK(spk_lstm_gate_order_check(NULL) == -1);
}

/* Every (from, to) pair: each packed row holds the right source row, found by
 * gate letter, and unpacking restores W exactly. */
TEST(pack_round_trips_every_permutation)
{
    char orders[24][5];
    CHECK(permutations(orders) == 24);
    const int64_t H = 3, K = 2, shape[3] = {2, 4 * H, K};
    spk_tensor *W = filled(SPK_F32, 3, shape, 7);
    int bad_rows = 0, bad_trips = 0;
    for (int a = 0; a < 24; a++)
        for (int b = 0; b < 24; b++) {
            spk_tensor *packed = spk_lstm_pack_directions(W, orders[a], orders[b]);
            spk_tensor *back = spk_lstm_unpack_directions(packed, orders[a], orders[b]);
            for (int64_t d = 0; d < 2; d++)
                for (int64_t u = 0; u < H; u++)
                    for (int p = 0; p < 4; p++) {
                        int g = (int)(strchr(orders[a], orders[b][p]) - orders[a]);
                        for (int64_t k = 0; k < K; k++)
                            if (at3(packed, d, u * 4 + p, k) != at3(W, d, g * H + u, k))
                                bad_rows++;
                    }
            if (!back || !bitwise_equal(back, W))
                bad_trips++;
            spk_tensor_free(packed);
            spk_tensor_free(back);
        }
    CHECK(bad_rows == 0);
    CHECK(bad_trips == 0);
    spk_tensor_free(W);
}

/* A reference check: packed rows 77*4 + 0..3 are ONNX rows i, f, c, o of unit
 * 77 (rows 0H+77, 2H+77, 3H+77, 1H+77), in both directions. */
TEST(reference_unit_77_both_directions)
{
    const int64_t H = 128, K = 60, shape[3] = {2, 4 * H, K};
    spk_tensor *W = filled(SPK_F32, 3, shape, 77);
    spk_tensor *packed = spk_lstm_pack_directions(W, "iofc", "ifco");
    CHECK(packed != NULL);
    const int64_t onnx_rows[4] = {0 * H + 77, 2 * H + 77, 3 * H + 77, 1 * H + 77};
    int mismatches = 0;
    for (int64_t d = 0; d < 2; d++)
        for (int p = 0; p < 4; p++)
            for (int64_t k = 0; k < K; k++)
                if (at3(packed, d, 77 * 4 + p, k) != at3(W, d, onnx_rows[p], k))
                    mismatches++;
    CHECK(mismatches == 0);
    /* and the two directions are not mixed up */
    CHECK(at3(packed, 1, 77 * 4, 0) != at3(W, 0, 77, 0));
    spk_tensor_free(packed);
    spk_tensor_free(W);
}

/* The reference bias check: unit 5 of the reverse direction, Wb + Rb. */
TEST(reference_bias_unit_5_reverse)
{
    const int64_t H = 128, shape[2] = {2, 8 * H};
    spk_tensor *B = filled(SPK_F32, 2, shape, 5);
    spk_tensor *packed = spk_lstm_pack_bias(B, "iofc", "ifco");
    CHECK(packed && packed->ndim == 2 && packed->shape[0] == 2 && packed->shape[1] == 4 * H);
    const int gate_of_position[4] = {0, 2, 3, 1}; /* i f c o from ONNX i o f c */
    for (int p = 0; p < 4; p++) {
        int64_t row = gate_of_position[p] * H + 5;
        float expected = (float)at2(B, 1, row) + (float)at2(B, 1, 4 * H + row);
        CHECK(at2(packed, 1, 5 * 4 + p) == expected);
        CHECK(at2(packed, 1, 5 * 4 + p) != at2(packed, 0, 5 * 4 + p));
    }
    spk_tensor_free(packed);
    spk_tensor_free(B);
}

TEST(pack_keeps_f64_and_rejects_bad_shapes)
{
    const int64_t shape[3] = {2, 8, 3}, bad[3] = {2, 6, 3}, one[3] = {1, 8, 3}, bias_bad[2] = {2, 12};
    spk_tensor *W = filled(SPK_F64, 3, shape, 1);
    spk_tensor *packed = spk_lstm_pack_directions(W, "iofc", "ifco");
    CHECK(packed && packed->dtype == SPK_F64);
    spk_tensor *back = spk_lstm_unpack_directions(packed, "iofc", "ifco");
    CHECK(back && bitwise_equal(back, W));
    spk_tensor *wrong = spk_tensor_new(SPK_F32, 3, bad);
    CHECK(spk_lstm_pack_directions(wrong, "iofc", "ifco") == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "expected [2, 4H, K], got [2, 6, 3]");
    spk_tensor *single = spk_tensor_new(SPK_F32, 3, one);
    CHECK(spk_lstm_pack_directions(single, "iofc", "ifco") == NULL);
    CHECK(spk_lstm_pack_directions(W, "iofc", "ifcx") == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "ifcx");
    spk_tensor *B = spk_tensor_new(SPK_F32, 2, bias_bad);
    CHECK(spk_lstm_pack_bias(B, "iofc", "ifco") == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "expected [2, 8H], got [2, 12]");
    spk_tensor_free(W);
    spk_tensor_free(packed);
    spk_tensor_free(back);
    spk_tensor_free(wrong);
    spk_tensor_free(single);
    spk_tensor_free(B);
}

/* PyTorch blocks i, f, g, o become ONNX i, o, f, c. */
TEST(reorder_gates_torch_to_onnx)
{
    const int64_t H = 2, shape[2] = {4 * H, 3};
    spk_tensor *t = spk_tensor_new(SPK_F32, 2, shape);
    for (int64_t r = 0; r < 4 * H; r++)
        for (int64_t k = 0; k < 3; k++) {
            const int64_t idx[2] = {r, k};
            spk_tensor_set_f64(t, idx, (double)(r / H) * 10 + (double)(r % H)); /* block*10 + unit */
        }
    spk_tensor *onnx = spk_lstm_reorder_gates(t, 0, "ifco", "iofc");
    /* ONNX block 0 = torch i (0), 1 = torch o (3), 2 = torch f (1), 3 = torch g (2) */
    const int source[4] = {0, 3, 1, 2};
    for (int g = 0; g < 4; g++)
        for (int64_t u = 0; u < H; u++)
            CHECK(at2(onnx, g * H + u, 2) == source[g] * 10 + u);
    spk_tensor_free(onnx);
    spk_tensor_free(t);
}

TEST(torch_conversion_round_trip)
{
    const int64_t H = 3, in = 4;
    const int64_t wi[2] = {4 * H, in}, wh[2] = {4 * H, H}, b[1] = {4 * H};
    spk_tensor *parts[8];
    for (int d = 0; d < 2; d++) {
        parts[4 * d + 0] = filled(SPK_F32, 2, wi, 10 + (uint64_t)d);
        parts[4 * d + 1] = filled(SPK_F32, 2, wh, 20 + (uint64_t)d);
        parts[4 * d + 2] = filled(SPK_F32, 1, b, 30 + (uint64_t)d);
        parts[4 * d + 3] = filled(SPK_F32, 1, b, 40 + (uint64_t)d);
    }
    spk_lstm_torch_layer torch = {
        .weight_ih = {parts[0], parts[4]}, .weight_hh = {parts[1], parts[5]},
        .bias_ih = {parts[2], parts[6]}, .bias_hh = {parts[3], parts[7]},
    };
    spk_lstm_weights w;
    CHECK(spk_lstm_from_torch(&torch, 0, &w) == 0);
    /* ONNX o (block 1) of unit 2 is torch o (block 3); reverse direction */
    CHECK(at3(w.W, 1, 1 * H + 2, 3) == at2(parts[4], 3 * H + 2, 3));
    CHECK(at3(w.R, 0, 3 * H + 1, 0) == at2(parts[1], 2 * H + 1, 0)); /* c <- g */
    {
        const int64_t i2[1] = {2 * H + 0};                         /* torch g, unit 0 */
        CHECK(at2(w.B, 1, 4 * H + 3 * H + 0) == spk_tensor_get_f64(parts[7], i2)); /* Rb c */
        const int64_t i1[1] = {1 * H + 2};                         /* torch f, unit 2 */
        CHECK(at2(w.B, 0, 2 * H + 2) == spk_tensor_get_f64(parts[2], i1)); /* Wb f */
    }
    spk_lstm_layer layer = {w.W, w.R, w.B};
    spk_tensor *back[8];
    CHECK(spk_lstm_to_torch(&layer, back) == 0);
    for (int i = 0; i < 8; i++) {
        CHECK(bitwise_equal(back[i], parts[i]));
        spk_tensor_free(back[i]);
    }
    torch.bias_hh[1] = NULL;
    spk_lstm_weights w1;
    CHECK(spk_lstm_from_torch(&torch, 2, &w1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 3: bias_hh_l2_reverse is missing");
    torch.bias_hh[1] = parts[6];
    torch.weight_hh[1] = parts[0];
    spk_lstm_weights w2;
    CHECK(spk_lstm_from_torch(&torch, 0, &w2) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "weight_hh_l0_reverse has shape [12, 4], expected [12, 3]");
    spk_lstm_weights_free(&w);
    for (int i = 0; i < 8; i++)
        spk_tensor_free(parts[i]);
}

TEST(validate_derives_sizes_and_names_errors)
{
    spk_lstm_weights w[3];
    CHECK(spk_lstm_random(3, 60, 16, 1, 1.0, SPK_F32, w) == 0);
    spk_lstm_layer layers[3];
    for (int k = 0; k < 3; k++)
        layers[k] = (spk_lstm_layer){w[k].W, w[k].R, w[k].B};
    spk_lstm_dims dims;
    CHECK(spk_lstm_validate(layers, 3, &dims) == 0);
    CHECK(dims.layers == 3 && dims.hidden == 16 && dims.input == 60);

    /* layer 2 given layer 1's W: it must take 2H = 32 inputs */
    layers[1].W = w[0].W;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: W has shape [2, 64, 60], expected [2, 64, 32]");
    layers[1].W = w[1].W;
    const int64_t r_bad[3] = {2, 64, 8}, b_bad[2] = {2, 64};
    spk_tensor *R = spk_tensor_new(SPK_F32, 3, r_bad), *B = spk_tensor_new(SPK_F32, 2, b_bad);
    layers[2].R = R;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 3: R has shape [2, 64, 8], expected [2, 64, 16]");
    layers[2].R = w[2].R;
    layers[2].B = B;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 3: B has shape [2, 64], expected [2, 128]");
    layers[2].B = w[2].B;
    layers[0].R = R;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 1: R has shape [2, 64, 8], expected [2, 4H, H]");
    layers[0].R = w[0].R;
    layers[1].B = NULL;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: B is missing");
    const int64_t i_shape[2] = {2, 128};
    spk_tensor *ints = spk_tensor_new(SPK_I32, 2, i_shape);
    layers[1].B = ints;
    CHECK(spk_lstm_validate(layers, 3, &dims) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "layer 2: B has dtype i32, expected f32 or f64");
    CHECK(spk_lstm_validate(layers, 0, &dims) == -1);
    spk_tensor_free(ints);
    spk_tensor_free(R);
    spk_tensor_free(B);
    for (int k = 0; k < 3; k++)
        spk_lstm_weights_free(&w[k]);
}

/* The documented draw order: one generator, W then R then B per layer. */
TEST(random_follows_its_draw_order)
{
    spk_lstm_weights w[2];
    CHECK(spk_lstm_random(2, 5, 4, 42, 2.0, SPK_F32, w) == 0);
    spk_rng rng;
    spk_rng_seed(&rng, 42);
    double bound = 2.0 / sqrt(4.0);
    const int64_t w0[3] = {2, 16, 5}, r[3] = {2, 16, 4}, b[2] = {2, 32}, w1[3] = {2, 16, 8};
    spk_tensor *e[6] = {spk_tensor_new(SPK_F32, 3, w0), spk_tensor_new(SPK_F32, 3, r), spk_tensor_new(SPK_F32, 2, b),
                        spk_tensor_new(SPK_F32, 3, w1), spk_tensor_new(SPK_F32, 3, r), spk_tensor_new(SPK_F32, 2, b)};
    for (int i = 0; i < 6; i++)
        spk_rng_fill_uniform(&rng, e[i], -bound, bound);
    spk_tensor *got[6] = {w[0].W, w[0].R, w[0].B, w[1].W, w[1].R, w[1].B};
    double lo = 1, hi = -1;
    for (int i = 0; i < 6; i++) {
        CHECK(bitwise_equal(got[i], e[i]));
        double mn, mx;
        spk_tensor_min(got[i], &mn);
        spk_tensor_max(got[i], &mx);
        lo = mn < lo ? mn : lo;
        hi = mx > hi ? mx : hi;
        spk_tensor_free(e[i]);
    }
    CHECK(lo >= -1.0 && hi < 1.0 && lo < -0.9 && hi > 0.9);
    for (int k = 0; k < 2; k++)
        spk_lstm_weights_free(&w[k]);
}

int main(void)
{
    RUN(gate_orders_are_checked);
    RUN(pack_round_trips_every_permutation);
    RUN(reference_unit_77_both_directions);
    RUN(reference_bias_unit_5_reverse);
    RUN(pack_keeps_f64_and_rejects_bad_shapes);
    RUN(reorder_gates_torch_to_onnx);
    RUN(torch_conversion_round_trip);
    RUN(validate_derives_sizes_and_names_errors);
    RUN(random_follows_its_draw_order);
    return CHECK_SUMMARY();
}
