#include "core/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL after them; false once failed. */
static bool room(spk_text *t, size_t n)
{
    if (t->failed)
        return false;
    if (t->len + n + 1 <= t->cap)
        return true;
    size_t cap = (t->cap + n + 1) * 2;
    char *d = realloc(t->data, cap);
    if (!d) {
        t->failed = true;
        return false;
    }
    t->data = d;
    t->cap = cap;
    return true;
}

void spk_text_put(spk_text *t, const char *s, size_t n)
{
    if (!room(t, n))
        return;
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

void spk_text_puts(spk_text *t, const char *s)
{
    spk_text_put(t, s, strlen(s));
}

void spk_text_printf(spk_text *t, const char *fmt, ...)
{
    /* Written straight into the room there is; where it does not fit, again
     * after growing. */
    while (!t->failed) {
        size_t left = t->cap - t->len;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(left ? t->data + t->len : NULL, left, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if ((size_t)n < left) {
            t->len += (size_t)n;
            return;
        }
        if (!room(t, (size_t)n))
            return;
    }
}
