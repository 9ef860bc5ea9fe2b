/*
 * mbloch_tc.cuh -- the tensor-core atom kernel of the CUDA Maxwell-Bloch
 * backend (source 004, eq. 4 advanced by the RK4 of algorithm 2, the
 * polarisation of eq. 6), included by cuda/mbloch/mbloch.cu.
 *
 * For every atom one RK4 stage applies the same coupling matrix (the
 * fields at one time) to its stage vector; only the diagonal (the level
 * energies and the atom's detuning) differs between atoms.  Over a group
 * of eight atoms a stage is therefore a small matrix product,
 *     D[out][atom] = e[out][atom] Y[atom][out] + sum_in C[out][in] Y[atom][in],
 * computed in double precision on the FP64 tensor cores by
 * mma.m16n8k8 (sm_90; four mma.m8n8k4 with the same fragments on sm_80):
 * sixteen output levels a tile (M), the eight atoms (N), eight source
 * levels a k step (K).  The two halves of the level set (ground, excited)
 * are padded to L = 16 MT levels; warp (h, mt) of a block owns output tile
 * mt of half h for the block's atoms, keeps their psi and RK4 sum in
 * registers and reads the stage vectors of the other half from shared
 * memory, where every warp writes its part of the next stage vector (two
 * buffers, one barrier a stage).  The zero blocks of eq. 4 are never
 * formed (a ground tile reads only excited levels and the other way
 * round), and k steps without a coupling of the band (a bit mask made on
 * the host) are skipped.
 *
 * The coupling coefficients 0.5 F eps_l (conjugated for the ground rows)
 * are formed by each lane for its own operand fragments, straight into
 * registers: 0.5 F from a per-lane table (zero off the band), eps_l from a
 * ring of field rows in shared memory (the rows t_{k-1}, t_k, t_{k+1} and
 * the midpoint means of algorithm 2, prefetched two steps ahead).  Stages
 * 2 and 3 share the mean set; stage 4's K(t_k) is the next step's stage 1
 * set, so two sets are formed per step, while the products of the
 * previous stage are in flight.
 *
 * The polarisation of t_k, P_l = sum_a w_a sum_m F[m][m + l]
 * conj(psi_g,m) psi_e,m+l, is a product over the atoms,
 * M = conj(G)^T (w E) (ground x excited, K = the block's eight atoms), on
 * the same instruction; F M is summed along its diagonals per mode (eight
 * lanes a mode, fixed order).  Per-block partials go to global memory in
 * double as in the plain kernel.  Everything here is double whatever the
 * stored precision T of the inputs.
 *
 * Shared memory holds real and imaginary parts in separate planes, so that
 * operands load straight into the registers the mma reads: the stage
 * buffers are [level][atom] (stride MBLOCH_TC_SA, no bank conflicts on the
 * operand loads), a k step's source levels 2q and 2q + 1 sit in fragment
 * columns q and q + 4, and the coefficient fragments are stored as the
 * (a0, a1), (a2, a3) pairs of each lane.
 */

#define MBLOCH_TC_ATOMS 8

/* d (two doubles) += a b, one m8n8k4 tile */
__device__ __forceinline__ void dmma8(double &d0, double &d1, double a, double b)
{
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
        : "+d"(d0), "+d"(d1)
        : "d"(a), "d"(b));
}

/* d += a b for one m16n8k8 tile (a: 4 doubles a lane, b: 2, d: 4); on
 * sm_80 as four m8n8k4 tiles, whose fragments are exactly these */
__device__ __forceinline__ void dmma16(double d[4], const double a[4], double b0, double b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
        : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b0), "d"(b1));
#else
    dmma8(d[0], d[1], a[0], b0);
    dmma8(d[2], d[3], a[1], b0);
    dmma8(d[0], d[1], a[2], b1);
    dmma8(d[2], d[3], a[3], b1);
#endif
}

struct MBTc {
    int n_g, n_e, n_lev, l_min, n_f, n_t, n_atoms, want_pop;
    unsigned int mask; /* bit (h MT + mt) KS + s: k step s of tile (h, mt) holds couplings */
    double h, kg, ke;
};

/* z slices in flight (algorithm 1 pipelined in z).  The fields of
 * z_{j+1} at t_k need only the polarisation of z_j (and z_{j-1}) at t_k,
 * so z step i + 1 can follow z step i along the time grid a few chunks of
 * C rows behind.  A launch of S slices (all blocks resident: a
 * cooperative launch) takes m >= S z steps, z step i on slice i mod S (in
 * round i / S; m = S for the kernels that take one round).  The blocks of
 * z step i count their finished chunks in done[i mod S][c]; every block of
 * z step i + 1 reduces a share of each chunk of z step i's per-block
 * partials (fixed order, as k_sum_warp), computes those fields by AB2 or
 * Euler (mbloch_new_field, as k_fields) and counts its share in
 * red[(i + 1) mod S][c]; a chunk's fields are read once all shares are
 * in.  The counters grow by nb a round (mbloch_target, mbloch_red_target).  A block reduces the
 * shares of chunk c + 1 when it needs chunk c, so the waits fall on work
 * finished a chunk earlier.  Slot i mod S of E (P) holds the fields (the
 * polarisation) of z step i; z step 0 reads eps.  A slot is written again
 * a round later, by which time every reader of it, further along the
 * chain of z steps, is past it.  S = 1: one z step, no waits. */
#define MBLOCH_PIPE_MAX 8

struct MBPipe {
    int S, m, C, nch, nb;  /* slices, z steps, rows a chunk, chunks, blocks a slice */
    double2 *E;            /* the fields of z steps 1 .. m-1: E + (i mod S) n */
    double2 *P;            /* the polarisations of z steps 0 .. m-2: P + (i mod S) n */
    const double2 *Pprev;  /* the polarisation of the z before z step 0 */
    int *done, *red;       /* [S][nch] counters, zero at launch */
    int *flag;             /* 1: a polarisation or field is not finite; bit 2: a wait stalled */
    double beta, hz, c1, c0; /* z step i -> i + 1: AB2 (h_z, 3/2, -1/2) or Euler (h_z / substeps, 1, 0) */
};

/* the count of done[i mod S][c] once z step i has counted chunk c: every
 * z step of the slot so far, nb each */
__device__ __forceinline__ int mbloch_target(const MBPipe &pp, int i) { return (i / pp.S + 1) * pp.nb; }

/* the count of red[i mod S][c] once every share of z step i (>= 1) is in:
 * the z steps of the slot so far but z step 0, which has none */
__device__ __forceinline__ int mbloch_red_target(const MBPipe &pp, int i)
{
    return (i / pp.S + (i % pp.S != 0)) * pp.nb;
}

/* the fields z step i reads (n = n_t n_f values a z step) */
__device__ __forceinline__ const double2 *mbloch_fields_n(size_t n, const MBPipe &pp, int i, const double2 *eps)
{
    return i == 0 ? eps : pp.E + (size_t)(i % pp.S) * n;
}

__device__ __forceinline__ const double2 *mbloch_fields(const MBTc &a, const MBPipe &pp, int i, const double2 *eps)
{
    return mbloch_fields_n((size_t)a.n_t * a.n_f, pp, i, eps);
}

/* the block waits until *cnt >= target (thread 0 polls; the data behind
 * the counter is then read through L2).  A wait far beyond any chunk's
 * time (2^27 polls, seconds) marks the launch stalled (flag bit 2) and
 * goes on, so that a fault ends in an error, not a hang. */
__device__ __forceinline__ void mbloch_wait(const int *cnt, int target, int *flag)
{
    if (threadIdx.x == 0) {
        for (long long it = 0; *(volatile const int *)cnt < target; ++it) {
            if (it > (1ll << 27)) {
                atomicOr(flag, 2);
                break;
            }
            __nanosleep(64);
        }
        __threadfence();
    }
    __syncthreads();
}

/* the block's writes before it are visible, then *cnt += 1 */
__device__ __forceinline__ void mbloch_signal(int *cnt)
{
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(cnt, 1);
}

/* block b of z step i (>= 1) reduces its share of chunk c of z step i - 1
 * (n_t rows of n_f values; per-block partials of type PV) into P_{i-1} and
 * the fields E_i, a value a warp (nw warps) */
template <typename PV>
__device__ __forceinline__ void mbloch_share(int n_t, int n_f, const MBPipe &pp, int i, int b, int c,
                                             const double2 *eps, const PV *part, int warp, int nw, int lane)
{
    const int sp = (i - 1) % pp.S;
    mbloch_wait(pp.done + sp * pp.nch + c, mbloch_target(pp, i - 1), pp.flag);
    const size_t n = (size_t)n_t * n_f, r0 = (size_t)c * pp.C * n_f;
    const size_t V = (size_t)(min((c + 1) * pp.C, n_t) - c * pp.C) * n_f;
    const size_t lo = r0 + V * b / pp.nb, hi = r0 + V * (b + 1) / pp.nb;
    const PV *ps = part + (size_t)sp * pp.nb * n;
    const double2 *Ein = mbloch_fields_n(n, pp, i - 1, eps);
    const double2 *Pp = i == 1 ? pp.Pprev : pp.P + (size_t)((i - 2) % pp.S) * n;
    for (size_t v = lo + warp; v < hi; v += nw) {
        double2 P = mbloch_warp_sum(ps + v, pp.nb, n, lane);
        P = make_double2(P.x * pp.beta, P.y * pp.beta);
        if (lane == 0) {
            const double2 e = mbloch_new_field(__ldcg(Ein + v), P, pp.c0 != 0 ? __ldcg(Pp + v) : P, pp.hz, pp.c1, pp.c0);
            if (!isfinite(P.x) || !isfinite(P.y) || !isfinite(e.x) || !isfinite(e.y))
                atomicOr(pp.flag, 1);
            pp.P[(size_t)sp * n + v] = P;
            pp.E[(size_t)(i % pp.S) * n + v] = e;
        }
    }
    mbloch_signal(pp.red + (i % pp.S) * pp.nch + c);
}

template <int MT>
__device__ __forceinline__ void tc_share(const MBTc &a, const MBPipe &pp, int i, int b, int c, const double2 *eps,
                                      const double2 *part, int warp, int lane)
{
    mbloch_share<double2>(a.n_t, a.n_f, pp, i, b, c, eps, part, warp, 2 * MT, lane);
}

/* the start of z step i (>= 1) of a pipelined launch: the shares of
 * chunks 0 and 1, then the wait for the rows 0-2 */
template <int MT>
__device__ __forceinline__ void mbloch_pipe_start(const MBTc &a, const MBPipe &pp, int i, int b, const double2 *eps,
                                              const double2 *part, int warp, int lane)
{
    for (int c = 0; c < min(2, pp.nch); ++c)
        tc_share<MT>(a, pp, i, b, c, eps, part, warp, lane);
    mbloch_wait(pp.red + (i % pp.S) * pp.nch, mbloch_red_target(pp, i), pp.flag);
}

#define MBLOCH_TC_SA 10 /* atom stride of a level row in the stage buffers (doubles) */

#define MBLOCH_TC_PMS 36 /* row stride of the mode sums PM (complex): no bank conflicts */

/* shared memory of k_atoms_tc<MT> */
static size_t tc_smem_bytes(int MT, int n_f)
{
    const size_t L = 16 * (size_t)MT, KS = L / 8;
    return 8 * (2 * MT * KS * 128 + 2 * 2 * 2 * L * MBLOCH_TC_SA) + 16 * (((size_t)n_f + 1) * MBLOCH_TC_PMS + 6 * (size_t)n_f) +
           8 * (L * L + 2 * (size_t)MT * MBLOCH_TC_ATOMS + MBLOCH_TC_ATOMS) + 32;
}

/* Lane (g, q) of warp (h, mt), k step s, operand element i (a0 .. a3):
 * output level 16 mt + g + 8 (i & 1) of half h, source level 8 s + 2q +
 * (i >> 1) of the other half (columns q and q + 4 of a k step hold source
 * levels 2q and 2q + 1). */
static __host__ __device__ inline int tc_out(int mt, int g, int i) { return 16 * mt + g + 8 * (i & 1); }
static __host__ __device__ inline int tc_in(int s, int q, int i) { return 8 * s + 2 * q + (i >> 1); }

template <int MT> struct TcTile {
    static constexpr int L = 16 * MT;              /* padded levels a half */
    static constexpr int KS = L / 8;               /* k steps over a half */
    static constexpr int PL = 2 * L * MBLOCH_TC_SA;    /* doubles in one plane of a stage buffer */
};

/* a stage buffer: real and imaginary planes [level][atom] */
struct TcBuf {
    double *re, *im;
};

/* the coefficient operands of tile (h, mt) for every k step: loaded once
 * per set and kept in registers (stages 2 and 3 share the mean set; stage
 * 4's K(t_k) is the next step's stage 1 set) */
template <int MT> struct TcA {
    double2 r[TcTile<MT>::KS][2], i[TcTile<MT>::KS][2];
};

/* the lane's operands of the set of fields E (a row of n_f modes):
 * 0.5 F eps_l, conjugated on the ground half */
template <int MT>
__device__ __forceinline__ void tc_make_a(TcA<MT> &A, const double2 *Ft, const double2 *E, const MBTc &a, int h,
                                          int mt, int g, int q)
{
    const double sg = h ? 1.0 : -1.0;
#pragma unroll
    for (int s = 0; s < TcTile<MT>::KS; ++s)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const double2 f = Ft[(s * 2 + p) * 32];
            double2 ev[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int i = 2 * p + u, l = tc_out(mt, g, i) - tc_in(s, q, i);
                const int li = min(max((h ? l : -l) - a.l_min, 0), a.n_f - 1); /* f = 0 off the band */
                ev[u] = E[li];
            }
            A.r[s][p] = make_double2(f.x * ev[0].x, f.y * ev[1].x);
            A.i[s][p] = make_double2(sg * (f.x * ev[0].y), sg * (f.y * ev[1].y));
        }
}

/* D (the lane's four outputs, complex) = e y + sum_s C Y_src: one RK4
 * stage's right-hand side for tile (h, mt).  Lane (g, q) holds output
 * levels g and g + 8 of the tile for atoms 2q and 2q + 1 (c = 2 (level
 * half) + atom).  mid() runs while the products are in flight. */
template <int MT, class Mid>
__device__ __forceinline__ void tc_deriv(const MBTc &a, TcBuf Y, const TcA<MT> &A, int h, int mt, int g, int q,
                                         const double e[4], const double2 y[4], double2 d[4], Mid mid)
{
    typedef TcTile<MT> TT;
    const int yo = ((1 - h) * TT::L + 2 * q) * MBLOCH_TC_SA + g;
    double br[TT::KS][2], bi[TT::KS][2];
#pragma unroll
    for (int s = 0; s < TT::KS; ++s) {
        br[s][0] = Y.re[yo + 8 * s * MBLOCH_TC_SA];
        br[s][1] = Y.re[yo + (8 * s + 1) * MBLOCH_TC_SA];
        bi[s][0] = Y.im[yo + 8 * s * MBLOCH_TC_SA];
        bi[s][1] = Y.im[yo + (8 * s + 1) * MBLOCH_TC_SA];
    }
    double r[2][4], im[2][4];
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int c = 0; c < 4; ++c)
            r[p][c] = im[p][c] = 0;
    const unsigned int m = a.mask >> ((h * MT + mt) * TT::KS);
#pragma unroll
    for (int s = 0; s < TT::KS; ++s) {
        if (!((m >> s) & 1u))
            continue;
        const double ar[4] = {A.r[s][0].x, A.r[s][0].y, A.r[s][1].x, A.r[s][1].y};
        const double ai[4] = {A.i[s][0].x, A.i[s][0].y, A.i[s][1].x, A.i[s][1].y};
        dmma16(r[0], ar, br[s][0], br[s][1]);
        dmma16(im[0], ar, bi[s][0], bi[s][1]);
        dmma16(r[1], ai, -bi[s][0], -bi[s][1]);
        dmma16(im[1], ai, br[s][0], br[s][1]);
    }
    mid();
#pragma unroll
    for (int c = 0; c < 4; ++c)
        d[c] = make_double2(fma(e[c], y[c].x, r[0][c] + r[1][c]), fma(e[c], y[c].y, im[0][c] + im[1][c]));
}

/* M = conj(G)^T (w E) over the block's atoms for this warp's tiles of the
 * ground x excited product (16 x 8 a tile; k column q: atom 2q, q + 4:
 * atom 2q + 1); F M on the band into PM[mode][m], the rest into the
 * scratch row PM[n_f] */
template <int MT>
__device__ __forceinline__ void tc_pol_tiles(const MBTc &a, TcBuf Y, const double *wsm, const double *Fd,
                                             double2 *PM, int warp, int g, int q)
{
    typedef TcTile<MT> TT;
#pragma unroll
    for (int j = 0; j < MT; ++j) { /* MT tiles a warp, straight-line code */
        const int t = warp + 2 * MT * j, mt = t / TT::KS, nt = t % TT::KS;
        const int o0 = (16 * mt + g) * MBLOCH_TC_SA + 2 * q, o1 = o0 + 8 * MBLOCH_TC_SA;
        const int oe = (TT::L + 8 * nt + g) * MBLOCH_TC_SA + 2 * q;
        const double2 G0r = *(const double2 *)(Y.re + o0), G1r = *(const double2 *)(Y.re + o1);
        const double2 G0i = *(const double2 *)(Y.im + o0), G1i = *(const double2 *)(Y.im + o1);
        const double2 Er = *(const double2 *)(Y.re + oe), Ei = *(const double2 *)(Y.im + oe);
        const double w0 = wsm[2 * q], w1 = wsm[2 * q + 1];
        const double gr[4] = {G0r.x, G1r.x, G0r.y, G1r.y}, gi[4] = {G0i.x, G1i.x, G0i.y, G1i.y};
        const double er0 = w0 * Er.x, er1 = w1 * Er.y, ei0 = w0 * Ei.x, ei1 = w1 * Ei.y;
        double r[4] = {0, 0, 0, 0}, im[4] = {0, 0, 0, 0};
        dmma16(r, gr, er0, er1);
        dmma16(r, gi, ei0, ei1);
        dmma16(im, gr, ei0, ei1);
        dmma16(im, gi, -er0, -er1);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int m = 16 * mt + g + 8 * (c >> 1), n = 8 * nt + 2 * q + (c & 1), li = n - m - a.l_min;
            const bool band = m < a.n_g && n < a.n_e && li >= 0 && li < a.n_f;
            const double f = Fd[m * TT::L + n];
            PM[(band ? li : a.n_f) * MBLOCH_TC_PMS + m] = make_double2(f * r[c], f * im[c]); /* row n_f: scratch */
        }
    }
}

/* the mode sums of PM (four lanes a mode: eight entries each in PM's
 * precision V, then two shuffles in double, fixed order) into the
 * block's partial, and the norms of its NA atoms for t_k (nrm [NR][NA]:
 * a row per warp that sums a part of each atom's levels); every
 * tensor-core kernel */
template <int MT, int NA, int NR = 2 * MT, typename V>
__device__ __forceinline__ void mbloch_pol_sums(const MBTc &a, int k, const V *PM, const double *nrm, int warp, int lane,
                                            int atom0, double2 *part, double &dev)
{
    for (int li = 8 * warp + (lane >> 2); li - (lane >> 2) < a.n_f; li += 16 * MT) {
        const int s4 = lane & 3;
        V v = {0, 0};
        if (li < a.n_f) {
            const V *pm = PM + li * MBLOCH_TC_PMS + s4;
            V u[8];
#pragma unroll
            for (int i = 0; i < 8; ++i)
                u[i] = pm[4 * i];
            v.x = ((u[0].x + u[1].x) + (u[2].x + u[3].x)) + ((u[4].x + u[5].x) + (u[6].x + u[7].x));
            v.y = ((u[0].y + u[1].y) + (u[2].y + u[3].y)) + ((u[4].y + u[5].y) + (u[6].y + u[7].y));
        }
        double2 w = make_double2(v.x, v.y);
#pragma unroll
        for (int d = 2; d > 0; d >>= 1) {
            w.x += __shfl_xor_sync(0xffffffffu, w.x, d);
            w.y += __shfl_xor_sync(0xffffffffu, w.y, d);
        }
        if (s4 == 0 && li < a.n_f)
            part[((size_t)blockIdx.x * a.n_t + k) * a.n_f + li] = w;
    }
    if (threadIdx.x < NA && atom0 + (int)threadIdx.x < a.n_atoms) {
        double s = 0;
        for (int w = 0; w < NR; ++w)
            s += nrm[w * NA + threadIdx.x];
        dev = fmax(dev, fabs(s - 1.0));
    }
}

/* the z pipeline at time row k of z step i (block bl): count the chunk
 * whose partials are all written, and where row k + 2 (fetched in this
 * step) opens chunk c, reduce this block's share of chunk c + 1 and wait
 * for chunk c's fields; every tensor-core kernel */
template <int MT>
__device__ __forceinline__ void mbloch_pipe_row(const MBTc &a, const MBPipe &pp, int i, int bl, int k,
                                            const double2 *eps, const double2 *part, int warp, int lane)
{
    if (pp.S <= 1)
        return;
    /* the partials of rows < k - 1 are written: chunk (k-1)/C - 1 is done */
    if ((k - 1) % pp.C == 0 && k - 1 >= pp.C)
        mbloch_signal(pp.done + (i % pp.S) * pp.nch + (k - 1) / pp.C - 1);
    /* row k + 2 (fetched below) opens chunk c: share c + 1, wait for c */
    if (i > 0 && k + 2 < a.n_t && (k + 2) % pp.C == 0) {
        const int c = (k + 2) / pp.C;
        if (c + 1 < pp.nch)
            tc_share<MT>(a, pp, i, bl, c + 1, eps, part, warp, lane);
        mbloch_wait(pp.red + (i % pp.S) * pp.nch + c, mbloch_red_target(pp, i), pp.flag);
    }
}

/* the end of z step i: the chunks not yet counted */
__device__ __forceinline__ void mbloch_zstep_end(const MBTc &a, const MBPipe &pp, int i)
{
    if (pp.S > 1)
        for (int c = (a.n_t - 2) / pp.C; c < pp.nch; ++c)
            mbloch_signal(pp.done + (i % pp.S) * pp.nch + c);
}

/* the end of a launch: the block's largest norm deviation (lanes 0 .. NA
 * - 1 of warp 0) into devb */
template <int NA> __device__ __forceinline__ void mbloch_block_dev(double dev, double *devb)
{
    if (threadIdx.x < NA) {
        for (int s = NA / 2; s > 0; s >>= 1)
            dev = fmax(dev, __shfl_xor_sync(NA >= 32 ? 0xffffffffu : (1u << NA) - 1, dev, s));
        if (threadIdx.x == 0)
            devb[blockIdx.x] = dev;
    }
}

/* the lane's four values of a stage vector into Y: levels g, g + 8 of the
 * tile, atoms 2q and 2q + 1 side by side */
template <int MT>
__device__ __forceinline__ void tc_put(TcBuf Y, const double2 v[4], int h, int mt, int g, int q)
{
    const int o = (h * TcTile<MT>::L + 16 * mt + g) * MBLOCH_TC_SA + 2 * q, o8 = o + 8 * MBLOCH_TC_SA;
    *(double2 *)(Y.re + o) = make_double2(v[0].x, v[1].x);
    *(double2 *)(Y.im + o) = make_double2(v[0].y, v[1].y);
    *(double2 *)(Y.re + o8) = make_double2(v[2].x, v[3].x);
    *(double2 *)(Y.im + o8) = make_double2(v[2].y, v[3].y);
}

/* s0, s1 summed over the eight lanes g = lane >> 2 of the lane's column q
 * (fixed order; every lane gets the sums): a warp's levels of its atoms */
__device__ __forceinline__ void mbloch_sum_over_g(double &s0, double &s1)
{
#pragma unroll
    for (int d = 4; d < 32; d <<= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, d);
        s1 += __shfl_xor_sync(0xffffffffu, s1, d);
    }
}

/* psi of t_k (the lane's four values): |psi|^2 per atom summed over the
 * warp's levels into nrm, and (want_pop) the weighted populations summed
 * over the block's atoms into ppart */
template <int MT>
__device__ __forceinline__ void tc_norms(const MBTc &a, int k, double *nrm, const double2 psi[4], int h, int mt,
                                         int g, int q, int warp, const double *wsm, double *ppart)
{
    double p[4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
        p[c] = psi[c].x * psi[c].x + psi[c].y * psi[c].y;
    double s0 = p[0] + p[2], s1 = p[1] + p[3]; /* atoms 2q, 2q + 1 */
    mbloch_sum_over_g(s0, s1);
    if (g == 0)
        *(double2 *)(nrm + warp * MBLOCH_TC_ATOMS + 2 * q) = make_double2(s0, s1);
    if (a.want_pop) {
        const double w0 = wsm[2 * q], w1 = wsm[2 * q + 1];
        double v0 = w0 * p[0] + w1 * p[1], v1 = w0 * p[2] + w1 * p[3]; /* levels g, g + 8 */
        for (int d = 1; d < 4; d <<= 1) {
            v0 += __shfl_xor_sync(0xffffffffu, v0, d);
            v1 += __shfl_xor_sync(0xffffffffu, v1, d);
        }
        const int nh = h ? a.n_e : a.n_g, lev = 16 * mt + g;
        double *pp = ppart + ((size_t)blockIdx.x * a.n_t + k) * a.n_lev + (h ? a.n_g : 0);
        if (q == 0 && lev < nh)
            pp[lev] = v0;
        if (q == 0 && lev + 8 < nh)
            pp[lev + 8] = v1;
    }
}

/* one RK4 stage's update of the lane's four values: k = i h S, then
 * acc (wa: 0 sets, else adds wa k) and the next stage vector psi + wy k */
__device__ __forceinline__ void tc_rk(const double2 d[4], double ht, double wa, double wy, const double2 psi[4],
                                      double2 acc[4], double2 y[4])
{
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const double2 kk = make_double2(-ht * d[c].y, ht * d[c].x); /* i h S */
        if (wa == 0)
            acc[c] = kk;
        else {
            acc[c].x += wa * kk.x;
            acc[c].y += wa * kk.y;
        }
        y[c] = make_double2(psi[c].x + wy * kk.x, psi[c].y + wy * kk.y);
    }
}

template <typename T, int MT>
__global__ void __launch_bounds__(64 * MT) k_atoms_tc(const __grid_constant__ MBTc a,
                                                      const __grid_constant__ MBPipe pp, const double2 *eps,
                                                      const typename C2<T>::t *psi0, const T *det, const T *w,
                                                      const T *Fg, const double *ftab, double2 *part,
                                                      double *ppart, double *devb)
{
    typedef TcTile<MT> TT;
    extern __shared__ __align__(16) unsigned char smem[];
    /* layout: the lanes' 0.5 F operands [warp][KS][2][32] double2 | 2
     * stage buffers (2 planes each) | PM [n_f][PMS] | field ring [3][n_f]
     * | mean ring [3][n_f] | F [L][L] | norms [2MT][8] | weights [8] */
    double2 *Ft = (double2 *)smem;
    double *Yv = (double *)(Ft + 2 * MT * TT::KS * 64);
    double2 *PM = (double2 *)(Yv + 4 * TT::PL);
    double2 *Er = PM + (a.n_f + 1) * MBLOCH_TC_PMS;
    double2 *Em = Er + 3 * a.n_f;
    double *Fd = (double *)(Em + 3 * a.n_f);
    double *nrm = Fd + TT::L * TT::L;
    double *wsm = nrm + 2 * MT * MBLOCH_TC_ATOMS;
    const TcBuf Y0 = {Yv, Yv + TT::PL}, Y1 = {Yv + 2 * TT::PL, Yv + 3 * TT::PL};

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3, h = warp / MT, mt = warp % MT;
    /* slice sl of the z pipeline, block bl of it */
    const int sl = pp.S > 1 ? blockIdx.x / pp.nb : 0, bl = pp.S > 1 ? blockIdx.x % pp.nb : blockIdx.x;
    const int atom0 = bl * MBLOCH_TC_ATOMS;
    const double2 *E = mbloch_fields(a, pp, sl, eps); /* z step sl: one round */
    if (sl > 0)
        mbloch_pipe_start<MT>(a, pp, sl, bl, eps, part, warp, lane);

    for (int i = threadIdx.x; i < 2 * MT * TT::KS * 128; i += blockDim.x)
        ((double *)Ft)[i] = ftab[i];
    for (int i = threadIdx.x; i < 4 * TT::PL; i += blockDim.x)
        Yv[i] = 0;
    for (int i = threadIdx.x; i < a.n_f * MBLOCH_TC_PMS; i += blockDim.x)
        PM[i] = make_double2(0, 0);
    for (int i = threadIdx.x; i < 3 * a.n_f; i += blockDim.x) { /* rows 0-2 and the means of 0-1, 1-2 */
        const double2 ei = i < a.n_t * a.n_f ? __ldcg(E + i) : make_double2(0, 0);
        Er[i] = ei;
        if (i >= a.n_f && i < a.n_t * a.n_f) {
            const double2 eo = __ldcg(E + i - a.n_f);
            Em[i] = make_double2(0.5 * (ei.x + eo.x), 0.5 * (ei.y + eo.y));
        }
    }
    for (int i = threadIdx.x; i < TT::L * TT::L; i += blockDim.x) {
        const int m = i / TT::L, n = i % TT::L;
        Fd[i] = m < a.n_g && n < a.n_e ? (double)Fg[m * a.n_e + n] : 0.0;
    }
    if (threadIdx.x < MBLOCH_TC_ATOMS)
        wsm[threadIdx.x] = atom0 + (int)threadIdx.x < a.n_atoms ? (double)w[atom0 + threadIdx.x] : 0.0;
    __syncthreads(); /* the couplings and fields before the first coefficient set */

    /* the lane's four values: levels 16 mt + g (+ 8) of half h, atoms 2q (+ 1) */
    const int nh = h ? a.n_e : a.n_g;
    double e[4];
    double2 psi[4], acc[4], y[4], d[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const int lev = 16 * mt + g + 8 * (c >> 1), D = atom0 + 2 * q + (c & 1);
        const bool valid = D < a.n_atoms;
        e[c] = h ? (double)lev * a.ke : (double)lev * a.kg + (valid ? (double)det[D] : 0.0);
        psi[c] = make_double2(0, 0);
        if (valid && lev < nh) {
            const typename C2<T>::t v = psi0[(size_t)D * a.n_lev + (h ? a.n_g : 0) + lev];
            psi[c] = make_double2((double)v.x, (double)v.y);
        }
        y[c] = psi[c];
        acc[c] = make_double2(0, 0);
    }
    const double2 *ft = Ft + warp * TT::KS * 64 + lane;
    tc_put<MT>(Y0, psi, h, mt, g, q);
    __syncthreads();
    TcA<MT> A; /* the operands of K(t_0) */
    tc_make_a<MT>(A, ft, Er, a, h, mt, g, q);
    double dev = 0;
    const double ht = a.h, sixth = 1.0 / 6.0;
    for (int k = 1; k < a.n_t; ++k) {
        const bool pre = threadIdx.x < a.n_f && k + 2 < a.n_t;
        mbloch_pipe_row<MT>(a, pp, sl, bl, k, eps, part, warp, lane);
        double2 ef = make_double2(0, 0);
        /* stage 1: K(t_{k-1}) on psi (in Y0); meanwhile the polarisation
         * products and the norms of psi (t_{k-1}) */
        tc_deriv<MT>(a, Y0, A, h, mt, g, q, e, y, d, [&] {
            tc_make_a<MT>(A, ft, Em + (k % 3) * a.n_f, a, h, mt, g, q); /* the mean, for stages 2 and 3 */
            tc_pol_tiles<MT>(a, Y0, wsm, Fd, PM, warp, g, q);
            tc_norms<MT>(a, k - 1, nrm, psi, h, mt, g, q, warp, wsm, ppart);
        });
        tc_rk(d, ht, 0.0, 0.5, psi, acc, y);
        tc_put<MT>(Y1, y, h, mt, g, q);
        __syncthreads();
        /* stage 2: midpoint; meanwhile the mode sums of t_{k-1} */
        tc_deriv<MT>(a, Y1, A, h, mt, g, q, e, y, d,
                     [&] { mbloch_pol_sums<MT, MBLOCH_TC_ATOMS>(a, k - 1, PM, nrm, warp, lane, atom0, part, dev); });
        tc_rk(d, ht, 2.0, 0.5, psi, acc, y);
        tc_put<MT>(Y0, y, h, mt, g, q);
        __syncthreads();
        /* stage 3: midpoint; meanwhile the fields of t_{k+2} are fetched */
        tc_deriv<MT>(a, Y0, A, h, mt, g, q, e, y, d, [&] {
            tc_make_a<MT>(A, ft, Er + (k % 3) * a.n_f, a, h, mt, g, q); /* K(t_k): stage 4, next stage 1 */
            if (pre)
                ef = __ldcg(E + (size_t)(k + 2) * a.n_f + threadIdx.x);
        });
        tc_rk(d, ht, 2.0, 1.0, psi, acc, y);
        tc_put<MT>(Y1, y, h, mt, g, q);
        __syncthreads();
        /* stage 4: K(t_k), the new psi; meanwhile the fields of t_{k+2}
         * and their mean with t_{k+1} into the ring rows of t_{k-1} */
        tc_deriv<MT>(a, Y1, A, h, mt, g, q, e, y, d, [&] {
            if (pre) {
                const double2 o = Er[((k + 1) % 3) * a.n_f + threadIdx.x];
                Er[((k + 2) % 3) * a.n_f + threadIdx.x] = ef;
                Em[((k + 2) % 3) * a.n_f + threadIdx.x] = make_double2(0.5 * (ef.x + o.x), 0.5 * (ef.y + o.y));
            }
        });
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const double2 kk = make_double2(-ht * d[c].y, ht * d[c].x);
            psi[c].x += sixth * (acc[c].x + kk.x);
            psi[c].y += sixth * (acc[c].y + kk.y);
            y[c] = psi[c];
        }
        tc_put<MT>(Y0, psi, h, mt, g, q);
        __syncthreads();
    }
    /* the record of the last time */
    tc_pol_tiles<MT>(a, Y0, wsm, Fd, PM, warp, g, q);
    tc_norms<MT>(a, a.n_t - 1, nrm, psi, h, mt, g, q, warp, wsm, ppart);
    __syncthreads();
    mbloch_pol_sums<MT, MBLOCH_TC_ATOMS>(a, a.n_t - 1, PM, nrm, warp, lane, atom0, part, dev);
    mbloch_zstep_end(a, pp, sl);
    mbloch_block_dev<MBLOCH_TC_ATOMS>(dev, devb);
}
