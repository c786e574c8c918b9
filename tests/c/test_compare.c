#include <float.h>
#include <stdint.h>

#include "check.h"
#include "core/compare.h"
#include "core/error.h"

static spk_tensor *vec(spk_dtype dtype, int n, const double *values)
{
    int64_t len = n;
    spk_tensor *t = spk_tensor_new(dtype, 1, &len);
    for (int64_t i = 0; i < n; i++)
        spk_tensor_set_f64(t, &i, values[i]);
    return t;
}

TEST(known_perturbation_f64)
{
    double bv[4] = {1, 2, 3, 4};
    double av[4] = {1, 2 + 1e-3, 3 - 2e-3, 4};
    spk_tensor *a = vec(SPK_F64, 4, av), *b = vec(SPK_F64, 4, bv);
    spk_comparison c;
    CHECK(spk_compare(a, b, &c) == 0);
    CHECK_NEAR(c.max_abs, 2e-3, 1e-15);
    CHECK(c.worst_flat == 2 && c.worst[0] == 2);
    CHECK(c.a_worst == av[2] && c.b_worst == 3);
    CHECK_NEAR(c.max_rel, 2e-3 / 3, 1e-15);
    CHECK_NEAR(c.rel_l2, sqrt(5e-6 / 30), 1e-15);
    CHECK(c.nan_mismatch == 0 && c.inf_mismatch == 0 && c.count == 4);
    /* 1e-3 at 2 is about 1e-3 / 2^-51 = 2.25e12 f64 ulps; 2e-3 at 3 is 2e-3 / 2^-51 = 4.5e12. */
    CHECK_NEAR(c.max_ulp, 2e-3 * 0x1p51, 2e-3 * 0x1p51 * 1e-9);
    spk_tensor_free(a);
    spk_tensor_free(b);
}

TEST(ulps_f32_against_f64_truth)
{
    float one = 1.0f;
    double av[5] = {1.0, nextafterf(one, 2.0f), 1.0 + 3 * 0x1p-23, -0.0, -FLT_TRUE_MIN};
    /* The truth 1 + 2^-30 rounds to 1.0f: no ulp, though max_abs sees it. */
    double bv[5] = {1.0 + 0x1p-30, 1.0, 1.0, FLT_TRUE_MIN, FLT_TRUE_MIN};
    spk_tensor *a = vec(SPK_F32, 5, av), *b = vec(SPK_F64, 5, bv);
    spk_comparison c;
    CHECK(spk_compare(a, b, &c) == 0);
    CHECK(c.max_ulp == 3);
    CHECK_NEAR(c.max_abs, 3 * 0x1p-23, 0);
    CHECK(c.worst_flat == 2);
    /* Per element: 0, 1, 3, 1 (across zero), 2 (across zero). */
    double per[5] = {0, 1, 3, 1, 2};
    for (int i = 0; i < 5; i++) {
        spk_tensor *ai = spk_tensor_narrow(a, 0, i, 1), *bi = spk_tensor_narrow(b, 0, i, 1);
        CHECK(spk_compare(ai, bi, &c) == 0);
        CHECK(c.max_ulp == per[i]);
        spk_tensor_free(ai);
        spk_tensor_free(bi);
    }
    spk_tensor_free(a);
    spk_tensor_free(b);

    /* Both f64: ulps in f64. */
    double x[1] = {nextafter(nextafter(1.0, 2.0), 2.0)}, y[1] = {1.0};
    spk_tensor *xa = vec(SPK_F64, 1, x), *yb = vec(SPK_F64, 1, y);
    CHECK(spk_compare(xa, yb, &c) == 0 && c.max_ulp == 2);
    spk_tensor_free(xa);
    spk_tensor_free(yb);
}

TEST(worst_index_in_strided_2d)
{
    int64_t shape[2] = {3, 2};
    spk_tensor *base = spk_tensor_arange(SPK_F64, 0, 6, 1);
    spk_tensor *b = spk_tensor_view(base, 2, shape);
    spk_tensor *bt = spk_tensor_transpose(b, 0, 1); /* 2x3: [[0,2,4],[1,3,5]] */
    int64_t s23[2] = {2, 3};
    spk_tensor *a = spk_tensor_new(SPK_F32, 2, s23);
    double av[6] = {0, 2.5, 4, 1, 3, 5.75};
    for (int64_t k = 0; k < 6; k++)
        ((float *)spk_tensor_data(a))[k] = (float)av[k];
    spk_comparison c;
    CHECK(spk_compare(a, bt, &c) == 0);
    CHECK(c.max_abs == 0.75 && c.worst[0] == 1 && c.worst[1] == 2 && c.worst_flat == 5);
    CHECK(c.a_worst == 5.75 && c.b_worst == 5);
    CHECK_NEAR(c.max_rel, 0.25, 1e-15);   /* 0.5 / 2 beats 0.75 / 5 */
    CHECK_NEAR(c.rel_l2, sqrt(0.25 + 0.5625) / sqrt(55.0), 1e-15);
    spk_tensor_free(a);
    spk_tensor_free(bt);
    spk_tensor_free(b);
    spk_tensor_free(base);
}

TEST(nan_and_inf_counted_not_folded)
{
    double av[6] = {NAN, NAN, 1.0, INFINITY, INFINITY, 2.0};
    double bv[6] = {NAN, 1.0, NAN, INFINITY, -INFINITY, 2.5};
    spk_tensor *a = vec(SPK_F64, 6, av), *b = vec(SPK_F64, 6, bv);
    spk_comparison c;
    CHECK(spk_compare(a, b, &c) == 0);
    CHECK(c.nan_mismatch == 2);
    CHECK(c.inf_mismatch == 1);
    CHECK(c.max_abs == 0.5 && c.worst_flat == 5);
    CHECK_NEAR(c.rel_l2, 0.2, 1e-15);
    bool ok = true;
    CHECK(spk_allclose(a, b, 1, 1, &ok) == 0 && !ok);
    spk_tensor *n1 = spk_tensor_narrow(a, 0, 0, 1), *n2 = spk_tensor_narrow(b, 0, 0, 1);
    CHECK(spk_compare(n1, n2, &c) == 0 && c.nan_mismatch == 0 && c.worst_flat == -1 && c.max_abs == 0);
    CHECK(spk_allclose(n1, n2, 0, 0, &ok) == 0 && ok); /* NaN where both are NaN */
    spk_tensor_free(n1);
    spk_tensor_free(n2);
    spk_tensor *i1 = spk_tensor_narrow(a, 0, 3, 1), *i2 = spk_tensor_narrow(b, 0, 3, 1);
    CHECK(spk_allclose(i1, i2, 0, 0, &ok) == 0 && ok); /* equal infinities */
    spk_tensor_free(i1);
    spk_tensor_free(i2);
    spk_tensor_free(a);
    spk_tensor_free(b);
}

TEST(allclose_tolerances)
{
    double bv[3] = {1, 100, -10};
    double av[3] = {1.001, 100.05, -10};
    spk_tensor *a = vec(SPK_F32, 3, av), *b = vec(SPK_F64, 3, bv);
    bool ok = false;
    CHECK(spk_allclose(a, b, 1e-3, 0, &ok) == 0 && !ok);  /* 0.001 > 1e-3 * 1 (with f32 rounding of 1.001) */
    CHECK(spk_allclose(a, b, 1e-3, 1e-3, &ok) == 0 && ok);
    CHECK(spk_allclose(a, b, 0, 0.01, &ok) == 0 && !ok);  /* 0.05 at 100 */
    CHECK(spk_allclose(a, b, 1e-3, -1, &ok) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "non-negative");
    spk_tensor_free(a);
    spk_tensor_free(b);
}

TEST(shape_mismatch_and_device_refused)
{
    int64_t s1[1] = {6}, s2[2] = {2, 3};
    spk_tensor *a = spk_tensor_new(SPK_F32, 1, s1), *b = spk_tensor_new(SPK_F64, 2, s2);
    spk_comparison c;
    CHECK(spk_compare(a, b, &c) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "compare: shapes differ: [6] vs [2, 3]");
    bool ok;
    CHECK(spk_allclose(a, b, 0, 0, &ok) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "shapes differ");
    static float fake[6];
    spk_storage *s = spk_storage_wrap(fake, sizeof fake, 0, NULL, NULL);
    spk_tensor *d = spk_tensor_on_storage(s, SPK_F32, 1, s1);
    spk_storage_release(s);
    CHECK(spk_compare(a, d, &c) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "the second is on CUDA device 0");
    spk_tensor_free(d);
    spk_tensor_free(a);
    spk_tensor_free(b);
}

int main(void)
{
    RUN(known_perturbation_f64);
    RUN(ulps_f32_against_f64_truth);
    RUN(worst_index_in_strided_2d);
    RUN(nan_and_inf_counted_not_folded);
    RUN(allclose_tolerances);
    RUN(shape_mismatch_and_device_refused);
    return CHECK_SUMMARY();
}
