/*
 * device.cu -- the device layer shared by the CUDA backends: counting the
 * GPUs and turning CUDA runtime errors into nlsepy status codes
 * (NLSE_ERR_BACKEND with the runtime's message).
 */
#include <cuda_runtime.h>
#include "nlsepy/common.h"

extern "C" int nlse_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return NLSE_OK;
    return nlse_fail(NLSE_ERR_BACKEND, "CUDA error in %s: %s", what, cudaGetErrorString(err));
}

/* Number of usable CUDA devices (0 when there is no driver or no GPU). */
extern "C" int nlse_cuda_device_count(int *count)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    *count = (err == cudaSuccess) ? n : 0;
    (void)cudaGetLastError(); /* clear the sticky "no device" error */
    return NLSE_OK;
}
