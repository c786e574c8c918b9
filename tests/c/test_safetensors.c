#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/safetensors.h"

static char dir[256];

static char *path_in_dir(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

/* Writes a file: 8-byte length (claimed), header text, data bytes. */
static char *write_st(const char *name, uint64_t claimed, const char *header, const void *data, size_t data_len)
{
    char *p = path_in_dir(name);
    FILE *f = fopen(p, "wb");
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(claimed >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    if (data_len)
        fwrite(data, 1, data_len, f);
    fclose(f);
    return p;
}

static int load_hdr(const char *name, const char *header, const void *data, size_t data_len, spk_tensor_list *out)
{
    return spk_safetensors_load(write_st(name, strlen(header), header, data, data_len), out);
}

#define CHECK_REFUSED(rc, list, name, problem)                   \
    do {                                                         \
        CHECK((rc) == -1);                                       \
        CHECK((list).count == 0 && (list).items == NULL);        \
        CHECK_STR_CONTAINS(spk_last_error(), path_in_dir(name)); \
        CHECK_STR_CONTAINS(spk_last_error(), problem);           \
    } while (0)

static const spk_tensor *find(const spk_tensor_list *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].name, name) == 0)
            return l->items[i].tensor;
    return NULL;
}

TEST(round_trip_all_dtypes)
{
    int64_t s23[2] = {2, 3};
    spk_tensor *f32 = spk_tensor_arange(SPK_F32, 0, 6, 1);
    spk_tensor *m = spk_tensor_view(f32, 2, s23);
    spk_tensor *mt = spk_tensor_transpose(m, 0, 1); /* written in its row-major order */
    spk_tensor *f64 = spk_tensor_arange(SPK_F64, -1, 1, 0.25);
    spk_tensor *i32 = spk_tensor_arange(SPK_I32, -5, 5, 3);
    int64_t two = 2;
    spk_tensor *u64 = spk_tensor_new(SPK_U64, 1, &two);
    ((uint64_t *)spk_tensor_data(u64))[0] = UINT64_MAX;
    ((uint64_t *)spk_tensor_data(u64))[1] = 12345;
    spk_tensor *scalar = spk_tensor_full(SPK_F64, 0, NULL, 3.25);
    int64_t e[2] = {0, 4};
    spk_tensor *empty = spk_tensor_new(SPK_F32, 2, e);

    spk_named_tensor items[] = {{"zeta", mt}, {"alpha.weight", f64}, {"mid", i32},
                                {"big", u64}, {"scalar", scalar}, {"empty", empty}};
    spk_tensor_list list = {6, items};
    CHECK(spk_safetensors_save(path_in_dir("rt.safetensors"), &list) == 0);

    spk_tensor_list back = {0};
    CHECK(spk_safetensors_load(path_in_dir("rt.safetensors"), &back) == 0);
    CHECK(back.count == 6);
    /* File order is sorted by name. */
    const char *sorted[6] = {"alpha.weight", "big", "empty", "mid", "scalar", "zeta"};
    for (size_t i = 0; i < back.count && i < 6; i++)
        CHECK(strcmp(back.items[i].name, sorted[i]) == 0);
    const spk_tensor *z = find(&back, "zeta");
    CHECK(z && z->dtype == SPK_F32 && z->shape[0] == 3 && z->shape[1] == 2);
    for (int64_t i = 0; z && i < 6; i++)
        CHECK(spk_tensor_flat_get(z, i) == spk_tensor_flat_get(mt, i));
    const spk_tensor *a = find(&back, "alpha.weight");
    CHECK(a && a->dtype == SPK_F64 && a->shape[0] == 8 && spk_tensor_flat_get(a, 7) == 0.75);
    const spk_tensor *mi = find(&back, "mid");
    CHECK(mi && mi->dtype == SPK_I32 && mi->shape[0] == 4 && spk_tensor_flat_get(mi, 3) == 4);
    const spk_tensor *b = find(&back, "big");
    CHECK(b && b->dtype == SPK_U64 && ((uint64_t *)spk_tensor_data(b))[0] == UINT64_MAX &&
          ((uint64_t *)spk_tensor_data(b))[1] == 12345);
    const spk_tensor *s = find(&back, "scalar");
    CHECK(s && s->ndim == 0 && spk_tensor_get_f64(s, NULL) == 3.25);
    const spk_tensor *em = find(&back, "empty");
    CHECK(em && em->ndim == 2 && em->shape[0] == 0 && em->shape[1] == 4);
    spk_tensor_list_free(&back);
    CHECK(back.count == 0 && back.items == NULL);

    spk_tensor *all[] = {f32, m, mt, f64, i32, u64, scalar, empty};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        spk_tensor_free(all[i]);
}

TEST(saved_layout_matches_reference)
{
    int64_t two = 2;
    spk_tensor *b = spk_tensor_full(SPK_F32, 1, &two, 1.5);
    spk_tensor *a = spk_tensor_full(SPK_I32, 1, &two, 7);
    spk_named_tensor items[] = {{"b", b}, {"a\"q", a}};
    spk_tensor_list list = {2, items};
    CHECK(spk_safetensors_save(path_in_dir("layout.safetensors"), &list) == 0);
    uint8_t buf[512];
    FILE *f = fopen(path_in_dir("layout.safetensors"), "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const char *json = "{\"a\\\"q\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)buf[i] << (8 * i);
    CHECK(hlen == padded && hlen % 8 == 0);
    CHECK(memcmp(buf + 8, json, jl) == 0);
    for (size_t i = jl; i < padded; i++)
        CHECK(buf[8 + i] == ' ');
    CHECK(n == 8 + padded + 16);
    int32_t i0;
    float f1;
    memcpy(&i0, buf + 8 + padded, 4);
    memcpy(&f1, buf + 8 + padded + 12, 4);
    CHECK(i0 == 7 && f1 == 1.5f);
    spk_tensor_free(a);
    spk_tensor_free(b);

    spk_tensor_list none = {0, NULL};
    CHECK(spk_safetensors_save(path_in_dir("none.safetensors"), &none) == 0);
    spk_tensor_list back = {0};
    CHECK(spk_safetensors_load(path_in_dir("none.safetensors"), &back) == 0 && back.count == 0);
}

TEST(reads_hand_written_headers)
{
    float data[4] = {1, 2, 3, 4};
    spk_tensor_list l = {0};
    const char *h = "  {\"__metadata__\": {\"format\": \"pt\", \"note\": \"a\\\"b\"},\n"
                    "  \"caf\\u00e9 \\ud83d\\ude00\\n\" : { \"shape\" : [ 2 ] , \"dtype\":\"F32\", \"data_offsets\":[8, 16]},\n"
                    "  \"first\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]} }   ";
    CHECK(load_hdr("hand.safetensors", h, data, sizeof data, &l) == 0);
    CHECK(l.count == 2);
    if (l.count == 2) {
        CHECK(strcmp(l.items[0].name, "caf\xc3\xa9 \xf0\x9f\x98\x80\n") == 0); /* header order kept */
        CHECK(spk_tensor_flat_get(l.items[0].tensor, 0) == 3);
        CHECK(strcmp(l.items[1].name, "first") == 0 && spk_tensor_flat_get(l.items[1].tensor, 1) == 2);
    }
    spk_tensor_list_free(&l);

    /* In-memory parsing names the given name. */
    uint8_t buf[128];
    const char *mh = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t hl = strlen(mh);
    memset(buf, 0, 8);
    buf[0] = (uint8_t)hl;
    memcpy(buf + 8, mh, hl);
    memcpy(buf + 8 + hl, data, 4);
    CHECK(spk_safetensors_parse(buf, 8 + hl + 4, "mem", &l) == 0 && l.count == 1);
    spk_tensor_list_free(&l);
    CHECK(spk_safetensors_parse(buf, 8 + hl + 3, "mem", &l) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "mem: tensor 'x': data_offsets [0, 4] lie outside the data section (3 bytes)");
}

TEST(malformed_files_refused)
{
    double data[8] = {0};
    spk_tensor_list l = {0};
    int rc;

    char *p = path_in_dir("short.safetensors");
    FILE *f = fopen(p, "wb");
    fwrite("\x05\0\0", 1, 3, f);
    fclose(f);
    rc = spk_safetensors_load(p, &l);
    CHECK_REFUSED(rc, l, "short.safetensors", "too short for a safetensors file (3 bytes)");

    rc = spk_safetensors_load(write_st("past_end.safetensors", 1000, "{}", NULL, 0), &l);
    CHECK_REFUSED(rc, l, "past_end.safetensors", "header length 1000 runs past the end of the file (10 bytes)");

    rc = spk_safetensors_load(write_st("huge_header.safetensors", 200000000, "{}", NULL, 0), &l);
    CHECK_REFUSED(rc, l, "huge_header.safetensors", "header length 200000000 exceeds the 100 MB limit");

    rc = spk_safetensors_load(write_st("lenmax.safetensors", UINT64_MAX, "{}", NULL, 0), &l);
    CHECK_REFUSED(rc, l, "lenmax.safetensors", "exceeds the 100 MB limit");

    rc = load_hdr("array.safetensors", "[1, 2]", NULL, 0, &l);
    CHECK_REFUSED(rc, l, "array.safetensors", "header is not a JSON object");

    struct {
        const char *file, *header, *problem;
    } cases[] = {
        {"unterminated.st", "{\"a\": {\"dtype\": \"F32", "unterminated string"},
        {"trailing_comma.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},}", "expected a string"},
        {"missing_colon.st", "{\"a\" {\"dtype\":\"F64\"}}", "expected ':'"},
        {"bad_escape.st", "{\"a\\x\":{}}", "bad escape in string"},
        {"lone_surrogate.st", "{\"\\ud800x\":{}}", "unpaired surrogate"},
        {"nul_escape.st", "{\"a\\u0000\":{}}", "NUL character"},
        {"bf16.st", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
         "tensor 'w' has unsupported dtype 'BF16'"},
        {"no_offsets.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1]}}", "tensor 'w' is missing 'data_offsets'"},
        {"no_dtype.st", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,8]}}", "tensor 'w' is missing 'dtype'"},
        {"extra_key.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8],\"x\":[]}}",
         "tensor 'w' has an unexpected key 'x'"},
        {"repeat_key.st", "{\"w\":{\"dtype\":\"F64\",\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
         "tensor 'w' repeats the key 'dtype'"},
        {"three_offsets.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8,16]}}",
         "data_offsets has more than 2 entries"},
        {"one_offset.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0]}}",
         "data_offsets must hold 2 integers"},
        {"negative.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}",
         "expected a non-negative integer"},
        {"fraction.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1.0],\"data_offsets\":[0,8]}}", "not a fraction"},
        {"leading_zero.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[01],\"data_offsets\":[0,8]}}", "leading zero"},
        {"huge_int.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}",
         "integer too large"},
        {"nine_dims.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,8]}}",
         "shape has more than 8 entries"},
        {"outside.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[9],\"data_offsets\":[0,72]}}",
         "tensor 'w': data_offsets [0, 72] lie outside the data section (64 bytes)"},
        {"reversed.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[16,8]}}", "end before they begin"},
        {"size_lie.st", "{\"w\":{\"dtype\":\"F64\",\"shape\":[2,3],\"data_offsets\":[0,40]}}",
         "tensor 'w': shape [2, 3] of f64 needs 48 bytes but data_offsets [0, 40] span 40"},
        {"lying_shape.st", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1099511627776],\"data_offsets\":[0,4398046511104]}}",
         "lie outside the data section"},
        {"overflow_shape.st",
         "{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", "shape is too large"},
        {"overlap.st",
         "{\"a\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[0,32]},"
         "\"b\":{\"dtype\":\"F64\",\"shape\":[4],\"data_offsets\":[24,56]}}",
         "tensors 'a' and 'b' overlap"},
        {"duplicate.st",
         "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]}}",
         "tensor 'a' appears twice"},
        {"meta_number.st", "{\"__metadata__\":{\"n\":1}}", "__metadata__ values must be strings"},
        {"after.st", "{} {}", "text after the JSON object"},
        {"not_tensor_object.st", "{\"w\": [1]}", "expected '{'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rc = load_hdr(cases[i].file, cases[i].header, data, sizeof data, &l);
        CHECK_REFUSED(rc, l, cases[i].file, cases[i].problem);
        if (rc != -1 || !strstr(spk_last_error(), cases[i].problem))
            fprintf(stderr, "  case %s: %s\n", cases[i].file, spk_last_error());
    }

    /* A failure after some tensors were read leaves nothing behind. */
    const char *half = "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[8,9]}}";
    rc = load_hdr("half.st", half, data, sizeof data, &l);
    CHECK_REFUSED(rc, l, "half.st", "'U8'");

    rc = spk_safetensors_load(path_in_dir("missing.safetensors"), &l);
    CHECK_REFUSED(rc, l, "missing.safetensors", "cannot open");
}

TEST(save_refuses_bad_lists)
{
    int64_t one = 1;
    spk_tensor *t = spk_tensor_new(SPK_F32, 1, &one);
    spk_named_tensor dup[] = {{"x", t}, {"x", t}};
    spk_tensor_list l = {2, dup};
    CHECK(spk_safetensors_save(path_in_dir("dup.safetensors"), &l) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "'x' appears twice");
    spk_named_tensor meta[] = {{"__metadata__", t}};
    spk_tensor_list lm = {1, meta};
    CHECK(spk_safetensors_save(path_in_dir("meta.safetensors"), &lm) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "reserved");
    static float fake[1];
    spk_storage *s = spk_storage_wrap(fake, sizeof fake, 0, NULL, NULL);
    spk_tensor *d = spk_tensor_on_storage(s, SPK_F32, 1, &one);
    spk_storage_release(s);
    spk_named_tensor dev[] = {{"gpu", d}};
    spk_tensor_list ld = {1, dev};
    CHECK(spk_safetensors_save(path_in_dir("dev.safetensors"), &ld) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "tensor 'gpu' is on CUDA device 0");
    spk_tensor_free(d);
    spk_tensor_free(t);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", check_scratch_dir("test-safetensors"));
    RUN(round_trip_all_dtypes);
    RUN(saved_layout_matches_reference);
    RUN(reads_hand_written_headers);
    RUN(malformed_files_refused);
    RUN(save_refuses_bad_lists);
    return CHECK_SUMMARY();
}
