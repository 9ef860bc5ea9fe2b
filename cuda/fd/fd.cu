/*
 * fd.cu -- CUDA backend of the nlse_fd solver: the NLSE by RK4 and CD / 2SHOC
 * finite differences (Caplan, NLSEmagic, sections 3 and 6), same C API as
 * csrc/fd/fd.c.
 *
 *     dPsi/dt = F(Psi) = i [a Lap(Psi) + (s |Psi|^2 - V) Psi]
 *
 * The state stays on the device.  Each RK4 stage is one kernel launch that
 * computes F at interior and boundary points alike (a boundary thread
 * recomputes its interior neighbour's value, so the MSD condition, eq. 14,
 * needs no second launch) and applies the stage update of fd_kernels.inc:
 *   stage 1: acc = Psi^n + dt/6 F(Psi^n);  ta = Psi^n + dt/2 F(Psi^n)
 *   stage 2: acc += dt/3 F(ta);            tb = Psi^n + dt/2 F(ta)
 *   stage 3: acc += dt/3 F(tb);            ta = Psi^n + dt   F(tb)
 *   stage 4: acc += dt/6 F(ta)             (acc is Psi^{n+1})
 * 2SHOC needs no second launch and no D array: its two steps (eqs. 4-9)
 * compose, away from the boundary, into sum_a (d_a^2 - d_a^4 / 12) / h_a^2
 * (the cross terms cancel), a 13-point stencil in 3D; at points next to a
 * non-periodic boundary the kernel evaluates the two steps themselves, D at
 * the boundary by the Laplacian forms of eqs. 12, 15, 17.  Stage 4
 * flags the first step that produced a non-finite value in a device word;
 * later launches of the chunk return at once, so the last finite state is
 * kept without a host round-trip per step.  Runs of 16 steps are replayed
 * from a captured CUDA graph to remove launch gaps.  Kernels are templates
 * on the precision, the number of line axes and the scheme.  The fused
 * step (`fused=`) takes all four stages in one pass: k_stream on periodic
 * 2D and 3D grids (2.5D blocking along axis 0), k_fused on 1D and closed 2D
 * grids (a box per tile in shared memory).
 */
#define NLSEPY_FD_DEVICE_HANDLE
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "fd/fd_internal.h"
#include "nlsepy/common.h"
#include "nlsepy/fd.h"

#include "common/check.cuh"

/* Steps per captured graph (even, so the Psi/acc roles return to the start). */
#define GRAPH_STEPS 16


/* Geometry as the kernels see it: a (n0, n1, len) box, len contiguous; 2D
 * has n0 = 1, 1D has n0 = n1 = 1. */
struct DGeom {
    int n0, n1, len;
    int periodic, bc;
};

template <typename R> struct DCoef {
    R ihi, ihj, ihk;    /* 1/h^2 along i, j, k                      */
    R cij, cik, cjk;    /* 2SHOC cross weights (h_a^2+h_b^2)/(12 h_a^2 h_b^2) */
    R a, s;
};

struct nlse_fd {
    nlse_fd_params p;
    fd_geom g;
    DGeom dg;
    size_t real_size;
    void *psi, *acc, *ta, *tb, *V;     /* device buffers           */
    int *flags;                        /* [0] bad step, [1] graph base */
    int undo_ok;                       /* acc holds the state before the last step */
    int kernel, last_kernel;           /* enum nlse_fd_kernel asked for; last run */
    int *host_flag;                    /* pinned                    */
    cudaStream_t stream;
    cudaGraphExec_t graph[2];          /* GRAPH_STEPS steps, one per    */
    void *graph_psi[2];                /* assignment of Psi to a buffer */
    int device;
    int sms;                           /* multiprocessors of the device */
    size_t smem;                       /* dynamic shared memory a block may take */
    int stream_fit;                    /* k_stream blocks resident on one; 0 until asked */
    /* frames: device snapshot slots, a copy stream, pinned staging */
    void *snap[2];
    cudaEvent_t snap_ev[2];
    cudaStream_t copy_stream;
    void *stage[2];
    cudaEvent_t stage_ev[2];
    pthread_mutex_t stage_lock;        /* the staging buffers' user     */
};

/* pinned staging block for device-to-host copies of frames */
#define STAGE_BYTES ((size_t)32 << 20)

/* ------------------------------------------------------------------ */
/* device helpers                                                     */
/* ------------------------------------------------------------------ */

struct Nb {
    long long km, kp, jm, jp, im, ip; /* neighbour offsets (wrapped)   */
};

__device__ __forceinline__ Nb neighbours(const DGeom &g, int i, int j, int k)
{
    Nb o;
    const long long sj = g.len, si = (long long)g.n1 * g.len;
    o.km = (k == 0) ? g.len - 1 : -1;
    o.kp = (k == g.len - 1) ? -(long long)(g.len - 1) : 1;
    o.jm = (j == 0) ? (g.n1 - 1) * sj : -sj;
    o.jp = (j == g.n1 - 1) ? -(g.n1 - 1) * sj : sj;
    o.im = (i == 0) ? (g.n0 - 1) * si : -si;
    o.ip = (i == g.n0 - 1) ? -(g.n0 - 1) * si : si;
    return o;
}

template <int M>
__device__ __forceinline__ bool on_edge(const DGeom &g, int i, int j, int k)
{
    if (g.periodic)
        return false;
    bool e = (k == 0 || k == g.len - 1);
    if (M >= 1)
        e = e || j == 0 || j == g.n1 - 1;
    if (M >= 2)
        e = e || i == 0 || i == g.n0 - 1;
    return e;
}

__device__ __forceinline__ int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* second-order Laplacian D (eqs. 4, 6, 8) */
template <typename R, int M>
__device__ __forceinline__ void lap2(const typename Vec2<R>::T *__restrict__ x, long long p,
                                     const Nb &o, const DCoef<R> &C, R &lr, R &li)
{
    typedef typename Vec2<R>::T T;
    const T c = x[p], a = x[p + o.km], b = x[p + o.kp];
    /* summed in the CPU kernels' order: contiguous axis, then axis 0, axis 1 */
    R r = C.ihk * (a.x + b.x - 2 * c.x), i = C.ihk * (a.y + b.y - 2 * c.y);
    if (M >= 2) {
        const T u = x[p + o.im], v = x[p + o.ip];
        r += C.ihi * (u.x + v.x - 2 * c.x);
        i += C.ihi * (u.y + v.y - 2 * c.y);
    }
    if (M >= 1) {
        const T u = x[p + o.jm], v = x[p + o.jp];
        r += C.ihj * (u.x + v.x - 2 * c.x);
        i += C.ihj * (u.y + v.y - 2 * c.y);
    }
    lr = r;
    li = i;
}

/* h_a^2 h_b^2 D_aa D_bb x for the axis pair with offsets (u, v) */
template <typename R>
__device__ __forceinline__ void cross(const typename Vec2<R>::T *__restrict__ x, long long p,
                                      long long um, long long up, long long vm, long long vp,
                                      R w, R &r, R &i)
{
    typedef typename Vec2<R>::T T;
    const T c = x[p];
    const T d1 = x[p + um + vm], d2 = x[p + um + vp], d3 = x[p + up + vm], d4 = x[p + up + vp];
    const T e1 = x[p + um], e2 = x[p + up], e3 = x[p + vm], e4 = x[p + vp];
    r += w * ((d1.x + d2.x + d3.x + d4.x) - 2 * (e1.x + e2.x + e3.x + e4.x) + 4 * c.x);
    i += w * ((d1.y + d2.y + d3.y + d4.y) - 2 * (e1.y + e2.y + e3.y + e4.y) + 4 * c.y);
}

template <typename R>
__device__ __forceinline__ R nfac(const typename Vec2<R>::T &c, const R *__restrict__ V,
                                  long long p, R s)
{
    R n = s * (c.x * c.x + c.y * c.y);
    return V ? n - V[p] : n;
}

/* one-sided second derivative at an end of a 1D line (dir = +1 or -1): the
 * 4-point second-order formula NLSEmagic uses for both schemes */
template <typename R>
__device__ void one_sided(const typename Vec2<R>::T *__restrict__ x, long long p, int dir,
                          const DCoef<R> &C, R &lr, R &li)
{
    const R w[4] = {2, -5, 4, -1};
    R r = 0, i = 0;
    for (int q = 0; q < 4; ++q) {
        r += w[q] * x[p + dir * q].x;
        i += w[q] * x[p + dir * q].y;
    }
    lr = C.ihk * r;
    li = C.ihk * i;
}

template <int M>
__device__ __forceinline__ long long inward(const DGeom &g, int i, int j, int k, Nb &oq,
                                            int *iq = 0, int *jq = 0, int *kq = 0)
{
    const int ki = clampi(k, 1, g.len - 2);
    const int ji = M >= 1 ? clampi(j, 1, g.n1 - 2) : j;
    const int ii = M >= 2 ? clampi(i, 1, g.n0 - 2) : i;
    oq = neighbours(g, ii, ji, ki);
    if (iq) {
        *iq = ii;
        *jq = ji;
        *kq = ki;
    }
    return ((long long)ii * g.n1 + ji) * g.len + ki;
}

/* ------------------------------------------------------------------ */
/* kernels                                                            */
/* ------------------------------------------------------------------ */

/* offsets to the points two steps away (wrapped) */
struct Nb2 {
    long long km, kp, jm, jp, im, ip;
};

__device__ __forceinline__ Nb2 neighbours2(const DGeom &g, int i, int j, int k)
{
    Nb2 o;
    const long long sj = g.len, si = (long long)g.n1 * g.len;
    o.km = (k >= 2) ? -2 : g.len - 2;
    o.kp = (k + 2 < g.len) ? 2 : 2 - g.len;
    o.jm = ((j >= 2) ? -2 : g.n1 - 2) * sj;
    o.jp = ((j + 2 < g.n1) ? 2 : 2 - g.n1) * sj;
    o.im = ((i >= 2) ? -2 : g.n0 - 2) * si;
    o.ip = ((i + 2 < g.n0) ? 2 : 2 - g.n0) * si;
    return o;
}

/* a point one step from a non-periodic edge: its 2SHOC Laplacian needs D at
 * boundary points */
template <int M>
__device__ __forceinline__ bool near_edge(const DGeom &g, int i, int j, int k)
{
    if (g.periodic)
        return false;
    bool e = (k == 1 || k == g.len - 2);
    if (M >= 1)
        e = e || j == 1 || j == g.n1 - 2;
    if (M >= 2)
        e = e || i == 1 || i == g.n0 - 2;
    return e;
}

/* 2SHOC away from boundaries: sum_a (-x_{-2} + 16 x_{-1} - 30 x_0 + 16 x_{+1}
 * - x_{+2}) / (12 h_a^2), the composition of eqs. 4-9 (fd_kernels.inc form:
 * D - sum_a (h_a^2/12) D_aa D + sum_{a<b} c_ab h_a^2 h_b^2 D_aa D_bb, whose
 * mixed terms cancel) */
template <typename R, int M>
__device__ __forceinline__ void wide4(const typename Vec2<R>::T *__restrict__ x, long long p,
                                      const Nb &o, const Nb2 &o2, const DCoef<R> &C, R &lr,
                                      R &li)
{
    typedef typename Vec2<R>::T T;
    const T c = x[p];
    const R t = (R)1 / 12;
    T a = x[p + o2.km], b = x[p + o.km], d = x[p + o.kp], e = x[p + o2.kp];
    R r = C.ihk * t * (16 * (b.x + d.x) - (a.x + e.x) - 30 * c.x);
    R i = C.ihk * t * (16 * (b.y + d.y) - (a.y + e.y) - 30 * c.y);
    if (M >= 2) {
        a = x[p + o2.im], b = x[p + o.im], d = x[p + o.ip], e = x[p + o2.ip];
        r += C.ihi * t * (16 * (b.x + d.x) - (a.x + e.x) - 30 * c.x);
        i += C.ihi * t * (16 * (b.y + d.y) - (a.y + e.y) - 30 * c.y);
    }
    if (M >= 1) {
        a = x[p + o2.jm], b = x[p + o.jm], d = x[p + o.jp], e = x[p + o2.jp];
        r += C.ihj * t * (16 * (b.x + d.x) - (a.x + e.x) - 30 * c.x);
        i += C.ihj * t * (16 * (b.y + d.y) - (a.y + e.y) - 30 * c.y);
    }
    lr = r;
    li = i;
}

template <typename R>
__device__ __forceinline__ R nfac(const typename Vec2<R>::T &c, const R *__restrict__ V,
                                  long long p, R s);

/* The 2SHOC first step D at (i, j, k): the CD Laplacian inside, the
 * Laplacian forms of the boundary conditions on the edge (eqs. 12, 15, 17;
 * one-sided: the one-sided difference). */
template <typename R, int M>
__device__ void D_at(const DGeom &g, const DCoef<R> &C, const typename Vec2<R>::T *__restrict__ x,
                     const R *__restrict__ V, int i, int j, int k, R &dr, R &di)
{
    typedef typename Vec2<R>::T T;
    const long long p = ((long long)i * g.n1 + j) * g.len + k;
    if (!on_edge<M>(g, i, j, k)) {
        lap2<R, M>(x, p, neighbours(g, i, j, k), C, dr, di);
        return;
    }
    const T c = x[p];
    dr = di = 0;
    if (g.bc == NLSE_BC_DIRICHLET) {
        const R n = nfac<R>(c, V, p, C.s);
        dr = -n * c.x / C.a;
        di = -n * c.y / C.a;
    } else if (g.bc == NLSE_BC_MSD) {
        Nb oq;
        const long long q = inward<M>(g, i, j, k, oq);
        R qr, qi;
        lap2<R, M>(x, q, oq, C, qr, qi);
        const T u = x[q];
        const R m2 = u.x * u.x + u.y * u.y;
        const R re = m2 > 0 ? (qr * u.x + qi * u.y) / m2 : (R)0;
        const R f = re + (nfac<R>(u, V, q, C.s) - nfac<R>(c, V, p, C.s)) / C.a;
        dr = f * c.x;
        di = f * c.y;
    } else if (g.bc == NLSE_BC_ONE_SIDED) {
        one_sided<R>(x, p, k == 0 ? 1 : -1, C, dr, di);
    } /* L0: D_b = 0 */
}

/* 2SHOC next to an edge: the two steps themselves, eqs. 5, 7, 9 in the
 * per-axis form  D - (1/12) sum_a (D_{+a} + D_{-a} - 2 D) + cross terms. */
template <typename R, int M>
__device__ void lap4_two_step(const DGeom &g, const DCoef<R> &C,
                              const typename Vec2<R>::T *__restrict__ x, const R *__restrict__ V,
                              int i, int j, int k, long long p, const Nb &o, R &lr, R &li)
{
    R dr, di, ar, ai, br, bi;
    D_at<R, M>(g, C, x, V, i, j, k, dr, di);
    D_at<R, M>(g, C, x, V, i, j, k - 1, ar, ai);
    D_at<R, M>(g, C, x, V, i, j, k + 1, br, bi);
    R sr = ar + br - 2 * dr, si = ai + bi - 2 * di, xr = 0, xi = 0;
    if (M >= 1) {
        D_at<R, M>(g, C, x, V, i, j - 1, k, ar, ai);
        D_at<R, M>(g, C, x, V, i, j + 1, k, br, bi);
        sr += ar + br - 2 * dr;
        si += ai + bi - 2 * di;
        cross<R>(x, p, o.jm, o.jp, o.km, o.kp, C.cjk, xr, xi);
    }
    if (M >= 2) {
        D_at<R, M>(g, C, x, V, i - 1, j, k, ar, ai);
        D_at<R, M>(g, C, x, V, i + 1, j, k, br, bi);
        sr += ar + br - 2 * dr;
        si += ai + bi - 2 * di;
        cross<R>(x, p, o.im, o.ip, o.km, o.kp, C.cik, xr, xi);
        cross<R>(x, p, o.im, o.ip, o.jm, o.jp, C.cij, xr, xi);
    }
    const R tw = (R)1 / 12;
    lr = dr - tw * sr + xr;
    li = di - tw * si + xi;
}

/* the scheme's Laplacian at an interior point (i, j, k) = p */
template <typename R, int M, bool SHOC>
__device__ __forceinline__ void lap(const DGeom &g, const DCoef<R> &C,
                                    const typename Vec2<R>::T *__restrict__ x,
                                    const R *__restrict__ V, int i, int j, int k, long long p,
                                    const Nb &o, R &lr, R &li)
{
    if (!SHOC)
        lap2<R, M>(x, p, o, C, lr, li);
    else if (near_edge<M>(g, i, j, k))
        lap4_two_step<R, M>(g, C, x, V, i, j, k, p, o, lr, li);
    else
        wide4<R, M>(x, p, o, neighbours2(g, i, j, k), C, lr, li);
}

/* Time derivative F at grid point (i, j, k) = p: the scheme inside, the
 * boundary conditions on the edge (eqs. 11, 14, 16; one-sided). */
template <typename R, int M, bool SHOC>
__device__ __forceinline__ void F_point(const DGeom &g, const DCoef<R> &C,
                                        const typename Vec2<R>::T *__restrict__ x,
                                        const R *__restrict__ V, int i, int j, int k, long long p,
                                        R &fr, R &fi)
{
    typedef typename Vec2<R>::T T;
    const T c = x[p];
    R lr, li;
    if (!on_edge<M>(g, i, j, k)) {
        const Nb o = neighbours(g, i, j, k);
        lap<R, M, SHOC>(g, C, x, V, i, j, k, p, o, lr, li);
        const R n = nfac<R>(c, V, p, C.s);
        fr = -(C.a * li + n * c.y);
        fi = C.a * lr + n * c.x;
    } else if (g.bc == NLSE_BC_L0) {
        const R n = nfac<R>(c, V, p, C.s);
        fr = -n * c.y;
        fi = n * c.x;
    } else if (g.bc == NLSE_BC_ONE_SIDED) {
        one_sided<R>(x, p, k == 0 ? 1 : -1, C, lr, li);
        const R n = nfac<R>(c, V, p, C.s);
        fr = -(C.a * li + n * c.y);
        fi = C.a * lr + n * c.x;
    } else if (g.bc == NLSE_BC_MSD) {
        Nb oq;
        int iq, jq, kq;
        const long long q = inward<M>(g, i, j, k, oq, &iq, &jq, &kq);
        lap<R, M, SHOC>(g, C, x, V, iq, jq, kq, q, oq, lr, li);
        const T u = x[q];
        const R n = nfac<R>(u, V, q, C.s);
        const R gr = -(C.a * li + n * u.y), gi = C.a * lr + n * u.x;
        const R m2 = u.x * u.x + u.y * u.y;
        const R w = m2 > 0 ? (gi * u.x - gr * u.y) / m2 : (R)0; /* Im(F_q / Psi_q) */
        fr = -w * c.y;
        fi = w * c.x;
    } else { /* Dirichlet */
        fr = fi = 0;
    }
}

/* The RK4 stage update at p; stage 4 (step > 0) flags non-finite values. */
template <typename R>
__device__ __forceinline__ void update(const typename Vec2<R>::T *__restrict__ psin,
                                       const typename Vec2<R>::T *base, typename Vec2<R>::T *acc,
                                       typename Vec2<R>::T *__restrict__ out, long long p, R fr,
                                       R fi, R wa, R wo, int step, int *flags)
{
    typedef typename Vec2<R>::T T;
    const T b = base[p];
    T a;
    a.x = b.x + wa * fr;
    a.y = b.y + wa * fi;
    acc[p] = a;
    if (out) {
        const T n0 = psin[p];
        T o;
        o.x = n0.x + wo * fr;
        o.y = n0.y + wo * fi;
        out[p] = o;
    }
    if (step > 0 && !(isfinite(a.x) && isfinite(a.y)))
        atomicCAS(flags, 0, flags[1] + step);
}

/* One RK4 stage (see the file comment), one thread per point; `step` > 0
 * marks stage 4, whose non-finite results record flags[1] + step in flags[0]. */
template <typename R, int M, bool SHOC>
__global__ void __launch_bounds__(256, 4) /* <= 64 registers: occupancy hides latency */
k_stage(DGeom g, DCoef<R> C, const typename Vec2<R>::T *__restrict__ x,
        const typename Vec2<R>::T *__restrict__ psin, const typename Vec2<R>::T *base,
        typename Vec2<R>::T *acc, typename Vec2<R>::T *__restrict__ out,
        const R *__restrict__ V, R wa, R wo, int step, int *flags)
{
    if (flags[0])
        return;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int i = blockIdx.z * blockDim.z + threadIdx.z;
    if (k >= g.len || j >= g.n1 || i >= g.n0)
        return;
    const long long p = ((long long)i * g.n1 + j) * g.len + k;
    R fr, fi;
    if (on_edge<M>(g, i, j, k) || (SHOC && near_edge<M>(g, i, j, k))) {
        F_point<R, M, SHOC>(g, C, x, V, i, j, k, p, fr, fi); /* O(N^(2/3)) points */
    } else {
        typedef typename Vec2<R>::T T;
        const T c = x[p];
        const Nb o = neighbours(g, i, j, k);
        R lr, li;
        if (SHOC)
            wide4<R, M>(x, p, o, neighbours2(g, i, j, k), C, lr, li);
        else
            lap2<R, M>(x, p, o, C, lr, li);
        const R n = nfac<R>(c, V, p, C.s);
        fr = -(C.a * li + n * c.y);
        fi = C.a * lr + n * c.x;
    }
    update<R>(psin, base, acc, out, p, fr, fi, wa, wo, step, flags);
}

/* complex64 2SHOC in 2D/3D: each thread takes two neighbouring points along
 * the contiguous axis (k even; needs an even line length) and reads x in
 * 16-byte pairs: 3 loads cover both points' neighbours along that axis and
 * each other neighbour pair is one load, about half the load instructions of
 * two k_stage threads (the single-precision kernel is bound by those). */
template <int M>
__device__ __forceinline__ void wide4_pair(const float4 *__restrict__ x4, long long h,
                                           const Nb &o, const Nb2 &o2, const DCoef<float> &C,
                                           float4 c, float4 l, float4 r, float4 &L)
{
    const float t = 1.0f / 12;
    /* point 0 = (c.x, c.y): k-2 = l.xy, k-1 = l.zw, k+1 = c.zw, k+2 = r.xy
     * point 1 = (c.z, c.w): k-2 = l.zw, k-1 = c.xy, k+1 = r.xy, k+2 = r.zw */
    L.x = C.ihk * t * (16 * (l.z + c.z) - (l.x + r.x) - 30 * c.x);
    L.y = C.ihk * t * (16 * (l.w + c.w) - (l.y + r.y) - 30 * c.y);
    L.z = C.ihk * t * (16 * (c.x + r.x) - (l.z + r.z) - 30 * c.z);
    L.w = C.ihk * t * (16 * (c.y + r.y) - (l.w + r.w) - 30 * c.w);
    if (M >= 2) {
        const float4 a = x4[h + o2.im / 2], b = x4[h + o.im / 2];
        const float4 d = x4[h + o.ip / 2], e = x4[h + o2.ip / 2];
        L.x += C.ihi * t * (16 * (b.x + d.x) - (a.x + e.x) - 30 * c.x);
        L.y += C.ihi * t * (16 * (b.y + d.y) - (a.y + e.y) - 30 * c.y);
        L.z += C.ihi * t * (16 * (b.z + d.z) - (a.z + e.z) - 30 * c.z);
        L.w += C.ihi * t * (16 * (b.w + d.w) - (a.w + e.w) - 30 * c.w);
    }
    if (M >= 1) {
        const float4 a = x4[h + o2.jm / 2], b = x4[h + o.jm / 2];
        const float4 d = x4[h + o.jp / 2], e = x4[h + o2.jp / 2];
        L.x += C.ihj * t * (16 * (b.x + d.x) - (a.x + e.x) - 30 * c.x);
        L.y += C.ihj * t * (16 * (b.y + d.y) - (a.y + e.y) - 30 * c.y);
        L.z += C.ihj * t * (16 * (b.z + d.z) - (a.z + e.z) - 30 * c.z);
        L.w += C.ihj * t * (16 * (b.w + d.w) - (a.w + e.w) - 30 * c.w);
    }
}

template <int M>
__global__ void __launch_bounds__(256, 4)
k_stage_pair(DGeom g, DCoef<float> C, const float2 *__restrict__ x,
             const float2 *__restrict__ psin, const float2 *base, float2 *acc,
             float2 *__restrict__ out, const float *__restrict__ V, float wa, float wo, int step,
             int *flags)
{
    if (flags[0])
        return;
    const int k = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int i = blockIdx.z;
    if (k >= g.len || j >= g.n1)
        return;
    const long long p = ((long long)i * g.n1 + j) * g.len + k;
    const bool slow = on_edge<M>(g, i, j, k) || near_edge<M>(g, i, j, k) ||
                      on_edge<M>(g, i, j, k + 1) || near_edge<M>(g, i, j, k + 1) ||
                      (!g.periodic && (k < 2 || k + 1 > g.len - 3));
    if (slow) { /* O(N^(2/3)) points: one at a time */
#pragma unroll 1
        for (int d = 0; d < 2; ++d) {
            float fr, fi;
            F_point<float, M, true>(g, C, x, V, i, j, k + d, p + d, fr, fi);
            update<float>(psin, base, acc, out, p + d, fr, fi, wa, wo, step, flags);
        }
        return;
    }
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    const long long h = p / 2; /* index of the pair (p even) */
    const Nb o = neighbours(g, i, j, k);
    const Nb2 o2 = neighbours2(g, i, j, k);
    const float4 c = x4[h];
    const float4 l = x4[h + o2.km / 2];                  /* k-2, k-1 (wrapped) */
    const float4 r = x4[h + (k + 2 < g.len ? 1 : -(long long)(g.len / 2 - 1))]; /* k+2, k+3 */
    float4 L;
    wide4_pair<M>(x4, h, o, o2, C, c, l, r, L);
    float2 v = make_float2(0, 0);
    if (V)
        v = reinterpret_cast<const float2 *>(V)[h];
    const float n0 = C.s * (c.x * c.x + c.y * c.y) - v.x;
    const float n1 = C.s * (c.z * c.z + c.w * c.w) - v.y;
    float4 f;
    f.x = -(C.a * L.y + n0 * c.y);
    f.y = C.a * L.x + n0 * c.x;
    f.z = -(C.a * L.w + n1 * c.w);
    f.w = C.a * L.z + n1 * c.z;
    const float4 b = reinterpret_cast<const float4 *>(base)[h];
    float4 a;
    a.x = b.x + wa * f.x;
    a.y = b.y + wa * f.y;
    a.z = b.z + wa * f.z;
    a.w = b.w + wa * f.w;
    reinterpret_cast<float4 *>(acc)[h] = a;
    if (out) {
        const float4 q = reinterpret_cast<const float4 *>(psin)[h];
        float4 w;
        w.x = q.x + wo * f.x;
        w.y = q.y + wo * f.y;
        w.z = q.z + wo * f.z;
        w.w = q.w + wo * f.w;
        reinterpret_cast<float4 *>(out)[h] = w;
    }
    if (step > 0 && !(isfinite(a.x) && isfinite(a.y) && isfinite(a.z) && isfinite(a.w)))
        atomicCAS(flags, 0, flags[1] + step);
}

/* advance the graph's step base (one thread) */
__global__ void k_bump(int *flags, int by) { flags[1] += by; }

/* Observables: sums[0] += |x|^2, sums[1] += V|x|^2 - s/2 |x|^4, sums[2] += the
 * kinetic density (see nlse_fd_observe). */
template <typename R, int M, bool SHOC>
__global__ void __launch_bounds__(256)
k_observe(DGeom g, DCoef<R> C, const typename Vec2<R>::T *__restrict__ x,
          const R *__restrict__ V, double *sums, int row0, int row1)
{
    typedef typename Vec2<R>::T T;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    const int i = blockIdx.z * blockDim.z + threadIdx.z;
    const int row = M == 2 ? i : (M == 1 ? j : k); /* index along axis 0 */
    double v[3] = {0, 0, 0};
    if (k < g.len && j < g.n1 && i < g.n0 && row >= row0 && row < row1) {
        const long long p = ((long long)i * g.n1 + j) * g.len + k;
        const T c = x[p];
        const double r2 = (double)c.x * c.x + (double)c.y * c.y;
        v[0] = r2;
        v[1] = (V ? (double)V[p] * r2 : 0.0) - 0.5 * (double)C.s * r2 * r2;
        if (g.periodic) {
            R lr, li;
            lap<R, M, SHOC>(g, C, x, V, i, j, k, p, neighbours(g, i, j, k), lr, li);
            v[2] = -((double)c.x * lr + (double)c.y * li);
        } else {
            const long long sj = g.len, si = (long long)g.n1 * g.len;
            if (k < g.len - 1) {
                const T u = x[p + 1];
                v[2] += (double)C.ihk * (((double)u.x - c.x) * ((double)u.x - c.x) +
                                         ((double)u.y - c.y) * ((double)u.y - c.y));
            }
            if (M >= 1 && j < g.n1 - 1) {
                const T u = x[p + sj];
                v[2] += (double)C.ihj * (((double)u.x - c.x) * ((double)u.x - c.x) +
                                         ((double)u.y - c.y) * ((double)u.y - c.y));
            }
            if (M >= 2 && i < g.n0 - 1) {
                const T u = x[p + si];
                v[2] += (double)C.ihi * (((double)u.x - c.x) * ((double)u.x - c.x) +
                                         ((double)u.y - c.y) * ((double)u.y - c.y));
            }
        }
    }
    for (int q = 0; q < 3; ++q) {
        double w = v[q];
        for (int off = 16; off > 0; off >>= 1)
            w += __shfl_down_sync(0xffffffffu, w, off);
        if ((threadIdx.x & 31) == 0 && w != 0)
            atomicAdd(&sums[q], w);
    }
}

/* ------------------------------------------------------------------ */
/* host side                                                          */
/* ------------------------------------------------------------------ */

template <typename R> static DCoef<R> coef_of(const fd_geom &g)
{
    DCoef<R> C;
    memset(&C, 0, sizeof C);
    const int m = g.m;
    C.ihk = (R)g.ih2[m];
    if (m >= 1)
        C.ihj = (R)g.ih2[m - 1];
    if (m >= 2)
        C.ihi = (R)g.ih2[0];
    if (m == 1) {
        C.cjk = (R)g.cpair[0];
    } else if (m == 2) {
        C.cij = (R)g.cpair[0];
        C.cik = (R)g.cpair[1];
        C.cjk = (R)g.cpair[2];
    }
    C.a = (R)g.a;
    C.s = (R)g.s;
    return C;
}

static void launch_shape(const nlse_fd *s, dim3 *grid, dim3 *block)
{
    const DGeom &g = s->dg;
    if (s->g.m == 0) {
        *block = dim3(256, 1, 1);
        *grid = dim3((g.len + 255) / 256, 1, 1);
    } else {
        *block = dim3(32, 8, 1);
        *grid = dim3((g.len + 31) / 32, (g.n1 + 7) / 8, g.n0);
    }
}

/* the pair kernel exists for float only; the double instantiation is never
 * called (enqueue_steps checks the precision first) */
template <typename R, int M>
static void launch_pair(nlse_fd *s, dim3 grid, dim3 block, const DCoef<R> &C,
                        const typename Vec2<R>::T *in, typename Vec2<R>::T *psi,
                        typename Vec2<R>::T *base, typename Vec2<R>::T *acc,
                        typename Vec2<R>::T *out, const R *V, R wa, R wo, int step)
{
    if (sizeof(R) == sizeof(float))
        k_stage_pair<(M >= 1 ? M : 1)><<<grid, block, 0, s->stream>>>(
            s->dg, *(const DCoef<float> *)&C, (const float2 *)in, (const float2 *)psi,
            (const float2 *)base, (float2 *)acc, (float2 *)out, (const float *)V, (float)wa,
            (float)wo, step, s->flags);
}

/* Enqueue `nsteps` RK4 steps numbered 1..nsteps after flags[1]; the Psi and
 * acc pointers are swapped after each step as the kernels expect. */
template <typename R, int M, bool SHOC>
static void enqueue_steps(nlse_fd *s, int nsteps)
{
    typedef typename Vec2<R>::T T;
    dim3 grid, block;
    launch_shape(s, &grid, &block);
    /* complex64 2SHOC in 2D/3D with even lines: two points per thread */
    const bool pairs = SHOC && M >= 1 && sizeof(R) == sizeof(float) && s->dg.len % 2 == 0;
    const dim3 pgrid((s->dg.len / 2 + 31) / 32, grid.y, grid.z);
    const DCoef<R> C = coef_of<R>(s->g);
    const R dt = (R)s->g.dt;
    const R wa[4] = {dt / 6, dt / 3, dt / 3, dt / 6};
    const R wo[4] = {dt / 2, dt / 2, dt, 0};
    T *ta = (T *)s->ta, *tb = (T *)s->tb;
    const R *V = (const R *)s->V;
    for (int n = 0; n < nsteps; ++n) {
        T *psi = (T *)s->psi, *acc = (T *)s->acc;
        const T *in[4] = {psi, ta, tb, ta};
        T *out[4] = {ta, tb, ta, NULL};
        for (int q = 0; q < 4; ++q) {
            if (pairs)
                launch_pair<R, M>(s, pgrid, block, C, in[q], psi, q == 0 ? psi : acc, acc,
                                  out[q], V, wa[q], wo[q], q == 3 ? n + 1 : 0);
            else
                k_stage<R, M, SHOC><<<grid, block, 0, s->stream>>>(
                    s->dg, C, in[q], psi, q == 0 ? psi : acc, acc, out[q], V, wa[q], wo[q],
                    q == 3 ? n + 1 : 0, s->flags);
        }
        s->psi = acc;
        s->acc = psi;
    }
}

/* ------------------------------------------------------------------ */
/* the fused step (1D, 2D): csrc/fd/fd_fused.inc's tiles in shared memory */
/* ------------------------------------------------------------------ */

/* One RK4 step of one tile per block, the CPU fused step's algorithm: the
 * tile widened by H = 4 R (cut back at non-periodic edges, wrapped at
 * periodic ones) is loaded into shared memory as a grid of its own (never
 * periodic: the same device point formulas as k_stage, so boundary points
 * follow their conditions); stage q runs on the box shrunk by (q + 1) R at
 * its cut faces; stage 4's tile points are written to `out`.  Arrays: Psi^n,
 * two stage inputs, the accumulator (+ V), box-sized each. */
#define FUSED_THREADS 512

__device__ __forceinline__ int wrapi(int x, int n) { return ((x % n) + n) % n; }

/* x modulo n for x within one period of [0, n) without a division */
__device__ __forceinline__ int wrapn(int x, int n)
{
    return x < -n || x >= 2 * n ? wrapi(x, n) : x < 0 ? x + n : x >= n ? x - n : x;
}

/* the box along one axis: origin b0, length nb, cut faces c0 / c1 */
__device__ __forceinline__ void fused_span(int lo, int T, int n, int H, int per, int &b0,
                                           int &nb, int &c0, int &c1)
{
    int b1 = lo + T + H;
    b0 = lo - H;
    if (!per) {
        b0 = b0 > 0 ? b0 : 0;
        b1 = b1 < n ? b1 : n;
    }
    c0 = per || b0 > 0;
    c1 = per || b1 < n;
    nb = b1 - b0;
}

template <typename R, int M, bool SHOC>
__global__ void __launch_bounds__(FUSED_THREADS, 2) /* <= 64 registers */
k_fused(DGeom g, DCoef<R> C, const typename Vec2<R>::T *__restrict__ psi,
        typename Vec2<R>::T *__restrict__ out, const R *__restrict__ V, R dt, int reach,
        int tj, int tk, int step, int *flags)
{
    typedef typename Vec2<R>::T T;
    extern __shared__ __align__(16) unsigned char fused_smem[];
    __shared__ int stop;
    if (threadIdx.x == 0)
        stop = flags[0];
    __syncthreads();
    if (stop) /* an earlier step blew up; one read for the whole block */
        return;
    const int H = 4 * reach, per = g.periodic;
    const int nj = M >= 1 ? g.n1 : 1;
    const int lok = blockIdx.x * tk, loj = blockIdx.y * tj;
    const int Tk = lok + tk <= g.len ? tk : g.len - lok;
    const int Tj = M >= 1 ? (loj + tj <= nj ? tj : nj - loj) : 1;
    int bk0, bk, ck0, ck1, bj0 = 0, bj = 1, cj0 = 0, cj1 = 0;
    fused_span(lok, Tk, g.len, H, per, bk0, bk, ck0, ck1);
    if (M >= 1)
        fused_span(loj, Tj, nj, H, per, bj0, bj, cj0, cj1);
    DGeom B = g; /* the box as a grid of its own */
    B.n0 = 1;
    B.n1 = bj;
    B.len = bk;
    B.periodic = 0;
    const int nb = bj * bk;
    T *sP = (T *)fused_smem, *sA = sP + nb, *sX = sA + nb, *sY = sX + nb;
    R *sV = V ? (R *)(sY + nb) : NULL;
    for (int p = threadIdx.x; p < nb; p += blockDim.x) {
        const int j = p / bk, k = p - j * bk;
        const long long gp = (long long)(M >= 1 ? wrapi(bj0 + j, nj) : 0) * g.len +
                             wrapi(bk0 + k, g.len);
        sP[p] = psi[gp];
        if (V)
            sV[p] = V[gp];
    }
    __syncthreads();
    const R wa[4] = {dt / 6, dt / 3, dt / 3, dt / 6};
    const R wo[4] = {dt / 2, dt / 2, dt, 0};
    const T *in[4] = {sP, sX, sY, sX};
    T *nx[4] = {sX, sY, sX, NULL};
    for (int q = 0; q < 4; ++q) {
        const int sh = (q + 1) * reach;
        const int k0 = ck0 ? sh : 0, k1 = bk - (ck1 ? sh : 0);
        const int j0 = cj0 ? sh : 0, j1 = bj - (cj1 ? sh : 0);
        const int nk = k1 - k0, cnt = nk > 0 && j1 > j0 ? (j1 - j0) * nk : 0;
        const T *base = q == 0 ? sP : sA;
        for (int r = threadIdx.x; r < cnt; r += blockDim.x) {
            const int j = j0 + r / nk, k = k0 + r % nk, p = j * bk + k;
            R fr, fi;
            F_point<R, M, SHOC>(B, C, in[q], sV, 0, j, k, p, fr, fi);
            T a;
            a.x = base[p].x + wa[q] * fr;
            a.y = base[p].y + wa[q] * fi;
            if (q < 3) {
                T o;
                o.x = sP[p].x + wo[q] * fr;
                o.y = sP[p].y + wo[q] * fi;
                nx[q][p] = o;
                sA[p] = a;
            } else if (k >= lok - bk0 && k < lok - bk0 + Tk && j >= loj - bj0 &&
                       j < loj - bj0 + Tj) {
                out[(long long)(bj0 + j) * g.len + bk0 + k] = a;
                if (!(isfinite(a.x) && isfinite(a.y)))
                    atomicCAS(flags, 0, flags[1] + step);
            }
        }
        __syncthreads();
    }
}

/* ------------------------------------------------------------------ */
/* the streamed fused step (2D, 3D; periodic): 2.5D blocking along axis 0 */
/* ------------------------------------------------------------------ */

/* The grid as planes along axis 0 (the rows of a 2D grid, the (j, k)
 * planes of a 3D one).  A block owns a box of PJ x PK columns of a plane
 * (its tile widened by H = 4R on each side of each plane axis, wrapped) and
 * a chunk of planes, which it marches through in order.  Iteration `it`
 * puts plane c0 - H + it of Psi^n into Psi^n's ring of planes in shared
 * memory; stage s then evaluates plane it - s(R + G) (its load index) from
 * its ring of stage inputs, the later rings the planes that the stencil
 * reaches along axis 0, and writes the plane into the next stage's ring;
 * stage 4 writes Psi^{n+1} over the tile.  Stage s runs on the box shrunk by
 * sR in the plane and on the chunk widened by (4 - s) R along axis 0, so the
 * columns and planes beyond the tile are recomputed by the neighbouring
 * boxes and chunks (the overlapped tiles of the CPU fused step, streamed).
 *
 * 3D 2SHOC (halo 8 over four stages: a 40 x 25 box would keep a 24 x 9
 * tile) runs as two passes of two stages (PASS 1, 2), each with CD's halo
 * of 4 and its box: the first writes the accumulator and the third stage's
 * input over the tile, the second marches that input and reads Psi^n and
 * the accumulator at its points (3 + 4 values a point-step against 2, for
 * 4.8 point-stage evaluations a tile point a step against 7.9 in one pass
 * over a 32 x 32 box).
 *
 * G = 0 (2D; 3D CD in double): a stage reads the plane its
 * producer wrote in the same iteration, so there is a barrier after the
 * load and after stages 1-3.  Psi^n's ring holds at least 3R + 1 planes (as
 * far back as stage 3 reads its own column's Psi^n), the others 2R + 1.
 * G = 1 (3D CD in single precision, the 2SHOC passes; StreamLag): every
 * stage lags its
 * producer by one more plane, so that it reads only planes written in
 * earlier iterations; the four stages of an iteration are then
 * independent (the warps overlap their loads) and one barrier ends the
 * iteration.  The rings grow by G per stage (2R + 2, Psi^n's 3R + 4) and
 * the march takes 4 more iterations to drain.  GL = 1 (3D CD in double,
 * whose lagged rings do not fit): stage 1 alone lags the load by a plane,
 * which drops the barrier after the load (Psi^n's ring one plane longer,
 * 14 planes of 41 x 25 columns in 229,600 bytes).
 *
 * A thread evaluates one unit (in 3D the one stream_point gives it; a
 * column, or with PAIR two neighbouring columns along the contiguous axis):
 * its accumulator lives in a register queue of L slots, one a plane,
 * addressed by constants once the march is unrolled by L (and V, with G =
 * 0 and in the passes, in one of L >= 4R + 1 + GL slots; with G = 1 in
 * CD each stage reads V from memory).  In single precision L is a multiple of every
 * ring's length, so that the ring slots are constants too (CD: rings of 6
 * and 3 planes, L = 6; lagged CD: 8 and 4, L = 8; 2SHOC: 10 and 5, L = 10);
 * in double the rings keep their least lengths (the registers and shared
 * memory that constant slots would take cost more occupancy than the index
 * arithmetic they save).  The march's steady part (every stage's plane in
 * its chunk, the next plane to load, stage 4 storing) runs without the
 * uniform range tests; HASV: the instance with a potential (the one without
 * has no V queue, loads or tests).  Periodic grids only (no boundary
 * conditions). */
template <bool SHOC, bool DBL, bool LAG = false, bool LOADLAG = false, int PASS = 0,
          bool QR = false>
struct StreamDims {
    enum {
        RR = SHOC ? 2 : 1,
        NS = PASS ? 2 : 4, /* stages a pass evaluates */
        G = LAG ? 1 : 0,
        GL = LOADLAG ? 1 : 0,
        LP = 2 * RR + 1 + G,
        /* AS: the passes copy each plane they load into the ring AS - 1
         * iterations ahead (cp.async); LQ: PASS 2 on pairs (QR) copies
         * Psi^n and acc into rings of their own, LQ planes each */
        AS = PASS ? (DBL ? 2 : 3) : 0,
        LQ = QR ? 4 : 0,
        /* PASS 1: its last stage reads Psi^n NS (R + G) planes back with no
         * barrier before the next load (G = 0) or after the load (G = 1):
         * NS (R + G) + 2 - G planes, and AS - 1 more in flight; PASS 2: the
         * stencil's input and the planes in flight (in float as long as
         * PASS 1's ring, 12 planes, so that slots fold alike) */
        LP0 = PASS == 1 ? (DBL ? NS * (RR + G) + 1 - G + AS : (LAG ? 12 : 10))
              : PASS == 2 ? (DBL ? 2 * RR + G + AS : 12)
              : DBL ? 3 * (RR + G) + 1 + GL : (LAG ? 8 : (SHOC ? 10 : 6)),
        L = PASS ? (DBL ? 2 * (RR + G) + 1 : (LAG ? 12 : 10))
            : DBL ? (LAG ? 3 * (RR + G) + 1 : 4 * RR + 1 + GL) : (LAG ? 8 : (SHOC ? 10 : 6)),
        FOLD = !DBL, /* ring slots from the unrolled index alone */
        H = NS * RR,
        PLANES = LP0 + (NS - 1) * LP + 2 * LQ /* a block's rings */
    };
    static_assert(!(LAG && !PASS && (SHOC || DBL)), "one pass lags in CD in float only");
    static_assert(!(LOADLAG && (LAG || !DBL)), "the load's lag is written for double");
    static_assert(!(PASS && (LOADLAG || !SHOC)), "the two passes are written for 2SHOC");
};

/* the lagged march (G = 1): 3D CD in single precision (in double its longer
 * rings, 19 planes of 1024 columns, do not fit in an SM's shared memory),
 * and the two passes of 3D 2SHOC */
template <typename R, int M, bool SHOC, int PASS = 0> struct StreamLag {
    enum { ON = M == 2 && (PASS || (!SHOC && sizeof(R) == 4)) };
};

/* the ring dimensions of the k_stream<R, M, SHOC, HASV, PASS> instance */
template <typename R, int M, bool SHOC, int PASS = 0, bool PAIR = false>
using StreamDimsOf = StreamDims<SHOC, sizeof(R) == 8, StreamLag<R, M, SHOC, PASS>::ON,
                                 M == 2 && !SHOC && sizeof(R) == 8, PASS,
                                 PASS == 2 && PAIR>;

/* A block's box of columns, PK x PJ at most (3D: 40 x 25, a tile 32
 * columns wide, one block an SM; 2D: one row of 256, 128 for complex128
 * 2SHOC, narrower on a thin grid; 3D boxes down to PJ - 8 rows where fewer
 * fill the SMs better), and the ring planes' stride NP, a constant so that
 * every ring slot is an immediate offset (a smaller box keeps the full
 * stride).  3D 2SHOC runs as two passes of two stages (PASS 1, 2), whose
 * halo of 4 is CD's over four stages. */
#define STREAM_THREADS_2D 256 /* a 2D box: one row of up to 256 columns */
template <typename R, int M, bool SHOC, int PASS = 0, bool PAIR = false> struct StreamBox {
    enum {
        ONION = M == 2 && (!SHOC || PASS), /* threads on points ordered by stage count */
        PK = PAIR ? 20 : ONION ? 40 : (M == 2 ? 32 : (SHOC && sizeof(R) == 8 ? 128 : 256)),
        PJ = ONION ? 25 : (M == 2 ? 32 : 1),
        /* a ring row's pitch: stream_point */
        PP = PAIR ? 21 : ONION ? (sizeof(R) == 4 ? 49 : 41) : PK,
        NP = PP * PJ,
        /* LEAN (the passes on points): a thread a point of the pass's first
         * stage, which lie R = 2 inside the box: TK x TJ threads for a box
         * of PK x PJ columns (TRIM fewer each way), each copying one or two
         * of its columns.  A thread a column (1000 threads, 64 registers)
         * spilled more, and its threads past the frames only loaded; 756
         * threads have 80 registers.  Pairs keep a thread a column (500
         * threads, 128 registers): their 378 ran slower, with fewer warps
         * to hide the shared loads' latency. */
        LEAN = PASS && !PAIR,
        TRIM = LEAN ? 2 * 2 : 0,
        TK = PK - TRIM, TJ = PJ - TRIM,
        THREADS = M == 2 ? TK * TJ : STREAM_THREADS_2D /* a block's at most */
    };
    /* the box's columns in two copies a thread, down to stream_shape's
     * fewest rows (PJ - 8) */
    static_assert(!LEAN || 2 * TK * (TJ - 8) >= PK * (PJ - 8), "LEAN: two columns a thread");
};

/* The unit a thread loads, evaluates and stores: a complex value, or with
 * PAIR (3D complex64 2SHOC on grids of even length) two neighbours along the
 * contiguous axis in one float4, so that a stencil row takes 3 loads for 2
 * points instead of 10 and a thread's registers hold both (box widths and
 * offsets along that axis are then counted in pairs) */
template <typename R, bool PAIR> struct Unit {
    typedef typename Vec2<R>::T T;
    typedef R V;
    enum { N = 1 };
};
template <> struct Unit<float, true> {
    typedef float4 T;
    typedef float2 V;
    enum { N = 2 };
};

__device__ __forceinline__ float2 axpy(float w, float2 f, float2 b)
{
    return make_float2(fmaf(w, f.x, b.x), fmaf(w, f.y, b.y));
}
__device__ __forceinline__ double2 axpy(double w, double2 f, double2 b)
{
    return make_double2(fma(w, f.x, b.x), fma(w, f.y, b.y));
}
__device__ __forceinline__ float4 axpy(float w, float4 f, float4 b)
{
    return make_float4(fmaf(w, f.x, b.x), fmaf(w, f.y, b.y), fmaf(w, f.z, b.z),
                       fmaf(w, f.w, b.w));
}
__device__ __forceinline__ bool finite_u(float2 a) { return isfinite(a.x) && isfinite(a.y); }
__device__ __forceinline__ bool finite_u(double2 a) { return isfinite(a.x) && isfinite(a.y); }
__device__ __forceinline__ bool finite_u(float4 a)
{
    return isfinite(a.x) && isfinite(a.y) && isfinite(a.z) && isfinite(a.w);
}

/* The box point a thread of a 3D box evaluates, and how many of the NS
 * stages (CD: four; a 2SHOC pass: two) it evaluates there.  The points of
 * stage s lie at least sR from the box's edge; they are ordered by that
 * count, the tile (NS stages) first, then the frames of NS - 1, ..., 1
 * stages, so that the lanes of a warp are
 * busy in every stage it runs.  (A thread on its own box point, a warp a box
 * row, leaves 2sR lanes of the row idle in stage s, and the kernel is
 * bound by its shared-memory wavefronts.)  The box is 40 columns wide, so
 * that a tile row is one warp; a frame's sides are taken a column at a
 * time, and a ring row's pitch is odd, so that a side's rows fall in
 * distinct banks.  The order of a frame's parts (left side, bottom, top,
 * right side) and the pitch (49 for complex64, read 16 lanes a wavefront;
 * 41 for complex128, 8 lanes, whose rings must fit) give the fewest
 * wavefronts of the orders and odd pitches counted for boxes of 20-25
 * rows: 5 % over a conflict-free packing in float, against 10 % (and 16 %
 * more lane slots) for a warp a box row.  Threads past the frames only
 * load.  R: a stage's reach in rows, RX in units across (R, or R / 2 for
 * pairs). */
__device__ __forceinline__ void stream_point(int t, int PK, int PJ, int RX, int R, int NS, int *y,
                                             int *x, int *n)
{
    const int a4 = NS * R, b4 = NS * RX, w4 = PK - 2 * b4, h4 = PJ - 2 * a4;
    if (t < w4 * h4) {
        *y = a4 + t / w4;
        *x = b4 + t % w4;
        *n = NS;
        return;
    }
    t -= w4 * h4;
    for (int l = NS - 1; l >= 1; --l) {
        const int a = l * R, b = l * RX, w = PK - 2 * b, h = PJ - 2 * a, strip = R * w;
        const int hs = h - 2 * R, side = hs * 2 * RX; /* the sides' rows, points */
        if (t < 2 * strip + side) { /* left side, bottom rows, top rows, right side */
            *n = l;
            if (t < side / 2) { /* the sides a column at a time */
                *y = a + R + t % hs;
                *x = b + t / hs;
            } else if (t < side / 2 + 2 * strip) {
                const int m = t - side / 2, c = m < strip;
                *y = (c ? PJ - a - R : a) + (c ? m : m - strip) / w;
                *x = b + (c ? m : m - strip) % w;
            } else {
                const int m = t - side / 2 - 2 * strip;
                *y = a + R + m % hs;
                *x = PK - b - RX + m / hs;
            }
            return;
        }
        t -= 2 * strip + side;
    }
    *y = 0;
    *x = 0;
    *n = 0;
}

/* a * b + c rounded once: the streamed kernel contracts its sums (fewer
 * instructions; it agrees with the staged stages to rounding, not to the
 * bit) */
template <typename R> __device__ __forceinline__ R fmar(R a, R b, R c)
{
    if constexpr (sizeof(R) == 4)
        return fmaf(a, b, c);
    else
        return fma(a, b, c);
}

/* A 2SHOC column's planes q - 2, q - 1, q + 1, q + 2 (a, b, d, e) from ring
 * slots sl[0, 1, 3, 4] of `y`, or with `held` a, b from the window `win`
 * (planes q - 2 .. q + 1 of the last plane); the window is left holding
 * q - 1 .. q + 2 (c: the centre) for the next plane. */
template <typename T>
__device__ __forceinline__ void planes4(const T *y, int t, const int *sl, int NP, const T &c,
                                        T *win, bool held, T &a, T &b, T &d, T &e)
{
    if (held) {
        a = win[0];
        b = win[1];
        d = win[3];
    } else {
        a = y[sl[0] * NP + t];
        b = y[sl[1] * NP + t];
        d = y[sl[3] * NP + t];
    }
    e = y[sl[4] * NP + t];
    if (win) {
        win[0] = b;
        win[1] = c;
        win[2] = d;
        win[3] = e;
    }
}

/* F at column t of a plane whose rows q - RR .. q + RR sit in ring slots
 * sl[0 .. 2 RR] of `y` (planes NP apart, rows PK apart); the Laplacian
 * summed in k_stage's order (contiguous axis, axis 0, axis 1), each term
 * h^-2 (sum of neighbours - 2 centre) or its 2SHOC form, contracted */
template <typename R, int M, bool SHOC, int PASS = 0>
__device__ __forceinline__ void stream_F(const typename Vec2<R>::T *y, int t, const int *sl,
                                         const DCoef<R> &C, R v, R &fr, R &fi,
                                         typename Vec2<R>::T &c, typename Vec2<R>::T *win = NULL,
                                         bool held = false)
{
    typedef typename Vec2<R>::T T;
    typedef StreamBox<R, M, SHOC, PASS> B;
    const int RR = StreamDims<SHOC, true>::RR, NP = B::NP, PK = B::PP;
    const T *cp = y + sl[RR] * NP + t;
    /* win: this column's values at the 2 RR planes from q - RR up to the
     * plane before q + RR, held from the last plane (held) and left for the
     * next, so that a held plane reads one plane of its own column, not
     * 2 RR + 1 */
    c = held ? win[RR] : cp[0];
    /* the stream axis is axis 0: i in 3D (1/h_i^2), j in 2D (1/h_j^2) */
    const R ih0 = M == 2 ? C.ihi : C.ihj;
    R r, i;
    if (!SHOC) {
        const R mx = -2 * c.x, my = -2 * c.y;
        const T a = cp[-1], b = cp[1];
        r = C.ihk * ((a.x + b.x) + mx);
        i = C.ihk * ((a.y + b.y) + my);
        const T u = held ? win[0] : y[sl[0] * NP + t], w = y[sl[2] * NP + t];
        if (win) {
            win[0] = c;
            win[1] = w;
        }
        r = fmar(ih0, (u.x + w.x) + mx, r);
        i = fmar(ih0, (u.y + w.y) + my, i);
        if (M == 2) {
            const T e = cp[-PK], f = cp[PK];
            r = fmar(C.ihj, (e.x + f.x) + mx, r);
            i = fmar(C.ihj, (e.y + f.y) + my, i);
        }
    } else {
        /* (16 (b + d) - (a + e) - 30 c) / 12 */
        const R tw = (R)1 / 12, mx = -30 * c.x, my = -30 * c.y;
        T a = cp[-2], b = cp[-1], d = cp[1], e = cp[2];
        r = (C.ihk * tw) * (fmar((R)16, b.x + d.x, mx) - (a.x + e.x));
        i = (C.ihk * tw) * (fmar((R)16, b.y + d.y, my) - (a.y + e.y));
        planes4(y, t, sl, NP, c, win, held, a, b, d, e);
        r = fmar(ih0 * tw, fmar((R)16, b.x + d.x, mx) - (a.x + e.x), r);
        i = fmar(ih0 * tw, fmar((R)16, b.y + d.y, my) - (a.y + e.y), i);
        if (M == 2) {
            a = cp[-2 * PK], b = cp[-PK], d = cp[PK], e = cp[2 * PK];
            r = fmar(C.ihj * tw, fmar((R)16, b.x + d.x, mx) - (a.x + e.x), r);
            i = fmar(C.ihj * tw, fmar((R)16, b.y + d.y, my) - (a.y + e.y), i);
        }
    }
    const R n = fmar(C.s, fmar(c.x, c.x, c.y * c.y), -v);
    fr = -fmar(C.a, i, n * c.y);
    fi = fmar(C.a, r, n * c.x);
}

/* stream_F for a pair (c.xy, c.zw) of neighbours along the contiguous axis,
 * 2SHOC in complex64: the pairs left and right give the four neighbours of
 * each; F and the potential are pairs too (same sums, same order) */
template <int M, int PASS>
__device__ __forceinline__ void stream_F_pair(const float4 *y, int t, const int *sl,
                                              const DCoef<float> &C, float2 v, float4 &F,
                                              float4 &c, float4 *win, bool held)
{
    typedef StreamBox<float, M, true, PASS, true> B;
    const int NP = B::NP, PK = B::PP;
    const float4 *cp = y + sl[2] * NP + t;
    c = held ? win[2] : cp[0];
    const float tw = 1.0f / 12, kk = C.ihk * tw, k0 = (M == 2 ? C.ihi : C.ihj) * tw,
                kj = C.ihj * tw;
    const float ax = -30 * c.x, ay = -30 * c.y, bx = -30 * c.z, by = -30 * c.w;
    const float4 l = cp[-1], r = cp[1];
    /* A = c.xy: k-2 l.xy, k-1 l.zw, k+1 c.zw, k+2 r.xy; B = c.zw: k-2 l.zw,
     * k-1 c.xy, k+1 r.xy, k+2 r.zw */
    float ar = kk * (fmaf(16.f, l.z + c.z, ax) - (l.x + r.x));
    float ai = kk * (fmaf(16.f, l.w + c.w, ay) - (l.y + r.y));
    float br = kk * (fmaf(16.f, c.x + r.x, bx) - (l.z + r.z));
    float bi = kk * (fmaf(16.f, c.y + r.y, by) - (l.w + r.w));
    float4 a, b, d, e;
    planes4(y, t, sl, NP, c, win, held, a, b, d, e);
    ar = fmaf(k0, fmaf(16.f, b.x + d.x, ax) - (a.x + e.x), ar);
    ai = fmaf(k0, fmaf(16.f, b.y + d.y, ay) - (a.y + e.y), ai);
    br = fmaf(k0, fmaf(16.f, b.z + d.z, bx) - (a.z + e.z), br);
    bi = fmaf(k0, fmaf(16.f, b.w + d.w, by) - (a.w + e.w), bi);
    if (M == 2) {
        a = cp[-2 * PK], b = cp[-PK], d = cp[PK], e = cp[2 * PK];
        ar = fmaf(kj, fmaf(16.f, b.x + d.x, ax) - (a.x + e.x), ar);
        ai = fmaf(kj, fmaf(16.f, b.y + d.y, ay) - (a.y + e.y), ai);
        br = fmaf(kj, fmaf(16.f, b.z + d.z, bx) - (a.z + e.z), br);
        bi = fmaf(kj, fmaf(16.f, b.w + d.w, by) - (a.w + e.w), bi);
    }
    const float na = fmaf(C.s, fmaf(c.x, c.x, c.y * c.y), -v.x);
    const float nb = fmaf(C.s, fmaf(c.z, c.z, c.w * c.w), -v.y);
    F.x = -fmaf(C.a, ai, na * c.y);
    F.y = fmaf(C.a, ar, na * c.x);
    F.z = -fmaf(C.a, bi, nb * c.w);
    F.w = fmaf(C.a, br, nb * c.z);
}

/* an asynchronous copy of one unit (8 or 16 bytes) from global into shared
 * memory, its group's commit and the wait for all but the newest N groups */
template <typename T> __device__ __forceinline__ void copy_async(T *dst, const T *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if constexpr (sizeof(T) == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(d), "l"(src),
                     "n"((int)sizeof(T)));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void copy_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* F of a unit: one point (stream_F) or a pair (stream_F_pair) */
template <typename R, int M, bool SHOC, int PASS, bool PAIR>
__device__ __forceinline__ void stream_F_unit(const typename Unit<R, PAIR>::T *y, int t,
                                              const int *sl, const DCoef<R> &C,
                                              typename Unit<R, PAIR>::V v,
                                              typename Unit<R, PAIR>::T &F,
                                              typename Unit<R, PAIR>::T &c,
                                              typename Unit<R, PAIR>::T *win, bool held)
{
    if constexpr (PAIR)
        stream_F_pair<M, PASS>(y, t, sl, C, v, F, c, win, held);
    else
        stream_F<R, M, SHOC, PASS>(y, t, sl, C, v, F.x, F.y, c, win, held);
}

/* PASS 0: the four stages, Psi^n from `psi`, Psi^{n+1} to `out`.  The two
 * passes of 3D 2SHOC: PASS 1 runs stages 1-2 on Psi^n (`psi`) and writes
 * over the tile acc = Psi^n + dt/6 F1 + dt/3 F2 (`out`) and the third
 * stage's input Psi^n + dt/2 F2 (`out2`); PASS 2 runs stages 3-4 on that
 * input (`psi`), Psi^n (`psin`) and acc (`acca`) read at the points where
 * stage 3 needs them, and writes Psi^{n+1} (`out`). */
template <typename R, int M, bool SHOC, bool HASV, int PASS, bool PAIR = false>
__global__ void __launch_bounds__(StreamBox<R, M, SHOC, PASS, PAIR>::THREADS,
                                  M == 2 ? 1 : (SHOC ? (sizeof(R) == 4 ? 4 : 2) : 4))
k_stream(DGeom g, DCoef<R> C, const typename Unit<R, PAIR>::T *__restrict__ psi,
         typename Unit<R, PAIR>::T *__restrict__ out, typename Unit<R, PAIR>::T *__restrict__ out2,
         const typename Unit<R, PAIR>::T *__restrict__ psin,
         const typename Unit<R, PAIR>::T *__restrict__ acca,
         const typename Unit<R, PAIR>::V *__restrict__ V, R dt, int chunk, int step, int *flags)
{
    typedef typename Unit<R, PAIR>::T T; /* a unit: a point or a pair */
    typedef typename Unit<R, PAIR>::V VU;
    typedef StreamDimsOf<R, M, SHOC, PASS, PAIR> D;
    typedef StreamBox<R, M, SHOC, PASS, PAIR> B;
    const int RR = D::RR, NS = D::NS, G = D::G, GL = D::GL, LP = D::LP, LP0 = D::LP0, L = D::L;
    const int H = D::H, S0 = PASS == 2 ? 2 : 0; /* S0: the step's index of stage 0 */
    /* across the contiguous axis in units: a stage's reach, the halo */
    const int UN = Unit<R, PAIR>::N, RX = RR / UN, HX = H / UN;
    static_assert(RR % UN == 0, "a pair's stages reach whole pairs");
    const int NP = B::NP;
    const int K = 4 * LP0 * LP;
    auto slot = [](int x, int n) { return (int)((unsigned)x % (unsigned)n); };
    extern __shared__ __align__(16) unsigned char stream_smem[];
    __shared__ int stop;
    if (threadIdx.x == 0 && threadIdx.y == 0)
        stop = flags[0];
    __syncthreads();
    if (stop) /* an earlier step blew up */
        return;
    /* the box: PK x PJ columns (a 2D box may be narrower than B::PK, a 3D
     * box have fewer rows than B::PJ; the ring planes' stride stays NP) */
    constexpr bool LEAN = B::LEAN;
    const int PK = M == 2 ? (int)B::PK : (int)blockDim.x,
              PJ = M == 2 ? (int)blockDim.y + (int)B::TRIM : 1;
    static_assert(B::TRIM == (LEAN ? 2 * RR : 0), "LEAN: the first stage's points");
    const int NT = blockDim.x * blockDim.y, tt = threadIdx.y * blockDim.x + threadIdx.x;
    /* the box column this thread loads (LEAN: and tt + NT, where two) */
    const int ty = LEAN ? tt / PK : threadIdx.y, tx = LEAN ? tt % PK : threadIdx.x;
    const int t2 = tt + NT, two = LEAN && t2 < PK * PJ, ty2 = t2 / PK, tx2 = t2 % PK;
    const int ns = M == 2 ? g.n0 : g.n1, nj = M == 2 ? g.n1 : 1, len = g.len / UN;
    const long long plane = (long long)nj * len;
    const int k0 = blockIdx.x * (PK - 2 * HX), j0 = M == 2 ? blockIdx.y * (PJ - 2 * H) : 0;
    /* the point this thread loads (tl) and the one it evaluates (t) */
    const int tl = ty * (int)B::PP + tx;
    int cy = ty, cx = tx, nst = NS;
    if (B::ONION)
        stream_point(tt, PK, PJ, RX, RR, NS, &cy, &cx, &nst);
    const int t = cy * (int)B::PP + cx;
    const long long col = (long long)(M == 2 ? wrapi(j0 - H + ty, nj) : 0) * len +
                          wrapi(k0 - HX + tx, len);
    const long long col2 = two ? (long long)wrapi(j0 - H + ty2, nj) * len +
                                     wrapi(k0 - HX + tx2, len) - col
                               : 0;
    const int tl2 = ty2 * (int)B::PP + tx2;
    static_assert(!LEAN || (M == 2 && D::AS), "LEAN: the passes' copies");
    const long long cc = (long long)(M == 2 ? wrapi(j0 - H + cy, nj) : 0) * len +
                         wrapi(k0 - HX + cx, len);
    const int c0 = blockIdx.z * chunk, nc = min(chunk, ns - c0), nit = nc + 2 * H;
    /* in the box shrunk by sR (stage s = 1..NS) */
    bool in[NS];
#pragma unroll
    for (int s = 0; s < NS; ++s) {
        const int e = (s + 1) * RR, ex = (s + 1) * RX;
        in[s] = s < nst && cx >= ex && cx < PK - ex && (M < 2 || (cy >= e && cy < PJ - e));
    }
    /* the last stage writes the tile's columns inside the grid */
    const bool mine = in[NS - 1] && cx < PK - HX && k0 + cx - HX < len &&
                      (M < 2 || (cy < PJ - H && j0 + cy - H < nj));
    /* the stage inputs: stage 0's (LP0 planes; Psi^n but in PASS 2), then
     * the next inputs (LP) */
    T *ring[NS];
    ring[0] = (T *)stream_smem;
#pragma unroll
    for (int s = 1; s < NS; ++s)
        ring[s] = ring[0] + (LP0 + (s - 1) * LP) * NP;
    const R wa[4] = {dt / 6, dt / 3, dt / 3, dt / 6};
    const R wo[3] = {dt / 2, dt / 2, dt};
    /* VQ: V in a register queue, loaded with the plane (the lagged CD
     * march reads it from memory in each stage) */
    constexpr bool VQ = !G || PASS;
    T accq[L];
    VU vq[VQ ? L : 1];
    /* WIN: each stage keeps its column's latest planes in registers, so
     * that a steady plane reads one plane of its own column (the march
     * moves every stage a plane an iteration), not five.  WM: the stages
     * that keep one (bit s: stage s).  Where the registers spill the
     * window costs more than the reads it saves: the passes on pairs with
     * a potential keep none (128 registers), and the passes in double (80,
     * LEAN) only the first stage's, without a potential. */
    constexpr int WM = (G && !SHOC) || (PASS && sizeof(R) == 4 && !(PAIR && HASV)) ? 3
                       : PASS && !HASV ? 1
                                       : 0;
    constexpr bool WIN = WM != 0;
    T win[NS][2 * RR];
    /* the plane about to be stored: loaded one iteration ahead */
    int row = wrapi(c0 - H, ns);
    const T *pp = psi + row * plane + col;
    const VU *vp = HASV && VQ ? V + row * plane + cc : NULL;
    /* AS: the passes copy the planes they load into the ring AS - 1
     * iterations ahead (cp.async, the cursor ap), not through a register
     * (pre, the cursor pp): the ring of Psi holds the planes in flight too */
    constexpr int AS = D::AS;
    static_assert(!AS || LP0 - AS + 1 > (PASS == 1 ? NS * (RR + G) : 2 * RR + G),
                  "a plane in flight overwrites none still read");
    T pre = {};
    if (!AS)
        pre = *pp;
    int arow = row;
    const T *ap = pp;
    auto copy_next = [&](const int sl) {
        copy_async(&ring[0][sl * NP + tl], ap);
        if (LEAN && two)
            copy_async(&ring[0][sl * NP + tl2], ap + col2);
        ap += ++arow == ns ? (arow = 0, -(ns - 1) * plane) : plane;
    };
    VU vpre = {};
    if (HASV && VQ)
        vpre = *vp;
    /* The passes ask for the planes they will load DP iterations ahead
     * into L1 (an iteration is shorter than a load's latency; registers
     * held across the march would spill): Psi (and V) at the load, and in
     * PASS 2 Psi^n and acc at stage 0's plane (load index it - R - G), the
     * latter at least one iteration ahead (DP = 0 in double: asking further
     * ahead there slowed the march with a potential). */
    constexpr int DP = PASS && sizeof(R) == 4 ? 3 : 0;
    int qrow = row;
    long long qoff = row * plane;
    auto load_ahead = [&]() {
        qoff += ++qrow == ns ? (qrow = 0, -(ns - 1) * plane) : plane;
        if (!AS)
            asm volatile("prefetch.global.L1 [%0];" ::"l"(psi + qoff + col));
        if (HASV && VQ)
            asm volatile("prefetch.global.L1 [%0];" ::"l"(V + qoff + cc));
    };
    int prow = wrapn(c0 - H - RR - G, ns), frow = prow;
    long long poff = prow * plane + cc, foff = poff;
    /* LQ: PASS 2 on pairs copies Psi^n and acc at its points into rings of
     * their own (LQ planes: the one read, R + G planes back, and AS in
     * flight), the plane read at `it` copied at it - AS */
    constexpr int LQ = D::LQ, RG = RR + G;
    static_assert(!LQ || (AS && LQ >= AS + 1), "the rings of Psi^n and acc");
    T *const pnr = ring[0] + (LP0 + (NS - 1) * LP) * NP, *const acr = pnr + LQ * NP;
    int crow = wrapn(c0 - H + AS - RG, ns);
    long long coff = crow * plane + cc;
    auto ahead = [&]() {
        foff += ++frow == ns ? (frow = 0, -(ns - 1) * plane) : plane;
        if (in[0])
            asm volatile("prefetch.global.L1 [%0];" ::"l"(psin + foff));
        if (in[NS - 1])
            asm volatile("prefetch.global.L1 [%0];" ::"l"(acca + foff));
    };
#pragma unroll
    for (int d = 0; d < DP; ++d) {
        load_ahead();
        if (PASS == 2 && !LQ)
            ahead();
    }
#pragma unroll
    for (int d = 0; d + 1 < AS; ++d) {
        if (d < nit)
            copy_next(d % LP0);
        copy_commit();
    }
    T *op = out + (long long)c0 * plane + cc; /* the last stage's next plane */
    T *op2 = PASS == 1 ? out2 + (long long)c0 * plane + cc : NULL;
    const int ntot = nit + NS * G + GL; /* the lagged stages drain */
    /* iteration `it` at unrolled slot u; with S (the steady march: every
     * stage's plane inside its chunk, the next plane still to load, the
     * last stage storing) the uniform range tests are known true and
     * dropped */
    auto iter = [&](auto S, const int it, const int u) {
        constexpr bool STEADY = decltype(S)::value;
        /* ring slot = (rel - offset) % length, rel - offset >= 0: unsigned
         * remainders by constants (K a multiple of every ring's length) */
        const int rel = D::FOLD ? u + 2 * L : it + K;
        if constexpr (AS != 0) {
            if (STEADY || it + AS - 1 < nit)
                copy_next(slot(rel + AS - 1, LP0));
            if constexpr (LQ != 0) {
                const int qs = slot(rel + AS - RG, LQ) * NP + t;
                if (in[0])
                    copy_async(pnr + qs, psin + coff);
                if (in[NS - 1])
                    copy_async(acr + qs, acca + coff);
                coff += ++crow == ns ? (crow = 0, -(ns - 1) * plane) : plane;
            }
            copy_commit();
        }
        if (STEADY || it < nit) {
            if (!AS)
                ring[0][slot(rel, LP0) * NP + tl] = pre;
            if constexpr (VQ)
                vq[u] = vpre;
            if (STEADY || it + 1 < nit) {
                const long long to = ++row == ns ? (row = 0, -(ns - 1) * plane) : plane;
                if (!AS)
                    pre = *(pp += to);
                if (DP)
                    load_ahead();
                if (HASV && VQ) {
                    vp += to;
                    vpre = *vp;
                }
            }
        }
        T pn = {}, aa = {};
        if (PASS == 2 && LQ) {
            const int qs = slot(rel - RG, LQ) * NP + t;
            if (in[0])
                pn = pnr[qs];
            if (in[NS - 1])
                aa = acr[qs];
        } else if (PASS == 2) {
            if (in[0])
                pn = psin[poff];
            if (in[NS - 1])
                aa = acca[poff];
            poff += ++prow == ns ? (prow = 0, -(ns - 1) * plane) : plane;
            ahead();
        }
        if (!G && !GL)
            __syncthreads();
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            const int back = (s + 1) * (RR + G) + GL; /* load index ls = it - back */
            const int ls = it - back, q = (u - back + 2 * L) % L; /* its queue slot */
            if ((STEADY || (ls >= (s + 1) * RR && ls < nit - (s + 1) * RR)) && in[s]) {
                const int lp = s == 0 ? LP0 : LP;
                int sl[2 * RR + 1];
#pragma unroll
                for (int d = 0; d <= 2 * RR; ++d)
                    sl[d] = slot(rel - back - RR + d, lp);
                VU v = {};
                if constexpr (!VQ) {
                    if (HASV)
                        v = V[(long long)wrapn(c0 - H + ls, ns) * plane + cc];
                } else {
                    v = vq[q];
                }
                T F, cen;
                stream_F_unit<R, M, SHOC, PASS, PAIR>(ring[s], t, sl, C, v, F, cen,
                                                      (WM >> s) & 1 ? win[s] : NULL,
                                                      ((WM >> s) & 1) && STEADY);
                /* Psi^n here, and the accumulator this stage adds to */
                const T p0 = PASS == 2 ? pn
                             : s == 0  ? cen
                                       : ring[0][slot(rel - back, LP0) * NP + t];
                const T b = s > 0 ? accq[q] : PASS == 2 ? aa : p0;
                const T a = axpy(wa[S0 + s], F, b);
                accq[q] = a;
                if (s < NS - 1 || PASS == 1) {
                    const T o = axpy(wo[S0 + s], F, p0);
                    if (s < NS - 1) {
                        ring[s + 1][slot(rel - back, LP) * NP + t] = o;
                    } else if (mine) {
                        *op = a;
                        *op2 = o;
                    }
                } else if (mine) {
                    *op = a;
                    if (!finite_u(a))
                        atomicCAS(flags, 0, flags[1] + step);
                }
            }
            if (!G && s < NS - 1)
                __syncthreads();
        }
        if constexpr (AS != 0)
            copy_wait<AS - 1>(); /* plane it is in the ring */
        if (G)
            __syncthreads();
        if (STEADY || it - NS * (RR + G) - GL >= H) {
            op += plane;
            if (PASS == 1)
                op2 += plane;
        }
    };
    /* steady from the first iteration at which the last stage evaluates a
     * plane (NS (2R + G); with WIN one later, so that every stage's window
     * is held) to the last that loads one ahead (nit - 2; with AS, AS - 1
     * ahead) */
    const int lo = NS * (2 * RR + G) + GL + (WIN ? 1 : 0), hi = nit - (AS ? AS - 1 : 1);
    for (int base = 0; base < ntot; base += L) {
        if (base >= lo && base + L <= hi) {
#pragma unroll
            for (int u = 0; u < L; ++u)
                iter(std::true_type(), base + u, u);
        } else {
#pragma unroll
            for (int u = 0; u < L; ++u)
                if (base + u < ntot) /* uniform: the barriers inside are safe */
                    iter(std::false_type(), base + u, u);
        }
    }
}

/* Tile of the fused kernel (points along axis 0, along the contiguous axis)
 * and its shared memory; 0 bytes when the box does not fit in a block's. */
static size_t fused_shape(const nlse_fd *s, int *tj, int *tk)
{
    const int H = 4 * nlse_fd_reach(s->p.scheme, s->p.bc), per = s->g.periodic;
    const size_t c = 2 * s->real_size;
    if (s->g.m == 0) {
        *tj = 1;
        *tk = 1024;
    } else {
        *tj = 32;
        *tk = 32;
    }
    size_t bj = s->g.m ? (size_t)*tj + 2 * H : 1, bk = (size_t)*tk + 2 * H;
    if (!per) {
        bj = s->g.m && bj > (size_t)s->dg.n1 ? (size_t)s->dg.n1 : bj;
        bk = bk > (size_t)s->dg.len ? (size_t)s->dg.len : bk;
    }
    size_t bytes = bj * bk * (4 * c + (s->V ? s->real_size : 0));
    return bytes <= s->smem ? bytes : 0;
}

/* The streamed kernel's launch: a block a box of bj x bk columns (units
 * across) of a plane and a chunk of `chunk` planes along axis 0, `bytes` of
 * shared memory for its rings; `block` its threads (the box, or LEAN the
 * points of a pass's first stage). */
struct StreamLaunch {
    dim3 grid, block;
    int bj, bk, chunk, H, unit; /* unit: points a thread's unit holds across */
    size_t bytes;
};

typedef void (*enqueue_fn)(nlse_fd *, int);

/* What the host needs of one k_stream instance: its box (StreamBox: columns
 * across, the ring planes' stride), its rings' planes and halo (StreamDims),
 * the launch of its steps, and the call that allows it `bytes` of shared
 * memory (outside any graph capture) and, given `fit`, counts its blocks of
 * `threads` resident on one multiprocessor. */
struct StreamOps {
    int pk, pj, np, planes, H, unit; /* unit: points a thread's unit holds across */
    int trim; /* the box's columns and rows a block has no thread for (LEAN) */
    enqueue_fn enqueue;
    int (*allow)(size_t bytes, int threads, int *fit);
};

static StreamOps stream_ops(const nlse_fd *s);

/* Blocks of k_stream resident on one multiprocessor (the occupancy of the
 * compiled kernel: its registers, threads and shared memory), asked once:
 * the threads and bytes follow from the solver's shape, dtype and scheme. */
static int stream_per_sm(const nlse_fd *s, const StreamOps &o, int threads, size_t bytes)
{
    nlse_fd *w = (nlse_fd *)s; /* a cache of the device's answer */
    if (!w->stream_fit) {
        int n = 0;
        if (o.allow(bytes, threads, &n) != NLSE_OK) {
            cudaGetLastError();
            n = 1;
        }
        w->stream_fit = n > 0 ? n : 1;
    }
    return w->stream_fit;
}

/* The streamed kernel's launch for this grid (both passes of 3D 2SHOC);
 * 0 where it does not run: closed edges, 1D, rings beyond the device's
 * shared memory a block (s->smem), and launch grids beyond the device's
 * limits.  The box rows (3D: PJ down to PJ - 8) and the chunk
 * are those that end soonest: waves of resident blocks times the work of a
 * block, its rows times the planes it marches (its chunk and 2H more),
 * chunks of at least 4H planes.  At 256^3 in CD (tiles 32 columns wide)
 * 24 rows give 8 x 16 = 128 boxes, one wave on 132 multiprocessors. */
static size_t stream_shape(const nlse_fd *s, StreamLaunch *L)
{
    const int m = s->g.m;
    if (!s->g.periodic || m < 1)
        return 0;
    const StreamOps o = stream_ops(s);
    const int H = o.H;
    int pk = o.pk, pj = o.pj;
    if (m == 1) {
        const int need = (s->dg.len + 2 * H + 31) / 32 * 32; /* a thin grid: a narrower box */
        pk = need < pk ? need : pk;
    }
    const size_t bytes = (size_t)o.planes * o.np * 2 * s->real_size * o.unit;
    if (bytes > s->smem)
        return 0;
    const int ns = m == 2 ? s->dg.n0 : s->dg.n1, wide = pk * o.unit; /* the box in points */
    const long tk = (s->dg.len + wide - 2 * H - 1) / (wide - 2 * H);
    const int least = ns < 4 * H ? ns : 4 * H;
    int c = ns, rows = pj;
    long tj = 1;
    double best = -1;
    for (int r = pj; r >= (m == 2 ? pj - 8 : pj); --r) {
        const long tr = m == 2 ? (s->dg.n1 + r - 2 * H - 1) / (r - 2 * H) : 1;
        const int threads = (pk - o.trim) * (r - o.trim);
        const long resident = (long)stream_per_sm(s, o, threads, bytes) * s->sms;
        for (int n = 1; n <= ns; ++n) {
            const int cn = (ns + n - 1) / n;
            if (cn < least)
                break;
            if (n > 1 && cn == (ns + n - 2) / (n - 1))
                continue; /* the same chunk as n - 1 */
            const long blocks = tk * tr * ((ns + cn - 1) / cn);
            const double cost =
                (double)((blocks + resident - 1) / resident) * r * (cn + 2 * H);
            if (best < 0 || cost < best) {
                best = cost;
                c = cn;
                rows = r;
                tj = tr;
            }
        }
    }
    pj = rows;
    const int chunks = (ns + c - 1) / c;
    if (tj > 65535 || chunks > 65535) /* the launch grid's y and z limits */
        return 0;
    L->grid = dim3((unsigned)tk, (unsigned)tj, (unsigned)chunks);
    L->block = dim3(pk - o.trim, pj - o.trim, 1);
    L->bj = pj;
    L->bk = pk;
    L->chunk = c;
    L->H = H;
    L->unit = o.unit;
    L->bytes = bytes;
    return bytes;
}

/* The form the next steps run: 0 the staged stages, 1 the box kernel
 * (k_fused: 1D and 2D, any edges), 2 the streamed kernel (k_stream: 2D and
 * 3D, periodic).  `fused=True` takes the streamed kernel where it runs, else
 * the box kernel where its box fits.  "auto" takes the streamed kernel
 * wherever it runs (bench/fd.py --forms: it is the faster form in 2D and
 * 3D, both schemes and dtypes, with a potential or without, on pairs and on
 * points), the staged stages elsewhere. */
static int fused_form(const nlse_fd *s)
{
    int tj, tk;
    StreamLaunch sl;
    if (s->kernel == NLSE_FD_STAGED)
        return 0;
    if (stream_shape(s, &sl))
        return 2;
    if (s->g.m > 1 || s->kernel != NLSE_FD_FUSED || !fused_shape(s, &tj, &tk))
        return 0;
    return (s->dg.n1 + tj - 1) / tj <= 65535 ? 1 : 0; /* the launch grid's y limit */
}

static int fused_on(const nlse_fd *s) { return fused_form(s) != 0; }

/* 3D 2SHOC runs two passes a step (PASS 1, 2); the rest the four stages */
template <int M, bool SHOC> struct StreamPasses {
    enum { TWO = M == 2 && SHOC };
};

template <typename R, int M, bool SHOC, bool HASV, bool PAIR>
static void launch_stream(nlse_fd *s, const StreamLaunch &sl, const DCoef<R> &C, int step)
{
    typedef typename Unit<R, PAIR>::T T;
    typedef typename Unit<R, PAIR>::V VU;
    T *psi = (T *)s->psi, *acc = (T *)s->acc, *ta = (T *)s->ta, *tb = (T *)s->tb;
    const VU *V = HASV ? (const VU *)s->V : NULL;
    const R dt = (R)s->g.dt;
    if constexpr (StreamPasses<M, SHOC>::TWO) {
        k_stream<R, M, SHOC, HASV, 1, PAIR><<<sl.grid, sl.block, sl.bytes, s->stream>>>(
            s->dg, C, psi, ta, tb, NULL, NULL, V, dt, sl.chunk, step, s->flags);
        k_stream<R, M, SHOC, HASV, 2, PAIR><<<sl.grid, sl.block, sl.bytes, s->stream>>>(
            s->dg, C, tb, acc, NULL, psi, ta, V, dt, sl.chunk, step, s->flags);
    } else {
        k_stream<R, M, SHOC, HASV, 0><<<sl.grid, sl.block, sl.bytes, s->stream>>>(
            s->dg, C, psi, acc, NULL, NULL, NULL, V, dt, sl.chunk, step, s->flags);
    }
}

template <typename R, int M, bool SHOC, bool PAIR>
static void enqueue_stream(nlse_fd *s, int nsteps)
{
    StreamLaunch sl;
    stream_shape(s, &sl);
    const DCoef<R> C = coef_of<R>(s->g);
    for (int n = 0; n < nsteps; ++n) {
        void *psi = s->psi;
        if (s->V)
            launch_stream<R, M, SHOC, true, PAIR>(s, sl, C, n + 1);
        else
            launch_stream<R, M, SHOC, false, PAIR>(s, sl, C, n + 1);
        s->psi = s->acc;
        s->acc = psi;
    }
}

/* one instance: with (HASV) or without a potential, one pass */
template <typename R, int M, bool SHOC, bool HASV, int PASS, bool PAIR>
static int stream_allow_one(size_t bytes, int threads, int *fit)
{
    int st = nlse_cuda_check(cudaFuncSetAttribute(k_stream<R, M, SHOC, HASV, PASS, PAIR>,
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  (int)bytes),
                             "cudaFuncSetAttribute");
    if (st || !fit)
        return st;
    return nlse_cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                               fit, k_stream<R, M, SHOC, HASV, PASS, PAIR>, threads, bytes),
                           "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
}

/* both instances of one pass (a potential may be given later); `fit` the
 * fewer */
template <typename R, int M, bool SHOC, int PASS, bool PAIR>
static int stream_allow_pass(size_t bytes, int threads, int *fit)
{
    int a = 0, b = 0;
    int st = stream_allow_one<R, M, SHOC, true, PASS, PAIR>(bytes, threads, fit ? &a : NULL);
    if (!st)
        st = stream_allow_one<R, M, SHOC, false, PASS, PAIR>(bytes, threads, fit ? &b : NULL);
    if (!st && fit)
        *fit = a < b ? a : b;
    return st;
}

/* every pass a step launches; `fit` the fewest */
template <typename R, int M, bool SHOC, bool PAIR>
static int stream_allow(size_t bytes, int threads, int *fit)
{
    if constexpr (StreamPasses<M, SHOC>::TWO) {
        int a = 0, b = 0;
        int st = stream_allow_pass<R, M, SHOC, 1, PAIR>(bytes, threads, fit ? &a : NULL);
        if (!st)
            st = stream_allow_pass<R, M, SHOC, 2, PAIR>(bytes, threads, fit ? &b : NULL);
        if (!st && fit)
            *fit = a < b ? a : b;
        return st;
    } else {
        return stream_allow_pass<R, M, SHOC, 0, PAIR>(bytes, threads, fit);
    }
}

template <typename R, int M, bool SHOC, bool PAIR = false> static StreamOps stream_ops_of()
{
    constexpr int P = StreamPasses<M, SHOC>::TWO ? 1 : 0;
    typedef StreamBox<R, M, SHOC, P, PAIR> B;
    typedef StreamDimsOf<R, M, SHOC, P, PAIR> D;
    typedef StreamDimsOf<R, M, SHOC, 2 * P, PAIR> D2; /* PASS 2's rings (P = 1) */
    constexpr int planes = (int)D::PLANES > (int)D2::PLANES ? (int)D::PLANES : (int)D2::PLANES;
    return {B::PK, B::PJ, B::NP, planes, D::H, Unit<R, PAIR>::N, B::TRIM,
            enqueue_stream<R, M, SHOC, PAIR>, stream_allow<R, M, SHOC, PAIR>};
}

/* The k_stream instances of this solver's dtype, line axes and scheme. */
static StreamOps stream_ops(const nlse_fd *s)
{
    const int shoc = s->p.scheme == NLSE_FD_2SHOC, c64 = s->p.dtype == NLSE_COMPLEX64;
    if (s->g.m == 1)
        return c64 ? (shoc ? stream_ops_of<float, 1, true>() : stream_ops_of<float, 1, false>())
                   : (shoc ? stream_ops_of<double, 1, true>() : stream_ops_of<double, 1, false>());
    if (c64 && shoc && s->dg.len % 2 == 0) /* pairs along the contiguous axis */
        return stream_ops_of<float, 2, true, true>();
    return c64 ? (shoc ? stream_ops_of<float, 2, true>() : stream_ops_of<float, 2, false>())
               : (shoc ? stream_ops_of<double, 2, true>() : stream_ops_of<double, 2, false>());
}

template <typename R, int M, bool SHOC>
static void enqueue_fused(nlse_fd *s, int nsteps)
{
    typedef typename Vec2<R>::T T;
    int tj, tk;
    const size_t bytes = fused_shape(s, &tj, &tk);
    const int nj = M >= 1 ? s->dg.n1 : 1;
    const dim3 grid((s->dg.len + tk - 1) / tk, (nj + tj - 1) / tj, 1);
    const DCoef<R> C = coef_of<R>(s->g);
    const int reach = nlse_fd_reach(s->p.scheme, s->p.bc);
    for (int n = 0; n < nsteps; ++n) {
        T *psi = (T *)s->psi, *acc = (T *)s->acc;
        k_fused<R, M, SHOC><<<grid, FUSED_THREADS, bytes, s->stream>>>(
            s->dg, C, psi, acc, (const R *)s->V, (R)s->g.dt, reach, tj, tk, n + 1, s->flags);
        s->psi = acc;
        s->acc = psi;
    }
}

/* Allow the fused kernel its shared memory (outside any graph capture). */
template <typename R, int M, bool SHOC> static int fused_allow(size_t bytes)
{
    return nlse_cuda_check(cudaFuncSetAttribute(k_fused<R, M, SHOC>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)bytes),
                           "cudaFuncSetAttribute");
}

static int fused_prepare(nlse_fd *s)
{
    int tj, tk;
    StreamLaunch sl;
    const int shoc = s->p.scheme == NLSE_FD_2SHOC, m = s->g.m;
    if (fused_form(s) == 2)
        return stream_ops(s).allow(stream_shape(s, &sl), 0, NULL);
    const size_t bytes = fused_shape(s, &tj, &tk);
    if (s->p.dtype == NLSE_COMPLEX64)
        return shoc ? (m ? fused_allow<float, 1, true>(bytes) : fused_allow<float, 0, true>(bytes))
                    : (m ? fused_allow<float, 1, false>(bytes) : fused_allow<float, 0, false>(bytes));
    return shoc ? (m ? fused_allow<double, 1, true>(bytes) : fused_allow<double, 0, true>(bytes))
                : (m ? fused_allow<double, 1, false>(bytes) : fused_allow<double, 0, false>(bytes));
}

template <typename R> static enqueue_fn pick_enqueue(int m, int shoc)
{
    if (shoc)
        return m == 2 ? enqueue_steps<R, 2, true> : m == 1 ? enqueue_steps<R, 1, true>
                                                            : enqueue_steps<R, 0, true>;
    return m == 2 ? enqueue_steps<R, 2, false> : m == 1 ? enqueue_steps<R, 1, false>
                                                         : enqueue_steps<R, 0, false>;
}

template <typename R> static enqueue_fn pick_fused(int m, int shoc)
{
    if (shoc)
        return m == 1 ? enqueue_fused<R, 1, true> : enqueue_fused<R, 0, true>;
    return m == 1 ? enqueue_fused<R, 1, false> : enqueue_fused<R, 0, false>;
}

static enqueue_fn enqueue_for(const nlse_fd *s)
{
    const int shoc = s->p.scheme == NLSE_FD_2SHOC, form = fused_form(s);
    const int c64 = s->p.dtype == NLSE_COMPLEX64;
    if (form == 2)
        return stream_ops(s).enqueue;
    if (form == 1)
        return c64 ? pick_fused<float>(s->g.m, shoc) : pick_fused<double>(s->g.m, shoc);
    return c64 ? pick_enqueue<float>(s->g.m, shoc) : pick_enqueue<double>(s->g.m, shoc);
}

static void drop_graph(nlse_fd *s)
{
    for (int q = 0; q < 2; ++q) {
        if (s->graph[q])
            cudaGraphExecDestroy(s->graph[q]);
        s->graph[q] = NULL;
        s->graph_psi[q] = NULL;
    }
}

/* The graph of GRAPH_STEPS steps (plus the step-base bump) for the current
 * assignment of Psi and acc to the two buffers, captured on first use. */
static int get_graph(nlse_fd *s, cudaGraphExec_t *out)
{
    cudaGraph_t graph;
    const int slot = (s->graph_psi[0] == s->psi) ? 0 : (s->graph_psi[1] == s->psi) ? 1 : -1;
    if (slot >= 0) {
        *out = s->graph[slot];
        return NLSE_OK;
    }
    const int q = s->graph[0] ? 1 : 0;
    void *psi = s->psi, *acc = s->acc;
    CK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeThreadLocal));
    enqueue_for(s)(s, GRAPH_STEPS);
    k_bump<<<1, 1, 0, s->stream>>>(s->flags, GRAPH_STEPS);
    cudaError_t err = cudaStreamEndCapture(s->stream, &graph);
    s->psi = psi; /* GRAPH_STEPS is even: the roles are back where they were */
    s->acc = acc;
    CK(err);
    err = cudaGraphInstantiate(&s->graph[q], graph, 0);
    cudaGraphDestroy(graph);
    if (err != cudaSuccess) {
        s->graph[q] = NULL;
        return nlse_cuda_check(err, "cudaGraphInstantiate");
    }
    s->graph_psi[q] = psi;
    *out = s->graph[q];
    return NLSE_OK;
}

extern "C" int nlse_fd_create(const nlse_fd_params *p, nlse_fd **out)
{
    int st, ndev = 0;
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_create: NULL argument");
    *out = NULL;
    if ((st = nlse_fd_check_params(p)) != NLSE_OK)
        return st;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev < 1) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available (%s)",
                         err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    }
    nlse_fd *s = (nlse_fd *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory allocating the solver");
    s->p = *p;
    s->kernel = NLSE_FD_AUTO;
    s->last_kernel = -1;
    pthread_mutex_init(&s->stage_lock, NULL);
    nlse_fd_make_geom(p, &s->g);
    s->real_size = (p->dtype == NLSE_COMPLEX64) ? sizeof(float) : sizeof(double);
    const fd_geom &g = s->g;
    s->dg.len = (int)g.len;
    s->dg.n1 = g.m >= 1 ? (int)g.n[g.m - 1] : 1;
    s->dg.n0 = g.m >= 2 ? (int)g.n[0] : 1;
    s->dg.periodic = g.periodic;
    s->dg.bc = g.bc;
    if (s->dg.n0 > 65535 || (g.m >= 1 && (s->dg.n1 + 7) / 8 > 65535)) {
        const int n0 = s->dg.n0, n1 = s->dg.n1;
        free(s);
        return nlse_fail(NLSE_ERR_VALUE, "grid too large for the CUDA launch shape: at most "
                         "65535 points on axis 0 of a 3D grid and 524280 on the axis before "
                         "the last, got %d and %d", n0, n1);
    }
    s->device = nlse_cuda_current_device();
    if (cudaDeviceGetAttribute(&s->sms, cudaDevAttrMultiProcessorCount, s->device) != cudaSuccess)
        s->sms = 1;
    /* the fused kernels' boxes fit this or run in another form: 227 KB on
     * Hopper, 163 KB on the A100, 99 KB on Ada (less their static words) */
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, s->device) !=
            cudaSuccess ||
        optin < 48 * 1024)
        optin = 48 * 1024;
    s->smem = (size_t)optin - 256;
    const size_t bytes = (size_t)g.npts * 2 * s->real_size;
    const int nbuf = 4;
    void **bufs[4] = {&s->psi, &s->acc, &s->ta, &s->tb};
    for (int q = 0; q < nbuf; ++q) {
        err = cudaMalloc(bufs[q], bytes);
        if (err != cudaSuccess) {
            size_t freeb = 0, total = 0;
            (void)cudaGetLastError();
            cudaMemGetInfo(&freeb, &total);
            nlse_fd_destroy(s);
            return nlse_fail(NLSE_ERR_BACKEND,
                             "out of device memory: the solver needs %zu bytes (%d arrays of "
                             "%zu), %zu of %zu bytes are free",
                             nbuf * bytes, nbuf, bytes, freeb, total);
        }
        cudaMemset(*bufs[q], 0, bytes);
    }
    if ((st = nlse_cuda_check(cudaMalloc((void **)&s->flags, 2 * sizeof(int)), "cudaMalloc")) ||
        (st = nlse_cuda_check(cudaMallocHost((void **)&s->host_flag, sizeof(int)),
                              "cudaMallocHost")) ||
        (st = nlse_cuda_check(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
                              "cudaStreamCreate")) ||
        (st = nlse_cuda_check(cudaMemset(s->flags, 0, 2 * sizeof(int)), "cudaMemset")) ||
        (st = nlse_cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"))) {
        nlse_fd_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

extern "C" void nlse_fd_destroy(nlse_fd *s)
{
    ON_DEVICE_VOID(s);
    if (!s)
        return;
    drop_graph(s);
    nlse_cuda_wait(s->stream);
    void *bufs[] = {s->psi, s->acc, s->ta, s->tb, s->V, s->flags};
    nlse_cuda_free_all(bufs, sizeof bufs / sizeof bufs[0]);
    cudaFreeHost(s->host_flag);
    nlse_cuda_wait(s->copy_stream);
    nlse_cuda_free_all(s->snap, 2);
    for (int q = 0; q < 2; ++q)
        cudaFreeHost(s->stage[q]);
    nlse_cuda_drop_stream(s->copy_stream, s->stage_ev, 2);
    nlse_cuda_drop_stream(s->stream, s->snap_ev, 2);
    pthread_mutex_destroy(&s->stage_lock);
    free(s);
}

template <typename R> static int host_all_finite(const void *xv, size_t n)
{
    const R *x = (const R *)xv;
    for (size_t q = 0; q < n; ++q)
        if (!(x[q] - x[q] == 0))
            return 0;
    return 1;
}

static int all_finite(const nlse_fd *s, const void *x, int real_only)
{
    const size_t n = (size_t)s->g.npts * (real_only ? 1 : 2);
    return s->p.dtype == NLSE_COMPLEX64 ? host_all_finite<float>(x, n)
                                        : host_all_finite<double>(x, n);
}

extern "C" int nlse_fd_set_state(nlse_fd *s, const void *psi)
{
    ON_DEVICE(s);
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_state: NULL argument");
    if (!all_finite(s, psi, 0))
        return nlse_fail(NLSE_ERR_VALUE, "psi contains non-finite values (NaN or Inf)");
    CK(cudaMemcpyAsync(s->psi, psi, (size_t)s->g.npts * 2 * s->real_size,
                       cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    s->undo_ok = 0;
    return NLSE_OK;
}

/* Lazily create the copy stream and the pinned staging blocks. */
static int ensure_staging(nlse_fd *s)
{
    if (!s->copy_stream)
        CK(cudaStreamCreateWithFlags(&s->copy_stream, cudaStreamNonBlocking));
    for (int q = 0; q < 2; ++q) {
        if (!s->stage[q])
            CK(cudaMallocHost(&s->stage[q], STAGE_BYTES));
        if (!s->stage_ev[q])
            CK(cudaEventCreateWithFlags(&s->stage_ev[q], cudaEventDisableTiming));
    }
    return NLSE_OK;
}

/* Device-to-host copy through the two pinned blocks on `stream`: block b+1
 * crosses the bus while block b is copied (in parallel) into `dst`. */
static int staged_d2h(nlse_fd *s, void *dst, const void *src, size_t bytes, cudaStream_t stream)
{
    const size_t nb = (bytes + STAGE_BYTES - 1) / STAGE_BYTES;
    for (size_t b = 0; b <= nb; ++b) {
        if (b < nb) {
            const size_t off = b * STAGE_BYTES;
            const size_t len = off + STAGE_BYTES < bytes ? STAGE_BYTES : bytes - off;
            CK(cudaMemcpyAsync(s->stage[b % 2], (const char *)src + off, len,
                               cudaMemcpyDeviceToHost, stream));
            CK(cudaEventRecord(s->stage_ev[b % 2], stream));
        }
        if (b > 0) {
            const size_t off = (b - 1) * STAGE_BYTES;
            const size_t len = off + STAGE_BYTES < bytes ? STAGE_BYTES : bytes - off;
            CK(cudaEventSynchronize(s->stage_ev[(b - 1) % 2]));
            nlse_parallel_memcpy((char *)dst + off, s->stage[(b - 1) % 2], len);
        }
    }
    return NLSE_OK;
}

static int locked_d2h(nlse_fd *s, void *dst, const void *src, cudaStream_t *stream,
                      cudaEvent_t wait)
{
    int st;
    pthread_mutex_lock(&s->stage_lock);
    st = ensure_staging(s);
    if (!st && wait)
        st = nlse_cuda_check(cudaStreamWaitEvent(s->copy_stream, wait, 0), "cudaStreamWaitEvent");
    if (!st)
        st = staged_d2h(s, dst, src, (size_t)s->g.npts * 2 * s->real_size,
                        stream ? *stream : s->copy_stream);
    pthread_mutex_unlock(&s->stage_lock);
    return st;
}

extern "C" int nlse_fd_get_state(const nlse_fd *cs, void *psi)
{
    nlse_fd *s = (nlse_fd *)cs; /* the staging buffers are scratch */
    ON_DEVICE(s);
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_get_state: NULL argument");
    return locked_d2h(s, psi, s->psi, &s->stream, NULL);
}

extern "C" int nlse_fd_snapshot(nlse_fd *s, int slot)
{
    ON_DEVICE(s);
    if (!s || slot < 0 || slot > 1)
        return nlse_fail(NLSE_ERR_VALUE, "snapshot slot must be 0 or 1, got %d", slot);
    const size_t bytes = (size_t)s->g.npts * 2 * s->real_size;
    if (!s->snap[slot]) {
        cudaError_t err = cudaMalloc(&s->snap[slot], bytes);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            s->snap[slot] = NULL;
            return nlse_fail(NLSE_ERR_BACKEND, "out of device memory for a frame buffer "
                                               "(%zu bytes)", bytes);
        }
        CK(cudaEventCreateWithFlags(&s->snap_ev[slot], cudaEventDisableTiming));
    }
    CK(cudaMemcpyAsync(s->snap[slot], s->psi, bytes, cudaMemcpyDeviceToDevice, s->stream));
    CK(cudaEventRecord(s->snap_ev[slot], s->stream));
    return NLSE_OK;
}

extern "C" int nlse_fd_fetch(nlse_fd *s, int slot, void *psi)
{
    ON_DEVICE(s);
    if (!s || !psi || slot < 0 || slot > 1 || !s->snap[slot])
        return nlse_fail(NLSE_ERR_VALUE, "fetch: slot %d holds no snapshot", slot);
    return locked_d2h(s, psi, s->snap[slot], NULL, s->snap_ev[slot]);
}

extern "C" int nlse_fd_set_potential(nlse_fd *s, const void *V)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_potential: NULL solver");
    if (!V) {
        drop_graph(s);
        CK(cudaStreamSynchronize(s->stream));
        cudaFree(s->V);
        s->V = NULL;
        return NLSE_OK;
    }
    if (!all_finite(s, V, 1))
        return nlse_fail(NLSE_ERR_VALUE, "V contains non-finite values (NaN or Inf)");
    const size_t bytes = (size_t)s->g.npts * s->real_size;
    if (!s->V) {
        drop_graph(s); /* the graph captured V = NULL */
        cudaError_t err = cudaMalloc(&s->V, bytes);
        if (err != cudaSuccess) {
            (void)cudaGetLastError();
            s->V = NULL;
            return nlse_fail(NLSE_ERR_BACKEND, "out of device memory for V (%zu bytes)", bytes);
        }
    }
    CK(cudaMemcpyAsync(s->V, V, bytes, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

extern "C" int nlse_fd_set_dt(nlse_fd *s, double dt)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_dt: NULL solver");
    int st = nlse_fd_check_dt(dt);
    if (st)
        return st;
    if (dt != s->g.dt)
        drop_graph(s); /* the weights are kernel arguments */
    s->p.dt = dt;
    s->g.dt = dt;
    return NLSE_OK;
}

extern "C" int nlse_fd_step(nlse_fd *s, long nsteps, long *done)
{
    ON_DEVICE(s);
    long spare;
    int st = nlse_fd_check_step(s, nsteps, &done, &spare);
    if (st)
        return st;
    if (fused_on(s))
        CKS(fused_prepare(s));
    s->last_kernel = fused_on(s) ? NLSE_FD_FUSED : NLSE_FD_STAGED;
    void *start[2] = {s->psi, s->acc};
    long left = nsteps;
    while (left > 0) {
        /* flags[0] holds a step number: chunks stay below INT_MAX steps */
        const int chunk = left > (1L << 30) ? (1 << 30) : (int)left;
        CK(cudaMemsetAsync(s->flags, 0, 2 * sizeof(int), s->stream));
        const int nb = chunk / GRAPH_STEPS, rest = chunk % GRAPH_STEPS;
        if (nb > 0) {
            cudaGraphExec_t graph;
            CKS(get_graph(s, &graph));
            for (int b = 0; b < nb; ++b)
                CK(cudaGraphLaunch(graph, s->stream));
        }
        /* the rest are numbered after the graph's steps (flags[1]) */
        if (rest > 0)
            enqueue_for(s)(s, rest);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(s->host_flag, s->flags, sizeof(int), cudaMemcpyDeviceToHost,
                           s->stream));
        CK(cudaStreamSynchronize(s->stream));
        const int bad = *s->host_flag;
        if (bad) {
            /* steps 1..bad-1 of this chunk were good; the last good state is
             * in the buffer that was Psi during step `bad` */
            s->psi = start[(bad - 1) % 2];
            s->acc = start[bad % 2];
            *done += bad - 1;
            CK(cudaMemsetAsync(s->flags, 0, 2 * sizeof(int), s->stream));
            CK(cudaStreamSynchronize(s->stream));
            return nlse_fail(NLSE_ERR_BLOWUP, "non-finite value in step %ld", *done + 1);
        }
        *done += chunk;
        left -= chunk;
        start[0] = s->psi;
        start[1] = s->acc;
    }
    s->undo_ok = nsteps > 0;
    return NLSE_OK;
}

extern "C" int nlse_fd_undo_step(nlse_fd *s)
{
    if (!s || !s->undo_ok)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_undo_step: no step to undo");
    void *t = s->psi; /* Psi and acc alternate: acc holds the state before */
    s->psi = s->acc;
    s->acc = t;
    s->undo_ok = 0;
    return NLSE_OK;
}

template <typename R, int M, bool SHOC>
static void enqueue_observe(nlse_fd *s, double *sums, int r0, int r1)
{
    typedef typename Vec2<R>::T T;
    dim3 grid, block;
    launch_shape(s, &grid, &block);
    const DCoef<R> C = coef_of<R>(s->g);
    k_observe<R, M, SHOC><<<grid, block, 0, s->stream>>>(s->dg, C, (const T *)s->psi,
                                                         (const R *)s->V, sums, r0, r1);
}

template <typename R> static void observe_dispatch(nlse_fd *s, double *sums, int r0, int r1)
{
    const int m = s->g.m, shoc = s->p.scheme == NLSE_FD_2SHOC;
    if (shoc)
        (m == 2 ? enqueue_observe<R, 2, true> : m == 1 ? enqueue_observe<R, 1, true>
                                                       : enqueue_observe<R, 0, true>)(s, sums, r0, r1);
    else
        (m == 2 ? enqueue_observe<R, 2, false> : m == 1 ? enqueue_observe<R, 1, false>
                                                        : enqueue_observe<R, 0, false>)(s, sums, r0, r1);
}

extern "C" int nlse_fd_observe(nlse_fd *s, double *norm, double *energy)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_observe: NULL solver");
    return nlse_fd_observe_rows(s, 0, s->p.shape[0], norm, energy);
}

/* bytes per row of axis 0 */
static size_t row_bytes(const nlse_fd *s)
{
    return (size_t)s->g.npts / s->p.shape[0] * 2 * s->real_size;
}

/* Rows first .. first + count - 1 of axis 0 copied out of the state to
 * `ptr` (out = 1) or from `ptr` into it (out = 0), as `kind` says, on the
 * solver's stream; `fn` is the entry named in messages. */
static int copy_rows(nlse_fd *s, size_t first, size_t count, void *ptr, int out,
                     cudaMemcpyKind kind, const char *fn)
{
    ON_DEVICE(s);
    if (!s || !ptr)
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL argument", fn);
    CKS(nlse_fd_check_rows(&s->p, first, count));
    char *rows = (char *)s->psi + first * row_bytes(s);
    CK(cudaMemcpyAsync(out ? ptr : rows, out ? rows : ptr, count * row_bytes(s), kind,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

extern "C" int nlse_fd_get_rows(const nlse_fd *s, size_t first, size_t count, void *out)
{
    return copy_rows((nlse_fd *)s, first, count, out, 1, cudaMemcpyDeviceToHost,
                     "nlse_fd_get_rows");
}

extern "C" int nlse_fd_set_rows(nlse_fd *s, size_t first, size_t count, const void *in)
{
    return copy_rows(s, first, count, (void *)in, 0, cudaMemcpyHostToDevice, "nlse_fd_set_rows");
}

/* device-to-device (or peer, through a CUDA IPC mapping) copies of rows */
extern "C" int nlse_fd_rows_to(const nlse_fd *s, size_t first, size_t count, void *dst)
{
    return copy_rows((nlse_fd *)s, first, count, dst, 1, cudaMemcpyDefault, "nlse_fd_rows_to");
}

extern "C" int nlse_fd_rows_from(nlse_fd *s, size_t first, size_t count, const void *src)
{
    return copy_rows(s, first, count, (void *)src, 0, cudaMemcpyDefault, "nlse_fd_rows_from");
}

extern "C" int nlse_fd_observe_rows(nlse_fd *s, size_t first, size_t count, double *norm,
                                    double *energy)
{
    ON_DEVICE(s);
    double h[3], *d = NULL;
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_observe_rows: NULL solver");
    CKS(nlse_fd_check_rows(&s->p, first, count));
    const int r0 = (int)first, r1 = (int)(first + count);
    CK(cudaMalloc((void **)&d, 3 * sizeof(double)));
    cudaError_t err = cudaMemsetAsync(d, 0, 3 * sizeof(double), s->stream);
    if (err == cudaSuccess) {
        if (s->p.dtype == NLSE_COMPLEX64)
            observe_dispatch<float>(s, d, r0, r1);
        else
            observe_dispatch<double>(s, d, r0, r1);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, s->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(s->stream);
    cudaFree(d);
    CK(err);
    if (norm)
        *norm = h[0] * s->g.dv;
    if (energy)
        *energy = (s->g.a * h[2] + h[1]) * s->g.dv;
    return NLSE_OK;
}

extern "C" double nlse_fd_bytes_per_point_step(const nlse_fd *s)
{
    /* complex values each point moves per step, for CD and 2SHOC alike (no
     * D array): stage 1 reads Psi^n, writes acc and ta (3); stages 2-3 read
     * x, Psi^n, acc and write acc and the next input (5 each); stage 4 reads
     * x and acc and writes acc (3).  Stencil neighbours come from cache.  A
     * potential adds one real read per stage. */
    double b = 16 * 2.0 * (double)s->real_size;
    if (s->V)
        b += 4 * (double)s->real_size;
    return b;
}

/* the fused step's tile: points per axis (axis 0 first); 0 without one */
static int fused_tile_of(const nlse_fd *s, int t[3])
{
    int tj, tk;
    StreamLaunch sl;
    const int m = s->g.m;
    const int n[3] = {s->dg.n0, s->dg.n1, s->dg.len};
    if (stream_shape(s, &sl)) { /* the chunk along axis 0, the box's tile across */
        const int across = sl.bk * sl.unit - 2 * sl.H;
        t[0] = sl.chunk;
        t[1] = m == 2 ? sl.bj - 2 * sl.H : across;
        t[2] = across;
    } else if (m <= 1 && fused_shape(s, &tj, &tk)) {
        if (m == 1)
            t[0] = tj;
        t[m] = tk;
    } else {
        return 0;
    }
    for (int a = 0; a <= m; ++a)
        t[a] = t[a] < n[3 - 1 - m + a] ? t[a] : n[3 - 1 - m + a];
    return 1;
}

extern "C" double nlse_fd_fused_bytes_per_point_step(const nlse_fd *s)
{
    /* Psi^n (and V) read over each tile's box (tile + 2H per tiled axis, cut
     * back at closed edges; the streamed kernel's chunks of planes widened by
     * 2H along axis 0 too), Psi^{n+1} written over the tile.  3D 2SHOC's two
     * passes (H = 2R): the first reads Psi^n over the box and writes acc and
     * the third stage's input over the tile, the second reads that input
     * over the box, Psi^n over the box shrunk by R (stage 3's points) and acc
     * over the tile, and writes Psi^{n+1}; V over the box in each. */
    int t[3];
    if (!fused_tile_of(s, t))
        return nlse_fd_bytes_per_point_step(s);
    const int m = s->g.m, per = s->g.periodic;
    const int two = m == 2 && s->p.scheme == NLSE_FD_2SHOC; /* and periodic: a tile */
    const int R = nlse_fd_reach(s->p.scheme, s->p.bc);
    const double H = (two ? 2.0 : 4.0) * R;
    const int n[3] = {s->dg.n0, s->dg.n1, s->dg.len};
    double tile = 1, box = 1, mid = 1;
    for (int a = 0; a <= m; ++a) {
        const double N = n[3 - 1 - m + a], T = t[a], b = T + 2 * H, w = b - 2 * R;
        tile *= T;
        box *= per || b < N ? b : N;
        mid *= per || w < N ? w : N;
    }
    const double c = 2.0 * (double)s->real_size, r = (double)s->real_size;
    if (two)
        return c * (2 * box / tile + mid / tile + 4) + (s->V ? 2 * r * box / tile : 0);
    return c * (box / tile + 1) + (s->V ? r * box / tile : 0);
}

extern "C" int nlse_fd_fused_tile(const nlse_fd *s, size_t tile[3])
{
    int t[3];
    if (!s || !fused_tile_of(s, t))
        return 0;
    for (int a = 0; a <= s->g.m; ++a)
        tile[a] = (size_t)t[a];
    return 1;
}

extern "C" int nlse_fd_set_kernel(nlse_fd *s, int kernel)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_kernel: NULL solver");
    if (kernel < NLSE_FD_STAGED || kernel > NLSE_FD_AUTO)
        return nlse_fail(NLSE_ERR_VALUE, "kernel must be 0 (staged), 1 (fused) or 2 (auto), "
                         "got %d", kernel);
    if (kernel != s->kernel)
        drop_graph(s); /* the graphs hold the other kernel */
    s->kernel = kernel;
    return NLSE_OK;
}

extern "C" int nlse_fd_last_kernel(const nlse_fd *s)
{
    return s ? s->last_kernel : -1;
}
