/*
 * reduce.cuh -- the block sums the CUDA backends' reductions share: a
 * double per thread summed over the block in one fixed order (each warp's
 * shuffle tree, then the warps in order), so a sum does not depend on
 * timing and every launch of the same data gives the same bits; the
 * block's largest value; and the sum of the blocks' parts by one block.
 */
#ifndef NLSEPY_CUDA_REDUCE_CUH
#define NLSEPY_CUDA_REDUCE_CUH

#include <cuda_runtime.h>

/* The sum of v over the block in thread 0 (0 in the others); `red` holds a
 * double for each warp of the block, whose size is a multiple of 32. */
__device__ __forceinline__ double nlse_block_sum(double v, double *red)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        red[wid] = v;
    __syncthreads();
    double s = 0;
    if (threadIdx.x == 0)
        for (int q = 0; q < (int)(blockDim.x + 31) / 32; ++q)
            s += red[q];
    return s;
}

/* The largest v over the block (fmax) in thread 0 (0 in the others);
 * `red` as for nlse_block_sum. */
__device__ __forceinline__ double nlse_block_max(double v, double *red)
{
    for (int d = 16; d > 0; d >>= 1)
        v = fmax(v, __shfl_xor_sync(0xffffffffu, v, d));
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = v;
    __syncthreads();
    double m = 0;
    if (threadIdx.x == 0)
        for (int q = 0; q < (int)(blockDim.x >> 5); ++q)
            m = fmax(m, red[q]);
    return m;
}

/* The sum of part[0 .. n-1] in thread 0 of a one-block launch (0 in the
 * others): each thread's stride of the parts, then the block sum. */
__device__ __forceinline__ double nlse_parts_sum(const double *part, size_t n, double *red)
{
    double s = 0;
    for (size_t q = threadIdx.x; q < n; q += blockDim.x)
        s += part[q];
    return nlse_block_sum(s, red);
}

#endif /* NLSEPY_CUDA_REDUCE_CUH */
