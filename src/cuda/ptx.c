/* Kernel parameters from PTX text: see ptx.h. */
#include "cuda/ptx.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static bool is_name_char(char c) { return isalnum((unsigned char)c) || c == '_' || c == '$' || c == '.'; }

/* The text's end: `bytes` or its first NUL. */
static const char *text_end(const char *ptx, size_t bytes)
{
    const char *nul = memchr(ptx, '\0', bytes);
    return nul ? nul : ptx + bytes;
}

/* The next `.entry NAME` at or after p: *name and *len set, returns the
 * position after the name (NULL when there is none). */
static const char *next_entry(const char *text, const char *p, const char *end, const char **name, size_t *len)
{
    static const char word[] = ".entry";
    const size_t n = sizeof word - 1;
    for (; p + n < end; p++) {
        if (memcmp(p, word, n) != 0 || (p > text && !isspace((unsigned char)p[-1])) ||
            !isspace((unsigned char)p[n]))
            continue;
        const char *q = p + n;
        while (q < end && isspace((unsigned char)*q))
            q++;
        const char *start = q;
        while (q < end && is_name_char(*q))
            q++;
        if (q == start)
            continue;
        *name = start;
        *len = (size_t)(q - start);
        return q;
    }
    return NULL;
}

static size_t type_bytes(const char *type)
{
    if (strcmp(type, "pred") == 0)
        return 1;
    const char *digits = type + 1;
    int bits = atoi(digits);
    if (strchr("bsuf", type[0]) == NULL || bits < 8 || bits % 8 != 0)
        return 0;
    return (size_t)bits / 8;
}

char spk_ptx_type_class(const char *type)
{
    if (type[0] == 'f')
        return 'f';
    if (strcmp(type, "pred") == 0)
        return 'p';
    return 'i';
}

/* One parameter's declaration, text[0 .. n): ".param [.align N] [.ptr
 * [.space] [.align N]] .type name[[N]]". */
static int parse_param(const char *text, size_t n, const char *entry, int index, spk_ptx_param *out)
{
    char buf[512];
    if (n >= sizeof buf)
        return spk_fail("kernel %s: parameter %d's PTX declaration is too long", entry, index + 1);
    memcpy(buf, text, n);
    buf[n] = '\0';
    memset(out, 0, sizeof *out);
    out->elements = 1;
    bool param = false, skip_next = false;
    for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (skip_next) {
            skip_next = false;
        } else if (strcmp(t, ".param") == 0) {
            param = true;
        } else if (strcmp(t, ".align") == 0) {
            skip_next = true;
        } else if (strcmp(t, ".ptr") == 0 || strcmp(t, ".global") == 0 || strcmp(t, ".shared") == 0 ||
                   strcmp(t, ".const") == 0 || strcmp(t, ".local") == 0) {
            continue;
        } else if (t[0] == '.' && !out->type[0]) {
            snprintf(out->type, sizeof out->type, "%s", t + 1);
        } else if (t[0] == '[') {
            out->elements = atoi(t + 1);
        } else if (!out->name[0]) {
            char *bracket = strchr(t, '[');
            if (bracket) {
                out->elements = atoi(bracket + 1);
                *bracket = '\0';
            }
            snprintf(out->name, sizeof out->name, "%s", t);
        }
    }
    size_t each = out->type[0] ? type_bytes(out->type) : 0;
    if (!param || each == 0 || out->elements < 1 || !out->name[0])
        return spk_fail("kernel %s: cannot read parameter %d's PTX declaration \"%.*s\"", entry, index + 1, (int)n,
                        text);
    out->size = each * (size_t)out->elements;
    return 0;
}

/* "a, b, c" of every entry name, into buf. */
static void list_entries(const char *ptx, const char *end, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t used = 0;
    const char *name, *p = ptx;
    size_t len;
    while ((p = next_entry(ptx, p, end, &name, &len)) && used + 1 < size) {
        int w = snprintf(buf + used, size - used, "%s%.*s", used ? ", " : "", (int)len, name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

int spk_ptx_entry_params(const char *ptx, size_t bytes, const char *entry, spk_ptx_param *out, int max, int *count)
{
    if (!ptx || !entry || !*entry)
        return spk_fail("ptx params: the PTX text or the kernel name is missing");
    const char *end = text_end(ptx, bytes), *name, *p = ptx;
    size_t len, want = strlen(entry);
    bool mangled = false;
    while ((p = next_entry(ptx, p, end, &name, &len))) {
        if (len == want && memcmp(name, entry, len) == 0)
            break;
        /* a C++ name keeps the source name inside its mangling: _Z<len><name>... */
        for (size_t i = 0; i + want <= len && !mangled; i++)
            mangled = memcmp(name + i, entry, want) == 0 && name[0] == '_' && name[1] == 'Z';
    }
    if (!p) {
        char entries[512];
        list_entries(ptx, end, entries, sizeof entries);
        return spk_fail("the module has no kernel \"%s\" (its kernels: %s)%s", entry, entries[0] ? entries : "none",
                        mangled ? "; a C++ name is mangled: declare the kernel extern \"C\"" : "");
    }
    while (p < end && isspace((unsigned char)*p))
        p++;
    if (p >= end || *p != '(') {
        *count = 0; /* `.entry k` without a list: no parameters */
        return 0;
    }
    const char *close = memchr(p, ')', (size_t)(end - p));
    if (!close)
        return spk_fail("kernel %s: its PTX parameter list does not end", entry);
    int n = 0;
    for (const char *q = p + 1; q < close;) {
        const char *comma = memchr(q, ',', (size_t)(close - q));
        const char *stop = comma ? comma : close;
        const char *s = q;
        while (s < stop && isspace((unsigned char)*s))
            s++;
        if (s < stop) {
            if (n >= max)
                return spk_fail("kernel %s has more than %d parameters", entry, max);
            if (parse_param(s, (size_t)(stop - s), entry, n, &out[n]) != 0)
                return -1;
            n++;
        }
        q = stop + 1;
    }
    *count = n;
    return 0;
}
