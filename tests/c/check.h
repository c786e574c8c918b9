/* A minimal C test harness. Each test_*.c defines tests with TEST(name) and
 * lists them in main() with RUN(name); a test passes when none of its CHECKs
 * failed. The last line printed is "c/<file>: N passed, N failed", which
 * scripts/test.sh sums. */
#ifndef SPK_CHECK_H
#define SPK_CHECK_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_tests_passed, check_tests_failed, check_current_failed;

#define TEST(name) static void name(void)

/* Whether to print measurements beside the results (SPK_VERBOSE set and not
 * "0"): make test leaves them out, so its output reads as a test report. */
static inline bool check_verbose(void)
{
    const char *v = getenv("SPK_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
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
