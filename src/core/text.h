/* Text built up in memory (a file header, a tensor's printed form): appends
 * grow it, and running out of memory marks it failed instead of failing each
 * call, so a builder checks once at the end. data is NUL-terminated once
 * anything is added; the caller frees it. Start from {0}. */
#ifndef SPK_CORE_TEXT_H
#define SPK_CORE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct spk_text {
    char *data;
    size_t len, cap;
    bool failed;
} spk_text;

/* n bytes of s. */
void spk_text_put(spk_text *t, const char *s, size_t n);
/* The string s. */
void spk_text_puts(spk_text *t, const char *s);
/* As printf writes it. */
void spk_text_printf(spk_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
