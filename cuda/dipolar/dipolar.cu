/*
 * dipolar.cu -- CUDA backend of the split-step Crank-Nicolson solver of the
 * dipolar Gross-Pitaevskii equation (Loncar, thesis, chapter 2; the DBEC-GP
 * scheme; the published GPU design is chapter 4), same C API as csrc/dipolar/dipolar.c.
 *
 *   non-derivative part  Psi <- exp(-i dt H1) Psi  (eq. 2.24; eq. 2.41 in
 *                        imaginary time)
 *   Laplacian, per axis  the Crank-Nicolson systems of eqs. 2.27-2.34,
 *                        solved with the precomputed recursion
 *                        coefficients alpha_i, gamma_i (dipolar_params.c)
 *   dipolar term         cuFFT R2C -> kernel -> C2R in place (eq. 2.37)
 *
 * Internally every grid is (n0, n1, n2), n2 contiguous (dipolar_params.h).  One
 * step of a 3D grid is three kernels plus the FFT pair:
 *
 *   k_zline  one warp per line along the contiguous axis: coalesced load
 *            into shared memory, H1 applied on the way in (trap, user
 *            potential, obstacle, contact and dipolar terms, the pending
 *            imaginary-time normalisation), the two recursions of the
 *            tridiagonal solve as warp-parallel scans of affine maps (each
 *            lane runs a chunk serially, 5 shuffle rounds join the chunks),
 *            coalesced store;
 *   k_lanes  one thread per line along axis 1, then along axis 0: threads
 *            of a warp own neighbouring lines, so every load and store is
 *            coalesced; the forward recursion writes its values into the
 *            state itself (shifted two places), the back substitution reads
 *            them back, so no buffer the size of the state is needed; the
 *            last axis of the step also writes |Psi|^2 for the next FFT and
 *            the block's part of the Simpson norm;
 *   k_norm   sums the blocks' parts in a fixed order into a device word and
 *            records the first step whose norm is not finite and positive.
 *
 * The Crank-Nicolson operators of different axes commute exactly, so the
 * order z, y, x gives the CPU's step.  The state, the tables and the norm
 * stay on the device across steps: the host reads one flag per call.
 *
 * This file is the solver and its launch plan (create / destroy, state and
 * parameters, the step driver, the traffic model); the kernels live by
 * concern in dipolar_zsolve.cu, dipolar_lanes.cu, dipolar_fft.cu and
 * dipolar_observe.cu (dipolar.cuh says what each provides).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dipolar/dipolar.cuh"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ------------------------------------------------------------------ */
/* kernels of the solver itself                                       */
/* ------------------------------------------------------------------ */

template <typename T>
__global__ void k_scale(T *p, long long m, const double *norm)
{
    const T f = (T)(1.0 / sqrt(*norm));
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < m;
         q += (long long)gridDim.x * blockDim.x)
        p[q] *= f;
}

/* psi /= sqrt(norm[0]) (the pending imaginary-time normalisation) */
template <typename T> void dipolar_scale_by_norm(nlse_dipolar *s)
{
    const long long m = (long long)(s->is_real ? 1 : 2) * (long long)s->L.N;
    k_scale<T><<<grid_for(m, 256), 256, 0, s->stream>>>((T *)s->psi, m, s->norm);
}
template void dipolar_scale_by_norm<float>(nlse_dipolar *);
template void dipolar_scale_by_norm<double>(nlse_dipolar *);

/* real state (N values, in src) -> complex state */
template <typename T>
__global__ void k_promote(typename Vec2<T>::T *dst, const T *src, long long N)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < N;
         q += (long long)gridDim.x * blockDim.x) {
        typename Vec2<T>::T v;
        v.x = src[q];
        v.y = 0;
        dst[q] = v;
    }
}

/* obstacle factors exp(-2 (x - c)^2 / sigma^2) per internal axis */
template <typename T>
__global__ void k_obstacle(T *o0, T *o1, T *o2, const double *x0, const double *x1,
                           const double *x2, int n0, int n1, int n2, int off, int beam, int move,
                           double c, double sg2)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    int q, i;
    if (t < n0) { q = 0; i = t; }
    else if (t < n0 + n1) { q = 1; i = t - n0; }
    else if (t < n0 + n1 + n2) { q = 2; i = t - n0 - n1; }
    else return;
    T *o = q == 0 ? o0 : q == 1 ? o1 : o2;
    const double *x = q == 0 ? x0 : q == 1 ? x1 : x2;
    const int a = q - off;
    if (a < 0 || a == beam) {
        o[i] = 1;
    } else {
        double d = x[i] - (a == move ? c : 0.0);
        o[i] = (T)exp(-2.0 * d * d / sg2);
    }
}

/* normalised Gaussian start exp(-sum w_a x_a^2 / 2) (real state) */
template <typename T>
__global__ void k_gauss(T *p, int n0, int n1, int n2, const double *x0, const double *x1,
                        const double *x2, double w0, double w1, double w2, double c)
{
    const long long N = (long long)n0 * n1 * n2;
    for (long long m = (long long)blockIdx.x * blockDim.x + threadIdx.x; m < N;
         m += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(m % n2);
        const long long r = m / n2;
        const int j = (int)(r % n1), i = (int)(r / n1);
        double e = w0 * x0[i] * x0[i] + w1 * x1[j] * x1[j] + w2 * x2[k] * x2[k];
        p[m] = (T)(c * exp(-0.5 * e));
    }
}

/* ------------------------------------------------------------------ */
/* the solver                                                         */
/* ------------------------------------------------------------------ */

static int make_cn(nlse_dipolar *s, int q)
{
    size_t n = q == 0 ? s->n0_all : s->L.n[q]; /* a slab solves x on pencils of all rows */
    if (n < 3)
        return NLSE_OK;
    double *t = (double *)malloc(6 * n * sizeof(double));
    if (!t)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the Crank-Nicolson tables");
    dipolar_cn_coefficients(s->p.dt * s->p.kin / (s->L.h[q] * s->L.h[q]), n, t, t + n, t + 2 * n,
                       t + 4 * n, &s->sc[q]);
    int st;
    if (!(st = upload(s, s->al_r[q], t, n)) && !(st = upload(s, s->ga_r[q], t + n, n)) &&
        !(st = upload(s, s->al_c[q], t + 2 * n, 2 * n)))
        st = upload(s, s->ga_c[q], t + 4 * n, 2 * n);
    free(t);
    return st;
}

/* The rotating frame's tables (dipolar_rot_line) of both sweeps and modes
 * for the current dt and w, in one buffer each: am, ap (a value a line),
 * alpha, gamma (n values a line), complex.  A slab's x sweep has lines of
 * every x row (it solves on pencils); its y sweep a line per own x row. */
static int make_rot(nlse_dipolar *s)
{
    for (int sw = 0; sw < 2; ++sw) {
        const int q = s->rq[sw], o = s->rq[1 - sw];
        const size_t n = q == 0 ? s->n0_all : s->L.n[q], lines = s->L.n[o];
        const size_t vals = 2 * lines * (n + 1), r0 = o == 0 ? s->row0 : 0;
        const size_t all = o == 0 ? s->n0_all : lines;
        double *t = (double *)malloc(2 * (vals + 2 * n) * sizeof(double));
        if (!t)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the rotating frame's tables");
        double *line = t + 2 * vals;
        const double r = s->p.dt * s->p.kin / (s->L.h[q] * s->L.h[q]);
        int st = NLSE_OK;
        for (int m = 0; m < 2 && !st; ++m) {
            for (size_t l = 0; l < lines; ++l) {
                const double xo = dipolar_coord(r0 + l, all, s->L.h[o]);
                const double c = sw ? s->rot * xo : -s->rot * xo; /* -w y on x, w x on y */
                double am[2], ap[2];
                dipolar_rot_line(r, s->p.dt * c / (4.0 * s->L.h[q]), m, n, am, ap, line,
                                 line + 2 * n);
                memcpy(t + 2 * l, am, sizeof am);
                memcpy(t + 2 * (lines + l), ap, sizeof ap);
                memcpy(t + 2 * (2 * lines + l * n), line, 2 * n * sizeof(double));
                memcpy(t + 2 * (2 * lines + lines * n + l * n), line + 2 * n,
                       2 * n * sizeof(double));
            }
            s->rt_bytes[sw] = 2 * (2 * lines + 2 * lines * n) * s->rs;
            if (!s->rt[sw][m])
                st = dmalloc(s, &s->rt[sw][m], s->rt_bytes[sw], "the rotating frame's tables");
            if (!st)
                st = upload(s, s->rt[sw][m], t, 2 * (2 * lines + 2 * lines * n));
        }
        free(t);
        if (st)
            return st;
    }
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_rotation(nlse_dipolar *s, double w)
{
    ON_DEVICE(s);
    CKS(dipolar_check_rotation(&s->p, w));
    if (w == s->rot)
        return NLSE_OK;
    const double w0 = s->rot;
    s->rot = w;
    int st = w != 0 ? make_rot(s) : NLSE_OK;
    if (st)
        s->rot = w0;
    return st;
}

extern "C" void nlse_dipolar_destroy(nlse_dipolar *s)
{
    ON_DEVICE_VOID(s);
    if (!s)
        return;
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    if (s->dist)
        s->dops->free(s);
    if (s->have_plans) {
        cufftDestroy(s->pf);
        cufftDestroy(s->pb);
    }
    void *bufs[] = {s->psi, s->backup, s->dens, s->kern, s->U, s->partial, s->norm, s->bad,
                    s->rec};
    for (size_t q = 0; q < sizeof bufs / sizeof bufs[0]; ++q)
        cudaFree(bufs[q]);
    for (int q = 0; q < 4; ++q)
        cudaFree(s->rt[q / 2][q % 2]);
    for (int q = 0; q < 3; ++q) {
        cudaFree(s->x[q]);
        cudaFree(s->w[q]);
        cudaFree(s->vtrap[q]);
        cudaFree(s->ob[q]);
        cudaFree(s->al_r[q]);
        cudaFree(s->ga_r[q]);
        cudaFree(s->al_c[q]);
        cudaFree(s->ga_c[q]);
    }
    if (s->ev0)
        cudaEventDestroy(s->ev0);
    if (s->ev1)
        cudaEventDestroy(s->ev1);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    free(s);
}

/* k_zline's shape: chunk c (even, 32 c >= n) and warps per block within
 * 48 KiB of shared memory; 0 warps when one line needs more. */
static void plan_zline(nlse_dipolar *s)
{
    const size_t n = s->L.n[2];
    int c = (int)((n + 31) / 32);
    if (c % 2)
        ++c;
    const size_t vb = 2 * s->rs; /* complex values (real states use half) */
    const size_t per_warp = 2 * 32 * (size_t)(c + 1) * vb;
    int w = (int)((48u << 10) / per_warp);
    s->zchunk = c;
    s->zwarps = w >= 4 ? 4 : w;
    s->zreg = 0;
    for (int ch = 1; ch <= 16; ch *= 2)
        if (32 * (size_t)ch >= n) {
            s->zreg = ch;
            break;
        }
}

static int gaussian_state(nlse_dipolar *s)
{
    double wq[3] = {1, 1, 1}, c = 1.0;
    for (int q = s->L.off; q < 3; ++q) {
        double t = s->p.trap[q - s->L.off];
        wq[q] = t > 0 ? sqrt(t / s->p.kin) : 1.0;
        c *= pow(wq[q] / M_PI, 0.25);
    }
    s->is_real = 1;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    int blocks = grid_for((long long)s->L.N, 256);
    if (s->p.dtype == NLSE_COMPLEX128)
        k_gauss<double><<<blocks, 256, 0, s->stream>>>((double *)s->psi, n0, n1, n2, s->x[0],
                                                        s->x[1], s->x[2], wq[0], wq[1], wq[2], c);
    else
        k_gauss<float><<<blocks, 256, 0, s->stream>>>((float *)s->psi, n0, n1, n2, s->x[0],
                                                       s->x[1], s->x[2], wq[0], wq[1], wq[2], c);
    CK(cudaGetLastError());
    return NLSE_OK;
}

static int create(const nlse_dipolar_params *p, nlse_dipolar *s, size_t row0, size_t rows)
{
    s->p = *p;
    dipolar_make_layout(p, &s->L);
    s->n0_all = s->L.n[0];
    s->rq[0] = s->L.rq[0]; /* the rotating frame's x and y axes */
    s->rq[1] = s->L.rq[1];
    s->row0 = row0;
    if (rows) { /* a slab: x rows [row0, row0 + rows) of the grid */
        s->L.n[0] = rows;
        s->L.N = rows * s->L.n[1] * s->L.n[2];
    }
    s->rs = p->dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
    s->nlp = 2 * (s->L.n[2] / 2 + 1);
    s->nk = s->L.n[0] * s->L.n[1] * (s->L.n[2] / 2 + 1);
    s->g = p->g;
    s->gdd = p->gdd;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return nlse_fail(NLSE_ERR_BACKEND, "no CUDA device available");
    }
    if (s->L.n[0] > (size_t)INT32_MAX || s->L.n[1] * s->L.n[2] > (size_t)INT32_MAX ||
        s->L.N > ((size_t)1 << 40))
        return nlse_fail(NLSE_ERR_VALUE, "the grid (%zu points) is too large for the CUDA backend",
                         s->L.N);
    CK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&s->ev0));
    CK(cudaEventCreate(&s->ev1));
    const size_t rs = s->rs, N = s->L.N;
    CKS(dmalloc(s, &s->psi, 2 * N * rs, "the state"));
    CKS(dmalloc(s, (void **)&s->partial, (size_t)NB_MAX * OQ_N * sizeof(double), "partial sums"));
    CKS(dmalloc(s, (void **)&s->norm, sizeof(double), "the norm"));
    CKS(dmalloc(s, (void **)&s->rec, (size_t)REC_ROWS * NLSE_DIPOLAR_MOMENTS * sizeof(double),
                "recorded moments"));
    CKS(dmalloc(s, (void **)&s->bad, sizeof(int), "a flag"));
    for (int q = 0; q < 3; ++q) {
        const size_t n = s->L.n[q];
        const int a = q - s->L.off;
        const size_t ncn = q == 0 ? s->n0_all : n, i0 = q == 0 ? row0 : 0;
        CKS(dmalloc(s, (void **)&s->x[q], 2 * n * sizeof(double), "coordinates"));
        CKS(dmalloc(s, (void **)&s->w[q], n * sizeof(double), "Simpson weights"));
        CKS(dmalloc(s, &s->vtrap[q], n * rs, "the trap"));
        CKS(dmalloc(s, &s->ob[q], n * rs, "obstacle factors"));
        CKS(dmalloc(s, &s->al_r[q], ncn * rs, "CN tables"));
        CKS(dmalloc(s, &s->ga_r[q], ncn * rs, "CN tables"));
        CKS(dmalloc(s, &s->al_c[q], 2 * ncn * rs, "CN tables"));
        CKS(dmalloc(s, &s->ga_c[q], 2 * ncn * rs, "CN tables"));
        double *t = (double *)malloc(5 * n * sizeof(double));
        if (!t)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; ++i) {
            t[i] = a >= 0 ? dipolar_coord(i0 + i, ncn, s->L.h[q]) : 0.0;
            t[n + i] = a >= 0 ? dipolar_simpson(i0 + i, ncn, s->L.h[q]) : 1.0;
            t[2 * n + i] = a >= 0 ? p->trap[a] * t[i] * t[i] : 0.0;
            t[3 * n + i] = 1.0;
            t[4 * n + i] = t[n + i] * (t[i] * t[i]); /* as k_lanes sums the moments */
        }
        int st = h2d(s, s->x[q], t, n * sizeof(double));
        if (!st)
            st = h2d(s, s->x[q] + n, t + 4 * n, n * sizeof(double));
        if (!st)
            st = h2d(s, s->w[q], t + n, n * sizeof(double));
        if (!st)
            st = upload(s, s->vtrap[q], t + 2 * n, n);
        if (!st)
            st = upload(s, s->ob[q], t + 3 * n, n);
        free(t);
        CKS(st);
        CKS(make_cn(s, q));
    }
    plan_zline(s);
    if (p->dipolar) {
        s->p.dipolar = 0;
        CKS(dipolar_enable_dipolar(s));
    }
    CKS(gaussian_state(s));
    CK(cudaStreamSynchronize(s->stream));
    return NLSE_OK;
}

int dipolar_create_rows(const nlse_dipolar_params *p, size_t row0, size_t rows, nlse_dipolar **out)
{
    *out = NULL;
    CKS(dipolar_check_params(p));
    nlse_dipolar *s = (nlse_dipolar *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->device = nlse_cuda_current_device();
    int st = create(p, s, row0, rows);
    if (st) {
        nlse_dipolar_destroy(s);
        return st;
    }
    *out = s;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_create(const nlse_dipolar_params *p, nlse_dipolar **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_create: NULL argument");
    return dipolar_create_rows(p, 0, 0, out);
}

/* ------------------------------------------------------------------ */
/* state and parameters                                               */
/* ------------------------------------------------------------------ */

extern "C" int nlse_dipolar_set_state(nlse_dipolar *s, const void *psi, int is_complex)
{
    ON_DEVICE(s);
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_set_state: NULL argument");
    const size_t m = (is_complex ? 2 : 1) * s->L.N;
    CKS(dipolar_check_finite(psi, m, s->p.dtype, is_complex ? 2 : 1, "psi"));
    CK(cudaMemcpyAsync(s->psi, psi, m * s->rs, cudaMemcpyHostToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    s->is_real = !is_complex;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_state_is_real(const nlse_dipolar *s) { return s->is_real; }

extern "C" int nlse_dipolar_get_state(const nlse_dipolar *s, void *out)
{
    ON_DEVICE(s);
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_get_state: NULL argument");
    const size_t N = s->L.N, rs = s->rs;
    CK(cudaMemcpyAsync(out, s->psi, (s->is_real ? 1 : 2) * N * rs, cudaMemcpyDeviceToHost,
                       s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (s->is_real) {
        /* expand in place from the end */
        if (s->p.dtype == NLSE_COMPLEX64) {
            float *o = (float *)out;
            for (size_t q = N; q-- > 0;) {
                o[2 * q] = o[q];
                o[2 * q + 1] = 0;
            }
        } else {
            double *o = (double *)out;
            for (size_t q = N; q-- > 0;) {
                o[2 * q] = o[q];
                o[2 * q + 1] = 0;
            }
        }
    }
    return NLSE_OK;
}

int dipolar_ensure_backup(nlse_dipolar *s)
{
    if (s->backup)
        return NLSE_OK;
    return dmalloc(s, &s->backup, 2 * s->L.N * s->rs, "the state backup");
}

/* a real state becomes complex (through the backup buffer) */
int dipolar_promote(nlse_dipolar *s)
{
    if (!s->is_real)
        return NLSE_OK;
    CKS(dipolar_ensure_backup(s));
    const long long N = (long long)s->L.N;
    CK(cudaMemcpyAsync(s->backup, s->psi, N * s->rs, cudaMemcpyDeviceToDevice, s->stream));
    const int blocks = grid_for(N, 256);
    if (s->p.dtype == NLSE_COMPLEX128)
        k_promote<double><<<blocks, 256, 0, s->stream>>>((double2 *)s->psi, (const double *)s->backup, N);
    else
        k_promote<float><<<blocks, 256, 0, s->stream>>>((float2 *)s->psi, (const float *)s->backup, N);
    CK(cudaGetLastError());
    s->is_real = 0;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_dt(nlse_dipolar *s, double dt)
{
    ON_DEVICE(s);
    CKS(dipolar_check_dt(dt));
    s->p.dt = dt;
    for (int q = 0; q < 3; ++q)
        CKS(make_cn(s, q));
    return s->rot != 0 ? make_rot(s) : NLSE_OK;
}

extern "C" int nlse_dipolar_set_couplings(nlse_dipolar *s, double g, double gdd)
{
    ON_DEVICE(s);
    CKS(dipolar_check_couplings(g, gdd));
    if (gdd != 0 && !s->have_plans)
        CKS(s->dist ? s->dops->enable(s) : dipolar_enable_dipolar(s));
    s->g = g;
    s->gdd = gdd;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_lhy(nlse_dipolar *s, double q)
{
    CKS(dipolar_check_lhy(q));
    s->gqf = q;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_potential(nlse_dipolar *s, const void *U)
{
    ON_DEVICE(s);
    const size_t bytes = s->L.N * s->rs;
    if (!U) {
        dfree(s, &s->U, bytes);
        return NLSE_OK;
    }
    CKS(dipolar_check_finite(U, s->L.N, s->p.dtype, 1, "V"));
    if (!s->U)
        CKS(dmalloc(s, &s->U, bytes, "the potential"));
    CKS(h2d(s, s->U, U, bytes));
    return NLSE_OK;
}

extern "C" int nlse_dipolar_set_obstacle(nlse_dipolar *s, const nlse_dipolar_obstacle *o)
{
    if (!o) {
        s->have_obst = 0;
        return NLSE_OK;
    }
    CKS(dipolar_check_obstacle(o, s->L.ndim));
    s->obst = *o;
    s->have_obst = 1;
    return NLSE_OK;
}

int dipolar_obstacle_at(nlse_dipolar *s, double t)
{
    if (!s->have_obst)
        return NLSE_OK;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    const double c = dipolar_obst_centre(&s->obst, t), sg2 = s->obst.sigma * s->obst.sigma;
    const int blocks = (n0 + n1 + n2 + 255) / 256;
    if (s->p.dtype == NLSE_COMPLEX128)
        k_obstacle<double><<<blocks, 256, 0, s->stream>>>(
            (double *)s->ob[0], (double *)s->ob[1], (double *)s->ob[2], s->x[0], s->x[1], s->x[2],
            n0, n1, n2, s->L.off, s->obst.beam_axis, s->obst.move_axis, c, sg2);
    else
        k_obstacle<float><<<blocks, 256, 0, s->stream>>>(
            (float *)s->ob[0], (float *)s->ob[1], (float *)s->ob[2], s->x[0], s->x[1], s->x[2],
            n0, n1, n2, s->L.off, s->obst.beam_axis, s->obst.move_axis, c, sg2);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */
/* One step; rec (a device row, or NULL) receives the norm and the moments'
 * sums of the new state. */
template <typename T, typename V, typename C>
static int step_kernels(nlse_dipolar *s, const H1Args<T> &a, int want, int step, double *rec)
{
    const int real_time = !a.imag;
    Grid<T> G = grid_of<T>(s);
    Dens<T> out = dens_of<T>(want ? (T *)s->dens : NULL, s->partial);
    if (rec)
        out.mom = s->partial + NB_MAX;
    const int n0 = G.n0, n1 = G.n1, n2 = G.n2;
    CN<C> cn[3];
    for (int q = 0; q < 3; ++q)
        cn[q] = dipolar_cn<T, C>(s, q, real_time);
    V *psi = (V *)s->psi;
    int parts = 0;
    const int last_z = n0 == 1 && n1 == 1; /* 1D: the z solve ends the step */
    /* the rotating frame's sweeps (a complex state: promoted at the call) */
    const int rot = s->rot != 0;
    /* 1) H1 + the solve along the contiguous axis (dipolar_zsolve.cu), or
     *    for lines too long for a warp, H1 alone and one thread a line */
    if (rot && s->rq[1] == 2) { /* 2d-xy: x (axis 1), then y (axis 2), as on the CPU */
        CKS((dipolar_h1<T, V>(s, psi, G, a)));
        CKS((dipolar_rot_solve<T, V>(s, psi, G, 0, real_time, 1, n1, out, false, &parts, 0)));
        CKS((dipolar_rot_solve<T, V>(s, psi, G, 1, real_time, 2, n2, out, true, &parts, 0)));
        dipolar_norm(s, parts, step, rec);
        CK(cudaGetLastError());
        return NLSE_OK;
    } else if (s->zreg > 0 || s->zwarps > 0) {
        CKS((dipolar_zsolve<T, V, C>(s, psi, G, a, cn[2], out, last_z, &parts)));
    } else {
        CKS((dipolar_h1<T, V>(s, psi, G, a)));
        CKS((dipolar_lanes<T, V, C>(s, psi, G, cn[2], 2, n2, out, last_z, &parts)));
    }
    /* 2) axis 1 (the last one in 2D) */
    if (n1 >= 3 && rot) /* 3d: y */
        CKS((dipolar_rot_solve<T, V>(s, psi, G, 1, real_time, 1, n1, out, false, &parts, 0)));
    else if (n1 >= 3)
        CKS((dipolar_lanes<T, V, C>(s, psi, G, cn[1], 1, n1, out, n0 == 1, &parts)));
    /* 3) axis 0 (3D) */
    if (n0 >= 3 && rot)
        CKS((dipolar_rot_solve<T, V>(s, psi, G, 0, real_time, 0, n0, out, true, &parts, 0)));
    else if (n0 >= 3)
        CKS((dipolar_lanes<T, V, C>(s, psi, G, cn[0], 0, n0, out, true, &parts)));
    dipolar_norm(s, parts, step, rec);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* The rows of recorded moments the device holds (count, from slot 0) ->
 * the caller's rows at out (the row of nlse_dipolar_record). */
static int collect_rows(nlse_dipolar *s, int count, int imag, double *out)
{
    if (count <= 0)
        return NLSE_OK;
    const size_t bytes = (size_t)count * NLSE_DIPOLAR_MOMENTS * sizeof(double);
    double *raw = (double *)malloc(bytes);
    if (!raw)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the recorded moments");
    cudaError_t err = cudaMemcpyAsync(raw, s->rec, bytes, cudaMemcpyDeviceToHost, s->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(s->stream);
    if (err == cudaSuccess)
        for (int r = 0; r < count; ++r)
            dipolar_record_row(out + (size_t)r * NLSE_DIPOLAR_MOMENTS,
                               raw[r * NLSE_DIPOLAR_MOMENTS], raw + r * NLSE_DIPOLAR_MOMENTS + 1,
                               s->L.off, imag);
    free(raw);
    return nlse_cuda_check(err, "collecting the recorded moments");
}

int dipolar_blowup(nlse_dipolar *s, size_t bytes, double g_start, double gdd_start, long k, long n,
                   long *done)
{
    CK(cudaMemcpyAsync(s->psi, s->backup, bytes, cudaMemcpyDeviceToDevice, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    s->g = g_start;
    s->gdd = gdd_start;
    if (done)
        *done = k;
    return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld", k + 1, n);
}

template <typename T> static int step_t(nlse_dipolar *s, int mode, long n, double t0, double dg,
                                        double dgdd, const nlse_dipolar_record *rec, long *done)
{
    typedef typename Vec2<T>::T T2;
    const size_t bytes = (s->is_real ? 1 : 2) * s->L.N * s->rs;
    CK(cudaMemcpyAsync(s->backup, s->psi, bytes, cudaMemcpyDeviceToDevice, s->stream));
    const int minus1 = -1;
    CK(cudaMemcpyAsync(s->bad, &minus1, sizeof(int), cudaMemcpyHostToDevice, s->stream));
    const double g_start = s->g, gdd_start = s->gdd;
    const int want = s->have_plans && (s->gdd != 0 || dgdd != 0);
    CKS(dipolar_prepare<T>(s, want, -2));
    double nrm = 0;
    CK(cudaMemcpyAsync(&nrm, s->norm, sizeof(double), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    CK(cudaMemcpyAsync(s->bad, &minus1, sizeof(int), cudaMemcpyHostToDevice, s->stream));
    CK(cudaEventRecord(s->ev0, s->stream));
    H1Args<T> a;
    a.imag = mode == NLSE_DIPOLAR_IMAG;
    a.dt = (T)s->p.dt;
    a.norm = s->norm;
    int held = 0;                           /* rows on the device, not yet collected */
    double *rows = rec ? rec->out : NULL;   /* the next collected row goes here      */
    for (long k = 0; k < n; ++k) {
        double t;
        if (dipolar_step_inputs<T>(s, &a, mode, k, t0, dg, dgdd, want, &t) != 0)
            CKS(dipolar_obstacle_at(s, t));
        if (want && s->gdd != 0) {
            CKS(dipolar_apply_fft<T>(s));
            a.D = (const T *)s->dens;
        }
        const int kk = (int)(k < INT32_MAX ? k : INT32_MAX);
        double *row = rec && (rec->phase + k + 1) % rec->every == 0
                          ? s->rec + (size_t)held * NLSE_DIPOLAR_MOMENTS : NULL;
        int st;
        if (mode == NLSE_DIPOLAR_REAL)
            st = step_kernels<T, T2, T2>(s, a, want, kk, row);
        else if (s->is_real)
            st = step_kernels<T, T, T>(s, a, want, kk, row);
        else
            st = step_kernels<T, T2, T>(s, a, want, kk, row);
        CKS(st);
        if (row && ++held == REC_ROWS) {
            CKS(collect_rows(s, held, a.imag, rows));
            rows += (size_t)held * NLSE_DIPOLAR_MOMENTS;
            held = 0;
        }
    }
    CK(cudaEventRecord(s->ev1, s->stream));
    int bad = -1;
    CK(cudaMemcpyAsync(&bad, s->bad, sizeof(int), cudaMemcpyDeviceToHost, s->stream));
    CK(cudaStreamSynchronize(s->stream));
    float ms = 0;
    cudaEventElapsedTime(&ms, s->ev0, s->ev1);
    s->last_seconds = ms * 1e-3;
    CKS(collect_rows(s, held, a.imag, rows)); /* after a blow-up too: the rows before it */
    if (bad >= 0)
        return dipolar_blowup(s, bytes, g_start, gdd_start, bad, n, done);
    if (mode == NLSE_DIPOLAR_IMAG) {
        dipolar_scale_by_norm<T>(s);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s->stream));
    }
    if (done)
        *done = n;
    return NLSE_OK;
}

extern "C" int nlse_dipolar_step(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd,
                            long *done)
{
    return nlse_dipolar_step_record(s, mode, n, t0, dg, dgdd, NULL, done);
}

/* The rows of a recorded step come from the last solve's partial sums
 * (Dens::mom) and k_norm, into the device rows s->rec; the host collects
 * them every REC_ROWS recorded steps and at the end of the call. */
extern "C" int nlse_dipolar_step_record(nlse_dipolar *s, int mode, long n, double t0, double dg,
                                        double dgdd, const nlse_dipolar_record *rec, long *done)
{
    ON_DEVICE(s);
    if (done)
        *done = 0;
    CKS(dipolar_check_step(mode, n, t0, dg, dgdd));
    CKS(dipolar_check_record(rec, n));
    if (n == 0)
        return NLSE_OK;
    if (s->dist && rec)
        return nlse_fail(NLSE_ERR_VALUE, "a slab of a distributed run does not record steps");
    if (s->dist)
        return s->dops->step(s, mode, n, t0, dg, dgdd, done);
    if (dgdd != 0 && !s->have_plans)
        CKS(dipolar_enable_dipolar(s));
    if (mode == NLSE_DIPOLAR_REAL || s->rot != 0)
        CKS(dipolar_promote(s));
    CKS(dipolar_ensure_backup(s));
    return s->p.dtype == NLSE_COMPLEX64 ? step_t<float>(s, mode, n, t0, dg, dgdd, rec, done)
                                        : step_t<double>(s, mode, n, t0, dg, dgdd, rec, done);
}

/* Traffic model per point and step of this backend: k_zline reads and
 * writes Psi once (and reads the dipolar potential and U); each k_lanes
 * reads and writes Psi twice (the forward recursion's values go through
 * the state); the last solve writes the density; each R2C / C2R transform
 * is counted as one read and one write of the half spectrum per dimension
 * (cuFFT's passes), plus the kernel multiply. */
extern "C" double nlse_dipolar_bytes_per_point_step(const nlse_dipolar *s, int mode)
{
    const double r = (double)s->rs;
    const double v = (mode == NLSE_DIPOLAR_IMAG && s->is_real) ? r : 2 * r;
    const int dd = s->have_plans && s->gdd != 0;
    double b = 2 * v + (dd ? r : 0) + (s->U ? r : 0);
    if (s->zreg == 0 && s->zwarps == 0)
        b += 2 * v + (s->U ? r : 0);
    if (s->L.n[1] > 1)
        b += 4 * v;
    if (s->L.n[0] > 1)
        b += 4 * v;
    if (dd)
        b += r + 2 * (2.0 * s->L.ndim * r) + 2.5 * r;
    return b;
}

extern "C" size_t nlse_dipolar_memory_bytes(const nlse_dipolar *s)
{
    return s->dev_bytes + (s->backup ? 0 : 2 * s->L.N * s->rs);
}

extern "C" double nlse_dipolar_last_step_seconds(const nlse_dipolar *s) { return s->last_seconds; }
