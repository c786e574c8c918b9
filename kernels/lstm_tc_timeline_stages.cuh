/* The stages of the tensor-core recurrence's step (kernels/lstm_tc.cu), one
 * list per form, each stage spelled here only: the kernel's timeline build
 * stamps them (kernels/lstm_tc_layout.cuh includes this file) and
 * lua/spk/tensor_core.lua reads their names from here. */
#ifndef SPK_LSTM_TC_TIMELINE_STAGES_CUH
#define SPK_LSTM_TC_TIMELINE_STAGES_CUH

/* ---- the step's stages, as the timeline build stamps them ----------------------
 * X(NAME, "name") in the order a step runs them (kernels/spk_timeline.cuh: the
 * kernel stamps mark <list>_<NAME> + 1 where a stage ends). gates: this
 * step's x·Wᵀ from its cp.async stage; wait: the mbarrier wait for h; products:
 * the mmas (loads of h's fragments included) and the pre-activations; cell:
 * the gather of a unit's gates, the cells, h to the output; publish: h split
 * and pushed into every block; fetch: the x·Wᵀ of a step ahead (at the step's
 * end, or with FETCH_EARLY right after the gates, before the wait: the _EARLY
 * lists). Two row phases: the second phase's stages end in _2. */
#define TC_STAGES(X) X(GATES, "gates") X(WAIT, "wait") X(PRODUCTS, "products") X(CELL, "cell") X(PUBLISH, "publish") X(FETCH, "fetch")
#define TC_PHASED_STAGES(X)                                                                                            \
    X(GATES, "gates") X(WAIT, "wait") X(PRODUCTS, "products") X(CELL, "cell") X(PUBLISH, "publish")                  \
        X(WAIT_2, "wait_2") X(PRODUCTS_2, "products_2") X(CELL_2, "cell_2") X(PUBLISH_2, "publish_2")                  \
            X(FETCH, "fetch")
#define TC_EARLY_STAGES(X) X(GATES, "gates") X(FETCH, "fetch") X(WAIT, "wait") X(PRODUCTS, "products") X(CELL, "cell") X(PUBLISH, "publish")
#define TC_EARLY_PHASED_STAGES(X)                                                                                      \
    X(GATES, "gates") X(FETCH, "fetch") X(WAIT, "wait") X(PRODUCTS, "products") X(CELL, "cell")                      \
        X(PUBLISH, "publish") X(WAIT_2, "wait_2") X(PRODUCTS_2, "products_2") X(CELL_2, "cell_2")                     \
            X(PUBLISH_2, "publish_2")
#define TC_STAGE_ENTRY(name, text) TC_STAGE_##name,
#define TC_PHASED_STAGE_ENTRY(name, text) TC_PHASED_STAGE_##name,
#define TC_EARLY_STAGE_ENTRY(name, text) TC_EARLY_STAGE_##name,
#define TC_EARLY_PHASED_STAGE_ENTRY(name, text) TC_EARLY_PHASED_STAGE_##name,
enum { TC_STAGES(TC_STAGE_ENTRY) TC_STAGE_COUNT };
enum { TC_PHASED_STAGES(TC_PHASED_STAGE_ENTRY) TC_PHASED_STAGE_COUNT };
enum { TC_EARLY_STAGES(TC_EARLY_STAGE_ENTRY) TC_EARLY_STAGE_COUNT };
enum { TC_EARLY_PHASED_STAGES(TC_EARLY_PHASED_STAGE_ENTRY) TC_EARLY_PHASED_STAGE_COUNT };

#endif
