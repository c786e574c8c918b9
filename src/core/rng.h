/* A seeded generator whose numbers are the same on every machine.
 *
 * Algorithm (documented so other languages can reproduce it):
 *   state: four 64-bit words from SplitMix64 applied to the seed
 *          (s[i] = splitmix64(&x) for i = 0..3, x starting at the seed);
 *   next:  xoshiro256** (Blackman and Vigna, 2018);
 *   uniform f64 in [0, 1): (next() >> 11) * 2^-53;
 *   uniform f32 in [0, 1): (next() >> 40) * 2^-24;
 *   normal: Box-Muller on two uniform f64 draws u1, u2:
 *           sqrt(-2 ln(1 - u1)) * cos(2 pi u2); the sine half is discarded,
 *           so every normal consumes exactly two draws.
 *
 * Scripts draw from one process-wide generator unless they give a seed
 * (src/lua/random.c): it starts seeded with SPK_RNG_DEFAULT_SEED and each
 * draw continues it, as torch's default generator does (spk.seed(n) seeds it
 * again; the first draws after seeding with n are those of seed = n). */
#ifndef SPK_RNG_H
#define SPK_RNG_H

#include <stdint.h>

#include "core/tensor.h"

/* The seed the process-wide generator starts from. */
#define SPK_RNG_DEFAULT_SEED 0

typedef struct spk_rng {
    uint64_t s[4];
} spk_rng;

void spk_rng_seed(spk_rng *rng, uint64_t seed);
uint64_t spk_rng_next(spk_rng *rng);
double spk_rng_uniform(spk_rng *rng); /* [0, 1) */
float spk_rng_uniform_f32(spk_rng *rng);
double spk_rng_normal(spk_rng *rng);

/* Fill a host tensor in row-major order of its view.
 * uniform: low + (high - low) * u (u drawn in the tensor's precision);
 * normal: mean + std * n.
 * The parameters must be finite with low <= high and std >= 0 (low == high
 * and std == 0 give constants); anything else is an error naming the values
 * (the _check functions alone test them). */
int spk_rng_uniform_check(double low, double high);
int spk_rng_normal_check(double mean, double std);
int spk_rng_fill_uniform(spk_rng *rng, spk_tensor *t, double low, double high);
int spk_rng_fill_normal(spk_rng *rng, spk_tensor *t, double mean, double std);

#endif
