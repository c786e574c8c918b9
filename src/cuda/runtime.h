/* The GPU runtime: devices, device memory (as spk_storage), host<->device
 * copies, streams, events, CUDA graphs, NVRTC compilation with an on-disk
 * cache, kernels (attributes, occupancy, launches) and cuBLAS sgemm.
 *
 * Link model: the CUDA runtime is linked statically and loads the driver at
 * run time, so a program using this layer starts on a machine without a GPU
 * or driver; every call that needs a device then fails with one message,
 * "spk.cuda: no CUDA device (<what the runtime said>)". Compilation (NVRTC)
 * and the checks that need no device (argument packing, gemm shapes, cache
 * keys) work everywhere.
 *
 * Conventions follow the core: int functions return 0 on success and -1 on
 * failure, pointer functions return NULL on failure; the message is in
 * spk_last_error(). This header does not include CUDA headers: handles are
 * opaque, and spk_stream_handle() gives the cudaStream_t to code that needs it.
 *
 * Device memory lifetime: every device allocation remembers the streams that
 * used it (spk_storage_use(), called by copies, launches and gemm). When its
 * last reference goes, the memory is returned with cudaFreeAsync on the last
 * stream that used it, after that stream waits (cudaStreamWaitEvent) on an
 * event recorded, at release time, on every other stream that used it. So
 * memory is never reused while queued work still reads it, and dropping a
 * tensor never blocks the host. While a stream is capturing a graph, the
 * storages it uses are kept alive by the graph until the graph is freed. */
#ifndef SPK_CUDA_RUNTIME_H
#define SPK_CUDA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"
#include "cuda/gemm_3xtf32_tma.h"
#include "cuda/math_modes.h"

/* ---- availability ------------------------------------------------------ */

/* True when a driver and at least one device are present (probed once). */
bool spk_cuda_available(void);
/* 0 when available, else -1 with "spk.cuda: no CUDA device (...)". Every
 * function below that needs a device starts with this check. */
int spk_cuda_require(void);

typedef struct spk_cuda_info {
    int runtime_version; /* e.g. 13000 */
    int driver_version;  /* 0 when there is no driver */
    int nvrtc_major, nvrtc_minor;
    int device_count;    /* 0 when unavailable */
    char error[512];     /* "" when available, else the no-device message */
} spk_cuda_info;
/* Waits for every device, then destroys what spk keeps for the whole process
 * (cuBLAS and cuDNN handles and workspaces, the default streams, frees
 * deferred by a capture), so that a leak checker finds nothing left at exit.
 * Anything used later is made again. Does nothing if no device was found. */
void spk_cuda_release_process_state(void);
void spk_cuda_get_info(spk_cuda_info *out); /* never fails */

/* ---- devices ----------------------------------------------------------- */

typedef struct spk_device_props {
    int ordinal;
    char name[256];
    int cc_major, cc_minor;
    int sms;
    int warp_size;
    int max_threads_per_sm, max_threads_per_block, max_blocks_per_sm;
    int regs_per_sm, regs_per_block;
    size_t smem_per_sm, smem_per_block, smem_per_block_optin; /* bytes */
    size_t l2_bytes, global_mem_bytes;
    int clock_khz, memory_clock_khz, memory_bus_bits;
    bool cooperative_launch;
    bool cluster_launch;
} spk_device_props;

int spk_device_count(int *count);
int spk_device_props_get(int ordinal, spk_device_props *out);
int spk_device_current(int *ordinal);
int spk_device_set(int ordinal);
int spk_device_synchronize(void);
/* "sm_90" for the current device, into buf. */
int spk_device_arch(char *buf, size_t size);

/* ---- streams ----------------------------------------------------------- */

typedef struct spk_stream spk_stream;

/* A new stream on the current device (reference count 1). */
spk_stream *spk_stream_new(void);
/* The current device's default spk stream: created once, never destroyed;
 * retain/release are no-ops on it. An ordinary (blocking) stream, so it also
 * orders with the legacy NULL stream. */
spk_stream *spk_stream_default(void);
void spk_stream_retain(spk_stream *s);
void spk_stream_release(spk_stream *s); /* destroys when the last reference goes */
int spk_stream_synchronize(spk_stream *s);
int spk_stream_query(spk_stream *s, bool *done);
int spk_stream_device(const spk_stream *s);
void *spk_stream_handle(const spk_stream *s); /* the cudaStream_t */
/* `s` itself, or the default stream when s is NULL. */
spk_stream *spk_stream_or_default(spk_stream *s);

/* ---- events ------------------------------------------------------------ */

typedef struct spk_event spk_event;

spk_event *spk_event_new(bool timing); /* timing=false: cheaper, for ordering only */
void spk_event_free(spk_event *e);
int spk_event_record(spk_event *e, spk_stream *s);
int spk_stream_wait_event(spk_stream *s, spk_event *e);
int spk_event_synchronize(spk_event *e);
int spk_event_query(spk_event *e, bool *done);
/* Milliseconds from start to end (both recorded, end completed). */
int spk_event_elapsed_ms(spk_event *start, spk_event *end, float *ms);

/* ---- graphs ------------------------------------------------------------ */

typedef struct spk_graph spk_graph;

/* Starts capturing what is enqueued on s (thread-local capture mode). */
int spk_graph_capture_begin(spk_stream *s);
/* Ends the capture and instantiates it. On failure the capture is ended and
 * discarded, and NULL is returned. */
spk_graph *spk_graph_capture_end(spk_stream *s);
/* Ends a capture and discards it (after an error inside the captured code). */
void spk_graph_capture_abort(spk_stream *s);
bool spk_stream_is_capturing(const spk_stream *s);
int spk_graph_replay(spk_graph *g, spk_stream *s);
int spk_graph_node_count(const spk_graph *g, size_t *count);
void spk_graph_free(spk_graph *g); /* also releases storages the capture used */

/* ---- device memory and tensors ----------------------------------------- */

/* `bytes` of device memory on the current device, allocated in stream order
 * on s (NULL: default stream) and zero-filled. Out of memory fails with a
 * message naming the size; the session stays usable. */
spk_storage *spk_device_storage_new(size_t bytes, spk_stream *s);
bool spk_storage_is_device(const spk_storage *storage);
/* Records that s uses storage (see lifetime above). Host storage: no-op. */
void spk_storage_use(spk_storage *storage, spk_stream *s);

bool spk_tensor_is_device(const spk_tensor *t);
/* Zero-filled contiguous device tensor. */
spk_tensor *spk_device_tensor_new(spk_dtype dtype, int ndim, const int64_t *shape, spk_stream *s);
/* Contiguous device copy of a host tensor (any strides), enqueued on s. The
 * host tensor may be freed as soon as this returns. */
spk_tensor *spk_tensor_to_device(const spk_tensor *host, spk_stream *s);
/* Contiguous host copy of a device tensor (any view); waits for s. */
spk_tensor *spk_tensor_to_host(const spk_tensor *dev, spk_stream *s);
/* Copies into existing tensors of the same dtype and shape; the device side
 * must be contiguous. to_host waits for s. */
int spk_tensor_copy_to_device(spk_tensor *dev, const spk_tensor *host, spk_stream *s);
int spk_tensor_copy_to_host(spk_tensor *host, const spk_tensor *dev, spk_stream *s);
/* Device-to-device copy between contiguous tensors of equal dtype and shape. */
int spk_tensor_copy_device(spk_tensor *dst, const spk_tensor *src, spk_stream *s);
int spk_tensor_zero_device(spk_tensor *dev, spk_stream *s); /* contiguous */

/* Raw copies, enqueued on s (NULL: default). */
int spk_memcpy_h2d(void *dst, const void *src, size_t bytes, spk_stream *s);
int spk_memcpy_d2h(void *dst, const void *src, size_t bytes, spk_stream *s);
int spk_memcpy_d2d(void *dst, const void *src, size_t bytes, spk_stream *s);

/* ---- NVRTC compilation and the cache ----------------------------------- */

typedef struct spk_define {
    const char *name;
    const char *value; /* NULL: -DNAME */
} spk_define;

typedef struct spk_compile_options {
    const char *source;      /* the CUDA C++ text, or NULL to read `file` */
    const char *file;        /* path (a regular file of at most 16 MiB, as are its includes);
                                also names the program in the log */
    const spk_define *defines;
    int ndefines;
    /* extra NVRTC options, e.g. "-lineinfo": only those that change nothing
     * but the code (no option that writes or reads files, or yields no cubin
     * or PTX); others are refused, naming the option */
    const char *const *options;
    int noptions;
    /* "sm_90" (cubin), "compute_90" (PTX), or NULL for the current device's
     * sm_XX (which needs a device). */
    const char *arch;
    bool no_cache;           /* bypass the on-disk cache for this compile */
} spk_compile_options;

typedef struct spk_module spk_module;

/* Compiles (or fetches from the cache). The include path is the folder of
 * `file` (if any), the kernel folder (spk_kernel_dir()) and the CUDA include
 * folder. A compile error fails with NVRTC's log in the message. */
spk_module *spk_compile(const spk_compile_options *opts);
void spk_module_retain(spk_module *m);
void spk_module_release(spk_module *m);
const void *spk_module_code(const spk_module *m, size_t *bytes);
bool spk_module_is_ptx(const spk_module *m);
const char *spk_module_arch(const spk_module *m);  /* "sm_90" / "compute_90" */
const char *spk_module_log(const spk_module *m);   /* NVRTC log ("" if cached) */
bool spk_module_from_cache(const spk_module *m);
const char *spk_module_key(const spk_module *m);   /* cache key, 64 hex digits */

/* The cache key (SHA-256, hex) of a compile: source text and the content of
 * every file it includes with #include "..." (recursively), defines, options,
 * arch and the NVRTC version. Needs no device; `arch` NULL fails here. */
int spk_compile_key(const spk_compile_options *opts, char key_hex[65]);

/* The kernel folder (the built-in kernels, and searched for #include
 * "x.cuh"): the folder given to spk_set_kernel_dir for this process, else
 * spk_find_dir("kernels") ($SPK_KERNEL_DIR, the installed share/spk/kernels,
 * the source tree's kernels/: core/paths.h). NULL, with the message set, when
 * there is none. */
const char *spk_kernel_dir(void);
void spk_set_kernel_dir(const char *dir);

typedef struct spk_cache_info {
    char dir[4096];
    bool writable;   /* false: compiling without the cache (warned once) */
    long entries;
    uint64_t bytes;
    long hits, misses, rejected; /* rejected: corrupt entries recompiled */
} spk_cache_info;
/* Cache folder: $SPK_CACHE_DIR, else $XDG_CACHE_HOME/spk, else ~/.cache/spk
 * (the home from the password database where $HOME is unset; else
 * /tmp/spk-cache-<uid>), created with mode 0700. It is used only if this user
 * owns it and no one else can write it (else one warning, and compiles go on
 * without a cache). Read when first needed; spk_cache_reset() re-reads it,
 * for tests. entries and bytes count only the files the cache wrote. */
int spk_cache_get_info(spk_cache_info *out);
/* Removes every entry the cache wrote (and its temporary files), nothing
 * else; counters stay. */
int spk_cache_clear(void);
void spk_cache_reset(void);
/* Uses `dir` instead of the environment's choice (NULL: back to it); resets
 * the counters and the unwritable warning. */
void spk_cache_set_dir(const char *dir);

/* SHA-256 (used for cache keys and entry checksums). */
void spk_sha256(const void *data, size_t bytes, uint8_t digest[32]);

/* ---- kernels ----------------------------------------------------------- */

typedef struct spk_kernel spk_kernel;

/* Loads the module (cudaLibraryLoadData, once) and finds an extern "C"
 * kernel. The kernel keeps its module alive. */
spk_kernel *spk_module_kernel(spk_module *m, const char *name);
void spk_kernel_free(spk_kernel *k);
const char *spk_kernel_name(const spk_kernel *k);
void *spk_kernel_handle(const spk_kernel *k); /* the cudaKernel_t */

typedef struct spk_kernel_attrs {
    int registers;        /* per thread */
    size_t local_bytes;   /* local memory per thread (spills and stack arrays) */
    size_t static_smem;   /* bytes */
    size_t const_bytes;
    int max_threads;      /* per block, for this kernel */
    int max_dynamic_smem; /* currently allowed dynamic shared memory */
    int ptx_version, binary_version; /* e.g. 90 */
} spk_kernel_attrs;
int spk_kernel_attributes(spk_kernel *k, spk_kernel_attrs *out);
/* Allows up to `bytes` of dynamic shared memory (needed above 48 KiB). */
int spk_kernel_set_max_dynamic_smem(spk_kernel *k, size_t bytes);
int spk_kernel_occupancy(spk_kernel *k, int block_threads, size_t dyn_smem, int *blocks_per_sm);
/* Blocks that can be co-resident: blocks per SM x SMs. */
int spk_kernel_cooperative_capacity(spk_kernel *k, int block_threads, size_t dyn_smem, int *blocks);
/* Parameter count and sizes (driver's cuKernelGetParamInfo, looked up at run
 * time through cudaGetDriverEntryPointByVersion). `sizes` has room for max. */
int spk_kernel_params(spk_kernel *k, int *count, size_t *sizes, int max);

/* Kernel arguments: typed scalars or device pointers. */
typedef enum {
    SPK_ARG_U32, SPK_ARG_I32, SPK_ARG_U64, SPK_ARG_I64, SPK_ARG_F32, SPK_ARG_F64, SPK_ARG_PTR
} spk_arg_kind;

typedef struct spk_arg {
    spk_arg_kind kind;
    union {
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        void *ptr;
    } v;
} spk_arg;

size_t spk_arg_size(spk_arg_kind kind);
const char *spk_arg_kind_name(spk_arg_kind kind); /* "u32", ..., "pointer" */
/* Checks args against the kernel's parameter sizes (count, then each size)
 * and fills out[i] = &args[i].v, the void** the launch takes. Needs no GPU.
 * Errors read "kernel saxpy: argument 2 is f64 (8 bytes), parameter 2 is 4
 * bytes" (1-based). */
int spk_pack_args(const char *kernel_name, const spk_arg *args, int nargs,
                  const size_t *param_sizes, int nparams, void **out);

#define SPK_MAX_KERNEL_ARGS 64

typedef struct spk_launch_config {
    unsigned grid[3];   /* blocks; 0 entries are taken as 1 */
    unsigned block[3];  /* threads */
    size_t smem;        /* dynamic shared memory bytes */
    spk_stream *stream; /* NULL: default */
    bool cooperative;   /* grid-wide sync: grid must fit (see capacity) */
    unsigned cluster[3];/* thread-block cluster dims; all 0: no cluster */
    /* Storages the kernel reads or writes: recorded as used by the stream. */
    spk_storage *const *uses;
    int nuses;
} spk_launch_config;

/* Checks args against the kernel's parameters, then launches
 * (cudaLaunchKernelExC with the cooperative / cluster attributes). */
int spk_kernel_launch(spk_kernel *k, const spk_launch_config *cfg, const spk_arg *args, int nargs);
/* Launches with already-packed arguments (no parameter check). */
int spk_kernel_launch_raw(spk_kernel *k, const spk_launch_config *cfg, void **args);

/* ---- cuBLAS ------------------------------------------------------------ */

/* spk_math_mode and its names: cuda/math_modes.h, the one list. */

typedef struct spk_gemm_args {
    const spk_tensor *a, *b; /* device f32 2-D, or 3-D [count, ...]; rows contiguous or a transposed view */
    const spk_tensor *b_lo;  /* NULL, or with math 3xtf32: b is B's big TF32 part and b_lo its small
                                one (spk_tf32_split), of b's shape and strides */
    spk_tensor *c;           /* device f32 2-D, or 3-D [count, m, n] for a batch; rows contiguous */
    bool transa, transb;
    float alpha, beta;
    spk_math_mode math;
    spk_stream *stream;      /* NULL: default */
} spk_gemm_args;

/* Row-major C = alpha op(A) op(B) + beta C, with op(X) = X or X^T: checks
 * dtypes, ranks, layouts and shapes only (no device needed); m, n, k out,
 * and count (may be NULL): the matrices of a batch, 1 for a 2-D c. In a
 * batch, c[i] = alpha op(A[i]) op(B[i]) + beta c[i], where a 2-D A or B is
 * used for every i. */
int spk_gemm_check(const spk_gemm_args *g, int64_t *m, int64_t *n, int64_t *k, int64_t *count);
/* Creates the device's cuBLAS handle and workspace now. Creating them
 * allocates memory, which a stream capture forbids, so capture begin calls
 * this before any gemm can be captured. */
int spk_blas_prepare(int device);
/* Destroys the cuBLAS handles and their workspaces (made again on next use). */
void spk_blas_release(void);

/* spk_gemm_check, then cublasGemmEx on the stream (a batch:
 * cublasGemmStridedBatchedEx, one launch); math SPK_MATH_3XTF32 launches
 * spk's split-TF32 kernel instead (one launch for a batch too). */
int spk_gemm(const spk_gemm_args *g);
/* Makes now, on the current device, what a gemm in `math` creates on first
 * use (the cuBLAS handle, or the 3xtf32 kernel's compile and load), so that
 * the gemm can be captured in a graph. */
int spk_gemm_prepare(spk_math_mode math);
/* Compiles the 3xtf32 kernel in spk's configuration for `arch` ("sm_90";
 * NULL: the current device's), as the gemm does. Needs no device with arch. */
spk_module *spk_gemm_3xtf32_compile(const char *arch);
/* Its wgmma form, for sm_90a (the gemm's choice on compute capability 9.0). */
spk_module *spk_gemm_3xtf32_wgmma_compile(void);
/* Its TMA form, for sm_90a (spk_gemm with b_lo, on compute capability 9.0). */
spk_module *spk_gemm_3xtf32_tma_compile(void);
/* x = hi + lo for every element of an f32 tensor (host or device, contiguous):
 * hi is x rounded to TF32 (ties away from zero), lo = x - hi rounded to TF32,
 * both new contiguous tensors on x's side (device: on s). The parts that
 * spk_gemm's b and b_lo take. */
int spk_tf32_split(const spk_tensor *x, spk_tensor **hi, spk_tensor **lo, spk_stream *s);
/* Whether a stack plan of math 3xtf32 keeps its weights split and runs the
 * TMA form on the current device: compute capability 9.0 and the form chosen
 * (src/cuda/gemm_3xtf32_tma.c's default, or $SPK_GEMM_3XTF32 = "tma", "f16"
 * or "classic"; another value fails, naming it). */
int spk_gemm_3xtf32_split_weights(bool *out);
/* The form a stack plan of math 3xtf32 takes on the current device: the one
 * wanted ($SPK_GEMM_3XTF32 or the default) where the device has compute
 * capability 9.0, else the classic one. */
int spk_gemm_3xtf32_plan_form(spk_3xtf32_form *out);
/* Whether spk_gemm runs g (its b_lo given) on the TMA form: A's rows along k
 * with unit stride, 16-byte aligned rows and matrices, b and b_lo likewise.
 * No message is left either way. */
bool spk_gemm_3xtf32_split_fits(const spk_gemm_args *g);
/* A matrix's FP16 parts for spk_gemm_3xf16: x 2^exponent = hi + lo, each
 * rounded to FP16 (kernels/gemm_3xtf32_tma.cuh: the exponent puts the
 * largest |x| in [2^14, 2^15); Inf and NaN whole in hi), the FP16 bits of
 * x's elements in x's order, two to each i32 of hi and lo ([..., k / 2] of
 * x's [..., k]). */
typedef struct spk_f16_parts {
    spk_tensor *hi, *lo;
    int exponent;
} spk_f16_parts;
/* Splits a contiguous f32 tensor (host or device; its last dimension even)
 * into parts on its side (device: on s, through the host). */
int spk_f16_split(const spk_tensor *x, spk_f16_parts *out, spk_stream *s);
/* The power of two the parts' rule gives a largest magnitude max_abs
 * (kernels/gemm_3xtf32_tma.cuh's spk_f16_scale_exponent). */
int spk_f16_exponent_of(float max_abs);
void spk_f16_parts_free(spk_f16_parts *p);
/* spk_gemm of math 3xtf32 on the TMA form with FP16 parts: B as b16, the
 * parts of g->b (contiguous, read as op(B) like g->b), and A scaled by
 * 2^a_exponent in the kernel before its split; |A| 2^a_exponent must stay
 * below 65,520 (FP16's range): the caller's bound. Compute capability 9.0. */
int spk_gemm_3xf16(const spk_gemm_args *g, const spk_f16_parts *b16, int a_exponent);
/* Whether spk_gemm_3xf16 runs g with b16: the TMA form's layout rules, and
 * k a multiple of 8 (FP16 rows 16-byte aligned). No message is left. */
bool spk_gemm_3xf16_fits(const spk_gemm_args *g, const spk_f16_parts *b16);
/* Unloads the 3xtf32 kernels (loaded again on next use). */
void spk_gemm_3xtf32_release(void);

#endif
