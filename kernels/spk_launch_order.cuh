/* Programmatic dependent launch (compute capability 9.0 and up): a kernel the
 * host launches with an early start (spk_launch_config.early_start) may be
 * scheduled while the kernel before it in the stream still runs, once every
 * block of that kernel called spk_let_next_start() (or ended). Its own work
 * that reads nothing an earlier kernel writes (the weights' loads, shared
 * memory's setup) then runs under the earlier kernel's tail; it calls
 * spk_wait_for_previous() before its first load or store of a buffer an
 * earlier kernel writes or reads: that returns once the kernel before it has
 * ended and its writes are visible. Without an early start, or below sm_90,
 * both are no-ops. */
#ifndef SPK_LAUNCH_ORDER_CUH
#define SPK_LAUNCH_ORDER_CUH

static __device__ __forceinline__ void spk_let_next_start()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

static __device__ __forceinline__ void spk_wait_for_previous()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

#endif
