/*
 * mbloch_open.cuh -- the density-matrix atoms of an open Maxwell-Bloch
 * solver on CUDA (nlsepy/mbloch.h, nlse_mbloch_set_open;
 * docs/models/mbloch.md, "Open systems"), included by mbloch.cu after its
 * helpers (coef_set, C2, cmac): the Lindblad master equation
 *   d rho/dt = i [H_D, rho] + decay channels + pure dephasing
 * (H_D of eq. 4 of source 004) stepped by the RK4 of algorithm 2, the
 * polarisation of eq. 6 as sum F rho_{b a}; written once for float and
 * double (T).
 *
 * A block owns na atoms for the whole time grid.  Their matrices (rho, the
 * RK4 sum and two stage inputs, [atom][i][j], rows of odd stride ld) sit in
 * shared memory, or in a per-block slice of global memory when they do not
 * fit; each thread takes elements (atom, i <= j) with a block stride and
 * writes (j, i) as the conjugate, so any level count runs and rho stays
 * Hermitian.  Where every element has a thread of its own (up to 224
 * elements a block: 20 levels), the thread keeps its element of rho and of
 * the RK4 sum in registers (open_stage_own).  The stage loops are bound by
 * the shared-memory accesses of the band sums, so each access saved counts.
 * The coupling rows and the coefficient sets (0.5 F eps_l, three a step,
 * rotated as in k_atoms) are those of the amplitude kernel.  After each
 * step the block writes its atoms' weighted polarisation (and density
 * matrix) as a per-block partial, summed over the blocks in a fixed order
 * (the polarisation by k_sum_warp, the density matrix by k_sum_blocks2).
 *
 * With at most three levels (two-level, Lambda, V and ladder systems) a
 * thread holds one atom's matrices in registers instead (k_open_reg, the
 * coupling dense in shared memory, one barrier a time step), unless
 * NLSEPY_MBLOCH_KERNEL=simt asks for the general kernel.
 *
 * Both kernels take several z steps a launch (the z pipeline of
 * mbloch_tc.cuh, "z slices in flight"): z step i + 1 follows z step i
 * along the time grid, its fields made from z step i's per-block partials
 * a chunk of C rows at a time (mbloch_share: the order and roundings of
 * k_sum_warp and k_fields, so the result is that of one z step a launch,
 * bit for bit).  Row k reads the fields of rows k - 1 and k, so a block
 * waits for chunk c when row k opens it, after its share of chunk c + 1.
 */

struct MBOpenArgs {
    int n_g, n_lev, n2, n_f, n_t, n_atoms, na, l_min, n2c, want_rho;
    int ntri;            /* elements i <= j: n (n + 1) / 2 */
    int ld, sn2;         /* a working matrix's row stride (n | 1) and size (n ld) */
    double h, kg, ke;
};

/* the host's view of an open solver's device arrays */
struct MBOpen {
    MBOpenArgs a;
    int nb, threads, global;   /* global: the states live in gwork */
    size_t smem;
    void *rho0, *shift, *damp, *frate, *part, *ppart, *gwork;
    int *foff, *ffrom;
    int2 *tri;                 /* the elements (i, j), i <= j, a thread computes */
    int reg;                   /* k_open_reg (n <= 3, an atom a thread) instead of k_open */
    void *G;                   /* k_open_reg: G[t n + f], the rates from f to t */
};

/* Where a thread's elements start: atom at, element r of tri (x = at ntri
 * + r = threadIdx.x), and that element's pair p; the later ones follow by
 * steps of blockDim.x without a division (open_next). */
struct MBOpenSlot {
    int at, r;
    int2 p;
};

__device__ __forceinline__ void open_next(const MBOpenArgs &a, int &at, int &r)
{
    r += blockDim.x;
    while (r >= a.ntri) {
        r -= a.ntri;
        ++at;
    }
}

/* k_ij of one element (times h): i ((E_i - E_j) y_ij + (V y)_ij - (y V)_ij)
 * - damp_ij y_ij + [i = j] sum of the feeds.  Y: the atom's matrix (row
 * stride ld); the two band sums in two accumulators (two shorter chains of
 * dependent FMAs), added at the end. */
template <typename T>
__device__ __forceinline__ typename C2<T>::t open_deriv(const MBOpenArgs &a, const typename C2<T>::t *Y,
                                                        const typename C2<T>::t *C, const MBRow *rows,
                                                        const T *E, const T *damp, const int *foff,
                                                        const int *ffrom, const T *frate, int i, int j)
{
    typedef typename C2<T>::t V;
    const int ld = a.ld;
    const V y = Y[i * ld + j];
    const T de = E[i] - E[j];
    V s = C2<T>::make(de * y.x, de * y.y), u = C2<T>::make(0, 0);
    const MBRow Ri = rows[i], Rj = rows[j];
    const V *Ci = C + Ri.off, *Yi = Y + Ri.src * ld + j;
#pragma unroll 3
    for (int q = 0; q < Ri.cnt; ++q) /* + V_ix y_xj */
        cmac(s, Ci[q], Yi[q * ld]);
    const V *Cj = C + Rj.off, *Yj = Y + i * ld + Rj.src;
#pragma unroll 3
    for (int q = 0; q < Rj.cnt; ++q) { /* + y_ix conj(V_jx), subtracted below */
        const V c = Cj[q], z = Yj[q];
        u.x = fmaT(c.x, z.x, u.x);
        u.x = fmaT(c.y, z.y, u.x);
        u.y = fmaT(c.x, z.y, u.y);
        u.y = fmaT(-c.y, z.x, u.y);
    }
    s.x -= u.x;
    s.y -= u.y;
    const T g = damp[i * a.n_lev + j];
    V k = C2<T>::make(-s.y - g * y.x, s.x - g * y.y);
    if (i == j)
        for (int q = foff[i]; q < foff[i + 1]; ++q) {
            const V p = Y[ffrom[q] * (ld + 1)];
            k.x += frate[q] * p.x;
            k.y += frate[q] * p.y;
        }
    const T h = (T)a.h;
    return C2<T>::make(h * k.x, h * k.y);
}

/* the RK4 combination of element x from its k: out = rho + ca k and the
 * sum acc = rho + cb k (kind 0), acc += cb k (kind 1); rho = acc + cb k
 * (kind 2) */
template <typename T>
__device__ __forceinline__ void open_combine(typename C2<T>::t *O, typename C2<T>::t *R, typename C2<T>::t *AC,
                                             int x, typename C2<T>::t k, T ca, T cb, int kind)
{
    if (kind == 2) {
        R[x] = C2<T>::make(AC[x].x + cb * k.x, AC[x].y + cb * k.y);
    } else {
        const typename C2<T>::t r = R[x], base = kind == 0 ? r : AC[x];
        O[x] = C2<T>::make(r.x + ca * k.x, r.y + ca * k.y);
        AC[x] = C2<T>::make(base.x + cb * k.x, base.y + cb * k.y);
    }
}

/* one RK4 stage over the block's elements i <= j (tri), each writing
 * (j, i) too with the conjugate k, so rho stays Hermitian: kind 0 first,
 * 1 middle, 2 last.  The thread's first element comes from its slot. */
template <typename T>
__device__ __forceinline__ void open_stage(const MBOpenArgs &a, const MBOpenSlot &sl,
                                           const typename C2<T>::t *C, const MBRow *rows, const T *E,
                                           const T *damp, const int *foff, const int *ffrom, const T *frate,
                                           const int2 *tri, const typename C2<T>::t *Y, typename C2<T>::t *O,
                                           typename C2<T>::t *R, typename C2<T>::t *AC, T ca, T cb, int kind)
{
    typedef typename C2<T>::t V;
    int at = sl.at, r = sl.r;
    int2 p = sl.p;
    for (int x = threadIdx.x; x < a.na * a.ntri; x += blockDim.x) {
        if (x != (int)threadIdx.x)
            p = tri[r];
        const int base = at * a.sn2;
        const V k = open_deriv<T>(a, Y + base, C, rows, E + at * a.n_lev, damp, foff, ffrom, frate, p.x, p.y);
        open_combine<T>(O, R, AC, base + p.x * a.ld + p.y, k, ca, cb, kind);
        if (p.x != p.y)
            open_combine<T>(O, R, AC, base + p.y * a.ld + p.x, C2<T>::make(k.x, -k.y), ca, cb, kind);
        open_next(a, at, r);
    }
}

/* The same stage where each thread owns at most one element (na ntri <=
 * blockDim.x, the slot's): its rho and RK4 sum stay in registers (r, ac),
 * so a stage reads the others' stage input and writes its own output
 * only; kind 2 writes rho to R, the next step's first input.  The same
 * arithmetic as open_stage, so the same bits. */
template <typename T>
__device__ __forceinline__ void open_stage_own(const MBOpenArgs &a, const MBOpenSlot &sl,
                                               const typename C2<T>::t *C, const MBRow *rows, const T *E,
                                               const T *damp, const int *foff, const int *ffrom, const T *frate,
                                               const typename C2<T>::t *Y, typename C2<T>::t *O,
                                               typename C2<T>::t &r, typename C2<T>::t &ac, T ca, T cb, int kind)
{
    typedef typename C2<T>::t V;
    if ((int)threadIdx.x >= a.na * a.ntri)
        return;
    const int base = sl.at * a.sn2;
    const V k = open_deriv<T>(a, Y + base, C, rows, E + sl.at * a.n_lev, damp, foff, ffrom, frate, sl.p.x, sl.p.y);
    V o;
    if (kind == 2) {
        r = C2<T>::make(ac.x + cb * k.x, ac.y + cb * k.y);
        o = r;
    } else {
        o = C2<T>::make(r.x + ca * k.x, r.y + ca * k.y);
        const V b = kind == 0 ? r : ac;
        ac = C2<T>::make(b.x + cb * k.x, b.y + cb * k.y);
    }
    O[base + sl.p.x * a.ld + sl.p.y] = o;
    if (sl.p.x != sl.p.y)
        O[base + sl.p.y * a.ld + sl.p.x] = C2<T>::make(o.x, -o.y);
}

/* t_k: the block's weighted polarisation (and density matrix) partials,
 * the trace deviation of its atoms (a warp an atom, a butterfly) */
template <typename T>
__device__ __forceinline__ void open_record(const MBOpenArgs &a, int k, const typename C2<T>::t *R, const T *W,
                                            const T *Fg, const MBRow *prow, int nvalid, typename C2<T>::t *part,
                                            typename C2<T>::t *ppart, double &dev)
{
    typedef typename C2<T>::t V;
    const size_t blk = blockIdx.x;
    const int n = a.n_lev, ld = a.ld, ne = a.n_lev - a.n_g;
    for (int li = threadIdx.x; li < a.n_f; li += blockDim.x) {
        const MBRow P = prow[li];
        const int l = a.l_min + li;
        V s = C2<T>::make(0, 0);
        for (int at = 0; at < a.na; ++at) {
            V u = C2<T>::make(0, 0);
            for (int q = 0; q < P.cnt; ++q) {
                const int m = P.src + q;
                const T f = Fg[m * ne + m + l];
                const V r = R[at * a.sn2 + (a.n_g + m + l) * ld + m];
                u.x += f * r.x;
                u.y += f * r.y;
            }
            s.x += W[at] * u.x;
            s.y += W[at] * u.y;
        }
        part[(blk * a.n_t + k) * a.n_f + li] = s;
    }
    for (int e = threadIdx.x; a.want_rho && e < a.n2; e += blockDim.x) {
        const int i = e / n, x = i * ld + e - i * n;
        V s = C2<T>::make(0, 0);
        for (int at = 0; at < a.na; ++at) {
            s.x += W[at] * R[at * a.sn2 + x].x;
            s.y += W[at] * R[at * a.sn2 + x].y;
        }
        ppart[(blk * a.n_t + k) * a.n2 + e] = s;
    }
    const int lane = threadIdx.x & 31;
    for (int at = threadIdx.x >> 5; at < nvalid; at += blockDim.x >> 5) {
        double tr = 0;
        for (int i = lane; i < n; i += 32)
            tr += (double)R[at * a.sn2 + i * (ld + 1)].x;
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            tr += __shfl_xor_sync(0xffffffffu, tr, d);
        dev = fmax(dev, fabs(tr - 1.0));
    }
}

/* the z pipeline at the start of row k of z step i (block b): where row k
 * opens chunk c (k = 0: chunks 0 and 1), the block's share of chunk c + 1,
 * then the wait for chunk c's fields */
template <typename V>
__device__ __forceinline__ void open_pipe_row(const MBOpenArgs &a, const MBPipe &pp, int i, int b, int k,
                                              const double2 *eps, const V *part)
{
    if (pp.S <= 1 || i == 0 || k % pp.C != 0)
        return;
    const int warp = threadIdx.x >> 5, nw = blockDim.x >> 5, lane = threadIdx.x & 31, c = k / pp.C;
    for (int q = k == 0 ? 0 : c + 1; q <= c + 1 && q < pp.nch; ++q)
        mbloch_share<V>(a.n_t, a.n_f, pp, i, b, q, eps, part, warp, nw, lane);
    mbloch_wait(pp.red + (i % pp.S) * pp.nch + c, mbloch_red_target(pp, i), pp.flag);
}

/* after the record of row k of z step i: its chunk is counted once the
 * chunk's last row is written */
__device__ __forceinline__ void open_pipe_done(const MBOpenArgs &a, const MBPipe &pp, int i, int k)
{
    if (pp.S > 1 && ((k + 1) % pp.C == 0 || k == a.n_t - 1))
        mbloch_signal(pp.done + (i % pp.S) * pp.nch + k / pp.C);
}

/* z slice and block of a pipelined launch (S slices of pp.nb blocks) */
__device__ __forceinline__ int open_slice(const MBPipe &pp) { return pp.S > 1 ? (int)blockIdx.x / pp.nb : 0; }
__device__ __forceinline__ int open_block(const MBPipe &pp) { return pp.S > 1 ? (int)blockIdx.x % pp.nb : (int)blockIdx.x; }

/* Dynamic shared memory of k_open: three coefficient sets, the coupling
 * and polarisation rows, the atoms' level energies and weights, then (SH)
 * the four working matrices of the block's atoms. */
template <typename T> __host__ __device__ inline size_t open_head_bytes(const MBOpenArgs &a)
{
    const size_t v = 2 * sizeof(T), t = sizeof(T);
    const size_t head = 3 * (size_t)a.n2c * v + (size_t)(a.n_lev + a.n_f) * sizeof(MBRow) +
                        ((size_t)a.na * (a.n_lev + 1)) * t;
    return (head + v - 1) / v * v;
}

/* SH: the working matrices in shared memory (else gwork, one slice of it
 * a block); a template argument so that shared accesses compile to shared
 * loads and stores, not generic ones.  OWN: each thread owns at most one
 * element (open_stage_own).  At most MBLOCH_OPEN_THREADS threads, four
 * blocks an SM: 72 registers, so that a 20-level system's 210 elements
 * (224 threads) keep rho and the RK4 sum in registers and its 256
 * one-atom blocks fit two z slices on the device. */
#define MBLOCH_OPEN_THREADS 224
template <typename T, bool SH, bool OWN>
__global__ void __launch_bounds__(MBLOCH_OPEN_THREADS, 4) k_open(MBOpenArgs a, const __grid_constant__ MBPipe pp, const double2 *eps, const typename C2<T>::t *rho0, const T *det,
                       const T *shift, const T *w, const T *Fg, const MBRow *rows_g, const int2 *ent,
                       const T *damp, const int *foff, const int *ffrom, const T *frate, const int2 *tri,
                       typename C2<T>::t *part, typename C2<T>::t *ppart, double *devb,
                       typename C2<T>::t *gwork)
{
    typedef typename C2<T>::t V;
    extern __shared__ __align__(16) unsigned char smem[];
    const int ns = a.na * a.sn2;
    V *Cs = (V *)smem;
    MBRow *rows = (MBRow *)(Cs + 3 * a.n2c);
    T *E = (T *)(rows + a.n_lev + a.n_f), *W = E + a.na * a.n_lev;
    V *st = SH ? (V *)(smem + open_head_bytes<T>(a)) : gwork + blockIdx.x * 4 * (size_t)ns;
    V *R = st, *AC = R + ns, *Y0 = AC + ns, *Y1 = Y0 + ns;
    const int sl = open_slice(pp), bl = open_block(pp);
    const double2 *Ez = mbloch_fields_n((size_t)a.n_t * a.n_f, pp, sl, eps);
    const int D0 = bl * a.na;
    const int nvalid = min(a.na, a.n_atoms - D0);
    for (int x = threadIdx.x; x < a.na * a.n2; x += blockDim.x) {
        const int at = x / a.n2, e = x - at * a.n2, i = e / a.n_lev, D = D0 + min(at, nvalid - 1);
        R[at * a.sn2 + i * a.ld + e - i * a.n_lev] = rho0[(size_t)D * a.n2 + e]; /* padding: the last atom, weight 0 */
    }
    for (int x = threadIdx.x; x < a.na * a.n_lev; x += blockDim.x) {
        const int at = x / a.n_lev, i = x - at * a.n_lev, D = D0 + min(at, nvalid - 1);
        T e = i < a.n_g ? (T)((double)i * a.kg) + det[D] : (T)((double)(i - a.n_g) * a.ke);
        if (shift)
            e += shift[(size_t)D * a.n_lev + i];
        E[x] = e;
    }
    for (int at = threadIdx.x; at < a.na; at += blockDim.x)
        W[at] = at < nvalid ? w[D0 + at] : (T)0;
    for (int q = threadIdx.x; q < a.n_lev + a.n_f; q += blockDim.x)
        rows[q] = rows_g[q];
    MBOpenSlot slot;
    slot.at = (int)threadIdx.x / a.ntri;
    slot.r = (int)threadIdx.x - slot.at * a.ntri;
    slot.p = (int)threadIdx.x < a.na * a.ntri ? tri[slot.r] : make_int2(0, 0);
    const MBRow *prow = rows + a.n_lev;
    int prv = 1, mid = 2, nxt = 0;
    open_pipe_row<V>(a, pp, sl, bl, 0, eps, part);
    coef_set<T, true>(Cs + nxt * a.n2c, a.n2c, ent, Fg, Ez, Ez, false);
    __syncthreads();
    double dev = 0;
    open_record<T>(a, 0, R, W, Fg, prow, nvalid, part, ppart, dev);
    open_pipe_done(a, pp, sl, 0);
    const T half = (T)0.5, one = 1, sixth = (T)(1.0 / 6.0), third = (T)(1.0 / 3.0);
    V r = C2<T>::make(0, 0), ac = r;
    if (OWN && (int)threadIdx.x < a.na * a.ntri)
        r = R[slot.at * a.sn2 + slot.p.x * a.ld + slot.p.y];
    for (int k = 1; k < a.n_t; ++k) {
        const int t0 = prv;
        prv = nxt;
        nxt = mid;
        mid = t0;
        open_pipe_row<V>(a, pp, sl, bl, k, eps, part);
        coef_set<T, true>(Cs + mid * a.n2c, a.n2c, ent, Fg, Ez + (size_t)(k - 1) * a.n_f, Ez + (size_t)k * a.n_f, true);
        coef_set<T, true>(Cs + nxt * a.n2c, a.n2c, ent, Fg, NULL, Ez + (size_t)k * a.n_f, false);
        if (OWN) {
            open_stage_own<T>(a, slot, Cs + prv * a.n2c, rows, E, damp, foff, ffrom, frate, R, Y0, r, ac, half, sixth, 0);
            __syncthreads();
            open_stage_own<T>(a, slot, Cs + mid * a.n2c, rows, E, damp, foff, ffrom, frate, Y0, Y1, r, ac, half, third, 1);
            __syncthreads();
            open_stage_own<T>(a, slot, Cs + mid * a.n2c, rows, E, damp, foff, ffrom, frate, Y1, Y0, r, ac, one, third, 1);
            __syncthreads();
            open_stage_own<T>(a, slot, Cs + nxt * a.n2c, rows, E, damp, foff, ffrom, frate, Y0, R, r, ac, 0, sixth, 2);
            __syncthreads();
            open_record<T>(a, k, R, W, Fg, prow, nvalid, part, ppart, dev);
            open_pipe_done(a, pp, sl, k);
            continue;
        }
        open_stage<T>(a, slot, Cs + prv * a.n2c, rows, E, damp, foff, ffrom, frate, tri, R, Y0, R, AC, half, sixth, 0);
        __syncthreads();
        open_stage<T>(a, slot, Cs + mid * a.n2c, rows, E, damp, foff, ffrom, frate, tri, Y0, Y1, R, AC, half, third, 1);
        __syncthreads();
        open_stage<T>(a, slot, Cs + mid * a.n2c, rows, E, damp, foff, ffrom, frate, tri, Y1, Y0, R, AC, one, third, 1);
        __syncthreads();
        open_stage<T>(a, slot, Cs + nxt * a.n2c, rows, E, damp, foff, ffrom, frate, tri, Y0, R, R, AC, 0, sixth, 2);
        __syncthreads();
        open_record<T>(a, k, R, W, Fg, prow, nvalid, part, ppart, dev);
        open_pipe_done(a, pp, sl, k);
    }
    __shared__ double dmax[MBLOCH_MAX_THREADS / 32];
    const double m = nlse_block_max(dev, dmax);
    if (threadIdx.x == 0)
        devb[blockIdx.x] = m;
}

/* ------------------------------------------------------------------ */
/* few levels (n <= 3): one atom a thread, its matrices in registers  */
/* ------------------------------------------------------------------ */

#define MBLOCH_OPEN_REG_MAX 3       /* levels of the register kernel      */
#define MBLOCH_OPEN_REG_THREADS 128 /* atoms a block of the register kernel */

/* The dense coupling V at one time (or the mean of two), every element
 * by its own thread: V[m][n_g+n] = 0.5 F[m][n] conj(eps_{n-m}), V[n_g+n][m]
 * its conjugate, 0 elsewhere (the arithmetic of coef_set). */
template <typename T>
__device__ void open_dense_set(const MBOpenArgs &a, typename C2<T>::t *Vd, const T *Fg, const double2 *e0,
                               const double2 *e1, bool mean)
{
    const int n = a.n_lev, ne = n - a.n_g;
    for (int q = threadIdx.x; q < n * n; q += blockDim.x) {
        const int i = q / n, j = q - i * n;
        const bool gi = i < a.n_g, gj = j < a.n_g;
        typename C2<T>::t v = C2<T>::make(0, 0);
        if (gi != gj) {
            const int m = gi ? i : j, x = (gi ? j : i) - a.n_g, li = x - m - a.l_min;
            if (li >= 0 && li < a.n_f) {
                double2 e = __ldcg(e1 + li); /* through L2: written by other blocks of a pipelined launch */
                if (mean) {
                    const double2 d = __ldcg(e0 + li);
                    e.x = 0.5 * (e.x + d.x);
                    e.y = 0.5 * (e.y + d.y);
                }
                const T f = (T)0.5 * Fg[m * ne + x], ex = (T)e.x, ey = (T)e.y;
                v = C2<T>::make(f * ex, gi ? -f * ey : f * ey);
            }
        }
        Vd[q] = v;
    }
}

/* k = h (i ((E_i - E_j) y + V y - y V) - damp y + G diag(y)) on registers */
template <typename T, int N>
__device__ __forceinline__ void open_reg_deriv(const typename C2<T>::t (&y)[N][N], const typename C2<T>::t *V,
                                               const T (&E)[N], const T *damp, const T *G, T h,
                                               typename C2<T>::t (&k)[N][N])
{
    typedef typename C2<T>::t Vt;
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const T de = E[i] - E[j];
            Vt s = C2<T>::make(de * y[i][j].x, de * y[i][j].y);
#pragma unroll
            for (int x = 0; x < N; ++x) {
                cmac(s, V[i * N + x], y[x][j]); /* + V_ix y_xj */
                const Vt c = V[x * N + j], z = y[i][x]; /* - y_ix V_xj */
                s.x -= z.x * c.x - z.y * c.y;
                s.y -= z.x * c.y + z.y * c.x;
            }
            const T g = damp[i * N + j];
            Vt d = C2<T>::make(-s.y - g * y[i][j].x, s.x - g * y[i][j].y);
            if (i == j)
#pragma unroll
                for (int f = 0; f < N; ++f) {
                    d.x += G[i * N + f] * y[f][f].x;
                    d.y += G[i * N + f] * y[f][f].y;
                }
            k[i][j] = C2<T>::make(h * d.x, h * d.y);
        }
}

/* RK4's middle stages in k_open_reg: the next stage's input y = r + c k and
 * the weighted sum ac += k / 3 (c = 1 is exact: the same bits as r + k). */
template <typename T, int N>
__device__ __forceinline__ void open_reg_mid(const typename C2<T>::t (&r)[N][N],
                                             const typename C2<T>::t (&k)[N][N], T c, T third,
                                             typename C2<T>::t (&y)[N][N],
                                             typename C2<T>::t (&ac)[N][N])
{
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int j = 0; j < N; ++j) {
            y[i][j] = C2<T>::make(r[i][j].x + c * k[i][j].x, r[i][j].y + c * k[i][j].y);
            ac[i][j].x += third * k[i][j].x;
            ac[i][j].y += third * k[i][j].y;
        }
}

template <typename T, int N>
__global__ void __launch_bounds__(MBLOCH_OPEN_REG_THREADS)
k_open_reg(MBOpenArgs a, const __grid_constant__ MBPipe pp, const double2 *eps, const typename C2<T>::t *rho0, const T *det, const T *shift,
           const T *w, const T *Fg, const T *damp_g, const T *G_g, typename C2<T>::t *part,
           typename C2<T>::t *ppart, double *devb)
{
    typedef typename C2<T>::t V;
    __shared__ V Vs[3][N * N];
    __shared__ T damp[N * N], G[N * N];
    __shared__ V red[MBLOCH_OPEN_REG_THREADS / 32][N * N];
    __shared__ double dmax[MBLOCH_OPEN_REG_THREADS / 32];
    const int sl = open_slice(pp), bl = open_block(pp);
    const double2 *Ez = mbloch_fields_n((size_t)a.n_t * a.n_f, pp, sl, eps);
    const int D0 = bl * blockDim.x, nvalid = min((int)blockDim.x, a.n_atoms - D0);
    const int D = D0 + min((int)threadIdx.x, nvalid - 1);
    const bool valid = (int)threadIdx.x < nvalid;
    const T wgt = valid ? w[D] : (T)0;
    for (int q = threadIdx.x; q < N * N; q += blockDim.x) {
        damp[q] = damp_g[q];
        G[q] = G_g[q];
    }
    V r[N][N], ac[N][N], y[N][N], k[N][N];
    T E[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        T e = i < a.n_g ? (T)((double)i * a.kg) + det[D] : (T)((double)(i - a.n_g) * a.ke);
        if (shift)
            e += shift[(size_t)D * N + i];
        E[i] = e;
#pragma unroll
        for (int j = 0; j < N; ++j)
            r[i][j] = rho0[(size_t)D * N * N + i * N + j];
    }
    const T h = (T)a.h, half = (T)0.5, sixth = (T)(1.0 / 6.0), third = (T)(1.0 / 3.0);
    double dev = 0;
    int prv = 1, mid = 2, nxt = 0;
    open_pipe_row<V>(a, pp, sl, bl, 0, eps, part);
    open_dense_set<T>(a, Vs[nxt], Fg, Ez, Ez, false);
    for (int kt = 0; kt < a.n_t; ++kt) {
        if (kt > 0) {
            const int t0 = prv;
            prv = nxt;
            nxt = mid;
            mid = t0;
            open_pipe_row<V>(a, pp, sl, bl, kt, eps, part);
            open_dense_set<T>(a, Vs[mid], Fg, Ez + (size_t)(kt - 1) * a.n_f, Ez + (size_t)kt * a.n_f, true);
            open_dense_set<T>(a, Vs[nxt], Fg, NULL, Ez + (size_t)kt * a.n_f, false);
        }
        __syncthreads(); /* the sets, and red[] read by the previous record */
        if (kt > 0) {
            open_reg_deriv<T, N>(r, Vs[prv], E, damp, G, h, k);
#pragma unroll
            for (int i = 0; i < N; ++i)
#pragma unroll
                for (int j = 0; j < N; ++j) {
                    y[i][j] = C2<T>::make(r[i][j].x + half * k[i][j].x, r[i][j].y + half * k[i][j].y);
                    ac[i][j] = C2<T>::make(r[i][j].x + sixth * k[i][j].x, r[i][j].y + sixth * k[i][j].y);
                }
            open_reg_deriv<T, N>(y, Vs[mid], E, damp, G, h, k);
            open_reg_mid<T, N>(r, k, half, third, y, ac);
            open_reg_deriv<T, N>(y, Vs[mid], E, damp, G, h, k);
            open_reg_mid<T, N>(r, k, (T)1, third, y, ac);
            open_reg_deriv<T, N>(y, Vs[nxt], E, damp, G, h, k);
#pragma unroll
            for (int i = 0; i < N; ++i)
#pragma unroll
                for (int j = 0; j < N; ++j)
                    r[i][j] = C2<T>::make(ac[i][j].x + sixth * k[i][j].x, ac[i][j].y + sixth * k[i][j].y);
        }
        /* record t_k: the trace, the block's weighted sum of every element
         * (warp butterflies, then the warps in order by thread 0) */
        double tr = 0;
#pragma unroll
        for (int i = 0; i < N; ++i)
            tr += (double)r[i][i].x;
        if (valid)
            dev = fmax(dev, fabs(tr - 1.0));
#pragma unroll
        for (int e = 0; e < N * N; ++e) {
            T sx = wgt * r[e / N][e % N].x, sy = wgt * r[e / N][e % N].y;
#pragma unroll
            for (int d = 16; d > 0; d >>= 1) {
                sx += __shfl_xor_sync(0xffffffffu, sx, d);
                sy += __shfl_xor_sync(0xffffffffu, sy, d);
            }
            if ((threadIdx.x & 31) == 0)
                red[threadIdx.x >> 5][e] = C2<T>::make(sx, sy);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            const size_t row = (size_t)blockIdx.x * a.n_t + kt;
            V S[N * N];
#pragma unroll
            for (int e = 0; e < N * N; ++e) {
                S[e] = C2<T>::make(0, 0);
                for (int q = 0; q < (int)(blockDim.x >> 5); ++q) {
                    S[e].x += red[q][e].x;
                    S[e].y += red[q][e].y;
                }
                if (a.want_rho)
                    ppart[row * N * N + e] = S[e];
            }
            for (int li = 0; li < a.n_f; ++li) { /* eq. 6: F[m][m+l] rho_{b_{m+l} a_m} */
                V p = C2<T>::make(0, 0);
                const int l = a.l_min + li;
#pragma unroll
                for (int m = 0; m < N; ++m) {
                    const int x = m + l;
                    if (m < a.n_g && x >= 0 && x < N - a.n_g) {
                        const T f = Fg[m * (N - a.n_g) + x];
                        const V s = S[(a.n_g + x) * N + m];
                        p.x += f * s.x;
                        p.y += f * s.y;
                    }
                }
                part[row * a.n_f + li] = p;
            }
        }
        open_pipe_done(a, pp, sl, kt);
    }
    const double m = nlse_block_max(dev, dmax);
    if (threadIdx.x == 0)
        devb[blockIdx.x] = m;
}
