/* Reading the text of a file header (the .npy dict, the safetensors JSON):
 * the blanks between tokens and the one-character tokens, from p up to end. */
#ifndef SPK_CORE_SCAN_H
#define SPK_CORE_SCAN_H

#include <stdbool.h>

/* p past any spaces, tabs and line ends. */
static inline const char *spk_scan_blanks(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Past the blanks, whether c comes next; *p moves past the blanks, and past
 * c where it does. */
static inline bool spk_scan_accept(const char **p, const char *end, char c)
{
    *p = spk_scan_blanks(*p, end);
    if (*p < end && **p == c) {
        (*p)++;
        return true;
    }
    return false;
}

#endif
