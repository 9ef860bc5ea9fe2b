/*
 * mbloch_tcf.cuh -- the float form of the tensor-core atom kernel of the
 * CUDA Maxwell-Bloch backend (source 004, eq. 4 advanced by the RK4 of
 * algorithm 2, the polarisation of eq. 6), included by cuda/mbloch/mbloch.cu
 * after mbloch_tc.cuh, whose tiling, pipeline and reductions it shares.
 *
 * The atoms' states, the RK4 stages and the coupling operands are float;
 * the products C Y of a stage (and the polarisation products) run on the
 * tensor cores in TF32 with split operands: every float x is the sum of
 * two TF32 numbers hi + lo (to 2^-23 |x|, tf32_split), and a real product
 * is the three TF32 products ah bh + ah bl + al bh with float accumulation (the dropped
 * al bl is below 2^-24 |a b|), so that a product is as good as a float
 * one.  mma.m16n8k8.tf32 has the fragments of the FP64 m16n8k8 of
 * mbloch_tc.cuh, so the tiles are the same: warp (h, mt) owns output
 * levels 16 mt .. 16 mt + 15 of half h, here for each of the block's atom
 * groups of eight (MBLOCH_TCF_GROUPS; the n tiles).
 *
 * What differs from the FP64 form, besides the arithmetic:
 *  - a block holds two atom groups, whose products share each warp's
 *    coupling operands (formed once for both) and give it two independent
 *    chains;
 *  - the rows of a tile are ordered so that a lane's two rows (g and g + 8
 *    of the fragment) are the level pair 2g, 2g + 1 (tcf_out), and the
 *    stage buffers hold the split values by level pair: entry [pair][atom]
 *    of the real (imaginary) plane is (hi, hi, lo, lo) of levels 2P, 2P +
 *    1, which is the B operand pair of a k step (source levels 2q, 2q + 1
 *    in columns q, q + 4), read with one 16-byte load and no moves; the
 *    writer splits its values once;
 *  - the field rows are kept in shared memory as a forward and a reversed
 *    copy, zero-padded so that every operand of a lane is at a constant
 *    offset from one lane pointer (ground rows read eps_{-l}, excited rows
 *    eps_l; no index arithmetic or clamping when the operands are formed);
 *  - each lane's polarisation outputs (mode sum slot and F) come from a
 *    table made once per launch;
 *  - the mode sums PM are float (per-block sums over its atoms), the
 *    per-block partials double, as in the FP64 form;
 *  - the stage barrier is split (mbarrier: arrive, own work, wait).
 *
 * Compile-time switches of the stage barrier, for compute-sanitizer's
 * racecheck (bench/mbloch_racecheck.sh; every form gives the same bits):
 *  - NLSEPY_MBLOCH_SYNCTHREADS=1: __syncthreads where a warp waits (the
 *    arrive does nothing), =2: __syncthreads where it arrives (the wait
 *    does nothing); 0 (default): the mbarrier;
 *  - NLSEPY_MBLOCH_ARRIVE_ALL=1: every thread arrives on the mbarrier (a
 *    count of the block's threads) instead of lane 0 of each warp after
 *    __syncwarp.
 */

#ifndef NLSEPY_MBLOCH_SYNCTHREADS
#define NLSEPY_MBLOCH_SYNCTHREADS 0
#endif
#ifndef NLSEPY_MBLOCH_ARRIVE_ALL
#define NLSEPY_MBLOCH_ARRIVE_ALL 0
#endif
#if NLSEPY_MBLOCH_SYNCTHREADS < 0 || NLSEPY_MBLOCH_SYNCTHREADS > 2
#error "NLSEPY_MBLOCH_SYNCTHREADS must be 0 (mbarrier), 1 (__syncthreads at the wait) or 2 (at the arrive)"
#endif
#if NLSEPY_MBLOCH_ARRIVE_ALL != 0 && NLSEPY_MBLOCH_ARRIVE_ALL != 1
#error "NLSEPY_MBLOCH_ARRIVE_ALL must be 0 (one arrival a warp) or 1 (every thread)"
#endif

/* the entry of (level pair r, atom a) in rows of 8 NT atoms: a's column XOR (r & 1) | (2r & 6).
 * A quarter warp of 16-byte accesses touches eight distinct bank groups
 * (column mod 8) both when lanes (g, q) read pair base + q, atom g (the B
 * operands: the XOR values of four consecutive pairs are 0, 3, 4, 7 mod 8)
 * and when they write or read pair base + g, atoms 2q + u (the parity of
 * the XOR alternates between consecutive pairs). */
template <int NT> static __host__ __device__ inline int tcf_at(int r, int a)
{
    return r * 8 * NT + (a ^ ((r & 1) | ((r << 1) & 6)));
}

/* A block holds NA = 8 NT atoms (NT atom groups of eight, the n tiles of
 * every warp); a level-pair row of a plane of the stage buffers holds the
 * NA atoms (16-byte entries), the column swizzled (tcf_at). */
template <int MT, int NT = 1> struct TcfTile {
    static constexpr int L = 16 * MT; /* padded levels a half */
    static constexpr int KS = L / 8;  /* k steps over a half */
    static constexpr int NA = 8 * NT; /* atoms a block */
    static constexpr int PP = L * NA; /* entries of a plane (L level pairs: both halves) */
};

/* output level (within its half) of element i of lane (g, q)'s fragment
 * rows in tile mt: rows g and g + 8 are levels 2g and 2g + 1 */
static __host__ __device__ inline int tcf_out(int mt, int g, int i) { return 16 * mt + 2 * g + (i & 1); }

/* a stage buffer: real and imaginary planes [level pair][atom] */
struct TcfBuf {
    uint4 *re, *im;
};

/* The padded field row of a set: [PLf zeros | eps_0 .. eps_{n_f-1} | PRf
 * zeros] then the same reversed; W entries each half. */
struct TcfRing {
    int plf, w; /* left pad of the forward half, entries a half */
};

static __host__ __device__ inline TcfRing tcf_ring(int L, int l_min, int l_max)
{
    TcfRing r;
    r.plf = L - 1 + l_min > 0 ? L - 1 + l_min : 0;
    const int prf = L - 1 - l_max > 0 ? L - 1 - l_max : 0;
    r.w = r.plf + (l_max - l_min + 1) + prf;
    return r;
}

/* shared memory of k_atoms_tcf<MT, NT> */
static size_t tcf_smem_bytes(int MT, int NT, int n_f, int l_min, int l_max)
{
    const size_t L = 16 * (size_t)MT, KS = L / 8, NA = 8 * (size_t)NT;
    const TcfRing r = tcf_ring((int)L, l_min, l_max);
    return 8 * (2 * MT * KS * 64) + 16 * (2 * 2 * L * NA) + 8 * (((size_t)n_f + 1) * MBLOCH_TC_PMS) +
           8 * (6 * 2 * (size_t)r.w) + 8 * (MT * 4 * 64 * (size_t)MT) + 8 * (2 * (size_t)MT * NA + NA) + 32;
}

/* x = hi + lo by Veltkamp's splitting (s = 13): hi has 11 significant
 * bits, a TF32 number, and lo = x - hi exactly, with at most 12 bits, of
 * which the tensor core reads the leading 11 (the TF32 operand is the top
 * 19 bits of the register): |x - hi - lo_tf32| <= 2^-23 |x|.  Four float
 * operations, every rounding explicit (no contraction), NaN and infinity
 * stay non-finite. */
__device__ __forceinline__ void tf32_split(float x, uint32_t &hi, uint32_t &lo)
{
    const float t = __fmul_rn(x, 8193.0f);
    const float h = __fsub_rn(t, __fsub_rn(t, x));
    hi = __float_as_uint(h);
    lo = __float_as_uint(__fsub_rn(x, h));
}

/* d += a b for one m16n8k8 tile in TF32 with float accumulation */
__device__ __forceinline__ void tmma16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* the split product d += ah bh + ah bl + al bh (the small terms last) */
__device__ __forceinline__ void tmma3(float d[4], const uint32_t ah[4], const uint32_t al[4], uint32_t bh0,
                                      uint32_t bh1, uint32_t bl0, uint32_t bl1)
{
    tmma16(d, ah, bh0, bh1);
    tmma16(d, ah, bl0, bl1);
    tmma16(d, al, bh0, bh1);
}

/* the coefficient operands of tile (h, mt), split: element i (a0 .. a3)
 * of k step s as in TcA */
template <int MT> struct TcAF {
    uint32_t rh[TcfTile<MT>::KS][4], rl[TcfTile<MT>::KS][4], ih[TcfTile<MT>::KS][4], il[TcfTile<MT>::KS][4];
};

/* the lane's operands h_t 0.5 F eps_l (the sign of the imaginary part, -1
 * on the ground half, is applied in tcf_deriv) from its h_t 0.5 F pairs ft
 * and its pointer ep into a padded field row:
 * the operand of element i of k step s has l = tcf_out - tc_in = (16 mt +
 * 2g - 2q) + (i & 1) - 8 s - (i >> 1), the constant part an offset */
template <int MT>
__device__ __forceinline__ void tcf_make_a(TcAF<MT> &A, const float2 *ft, const float2 *ep)
{
#pragma unroll
    for (int s = 0; s < TcfTile<MT>::KS; ++s)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            const float2 f = ft[(s * 2 + p) * 32];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int i = 2 * p + u;
                const float2 ev = ep[(i & 1) - 8 * s - (i >> 1)];
                const float fu = u ? f.y : f.x;
                tf32_split(fu * ev.x, A.rh[s][i], A.rl[s][i]);
                tf32_split(fu * ev.y, A.ih[s][i], A.il[s][i]);
            }
        }
}

/* D = e y + sum_s C Y_src for the lane's 4 NT outputs (levels 2g, 2g + 1
 * of the tile; atoms 8n + 2q, + 1 of n tile n, value 4n + c: level 2g + (c
 * >> 1), atom 8n + 2q + (c & 1)) from the split stage vector: twelve TF32
 * products a k step into four accumulators (Re: Ar Br - sg Ai Bi, Im: Ar
 * Bi + sg Ai Br, sg = -1 on the ground half: the conjugate); every k step
 * is multiplied (zero coefficients off the band), without branches; mid()
 * runs while the products are in flight */
template <int MT, int NT, class Mid>
__device__ __forceinline__ void tcf_deriv(float sg, TcfBuf Y, const TcAF<MT> &A, int h, int g, int q,
                                          const float e[4 * NT], const float2 y[4 * NT], float2 d[4 * NT], Mid mid)
{
    typedef TcfTile<MT, NT> TT;
    const int yo = tcf_at<NT>((1 - h) * TT::L / 2 + q, g); /* level pair 4s + q of the other half, atom g */
    uint4 br[NT][TT::KS], bi[NT][TT::KS];                  /* (hi, hi, lo, lo) of source levels 8s + 2q, + 1 */
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int s = 0; s < TT::KS; ++s) {
            br[n][s] = Y.re[yo + 4 * s * TT::NA + 8 * n];
            bi[n][s] = Y.im[yo + 4 * s * TT::NA + 8 * n];
        }
    float acc[NT][4][4]; /* Ar Br, Ar Bi, Ai Bi, Ai Br */
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int p = 0; p < 4; ++p)
#pragma unroll
            for (int c = 0; c < 4; ++c)
                acc[n][p][c] = 0;
#pragma unroll
    for (int s = 0; s < TT::KS; ++s)
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            tmma3(acc[n][0], A.rh[s], A.rl[s], br[n][s].x, br[n][s].y, br[n][s].z, br[n][s].w);
            tmma3(acc[n][1], A.rh[s], A.rl[s], bi[n][s].x, bi[n][s].y, bi[n][s].z, bi[n][s].w);
            tmma3(acc[n][2], A.ih[s], A.il[s], bi[n][s].x, bi[n][s].y, bi[n][s].z, bi[n][s].w);
            tmma3(acc[n][3], A.ih[s], A.il[s], br[n][s].x, br[n][s].y, br[n][s].z, br[n][s].w);
        }
    mid();
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int v = 4 * n + c;
            d[v] = make_float2(__fmaf_rn(e[v], y[v].x, __fmaf_rn(-sg, acc[n][2][c], acc[n][0][c])),
                               __fmaf_rn(e[v], y[v].y, __fmaf_rn(sg, acc[n][3][c], acc[n][1][c])));
        }
}

/* the lane's polarisation outputs: for tile j and element c, the slot in
 * PM (mode row li for band entries, the scratch row n_f otherwise) and F */
template <int MT>
__device__ __forceinline__ void tcf_pol_table(const MBTc &a, const float *Fg, int2 *tab, int warp, int g, int q)
{
    typedef TcfTile<MT> TT;
    for (int j = 0; j < MT; ++j) {
        const int t = warp + 2 * MT * j, mt = t / TT::KS, nt = t % TT::KS;
        for (int c = 0; c < 4; ++c) {
            const int m = tcf_out(mt, g, c >> 1), n = 8 * nt + 2 * q + (c & 1), li = n - m - a.l_min;
            const bool band = m < a.n_g && n < a.n_e && li >= 0 && li < a.n_f;
            tab[(j * 4 + c) * 64 * MT + threadIdx.x] =
                make_int2((band ? li : a.n_f) * MBLOCH_TC_PMS + m, __float_as_int(band ? Fg[m * a.n_e + n] : 0.0f));
        }
    }
}

/* M = conj(G)^T (w E) over the block's atoms for this warp's tiles of the
 * ground x excited product, in split TF32 (G split as stored, w E split
 * here); F M into PM (float).  Rows g, g + 8 of a tile are the ground
 * levels 2g, 2g + 1 (one stored pair), k columns q, q + 4 the atoms 2q,
 * 2q + 1 of each atom group (a k step a group), and columns g of B the
 * excited level 8 nt + g. */
template <int MT, int NT>
__device__ __forceinline__ void tcf_pol_tiles(TcfBuf Y, const float *wsf, const int2 *tab, float2 *PM, int warp,
                                              int g, int q)
{
    typedef TcfTile<MT, NT> TT;
#pragma unroll
    for (int j = 0; j < MT; ++j) {
        const int t = warp + 2 * MT * j, mt = t / TT::KS, nt = t % TT::KS;
        const int rg = 8 * mt + g, re = TT::L / 2 + 4 * nt + (g >> 1);
        const bool odd = g & 1;
        float r[4] = {0, 0, 0, 0}, im[4] = {0, 0, 0, 0};
#pragma unroll
        for (int n = 0; n < NT; ++n) { /* k steps over the atom groups */
            /* the (hi, hi) and (lo, lo) halves of the entries of atoms 8n + 2q, + 1 */
            const int a0 = 8 * n + 2 * q;
            const uint4 R0 = Y.re[tcf_at<NT>(rg, a0)], R1 = Y.re[tcf_at<NT>(rg, a0 + 1)];
            const uint4 I0 = Y.im[tcf_at<NT>(rg, a0)], I1 = Y.im[tcf_at<NT>(rg, a0 + 1)];
            const uint32_t grh[4] = {R0.x, R0.y, R1.x, R1.y}, grl[4] = {R0.z, R0.w, R1.z, R1.w};
            const uint32_t gih[4] = {I0.x, I0.y, I1.x, I1.y}, gil[4] = {I0.z, I0.w, I1.z, I1.w};
            uint32_t erh[2], erl[2], eih[2], eil[2], nrh[2], nrl[2];
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const uint4 Er = Y.re[tcf_at<NT>(re, a0 + u)], Ei = Y.im[tcf_at<NT>(re, a0 + u)]; /* hi + lo */
                const float er = odd ? __uint_as_float(Er.y) + __uint_as_float(Er.w)
                                     : __uint_as_float(Er.x) + __uint_as_float(Er.z);
                const float ei = odd ? __uint_as_float(Ei.y) + __uint_as_float(Ei.w)
                                     : __uint_as_float(Ei.x) + __uint_as_float(Ei.z);
                tf32_split(wsf[a0 + u] * er, erh[u], erl[u]);
                tf32_split(wsf[a0 + u] * ei, eih[u], eil[u]);
                nrh[u] = erh[u] ^ 0x80000000u; /* -er: the sign bit */
                nrl[u] = erl[u] ^ 0x80000000u;
            }
            tmma3(r, grh, grl, erh[0], erh[1], erl[0], erl[1]);
            tmma3(im, grh, grl, eih[0], eih[1], eil[0], eil[1]);
            tmma3(r, gih, gil, eih[0], eih[1], eil[0], eil[1]);
            tmma3(im, gih, gil, nrh[0], nrh[1], nrl[0], nrl[1]);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int2 tv = tab[(j * 4 + c) * 64 * MT + threadIdx.x];
            const float f = __int_as_float(tv.y);
            PM[tv.x] = make_float2(f * r[c], f * im[c]);
        }
    }
}

/* psi of t_k (the lane's four values, levels 2g and 2g + 1 of the tile):
 * |psi|^2 per atom summed over the warp's levels into nrm, and (want_pop)
 * the weighted populations summed over the block's atoms into ppart, in
 * double (as tc_norms) */
template <int MT, int NT>
__device__ __forceinline__ void tcf_norms(const MBTc &a, int k, double *nrm, const float2 psi[4 * NT], int h, int mt,
                                          int g, int q, int warp, const double *wsm, double *ppart)
{
    double v0 = 0, v1 = 0; /* populations of levels 2g, 2g + 1 over the lane's atoms */
#pragma unroll
    for (int n = 0; n < NT; ++n) {
        double p[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const double x = psi[4 * n + c].x, y = psi[4 * n + c].y;
            p[c] = x * x + y * y;
        }
        double s0 = p[0] + p[2], s1 = p[1] + p[3]; /* atoms 8n + 2q, + 1 */
        mbloch_sum_over_g(s0, s1);
        if (g == 0)
            *(double2 *)(nrm + warp * 8 * NT + 8 * n + 2 * q) = make_double2(s0, s1);
        if (a.want_pop) {
            const double w0 = wsm[8 * n + 2 * q], w1 = wsm[8 * n + 2 * q + 1];
            v0 += w0 * p[0] + w1 * p[1];
            v1 += w0 * p[2] + w1 * p[3];
        }
    }
    if (a.want_pop) {
        for (int d = 1; d < 4; d <<= 1) {
            v0 += __shfl_xor_sync(0xffffffffu, v0, d);
            v1 += __shfl_xor_sync(0xffffffffu, v1, d);
        }
        const int nh = h ? a.n_e : a.n_g, lev = tcf_out(mt, g, 0);
        double *pp = ppart + ((size_t)blockIdx.x * a.n_t + k) * a.n_lev + (h ? a.n_g : 0);
        if (q == 0 && lev < nh)
            pp[lev] = v0;
        if (q == 0 && lev + 1 < nh)
            pp[lev + 1] = v1;
    }
}

/* the lane's 4 NT values into a stage buffer, split: levels 2g and 2g + 1
 * of the tile (one pair), atoms 8n + 2q and 8n + 2q + 1 of each group */
template <int MT, int NT>
__device__ __forceinline__ void tcf_put(TcfBuf Y, const float2 v[4 * NT], int h, int mt, int g, int q)
{
    const int r = h * TcfTile<MT, NT>::L / 2 + 8 * mt + g;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            const int o = tcf_at<NT>(r, 8 * n + 2 * q + u);
            const float2 lo = v[4 * n + u], hi = v[4 * n + 2 + u]; /* levels 2g, 2g + 1 */
            uint4 re, im;
            tf32_split(lo.x, re.x, re.z);
            tf32_split(hi.x, re.y, re.w);
            tf32_split(lo.y, im.x, im.z);
            tf32_split(hi.y, im.y, im.w);
            Y.re[o] = re;
            Y.im[o] = im;
        }
}

/* the stage update: k = i h S (d = h S: h_t is in the operands and
 * energies), acc (wa = 0 sets, else adds wa k), and the next stage vector
 * psi + wy k */
template <int NT>
__device__ __forceinline__ void tcf_rk(const float2 d[4 * NT], float wa, float wy, const float2 psi[4 * NT],
                                       float2 acc[4 * NT], float2 y[4 * NT])
{
#pragma unroll
    for (int c = 0; c < 4 * NT; ++c) {
        const float2 kk = make_float2(-d[c].y, d[c].x); /* d is h_t S */
        if (wa == 0)
            acc[c] = kk;
        else {
            acc[c].x = __fmaf_rn(wa, kk.x, acc[c].x);
            acc[c].y = __fmaf_rn(wa, kk.y, acc[c].y);
        }
        y[c] = make_float2(__fmaf_rn(wy, kk.x, psi[c].x), __fmaf_rn(wy, kk.y, psi[c].y));
    }
}

/* A split barrier of the block's warps in shared memory (mbarrier,
 * sm_80): each warp arrives once its part of a stage vector is written
 * (release: lane 0 after __syncwarp, whose ordering of the lanes' writes
 * the release carries on), does work of its own, and then waits for the
 * phase to complete (acquire), so that the wait for the slowest warp
 * overlaps that work.  The switches above replace it for racecheck. */
__device__ __forceinline__ unsigned tcf_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void tcf_bar_init(unsigned long long *b, int count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(tcf_smem_addr(b)), "r"(count) : "memory");
}

/* arrivals that complete a phase of the block of `warps` warps */
__host__ __device__ constexpr int tcf_bar_count(int warps) { return NLSEPY_MBLOCH_ARRIVE_ALL ? 32 * warps : warps; }

__device__ __forceinline__ void tcf_bar_arrive(unsigned long long *b, int lane)
{
#if NLSEPY_MBLOCH_SYNCTHREADS == 2
    (void)b;
    (void)lane;
    __syncthreads();
#elif NLSEPY_MBLOCH_SYNCTHREADS == 0
#if NLSEPY_MBLOCH_ARRIVE_ALL
    (void)lane;
#else
    __syncwarp();
    if (lane == 0)
#endif
        asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(tcf_smem_addr(b)) : "memory");
#else
    (void)b;
    (void)lane;
#endif
}

/* waits until the phase of parity (phase & 1) is complete; phase += 1 */
__device__ __forceinline__ void tcf_bar_wait(unsigned long long *b, unsigned &phase)
{
#if NLSEPY_MBLOCH_SYNCTHREADS == 1
    (void)b;
    __syncthreads();
#elif NLSEPY_MBLOCH_SYNCTHREADS == 0
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(tcf_smem_addr(b)), "r"(phase & 1)
                     : "memory");
#else
    (void)b;
#endif
    ++phase;
}

/* a field value (mode li) into a padded row: forward and reversed copy */
__device__ __forceinline__ void tcf_ring_put(float2 *row, const TcfRing &r, int li, double2 v)
{
    const float2 f = make_float2((float)v.x, (float)v.y);
    row[r.plf + li] = f;
    row[2 * r.w - 1 - r.plf - li] = f;
}

/* Atom groups of eight a block, and the blocks an SM the float kernel is
 * compiled for: two groups (16 atoms, 255 registers, no spills), two
 * blocks, the fastest of the shapes tried for the benchmark problem
 * (bench/RESULTS.md, Maxwell-Bloch section): one group in three blocks
 * (168 registers) is slower; one group in four blocks (128 registers, a
 * few spills) or two (233-238 registers) no faster, in five (96
 * registers) slower. */
#define MBLOCH_TCF_GROUPS 2
#define MBLOCH_TCF_BLOCKS 2

/* the float atom kernel; arguments and z pipeline as k_atoms_tc; NT atom
 * groups of eight a block */
template <int MT, int NT = MBLOCH_TCF_GROUPS>
__global__ void __launch_bounds__(64 * MT, MBLOCH_TCF_BLOCKS)
    k_atoms_tcf(const __grid_constant__ MBTc a, const __grid_constant__ MBPipe pp, const double2 *eps,
                const float2 *psi0, const float *det, const float *w, const float *Fg, const double *ftab,
                double2 *part, double *ppart, double *devb)
{
    typedef TcfTile<MT, NT> TT;
    extern __shared__ __align__(16) unsigned char smem[];
    /* layout: the lanes' h_t 0.5 F pairs [warp][KS][2][32] | 2 stage buffers |
     * PM [n_f + 1][PMS] | 6 padded field rows (t rows 0-2, mean rows 0-2)
     * | pol table [MT][4][64 MT] | norms [2MT][8] (double) | weights [8] */
    const TcfRing rg = tcf_ring(TT::L, a.l_min, a.l_min + a.n_f - 1);
    float2 *Ft = (float2 *)smem;
    uint4 *Yv = (uint4 *)(Ft + 2 * MT * TT::KS * 64);
    const TcfBuf Y0 = {Yv, Yv + TT::PP}, Y1 = {Yv + 2 * TT::PP, Yv + 3 * TT::PP};
    float2 *PM = (float2 *)(Yv + 4 * TT::PP);
    float2 *ring = PM + (a.n_f + 1) * MBLOCH_TC_PMS;
    int2 *ptab = (int2 *)(ring + 12 * rg.w);
    double *nrm = (double *)(ptab + MT * 4 * 64 * MT);
    double *wsm = nrm + 2 * MT * TT::NA;
    __shared__ float wsf[TT::NA];
    __shared__ unsigned long long sbar; /* the stage barrier (one arrival a warp, tcf_bar_count) */

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, q = lane & 3, h = warp / MT, mt = warp % MT;
    const int sl = pp.S > 1 ? blockIdx.x / pp.nb : 0, bl = pp.S > 1 ? blockIdx.x % pp.nb : blockIdx.x;
    const int atom0 = bl * TT::NA;
    const double2 *E = mbloch_fields(a, pp, sl, eps); /* z step sl: one round */
    if (sl > 0)
        mbloch_pipe_start<MT>(a, pp, sl, bl, eps, part, warp, lane);

    for (int i = threadIdx.x; i < 2 * MT * TT::KS * 128; i += blockDim.x)
        ((float *)Ft)[i] = (float)(a.h * ftab[i]); /* h_t 0.5 F: the stages' i h_t S without a multiply */
    for (int i = threadIdx.x; i < 4 * TT::PP; i += blockDim.x)
        Yv[i] = make_uint4(0, 0, 0, 0);
    for (int i = threadIdx.x; i < (a.n_f + 1) * MBLOCH_TC_PMS; i += blockDim.x)
        PM[i] = make_float2(0, 0);
    for (int i = threadIdx.x; i < 12 * rg.w; i += blockDim.x)
        ring[i] = make_float2(0, 0);
    tcf_pol_table<MT>(a, Fg, ptab, warp, g, q);
    if (threadIdx.x < TT::NA) {
        const double wv = atom0 + (int)threadIdx.x < a.n_atoms ? (double)w[atom0 + threadIdx.x] : 0.0;
        wsm[threadIdx.x] = wv;
        wsf[threadIdx.x] = (float)wv;
    }
    if (threadIdx.x == 0)
        tcf_bar_init(&sbar, tcf_bar_count(2 * MT));
    __syncthreads(); /* the zeros before the field rows */
    for (int i = threadIdx.x; i < 3 * a.n_f; i += blockDim.x) { /* rows 0-2 and the means of 0-1, 1-2 */
        const int r = i / a.n_f, li = i % a.n_f;
        const double2 ei = i < a.n_t * a.n_f ? __ldcg(E + i) : make_double2(0, 0);
        tcf_ring_put(ring + 2 * r * rg.w, rg, li, ei);
        if (i >= a.n_f && i < a.n_t * a.n_f) {
            const double2 eo = __ldcg(E + i - a.n_f);
            tcf_ring_put(ring + 2 * (3 + r) * rg.w, rg, li, make_double2(0.5 * (ei.x + eo.x), 0.5 * (ei.y + eo.y)));
        }
    }
    /* the fetching lanes keep the last row fetched (t_{k+1}) in double for the means */
    double2 elast = make_double2(0, 0);
    if (threadIdx.x < a.n_f && 2 < a.n_t)
        elast = __ldcg(E + 2 * a.n_f + threadIdx.x);

    /* the lane's 4 NT values: levels 16 mt + 2g (+ 1) of half h, atoms 8n + 2q (+ 1) */
    const int nh = h ? a.n_e : a.n_g;
    float e[4 * NT];
    float2 psi[4 * NT], acc[4 * NT], y[4 * NT], d[4 * NT];
#pragma unroll
    for (int c = 0; c < 4 * NT; ++c) {
        const int lev = tcf_out(mt, g, (c & 3) >> 1), D = atom0 + 8 * (c >> 2) + 2 * q + (c & 1);
        const bool valid = D < a.n_atoms;
        e[c] = (float)(a.h * (h ? (double)lev * a.ke : (double)lev * a.kg + (valid ? (double)det[D] : 0.0)));
        psi[c] = make_float2(0, 0);
        if (valid && lev < nh)
            psi[c] = psi0[(size_t)D * a.n_lev + (h ? a.n_g : 0) + lev];
        y[c] = psi[c];
        acc[c] = make_float2(0, 0);
    }
    const float2 *ft = Ft + warp * TT::KS * 64 + lane;
    /* the lane's pointer into a padded row: l = 16 mt + 2g - 2q + const */
    const int eoff = (h ? rg.plf - a.l_min : 2 * rg.w - 1 - rg.plf + a.l_min) + 16 * mt + 2 * g - 2 * q;
    const float sg = h ? 1.0f : -1.0f;
    tcf_put<MT, NT>(Y0, psi, h, mt, g, q);
    tcf_norms<MT, NT>(a, 0, nrm, psi, h, mt, g, q, warp, wsm, ppart);
    __syncthreads();
    TcAF<MT> A; /* the operands of K(t_0) */
    tcf_make_a<MT>(A, ft, ring + eoff);
    unsigned ph = 0; /* phases of sbar waited for */
    double dev = 0;
    const float sixth = (float)(1.0 / 6.0);
    for (int k = 1; k < a.n_t; ++k) {
        const bool pre = threadIdx.x < a.n_f && k + 2 < a.n_t;
        mbloch_pipe_row<MT>(a, pp, sl, bl, k, eps, part, warp, lane);
        double2 ef = make_double2(0, 0);
        /* stage 1: K(t_{k-1}) on psi; meanwhile the polarisation products
         * of psi (t_{k-1}); after arriving, the mean operands */
        tcf_deriv<MT, NT>(sg, Y0, A, h, g, q, e, y, d, [&] { tcf_pol_tiles<MT, NT>(Y0, wsf, ptab, PM, warp, g, q); });
        tcf_rk<NT>(d, 0.0f, 0.5f, psi, acc, y);
        tcf_put<MT, NT>(Y1, y, h, mt, g, q);
        tcf_bar_arrive(&sbar, lane);
        tcf_make_a<MT>(A, ft, ring + 2 * (3 + k % 3) * rg.w + eoff);
        tcf_bar_wait(&sbar, ph);
        /* stage 2: midpoint; after arriving, the mode sums of t_{k-1} */
        tcf_deriv<MT, NT>(sg, Y1, A, h, g, q, e, y, d, [] {});
        tcf_rk<NT>(d, 2.0f, 0.5f, psi, acc, y);
        tcf_put<MT, NT>(Y0, y, h, mt, g, q);
        tcf_bar_arrive(&sbar, lane);
        mbloch_pol_sums<MT, TT::NA>(a, k - 1, PM, nrm, warp, lane, atom0, part, dev);
        tcf_bar_wait(&sbar, ph);
        /* stage 3: midpoint; meanwhile the fetch of t_{k+2}; after
         * arriving, K(t_k) */
        tcf_deriv<MT, NT>(sg, Y0, A, h, g, q, e, y, d, [&] {
            if (pre)
                ef = __ldcg(E + (size_t)(k + 2) * a.n_f + threadIdx.x);
        });
        tcf_rk<NT>(d, 2.0f, 1.0f, psi, acc, y);
        tcf_put<MT, NT>(Y1, y, h, mt, g, q);
        tcf_bar_arrive(&sbar, lane);
        tcf_make_a<MT>(A, ft, ring + 2 * (k % 3) * rg.w + eoff);
        tcf_bar_wait(&sbar, ph);
        /* stage 4: K(t_k), the new psi; meanwhile t_{k+2} and its mean
         * with t_{k+1} into the rows of t_{k-1}; after arriving, the norms
         * and populations of psi (t_k) */
        tcf_deriv<MT, NT>(sg, Y1, A, h, g, q, e, y, d, [&] {
            if (pre) {
                tcf_ring_put(ring + 2 * ((k + 2) % 3) * rg.w, rg, threadIdx.x, ef);
                tcf_ring_put(ring + 2 * (3 + (k + 2) % 3) * rg.w, rg, threadIdx.x,
                             make_double2(0.5 * (ef.x + elast.x), 0.5 * (ef.y + elast.y)));
                elast = ef;
            }
        });
#pragma unroll
        for (int c = 0; c < 4 * NT; ++c) {
            const float2 kk = make_float2(-d[c].y, d[c].x);
            psi[c].x = __fmaf_rn(sixth, acc[c].x + kk.x, psi[c].x);
            psi[c].y = __fmaf_rn(sixth, acc[c].y + kk.y, psi[c].y);
            y[c] = psi[c];
        }
        tcf_put<MT, NT>(Y0, psi, h, mt, g, q);
        tcf_bar_arrive(&sbar, lane);
        tcf_norms<MT, NT>(a, k, nrm, psi, h, mt, g, q, warp, wsm, ppart);
        tcf_bar_wait(&sbar, ph);
    }
    __syncthreads(); /* the norms of the last time */
    tcf_pol_tiles<MT, NT>(Y0, wsf, ptab, PM, warp, g, q);
    __syncthreads();
    mbloch_pol_sums<MT, TT::NA>(a, a.n_t - 1, PM, nrm, warp, lane, atom0, part, dev);
    mbloch_zstep_end(a, pp, sl);
    mbloch_block_dev<TT::NA>(dev, devb);
}
