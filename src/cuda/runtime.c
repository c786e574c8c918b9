/* Devices, streams, events, graphs and device memory (see runtime.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nvrtc.h>

#include "core/error.h"
#include "cuda/cudnn_rnn.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"

/* ---- availability ------------------------------------------------------ */

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probed_count;
static char probe_error[512];

static void probe(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        snprintf(probe_error, sizeof probe_error, "spk.cuda: no CUDA device (cudaGetDeviceCount: %s)",
                 cudaGetErrorString(err));
        cudaGetLastError();
        n = 0;
    } else if (n == 0) {
        snprintf(probe_error, sizeof probe_error, "spk.cuda: no CUDA device (cudaGetDeviceCount found none)");
    }
    probed_count = n;
}

bool spk_cuda_available(void)
{
    pthread_once(&probe_once, probe);
    return probed_count > 0;
}

int spk_cuda_require(void)
{
    if (spk_cuda_available())
        return 0;
    return spk_fail("%s", probe_error);
}

void spk_cuda_get_info(spk_cuda_info *out)
{
    memset(out, 0, sizeof *out);
    cudaRuntimeGetVersion(&out->runtime_version);
    if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess)
        out->driver_version = 0;
    nvrtcVersion(&out->nvrtc_major, &out->nvrtc_minor);
    out->device_count = spk_cuda_available() ? probed_count : 0;
    snprintf(out->error, sizeof out->error, "%s", spk_cuda_available() ? "" : probe_error);
}

int spk_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return 0;
    cudaGetLastError(); /* clear non-sticky errors so the session goes on */
    return spk_fail("spk.cuda: %s: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

/* ---- devices ----------------------------------------------------------- */

int spk_device_count(int *count)
{
    if (spk_cuda_require())
        return -1;
    *count = probed_count;
    return 0;
}

static int check_ordinal(int ordinal)
{
    if (spk_cuda_require())
        return -1;
    if (ordinal < 0 || ordinal >= probed_count)
        return spk_fail("spk.cuda: device %d does not exist (%d device%s)", ordinal, probed_count,
                        probed_count == 1 ? "" : "s");
    return 0;
}

int spk_device_props_get(int ordinal, spk_device_props *out)
{
    if (check_ordinal(ordinal))
        return -1;
    struct cudaDeviceProp p;
    if (spk_cuda_check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties"))
        return -1;
    memset(out, 0, sizeof *out);
    out->ordinal = ordinal;
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    out->warp_size = p.warpSize;
    out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    out->max_threads_per_block = p.maxThreadsPerBlock;
    out->max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
    out->regs_per_sm = p.regsPerMultiprocessor;
    out->regs_per_block = p.regsPerBlock;
    out->smem_per_sm = p.sharedMemPerMultiprocessor;
    out->smem_per_block = p.sharedMemPerBlock;
    out->smem_per_block_optin = p.sharedMemPerBlockOptin;
    out->l2_bytes = (size_t)p.l2CacheSize;
    out->global_mem_bytes = p.totalGlobalMem;
    /* clockRate and friends left cudaDeviceProp in CUDA 13: ask attributes. */
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, ordinal) == cudaSuccess)
        out->clock_khz = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, ordinal) == cudaSuccess)
        out->memory_clock_khz = v;
    out->memory_bus_bits = p.memoryBusWidth;
    out->cooperative_launch = p.cooperativeLaunch != 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, ordinal) == cudaSuccess)
        out->cluster_launch = v != 0;
    cudaGetLastError();
    return 0;
}

int spk_device_current(int *ordinal)
{
    if (spk_cuda_require())
        return -1;
    return spk_cuda_check(cudaGetDevice(ordinal), "cudaGetDevice");
}

int spk_device_set(int ordinal)
{
    if (check_ordinal(ordinal))
        return -1;
    return spk_cuda_check(cudaSetDevice(ordinal), "cudaSetDevice");
}

int spk_device_synchronize(void)
{
    if (spk_cuda_require())
        return -1;
    return spk_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

int spk_device_arch(char *buf, size_t size)
{
    int dev;
    if (spk_device_current(&dev))
        return -1;
    int major = 0, minor = 0;
    if (spk_cuda_check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute") ||
        spk_cuda_check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "cudaDeviceGetAttribute"))
        return -1;
    snprintf(buf, size, "sm_%d%d", major, minor);
    return 0;
}

/* Runs on `device`, restoring the caller's device afterwards. */
typedef struct device_scope {
    int previous;
    bool switched;
} device_scope;

static device_scope enter_device(int device)
{
    device_scope scope = {0, false};
    if (cudaGetDevice(&scope.previous) == cudaSuccess && scope.previous != device)
        scope.switched = cudaSetDevice(device) == cudaSuccess;
    return scope;
}

static void leave_device(device_scope scope)
{
    if (scope.switched)
        cudaSetDevice(scope.previous);
}

/* ---- keep-alive lists -------------------------------------------------- */

static int keep_storage(spk_storage ***items, int *count, int *cap, spk_storage *storage)
{
    for (int i = 0; i < *count; i++)
        if ((*items)[i] == storage)
            return 0;
    if (*count == *cap) {
        int ncap = *cap ? *cap * 2 : 16;
        spk_storage **grown = realloc(*items, (size_t)ncap * sizeof *grown);
        if (!grown)
            return -1;
        *items = grown;
        *cap = ncap;
    }
    spk_storage_retain(storage);
    (*items)[(*count)++] = storage;
    return 0;
}

/* ---- streams ----------------------------------------------------------- */

struct spk_stream {
    cudaStream_t handle;
    int device;
    int refcount;
    bool is_default;
    bool capturing; /* a capture begun through spk_graph_capture_begin */
    /* Storages used while capturing: handed to the graph at capture end. */
    spk_storage **captured;
    int ncaptured, captured_cap;
};

#define MAX_DEVICES 64
static spk_stream default_streams[MAX_DEVICES];
static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;

/* Freed device memory is kept in the pool rather than handed back to the
 * driver at each synchronisation, so timing loops do not measure remapping. */
static uint64_t devices_used; /* bit d: a stream was made on device d */

static void configure_pool(int device)
{
    if (device >= 0 && device < 64)
        __atomic_fetch_or(&devices_used, (uint64_t)1 << device, __ATOMIC_RELAXED);
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        uint64_t threshold = UINT64_MAX;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    }
    cudaGetLastError();
}

spk_stream *spk_stream_default(void)
{
    int dev;
    if (spk_device_current(&dev))
        return NULL;
    if (dev >= MAX_DEVICES)
        return spk_fail_null("spk.cuda: device %d is beyond the %d supported", dev, MAX_DEVICES);
    pthread_mutex_lock(&default_lock);
    spk_stream *s = &default_streams[dev];
    if (!s->is_default) {
        if (spk_cuda_check(cudaStreamCreate(&s->handle), "cudaStreamCreate")) {
            pthread_mutex_unlock(&default_lock);
            return NULL;
        }
        configure_pool(dev);
        s->device = dev;
        s->refcount = 1;
        s->is_default = true;
    }
    pthread_mutex_unlock(&default_lock);
    return s;
}

spk_stream *spk_stream_or_default(spk_stream *s)
{
    return s ? s : spk_stream_default();
}

/* A zeroed object of `size` bytes for the current device (*dev), or NULL
 * with "out of memory allocating <what>". */
static void *calloc_on_device(size_t size, const char *what, int *dev)
{
    if (spk_device_current(dev))
        return NULL;
    void *p = calloc(1, size);
    if (!p)
        spk_fail("out of memory allocating %s", what);
    return p;
}

spk_stream *spk_stream_new(void)
{
    int dev;
    spk_stream *s = calloc_on_device(sizeof(spk_stream), "a stream", &dev);
    if (!s)
        return NULL;
    if (spk_cuda_check(cudaStreamCreateWithFlags(&s->handle, cudaStreamNonBlocking), "cudaStreamCreate")) {
        free(s);
        return NULL;
    }
    configure_pool(dev);
    s->device = dev;
    s->refcount = 1;
    return s;
}

void spk_stream_retain(spk_stream *s)
{
    if (s && !s->is_default)
        s->refcount++;
}

void spk_stream_release(spk_stream *s)
{
    if (!s || s->is_default || --s->refcount > 0)
        return;
    /* Pending work finishes; the driver frees the stream afterwards. */
    device_scope scope = enter_device(s->device);
    cudaStreamDestroy(s->handle);
    leave_device(scope);
    for (int i = 0; i < s->ncaptured; i++)
        spk_storage_release(s->captured[i]);
    free(s->captured);
    free(s);
}

int spk_stream_synchronize(spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    return spk_cuda_check(cudaStreamSynchronize(s->handle), "cudaStreamSynchronize");
}

int spk_stream_query(spk_stream *s, bool *done)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    cudaError_t err = cudaStreamQuery(s->handle);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        *done = false;
        return 0;
    }
    *done = true;
    return spk_cuda_check(err, "cudaStreamQuery");
}

int spk_stream_device(const spk_stream *s) { return s->device; }
void *spk_stream_handle(const spk_stream *s) { return s->handle; }

/* ---- events ------------------------------------------------------------ */

struct spk_event {
    cudaEvent_t handle;
    int device;
};

spk_event *spk_event_new(bool timing)
{
    int dev;
    spk_event *e = calloc_on_device(sizeof(spk_event), "an event", &dev);
    if (!e)
        return NULL;
    if (spk_cuda_check(cudaEventCreateWithFlags(&e->handle, timing ? cudaEventDefault : cudaEventDisableTiming),
                       "cudaEventCreate")) {
        free(e);
        return NULL;
    }
    e->device = dev;
    return e;
}

void spk_event_free(spk_event *e)
{
    if (e)
        cudaEventDestroy(e->handle);
    free(e);
}

int spk_event_record(spk_event *e, spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    return spk_cuda_check(cudaEventRecord(e->handle, s->handle), "cudaEventRecord");
}

int spk_stream_wait_event(spk_stream *s, spk_event *e)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    return spk_cuda_check(cudaStreamWaitEvent(s->handle, e->handle, 0), "cudaStreamWaitEvent");
}

int spk_event_synchronize(spk_event *e)
{
    return spk_cuda_check(cudaEventSynchronize(e->handle), "cudaEventSynchronize");
}

int spk_event_query(spk_event *e, bool *done)
{
    cudaError_t err = cudaEventQuery(e->handle);
    if (err == cudaErrorNotReady) {
        cudaGetLastError();
        *done = false;
        return 0;
    }
    *done = true;
    return spk_cuda_check(err, "cudaEventQuery");
}

int spk_event_elapsed_ms(spk_event *start, spk_event *end, float *ms)
{
    return spk_cuda_check(cudaEventElapsedTime(ms, start->handle, end->handle), "cudaEventElapsedTime");
}

/* ---- device memory ----------------------------------------------------- */

/* What a device storage remembers: the streams that used it, most recent
 * last (each retained). Past MAX_USERS distinct streams it stops tracking
 * and its release synchronises the device instead. */
#define MAX_USERS 8
typedef struct device_buffer {
    int device;
    int nusers;
    bool overflow;
    spk_stream *users[MAX_USERS];
} device_buffer;

/* Frees that could not be enqueued because a stream involved was capturing
 * a graph; retried when a capture ends. */
typedef struct deferred_free {
    void *data;
    device_buffer *buffer;
    struct deferred_free *next;
} deferred_free;
static deferred_free *deferred_frees;
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;

static bool is_capturing(const spk_stream *s)
{
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s->handle, &status) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return status != cudaStreamCaptureStatusNone;
}

/* Returns false (and does nothing) when a stream involved is capturing. */
static bool free_after_users(void *data, device_buffer *buf)
{
    for (int i = 0; i < buf->nusers; i++)
        if (is_capturing(buf->users[i]))
            return false;
    device_scope scope = enter_device(buf->device);
    if (buf->overflow || buf->nusers == 0) {
        cudaDeviceSynchronize();
        cudaFree(data);
    } else {
        spk_stream *last = buf->users[buf->nusers - 1];
        for (int i = 0; i < buf->nusers - 1; i++) {
            cudaEvent_t passed;
            if (cudaEventCreateWithFlags(&passed, cudaEventDisableTiming) == cudaSuccess) {
                cudaEventRecord(passed, buf->users[i]->handle);
                cudaStreamWaitEvent(last->handle, passed, 0);
                cudaEventDestroy(passed); /* the wait keeps what it needs */
            } else {
                cudaStreamSynchronize(buf->users[i]->handle);
            }
        }
        cudaFreeAsync(data, last->handle);
    }
    cudaGetLastError(); /* at exit the runtime may already be unloading */
    leave_device(scope);
    for (int i = 0; i < buf->nusers; i++)
        spk_stream_release(buf->users[i]);
    free(buf);
    return true;
}

static void retry_deferred_frees(void)
{
    pthread_mutex_lock(&deferred_lock);
    deferred_free **link = &deferred_frees;
    while (*link) {
        deferred_free *d = *link;
        if (free_after_users(d->data, d->buffer)) {
            *link = d->next;
            free(d);
        } else {
            link = &d->next;
        }
    }
    pthread_mutex_unlock(&deferred_lock);
}

static void device_release(spk_storage *storage)
{
    device_buffer *buf = storage->context;
    if (free_after_users(storage->data, buf))
        return;
    deferred_free *d = malloc(sizeof *d);
    if (!d)
        return; /* leak rather than free memory a captured graph may use */
    d->data = storage->data;
    d->buffer = buf;
    pthread_mutex_lock(&deferred_lock);
    d->next = deferred_frees;
    deferred_frees = d;
    pthread_mutex_unlock(&deferred_lock);
}

bool spk_storage_is_device(const spk_storage *storage)
{
    return storage && storage->device != SPK_HOST && storage->release == device_release;
}

void spk_storage_use(spk_storage *storage, spk_stream *s)
{
    if (!spk_storage_is_device(storage) || !s)
        return;
    device_buffer *buf = storage->context;
    if (s->capturing)
        keep_storage(&s->captured, &s->ncaptured, &s->captured_cap, storage);
    if (buf->nusers > 0 && buf->users[buf->nusers - 1] == s)
        return;
    for (int i = 0; i < buf->nusers; i++) {
        if (buf->users[i] == s) { /* move to the end: most recent */
            memmove(&buf->users[i], &buf->users[i + 1], (size_t)(buf->nusers - i - 1) * sizeof *buf->users);
            buf->users[buf->nusers - 1] = s;
            return;
        }
    }
    if (buf->nusers == MAX_USERS) {
        buf->overflow = true;
        spk_stream_release(buf->users[0]);
        memmove(&buf->users[0], &buf->users[1], (MAX_USERS - 1) * sizeof *buf->users);
        buf->nusers--;
    }
    spk_stream_retain(s);
    buf->users[buf->nusers++] = s;
}

spk_storage *spk_device_storage_new(size_t bytes, spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return NULL;
    device_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return spk_fail_null("out of memory allocating a device buffer record");
    buf->device = s->device;
    device_scope scope = enter_device(s->device);
    void *data = NULL;
    cudaError_t err = cudaMallocAsync(&data, bytes ? bytes : 1, s->handle);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(data, 0, bytes, s->handle);
    leave_device(scope);
    if (err != cudaSuccess) {
        cudaGetLastError();
        free(buf);
        if (data)
            cudaFreeAsync(data, s->handle);
        if (err == cudaErrorMemoryAllocation) {
            size_t free_bytes = 0, total_bytes = 0;
            cudaMemGetInfo(&free_bytes, &total_bytes);
            cudaGetLastError();
            return spk_fail_null("spk.cuda: out of device memory allocating %zu bytes on device %d "
                                 "(%zu of %zu bytes free)", bytes, s->device, free_bytes, total_bytes);
        }
        return spk_fail_null("spk.cuda: allocating %zu bytes: %s", bytes, cudaGetErrorString(err));
    }
    spk_storage *storage = spk_storage_wrap(data, bytes, s->device, device_release, buf);
    if (!storage) {
        cudaFreeAsync(data, s->handle);
        free(buf);
        return NULL;
    }
    spk_storage_use(storage, s);
    return storage;
}

bool spk_tensor_is_device(const spk_tensor *t)
{
    return t && t->storage && t->storage->device != SPK_HOST;
}

spk_tensor *spk_device_tensor_new(spk_dtype dtype, int ndim, const int64_t *shape, spk_stream *s)
{
    /* Shape checks come from the core: build the host description first. */
    int64_t numel = 1;
    if (ndim < 0 || ndim > SPK_MAX_DIMS)
        return spk_fail_null("tensor rank %d is out of range [0, %d]", ndim, SPK_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return spk_fail_null("negative size %lld in dimension %d", (long long)shape[i], i + 1);
        numel *= shape[i];
    }
    spk_storage *storage = spk_device_storage_new((size_t)numel * spk_dtype_size(dtype), s);
    if (!storage)
        return NULL;
    spk_tensor *t = spk_tensor_on_storage(storage, dtype, ndim, shape);
    spk_storage_release(storage);
    return t;
}

static int enqueue_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    if (bytes == 0)
        return 0;
    return spk_cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, s->handle), "cudaMemcpyAsync");
}

int spk_memcpy_h2d(void *dst, const void *src, size_t bytes, spk_stream *s)
{
    return enqueue_copy(dst, src, bytes, cudaMemcpyHostToDevice, s);
}

int spk_memcpy_d2h(void *dst, const void *src, size_t bytes, spk_stream *s)
{
    return enqueue_copy(dst, src, bytes, cudaMemcpyDeviceToHost, s);
}

int spk_memcpy_d2d(void *dst, const void *src, size_t bytes, spk_stream *s)
{
    return enqueue_copy(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
}

static size_t tensor_bytes(const spk_tensor *t)
{
    return (size_t)spk_tensor_numel(t) * spk_dtype_size(t->dtype);
}

static int check_same(const spk_tensor *dst, const spk_tensor *src, const char *what)
{
    if (dst->dtype != src->dtype || !spk_tensor_same_shape(dst, src)) {
        char a[128], b[128];
        return spk_fail("%s: destination is %s %s, source is %s %s", what, spk_dtype_name(dst->dtype),
                        spk_shape_string(dst, a, sizeof a), spk_dtype_name(src->dtype),
                        spk_shape_string(src, b, sizeof b));
    }
    return 0;
}

int spk_tensor_copy_to_device(spk_tensor *dev, const spk_tensor *host, spk_stream *s)
{
    if (!spk_tensor_is_device(dev) || spk_tensor_is_device(host))
        return spk_fail("copy to device: needs a device destination and a host source");
    if (check_same(dev, host, "copy to device"))
        return -1;
    if (!spk_tensor_is_contiguous(dev))
        return spk_fail("copy to device: the device tensor is not contiguous");
    if (!(s = spk_stream_or_default(s)))
        return -1;
    spk_tensor *packed = spk_tensor_contiguous(host);
    if (!packed)
        return -1;
    /* From pageable memory the copy has staged the source when it returns. */
    int rc = spk_memcpy_h2d(spk_tensor_data(dev), spk_tensor_data(packed), tensor_bytes(dev), s);
    spk_tensor_free(packed);
    if (rc == 0)
        spk_storage_use(dev->storage, s);
    return rc;
}

spk_tensor *spk_tensor_to_device(const spk_tensor *host, spk_stream *s)
{
    if (spk_tensor_is_device(host))
        return spk_fail_null("to device: the tensor is already on a device");
    spk_tensor *dev = spk_device_tensor_new(host->dtype, host->ndim, host->shape, s);
    if (!dev)
        return NULL;
    if (spk_tensor_copy_to_device(dev, host, s)) {
        spk_tensor_free(dev);
        return NULL;
    }
    return dev;
}

/* Smallest and one-past-largest element the view touches (non-negative strides). */
static int view_span(const spk_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t first = t->offset, last = t->offset;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] == 0) {
            *lo = *hi = t->offset;
            return 0;
        }
        int64_t reach = (t->shape[i] - 1) * t->strides[i];
        if (reach < 0)
            first += reach;
        else
            last += reach;
    }
    *lo = first;
    *hi = last + 1;
    return 0;
}

spk_tensor *spk_tensor_to_host(const spk_tensor *dev, spk_stream *s)
{
    if (!spk_tensor_is_device(dev))
        return spk_fail_null("to host: the tensor is not on a device");
    if (!(s = spk_stream_or_default(s)))
        return NULL;
    /* Copy the span the view covers, then let the core gather the view. */
    int64_t lo, hi;
    view_span(dev, &lo, &hi);
    size_t esize = spk_dtype_size(dev->dtype);
    spk_storage *staging = spk_storage_new_host((size_t)(hi - lo) * esize);
    if (!staging)
        return NULL;
    const char *src = (const char *)dev->storage->data + (size_t)lo * esize;
    spk_storage_use(dev->storage, s);
    if (spk_memcpy_d2h(staging->data, src, (size_t)(hi - lo) * esize, s) || spk_stream_synchronize(s)) {
        spk_storage_release(staging);
        return NULL;
    }
    spk_tensor view = *dev;
    view.storage = staging;
    view.offset = dev->offset - lo;
    spk_tensor *out = spk_tensor_clone(&view);
    spk_storage_release(staging);
    return out;
}

int spk_tensor_copy_to_host(spk_tensor *host, const spk_tensor *dev, spk_stream *s)
{
    if (spk_tensor_is_device(host) || !spk_tensor_is_device(dev))
        return spk_fail("copy to host: needs a host destination and a device source");
    if (check_same(host, dev, "copy to host"))
        return -1;
    spk_tensor *tmp = spk_tensor_to_host(dev, s);
    if (!tmp)
        return -1;
    int rc = spk_tensor_copy(host, tmp);
    spk_tensor_free(tmp);
    return rc;
}

int spk_tensor_copy_device(spk_tensor *dst, const spk_tensor *src, spk_stream *s)
{
    if (!spk_tensor_is_device(dst) || !spk_tensor_is_device(src))
        return spk_fail("device copy: both tensors must be on a device");
    if (check_same(dst, src, "device copy"))
        return -1;
    if (!spk_tensor_is_contiguous(dst) || !spk_tensor_is_contiguous(src))
        return spk_fail("device copy: both tensors must be contiguous");
    if (!(s = spk_stream_or_default(s)))
        return -1;
    if (spk_memcpy_d2d(spk_tensor_data(dst), spk_tensor_data(src), tensor_bytes(dst), s))
        return -1;
    spk_storage_use(dst->storage, s);
    spk_storage_use(src->storage, s);
    return 0;
}

int spk_tensor_zero_device(spk_tensor *dev, spk_stream *s)
{
    if (!spk_tensor_is_device(dev) || !spk_tensor_is_contiguous(dev))
        return spk_fail("zero: needs a contiguous device tensor");
    if (!(s = spk_stream_or_default(s)))
        return -1;
    if (spk_cuda_check(cudaMemsetAsync(spk_tensor_data(dev), 0, tensor_bytes(dev), s->handle), "cudaMemsetAsync"))
        return -1;
    spk_storage_use(dev->storage, s);
    return 0;
}

/* ---- graphs ------------------------------------------------------------ */

struct spk_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int device;
    spk_storage **kept; /* storages the captured work uses */
    int nkept;
};

int spk_graph_capture_begin(spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    if (is_capturing(s))
        return spk_fail("spk.cuda: the stream is already capturing a graph");
    /* A gemm captured below must find its handle made: making it allocates. */
    if (spk_blas_prepare(spk_stream_device(s)))
        return -1;
    if (spk_cuda_check(cudaStreamBeginCapture(s->handle, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture"))
        return -1;
    s->capturing = true;
    return 0;
}

bool spk_stream_is_capturing(const spk_stream *s)
{
    return s && is_capturing(s);
}

static void drop_captured(spk_stream *s, spk_storage ***kept, int *nkept)
{
    if (kept) {
        *kept = s->captured;
        *nkept = s->ncaptured;
    } else {
        for (int i = 0; i < s->ncaptured; i++)
            spk_storage_release(s->captured[i]);
        free(s->captured);
    }
    s->captured = NULL;
    s->ncaptured = s->captured_cap = 0;
    s->capturing = false;
}

void spk_graph_capture_abort(spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return;
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture(s->handle, &graph) == cudaSuccess && graph)
        cudaGraphDestroy(graph);
    cudaGetLastError();
    drop_captured(s, NULL, NULL);
    retry_deferred_frees();
}

spk_graph *spk_graph_capture_end(spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return NULL;
    spk_graph *g = calloc(1, sizeof *g);
    if (!g) {
        spk_graph_capture_abort(s);
        return spk_fail_null("out of memory allocating a graph");
    }
    g->device = s->device;
    if (spk_cuda_check(cudaStreamEndCapture(s->handle, &g->graph), "cudaStreamEndCapture")) {
        drop_captured(s, NULL, NULL);
        free(g);
        retry_deferred_frees();
        return NULL;
    }
    drop_captured(s, &g->kept, &g->nkept);
    retry_deferred_frees();
    if (spk_cuda_check(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate")) {
        spk_graph_free(g);
        return NULL;
    }
    return g;
}

int spk_graph_replay(spk_graph *g, spk_stream *s)
{
    if (!(s = spk_stream_or_default(s)))
        return -1;
    if (spk_cuda_check(cudaGraphLaunch(g->exec, s->handle), "cudaGraphLaunch"))
        return -1;
    for (int i = 0; i < g->nkept; i++)
        spk_storage_use(g->kept[i], s);
    return 0;
}

int spk_graph_node_count(const spk_graph *g, size_t *count)
{
    return spk_cuda_check(cudaGraphGetNodes(g->graph, NULL, count), "cudaGraphGetNodes");
}

void spk_graph_free(spk_graph *g)
{
    if (!g)
        return;
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    if (g->graph)
        cudaGraphDestroy(g->graph);
    cudaGetLastError();
    for (int i = 0; i < g->nkept; i++)
        spk_storage_release(g->kept[i]);
    free(g->kept);
    free(g);
}

/* ---- process teardown ---------------------------------------------------- */

void spk_cuda_release_process_state(void)
{
    uint64_t used = __atomic_load_n(&devices_used, __ATOMIC_RELAXED);
    if (!used)
        return; /* no stream was ever made: nothing to wait for or free */
    int previous = -1;
    cudaGetDevice(&previous);
    for (int d = 0; d < MAX_DEVICES; d++)
        if (used & ((uint64_t)1 << d)) {
            cudaSetDevice(d);
            cudaDeviceSynchronize();
        }
    retry_deferred_frees();
    spk_blas_release();
    spk_gemm_3xtf32_release();
    spk_cudnn_release();
    pthread_mutex_lock(&default_lock);
    for (int d = 0; d < MAX_DEVICES; d++) {
        spk_stream *s = &default_streams[d];
        if (!s->is_default)
            continue;
        cudaSetDevice(d);
        cudaStreamDestroy(s->handle);
        for (int i = 0; i < s->ncaptured; i++)
            spk_storage_release(s->captured[i]);
        free(s->captured);
        memset(s, 0, sizeof *s);
    }
    pthread_mutex_unlock(&default_lock);
    for (int d = 0; d < MAX_DEVICES; d++)
        if (used & ((uint64_t)1 << d)) {
            cudaMemPool_t pool;
            cudaSetDevice(d);
            if (cudaDeviceGetDefaultMemPool(&pool, d) == cudaSuccess)
                cudaMemPoolTrimTo(pool, 0); /* hand the pool's free memory back */
        }
    if (previous >= 0)
        cudaSetDevice(previous);
    cudaGetLastError();
}
