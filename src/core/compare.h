/* Comparing a result with a truth: tensors of the same shape, any mix of f32
 * and f64. ULPs are counted in the less precise of the two dtypes. */
#ifndef SPK_COMPARE_H
#define SPK_COMPARE_H

#include <stdint.h>

#include "core/tensor.h"

typedef struct spk_comparison {
    double max_abs;   /* max |a - b| over finite pairs */
    double max_rel;   /* max |a - b| / max(|b|, tiny) */
    double rel_l2;    /* ||a - b|| / ||b|| (||a - b|| if ||b|| == 0) */
    double max_ulp;   /* largest distance in ulps */
    int64_t worst[SPK_MAX_DIMS]; /* 0-based index of the max_abs element */
    int64_t worst_flat;          /* its row-major position, -1 if none */
    double a_worst, b_worst;
    int64_t nan_mismatch; /* positions where exactly one side is NaN */
    int64_t inf_mismatch; /* positions where the sides differ in infinity */
    int64_t count;
} spk_comparison;

int spk_compare(const spk_tensor *a, const spk_tensor *b, spk_comparison *out);
/* |a - b| <= atol + rtol * |b| everywhere, NaN only where both are NaN. */
int spk_allclose(const spk_tensor *a, const spk_tensor *b, double rtol, double atol, bool *out);

#endif
