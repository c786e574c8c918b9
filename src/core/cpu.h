/* What the CPU path runs on: the vector unit chosen at run time, the number of
 * threads, and the few threading pieces its loops share (a pool started once
 * per call, a barrier that also agrees on stopping).
 *
 * Vector units: "portable" (16-byte vectors of the compiler's generic vector
 * extension: SSE2 on x86-64, NEON on AArch64; every machine has it), "avx2"
 * (32 bytes, AVX2 with FMA3) and "avx512" (64 bytes, AVX-512F), the last
 * two on x86-64 only and only where the CPU and the operating system
 * support them. Code written for a unit does each lane's arithmetic with the
 * same correctly rounded operations (a fused multiply-add is one of them:
 * the unit's instruction, or fma() a lane in the portable form), so every
 * unit gives the same bits; they differ in speed alone. */
#ifndef SPK_CPU_H
#define SPK_CPU_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
    SPK_CPU_VECTOR_AUTO = 0, /* the widest available */
    SPK_CPU_VECTOR_PORTABLE,
    SPK_CPU_VECTOR_AVX2,
    SPK_CPU_VECTOR_AVX512,
} spk_cpu_vector;

#define SPK_CPU_VECTOR_COUNT 4

/* "auto", "portable", "avx2", "avx512" (NULL for anything else). */
const char *spk_cpu_vector_name(spk_cpu_vector v);
/* Parses one of those names; anything else fails naming them. */
int spk_cpu_vector_from_name(const char *name, spk_cpu_vector *out);
/* Whether this machine runs `v` (auto and portable: always). */
bool spk_cpu_vector_available(spk_cpu_vector v);
/* `v` made concrete: auto is the widest available unit. Fails (naming the
 * units this machine has) when `v` is not available. */
int spk_cpu_vector_resolve(spk_cpu_vector v, spk_cpu_vector *out);
/* Bytes a vector of the unit holds: 16, 32 or 64 (auto: the widest's). */
int spk_cpu_vector_bytes(spk_cpu_vector v);

/* The CPUs this process may run on (its affinity mask; the online CPUs where
 * the mask cannot be read), at least 1. */
int spk_cpu_count(void);

/* The default thread count of the CPU path: SPK_THREADS when it is set (a
 * positive integer up to SPK_CPU_MAX_THREADS; anything else fails naming
 * the value), else spk_cpu_count(). `source`, when not NULL, receives
 * "SPK_THREADS" or "cpus". */
#define SPK_CPU_MAX_THREADS 4096
int spk_cpu_threads_default(int *out, const char **source);

/* A barrier for `count` threads that spins briefly and then sleeps (so it
 * stays cheap when threads outnumber the cores), and tells every thread
 * whether any of them arrived asking to stop: all leave a phase with the
 * same answer, so they can leave a loop together. */
typedef struct spk_cpu_barrier {
    _Alignas(64) atomic_uint arrived;
    _Alignas(64) atomic_uint phase;
    atomic_uint sleepers;
    atomic_uint stop[2];
    unsigned count;
} spk_cpu_barrier;

void spk_cpu_barrier_init(spk_cpu_barrier *b, int count);
bool spk_cpu_barrier_wait(spk_cpu_barrier *b, bool stop);

/* A pool of threads for one call: spk_cpu_pool_start creates up to `want`
 * threads (the caller counts as the first), which wait; `count` says how
 * many there are (creation may give fewer, never 0). spk_cpu_pool_run runs
 * fn(arg, i) for i in 0..count-1, i = 0 on the calling thread, waits for all
 * and frees the pool. */
typedef struct spk_cpu_pool spk_cpu_pool;
spk_cpu_pool *spk_cpu_pool_start(int want, int *count);
void spk_cpu_pool_run(spk_cpu_pool *pool, void (*fn)(void *arg, int index), void *arg);

#endif
