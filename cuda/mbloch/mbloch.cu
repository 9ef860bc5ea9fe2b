/*
 * mbloch.cu -- CUDA backend of the Maxwell-Bloch solver (Demeter, source
 * 004: eqs. 2, 4 and 6, algorithms 1 and 2), the C API of
 * csrc/include/nlsepy/mbloch.h.
 *
 * One thread block owns NA atoms for the whole time grid of a z step (the
 * source's "advance all atoms, reuse their memory" order, the block's
 * atoms resident in shared memory).  A thread is one (level, atom) pair,
 * the atom index fastest: it keeps its level's psi and RK4 sum in
 * registers and reads its atom's stage vector, stored [level][atom], from
 * shared memory.  The coupling of eq. 4 is laid out by output row: row r
 * holds the nonzero coefficients of its band contiguously (ground rows
 * conjugated), and multiplies the contiguous source levels src[r] ..
 * src[r] + cnt[r] - 1, so the inner loop is two shared loads and four
 * FMAs per term with no index arithmetic (NA is a template parameter, the
 * stride a constant); the zero blocks and the zero entries of the
 * off-diagonal blocks are never visited.  The coefficients 0.5 eps_l F
 * are formed once per time step for the block, in three sets (t_{k-1},
 * the midpoint mean of algorithm 2, t_k).
 *
 * The fields and the sums over atoms are double in both precisions; the
 * precision chosen is that of the atoms' states and RK4.
 *
 * After each time step every block writes its atoms' weighted polarisation
 * (and, when asked, populations) for t_k as a per-block partial; a second
 * kernel sums the partials over blocks in a fixed order (deterministic)
 * in double and multiplies by beta.  The fields advance by AB2 (or the
 * Euler start) in a third kernel that also checks them for finiteness.
 *
 * nlse_mbloch_steps runs several z steps in one launch of the tensor-core
 * kernels and of the open systems' kernels (mbloch_open.cuh) where the
 * device holds the blocks of several z slices at once
 * (mbloch_tc.cuh: slice j + 1 follows slice j along the time grid, its
 * fields made from slice j's partials a chunk of rows at a time, in the
 * order and with the roundings of k_sum_warp and k_fields, so the result
 * is that of one z step a launch, bit for bit).  A blow-up inside such a
 * launch is found again one z step a launch from the launch's start.
 *
 * A distributed run (nlse_mbloch_set_comm: each process a block of the
 * atoms) copies the polarisation (and populations) of each atom solve to
 * the host, adds the processes' parts with the nlse_comm table and copies
 * the total back before the fields advance; it runs one z step a launch.
 *
 * The tuning switches (NLSEPY_MBLOCH_*, csrc/mbloch/mbloch_tuning.h) are
 * read once, when a solver is created, into s->tune.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.cuh"
#include "common/reduce.cuh"
#include "mbloch/mbloch_internal.h"
#include "mbloch/mbloch_tuning.h"

#define MBLOCH_MAX_THREADS 1024

struct MBArgs {
    int n_g, n_e, n_lev, l_min, l_max, n_f, n_t, n_atoms;
    int tt;              /* thread rows per block (n_lev rounded up to whole warps) */
    int ncoef, want_pop; /* ncoef: nonzero couplings K; the row tables hold 2 K */
    int split;           /* record: two rows per mode (shuffle partners NA lanes apart) */
    double h, kg, ke;    /* h_t, kappa_g - delta, kappa_e - delta */
};

/* row r of the coupling: coefficients C[off .. off + cnt), sources psi[src ..];
 * pad = 1 on the rows of levels (0 on the idle threads of a padded block) */
struct MBRow {
    int off, cnt, src, pad;
};


/* ------------------------------------------------------------------ */
/* complex helpers                                                    */
/* ------------------------------------------------------------------ */

template <typename T> struct C2;
template <> struct C2<float> {
    typedef float2 t;
    static __device__ __forceinline__ float2 make(float x, float y) { return make_float2(x, y); }
};
template <> struct C2<double> {
    typedef double2 t;
    static __device__ __forceinline__ double2 make(double x, double y) { return make_double2(x, y); }
};

/* a b + c, one rounding */
__device__ __forceinline__ double fmaT(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ float fmaT(float a, float b, float c) { return __fmaf_rn(a, b, c); }

/* s += c z as four FMAs (written out: "s.x += c.x z.x - c.y z.y" would
 * compile to a multiply, an FMA and an add per component) */
template <typename V> __device__ __forceinline__ void cmac(V &s, V c, V z)
{
    s.x = fmaT(c.x, z.x, s.x);
    s.x = fmaT(-c.y, z.y, s.x);
    s.y = fmaT(c.x, z.y, s.y);
    s.y = fmaT(c.y, z.x, s.y);
}

template <int NA, typename T> __device__ __forceinline__ T warp_sum_atoms(T v)
{
#pragma unroll
    for (int d = 1; d < NA; d <<= 1)
        v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

/* sum over nb per-block partials p[b * stride] in a fixed order (lane L
 * takes b = L, L + 32, ..; then a butterfly, which leaves the same sum in
 * every lane), in double, through L2; V: double2 (the tensor-core
 * kernels) or the open kernels' float2 / double2 */
template <typename V>
__device__ __forceinline__ double2 mbloch_warp_sum(const V *p, int nb, size_t stride, int lane)
{
    double x = 0, y = 0;
    for (int b = lane; b < nb; b += 32) {
        const V v = __ldcg(p + (size_t)b * stride);
        x += (double)v.x;
        y += (double)v.y;
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) {
        x += __shfl_xor_sync(0xffffffffu, x, d);
        y += __shfl_xor_sync(0xffffffffu, y, d);
    }
    return make_double2(x, y);
}

/* eps + i hz (c1 P + c0 Pp) (AB2: c1 = 3/2, c0 = -1/2; Euler: 1, 0, Pp
 * unused), every rounding explicit so that every caller gets the same bits */
__device__ __forceinline__ double2 mbloch_new_field(double2 eps, double2 P, double2 Pp, double hz, double c1, double c0)
{
    double px = __dmul_rn(c1, P.x), py = __dmul_rn(c1, P.y);
    if (c0 != 0) {
        px = __fma_rn(c0, Pp.x, px);
        py = __fma_rn(c0, Pp.y, py);
    }
    return make_double2(__fma_rn(-hz, py, eps.x), __fma_rn(hz, px, eps.y));
}

#include "mbloch_tc.cuh"
#include "mbloch_tcf.cuh"
#include "mbloch_wg.cuh"

struct nlse_mbloch {
    nlse_mbloch_params p;
    mbloch_tuning tune;           /* the tuning switches, read at create */
    MBArgs a;
    int nb, threads, na;
    size_t smem;
    void *F, *det, *w, *psi0;     /* T; T2 for psi0 */
    MBRow *rows;                  /* n_lev coupling rows, then n_f polarisation rows */
    int tc;                       /* tensor-core kernel: its MT (k_atoms_tc), 0: the plain kernel */
    int tcf;                      /* 1: its float form (split TF32 products), 0: FP64 */
    MBTc targ;                    /* its arguments */
    double *coef;                 /* its per-lane coupling operands 0.5 F */
    int2 *ent;                    /* per coefficient: F index, mode index | conjugate << 16 */
    double2 *eps[3];              /* fields (double in both precisions): current, scratch, z_0 kept
                                     during the Euler start */
    double2 *P, *Pprev;           /* n_t x n_f */
    void *part, *ppart;           /* T2 nb x n_t x n_f, T nb x n_t x n_lev */
    double *pop, *devb;           /* n_t x n_lev, nb */
    int *flag;
    int pipe, pc;                 /* z slices a tensor-core launch holds (1: one z step), rows a chunk */
    double2 *pE, *pP, *Psave;     /* pipe x n_t n_f fields and polarisations (a slot a slice); Pprev kept
                                     for a group */
    int *pcnt;                    /* 2 pipe chunks counters */
    long j;
    double dev, last_seconds;
    int have_pop;
    const nlse_comm *comm;        /* the other processes' atoms (NULL: none) */
    double *hred;                 /* host: 2 n_t n_f + n_t n_lev, what comm->sum adds */
    int pipe_own;                 /* pipe without a comm */
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    int device;                   /* the GPU the solver lives on (ON_DEVICE) */
    size_t npop;                  /* doubles of pop: n_t n_lev, or 2 n_t n_lev^2 (open) */
    struct MBOpen *open;          /* the density-matrix atoms of an open system, or NULL */
};

static void open_free(struct MBOpen *o);

/* ------------------------------------------------------------------ */
/* the atoms: algorithm 1, lines 2-7, with the RK4 of algorithm 2     */
/* ------------------------------------------------------------------ */

/* One coefficient set in row layout: 0.5 F[m][n] eps_l (conjugated on the
 * ground rows), eps = (e0 + e1) / 2 (mean) or e1.  L2: the fields are read
 * through L2 (written by other blocks of a z-pipelined launch). */
template <typename T, bool L2 = false>
__device__ void coef_set(typename C2<T>::t *C, int n2, const int2 *ent, const T *F, const double2 *e0,
                         const double2 *e1, bool mean)
{
    for (int q = threadIdx.x; q < n2; q += blockDim.x) {
        const int2 p = ent[q];
        const int li = p.y & 0xffff;
        double2 e = L2 ? __ldcg(e1 + li) : e1[li];
        if (mean) {
            const double2 d = L2 ? __ldcg(e0 + li) : e0[li];
            e.x = 0.5 * (e.x + d.x);
            e.y = 0.5 * (e.y + d.y);
        }
        const T f = (T)0.5 * F[p.x], ex = (T)e.x, ey = (T)e.y;
        C[q] = C2<T>::make(f * ex, (p.y >> 16) ? -f * ey : f * ey);
    }
}

/* S = E y_r + (y K)_r: the thread's row of eq. 4 on the stage vector Y
 * ([level][atom]); two partial sums halve the chain of dependent FMAs. */
template <typename T, int NA>
__device__ __forceinline__ typename C2<T>::t deriv(const typename C2<T>::t *Y, const typename C2<T>::t *C,
                                                   const MBRow &R, int row, int atom, T e)
{
    typedef typename C2<T>::t V;
    const V y = R.pad ? Y[row * NA + atom] : C2<T>::make(0, 0); /* pad: the row is a level */
    V S = C2<T>::make(e * y.x, e * y.y), S2 = C2<T>::make(0, 0);
    const V *cp = C + R.off, *yp = Y + R.src * NA + atom;
    int j = 0;
#pragma unroll 4
    for (; j + 1 < R.cnt; j += 2) {
        cmac(S, cp[j], yp[j * NA]);
        cmac(S2, cp[j + 1], yp[(j + 1) * NA]);
    }
    if (j < R.cnt)
        cmac(S, cp[j], yp[j * NA]);
    S.x += S2.x;
    S.y += S2.y;
    return S;
}

/* Record t_k from Y (the new psi): the block's weighted polarisation and
 * populations as partials, the norm deviation.  Polarisation row li is
 * sum_j Fp[off + j] conj(a_{src + j}) b_{src + l + j}; a mode's sum is split
 * between two thread rows of one warp when the block has the rows for it
 * (a.split), joined by a shuffle. */
template <typename T, int NA>
__device__ void record(const MBArgs &a, int k, const typename C2<T>::t *Y, const T *Fp, const MBRow *prow,
                       const T *nrm, int row, int atom, bool valid, T wgt, T pw, bool own,
                       typename C2<T>::t *part, T *ppart, double &dev)
{
    typedef typename C2<T>::t V;
    const size_t blk = blockIdx.x;
    const int P = a.split ? 2 : 1, per = a.tt / P;
    const int rounds = (a.n_f + per - 1) / per;
    const int half = row % P;
    for (int r = 0; r < rounds; ++r) {
        const int li = row / P + r * per;
        V s = C2<T>::make(0, 0);
        if (li < a.n_f) {
            const MBRow R = prow[li];
            int j0 = 0, j1 = R.cnt;
            if (P == 2) {
                const int mid = (R.cnt + 1) / 2;
                if (half == 0)
                    j1 = mid;
                else
                    j0 = mid;
            }
            const int l = a.l_min + li;
            const V *ap = Y + R.src * NA + atom, *bp = Y + (a.n_g + R.src + l) * NA + atom;
            const T *fp = Fp + R.off;
#pragma unroll 4
            for (int j = j0; j < j1; ++j) {
                const V am = ap[j * NA], bn = bp[j * NA];
                const T f = fp[j], fx = f * am.x, fy = f * am.y; /* f conj(a) b */
                s.x = fmaT(fx, bn.x, s.x);
                s.x = fmaT(fy, bn.y, s.x);
                s.y = fmaT(fx, bn.y, s.y);
                s.y = fmaT(-fy, bn.x, s.y);
            }
            s.x *= wgt;
            s.y *= wgt;
        }
        if (P == 2) {
            s.x += __shfl_xor_sync(0xffffffffu, s.x, NA);
            s.y += __shfl_xor_sync(0xffffffffu, s.y, NA);
        }
        s.x = warp_sum_atoms<NA>(s.x);
        s.y = warp_sum_atoms<NA>(s.y);
        if (atom == 0 && half == 0 && li < a.n_f)
            part[(blk * a.n_t + k) * a.n_f + li] = s;
    }
    if (a.want_pop) {
        const T v = warp_sum_atoms<NA>(pw * wgt);
        if (atom == 0 && own)
            ppart[(blk * a.n_t + k) * a.n_lev + row] = v;
    }
    /* |psi|^2 of each atom: the first warp's rows each add every G-th
     * row's |psi_r|^2, then a shuffle over the warp's rows */
    const int G = 32 / NA;
    if (threadIdx.x < 32) {
        T s = 0, s2 = 0;
        int q = row;
#pragma unroll 4
        for (; q + G < a.tt; q += 2 * G) {
            s += nrm[q * NA + atom];
            s2 += nrm[(q + G) * NA + atom];
        }
        if (q < a.tt)
            s += nrm[q * NA + atom];
        s += s2;
#pragma unroll
        for (int d = NA; d < 32; d <<= 1)
            s += __shfl_xor_sync(0xffffffffu, s, d);
        if (row == 0 && valid)
            dev = fmax(dev, fabs((double)s - 1.0));
    }
}

template <typename T, int NA>
__global__ void k_atoms(MBArgs a, const double2 *eps, const typename C2<T>::t *psi0,
                        const T *det, const T *w, const T *Fg, const MBRow *rows, const int2 *ent,
                        typename C2<T>::t *part, T *ppart, double *devb)
{
    typedef typename C2<T>::t V;
    extern __shared__ __align__(16) unsigned char smem[];
    const int n2 = 2 * a.ncoef;
    V *Y0 = (V *)smem, *Y1 = Y0 + a.n_lev * NA, *Cs = Y1 + a.n_lev * NA;
    T *F = (T *)(Cs + 3 * n2), *Fp = F + a.n_g * a.n_e, *nrm = Fp + a.ncoef;
    MBRow *prow = (MBRow *)(nrm + a.tt * NA);

    const int atom = threadIdx.x % NA, row = threadIdx.x / NA;
    const int D = blockIdx.x * NA + atom;
    const bool valid = D < a.n_atoms, own = row < a.n_lev;
    const T wgt = valid ? w[D] : (T)0;
    for (int q = threadIdx.x; q < a.n_g * a.n_e; q += blockDim.x)
        F[q] = Fg[q];
    for (int q = threadIdx.x; q < a.n_f; q += blockDim.x)
        prow[q] = rows[a.n_lev + q];
    __syncthreads(); /* F and the polarisation rows before their use */
    for (int li = 0; li < a.n_f; ++li) /* polarisation weights F[m][m + l] */
        for (int j = threadIdx.x; j < prow[li].cnt; j += blockDim.x) {
            const int m = prow[li].src + j;
            Fp[prow[li].off + j] = F[m * a.n_e + m + a.l_min + li];
        }
    MBRow R = {0, 0, 0, 0};
    T e = 0;
    V psi = C2<T>::make(0, 0), acc;
    if (own) {
        R = rows[row];
        e = row < a.n_g ? (T)((double)row * a.kg) + (valid ? det[D] : (T)0)
                        : (T)((double)(row - a.n_g) * a.ke);
        if (valid)
            psi = psi0[(size_t)D * a.n_lev + row];
        Y0[row * NA + atom] = psi;
    }
    T pw = psi.x * psi.x + psi.y * psi.y;
    nrm[row * NA + atom] = pw;
    /* coefficient sets, rotated each step: prv <- nxt (K(t_{k-1})), then
     * mid and nxt rewrite the two slots the previous step has finished
     * with.  Before the first step nxt holds K(t_0). */
    int prv = 1, mid = 2, nxt = 0;
    coef_set<T>(Cs + nxt * n2, n2, ent, F, eps, eps, false);
    __syncthreads();
    double dev = 0;
    record<T, NA>(a, 0, Y0, Fp, prow, nrm, row, atom, valid, wgt, pw, own, part, ppart, dev);
    const T h = (T)a.h, half = (T)0.5, sixth = (T)(1.0 / 6.0);
    for (int k = 1; k < a.n_t; ++k) {
        const int t0 = prv;
        prv = nxt;
        nxt = mid;
        mid = t0;
        coef_set<T>(Cs + mid * n2, n2, ent, F, eps + (size_t)(k - 1) * a.n_f, eps + (size_t)k * a.n_f, true);
        coef_set<T>(Cs + nxt * n2, n2, ent, F, NULL, eps + (size_t)k * a.n_f, false);
        /* stage 1: Y0 = psi, K(t_{k-1}) */
        V S = deriv<T, NA>(Y0, Cs + prv * n2, R, row, atom, e);
        V kk = C2<T>::make(-h * S.y, h * S.x); /* i h S */
        acc = kk;
        if (own)
            Y1[row * NA + atom] = C2<T>::make(psi.x + half * kk.x, psi.y + half * kk.y);
        __syncthreads();
        /* stage 2: midpoint */
        S = deriv<T, NA>(Y1, Cs + mid * n2, R, row, atom, e);
        kk = C2<T>::make(-h * S.y, h * S.x);
        acc.x += 2 * kk.x;
        acc.y += 2 * kk.y;
        if (own)
            Y0[row * NA + atom] = C2<T>::make(psi.x + half * kk.x, psi.y + half * kk.y);
        __syncthreads();
        /* stage 3: midpoint */
        S = deriv<T, NA>(Y0, Cs + mid * n2, R, row, atom, e);
        kk = C2<T>::make(-h * S.y, h * S.x);
        acc.x += 2 * kk.x;
        acc.y += 2 * kk.y;
        if (own)
            Y1[row * NA + atom] = C2<T>::make(psi.x + kk.x, psi.y + kk.y);
        __syncthreads();
        /* stage 4: K(t_k); the new psi */
        S = deriv<T, NA>(Y1, Cs + nxt * n2, R, row, atom, e);
        kk = C2<T>::make(-h * S.y, h * S.x);
        psi.x += sixth * (acc.x + kk.x);
        psi.y += sixth * (acc.y + kk.y);
        pw = psi.x * psi.x + psi.y * psi.y;
        if (own)
            Y0[row * NA + atom] = psi;
        nrm[row * NA + atom] = pw;
        __syncthreads();
        record<T, NA>(a, k, Y0, Fp, prow, nrm, row, atom, valid, wgt, pw, own, part, ppart, dev);
    }
    /* the block's largest norm deviation */
    __shared__ double dmax[MBLOCH_MAX_THREADS / 32];
    const double m = nlse_block_max(dev, dmax);
    if (threadIdx.x == 0)
        devb[blockIdx.x] = m;
}

#include "mbloch_open.cuh"

/* out[q] = scale * sum_b part[b][q] in double (fixed order); flag if not finite */
template <typename V>
__global__ void k_sum_blocks2(const V *part, int nb, size_t n, double scale, double2 *out, int *flag)
{
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (size_t)gridDim.x * blockDim.x) {
        double x = 0, y = 0;
        for (int b = 0; b < nb; ++b) {
            const V v = part[(size_t)b * n + q];
            x += (double)v.x;
            y += (double)v.y;
        }
        x *= scale;
        y *= scale;
        if (!isfinite(x) || !isfinite(y))
            *flag = 1;
        out[q] = make_double2(x, y);
    }
}

template <typename T>
__global__ void k_sum_blocks(const T *part, int nb, size_t n, double *out)
{
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (size_t)gridDim.x * blockDim.x) {
        double x = 0;
        for (int b = 0; b < nb; ++b)
            x += (double)part[(size_t)b * n + q];
        out[q] = x;
    }
}

/* the reduction of the z-pipelined kernels (tensor-core and open):
 * P[q] = scale sum_b part[b n + q], a warp a value in mbloch_warp_sum's
 * order (that of the z pipeline) */
template <typename V>
__global__ void k_sum_warp(const V *part, int nb, size_t n, double scale, double2 *out, int *flag)
{
    const int lane = threadIdx.x & 31;
    const size_t w0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t q = w0; q < n; q += nw) {
        double2 v = mbloch_warp_sum(part + q, nb, n, lane);
        v = make_double2(v.x * scale, v.y * scale);
        if (lane == 0) {
            if (!isfinite(v.x) || !isfinite(v.y))
                atomicOr(flag, 1);
            out[q] = v;
        }
    }
}

/* eps_new = eps + i hz (c1 P + c0 Pprev) (AB2: c1 = 3/2, c0 = -1/2; Euler: 1, 0) */
__global__ void k_fields(const double2 *eps, double2 *out, const double2 *P, const double2 *Pp, size_t n, double hz,
                         double c1, double c0, int *flag)
{
    for (size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (size_t)gridDim.x * blockDim.x) {
        const double2 v = mbloch_new_field(eps[q], P[q], c0 != 0 ? Pp[q] : P[q], hz, c1, c0);
        if (!isfinite(v.x) || !isfinite(v.y))
            atomicOr(flag, 1);
        out[q] = v;
    }
}

/* ------------------------------------------------------------------ */
/* host side                                                          */
/* ------------------------------------------------------------------ */

/* cudaMalloc, or NLSE_ERR_BACKEND naming `what` and the free memory */
static int dalloc(void **p, size_t bytes, const char *what) { return nlse_cuda_alloc(p, bytes, what); }

static size_t rs(const nlse_mbloch *s) { return s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double); }
/* the precision of the per-block partial sums: double in the tensor-core kernel */
static size_t prs(const nlse_mbloch *s) { return s->tc ? sizeof(double) : rs(s); }
static size_t nfield(const nlse_mbloch *s) { return (size_t)s->a.n_t * s->a.n_f; }

/* doubles -> T on the device (through a host buffer) */
static int upload_real(const nlse_mbloch *s, void *dst, const double *src, size_t n)
{
    if (s->p.dtype == NLSE_COMPLEX128) {
        CK(cudaMemcpy(dst, src, n * sizeof(double), cudaMemcpyHostToDevice));
        return NLSE_OK;
    }
    float *f = (float *)malloc(n * sizeof(float) + 1);
    if (!f)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    for (size_t q = 0; q < n; ++q)
        f[q] = (float)src[q];
    cudaError_t err = cudaMemcpy(dst, f, n * sizeof(float), cudaMemcpyHostToDevice);
    free(f);
    CK(err);
    return NLSE_OK;
}

/* the instantiations of k_atoms: atoms per block NA = 1, 2, .., 32 */
#define MBLOCH_NA_SWITCH(na, CALL)                                                                 \
    switch (na) {                                                                              \
    case 1: CALL(1); break;                                                                    \
    case 2: CALL(2); break;                                                                    \
    case 4: CALL(4); break;                                                                    \
    case 8: CALL(8); break;                                                                    \
    case 16: CALL(16); break;                                                                  \
    default: CALL(32); break;                                                                  \
    }

template <typename T> static int kernel_attr(int na, size_t smem, int *maxt)
{
    cudaFuncAttributes fa;
    cudaError_t err = cudaSuccess;
#define MBLOCH_ATTR(NA)                                                                            \
    {                                                                                          \
        err = cudaFuncGetAttributes(&fa, k_atoms<T, NA>);                                      \
        if (err == cudaSuccess && smem)                                                        \
            err = cudaFuncSetAttribute(k_atoms<T, NA>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                       (int)smem);                                             \
    }
    MBLOCH_NA_SWITCH(na, MBLOCH_ATTR)
#undef MBLOCH_ATTR
    CK(err);
    *maxt = fa.maxThreadsPerBlock;
    return NLSE_OK;
}

static size_t smem_bytes(const nlse_mbloch *s, int na, int tt)
{
    const MBArgs *a = &s->a;
    return 2 * rs(s) * (2 * (size_t)a->n_lev * na + 6 * (size_t)a->ncoef) +
           rs(s) * ((size_t)a->n_g * a->n_e + (size_t)a->ncoef + (size_t)tt * na) +
           sizeof(MBRow) * (size_t)a->n_f + 16;
}

/* Atoms per block: about 512 threads of one level each (the fastest for
 * source 004's test problem; bench/RESULTS.md, Maxwell-Bloch section),
 * fewer when the registers or the shared memory do not allow them;
 * NLSEPY_MBLOCH_ATOMS_PER_BLOCK (a power of two <= 32, s->tune) overrides
 * for tuning. */
static int pick_tiles(nlse_mbloch *s)
{
    MBArgs *a = &s->a;
    const int rows = ((a->n_lev + 31) / 32) * 32;
    int maxt = 0;
    CKS(s->p.dtype == NLSE_COMPLEX64 ? kernel_attr<float>(1, 0, &maxt) : kernel_attr<double>(1, 0, &maxt));
    if (rows > maxt)
        return nlse_fail(NLSE_ERR_VALUE, "n_g + n_e = %d levels exceed the CUDA kernel's %d per atom", a->n_lev,
                         maxt);
    int na = 1;
    while (na < 32 && 2 * na * a->n_lev <= 512)
        na *= 2;
    if (s->tune.atoms_per_block)
        na = s->tune.atoms_per_block;
    int dev = 0, maxsm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&maxsm, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    for (;; na /= 2) {
        const int threads = ((a->n_lev * na + 31) / 32) * 32;
        CKS(s->p.dtype == NLSE_COMPLEX64 ? kernel_attr<float>(na, 0, &maxt)
                                         : kernel_attr<double>(na, 0, &maxt));
        if ((threads <= maxt && smem_bytes(s, na, threads / na) + 1024 <= (size_t)maxsm) || na == 1)
            break;
    }
    s->na = na;
    s->threads = ((a->n_lev * na + 31) / 32) * 32;
    a->tt = s->threads / na;
    a->split = na <= 16 && a->tt >= 2 * a->n_f;
    s->nb = (a->n_atoms + na - 1) / na;
    s->smem = smem_bytes(s, na, a->tt);
    if (s->smem + 1024 > (size_t)maxsm)
        return nlse_fail(NLSE_ERR_VALUE,
                         "the problem (n_g = %d, n_e = %d, %d couplings) needs %zu bytes of shared memory per "
                         "block, the device has %d",
                         a->n_g, a->n_e, a->ncoef, s->smem, maxsm);
    return s->p.dtype == NLSE_COMPLEX64 ? kernel_attr<float>(na, s->smem, &maxt)
                                        : kernel_attr<double>(na, s->smem, &maxt);
}

/* the tensor-core kernel for the solver's dtype and MT: k_atoms_tc (FP64)
 * or, for float where tcf is set, k_atoms_tcf (split TF32) */
static const void *tc_kernel(const nlse_mbloch *s)
{
    if (s->p.dtype == NLSE_COMPLEX128)
        return s->tc == 1 ? (const void *)k_atoms_tc<double, 1> : (const void *)k_atoms_tc<double, 2>;
    if (s->tcf == 2)
        return (const void *)k_atoms_wg;
    if (s->tcf)
        return s->tc == 1 ? (const void *)k_atoms_tcf<1> : (const void *)k_atoms_tcf<2>;
    return s->tc == 1 ? (const void *)k_atoms_tc<float, 1> : (const void *)k_atoms_tc<float, 2>;
}

/* 1 where this build holds the sm_90a code of k_atoms_wg for the device */
static int wg_compiled(void)
{
    int *d = NULL, h = 0;
    if (cudaMalloc((void **)&d, sizeof(int)) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    k_wg_probe<<<1, 1>>>(d);
    if (cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess)
        h = 0;
    cudaFree(d);
    (void)cudaGetLastError();
    return h;
}

/* The Hopper float kernel k_atoms_wg: on an sm_90 device where the build
 * holds its sm_90a code, for 17 to 32 levels a half (the larger half),
 * where its shared memory fits; NLSEPY_MBLOCH_KERNEL=tcf (s->tune) keeps
 * the mma.sync float kernel k_atoms_tcf. */
static int wg_fits(const nlse_mbloch *s, int dev, int major, int maxsm)
{
    const MBArgs *a = &s->a;
    int minor = 0;
    if (s->tune.kernel == MBLOCH_KERNEL_TCF)
        return 0;
    if (major != 9 || mbloch_imax(a->n_g, a->n_e) <= 16 || mbloch_imax(a->n_g, a->n_e) > MBLOCH_WG_L)
        return 0;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return minor == 0 && wg_smem_bytes(a->n_f) + 1024 <= (size_t)maxsm && wg_compiled();
}

/* every lane's operands 0.5 F[m][n] (zero off the band) in fragment
 * places, uploaded to s->coef, and the k steps of each warp that hold
 * couplings (*mask) for k_atoms_tc and k_atoms_tcf */
static int tc_lane_table(nlse_mbloch *s, const double *F, int MT, unsigned int *mask)
{
    const MBArgs *a = &s->a;
    const int KS = 2 * MT;
    const size_t nft = (size_t)2 * MT * KS * 128;
    double *ft = (double *)calloc(nft, sizeof(double));
    if (!ft)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    for (int wt = 0; wt < 2 * MT; ++wt)
        for (int ks = 0; ks < KS; ++ks)
            for (int i = 0; i < 4; ++i)
                for (int lane = 0; lane < 32; ++lane) {
                    const int h = wt / MT, in = tc_in(ks, lane & 3, i);
                    const int out = s->tcf ? tcf_out(wt % MT, lane >> 2, i) : tc_out(wt % MT, lane >> 2, i);
                    const int m = h ? in : out, n = h ? out : in;
                    if (m >= a->n_g || n >= a->n_e || n - m < a->l_min || n - m > a->l_max)
                        continue;
                    ft[(((size_t)(wt * KS + ks) * 2 + i / 2) * 32 + lane) * 2 + i % 2] =
                        0.5 * F[(size_t)m * a->n_e + n];
                    *mask |= 1u << (wt * KS + ks);
                }
    int st = dalloc((void **)&s->coef, nft * sizeof(double), "the coupling operands");
    if (!st && cudaMemcpy(s->coef, ft, nft * sizeof(double), cudaMemcpyHostToDevice) != cudaSuccess)
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaMemcpy failed");
    free(ft);
    return st;
}

/* The tensor-core kernel when the device has FP64 and TF32 mma (sm_80 and
 * later), both halves have at most 32 levels and its shared memory fits:
 * in double on the FP64 tensor cores, in float with split TF32 products.
 * NLSEPY_MBLOCH_KERNEL=simt (s->tune) forces the plain kernel,
 * NLSEPY_MBLOCH_KERNEL=tc64 the FP64 tensor-core kernel for float too.
 * Sets s->tc (its MT, 0 when not taken), s->tcf, the grid and the
 * coupling list in fragment places. */
static int pick_tc(nlse_mbloch *s, const double *F)
{
    const MBArgs *a = &s->a;
    s->tc = 0;
    if (s->tune.kernel == MBLOCH_KERNEL_SIMT)
        return NLSE_OK;
    s->tcf = s->p.dtype == NLSE_COMPLEX64 && s->tune.kernel != MBLOCH_KERNEL_TC64;
    int dev = 0, major = 0, maxsm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CK(cudaDeviceGetAttribute(&maxsm, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const int MT = (mbloch_imax(a->n_g, a->n_e) + 15) / 16;
    if (s->tcf && wg_fits(s, dev, major, maxsm))
        s->tcf = 2;
    const int na = s->tcf == 2 ? MBLOCH_WG_ATOMS : s->tcf ? 8 * MBLOCH_TCF_GROUPS : MBLOCH_TC_ATOMS; /* atoms a block */
    const size_t smem = s->tcf == 2 ? wg_smem_bytes(a->n_f)
                        : s->tcf    ? tcf_smem_bytes(MT, na / 8, a->n_f, a->l_min, a->l_max)
                                    : tc_smem_bytes(MT, a->n_f);
    if (major < 8 || MT > 2 || smem + 1024 > (size_t)maxsm)
        return NLSE_OK;
    /* k_atoms_wg forms its band entries itself and reads neither table */
    unsigned int mask = 0;
    int st = s->tcf == 2 ? NLSE_OK : tc_lane_table(s, F, MT, &mask);
    s->tc = MT;
    if (!st && cudaFuncSetAttribute(tc_kernel(s), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
                   cudaSuccess)
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaFuncSetAttribute failed: %s", cudaGetErrorString(cudaGetLastError()));
    /* the float kernel: the largest shared memory carveout, so that every
     * block its registers allow (a z slice each) also fits there */
    if (!st && s->tcf &&
        cudaFuncSetAttribute(tc_kernel(s), cudaFuncAttributePreferredSharedMemoryCarveout,
                             (int)cudaSharedmemCarveoutMaxShared) != cudaSuccess)
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaFuncSetAttribute failed: %s", cudaGetErrorString(cudaGetLastError()));
    if (st) {
        s->tc = 0;
        return st;
    }
    MBTc *t = &s->targ;
    t->n_g = a->n_g;
    t->n_e = a->n_e;
    t->n_lev = a->n_lev;
    t->l_min = a->l_min;
    t->n_f = a->n_f;
    t->n_t = a->n_t;
    t->n_atoms = a->n_atoms;
    t->want_pop = 0;
    t->mask = mask;
    t->h = a->h;
    t->kg = a->kg;
    t->ke = a->ke;
    s->tc = MT;
    s->na = na;
    s->threads = s->tcf == 2 ? 128 : 64 * MT; /* k_atoms_wg: one warpgroup (MT = 2 there too) */
    s->nb = (a->n_atoms + na - 1) / na;
    s->smem = smem;
    return NLSE_OK;
}

/* The coupling rows (ground rows conjugated) and the polarisation rows. */
static int create_tables(nlse_mbloch *s, const double *F)
{
    const MBArgs *a = &s->a;
    const int nrow = a->n_lev + a->n_f, n2 = 2 * a->ncoef;
    MBRow *rows = (MBRow *)malloc((size_t)nrow * sizeof(MBRow));
    int2 *ent = (int2 *)malloc((size_t)n2 * sizeof(int2) + 1);
    if (!rows || !ent) {
        free(rows);
        free(ent);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    }
    int q = 0;
    for (int r = 0; r < a->n_lev; ++r) {
        const int g = r < a->n_g, i = g ? r : r - a->n_g;
        const int lo = g ? mbloch_lo_e(i, a->l_min) : mbloch_lo_g(i, a->l_max);
        const int hi = g ? mbloch_hi_e(i, a->l_max, a->n_e) : mbloch_hi_g(i, a->l_min, a->n_g);
        rows[r].off = q;
        rows[r].cnt = hi >= lo ? hi - lo + 1 : 0;
        rows[r].src = g ? a->n_g + lo : lo;
        rows[r].pad = 1;
        for (int x = lo; x <= hi; ++x, ++q) {
            const int m = g ? i : x, n = g ? x : i;
            ent[q] = make_int2(m * a->n_e + n, (n - m - a->l_min) | (g << 16));
        }
    }
    int f = 0;
    for (int li = 0; li < a->n_f; ++li) {
        const int l = a->l_min + li, lo = mbloch_imax(0, -l), hi = mbloch_imin(a->n_g - 1, a->n_e - 1 - l);
        MBRow *R = &rows[a->n_lev + li];
        R->off = f;
        R->cnt = hi >= lo ? hi - lo + 1 : 0;
        R->src = lo;
        R->pad = 0;
        f += R->cnt;
    }
    int st = dalloc((void **)&s->rows, (size_t)nrow * sizeof(MBRow), "the coupling rows");
    if (!st)
        st = dalloc((void **)&s->ent, (size_t)n2 * sizeof(int2), "the coefficient table");
    if (!st && cudaMemcpy(s->rows, rows, (size_t)nrow * sizeof(MBRow), cudaMemcpyHostToDevice))
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaMemcpy failed");
    if (!st && cudaMemcpy(s->ent, ent, (size_t)n2 * sizeof(int2), cudaMemcpyHostToDevice))
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaMemcpy failed");
    free(rows);
    free(ent);
    if (!st && (q != n2 || f != a->ncoef))
        st = nlse_fail(NLSE_ERR_INTERNAL, "coupling tables: %d and %d entries for %d couplings", q, f, a->ncoef);
    if (!st)
        st = dalloc(&s->F, (size_t)a->n_g * a->n_e * rs(s), "F");
    if (!st)
        st = upload_real(s, s->F, F, (size_t)a->n_g * a->n_e);
    return st;
}

static int pipe_chunks(const nlse_mbloch *s) { return (s->a.n_t + s->pc - 1) / s->pc; }

/* cudaMalloc without a recorded error (0: failed) */
static int try_alloc(void **p, size_t bytes)
{
    if (cudaMalloc(p, bytes) == cudaSuccess)
        return 1;
    (void)cudaGetLastError();
    *p = NULL;
    return 0;
}

/* The z slices a launch of the tensor-core kernel holds: as many groups of
 * the grid as the device keeps resident at once (cooperative launch), at
 * most MBLOCH_PIPE_MAX, fewer when their buffers do not fit in a quarter of the
 * free memory; 1 for the plain kernel.  NLSEPY_MBLOCH_PIPE (s->tune) caps
 * it (1: one z step a launch). */
/* The z slices a cooperative launch of `fn` (blocks of `threads` threads
 * and `smem` bytes of dynamic shared memory, nb blocks a slice) holds: as
 * many groups of nb blocks as the device keeps resident at once, at most
 * smax and NLSEPY_MBLOCH_PIPE, fewer while S slices' buffers (slice_bytes
 * each) would exceed a quarter of the free memory; 1 without cooperative
 * launch.  The tensor-core and the open kernels' pipelines. */
static int pipe_slices(const nlse_mbloch *s, const void *fn, int threads, size_t smem, int nb, int smax,
                       size_t slice_bytes, int *S_out)
{
    int dev = 0, coop = 0, nsm = 0, per = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, fn, threads, smem));
    int S = coop ? mbloch_imin(smax, per * nsm / nb) : 1;
    if (s->tune.pipe)
        S = mbloch_imin(S, s->tune.pipe);
    size_t fr = 0, tot = 0;
    CK(cudaMemGetInfo(&fr, &tot));
    while (S > 1 && (size_t)S * slice_bytes > fr / 4)
        --S;
    *S_out = S;
    return NLSE_OK;
}

static int setup_pipe(nlse_mbloch *s)
{
    s->pipe = 1;
    s->pc = mbloch_imax(4, mbloch_imin(32, s->a.n_t / 16));
    if (!s->tc)
        return NLSE_OK;
    const size_t nf = nfield(s) * sizeof(double2);
    int S = 1; /* per slice: nb partials, the fields and the polarisation */
    CKS(pipe_slices(s, tc_kernel(s), s->threads, s->smem, s->nb, MBLOCH_PIPE_MAX, nf * ((size_t)s->nb + 2), &S));
    if (S > 1 && try_alloc((void **)&s->pE, S * nf) && try_alloc((void **)&s->pP, S * nf) &&
        try_alloc((void **)&s->Psave, nf) &&
        try_alloc((void **)&s->pcnt, (size_t)2 * S * pipe_chunks(s) * sizeof(int)))
        s->pipe = S;
    return NLSE_OK;
}

static int create(nlse_mbloch *s, const double *F, const double *det, const double *w, const double *psi0,
                  const double *fields0)
{
    const nlse_mbloch_params *p = &s->p;
    MBArgs *a = &s->a;
    a->n_g = p->n_g;
    a->n_e = p->n_e;
    a->n_lev = p->n_g + p->n_e;
    a->l_min = p->l_min;
    a->l_max = p->l_max;
    a->n_f = p->l_max - p->l_min + 1;
    a->n_t = p->n_t;
    a->n_atoms = p->n_atoms;
    a->ncoef = (int)nlse_mbloch_couplings(p);
    a->h = p->h_t;
    a->kg = p->kappa_g - p->delta;
    a->ke = p->kappa_e - p->delta;
    if (p->n_g > 32767 || p->n_e > 32767)
        return nlse_fail(NLSE_ERR_VALUE, "n_g and n_e must be < 32768 on the CUDA backend");
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available");
    }
    CKS(pick_tc(s, F));
    if (!s->tc)
        CKS(pick_tiles(s));
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&s->ev0));
    CK(cudaEventCreate(&s->ev1));
    CKS(create_tables(s, F));
    const size_t na = (size_t)a->n_atoms, nf = nfield(s);
    CKS(dalloc(&s->det, na * rs(s), "the detunings"));
    CKS(dalloc(&s->w, na * rs(s), "the weights"));
    CKS(dalloc(&s->psi0, 2 * na * a->n_lev * rs(s), "the initial states"));
    CKS(upload_real(s, s->det, det, na));
    CKS(upload_real(s, s->w, w, na));
    CKS(upload_real(s, s->psi0, psi0, 2 * na * a->n_lev));
    for (int c = 0; c < 3; ++c)
        CKS(dalloc((void **)&s->eps[c], nf * sizeof(double2), "the fields"));
    CK(cudaMemcpy(s->eps[0], fields0, nf * sizeof(double2), cudaMemcpyHostToDevice));
    CKS(dalloc((void **)&s->P, nf * sizeof(double2), "the polarisation"));
    CKS(dalloc((void **)&s->Pprev, nf * sizeof(double2), "the polarisation"));
    CK(cudaMemset(s->P, 0, nf * sizeof(double2)));
    CKS(setup_pipe(s));
    CKS(dalloc(&s->part, (size_t)s->pipe * s->nb * nf * 2 * prs(s), "the per-block polarisations"));
    s->npop = (size_t)a->n_t * a->n_lev;
    CKS(dalloc((void **)&s->pop, (size_t)a->n_t * a->n_lev * sizeof(double), "the populations"));
    CK(cudaMemset(s->pop, 0, (size_t)a->n_t * a->n_lev * sizeof(double)));
    CKS(dalloc((void **)&s->devb, (size_t)s->pipe * s->nb * sizeof(double), "the norm deviations"));
    CKS(dalloc((void **)&s->flag, sizeof(int), "a flag"));
    return NLSE_OK;
}

extern "C" void nlse_mbloch_destroy(nlse_mbloch *s)
{
    ON_DEVICE_VOID(s);
    if (!s)
        return;
    void *ptrs[] = {s->F, s->det, s->w, s->psi0, s->rows, s->ent, s->eps[0], s->eps[1], s->eps[2], s->P, s->Pprev,
                    s->part, s->ppart, s->pop, s->devb, s->flag, s->coef, s->pE, s->pP, s->Psave, s->pcnt};
    nlse_cuda_free_all(ptrs, sizeof ptrs / sizeof ptrs[0]);
    open_free(s->open);
    free(s->hred);
    const cudaEvent_t ev[] = {s->ev0, s->ev1};
    nlse_cuda_drop_stream(s->stream, ev, 2);
    free(s);
}

extern "C" int nlse_mbloch_create(const nlse_mbloch_params *p, const double *F, const double *detunings,
                              const double *weights, const double *psi0, const double *fields0, nlse_mbloch **out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_create: NULL output");
    *out = NULL;
    int st = nlse_mbloch_check_params(p);
    if (!st)
        st = mbloch_check_arrays(p, F, detunings, weights, psi0, fields0);
    if (st)
        return st;
    nlse_mbloch *s = (nlse_mbloch *)calloc(1, sizeof(nlse_mbloch));
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->p = *p;
    mbloch_tuning_read(&s->tune);
    s->device = nlse_cuda_current_device();
    st = create(s, F, detunings, weights, psi0, fields0);
    if (st) {
        nlse_mbloch_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

/* k_atoms_tc over pp.S slices (the first at the fields eps[0]), then the
 * last slice's polarisation into P */
template <typename T> static int launch_tc(nlse_mbloch *s, MBPipe pp, int want_pop)
{
    typedef typename C2<T>::t V;
    MBTc t = s->targ;
    t.want_pop = want_pop;
    const double2 *e0 = s->eps[0];
    const V *psi0 = (const V *)s->psi0;
    const T *det = (const T *)s->det, *w = (const T *)s->w, *F = (const T *)s->F;
    const double *coef = s->coef;
    double2 *part = (double2 *)s->part;
    double *ppart = (double *)s->ppart, *devb = s->devb;
    void *args[] = {&t, &pp, &e0, &psi0, &det, &w, &F, &coef, &part, &ppart, &devb};
    const void *fn = tc_kernel(s);
    if (pp.S > 1)
        CK(cudaLaunchCooperativeKernel(fn, dim3(pp.S * s->nb), dim3(s->threads), args, s->smem, s->stream));
    else
        CK(cudaLaunchKernel(fn, dim3(s->nb), dim3(s->threads), args, s->smem, s->stream));
    const size_t nf = nfield(s);
    k_sum_warp<<<(int)((nf + 7) / 8), 256, 0, s->stream>>>(part + (size_t)((pp.m - 1) % pp.S) * s->nb * nf, s->nb, nf,
                                                         s->p.beta, s->P, s->flag);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* open systems: the density-matrix atoms (mbloch_open.cuh)           */
/* ------------------------------------------------------------------ */

static void open_free(MBOpen *o)
{
    if (!o)
        return;
    void *ptrs[] = {o->rho0, o->shift, o->damp, o->frate, o->part, o->ppart, o->gwork, o->foff, o->ffrom, o->tri, o->G};
    nlse_cuda_free_all(ptrs, sizeof ptrs / sizeof ptrs[0]);
    free(o);
}

/* the open kernel of the solver (k_open_reg<T, n> or k_open<T>) */
template <typename T> static const void *open_kernel(const MBOpen *o)
{
    if (!o->reg) {
        if (o->global)
            return (const void *)k_open<T, false, false>;
        return o->a.na * o->a.ntri <= o->threads ? (const void *)k_open<T, true, true>
                                                 : (const void *)k_open<T, true, false>;
    }
    return o->a.n_lev == 2 ? (const void *)k_open_reg<T, 2> : (const void *)k_open_reg<T, 3>;
}

/* copy n ints to a new device array */
static int upload_int(void **dst, const int *src, size_t n, const char *what)
{
    CKS(dalloc(dst, (n ? n : 1) * sizeof(int), what));
    if (n)
        CK(cudaMemcpy(*dst, src, n * sizeof(int), cudaMemcpyHostToDevice));
    return NLSE_OK;
}

/* atoms per block (about 256 elements, at least ~4 blocks an SM when the
 * atoms allow), threads, and where the states live */
template <typename T> static int open_layout(nlse_mbloch *s, MBOpen *o)
{
    typedef typename C2<T>::t V;
    MBOpenArgs *a = &o->a;
    int dev = 0, nsm = 1, maxsm = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&maxsm, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int na = mbloch_imax(1, 256 / a->n2);
    na = mbloch_imin(na, mbloch_imax(1, (a->n_atoms + 4 * nsm - 1) / (4 * nsm)));
    a->na = na;
    o->nb = (a->n_atoms + na - 1) / na;
    o->threads = mbloch_imin(MBLOCH_OPEN_THREADS, ((na * a->ntri + 31) / 32) * 32);
    const size_t head = open_head_bytes<T>(*a);
    const size_t states = 4 * (size_t)na * a->sn2 * sizeof(V);
    o->global = head + states + 1024 > (size_t)maxsm;
    o->smem = head + (o->global ? 0 : states);
    if (o->smem + 1024 > (size_t)maxsm)
        return nlse_fail(NLSE_ERR_VALUE, "the open system's coupling (%d couplings) needs %zu bytes of shared "
                         "memory per block, the device has %d", a->n2c / 2, o->smem, maxsm);
    if (o->global)
        CKS(dalloc(&o->gwork, (size_t)o->nb * states, "the density matrices of the open system"));
    CK(cudaFuncSetAttribute(open_kernel<T>(o), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)o->smem));
    return NLSE_OK;
}

/* the tables and arrays of an open system on the device */
static int open_create(nlse_mbloch *s, const nlse_mbloch_open *op, const mbloch_open_tab *tab, MBOpen *o)
{
    const MBArgs *b = &s->a;
    MBOpenArgs *a = &o->a;
    a->n_g = b->n_g;
    a->n_lev = b->n_lev;
    a->n2 = b->n_lev * b->n_lev;
    a->n_f = b->n_f;
    a->n_t = b->n_t;
    a->n_atoms = b->n_atoms;
    a->l_min = b->l_min;
    a->n2c = 2 * b->ncoef;
    a->ntri = a->n_lev * (a->n_lev + 1) / 2;
    a->ld = a->n_lev | 1; /* odd: the mirror writes (j, i) of a warp fall in distinct banks */
    a->sn2 = a->n_lev * a->ld;
    a->h = b->h;
    a->kg = b->kg;
    a->ke = b->ke;
    o->reg = a->n_lev <= MBLOCH_OPEN_REG_MAX && s->tune.kernel != MBLOCH_KERNEL_SIMT;
    if (o->reg) {
        o->threads = MBLOCH_OPEN_REG_THREADS;
        o->nb = (a->n_atoms + o->threads - 1) / o->threads;
        a->na = o->threads;
    } else {
        CKS(s->p.dtype == NLSE_COMPLEX64 ? open_layout<float>(s, o) : open_layout<double>(s, o));
    }
    const size_t na = (size_t)a->n_atoms, n2 = (size_t)a->n2, nd = (size_t)tab->n_decay;
    CKS(dalloc(&o->rho0, 2 * na * n2 * rs(s), "the initial density matrices"));
    CKS(upload_real(s, o->rho0, op->rho0, 2 * na * n2));
    if (op->shift) {
        CKS(dalloc(&o->shift, na * a->n_lev * rs(s), "the level shifts"));
        CKS(upload_real(s, o->shift, op->shift, na * a->n_lev));
    }
    CKS(dalloc(&o->damp, n2 * rs(s), "the damping rates"));
    CKS(upload_real(s, o->damp, tab->damp, n2));
    CKS(dalloc(&o->frate, (nd ? nd : 1) * rs(s), "the decay rates"));
    if (nd)
        CKS(upload_real(s, o->frate, tab->feed_rate, nd));
    CKS(upload_int((void **)&o->foff, tab->feed_off, (size_t)a->n_lev + 1, "the feeds"));
    CKS(upload_int((void **)&o->ffrom, tab->feed_from, nd, "the feeds"));
    double G[MBLOCH_OPEN_REG_MAX * MBLOCH_OPEN_REG_MAX] = {0};
    for (int t = 0; o->reg && t < a->n_lev; ++t)
        for (int q = tab->feed_off[t]; q < tab->feed_off[t + 1]; ++q)
            G[t * a->n_lev + tab->feed_from[q]] += tab->feed_rate[q];
    if (o->reg) {
        CKS(dalloc(&o->G, n2 * rs(s), "the feed rates"));
        CKS(upload_real(s, o->G, G, n2));
    }
    int *tri = (int *)malloc(2 * (size_t)a->ntri * sizeof(int));
    if (!tri)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    for (int i = 0, q = 0; i < a->n_lev; ++i)
        for (int j = i; j < a->n_lev; ++j, ++q) {
            tri[2 * q] = i;
            tri[2 * q + 1] = j;
        }
    const int st = upload_int((void **)&o->tri, tri, 2 * (size_t)a->ntri, "the element pairs");
    free(tri);
    CKS(st);
    CKS(dalloc(&o->part, (size_t)o->nb * nfield(s) * 2 * rs(s), "the per-block polarisations"));
    return NLSE_OK;
}

#define MBLOCH_OPEN_PIPE_MAX 64 /* z slices a launch of the open kernels */
#define MBLOCH_OPEN_PIPE_ROWS 4 /* time rows a chunk of their z pipeline */

/* The z slices a launch of the open kernel holds (*S): as many groups of
 * its blocks as the device keeps resident at once (a cooperative launch),
 * at most MBLOCH_OPEN_PIPE_MAX and NLSEPY_MBLOCH_PIPE, fewer when their
 * buffers would exceed a quarter of the free memory; 1 when the states
 * live in global memory.  The few atoms of an open benchmark (1024
 * velocity classes: 8 blocks) leave most of the device idle in one z step
 * a launch, and each atom's 2048 dependent RK4 steps cannot be shortened;
 * S z steps in flight fill it.  With S > 1 the slices' fields,
 * polarisations, counters and per-block partials replace the solver's. */
static int open_pipe(nlse_mbloch *s, MBOpen *o, int *S_out)
{
    *S_out = 1;
    if (o->global)
        return NLSE_OK;
    const void *fn = s->p.dtype == NLSE_COMPLEX64 ? open_kernel<float>(o) : open_kernel<double>(o);
    const size_t nf = nfield(s) * sizeof(double2), pb = nfield(s) * 2 * rs(s);
    const int nch = (s->a.n_t + MBLOCH_OPEN_PIPE_ROWS - 1) / MBLOCH_OPEN_PIPE_ROWS;
    int S = 1; /* per slice: the fields, the polarisation and nb partials */
    CKS(pipe_slices(s, fn, o->threads, o->reg ? 0 : o->smem, o->nb, MBLOCH_OPEN_PIPE_MAX, 2 * nf + (size_t)o->nb * pb,
                    &S));
    if (S <= 1)
        return NLSE_OK;
    void *part = NULL, *pE = NULL, *pP = NULL, *Psave = NULL, *pcnt = NULL;
    if (!(try_alloc(&part, (size_t)S * o->nb * pb) && try_alloc(&pE, S * nf) && try_alloc(&pP, S * nf) &&
          try_alloc(&Psave, nf) && try_alloc(&pcnt, (size_t)2 * S * nch * sizeof(int)))) {
        void *ptrs[] = {part, pE, pP, Psave, pcnt};
        nlse_cuda_free_all(ptrs, 5);
        return NLSE_OK; /* one z step a launch */
    }
    void *old[] = {o->part, s->pE, s->pP, s->Psave, s->pcnt};
    nlse_cuda_free_all(old, 5);
    o->part = part;
    s->pE = (double2 *)pE;
    s->pP = (double2 *)pP;
    s->Psave = (double2 *)Psave;
    s->pcnt = (int *)pcnt;
    s->pc = MBLOCH_OPEN_PIPE_ROWS;
    *S_out = S;
    return NLSE_OK;
}

extern "C" int nlse_mbloch_set_open(nlse_mbloch *s, const nlse_mbloch_open *op)
{
    ON_DEVICE(s);
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_open: NULL solver");
    if (s->open || s->j != 0)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_open: call it once, before the first step");
    mbloch_open_tab tab;
    int st = mbloch_open_build(&s->p, op, &tab);
    if (st)
        return st;
    MBOpen *o = (MBOpen *)calloc(1, sizeof(MBOpen));
    st = o ? open_create(s, op, &tab, o) : nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    mbloch_open_free(&tab);
    const size_t npop = 2 * (size_t)s->a.n_t * s->a.n_lev * s->a.n_lev;
    double *pop = NULL, *devb = NULL, *hred = NULL;
    int S = 1;
    if (!st)
        st = open_pipe(s, o, &S);
    if (!st)
        st = dalloc((void **)&pop, npop * sizeof(double), "the ensemble density matrix");
    if (!st && S * o->nb > s->pipe * s->nb)
        st = dalloc((void **)&devb, (size_t)S * o->nb * sizeof(double), "the trace deviations");
    if (!st && s->hred && !(hred = (double *)malloc((2 * nfield(s) + npop) * sizeof(double))))
        st = nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    if (!st && cudaMemset(pop, 0, npop * sizeof(double)) != cudaSuccess)
        st = nlse_fail(NLSE_ERR_BACKEND, "cudaMemset failed");
    if (st) {
        void *ptrs[] = {pop, devb};
        nlse_cuda_free_all(ptrs, 2);
        free(hred);
        open_free(o);
        return st;
    }
    void *old[] = {s->pop, devb ? s->devb : NULL, s->ppart};
    nlse_cuda_free_all(old, 3);
    s->ppart = NULL;
    s->pop = pop;
    if (devb)
        s->devb = devb;
    if (hred) {
        free(s->hred);
        s->hred = hred;
    }
    s->npop = npop;
    s->open = o;
    s->pipe_own = S;
    s->pipe = s->comm ? 1 : S; /* distributed: one z step a launch */
    return NLSE_OK;
}

/* the open kernel over pp.S z slices (one z step a launch when pp.S = 1,
 * the first at the fields eps[0]), then the last slice's polarisation
 * into P (k_sum_warp: the order of the pipeline's shares) */
template <typename T> static int open_launch(nlse_mbloch *s, MBPipe pp, int want_pop)
{
    typedef typename C2<T>::t V;
    MBOpen *o = s->open;
    MBOpenArgs a = o->a;
    a.want_rho = want_pop;
    const double2 *e0 = s->eps[0];
    const V *rho0 = (const V *)o->rho0;
    const T *det = (const T *)s->det, *shift = (const T *)o->shift, *w = (const T *)s->w, *F = (const T *)s->F;
    const T *damp = (const T *)o->damp, *G = (const T *)o->G, *frate = (const T *)o->frate;
    const MBRow *rows = s->rows;
    const int2 *ent = s->ent, *tri = o->tri;
    const int *foff = o->foff, *ffrom = o->ffrom;
    V *part = (V *)o->part, *ppart = (V *)o->ppart, *gwork = (V *)o->gwork;
    double *devb = s->devb;
    void *reg_args[] = {&a, &pp, &e0, &rho0, &det, &shift, &w, &F, &damp, &G, &part, &ppart, &devb};
    void *gen_args[] = {&a, &pp, &e0, &rho0, &det, &shift, &w, &F, &rows, &ent, &damp, &foff, &ffrom, &frate,
                        &tri, &part, &ppart, &devb, &gwork};
    void **args = o->reg ? reg_args : gen_args;
    const dim3 grid(pp.S * o->nb), block(o->threads);
    const size_t smem = o->reg ? 0 : o->smem;
    if (pp.S > 1)
        CK(cudaLaunchCooperativeKernel(open_kernel<T>(o), grid, block, args, smem, s->stream));
    else
        CK(cudaLaunchKernel(open_kernel<T>(o), grid, block, args, smem, s->stream));
    const size_t nf = nfield(s);
    k_sum_warp<V><<<(int)((nf + 7) / 8), 256, 0, s->stream>>>(part + (size_t)((pp.m - 1) % pp.S) * o->nb * nf,
                                                              o->nb, nf, s->p.beta, s->P, s->flag);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* every atom of an open system at the fields eps[0]; P (and pop: the
 * ensemble density matrix) from the per-block partials */
template <typename T> static int open_atoms_t(nlse_mbloch *s, int want_pop)
{
    typedef typename C2<T>::t V;
    MBOpen *o = s->open;
    const size_t np = (size_t)o->a.n_t * o->a.n2;
    if (want_pop && !o->ppart)
        CKS(dalloc(&o->ppart, (size_t)o->nb * np * 2 * rs(s), "the per-block density matrices"));
    MBPipe pp;
    memset(&pp, 0, sizeof pp);
    pp.S = pp.m = 1;
    pp.nb = o->nb;
    CKS(open_launch<T>(s, pp, want_pop));
    if (want_pop)
        k_sum_blocks2<V><<<(int)((np + 255) / 256), 256, 0, s->stream>>>((const V *)o->ppart, o->nb, np, 1.0,
                                                                         (double2 *)s->pop, s->flag);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* the diagonal of the ensemble density matrix, through the host */
static int open_populations(const nlse_mbloch *s, double *out)
{
    const size_t n = (size_t)s->a.n_lev, nt = (size_t)s->a.n_t;
    double *h = (double *)malloc(s->npop * sizeof(double));
    if (!h)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    const cudaError_t err = cudaMemcpy(h, s->pop, s->npop * sizeof(double), cudaMemcpyDeviceToHost);
    for (size_t k = 0; err == cudaSuccess && k < nt; ++k)
        for (size_t i = 0; i < n; ++i)
            out[k * n + i] = h[2 * (k * n * n + i * n + i)];
    free(h);
    CK(err);
    return NLSE_OK;
}

/* every atom over the time grid at the fields eps[0]; P <- the polarisation */
template <typename T> static int atoms_t(nlse_mbloch *s, int want_pop)
{
    typedef typename C2<T>::t V;
    MBArgs a = s->a;
    a.want_pop = want_pop;
    const size_t nf = nfield(s), np = (size_t)a.n_t * a.n_lev;
    if (want_pop && !s->ppart)
        CKS(dalloc(&s->ppart, (size_t)s->nb * np * prs(s), "the per-block populations"));
    if (s->tc) {
        MBPipe pp;
        memset(&pp, 0, sizeof pp);
        pp.S = 1;
        pp.m = 1;
        CKS(launch_tc<T>(s, pp, want_pop));
        if (want_pop)
            k_sum_blocks<double><<<(int)((np + 255) / 256), 256, 0, s->stream>>>((const double *)s->ppart, s->nb,
                                                                                 np, s->pop);
        CK(cudaGetLastError());
        return NLSE_OK;
    }
#define MBLOCH_LAUNCH(NA)                                                                          \
    k_atoms<T, NA><<<s->nb, s->threads, s->smem, s->stream>>>(                                 \
        a, s->eps[0], (const V *)s->psi0, (const T *)s->det, (const T *)s->w,       \
        (const T *)s->F, s->rows, s->ent, (V *)s->part, (T *)s->ppart, s->devb)
    MBLOCH_NA_SWITCH(s->na, MBLOCH_LAUNCH)
#undef MBLOCH_LAUNCH
    CK(cudaGetLastError());
    k_sum_blocks2<V><<<(int)((nf + 255) / 256), 256, 0, s->stream>>>((const V *)s->part, s->nb, nf, s->p.beta,
                                                                     s->P, s->flag);
    if (want_pop)
        k_sum_blocks<T><<<(int)((np + 255) / 256), 256, 0, s->stream>>>((const T *)s->ppart, s->nb, np, s->pop);
    CK(cudaGetLastError());
    return NLSE_OK;
}

static int atoms(nlse_mbloch *s, int want_pop)
{
    if (s->open)
        return s->p.dtype == NLSE_COMPLEX64 ? open_atoms_t<float>(s, want_pop) : open_atoms_t<double>(s, want_pop);
    return s->p.dtype == NLSE_COMPLEX64 ? atoms_t<float>(s, want_pop) : atoms_t<double>(s, want_pop);
}

/* the norm deviations of the last atom solve into s->dev; the flag */
static int finish(nlse_mbloch *s, int *flag, int nblocks)
{
    double *d = (double *)malloc((size_t)nblocks * sizeof(double));
    if (!d)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    cudaError_t err = cudaMemcpyAsync(d, s->devb, (size_t)nblocks * sizeof(double), cudaMemcpyDeviceToHost,
                                      s->stream);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(flag, s->flag, sizeof(int), cudaMemcpyDeviceToHost, s->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(s->stream);
    for (int b = 0; err == cudaSuccess && b < nblocks; ++b)
        s->dev = fmax(s->dev, d[b]);
    free(d);
    CK(err);
    return NLSE_OK;
}

static int clear_flag(nlse_mbloch *s)
{
    CK(cudaMemsetAsync(s->flag, 0, sizeof(int), s->stream));
    return NLSE_OK;
}

/* The sums over the processes of a distributed run, after an atom solve
 * that gave `failed` (a status): P (and with want_pop the populations)
 * through the host, added by comm->sum; the norm deviation by comm->max;
 * *flag: the total polarisation is not finite.  A process whose solve
 * failed takes part with NaN (the others see a blow-up, none waits) and
 * returns its status. */
static int reduce_processes(nlse_mbloch *s, int want_pop, int failed, int *flag)
{
    const size_t np = 2 * nfield(s), npop = s->npop;
    const size_t n = np + (want_pop ? npop : 0);
    int st = failed;
    if (!st) {
        cudaError_t err = cudaMemcpyAsync(s->hred, s->P, np * sizeof(double), cudaMemcpyDeviceToHost, s->stream);
        if (err == cudaSuccess && want_pop)
            err = cudaMemcpyAsync(s->hred + np, s->pop, npop * sizeof(double), cudaMemcpyDeviceToHost, s->stream);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(s->stream);
        st = nlse_cuda_check(err, "copying the polarisation to the host");
    }
    char saved[256] = "";
    if (st) {
        const char *msg = nlse_last_error();
        strncpy(saved, msg ? msg : "", sizeof saved - 1);
        for (size_t q = 0; q < n; ++q)
            s->hred[q] = NAN;
        s->dev = NAN;
    }
    const int st1 = s->comm->sum(s->comm->ctx, s->hred, n);
    const int st2 = s->comm->max(s->comm->ctx, &s->dev, 1);
    if (st)
        return nlse_fail(st, "%s", saved);
    if (st1 || st2)
        return st1 ? st1 : st2;
    *flag = 0;
    for (size_t q = 0; q < np; ++q)
        if (!isfinite(s->hred[q]))
            *flag = 1;
    CK(cudaMemcpyAsync(s->P, s->hred, np * sizeof(double), cudaMemcpyHostToDevice, s->stream));
    if (want_pop)
        CK(cudaMemcpyAsync(s->pop, s->hred + np, npop * sizeof(double), cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

static int atoms_checked(nlse_mbloch *s, int want_pop)
{
    int flag = 0;
    if (s->comm) {
        int st = clear_flag(s);
        if (!st)
            st = atoms(s, want_pop);
        if (!st)
            st = finish(s, &flag, s->open ? s->open->nb : s->nb);
        CKS(reduce_processes(s, want_pop, st, &flag));
    } else {
        CKS(clear_flag(s));
        CKS(atoms(s, want_pop));
        CKS(finish(s, &flag, s->open ? s->open->nb : s->nb));
    }
    if (want_pop)
        s->have_pop = 1;
    if (flag)
        return nlse_fail(NLSE_ERR_BLOWUP, "the polarisation became non-finite at z index %ld", s->j);
    return NLSE_OK;
}

/* eps[1] = eps[0] + i hz (c1 P + c0 Pprev); swap when finite */
static int advance(nlse_mbloch *s, double hz, double c1, double c0)
{
    const size_t nf = nfield(s);
    const int g = (int)((nf + 255) / 256);
    int flag = 0;
    CKS(clear_flag(s));
    k_fields<<<g, 256, 0, s->stream>>>(s->eps[0], s->eps[1], s->P, s->Pprev, nf, hz, c1, c0, s->flag);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(&flag, s->flag, sizeof(int), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (flag)
        return nlse_fail(NLSE_ERR_BLOWUP, "the fields became non-finite stepping from z index %ld", s->j);
    double2 *t = s->eps[0];
    s->eps[0] = s->eps[1];
    s->eps[1] = t;
    return NLSE_OK;
}

static int step(nlse_mbloch *s, int want_pop)
{
    const size_t pb = nfield(s) * sizeof(double2);
    if (s->j == 0) { /* Euler start with euler_substeps steps of h_z / substeps */
        const int sub = s->p.euler_substeps;
        const size_t fb = nfield(s) * sizeof(double2);
        CK(cudaMemcpyAsync(s->eps[2], s->eps[0], fb, cudaMemcpyDeviceToDevice, s->stream));
        for (int q = 0; q < sub; ++q) {
            int st = atoms_checked(s, want_pop && q == 0);
            if (!st && q == 0 &&
                cudaMemcpyAsync(s->Pprev, s->P, pb, cudaMemcpyDeviceToDevice, s->stream) != cudaSuccess)
                st = nlse_fail(NLSE_ERR_BACKEND, "cudaMemcpyAsync failed");
            if (!st)
                st = advance(s, s->p.h_z / sub, 1.0, 0.0);
            if (st) { /* back to the fields of z_0 */
                CK(cudaMemcpyAsync(s->eps[0], s->eps[2], fb, cudaMemcpyDeviceToDevice, s->stream));
                CK(cudaStreamSynchronize(s->stream));
                return st;
            }
        }
        CK(cudaMemcpyAsync(s->P, s->Pprev, pb, cudaMemcpyDeviceToDevice, s->stream));
    } else {
        CKS(atoms_checked(s, want_pop));
        CKS(advance(s, s->p.h_z, 1.5, -0.5));
        CK(cudaMemcpyAsync(s->Pprev, s->P, pb, cudaMemcpyDeviceToDevice, s->stream));
    }
    s->j += 1;
    return NLSE_OK;
}

/* The z steps one launch takes: as many as the slices (pipe) but on the
 * Hopper float kernel, whose slices go round as long as there are z steps
 * (no start lag and drain between launches) */
static int group_max(const nlse_mbloch *s) { return s->tcf == 2 ? (1 << 30) : s->pipe; }

/* m z steps in one launch of min(m, pipe) slices: each AB2 (h_z, 3/2, -1/2) or
 * Euler (h_z / substeps, 1, 0); eps[0] and P advance as m calls of
 * advance() would (the same bits); a non-finite value: NLSE_ERR_BLOWUP
 * with nothing kept */
template <typename T> static int group_t(nlse_mbloch *s, int m, double hz, double c1, double c0)
{
    const size_t nf = nfield(s);
    MBPipe pp;
    memset(&pp, 0, sizeof pp);
    pp.S = mbloch_imin(m, s->pipe);
    pp.m = m;
    pp.C = s->pc;
    pp.nch = pipe_chunks(s);
    pp.nb = s->open ? s->open->nb : s->nb;
    pp.E = s->pE;
    pp.P = s->pP;
    pp.Pprev = s->Pprev;
    pp.done = s->pcnt;
    pp.red = s->pcnt + (size_t)pp.S * pp.nch;
    pp.flag = s->flag;
    pp.beta = s->p.beta;
    pp.hz = hz;
    pp.c1 = c1;
    pp.c0 = c0;
    CK(cudaMemsetAsync(s->pcnt, 0, (size_t)2 * pp.S * pp.nch * sizeof(int), s->stream));
    CKS(clear_flag(s));
    CKS(s->open ? open_launch<T>(s, pp, 0) : launch_tc<T>(s, pp, 0));
    const int S = pp.S; /* z step i in slot i mod S */
    const double2 *Em = m > 1 ? s->pE + ((m - 1) % S) * nf : s->eps[0];
    const double2 *Pp = m > 1 ? s->pP + ((m - 2) % S) * nf : s->Pprev;
    k_fields<<<(int)((nf + 255) / 256), 256, 0, s->stream>>>(Em, s->eps[1], s->P, Pp, nf, hz, c1, c0, s->flag);
    CK(cudaGetLastError());
    int flag = 0;
    CKS(finish(s, &flag, S * pp.nb));
    if (flag & 2) /* not expected: the solver goes on one z step a launch */
        s->pipe = 1;
    if (flag) /* the caller finds the step again one z step a launch */
        return nlse_fail(NLSE_ERR_BLOWUP, "non-finite values in z steps from index %ld", s->j);
    double2 *t = s->eps[0];
    s->eps[0] = s->eps[1];
    s->eps[1] = t;
    return NLSE_OK;
}

static int group(nlse_mbloch *s, int m, double hz, double c1, double c0)
{
    return s->p.dtype == NLSE_COMPLEX64 ? group_t<float>(s, m, hz, c1, c0) : group_t<double>(s, m, hz, c1, c0);
}

static int copy_dd(nlse_mbloch *s, void *dst, const void *src)
{
    CK(cudaMemcpyAsync(dst, src, nfield(s) * sizeof(double2), cudaMemcpyDeviceToDevice, s->stream));
    return NLSE_OK;
}

/* the z step of the Euler start, its substeps in groups; the polarisation
 * of z_0 into P and Pprev as step() leaves them */
static int euler_groups(nlse_mbloch *s)
{
    const int sub = s->p.euler_substeps;
    for (int q = 0, m; q < sub; q += m) {
        m = mbloch_imin(s->pipe, sub - q); /* one round: P of z_0 stays in slot 0 */
        CKS(group(s, m, s->p.h_z / sub, 1.0, 0.0));
        if (q == 0)
            CKS(copy_dd(s, s->Pprev, m > 1 ? s->pP : s->P));
    }
    return copy_dd(s, s->P, s->Pprev);
}

/* n z steps without populations, as n calls of step(s, 0) give them; up
 * to pipe steps a launch.  A blow-up inside a group is found again step
 * by step from the group's start, for the error of step(). */
static int steps(nlse_mbloch *s, int n)
{
    for (int done = 0; done < n;) {
        if (s->pipe <= 1 || (s->j > 0 && n - done == 1)) {
            CKS(step(s, 0));
            ++done;
            continue;
        }
        CKS(copy_dd(s, s->eps[2], s->eps[0]));
        CKS(copy_dd(s, s->Psave, s->Pprev));
        const int m = s->j == 0 ? 1 : mbloch_imin(group_max(s), n - done);
        int st = s->j == 0 ? euler_groups(s) : group(s, m, s->p.h_z, 1.5, -0.5);
        if (!st && s->j > 0)
            st = copy_dd(s, s->Pprev, s->P);
        if (st == NLSE_ERR_BLOWUP) {
            CKS(copy_dd(s, s->eps[0], s->eps[2]));
            CKS(copy_dd(s, s->Pprev, s->Psave));
            for (int q = 0; q < m; ++q)
                CKS(step(s, 0));
        } else if (st) {
            return st;
        } else {
            s->j += m;
        }
        done += m;
    }
    return NLSE_OK;
}

/* run fn(s, arg) (an atom solve, a z step: want_pop; z steps: their
 * number) and time it with CUDA events */
static int timed(nlse_mbloch *s, int (*fn)(nlse_mbloch *, int), int arg, const char *what)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL solver", what);
    CK(cudaEventRecord(s->ev0, s->stream));
    CKS(fn(s, arg));
    CK(cudaEventRecord(s->ev1, s->stream));
    CK(cudaEventSynchronize(s->ev1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, s->ev0, s->ev1));
    s->last_seconds = 1e-3 * ms;
    return NLSE_OK;
}

extern "C" int nlse_mbloch_atoms(nlse_mbloch *s, int want_pop)
{
    ON_DEVICE(s);
    return timed(s, atoms_checked, want_pop, "nlse_mbloch_atoms");
}

extern "C" int nlse_mbloch_step(nlse_mbloch *s, int want_pop)
{
    ON_DEVICE(s);
    return timed(s, step, want_pop, "nlse_mbloch_step");
}

extern "C" int nlse_mbloch_steps(nlse_mbloch *s, int n)
{
    ON_DEVICE(s);
    if (n < 0)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_steps: n = %d must be >= 0", n);
    return timed(s, steps, n, "nlse_mbloch_steps");
}

extern "C" int nlse_mbloch_pipeline(const nlse_mbloch *s) { return s ? s->pipe : 0; }

extern "C" int nlse_mbloch_set_comm(nlse_mbloch *s, const nlse_comm *c)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_comm: NULL solver");
    if (c && (!c->sum || !c->max))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_comm: the table has no sum or max");
    if (c && !s->hred) {
        const size_t n = 2 * nfield(s) + s->npop;
        s->hred = (double *)malloc(n * sizeof(double));
        if (!s->hred)
            return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_comm: out of memory (%zu values)", n);
    }
    if (c && !s->comm)
        s->pipe_own = s->pipe;
    if (!c && s->comm)
        s->pipe = s->pipe_own;
    if (c) /* one z step a launch: the sum over the processes comes between two */
        s->pipe = 1;
    s->comm = c;
    return NLSE_OK;
}

extern "C" int nlse_mbloch_get_fields(const nlse_mbloch *s, double *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_fields: NULL argument");
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(out, s->eps[0], nfield(s) * sizeof(double2), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

extern "C" int nlse_mbloch_get_polarisation(const nlse_mbloch *s, double *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_polarisation: NULL argument");
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(out, s->P, nfield(s) * sizeof(double2), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

extern "C" int nlse_mbloch_get_populations(const nlse_mbloch *s, double *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_populations: NULL argument");
    CK(cudaStreamSynchronize(s->stream));
    if (s->open)
        return open_populations(s, out);
    CK(cudaMemcpy(out, s->pop, (size_t)s->a.n_t * s->a.n_lev * sizeof(double), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

extern "C" int nlse_mbloch_get_density(const nlse_mbloch *s, double *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_density: NULL argument");
    if (!s->open)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_density: the solver is not open (nlse_mbloch_set_open)");
    CK(cudaStreamSynchronize(s->stream));
    CK(cudaMemcpy(out, s->pop, s->npop * sizeof(double), cudaMemcpyDeviceToHost));
    return NLSE_OK;
}

extern "C" long nlse_mbloch_z_index(const nlse_mbloch *s) { return s ? s->j : -1; }
extern "C" double nlse_mbloch_norm_deviation(const nlse_mbloch *s) { return s ? s->dev : NAN; }
extern "C" double nlse_mbloch_last_seconds(const nlse_mbloch *s) { return s ? s->last_seconds : NAN; }
