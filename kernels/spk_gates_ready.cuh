// Streamed gates: a layer's input projections computed beside its recurrence
// (kernels/lstm_project_stages.cuh: blocks of the recurrence's own launch)
// instead of before it. The projection
// counts, for each direction and each group of SPK_GATES_READY_ROWS packed
// gate rows, the steps (in the order the direction's recurrence takes them:
// t = s forward, t = steps - 1 - s reverse) whose x·Wᵀ of those rows it has
// written to the gates buffer for every batch row: ready[direction * groups +
// group], groups = 4H / SPK_GATES_READY_ROWS, zero at the start of a forward
// pass, raised by a release store after the rows' writes. A recurrence reads
// the gates of step s only after it has seen a count above s (an acquire
// load), and keeps the count it saw, so a projection that runs ahead costs
// the recurrence one comparison a step. (Plain C and C++: the constant; the
// device functions need CUDA.)
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
#define SPK_GATES_READY_TIMEOUT_NS 1000000000ull /* a wait gives up after about a second */

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

// Returns once *count > s (seen: the count last read, kept by the caller);
// false if that took longer than SPK_GATES_READY_TIMEOUT_NS.
__device__ __forceinline__ bool spk_gates_ready_wait(const unsigned *count, int s, unsigned &seen)
{
    if (seen > (unsigned)s)
        return true;
    seen = spk_gates_ready_load(count);
    if (seen > (unsigned)s)
        return true;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        __nanosleep(64);
        seen = spk_gates_ready_load(count);
        if (seen > (unsigned)s)
            return true;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > SPK_GATES_READY_TIMEOUT_NS)
            return false;
    }
}
#endif

#endif
