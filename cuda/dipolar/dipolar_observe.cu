/*
 * dipolar_observe.cu -- observables and outputs of the CUDA dipolar GPE
 * solver, as the DBEC-GP programs compute them (Loncar, thesis, chapter 3):
 * the norm and the Simpson-rule integrals of mu and E (kinetic term by the
 * five-point derivative with its end rules, trap, obstacle, contact,
 * dipolar and Lee-Huang-Yang parts), <x^2> per axis, |psi(0)|^2;
 * integrated densities, phase slices, the potential V(r, t) and the
 * dipolar potential on the host.
 * Block partials are summed on the host in a fixed order.
 */
#include "dipolar/dipolar.cuh"

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

template <typename V> __device__ __forceinline__ double vq(const V *p, long long m, int q)
{
    V v = p[m];
    if (q == 2) {
        double re = re_of(v), im = im_of(v);
        return sqrt(re * re + im * im);
    }
    return q ? im_of(v) : re_of(v);
}

/* five-point derivative with DBEC-GP's end rules (eq. 3.2) */
template <typename V>
__device__ __forceinline__ double deriv(const V *p, long long m, int i, int n, long long st, double h,
                                        int q)
{
    if (n < 3 || i == 0 || i == n - 1)
        return 0.0;
    if (i == 1 || i == n - 2)
        return (vq(p, m + st, q) - vq(p, m - st, q)) / (2.0 * h);
    return (vq(p, m - 2 * st, q) - 8.0 * vq(p, m - st, q) + 8.0 * vq(p, m + st, q) -
            vq(p, m + 2 * st, q)) / (12.0 * h);
}

template <typename T> struct ObsArgs {
    const double *x0, *x1, *x2;
    double h0, h1, h2;
    T amp;
    const T *D; /* V_dd * |Psi|^2 or NULL */
    int is_real;
    int halo;   /* psi starts `halo` x rows before the rows summed (a slab's neighbours' rows) */
    int gi0;    /* the first summed row's index in the grid (the derivative's end rules) */
    int gn0;    /* x rows of the grid */
    int rx, ry; /* internal axes of x and y (-1: no x-y plane; lz stays 0) */
};

template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_observe(const V *psi, Grid<T> G, ObsArgs<T> o, double *partial)
{
    __shared__ double red[BLK / 32];
    double A[OQ_N];
    for (int q = 0; q < OQ_N; ++q)
        A[q] = 0;
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    const long long rows = (long long)n0 * n1;
    const double cell = o.h0 * o.h1 * o.h2;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / n1), j = (int)(row % n1);
        const double wij = G.w0[i] * G.w1[j];
        for (int k = threadIdx.x; k < n2; k += blockDim.x) {
            const long long ms = row * n2 + k, m = ms + (long long)o.halo * n1 * n2;
            T vv = (G.vx[i] + G.vy[j]) + G.vz[k];
            if (G.U)
                vv += G.U[ms];
            if (o.amp != 0)
                vv += o.amp * G.ox[i] * G.oy[j] * G.oz[k];
            double re = vq(psi, m, 0), im = vq(psi, m, 1);
            double d = re * re + im * im;
            double w = wij * G.w2[k];
            double grad = 0, gmod = 0, dq[2][3] = {{0, 0, 0}, {0, 0, 0}};
            for (int q = 0; q < 3; ++q) {
                if (q == 1 && o.is_real)
                    continue;
                if (q == 2 && o.is_real) {
                    gmod = grad;
                    break;
                }
                double dx = deriv(psi, m, i + o.gi0, o.gn0, (long long)n1 * n2, o.h0, q);
                double dy = deriv(psi, m, j, n1, (long long)n2, o.h1, q);
                double dz = deriv(psi, m, k, n2, 1, o.h2, q);
                if (q == 2) {
                    gmod = dx * dx + dy * dy + dz * dz;
                } else {
                    grad += dx * dx + dy * dy + dz * dz;
                    dq[q][0] = dx;
                    dq[q][1] = dy;
                    dq[q][2] = dz;
                }
            }
            if (o.rx >= 0 && !o.is_real) {
                /* Psi* L_z Psi's real part: x Im(Psi* d_y Psi) - y Im(Psi* d_x Psi) */
                const double c[3] = {o.x0[i], o.x1[j], o.x2[k]};
                const double xc = c[o.rx], yc = c[o.ry];
                A[OQ_LZ] += w * (xc * (re * dq[1][o.ry] - im * dq[0][o.ry]) -
                                 yc * (re * dq[1][o.rx] - im * dq[0][o.rx]));
            }
            A[OQ_NORM] += w * d;
            A[OQ_SUM] += cell * d;
            A[OQ_KIN] += w * grad;
            A[OQ_KMOD] += w * gmod;
            A[OQ_POT] += w * (double)vv * d;
            A[OQ_INT] += w * d * d;
            A[OQ_QF] += w * d * d * sqrt(d);
            if (o.D)
                A[OQ_DD] += w * (double)o.D[row * G.nlp + k] * d;
            A[OQ_X0] += w * o.x0[i] * o.x0[i] * d;
            A[OQ_X1] += w * o.x1[j] * o.x1[j] * d;
            A[OQ_X2] += w * o.x2[k] * o.x2[k] * d;
        }
    }
    for (int q = 0; q < OQ_N; ++q) {
        double t = block_sum(A[q], red);
        if (threadIdx.x == 0)
            partial[(long long)blockIdx.x * OQ_N + q] = t;
    }
}

/* |Psi|^2 integrated over the axes not kept: one block per output value */
template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_density(const V *psi, Grid<T> G, int k0, int k1, int k2,
                                                 double *out, long long nout)
{
    __shared__ double red[BLK / 32];
    const int d0 = k0 ? G.n0 : 1, d1 = k1 ? G.n1 : 1, d2 = k2 ? G.n2 : 1;
    const int r0 = k0 ? 1 : G.n0, r1 = k1 ? 1 : G.n1, r2 = k2 ? 1 : G.n2;
    const long long rcount = (long long)r0 * r1 * r2;
    for (long long o = blockIdx.x; o < nout; o += gridDim.x) {
        const int oi2 = (int)(o % d2), oi1 = (int)((o / d2) % d1), oi0 = (int)(o / ((long long)d2 * d1));
        double v = 0;
        for (long long q = threadIdx.x; q < rcount; q += blockDim.x) {
            const int q2 = (int)(q % r2), q1 = (int)((q / r2) % r1), q0 = (int)(q / ((long long)r2 * r1));
            const int i = k0 ? oi0 : q0, j = k1 ? oi1 : q1, k = k2 ? oi2 : q2;
            double w = (k0 ? 1.0 : G.w0[i]) * (k1 ? 1.0 : G.w1[j]) * (k2 ? 1.0 : G.w2[k]);
            v += w * (double)abs2(psi[((long long)i * G.n1 + j) * G.n2 + k]);
        }
        double t = block_sum(v, red);
        if (threadIdx.x == 0)
            out[o] = t;
        __syncthreads();
    }
}

template <typename V>
__global__ void k_phase(const V *psi, int n0, int n1, int n2, int axis, int index, double *out)
{
    const int e0 = axis == 0 ? 1 : n0, e1 = axis == 1 ? 1 : n1, e2 = axis == 2 ? 1 : n2;
    const long long cnt = (long long)e0 * e1 * e2;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < cnt;
         o += (long long)gridDim.x * blockDim.x) {
        int c2 = (int)(o % e2), c1 = (int)((o / e2) % e1), c0 = (int)(o / ((long long)e2 * e1));
        if (axis == 0) c0 = index;
        if (axis == 1) c1 = index;
        if (axis == 2) c2 = index;
        V v = psi[((long long)c0 * n1 + c1) * n2 + c2];
        out[o] = atan2(im_of(v), re_of(v));
    }
}

template <typename T>
__global__ void k_potential(Grid<T> G, T amp, double *out)
{
    const long long N = (long long)G.n0 * G.n1 * G.n2;
    for (long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x; m < N;
         m += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(m % G.n2);
        const long long r = m / G.n2;
        const int j = (int)(r % G.n1), i = (int)(r / G.n1);
        T v = (G.vx[i] + G.vy[j]) + G.vz[k];
        if (G.U)
            v += G.U[m];
        if (amp != 0)
            v += amp * G.ox[i] * G.oy[j] * G.oz[k];
        out[m] = (double)v;
    }
}

/* ------------------------------------------------------------------ */
/* host side                                                          */
/* ------------------------------------------------------------------ */

/* The per-quantity sums (OQ_*) of the handle's rows, added over the blocks
 * in a fixed order. */
template <typename T>
int dipolar_observe_sums(nlse_dipolar *s, double t, const void *psi, int halo, double Tq[OQ_N])
{
    typedef typename Vec2<T>::T T2;
    const int use_dd = s->dens && s->gdd != 0;
    Grid<T> G = grid_of<T>(s);
    ObsArgs<T> A;
    A.x0 = s->x[0];
    A.x1 = s->x[1];
    A.x2 = s->x[2];
    A.h0 = s->L.h[0];
    A.h1 = s->L.h[1];
    A.h2 = s->L.h[2];
    A.amp = (T)obst_amp(s, t);
    A.D = use_dd ? (const T *)s->dens : NULL;
    A.is_real = s->is_real;
    A.halo = halo;
    A.gi0 = (int)s->row0;
    A.gn0 = (int)s->n0_all;
    A.rx = s->rq[0];
    A.ry = s->rq[1];
    const int blocks = grid_for((long long)s->L.n[0] * s->L.n[1], 1);
    if (s->is_real)
        k_observe<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)psi, G, A, s->partial);
    else
        k_observe<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)psi, G, A, s->partial);
    CK(cudaGetLastError());
    double *h = (double *)malloc((size_t)blocks * OQ_N * sizeof(double));
    if (!h)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the observables");
    int st = nlse_cuda_check(cudaMemcpyAsync(h, s->partial, (size_t)blocks * OQ_N * sizeof(double),
                                             cudaMemcpyDeviceToHost, s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    for (int q = 0; q < OQ_N; ++q)
        Tq[q] = 0;
    if (!st)
        for (int b = 0; b < blocks; ++b)
            for (int q = 0; q < OQ_N; ++q)
                Tq[q] += h[(size_t)b * OQ_N + q];
    free(h);
    return st;
}
template int dipolar_observe_sums<float>(nlse_dipolar *, double, const void *, int, double *);
template int dipolar_observe_sums<double>(nlse_dipolar *, double, const void *, int, double *);

void dipolar_observe_finish(const nlse_dipolar *s, const double Tq[OQ_N], int use_dd,
                            nlse_dipolar_obs *o)
{
    o->norm = Tq[OQ_NORM];
    o->norm_sum = Tq[OQ_SUM];
    o->kinetic_modulus = s->p.kin * Tq[OQ_KMOD];
    dipolar_obs_energies(s->p.kin * Tq[OQ_KIN], Tq[OQ_POT], s->g * Tq[OQ_INT],
                         use_dd ? s->gdd * Tq[OQ_DD] : 0.0, s->gqf * Tq[OQ_QF], Tq[OQ_LZ], s->rot,
                         o);
    for (int a = 0; a < 3; ++a)
        o->x2[a] = 0;
    for (int q = s->L.off; q < 3; ++q)
        o->x2[q - s->L.off] = Tq[OQ_X0 + q];
}

template <typename T> static int observe_t(nlse_dipolar *s, double t, nlse_dipolar_obs *o)
{
    double Tq[OQ_N];
    CKS(dipolar_observe_sums<T>(s, t, s->psi, 0, Tq));
    dipolar_observe_finish(s, Tq, s->dens && s->gdd != 0, o);
    const size_t n0 = s->L.n[0], n1 = s->L.n[1], n2 = s->L.n[2];
    const size_t mc = ((n0 / 2) * n1 + n1 / 2) * n2 + n2 / 2;
    T v[2] = {0, 0};
    CK(cudaMemcpyAsync(v, (const char *)s->psi + mc * (s->is_real ? 1 : 2) * s->rs,
                       (s->is_real ? 1 : 2) * s->rs, cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    o->psi0sq = (double)v[0] * v[0] + (double)v[1] * v[1];
    return NLSE_OK;
}

extern "C" int nlse_dipolar_observe(nlse_dipolar *s, double t, nlse_dipolar_obs *out)
{
    ON_DEVICE(s);
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_observe: NULL argument");
    if (s->dist)
        return s->dops->observe(s, t, out);
    if (s->gdd != 0)
        CKS(dipolar_of_state(s));
    CKS(dipolar_obstacle_at(s, t));
    return s->p.dtype == NLSE_COMPLEX64 ? observe_t<float>(s, t, out) : observe_t<double>(s, t, out);
}

/* rows of a device REAL array (row pitch `pitch` values) -> host doubles */
static int rows_to_host(const nlse_dipolar *s, const void *src, size_t rows, size_t len, size_t pitch,
                        double *out)
{
    const size_t rs = s->rs;
    if (rs == sizeof(double))
        return nlse_cuda_check(cudaMemcpy2D(out, len * rs, src, pitch * rs, len * rs, rows,
                                            cudaMemcpyDeviceToHost), "cudaMemcpy2D");
    float *f = (float *)malloc(rows * len * sizeof(float) + 1);
    if (!f)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    int st = nlse_cuda_check(cudaMemcpy2D(f, len * rs, src, pitch * rs, len * rs, rows,
                                          cudaMemcpyDeviceToHost), "cudaMemcpy2D");
    for (size_t q = 0; !st && q < rows * len; ++q)
        out[q] = f[q];
    free(f);
    return st;
}

extern "C" int nlse_dipolar_dd_potential(nlse_dipolar *s, double *out)
{
    ON_DEVICE(s);
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_dd_potential: NULL argument");
    if (!s->have_plans)
        CKS(s->dist ? s->dops->enable(s) : dipolar_enable_dipolar(s));
    CKS(s->dist ? s->dops->of_state(s) : dipolar_of_state(s));
    CK(cudaStreamSynchronize(s->stream));
    return rows_to_host(s, s->dens, s->L.n[0] * s->L.n[1], s->L.n[2], s->nlp, out);
}

/* run `launch(dev)` into a temporary device array of `count` doubles, copy to out */
template <typename F> static int via_device(nlse_dipolar *s, size_t count, double *out, F launch)
{
    double *d = NULL;
    CKS(dmalloc(s, (void **)&d, count * sizeof(double), "an output buffer"));
    launch(d);
    int st = nlse_cuda_check(cudaGetLastError(), "kernel launch");
    if (!st)
        st = nlse_cuda_check(cudaMemcpyAsync(out, d, count * sizeof(double), cudaMemcpyDeviceToHost,
                                             s->stream), "cudaMemcpy");
    if (!st)
        st = nlse_cuda_check(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize");
    dfree(s, (void **)&d, count * sizeof(double));
    return st;
}

extern "C" int nlse_dipolar_potential(const nlse_dipolar *cs, double t, double *out)
{
    ON_DEVICE(cs);
    nlse_dipolar *s = (nlse_dipolar *)cs;
    CKS(dipolar_obstacle_at(s, t));
    const double amp = obst_amp(s, t);
    const int blocks = grid_for((long long)s->L.N, 256);
    if (s->p.dtype == NLSE_COMPLEX64) {
        Grid<float> G = grid_of<float>(s);
        return via_device(s, s->L.N, out, [&](double *d) {
            k_potential<float><<<blocks, 256, 0, s->stream>>>(G, (float)amp, d);
        });
    }
    Grid<double> G = grid_of<double>(s);
    return via_device(s, s->L.N, out, [&](double *d) {
        k_potential<double><<<blocks, 256, 0, s->stream>>>(G, amp, d);
    });
}

template <typename T> static int density_t(nlse_dipolar *s, int keep, double *out)
{
    typedef typename Vec2<T>::T T2;
    int kq[3];
    size_t cnt = 1;
    for (int q = 0; q < 3; ++q) {
        kq[q] = q >= s->L.off && ((keep >> (q - s->L.off)) & 1);
        cnt *= kq[q] ? s->L.n[q] : 1;
    }
    Grid<T> G = grid_of<T>(s);
    const int blocks = grid_for((long long)cnt, 1);
    return via_device(s, cnt, out, [&](double *d) {
        if (s->is_real)
            k_density<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)s->psi, G, kq[0], kq[1], kq[2],
                                                           d, (long long)cnt);
        else
            k_density<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)s->psi, G, kq[0], kq[1],
                                                            kq[2], d, (long long)cnt);
    });
}

extern "C" int nlse_dipolar_density(const nlse_dipolar *cs, int keep_mask, double *out)
{
    ON_DEVICE(cs);
    nlse_dipolar *s = (nlse_dipolar *)cs;
    if (keep_mask < 0 || keep_mask >= (1 << s->L.ndim))
        return nlse_fail(NLSE_ERR_VALUE, "keep_mask must be 0..%d, got %d", (1 << s->L.ndim) - 1,
                         keep_mask);
    return s->p.dtype == NLSE_COMPLEX64 ? density_t<float>(s, keep_mask, out)
                                        : density_t<double>(s, keep_mask, out);
}

extern "C" int nlse_dipolar_phase_slice(const nlse_dipolar *cs, int axis, long index, double *out)
{
    ON_DEVICE(cs);
    nlse_dipolar *s = (nlse_dipolar *)cs;
    if (axis < 0 || axis >= s->L.ndim)
        return nlse_fail(NLSE_ERR_VALUE, "axis must be 0..%d, got %d", s->L.ndim - 1, axis);
    if (index < 0 || (size_t)index >= s->p.shape[axis])
        return nlse_fail(NLSE_ERR_VALUE, "index must be 0..%zu on axis %d, got %ld",
                         s->p.shape[axis] - 1, axis, index);
    const int q = axis + s->L.off;
    if (q == 0 && (index < (long)s->row0 || index >= (long)(s->row0 + s->L.n[0])))
        return nlse_fail(NLSE_ERR_VALUE, "x row %ld is not on this slab (rows %zu..%zu)", index,
                         s->row0, s->row0 + s->L.n[0] - 1);
    if (q == 0)
        index -= (long)s->row0;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    const size_t cnt = s->L.N / s->L.n[q];
    const int blocks = grid_for((long long)cnt, 256);
    return via_device(s, cnt, out, [&](double *d) {
        if (s->p.dtype == NLSE_COMPLEX64) {
            if (s->is_real)
                k_phase<float><<<blocks, 256, 0, s->stream>>>((const float *)s->psi, n0, n1, n2, q, (int)index, d);
            else
                k_phase<float2><<<blocks, 256, 0, s->stream>>>((const float2 *)s->psi, n0, n1, n2, q, (int)index, d);
        } else {
            if (s->is_real)
                k_phase<double><<<blocks, 256, 0, s->stream>>>((const double *)s->psi, n0, n1, n2, q, (int)index, d);
            else
                k_phase<double2><<<blocks, 256, 0, s->stream>>>((const double2 *)s->psi, n0, n1, n2, q, (int)index, d);
        }
    });
}

extern "C" int nlse_dipolar_kernel(const nlse_dipolar *s, double *out)
{
    const size_t nh = s->L.n[2] / 2 + 1;
    dipolar_layout G = s->L; /* the whole grid's frequencies (a slab: its x rows) */
    G.n[0] = s->n0_all;
    for (size_t i = 0; i < s->L.n[0]; ++i)
        for (size_t j = 0; j < s->L.n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                out[(i * s->L.n[1] + j) * nh + k] =
                    dipolar_kernel_value(&s->p, &G, s->row0 + i, j, k);
    return NLSE_OK;
}
