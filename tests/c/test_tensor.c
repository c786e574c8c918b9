#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "core/error.h"
#include "core/tensor.h"

/* A 2x3 f32 tensor holding 1..6 in row-major order. */
static spk_tensor *make_2x3(void)
{
    spk_tensor *t = spk_tensor_arange(SPK_F32, 1, 7, 1);
    int64_t shape[2] = {2, 3};
    spk_tensor *v = spk_tensor_view(t, 2, shape);
    spk_tensor_free(t);
    return v;
}

static double at2(const spk_tensor *t, int64_t i, int64_t j)
{
    int64_t idx[2] = {i, j};
    return spk_tensor_get_f64(t, idx);
}

TEST(dtype_names_and_sizes)
{
    spk_dtype d;
    CHECK(spk_dtype_from_name("f64", &d) == 0 && d == SPK_F64);
    CHECK(spk_dtype_from_name("u64", &d) == 0 && d == SPK_U64);
    CHECK(spk_dtype_from_name("f16", &d) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "f16");
    CHECK(spk_dtype_size(SPK_F32) == 4 && spk_dtype_size(SPK_I32) == 4);
    CHECK(spk_dtype_size(SPK_F64) == 8 && spk_dtype_size(SPK_U64) == 8);
}

TEST(creation_and_shape_checks)
{
    int64_t shape[3] = {2, 3, 4};
    spk_tensor *t = spk_tensor_new(SPK_F64, 3, shape);
    CHECK(t && spk_tensor_numel(t) == 24);
    CHECK(t->strides[0] == 12 && t->strides[1] == 4 && t->strides[2] == 1);
    CHECK(spk_tensor_is_contiguous(t) && spk_tensor_is_host(t));
    int64_t idx[3] = {1, 2, 3};
    CHECK(spk_tensor_get_f64(t, idx) == 0.0);
    char buf[64];
    CHECK(strcmp(spk_shape_string(t, buf, sizeof buf), "[2, 3, 4]") == 0);
    spk_tensor_free(t);

    int64_t neg[2] = {2, -1};
    CHECK(spk_tensor_new(SPK_F32, 2, neg) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "dim 1");
    int64_t huge[3] = {INT64_MAX / 2, 4, 4};
    CHECK(spk_tensor_new(SPK_F32, 3, huge) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "overflow");
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(spk_tensor_new(SPK_F32, 9, nine) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "[0, 8]");

    spk_tensor *f = spk_tensor_full(SPK_I32, 2, shape, 7.0);
    CHECK(f && at2(f, 1, 2) == 7.0);
    spk_tensor_free(f);
    /* an integer dtype takes no fraction and nothing out of its range */
    CHECK(spk_tensor_full(SPK_I32, 2, shape, 7.9) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "full: i32 needs an integer, got 7.9");
    CHECK(spk_tensor_full(SPK_I32, 2, shape, NAN) == NULL);
    CHECK(spk_tensor_full(SPK_I32, 2, shape, 2147483648.0) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "does not fit in i32");
    CHECK(spk_tensor_full(SPK_U64, 2, shape, -1.0) == NULL);
    CHECK(spk_tensor_full_scalar(SPK_I32, 2, shape, spk_scalar_int(INT64_C(1) << 40)) == NULL);
    spk_tensor *umax = spk_tensor_full_scalar(SPK_U64, 2, shape, spk_scalar_int(-1)); /* 2^64 - 1 */
    CHECK(umax && ((uint64_t *)spk_tensor_data(umax))[5] == UINT64_MAX);
    spk_tensor_free(umax);

    spk_tensor *scalar = spk_tensor_full(SPK_F64, 0, NULL, 2.5);
    CHECK(scalar && spk_tensor_numel(scalar) == 1 && spk_tensor_get_f64(scalar, NULL) == 2.5);
    spk_tensor_free(scalar);

    spk_tensor *a = spk_tensor_arange(SPK_F64, 0, 1, 0.3);
    CHECK(a && a->shape[0] == 4);
    CHECK_NEAR(spk_tensor_flat_get(a, 3), 0.9, 1e-12);
    spk_tensor_free(a);
    spk_tensor *down = spk_tensor_arange(SPK_I32, 5, 0, -2);
    CHECK(down && down->shape[0] == 3 && spk_tensor_flat_get(down, 2) == 1.0);
    spk_tensor_free(down);
    CHECK(spk_tensor_arange(SPK_F32, 0, 1, 0) == NULL);
    CHECK(spk_tensor_arange(SPK_F32, 0, NAN, 1) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "finite");
    CHECK(spk_tensor_arange(SPK_I32, 0, 1, 0.25) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "i32 needs an integer start and step");
    CHECK(spk_tensor_arange(SPK_I32, 0, 4e9, 1e9) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "does not fit in i32");
    CHECK(spk_tensor_arange(SPK_U64, -2, 2, 1) == NULL);
}

TEST(views_share_storage)
{
    spk_tensor *t = make_2x3();
    spk_tensor *row = spk_tensor_select(t, 0, 1);
    CHECK(row && row->ndim == 1 && row->shape[0] == 3 && row->offset == 3);
    CHECK(row->storage == t->storage && t->storage->refcount == 2);
    int64_t j = 1;
    spk_tensor_set_f64(row, &j, 50);
    CHECK(at2(t, 1, 1) == 50.0);

    spk_tensor *col = spk_tensor_select(t, 1, 2);
    CHECK(col && col->shape[0] == 2 && col->strides[0] == 3 && col->offset == 2);
    CHECK(spk_tensor_flat_get(col, 0) == 3.0 && spk_tensor_flat_get(col, 1) == 6.0);
    CHECK(!spk_tensor_is_contiguous(col));
    CHECK(spk_tensor_fill(col, -1) == 0);
    CHECK(at2(t, 0, 2) == -1.0 && at2(t, 1, 2) == -1.0 && at2(t, 0, 1) == 2.0);

    spk_tensor_free(row);
    spk_tensor_free(col);
    CHECK(t->storage->refcount == 1);
    spk_tensor_free(t);
}

TEST(narrow_slice_transpose_strides)
{
    int64_t shape[2] = {4, 5};
    spk_tensor *a = spk_tensor_arange(SPK_F64, 0, 20, 1);
    spk_tensor *t = spk_tensor_view(a, 2, shape);
    spk_tensor_free(a);

    spk_tensor *n = spk_tensor_narrow(t, 1, 1, 3);
    CHECK(n && n->shape[0] == 4 && n->shape[1] == 3 && n->offset == 1 && n->strides[0] == 5);
    CHECK(at2(n, 2, 0) == 11.0);
    CHECK(spk_tensor_narrow(t, 1, 3, 3) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "dim 1");
    CHECK_STR_CONTAINS(spk_last_error(), "[0, 2]");
    CHECK(spk_tensor_narrow(t, 2, 0, 1) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "dim 2 is out of range [0, 1]");
    CHECK(spk_tensor_select(t, 0, -1) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "index -1 of dim 0 is out of range [0, 3]");

    /* Python t[:, ::2] and t[::-1, 1:4]. */
    spk_tensor *s = spk_tensor_slice(t, 1, 0, INT64_MAX, 2);
    CHECK(s && s->shape[1] == 3 && s->strides[1] == 2);
    CHECK(at2(s, 1, 2) == 9.0);
    spk_tensor *r = spk_tensor_slice(t, 0, -1, INT64_MIN, -1);
    CHECK(r && r->shape[0] == 4 && r->strides[0] == -5 && r->offset == 15);
    CHECK(at2(r, 0, 0) == 15.0 && at2(r, 3, 4) == 4.0);
    spk_tensor *s2 = spk_tensor_slice(t, 1, -4, -1, 1);
    CHECK(s2 && s2->shape[1] == 3 && at2(s2, 0, 0) == 1.0);
    spk_tensor *empty = spk_tensor_slice(t, 1, 4, 2, 1);
    CHECK(empty && empty->shape[1] == 0 && spk_tensor_numel(empty) == 0);
    CHECK(spk_tensor_slice(t, 1, 0, 5, 0) == NULL);

    spk_tensor *tt = spk_tensor_transpose(t, 0, 1);
    CHECK(tt && tt->shape[0] == 5 && tt->shape[1] == 4 && tt->strides[0] == 1 && tt->strides[1] == 5);
    CHECK(at2(tt, 3, 2) == 13.0);
    CHECK(!spk_tensor_is_contiguous(tt));
    int64_t flat = 20;
    CHECK(spk_tensor_view(tt, 1, &flat) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "view needs contiguous data; call contiguous()");

    spk_tensor *c = spk_tensor_contiguous(tt);
    CHECK(c && spk_tensor_is_contiguous(c) && c->storage != t->storage);
    for (int64_t k = 0; k < 20; k++)
        CHECK(spk_tensor_flat_get(c, k) == (double)((k % 4) * 5 + k / 4));
    spk_tensor *same = spk_tensor_contiguous(t);
    CHECK(same && same->storage == t->storage);

    spk_tensor_free(n);
    spk_tensor_free(s);
    spk_tensor_free(r);
    spk_tensor_free(s2);
    spk_tensor_free(empty);
    spk_tensor_free(tt);
    spk_tensor_free(c);
    spk_tensor_free(same);
    spk_tensor_free(t);
}

TEST(view_inference)
{
    spk_tensor *t = make_2x3();
    int64_t shape[3] = {3, -1, 1};
    spk_tensor *v = spk_tensor_view(t, 3, shape);
    CHECK(v && v->shape[1] == 2 && v->strides[0] == 2);
    int64_t two_infer[2] = {-1, -1};
    CHECK(spk_tensor_view(t, 2, two_infer) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "only one");
    int64_t bad[2] = {4, -1};
    CHECK(spk_tensor_view(t, 2, bad) == NULL);
    int64_t wrong[2] = {4, 2};
    CHECK(spk_tensor_view(t, 2, wrong) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "8 elements");
    spk_tensor_free(v);
    spk_tensor_free(t);
}

TEST(free_base_before_view)
{
    spk_tensor *t = make_2x3();
    spk_tensor *v = spk_tensor_narrow(t, 1, 1, 2);
    spk_tensor_free(t); /* the view keeps the storage alive */
    CHECK(v->storage->refcount == 1);
    CHECK(at2(v, 1, 1) == 6.0);
    spk_tensor_free(v);
}

static int released;
static void count_release(spk_storage *s)
{
    released++;
    free(s->data);
}

TEST(wrapped_storage_released_once)
{
    released = 0;
    spk_storage *s = spk_storage_wrap(calloc(4, sizeof(float)), 4 * sizeof(float), SPK_HOST, count_release, NULL);
    int64_t four = 4;
    spk_tensor *t = spk_tensor_on_storage(s, SPK_F32, 1, &four);
    spk_storage_release(s);
    spk_tensor *v = spk_tensor_narrow(t, 0, 1, 2);
    spk_tensor_free(t);
    CHECK(released == 0);
    spk_tensor_free(v);
    CHECK(released == 1);

    int64_t five = 5;
    spk_storage *small = spk_storage_new_host(16);
    CHECK(spk_tensor_on_storage(small, SPK_F32, 1, &five) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "too small");
    spk_storage_release(small);
}

static void no_release(spk_storage *s) { (void)s; }

TEST(device_tensors_refused)
{
    static float fake[6];
    spk_storage *s = spk_storage_wrap(fake, sizeof fake, 0, no_release, NULL);
    int64_t shape[2] = {2, 3};
    spk_tensor *d = spk_tensor_on_storage(s, SPK_F32, 2, shape);
    spk_storage_release(s);
    CHECK(d && !spk_tensor_is_host(d));
    spk_tensor *view = spk_tensor_transpose(d, 0, 1); /* views work on devices */
    CHECK(view != NULL);
    double out;
    CHECK(spk_tensor_sum(d, &out) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "CUDA device 0");
    CHECK(spk_tensor_clone(d) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "host");
    CHECK(spk_tensor_contiguous(view) == NULL);
    spk_tensor *h = make_2x3();
    CHECK(spk_tensor_add(h, d) == NULL);
    CHECK(spk_tensor_fill(d, 1) == -1);
    spk_tensor_free(h);
    spk_tensor_free(view);
    spk_tensor_free(d);
}

TEST(get_set_and_conversion)
{
    int64_t three = 3;
    spk_tensor *u = spk_tensor_new(SPK_U64, 1, &three);
    int64_t i = 0;
    spk_tensor_set_i64(u, &i, (int64_t)UINT64_C(18446744073709551615));
    CHECK(((uint64_t *)spk_tensor_data(u))[0] == UINT64_MAX);
    i = 1;
    spk_tensor_set_f64(u, &i, -5.0); /* saturates to 0 */
    CHECK(spk_tensor_get_i64(u, &i) == 0);
    i = 3;
    CHECK(isnan(spk_tensor_get_f64(u, &i)));
    CHECK_STR_CONTAINS(spk_last_error(), "index 3 of dim 0 is out of range [0, 2]");

    spk_tensor *f = spk_tensor_to_dtype(u, SPK_F64);
    CHECK(f && f->dtype == SPK_F64 && spk_tensor_flat_get(f, 0) == 18446744073709551616.0);
    spk_tensor_free(f);

    spk_tensor *t = make_2x3();
    spk_tensor *ti = spk_tensor_to_dtype(t, SPK_I32);
    CHECK(ti && ti->dtype == SPK_I32 && at2(ti, 1, 2) == 6.0);
    spk_tensor *tr = spk_tensor_transpose(t, 0, 1);
    int64_t s32[2] = {3, 2};
    spk_tensor *dst = spk_tensor_new(SPK_F64, 2, s32);
    CHECK(spk_tensor_copy(dst, tr) == 0);
    CHECK(at2(dst, 2, 1) == 6.0 && at2(dst, 0, 1) == 4.0);
    CHECK(spk_tensor_copy(dst, t) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "[3, 2] vs [2, 3]");

    spk_tensor *c = spk_tensor_clone(t);
    int64_t idx[2] = {0, 0};
    spk_tensor_set_f64(c, idx, 100);
    CHECK(at2(t, 0, 0) == 1.0 && at2(c, 0, 0) == 100.0);

    int64_t bad = 0;
    CHECK(spk_tensor_index_offset(t, 1, &bad, &bad) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "2 dims");

    spk_tensor_free(c);
    spk_tensor_free(dst);
    spk_tensor_free(tr);
    spk_tensor_free(ti);
    spk_tensor_free(t);
    spk_tensor_free(u);
}

TEST(elementwise_known_values)
{
    spk_tensor *a = make_2x3();
    spk_tensor *b = spk_tensor_transpose(a, 0, 1);
    spk_tensor *bc = spk_tensor_contiguous(b);
    int64_t s23[2] = {2, 3};
    spk_tensor *b23 = spk_tensor_view(bc, 2, s23); /* [[1,4,2],[5,3,6]] */
    spk_tensor *sum = spk_tensor_add(a, b23);
    CHECK(sum && sum->dtype == SPK_F32);
    CHECK(at2(sum, 0, 0) == 2 && at2(sum, 0, 1) == 6 && at2(sum, 1, 0) == 9 && at2(sum, 1, 2) == 12);
    spk_tensor *diff = spk_tensor_sub(a, b23);
    CHECK(at2(diff, 0, 1) == -2 && at2(diff, 1, 1) == 2);
    spk_tensor *a64 = spk_tensor_to_dtype(a, SPK_F64);
    spk_tensor *prod = spk_tensor_mul(b, b); /* strided operands */
    CHECK(prod && at2(prod, 2, 1) == 36 && at2(prod, 1, 0) == 4);
    spk_tensor *mixed = spk_tensor_mul(a, a64);
    CHECK(mixed && mixed->dtype == SPK_F64 && at2(mixed, 1, 0) == 16);
    spk_tensor *sc = spk_tensor_scale(b, -0.5);
    CHECK(sc && at2(sc, 2, 1) == -3.0 && spk_tensor_is_contiguous(sc));
    spk_tensor *ab = spk_tensor_abs(sc);
    CHECK(ab && at2(ab, 2, 1) == 3.0);
    int64_t s3[1] = {3};
    spk_tensor *wrong = spk_tensor_new(SPK_F32, 1, s3);
    spk_tensor *row_added = spk_tensor_add(a, wrong); /* [2, 3] + [3] broadcasts */
    CHECK(row_added && row_added->ndim == 2 && at2(row_added, 1, 2) == 6);
    spk_tensor_free(row_added);
    int64_t s4[1] = {4};
    spk_tensor *four = spk_tensor_new(SPK_F32, 1, s4);
    CHECK(spk_tensor_add(a, four) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "add: shapes [2, 3] and [4] do not broadcast");
    spk_tensor_free(four);

    spk_tensor *ia = spk_tensor_arange(SPK_I32, -3, 3, 1);
    spk_tensor *iab = spk_tensor_abs(ia);
    CHECK(iab->dtype == SPK_I32 && spk_tensor_flat_get(iab, 0) == 3.0 && spk_tensor_flat_get(iab, 5) == 2.0);

    spk_tensor *list[] = {b, bc, b23, sum, diff, a64, prod, mixed, sc, ab, wrong, ia, iab, a};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

TEST(reductions_known_values)
{
    spk_tensor *a = make_2x3();
    double v;
    CHECK(spk_tensor_sum(a, &v) == 0 && v == 21.0);
    CHECK(spk_tensor_mean(a, &v) == 0 && v == 3.5);
    CHECK(spk_tensor_min(a, &v) == 0 && v == 1.0);
    CHECK(spk_tensor_max(a, &v) == 0 && v == 6.0);
    CHECK(spk_tensor_norm(a, &v) == 0);
    CHECK_NEAR(v, sqrt(91.0), 1e-12);
    spk_tensor *col = spk_tensor_select(a, 1, 1); /* {2, 5} strided */
    CHECK(spk_tensor_sum(col, &v) == 0 && v == 7.0);
    CHECK(spk_tensor_norm(col, &v) == 0);
    CHECK_NEAR(v, sqrt(29.0), 1e-12);
    int64_t zero = 0;
    spk_tensor *e = spk_tensor_new(SPK_F64, 1, &zero);
    CHECK(spk_tensor_sum(e, &v) == 0 && v == 0.0);
    CHECK(spk_tensor_mean(e, &v) == -1);
    CHECK(spk_tensor_max(e, &v) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "empty");
    spk_tensor_free(e);
    spk_tensor_free(col);
    spk_tensor_free(a);
}

/* A 1-d tensor of dtype d holding the doubles v[0..n-1]. */
static spk_tensor *vec(spk_dtype d, int64_t n, const double *v)
{
    spk_tensor *t = spk_tensor_new(d, 1, &n);
    for (int64_t i = 0; i < n; i++)
        spk_tensor_set_f64(t, &i, v[i]);
    return t;
}

TEST(promotion_table_and_scalars)
{
    const spk_dtype all[4] = {SPK_F32, SPK_F64, SPK_I32, SPK_U64};
    /* NumPy's np.result_type for these dtypes, row a, column b */
    const spk_dtype want[4][4] = {{SPK_F32, SPK_F64, SPK_F64, SPK_F64},
                                  {SPK_F64, SPK_F64, SPK_F64, SPK_F64},
                                  {SPK_F64, SPK_F64, SPK_I32, SPK_F64},
                                  {SPK_F64, SPK_F64, SPK_F64, SPK_U64}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            CHECK(spk_dtype_promote(all[i], all[j]) == want[i][j]);
            spk_dtype div = spk_binop_dtype(SPK_OP_DIV, all[i], all[j]);
            CHECK(div == (want[i][j] == SPK_F32 ? SPK_F32 : SPK_F64));
            CHECK(spk_binop_dtype(SPK_OP_LT, all[i], all[j]) == SPK_I32);
        }
    spk_dtype d;
    CHECK(spk_scalar_dtype(SPK_I32, spk_scalar_int(3), &d) == 0 && d == SPK_I32);
    CHECK(spk_scalar_dtype(SPK_I32, spk_scalar_float(0.5), &d) == 0 && d == SPK_F64);
    CHECK(spk_scalar_dtype(SPK_F32, spk_scalar_float(0.1), &d) == 0 && d == SPK_F32);
    CHECK(spk_scalar_dtype(SPK_F32, spk_scalar_int(1 << 30), &d) == 0 && d == SPK_F32);
    CHECK(spk_scalar_dtype(SPK_I32, spk_scalar_int(INT64_C(1) << 31), &d) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "2147483648");
    CHECK(spk_scalar_dtype(SPK_U64, spk_scalar_int(-1), &d) == 0 && d == SPK_U64); /* the u64 2^64 - 1 */

    const double one[2] = {1, 1}, q[2] = {0.75, 0.75};
    spk_tensor *i = vec(SPK_I32, 2, one), *f = vec(SPK_F32, 2, q);
    spk_tensor *mixed = spk_tensor_add(i, f); /* was i32 [1, 1] */
    CHECK(mixed && mixed->dtype == SPK_F64 && spk_tensor_flat_get(mixed, 1) == 1.75);
    spk_tensor *half = spk_tensor_scale(i, 0.5); /* was i32 [0, 0] */
    CHECK(half && half->dtype == SPK_F64 && spk_tensor_flat_get(half, 0) == 0.5);
    spk_tensor *third = spk_tensor_div(i, i);
    CHECK(third && third->dtype == SPK_F64);
    spk_tensor *f01 = spk_tensor_binary_scalar(SPK_OP_ADD, f, spk_scalar_float(0.1), false);
    CHECK(f01 && f01->dtype == SPK_F32 && spk_tensor_flat_get(f01, 0) == (double)(0.75f + 0.1f));
    spk_tensor *rsub = spk_tensor_binary_scalar(SPK_OP_SUB, i, spk_scalar_int(10), true); /* 10 - i */
    CHECK(rsub && rsub->dtype == SPK_I32 && spk_tensor_flat_get(rsub, 0) == 9);
    spk_tensor *rdiv = spk_tensor_binary_scalar(SPK_OP_DIV, f, spk_scalar_int(3), true); /* 3 / f */
    CHECK(rdiv && rdiv->dtype == SPK_F32 && spk_tensor_flat_get(rdiv, 0) == (double)(3.0f / 0.75f));
    CHECK(spk_tensor_binary_scalar(SPK_OP_ADD, i, spk_scalar_int(INT64_C(1) << 40), false) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "add: the integer 1099511627776");
    /* comparisons with any integer are exact */
    spk_tensor *big = spk_tensor_binary_scalar(SPK_OP_LT, i, spk_scalar_int(INT64_C(1) << 40), false);
    CHECK(big && big->dtype == SPK_I32 && spk_tensor_flat_get(big, 0) == 1);
    spk_tensor *u = spk_tensor_to_dtype(i, SPK_U64);
    /* beside a u64, an integer is the u64 of its bits: -1 is 2^64 - 1 */
    spk_tensor *gt = spk_tensor_binary_scalar(SPK_OP_GT, u, spk_scalar_int(-1), false);
    CHECK(gt && spk_tensor_flat_get(gt, 0) == 0);
    spk_tensor *list[] = {i, f, mixed, half, third, f01, rsub, rdiv, big, u, gt};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

TEST(integers_wrap_and_compare)
{
    const double v[3] = {2147483647.0, -2147483648.0, 5};
    spk_tensor *i = vec(SPK_I32, 3, v);
    spk_tensor *s = spk_tensor_binary_scalar(SPK_OP_ADD, i, spk_scalar_int(1), false);
    CHECK(s && spk_tensor_flat_get(s, 0) == -2147483648.0 && spk_tensor_flat_get(s, 2) == 6);
    spk_tensor *n = spk_tensor_neg(i);
    CHECK(n && n->dtype == SPK_I32 && spk_tensor_flat_get(n, 1) == -2147483648.0 && spk_tensor_flat_get(n, 2) == -5);
    spk_tensor *u = spk_tensor_full_scalar(SPK_U64, 1, (int64_t[]){2}, spk_scalar_int(1));
    spk_tensor *un = spk_tensor_neg(u);
    CHECK(un && ((uint64_t *)spk_tensor_data(un))[0] == UINT64_MAX);
    const double w[3] = {NAN, 1, 2};
    spk_tensor *f = vec(SPK_F64, 3, w);
    spk_tensor *eq = spk_tensor_binary(SPK_OP_EQ, f, f), *ne = spk_tensor_binary(SPK_OP_NE, f, f);
    CHECK(eq && spk_tensor_flat_get(eq, 0) == 0 && spk_tensor_flat_get(eq, 1) == 1);
    CHECK(ne && spk_tensor_flat_get(ne, 0) == 1 && spk_tensor_flat_get(ne, 2) == 0);
    spk_tensor *list[] = {i, s, n, u, un, f, eq, ne};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

TEST(reductions_over_dims)
{
    spk_tensor *a = make_2x3(); /* [[1, 2, 3], [4, 5, 6]] */
    spk_tensor *s0 = spk_tensor_reduce(a, SPK_RED_SUM, 0, false, 0, NULL);
    CHECK(s0 && s0->ndim == 1 && s0->shape[0] == 3 && spk_tensor_flat_get(s0, 2) == 9);
    spk_tensor *s1 = spk_tensor_reduce(a, SPK_RED_MEAN, 1, true, 0, NULL);
    CHECK(s1 && s1->ndim == 2 && s1->shape[0] == 2 && s1->shape[1] == 1 && at2(s1, 1, 0) == 5);
    spk_tensor *pos = NULL;
    spk_tensor *mx = spk_tensor_reduce(a, SPK_RED_MAX, 1, false, 0, &pos);
    CHECK(mx && pos && pos->dtype == SPK_I32 && spk_tensor_flat_get(mx, 0) == 3 && spk_tensor_flat_get(pos, 1) == 2);
    spk_tensor *am = spk_tensor_reduce(a, SPK_RED_ARGMIN, 0, false, 0, NULL);
    CHECK(am && am->dtype == SPK_I32 && spk_tensor_flat_get(am, 0) == 0);
    spk_tensor *n1 = spk_tensor_reduce(a, SPK_RED_NORM, 0, false, 1, NULL);
    CHECK(n1 && spk_tensor_flat_get(n1, 1) == 7);
    spk_tensor *ninf = spk_tensor_reduce(a, SPK_RED_NORM, 1, false, INFINITY, NULL);
    CHECK(ninf && spk_tensor_flat_get(ninf, 0) == 3 && spk_tensor_flat_get(ninf, 1) == 6);
    spk_tensor *all = spk_tensor_reduce(a, SPK_RED_SUM, SPK_ALL_DIMS, true, 0, NULL);
    CHECK(all && all->ndim == 2 && all->shape[0] == 1 && all->shape[1] == 1 && at2(all, 0, 0) == 21);
    spk_scalar v;
    CHECK(spk_tensor_reduce_value(a, SPK_RED_ARGMAX, 0, &v) == 0 && v.is_integer && v.i == 5);
    CHECK(spk_tensor_reduce_value(a, SPK_RED_NORM, 3, &v) == 0);
    CHECK_NEAR(v.f, pow(441.0, 1.0 / 3.0), 1e-12);
    CHECK(spk_tensor_reduce_value(a, SPK_RED_NORM, 0, &v) == 0 && v.f == 6);
    CHECK(spk_tensor_reduce_value(a, SPK_RED_NORM, -1, &v) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "p = -1 is not supported");
    CHECK(spk_tensor_reduce(a, SPK_RED_SUM, 2, false, 0, NULL) == NULL);
    /* dtypes of the table in tensor.h */
    spk_tensor *ai = spk_tensor_to_dtype(a, SPK_I32);
    spk_tensor *si = spk_tensor_reduce(ai, SPK_RED_SUM, 0, false, 0, NULL);
    spk_tensor *mi = spk_tensor_reduce(ai, SPK_RED_MAX, 0, false, 0, NULL);
    CHECK(si && si->dtype == SPK_F64 && mi && mi->dtype == SPK_I32);
    CHECK(spk_tensor_reduce_value(ai, SPK_RED_SUM, 0, &v) == 0 && v.is_integer && v.i == 21);
    /* empty dims: sum 0, norms 0 (the +Inf one too), mean NaN, max and the -Inf norm errors */
    int64_t s30[2] = {3, 0};
    spk_tensor *e = spk_tensor_new(SPK_F32, 2, s30);
    spk_tensor *es = spk_tensor_reduce(e, SPK_RED_SUM, 1, false, 0, NULL);
    spk_tensor *em = spk_tensor_reduce(e, SPK_RED_MEAN, 1, false, 0, NULL);
    CHECK(es && spk_tensor_flat_get(es, 2) == 0 && em && isnan(spk_tensor_flat_get(em, 0)));
    const double orders[] = {2, 1, 0, 3.5, INFINITY};
    for (size_t k = 0; k < sizeof orders / sizeof *orders; k++) {
        spk_tensor *en = spk_tensor_reduce(e, SPK_RED_NORM, 1, false, orders[k], NULL);
        CHECK(en && en->shape[0] == 3 && spk_tensor_flat_get(en, 1) == 0);
        spk_tensor_free(en);
        spk_scalar whole;
        CHECK(spk_tensor_reduce_value(e, SPK_RED_NORM, orders[k], &whole) == 0 && whole.f == 0);
    }
    CHECK(spk_tensor_reduce(e, SPK_RED_NORM, 1, false, -INFINITY, NULL) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "norm over dim 1, which is empty");
    CHECK(spk_tensor_reduce(e, SPK_RED_MAX, 1, false, 0, NULL) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "max over dim 1, which is empty");
    spk_tensor *e0 = spk_tensor_reduce(e, SPK_RED_MAX, 0, false, 0, NULL); /* [0] groups of 3 */
    CHECK(e0 && e0->shape[0] == 0);
    /* NaN: max propagates it, argmax points at the first one */
    const double w[4] = {1, NAN, 3, NAN};
    spk_tensor *nanv = vec(SPK_F64, 4, w);
    CHECK(spk_tensor_reduce_value(nanv, SPK_RED_MAX, 0, &v) == 0 && isnan(v.f));
    CHECK(spk_tensor_reduce_value(nanv, SPK_RED_ARGMAX, 0, &v) == 0 && v.i == 1);
    spk_tensor *list[] = {s0, s1, pos, mx, am, n1, ninf, all, ai, si, mi, e, es, em, e0, nanv, a};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

TEST(view_arithmetic_is_checked)
{
    spk_tensor *r = spk_tensor_arange(SPK_F32, 0, 24, 1);
    int64_t s[3] = {2, 3, 4};
    spk_tensor *t = spk_tensor_view(r, 3, s);
    /* a step beyond the tensor keeps one element; its stride is never formed */
    spk_tensor *one = spk_tensor_slice(t, 0, 0, 2, INT64_MAX);
    CHECK(one && one->shape[0] == 1 && one->strides[0] == 12);
    spk_tensor *again = spk_tensor_slice(one, 1, 0, 3, INT64_MAX - 1);
    CHECK(again && again->shape[1] == 1);
    /* offsets that int64 cannot hold are errors, not wrapped values */
    spk_tensor fake = *t;
    fake.strides[0] = INT64_MAX / 2 + 1;
    fake.shape[0] = 3;
    CHECK(spk_tensor_select(&fake, 0, 2) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "overflows int64");
    CHECK(spk_tensor_slice(&fake, 0, 0, 3, 2) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "overflows int64");
    spk_tensor_free(again);
    spk_tensor_free(one);
    spk_tensor_free(t);
    spk_tensor_free(r);
}

TEST(assign_broadcasts_and_handles_overlap)
{
    spk_tensor *a = make_2x3();
    const double row[3] = {7, 8, 9};
    spk_tensor *r = vec(SPK_F64, 3, row);
    CHECK(spk_tensor_assign(a, r) == 0 && at2(a, 1, 2) == 9 && at2(a, 0, 0) == 7);
    spk_tensor *shifted_src = spk_tensor_narrow(a, 1, 0, 2), *shifted_dst = spk_tensor_narrow(a, 1, 1, 2);
    spk_tensor_set_f64(a, (int64_t[]){0, 0}, 1);
    spk_tensor_set_f64(a, (int64_t[]){0, 1}, 2);
    spk_tensor_set_f64(a, (int64_t[]){0, 2}, 3);
    CHECK(spk_tensor_assign(shifted_dst, shifted_src) == 0); /* a[:, 1:] = a[:, :2] */
    CHECK(at2(a, 0, 0) == 1 && at2(a, 0, 1) == 1 && at2(a, 0, 2) == 2);
    int64_t two = 2;
    spk_tensor *bad = spk_tensor_new(SPK_F32, 1, &two);
    CHECK(spk_tensor_assign(a, bad) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "does not broadcast to [2, 3]");
    spk_tensor *list[] = {a, r, shifted_src, shifted_dst, bad};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

TEST(format_small_and_special)
{
    spk_tensor *a = make_2x3();
    char *s = spk_tensor_format(a, 1000, 3);
    CHECK(s && strcmp(s, "tensor(f32, [2, 3])\n[[1, 2, 3],\n [4, 5, 6]]") == 0);
    free(s);
    spk_tensor *half = spk_tensor_scale(a, 0.5);
    s = spk_tensor_format(half, 1000, 3);
    CHECK_STR_CONTAINS(s, "[[0.5, 1, 1.5],");
    free(s);
    spk_tensor *scalar = spk_tensor_full(SPK_F64, 0, NULL, -2.25);
    s = spk_tensor_format(scalar, 1000, 3);
    CHECK(s && strcmp(s, "tensor(f64, [])\n-2.25") == 0);
    free(s);
    int64_t shape[2] = {0, 4};
    spk_tensor *e = spk_tensor_new(SPK_I32, 2, shape);
    s = spk_tensor_format(e, 1000, 3);
    CHECK(s && strcmp(s, "tensor(i32, [0, 4])\n[]") == 0);
    free(s);
    int64_t s3[3] = {2, 1, 2};
    spk_tensor *three = spk_tensor_full(SPK_U64, 3, s3, 7);
    s = spk_tensor_format(three, 1000, 3);
    CHECK(s && strcmp(s, "tensor(u64, [2, 1, 2])\n[[[7, 7]],\n\n [[7, 7]]]") == 0);
    free(s);
    spk_tensor_free(three);
    spk_tensor_free(e);
    spk_tensor_free(scalar);
    spk_tensor_free(half);
    spk_tensor_free(a);
}

TEST(format_summarises_large)
{
    spk_tensor *r = spk_tensor_arange(SPK_I32, 0, 100, 1);
    char *s = spk_tensor_format(r, 50, 2);
    CHECK(s && strcmp(s, "tensor(i32, [100])\n[0, 1, ..., 98, 99]") == 0);
    free(s);
    s = spk_tensor_format(r, 1000, 2); /* under the threshold: everything */
    CHECK_STR_CONTAINS(s, "48, 49, 50");
    free(s);
    int64_t shape[2] = {10, 10};
    spk_tensor *m = spk_tensor_view(r, 2, shape);
    s = spk_tensor_format(m, 50, 1);
    CHECK(s && strcmp(s, "tensor(i32, [10, 10])\n[[0, ..., 9],\n ...,\n [90, ..., 99]]") == 0);
    free(s);
    spk_tensor_free(m);
    spk_tensor_free(r);
}

int main(void)
{
    RUN(dtype_names_and_sizes);
    RUN(creation_and_shape_checks);
    RUN(views_share_storage);
    RUN(narrow_slice_transpose_strides);
    RUN(view_inference);
    RUN(free_base_before_view);
    RUN(wrapped_storage_released_once);
    RUN(device_tensors_refused);
    RUN(get_set_and_conversion);
    RUN(elementwise_known_values);
    RUN(reductions_known_values);
    RUN(promotion_table_and_scalars);
    RUN(integers_wrap_and_compare);
    RUN(reductions_over_dims);
    RUN(view_arithmetic_is_checked);
    RUN(assign_broadcasts_and_handles_overlap);
    RUN(format_small_and_special);
    RUN(format_summarises_large);
    return CHECK_SUMMARY();
}
