// C = alpha * op(A) op(B) + beta * C in split-TF32 arithmetic ("3xtf32") on
// the tensor cores (mma.sync m16n8k8, compute capability 8.0 and up).
//
// Each operand is split into a big and a small TF32 part, x = hi + lo with
// hi = x rounded to TF32 (10 mantissa bits) and lo = x - hi (exact in FP32)
// rounded to TF32, and a product is hi*hi + hi*lo + lo*hi (lo*lo, about
// 2^-22 of it, is dropped). Every TF32 product is exact in FP32, so what
// could cost accuracy is the sum: the tensor core adds the products of an
// mma and its accumulator after aligning them to the largest, truncating the
// bits below (no rounding). Summed into one long-running accumulator, those
// truncations are biased and add up with K. So the three mmas of each k-slice
// of 8 (SPK_GEMM_SLICE_STEPS slices) start from zero, small parts first (the
// big product is added last, into a sum of small terms), and the slice's sum
// is added to the FP32 accumulator with an ordinary rounded FADD: the
// truncation only ever cuts bits of a short slice, never of the running sum.
//
// Layout. Element (i, p) of op(A) is a[i*a_sm + p*a_sk] (+ batch*a_sb) and
// element (p, j) of op(B) is b[j*b_sn + p*b_sk] (+ batch*b_sb), strides in
// floats, so any transpose is the same kernel. vec_a / vec_b = 1 says the
// operand's k stride is 1 and 16-byte chunks of its rows are aligned: tiles
// are then fetched with 16-byte cp.async, else element by element.
// C (i, j) is c[i*c_sm + j*c_sn] (+ batch*c_sb).
//
// Work split. The tile shape is kernels/gemm_3xtf32_config.cuh's: a block
// of SPK_GEMM_WARPS_M x SPK_GEMM_WARPS_N warps computes a BM x BN tile of C,
// BM = WARPS_M * WM * 16 and BN = WARPS_N * WN * 8 (blockIdx.x: columns, so the blocks that share a row tile
// of A run together; blockIdx.y: rows; blockIdx.z: the matrix of a batch);
// each warp owns WM x WN mma tiles of 16 x 8. K goes in tiles of 32 through
// SPK_GEMM_STAGES shared-memory stages, the next ones loading with cp.async
// while one is used.
#include "gemm_3xtf32_config.cuh"
#include "gemm_3xtf32_tma.cuh"
static_assert(SPK_GEMM_BK % (8 * SPK_GEMM_SLICE_STEPS) == 0, "a k-tile holds whole slices");
static_assert((SPK_GEMM_BM * SPK_GEMM_BK / 4) % SPK_GEMM_THREADS == 0 &&
                  (SPK_GEMM_BN * SPK_GEMM_BK / 4) % SPK_GEMM_THREADS == 0,
              "every thread loads the same number of 16-byte chunks");

// x = hi + lo: hi is x rounded to TF32 (half an ulp added to the magnitude,
// the 13 bits below TF32's mantissa cleared: round half away from zero, as
// cvt.rna, in two integer operations), lo = x - hi exactly. lo goes to the
// tensor core as it is: the mma reads the top 19 bits of a .tf32 operand, so
// lo is truncated to TF32 there, an error below 2^-21 of x.
static __device__ __forceinline__ void spk_split_tf32(float x, unsigned &hi, unsigned &lo)
{
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}

static __device__ __forceinline__ void spk_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2])
{
    // Not volatile: the compiler may interleave independent mmas.
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ void spk_cp_async16(float *smem, const float *gmem, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
                 "l"(gmem), "r"(valid ? 16 : 0)
                 : "memory");
}

static __device__ __forceinline__ void spk_cp_async4(float *smem, const float *gmem, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((unsigned)__cvta_generic_to_shared(smem)),
                 "l"(gmem), "r"(valid ? 4 : 0)
                 : "memory");
}

// ROWS rows of one operand from row0 and k-columns [k0, k0 + 32) into a
// stage (row r at r * LDS); outside the matrix the stage gets zeros.
template <int ROWS>
static __device__ __forceinline__ void spk_gemm_load_tile(float *stage, const float *base, int rows, int k,
                                                          long long s_row, long long s_k, bool vec, int row0,
                                                          int k0)
{
    if (vec) {
#pragma unroll
        for (int i = 0; i < (ROWS * SPK_GEMM_BK / 4) / SPK_GEMM_THREADS; i++) {
            int id = threadIdx.x + i * SPK_GEMM_THREADS;
            int r = id / (SPK_GEMM_BK / 4), c = (id % (SPK_GEMM_BK / 4)) * 4;
            bool valid = row0 + r < rows && k0 + c < k;
            const float *src = valid ? base + (long long)(row0 + r) * s_row + (k0 + c) : base;
            spk_cp_async16(stage + r * SPK_GEMM_LDS + c, src, valid);
        }
    } else {
#pragma unroll 4
        for (int i = 0; i < (ROWS * SPK_GEMM_BK) / SPK_GEMM_THREADS; i++) {
            int id = threadIdx.x + i * SPK_GEMM_THREADS;
            int r = id / SPK_GEMM_BK, c = id % SPK_GEMM_BK;
            bool valid = row0 + r < rows && k0 + c < k;
            const float *src = valid ? base + (long long)(row0 + r) * s_row + (long long)(k0 + c) * s_k : base;
            spk_cp_async4(stage + r * SPK_GEMM_LDS + c, src, valid);
        }
    }
}

// Both operands' k-tile kt into a stage, as one cp.async group (an empty
// group past the last tile keeps the group count uniform).
#define SPK_GEMM_LOAD_STAGE(stage, kt)                                                                             \
    do {                                                                                                           \
        if ((kt) < tiles) {                                                                                        \
            spk_gemm_load_tile<SPK_GEMM_BM>((stage), a, m, k, a_sm, a_sk, vec_a, row0, (kt) * SPK_GEMM_BK);       \
            spk_gemm_load_tile<SPK_GEMM_BN>((stage) + SPK_GEMM_BM * SPK_GEMM_LDS, b, n, k, b_sn, b_sk, vec_b, col0, \
                                            (kt) * SPK_GEMM_BK);                                                   \
        }                                                                                                          \
        asm volatile("cp.async.commit_group;" ::: "memory");                                                     \
    } while (0)

// One slice of SPK_GEMM_SLICE_STEPS k-steps from a stage, added to acc.
static __device__ __forceinline__ void spk_gemm_slice(float (&acc)[SPK_GEMM_WM][SPK_GEMM_WN][4], const float *as,
                                                      const float *bs, int kk, int g, int t)
{
    unsigned ah[SPK_GEMM_SLICE_STEPS][SPK_GEMM_WM][4], al[SPK_GEMM_SLICE_STEPS][SPK_GEMM_WM][4];
    unsigned bh[SPK_GEMM_SLICE_STEPS][SPK_GEMM_WN][2], bl[SPK_GEMM_SLICE_STEPS][SPK_GEMM_WN][2];
#pragma unroll
    for (int q = 0; q < SPK_GEMM_SLICE_STEPS; q++) {
#pragma unroll
        for (int j = 0; j < SPK_GEMM_WN; j++) {
            const float *p = bs + (j * 8 + g) * SPK_GEMM_LDS + kk + 8 * q + t;
            spk_split_tf32(p[0], bh[q][j][0], bl[q][j][0]);
            spk_split_tf32(p[4], bh[q][j][1], bl[q][j][1]);
        }
#pragma unroll
        for (int i = 0; i < SPK_GEMM_WM; i++) {
            const float *p = as + (i * 16 + g) * SPK_GEMM_LDS + kk + 8 * q + t;
            spk_split_tf32(p[0], ah[q][i][0], al[q][i][0]);
            spk_split_tf32(p[8 * SPK_GEMM_LDS], ah[q][i][1], al[q][i][1]);
            spk_split_tf32(p[4], ah[q][i][2], al[q][i][2]);
            spk_split_tf32(p[8 * SPK_GEMM_LDS + 4], ah[q][i][3], al[q][i][3]);
        }
    }
    // Pass by pass over the tiles, so that the mmas issued back to back are
    // independent (a tile's three are a chain).
    float d[SPK_GEMM_WM][SPK_GEMM_WN][4];
#pragma unroll
    for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
        for (int j = 0; j < SPK_GEMM_WN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                d[i][j][e] = 0.0f;
#pragma unroll
    for (int q = 0; q < SPK_GEMM_SLICE_STEPS; q++) {
#pragma unroll
        for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
            for (int j = 0; j < SPK_GEMM_WN; j++)
                spk_mma_tf32(d[i][j], al[q][i], bh[q][j]);
#pragma unroll
        for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
            for (int j = 0; j < SPK_GEMM_WN; j++)
                spk_mma_tf32(d[i][j], ah[q][i], bl[q][j]);
#pragma unroll
        for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
            for (int j = 0; j < SPK_GEMM_WN; j++)
                spk_mma_tf32(d[i][j], ah[q][i], bh[q][j]);
    }
#pragma unroll
    for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
        for (int j = 0; j < SPK_GEMM_WN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] += d[i][j][e];
}

extern "C" __global__ void __launch_bounds__(SPK_GEMM_THREADS, SPK_GEMM_MIN_BLOCKS)
spk_gemm_3xtf32(int m, int n, int k, const float *a, long long a_sm, long long a_sk, long long a_sb, int vec_a,
                const float *b, long long b_sn, long long b_sk, long long b_sb, int vec_b, float *c, long long c_sm,
                long long c_sn, long long c_sb, float alpha, float beta)
{
    extern __shared__ __align__(16) float spk_gemm_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int row0 = blockIdx.y * SPK_GEMM_BM, col0 = blockIdx.x * SPK_GEMM_BN;
    const int wr = (warp / SPK_GEMM_WARPS_N) * (SPK_GEMM_WM * 16), wc = (warp % SPK_GEMM_WARPS_N) * (SPK_GEMM_WN * 8);
    a += (long long)blockIdx.z * a_sb;
    b += (long long)blockIdx.z * b_sb;
    c += (long long)blockIdx.z * c_sb;

    float acc[SPK_GEMM_WM][SPK_GEMM_WN][4];
#pragma unroll
    for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
        for (int j = 0; j < SPK_GEMM_WN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    const int tiles = (k + SPK_GEMM_BK - 1) / SPK_GEMM_BK;
#pragma unroll
    for (int s = 0; s < SPK_GEMM_STAGES - 1; s++)
        SPK_GEMM_LOAD_STAGE(spk_gemm_smem + s * SPK_GEMM_STAGE_FLOATS, s);

    for (int kt = 0; kt < tiles; kt++) {
        // Tile kt has landed (at most STAGES - 2 later groups in flight), and
        // every warp is done with the stage the next load overwrites.
        asm volatile("cp.async.wait_group %0;" ::"n"(SPK_GEMM_STAGES - 2) : "memory");
        __syncthreads();
        SPK_GEMM_LOAD_STAGE(spk_gemm_smem + ((kt + SPK_GEMM_STAGES - 1) % SPK_GEMM_STAGES) * SPK_GEMM_STAGE_FLOATS,
                            kt + SPK_GEMM_STAGES - 1);
        const float *cur = spk_gemm_smem + (kt % SPK_GEMM_STAGES) * SPK_GEMM_STAGE_FLOATS;
        const float *as = cur + wr * SPK_GEMM_LDS, *bs = cur + (SPK_GEMM_BM + wc) * SPK_GEMM_LDS;
#pragma unroll
        for (int kk = 0; kk < SPK_GEMM_BK; kk += 8 * SPK_GEMM_SLICE_STEPS)
            spk_gemm_slice(acc, as, bs, kk, g, t);
    }

    // acc[i][j][0..1]: row g, columns 2t and 2t + 1 of tile (i, j); [2..3]: row g + 8.
#pragma unroll
    for (int i = 0; i < SPK_GEMM_WM; i++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            int r = row0 + wr + i * 16 + g + half * 8;
            if (r >= m)
                continue;
#pragma unroll
            for (int j = 0; j < SPK_GEMM_WN; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int col = col0 + wc + j * 8 + 2 * t + e;
                    if (col < n) {
                        float *out = c + (long long)r * c_sm + (long long)col * c_sn;
                        float v = alpha * acc[i][j][half * 2 + e];
                        *out = beta == 0.0f ? v : v + beta * *out;
                    }
                }
        }
}

// hi[i] + lo[i] = x[i], each part TF32 (kernels/gemm_3xtf32_tma.cuh's
// spk_tf32_split_value, as the host computes it): an operand split once for
// the TMA form (kernels/gemm_3xtf32_tma.cu), which reads B's parts as they are.
extern "C" __global__ void spk_tf32_split(const float *x, float *hi, float *lo, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        spk_tf32_split_value(x[i], &hi[i], &lo[i]);
}
