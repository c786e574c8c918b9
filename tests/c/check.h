/* A minimal C test harness. Each test_*.c defines tests with TEST(name) and
 * lists them in main() with RUN(name); a test passes when none of its CHECKs
 * failed. The last line printed is "c/<file>: N passed, N failed", which
 * scripts/test.sh sums. */
#ifndef SPK_CHECK_H
#define SPK_CHECK_H

#include <ftw.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int check_tests_passed, check_tests_failed, check_current_failed;

#define TEST(name) static void name(void)

/* Whether to print measurements beside the results (SPK_VERBOSE set and not
 * "0"): make test leaves them out, so its output reads as a test report. */
static inline bool check_verbose(void)
{
    const char *v = getenv("SPK_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

/* Scratch folders: check_scratch_dir("name") makes $TMPDIR/spk-name-XXXXXX
 * (TMPDIR unset: /tmp) and returns its path; the process that made it
 * removes it, with everything in it, when it exits, however the test ends
 * (a forked child that exits leaves it alone). So every test cleans up
 * after itself; scripts/test.sh checks that nothing is left. */
#define CHECK_SCRATCH_MAX 8
static char check_scratch[CHECK_SCRATCH_MAX][512];
static int check_scratch_count;
static pid_t check_scratch_owner;

static int check_remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void check_remove_scratch(void)
{
    if (getpid() != check_scratch_owner)
        return;
    for (int i = 0; i < check_scratch_count; i++)
        if (nftw(check_scratch[i], check_remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            fprintf(stderr, "could not remove %s\n", check_scratch[i]);
}

static inline const char *check_scratch_dir(const char *name)
{
    if (check_scratch_count == CHECK_SCRATCH_MAX) {
        fprintf(stderr, "check_scratch_dir: more than %d folders\n", CHECK_SCRATCH_MAX);
        exit(2);
    }
    const char *tmp = getenv("TMPDIR");
    char *dir = check_scratch[check_scratch_count];
    snprintf(dir, sizeof check_scratch[0], "%s/spk-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    if (!mkdtemp(dir)) {
        perror(dir);
        exit(2);
    }
    if (check_scratch_count++ == 0) {
        check_scratch_owner = getpid();
        atexit(check_remove_scratch);
    }
    return dir;
}

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            check_current_failed++;                                              \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double check_a_ = (a), check_b_ = (b);                                   \
        if (!(fabs(check_a_ - check_b_) <= (tol))) {                             \
            check_current_failed++;                                              \
            fprintf(stderr, "  %s:%d: %s = %.17g, %s = %.17g, tolerance %g\n",   \
                    __FILE__, __LINE__, #a, check_a_, #b, check_b_, (double)(tol)); \
        }                                                                        \
    } while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                                     \
    do {                                                                         \
        const char *check_h_ = (haystack);                                       \
        if (!check_h_ || !strstr(check_h_, (needle))) {                         \
            check_current_failed++;                                              \
            fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n",         \
                    __FILE__, __LINE__, check_h_ ? check_h_ : "(null)", (needle)); \
        }                                                                        \
    } while (0)

#define RUN(name)                                                                \
    do {                                                                         \
        check_current_failed = 0;                                                \
        name();                                                                  \
        if (check_current_failed) {                                              \
            check_tests_failed++;                                                \
            printf("not ok - %s\n", #name);                                      \
        } else {                                                                 \
            check_tests_passed++;                                                \
            printf("ok - %s\n", #name);                                          \
        }                                                                        \
    } while (0)

#define CHECK_SUMMARY()                                                          \
    (printf("c/%s: %d passed, %d failed\n", strrchr(__FILE__, '/') ? strrchr(__FILE__, '/') + 1 : __FILE__, \
            check_tests_passed, check_tests_failed),                             \
     check_tests_failed ? 1 : 0)

#endif
