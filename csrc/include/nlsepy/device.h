/*
 * nlsepy/device.h -- the CUDA device layer shared by every CUDA backend
 * (built only with the CUDA backend, cuda/common/device.cu).
 */
#ifndef NLSEPY_DEVICE_H
#define NLSEPY_DEVICE_H

#include <stddef.h>
#include "nlsepy/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices in *count (0 without a driver or a GPU). */
int nlse_cuda_device_count(int *count);

/* Make device `index` (0 .. count - 1) current for the calling thread:
 * solvers created afterwards live there (one GPU per MPI rank). */
int nlse_cuda_set_device(int index);

/* The calling thread's current device in *device.  Every CUDA handle keeps
 * the device it was made on and makes it current for each of its calls,
 * then makes the caller's device current again. */
int nlse_cuda_get_device(int *device);

/* Page-lock (register) host memory the caller owns, and release it (before
 * the memory is freed). */
int nlse_cuda_host_register(void *ptr, size_t bytes);
int nlse_cuda_host_unregister(void *ptr);

/* Device buffers shared between the processes of one node (CUDA IPC): the
 * halo mailboxes of distributed runs.  A handle is NLSE_CUDA_IPC_BYTES
 * bytes; ipc_open maps another process's buffer (peer access over NVLink
 * or PCIe), ipc_close unmaps it. */
#define NLSE_CUDA_IPC_BYTES 64
int nlse_cuda_buffer_alloc(size_t bytes, void **ptr);
int nlse_cuda_buffer_free(void *ptr);
int nlse_cuda_ipc_handle(void *ptr, void *handle);
int nlse_cuda_ipc_open(const void *handle, void **ptr);
int nlse_cuda_ipc_close(void *ptr);

/* Name of the current device. */
int nlse_cuda_device_name(char *buf, int len);

/* Free and total memory of the current device in bytes. */
int nlse_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);

/* Device-to-device copy bandwidth in GB/s, bytes read + written, median of
 * `reps` copies of `bytes` timed with CUDA events. */
int nlse_cuda_copy_bandwidth(size_t bytes, int reps, double *gbps);

#ifdef __cplusplus
}
#endif
#endif /* NLSEPY_DEVICE_H */
