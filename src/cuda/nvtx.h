/* NVTX ranges, so a profiler (Nsight Systems: `nsys profile build/spk run
 * ...`) shows the structure of a forward pass instead of anonymous kernels:
 * each layer, each direction's recurrence, the input projections, cuDNN's
 * forward call, as nested ranges in the domain "spk".
 *
 * NVTX 3 is header-only (the CUDA toolkit's include/nvtx3): the first range
 * looks for a tool's injection library ($NVTX_INJECTION64_PATH, which
 * profilers set) and, without one, every later call returns at once. So
 * nothing is linked, a machine without a GPU or profiler runs as before, and
 * ranges are on by default; $SPK_NVTX=0 (read once) turns them off.
 *
 * Ranges are pushed on the host thread that enqueues the work, so they time
 * the enqueue (and, under a profiler, join the kernels launched inside
 * them); work captured in a CUDA graph shows its ranges at capture.
 *
 * For tests, every push is also counted by name (at most SPK_NVTX_NAMES
 * distinct names; others count as "(other names)"), while ranges are on. */
#ifndef SPK_CUDA_NVTX_H
#define SPK_CUDA_NVTX_H

#include <stdbool.h>

#define SPK_NVTX_NAMES 64

/* Opens a range named `name` (copied by the tool; a pointer kept only for
 * counting, so pass a string literal or one of pushf's). */
void spk_nvtx_push(const char *name);
/* The same with a printf-style name ("layer 3"), at most 63 characters. */
void spk_nvtx_pushf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Closes the innermost open range. */
void spk_nvtx_pop(void);

/* Whether ranges are emitted ($SPK_NVTX unset or not "0", or as last set). */
bool spk_nvtx_enabled(void);
/* Turns ranges on or off from now on (an A/B of their cost in one process);
 * returns whether they were on, or -1 while a range is open. */
int spk_nvtx_set_enabled(bool on);
/* Test hooks: the i-th counted name and its pushes (0, or -1 past the end),
 * the ranges open now, and a fresh start of the counts. */
int spk_nvtx_count(int i, const char **name, long *count);
int spk_nvtx_depth(void);
void spk_nvtx_reset_counts(void);

#endif
