/* The configuration of the split-TF32 GEMM kernels (kernels/gemm_3xtf32.cu
 * and kernels/gemm_3xtf32_wgmma.cu), read by the kernels through NVRTC and by
 * their host (src/cuda/gemm_3xtf32.c) at build time, so tiles, threads and
 * shared memory are written once. Each tunable can be overridden with a
 * define (tools/gemm_3xtf32_check.lua times the variants); the values here
 * are the fastest measured on the H200 (docs/performance.md). Plain C
 * preprocessor only: it is included from C and CUDA C++. */
#ifndef SPK_GEMM_3XTF32_CONFIG_CUH
#define SPK_GEMM_3XTF32_CONFIG_CUH

/* k-tiles of 32 floats; shared-memory rows padded by 4 floats, so that 8
 * rows read at one k offset fall in different banks. */
#define SPK_GEMM_BK 32
#define SPK_GEMM_LDS (SPK_GEMM_BK + 4)

/* ---- the mma.sync form: any layout, sm_80 and up ----------------------- */
/* warps along m and n, mma tiles a warp along m (16 rows each) and n (8
 * columns), k-tile stages, blocks an SM (launch bounds), k-steps of 8 whose
 * products the tensor core sums before one FP32 add. */
#ifndef SPK_GEMM_WARPS_M
#define SPK_GEMM_WARPS_M 2
#endif
#ifndef SPK_GEMM_WARPS_N
#define SPK_GEMM_WARPS_N 2
#endif
#ifndef SPK_GEMM_WM
#define SPK_GEMM_WM 4
#endif
#ifndef SPK_GEMM_WN
#define SPK_GEMM_WN 4
#endif
#ifndef SPK_GEMM_STAGES
#define SPK_GEMM_STAGES 3
#endif
#ifndef SPK_GEMM_MIN_BLOCKS
#define SPK_GEMM_MIN_BLOCKS 2
#endif
#ifndef SPK_GEMM_SLICE_STEPS
#define SPK_GEMM_SLICE_STEPS 2
#endif
#define SPK_GEMM_THREADS (32 * SPK_GEMM_WARPS_M * SPK_GEMM_WARPS_N)
#define SPK_GEMM_BM (SPK_GEMM_WARPS_M * SPK_GEMM_WM * 16)
#define SPK_GEMM_BN (SPK_GEMM_WARPS_N * SPK_GEMM_WN * 8)
#define SPK_GEMM_STAGE_FLOATS ((SPK_GEMM_BM + SPK_GEMM_BN) * SPK_GEMM_LDS)
#define SPK_GEMM_SMEM_BYTES (SPK_GEMM_STAGES * SPK_GEMM_STAGE_FLOATS * 4)

/* ---- the wgmma form: k-contiguous aligned operands, sm_90a -------------- */
/* A 128 x 128 tile of two warpgroups; k-steps a slice; SPK_WG_OVERLAP 1: two
 * slice accumulators that alternate (the FADDs under the next slice), 0: one. */
#define SPK_WG_BM 128
#define SPK_WG_BN 128
#define SPK_WG_THREADS 256
#ifndef SPK_WG_SLICE_STEPS
#define SPK_WG_SLICE_STEPS 2
#endif
#ifndef SPK_WG_OVERLAP
#define SPK_WG_OVERLAP 0
#endif
/* Two staging slots of raw rows, two buffers of four split parts (A hi,
 * A lo, B hi, B lo), each part BM x BK floats (BM == BN). */
#define SPK_WG_STAGE_FLOATS ((SPK_WG_BM + SPK_WG_BN) * SPK_GEMM_LDS)
#define SPK_WG_PART_FLOATS (SPK_WG_BM * SPK_GEMM_BK)
#define SPK_WG_SMEM_BYTES ((2 * SPK_WG_STAGE_FLOATS + 2 * 4 * SPK_WG_PART_FLOATS) * 4)

#endif
