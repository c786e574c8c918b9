// The cluster kernels' hardware primitives for sm_90 (Hopper), as PTX:
// cluster ranks and barriers, distributed shared memory stores, mbarriers
// with transaction counts, bulk asynchronous stores into a peer's shared
// memory, and cp.async. Included by kernels/lstm_cluster.cu and
// kernels/lstm_cluster_baseline.cu inside their sm_90 sections; every
// function is one or two instructions, named for what it does.
#ifndef SPK_CLUSTER_SYNC_CUH
#define SPK_CLUSTER_SYNC_CUH

#define EXCHANGE_TIMEOUT_NS 1000000000ull /* an mbarrier wait gives up after about a second */

// ---- cluster primitives (PTX ISA 7.8, sm_90) -------------------------------

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ unsigned cluster_blocks()
{
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

__device__ __forceinline__ unsigned dynamic_smem_bytes()
{
    unsigned n;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

__device__ __forceinline__ void cluster_arrive()
{
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait()
{
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// A shared::cta address of this block mapped to the same offset in block `rank`.
__device__ __forceinline__ unsigned map_rank(unsigned cta_address, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(cta_address), "r"(rank));
    return remote;
}

__device__ __forceinline__ void store_cluster(unsigned address, float v)
{
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(address), "f"(v) : "memory");
}

__device__ __forceinline__ void store_cluster4(unsigned address, float4 v)
{
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(address), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w)
                 : "memory");
}

// ---- mbarriers (PTX ISA 8.0, sm_90) ----------------------------------------

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbarrier_init_fence()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival (the phase's only one) that also expects `bytes` of transactions.
__device__ __forceinline__ void mbarrier_arm(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ bool mbarrier_try_wait(unsigned bar, unsigned parity)
{
    unsigned done;
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done != 0;
}

__device__ __forceinline__ unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Waits for the phase of `parity`; false after EXCHANGE_TIMEOUT_NS.
__device__ __forceinline__ bool mbarrier_wait(unsigned bar, unsigned parity)
{
    if (mbarrier_try_wait(bar, parity))
        return true;
    const unsigned long long start = global_ns();
    while (!mbarrier_try_wait(bar, parity))
        if (global_ns() - start > EXCHANGE_TIMEOUT_NS)
            return false;
    return true;
}

// 16 bytes into a peer's shared memory, counted on the peer's mbarrier.
__device__ __forceinline__ void store_async4(unsigned address, float4 v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                     address),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar)
                 : "memory");
}

// store_async4 where `p` holds, as one predicated instruction (no branch, so
// the warp does not diverge around it).
__device__ __forceinline__ void store_async4_if(bool p, unsigned address, float4 v, unsigned bar)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %6, 0;\n"
                 " @p st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n}" ::"r"(
                     address),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(bar), "r"((unsigned)p)
                 : "memory");
}

// 4 bytes into a block's shared memory (a peer's or this block's own), counted
// on that block's mbarrier.
__device__ __forceinline__ void store_async1(unsigned address, float v, unsigned bar)
{
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(address),
                 "f"(v), "r"(bar)
                 : "memory");
}

// store_async1 where `p` holds, as one predicated instruction.
__device__ __forceinline__ void store_async1_if(bool p, unsigned address, float v, unsigned bar)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.u32 p, %3, 0;\n"
                 " @p st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];\n}" ::"r"(address),
                 "f"(v), "r"(bar), "r"((unsigned)p)
                 : "memory");
}

// threadIdx.x read in volatile asm: the compiler keeps it in a register
// instead of reading the special register again where it is used.
__device__ __forceinline__ int thread_index_kept()
{
    unsigned t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return (int)t;
}

// ---- cp.async (sm_80+): the gates' stages --------------------------------

// 16 bytes of global memory into this thread's stage, bypassing L1.
__device__ __forceinline__ void copy_async16(float4 *stage, const float4 *source)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)__cvta_generic_to_shared(stage)),
                 "l"(__cvta_generic_to_global(source))
                 : "memory");
}

__device__ __forceinline__ void copy_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void copy_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

#endif
