/* The CPU path's vector units, thread count, barrier and pool (cpu.h). */
#include "core/cpu.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "core/error.h"

static const char *const vector_names[SPK_CPU_VECTOR_COUNT] = {"auto", "portable", "avx2", "avx512"};

const char *spk_cpu_vector_name(spk_cpu_vector v)
{
    return (unsigned)v < SPK_CPU_VECTOR_COUNT ? vector_names[v] : NULL;
}

int spk_cpu_vector_from_name(const char *name, spk_cpu_vector *out)
{
    for (int i = 0; name && i < SPK_CPU_VECTOR_COUNT; i++)
        if (strcmp(name, vector_names[i]) == 0) {
            *out = (spk_cpu_vector)i;
            return 0;
        }
    return spk_fail("vector unit must be \"auto\", \"portable\", \"avx2\" or \"avx512\", got \"%s\"",
                    name ? name : "");
}

bool spk_cpu_vector_available(spk_cpu_vector v)
{
    switch (v) {
    case SPK_CPU_VECTOR_AUTO:
    case SPK_CPU_VECTOR_PORTABLE:
        return true;
#if defined(__x86_64__) && defined(__GNUC__)
    /* libgcc's checks include the operating system's support (XGETBV). */
    case SPK_CPU_VECTOR_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case SPK_CPU_VECTOR_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return false;
    }
}

int spk_cpu_vector_resolve(spk_cpu_vector v, spk_cpu_vector *out)
{
    if (v == SPK_CPU_VECTOR_AUTO) {
        *out = spk_cpu_vector_available(SPK_CPU_VECTOR_AVX512) ? SPK_CPU_VECTOR_AVX512
               : spk_cpu_vector_available(SPK_CPU_VECTOR_AVX2) ? SPK_CPU_VECTOR_AVX2
                                                                : SPK_CPU_VECTOR_PORTABLE;
        return 0;
    }
    if (!spk_cpu_vector_name(v))
        return spk_fail("vector unit %d is not one of auto, portable, avx2, avx512", (int)v);
    if (!spk_cpu_vector_available(v)) {
        char have[64] = "portable";
        for (int i = SPK_CPU_VECTOR_AVX2; i < SPK_CPU_VECTOR_COUNT; i++)
            if (spk_cpu_vector_available((spk_cpu_vector)i))
                snprintf(have + strlen(have), sizeof have - strlen(have), ", %s", vector_names[i]);
        return spk_fail("vector unit %s is not available on this CPU (it has: %s)", vector_names[v], have);
    }
    *out = v;
    return 0;
}

int spk_cpu_vector_bytes(spk_cpu_vector v)
{
    if (v == SPK_CPU_VECTOR_AUTO && spk_cpu_vector_resolve(v, &v))
        return 16;
    return v == SPK_CPU_VECTOR_AVX512 ? 64 : v == SPK_CPU_VECTOR_AVX2 ? 32 : 16;
}

int spk_cpu_count(void)
{
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)(online < SPK_CPU_MAX_THREADS ? online : SPK_CPU_MAX_THREADS) : 1;
}

int spk_cpu_threads_default(int *out, const char **source)
{
    const char *env = getenv("SPK_THREADS");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long n = strtol(env, &end, 10);
        if (errno || end == env || *end || n < 1 || n > SPK_CPU_MAX_THREADS)
            return spk_fail("SPK_THREADS must be a whole number of threads in 1..%d, got \"%s\"",
                            SPK_CPU_MAX_THREADS, env);
        *out = (int)n;
        if (source)
            *source = "SPK_THREADS";
        return 0;
    }
    *out = spk_cpu_count();
    if (source)
        *source = "cpus";
    return 0;
}

/* ---- barrier ------------------------------------------------------------ */

/* Spins before sleeping: long enough to cover a step of work on idle cores,
 * short enough that an oversubscribed machine soon hands the core over. */
#define SPIN_ROUNDS 4000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(atomic_uint *word, unsigned seen)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    (void)word, (void)seen;
    sched_yield();
#endif
}

static void futex_wake_all(atomic_uint *word)
{
#if defined(__linux__)
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

void spk_cpu_barrier_init(spk_cpu_barrier *b, int count)
{
    memset(b, 0, sizeof *b);
    b->count = count > 0 ? (unsigned)count : 1;
}

/* The last to arrive clears the next phase's stop slot, then opens the
 * phase; a slot is reused two phases later, after every thread has read it.
 * Sleepers announce themselves before re-reading the phase (sequentially
 * consistent on both sides), so the opener either sees them or they see the
 * new phase. */
bool spk_cpu_barrier_wait(spk_cpu_barrier *b, bool stop)
{
    if (b->count == 1)
        return stop;
    unsigned phase = atomic_load(&b->phase);
    atomic_uint *slot = &b->stop[phase & 1];
    if (stop)
        atomic_fetch_or(slot, 1u);
    if (atomic_fetch_add(&b->arrived, 1u) + 1 == b->count) {
        atomic_store_explicit(&b->arrived, 0u, memory_order_relaxed);
        atomic_store_explicit(&b->stop[(phase + 1) & 1], 0u, memory_order_relaxed);
        atomic_store(&b->phase, phase + 1);
        if (atomic_load(&b->sleepers) > 0)
            futex_wake_all(&b->phase);
        return atomic_load(slot) != 0;
    }
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(&b->phase, memory_order_acquire) != phase)
            return atomic_load(slot) != 0;
        cpu_relax();
    }
    atomic_fetch_add(&b->sleepers, 1u);
    while (atomic_load(&b->phase) == phase)
        futex_wait(&b->phase, phase);
    atomic_fetch_sub(&b->sleepers, 1u);
    return atomic_load(slot) != 0;
}

/* ---- pool --------------------------------------------------------------- */

struct pool_thread {
    struct spk_cpu_pool *pool;
    int index;
    pthread_t thread;
};

struct spk_cpu_pool {
    pthread_mutex_t lock;
    pthread_cond_t go;
    bool started;
    void (*fn)(void *arg, int index);
    void *arg;
    int count;
    struct pool_thread threads[];
};

static void *pool_main(void *p)
{
    struct pool_thread *t = p;
    struct spk_cpu_pool *pool = t->pool;
    pthread_mutex_lock(&pool->lock);
    while (!pool->started)
        pthread_cond_wait(&pool->go, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    if (pool->fn)
        pool->fn(pool->arg, t->index);
    return NULL;
}

spk_cpu_pool *spk_cpu_pool_start(int want, int *count)
{
    if (want < 1)
        want = 1;
    if (want > SPK_CPU_MAX_THREADS)
        want = SPK_CPU_MAX_THREADS;
    struct spk_cpu_pool *pool = calloc(1, sizeof *pool + (size_t)want * sizeof pool->threads[0]);
    if (!pool) {
        *count = 0;
        return spk_fail_null("cpu: out of memory for %d threads", want);
    }
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->go, NULL);
    pool->count = 1;
    for (int i = 1; i < want; i++) {
        struct pool_thread *t = &pool->threads[i];
        t->pool = pool;
        t->index = i;
        if (pthread_create(&t->thread, NULL, pool_main, t) != 0)
            break; /* run with the threads there are */
        pool->count++;
    }
    *count = pool->count;
    return pool;
}

void spk_cpu_pool_run(spk_cpu_pool *pool, void (*fn)(void *arg, int index), void *arg)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->fn = fn;
    pool->arg = arg;
    pool->started = true;
    pthread_cond_broadcast(&pool->go);
    pthread_mutex_unlock(&pool->lock);
    if (fn)
        fn(arg, 0);
    for (int i = 1; i < pool->count; i++)
        pthread_join(pool->threads[i].thread, NULL);
    pthread_cond_destroy(&pool->go);
    pthread_mutex_destroy(&pool->lock);
    free(pool);
}
