/*
 * mbloch_tc.cuh -- the tensor-core atom kernel of the CUDA Maxwell-Bloch
 * backend (source 004, eq. 4 advanced by the RK4 of algorithm 2, the
 * polarisation of eq. 6), included by cuda/mbloch.cu.
 *
 * For every atom one RK4 stage applies the same coupling matrix (the
 * fields at one time) to its stage vector; only the diagonal (the level
 * energies and the atom's detuning) differs between atoms.  Over a group
 * of eight atoms a stage is therefore a small matrix product,
 *     D[atom][out] = e[atom][out] Y[atom][out] + sum_in Y[atom][in] C[in][out],
 * which the FP64 tensor-core instruction mma.m8n8k4 computes in
 * double precision: the atoms are the rows (M = 8), four source levels a
 * k step (K = 4) and eight output levels a tile (N = 8).  The two halves of
 * the level set (ground, excited) are padded to L = 8 NT levels; warp
 * (h, j) of a block owns output tile j of half h for the block's eight
 * atoms, keeps their psi and RK4 sum in registers and reads the stage
 * vectors of the other half from shared memory, where every warp writes
 * its tile of the next stage vector (two buffers, one barrier a stage).
 * The zero blocks of eq. 4 are never formed: a ground tile only reads
 * excited levels and the other way round, and k steps that hold no
 * coupling of the band (a bit mask made on the host) are skipped.
 *
 * The coupling coefficients 0.5 F eps_l (conjugated for the ground rows)
 * are kept as ready-made mma operand fragments, three sets (t_{k-1}, the
 * midpoint mean of algorithm 2, t_k) rotated per time step; each step
 * forms two of them from a list of the band's nonzero couplings.
 *
 * The polarisation of t_k, P_l = sum_a w_a sum_m F[m][m + l]
 * conj(psi_g,m) psi_e,m+l, is a product over the atoms,
 * M = conj(G)^T (w E) (ground x excited, K = the block's atoms), on the
 * same instruction; F M is summed along its diagonals per mode by one warp
 * a mode (shuffles, fixed order).  Per-block partials go to global memory
 * in double as in the plain kernel.  Everything here is double whatever
 * the stored precision T of the inputs.
 */

#define MB_TC_ATOMS 8

/* d += a b for one m8n8k4 tile: a and b one double a lane, d two */
__device__ __forceinline__ void dmma(double &d0, double &d1, double a, double b)
{
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
        : "+d"(d0), "+d"(d1)
        : "d"(a), "d"(b));
}

/* one nonzero coupling (m, n) of the band: 0.5 F[m][n], the mode index,
 * its places in the excited (c) and ground (conj c) fragment sets */
struct MBCoef {
    double f;
    int li, posE, posG, pad;
};

struct MBTc {
    int n_g, n_e, n_lev, l_min, n_f, n_t, n_atoms, ncoef, want_pop;
    int S;                   /* atom stride of the stage buffers (complex) */
    unsigned long long mask; /* bit (h NT + j) 2NT + kt: k step kt of tile (h, j) holds couplings */
    double h, kg, ke;
};

/* shared memory of k_atoms_tc<NT>: see its layout */
static size_t tc_smem_bytes(int NT, int n_f, int ncoef)
{
    const size_t L = 8 * (size_t)NT, S = 2 * L + 4;
    return 16 * (3 * (size_t)(4 * NT * NT * 32) + 2 * MB_TC_ATOMS * S + (size_t)n_f * 32) +
           8 * (L * L + 2 * (size_t)NT * MB_TC_ATOMS + MB_TC_ATOMS) + sizeof(MBCoef) * (size_t)ncoef + 16;
}

template <int NT> struct TcTile {
    static constexpr int L = 8 * NT;            /* padded levels a half */
    static constexpr int KT = 2 * NT;           /* k steps over a half */
    static constexpr int SETN = 2 * NT * KT * 32; /* double2 in one coefficient set */
};

/* D (two output levels of the lane, complex) = e y + sum_kt Y_src C: one
 * RK4 stage's right-hand side for tile (h, j); even and odd k steps in
 * separate accumulators */
template <int NT>
__device__ __forceinline__ void tc_deriv(const MBTc &a, const double2 *Yb, const double2 *Bs, int h, int j, int g,
                                         int q, int lane, const double e[2], const double2 y[2], double2 d[2])
{
    typedef TcTile<NT> TT;
    double r0[2] = {0, 0}, i0[2] = {0, 0}, r1[2] = {0, 0}, i1[2] = {0, 0};
    const double2 *ya = Yb + g * a.S + (1 - h) * TT::L + q;
    const double2 *bp = Bs + (h * NT + j) * TT::KT * 32 + lane;
    const unsigned long long m = a.mask >> ((h * NT + j) * TT::KT);
#pragma unroll
    for (int kt = 0; kt < TT::KT; ++kt) {
        if (!((m >> kt) & 1ull))
            continue;
        const double2 A = ya[4 * kt], B = bp[kt * 32];
        if (kt & 1) {
            dmma(r1[0], r1[1], A.x, B.x);
            dmma(i1[0], i1[1], A.x, B.y);
            dmma(r1[0], r1[1], -A.y, B.y);
            dmma(i1[0], i1[1], A.y, B.x);
        } else {
            dmma(r0[0], r0[1], A.x, B.x);
            dmma(i0[0], i0[1], A.x, B.y);
            dmma(r0[0], r0[1], -A.y, B.y);
            dmma(i0[0], i0[1], A.y, B.x);
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
        d[i] = make_double2(fma(e[i], y[i].x, r0[i] + r1[i]), fma(e[i], y[i].y, i0[i] + i1[i]));
}

/* M = conj(G)^T (w E) over the block's atoms for this warp's tiles of the
 * ground x excited product; F M on the band into PM[mode][m] */
template <int NT>
__device__ __forceinline__ void tc_pol_tiles(const MBTc &a, const double2 *Yb, const double *wsm, const double *Fd,
                                             double2 *PM, int warp, int g, int q)
{
    typedef TcTile<NT> TT;
    for (int t = warp; t < NT * NT; t += 2 * NT) {
        const int mt = t / NT, nt = t % NT;
        double r[2] = {0, 0}, im[2] = {0, 0};
#pragma unroll
        for (int ks = 0; ks < MB_TC_ATOMS / 4; ++ks) {
            const int at = 4 * ks + q;
            const double2 G = Yb[at * a.S + 8 * mt + g], E = Yb[at * a.S + TT::L + 8 * nt + g];
            const double wq = wsm[at], ex = wq * E.x, ey = wq * E.y;
            dmma(r[0], r[1], G.x, ex);
            dmma(im[0], im[1], G.x, ey);
            dmma(r[0], r[1], G.y, ey);
            dmma(im[0], im[1], -G.y, ex);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int m = 8 * mt + g, n = 8 * nt + 2 * q + i, li = n - m - a.l_min;
            if (m < a.n_g && n < a.n_e && li >= 0 && li < a.n_f) {
                const double f = Fd[m * TT::L + n];
                PM[li * 32 + m] = make_double2(f * r[i], f * im[i]);
            }
        }
    }
}

/* the mode sums of PM (one warp a mode) and the atoms' norms for t_k */
template <int NT>
__device__ __forceinline__ void tc_pol_sums(const MBTc &a, int k, const double2 *PM, const double *nrm, int warp,
                                            int lane, double2 *part, double &dev)
{
    for (int li = warp; li < a.n_f; li += 2 * NT) {
        double2 v = PM[li * 32 + lane];
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) {
            v.x += __shfl_xor_sync(0xffffffffu, v.x, d);
            v.y += __shfl_xor_sync(0xffffffffu, v.y, d);
        }
        if (lane == 0)
            part[((size_t)blockIdx.x * a.n_t + k) * a.n_f + li] = v;
    }
    if (threadIdx.x < MB_TC_ATOMS && (int)(blockIdx.x * MB_TC_ATOMS + threadIdx.x) < a.n_atoms) {
        double s = 0;
        for (int w = 0; w < 2 * NT; ++w)
            s += nrm[w * MB_TC_ATOMS + threadIdx.x];
        dev = fmax(dev, fabs(s - 1.0));
    }
}

/* The lane's two levels of psi: the next stage vector into Yb, their
 * |psi|^2 summed over the quad into nrm, and (want_pop) the weighted
 * populations summed over the block's atoms into ppart. */
template <int NT>
__device__ __forceinline__ void tc_store_psi(const MBTc &a, int k, double2 *Yb, double *nrm, const double2 psi[2],
                                             int h, int j, int g, int q, int warp, const double *wsm,
                                             double *ppart)
{
    typedef TcTile<NT> TT;
    double2 *yo = Yb + g * a.S + h * TT::L + 8 * j + 2 * q;
    yo[0] = psi[0];
    yo[1] = psi[1];
    const double p0 = psi[0].x * psi[0].x + psi[0].y * psi[0].y, p1 = psi[1].x * psi[1].x + psi[1].y * psi[1].y;
    double s = p0 + p1;
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (q == 0)
        nrm[warp * MB_TC_ATOMS + g] = s;
    if (a.want_pop) {
        double v[2] = {wsm[g] * p0, wsm[g] * p1};
#pragma unroll
        for (int i = 0; i < 2; ++i)
            for (int d = 4; d < 32; d <<= 1)
                v[i] += __shfl_xor_sync(0xffffffffu, v[i], d);
        const int nh = h ? a.n_e : a.n_g;
        for (int i = 0; i < 2; ++i) {
            const int lev = 8 * j + 2 * q + i;
            if (g == 0 && lev < nh)
                ppart[((size_t)blockIdx.x * a.n_t + k) * a.n_lev + (h ? a.n_g : 0) + lev] = v[i];
        }
    }
}

/* the coefficient set of fields e1 (mean = false) or (e0 + e1) / 2 */
template <int NT>
__device__ __forceinline__ void tc_form(const MBTc &a, double2 *B, const MBCoef *cf, const double2 *e0,
                                        const double2 *e1, bool mean)
{
    for (int c = threadIdx.x; c < a.ncoef; c += blockDim.x) {
        const MBCoef C = cf[c];
        double2 e = e1[C.li];
        if (mean) {
            const double2 o = e0[C.li];
            e.x = 0.5 * (e.x + o.x);
            e.y = 0.5 * (e.y + o.y);
        }
        const double2 v = make_double2(C.f * e.x, C.f * e.y);
        B[C.posE] = v;
        B[C.posG] = make_double2(v.x, -v.y);
    }
}

template <typename T, int NT>
__global__ void __launch_bounds__(64 * NT) k_atoms_tc(MBTc a, const double2 *eps, const typename C2<T>::t *psi0,
                                                      const T *det, const T *w, const T *Fg, const MBCoef *coef,
                                                      double2 *part, double *ppart, double *devb)
{
    typedef TcTile<NT> TT;
    extern __shared__ __align__(16) unsigned char smem[];
    /* layout: 3 coefficient sets | 2 stage buffers [atom][2L + 4] | PM [n_f][32]
     * | F [L][L] | norms [2NT][8] | weights [8] | couplings */
    double2 *Bf = (double2 *)smem;
    double2 *Yv = Bf + 3 * TT::SETN;
    double2 *PM = Yv + 2 * MB_TC_ATOMS * a.S;
    double *Fd = (double *)(PM + a.n_f * 32);
    double *nrm = Fd + TT::L * TT::L;
    double *wsm = nrm + 2 * NT * MB_TC_ATOMS;
    MBCoef *cf = (MBCoef *)(wsm + MB_TC_ATOMS);
    double2 *Ybuf[2] = {Yv, Yv + MB_TC_ATOMS * a.S};

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3, h = warp / NT, j = warp % NT;
    const int atom0 = blockIdx.x * MB_TC_ATOMS, D = atom0 + g;
    const bool valid = D < a.n_atoms;

    for (int i = threadIdx.x; i < 3 * TT::SETN; i += blockDim.x)
        Bf[i] = make_double2(0, 0);
    for (int i = threadIdx.x; i < a.n_f * 32; i += blockDim.x)
        PM[i] = make_double2(0, 0);
    for (int i = threadIdx.x; i < TT::L * TT::L; i += blockDim.x) {
        const int m = i / TT::L, n = i % TT::L;
        Fd[i] = m < a.n_g && n < a.n_e ? (double)Fg[m * a.n_e + n] : 0.0;
    }
    for (int i = threadIdx.x; i < a.ncoef; i += blockDim.x)
        cf[i] = coef[i];
    if (threadIdx.x < MB_TC_ATOMS)
        wsm[threadIdx.x] = atom0 + (int)threadIdx.x < a.n_atoms ? (double)w[atom0 + threadIdx.x] : 0.0;
    __syncthreads(); /* the couplings before the first coefficient set */

    /* the lane's two levels: energies, psi */
    const int nh = h ? a.n_e : a.n_g;
    double e[2];
    double2 psi[2], acc[2], y[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int lev = 8 * j + 2 * q + i;
        e[i] = h ? (double)lev * a.ke : (double)lev * a.kg + (valid ? (double)det[D] : 0.0);
        psi[i] = make_double2(0, 0);
        if (valid && lev < nh) {
            const typename C2<T>::t v = psi0[(size_t)D * a.n_lev + (h ? a.n_g : 0) + lev];
            psi[i] = make_double2((double)v.x, (double)v.y);
        }
        y[i] = psi[i];
        acc[i] = make_double2(0, 0);
    }
    int prv = 1, mid = 2, nxt = 0, cur = 0;
    tc_form<NT>(a, Bf + nxt * TT::SETN, cf, eps, eps, false);
    tc_store_psi<NT>(a, 0, Ybuf[cur], nrm, psi, h, j, g, q, warp, wsm, ppart);
    __syncthreads();
    tc_pol_tiles<NT>(a, Ybuf[cur], wsm, Fd, PM, warp, g, q);
    double dev = 0;
    const double ht = a.h, sixth = 1.0 / 6.0;
    double2 d[2];
    for (int k = 1; k < a.n_t; ++k) {
        const int t0 = prv;
        prv = nxt;
        nxt = mid;
        mid = t0;
        tc_form<NT>(a, Bf + mid * TT::SETN, cf, eps + (size_t)(k - 1) * a.n_f, eps + (size_t)k * a.n_f, true);
        tc_form<NT>(a, Bf + nxt * TT::SETN, cf, NULL, eps + (size_t)k * a.n_f, false);
        /* stage 1: K(t_{k-1}) on psi */
        tc_deriv<NT>(a, Ybuf[cur], Bf + prv * TT::SETN, h, j, g, q, lane, e, y, d);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const double2 kk = make_double2(-ht * d[i].y, ht * d[i].x); /* i h S */
            acc[i] = kk;
            y[i] = make_double2(psi[i].x + 0.5 * kk.x, psi[i].y + 0.5 * kk.y);
        }
        {
            double2 *yo = Ybuf[cur ^ 1] + g * a.S + h * TT::L + 8 * j + 2 * q;
            yo[0] = y[0];
            yo[1] = y[1];
        }
        __syncthreads();
        tc_pol_sums<NT>(a, k - 1, PM, nrm, warp, lane, part, dev);
        /* stage 2: midpoint */
        tc_deriv<NT>(a, Ybuf[cur ^ 1], Bf + mid * TT::SETN, h, j, g, q, lane, e, y, d);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const double2 kk = make_double2(-ht * d[i].y, ht * d[i].x);
            acc[i].x += 2 * kk.x;
            acc[i].y += 2 * kk.y;
            y[i] = make_double2(psi[i].x + 0.5 * kk.x, psi[i].y + 0.5 * kk.y);
        }
        {
            double2 *yo = Ybuf[cur] + g * a.S + h * TT::L + 8 * j + 2 * q;
            yo[0] = y[0];
            yo[1] = y[1];
        }
        __syncthreads();
        /* stage 3: midpoint */
        tc_deriv<NT>(a, Ybuf[cur], Bf + mid * TT::SETN, h, j, g, q, lane, e, y, d);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const double2 kk = make_double2(-ht * d[i].y, ht * d[i].x);
            acc[i].x += 2 * kk.x;
            acc[i].y += 2 * kk.y;
            y[i] = make_double2(psi[i].x + kk.x, psi[i].y + kk.y);
        }
        {
            double2 *yo = Ybuf[cur ^ 1] + g * a.S + h * TT::L + 8 * j + 2 * q;
            yo[0] = y[0];
            yo[1] = y[1];
        }
        __syncthreads();
        /* stage 4: K(t_k); the new psi */
        tc_deriv<NT>(a, Ybuf[cur ^ 1], Bf + nxt * TT::SETN, h, j, g, q, lane, e, y, d);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const double2 kk = make_double2(-ht * d[i].y, ht * d[i].x);
            psi[i].x += sixth * (acc[i].x + kk.x);
            psi[i].y += sixth * (acc[i].y + kk.y);
            y[i] = psi[i];
        }
        tc_store_psi<NT>(a, k, Ybuf[cur], nrm, psi, h, j, g, q, warp, wsm, ppart);
        __syncthreads();
        tc_pol_tiles<NT>(a, Ybuf[cur], wsm, Fd, PM, warp, g, q);
    }
    __syncthreads();
    tc_pol_sums<NT>(a, a.n_t - 1, PM, nrm, warp, lane, part, dev);
    if (threadIdx.x < MB_TC_ATOMS) { /* the block's largest norm deviation: lanes 0-7 of warp 0 */
        for (int s = 4; s > 0; s >>= 1)
            dev = fmax(dev, __shfl_xor_sync(0xffu, dev, s));
        if (threadIdx.x == 0)
            devb[blockIdx.x] = dev;
    }
}
