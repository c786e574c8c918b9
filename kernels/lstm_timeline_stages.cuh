/* The stages of a step of the built-in recurrence kernels, as their timeline
 * builds (SPK_TIMELINE=1, kernels/spk_timeline.cuh) stamp them, in one header
 * that the kernels and their hosts (src/lstm/cluster.c, src/lstm/persistent.c)
 * both include, so the stamps and their names cannot drift apart. Each list
 * is X(NAME, "name") in the order a step runs its stages; the kernel stamps
 * mark <PREFIX>_<NAME> + 1 where a stage ends, the host names the columns
 * from the strings. docs/timeline.md says where each stage begins and ends.
 * (Plain C and C++: enums and macros only.) */
#ifndef SPK_LSTM_TIMELINE_STAGES_H
#define SPK_LSTM_TIMELINE_STAGES_H

/* kernels/lstm_cluster.cu with one row phase. wait: the mbarrier wait for this
 * step's h (and thread 0's re-arm); gates: this step's x·Wᵀ from its cp.async
 * stage (nothing with the gates one step ahead in a register); dot: the partial
 * dot products; reduce: their reduction over the chunk lanes (one gate row a
 * thread: and the gather of the unit's four gates); cell: the activations, c
 * and h; publish: h pushed into every block (the last step: to the output);
 * fetch: h to the output and the x·Wᵀ of a step ahead (not at the last step).
 * The wait is for every block's publish of the previous step. */
#define SPK_CLUSTER_STAGES(X)                                                                                          \
    X(WAIT, "wait") X(GATES, "gates") X(DOT, "dot") X(REDUCE, "reduce") X(CELL, "cell") X(PUBLISH, "publish")          \
        X(FETCH, "fetch")
/* The same with two row phases: each phase waits, computes and publishes its
 * half of the rows (the second's stages end in _2), the gates are taken in the
 * first; wait_2 is for every block's publish_2 of the previous step. */
#define SPK_CLUSTER_PHASED_STAGES(X)                                                                                   \
    X(WAIT, "wait") X(GATES, "gates") X(DOT, "dot") X(REDUCE, "reduce") X(CELL, "cell") X(PUBLISH, "publish")          \
        X(WAIT_2, "wait_2") X(DOT_2, "dot_2") X(REDUCE_2, "reduce_2") X(CELL_2, "cell_2")                            \
            X(PUBLISH_2, "publish_2") X(FETCH, "fetch")
/* kernels/lstm_cluster_baseline.cu. A step starts where the previous one
 * published its h: fetch: the cluster barrier's arrive and the next x·Wᵀ
 * loads (step 1: the first loads); wait: the barrier's wait, until every block
 * arrived (step 1: h zeroed and the first cluster barrier); dot: the partial dot
 * products; reduce: their reduce-scatter over the chunk lanes into the block's
 * pre-activations; sync: the block barrier; cell: the cells; publish: h to the
 * output and into every block. The wait is for every block's publish of the
 * previous step. */
#define SPK_CLUSTER_BASELINE_STAGES(X)                                                                                 \
    X(FETCH, "fetch") X(WAIT, "wait") X(DOT, "dot") X(REDUCE, "reduce") X(SYNC, "sync") X(CELL, "cell")               \
        X(PUBLISH, "publish")
/* kernels/lstm_recurrence.cu. wait: the gather of h of the previous step
 * (polls of the flagged words until they match, into shared memory) and the
 * block barrier after it; fetch: the next step's x·Wᵀ loads issued; dot: the
 * partial dot products; reduce: their reduction over the chunk lanes and the
 * gather of a unit's four gates; cell: the activations, c and h; publish: h to
 * the output and its flagged word to the exchange. The wait is for every
 * block's publish of the previous step (the blocks of its tile). */
#define SPK_RECURRENCE_STAGES(X)                                                                                       \
    X(WAIT, "wait") X(FETCH, "fetch") X(DOT, "dot") X(REDUCE, "reduce") X(CELL, "cell") X(PUBLISH, "publish")

#define SPK_CLUSTER_STAGE_ENTRY(name, text) SPK_CLUSTER_##name,
#define SPK_CLUSTER_PHASED_STAGE_ENTRY(name, text) SPK_CLUSTER_PHASED_##name,
#define SPK_CLUSTER_BASELINE_STAGE_ENTRY(name, text) SPK_CLUSTER_BASELINE_##name,
#define SPK_RECURRENCE_STAGE_ENTRY(name, text) SPK_RECURRENCE_##name,
enum { SPK_CLUSTER_STAGES(SPK_CLUSTER_STAGE_ENTRY) SPK_CLUSTER_STAGE_COUNT };
enum { SPK_CLUSTER_PHASED_STAGES(SPK_CLUSTER_PHASED_STAGE_ENTRY) SPK_CLUSTER_PHASED_STAGE_COUNT };
enum { SPK_CLUSTER_BASELINE_STAGES(SPK_CLUSTER_BASELINE_STAGE_ENTRY) SPK_CLUSTER_BASELINE_STAGE_COUNT };
enum { SPK_RECURRENCE_STAGES(SPK_RECURRENCE_STAGE_ENTRY) SPK_RECURRENCE_STAGE_COUNT };

#endif
