/*
 * dipolar_zsolve.cu -- the non-derivative step and the Crank-Nicolson solve
 * along the contiguous axis of the CUDA dipolar GPE solver (Loncar, thesis:
 * H1 of eq. 2.24, eq. 2.41 in imaginary time; the tridiagonal systems of
 * eqs. 2.27-2.34 with the precomputed recursion coefficients).
 *
 * One warp per line: the line is loaded coalesced, H1 applied on the way in
 * (trap, user potential, obstacle, contact, dipolar and Lee-Huang-Yang
 * terms, the pending imaginary-time normalisation), the two recursions run
 * as warp-parallel scans of affine maps (each lane a chunk serially, 5
 * shuffle rounds join the chunks), and the line is stored coalesced.  k_zreg keeps the chunk in
 * registers (lines up to 512 points), k_zline in shared memory; k_h1
 * applies H1 alone where lines are too long for both (the solve then runs
 * on k_lanes, dipolar_lanes.cu).
 */
#include "dipolar/dipolar.cuh"

/* ------------------------------------------------------------------ */
/* k_zline: lines along the contiguous axis, one warp per line        */
/* ------------------------------------------------------------------ */

/* Element e of a line lives at e + e / c in shared memory: lane l's chunk
 * [l c, l c + c) starts (c + 1) slots after lane l - 1's, an odd stride
 * (c even), so the chunk-wise accesses of a warp hit distinct banks. */
__device__ __forceinline__ int zpos(int e, int c) { return e + e / c; }

template <typename T, typename V, typename C, bool H1, bool LAST, bool LHY>
__global__ void __launch_bounds__(BLK) k_zline(V *psi, Grid<T> G, H1Args<T> a, CN<C> cn, int chunk,
                                               Dens<T> out)
{
    extern __shared__ unsigned char smem_raw[];
    __shared__ double red[4 * (BLK / 32)];
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
    double nsum = 0, mom[3] = {0, 0, 0};
    for (long long line = (long long)blockIdx.x * wpb + warp; line < lines;
         line += (long long)gridDim.x * wpb) {
        const int i = (int)(line / G.n1), j = (int)(line % G.n1);
        V *p = psi + line * n;
        for (int e = lane; e < n; e += 32) {
            V v = p[e];
            if (H1)
                v = h1_apply<LHY>(v, h1_pot(G, a, S, i, j, e, line), a.dt, S, a.imag);
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
        finish_z_line<T, V, LAST>(p, s, c, line, i, j, G, out, lane, &nsum, mom);
        __syncwarp();
    }
    if (LAST)
        write_partials(nsum, mom, red, out);
}

/* k_zreg: k_zline with each lane's chunk of CH points (CH a power of two,
 * 32 CH >= n) in registers.  Shared memory only turns the coalesced load
 * and store into the chunk layout; the right-hand side, both recursions
 * and the per-lane Crank-Nicolson coefficients (the same for every line,
 * loaded once) stay in registers, so the loop over lines carries no index
 * arithmetic (the generic k_zline is bound by instructions, not memory). */
template <typename T, typename V, typename C, bool LAST, int CH, bool LHY>
__global__ void __launch_bounds__(BLK) k_zreg(V *psi, Grid<T> G, H1Args<T> a, CN<C> cn,
                                              Dens<T> out)
{
    extern __shared__ unsigned char smem_raw[];
    __shared__ double red[4 * (BLK / 32)];
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
    double nsum = 0, mom[3] = {0, 0, 0};
    for (long long line = (long long)blockIdx.x * wpb + warp; line < lines;
         line += (long long)gridDim.x * wpb) {
        const int i = (int)(line / G.n1), j = (int)(line % G.n1);
        V *p = psi + line * n;
        for (int e = lane; e < n; e += 32)
            s[e + e / CH] = h1_apply<LHY>(p[e], h1_pot(G, a, S, i, j, e, line), a.dt, S, a.imag);
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
        finish_z_line<T, V, LAST>(p, s, CH, line, i, j, G, out, lane, &nsum, mom);
        __syncwarp();
    }
    if (LAST)
        write_partials(nsum, mom, red, out);
#undef IN
#undef GA
#undef AL
}

/* ------------------------------------------------------------------ */
/* k_h1: the non-derivative step alone (lines too long for k_zline)   */
/* ------------------------------------------------------------------ */

template <typename T, typename V, bool LHY>
__global__ void __launch_bounds__(BLK) k_h1(V *psi, Grid<T> G, H1Args<T> a)
{
    const H1Scale<T> S = h1_scale(a);
    const long long rows = (long long)G.n0 * G.n1;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / G.n1), j = (int)(row % G.n1);
        for (int k = threadIdx.x; k < G.n2; k += blockDim.x) {
            V *p = psi + row * G.n2 + k;
            *p = h1_apply<LHY>(*p, h1_pot(G, a, S, i, j, k, row), a.dt, S, a.imag);
        }
    }
}

/* ------------------------------------------------------------------ */
/* launches                                                           */
/* ------------------------------------------------------------------ */

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
int dipolar_zsolve(nlse_dipolar *s, V *psi, const Grid<T> &G, const H1Args<T> &a, const CN<C> &cn,
                   const Dens<T> &out, bool last_z, int *parts)
{
    const int n0 = G.n0, n1 = G.n1;
    const bool q = a.gqf != 0; /* the kernels with the Lee-Huang-Yang term */
    if (s->zreg > 0) {
        const long long lines = (long long)n0 * n1;
        const int wpb = 4;
        const size_t smem = (size_t)wpb * 32 * (s->zreg + 1) * sizeof(V) +
                            2 * (size_t)32 * s->zreg * sizeof(C);
        const int blocks = grid_for(lines, wpb);
#define ZREG_Q(LAST, CH, Q)                                                                     \
    do {                                                                                        \
        CKS(smem_limit(k_zreg<T, V, C, LAST, CH, Q>, smem));                                    \
        k_zreg<T, V, C, LAST, CH, Q><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn, out); \
    } while (0)
#define ZREG(CH)                                                                                \
    case CH:                                                                                    \
        if (last_z && q)                                                                        \
            ZREG_Q(true, CH, true);                                                             \
        else if (last_z)                                                                        \
            ZREG_Q(true, CH, false);                                                            \
        else if (q)                                                                             \
            ZREG_Q(false, CH, true);                                                            \
        else                                                                                    \
            ZREG_Q(false, CH, false);                                                           \
        break;
        switch (s->zreg) {
            ZREG(1)
            ZREG(2)
            ZREG(4)
            ZREG(8)
            ZREG(16)
        }
#undef ZREG
#undef ZREG_Q
        if (last_z)
            *parts = blocks;
    } else {
        const long long lines = (long long)n0 * n1;
        const int wpb = s->zwarps;
        const size_t smem = (size_t)wpb * 2 * 32 * (s->zchunk + 1) * sizeof(V);
        const int blocks = grid_for(lines, wpb);
#define ZLINE(LAST, Q)                                                                          \
    k_zline<T, V, C, true, LAST, Q><<<blocks, 32 * wpb, smem, s->stream>>>(psi, G, a, cn,         \
                                                                            s->zchunk, out)
        if (last_z && q)
            ZLINE(true, true);
        else if (last_z)
            ZLINE(true, false);
        else if (q)
            ZLINE(false, true);
        else
            ZLINE(false, false);
#undef ZLINE
        if (last_z)
            *parts = blocks;
    }
    return NLSE_OK;
}

template <typename T, typename V>
int dipolar_h1(nlse_dipolar *s, V *psi, const Grid<T> &G, const H1Args<T> &a)
{
    const int blocks = grid_for((long long)G.n0 * G.n1, 1);
    if (a.gqf != 0)
        k_h1<T, V, true><<<blocks, BLK, 0, s->stream>>>(psi, G, a);
    else
        k_h1<T, V, false><<<blocks, BLK, 0, s->stream>>>(psi, G, a);
    return NLSE_OK;
}

template int dipolar_zsolve<float, float2, float2>(nlse_dipolar *, float2 *, const Grid<float> &, const H1Args<float> &, const CN<float2> &, const Dens<float> &, bool, int *);
template int dipolar_zsolve<float, float, float>(nlse_dipolar *, float *, const Grid<float> &, const H1Args<float> &, const CN<float> &, const Dens<float> &, bool, int *);
template int dipolar_zsolve<float, float2, float>(nlse_dipolar *, float2 *, const Grid<float> &, const H1Args<float> &, const CN<float> &, const Dens<float> &, bool, int *);
template int dipolar_zsolve<double, double2, double2>(nlse_dipolar *, double2 *, const Grid<double> &, const H1Args<double> &, const CN<double2> &, const Dens<double> &, bool, int *);
template int dipolar_zsolve<double, double, double>(nlse_dipolar *, double *, const Grid<double> &, const H1Args<double> &, const CN<double> &, const Dens<double> &, bool, int *);
template int dipolar_zsolve<double, double2, double>(nlse_dipolar *, double2 *, const Grid<double> &, const H1Args<double> &, const CN<double> &, const Dens<double> &, bool, int *);
template int dipolar_h1<float, float2>(nlse_dipolar *, float2 *, const Grid<float> &, const H1Args<float> &);
template int dipolar_h1<float, float>(nlse_dipolar *, float *, const Grid<float> &, const H1Args<float> &);
template int dipolar_h1<double, double2>(nlse_dipolar *, double2 *, const Grid<double> &, const H1Args<double> &);
template int dipolar_h1<double, double>(nlse_dipolar *, double *, const Grid<double> &, const H1Args<double> &);
