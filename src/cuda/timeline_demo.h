/* The timeline demo (kernels/timeline_demo.cu): a small cluster recurrence
 * instrumented with the step timeline, run the way a plan runs a recurrence
 * kernel: weights on the device, the plain build and the timeline build
 * (SPK_TIMELINE=1), a forward with or without a recording, timed launches.
 * It is what experiments/step_timeline.lua and the GPU specs run until the
 * built-in kernels carry the stamps, and the model of their wiring
 * (docs/timeline.md). Running needs compute capability 9.0; compiling and
 * the checks need no device. Conventions as in runtime.h. */
#ifndef SPK_CUDA_TIMELINE_DEMO_H
#define SPK_CUDA_TIMELINE_DEMO_H

#include <stdbool.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/runtime.h"
#include "cuda/timeline.h"

#define SPK_TIMELINE_DEMO_KERNEL "spk_timeline_demo"

typedef struct spk_timeline_demo_shape {
    int cluster;   /* blocks a cluster: 2, 4 or 8 */
    int64_t batch; /* rows, in tiles of up to 8 (one cluster a tile and direction) */
    int64_t steps; /* steps of each direction */
} spk_timeline_demo_shape;

/* What a shape launches (needs no device). */
typedef struct spk_timeline_demo_geometry {
    int hidden;            /* units of the recurrence (the input's last dimension) */
    int threads;           /* a block */
    int tile_rows, tiles;  /* rows a cluster; clusters a direction */
    int blocks;            /* a direction: cluster * tiles; block b is rank b % cluster of tile b / cluster */
} spk_timeline_demo_geometry;

int spk_timeline_demo_check(const spk_timeline_demo_shape *shape, spk_timeline_demo_geometry *out);
/* The kernel's stages (kernels/timeline_demo_stages.cuh), the wait depending on the publish. */
const spk_timeline_stages *spk_timeline_demo_stages(void);
/* The kernel for `cluster` blocks a cluster, plain or the timeline build, for
 * `arch` ("sm_90"; NULL: the current device's). */
spk_module *spk_timeline_demo_compile(int cluster, bool timeline, const char *arch);

typedef struct spk_timeline_demo spk_timeline_demo;

/* weights: host f32 [2, hidden, hidden] (direction, unit, input unit). Needs
 * a device of compute capability 9.0. */
spk_timeline_demo *spk_timeline_demo_new(const spk_timeline_demo_shape *shape, const spk_tensor *weights);
void spk_timeline_demo_free(spk_timeline_demo *d);
const spk_timeline_demo_geometry *spk_timeline_demo_geometry_of(const spk_timeline_demo *d);

/* x host or device f32 [batch, steps, hidden] -> y [batch, steps, 2 * hidden]
 * on x's device. sel NULL: the plain build. Otherwise the timeline build
 * records sel (checked against the demo: 1 layer, its steps, blocks and
 * warps) and *stamps, *clock are the decoded stamps (spk_timeline_decode). */
spk_tensor *spk_timeline_demo_forward(spk_timeline_demo *d, const spk_tensor *x, const spk_timeline_selection *sel,
                                      spk_tensor **stamps, spk_timeline_clock *clock);
/* ms of `rounds` launches (CUDA events around each, after `warmup`), x on
 * the device: the plain build (timeline false), or the timeline build
 * recording sel (NULL: recording nothing, its stamps skipped). */
int spk_timeline_demo_time(spk_timeline_demo *d, const spk_tensor *x, bool timeline, const spk_timeline_selection *sel,
                           int rounds, int warmup, double *ms);

#endif
