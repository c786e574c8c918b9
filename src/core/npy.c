/* NumPy .npy reading and writing.
 *
 * Layout: "\x93NUMPY", major, minor, a little-endian header length (2 bytes
 * in version 1.0, 4 bytes in 2.0 and 3.0), then a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } and the raw
 * data. Every size is checked against the file's length before anything is
 * allocated for it. */
#include "core/npy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/cancel.h"
#include "core/error.h"
#include "core/file.h"
#include "core/scan.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER 65536 /* larger headers are refused (NumPy's own default limit is 10000) */

typedef struct npy_header {
    int version; /* format major version: 1, 2 or 3 */
    spk_dtype dtype;
    bool fortran_order;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
} npy_header;

/* ---- preamble ---------------------------------------------------------- */

/* Reads magic, version and header length from the first bytes (at most 12);
 * sets where the header starts and how long it is. */
static int parse_preamble(const uint8_t *p, size_t avail, uint64_t file_size, const char *name,
                          size_t *header_start, size_t *header_len, int *version)
{
    if (avail < NPY_MAGIC_LEN || memcmp(p, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return spk_fail("%s: not a .npy file (bad magic: expected \\x93NUMPY)", name);
    if (avail < 8)
        return spk_fail("%s: truncated .npy preamble (%zu bytes)", name, avail);
    int major = p[6], minor = p[7];
    size_t len_bytes;
    if (major == 1 && minor == 0)
        len_bytes = 2;
    else if ((major == 2 || major == 3) && minor == 0)
        len_bytes = 4;
    else
        return spk_fail("%s: unknown .npy format version %d.%d (expected 1.0, 2.0 or 3.0)", name, major, minor);
    if (avail < 8 + len_bytes)
        return spk_fail("%s: truncated .npy preamble (%zu bytes)", name, avail);
    uint64_t len = 0;
    for (size_t i = 0; i < len_bytes; i++)
        len |= (uint64_t)p[8 + i] << (8 * i);
    *header_start = 8 + len_bytes;
    *version = major;
    if (len > NPY_MAX_HEADER)
        return spk_fail("%s: .npy header of %" PRIu64 " bytes exceeds the %d-byte limit", name, len, NPY_MAX_HEADER);
    if (len > file_size - *header_start)
        return spk_fail("%s: .npy header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes)",
                        name, len, file_size);
    *header_len = (size_t)len;
    return 0;
}

/* ---- header dict ------------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
    const char *name;
} cursor;

static void skip_space(cursor *c) { c->p = spk_scan_blanks(c->p, c->end); }

static bool accept(cursor *c, char ch) { return spk_scan_accept(&c->p, c->end, ch); }

/* A quoted Python string of printable ASCII without escapes (keys and descr
 * never need them). Anything else is refused rather than read as something
 * NumPy would not: '<f4\x00' is not '<f4'. */
static int parse_string(cursor *c, char *out, size_t size, const char *what)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return spk_fail("%s: .npy header: expected a quoted string for %s", c->name, what);
    char quote = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != quote)
        c->p++;
    if (c->p >= c->end)
        return spk_fail("%s: .npy header: unterminated string in %s", c->name, what);
    size_t n = (size_t)(c->p - start);
    c->p++;
    char value[4 * 64 + 8];
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)start[i];
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f) {
            spk_error_shown_bytes(start, n < 64 ? n : 64, value, sizeof value);
            return spk_fail("%s: .npy header: %s '%s' holds %s", c->name, what, value,
                            ch == '\\' ? "an escape (not supported)" : "a byte that is not printable ASCII");
        }
    }
    if (n + 1 > size) {
        spk_error_shown_bytes(start, n < 64 ? n : 64, value, sizeof value);
        return spk_fail("%s: .npy header: %s '%s%s' is too long", c->name, what, value, n > 64 ? "..." : "");
    }
    memcpy(out, start, n);
    out[n] = '\0';
    return 0;
}

static int parse_descr(cursor *c, npy_header *h)
{
    skip_space(c);
    if (c->p < c->end && *c->p == '[')
        return spk_fail("%s: structured dtypes (a list as 'descr') are not supported", c->name);
    char d[64];
    if (parse_string(c, d, sizeof d, "'descr'"))
        return -1;
    static const struct {
        const char *code;
        spk_dtype dtype;
    } known[] = {{"f4", SPK_F32}, {"f8", SPK_F64}, {"i4", SPK_I32}, {"u8", SPK_U64}};
    /* '<' is little-endian, '=' native (little on the machines spk supports). */
    if (d[0] == '<' || d[0] == '=') {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(d + 1, known[i].code) == 0) {
                h->dtype = known[i].dtype;
                return 0;
            }
        }
    } else if (d[0] == '>') {
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strcmp(d + 1, known[i].code) == 0)
                return spk_fail("%s: big-endian dtype '%s' is not supported (save it little-endian, e.g. with "
                                "arr.astype('<%s'))", c->name, d, known[i].code);
    }
    return spk_fail("%s: unknown dtype '%s' (supported: <f4, <f8, <i4, <u8)", c->name, d);
}

static int parse_bool(cursor *c, bool *out)
{
    skip_space(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        c->p += 4;
        *out = true;
        return 0;
    }
    if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        c->p += 5;
        *out = false;
        return 0;
    }
    return spk_fail("%s: .npy header: 'fortran_order' must be True or False", c->name);
}

static int parse_shape(cursor *c, npy_header *h)
{
    if (!accept(c, '('))
        return spk_fail("%s: .npy header: 'shape' must be a tuple", c->name);
    h->ndim = 0;
    for (;;) {
        if (accept(c, ')'))
            return 0;
        skip_space(c);
        if (c->p >= c->end || !isdigit((unsigned char)*c->p))
            return spk_fail("%s: .npy header: 'shape' must hold non-negative integers", c->name);
        if (h->ndim == SPK_MAX_DIMS)
            return spk_fail("%s: .npy shape has more than %d dims", c->name, SPK_MAX_DIMS);
        if (*c->p == '0' && c->p + 1 < c->end && isdigit((unsigned char)c->p[1]))
            return spk_fail("%s: .npy shape entry %d has a leading zero (not a Python 3 integer)", c->name, h->ndim);
        int64_t v = 0;
        while (c->p < c->end && isdigit((unsigned char)*c->p)) {
            int digit = *c->p++ - '0';
            if (v > (INT64_MAX - digit) / 10)
                return spk_fail("%s: .npy shape entry %d is too large", c->name, h->ndim);
            v = v * 10 + digit;
        }
        /* Python 2's long suffix; NumPy drops it in versions 1.0 and 2.0 only. */
        if (c->p < c->end && *c->p == 'L' && h->version < 3)
            c->p++;
        h->shape[h->ndim++] = v;
        if (accept(c, ','))
            continue;
        /* (2) is the integer 2, not a tuple: one entry needs its comma. */
        if (h->ndim > 1 && accept(c, ')'))
            return 0;
        return spk_fail("%s: .npy header: malformed 'shape' tuple%s", c->name,
                        h->ndim == 1 ? " (a one-entry tuple is written (n,))" : "");
    }
}

static int parse_dict(const char *text, size_t len, const char *name, npy_header *h)
{
    cursor c = {text, text + len, name};
    if (!accept(&c, '{'))
        return spk_fail("%s: .npy header is not a dict", name);
    bool have_descr = false, have_order = false, have_shape = false;
    for (;;) {
        if (accept(&c, '}'))
            break;
        char key[32];
        if (parse_string(&c, key, sizeof key, "a key"))
            return -1;
        if (!accept(&c, ':'))
            return spk_fail("%s: .npy header: expected ':' after '%s'", name, key);
        bool *seen;
        int rc;
        if (strcmp(key, "descr") == 0) {
            seen = &have_descr;
            rc = parse_descr(&c, h);
        } else if (strcmp(key, "fortran_order") == 0) {
            seen = &have_order;
            rc = parse_bool(&c, &h->fortran_order);
        } else if (strcmp(key, "shape") == 0) {
            seen = &have_shape;
            rc = parse_shape(&c, h);
        } else {
            return spk_fail("%s: .npy header has an unexpected key '%s'", name, key);
        }
        if (rc)
            return -1;
        if (*seen)
            return spk_fail("%s: .npy header repeats the key '%s'", name, key);
        *seen = true;
        if (accept(&c, ','))
            continue;
        if (accept(&c, '}'))
            break;
        return spk_fail("%s: .npy header: expected ',' or '}' after '%s'", name, key);
    }
    skip_space(&c);
    if (c.p != c.end)
        return spk_fail("%s: .npy header has text after the dict", name);
    if (!have_descr || !have_order || !have_shape)
        return spk_fail("%s: .npy header is missing the key '%s'", name,
                        !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    return 0;
}

/* Bytes of data the header promises, refusing shapes whose size overflows. */
static int data_bytes(const npy_header *h, const char *name, uint64_t *out)
{
    uint64_t n = spk_dtype_size(h->dtype);
    for (int d = 0; d < h->ndim; d++) {
        if (h->shape[d] == 0) {
            *out = 0;
            return 0;
        }
    }
    for (int d = 0; d < h->ndim; d++) {
        if ((uint64_t)h->shape[d] > (uint64_t)INT64_MAX / n)
            return spk_fail("%s: .npy shape is too large (size overflows)", name);
        n *= (uint64_t)h->shape[d];
    }
    *out = n;
    return 0;
}

static int check_data_size(const npy_header *h, uint64_t available, const char *name)
{
    uint64_t need;
    if (data_bytes(h, name, &need))
        return -1;
    if (need == available)
        return 0;
    char shape[200];
    spk_tensor tmp = {.ndim = h->ndim};
    memcpy(tmp.shape, h->shape, sizeof tmp.shape);
    spk_shape_string(&tmp, shape, sizeof shape);
    if (need > available)
        return spk_fail("%s: data is truncated: shape %s of %s needs %" PRIu64 " bytes but the file holds %" PRIu64,
                        name, shape, spk_dtype_name(h->dtype), need, available);
    return spk_fail("%s: %" PRIu64 " trailing bytes after the data: shape %s of %s needs %" PRIu64
                    " bytes but the file holds %" PRIu64,
                    name, available - need, shape, spk_dtype_name(h->dtype), need, available);
}

/* The tensor the data lands in: C order directly, or for Fortran order a
 * tensor of the reversed shape (whose C order is the file's order). */
static spk_tensor *new_target(const npy_header *h)
{
    int64_t shape[SPK_MAX_DIMS];
    for (int d = 0; d < h->ndim; d++)
        shape[d] = h->fortran_order ? h->shape[h->ndim - 1 - d] : h->shape[d];
    return spk_tensor_new(h->dtype, h->ndim, shape);
}

/* Turns the reversed-shape tensor of a Fortran-order file into C order. */
static spk_tensor *finish(spk_tensor *t, const npy_header *h)
{
    if (!h->fortran_order || h->ndim < 2)
        return t;
    spk_tensor *v = t, *next;
    for (int d = 0; d < h->ndim / 2; d++) {
        next = spk_tensor_transpose(v, d, h->ndim - 1 - d);
        if (v != t)
            spk_tensor_free(v);
        if (!next) {
            spk_tensor_free(t);
            return NULL;
        }
        v = next;
    }
    spk_tensor *c = spk_tensor_clone(v);
    if (v != t)
        spk_tensor_free(v);
    spk_tensor_free(t);
    return c;
}

/* ---- public ------------------------------------------------------------ */

spk_tensor *spk_npy_parse(const void *bytes, size_t size, const char *name)
{
    const uint8_t *p = bytes;
    if (!name)
        name = "(memory)";
    size_t start, len;
    npy_header h = {0};
    if (parse_preamble(p, size, size, name, &start, &len, &h.version))
        return NULL;
    if (parse_dict((const char *)p + start, len, name, &h))
        return NULL;
    if (check_data_size(&h, size - start - len, name))
        return NULL;
    spk_tensor *t = new_target(&h);
    if (!t) {
        spk_error_prefix("%s", name);
        return NULL;
    }
    memcpy(t->storage->data, p + start + len, size - start - len);
    return finish(t, &h);
}

/* In chunks, so a cancellation request stops a large read within one chunk. */
static int read_exact(FILE *f, void *buf, size_t n, const char *name)
{
    for (size_t done = 0, chunk; done < n; done += chunk) {
        if (spk_cancel_check()) {
            spk_error_prefix("%s", name);
            return -1;
        }
        chunk = n - done < SPK_READ_CHUNK ? n - done : SPK_READ_CHUNK;
        if (fread((char *)buf + done, 1, chunk, f) != chunk)
            return spk_fail("%s: read failed: %s", name, ferror(f) ? strerror(errno) : "unexpected end of file");
    }
    return 0;
}

spk_tensor *spk_npy_load(const char *path)
{
    struct stat st;
    FILE *f = spk_file_fopen(path, &st);
    if (!f)
        return NULL;
    uint64_t file_size = (uint64_t)st.st_size;
    uint8_t pre[12];
    size_t got = fread(pre, 1, sizeof pre, f);
    size_t start, len;
    char *header = NULL;
    spk_tensor *t = NULL;
    npy_header h = {0};
    if (parse_preamble(pre, got, file_size, path, &start, &len, &h.version))
        goto fail;
    header = malloc(len ? len : 1); /* len <= NPY_MAX_HEADER and within the file */
    if (!header) {
        spk_fail("%s: out of memory reading the header", path);
        goto fail;
    }
    if (fseek(f, (long)start, SEEK_SET) != 0 || read_exact(f, header, len, path))
        goto fail;
    if (parse_dict(header, len, path, &h))
        goto fail;
    if (check_data_size(&h, file_size - start - len, path))
        goto fail;
    t = new_target(&h); /* its size equals the data present in the file */
    if (!t) {
        spk_error_prefix("%s", path);
        goto fail;
    }
    if (read_exact(f, t->storage->data, t->storage->bytes, path))
        goto fail;
    free(header);
    fclose(f);
    return finish(t, &h);
fail:
    spk_tensor_free(t);
    free(header);
    fclose(f);
    return NULL;
}

static const char *descr_of(spk_dtype dtype)
{
    switch (dtype) {
    case SPK_F32: return "<f4";
    case SPK_F64: return "<f8";
    case SPK_I32: return "<i4";
    case SPK_U64: return "<u8";
    }
    return "?";
}

int spk_npy_save(const char *path, const spk_tensor *t)
{
    if (!t)
        return spk_fail("%s: tensor is NULL", path);
    if (!spk_tensor_is_host(t))
        return spk_fail("%s: saving needs a host tensor, but this one is on CUDA device %d", path,
                        t->storage->device);
    char dict[400];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr_of(t->dtype));
    for (int d = 0; d < t->ndim; d++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%" PRId64 "%s", t->shape[d],
                      t->ndim == 1 ? "," : d + 1 < t->ndim ? ", " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");

    /* Pad with spaces and a final newline so the data starts 64-byte aligned;
     * version 2.0 only if the header outgrows version 1.0's 2-byte length. */
    int major = 1;
    size_t pre = 10;
    size_t total = pre + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total - pre > 65535) {
        major = 2;
        pre = 12;
        total = (pre + (size_t)n + 1 + 63) / 64 * 64;
    }
    size_t hlen = total - pre;
    uint8_t head[512];
    if (total > sizeof head)
        return spk_fail("%s: .npy header too long", path);
    memcpy(head, NPY_MAGIC, NPY_MAGIC_LEN);
    head[6] = (uint8_t)major;
    head[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        head[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(head + pre, dict, (size_t)n);
    memset(head + pre + n, ' ', hlen - (size_t)n - 1);
    head[total - 1] = '\n';

    spk_tensor *c = spk_tensor_contiguous(t);
    if (!c)
        return -1;
    spk_file_out *out = spk_file_out_open(path);
    if (!out) {
        spk_tensor_free(c);
        return -1;
    }
    FILE *f = spk_file_out_stream(out);
    size_t bytes = (size_t)spk_tensor_numel(c) * spk_dtype_size(c->dtype);
    if (fwrite(head, 1, total, f) == total && bytes)
        fwrite(spk_tensor_data(c), 1, bytes, f);
    spk_tensor_free(c);
    return spk_file_out_commit(out); /* a failed write left the stream's error set: refused there */
}
