/* cuDNN handles and status messages (see cudnn_rnn.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "core/error.h"
#include "cuda/cudnn_rnn.h"

int spk_cudnn_check(cudnnStatus_t status, const char *what)
{
    if (status == CUDNN_STATUS_SUCCESS)
        return 0;
    /* Reading the detail also clears it, so a later failure never shows a stale one. */
    char detail[512] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    detail[strcspn(detail, "\r\n")] = '\0';
    if (detail[0])
        return spk_fail("%s: %s (%s)", what, cudnnGetErrorString(status), detail);
    return spk_fail("%s: %s", what, cudnnGetErrorString(status));
}

#define MAX_DEVICES 64
static cudnnHandle_t handles[MAX_DEVICES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

int spk_cudnn_handle(spk_stream *s, cudnnHandle_t *out)
{
    if (spk_cuda_require())
        return -1;
    s = spk_stream_or_default(s);
    if (!s)
        return -1;
    int device = spk_stream_device(s);
    if (device < 0 || device >= MAX_DEVICES)
        return spk_fail("cudnn: device %d is beyond the %d supported", device, MAX_DEVICES);
    if (spk_device_set(device))
        return -1;
    pthread_mutex_lock(&handles_lock);
    if (!handles[device]) {
        cudnnHandle_t h = NULL;
        if (spk_cudnn_check(cudnnCreate(&h), "cudnnCreate")) {
            pthread_mutex_unlock(&handles_lock);
            return -1;
        }
        handles[device] = h;
    }
    cudnnHandle_t h = handles[device];
    pthread_mutex_unlock(&handles_lock);
    if (spk_cudnn_check(cudnnSetStream(h, (cudaStream_t)spk_stream_handle(s)), "cudnnSetStream"))
        return -1;
    *out = h;
    return 0;
}

void spk_cudnn_release(void)
{
    pthread_mutex_lock(&handles_lock);
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (handles[d]) {
            cudnnDestroy(handles[d]);
            handles[d] = NULL;
        }
    }
    pthread_mutex_unlock(&handles_lock);
}

size_t spk_cudnn_version(void) { return cudnnGetVersion(); }
size_t spk_cudnn_header_version(void) { return CUDNN_VERSION; }
