/* The core's NumPy-like functions (core/tensor.h, tensor_math.c and
 * friends): known values and the refusals their messages name. The bulk of
 * the checking is tests/spec/tensor_numpy_spec.lua, against NumPy. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "core/error.h"
#include "core/tensor.h"

static spk_tensor *vector(spk_dtype dtype, int n, const double *values)
{
    int64_t len = n;
    spk_tensor *t = spk_tensor_new(dtype, 1, &len);
    for (int64_t i = 0; i < n; i++)
        spk_tensor_set_f64(t, &i, values[i]);
    return t;
}

static double at(const spk_tensor *t, int64_t i) { return spk_tensor_flat_get(t, i); }

TEST(pow_and_mod_follow_numpy)
{
    const double xs[] = {-7, 7, -7, 0}, ys[] = {3, -3, -3, 5};
    spk_tensor *x = vector(SPK_I32, 4, xs), *y = vector(SPK_I32, 4, ys);
    spk_tensor *m = spk_tensor_binary(SPK_OP_MOD, x, y);
    CHECK(m && m->dtype == SPK_I32);
    CHECK(at(m, 0) == 2 && at(m, 1) == -2 && at(m, 2) == -1 && at(m, 3) == 0); /* the divisor's sign */
    spk_tensor *zero = spk_tensor_binary_scalar(SPK_OP_MOD, x, spk_scalar_int(0), false);
    CHECK(zero && at(zero, 0) == 0); /* x % 0 is 0 for integers, as NumPy */
    CHECK(spk_tensor_binary(SPK_OP_POW, x, y) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "negative integer powers");
    spk_tensor *p = spk_tensor_binary_scalar(SPK_OP_POW, x, spk_scalar_int(2), false);
    CHECK(p && p->dtype == SPK_I32 && at(p, 0) == 49 && at(p, 3) == 0);
    spk_tensor *big = spk_tensor_binary_scalar(SPK_OP_POW, x, spk_scalar_int(40), false);
    CHECK(big && at(big, 1) == (double)(int32_t)(uint32_t)0xF78771C1u); /* 7^40 mod 2^32, as int32 wraps */
    spk_tensor *xf = spk_tensor_to_dtype(x, SPK_F64);
    spk_tensor *mf = spk_tensor_binary_scalar(SPK_OP_MOD, xf, spk_scalar_float(-0.0), false);
    CHECK(mf && isnan(at(mf, 0)));
    spk_tensor *ms = spk_tensor_binary_scalar(SPK_OP_MOD, xf, spk_scalar_float(-7), false);
    CHECK(ms && at(ms, 1) == 0 && signbit(at(ms, 1))); /* a zero result takes the divisor's sign */
    spk_tensor *half = spk_tensor_binary_scalar(SPK_OP_POW, x, spk_scalar_float(0.5), false);
    CHECK(half && half->dtype == SPK_F64 && isnan(at(half, 0)) && fabs(at(half, 1) - sqrt(7)) < 1e-15);
    spk_tensor *list[] = {x, y, m, zero, p, big, xf, mf, ms, half};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        spk_tensor_free(list[i]);
}

TEST(views_squeeze_unsqueeze_permute)
{
    int64_t shape[4] = {2, 1, 3, 1};
    spk_tensor *t = spk_tensor_new(SPK_F32, 4, shape);
    spk_tensor *all = spk_tensor_squeeze(t, SPK_ALL_DIMS);
    CHECK(all && all->ndim == 2 && all->shape[0] == 2 && all->shape[1] == 3 && all->storage == t->storage);
    spk_tensor *one = spk_tensor_squeeze(t, 3);
    CHECK(one && one->ndim == 3 && one->shape[2] == 3);
    CHECK(spk_tensor_squeeze(t, 0) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "size 2, not 1");
    spk_tensor *u = spk_tensor_unsqueeze(all, 2);
    CHECK(u && u->ndim == 3 && u->shape[2] == 1 && spk_tensor_is_contiguous(u));
    CHECK(spk_tensor_unsqueeze(all, 3) == NULL);
    int perm[4] = {2, 0, 3, 1};
    spk_tensor *p = spk_tensor_permute(t, perm);
    CHECK(p && p->shape[0] == 3 && p->shape[1] == 2 && p->strides[0] == t->strides[2]);
    int twice[4] = {0, 0, 1, 2};
    CHECK(spk_tensor_permute(t, twice) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "given twice");
    spk_tensor *list[] = {t, all, one, u, p};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        spk_tensor_free(list[i]);
}

TEST(cat_stack_where_matmul)
{
    const double a3[] = {1, 2, 3}, b3[] = {4, 5, 6};
    spk_tensor *a = vector(SPK_F32, 3, a3), *b = vector(SPK_I32, 3, b3);
    const spk_tensor *pair[] = {a, b};
    spk_tensor *c = spk_tensor_cat(2, pair, 0);
    CHECK(c && c->dtype == SPK_F64 && c->shape[0] == 6 && at(c, 3) == 4);
    spk_tensor *s = spk_tensor_stack(2, pair, 1);
    CHECK(s && s->ndim == 2 && s->shape[0] == 3 && s->shape[1] == 2 && at(s, 1) == 4);
    CHECK(spk_tensor_cat(0, pair, 0) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "at least one");
    spk_tensor *gt = spk_tensor_binary_scalar(SPK_OP_GT, a, spk_scalar_int(1), false);
    spk_tensor *w = spk_tensor_where(gt, (spk_operand){a, {0}}, (spk_operand){NULL, spk_scalar_int(-1)});
    CHECK(w && w->dtype == SPK_F32 && at(w, 0) == -1 && at(w, 2) == 3); /* the number takes a's dtype */
    spk_tensor *dot = spk_tensor_matmul(a, b);
    CHECK(dot && dot->ndim == 0 && at(dot, 0) == 32 && dot->dtype == SPK_F64);
    spk_tensor *outer_a = spk_tensor_unsqueeze(a, 1), *outer_b = spk_tensor_unsqueeze(b, 0);
    spk_tensor *outer = spk_tensor_matmul(outer_a, outer_b);
    CHECK(outer && outer->shape[0] == 3 && outer->shape[1] == 3 && at(outer, 8) == 18);
    CHECK(spk_tensor_matmul(outer_a, outer_a) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "inner sizes 1 and 3 differ");
    spk_tensor *list[] = {a, b, c, s, gt, w, dot, outer_a, outer_b, outer};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        spk_tensor_free(list[i]);
}

TEST(unary_reductions_and_creation)
{
    const double v[] = {1, 0, NAN, -4};
    spk_tensor *x = vector(SPK_F64, 4, v);
    spk_tensor *nan = spk_tensor_unary(SPK_FN_ISNAN, x);
    CHECK(nan && nan->dtype == SPK_I32 && at(nan, 2) == 1 && at(nan, 0) == 0);
    spk_tensor *root = spk_tensor_unary(SPK_FN_SQRT, x);
    CHECK(root && isnan(at(root, 3)) && at(root, 0) == 1);
    spk_scalar any, all;
    CHECK(spk_tensor_reduce_value(x, SPK_RED_ANY, 0, &any) == 0 && any.i == 1);
    CHECK(spk_tensor_reduce_value(x, SPK_RED_ALL, 0, &all) == 0 && all.i == 0);
    int64_t shape[3] = {2, 3, 4};
    spk_tensor *ones = spk_tensor_full(SPK_I32, 3, shape, 1);
    int dims[2] = {0, 2};
    spk_tensor *sum = spk_tensor_reduce_dims(ones, SPK_RED_SUM, 2, dims, true, 0);
    CHECK(sum && sum->ndim == 3 && sum->shape[0] == 1 && sum->shape[1] == 3 && at(sum, 0) == 8);
    CHECK(spk_tensor_reduce_dims(ones, SPK_RED_ARGMAX, 2, dims, false, 0) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "one dim");
    int again[2] = {1, 1};
    CHECK(spk_tensor_reduce_dims(ones, SPK_RED_SUM, 2, again, false, 0) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "given twice");
    spk_tensor *line = spk_tensor_linspace(SPK_F64, 0, 1, 4);
    CHECK(line && at(line, 1) == 1.0 / 3 && at(line, 3) == 1);
    CHECK(spk_tensor_linspace(SPK_I32, 0, 1, 4) == NULL);
    spk_tensor *eye = spk_tensor_eye(SPK_U64, 2, 3);
    CHECK(eye && at(eye, 0) == 1 && at(eye, 4) == 1 && at(eye, 5) == 0);
    spk_tensor *list[] = {x, nan, root, ones, sum, line, eye};
    for (size_t i = 0; i < sizeof list / sizeof *list; i++)
        spk_tensor_free(list[i]);
}

TEST(floats_print_as_the_values_they_are)
{
    char buf[64];
    CHECK(strcmp(spk_format_float(1 + 1e-12, SPK_F64, 0, buf, sizeof buf), "1.000000000001") == 0);
    CHECK(strcmp(spk_format_float(1, SPK_F64, 0, buf, sizeof buf), "1") == 0);
    CHECK(strcmp(spk_format_float(0.1, SPK_F64, 0, buf, sizeof buf), "0.1") == 0);
    CHECK(strcmp(spk_format_float((float)0.1, SPK_F32, 0, buf, sizeof buf), "0.1") == 0);
    CHECK(strcmp(spk_format_float(50, SPK_F32, 0, buf, sizeof buf), "50") == 0);
    CHECK(strcmp(spk_format_float(1 + 1e-12, SPK_F64, 6, buf, sizeof buf), "1") == 0);
    CHECK(strcmp(spk_format_float(-NAN, SPK_F64, 0, buf, sizeof buf), "nan") == 0);
    const double v[] = {1, 1 + 1e-12};
    spk_tensor *t = vector(SPK_F64, 2, v);
    char *text = spk_tensor_format(t, 1000, 3);
    CHECK(text && strcmp(text, "tensor(f64, [2])\n[1, 1.000000000001]") == 0);
    free(text);
    text = spk_tensor_format_digits(t, 1000, 3, 3);
    CHECK(text && strcmp(text, "tensor(f64, [2])\n[1, 1]") == 0);
    free(text);
    CHECK(spk_tensor_format_digits(t, 1000, 3, 18) == NULL);
    spk_tensor_free(t);
}

int main(void)
{
    RUN(pow_and_mod_follow_numpy);
    RUN(views_squeeze_unsqueeze_permute);
    RUN(cat_stack_where_matmul);
    RUN(unary_reductions_and_creation);
    RUN(floats_print_as_the_values_they_are);
    return CHECK_SUMMARY();
}
