// C = alpha * A · Bᵀ + beta * C in split-TF32 arithmetic on Hopper's
// warpgroup tensor-core instructions (wgmma, compute capability 9.0a;
// compiled for another target the kernel only traps, and the host launches it
// on 9.0 alone): the
// same arithmetic as kernels/gemm_3xtf32.cu (x = hi + lo, three products a
// term, small ones first, each slice summed from zero by the tensor core and
// added to the FP32 accumulator with a rounded FADD; see its comment), at the
// rate of wgmma instead of mma.sync.
//
// Layout. Both operands run along k with unit stride (A [m, k] rows a_sm
// apart, B [n, k] rows b_sn apart, 16-byte aligned, k a multiple of 4: the
// host checks it and takes kernels/gemm_3xtf32.cu otherwise); C (i, j) is
// c[i*c_sm + j*c_sn]; a, b and c step by a_sb, b_sb, c_sb between the
// matrices of a batch (blockIdx.z).
//
// Work split. A block of two warpgroups computes a 128 x 128 tile of C
// (blockIdx.x: columns, blockIdx.y: rows), warpgroup w its rows 64w..64w+63
// with one m64n128k8 wgmma per part and k-step. K goes in tiles of 32:
//   1. cp.async copies the tile's raw FP32 rows of A and B into a staging
//      slot (two slots, the next tile's copy in flight during this one);
//   2. every thread splits its share of a staged tile into big and small
//      parts, stored as wgmma's operands: the canonical K-major layout without
//      swizzle, core matrices of 8 rows x 16 bytes, 128 bytes each, k-chunks of
//      4 floats 128 bytes apart (the descriptor's leading offset), row groups
//      of 8 1024 bytes apart (its stride offset); two such buffers, so the
//      next tile is split while this one's wgmmas run;
//   3. per slice of SLICE_STEPS k-steps: wgmma small x big, big x small and
//      big x big into a zeroed accumulator, and while they run the previous
//      slice's accumulator (the other of two) is added to acc.
#include "gemm_3xtf32_config.cuh"
#define SPK_WG_BK SPK_GEMM_BK
#define SPK_WG_STAGE_LDS SPK_GEMM_LDS
#define SPK_WG_SLICES (SPK_WG_BK / (8 * SPK_WG_SLICE_STEPS))
static_assert(SPK_WG_BK % (8 * SPK_WG_SLICE_STEPS) == 0 && (!SPK_WG_OVERLAP || SPK_WG_SLICES % 2 == 0),
              "a k-tile holds whole slices, an even number where two accumulators alternate");

static __device__ __forceinline__ unsigned spk_wg_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// A shared-memory matrix descriptor: K-major, no swizzle, leading offset
// (between the core matrices of a k-step) 128 bytes, stride offset (between
// 8-row groups) 1024 bytes.
#ifndef SPK_WG_LBO
#define SPK_WG_LBO 128
#endif
#ifndef SPK_WG_SBO
#define SPK_WG_SBO 1024
#endif
static __device__ __forceinline__ unsigned long long spk_wg_desc(unsigned addr)
{
    return (unsigned long long)((addr & 0x3ffff) >> 4) | ((unsigned long long)(SPK_WG_LBO >> 4) << 16) |
           ((unsigned long long)(SPK_WG_SBO >> 4) << 32);
}

static __device__ __forceinline__ void spk_wg_mma(float (&d)[64], unsigned long long da, unsigned long long db,
                                                  int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}

// Keeps the compiler from moving accesses of d across the wgmma fences.
static __device__ __forceinline__ void spk_wg_pin(float (&d)[64])
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

static __device__ __forceinline__ void spk_wg_cp16(float *smem, const float *gmem, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(spk_wg_smem_addr(smem)), "l"(gmem),
                 "r"(valid ? 16 : 0)
                 : "memory");
}

// k-tile kt of A's rows row0.. and B's rows col0.. into a staging slot, as one
// cp.async group (an empty group past the last tile keeps the count uniform).
static __device__ __forceinline__ void spk_wg_stage(float *slot, const float *a, const float *b, int m, int n, int k,
                                                    long long a_sm, long long b_sn, int row0, int col0, int kt,
                                                    int tiles)
{
    if (kt < tiles) {
        const int k0 = kt * SPK_WG_BK;
#pragma unroll
        for (int i = 0; i < ((SPK_WG_BM + SPK_WG_BN) * SPK_WG_BK / 4) / SPK_WG_THREADS; i++) {
            int id = threadIdx.x + i * SPK_WG_THREADS;
            int r = id / (SPK_WG_BK / 4), c = (id % (SPK_WG_BK / 4)) * 4;
            bool is_a = r < SPK_WG_BM;
            int row = is_a ? row0 + r : col0 + (r - SPK_WG_BM);
            const float *base = is_a ? a : b;
            bool valid = row < (is_a ? m : n) && k0 + c < k;
            const float *src = valid ? base + (long long)row * (is_a ? a_sm : b_sn) + (k0 + c) : base;
            spk_wg_cp16(slot + r * SPK_WG_STAGE_LDS + c, src, valid);
        }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
}

// x = hi + lo (see kernels/gemm_3xtf32.cu's spk_split_tf32).
static __device__ __forceinline__ void spk_wg_split(float x, unsigned &hi, unsigned &lo)
{
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}

// A staged tile into a buffer's four parts, in the core-matrix layout. A
// quarter warp takes 8 rows of one k-chunk: one whole core matrix.
static __device__ __forceinline__ void spk_wg_split_tile(float *buf, const float *slot)
{
#pragma unroll
    for (int i = 0; i < ((SPK_WG_BM + SPK_WG_BN) * SPK_WG_BK / 4) / SPK_WG_THREADS; i++) {
        int id = threadIdx.x + i * SPK_WG_THREADS;
        int op = id / (SPK_WG_BM * SPK_WG_BK / 4), rem = id % (SPK_WG_BM * SPK_WG_BK / 4);
        int r = (rem & 7) + ((rem >> 6) << 3), c = (rem >> 3) & 7;
        float4 v = *reinterpret_cast<const float4 *>(slot + (op * SPK_WG_BM + r) * SPK_WG_STAGE_LDS + c * 4);
        uint4 hi, lo;
        spk_wg_split(v.x, hi.x, lo.x);
        spk_wg_split(v.y, hi.y, lo.y);
        spk_wg_split(v.z, hi.z, lo.z);
        spk_wg_split(v.w, hi.w, lo.w);
        int at = ((r >> 3) * 8 + c) * 32 + (r & 7) * 4; /* floats */
        *reinterpret_cast<uint4 *>(buf + (2 * op) * SPK_WG_PART_FLOATS + at) = hi;
        *reinterpret_cast<uint4 *>(buf + (2 * op + 1) * SPK_WG_PART_FLOATS + at) = lo;
    }
    // Make the generic-proxy stores visible to wgmma's (async proxy) reads.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

extern "C" __global__ void __launch_bounds__(SPK_WG_THREADS, 1)
spk_gemm_3xtf32_wgmma(int m, int n, int k, const float *a, long long a_sm, long long a_sb, const float *b,
                      long long b_sn, long long b_sb, float *c, long long c_sm, long long c_sn, long long c_sb,
                      float alpha, float beta)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(128) float spk_wg_smem[];
    float *slots = spk_wg_smem, *bufs = spk_wg_smem + 2 * SPK_WG_STAGE_FLOATS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wg = warp >> 2;
    const int row0 = blockIdx.y * SPK_WG_BM, col0 = blockIdx.x * SPK_WG_BN;
    a += (long long)blockIdx.z * a_sb;
    b += (long long)blockIdx.z * b_sb;
    c += (long long)blockIdx.z * c_sb;
    const int tiles = (k + SPK_WG_BK - 1) / SPK_WG_BK;

    float acc[64], d0[64], d1[64]; /* d1: SPK_WG_OVERLAP's second accumulator */
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = d0[i] = d1[i] = 0.0f;

    spk_wg_stage(slots, a, b, m, n, k, a_sm, b_sn, row0, col0, 0, tiles);
    spk_wg_stage(slots + SPK_WG_STAGE_FLOATS, a, b, m, n, k, a_sm, b_sn, row0, col0, 1, tiles);
    asm volatile("cp.async.wait_group 1;" ::: "memory");
    __syncthreads();
    spk_wg_split_tile(bufs, slots);
    __syncthreads();

    for (int kt = 0; kt < tiles; kt++) {
        // Tile kt is split in buffer kt & 1 and its slot is free: copy tile kt + 2 into it.
        spk_wg_stage(slots + (kt & 1) * SPK_WG_STAGE_FLOATS, a, b, m, n, k, a_sm, b_sn, row0, col0, kt + 2, tiles);
        const float *buf = bufs + (kt & 1) * 4 * SPK_WG_PART_FLOATS;
        const unsigned a_hi = spk_wg_smem_addr(buf) + wg * 8 * 1024, a_lo = a_hi + SPK_WG_PART_FLOATS * 4;
        const unsigned b_hi = spk_wg_smem_addr(buf + 2 * SPK_WG_PART_FLOATS), b_lo = b_hi + SPK_WG_PART_FLOATS * 4;
#pragma unroll
        for (int s = 0; s < SPK_WG_SLICES; s++) {
            float(&cur)[64] = (SPK_WG_OVERLAP && (s & 1)) ? d1 : d0;
            float(&prev)[64] = (SPK_WG_OVERLAP && (s & 1)) ? d0 : d1;
            spk_wg_pin(cur);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
            for (int q = 0; q < SPK_WG_SLICE_STEPS; q++) {
                const unsigned off = (s * SPK_WG_SLICE_STEPS + q) * 256; /* two k-chunks of 128 bytes a k-step */
                spk_wg_mma(cur, spk_wg_desc(a_lo + off), spk_wg_desc(b_hi + off), q > 0);
                spk_wg_mma(cur, spk_wg_desc(a_hi + off), spk_wg_desc(b_lo + off), 1);
                spk_wg_mma(cur, spk_wg_desc(a_hi + off), spk_wg_desc(b_hi + off), 1);
            }
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            if (SPK_WG_OVERLAP) {
                // The slice before is done (zeros before the first): add it.
                asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
                spk_wg_pin(prev);
#pragma unroll
                for (int i = 0; i < 64; i++)
                    acc[i] += prev[i];
            }
            if (s == 0 && kt + 1 < tiles) {
                // While this slice runs: split tile kt + 1 into the other
                // buffer, whose last readers (tile kt - 1) every warpgroup
                // has waited for.
                asm volatile("cp.async.wait_group 1;" ::: "memory");
                __syncthreads();
                spk_wg_split_tile(bufs + ((kt + 1) & 1) * 4 * SPK_WG_PART_FLOATS,
                                  slots + ((kt + 1) & 1) * SPK_WG_STAGE_FLOATS);
            }
            if (!SPK_WG_OVERLAP) {
                asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
                spk_wg_pin(cur);
#pragma unroll
                for (int i = 0; i < 64; i++)
                    acc[i] += cur[i];
            }
        }
        // Tile kt + 1 is split and fenced for every warpgroup.
        __syncthreads();
    }
    if (SPK_WG_OVERLAP) {
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        float(&last)[64] = d1; /* the last slice of a tile: an even count, so odd */
        spk_wg_pin(last);
#pragma unroll
        for (int i = 0; i < 64; i++)
            acc[i] += last[i];
    }

    // acc[4j + e]: row 16 * (warp % 4) + g (e < 2) or + 8 (e >= 2), column 8j + 2t + (e & 1).
    const int g = lane >> 2, t = lane & 3;
    const int rbase = row0 + wg * 64 + (warp & 3) * 16 + g;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int r = rbase + (e >> 1) * 8, col = col0 + 8 * j + 2 * t + (e & 1);
            if (r < m && col < n) {
                float *out = c + (long long)r * c_sm + (long long)col * c_sn;
                float v = alpha * acc[4 * j + e];
                *out = beta == 0.0f ? v : v + beta * *out;
            }
        }
#else
    // wgmma exists on sm_90a alone; the host launches this kernel nowhere else.
    asm volatile("trap;");
#endif
}
