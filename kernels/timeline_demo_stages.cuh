/* The timeline demo kernel's stages and sizes, in one header that the kernel
 * (kernels/timeline_demo.cu) and its host (src/cuda/timeline_demo.c) both
 * include, so the stamps and their names cannot drift apart. */
#ifndef SPK_TIMELINE_DEMO_STAGES_H
#define SPK_TIMELINE_DEMO_STAGES_H

/* X(NAME, "name"): the stages of a step, in the order it runs them. The
 * kernel stamps mark SPK_TIMELINE_DEMO_<NAME> + 1 where a stage ends. */
#define SPK_TIMELINE_DEMO_STAGES(X)                                                                                    \
    X(WAIT, "wait")                                                                                                    \
    X(DOT, "dot")                                                                                                      \
    X(REDUCE, "reduce")                                                                                                \
    X(CELL, "cell")                                                                                                    \
    X(PUBLISH, "publish")

#define SPK_TIMELINE_DEMO_ENUM_ENTRY(name, text) SPK_TIMELINE_DEMO_##name,
enum { SPK_TIMELINE_DEMO_STAGES(SPK_TIMELINE_DEMO_ENUM_ENTRY) SPK_TIMELINE_DEMO_STAGE_COUNT };

/* Hidden units of the fake recurrence, k-chunks a unit's dot product is split
 * into (lanes a unit), and the most batch rows a cluster carries. */
#define SPK_TIMELINE_DEMO_HIDDEN 64
#define SPK_TIMELINE_DEMO_CHUNKS 8
#define SPK_TIMELINE_DEMO_MAX_ROWS 8

#endif
