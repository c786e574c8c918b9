#!/usr/bin/env python3
"""Independent pure-Python implementation of the generator documented in
src/core/rng.h (SplitMix64 seeding, xoshiro256**, uniform f64/f32,
Box-Muller normal using the cosine half). Prints known values for seeds
0, 1 and 42 that tests/c/test_rng.c asserts.

Usage: python3 tools/rng_reference.py
"""
import sys

# --help before the imports below, so that it works where they are missing
if __name__ == "__main__" and sys.argv[1:2] in (["--help"], ["-h"]):
    print(__doc__.strip())
    sys.exit(0)

import math

MASK = (1 << 64) - 1


def splitmix64(x):
    """Returns (new_state, output)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return x, z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class Rng:
    def __init__(self, seed):
        x = seed & MASK
        self.s = []
        for _ in range(4):
            x, out = splitmix64(x)
            self.s.append(out)

    def next(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def uniform_f32(self):
        # (next >> 40) has 24 bits, so the product is exact in f32 and f64.
        return (self.next() >> 40) * 2.0 ** -24

    def normal(self):
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


def main():
    for seed in (0, 1, 42):
        print(f"seed {seed}")
        r = Rng(seed)
        print("  next:       " + ", ".join(f"UINT64_C({r.next()})" for _ in range(4)))
        r = Rng(seed)
        print("  uniform:    " + ", ".join(repr(r.uniform()) for _ in range(3)))
        r = Rng(seed)
        print("  uniform_f32:" + ", ".join(repr(r.uniform_f32()) for _ in range(3)))
        r = Rng(seed)
        print("  normal:     " + ", ".join(repr(r.normal()) for _ in range(3)))


if __name__ == "__main__":
    main()
