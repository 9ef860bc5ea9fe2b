/*
 * dipolar.cu -- CUDA backend of the split-step Crank-Nicolson solver of the
 * dipolar Gross-Pitaevskii equation (Loncar, thesis, chapter 2; the DBEC-GP
 * scheme; the published GPU design is chapter 4), same C API as csrc/dipolar/dipolar.c.
 *
 *   non-derivative part  Psi <- exp(-i dt H1) Psi  (eq. 2.24; eq. 2.41 in
 *                        imaginary time)
 *   Laplacian, per axis  the Crank-Nicolson systems of eqs. 2.27-2.34,
 *                        solved with the precomputed recursion
 *                        coefficients alpha_i, gamma_i (dipolar_params.c)
 *   dipolar term         cuFFT R2C -> kernel -> C2R in place (eq. 2.37)
 *
 * Internally every grid is (n0, n1, n2), n2 contiguous (dipolar_params.h).  One
 * step of a 3D grid is three kernels plus the FFT pair:
 *
 *   k_zline  one warp per line along the contiguous axis: coalesced load
 *            into shared memory, H1 applied on the way in (trap, user
 *            potential, obstacle, contact and dipolar terms, the pending
 *            imaginary-time normalisation), the two recursions of the
 *            tridiagonal solve as warp-parallel scans of affine maps (each
 *            lane runs a chunk serially, 5 shuffle rounds join the chunks),
 *            coalesced store;
 *   k_lanes  one thread per line along axis 1, then along axis 0: threads
 *            of a warp own neighbouring lines, so every load and store is
 *            coalesced; the forward recursion writes its values into the
 *            state itself (shifted two places), the back substitution reads
 *            them back, so no buffer the size of the state is needed; the
 *            last axis of the step also writes |Psi|^2 for the next FFT and
 *            the block's part of the Simpson norm;
 *   k_norm   sums the blocks' parts in a fixed order into a device word and
 *            records the first step whose norm is not finite and positive.
 *
 * The Crank-Nicolson operators of different axes commute exactly, so the
 * order z, y, x gives the CPU's step.  The state, the tables and the norm
 * stay on the device across steps: the host reads one flag per call.
 */
#include <cuda_runtime.h>
#include <cufft.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nlsepy/common.h"
#include "nlsepy/dipolar.h"
#include "dipolar/dipolar_params.h"

#include "common/check.cuh"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static int fft_check(cufftResult r, const char *what)
{
    if (r == CUFFT_SUCCESS)
        return NLSE_OK;
    return nlse_fail(NLSE_ERR_BACKEND, "cuFFT error %d in %s%s", (int)r, what,
                     r == CUFFT_ALLOC_FAILED ? " (out of device memory)" : "");
}

/* blocks of the kernels that produce partial sums (fixed: deterministic sums) */
#define NB_MAX 4096
#define BLK 128
enum { OQ_NORM, OQ_SUM, OQ_KIN, OQ_POT, OQ_INT, OQ_DD, OQ_X0, OQ_X1, OQ_X2, OQ_KMOD, OQ_N };

/* ------------------------------------------------------------------ */
/* value types: T (real), T2 (complex); coefficient types likewise     */
/* ------------------------------------------------------------------ */


template <typename T> __device__ __forceinline__ T vzero(T *) { return (T)0; }
__device__ __forceinline__ float2 vzero(float2 *) { return make_float2(0.f, 0.f); }
__device__ __forceinline__ double2 vzero(double2 *) { return make_double2(0., 0.); }
template <typename V> __device__ __forceinline__ V zero() { return vzero((V *)0); }

template <typename T> __device__ __forceinline__ T vone(T *) { return (T)1; }
__device__ __forceinline__ float2 vone(float2 *) { return make_float2(1.f, 0.f); }
__device__ __forceinline__ double2 vone(double2 *) { return make_double2(1., 0.); }
template <typename V> __device__ __forceinline__ V one() { return vone((V *)0); }

#define CXOPS(T2, T)                                                                       \
    __device__ __forceinline__ T2 operator+(T2 a, T2 b) { T2 r; r.x = a.x + b.x; r.y = a.y + b.y; return r; } \
    __device__ __forceinline__ T2 operator-(T2 a, T2 b) { T2 r; r.x = a.x - b.x; r.y = a.y - b.y; return r; } \
    __device__ __forceinline__ T2 operator-(T2 a) { T2 r; r.x = -a.x; r.y = -a.y; return r; } \
    __device__ __forceinline__ T2 operator*(T2 a, T2 b)                                    \
    {                                                                                      \
        T2 r;                                                                              \
        r.x = a.x * b.x - a.y * b.y;                                                       \
        r.y = a.x * b.y + a.y * b.x;                                                       \
        return r;                                                                          \
    }                                                                                      \
    __device__ __forceinline__ T2 operator*(T a, T2 b) { T2 r; r.x = a * b.x; r.y = a * b.y; return r; } \
    __device__ __forceinline__ T abs2(T2 a) { return a.x * a.x + a.y * a.y; }              \
    __device__ __forceinline__ T2 shfl_dn(T2 a, int d) {                                   \
        T2 r; r.x = __shfl_down_sync(0xffffffffu, a.x, d);                                 \
        r.y = __shfl_down_sync(0xffffffffu, a.y, d); return r; }                           \
    __device__ __forceinline__ T2 shfl_up(T2 a, int d) {                                   \
        T2 r; r.x = __shfl_up_sync(0xffffffffu, a.x, d);                                   \
        r.y = __shfl_up_sync(0xffffffffu, a.y, d); return r; }
CXOPS(float2, float)
CXOPS(double2, double)
#undef CXOPS
__device__ __forceinline__ float abs2(float a) { return a * a; }
__device__ __forceinline__ double abs2(double a) { return a * a; }
__device__ __forceinline__ float shfl_dn(float a, int d) { return __shfl_down_sync(0xffffffffu, a, d); }
__device__ __forceinline__ double shfl_dn(double a, int d) { return __shfl_down_sync(0xffffffffu, a, d); }
__device__ __forceinline__ float shfl_up(float a, int d) { return __shfl_up_sync(0xffffffffu, a, d); }
__device__ __forceinline__ double shfl_up(double a, int d) { return __shfl_up_sync(0xffffffffu, a, d); }
__device__ __forceinline__ double re_of(float a) { return a; }
__device__ __forceinline__ double re_of(double a) { return a; }
__device__ __forceinline__ double re_of(float2 a) { return a.x; }
__device__ __forceinline__ double re_of(double2 a) { return a.x; }
__device__ __forceinline__ double im_of(float) { return 0; }
__device__ __forceinline__ double im_of(double) { return 0; }
__device__ __forceinline__ double im_of(float2 a) { return a.y; }
__device__ __forceinline__ double im_of(double2 a) { return a.y; }

__device__ __forceinline__ float vexp(float x) { return expf(x); }
__device__ __forceinline__ double vexp(double x) { return exp(x); }
__device__ __forceinline__ void vsincos(float x, float *s, float *c) { sincosf(x, s, c); }
__device__ __forceinline__ void vsincos(double x, double *s, double *c) { sincos(x, s, c); }

/* ------------------------------------------------------------------ */
/* kernel arguments                                                   */
/* ------------------------------------------------------------------ */

template <typename T> struct Grid {
    int n0, n1, n2;
    long long nlp;              /* padded last dimension of dens      */
    const T *vx, *vy, *vz;      /* trap per axis                      */
    const T *ox, *oy, *oz;      /* obstacle factors per axis          */
    const T *U;                 /* user potential or NULL             */
    const double *w0, *w1, *w2; /* Simpson weights                    */
};

/* The non-derivative step (eq. 2.24 / 2.41) with the pending normalisation. */
template <typename T> struct H1Args {
    int imag;           /* imaginary time                            */
    T dt;
    double g, gdd;      /* couplings (the scale is applied on device) */
    T amp;              /* obstacle amplitude now (0: none)          */
    const T *D;         /* gdd (V_dd * |Psi|^2), or NULL              */
    const double *norm; /* imaginary time: norm of the state (device) */
};

/* Crank-Nicolson coefficients of one axis. */
template <typename C> struct CN {
    C A, A0r;
    const C *al, *ga;
};

/* Density output of the last solve of a step. */
template <typename T> struct Dens {
    T *dens;            /* NULL: no density wanted                  */
    double *partial;    /* per-block Simpson norm                  */
};

/* ------------------------------------------------------------------ */
/* helpers                                                            */
/* ------------------------------------------------------------------ */

__device__ __forceinline__ double warp_sum(double v)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, d);
    return v;
}

/* Sum of v over the block (fixed order); the result in thread 0. */
__device__ double block_sum(double v, double *sh)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    double t = 0;
    if (threadIdx.x == 0)
        for (int q = 0; q < nw; ++q)
            t += sh[q];
    return t;
}

/* Partial sum of the block into out.partial[blockIdx.x] (last solve of a step). */
template <typename T>
__device__ __forceinline__ void write_partial(double nsum, double *red, const Dens<T> &out)
{
    double t = block_sum(nsum, red);
    if (threadIdx.x == 0)
        out.partial[blockIdx.x] = t;
}

/* Join the lanes' affine maps x -> P x + Q of a descending recursion
 * (lane 31's chunk first, fed with `top`) and return the value entering
 * this lane's chunk (Hillis-Steele over 5 shuffle rounds). */
template <typename C, typename V>
__device__ __forceinline__ V join_down(C P, V Q, V top, int lane)
{
    if (lane == 31) {
        Q = P * top + Q;
        P = zero<C>();
    }
    for (int d = 1; d < 32; d <<= 1) {
        const C P2 = shfl_dn(P, d);
        const V Q2 = shfl_dn(Q, d);
        if (lane + d < 32) {
            Q = P * Q2 + Q;
            P = P * P2;
        }
    }
    const V in = shfl_dn(Q, 1);
    return lane == 31 ? top : in;
}

/* The same for an ascending recursion fed with 0 at lane 0. */
template <typename C, typename V>
__device__ __forceinline__ V join_up(C P, V Q, int lane)
{
    if (lane == 0)
        P = zero<C>();
    for (int d = 1; d < 32; d <<= 1) {
        const C P2 = shfl_up(P, d);
        const V Q2 = shfl_up(Q, d);
        if (lane >= d) {
            Q = P * Q2 + Q;
            P = P * P2;
        }
    }
    const V in = shfl_up(Q, 1);
    return lane == 0 ? zero<V>() : in;
}

/* Coalesced store of a solved line from shared memory (element e at
 * e + e / c) into p; the last solve of a step also writes |Psi|^2 and
 * returns the line's Simpson sum along the contiguous axis. */
template <typename T, typename V, bool LAST>
__device__ __forceinline__ double store_line(V *p, const V *s, int c, long long line, const Grid<T> &G,
                                             const Dens<T> &out, int lane)
{
    double ls = 0;
    for (int e = lane; e < G.n2; e += 32) {
        const V v = s[e + e / c];
        p[e] = v;
        if (LAST) {
            const T d = abs2(v);
            if (out.dens)
                out.dens[line * G.nlp + e] = d;
            ls += G.w2[e] * (double)d;
        }
    }
    return ls;
}

template <typename T> struct H1Scale {
    T sc, g, gdd;
};

template <typename T>
__device__ __forceinline__ H1Scale<T> h1_scale(const H1Args<T> &a)
{
    double scale = a.imag ? 1.0 / sqrt(*a.norm) : 1.0;
    T s2 = (T)(scale * scale);
    H1Scale<T> r;
    r.sc = (T)scale;
    r.g = (T)a.g * s2;
    r.gdd = (T)a.gdd * s2;
    return r;
}

/* H1 at point (i, j, k) of row `row`, applied to v (CPU: nonlin_row). */
template <typename T>
__device__ __forceinline__ T h1_pot(const Grid<T> &G, const H1Args<T> &a, const H1Scale<T> &S,
                                    int i, int j, int k, long long row)
{
    T v = (G.vx[i] + G.vy[j]) + G.vz[k];
    if (G.U)
        v += G.U[row * G.n2 + k];
    if (a.amp != 0)
        v += (a.amp * G.ox[i] * G.oy[j]) * G.oz[k];
    if (a.D)
        v += S.gdd * a.D[row * G.nlp + k];
    return v;
}

template <typename T>
__device__ __forceinline__ T h1_apply(T p, T v, T dt, const H1Scale<T> &S, int)
{
    T th = dt * (v + S.g * (p * p));
    return p * (S.sc * vexp(-th));
}

template <typename T, typename T2>
__device__ __forceinline__ T2 h1_apply_c(T2 p, T v, T dt, const H1Scale<T> &S, int imag)
{
    T2 r;
    if (imag) {
        T f = S.sc * vexp(-dt * (v + S.g * (p.x * p.x + p.y * p.y)));
        r.x = p.x * f;
        r.y = p.y * f;
    } else {
        T th = dt * (v + S.g * (p.x * p.x + p.y * p.y));
        T c, sn;
        vsincos(th, &sn, &c);
        r.x = p.x * c + p.y * sn;
        r.y = p.y * c - p.x * sn;
    }
    return r;
}
__device__ __forceinline__ float2 h1_apply(float2 p, float v, float dt, const H1Scale<float> &S, int im)
{
    return h1_apply_c<float, float2>(p, v, dt, S, im);
}
__device__ __forceinline__ double2 h1_apply(double2 p, double v, double dt, const H1Scale<double> &S,
                                            int im)
{
    return h1_apply_c<double, double2>(p, v, dt, S, im);
}

/* ------------------------------------------------------------------ */
/* k_zline: lines along the contiguous axis, one warp per line        */
/* ------------------------------------------------------------------ */

/* Element e of a line lives at e + e / c in shared memory: lane l's chunk
 * [l c, l c + c) starts (c + 1) slots after lane l - 1's, an odd stride
 * (c even), so the chunk-wise accesses of a warp hit distinct banks. */
__device__ __forceinline__ int zpos(int e, int c) { return e + e / c; }

template <typename T, typename V, typename C, bool H1, bool LAST>
__global__ void __launch_bounds__(BLK) k_zline(V *psi, Grid<T> G, H1Args<T> a, CN<C> cn, int chunk,
                                               Dens<T> out)
{
    extern __shared__ unsigned char smem_raw[];
    __shared__ double red[BLK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    const int n = G.n2, c = chunk, span = 32 * (c + 1);
    V *s = (V *)smem_raw + (size_t)warp * 2 * span;
    V *r = s + span;
    const long long lines = (long long)G.n0 * G.n1;
    H1Scale<T> S;
    if (H1)
        S = h1_scale(a);
    const C A = cn.A, A0r = cn.A0r;
    const int lo = max(lane * c, 1), hi = min(lane * c + c - 1, n - 2);
    double nsum = 0;
    for (long long line = (long long)blockIdx.x * wpb + warp; line < lines;
         line += (long long)gridDim.x * wpb) {
        const int i = (int)(line / G.n1), j = (int)(line % G.n1);
        V *p = psi + line * n;
        for (int e = lane; e < n; e += 32) {
            V v = p[e];
            if (H1)
                v = h1_apply(v, h1_pot(G, a, S, i, j, e, line), a.dt, S, a.imag);
            s[zpos(e, c)] = v;
        }
        __syncwarp();
        for (int e = lane + 1; e < n - 1; e += 32)
            r[zpos(e, c)] = A0r * s[zpos(e, c)] - A * (s[zpos(e + 1, c)] + s[zpos(e - 1, c)]);
        __syncwarp();
        /* forward recursion beta_{i-1} = gamma_i (A beta_i - rhs_i), i = n-2..1:
         * each lane's chunk as an affine map, joined from lane 31 down */
        C P = one<C>();
        V Q = zero<V>();
        for (int q = hi; q >= lo; --q) {
            C aq = cn.ga[q] * A;
            P = aq * P;
            Q = aq * Q - cn.ga[q] * r[zpos(q, c)];
        }
        V bin = join_down(P, Q, s[zpos(n - 1, c)], lane);
        for (int q = hi; q >= lo; --q) {
            bin = cn.ga[q] * (A * bin - r[zpos(q, c)]);
            r[zpos(q, c)] = bin; /* slot q holds beta_{q-1} */
        }
        __syncwarp();
        /* back substitution x_m = alpha_{m-1} x_{m-1} + beta_{m-1}, x_0 = 0 */
        P = one<C>();
        Q = zero<V>();
        for (int m = lo; m <= hi; ++m) {
            C am = cn.al[m - 1];
            P = am * P;
            Q = am * Q + r[zpos(m, c)];
        }
        V xin = join_up(P, Q, lane);
        for (int m = lo; m <= hi; ++m) {
            xin = cn.al[m - 1] * xin + r[zpos(m, c)];
            s[zpos(m, c)] = xin;
        }
        if (lane == 0) {
            s[zpos(0, c)] = zero<V>();
            s[zpos(n - 1, c)] = zero<V>();
        }
        __syncwarp();
        const double ls = store_line<T, V, LAST>(p, s, c, line, G, out, lane);
        if (LAST)
            nsum += ls * G.w0[i] * G.w1[j];
        __syncwarp();
    }
    if (LAST)
        write_partial(nsum, red, out);
}

/* k_zreg: k_zline with each lane's chunk of CH points (CH a power of two,
 * 32 CH >= n) in registers.  Shared memory only turns the coalesced load
 * and store into the chunk layout; the right-hand side, both recursions
 * and the per-lane Crank-Nicolson coefficients (the same for every line,
 * loaded once) stay in registers, so the loop over lines carries no index
 * arithmetic (the generic k_zline is bound by instructions, not memory). */
template <typename T, typename V, typename C, bool LAST, int CH>
__global__ void __launch_bounds__(BLK) k_zreg(V *psi, Grid<T> G, H1Args<T> a, CN<C> cn,
                                              Dens<T> out)
{
    extern __shared__ unsigned char smem_raw[];
    __shared__ double red[BLK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    const int n = G.n2, base = lane * CH;
    /* the block's tables gam[t][lane], alp[t][lane] (0 outside the interior),
     * then one transposition buffer per warp */
    C *gam = (C *)smem_raw, *alp = gam + 32 * CH;
    V *s = (V *)(alp + 32 * CH) + (size_t)warp * 32 * (CH + 1);
    V *mine = s + lane * (CH + 1);
    for (int e = threadIdx.x; e < 32 * CH; e += blockDim.x) {
        const int t = e / 32, q = (e % 32) * CH + t;
        const bool in = q >= 1 && q <= n - 2;
        const int qs = in ? q : 1; /* no address outside the tables is formed */
        gam[e] = in ? cn.ga[qs] : zero<C>();
        alp[e] = in ? cn.al[qs - 1] : zero<C>();
    }
    __syncthreads();
    const long long lines = (long long)G.n0 * G.n1;
    const H1Scale<T> S = h1_scale(a);
    const C A = cn.A, A0r = cn.A0r;
#define IN(t) (base + (t) >= 1 && base + (t) <= n - 2)
#define GA(t) gam[(t) * 32 + lane]
#define AL(t) alp[(t) * 32 + lane]
    double nsum = 0;
    for (long long line = (long long)blockIdx.x * wpb + warp; line < lines;
         line += (long long)gridDim.x * wpb) {
        const int i = (int)(line / G.n1), j = (int)(line % G.n1);
        V *p = psi + line * n;
        for (int e = lane; e < n; e += 32)
            s[e + e / CH] = h1_apply(p[e], h1_pot(G, a, S, i, j, e, line), a.dt, S, a.imag);
        __syncwarp();
        V v[CH];
#pragma unroll
        for (int t = 0; t < CH; ++t)
            v[t] = mine[t];
        const int nl = n - 1;
        const V last = s[nl + nl / CH];
        __syncwarp();
        /* right-hand side in place: A0r psi_q - A (psi_{q+1} + psi_{q-1}) */
        {
            const V left = shfl_up(v[CH - 1], 1), right = shfl_dn(v[0], 1);
            V prev = left;
#pragma unroll
            for (int t = 0; t < CH; ++t) {
                const V cur = v[t], nxt = t < CH - 1 ? v[t + 1] : right;
                v[t] = A0r * cur - A * (nxt + prev);
                prev = cur;
            }
        }
        /* forward recursion beta_{q-1} = gamma_q (A beta_q - rhs_q), q = n-2..1 */
        C P = one<C>();
        V Q = zero<V>();
#pragma unroll
        for (int t = CH - 1; t >= 0; --t)
            if (IN(t)) {
                const C g = GA(t), aq = g * A;
                P = aq * P;
                Q = aq * Q - g * v[t];
            }
        V b = join_down(P, Q, last, lane);
#pragma unroll
        for (int t = CH - 1; t >= 0; --t)
            if (IN(t)) {
                b = GA(t) * (A * b - v[t]);
                v[t] = b; /* beta_{q-1} */
            }
        /* back substitution x_q = alpha_{q-1} x_{q-1} + beta_{q-1}, x_0 = 0 */
        P = one<C>();
        Q = zero<V>();
#pragma unroll
        for (int t = 0; t < CH; ++t)
            if (IN(t)) {
                const C am = AL(t);
                P = am * P;
                Q = am * Q + v[t];
            }
        V x = join_up(P, Q, lane);
#pragma unroll
        for (int t = 0; t < CH; ++t) {
            if (IN(t)) {
                x = AL(t) * x + v[t];
                mine[t] = x;
            } else {
                mine[t] = zero<V>();
            }
        }
        __syncwarp();
        const double ls = store_line<T, V, LAST>(p, s, CH, line, G, out, lane);
        if (LAST)
            nsum += ls * G.w0[i] * G.w1[j];
        __syncwarp();
    }
    if (LAST)
        write_partial(nsum, red, out);
#undef IN
#undef GA
#undef AL
}

/* ------------------------------------------------------------------ */
/* k_h1: the non-derivative step alone (lines too long for k_zline)   */
/* ------------------------------------------------------------------ */

template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_h1(V *psi, Grid<T> G, H1Args<T> a)
{
    const H1Scale<T> S = h1_scale(a);
    const long long rows = (long long)G.n0 * G.n1;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / G.n1), j = (int)(row % G.n1);
        for (int k = threadIdx.x; k < G.n2; k += blockDim.x) {
            V *p = psi + row * G.n2 + k;
            *p = h1_apply(*p, h1_pot(G, a, S, i, j, k, row), a.dt, S, a.imag);
        }
    }
}

/* ------------------------------------------------------------------ */
/* k_lanes: one thread per line along axis Q (0, 1; 2 for long lines) */
/* ------------------------------------------------------------------ */

/* Line `lane` of axis Q: (outer, inner) -> first point and stride; the
 * indices (i, j, k) of point m of the line. */
template <int Q> struct LaneMap {
    long long base, rs;
    int a, b; /* the two fixed indices */
    __device__ LaneMap(long long lane, int n0, int n1, int n2)
    {
        if (Q == 0) { a = (int)(lane / n2); b = (int)(lane % n2); base = (long long)a * n2 + b; rs = (long long)n1 * n2; }
        else if (Q == 1) { a = (int)(lane / n2); b = (int)(lane % n2); base = (long long)a * n1 * n2 + b; rs = n2; }
        else { a = (int)(lane / n1); b = (int)(lane % n1); base = ((long long)a * n1 + b) * n2; rs = 1; }
    }
    __device__ void ijk(int m, int *i, int *j, int *k) const
    {
        if (Q == 0) { *i = m; *j = a; *k = b; }
        else if (Q == 1) { *i = a; *j = m; *k = b; }
        else { *i = a; *j = b; *k = m; }
    }
};

/* Loads in flight per thread in the lane sweeps: 64 bytes (4 complex
 * doubles, 8 complex floats or real doubles, 16 floats). */
#define UNR_OF(V) (64 / (int)sizeof(V))
#define UNR_MAX 16

template <typename T, typename V, typename C, int Q, bool LAST>
__global__ void __launch_bounds__(BLK) k_lanes(V *psi, Grid<T> G, CN<C> cn, int n, Dens<T> out)
{
    __shared__ double red[BLK / 32];
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    const long long lanes = Q == 0 ? (long long)n1 * n2 : Q == 1 ? (long long)n0 * n2
                                                                   : (long long)n0 * n1;
    const C A = cn.A, A0r = cn.A0r;
    constexpr int UNR = UNR_OF(V);
    double nsum = 0;
    for (long long lane = (long long)blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += (long long)gridDim.x * blockDim.x) {
        const LaneMap<Q> L(lane, n0, n1, n2);
        V *p = psi + L.base;
        const long long rs = L.rs;
        /* forward: beta_{i-1} = gamma_i (A beta_i - rhs_i), stored in slot i + 1 */
        V pp = p[(n - 1) * rs], pc = p[(n - 2) * rs], beta = pp;
        for (int i = n - 2; i >= 1;) {
            const int cnt = min(UNR, i);
            V buf[UNR];
#pragma unroll
            for (int u = 0; u < UNR; ++u)
                if (u < cnt)
                    buf[u] = p[(i - 1 - u) * rs];
#pragma unroll
            for (int u = 0; u < UNR; ++u)
                if (u < cnt) {
                    const int ii = i - u;
                    V pm = buf[u];
                    V cc = A0r * pc - A * (pp + pm);
                    beta = cn.ga[ii] * (A * beta - cc);
                    p[(ii + 1) * rs] = beta;
                    pp = pc;
                    pc = pm;
                }
            i -= cnt;
        }
        /* back: x_m = alpha_{m-1} x_{m-1} + beta_{m-1} (slot m + 1), x_0 = 0 */
        V x = zero<V>();
        p[0] = x;
        double ls = 0;
        for (int m = 1; m <= n - 2;) {
            const int cnt = min(UNR, n - 1 - m);
            V buf[UNR];
#pragma unroll
            for (int u = 0; u < UNR; ++u)
                if (u < cnt)
                    buf[u] = p[(m + 1 + u) * rs];
#pragma unroll
            for (int u = 0; u < UNR; ++u)
                if (u < cnt) {
                    const int mm = m + u;
                    x = cn.al[mm - 1] * x + buf[u];
                    p[mm * rs] = x;
                    if (LAST) {
                        int i, j, k;
                        L.ijk(mm, &i, &j, &k);
                        T d = abs2(x);
                        if (out.dens)
                            out.dens[((long long)i * n1 + j) * G.nlp + k] = d;
                        ls += (Q == 0 ? G.w0[i] : Q == 1 ? G.w1[j] : G.w2[k]) * (double)d;
                    }
                }
            m += cnt;
        }
        p[(n - 1) * rs] = zero<V>();
        if (LAST) {
            int i, j, k;
            if (out.dens) {
                L.ijk(0, &i, &j, &k);
                out.dens[((long long)i * n1 + j) * G.nlp + k] = 0;
                L.ijk(n - 1, &i, &j, &k);
                out.dens[((long long)i * n1 + j) * G.nlp + k] = 0;
            }
            L.ijk(0, &i, &j, &k);
            double wf = Q == 0 ? G.w1[j] * G.w2[k] : Q == 1 ? G.w0[i] * G.w2[k] : G.w0[i] * G.w1[j];
            nsum += ls * wf;
        }
    }
    if (LAST)
        write_partial(nsum, red, out);
}

/* ------------------------------------------------------------------ */
/* norms, density, scaling                                            */
/* ------------------------------------------------------------------ */

/* norm[0] = sum of the parts; bad[0] = first step with a bad norm. */
__global__ void k_norm(const double *partial, int count, double *norm, int *bad, int step)
{
    __shared__ double red[8];
    double v = 0;
    for (int q = threadIdx.x; q < count; q += blockDim.x)
        v += partial[q];
    double t = block_sum(v, red);
    if (threadIdx.x == 0) {
        norm[0] = t;
        if (!(t > 0) || !isfinite(t))
            if (bad[0] < 0)
                bad[0] = step;
    }
}

/* Density (optional) and Simpson norm parts of the current state. */
template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_prepare(const V *psi, Grid<T> G, Dens<T> out)
{
    __shared__ double red[BLK / 32];
    const long long rows = (long long)G.n0 * G.n1;
    double nsum = 0;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / G.n1), j = (int)(row % G.n1);
        double ls = 0;
        for (int k = threadIdx.x; k < G.n2; k += blockDim.x) {
            T d = abs2(psi[row * G.n2 + k]);
            if (out.dens)
                out.dens[row * G.nlp + k] = d;
            ls += G.w2[k] * (double)d;
        }
        nsum += ls * G.w0[i] * G.w1[j];
    }
    write_partial(nsum, red, out);
}

template <typename T>
__global__ void k_scale(T *p, long long m, const double *norm)
{
    const T f = (T)(1.0 / sqrt(*norm));
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < m;
         q += (long long)gridDim.x * blockDim.x)
        p[q] *= f;
}

/* real state (N values, in src) -> complex state */
template <typename T>
__global__ void k_promote(typename Vec2<T>::T *dst, const T *src, long long N)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < N;
         q += (long long)gridDim.x * blockDim.x) {
        typename Vec2<T>::T v;
        v.x = src[q];
        v.y = 0;
        dst[q] = v;
    }
}

/* spectrum *= kernel (the kernel holds the 1/N) */
template <typename T>
__global__ void k_kmul(typename Vec2<T>::T *d, const T *K, long long nk)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < nk;
         q += (long long)gridDim.x * blockDim.x) {
        typename Vec2<T>::T v = d[q];
        const T k = K[q];
        v.x *= k;
        v.y *= k;
        d[q] = v;
    }
}

/* obstacle factors exp(-2 (x - c)^2 / sigma^2) per internal axis */
template <typename T>
__global__ void k_obstacle(T *o0, T *o1, T *o2, const double *x0, const double *x1,
                           const double *x2, int n0, int n1, int n2, int off, int beam, int move,
                           double c, double sg2)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    int q, i;
    if (t < n0) { q = 0; i = t; }
    else if (t < n0 + n1) { q = 1; i = t - n0; }
    else if (t < n0 + n1 + n2) { q = 2; i = t - n0 - n1; }
    else return;
    T *o = q == 0 ? o0 : q == 1 ? o1 : o2;
    const double *x = q == 0 ? x0 : q == 1 ? x1 : x2;
    const int a = q - off;
    if (a < 0 || a == beam) {
        o[i] = 1;
    } else {
        double d = x[i] - (a == move ? c : 0.0);
        o[i] = (T)exp(-2.0 * d * d / sg2);
    }
}

/* normalised Gaussian start exp(-sum w_a x_a^2 / 2) (real state) */
template <typename T>
__global__ void k_gauss(T *p, int n0, int n1, int n2, const double *x0, const double *x1,
                        const double *x2, double w0, double w1, double w2, double c)
{
    const long long N = (long long)n0 * n1 * n2;
    for (long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x; m < N;
         m += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(m % n2);
        const long long r = m / n2;
        const int j = (int)(r % n1), i = (int)(r / n1);
        double e = w0 * x0[i] * x0[i] + w1 * x1[j] * x1[j] + w2 * x2[k] * x2[k];
        p[m] = (T)(c * exp(-0.5 * e));
    }
}

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

template <typename V> __device__ __forceinline__ double vq(const V *p, long long m, int q)
{
    V v = p[m];
    if (q == 2) {
        double re = re_of(v), im = im_of(v);
        return sqrt(re * re + im * im);
    }
    return q ? im_of(v) : re_of(v);
}

/* five-point derivative with DBEC-GP's end rules (eq. 3.2) */
template <typename V>
__device__ __forceinline__ double deriv(const V *p, long long m, int i, int n, long long st, double h,
                                        int q)
{
    if (n < 3 || i == 0 || i == n - 1)
        return 0.0;
    if (i == 1 || i == n - 2)
        return (vq(p, m + st, q) - vq(p, m - st, q)) / (2.0 * h);
    return (vq(p, m - 2 * st, q) - 8.0 * vq(p, m - st, q) + 8.0 * vq(p, m + st, q) -
            vq(p, m + 2 * st, q)) / (12.0 * h);
}

template <typename T> struct ObsArgs {
    const double *x0, *x1, *x2;
    double h0, h1, h2;
    T amp;
    const T *D; /* V_dd * |Psi|^2 or NULL */
    int is_real;
};

template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_observe(const V *psi, Grid<T> G, ObsArgs<T> o, double *partial)
{
    __shared__ double red[BLK / 32];
    double A[OQ_N];
    for (int q = 0; q < OQ_N; ++q)
        A[q] = 0;
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    const long long rows = (long long)n0 * n1;
    const double cell = o.h0 * o.h1 * o.h2;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / n1), j = (int)(row % n1);
        const double wij = G.w0[i] * G.w1[j];
        for (int k = threadIdx.x; k < n2; k += blockDim.x) {
            const long long m = row * n2 + k;
            T vv = (G.vx[i] + G.vy[j]) + G.vz[k];
            if (G.U)
                vv += G.U[m];
            if (o.amp != 0)
                vv += o.amp * G.ox[i] * G.oy[j] * G.oz[k];
            double re = vq(psi, m, 0), im = vq(psi, m, 1);
            double d = re * re + im * im;
            double w = wij * G.w2[k];
            double grad = 0, gmod = 0;
            for (int q = 0; q < 3; ++q) {
                if (q == 1 && o.is_real)
                    continue;
                if (q == 2 && o.is_real) {
                    gmod = grad;
                    break;
                }
                double dx = deriv(psi, m, i, n0, (long long)n1 * n2, o.h0, q);
                double dy = deriv(psi, m, j, n1, (long long)n2, o.h1, q);
                double dz = deriv(psi, m, k, n2, 1, o.h2, q);
                if (q == 2)
                    gmod = dx * dx + dy * dy + dz * dz;
                else
                    grad += dx * dx + dy * dy + dz * dz;
            }
            A[OQ_NORM] += w * d;
            A[OQ_SUM] += cell * d;
            A[OQ_KIN] += w * grad;
            A[OQ_KMOD] += w * gmod;
            A[OQ_POT] += w * (double)vv * d;
            A[OQ_INT] += w * d * d;
            if (o.D)
                A[OQ_DD] += w * (double)o.D[row * G.nlp + k] * d;
            A[OQ_X0] += w * o.x0[i] * o.x0[i] * d;
            A[OQ_X1] += w * o.x1[j] * o.x1[j] * d;
            A[OQ_X2] += w * o.x2[k] * o.x2[k] * d;
        }
    }
    for (int q = 0; q < OQ_N; ++q) {
        double t = block_sum(A[q], red);
        if (threadIdx.x == 0)
            partial[(long long)blockIdx.x * OQ_N + q] = t;
    }
}

/* |Psi|^2 integrated over the axes not kept: one block per output value */
template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_density(const V *psi, Grid<T> G, int k0, int k1, int k2,
                                                 double *out, long long nout)
{
    __shared__ double red[BLK / 32];
    const int d0 = k0 ? G.n0 : 1, d1 = k1 ? G.n1 : 1, d2 = k2 ? G.n2 : 1;
    const int r0 = k0 ? 1 : G.n0, r1 = k1 ? 1 : G.n1, r2 = k2 ? 1 : G.n2;
    const long long rcount = (long long)r0 * r1 * r2;
    for (long long o = blockIdx.x; o < nout; o += gridDim.x) {
        const int oi2 = (int)(o % d2), oi1 = (int)((o / d2) % d1), oi0 = (int)(o / ((long long)d2 * d1));
        double v = 0;
        for (long long q = threadIdx.x; q < rcount; q += blockDim.x) {
            const int q2 = (int)(q % r2), q1 = (int)((q / r2) % r1), q0 = (int)(q / ((long long)r2 * r1));
            const int i = k0 ? oi0 : q0, j = k1 ? oi1 : q1, k = k2 ? oi2 : q2;
            double w = (k0 ? 1.0 : G.w0[i]) * (k1 ? 1.0 : G.w1[j]) * (k2 ? 1.0 : G.w2[k]);
            v += w * (double)abs2(psi[((long long)i * G.n1 + j) * G.n2 + k]);
        }
        double t = block_sum(v, red);
        if (threadIdx.x == 0)
            out[o] = t;
        __syncthreads();
    }
}

template <typename V>
__global__ void k_phase(const V *psi, int n0, int n1, int n2, int axis, int index, double *out)
{
    const int e0 = axis == 0 ? 1 : n0, e1 = axis == 1 ? 1 : n1, e2 = axis == 2 ? 1 : n2;
    const long long cnt = (long long)e0 * e1 * e2;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < cnt;
         o += (long long)gridDim.x * blockDim.x) {
        int c2 = (int)(o % e2), c1 = (int)((o / e2) % e1), c0 = (int)(o / ((long long)e2 * e1));
        if (axis == 0) c0 = index;
        if (axis == 1) c1 = index;
        if (axis == 2) c2 = index;
        V v = psi[((long long)c0 * n1 + c1) * n2 + c2];
        out[o] = atan2(im_of(v), re_of(v));
    }
}

template <typename T>
__global__ void k_potential(Grid<T> G, T amp, double *out)
{
    const long long N = (long long)G.n0 * G.n1 * G.n2;
    for (long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x; m < N;
         m += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(m % G.n2);
        const long long r = m / G.n2;
        const int j = (int)(r % G.n1), i = (int)(r / G.n1);
        T v = (G.vx[i] + G.vy[j]) + G.vz[k];
        if (G.U)
            v += G.U[m];
        if (amp != 0)
            v += amp * G.ox[i] * G.oy[j] * G.oz[k];
        out[m] = (double)v;
    }
}

/* ------------------------------------------------------------------ */
/* the solver                                                         */
/* ------------------------------------------------------------------ */

struct nlse_dipolar {
    nlse_dipolar_params p;
    dipolar_layout L;
    size_t nlp, nk, rs;   /* padded last dim, spectrum size, bytes per REAL */
    int is_real;
    void *psi, *backup, *dens, *kern, *U;
    double *x[3], *w[3];
    void *vtrap[3], *ob[3];
    void *al_r[3], *ga_r[3], *al_c[3], *ga_c[3];
    dipolar_cn_scalars sc[3];
    cufftHandle pf, pb;
    int have_plans;
    size_t fft_work;
    double *partial, *norm;
    int *bad;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    double last_seconds;
    int have_obst;
    nlse_dipolar_obstacle obst;
    double g, gdd;
    size_t dev_bytes;
    int zwarps;           /* warps per block of k_zline (0: lines too long) */
    int zreg;             /* chunk of k_zreg (0: lines longer than 512)     */
    int zchunk;
};

static int grid_for(long long work, int per_block)
{
    long long b = (work + per_block - 1) / per_block;
    if (b < 1)
        b = 1;
    return (int)(b > NB_MAX ? NB_MAX : b);
}

static int dmalloc(nlse_dipolar *s, void **ptr, size_t bytes, const char *what)
{
    cudaError_t err = cudaMalloc(ptr, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        size_t freeb = 0, total = 0;
        (void)cudaGetLastError();
        cudaMemGetInfo(&freeb, &total);
        *ptr = NULL;
        return nlse_fail(NLSE_ERR_BACKEND,
                         "out of device memory: %s needs %zu bytes (the solver holds %zu), %zu of "
                         "%zu bytes are free", what, bytes, s->dev_bytes, freeb, total);
    }
    s->dev_bytes += bytes;
    return NLSE_OK;
}

static void dfree(nlse_dipolar *s, void **ptr, size_t bytes)
{
    if (*ptr) {
        cudaFree(*ptr);
        s->dev_bytes -= bytes;
    }
    *ptr = NULL;
}

template <typename T> static Grid<T> grid_of(const nlse_dipolar *s)
{
    Grid<T> G;
    G.n0 = (int)s->L.n[0];
    G.n1 = (int)s->L.n[1];
    G.n2 = (int)s->L.n[2];
    G.nlp = (long long)s->nlp;
    G.vx = (const T *)s->vtrap[0];
    G.vy = (const T *)s->vtrap[1];
    G.vz = (const T *)s->vtrap[2];
    G.ox = (const T *)s->ob[0];
    G.oy = (const T *)s->ob[1];
    G.oz = (const T *)s->ob[2];
    G.U = (const T *)s->U;
    G.w0 = s->w[0];
    G.w1 = s->w[1];
    G.w2 = s->w[2];
    return G;
}

/* host -> device on the solver's stream, complete on return */
static int h2d(nlse_dipolar *s, void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

/* host table of doubles -> device array in the solver's precision */
static int upload(nlse_dipolar *s, void *dst, const double *src, size_t count)
{
    if (s->p.dtype == NLSE_COMPLEX128)
        return h2d(s, dst, src, count * sizeof(double));
    float *f = (float *)malloc(count * sizeof(float) + 1);
    if (!f)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    for (size_t q = 0; q < count; ++q)
        f[q] = (float)src[q];
    int st = h2d(s, dst, f, count * sizeof(float));
    free(f);
    return st;
}

static int make_cn(nlse_dipolar *s, int q)
{
    size_t n = s->L.n[q];
    if (n < 3)
        return NLSE_OK;
    double *t = (double *)malloc(6 * n * sizeof(double));
    if (!t)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the Crank-Nicolson tables");
    dipolar_cn_coefficients(s->p.dt * s->p.kin / (s->L.h[q] * s->L.h[q]), n, t, t + n, t + 2 * n,
                       t + 4 * n, &s->sc[q]);
    int st;
    if (!(st = upload(s, s->al_r[q], t, n)) && !(st = upload(s, s->ga_r[q], t + n, n)) &&
        !(st = upload(s, s->al_c[q], t + 2 * n, 2 * n)))
        st = upload(s, s->ga_c[q], t + 4 * n, 2 * n);
    free(t);
    return st;
}

static size_t fft_rsize(const nlse_dipolar *s) { return s->rs; }

static int make_plans(nlse_dipolar *s)
{
    const int dbl = s->p.dtype == NLSE_COMPLEX128;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    cufftType tf = dbl ? CUFFT_D2Z : CUFFT_R2C, tb = dbl ? CUFFT_Z2D : CUFFT_C2R;
    size_t wf = 0, wb = 0;
    CKS(fft_check(cufftCreate(&s->pf), "cufftCreate"));
    CKS(fft_check(cufftCreate(&s->pb), "cufftCreate"));
    s->have_plans = 1;
    if (s->L.ndim == 3) {
        CKS(fft_check(cufftMakePlan3d(s->pf, n0, n1, n2, tf, &wf), "cufftMakePlan3d"));
        CKS(fft_check(cufftMakePlan3d(s->pb, n0, n1, n2, tb, &wb), "cufftMakePlan3d"));
    } else if (s->L.ndim == 2) {
        CKS(fft_check(cufftMakePlan2d(s->pf, n1, n2, tf, &wf), "cufftMakePlan2d"));
        CKS(fft_check(cufftMakePlan2d(s->pb, n1, n2, tb, &wb), "cufftMakePlan2d"));
    } else {
        CKS(fft_check(cufftMakePlan1d(s->pf, n2, tf, 1, &wf), "cufftMakePlan1d"));
        CKS(fft_check(cufftMakePlan1d(s->pb, n2, tb, 1, &wb), "cufftMakePlan1d"));
    }
    CKS(fft_check(cufftSetStream(s->pf, s->stream), "cufftSetStream"));
    CKS(fft_check(cufftSetStream(s->pb, s->stream), "cufftSetStream"));
    s->fft_work = wf + wb;
    s->dev_bytes += s->fft_work;
    return NLSE_OK;
}

static int enable_dipolar(nlse_dipolar *s)
{
    if (s->have_plans)
        return NLSE_OK;
    CKS(dipolar_check_dipolar(&s->p));
    const size_t rs = fft_rsize(s);
    CKS(dmalloc(s, &s->dens, s->L.n[0] * s->L.n[1] * s->nlp * rs, "the density / FFT buffer"));
    CKS(dmalloc(s, &s->kern, s->nk * rs, "the dipolar kernel"));
    CK(cudaMemsetAsync(s->dens, 0, s->L.n[0] * s->L.n[1] * s->nlp * rs, s->stream));
    CKS(make_plans(s));
    /* kernel table with the 1/N of the inverse transform */
    double *K = (double *)malloc(s->nk * sizeof(double));
    if (!K)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar kernel");
    const size_t nh = s->L.n[2] / 2 + 1;
    const double invN = 1.0 / (double)s->L.N;
    for (size_t i = 0; i < s->L.n[0]; ++i)
        for (size_t j = 0; j < s->L.n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                K[(i * s->L.n[1] + j) * nh + k] = dipolar_kernel_value(&s->p, &s->L, i, j, k) * invN;
    int st = upload(s, s->kern, K, s->nk);
    free(K);
    if (st)
        return st;
    s->p.dipolar = 1;
    return NLSE_OK;
}

extern "C" void nlse_dipolar_destroy(nlse_dipolar *s)
{
    if (!s)
        return;
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->have_plans) {
        cufftDestroy(s->pf);
        cufftDestroy(s->pb);
    }
    void *bufs[] = {s->psi, s->backup, s->dens, s->kern, s->U, s->partial, s->norm, s->bad};
    for (size_t q = 0; q < sizeof bufs / sizeof bufs[0]; ++q)
        cudaFree(bufs[q]);
    for (int q = 0; q < 3; ++q) {
        cudaFree(s->x[q]);
        cudaFree(s->w[q]);
        cudaFree(s->vtrap[q]);
        cudaFree(s->ob[q]);
        cudaFree(s->al_r[q]);
        cudaFree(s->ga_r[q]);
        cudaFree(s->al_c[q]);
        cudaFree(s->ga_c[q]);
    }
    if (s->ev0)
        cudaEventDestroy(s->ev0);
    if (s->ev1)
        cudaEventDestroy(s->ev1);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    free(s);
}

/* k_zline's shape: chunk c (even, 32 c >= n) and warps per block within
 * 48 KiB of shared memory; 0 warps when one line needs more. */
static void plan_zline(nlse_dipolar *s)
{
    const size_t n = s->L.n[2];
    int c = (int)((n + 31) / 32);
    if (c % 2)
        ++c;
    const size_t vb = 2 * s->rs; /* complex values (real states use half) */
    const size_t per_warp = 2 * 32 * (size_t)(c + 1) * vb;
    int w = (int)((48u << 10) / per_warp);
    s->zchunk = c;
    s->zwarps = w >= 4 ? 4 : w;
    s->zreg = 0;
    for (int ch = 1; ch <= 16; ch *= 2)
        if (32 * (size_t)ch >= n) {
            s->zreg = ch;
            break;
        }
}

static int gaussian_state(nlse_dipolar *s)
{
    double wq[3] = {1, 1, 1}, c = 1.0;
    for (int q = s->L.off; q < 3; ++q) {
        double t = s->p.trap[q - s->L.off];
        wq[q] = t > 0 ? sqrt(t / s->p.kin) : 1.0;
        c *= pow(wq[q] / M_PI, 0.25);
    }
    s->is_real = 1;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    int blocks = grid_for((long long)s->L.N, 256);
    if (s->p.dtype == NLSE_COMPLEX128)
        k_gauss<double><<<blocks, 256, 0, s->stream>>>((double *)s->psi, n0, n1, n2, s->x[0],
                                                        s->x[1], s->x[2], wq[0], wq[1], wq[2], c);
    else
        k_gauss<float><<<blocks, 256, 0, s->stream>>>((float *)s->psi, n0, n1, n2, s->x[0],
                                                       s->x[1], s->x[2], wq[0], wq[1], wq[2], c);
    CK(cudaGetLastError());
    return NLSE_OK;
}

static int create(const nlse_dipolar_params *p, nlse_dipolar *s)
{
    s->p = *p;
    dipolar_make_layout(p, &s->L);
    s->rs = p->dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
    s->nlp = 2 * (s->L.n[2] / 2 + 1);
    s->nk = s->L.n[0] * s->L.n[1] * (s->L.n[2] / 2 + 1);
    s->g = p->g;
    s->gdd = p->gdd;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available");
    }
    if (s->L.n[0] > (size_t)INT32_MAX || s->L.n[1] * s->L.n[2] > (size_t)INT32_MAX ||
        s->L.N > ((size_t)1 << 40))
        return nlse_fail(NLSE_ERR_VALUE, "the grid (%zu points) is too large for the CUDA backend",
                         s->L.N);
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&s->ev0));
    CK(cudaEventCreate(&s->ev1));
    const size_t rs = s->rs, N = s->L.N;
    CKS(dmalloc(s, &s->psi, 2 * N * rs, "the state"));
    CKS(dmalloc(s, (void **)&s->partial, (size_t)NB_MAX * OQ_N * sizeof(double), "partial sums"));
    CKS(dmalloc(s, (void **)&s->norm, sizeof(double), "the norm"));
    CKS(dmalloc(s, (void **)&s->bad, sizeof(int), "a flag"));
    for (int q = 0; q < 3; ++q) {
        const size_t n = s->L.n[q];
        const int a = q - s->L.off;
        CKS(dmalloc(s, (void **)&s->x[q], n * sizeof(double), "coordinates"));
        CKS(dmalloc(s, (void **)&s->w[q], n * sizeof(double), "Simpson weights"));
        CKS(dmalloc(s, &s->vtrap[q], n * rs, "the trap"));
        CKS(dmalloc(s, &s->ob[q], n * rs, "obstacle factors"));
        CKS(dmalloc(s, &s->al_r[q], n * rs, "CN tables"));
        CKS(dmalloc(s, &s->ga_r[q], n * rs, "CN tables"));
        CKS(dmalloc(s, &s->al_c[q], 2 * n * rs, "CN tables"));
        CKS(dmalloc(s, &s->ga_c[q], 2 * n * rs, "CN tables"));
        double *t = (double *)malloc(4 * n * sizeof(double));
        if (!t)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; ++i) {
            t[i] = a >= 0 ? dipolar_coord(i, n, s->L.h[q]) : 0.0;
            t[n + i] = a >= 0 ? dipolar_simpson(i, n, s->L.h[q]) : 1.0;
            t[2 * n + i] = a >= 0 ? p->trap[a] * t[i] * t[i] : 0.0;
            t[3 * n + i] = 1.0;
        }
        int st = h2d(s, s->x[q], t, n * sizeof(double));
        if (!st)
            st = h2d(s, s->w[q], t + n, n * sizeof(double));
        if (!st)
            st = upload(s, s->vtrap[q], t + 2 * n, n);
        if (!st)
            st = upload(s, s->ob[q], t + 3 * n, n);
        free(t);
        CKS(st);
        CKS(make_cn(s, q));
    }
    plan_zline(s);
    if (p->dipolar) {
        s->p.dipolar = 0;
        CKS(enable_dipolar(s));
    }
    CKS(gaussian_state(s));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

extern "C" int nlse_dipolar_create(const nlse_dipolar_params *p, nlse_dipolar **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_create: NULL argument");
    *out = NULL;
    CKS(dipolar_check_params(p));
    nlse_dipolar *s = (nlse_dipolar *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    int st = create(p, s);
    if (st) {
        nlse_dipolar_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* state and parameters                                               */
/* ------------------------------------------------------------------ */

extern "C" int nlse_dipolar_set_state(nlse_dipolar *s, const void *psi, int is_complex)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_set_state: NULL argument");
    const size_t m = (is_complex ? 2 : 1) * s->L.N;
    CKS(dipolar_check_finite(psi, m, s->p.dtype, is_complex ? 2 : 1, "psi"));
    CK(cudaMemcpyAsync(s->psi, psi, m * s->rs, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    s->is_real = !is_complex;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_state_is_real(const nlse_dipolar *s) { return s->is_real; }

extern "C" int nlse_dipolar_get_state(const nlse_dipolar *s, void *out)
{
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_get_state: NULL argument");
    const size_t N = s->L.N, rs = s->rs;
    CK(cudaMemcpyAsync(out, s->psi, (s->is_real ? 1 : 2) * N * rs, cudaMemcpyDeviceToHost,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (s->is_real) {
        /* expand in place from the end */
        if (s->p.dtype == NLSE_COMPLEX64) {
            float *o = (float *)out;
            for (size_t q = N; q-- > 0;) {
                o[2 * q] = o[q];
                o[2 * q + 1] = 0;
            }
        } else {
            double *o = (double *)out;
            for (size_t q = N; q-- > 0;) {
                o[2 * q] = o[q];
                o[2 * q + 1] = 0;
            }
        }
    }
    return NLSE_OK;
}

static int ensure_backup(nlse_dipolar *s)
{
    if (s->backup)
        return NLSE_OK;
    return dmalloc(s, &s->backup, 2 * s->L.N * s->rs, "the state backup");
}

/* a real state becomes complex (through the backup buffer) */
static int promote(nlse_dipolar *s)
{
    if (!s->is_real)
        return NLSE_OK;
    CKS(ensure_backup(s));
    const long long N = (long long)s->L.N;
    CK(cudaMemcpyAsync(s->backup, s->psi, N * s->rs, cudaMemcpyDeviceToDevice, s->stream));
    const int blocks = grid_for(N, 256);
    if (s->p.dtype == NLSE_COMPLEX128)
        k_promote<double><<<blocks, 256, 0, s->stream>>>((double2 *)s->psi, (const double *)s->backup, N);
    else
        k_promote<float><<<blocks, 256, 0, s->stream>>>((float2 *)s->psi, (const float *)s->backup, N);
    CK(cudaGetLastError());
    s->is_real = 0;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_dt(nlse_dipolar *s, double dt)
{
    CKS(dipolar_check_dt(dt));
    s->p.dt = dt;
    for (int q = 0; q < 3; ++q)
        CKS(make_cn(s, q));
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_couplings(nlse_dipolar *s, double g, double gdd)
{
    CKS(dipolar_check_couplings(g, gdd));
    if (gdd != 0 && !s->have_plans)
        CKS(enable_dipolar(s));
    s->g = g;
    s->gdd = gdd;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_potential(nlse_dipolar *s, const void *U)
{
    const size_t bytes = s->L.N * s->rs;
    if (!U) {
        dfree(s, &s->U, bytes);
        return NLSE_OK;
    }
    CKS(dipolar_check_finite(U, s->L.N, s->p.dtype, 1, "V"));
    if (!s->U)
        CKS(dmalloc(s, &s->U, bytes, "the potential"));
    CKS(h2d(s, s->U, U, bytes));
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_obstacle(nlse_dipolar *s, const nlse_dipolar_obstacle *o)
{
    if (!o) {
        s->have_obst = 0;
        return NLSE_OK;
    }
    CKS(dipolar_check_obstacle(o, s->L.ndim));
    s->obst = *o;
    s->have_obst = 1;
    return NLSE_OK;
}

static double obst_amp(const nlse_dipolar *s, double t)
{
    return s->have_obst ? dipolar_obst_amp(&s->obst, t) : 0.0;
}

static int obstacle_at(nlse_dipolar *s, double t)
{
    if (!s->have_obst)
        return NLSE_OK;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    const double c = dipolar_obst_centre(&s->obst, t), sg2 = s->obst.sigma * s->obst.sigma;
    const int blocks = (n0 + n1 + n2 + 255) / 256;
    if (s->p.dtype == NLSE_COMPLEX128)
        k_obstacle<double><<<blocks, 256, 0, s->stream>>>(
            (double *)s->ob[0], (double *)s->ob[1], (double *)s->ob[2], s->x[0], s->x[1], s->x[2],
            n0, n1, n2, s->L.off, s->obst.beam_axis, s->obst.move_axis, c, sg2);
    else
        k_obstacle<float><<<blocks, 256, 0, s->stream>>>(
            (float *)s->ob[0], (float *)s->ob[1], (float *)s->ob[2], s->x[0], s->x[1], s->x[2],
            n0, n1, n2, s->L.off, s->obst.beam_axis, s->obst.move_axis, c, sg2);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */

/* density (when `want`) and Simpson norm of the current state into norm[0] */
template <typename T> static int prepare_t(nlse_dipolar *s, int want, int step)
{
    typedef typename Vec2<T>::T T2;
    Grid<T> G = grid_of<T>(s);
    Dens<T> out;
    out.dens = want ? (T *)s->dens : NULL;
    out.partial = s->partial;
    const long long rows = (long long)s->L.n[0] * s->L.n[1];
    const int blocks = grid_for(rows, 1);
    if (s->is_real)
        k_prepare<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)s->psi, G, out);
    else
        k_prepare<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)s->psi, G, out);
    k_norm<<<1, 256, 0, s->stream>>>(s->partial, blocks, s->norm, s->bad, step);
    CK(cudaGetLastError());
    return NLSE_OK;
}

template <typename T> static int apply_fft_t(nlse_dipolar *s)
{
    typedef typename Vec2<T>::T T2;
    if (sizeof(T) == sizeof(double)) {
        CKS(fft_check(cufftExecD2Z(s->pf, (cufftDoubleReal *)s->dens, (cufftDoubleComplex *)s->dens),
                      "cufftExecD2Z"));
    } else {
        CKS(fft_check(cufftExecR2C(s->pf, (cufftReal *)s->dens, (cufftComplex *)s->dens),
                      "cufftExecR2C"));
    }
    k_kmul<T><<<grid_for((long long)s->nk, 256), 256, 0, s->stream>>>((T2 *)s->dens,
                                                                       (const T *)s->kern,
                                                                       (long long)s->nk);
    CK(cudaGetLastError());
    if (sizeof(T) == sizeof(double)) {
        CKS(fft_check(cufftExecZ2D(s->pb, (cufftDoubleComplex *)s->dens, (cufftDoubleReal *)s->dens),
                      "cufftExecZ2D"));
    } else {
        CKS(fft_check(cufftExecC2R(s->pb, (cufftComplex *)s->dens, (cufftReal *)s->dens),
                      "cufftExecC2R"));
    }
    return NLSE_OK;
}

template <typename T, typename C> static CN<C> cn_of(const nlse_dipolar *s, int q, int real_time)
{
    CN<C> cn;
    if (real_time) {
        cn.al = (const C *)s->al_c[q];
        cn.ga = (const C *)s->ga_c[q];
    } else {
        cn.al = (const C *)s->al_r[q];
        cn.ga = (const C *)s->ga_r[q];
    }
    return cn;
}

static void set_scalar(float *d, const double *v) { *d = (float)v[0]; }
static void set_scalar(double *d, const double *v) { *d = v[0]; }
static void set_scalar(float2 *d, const double *v) { d->x = (float)v[0]; d->y = (float)v[1]; }
static void set_scalar(double2 *d, const double *v) { d->x = v[0]; d->y = v[1]; }

/* Raise a kernel's dynamic shared-memory limit past the default 48 KiB
 * when a launch needs it (k_zreg on 512-point lines in double). */
template <typename K> static int smem_limit(K kernel, size_t bytes)
{
    if (bytes <= (48u << 10))
        return NLSE_OK;
    return nlse_cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)bytes), "cudaFuncSetAttribute");
}

template <typename T, typename V, typename C>
static int step_kernels(nlse_dipolar *s, const H1Args<T> &a, int want, int step)
{
    const int real_time = !a.imag;
    Grid<T> G = grid_of<T>(s);
    Dens<T> out;
    out.dens = want ? (T *)s->dens : NULL;
    out.partial = s->partial;
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    CN<C> cn[3];
    for (int q = 0; q < 3; ++q) {
        cn[q] = cn_of<T, C>(s, q, real_time);
        if (real_time) {
            set_scalar(&cn[q].A, s->sc[q].A_c);
            set_scalar(&cn[q].A0r, s->sc[q].A0r_c);
        } else {
            set_scalar(&cn[q].A, &s->sc[q].A_r);
            set_scalar(&cn[q].A0r, &s->sc[q].A0r_r);
        }
    }
    V *psi = (V *)s->psi;
    int parts = 0;
    const int last_z = n0 == 1 && n1 == 1; /* 1D: the z solve ends the step */
    /* 1) H1 + the solve along the contiguous axis */
    if (s->zreg > 0) {
        const long long lines = (long long)n0 * n1;
        const int wpb = 4;
        const size_t smem = (size_t)wpb * 32 * (s->zreg + 1) * sizeof(V) +
                            2 * (size_t)32 * s->zreg * sizeof(C);
        const int blocks = grid_for(lines, wpb);
#define ZREG(CH)                                                                                \
    case CH:                                                                                    \
        if (last_z) {                                                                           \
            CKS(smem_limit(k_zreg<T, V, C, true, CH>, smem));                                   \
            k_zreg<T, V, C, true, CH><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn[2], out); \
        } else {                                                                                \
            CKS(smem_limit(k_zreg<T, V, C, false, CH>, smem));                                  \
            k_zreg<T, V, C, false, CH><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn[2], out); \
        }                                                                                       \
        break;
        switch (s->zreg) {
            ZREG(1)
            ZREG(2)
            ZREG(4)
            ZREG(8)
            ZREG(16)
        }
#undef ZREG
        if (last_z)
            parts = blocks;
    } else if (s->zwarps > 0) {
        const long long lines = (long long)n0 * n1;
        const int wpb = s->zwarps;
        const size_t smem = (size_t)wpb * 2 * 32 * (s->zchunk + 1) * sizeof(V);
        const int blocks = grid_for(lines, wpb);
        if (last_z) {
            k_zline<T, V, C, true, true><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn[2],
                                                                                s->zchunk, out);
            parts = blocks;
        } else {
            k_zline<T, V, C, true, false><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn[2],
                                                                                 s->zchunk, out);
        }
    } else {
        k_h1<T, V><<<grid_for((long long)n0 * n1, 1), BLK, 0, s->stream>>>(psi, G, a);
        const int blocks = grid_for((long long)n0 * n1, BLK);
        if (last_z) {
            k_lanes<T, V, C, 2, true><<<blocks, BLK, 0, s->stream>>>(psi, G, cn[2], n2, out);
            parts = blocks;
        } else {
            k_lanes<T, V, C, 2, false><<<blocks, BLK, 0, s->stream>>>(psi, G, cn[2], n2, out);
        }
    }
    /* 2) axis 1 (the last one in 2D) */
    if (n1 >= 3) {
        const int blocks = grid_for((long long)n0 * n2, BLK);
        if (n0 == 1) {
            k_lanes<T, V, C, 1, true><<<blocks, BLK, 0, s->stream>>>(psi, G, cn[1], n1, out);
            parts = blocks;
        } else {
            k_lanes<T, V, C, 1, false><<<blocks, BLK, 0, s->stream>>>(psi, G, cn[1], n1, out);
        }
    }
    /* 3) axis 0 (3D) */
    if (n0 >= 3) {
        const int blocks = grid_for((long long)n1 * n2, BLK);
        k_lanes<T, V, C, 0, true><<<blocks, BLK, 0, s->stream>>>(psi, G, cn[0], n0, out);
        parts = blocks;
    }
    k_norm<<<1, 256, 0, s->stream>>>(s->partial, parts, s->norm, s->bad, step);
    CK(cudaGetLastError());
    return NLSE_OK;
}

template <typename T> static int step_t(nlse_dipolar *s, int mode, long n, double t0, double dg,
                                        double dgdd, long *done)
{
    typedef typename Vec2<T>::T T2;
    const size_t bytes = (s->is_real ? 1 : 2) * s->L.N * s->rs;
    CK(cudaMemcpyAsync(s->backup, s->psi, bytes, cudaMemcpyDeviceToDevice, s->stream));
    const int minus1 = -1;
    CK(cudaMemcpyAsync(s->bad, &minus1, sizeof(int), cudaMemcpyHostToDevice, s->stream));
    const double g_start = s->g, gdd_start = s->gdd;
    const int want = s->have_plans && (s->gdd != 0 || dgdd != 0);
    CKS(prepare_t<T>(s, want, -2));
    double nrm = 0;
    CK(cudaMemcpyAsync(&nrm, s->norm, sizeof(double), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    CK(cudaMemcpyAsync(s->bad, &minus1, sizeof(int), cudaMemcpyHostToDevice, s->stream));
    CK(cudaEventRecord(s->ev0, s->stream));
    H1Args<T> a;
    a.imag = mode == NLSE_DIPOLAR_IMAG;
    a.dt = (T)s->p.dt;
    a.norm = s->norm;
    for (long k = 0; k < n; ++k) {
        s->g += dg;
        s->gdd += dgdd;
        const double t = mode == NLSE_DIPOLAR_REAL ? t0 + (double)k * s->p.dt : t0;
        const double amp = obst_amp(s, t);
        if (amp != 0)
            CKS(obstacle_at(s, t));
        a.amp = (T)amp;
        a.g = s->g;
        a.gdd = want ? s->gdd : 0.0;
        a.D = NULL;
        if (want && s->gdd != 0) {
            CKS(apply_fft_t<T>(s));
            a.D = (const T *)s->dens;
        }
        int st;
        if (mode == NLSE_DIPOLAR_REAL)
            st = step_kernels<T, T2, T2>(s, a, want, (int)(k < INT32_MAX ? k : INT32_MAX));
        else if (s->is_real)
            st = step_kernels<T, T, T>(s, a, want, (int)(k < INT32_MAX ? k : INT32_MAX));
        else
            st = step_kernels<T, T2, T>(s, a, want, (int)(k < INT32_MAX ? k : INT32_MAX));
        CKS(st);
    }
    CK(cudaEventRecord(s->ev1, s->stream));
    int bad = -1;
    CK(cudaMemcpyAsync(&bad, s->bad, sizeof(int), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    float ms = 0;
    cudaEventElapsedTime(&ms, s->ev0, s->ev1);
    s->last_seconds = ms * 1e-3;
    if (bad >= 0) {
        CK(cudaMemcpyAsync(s->psi, s->backup, bytes, cudaMemcpyDeviceToDevice, s->stream));
        CK(cudaStreamSynchronize(s->stream));
        s->g = g_start;
        s->gdd = gdd_start;
        if (done)
            *done = bad;
        return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld",
                         (long)bad + 1, n);
    }
    if (mode == NLSE_DIPOLAR_IMAG) {
        const long long m = (long long)(s->is_real ? 1 : 2) * (long long)s->L.N;
        k_scale<T><<<grid_for(m, 256), 256, 0, s->stream>>>((T *)s->psi, m, s->norm);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s->stream));
    }
    if (done)
        *done = n;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_step(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd,
                            long *done)
{
    if (done)
        *done = 0;
    CKS(dipolar_check_step(mode, n, t0, dg, dgdd));
    if (n == 0)
        return NLSE_OK;
    if (dgdd != 0 && !s->have_plans)
        CKS(enable_dipolar(s));
    if (mode == NLSE_DIPOLAR_REAL)
        CKS(promote(s));
    CKS(ensure_backup(s));
    return s->p.dtype == NLSE_COMPLEX64 ? step_t<float>(s, mode, n, t0, dg, dgdd, done)
                                        : step_t<double>(s, mode, n, t0, dg, dgdd, done);
}

/* ------------------------------------------------------------------ */
/* observables and outputs                                            */
/* ------------------------------------------------------------------ */

template <typename T> static int dipolar_of_state_t(nlse_dipolar *s)
{
    CKS(prepare_t<T>(s, 1, -2));
    return apply_fft_t<T>(s);
}

static int dipolar_of_state(nlse_dipolar *s)
{
    if (!s->have_plans)
        return NLSE_OK;
    return s->p.dtype == NLSE_COMPLEX64 ? dipolar_of_state_t<float>(s)
                                        : dipolar_of_state_t<double>(s);
}

template <typename T> static int observe_t(nlse_dipolar *s, double t, nlse_dipolar_obs *o)
{
    typedef typename Vec2<T>::T T2;
    const int use_dd = s->dens && s->gdd != 0;
    Grid<T> G = grid_of<T>(s);
    ObsArgs<T> A;
    A.x0 = s->x[0];
    A.x1 = s->x[1];
    A.x2 = s->x[2];
    A.h0 = s->L.h[0];
    A.h1 = s->L.h[1];
    A.h2 = s->L.h[2];
    A.amp = (T)obst_amp(s, t);
    A.D = use_dd ? (const T *)s->dens : NULL;
    A.is_real = s->is_real;
    const int blocks = grid_for((long long)s->L.n[0] * s->L.n[1], 1);
    if (s->is_real)
        k_observe<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)s->psi, G, A, s->partial);
    else
        k_observe<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)s->psi, G, A, s->partial);
    CK(cudaGetLastError());
    double *h = (double *)malloc((size_t)blocks * OQ_N * sizeof(double));
    if (!h)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the observables");
    int st = nlse_cuda_check(cudaMemcpyAsync(h, s->partial, (size_t)blocks * OQ_N * sizeof(double),
                                             cudaMemcpyDeviceToHost, s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    double Tq[OQ_N] = {0};
    if (!st)
        for (int b = 0; b < blocks; ++b)
            for (int q = 0; q < OQ_N; ++q)
                Tq[q] += h[(size_t)b * OQ_N + q];
    free(h);
    CKS(st);
    const double kin = s->p.kin * Tq[OQ_KIN], pot = Tq[OQ_POT];
    const double cont = s->g * Tq[OQ_INT], dd = use_dd ? s->gdd * Tq[OQ_DD] : 0.0;
    o->norm = Tq[OQ_NORM];
    o->norm_sum = Tq[OQ_SUM];
    o->kinetic = kin;
    o->kinetic_modulus = s->p.kin * Tq[OQ_KMOD];
    o->mu = kin + pot + cont + dd;
    o->energy = kin + pot + 0.5 * (cont + dd);
    for (int a = 0; a < 3; ++a)
        o->x2[a] = 0;
    for (int q = s->L.off; q < 3; ++q)
        o->x2[q - s->L.off] = Tq[OQ_X0 + q];
    const size_t n0 = s->L.n[0], n1 = s->L.n[1], n2 = s->L.n[2];
    const size_t mc = ((n0 / 2) * n1 + n1 / 2) * n2 + n2 / 2;
    T v[2] = {0, 0};
    CK(cudaMemcpyAsync(v, (const char *)s->psi + mc * (s->is_real ? 1 : 2) * s->rs,
                       (s->is_real ? 1 : 2) * s->rs, cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    o->psi0sq = (double)v[0] * v[0] + (double)v[1] * v[1];
    return NLSE_OK;
}

extern "C" int nlse_dipolar_observe(nlse_dipolar *s, double t, nlse_dipolar_obs *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_observe: NULL argument");
    if (s->gdd != 0)
        CKS(dipolar_of_state(s));
    CKS(obstacle_at(s, t));
    return s->p.dtype == NLSE_COMPLEX64 ? observe_t<float>(s, t, out) : observe_t<double>(s, t, out);
}

/* rows of a device REAL array (row pitch `pitch` values) -> host doubles */
static int rows_to_host(const nlse_dipolar *s, const void *src, size_t rows, size_t len, size_t pitch,
                        double *out)
{
    const size_t rs = s->rs;
    if (rs == sizeof(double))
        return nlse_cuda_check(cudaMemcpy2D(out, len * rs, src, pitch * rs, len * rs, rows,
                                            cudaMemcpyDeviceToHost), "cudaMemcpy2D");
    float *f = (float *)malloc(rows * len * sizeof(float) + 1);
    if (!f)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    int st = nlse_cuda_check(cudaMemcpy2D(f, len * rs, src, pitch * rs, len * rs, rows,
                                          cudaMemcpyDeviceToHost), "cudaMemcpy2D");
    for (size_t q = 0; !st && q < rows * len; ++q)
        out[q] = f[q];
    free(f);
    return st;
}

extern "C" int nlse_dipolar_dipolar_potential(nlse_dipolar *s, double *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_dipolar_potential: NULL argument");
    if (!s->have_plans)
        CKS(enable_dipolar(s));
    CKS(dipolar_of_state(s));
    CK(cudaStreamSynchronize(s->stream));
    return rows_to_host(s, s->dens, s->L.n[0] * s->L.n[1], s->L.n[2], s->nlp, out);
}

/* run `launch(dev)` into a temporary device array of `count` doubles, copy to out */
template <typename F> static int via_device(nlse_dipolar *s, size_t count, double *out, F launch)
{
    double *d = NULL;
    CKS(dmalloc(s, (void **)&d, count * sizeof(double), "an output buffer"));
    launch(d);
    int st = nlse_cuda_check(cudaGetLastError(), "kernel launch");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(out, d, count * sizeof(double), cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    dfree(s, (void **)&d, count * sizeof(double));
    return st;
}

extern "C" int nlse_dipolar_potential(const nlse_dipolar *cs, double t, double *out)
{
    nlse_dipolar *s = (nlse_dipolar *)cs;
    CKS(obstacle_at(s, t));
    const double amp = obst_amp(s, t);
    const int blocks = grid_for((long long)s->L.N, 256);
    if (s->p.dtype == NLSE_COMPLEX64) {
        Grid<float> G = grid_of<float>(s);
        return via_device(s, s->L.N, out, [&](double *d) {
            k_potential<float><<<blocks, 256, 0, s->stream>>>(G, (float)amp, d);
        });
    }
    Grid<double> G = grid_of<double>(s);
    return via_device(s, s->L.N, out, [&](double *d) {
        k_potential<double><<<blocks, 256, 0, s->stream>>>(G, amp, d);
    });
}

template <typename T> static int density_t(nlse_dipolar *s, int keep, double *out)
{
    typedef typename Vec2<T>::T T2;
    int kq[3];
    size_t cnt = 1;
    for (int q = 0; q < 3; ++q) {
        kq[q] = q >= s->L.off && ((keep >> (q - s->L.off)) & 1);
        cnt *= kq[q] ? s->L.n[q] : 1;
    }
    Grid<T> G = grid_of<T>(s);
    const int blocks = grid_for((long long)cnt, 1);
    return via_device(s, cnt, out, [&](double *d) {
        if (s->is_real)
            k_density<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)s->psi, G, kq[0], kq[1], kq[2],
                                                           d, (long long)cnt);
        else
            k_density<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)s->psi, G, kq[0], kq[1],
                                                            kq[2], d, (long long)cnt);
    });
}

extern "C" int nlse_dipolar_density(const nlse_dipolar *cs, int keep_mask, double *out)
{
    nlse_dipolar *s = (nlse_dipolar *)cs;
    if (keep_mask < 0 || keep_mask >= (1 << s->L.ndim))
        return nlse_fail(NLSE_ERR_VALUE, "keep_mask must be 0..%d, got %d", (1 << s->L.ndim) - 1,
                         keep_mask);
    return s->p.dtype == NLSE_COMPLEX64 ? density_t<float>(s, keep_mask, out)
                                        : density_t<double>(s, keep_mask, out);
}

extern "C" int nlse_dipolar_phase_slice(const nlse_dipolar *cs, int axis, long index, double *out)
{
    nlse_dipolar *s = (nlse_dipolar *)cs;
    if (axis < 0 || axis >= s->L.ndim)
        return nlse_fail(NLSE_ERR_VALUE, "axis must be 0..%d, got %d", s->L.ndim - 1, axis);
    if (index < 0 || (size_t)index >= s->p.shape[axis])
        return nlse_fail(NLSE_ERR_VALUE, "index must be 0..%zu on axis %d, got %ld",
                         s->p.shape[axis] - 1, axis, index);
    const int q = axis + s->L.off;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    const size_t cnt = s->L.N / s->L.n[q];
    const int blocks = grid_for((long long)cnt, 256);
    return via_device(s, cnt, out, [&](double *d) {
        if (s->p.dtype == NLSE_COMPLEX64) {
            if (s->is_real)
                k_phase<float><<<blocks, 256, 0, s->stream>>>((const float *)s->psi, n0, n1, n2, q, (int)index, d);
            else
                k_phase<float2><<<blocks, 256, 0, s->stream>>>((const float2 *)s->psi, n0, n1, n2, q, (int)index, d);
        } else {
            if (s->is_real)
                k_phase<double><<<blocks, 256, 0, s->stream>>>((const double *)s->psi, n0, n1, n2, q, (int)index, d);
            else
                k_phase<double2><<<blocks, 256, 0, s->stream>>>((const double2 *)s->psi, n0, n1, n2, q, (int)index, d);
        }
    });
}

extern "C" int nlse_dipolar_kernel(const nlse_dipolar *s, double *out)
{
    const size_t nh = s->L.n[2] / 2 + 1;
    for (size_t i = 0; i < s->L.n[0]; ++i)
        for (size_t j = 0; j < s->L.n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                out[(i * s->L.n[1] + j) * nh + k] = dipolar_kernel_value(&s->p, &s->L, i, j, k);
    return NLSE_OK;
}

/* Traffic model per point and step of this backend: k_zline reads and
 * writes Psi once (and reads the dipolar potential and U); each k_lanes
 * reads and writes Psi twice (the forward recursion's values go through
 * the state); the last solve writes the density; each R2C / C2R transform
 * is counted as one read and one write of the half spectrum per dimension
 * (cuFFT's passes), plus the kernel multiply. */
extern "C" double nlse_dipolar_bytes_per_point_step(const nlse_dipolar *s, int mode)
{
    const double r = (double)s->rs;
    const double v = (mode == NLSE_DIPOLAR_IMAG && s->is_real) ? r : 2 * r;
    const int dd = s->have_plans && s->gdd != 0;
    double b = 2 * v + (dd ? r : 0) + (s->U ? r : 0);
    if (s->zreg == 0 && s->zwarps == 0)
        b += 2 * v + (s->U ? r : 0);
    if (s->L.n[1] > 1)
        b += 4 * v;
    if (s->L.n[0] > 1)
        b += 4 * v;
    if (dd)
        b += r + 2 * (2.0 * s->L.ndim * r) + 2.5 * r;
    return b;
}

extern "C" size_t nlse_dipolar_memory_bytes(const nlse_dipolar *s)
{
    return s->dev_bytes + (s->backup ? 0 : 2 * s->L.N * s->rs);
}

extern "C" double nlse_dipolar_last_step_seconds(const nlse_dipolar *s) { return s->last_seconds; }
