/*
 * device.cu -- the device layer shared by the CUDA backends: counting the
 * GPUs, turning CUDA runtime errors into nlsepy status codes
 * (NLSE_ERR_BACKEND with the runtime's message), device allocation and
 * a handle's teardown, a handle's device current for one call (ON_DEVICE
 * in check.cuh).
 */
#include <stdarg.h>
#include <string.h>
#include <cuda.h> /* driver types only: the entry points are read at run time */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include "nlsepy/device.h"

extern "C" int nlse_cuda_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        return NLSE_OK;
    return nlse_fail(NLSE_ERR_BACKEND, "CUDA error in %s: %s", what, cudaGetErrorString(err));
}

/* NLSE_OK for cudaSuccess; else the runtime's error state cleared and
 * NLSE_ERR_BACKEND saying "<what>: <the runtime's message>", `what`
 * formatted from fmt and the arguments that follow. */
static int runtime_status(cudaError_t err, const char *fmt, ...)
{
    if (err == cudaSuccess)
        return NLSE_OK;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)cudaGetLastError();
    return nlse_fail(NLSE_ERR_BACKEND, "%s: %s", what, cudaGetErrorString(err));
}

/* The end of a release nobody can act on the failure of (a free, an
 * unmapping): the runtime's error state cleared; NLSE_OK. */
static int released(cudaError_t err)
{
    (void)err;
    (void)cudaGetLastError();
    return NLSE_OK;
}

extern "C" int nlse_cuda_alloc(void **p, size_t bytes, const char *what)
{
    cudaError_t err = cudaMalloc(p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t fr = 0, tot = 0;
        (void)cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        *p = NULL;
        return nlse_fail(NLSE_ERR_BACKEND, "out of device memory: %s needs %zu bytes, %zu of %zu free", what,
                         bytes, fr, tot);
    }
    return NLSE_OK;
}

extern "C" void nlse_cuda_wait(cudaStream_t stream)
{
    if (stream)
        cudaStreamSynchronize(stream);
}

extern "C" void nlse_cuda_free_all(void *const *bufs, size_t n)
{
    for (size_t q = 0; q < n; ++q)
        cudaFree(bufs[q]);
}

extern "C" void nlse_cuda_drop_stream(cudaStream_t stream, const cudaEvent_t *ev, size_t nev)
{
    for (size_t q = 0; q < nev; ++q)
        if (ev[q])
            cudaEventDestroy(ev[q]);
    if (stream)
        cudaStreamDestroy(stream);
    (void)cudaGetLastError();
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

/* Make device `index` the current device of the calling thread (the
 * solvers created afterwards live there). */
extern "C" int nlse_cuda_set_device(int index)
{
    int n = 0;
    nlse_cuda_device_count(&n);
    if (index < 0 || index >= n)
        return nlse_fail(NLSE_ERR_VALUE, "CUDA device %d does not exist (this machine has %d)",
                         index, n);
    return runtime_status(cudaSetDevice(index), "cudaSetDevice(%d) failed", index);
}

/* The calling thread's current device (0 when the runtime cannot say: a
 * handle made then fails on its first allocation anyway). */
extern "C" int nlse_cuda_current_device(void)
{
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        dev = 0;
    }
    return dev;
}

extern "C" int nlse_cuda_get_device(int *device)
{
    *device = nlse_cuda_current_device();
    return NLSE_OK;
}

/* Driver entry points read through the runtime (no link to libcuda, so
 * the extension still imports where there is no driver), in their form of
 * CUDA 12.0, which every driver a 12.x or later runtime runs on has. */
typedef CUresult (*DeviceGetFn)(CUdevice *, int);
typedef CUresult (*PrimaryStateFn)(CUdevice, unsigned int *, int *);

static void *driver_fn(const char *name)
{
    void *p = NULL;
#if CUDART_VERSION >= 12050
    cudaDriverEntryPointQueryResult q;
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
#elif CUDART_VERSION >= 12000
    cudaDriverEntryPointQueryResult q;
    cudaError_t err = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &q);
#else
    int q = 0, cudaDriverEntryPointSuccess = 0;
    cudaError_t err = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault);
#endif
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        p = NULL;
    }
    return p;
}

/* Whether the primary context of device `ordinal` exists (1 when the
 * driver cannot say).  Making a device current creates its context (CUDA
 * 12 and later), so a thread is given back only a device that has one: a
 * thread that never chose a device (a frame-fetching worker, whose
 * current device reads 0) gets no context on device 0 it never asked for;
 * it keeps the handle's device current instead. */
static int primary_active(int ordinal)
{
    static const DeviceGetFn get = (DeviceGetFn)driver_fn("cuDeviceGet");
    static const PrimaryStateFn state = (PrimaryStateFn)driver_fn("cuDevicePrimaryCtxGetState");
    CUdevice dev;
    unsigned int flags = 0;
    int active = 1;
    if (get && state && get(&dev, ordinal) == CUDA_SUCCESS &&
        state(dev, &flags, &active) == CUDA_SUCCESS)
        return active != 0;
    return 1;
}

/* Make `device` current for one call of a handle's API; *prev is the
 * device to make current again afterwards (nlse_cuda_leave), -1 when there
 * is none: device < 0, `device` is current already, or the caller's device
 * has no context (primary_active). */
extern "C" int nlse_cuda_enter(int device, int *prev)
{
    int cur = -1;
    *prev = -1;
    if (device < 0)
        return NLSE_OK;
    if (cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        cur = -1;
    }
    if (cur == device)
        return NLSE_OK;
    const int back = cur >= 0 && primary_active(cur);
    const int st = runtime_status(cudaSetDevice(device),
                                  "cudaSetDevice(%d) (the solver's device) failed", device);
    if (!st)
        *prev = back ? cur : -1;
    return st;
}

extern "C" void nlse_cuda_leave(int prev)
{
    if (prev >= 0 && cudaSetDevice(prev) != cudaSuccess)
        (void)cudaGetLastError();
}

/* Page-lock host memory the process already owns (staging buffers of
 * halo exchanges: copies to and from pinned memory run at the bus's speed
 * and need no bounce through the driver's own pinned blocks). */
extern "C" int nlse_cuda_host_register(void *ptr, size_t bytes)
{
    return runtime_status(cudaHostRegister(ptr, bytes, cudaHostRegisterDefault),
                          "cudaHostRegister of %zu bytes failed", bytes);
}

extern "C" int nlse_cuda_host_unregister(void *ptr)
{
    return runtime_status(cudaHostUnregister(ptr), "cudaHostUnregister failed");
}

/* Device memory for exchanges between processes (CUDA IPC mailboxes). */
extern "C" int nlse_cuda_buffer_alloc(size_t bytes, void **ptr)
{
    const int st = runtime_status(cudaMalloc(ptr, bytes ? bytes : 1),
                                  "out of device memory (%zu bytes)", bytes);
    if (st)
        *ptr = NULL;
    return st;
}

extern "C" int nlse_cuda_buffer_free(void *ptr) { return released(cudaFree(ptr)); }

/* The IPC handle of an allocation of nlse_cuda_buffer_alloc (NLSE_CUDA_IPC_BYTES). */
extern "C" int nlse_cuda_ipc_handle(void *ptr, void *handle)
{
    cudaIpcMemHandle_t h;
    const int st = runtime_status(cudaIpcGetMemHandle(&h, ptr), "cudaIpcGetMemHandle failed");
    if (!st)
        memcpy(handle, &h, sizeof h);
    return st;
}

/* Map another process's allocation into this one (the same node). */
extern "C" int nlse_cuda_ipc_open(const void *handle, void **ptr)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    const int st = runtime_status(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess),
                                  "cudaIpcOpenMemHandle failed");
    if (st)
        *ptr = NULL;
    return st;
}

extern "C" int nlse_cuda_ipc_close(void *ptr) { return released(cudaIpcCloseMemHandle(ptr)); }

/* Name of the current device ("" when there is none). */
extern "C" int nlse_cuda_device_name(char *buf, int len)
{
    cudaDeviceProp prop;
    int dev = 0;
    buf[0] = '\0';
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available");
    }
    snprintf(buf, (size_t)len, "%s", prop.name);
    return NLSE_OK;
}

/* Free and total memory of the current device (cudaMemGetInfo). */
extern "C" int nlse_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    return nlse_cuda_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Device-to-device copy bandwidth (bytes read + written per second, median of
 * `reps` cudaMemcpyAsync of `bytes`, timed with CUDA events). */
extern "C" int nlse_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps)
{
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    float ms[64];
    int st = NLSE_OK;
    if (reps < 1 || reps > 64)
        return nlse_fail(NLSE_ERR_VALUE, "reps must be in [1, 64], got %d", reps);
    if ((st = nlse_cuda_check(cudaMalloc(&a, bytes), "cudaMalloc")) ||
        (st = nlse_cuda_check(cudaMalloc(&b, bytes), "cudaMalloc")) ||
        (st = nlse_cuda_check(cudaMemset(a, 1, bytes), "cudaMemset")) ||
        (st = nlse_cuda_check(cudaEventCreate(&e0), "cudaEventCreate")) ||
        (st = nlse_cuda_check(cudaEventCreate(&e1), "cudaEventCreate")))
        goto done;
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice); /* warm-up */
    for (int r = 0; r < reps; ++r) {
        cudaEventRecord(e0, 0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        if ((st = nlse_cuda_check(cudaEventSynchronize(e1), "cudaEventSynchronize")))
            goto done;
        cudaEventElapsedTime(&ms[r], e0, e1);
    }
    qsort(ms, (size_t)reps, sizeof ms[0], cmp_float);
    *gbps = 2.0 * (double)bytes / (ms[reps / 2] * 1e-3) / 1e9;
done:
    void *bufs[] = {a, b};
    const cudaEvent_t ev[] = {e0, e1};
    nlse_cuda_free_all(bufs, 2);
    nlse_cuda_drop_stream(NULL, ev, 2);
    return st;
}
