/* The launch limits of a GPU architecture that are known without a device,
 * what a kernel entry uses (read from its cubin), and a check of a launch
 * against both. A launch past a limit fails only at launch time otherwise,
 * with the driver's words ("invalid argument", "too many resources requested
 * for launch") and the entry's name; spk.lstm.kernel_check runs this check
 * where no device is, and its message says the number asked for, the limit,
 * and what to change.
 *
 * The limits are those of the CUDA C++ Programming Guide's table of
 * technical specifications per compute capability: grid and block sizes,
 * threads per block, the cluster sizes a launch may ask for, the shared
 * memory a block may have (with the opt-in above 48 KiB, which spk's launches
 * make), registers per block and per thread, and the register allocation
 * unit (a warp's registers are allocated 256 at a time). What depends on the
 * particular device (its SM count, hence co-residency) is not here: plans
 * check that when they are built on one. */
#ifndef SPK_CUDA_LAUNCH_LIMITS_H
#define SPK_CUDA_LAUNCH_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct spk_arch_limits {
    int cc;                       /* 90 for sm_90 and sm_90a */
    int64_t max_grid[3];          /* blocks along x, y, z */
    int max_block[3];             /* threads along x, y, z */
    int max_threads_per_block;
    int max_cluster;              /* blocks in a portable cluster; 0: no clusters */
    int max_cluster_nonportable;  /* with cudaFuncAttributeNonPortableClusterSizeAllowed */
    size_t max_smem_per_block;    /* static + dynamic, with the opt-in */
    size_t reserved_smem_per_block; /* what the cubin's shared section holds beyond the kernel's own */
    int max_regs_per_block;
    int max_regs_per_thread;
    int reg_alloc_unit;           /* registers a warp is given at a time */
} spk_arch_limits;

/* The limits of `arch` ("sm_90", "sm_90a", "compute_90", "90"); -1 and a
 * message naming the architectures known where it is none of them. */
int spk_arch_limits_of(const char *arch, spk_arch_limits *out);

/* What one entry of a cubin uses, per thread or per block. */
typedef struct spk_entry_usage {
    char name[128];
    int registers;         /* per thread */
    size_t local_bytes;    /* per thread: the stack frame, spills included */
    size_t static_smem;    /* bytes of __shared__ the kernel declares */
    int max_threads[3];    /* __launch_bounds__ / .maxntid, 0 when not given */
    int cluster_dims[3];   /* __cluster_dims__, 0 when not given */
} spk_entry_usage;

/* The usage of every entry (kernel function) in a cubin, at most `max`, in
 * the cubin's order; *count of them. The shared memory is the kernel's own
 * (the cubin's section less the architecture's reserve, `reserved` bytes).
 * -1 and a message when the bytes are no cubin this reads. */
int spk_cubin_entries(const void *cubin, size_t size, size_t reserved, spk_entry_usage *out, int max, int *count);

typedef struct spk_launch_request {
    int64_t grid[3];
    int64_t block[3];
    int64_t cluster[3];      /* all 0: no cluster */
    size_t dynamic_smem;
    bool nonportable_cluster; /* the launch opts into clusters above the portable size */
} spk_launch_request;

/* Checks `r` of the entry `u` against the limits; -1 with a message
 * "<what>: <what is asked>; <arch> allows <the limit> (<the fix>)" for the
 * first limit it passes. */
int spk_launch_limits_check(const spk_arch_limits *lim, const spk_entry_usage *u, const spk_launch_request *r,
                            const char *what);

/* The registers a block of `threads` threads is given when each thread uses
 * `registers` (whole warps, each rounded up to the allocation unit). */
int64_t spk_block_registers(const spk_arch_limits *lim, int registers, int64_t threads);

#endif
