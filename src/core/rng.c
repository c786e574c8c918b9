/* The generator documented in rng.h: SplitMix64 seeding, xoshiro256**,
 * 53-bit and 24-bit uniforms, Box-Muller normals (cosine half only). */
#include "core/rng.h"

#include <math.h>

#include "core/cancel.h"
#include "core/error.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void spk_rng_seed(spk_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&x);
}

uint64_t spk_rng_next(spk_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double spk_rng_uniform(spk_rng *rng)
{
    return (double)(spk_rng_next(rng) >> 11) * 0x1.0p-53;
}

float spk_rng_uniform_f32(spk_rng *rng)
{
    return (float)(spk_rng_next(rng) >> 40) * 0x1.0p-24f;
}

double spk_rng_normal(spk_rng *rng)
{
    static const double two_pi = 6.283185307179586476925286766559;
    double u1 = spk_rng_uniform(rng);
    double u2 = spk_rng_uniform(rng);
    /* 1 - u1 lies in (0, 1], so the logarithm is finite. */
    return sqrt(-2.0 * log(1.0 - u1)) * cos(two_pi * u2);
}

static int check_fillable(const spk_tensor *t, const char *what)
{
    if (!t)
        return spk_fail("%s: tensor is NULL", what);
    if (!spk_tensor_is_host(t))
        return spk_fail("%s needs a host tensor, but this one is on CUDA device %d (fill on the host, then copy)",
                        what, t->storage->device);
    return 0;
}

/* Visits every element of the view in row-major order. */
static int fill_with(spk_rng *rng, spk_tensor *t, double a, double b, bool normal, const char *what)
{
    if (check_fillable(t, what))
        return -1;
    int64_t n = spk_tensor_numel(t);
    int64_t idx[SPK_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (spk_cancel_due(i))
            return spk_cancel_check();
        double v;
        if (normal)
            v = a + b * spk_rng_normal(rng);
        else if (t->dtype == SPK_F32) /* in f64, rounded once when stored */
            v = a + (b - a) * (double)spk_rng_uniform_f32(rng);
        else
            v = a + (b - a) * spk_rng_uniform(rng);
        spk_tensor_set_f64(t, idx, v);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

int spk_rng_uniform_check(double low, double high)
{
    if (!isfinite(low) || !isfinite(high))
        return spk_fail("rand: low and high must be finite, got low = %g, high = %g", low, high);
    if (low > high)
        return spk_fail("rand: low = %g is above high = %g (the range is [low, high))", low, high);
    return 0;
}

int spk_rng_normal_check(double mean, double std)
{
    if (!isfinite(mean))
        return spk_fail("randn: mean must be finite, got %g", mean);
    if (!isfinite(std) || std < 0)
        return spk_fail("randn: std must be finite and >= 0, got %g", std);
    return 0;
}

int spk_rng_fill_uniform(spk_rng *rng, spk_tensor *t, double low, double high)
{
    if (spk_rng_uniform_check(low, high))
        return -1;
    return fill_with(rng, t, low, high, false, "rand");
}

int spk_rng_fill_normal(spk_rng *rng, spk_tensor *t, double mean, double std)
{
    if (spk_rng_normal_check(mean, std))
        return -1;
    return fill_with(rng, t, mean, std, true, "randn");
}
