/*
 * check.cuh -- what the CUDA backends share at compile time: CUDA runtime
 * errors as nlsepy statuses (device.cu), the early-return macros, a
 * handle's teardown, a handle's device made current for one call of the C
 * API (ON_DEVICE), the grid-stride loop, and the complex vector type of a
 * precision.
 */
#ifndef NLSEPY_CUDA_CHECK_CUH
#define NLSEPY_CUDA_CHECK_CUH

#include <cuda_runtime.h>

extern "C" int nlse_cuda_check(cudaError_t err, const char *what);

/* cudaMalloc of `bytes` (at least 1) into *p; on failure *p = NULL and
 * NLSE_ERR_BACKEND saying what needed how much and how much is free. */
extern "C" int nlse_cuda_alloc(void **p, size_t bytes, const char *what);

/* A handle's teardown (its destroy), the same in every backend:
 * wait: the work queued on `stream` (if it was made) finished, before the
 * buffers it uses go; free_all: cudaFree of each of the `n` device buffers
 * (a NULL one is a no-op); drop_stream: the events of `ev` that were made
 * (non-NULL), then `stream` if it was made, destroyed, and the runtime's
 * error state cleared, since a destroy reports nothing and the next call's
 * checks must not see what it left. */
extern "C" void nlse_cuda_wait(cudaStream_t stream);
extern "C" void nlse_cuda_free_all(void *const *bufs, size_t n);
extern "C" void nlse_cuda_drop_stream(cudaStream_t stream, const cudaEvent_t *ev, size_t nev);

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

/* The device of a handle, current for one call of the C API (device.cu).
 * Every CUDA handle has an `int device`, the caller's current device when
 * it was made (nlse_cuda_current_device), and each entry that touches the
 * GPU opens with ON_DEVICE(s): the handle's device becomes current for the
 * call, and the caller's device is current again when the entry returns
 * (also on an early error return), so one process can hold handles on
 * several GPUs and call them in any order, from any thread.  Nothing is
 * switched when the two devices are the same (one GPU, or one GPU per MPI
 * rank) or when s is NULL (the entry's own check reports that).  A caller
 * whose device has no context yet (a thread that never chose one) is left
 * on the handle's device rather than given a context it never asked for.
 *
 *   ON_DEVICE(s);              an int entry: a failed switch is returned
 *   ON_DEVICE_OR(s, NAN);      another return type: `NAN` on a failed switch
 *   ON_DEVICE_VOID(s);         a void entry (destroy): goes on regardless */
extern "C" int nlse_cuda_current_device(void);
extern "C" int nlse_cuda_enter(int device, int *prev);
extern "C" void nlse_cuda_leave(int prev);

struct DeviceScope {
    int prev, st;
    explicit DeviceScope(int device) : prev(-1), st(nlse_cuda_enter(device, &prev)) {}
    ~DeviceScope() { nlse_cuda_leave(prev); }
    DeviceScope(const DeviceScope &) = delete;
    DeviceScope &operator=(const DeviceScope &) = delete;
};

#define ON_DEVICE_OR(s, fail)                                           \
    DeviceScope on_device_((s) ? (s)->device : -1);                     \
    if (on_device_.st)                                                  \
    return fail
#define ON_DEVICE(s) ON_DEVICE_OR(s, on_device_.st)
#define ON_DEVICE_VOID(s) DeviceScope on_device_((s) ? (s)->device : -1)

/* A grid-stride loop over n items, each thread from its index in the grid
 * by the grid's size:
 *   for (long long q = grid_first(); q < n; q += grid_stride()) */
__device__ __forceinline__ long long grid_first()
{
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_stride() { return (long long)gridDim.x * blockDim.x; }

/* float2 / double2: one complex value of precision R */
template <typename R> struct Vec2;
template <> struct Vec2<float> { typedef float2 T; };
template <> struct Vec2<double> { typedef double2 T; };

#endif /* NLSEPY_CUDA_CHECK_CUH */
