/*
 * dipolar.cuh -- what the files of the CUDA dipolar GPE solver share
 * (private to cuda/dipolar/): the value types and their device arithmetic,
 * the kernels' argument records (grid, the non-derivative step H1 of eq.
 * 2.24 / 2.41, the Crank-Nicolson coefficients of eqs. 2.32-2.34, the
 * density output), the device helpers of the scans and reductions, the
 * solver's record, small host helpers (device memory, uploads), and the
 * host functions by which each file launches its kernels.
 *
 * The files (calls go one way: dist -> observe -> solver -> fft -> lanes,
 * solver -> zsolve, dist -> solver; the solver and observe reach a slab's
 * collective parts through its dipolar_dist_ops table):
 *   dipolar.cu          the solver: create / destroy, state and parameters,
 *                       the step driver and its launch plan, traffic model
 *   dipolar_zsolve.cu   H1 and the Crank-Nicolson solve along the
 *                       contiguous axis, one warp per line (k_zreg, k_zline),
 *                       and H1 alone for lines too long for them (k_h1)
 *   dipolar_lanes.cu    the solves along the strided axes, one thread per
 *                       line (k_lanes), and the fixed-order norm (k_norm)
 *   dipolar_fft.cu      the dipolar term: cuFFT plans, the density and
 *                       norm of a state, R2C -> kernel -> C2R (eq. 2.37)
 *   dipolar_observe.cu  observables (mu, energy, rms sizes), densities,
 *                       phase slices, the potential, the dipolar potential
 *   dipolar_dist.cu     slabs of a distributed run on GPU ranks
 */
#ifndef NLSEPY_CUDA_DIPOLAR_CUH
#define NLSEPY_CUDA_DIPOLAR_CUH

#include <cuda_runtime.h>
#include <cufft.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "nlsepy/common.h"
#include "nlsepy/dipolar.h"
#include "dipolar/dipolar_params.h"

#include "common/check.cuh"
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* blocks of the kernels that produce partial sums (fixed: deterministic sums) */
#define NB_MAX 4096
#define BLK 128
/* rows of recorded moments the device holds before the host collects them */
#define REC_ROWS 1024
enum { OQ_NORM, OQ_SUM, OQ_KIN, OQ_POT, OQ_INT, OQ_DD, OQ_X0, OQ_X1, OQ_X2, OQ_KMOD, OQ_LZ,
       OQ_QF, OQ_N };

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
    const double *x0, *x1, *x2; /* coordinates                        */
    const double *q0, *q1, *q2; /* w_q x_q^2 (Simpson weight times the
                                   squared coordinate: the moments)   */
};

/* The non-derivative step (eq. 2.24 / 2.41) with the pending normalisation. */
template <typename T> struct H1Args {
    int imag;           /* imaginary time                            */
    T dt;
    double g, gdd;      /* couplings (the scale is applied on device) */
    double gqf;         /* the Lee-Huang-Yang coefficient (0: none)   */
    T amp;              /* obstacle amplitude now (0: none)          */
    const T *D;         /* gdd (V_dd * |Psi|^2), or NULL              */
    const double *norm; /* imaginary time: norm of the state (device) */
};

/* Crank-Nicolson coefficients of one axis. */
template <typename C> struct CN {
    C A, A0r;
    const C *al, *ga;
};

/* The rotating frame's tables of one sweep (dipolar_rot_line): line l's
 * off-diagonals am[l], ap[l] and recursions al, ga + l n; a lane's line is
 * its index along internal axis `other` (the other axis of the x-y plane)
 * plus `off`. */
template <typename C> struct RotCN {
    const C *am, *ap, *al, *ga;
    int other;
    int off;    /* the line of index 0 along `other` (a slab's pencils: their first y row) */
};

/* Loads in flight per thread in the line sweeps: 64 bytes (4 complex
 * doubles, 8 complex floats or real doubles, 16 floats). */
#define UNR_OF(V) (64 / (int)sizeof(V))
#define UNR_MAX 16

/* The forward recursion of a Crank-Nicolson solve (eqs. 2.32-2.34) along one
 * line of n points, stride rs, from p: beta_{i-1} = gamma_i (A beta_i -
 * rhs_i), stored in slot i + 1, UNR loads in flight (V the value type, A,
 * A0r and the gamma table ga the coefficients); the statement (the last
 * argument) runs at each interior point ii with its right-hand side cc; beta ends as beta_0.
 * The back substitution: x_m = alpha_{m-1} x_{m-1} + beta_{m-1} (beta in
 * slot m + 1) for m = 1 .. n - 2 from x = 0, the statement run
 * with mm and x.  The line solves of one process (k_lanes) and of a slab
 * (k_spike_fwd, k_spike_back) expand them; macros rather than functions,
 * so each kernel compiles as if the loop were written in it. */
#define CN_FORWARD(V, p, rs, n, A, A0r, ga, UNR, beta, ...)                                   \
    CN_FORWARD_OFF(V, p, rs, n, A * (pp_ + pm_), A, A0r, ga, UNR, beta, __VA_ARGS__)
/* The same with the off-diagonal part of the right-hand side OFF (an
 * expression of pp_ = psi_{i+1}, pm_ = psi_{i-1}) and the coefficient AB of
 * beta_i: the rotating frame's sweeps, whose diagonals below and above
 * differ, pass (ap * pp_ + am * pm_) and ap.  The coefficients of a chunk
 * (gamma, alpha) are loaded with its UNR state values: read inside the
 * recursion, each would wait behind the previous point's store (the
 * compiler cannot tell the tables from the state), one cache round trip a
 * point, which bound the sweeps of few lines (per-line tables of the
 * rotating frame miss L1). */
#define CN_FORWARD_OFF(V, p, rs, n, OFF, AB, A0r, ga, UNR, beta, ...)                         \
    {                                                                                          \
        V pp_ = p[(n - 1) * rs], pc_ = p[(n - 2) * rs];                                        \
        beta = pp_;                                                                            \
        for (int i_ = n - 2; i_ >= 1;) {                                                       \
            const int cnt_ = min(UNR, i_);                                                     \
            V buf_[UNR];                                                                       \
            std::decay_t<decltype(ga[0])> gb_[UNR];                                        \
            _Pragma("unroll") for (int u_ = 0; u_ < UNR; ++u_) if (u_ < cnt_) {               \
                buf_[u_] = p[(i_ - 1 - u_) * rs];                                              \
                gb_[u_] = ga[i_ - u_];                                                         \
            }                                                                                  \
            _Pragma("unroll") for (int u_ = 0; u_ < UNR; ++u_) if (u_ < cnt_)                 \
            {                                                                                  \
                const int ii = i_ - u_;                                                        \
                V pm_ = buf_[u_];                                                              \
                V cc = A0r * pc_ - (OFF);                                                      \
                beta = gb_[u_] * (AB * beta - cc);                                             \
                p[(ii + 1) * rs] = beta;                                                       \
                __VA_ARGS__;                                                                   \
                pp_ = pc_;                                                                     \
                pc_ = pm_;                                                                     \
            }                                                                                  \
            i_ -= cnt_;                                                                        \
        }                                                                                      \
    }
#define CN_BACK(V, p, rs, n, al, UNR, x, ...)                                                 \
    for (int m_ = 1; m_ <= n - 2;) {                                                           \
        const int cnt_ = min(UNR, n - 1 - m_);                                                 \
        V buf_[UNR];                                                                           \
        std::decay_t<decltype(al[0])> ab_[UNR];                                            \
        _Pragma("unroll") for (int u_ = 0; u_ < UNR; ++u_) if (u_ < cnt_) {                   \
            buf_[u_] = p[(m_ + 1 + u_) * rs];                                                  \
            ab_[u_] = al[m_ - 1 + u_];                                                         \
        }                                                                                      \
        _Pragma("unroll") for (int u_ = 0; u_ < UNR; ++u_) if (u_ < cnt_)                     \
        {                                                                                      \
            const int mm = m_ + u_;                                                            \
            x = ab_[u_] * x + buf_[u_];                                                        \
            __VA_ARGS__;                                                                       \
        }                                                                                      \
        m_ += cnt_;                                                                            \
    }

/* Density output of the last solve of a step. */
template <typename T> struct Dens {
    T *dens;            /* NULL: no density wanted                  */
    double *partial;    /* per-block Simpson norm                  */
    double *mom;        /* NULL, or per-block int |Psi|^2 x_q^2 of internal
                           axis q at mom[q * NB_MAX + block] (a recorded step) */
};

/* A Dens with nothing but the norm. */
template <typename T> static inline Dens<T> dens_of(T *dens, double *partial)
{
    Dens<T> out;
    out.dens = dens;
    out.partial = partial;
    out.mom = NULL;
    return out;
}

/* ------------------------------------------------------------------ */
/* helpers                                                            */
/* ------------------------------------------------------------------ */

__device__ __forceinline__ double warp_sum(double v)
{
    for (int d = 16; d > 0; d >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, d);
    return v;
}

/* The block's sums of K values per thread (v[0..K-1]) in one shared-memory
 * round, each in a fixed order (warp, then warps in order); sh holds
 * K (blockDim.x / 32) doubles; the sums in t[] of thread 0. */
template <int K> static __device__ void block_sums(const double *v, double *sh, double *t)
{
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    double u[K];
    for (int a = 0; a < K; ++a)
        u[a] = warp_sum(v[a]);
    __syncthreads();
    if (lane == 0)
        for (int a = 0; a < K; ++a)
            sh[a * nw + w] = u[a];
    __syncthreads();
    for (int a = 0; a < K; ++a) {
        t[a] = 0;
        if (threadIdx.x == 0)
            for (int q = 0; q < nw; ++q)
                t[a] += sh[a * nw + q];
    }
}

/* Sum of v over the block (fixed order); the result in thread 0. */
static __device__ double block_sum(double v, double *sh)
{
    double t;
    block_sums<1>(&v, sh, &t);
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

/* The same with the moments m[q] = int |Psi|^2 x_q^2 when out.mom is set
 * (uniform across the grid: every thread takes the same branch); red holds
 * 4 (blockDim.x / 32) doubles. */
template <typename T>
__device__ __forceinline__ void write_partials(double nsum, const double *m, double *red,
                                               const Dens<T> &out)
{
    if (!out.mom) {
        write_partial(nsum, red, out);
        return;
    }
    const double v[4] = {nsum, m[0], m[1], m[2]};
    double t[4];
    block_sums<4>(v, red, t);
    if (threadIdx.x == 0) {
        out.partial[blockIdx.x] = t[0];
        for (int q = 0; q < 3; ++q)
            out.mom[q * NB_MAX + blockIdx.x] = t[1 + q];
    }
}

/* A line's part of the moments: `ls` = sum_m w_Q[m] |Psi|^2 and `lq` =
 * sum_m w_Q[m] x_Q[m]^2 |Psi|^2 along internal axis Q, `wf` the weights of
 * the two fixed indices (i, j, k: the line's point 0), added to m[3]. */
template <typename T>
__device__ __forceinline__ void add_line_moments(double *m, int Q, double ls, double lq, double wf,
                                                 int i, int j, int k, const Grid<T> &G)
{
    const double xs[3] = {G.x0[i], G.x1[j], G.x2[k]};
    for (int q = 0; q < 3; ++q)
        m[q] += q == Q ? lq * wf : ls * wf * (xs[q] * xs[q]);
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
 * returns the line's Simpson sum along the contiguous axis (and, with
 * out.mom, that of |Psi|^2 x_2^2 in *lz). */
template <typename T, typename V, bool LAST>
__device__ __forceinline__ double store_line(V *p, const V *s, int c, long long line, const Grid<T> &G,
                                             const Dens<T> &out, int lane, double *lz)
{
    double ls = 0, l2 = 0;
    for (int e = lane; e < G.n2; e += 32) {
        const V v = s[e + e / c];
        p[e] = v;
        if (LAST) {
            const T d = abs2(v);
            if (out.dens)
                out.dens[line * G.nlp + e] = d;
            ls += G.w2[e] * (double)d;
            if (out.mom)
                l2 += G.w2[e] * (G.x2[e] * G.x2[e]) * (double)d;
        }
    }
    *lz = l2;
    return ls;
}

/* Store a solved z line (store_line) and, on the last solve of a step, add
 * its Simpson sum and its moments to the thread's partials (k_zline, k_zreg). */
template <typename T, typename V, bool LAST>
__device__ __forceinline__ void finish_z_line(V *p, const V *s, int c, long long line, int i, int j,
                                              const Grid<T> &G, const Dens<T> &out, int lane,
                                              double *nsum, double *mom)
{
    double lz;
    const double ls = store_line<T, V, LAST>(p, s, c, line, G, out, lane, &lz);
    if (LAST) {
        *nsum += ls * G.w0[i] * G.w1[j];
        if (out.mom)
            add_line_moments(mom, 2, ls, lz, G.w0[i] * G.w1[j], i, j, 0, G);
    }
}

template <typename T> struct H1Scale {
    T sc, g, gdd, q; /* q: the Lee-Huang-Yang coefficient times s^3 */
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
    r.q = (T)a.gqf * (T)(scale * scale * scale);
    return r;
}

/* dt H1's part from |Psi|^2 = d: dt (v + g d), and with the Lee-Huang-Yang
 * term (LHY) dt ((v + g d) + q d sqrt(d)) (CPU: nonlin_row, nonlin_lhy).  LHY
 * is a template parameter, chosen at the launch (q != 0), so that without
 * the term the kernels are compiled as they were before it (its sqrt path
 * took registers and occupancy from the z sweeps even when not taken). */
template <bool LHY, typename T>
__device__ __forceinline__ T h1_theta(T v, T d, T dt, const H1Scale<T> &S)
{
    T h = v + S.g * d;
    if (LHY)
        h += S.q * (d * sqrt(d));
    return dt * h;
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

template <bool LHY, typename T>
__device__ __forceinline__ T h1_apply(T p, T v, T dt, const H1Scale<T> &S, int)
{
    T th = h1_theta<LHY>(v, p * p, dt, S);
    return p * (S.sc * vexp(-th));
}

template <bool LHY, typename T, typename T2>
__device__ __forceinline__ T2 h1_apply_c(T2 p, T v, T dt, const H1Scale<T> &S, int imag)
{
    T2 r;
    if (imag) {
        T f = S.sc * vexp(-h1_theta<LHY>(v, p.x * p.x + p.y * p.y, dt, S));
        r.x = p.x * f;
        r.y = p.y * f;
    } else {
        T th = h1_theta<LHY>(v, p.x * p.x + p.y * p.y, dt, S);
        T c, sn;
        vsincos(th, &sn, &c);
        r.x = p.x * c + p.y * sn;
        r.y = p.y * c - p.x * sn;
    }
    return r;
}
template <bool LHY>
__device__ __forceinline__ float2 h1_apply(float2 p, float v, float dt, const H1Scale<float> &S, int im)
{
    return h1_apply_c<LHY, float, float2>(p, v, dt, S, im);
}
template <bool LHY>
__device__ __forceinline__ double2 h1_apply(double2 p, double v, double dt, const H1Scale<double> &S,
                                            int im)
{
    return h1_apply_c<LHY, double, double2>(p, v, dt, S, im);
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
    double *x[3], *w[3];  /* x[q]: n coordinates, then n values w x^2 */
    void *vtrap[3], *ob[3];
    void *al_r[3], *ga_r[3], *al_c[3], *ga_c[3];
    dipolar_cn_scalars sc[3];
    cufftHandle pf, pb;
    int have_plans;
    size_t fft_work;
    double *partial, *norm;
    double *rec;          /* REC_ROWS raw rows of recorded moments (device) */
    int *bad;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    double last_seconds;
    int have_obst;
    nlse_dipolar_obstacle obst;
    double g, gdd;
    double gqf;           /* q of the Lee-Huang-Yang term q |Psi|^3 (0: none)  */
    size_t dev_bytes;
    int zwarps;           /* warps per block of k_zline (0: lines too long) */
    int zreg;             /* chunk of k_zreg (0: lines longer than 512)     */
    int zchunk;
    size_t row0, n0_all;  /* a slab: its first x row, the grid's x rows      */
    struct dipolar_dist *dist; /* a slab of a distributed run (dipolar_dist.cu) */
    const struct dipolar_dist_ops *dops; /* its collective operations      */
    int device;           /* the GPU the solver lives on (ON_DEVICE)         */
    double rot;           /* w of -w L_z (0: not rotating)                   */
    int rq[2];            /* internal axes of x and y (-1: no x-y plane)     */
    void *rt[2][2];       /* [x sweep, y sweep][imaginary, real]: am, ap,    */
                          /* alpha, gamma of the rotating frame (complex)    */
    size_t rt_bytes[2];   /* bytes of one table of each sweep                */
};

/* The collective operations of a slab, which dipolar_dist.cu sets when it
 * makes one: the solver and the observables call them through this table
 * (dipolar_dist.cu calls down into those files, never the other way). */
struct dipolar_dist_ops {
    void (*free)(nlse_dipolar *s);
    int (*enable)(nlse_dipolar *s); /* plans and kernel of the dipolar term */
    int (*step)(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd, long *done);
    int (*observe)(nlse_dipolar *s, double t, nlse_dipolar_obs *out);
    int (*of_state)(nlse_dipolar *s); /* dens <- V_dd * |psi|^2 */
};

static inline int grid_for(long long work, int per_block)
{
    long long b = (work + per_block - 1) / per_block;
    if (b < 1)
        b = 1;
    return (int)(b > NB_MAX ? NB_MAX : b);
}

static inline int dmalloc(nlse_dipolar *s, void **ptr, size_t bytes, const char *what)
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

static inline void dfree(nlse_dipolar *s, void **ptr, size_t bytes)
{
    if (*ptr) {
        cudaFree(*ptr);
        s->dev_bytes -= bytes;
    }
    *ptr = NULL;
}

template <typename T> static inline Grid<T> grid_of(const nlse_dipolar *s)
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
    G.x0 = s->x[0];
    G.x1 = s->x[1];
    G.x2 = s->x[2];
    G.q0 = s->x[0] + s->L.n[0];
    G.q1 = s->x[1] + s->L.n[1];
    G.q2 = s->x[2] + s->L.n[2];
    return G;
}

/* host -> device on the solver's stream, complete on return */
static inline int h2d(nlse_dipolar *s, void *dst, const void *src, size_t bytes)
{
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

/* host table of doubles -> device array in the solver's precision */
static inline int upload(nlse_dipolar *s, void *dst, const double *src, size_t count)
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

static inline void set_scalar(float *d, const double *v) { *d = (float)v[0]; }
static inline void set_scalar(double *d, const double *v) { *d = v[0]; }
static inline void set_scalar(float2 *d, const double *v) { d->x = (float)v[0]; d->y = (float)v[1]; }
static inline void set_scalar(double2 *d, const double *v) { d->x = v[0]; d->y = v[1]; }

/* The Crank-Nicolson coefficients of internal axis q (real or imaginary time). */
template <typename T, typename C> static inline CN<C> dipolar_cn(const nlse_dipolar *s, int q, int real_time)
{
    CN<C> cn;
    if (real_time) {
        cn.al = (const C *)s->al_c[q];
        cn.ga = (const C *)s->ga_c[q];
        set_scalar(&cn.A, s->sc[q].A_c);
        set_scalar(&cn.A0r, s->sc[q].A0r_c);
    } else {
        cn.al = (const C *)s->al_r[q];
        cn.ga = (const C *)s->ga_r[q];
        set_scalar(&cn.A, &s->sc[q].A_r);
        set_scalar(&cn.A0r, &s->sc[q].A0r_r);
    }
    return cn;
}

static inline double obst_amp(const nlse_dipolar *s, double t)
{
    return s->have_obst ? dipolar_obst_amp(&s->obst, t) : 0.0;
}

/* The inputs of step k of a call (the solver's and a slab's step loops):
 * the couplings grown by (dg, dgdd), the step's time *t, and the kernels'
 * couplings and obstacle amplitude in a (the dipolar potential D is set
 * once made).  Returns the amplitude. */
template <typename T>
static inline double dipolar_step_inputs(nlse_dipolar *s, H1Args<T> *a, int mode, long k,
                                         double t0, double dg, double dgdd, int want, double *t)
{
    s->g += dg;
    s->gdd += dgdd;
    *t = mode == NLSE_DIPOLAR_REAL ? t0 + (double)k * s->p.dt : t0;
    const double amp = obst_amp(s, *t);
    a->amp = (T)amp;
    a->g = s->g;
    a->gdd = want ? s->gdd : 0.0;
    a->gqf = s->gqf;
    a->D = NULL;
    return amp;
}

/* ------------------------------------------------------------------ */
/* what each file provides                                            */
/* ------------------------------------------------------------------ */

/* dipolar.cu: the obstacle factors at time t (no-op without an obstacle). */
int dipolar_obstacle_at(nlse_dipolar *s, double t);

/* dipolar_zsolve.cu: H1 and the solve along the contiguous axis for all
 * lines (k_zreg when lines fit its registers, else k_zline); `last`: this
 * solve ends the step (1D), *parts then gets the partial-sum count. */
template <typename T, typename V, typename C>
int dipolar_zsolve(nlse_dipolar *s, V *psi, const Grid<T> &G, const H1Args<T> &a, const CN<C> &cn,
                   const Dens<T> &out, bool last, int *parts);
/* H1 alone (lines too long for the warp solve), before dipolar_lanes on axis 2. */
template <typename T, typename V>
int dipolar_h1(nlse_dipolar *s, V *psi, const Grid<T> &G, const H1Args<T> &a);

/* dipolar_lanes.cu: the solve along internal axis `axis` (0, 1, or 2 for
 * lines too long for the warp solve), `n` points a line; `last` as above
 * (axis 0 always ends the step). */
template <typename T, typename V, typename C>
int dipolar_lanes(nlse_dipolar *s, V *psi, const Grid<T> &G, const CN<C> &cn, int axis, int n,
                  const Dens<T> &out, bool last, int *parts);
/* The rotating frame's solve along internal axis `axis` of a complex state
 * (the tables of sweep `sw`, mode `real_time`). */
template <typename T>
int dipolar_rot_lanes(nlse_dipolar *s, typename Vec2<T>::T *psi, const Grid<T> &G, int sw,
                      int real_time, int axis, int n, const Dens<T> &out, bool last, int *parts,
                      int off);
/* The same for a state of value type V (complex while rotating: the state
 * is promoted when omega is set or the step starts). */
template <typename T, typename V>
static inline int dipolar_rot_solve(nlse_dipolar *s, V *psi, const Grid<T> &G, int sw,
                                    int real_time, int axis, int n, const Dens<T> &out, bool last,
                                    int *parts, int off)
{
    if constexpr (sizeof(V) == 2 * sizeof(T))
        return dipolar_rot_lanes<T>(s, (typename Vec2<T>::T *)psi, G, sw, real_time, axis, n, out,
                                    last, parts, off);
    else
        return nlse_fail(NLSE_ERR_INTERNAL, "the rotating frame needs a complex state");
}
/* norm[0] = the sum of `parts` partial sums in a fixed order; bad[0] =
 * `step` when it is not finite and positive (first such step).  rec (a
 * device row of NLSE_DIPOLAR_MOMENTS, or NULL): the norm and the sums of
 * the moments' partials (Dens::mom), in the same fixed order. */
void dipolar_norm(nlse_dipolar *s, int parts, int step, double *rec);

/* dipolar_fft.cu */
int dipolar_fft_check(cufftResult r, const char *what); /* a cuFFT status as an nlsepy one */
int dipolar_enable_dipolar(nlse_dipolar *s); /* plans, buffers, kernel table */
template <typename T> int dipolar_prepare(nlse_dipolar *s, int want, int step);
template <typename T> int dipolar_apply_fft(nlse_dipolar *s);
/* d[q] *= K[q] (nk complex values, the kernel table K in the precision T) */
template <typename T> int dipolar_kmul(nlse_dipolar *s, void *d, const void *K, long long nk);
int dipolar_of_state(nlse_dipolar *s); /* dens <- V_dd * |psi|^2 */

/* dipolar.cu: the solver of x rows [row0, row0 + rows) of the grid (rows 0:
 * all of it); the trap's normalised Gaussian start. */
int dipolar_create_rows(const nlse_dipolar_params *p, size_t row0, size_t rows, nlse_dipolar **out);
int dipolar_promote(nlse_dipolar *s);
/* A blow-up at step k (from 0) of n: the state of the call's start back
 * from the backup (`bytes`), the couplings too; *done = k; NLSE_ERR_BLOWUP. */
int dipolar_blowup(nlse_dipolar *s, size_t bytes, double g_start, double gdd_start, long k, long n,
                   long *done);
int dipolar_ensure_backup(nlse_dipolar *s);
template <typename T> void dipolar_scale_by_norm(nlse_dipolar *s);

/* dipolar_observe.cu: the observables' per-quantity sums (OQ_*) of this
 * handle's rows; psi points `halo` x rows before the slab's first (the
 * x derivative reads two rows beyond it, which a slab takes from its
 * neighbours); gi0 / gn0: the slab's first x row and the grid's x rows. */
template <typename T> int dipolar_observe_sums(nlse_dipolar *s, double t, const void *psi, int halo,
                                               double out[OQ_N]);
/* mu, energy, ... from the sums (sums of the whole grid). */
void dipolar_observe_finish(const nlse_dipolar *s, const double Tq[OQ_N], int use_dd,
                            nlse_dipolar_obs *o);



#endif /* NLSEPY_CUDA_DIPOLAR_CUH */
