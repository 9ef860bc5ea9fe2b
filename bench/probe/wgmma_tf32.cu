/*
 * wgmma_tf32.cu -- the Hopper warpgroup MMA in TF32 with the A operand in
 * registers and B from shared memory (no swizzle, K-major core matrices):
 * checks the fragment layouts and the descriptor fields the float
 * Maxwell-Bloch kernel relies on, against exact products of small
 * integers, and measures the rate of m64n64k8 and m64n32k8 with one and
 * two warpgroups an SM.
 *
 *   nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/probe/wgmma_tf32.cu -o /tmp/wg && /tmp/wg
 */
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CK(x)                                                                                                        \
    do {                                                                                                             \
        cudaError_t e_ = (x);                                                                                        \
        if (e_ != cudaSuccess) {                                                                                     \
            printf("CUDA error %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_));                               \
            exit(1);                                                                                                 \
        }                                                                                                            \
    } while (0)

__device__ __forceinline__ uint64_t wg_desc(const void *p, uint32_t lbo, uint32_t sbo)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

#define D16(o)                                                                                                       \
    "+f"(d[o + 0]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]),  \
        "+f"(d[o + 7]), "+f"(d[o + 8]), "+f"(d[o + 9]), "+f"(d[o + 10]), "+f"(d[o + 11]), "+f"(d[o + 12]),          \
        "+f"(d[o + 13]), "+f"(d[o + 14]), "+f"(d[o + 15])

/* d (+)= (sb) a B, m64n64k8, A in registers */
template <int SB>
__device__ __forceinline__ void wg64(float d[32], const uint32_t a[4], uint64_t db, int acc)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
                 "{%32,%33,%34,%35}, %36, p, 1, %38;\n}\n"
                 : D16(0), D16(16)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc), "n"(SB));
}

__device__ __forceinline__ void wg32(float d[16], const uint32_t a[4], uint64_t db, int acc)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "
                 "{%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
                 : D16(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* B (8 x 64, B[k][n]) into core matrices: (n group, k half) at ng * 256 + kh * 128, row n % 8 at 16 bytes */
__device__ __forceinline__ int bpos(int n, int k) { return (n / 8) * 64 + (k / 4) * 32 + (n % 8) * 4 + (k % 4); }

/* one product D = sb A B (64 x 8 times 8 x 64) with the descriptor fields lbo, sbo; D by the assumed layout */
__global__ void k_check(const float *A, const float *B, float *D, uint32_t lbo, uint32_t sbo, int neg)
{
    __shared__ __align__(128) float Bs[8 * 64];
    const int t = threadIdx.x, w = t >> 5, l = t & 31, g = l >> 2, q = l & 3;
    for (int i = t; i < 512; i += 128)
        Bs[bpos(i % 64, i / 64)] = B[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    const int r0 = 16 * w + g;
    uint32_t a[4] = {__float_as_uint(A[r0 * 8 + q]), __float_as_uint(A[(r0 + 8) * 8 + q]),
                     __float_as_uint(A[r0 * 8 + q + 4]), __float_as_uint(A[(r0 + 8) * 8 + q + 4])};
    float d[32];
    for (int i = 0; i < 32; ++i)
        d[i] = 0;
    const uint64_t db = wg_desc(Bs, lbo, sbo);
    wg_fence();
    if (neg)
        wg64<-1>(d, a, db, 0);
    else
        wg64<1>(d, a, db, 0);
    wg_commit();
    wg_wait<0>();
    for (int j = 0; j < 8; ++j)
        for (int c = 0; c < 4; ++c)
            D[(r0 + 8 * (c >> 1)) * 64 + 8 * j + 2 * q + (c & 1)] = d[4 * j + c];
}

/* rate: each warpgroup issues batches of NB wgmma into two accumulators, then waits */
template <int N, int NB>
__global__ void k_rate(float *out, int iters)
{
    __shared__ __align__(128) float Bs[8 * 64 * 4];
    const int t = threadIdx.x, wg = t >> 7;
    for (int i = t; i < 8 * 64 * 4; i += blockDim.x)
        Bs[i] = 1e-3f * (i % 7);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    uint32_t a[4] = {__float_as_uint(1.0f), __float_as_uint(0.5f), __float_as_uint(0.25f), __float_as_uint(2.0f)};
    float d0[32], d1[32];
    for (int i = 0; i < 32; ++i)
        d0[i] = d1[i] = 0;
    const uint64_t db0 = wg_desc(Bs + 512 * (wg & 1), 128, 256), db1 = wg_desc(Bs + 1024 + 512 * (wg & 1), 128, 256);
    for (int it = 0; it < iters; ++it) {
        wg_fence();
#pragma unroll
        for (int b = 0; b < NB / 2; ++b) {
            if (N == 64) {
                wg64<1>(d0, a, db0, 1);
                wg64<1>(d1, a, db1, 1);
            } else {
                wg32(d0, a, db0, 1);
                wg32(d1, a, db1, 1);
            }
        }
        wg_commit();
        wg_wait<0>();
    }
    float s = 0;
    for (int i = 0; i < 32; ++i)
        s += d0[i] + d1[i];
    if (s == 12345.0f)
        out[t] = s;
}

static void check(uint32_t lbo, uint32_t sbo, int neg)
{
    float hA[512], hB[512], hD[4096], ref[4096];
    for (int i = 0; i < 512; ++i) {
        hA[i] = (float)((i * 37) % 29 - 14);
        hB[i] = (float)((i * 53) % 31 - 15);
    }
    for (int m = 0; m < 64; ++m)
        for (int n = 0; n < 64; ++n) {
            float s = 0;
            for (int k = 0; k < 8; ++k)
                s += hA[m * 8 + k] * hB[k * 64 + n];
            ref[m * 64 + n] = neg ? -s : s;
        }
    float *A, *B, *D;
    CK(cudaMalloc(&A, 2048));
    CK(cudaMalloc(&B, 2048));
    CK(cudaMalloc(&D, 16384));
    CK(cudaMemcpy(A, hA, 2048, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hB, 2048, cudaMemcpyHostToDevice));
    CK(cudaMemset(D, 0, 16384));
    k_check<<<1, 128>>>(A, B, D, lbo, sbo, neg);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hD, D, 16384, cudaMemcpyDeviceToHost));
    double err = 0;
    for (int i = 0; i < 4096; ++i)
        err = fmax(err, fabs(hD[i] - ref[i]));
    printf("layout check lbo=%u sbo=%u scale_b=%d: max |D - A B| = %g %s\n", lbo, sbo, neg ? -1 : 1, err,
           err == 0 ? "EXACT" : "wrong");
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
}

template <int N, int NB> static void rate(int wgs)
{
    float *out;
    CK(cudaMalloc(&out, 4 << 20));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int iters = 4000;
    k_rate<N, NB><<<sms, 128 * wgs>>>(out, 10);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
        cudaEventRecord(e0);
        k_rate<N, NB><<<sms, 128 * wgs>>>(out, iters);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        best = fminf(best, ms);
    }
    const double flops = 2.0 * 64 * N * 8 * NB * (double)iters * sms * wgs;
    printf("wgmma m64n%dk8 tf32 RS, %d in flight, %d warpgroup(s) an SM: %.1f TFLOP/s (best of 5)\n", N, NB, wgs,
           flops / best * 1e-9);
    cudaFree(out);
}

int main()
{
    check(128, 256, 0);
    check(256, 128, 0);
    check(128, 256, 1);
    rate<64, 12>(1);
    rate<64, 12>(2);
    rate<64, 24>(1);
    rate<64, 24>(2);
    rate<32, 12>(1);
    rate<32, 12>(2);
    rate<32, 24>(2);
    return 0;
}
