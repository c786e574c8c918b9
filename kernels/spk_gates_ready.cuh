// Streamed gates: a layer's input projections made by blocks of its
// recurrence's own launch (kernels/lstm_project_stages.cuh) instead of by a
// GEMM before it. The projecting blocks count, for each direction and each group of SPK_GATES_READY_ROWS packed
// gate rows, the steps (in the order the direction's recurrence takes them:
// t = s forward, t = steps - 1 - s reverse) whose x·Wᵀ of those rows they have
// written to the gates buffer for every batch row: ready[direction * groups +
// group], groups = 4H / SPK_GATES_READY_ROWS, zero at the start of a forward
// pass, raised by a release store after the rows' writes. A recurrence lane reads
// the gates of step s only after it has seen a count above s (an acquire
// load), and keeps the count it saw, so a projection that runs ahead costs
// the recurrence one comparison a step (its wait: kernels/lstm_cluster_stages.cuh).
// (Plain C and C++: the constants; the load and store need CUDA.)
#ifndef SPK_GATES_READY_CUH
#define SPK_GATES_READY_CUH

#define SPK_GATES_READY_ROWS 16 /* packed gate rows a ready count covers: four units' gates */
/* Rows of x (steps times batch rows) a stage of the projection takes at
 * least: 16 steps at batch 1, one step from batch 16 up. */
#define SPK_PROJECT_STREAM_STAGE_ROWS 16
#define SPK_PROJECT_STREAM_STAGE_STEPS(batch)                                                                      \
    ((batch) >= SPK_PROJECT_STREAM_STAGE_ROWS ? 1 : SPK_PROJECT_STREAM_STAGE_ROWS / (batch))
/* Stages of x the projection holds in shared memory: RING - 1 loads in flight. */
#define SPK_PROJECT_STREAM_RING 4

#ifdef __CUDACC__
__device__ __forceinline__ unsigned spk_gates_ready_load(const unsigned *count)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
    return v;
}

__device__ __forceinline__ void spk_gates_ready_store(unsigned *count, unsigned v)
{
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(count), "r"(v) : "memory");
}

#endif

#endif
