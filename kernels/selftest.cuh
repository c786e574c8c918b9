// Helpers for kernels/selftest.cu; also exercises #include "..." through the
// kernel folder on NVRTC's include path.
#pragma once

__device__ __forceinline__ float spk_selftest_axpy(float a, float x, float y)
{
    return fmaf(a, x, y);
}
