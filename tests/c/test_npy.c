#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "core/error.h"
#include "core/npy.h"

/* NumPy for the cross-checks: Debian's python3-numpy (installed by
 * `make setup`) serves /usr/bin/python3; SPK_PYTHON overrides. */
static const char *python(void)
{
    const char *p = getenv("SPK_PYTHON");
    return p && *p ? p : "/usr/bin/python3";
}

static char dir[256];

static char *path_in_dir(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
}

/* Builds a .npy image by hand: magic, version, header length (as written,
 * possibly lying), header text and `data_len` bytes of data. */
static size_t build_npy(uint8_t *out, int major, int minor, const char *header, uint32_t claimed_len,
                        const void *data, size_t data_len)
{
    size_t n = 0;
    memcpy(out, "\x93NUMPY", 6);
    n = 6;
    out[n++] = (uint8_t)major;
    out[n++] = (uint8_t)minor;
    int len_bytes = major == 1 ? 2 : 4;
    for (int i = 0; i < len_bytes; i++)
        out[n++] = (uint8_t)(claimed_len >> (8 * i));
    memcpy(out + n, header, strlen(header));
    n += strlen(header);
    if (data_len)
        memcpy(out + n, data, data_len);
    return n + data_len;
}

static spk_tensor *load_built(const char *name, int major, const char *header, const void *data, size_t data_len)
{
    static uint8_t buf[1 << 17];
    size_t n = build_npy(buf, major, 0, header, (uint32_t)strlen(header), data, data_len);
    char *p = path_in_dir(name);
    write_bytes(p, buf, n);
    return spk_npy_load(p);
}

/* Expects loading `name` to fail with a message naming the file and `problem`. */
#define CHECK_REFUSED(t, name, problem)                          \
    do {                                                         \
        CHECK((t) == NULL);                                      \
        CHECK_STR_CONTAINS(spk_last_error(), path_in_dir(name)); \
        CHECK_STR_CONTAINS(spk_last_error(), problem);           \
    } while (0)

static double at(const spk_tensor *t, int64_t i, int64_t j)
{
    int64_t idx[2] = {i, j};
    return spk_tensor_get_f64(t, idx);
}

TEST(round_trip_all_dtypes)
{
    spk_dtype dtypes[] = {SPK_F32, SPK_F64, SPK_I32, SPK_U64};
    for (int k = 0; k < 4; k++) {
        int64_t shape[3] = {2, 3, 4};
        spk_tensor *base = spk_tensor_arange(dtypes[k], 0, 24, 1);
        spk_tensor *t = spk_tensor_view(base, 3, shape);
        spk_tensor *scaled = dtypes[k] == SPK_F32 || dtypes[k] == SPK_F64 ? spk_tensor_scale(t, 0.25) : spk_tensor_clone(t);
        char name[32];
        snprintf(name, sizeof name, "rt_%s.npy", spk_dtype_name(dtypes[k]));
        CHECK(spk_npy_save(path_in_dir(name), scaled) == 0);
        spk_tensor *back = spk_npy_load(path_in_dir(name));
        CHECK(back && back->dtype == dtypes[k] && spk_tensor_same_shape(back, scaled));
        for (int64_t i = 0; back && i < 24; i++)
            CHECK(spk_tensor_flat_get(back, i) == spk_tensor_flat_get(scaled, i));
        spk_tensor_free(back);
        spk_tensor_free(scaled);
        spk_tensor_free(t);
        spk_tensor_free(base);
    }
    /* u64 beyond 2^53 and i32 negatives survive exactly. */
    int64_t two = 2;
    spk_tensor *u = spk_tensor_new(SPK_U64, 1, &two);
    ((uint64_t *)spk_tensor_data(u))[1] = UINT64_MAX - 6;
    CHECK(spk_npy_save(path_in_dir("big.npy"), u) == 0);
    spk_tensor *ub = spk_npy_load(path_in_dir("big.npy"));
    CHECK(ub && ((uint64_t *)spk_tensor_data(ub))[1] == UINT64_MAX - 6);
    spk_tensor_free(ub);
    spk_tensor_free(u);
}

TEST(round_trip_special_shapes)
{
    spk_tensor *scalar = spk_tensor_full(SPK_F64, 0, NULL, -7.5);
    CHECK(spk_npy_save(path_in_dir("scalar.npy"), scalar) == 0);
    spk_tensor *s = spk_npy_load(path_in_dir("scalar.npy"));
    CHECK(s && s->ndim == 0 && spk_tensor_get_f64(s, NULL) == -7.5);
    spk_tensor_free(s);
    spk_tensor_free(scalar);

    int64_t shape[3] = {3, 0, 2};
    spk_tensor *e = spk_tensor_new(SPK_I32, 3, shape);
    CHECK(spk_npy_save(path_in_dir("empty.npy"), e) == 0);
    spk_tensor *eb = spk_npy_load(path_in_dir("empty.npy"));
    CHECK(eb && eb->ndim == 3 && eb->shape[0] == 3 && eb->shape[1] == 0 && eb->shape[2] == 2);
    spk_tensor_free(eb);
    spk_tensor_free(e);

    /* A transposed view is written in its own row-major order. */
    int64_t s23[2] = {2, 3};
    spk_tensor *base = spk_tensor_arange(SPK_F32, 1, 7, 1);
    spk_tensor *m = spk_tensor_view(base, 2, s23);
    spk_tensor *mt = spk_tensor_transpose(m, 0, 1);
    CHECK(spk_npy_save(path_in_dir("transposed.npy"), mt) == 0);
    spk_tensor *tb = spk_npy_load(path_in_dir("transposed.npy"));
    CHECK(tb && tb->shape[0] == 3 && tb->shape[1] == 2);
    CHECK(tb && spk_tensor_flat_get(tb, 0) == 1 && spk_tensor_flat_get(tb, 1) == 4 && spk_tensor_flat_get(tb, 2) == 2);
    spk_tensor_free(tb);
    spk_tensor_free(mt);
    spk_tensor_free(m);
    spk_tensor_free(base);
}

TEST(saved_header_layout)
{
    int64_t three = 3;
    spk_tensor *t = spk_tensor_new(SPK_F32, 1, &three);
    CHECK(spk_npy_save(path_in_dir("layout.npy"), t) == 0);
    spk_tensor_free(t);
    uint8_t buf[256];
    FILE *f = fopen(path_in_dir("layout.npy"), "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    /* 10 + 57 + 1 bytes, padded to the next multiple of 64 */
    CHECK(n == 128 + 12);
    CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = buf[8] | (size_t)buf[9] << 8;
    CHECK(10 + hlen == 128);
    CHECK(buf[127] == '\n' && buf[126] == ' ');
    const char *expect = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    CHECK(memcmp(buf + 10, expect, strlen(expect)) == 0);
}

TEST(reads_v2_v3_and_fortran_by_hand)
{
    double d[6] = {1, 2, 3, 4, 5, 6};
    spk_tensor *t = load_built("v2.npy", 2, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3)}\n", d, sizeof d);
    CHECK(t && t->dtype == SPK_F64 && at(t, 1, 0) == 4);
    spk_tensor_free(t);
    t = load_built("v3.npy", 3, "{\"descr\": \"<f8\", \"shape\": (3, 2), \"fortran_order\": False,}", d, sizeof d);
    CHECK(t && at(t, 2, 1) == 6);
    spk_tensor_free(t);
    /* Fortran order: column-major data 1..6 for shape (2, 3) is [[1, 3, 5], [2, 4, 6]]. */
    t = load_built("fortran.npy", 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", d, sizeof d);
    CHECK(t && spk_tensor_is_contiguous(t) && at(t, 0, 1) == 3 && at(t, 1, 0) == 2 && at(t, 1, 2) == 6);
    spk_tensor_free(t);
    int32_t i3[24];
    for (int i = 0; i < 24; i++)
        i3[i] = i;
    t = load_built("fortran3.npy", 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", i3, sizeof i3);
    /* element [a][b][c] sits at a + 2b + 6c in the file */
    int64_t idx[3] = {1, 2, 3};
    CHECK(t && spk_tensor_get_i64(t, idx) == 1 + 4 + 18);
    spk_tensor_free(t);
    t = load_built("native.npy", 1, "{'descr': '=i4', 'fortran_order': False, 'shape': (), }", i3 + 5, 4);
    CHECK(t && t->ndim == 0 && spk_tensor_get_i64(t, NULL) == 5);
    spk_tensor_free(t);

    /* In-memory parsing names the given name. */
    uint8_t buf[256];
    size_t n = build_npy(buf, 1, 0, "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", 57, d, 8);
    t = spk_npy_parse(buf, n, "mem");
    CHECK(t && t->dtype == SPK_U64);
    spk_tensor_free(t);
    t = spk_npy_parse(buf, n - 1, "mem");
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "mem: data is truncated");
}

TEST(malformed_files_refused)
{
    float data[6] = {0};
    static uint8_t buf[200000];
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    spk_tensor *t;

    write_bytes(path_in_dir("empty_file.npy"), "", 0);
    t = spk_npy_load(path_in_dir("empty_file.npy"));
    CHECK_REFUSED(t, "empty_file.npy", "bad magic");

    write_bytes(path_in_dir("magic.npy"), "\x93NUMPZ\x01\x00\x10\x00", 10);
    t = spk_npy_load(path_in_dir("magic.npy"));
    CHECK_REFUSED(t, "magic.npy", "bad magic");

    write_bytes(path_in_dir("short.npy"), "\x93NUMPY\x02\x00\x10", 9);
    t = spk_npy_load(path_in_dir("short.npy"));
    CHECK_REFUSED(t, "short.npy", "truncated .npy preamble");

    size_t n = build_npy(buf, 4, 0, good, (uint32_t)strlen(good), data, sizeof data);
    write_bytes(path_in_dir("version4.npy"), buf, n);
    t = spk_npy_load(path_in_dir("version4.npy"));
    CHECK_REFUSED(t, "version4.npy", "unknown .npy format version 4.0");

    n = build_npy(buf, 1, 1, good, (uint32_t)strlen(good), data, sizeof data);
    write_bytes(path_in_dir("version11.npy"), buf, n);
    t = spk_npy_load(path_in_dir("version11.npy"));
    CHECK_REFUSED(t, "version11.npy", "version 1.1");

    n = build_npy(buf, 1, 0, good, 5000, data, sizeof data);
    write_bytes(path_in_dir("hlen_past_end.npy"), buf, n);
    t = spk_npy_load(path_in_dir("hlen_past_end.npy"));
    CHECK_REFUSED(t, "hlen_past_end.npy", "header length 5000 runs past the end of the file");

    /* A 70000-byte header in a file long enough to hold it. */
    memset(buf, ' ', sizeof buf);
    n = build_npy(buf, 2, 0, good, 70000, NULL, 0);
    write_bytes(path_in_dir("huge_header.npy"), buf, 12 + 70000 + 24);
    t = spk_npy_load(path_in_dir("huge_header.npy"));
    CHECK_REFUSED(t, "huge_header.npy", "exceeds the 65536-byte limit");
    (void)n;

    t = load_built("not_dict.npy", 1, "[('descr', '<f4')]", data, sizeof data);
    CHECK_REFUSED(t, "not_dict.npy", "header is not a dict");

    t = load_built("no_shape.npy", 1, "{'descr': '<f4', 'fortran_order': False}", data, sizeof data);
    CHECK_REFUSED(t, "no_shape.npy", "missing the key 'shape'");

    t = load_built("no_descr.npy", 1, "{'fortran_order': False, 'shape': (6,)}", data, sizeof data);
    CHECK_REFUSED(t, "no_descr.npy", "missing the key 'descr'");

    t = load_built("extra_key.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data, sizeof data);
    CHECK_REFUSED(t, "extra_key.npy", "unexpected key 'x'");

    t = load_built("repeat_key.npy", 1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data, sizeof data);
    CHECK_REFUSED(t, "repeat_key.npy", "repeats the key 'descr'");

    t = load_built("unclosed.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", data, sizeof data);
    CHECK_REFUSED(t, "unclosed.npy", "expected ',' or '}'");

    t = load_built("after_dict.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", data, sizeof data);
    CHECK_REFUSED(t, "after_dict.npy", "text after the dict");

    t = load_built("f16.npy", 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (12,), }", data, sizeof data);
    CHECK_REFUSED(t, "f16.npy", "unknown dtype '<f2'");

    t = load_built("bigendian.npy", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", data, sizeof data);
    CHECK_REFUSED(t, "bigendian.npy", "big-endian dtype '>f4' is not supported");

    t = load_built("structured.npy", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", data, sizeof data);
    CHECK_REFUSED(t, "structured.npy", "structured dtypes");

    t = load_built("order.npy", 1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (6,), }", data, sizeof data);
    CHECK_REFUSED(t, "order.npy", "'fortran_order' must be True or False");

    t = load_built("neg_shape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", data, sizeof data);
    CHECK_REFUSED(t, "neg_shape.npy", "non-negative integers");

    t = load_built("list_shape.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [6], }", data, sizeof data);
    CHECK_REFUSED(t, "list_shape.npy", "'shape' must be a tuple");

    t = load_built("nine_dims.npy", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,6), }", data, sizeof data);
    CHECK_REFUSED(t, "nine_dims.npy", "more than 8 dims");

    t = load_built("truncated.npy", 1, good, data, sizeof data - 1);
    CHECK_REFUSED(t, "truncated.npy", "data is truncated: shape [2, 3] of f32 needs 24 bytes but the file holds 23");

    uint8_t more[30] = {0};
    t = load_built("trailing.npy", 1, good, more, sizeof more);
    CHECK_REFUSED(t, "trailing.npy", "6 trailing bytes after the data");

    /* A lying shape promising a terabyte: refused before any allocation. */
    t = load_built("lying.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (131072, 1048576), }", data, sizeof data);
    CHECK_REFUSED(t, "lying.npy", "needs 1099511627776 bytes but the file holds 24");

    t = load_built("overflow.npy", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", data, sizeof data);
    CHECK_REFUSED(t, "overflow.npy", "too large");

    t = spk_npy_load(path_in_dir("does_not_exist.npy"));
    CHECK_REFUSED(t, "does_not_exist.npy", "cannot open");

    t = spk_npy_load(dir);
    CHECK(t == NULL);
    CHECK_STR_CONTAINS(spk_last_error(), "not a regular file");
}

TEST(save_refuses_device_and_bad_path)
{
    static float fake[4];
    spk_storage *s = spk_storage_wrap(fake, sizeof fake, 0, NULL, NULL);
    int64_t four = 4;
    spk_tensor *d = spk_tensor_on_storage(s, SPK_F32, 1, &four);
    spk_storage_release(s);
    CHECK(spk_npy_save(path_in_dir("device.npy"), d) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "CUDA device 0");
    spk_tensor_free(d);
    spk_tensor *h = spk_tensor_new(SPK_F32, 1, &four);
    CHECK(spk_npy_save(path_in_dir("no/such/dir.npy"), h) == -1);
    CHECK_STR_CONTAINS(spk_last_error(), "no/such/dir.npy: cannot create: No such file or directory");
    spk_tensor_free(h);
}

/* Runs a Python script (written to a file in the temp dir) with the temp dir
 * as its argument; returns its exit status and captures its output. */
static int run_python(const char *script, char *output, size_t size)
{
    char *script_path = path_in_dir("check.py");
    write_bytes(script_path, script, strlen(script));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1", python(), script_path, dir);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(output, 1, size - 1, p);
    output[n] = '\0';
    return pclose(p);
}

static const char *WRITE_SCRIPT =
    "import sys, numpy as np\n"
    "from numpy.lib import format as fmt\n"
    "d = sys.argv[1]\n"
    "def values(dt):\n"
    "    a = np.arange(24).reshape(2, 3, 4)\n"
    "    a = (a * 100 + 7) if dt in ('<i4', '<u8') else a * 0.5 - 3\n"
    "    return a.astype(dt)\n"
    "for dt in ('<f4', '<f8', '<i4', '<u8'):\n"
    "    for v in ((1, 0), (2, 0), (3, 0)):\n"
    "        with open('%s/np_%s_v%d.npy' % (d, dt[1:], v[0]), 'wb') as f:\n"
    "            fmt.write_array(f, values(dt), version=v)\n"
    "    np.save('%s/np_%s_fortran.npy' % (d, dt[1:]), np.asfortranarray(values(dt)))\n"
    "np.save(d + '/np_scalar.npy', np.float64(2.5))\n"
    "np.save(d + '/np_empty.npy', np.zeros((0, 5), dtype='<f4'))\n"
    "np.save(d + '/np_bigu.npy', np.array([2**64 - 1, 2**63 + 5], dtype='<u8'))\n"
    "np.save(d + '/np_be.npy', np.arange(3, dtype='>f4'))\n"
    "print('written')\n";

TEST(reads_files_numpy_wrote)
{
    char out[4096];
    int rc = run_python(WRITE_SCRIPT, out, sizeof out);
    CHECK(rc == 0);
    CHECK_STR_CONTAINS(out, "written");
    if (rc != 0) {
        fprintf(stderr, "  NumPy is needed (%s with numpy; `make setup` installs python3-numpy): %s\n", python(), out);
        return;
    }
    const char *codes[4] = {"f4", "f8", "i4", "u8"};
    spk_dtype dtypes[4] = {SPK_F32, SPK_F64, SPK_I32, SPK_U64};
    const char *variants[4] = {"v1", "v2", "v3", "fortran"};
    for (int k = 0; k < 4; k++) {
        for (int v = 0; v < 4; v++) {
            char name[64];
            snprintf(name, sizeof name, "np_%s_%s.npy", codes[k], variants[v]);
            spk_tensor *t = spk_npy_load(path_in_dir(name));
            CHECK(t != NULL);
            if (!t) {
                fprintf(stderr, "  %s\n", spk_last_error());
                continue;
            }
            CHECK(t->dtype == dtypes[k] && t->ndim == 3 && t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 4);
            int bad = 0;
            for (int64_t a = 0; a < 2; a++)
                for (int64_t b = 0; b < 3; b++)
                    for (int64_t c = 0; c < 4; c++) {
                        int64_t idx[3] = {a, b, c};
                        double i = (double)(a * 12 + b * 4 + c);
                        double expect = k >= 2 ? i * 100 + 7 : i * 0.5 - 3;
                        bad += spk_tensor_get_f64(t, idx) != expect;
                    }
            CHECK(bad == 0);
            spk_tensor_free(t);
        }
    }
    spk_tensor *s = spk_npy_load(path_in_dir("np_scalar.npy"));
    CHECK(s && s->ndim == 0 && spk_tensor_get_f64(s, NULL) == 2.5);
    spk_tensor_free(s);
    spk_tensor *e = spk_npy_load(path_in_dir("np_empty.npy"));
    CHECK(e && e->ndim == 2 && e->shape[0] == 0 && e->shape[1] == 5);
    spk_tensor_free(e);
    spk_tensor *u = spk_npy_load(path_in_dir("np_bigu.npy"));
    CHECK(u && ((uint64_t *)spk_tensor_data(u))[0] == UINT64_MAX && ((uint64_t *)spk_tensor_data(u))[1] == (UINT64_C(1) << 63) + 5);
    spk_tensor_free(u);
    spk_tensor *be = spk_npy_load(path_in_dir("np_be.npy"));
    CHECK_REFUSED(be, "np_be.npy", "big-endian dtype '>f4'");
}

static const char *READ_SCRIPT =
    "import sys, numpy as np\n"
    "d = sys.argv[1]\n"
    "i = np.arange(24).reshape(2, 3, 4)\n"
    "expect = {'f4': (i * 0.25).astype('<f4'), 'f8': i * 0.25 - 1.0 / 3.0, 'i4': (i * 1000 - 5000).astype('<i4'),\n"
    "          'u8': (i.astype('<u8') + np.uint64(2**63))}\n"
    "for code, e in expect.items():\n"
    "    a = np.load('%s/c_%s.npy' % (d, code))\n"
    "    assert a.dtype == np.dtype('<' + code), (code, a.dtype)\n"
    "    assert a.shape == e.shape, (code, a.shape)\n"
    "    assert np.array_equal(a, e), (code, a, e)\n"
    "t = np.load(d + '/c_transposed.npy')\n"
    "assert t.shape == (4, 3, 2) and np.array_equal(t, (i * 0.25).astype('<f4').transpose(2, 1, 0)), t\n"
    "s = np.load(d + '/c_scalar.npy')\n"
    "assert s.shape == () and s == 42, s\n"
    "z = np.load(d + '/c_empty.npy')\n"
    "assert z.shape == (3, 0) and z.dtype == np.dtype('<i4'), z.shape\n"
    "print('numpy agrees')\n";

TEST(numpy_reads_files_c_wrote)
{
    int64_t shape[3] = {2, 3, 4};
    spk_tensor *ar = spk_tensor_arange(SPK_F64, 0, 24, 1);
    spk_tensor *i = spk_tensor_view(ar, 3, shape);
    spk_tensor *f4 = spk_tensor_new(SPK_F32, 3, shape);
    spk_tensor *f8 = spk_tensor_new(SPK_F64, 3, shape);
    spk_tensor *i4 = spk_tensor_new(SPK_I32, 3, shape);
    spk_tensor *u8 = spk_tensor_new(SPK_U64, 3, shape);
    for (int64_t k = 0; k < 24; k++) {
        ((float *)spk_tensor_data(f4))[k] = (float)(k * 0.25);
        ((double *)spk_tensor_data(f8))[k] = k * 0.25 - 1.0 / 3.0;
        ((int32_t *)spk_tensor_data(i4))[k] = (int32_t)(k * 1000 - 5000);
        ((uint64_t *)spk_tensor_data(u8))[k] = (uint64_t)k + (UINT64_C(1) << 63);
    }
    CHECK(spk_npy_save(path_in_dir("c_f4.npy"), f4) == 0);
    CHECK(spk_npy_save(path_in_dir("c_f8.npy"), f8) == 0);
    CHECK(spk_npy_save(path_in_dir("c_i4.npy"), i4) == 0);
    CHECK(spk_npy_save(path_in_dir("c_u8.npy"), u8) == 0);
    spk_tensor *t1 = spk_tensor_transpose(f4, 0, 2);
    CHECK(spk_npy_save(path_in_dir("c_transposed.npy"), t1) == 0);
    spk_tensor *sc = spk_tensor_full(SPK_F64, 0, NULL, 42);
    CHECK(spk_npy_save(path_in_dir("c_scalar.npy"), sc) == 0);
    int64_t es[2] = {3, 0};
    spk_tensor *em = spk_tensor_new(SPK_I32, 2, es);
    CHECK(spk_npy_save(path_in_dir("c_empty.npy"), em) == 0);

    char out[8192];
    int rc = run_python(READ_SCRIPT, out, sizeof out);
    CHECK(rc == 0);
    CHECK_STR_CONTAINS(out, "numpy agrees");

    spk_tensor *list[] = {ar, i, f4, f8, i4, u8, t1, sc, em};
    for (size_t k = 0; k < sizeof list / sizeof list[0]; k++)
        spk_tensor_free(list[k]);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", check_scratch_dir("test-npy"));
    RUN(round_trip_all_dtypes);
    RUN(round_trip_special_shapes);
    RUN(saved_header_layout);
    RUN(reads_v2_v3_and_fortran_by_hand);
    RUN(malformed_files_refused);
    RUN(save_refuses_device_and_bad_path);
    RUN(reads_files_numpy_wrote);
    RUN(numpy_reads_files_c_wrote);
    return CHECK_SUMMARY();
}
