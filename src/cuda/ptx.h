/* The parameters of a kernel, read from its PTX (the PTX ISA's "Kernel
 * Function Parameters": `.entry name(.param .u64 name_param_0, ...)`), so a
 * signature can be checked where there is no device: NVRTC compiles for
 * compute_XY anywhere. The driver's view of a loaded kernel
 * (spk_kernel_params) gives sizes only; PTX also tells a float from an
 * integer of the same size.
 *
 * Conventions as in runtime.h: 0 / -1 with spk_last_error(). */
#ifndef SPK_CUDA_PTX_H
#define SPK_CUDA_PTX_H

#include <stddef.h>

#define SPK_PTX_MAX_PARAMS 64

typedef struct spk_ptx_param {
    char type[8];  /* the PTX type without its dot: "u64", "u32", "f32", "b8", ... */
    int elements;  /* 1 for a scalar; N for an array `name[N]` (a struct passed by value) */
    size_t size;   /* bytes: the type's size times elements */
    char name[64]; /* the parameter's PTX name (NVRTC: <entry>_param_<i>), cut at 63 characters */
} spk_ptx_param;

/* The parameters of entry `entry` of the PTX text ptx[0 .. bytes) (a NUL
 * ends it early), into out[0 .. max), *count of them. Fails naming the
 * entries the text has when `entry` is not one of them ("... has no kernel
 * \"x\" (its kernels: a, b)"), and hints at extern "C" when a mangled entry
 * contains the name. */
int spk_ptx_entry_params(const char *ptx, size_t bytes, const char *entry, spk_ptx_param *out, int max, int *count);

/* The PTX class a parameter type belongs to: 'f' (f16, f32, f64), 'p'
 * (pred), else 'i' (b, u, s: integers and raw bits). */
char spk_ptx_type_class(const char *type);

#endif
