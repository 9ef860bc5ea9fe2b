// Throughput of mma.sync shapes on this GPU: TF32 m16n8k8, FP64 m16n8k8,
// FP16 m16n8k16 (f32 accumulate); 8 independent accumulators per warp.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
template <int KIND> __global__ void k(float *out, int iters)
{
    float d[8][4] = {};
    double dd[8][4] = {};
    uint32_t a[4] = {threadIdx.x, 1u, 2u, 3u}, b0 = 5u, b1 = 7u;
    double da[4] = {1e-3 * threadIdx.x, 1, 2, 3}, db0 = 1, db1 = 2;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            if (KIND == 0)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                    : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
            else if (KIND == 1)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                    : "+d"(dd[j][0]), "+d"(dd[j][1]), "+d"(dd[j][2]), "+d"(dd[j][3]) : "d"(da[0]), "d"(da[1]), "d"(da[2]), "d"(da[3]), "d"(db0), "d"(db1));
            else
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                    : "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
        }
    }
    float s = 0;
    for (int j = 0; j < 8; ++j)
        for (int c = 0; c < 4; ++c)
            s += d[j][c] + (float)dd[j][c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
int main()
{
    int dev = 0, sms = 0, clk = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
    float *out;
    cudaMalloc(&out, 1 << 24);
    const char *names[3] = {"tf32 m16n8k8", "f64 m16n8k8", "f16 m16n8k16"};
    const double flops[3] = {2.0 * 16 * 8 * 8, 2.0 * 16 * 8 * 8, 2.0 * 16 * 8 * 16};
    for (int kind = 0; kind < 3; ++kind)
        for (int wps = 1; wps <= 4; wps *= 2) { /* warps per scheduler */
            const int threads = 128 * wps, iters = kind == 1 ? 500 : 4000;
            cudaEvent_t e0, e1;
            cudaEventCreate(&e0);
            cudaEventCreate(&e1);
            cudaError_t err = cudaSuccess;
            for (int rep = 0; rep < 2 && err == cudaSuccess; ++rep) {
                cudaEventRecord(e0);
                if (kind == 0) k<0><<<sms, threads>>>(out, iters);
                else if (kind == 1) k<1><<<sms, threads>>>(out, iters);
                else k<2><<<sms, threads>>>(out, iters);
                err = cudaGetLastError();
                cudaEventRecord(e1);
                cudaEventSynchronize(e1);
            }
            if (err != cudaSuccess) { /* e.g. too many registers for the block */
                printf("%-14s %d warps/scheduler: not launched (%s)\n", names[kind], wps, cudaGetErrorString(err));
                continue;
            }
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            const double n = (double)sms * threads / 32 * iters * 8, hz = clk * 1e3;
            const double rate = n * flops[kind] / (ms * 1e-3);
            printf("%-14s %d warps/scheduler: %.1f TFLOP/s, %.0f flops/clk/SM at the %d MHz maximum clock\n",
                   names[kind], wps, rate / 1e12, rate / sms / hz, clk / 1000);
        }
    return 0;
}
