/*
 * dipolar_lanes.cu -- the Crank-Nicolson solves along the strided axes of
 * the CUDA dipolar GPE solver (Loncar, thesis, eqs. 2.27-2.34: the
 * tridiagonal systems with the precomputed recursion coefficients), and the
 * fixed-order sum of the blocks' partial norms.
 *
 * One thread per line; the 32 threads of a warp own neighbouring lines, so
 * every load and store is a coalesced row.  The forward recursion writes its
 * values into the state itself (shifted two places) and the back
 * substitution reads them back, so no buffer the size of the state is
 * needed (the source's GPU programs keep per-thread work arrays); the last
 * solve of a step also writes |Psi|^2 for the next FFT and the block's part
 * of the Simpson norm, which k_norm sums in a fixed order (results do not
 * depend on timing).
 */
#include "dipolar/dipolar.cuh"

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

template <typename T, typename V, typename C, int Q, bool LAST, bool MOM, bool ROT, int UNR>
__global__ void __launch_bounds__(BLK) k_lanes(V *psi, Grid<T> G, CN<C> cn, int n, Dens<T> out,
                                               RotCN<C> rc)
{
    __shared__ double red[4 * (BLK / 32)];
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    const long long lanes = Q == 0 ? (long long)n1 * n2 : Q == 1 ? (long long)n0 * n2
                                                                   : (long long)n0 * n1;
    const C A = cn.A, A0r = cn.A0r;
    double nsum = 0, mom[3] = {0, 0, 0};
    const double *wxq = Q == 0 ? G.q0 : Q == 1 ? G.q1 : G.q2; /* w x^2 along the lane */
    for (long long lane = (long long)blockIdx.x * blockDim.x + threadIdx.x; lane < lanes;
         lane += (long long)gridDim.x * blockDim.x) {
        const LaneMap<Q> L(lane, n0, n1, n2);
        V *p = psi + L.base;
        const long long rs = L.rs;
        /* forward: beta_{i-1} = gamma_i (A beta_i - rhs_i), stored in slot i + 1 */
        V beta;
        const C *al = cn.al;
        if constexpr (ROT) { /* the lane's line of the rotating frame's tables */
            int ix[3];
            L.ijk(0, &ix[0], &ix[1], &ix[2]);
            const long long l = ix[rc.other] + rc.off;
            const C am = rc.am[l], ap = rc.ap[l], *ga = rc.ga + l * n;
            al = rc.al + l * n;
            CN_FORWARD_OFF(V, p, rs, n, (ap * pp_ + am * pm_), ap, A0r, ga, UNR, beta, (void)cc);
        } else {
            CN_FORWARD(V, p, rs, n, A, A0r, cn.ga, UNR, beta, (void)cc);
        }
        /* back: x_m = alpha_{m-1} x_{m-1} + beta_{m-1} (slot m + 1), x_0 = 0 */
        V x = zero<V>();
        p[0] = x;
        double ls = 0, lq = 0;
        CN_BACK(V, p, rs, n, al, UNR, x, {
            p[mm * rs] = x;
            if (LAST) {
                int i, j, k;
                L.ijk(mm, &i, &j, &k);
                T d = abs2(x);
                if (out.dens)
                    out.dens[((long long)i * n1 + j) * G.nlp + k] = d;
                /* read-only loads, free to start before the stores above */
                const double wq = __ldg(Q == 0 ? &G.w0[i] : Q == 1 ? &G.w1[j] : &G.w2[k]);
                ls += wq * (double)d;
                if (MOM)
                    lq += __ldg(&wxq[mm]) * (double)d;
            }
        });
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
            if (MOM)
                add_line_moments(mom, Q, ls, lq, wf, i, j, k, G);
        }
    }
    if (LAST)
        write_partials(nsum, mom, red, out);
}

/* ------------------------------------------------------------------ */
/* norms, density, scaling                                            */
/* ------------------------------------------------------------------ */

/* norm[0] = sum of the parts; bad[0] = first step with a bad norm; with
 * rec, rec[0] = the norm and rec[1 + q] the sums of the moments' parts
 * (partial[(1 + q) NB_MAX + b], Dens::mom), each in the same fixed order. */
__global__ void k_norm(const double *partial, int count, double *norm, int *bad, int step,
                       double *rec)
{
    __shared__ double red[4 * 8];
    double v[4] = {0, 0, 0, 0}, t[4];
    for (int q = threadIdx.x; q < count; q += blockDim.x) {
        v[0] += partial[q];
        if (rec)
            for (int a = 0; a < 3; ++a)
                v[1 + a] += partial[(size_t)(1 + a) * NB_MAX + q];
    }
    block_sums<4>(v, red, t);
    if (threadIdx.x == 0) {
        norm[0] = t[0];
        if (rec)
            for (int a = 0; a < 4; ++a)
                rec[a] = t[a];
        if (!(t[0] > 0) || !isfinite(t[0]))
            if (bad[0] < 0)
                bad[0] = step;
    }
}

/* ------------------------------------------------------------------ */
/* launches                                                           */
/* ------------------------------------------------------------------ */

/* A sweep of few lines (those of the grids of the DBEC-GP and BEC-GP-ROT
 * programs: the x sweep of 257 x 257 x 33 has 8481 lines of 257 points) at
 * BLK threads a block leaves most multiprocessors idle, and each thread
 * waits for one round trip of UNR loads every UNR points: such a sweep is
 * bound by latency, not bandwidth.  Below FEW_LINES lines the launch takes
 * FEW_BLK threads a block (every multiprocessor gets lines) and keeps
 * UNR_FEW(V) loads in flight a thread.  The arithmetic of each line is the
 * same; the norm's partial sums are grouped by the smaller blocks. */
#define FEW_LINES 32768
#define FEW_BLK 32
#define UNR_FEW(V) (sizeof(V) > 8 ? 8 : 16)

/* One k_lanes launch of `lines` lines: the plain sweep, the last one of a
 * step (density and norm), or the last one of a recorded step (and the
 * moments); the number of blocks (the norm's parts) is returned. */
template <typename T, typename V, typename C, int Q, bool ROT, int UNR>
static void launch_lanes_unr(nlse_dipolar *s, int blocks, int threads, V *psi, const Grid<T> &G,
                             const CN<C> &cn, int n, const Dens<T> &out, bool last,
                             const RotCN<C> &rc)
{
    if (!last)
        k_lanes<T, V, C, Q, false, false, ROT, UNR><<<blocks, threads, 0, s->stream>>>(psi, G, cn, n, out, rc);
    else if (out.mom)
        k_lanes<T, V, C, Q, true, true, ROT, UNR><<<blocks, threads, 0, s->stream>>>(psi, G, cn, n, out, rc);
    else
        k_lanes<T, V, C, Q, true, false, ROT, UNR><<<blocks, threads, 0, s->stream>>>(psi, G, cn, n, out, rc);
}

template <typename T, typename V, typename C, int Q, bool ROT>
static int launch_lanes(nlse_dipolar *s, long long lines, V *psi, const Grid<T> &G, const CN<C> &cn,
                        int n, const Dens<T> &out, bool last, const RotCN<C> &rc)
{
    if (lines < FEW_LINES) {
        const int blocks = grid_for(lines, FEW_BLK);
        launch_lanes_unr<T, V, C, Q, ROT, UNR_FEW(V)>(s, blocks, FEW_BLK, psi, G, cn, n, out, last, rc);
        return blocks;
    }
    const int blocks = grid_for(lines, BLK);
    launch_lanes_unr<T, V, C, Q, ROT, UNR_OF(V)>(s, blocks, BLK, psi, G, cn, n, out, last, rc);
    return blocks;
}

template <typename T, typename V, typename C, bool ROT>
static int lanes_of(nlse_dipolar *s, V *psi, const Grid<T> &G, const CN<C> &cn, int axis, int n,
                    const Dens<T> &out, bool last, int *parts, const RotCN<C> &rc)
{
    const long long n0 = G.n0, n1 = G.n1, n2 = G.n2;
    int blocks;
    if (axis == 2)
        blocks = launch_lanes<T, V, C, 2, ROT>(s, n0 * n1, psi, G, cn, n, out, last, rc);
    else if (axis == 1)
        blocks = launch_lanes<T, V, C, 1, ROT>(s, n0 * n2, psi, G, cn, n, out, last, rc);
    else /* axis 0 ends a 3D step (not on the pencils of a slab) */
        blocks = launch_lanes<T, V, C, 0, ROT>(s, n1 * n2, psi, G, cn, n, out, last, rc);
    if (last)
        *parts = blocks;
    return NLSE_OK;
}

template <typename T, typename V, typename C>
int dipolar_lanes(nlse_dipolar *s, V *psi, const Grid<T> &G, const CN<C> &cn, int axis, int n,
                  const Dens<T> &out, bool last, int *parts)
{
    return lanes_of<T, V, C, false>(s, psi, G, cn, axis, n, out, last, parts, RotCN<C>());
}

template <typename T>
int dipolar_rot_lanes(nlse_dipolar *s, typename Vec2<T>::T *psi, const Grid<T> &G, int sw,
                      int real_time, int axis, int n, const Dens<T> &out, bool last, int *parts,
                      int off)
{
    typedef typename Vec2<T>::T T2;
    const T2 *tab = (const T2 *)s->rt[sw][real_time];
    const long long lines = (long long)s->L.n[s->rq[1 - sw]];
    RotCN<T2> rc;
    rc.am = tab;
    rc.ap = tab + lines;
    rc.al = tab + 2 * lines;
    rc.ga = tab + 2 * lines + lines * n;
    rc.other = s->rq[1 - sw];
    rc.off = off;
    CN<T2> cn; /* the right-hand side's diagonal: 1 - r or 1 - i r */
    const double r = s->p.dt * s->p.kin / (s->L.h[axis] * s->L.h[axis]);
    const double a0r[2] = {real_time ? 1.0 : 1.0 - r, real_time ? -r : 0.0};
    set_scalar(&cn.A0r, a0r);
    cn.A = cn.A0r;
    cn.al = cn.ga = NULL;
    return lanes_of<T, T2, T2, true>(s, psi, G, cn, axis, n, out, last, parts, rc);
}
template int dipolar_rot_lanes<float>(nlse_dipolar *, float2 *, const Grid<float> &, int, int, int, int, const Dens<float> &, bool, int *, int);
template int dipolar_rot_lanes<double>(nlse_dipolar *, double2 *, const Grid<double> &, int, int, int, int, const Dens<double> &, bool, int *, int);

void dipolar_norm(nlse_dipolar *s, int parts, int step, double *rec)
{
    k_norm<<<1, 256, 0, s->stream>>>(s->partial, parts, s->norm, s->bad, step, rec);
}

template int dipolar_lanes<float, float2, float2>(nlse_dipolar *, float2 *, const Grid<float> &, const CN<float2> &, int, int, const Dens<float> &, bool, int *);
template int dipolar_lanes<float, float, float>(nlse_dipolar *, float *, const Grid<float> &, const CN<float> &, int, int, const Dens<float> &, bool, int *);
template int dipolar_lanes<float, float2, float>(nlse_dipolar *, float2 *, const Grid<float> &, const CN<float> &, int, int, const Dens<float> &, bool, int *);
template int dipolar_lanes<double, double2, double2>(nlse_dipolar *, double2 *, const Grid<double> &, const CN<double2> &, int, int, const Dens<double> &, bool, int *);
template int dipolar_lanes<double, double, double>(nlse_dipolar *, double *, const Grid<double> &, const CN<double> &, int, int, const Dens<double> &, bool, int *);
template int dipolar_lanes<double, double2, double>(nlse_dipolar *, double2 *, const Grid<double> &, const CN<double> &, int, int, const Dens<double> &, bool, int *);
