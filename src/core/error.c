#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[SPK_ERROR_MAX];

static void set_message(const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
}

int spk_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return -1;
}

void *spk_fail_null(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return NULL;
}

void spk_error_prefix(const char *fmt, ...)
{
    char old[SPK_ERROR_MAX];
    memcpy(old, last_error, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof last_error - 2)
        return;
    /* Append ": <old message>", truncated to the buffer. */
    size_t at = (size_t)n, room = sizeof last_error - at - 1;
    size_t old_len = strlen(old);
    last_error[at++] = ':';
    last_error[at++] = ' ';
    room -= 2;
    if (old_len > room)
        old_len = room;
    memcpy(last_error + at, old, old_len);
    last_error[at + old_len] = '\0';
}

const char *spk_last_error(void)
{
    return last_error;
}

void spk_clear_error(void)
{
    last_error[0] = '\0';
}

void spk_error_shown_bytes(const char *p, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 5 < size; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\')
            out[k++] = (char)ch;
        else
            k += (size_t)snprintf(out + k, size - k, "\\x%02x", ch);
    }
    out[k] = '\0';
}
