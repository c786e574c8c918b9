/* Tensors: a dtype, up to SPK_MAX_DIMS dimensions with strides and an offset
 * (all in elements), over reference-counted storage. Views share storage.
 *
 * The core knows nothing of CUDA: storage on a device is opaque memory with a
 * release callback supplied by the layer that allocated it (src/cuda/). Every
 * host-side operation below refuses device tensors with an error.
 *
 * Conventions: indices here are 0-based (the Lua bindings translate 1-based
 * indices); functions returning a pointer return NULL on failure and functions
 * returning int return 0 on success, -1 on failure; the message is in
 * spk_last_error(). */
#ifndef SPK_TENSOR_H
#define SPK_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPK_MAX_DIMS 8

typedef enum { SPK_F32 = 0, SPK_F64 = 1, SPK_I32 = 2, SPK_U64 = 3 } spk_dtype;

/* Where storage lives: SPK_HOST, or a CUDA device ordinal (>= 0). */
#define SPK_HOST (-1)

typedef struct spk_storage spk_storage;
struct spk_storage {
    void *data;
    size_t bytes;
    int device;   /* SPK_HOST or a CUDA device ordinal */
    int refcount; /* owners: tensors (views included) and external holders */
    /* Frees `data` when the last reference goes; NULL means free() for host. */
    void (*release)(spk_storage *storage);
    void *context; /* for `release` (e.g. the stream that last used it) */
};

typedef struct spk_tensor {
    spk_storage *storage;
    spk_dtype dtype;
    int ndim;
    int64_t shape[SPK_MAX_DIMS];
    int64_t strides[SPK_MAX_DIMS]; /* in elements */
    int64_t offset;                /* in elements */
} spk_tensor;

/* dtypes */
size_t spk_dtype_size(spk_dtype dtype);
const char *spk_dtype_name(spk_dtype dtype);           /* "f32", "f64", "i32", "u64" */
int spk_dtype_from_name(const char *name, spk_dtype *out); /* 0 or -1 with message */

/* Storage */
spk_storage *spk_storage_new_host(size_t bytes);       /* zero-filled */
/* Wraps externally allocated memory; `release` is called once when the last
 * reference goes. */
spk_storage *spk_storage_wrap(void *data, size_t bytes, int device,
                              void (*release)(spk_storage *), void *context);
void spk_storage_retain(spk_storage *storage);
void spk_storage_release(spk_storage *storage);

/* Creation (host, contiguous, zero-filled unless stated) */
spk_tensor *spk_tensor_new(spk_dtype dtype, int ndim, const int64_t *shape);
/* A contiguous tensor over the given storage (retains it), e.g. device memory. */
spk_tensor *spk_tensor_on_storage(spk_storage *storage, spk_dtype dtype, int ndim,
                                  const int64_t *shape);
spk_tensor *spk_tensor_full(spk_dtype dtype, int ndim, const int64_t *shape, double value);
/* [start, stop) by step, length ceil((stop - start) / step), 1-D. */
spk_tensor *spk_tensor_arange(spk_dtype dtype, double start, double stop, double step);
void spk_tensor_free(spk_tensor *t); /* releases its storage reference; NULL is fine */

/* Properties */
int64_t spk_tensor_numel(const spk_tensor *t);
bool spk_tensor_is_contiguous(const spk_tensor *t);
bool spk_tensor_is_host(const spk_tensor *t);
/* Address of element 0 of the view (storage data + offset). */
void *spk_tensor_data(const spk_tensor *t);
bool spk_tensor_same_shape(const spk_tensor *a, const spk_tensor *b);
/* "[2, 3, 4]" into buf; returns buf. */
char *spk_shape_string(const spk_tensor *t, char *buf, size_t size);

/* Views: share storage (retained), work on host and device tensors alike. */
spk_tensor *spk_tensor_narrow(const spk_tensor *t, int dim, int64_t start, int64_t length);
spk_tensor *spk_tensor_select(const spk_tensor *t, int dim, int64_t index); /* drops dim */
/* Python-style start:stop:step on one dim (negative indices count from the end). */
spk_tensor *spk_tensor_slice(const spk_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
spk_tensor *spk_tensor_transpose(const spk_tensor *t, int dim0, int dim1);
/* Reshape of contiguous data; one entry of shape may be -1 (inferred). */
spk_tensor *spk_tensor_view(const spk_tensor *t, int ndim, const int64_t *shape);

/* Copies (host) */
spk_tensor *spk_tensor_contiguous(const spk_tensor *t); /* new reference to t's data if already contiguous */
spk_tensor *spk_tensor_clone(const spk_tensor *t);      /* always a fresh contiguous copy */
spk_tensor *spk_tensor_to_dtype(const spk_tensor *t, spk_dtype dtype);
/* Elementwise copy src -> dst of the same shape, converting dtype. */
int spk_tensor_copy(spk_tensor *dst, const spk_tensor *src);

/* Elements (host), 0-based multi-index of length ndim. */
int spk_tensor_index_offset(const spk_tensor *t, int nidx, const int64_t *idx, int64_t *elem_offset);
double spk_tensor_get_f64(const spk_tensor *t, const int64_t *idx);
void spk_tensor_set_f64(spk_tensor *t, const int64_t *idx, double value);
/* Exact access for integer dtypes (u64 values above 2^63 wrap to negative). */
int64_t spk_tensor_get_i64(const spk_tensor *t, const int64_t *idx);
void spk_tensor_set_i64(spk_tensor *t, const int64_t *idx, int64_t value);
/* Element at linear position i in row-major order of the view. */
double spk_tensor_flat_get(const spk_tensor *t, int64_t i);
int spk_tensor_fill(spk_tensor *t, double value);

/* Elementwise (host, same shape; result dtype: f64 if either is f64, else a's) */
spk_tensor *spk_tensor_add(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_sub(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_mul(const spk_tensor *a, const spk_tensor *b);
spk_tensor *spk_tensor_scale(const spk_tensor *a, double s);
spk_tensor *spk_tensor_abs(const spk_tensor *a);

/* Reductions over all elements (host), in f64. Return 0 or -1 (empty / device). */
int spk_tensor_sum(const spk_tensor *t, double *out);
int spk_tensor_mean(const spk_tensor *t, double *out);
int spk_tensor_min(const spk_tensor *t, double *out);
int spk_tensor_max(const spk_tensor *t, double *out);
int spk_tensor_norm(const spk_tensor *t, double *out); /* L2 */

/* Readable text: header "tensor(f32, [2, 3])" and values, summarised with "..."
 * past `edge` items per dim when numel > threshold. Returns a malloc'd string. */
char *spk_tensor_format(const spk_tensor *t, int64_t threshold, int edge);

#endif
