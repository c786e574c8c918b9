#include <stdint.h>

#include "check.h"
#include "core/error.h"
#include "core/rng.h"

/* Known values produced by tools/rng_reference.py, an independent pure-Python
 * implementation of the algorithm documented in src/core/rng.h. */
typedef struct known {
    uint64_t seed;
    uint64_t next[4];
    double uniform[3];
    double uniform_f32[3];
    double normal[3];
} known;

static const known KNOWN[] = {
    {0,
     {UINT64_C(11091344671253066420), UINT64_C(13793997310169335082), UINT64_C(1900383378846508768),
      UINT64_C(7684712102626143532)},
     {0.6012629994179048, 0.7477740925472398, 0.10301998939503632},
     {0.6012629866600037, 0.747774064540863, 0.10301995277404785},
     {-0.01896499060631051, -0.40372109705088766, 1.6251100012755157}},
    {1,
     {UINT64_C(12966619160104079557), UINT64_C(9600361134598540522), UINT64_C(10590380919521690900),
      UINT64_C(7218738570589545383)},
     {0.7029218331588505, 0.5204366199388569, 0.5741057000197225},
     {0.7029218077659607, 0.5204365849494934, 0.5741056799888611},
     {-1.5452228371402943, -1.0136476397283942, 0.9582971460957354}},
    {42,
     {UINT64_C(1546998764402558742), UINT64_C(6990951692964543102), UINT64_C(12544586762248559009),
      UINT64_C(17057574109182124193)},
     {0.08386297105988216, 0.3789802506626686, 0.6800434110281394},
     {0.08386296033859253, 0.37898021936416626, 0.6800433993339539},
     {-0.303263064678738, 1.3438117634372806, 0.3834617912676943}},
};

#define NKNOWN (sizeof KNOWN / sizeof KNOWN[0])

TEST(next_matches_reference)
{
    for (size_t k = 0; k < NKNOWN; k++) {
        spk_rng r;
        spk_rng_seed(&r, KNOWN[k].seed);
        for (int i = 0; i < 4; i++)
            CHECK(spk_rng_next(&r) == KNOWN[k].next[i]);
    }
}

TEST(uniform_matches_reference)
{
    for (size_t k = 0; k < NKNOWN; k++) {
        spk_rng r;
        spk_rng_seed(&r, KNOWN[k].seed);
        for (int i = 0; i < 3; i++)
            CHECK(spk_rng_uniform(&r) == KNOWN[k].uniform[i]); /* exact: 53-bit values */
        spk_rng_seed(&r, KNOWN[k].seed);
        for (int i = 0; i < 3; i++)
            CHECK(spk_rng_uniform_f32(&r) == (float)KNOWN[k].uniform_f32[i]);
    }
}

TEST(normal_matches_reference)
{
    for (size_t k = 0; k < NKNOWN; k++) {
        spk_rng r;
        spk_rng_seed(&r, KNOWN[k].seed);
        for (int i = 0; i < 3; i++)
            /* log and cos may differ by an ulp between math libraries. */
            CHECK_NEAR(spk_rng_normal(&r), KNOWN[k].normal[i], 4e-16 * (1 + fabs(KNOWN[k].normal[i])));
    }
}

TEST(fill_uses_row_major_order_of_view)
{
    int64_t shape[2] = {2, 3};
    spk_tensor *t = spk_tensor_new(SPK_F64, 2, shape);
    spk_tensor *tt = spk_tensor_transpose(t, 0, 1); /* 3x2 view, strided */
    spk_rng r;
    spk_rng_seed(&r, 42);
    CHECK(spk_rng_fill_uniform(&r, tt, 10, 20) == 0);
    /* tt[0][0], tt[0][1] = t[0][0], t[1][0]: the first two draws. */
    int64_t i00[2] = {0, 0}, i10[2] = {1, 0}, i01[2] = {0, 1};
    CHECK(spk_tensor_get_f64(t, i00) == 10 + 10 * KNOWN[2].uniform[0]);
    CHECK(spk_tensor_get_f64(t, i10) == 10 + 10 * KNOWN[2].uniform[1]);
    CHECK(spk_tensor_get_f64(t, i01) == 10 + 10 * KNOWN[2].uniform[2]);
    spk_tensor_free(tt);
    spk_tensor_free(t);

    int64_t three = 3;
    spk_tensor *f = spk_tensor_new(SPK_F32, 1, &three);
    spk_rng_seed(&r, 0);
    CHECK(spk_rng_fill_uniform(&r, f, -1, 1) == 0);
    int64_t j = 1;
    CHECK(spk_tensor_get_f64(f, &j) == (float)(-1 + 2 * KNOWN[0].uniform_f32[1]));
    spk_rng_seed(&r, 1);
    CHECK(spk_rng_fill_normal(&r, f, 5, 2) == 0);
    j = 2;
    CHECK_NEAR(spk_tensor_get_f64(f, &j), 5 + 2 * KNOWN[1].normal[2], 1e-6);
    spk_tensor_free(f);
}

TEST(distribution_is_plausible)
{
    spk_rng r;
    spk_rng_seed(&r, 7);
    double sum = 0, sumsq = 0, lo = 1, hi = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = spk_rng_uniform(&r);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    CHECK(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 1 - 1e-3);
    for (int i = 0; i < n; i++) {
        double z = spk_rng_normal(&r);
        sum += z;
        sumsq += z * z;
    }
    CHECK_NEAR(sum / n, 0.0, 0.01);
    CHECK_NEAR(sumsq / n, 1.0, 0.02);
}

TEST(device_tensor_refused)
{
    static double fake[2];
    spk_storage *s = spk_storage_wrap(fake, sizeof fake, 1, NULL, NULL);
    int64_t two = 2;
    spk_tensor *d = spk_tensor_on_storage(s, SPK_F64, 1, &two);
    spk_rng r;
    spk_rng_seed(&r, 0);
    CHECK(spk_rng_fill_normal(&r, d, 0, 1) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "CUDA device 1");
    spk_tensor_free(d);
    spk_storage_release(s);
}

int main(void)
{
    RUN(next_matches_reference);
    RUN(uniform_matches_reference);
    RUN(normal_matches_reference);
    RUN(fill_uses_row_major_order_of_view);
    RUN(distribution_is_plausible);
    RUN(device_tensor_refused);
    return CHECK_SUMMARY();
}
