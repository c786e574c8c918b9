/* Thin helpers over cuDNN: one handle per device, bound to the caller's stream
 * at each use, and cuDNN statuses turned into spk_fail messages.
 *
 * Messages read "cudnnRNNForward: CUDNN_STATUS_NOT_SUPPORTED (<detail>)": the
 * function, the status name (cudnnGetErrorString gives the name itself), and,
 * when cuDNN left one, the first line of cudnnGetLastErrorString, which says
 * which check failed.
 *
 * cuDNN creates descriptors without a device, but cudnnCreate needs one
 * (without a GPU it returns CUDNN_STATUS_NOT_INITIALIZED); spk_cudnn_handle
 * therefore checks spk_cuda_require() first so the caller sees the usual
 * "spk.cuda: no CUDA device" message. */
#ifndef SPK_CUDA_CUDNN_RNN_H
#define SPK_CUDA_CUDNN_RNN_H

#include <stddef.h>

#include <cudnn.h>

#include "cuda/runtime.h"

/* 0 on CUDNN_STATUS_SUCCESS, else -1 with the message above. */
int spk_cudnn_check(cudnnStatus_t status, const char *what);

/* The current device's cuDNN handle (created once per device, kept for the
 * life of the process), with its stream set to s (NULL: the default stream).
 * Makes s's device current. */
int spk_cudnn_handle(spk_stream *s, cudnnHandle_t *out);
/* Destroys the cuDNN handles (made again on next use). */
void spk_cudnn_release(void);

/* cudnnGetVersion() of the library loaded at run time, e.g. 91400, and the
 * version these sources were compiled against (CUDNN_VERSION). */
size_t spk_cudnn_version(void);
size_t spk_cudnn_header_version(void);

#endif
