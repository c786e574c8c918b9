/* Cancelling long computations. One process-wide flag: whoever owns the
 * user's interrupt (the spk program's SIGINT handler) requests cancellation,
 * and the long loops of the C layers poll it, stop, and fail with the message
 * "interrupted" (status -1 or NULL, as any other error). The core knows
 * nothing of signals: setting and clearing the flag is the caller's policy.
 *
 * Loops poll once per unit of work that takes well under 100 ms (a recurrence
 * step, a block of rows, a chunk of a file), so a request takes effect within
 * that bound. A cancelled call returns no result (what it allocated is freed);
 * state it advanced on the way stays advanced (a generator's draws). */
#ifndef SPK_CANCEL_H
#define SPK_CANCEL_H

#include <stdbool.h>
#include <stdint.h>

/* Sets the flag. Async-signal-safe (a lock-free atomic store), callable from
 * any thread. */
void spk_cancel_request(void);

/* Clears the flag (before the next computation the user starts). */
void spk_cancel_reset(void);

/* Whether cancellation was requested (a relaxed atomic load: cheap enough to
 * call in an inner loop's outer iterations). */
bool spk_cancel_requested(void);

/* 0, or -1 with the message "interrupted" when cancellation was requested.
 * Call it on the thread that reports the error (the message is per thread). */
int spk_cancel_check(void);

/* For element loops: polls only when i is a multiple of SPK_CANCEL_EVERY, so
 * the check costs nothing measurable per element. */
#define SPK_CANCEL_EVERY ((int64_t)1 << 16)
static inline bool spk_cancel_due(int64_t i)
{
    return (i & (SPK_CANCEL_EVERY - 1)) == 0 && spk_cancel_requested();
}

/* File readers read large data in chunks of this many bytes, polling between
 * them (16 MiB: tens of milliseconds even from a slow disk's page cache). */
#define SPK_READ_CHUNK ((size_t)16 << 20)

#endif
