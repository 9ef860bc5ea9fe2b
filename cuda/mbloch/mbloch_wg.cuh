/*
 * mbloch_wg.cuh -- the Hopper form of the float atom kernel of the CUDA
 * Maxwell-Bloch backend (source 004: eq. 4 advanced by the RK4 of
 * algorithm 2, the polarisation of eq. 6), included by cuda/mbloch/mbloch.cu
 * after mbloch_tcf.cuh, whose split TF32 arithmetic (three products a
 * real product of operands split in two TF32 numbers) it shares, with a
 * cheaper split (wg_split).  It runs on the warpgroup MMA of sm_90a
 * (wgmma), for problems of 17 to 32 levels a half, and its launches take
 * more z steps than slices (the slices go round, mbloch_tc.cuh).
 *
 * The products of a stage are turned around with respect to
 * mbloch_tcf.cuh: the atoms are the rows (M) and the levels the columns,
 *     D[atom][out] = sum_in Y[atom][in] C^T[in][out],
 * so that a block of one warpgroup (four warps, 32 atoms) holds every
 * level of its atoms and no stage vector ever leaves the registers:
 *  - the 64 rows of a warpgroup's product are its 32 atoms' real and
 *    imaginary parts (warp w: atoms 8w .. 8w + 7; row g the real part of
 *    atom 8w + g, row g + 8 its imaginary part), so that the A operand is
 *    the stage vector itself, in registers;
 *  - the 64 columns are the real and imaginary coefficient rows of the 32
 *    output levels, B = [C_r^T | C_i^T] (32 source levels x 64) in shared
 *    memory, so that one m64n64k8 gives the four real products of a
 *    complex one and each lane combines its own (Re = P1 - sg P4, Im = sg
 *    P2 + P3, sg = -1 on the ground half: the conjugate coupling);
 *  - the k columns of a k step are ordered so that the accumulator of a
 *    lane (levels 8j + 2q, 8j + 2q + 1 of its atom) is exactly the A
 *    fragment it supplies to the other half's product (columns q, q + 4 of
 *    k step j), so the next stage vector goes from the accumulators to the
 *    next product without a move through shared memory (wg_kidx).
 * The ground and excited products of a stage are issued together (24
 * m64n64k8, each k step as hi hi + hi lo + lo hi of split operands); the
 * only block barriers are three a time step, for the coefficient sets.
 *
 * The coefficient sets (0.5 h F eps_l on the band, split, for the
 * excited product and its transpose for the ground one) are formed in
 * shared memory by the whole block, each lane its band entries from a
 * table made once a launch: K(t_k) into one buffer after stage 1 (it
 * serves stage 4 and the next step's stage 1), the midpoint set of the
 * next step into the other after stage 4.  The zeros off the band are
 * written once.
 *
 * The polarisation of t_k is the product M = conj(G)^T (w E) over the
 * block's 32 atoms (K) as one more 64 x 64 real product from shared
 * memory: rows the real and imaginary parts of the ground levels, columns
 * those of the weighted excited levels; F M goes into the mode-sum rows
 * PM that mbloch_pol_sums reduces, as in the other tensor-core kernels.
 *
 * Shared memory layouts (no swizzle, K-major core matrices of 8 rows x 16
 * bytes: rows 8 apart at 1024 bytes (SBO), k quads at 128 bytes (LBO)):
 * wg_bpos.
 */

#define MBLOCH_WG_ATOMS 32 /* atoms a block (a warpgroup: 4 warps x 8) */
#define MBLOCH_WG_L 32     /* levels a half, padded */
#define MBLOCH_WG_MAT 2048 /* floats of one 64 x 32 operand matrix */

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MBLOCH_WG_DEVICE 1
#endif

/* shared memory of k_atoms_wg */
static size_t wg_smem_bytes(int n_f)
{
    return 4 * (12 * (size_t)MBLOCH_WG_MAT) + 8 * (128 * (((size_t)n_f + 3) / 4)) +
           8 * ((size_t)n_f * MBLOCH_TC_PMS + 6 * (size_t)n_f) +
           8 * (MBLOCH_WG_ATOMS + 4 * 2 * MBLOCH_WG_L + MBLOCH_WG_ATOMS) + 4 * MBLOCH_WG_ATOMS + 64;
}

/* float index of element (row n of 64, column k of 32) of an operand
 * matrix: core matrix (n / 8, k / 4) at 256 (n / 8) + 32 (k / 4) */
static __host__ __device__ inline int wg_bpos(int n, int k)
{
    return (n >> 3) * 256 + (k >> 2) * 32 + (n & 7) * 4 + (k & 3);
}

/* the k index of source level v: levels 8J + 2Q + U sit in column Q + 4U
 * of k step J, where lane q's A fragment has columns q and q + 4 */
static __host__ __device__ inline int wg_kidx(int v) { return (v & ~7) + ((v & 7) >> 1) + 4 * (v & 1); }

#ifdef MBLOCH_WG_DEVICE
#define WG_DMAT (4 * MBLOCH_WG_MAT >> 4) /* one operand matrix on, in a descriptor's address field */

/* a shared-memory matrix descriptor: no swizzle, LBO 128 bytes (next k
 * quad), SBO 1024 bytes (next 8 rows) */
__device__ __forceinline__ uint64_t wg_desc(const float *p)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/* the block's shared-memory writes before it are visible to the tensor cores' reads after the next barrier */
__device__ __forceinline__ void wg_proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

#define WG_D32(d)                                                                                                    \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),      \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),        \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),       \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define WG_DREGS                                                                                                     \
    "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29," \
    "%30,%31}"

/* d (+)= a B, m64n64k8 TF32, A in registers (a0 .. a3 as mma.m16n8k8),
 * B from shared memory; ACC = 0 overwrites d */
template <int ACC> __device__ __forceinline__ void wg_rs(float d[32], const uint32_t a[4], uint64_t db)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " WG_DREGS ", {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
                 : WG_D32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(ACC));
}

/* d (+)= A B, both from shared memory */
template <int ACC> __device__ __forceinline__ void wg_ss(float d[32], uint64_t da, uint64_t db)
{
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " WG_DREGS ", %32, %33, p, 1, 1;\n}\n"
                 : WG_D32(d)
                 : "l"(da), "l"(db), "n"(ACC));
}

/* d = Y B for one half: four k steps of split products (hi hi, hi lo, lo hi) */
__device__ __forceinline__ void wg_half(float d[32], const uint32_t ah[4][4], const uint32_t al[4][4], uint64_t bh,
                                        uint64_t bl)
{
    wg_rs<0>(d, ah[0], bh);
    wg_rs<1>(d, ah[0], bl);
    wg_rs<1>(d, al[0], bh);
#pragma unroll
    for (int s = 1; s < 4; ++s) {
        wg_rs<1>(d, ah[s], bh + 16 * s); /* k step s: 256 bytes on */
        wg_rs<1>(d, ah[s], bl + 16 * s);
        wg_rs<1>(d, al[s], bh + 16 * s);
    }
}

/* the split state of a stage vector: [half][k step][a0 .. a3], a0 = Re and
 * a1 = Im of level 8s + 2q, a2, a3 those of level 8s + 2q + 1 */
struct WgA {
    uint32_t h[2][4][4], l[2][4][4];
};

/* x = hi + lo with hi rounded to the nearest TF32 number (ties away from
 * zero) by integer operations on the bits and lo = x - hi exact: the same
 * bound as tf32_split (the tensor core reads the top 11 bits of lo:
 * |x - hi - lo_tf32| <= 2^-23 |x|) in three operations, two of them off
 * the floating-point pipe; NaN and infinity stay non-finite (in hi or lo) */
__device__ __forceinline__ void wg_split(float x, uint32_t &hi, uint32_t &lo)
{
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = __float_as_uint(__fsub_rn(x, __uint_as_float(hi)));
}

/* value c = 2j + u (level 8j + 2q + u) of half hf into the split state */
__device__ __forceinline__ void wg_set(WgA &A, int hf, int c, float2 v)
{
    wg_split(v.x, A.h[hf][c >> 1][2 * (c & 1)], A.l[hf][c >> 1][2 * (c & 1)]);
    wg_split(v.y, A.h[hf][c >> 1][2 * (c & 1) + 1], A.l[hf][c >> 1][2 * (c & 1) + 1]);
}

/* that value back: hi + lo is exact */
__device__ __forceinline__ float2 wg_get(const WgA &A, int hf, int c)
{
    const int s = c >> 1, i = 2 * (c & 1);
    return make_float2(__fadd_rn(__uint_as_float(A.h[hf][s][i]), __uint_as_float(A.l[hf][s][i])),
                       __fadd_rn(__uint_as_float(A.h[hf][s][i + 1]), __uint_as_float(A.l[hf][s][i + 1])));
}

/* the operand matrices of a coefficient set (buffer b): excited hi, lo, ground hi, lo */
struct WgSet {
    float *eh, *el, *gh, *gl;
};

/* The band entries a lane forms in every coefficient set: four lanes a
 * ground level gl (gl = thread / 4), modes li = thread % 4 + 4r; entry
 * [r][thread] holds the offsets of the real part in the excited operand
 * (row el = gl + l_min + li, k column of gl) and in the ground one (row
 * gl, k column of el), li, and 0.5 h F[gl][el]; -1 where there is no
 * coupling.  The imaginary parts sit 32 rows (1024 floats) further on. */
__device__ __forceinline__ void wg_entries(const MBTc &a, const float *Fg, int2 *tab)
{
    const int gl = threadIdx.x >> 2;
    for (int r = 0; 4 * r < a.n_f; ++r) {
        const int li = (threadIdx.x & 3) + 4 * r, el = gl + a.l_min + li;
        int2 t = make_int2(-1, 0);
        if (gl < a.n_g && li < a.n_f && el >= 0 && el < a.n_e)
            t = make_int2(wg_bpos(el, wg_kidx(gl)) | wg_bpos(gl, wg_kidx(el)) << 11 | li << 22,
                          __float_as_int((float)(0.5 * a.h * (double)Fg[gl * a.n_e + el])));
        tab[r * blockDim.x + threadIdx.x] = t;
    }
}

/* a coefficient set from the field row R (n_f modes, float): for every
 * band entry of the lane the coefficient c = 0.5 h F[gl][el] eps_l, split,
 * into the excited operand and the ground one (wg_entries) */
__device__ __forceinline__ void wg_build(const MBTc &a, WgSet S, const int2 *tab, const float2 *R)
{
    for (int r = 0; 4 * r < a.n_f; ++r) {
        const int2 t = tab[r * blockDim.x + threadIdx.x];
        if (t.x < 0)
            continue;
        const int e0 = t.x & 0x7ff, g0 = (t.x >> 11) & 0x7ff;
        const float f = __int_as_float(t.y);
        const float2 ev = R[t.x >> 22];
        uint32_t rh, rl, ih, il;
        wg_split(f * ev.x, rh, rl);
        wg_split(f * ev.y, ih, il);
        S.eh[e0] = __uint_as_float(rh);
        S.el[e0] = __uint_as_float(rl);
        S.eh[e0 + 1024] = __uint_as_float(ih);
        S.el[e0 + 1024] = __uint_as_float(il);
        S.gh[g0] = __uint_as_float(rh);
        S.gl[g0] = __uint_as_float(rl);
        S.gh[g0 + 1024] = __uint_as_float(ih);
        S.gl[g0 + 1024] = __uint_as_float(il);
    }
}

/* the polarisation operands of psi (the lane's atom at, levels 8j + 2q +
 * u = value c of each half): ground rows 16j + 2q + u (Re), + 8 (Im) of A;
 * w E rows 8j + 2q + u (Re), 32 + that (Im) of B; column at.  As 2q + u
 * < 8, element (row 8J + 2q + u, at) is at 256 J + 4u + wg_bpos(2q, at). */
__device__ __forceinline__ void wg_pol_put(float *Ah, float *Al, float *Bh, float *Bl, const float2 psi[2][8],
                                           float wa, int at, int q)
{
    const int o = wg_bpos(2 * q, at);
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const int j = c >> 1, u = c & 1, og = o + 512 * j + 4 * u, oe = o + 256 * j + 4 * u;
        uint32_t h, l;
        wg_split(psi[0][c].x, h, l);
        Ah[og] = __uint_as_float(h);
        Al[og] = __uint_as_float(l);
        wg_split(psi[0][c].y, h, l);
        Ah[og + 256] = __uint_as_float(h);
        Al[og + 256] = __uint_as_float(l);
        wg_split(wa * psi[1][c].x, h, l);
        Bh[oe] = __uint_as_float(h);
        Bl[oe] = __uint_as_float(l);
        wg_split(wa * psi[1][c].y, h, l);
        Bh[oe + 1024] = __uint_as_float(h);
        Bl[oe + 1024] = __uint_as_float(l);
    }
}

/* the polarisation product (in flight until the next wait); dp: the
 * descriptor of its A hi matrix (A lo, B hi, B lo follow, 8 KB apart) */
__device__ __forceinline__ void wg_pol_mma(float d[32], uint64_t dp)
{
    const uint64_t ah = dp, al = dp + WG_DMAT, bh = dp + 2 * WG_DMAT, bl = dp + 3 * WG_DMAT;
    wg_ss<0>(d, ah, bh);
    wg_ss<1>(d, ah, bl);
    wg_ss<1>(d, al, bh);
#pragma unroll
    for (int s = 1; s < 4; ++s) {
        wg_ss<1>(d, ah + 16 * s, bh + 16 * s);
        wg_ss<1>(d, ah + 16 * s, bl + 16 * s);
        wg_ss<1>(d, al + 16 * s, bh + 16 * s);
    }
}

/* The lane's polarisation outputs: bit c of the mask is set where
 * (ground m = 8 warp + g, excited n = 8j + 2q + u) is a band entry; the
 * PM entry of c is then at pm + (8j + u) PMS (mode li = n - m - l_min),
 * its F at fp[8j + u] */
struct WgPol {
    unsigned mask;
    int pm;
    const float *fp;
};

__device__ __forceinline__ WgPol wg_pol_lane(const MBTc &a, const float *Fg, int m, int q)
{
    WgPol r = {0u, ((2 * q - m - a.l_min) * MBLOCH_TC_PMS + m), Fg + m * a.n_e + 2 * q};
    for (int c = 0; c < 8; ++c) {
        const int n = 8 * (c >> 1) + 2 * q + (c & 1), li = n - m - a.l_min;
        if (m < a.n_g && n < a.n_e && li >= 0 && li < a.n_f)
            r.mask |= 1u << c;
    }
    return r;
}

/* F M on the band into PM: the lane holds M for ground level m and the
 * excited levels n of wg_pol_lane (rows g: Re G, g + 8: Im G; columns n:
 * Re E, 32 + n: Im E) */
__device__ __forceinline__ void wg_pol_out(const WgPol &P, const float d[32], float2 *PM)
{
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        const int j = c >> 1, u = c & 1;
        if ((P.mask >> c) & 1u) {
            const float mr = d[4 * j + u] + d[16 + 4 * j + 2 + u]; /* Re G Re E + Im G Im E */
            const float mi = d[16 + 4 * j + u] - d[4 * j + 2 + u]; /* Re G Im E - Im G Re E */
            const float f = __ldg(P.fp + 8 * j + u);
            PM[P.pm + (8 * j + u) * MBLOCH_TC_PMS] = make_float2(f * mr, f * mi);
        }
    }
}

/* psi of t_k: |psi|^2 of the lane's atom (its four lanes q summed) into
 * nrm[at], and (want_pop) the weighted populations of the warp's atoms
 * into pw[warp][level] (lanes g = 0), in double */
__device__ __forceinline__ void wg_norms(const MBTc &a, const float2 psi[2][8], double wa, double *nrm, double *pw,
                                         int at, int warp, int lane, int q)
{
    float p[8]; /* the lane's 16 values, pairwise in float; the lanes' sums in double */
#pragma unroll
    for (int c = 0; c < 8; ++c)
        p[c] = __fmaf_rn(psi[0][c].x, psi[0][c].x, psi[0][c].y * psi[0][c].y) +
               __fmaf_rn(psi[1][c].x, psi[1][c].x, psi[1][c].y * psi[1][c].y);
    double s = (double)(((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])));
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    if (q == 0)
        nrm[at] = s;
    if (!a.want_pop)
        return;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            double v = wa * ((double)psi[hf][c].x * psi[hf][c].x + (double)psi[hf][c].y * psi[hf][c].y);
#pragma unroll
            for (int o = 4; o < 32; o <<= 1)
                v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane < 4)
                pw[warp * 2 * MBLOCH_WG_L + hf * MBLOCH_WG_L + 8 * (c >> 1) + 2 * q + (c & 1)] = v;
        }
}

/* the block's populations of t_k (the four warps' sums in order) into ppart */
__device__ __forceinline__ void wg_pops(const MBTc &a, int k, const double *pw, double *ppart)
{
    for (int i = threadIdx.x; i < a.n_lev; i += blockDim.x) {
        const int hf = i >= a.n_g, lev = hf ? i - a.n_g : i, o = hf * MBLOCH_WG_L + lev;
        const double v = ((pw[o] + pw[2 * MBLOCH_WG_L + o]) + pw[4 * MBLOCH_WG_L + o]) + pw[6 * MBLOCH_WG_L + o];
        ppart[((size_t)blockIdx.x * a.n_t + k) * a.n_lev + i] = v;
    }
}

/* one stage's update for both halves from the products d[hf] and the
 * stage vector in A: S = C y (conjugate on the ground half), D = e y + S,
 * k = i D (h_t is in the coefficients and energies), acc (wa = 0 sets,
 * else adds wa k), the next stage vector psi + wy k into A; last: psi +=
 * (acc + k) / 6 and A = psi */
template <int LAST>
__device__ __forceinline__ void wg_rk(const float d[2][32], WgA &A, float2 psi[2][8], float2 acc[2][8], float wa,
                                      float wy, const float eb[2], const float ek[2])
{
    const float sixth = (float)(1.0 / 6.0);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
        const float sg = hf ? 1.0f : -1.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            const int j = c >> 1, u = c & 1;
            const float p1 = d[hf][4 * j + u], p3 = d[hf][4 * j + 2 + u];
            const float p2 = d[hf][16 + 4 * j + u], p4 = d[hf][16 + 4 * j + 2 + u];
            const float2 y = wg_get(A, hf, c);
            const float e = __fmaf_rn((float)(8 * j + u), ek[hf], eb[hf]); /* h (lev k + det) */
            const float dr = __fmaf_rn(e, y.x, __fmaf_rn(-sg, p4, p1));
            const float di = __fmaf_rn(e, y.y, __fmaf_rn(sg, p2, p3));
            const float2 kk = make_float2(-di, dr);
            float2 nv;
            if (LAST) {
                psi[hf][c].x = __fmaf_rn(sixth, acc[hf][c].x + kk.x, psi[hf][c].x);
                psi[hf][c].y = __fmaf_rn(sixth, acc[hf][c].y + kk.y, psi[hf][c].y);
                nv = psi[hf][c];
            } else {
                if (wa == 0)
                    acc[hf][c] = kk;
                else {
                    acc[hf][c].x = __fmaf_rn(wa, kk.x, acc[hf][c].x);
                    acc[hf][c].y = __fmaf_rn(wa, kk.y, acc[hf][c].y);
                }
                nv = make_float2(__fmaf_rn(wy, kk.x, psi[hf][c].x), __fmaf_rn(wy, kk.y, psi[hf][c].y));
            }
            wg_set(A, hf, c, nv);
        }
    }
}

/* one stage's products: ground outputs from the excited stage vector and
 * the other way round (in flight until the wait) */
__device__ __forceinline__ void wg_stage_mma(float d[2][32], const WgA &A, uint64_t ds)
{
    wg_half(d[1], A.h[0], A.l[0], ds, ds + WG_DMAT);
    wg_half(d[0], A.h[1], A.l[1], ds + 2 * WG_DMAT, ds + 3 * WG_DMAT);
}
#endif /* MBLOCH_WG_DEVICE */

/* 1 where this build holds the sm_90a code of k_atoms_wg for the device */
__global__ void k_wg_probe(int *out)
{
#ifdef MBLOCH_WG_DEVICE
    *out = 1;
#else
    *out = 0;
#endif
}

/* the Hopper float atom kernel; arguments and z pipeline as k_atoms_tc
 * (ftab unused); one warpgroup of 32 atoms a block */
__global__ void __launch_bounds__(128, 2)
    k_atoms_wg(const __grid_constant__ MBTc a, const __grid_constant__ MBPipe pp, const double2 *eps,
               const float2 *psi0, const float *det, const float *w, const float *Fg, const double *ftab,
               double2 *part, double *ppart, double *devb)
{
#ifdef MBLOCH_WG_DEVICE
    (void)ftab;
    extern __shared__ __align__(16) unsigned char smem[];
    /* layout: 2 coefficient sets (4 matrices each) | polarisation operands
     * (A hi, lo, B hi, lo) | band entries [(n_f + 3) / 4][128] | PM [n_f][PMS] | field
     * rows [6][n_f] (t rows 0-2, mean rows 0-2) | norms [32] | warp
     * populations [4][64] | weights (double) | weights (float) */
    float *mat = (float *)smem;
    const WgSet S0 = {mat, mat + MBLOCH_WG_MAT, mat + 2 * MBLOCH_WG_MAT, mat + 3 * MBLOCH_WG_MAT};
    const WgSet S1 = {mat + 4 * MBLOCH_WG_MAT, mat + 5 * MBLOCH_WG_MAT, mat + 6 * MBLOCH_WG_MAT, mat + 7 * MBLOCH_WG_MAT};
    float *pAh = mat + 8 * MBLOCH_WG_MAT, *pAl = mat + 9 * MBLOCH_WG_MAT, *pBh = mat + 10 * MBLOCH_WG_MAT,
          *pBl = mat + 11 * MBLOCH_WG_MAT;
    int2 *tab = (int2 *)(mat + 12 * MBLOCH_WG_MAT);
    float2 *PM = (float2 *)(tab + 128 * ((a.n_f + 3) / 4));
    float2 *ring = PM + a.n_f * MBLOCH_TC_PMS;
    double *nrm = (double *)(ring + 6 * a.n_f);
    double *pw = nrm + MBLOCH_WG_ATOMS;
    double *wsm = pw + 4 * 2 * MBLOCH_WG_L;
    float *wsf = (float *)(wsm + MBLOCH_WG_ATOMS);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int sl = pp.S > 1 ? blockIdx.x / pp.nb : 0, bl = pp.S > 1 ? blockIdx.x % pp.nb : blockIdx.x;
    const int atom0 = bl * MBLOCH_WG_ATOMS, at = 8 * warp + g, D = atom0 + at;

    for (int i = threadIdx.x; i < 8 * MBLOCH_WG_MAT / 4; i += blockDim.x)
        ((float4 *)mat)[i] = make_float4(0, 0, 0, 0);
    wg_entries(a, Fg, tab);
    for (int i = threadIdx.x; i < a.n_f * MBLOCH_TC_PMS; i += blockDim.x)
        PM[i] = make_float2(0, 0);
    if (threadIdx.x < MBLOCH_WG_ATOMS) {
        const double wv = atom0 + (int)threadIdx.x < a.n_atoms ? (double)w[atom0 + threadIdx.x] : 0.0;
        wsm[threadIdx.x] = wv;
        wsf[threadIdx.x] = (float)wv;
    }
    __syncthreads(); /* the weights */

    /* the lane's values: atom at, levels 8j + 2q + u (c = 2j + u) of each half */
    const bool valid = D < a.n_atoms;
    const float eb[2] = {(float)(a.h * (2.0 * q * a.kg + (valid ? (double)det[D] : 0.0))), (float)(a.h * 2.0 * q * a.ke)};
    const float ek[2] = {(float)(a.h * a.kg), (float)(a.h * a.ke)};
    const float wa = wsf[at];
    /* the descriptors of the sets (excited hi, lo, ground hi, lo) and of the polarisation operands */
    const uint64_t dS0 = wg_desc(mat), dS1 = dS0 + 4 * WG_DMAT, dP = dS0 + 8 * WG_DMAT;
    const WgPol wp = wg_pol_lane(a, Fg, 8 * warp + g, q); /* the lane's ground level: 8 warp + g */
    float d[2][32], dp[32];
    double dev = 0;
    /* the z steps of this slice: sl, sl + S, ... (one round but for this kernel's persistent launches) */
    for (int z = sl; z < pp.m; z += pp.S) {
        const double2 *E = mbloch_fields(a, pp, z, eps);
        if (z > 0)
            mbloch_pipe_start<2>(a, pp, z, bl, eps, part, warp, lane);
        __syncthreads(); /* the last z step's reads of the field rows are over */
        for (int i = threadIdx.x; i < 3 * a.n_f; i += blockDim.x) { /* rows 0-2 and the means of 0-1, 1-2 */
            const double2 ei = i < a.n_t * a.n_f ? __ldcg(E + i) : make_double2(0, 0);
            ring[i] = make_float2((float)ei.x, (float)ei.y);
            if (i >= a.n_f && i < a.n_t * a.n_f) {
                const double2 eo = __ldcg(E + i - a.n_f);
                ring[3 * a.n_f + i] = make_float2((float)(0.5 * (ei.x + eo.x)), (float)(0.5 * (ei.y + eo.y)));
            }
        }
        __syncthreads();
        wg_build(a, S0, tab, ring);                   /* K(t_0): stage 1 */
        wg_build(a, S1, tab, ring + (3 + 1) * a.n_f); /* the mean of t_0, t_1: stages 2, 3 */
        float2 psi[2][8], acc[2][8];
        WgA A;
    #pragma unroll
        for (int hf = 0; hf < 2; ++hf)
    #pragma unroll
            for (int c = 0; c < 8; ++c) {
                const int lev = 8 * (c >> 1) + 2 * q + (c & 1);
                psi[hf][c] = make_float2(0, 0);
                if (valid && lev < (hf ? a.n_e : a.n_g))
                    psi[hf][c] = psi0[(size_t)D * a.n_lev + (hf ? a.n_g : 0) + lev];
                acc[hf][c] = make_float2(0, 0);
                wg_set(A, hf, c, psi[hf][c]);
            }
        wg_proxy_fence();
        __syncthreads(); /* the first two coefficient sets */
        for (int k = 1; k < a.n_t; ++k) {
            mbloch_pipe_row<2>(a, pp, z, bl, k, eps, part, warp, lane);
            /* psi (t_{k-1}): the polarisation operands, norms, populations */
            wg_pol_put(pAh, pAl, pBh, pBl, psi, wa, at, q);
            wg_norms(a, psi, wsm[at], nrm, pw, at, warp, lane, q);
            wg_proxy_fence();
            __syncthreads(); /* the operands; the mean set made in the last step */
            /* the polarisation product of t_{k-1}, then stage 1: K(t_{k-1}) (S0) */
            wg_fence();
            wg_pol_mma(dp, dP);
            wg_commit();
            wg_wait0();
            wg_pol_out(wp, dp, PM);
            wg_fence();
            wg_stage_mma(d, A, dS0);
            wg_commit();
            wg_wait0();
            wg_rk<0>(d, A, psi, acc, 0.0f, 0.5f, eb, ek);
            __syncthreads(); /* S0 is free; PM and the norms complete */
            mbloch_pol_sums<2, MBLOCH_WG_ATOMS, 1>(a, k - 1, PM, nrm, warp, lane, atom0, part, dev);
            if (a.want_pop)
                wg_pops(a, k - 1, pw, ppart);
            wg_build(a, S0, tab, ring + (k % 3) * a.n_f); /* K(t_k) */
            /* stages 2 and 3: the mean (S1) */
            wg_fence();
            wg_stage_mma(d, A, dS1);
            wg_commit();
            wg_wait0();
            wg_rk<0>(d, A, psi, acc, 2.0f, 0.5f, eb, ek);
            wg_fence();
            wg_stage_mma(d, A, dS1);
            wg_commit();
            wg_wait0();
            wg_rk<0>(d, A, psi, acc, 2.0f, 1.0f, eb, ek);
            if (threadIdx.x < a.n_f && k + 2 < a.n_t) { /* t_{k+2}, its mean with t_{k+1} (double, through L2) */
                const double2 ef = __ldcg(E + (size_t)(k + 2) * a.n_f + threadIdx.x);
                const double2 el = __ldcg(E + (size_t)(k + 1) * a.n_f + threadIdx.x);
                const int r = (k + 2) % 3;
                ring[r * a.n_f + threadIdx.x] = make_float2((float)ef.x, (float)ef.y);
                ring[(3 + r) * a.n_f + threadIdx.x] =
                    make_float2((float)(0.5 * (ef.x + el.x)), (float)(0.5 * (ef.y + el.y)));
            }
            wg_proxy_fence();
            __syncthreads(); /* K(t_k) written; S1 free */
            /* stage 4: K(t_k); then the mean of t_k, t_{k+1} into S1 */
            wg_fence();
            wg_stage_mma(d, A, dS0);
            wg_commit();
            wg_wait0();
            wg_build(a, S1, tab, ring + (3 + (k + 1) % 3) * a.n_f);
            wg_rk<1>(d, A, psi, acc, 0.0f, 0.0f, eb, ek);
        }
        /* the record of the last time */
        wg_pol_put(pAh, pAl, pBh, pBl, psi, wa, at, q);
        wg_norms(a, psi, wsm[at], nrm, pw, at, warp, lane, q);
        wg_proxy_fence();
        __syncthreads();
        wg_fence();
        wg_pol_mma(dp, dP);
        wg_commit();
        wg_wait0();
        wg_pol_out(wp, dp, PM);
        __syncthreads();
        mbloch_pol_sums<2, MBLOCH_WG_ATOMS, 1>(a, a.n_t - 1, PM, nrm, warp, lane, atom0, part, dev);
        if (a.want_pop)
            wg_pops(a, a.n_t - 1, pw, ppart);
        mbloch_zstep_end(a, pp, z);
    }
    mbloch_block_dev<MBLOCH_WG_ATOMS>(dev, devb);
#else
    __trap(); /* never launched: the host takes it only where k_wg_probe says 1 */
#endif
}
