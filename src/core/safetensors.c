/* .safetensors reading and writing.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
 *  "__metadata__": {"key": "value"}}, then the data section; offsets are
 * relative to its start. The header is parsed by a small strict JSON reader
 * specialised to this shape; every offset is checked against the data
 * section before any tensor is allocated. */
#include "core/safetensors.h"

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
#include "core/text.h"

#define ST_MAX_HEADER (100u * 1000u * 1000u) /* as the reference implementation */

/* ---- JSON reading ------------------------------------------------------ */

typedef struct json {
    const char *p, *end, *start;
    const char *name; /* file name for messages */
} json;

static int json_fail(json *j, const char *what)
{
    return spk_fail("%s: safetensors header: %s at byte %td", j->name, what, j->p - j->start);
}

static void json_space(json *j) { j->p = spk_scan_blanks(j->p, j->end); }

static bool json_accept(json *j, char c) { return spk_scan_accept(&j->p, j->end, c); }

static int json_expect(json *j, char c)
{
    if (json_accept(j, c))
        return 0;
    char what[32];
    snprintf(what, sizeof what, "expected '%c'", c);
    return json_fail(j, what);
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0 || (size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] > 0x8F))
        return 0;
    return n;
}

static int hex4(json *j, unsigned *out)
{
    if (j->end - j->p < 4)
        return json_fail(j, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *j->p++;
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return json_fail(j, "bad \\u escape");
    }
    *out = v;
    return 0;
}

/* A JSON string, unescaped into a NUL-terminated UTF-8 buffer (its length
 * never exceeds the escaped text's): `buf` where it fits in `size` bytes (keys
 * that are only compared), else a malloc'd one the caller frees. Embedded
 * NULs are refused. */
static int json_string_in(json *j, char *buf, size_t size, char **out)
{
    json_space(j);
    if (j->p >= j->end || *j->p != '"')
        return json_fail(j, "expected a string");
    j->p++;
    const char *q = j->p;
    while (q < j->end && *q != '"')
        q += (*q == '\\' && q + 1 < j->end) ? 2 : 1;
    if (q >= j->end)
        return json_fail(j, "unterminated string");
    char *s = (size_t)(q - j->p) < size ? buf : malloc((size_t)(q - j->p) + 1);
    if (!s)
        return spk_fail("%s: out of memory reading the header", j->name);
    size_t n = 0;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) {
            if (s != buf)
                free(s);
            return json_fail(j, "control character in string");
        }
        if (c >= 0x80) {
            /* JSON text is UTF-8; a name of other bytes is no name another
             * reader would agree on. */
            const char *at = j->p - 1;
            size_t len = utf8_sequence((const unsigned char *)at, (const unsigned char *)j->end);
            if (len == 0) {
                char text[4 * 48 + 8];
                const char *open = at;
                while (open > j->start && open[-1] != '"')
                    open--;
                const char *close = memchr(at, '"', (size_t)(j->end - at));
                size_t span = (size_t)((close ? close : j->end) - open);
                spk_error_shown_bytes(open, span < 48 ? span : 48, text, sizeof text);
                if (s != buf)
                    free(s);
                return spk_fail("%s: safetensors header: the string \"%s%s\" is not valid UTF-8 (byte 0x%02x at byte %td)",
                                j->name, text, span > 48 ? "..." : "", c, at - j->start);
            }
            memcpy(s + n, at, len);
            n += len;
            j->p = at + len;
            continue;
        }
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        char e = *j->p++;
        unsigned cp;
        switch (e) {
        case '"': s[n++] = '"'; break;
        case '\\': s[n++] = '\\'; break;
        case '/': s[n++] = '/'; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u':
            if (hex4(j, &cp))
                goto fail;
            if (cp >= 0xD800 && cp < 0xDC00) {
                unsigned lo;
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u') {
                    json_fail(j, "unpaired surrogate in \\u escape");
                    goto fail;
                }
                j->p += 2;
                if (hex4(j, &lo))
                    goto fail;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    json_fail(j, "unpaired surrogate in \\u escape");
                    goto fail;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                json_fail(j, "unpaired surrogate in \\u escape");
                goto fail;
            }
            if (cp == 0) {
                json_fail(j, "NUL character in string");
                goto fail;
            }
            /* UTF-8 of at most 4 bytes, never longer than the 6- or 12-byte escape. */
            if (cp < 0x80) {
                s[n++] = (char)cp;
            } else if (cp < 0x800) {
                s[n++] = (char)(0xC0 | (cp >> 6));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                s[n++] = (char)(0xE0 | (cp >> 12));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                s[n++] = (char)(0xF0 | (cp >> 18));
                s[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                s[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        default:
            j->p--;
            json_fail(j, "bad escape in string");
            goto fail;
        }
    }
    j->p++;
    s[n] = '\0';
    *out = s;
    return 0;
fail:
    if (s != buf)
        free(s);
    return -1;
}

static int json_string(json *j, char **out)
{
    return json_string_in(j, NULL, 0, out);
}

/* A non-negative JSON integer (no sign, fraction or exponent: shapes and
 * offsets are counts). */
static int json_uint(json *j, uint64_t *out)
{
    json_space(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return json_fail(j, "expected a non-negative integer");
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return json_fail(j, "leading zero in integer");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return json_fail(j, "integer too large");
        v = v * 10 + d;
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return json_fail(j, "expected an integer, not a fraction");
    *out = v;
    return 0;
}

/* [n, n, ...] with at most `max` entries. */
static int json_uint_array(json *j, uint64_t *out, int max, int *count, const char *what)
{
    if (json_expect(j, '['))
        return -1;
    *count = 0;
    if (json_accept(j, ']'))
        return 0;
    for (;;) {
        if (*count == max) {
            char msg[80];
            snprintf(msg, sizeof msg, "%s has more than %d entries", what, max);
            return json_fail(j, msg);
        }
        if (json_uint(j, &out[(*count)++]))
            return -1;
        if (json_accept(j, ']'))
            return 0;
        if (json_expect(j, ','))
            return -1;
    }
}

/* ---- header entries ---------------------------------------------------- */

typedef struct entry {
    char *name;
    spk_dtype dtype;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    uint64_t begin, end;
} entry;

typedef struct entries {
    entry *items;
    size_t count, cap;
} entries;

static void entries_free(entries *e)
{
    for (size_t i = 0; i < e->count; i++)
        free(e->items[i].name);
    free(e->items);
    e->items = NULL;
    e->count = e->cap = 0;
}

static int parse_dtype(json *j, const char *tensor, spk_dtype *out)
{
    char small[16], *d;
    if (json_string_in(j, small, sizeof small, &d))
        return -1;
    static const struct {
        const char *name;
        spk_dtype dtype;
    } known[] = {{"F32", SPK_F32}, {"F64", SPK_F64}, {"I32", SPK_I32}, {"U64", SPK_U64}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(d, known[i].name) == 0) {
            *out = known[i].dtype;
            if (d != small)
                free(d);
            return 0;
        }
    }
    spk_fail("%s: tensor '%s' has unsupported dtype '%s' (supported: F32, F64, I32, U64)", j->name, tensor, d);
    if (d != small)
        free(d);
    return -1;
}

static int parse_tensor(json *j, entry *e)
{
    bool have_dtype = false, have_shape = false, have_offsets = false;
    if (json_expect(j, '{'))
        return -1;
    if (!json_accept(j, '}')) {
        for (;;) {
            char small[16], *key;
            if (json_string_in(j, small, sizeof small, &key))
                return -1;
            int rc = json_expect(j, ':');
            bool *seen = NULL;
            if (rc == 0) {
                if (strcmp(key, "dtype") == 0) {
                    seen = &have_dtype;
                    rc = parse_dtype(j, e->name, &e->dtype);
                } else if (strcmp(key, "shape") == 0) {
                    uint64_t dims[SPK_MAX_DIMS];
                    seen = &have_shape;
                    rc = json_uint_array(j, dims, SPK_MAX_DIMS, &e->ndim, "shape");
                    for (int d = 0; rc == 0 && d < e->ndim; d++) {
                        if (dims[d] > (uint64_t)INT64_MAX)
                            rc = json_fail(j, "shape entry too large");
                        e->shape[d] = (int64_t)dims[d];
                    }
                } else if (strcmp(key, "data_offsets") == 0) {
                    uint64_t off[2];
                    int n = 0;
                    seen = &have_offsets;
                    rc = json_uint_array(j, off, 2, &n, "data_offsets");
                    if (rc == 0 && n != 2)
                        rc = spk_fail("%s: tensor '%s': data_offsets must hold 2 integers", j->name, e->name);
                    e->begin = off[0];
                    e->end = off[1];
                } else {
                    rc = spk_fail("%s: tensor '%s' has an unexpected key '%s'", j->name, e->name, key);
                }
            }
            if (rc == 0 && *seen)
                rc = spk_fail("%s: tensor '%s' repeats the key '%s'", j->name, e->name, key);
            if (key != small)
                free(key);
            if (rc)
                return -1;
            *seen = true;
            if (json_accept(j, '}'))
                break;
            if (json_expect(j, ','))
                return -1;
        }
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return spk_fail("%s: tensor '%s' is missing '%s'", j->name, e->name,
                        !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    return 0;
}

/* "__metadata__": an object of string values, read and ignored. */
static int skip_metadata(json *j)
{
    if (json_expect(j, '{'))
        return -1;
    if (json_accept(j, '}'))
        return 0;
    for (;;) {
        char *k, *v;
        if (json_string(j, &k))
            return -1;
        free(k);
        if (json_expect(j, ':'))
            return -1;
        json_space(j);
        if (j->p < j->end && *j->p != '"')
            return json_fail(j, "__metadata__ values must be strings");
        if (json_string(j, &v))
            return -1;
        free(v);
        if (json_accept(j, '}'))
            return 0;
        if (json_expect(j, ','))
            return -1;
    }
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

/* No tensor name twice: sorted, so a header of n names costs n log n. */
static int check_unique_names(const entries *es, const char *name)
{
    if (es->count < 2)
        return 0;
    const entry **order = malloc(es->count * sizeof *order);
    if (!order)
        return spk_fail("%s: out of memory reading the header", name);
    bool sorted = true;
    for (size_t i = 0; i < es->count; i++) {
        order[i] = &es->items[i];
        sorted = sorted && (i == 0 || cmp_entry_name(&order[i - 1], &order[i]) <= 0);
    }
    if (!sorted) /* spk writes names sorted: no sort for its own files */
        qsort(order, es->count, sizeof *order, cmp_entry_name);
    int rc = 0;
    for (size_t i = 1; i < es->count && rc == 0; i++)
        if (strcmp(order[i]->name, order[i - 1]->name) == 0)
            rc = spk_fail("%s: tensor '%s' appears twice in the header", name, order[i]->name);
    free(order);
    return rc;
}

static int parse_header(const char *text, size_t len, const char *name, entries *out)
{
    json j = {text, text + len, text, name};
    json_space(&j);
    if (j.p >= j.end || *j.p != '{')
        return spk_fail("%s: safetensors header is not a JSON object", name);
    j.p++;
    bool have_metadata = false;
    if (!json_accept(&j, '}')) {
        for (;;) {
            char *key;
            if (json_string(&j, &key))
                return -1;
            if (json_expect(&j, ':')) {
                free(key);
                return -1;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (have_metadata)
                    return spk_fail("%s: safetensors header repeats '__metadata__'", name);
                have_metadata = true;
                if (skip_metadata(&j))
                    return -1;
            } else {
                if (out->count == out->cap) {
                    size_t cap = out->cap ? out->cap * 2 : 8;
                    entry *items = realloc(out->items, cap * sizeof *items);
                    if (!items) {
                        free(key);
                        return spk_fail("%s: out of memory reading the header", name);
                    }
                    out->items = items;
                    out->cap = cap;
                }
                entry *e = &out->items[out->count++];
                memset(e, 0, sizeof *e);
                e->name = key;
                if (parse_tensor(&j, e))
                    return -1;
            }
            if (json_accept(&j, '}'))
                break;
            if (json_expect(&j, ','))
                return -1;
        }
    }
    json_space(&j);
    if (j.p != j.end)
        return json_fail(&j, "text after the JSON object");
    return check_unique_names(out, name);
}

static int cmp_begin(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Each tensor's bytes lie within the data section, match its shape, and
 * overlap no other tensor's. On success *order holds the entries sorted by
 * where their data begins (the caller frees it), so that the data is read
 * front to back. */
static int check_offsets(const entries *es, uint64_t data_len, const char *name, const entry ***order_out)
{
    for (size_t i = 0; i < es->count; i++) {
        const entry *e = &es->items[i];
        if (e->end < e->begin)
            return spk_fail("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                            name, e->name, e->begin, e->end);
        if (e->end > data_len)
            return spk_fail("%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] lie outside the data section (%" PRIu64 " bytes)",
                            name, e->name, e->begin, e->end, data_len);
        uint64_t bytes = spk_dtype_size(e->dtype);
        bool zero = false;
        for (int d = 0; d < e->ndim; d++)
            zero = zero || e->shape[d] == 0;
        for (int d = 0; !zero && d < e->ndim; d++) {
            if ((uint64_t)e->shape[d] > UINT64_MAX / bytes)
                return spk_fail("%s: tensor '%s': shape is too large", name, e->name);
            bytes *= (uint64_t)e->shape[d];
        }
        if (zero)
            bytes = 0;
        if (e->end - e->begin != bytes) {
            char shape[200];
            spk_tensor tmp = {.ndim = e->ndim};
            memcpy(tmp.shape, e->shape, sizeof tmp.shape);
            return spk_fail("%s: tensor '%s': shape %s of %s needs %" PRIu64 " bytes but data_offsets [%" PRIu64
                            ", %" PRIu64 "] span %" PRIu64,
                            name, e->name, spk_shape_string(&tmp, shape, sizeof shape), spk_dtype_name(e->dtype),
                            bytes, e->begin, e->end, e->end - e->begin);
        }
    }
    const entry **order = malloc((es->count ? es->count : 1) * sizeof *order);
    if (!order)
        return spk_fail("%s: out of memory checking offsets", name);
    bool sorted = true;
    for (size_t i = 0; i < es->count; i++) {
        order[i] = &es->items[i];
        sorted = sorted && (i == 0 || order[i - 1]->begin <= order[i]->begin);
    }
    if (!sorted)
        qsort(order, es->count, sizeof *order, cmp_begin);
    /* The tensors tile the data section, as the reference implementation
     * demands: bytes no tensor owns are a sign of a writer that got its
     * offsets wrong, as trailing bytes are in a .npy file. */
    int rc = 0;
    const entry *prev = NULL;
    uint64_t covered = 0;
    for (size_t i = 0; i < es->count && rc == 0; i++) {
        if (order[i]->end == order[i]->begin)
            continue; /* empty tensors occupy nothing */
        if (prev && order[i]->begin < prev->end)
            rc = spk_fail("%s: tensors '%s' and '%s' overlap in the data section", name, prev->name, order[i]->name);
        else if (order[i]->begin > covered)
            rc = spk_fail("%s: bytes %" PRIu64 " to %" PRIu64 " of the data section belong to no tensor (the next "
                          "is '%s' at %" PRIu64 ")", name, covered, order[i]->begin, order[i]->name, order[i]->begin);
        prev = order[i];
        covered = order[i]->end;
    }
    if (rc == 0 && covered < data_len)
        rc = spk_fail("%s: %" PRIu64 " trailing bytes after the last tensor's data (the data section holds %" PRIu64
                      " bytes, the tensors %" PRIu64 ")", name, data_len - covered, data_len, covered);
    if (rc)
        free(order);
    else
        *order_out = order;
    return rc;
}

/* ---- loading ----------------------------------------------------------- */

typedef int (*reader)(void *ctx, uint64_t offset, void *dst, size_t n, const char *name);

static int build_list(const char *name, const char *header, size_t header_len, uint64_t data_len, reader read,
                      void *ctx, spk_tensor_list *out)
{
    entries es = {0};
    const entry **order = NULL;
    spk_tensor_list list = {0};
    if (parse_header(header, header_len, name, &es) || check_offsets(&es, data_len, name, &order))
        goto fail;
    if (es.count) {
        list.items = calloc(es.count, sizeof *list.items);
        if (!list.items) {
            spk_fail("%s: out of memory", name);
            goto fail;
        }
        list.count = es.count; /* slots not yet filled are NULL, which the list's free skips */
    }
    /* Allocations now add up to at most the data section (offsets checked, no
     * overlap). The list keeps the header's order; data is read in file order. */
    for (size_t k = 0; k < es.count; k++) {
        size_t i = (size_t)(order[k] - es.items);
        entry *e = &es.items[i];
        spk_tensor *t = spk_tensor_new(e->dtype, e->ndim, e->shape);
        if (!t) {
            spk_error_prefix("%s: tensor '%s'", name, e->name);
            goto fail;
        }
        list.items[i].name = e->name;
        list.items[i].tensor = t;
        e->name = NULL; /* now owned by the list */
        if (read(ctx, e->begin, t->storage->data, (size_t)(e->end - e->begin), name))
            goto fail;
    }
    free(order);
    entries_free(&es);
    *out = list;
    return 0;
fail:
    free(order);
    entries_free(&es);
    spk_tensor_list_free(&list);
    return -1;
}

typedef struct memory_source {
    const uint8_t *data; /* the data section */
} memory_source;

static int read_memory(void *ctx, uint64_t offset, void *dst, size_t n, const char *name)
{
    (void)name;
    memcpy(dst, ((memory_source *)ctx)->data + offset, n);
    return 0;
}

typedef struct file_source {
    FILE *f;
    uint64_t data_start;
    uint64_t at; /* the stream's position in the data section */
} file_source;

/* Tensors come in file order, mostly back to back: a seek only over a gap,
 * so the stream's buffer serves many small tensors per read. */
static int read_file(void *ctx, uint64_t offset, void *dst, size_t n, const char *name)
{
    file_source *src = ctx;
    if (n == 0)
        return 0;
    if (offset != src->at && fseeko(src->f, (off_t)(src->data_start + offset), SEEK_SET) != 0)
        return spk_fail("%s: seek failed: %s", name, strerror(errno));
    src->at = offset + n;
    /* In chunks, so a cancellation request stops a large read within one chunk. */
    for (size_t done = 0, chunk; done < n; done += chunk) {
        if (spk_cancel_check()) {
            src->at = UINT64_MAX;
            spk_error_prefix("%s", name);
            return -1;
        }
        chunk = n - done < SPK_READ_CHUNK ? n - done : SPK_READ_CHUNK;
        if (fread((char *)dst + done, 1, chunk, src->f) != chunk) {
            src->at = UINT64_MAX;
            return spk_fail("%s: read failed: %s", name, ferror(src->f) ? strerror(errno) : "unexpected end of file");
        }
    }
    return 0;
}

static int check_header_length(uint64_t n, uint64_t file_size, const char *name)
{
    if (n > ST_MAX_HEADER)
        return spk_fail("%s: safetensors header length %" PRIu64 " exceeds the 100 MB limit", name, n);
    if (n > file_size - 8)
        return spk_fail("%s: safetensors header length %" PRIu64 " runs past the end of the file (%" PRIu64
                        " bytes)", name, n, file_size);
    return 0;
}

static uint64_t read_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

int spk_safetensors_parse(const void *bytes, size_t size, const char *name, spk_tensor_list *out)
{
    const uint8_t *p = bytes;
    if (!name)
        name = "(memory)";
    if (size < 8)
        return spk_fail("%s: too short for a safetensors file (%zu bytes)", name, size);
    uint64_t n = read_le64(p);
    if (check_header_length(n, size, name))
        return -1;
    memory_source src = {p + 8 + n};
    return build_list(name, (const char *)p + 8, (size_t)n, size - 8 - n, read_memory, &src, out);
}

int spk_safetensors_load(const char *path, spk_tensor_list *out)
{
    struct stat st;
    FILE *f = spk_file_fopen(path, &st);
    if (!f)
        return -1;
    uint64_t size = (uint64_t)st.st_size;
    uint8_t len[8];
    char *header = NULL;
    int rc = -1;
    if (size < 8 || fread(len, 1, 8, f) != 8) {
        spk_fail("%s: too short for a safetensors file (%" PRIu64 " bytes)", path, size);
        goto done;
    }
    uint64_t n = read_le64(len);
    if (check_header_length(n, size, path))
        goto done;
    header = malloc(n ? (size_t)n : 1); /* bounded by the file and 100 MB */
    if (!header) {
        spk_fail("%s: out of memory reading the header", path);
        goto done;
    }
    if (n && fread(header, 1, (size_t)n, f) != n) {
        spk_fail("%s: read failed: %s", path, ferror(f) ? strerror(errno) : "unexpected end of file");
        goto done;
    }
    file_source src = {f, 8 + n, 0};
    rc = build_list(path, header, (size_t)n, size - 8 - n, read_file, &src, out);
done:
    free(header);
    fclose(f);
    return rc;
}

void spk_tensor_list_free(spk_tensor_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].name);
        spk_tensor_free(list->items[i].tensor);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

/* ---- saving ------------------------------------------------------------ */

static void put_json_string(spk_text *b, const char *s)
{
    spk_text_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            spk_text_put(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            spk_text_puts(b, esc);
        } else {
            spk_text_put(b, (const char *)p, 1);
        }
    }
    spk_text_puts(b, "\"");
}

static const char *st_dtype(spk_dtype d)
{
    switch (d) {
    case SPK_F32: return "F32";
    case SPK_F64: return "F64";
    case SPK_I32: return "I32";
    case SPK_U64: return "U64";
    }
    return "?";
}

static int cmp_name(const void *a, const void *b, void *items)
{
    const spk_named_tensor *base = items;
    return strcmp(base[*(const size_t *)a].name, base[*(const size_t *)b].name);
}

int spk_safetensors_save(const char *path, const spk_tensor_list *list)
{
    size_t count = list ? list->count : 0;
    for (size_t i = 0; i < count; i++) {
        const spk_named_tensor *it = &list->items[i];
        if (!it->name || !it->tensor)
            return spk_fail("%s: entry %zu has no name or no tensor", path, i);
        if (!spk_tensor_is_host(it->tensor))
            return spk_fail("%s: tensor '%s' is on CUDA device %d; saving needs host tensors", path, it->name,
                            it->tensor->storage->device);
        if (strcmp(it->name, "__metadata__") == 0)
            return spk_fail("%s: '__metadata__' is reserved and cannot name a tensor", path);
        const unsigned char *p = (const unsigned char *)it->name, *end = p + strlen(it->name);
        while (p < end) {
            size_t len = utf8_sequence(p, end);
            if (len == 0) {
                char text[4 * 48 + 8];
                size_t n = strlen(it->name);
                spk_error_shown_bytes(it->name, n < 48 ? n : 48, text, sizeof text);
                return spk_fail("%s: tensor name \"%s%s\" is not valid UTF-8 (byte 0x%02x at %td); "
                                "safetensors headers are JSON text", path, text, n > 48 ? "..." : "", *p,
                                (const char *)p - it->name);
            }
            p += len;
        }
    }
    size_t *order = malloc((count ? count : 1) * sizeof *order);
    if (!order)
        return spk_fail("%s: out of memory", path);
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    if (count > 1)
        qsort_r(order, count, sizeof *order, cmp_name, list->items);
    for (size_t i = 1; i < count; i++) {
        if (strcmp(list->items[order[i]].name, list->items[order[i - 1]].name) == 0) {
            spk_fail("%s: tensor name '%s' appears twice", path, list->items[order[i]].name);
            free(order);
            return -1;
        }
    }

    /* Compact JSON as the reference writes it, padded with spaces to a
     * multiple of 8 bytes so the data section starts aligned. */
    spk_text b = {0};
    uint64_t offset = 0;
    spk_text_puts(&b, "{");
    for (size_t k = 0; k < count; k++) {
        const spk_named_tensor *it = &list->items[order[k]];
        const spk_tensor *t = it->tensor;
        uint64_t bytes = (uint64_t)spk_tensor_numel(t) * spk_dtype_size(t->dtype);
        char num[64];
        if (k)
            spk_text_puts(&b, ",");
        put_json_string(&b, it->name);
        spk_text_puts(&b, ":{\"dtype\":\"");
        spk_text_puts(&b, st_dtype(t->dtype));
        spk_text_puts(&b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, "%s%" PRId64, d ? "," : "", t->shape[d]);
            spk_text_puts(&b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", offset, offset + bytes);
        spk_text_puts(&b, num);
        offset += bytes;
    }
    spk_text_puts(&b, "}");
    while (!b.failed && b.len % 8)
        spk_text_puts(&b, " ");
    if (b.failed) {
        free(b.data);
        free(order);
        return spk_fail("%s: out of memory building the header", path);
    }

    spk_file_out *out = spk_file_out_open(path);
    if (!out) {
        free(b.data);
        free(order);
        return -1;
    }
    FILE *f = spk_file_out_stream(out);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)b.len >> (8 * i));
    bool ok = fwrite(len, 1, 8, f) == 8 && fwrite(b.data, 1, b.len, f) == b.len;
    for (size_t k = 0; ok && k < count; k++) {
        spk_tensor *c = spk_tensor_contiguous(list->items[order[k]].tensor);
        if (!c) {
            ok = false;
            break;
        }
        size_t bytes = (size_t)spk_tensor_numel(c) * spk_dtype_size(c->dtype);
        ok = bytes == 0 || fwrite(spk_tensor_data(c), 1, bytes, f) == bytes;
        spk_tensor_free(c);
    }
    free(b.data);
    free(order);
    if (!ok && !ferror(f)) { /* out of memory copying a tensor */
        spk_file_out_discard(out);
        return spk_fail("%s: out of memory writing it (the file is unchanged)", path);
    }
    return spk_file_out_commit(out); /* a failed write left the stream's error set: refused there */
}
