/*
 * check.cuh -- what the CUDA backends (fd.cu, dipolar.cu) share at compile time:
 * CUDA runtime errors as nlsepy statuses (device.cu), the early-return
 * macros, and the complex vector type of a precision.
 */
#ifndef NLSEPY_CUDA_CHECK_CUH
#define NLSEPY_CUDA_CHECK_CUH

#include <cuda_runtime.h>

extern "C" int nlse_cuda_check(cudaError_t err, const char *what);

/* cudaMalloc of `bytes` (at least 1) into *p; on failure *p = NULL and
 * NLSE_ERR_BACKEND saying what needed how much and how much is free. */
extern "C" int nlse_cuda_alloc(void **p, size_t bytes, const char *what);

/* return the nlsepy status of a failed CUDA runtime call */
#define CK(call)                                                        \
    do {                                                                \
        int st_ = nlse_cuda_check((call), #call);                       \
        if (st_)                                                        \
            return st_;                                                 \
    } while (0)

/* propagate an nlsepy status */
#define CKS(call)                                                       \
    do {                                                                \
        int st_ = (call);                                               \
        if (st_)                                                        \
            return st_;                                                 \
    } while (0)

/* float2 / double2: one complex value of precision R */
template <typename R> struct Vec2;
template <> struct Vec2<float> { typedef float2 T; };
template <> struct Vec2<double> { typedef double2 T; };

#endif /* NLSEPY_CUDA_CHECK_CUH */
