// Small kernels the GPU specs use to check the runtime: a plain launch
// (saxpy), a cooperative launch with a grid-wide barrier, a cluster launch
// with cluster.sync() and distributed shared memory (sm_90+), and a kernel
// that stays busy for a given time before reading its input (to check that
// device memory outlives the work queued on it).
#include <cooperative_groups.h>

#include "selftest.cuh"

namespace cg = cooperative_groups;

#ifndef SELFTEST_SCALE
#define SELFTEST_SCALE 1.0f
#endif

// y[i] = a * x[i] + y[i] (times SELFTEST_SCALE, a macro to test defines).
extern "C" __global__ void saxpy(unsigned n, float a, const float *x, float *y)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = SELFTEST_SCALE * spk_selftest_axpy(a, x[i], y[i]);
}

// Every block adds its index into partial[blockIdx]; after a grid-wide barrier
// block 0 sums the partials, so out[0] = sum of block indices only when the
// barrier really waited for every block. out[1] counts blocks that passed.
extern "C" __global__ void grid_sync_sum(unsigned *partial, unsigned *out)
{
    cg::grid_group grid = cg::this_grid();
    if (threadIdx.x == 0)
        partial[blockIdx.x] = blockIdx.x;
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned sum = 0;
        for (unsigned b = 0; b < gridDim.x; b++)
            sum += partial[b];
        out[0] = sum;
    }
    if (threadIdx.x == 0)
        atomicAdd(&out[1], 1u);
}

// Launched with a cluster dimension: each block stores its cluster rank in
// shared memory, the cluster synchronises, and each block reads the rank of
// the next block of its cluster through distributed shared memory.
// out[3 * block + 0] = rank, [1] = cluster size, [2] = the neighbour's rank.
extern "C" __global__ void cluster_ring(unsigned *out)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    __shared__ unsigned rank_slot;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    unsigned size = cluster.num_blocks();
    if (threadIdx.x == 0)
        rank_slot = rank;
    cluster.sync();
    if (threadIdx.x == 0) {
        unsigned *neighbour = cluster.map_shared_rank(&rank_slot, (rank + 1) % size);
        out[3 * blockIdx.x + 0] = rank;
        out[3 * blockIdx.x + 1] = size;
        out[3 * blockIdx.x + 2] = *neighbour;
    }
    cluster.sync(); // keep shared memory alive until every neighbour has read it
#else
    if (threadIdx.x == 0)
        out[3 * blockIdx.x] = 0xffffffffu; // no clusters before sm_90
#endif
}

// Spins for `cycles` clock cycles, then copies x to y: the copy reads x long
// after the launch returned on the host.
extern "C" __global__ void delayed_copy(unsigned n, const float *x, float *y, unsigned long long cycles)
{
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = x[i];
}

// Fills x[i] = value (used to overwrite memory the allocator may hand out again).
extern "C" __global__ void fill(unsigned n, float value, float *x)
{
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = value;
}
