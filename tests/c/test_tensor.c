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

    spk_tensor *f = spk_tensor_full(SPK_I32, 2, shape, 7.9);
    CHECK(f && at2(f, 1, 2) == 7.0);
    spk_tensor_free(f);

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
    CHECK(spk_tensor_add(a, wrong) == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "shapes differ");

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
    RUN(format_small_and_special);
    RUN(format_summarises_large);
    return CHECK_SUMMARY();
}
