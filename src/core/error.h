/* Error reporting for the C layers: a failing function returns a non-zero
 * status (or NULL) and leaves a message in a thread-local buffer, so callers
 * (the Lua bindings, the CLI, the C tests) decide how to surface it. */
#ifndef SPK_ERROR_H
#define SPK_ERROR_H

#include <stddef.h>

#define SPK_ERROR_MAX 1024

/* Sets the message (printf format) and returns -1, so `return spk_fail(...)`
 * reads naturally in functions that return a status. */
int spk_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Same, for functions that return a pointer. Returns NULL. */
void *spk_fail_null(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prefixes the current message with "context: " (e.g. a file name). */
void spk_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message set on this thread ("" if none). */
const char *spk_last_error(void);

void spk_clear_error(void);

/* The n bytes at p as a message shows them, NUL-terminated in out (size
 * bytes): printable ASCII as is, a backslash or anything else as \xNN, so a
 * message names the exact value. Stops early rather than overflow. */
void spk_error_shown_bytes(const char *p, size_t n, char *out, size_t size);

#endif
