/*
 * ss.c -- the CPU split-step Crank-Nicolson solver of the dipolar GPE
 * (Loncar, thesis, chapter 2; DBEC-GP): parameter checks, the grid, the
 * precomputed Crank-Nicolson coefficients (eqs. 2.29-2.34, 2.42), the
 * dipolar kernels (3D with a spherical cutoff; h2D eq. 2.13, j2D eq. 2.15,
 * j1D eq. 2.18, h1D eq. 2.20), FFTW plans, and the step and observable
 * drivers over the kernels of ss_kernels.inc.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "ss_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char *geom_name[] = {"3d", "2d-xy", "2d-xz", "1d-x", "1d-z"};

int nlse_ss_ndim(int geometry)
{
    switch (geometry) {
    case NLSE_SS_3D: return 3;
    case NLSE_SS_2D_XY:
    case NLSE_SS_2D_XZ: return 2;
    case NLSE_SS_1D_X:
    case NLSE_SS_1D_Z: return 1;
    default: return 0;
    }
}

static size_t rsize(const struct nlse_ss *s)
{
    return s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
}

static void put(const struct nlse_ss *s, void *dst, size_t i, double v)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        ((float *)dst)[i] = (float)v;
    else
        ((double *)dst)[i] = v;
}

static int threads_now(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* ------------------------------------------------------------------ */
/* special functions of the reduced dipolar kernels                   */
/* ------------------------------------------------------------------ */

/* 1 + 3 cos(x)/x^2 - 3 sin(x)/x^3, the spherical-cutoff factor; its series
 * 3 sum_{m>=2} (-1)^m 2m x^(2m-2) / (2m+1)! near 0. */
static double cutoff_factor(double x)
{
    if (x < 0.5) {
        double x2 = x * x, term = 1.0, sum = 0.0, fact = 120.0; /* (2m+1)! at m = 2 */
        for (int m = 2; m < 12; ++m) {
            double sgn = (m % 2) ? -1.0 : 1.0;
            sum += sgn * 2.0 * m * term / fact;
            term *= x2;
            fact *= (2.0 * m + 2.0) * (2.0 * m + 3.0);
        }
        return 3.0 * x2 * sum;
    }
    return 1.0 + 3.0 * cos(x) / (x * x) - 3.0 * sin(x) / (x * x * x);
}

/* F(xi) = sqrt(pi) xi exp(xi^2) erfc(xi); the asymptotic series beyond 26
 * (where exp(xi^2) erfc(xi) underflows). */
static double F_erfcx(double xi)
{
    if (xi <= 0)
        return 0.0;
    if (xi < 26.0)
        return sqrt(M_PI) * xi * exp(xi * xi) * erfc(xi);
    double u = 1.0 / (2.0 * xi * xi), t = 1.0, sum = 1.0;
    for (int m = 1; m < 8; ++m) {
        t *= -(2.0 * m - 1.0) * u;
        sum += t;
    }
    return sum;
}

/* G(u) = u exp(u) E1(u): series for u <= 1, continued fraction beyond. */
static double G_e1(double u)
{
    if (u <= 0)
        return 0.0;
    if (u <= 1.0) {
        const double euler = 0.57721566490153286061;
        double sum = 0.0, term = 1.0;
        for (int m = 1; m < 40; ++m) {
            term *= -u / m;
            sum += term / m; /* (-u)^m / (m m!) */
        }
        return u * exp(u) * (-euler - log(u) - sum);
    }
    /* modified Lentz on E1(u) e^u = 1/(u+1- 1/(u+3- 4/(u+5- ...))) */
    double b = u + 1.0, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
    for (int m = 1; m < 200; ++m) {
        double an = -(double)m * m;
        b += 2.0;
        d = 1.0 / (an * d + b);
        c = b + an / c;
        double del = c * d;
        h *= del;
        if (fabs(del - 1.0) < 1e-16)
            break;
    }
    return u * h;
}

static double freq(size_t i, size_t n, double h)
{
    double dk = 2.0 * M_PI / ((double)n * h);
    return (i < n / 2 ? (double)i : (double)i - (double)n) * dk;
}

/* Kernel value at the r2c frequency (i, j, k) of the internal grid. */
static double kernel_at(const struct nlse_ss *s, size_t i, size_t j, size_t k)
{
    double kv[3] = {freq(i, s->n[0], s->h[0]), freq(j, s->n[1], s->h[1]),
                    freq(k, s->n[2], s->h[2])};
    for (int q = 0; q < s->off; ++q)
        kv[q] = 0;
    double k2 = kv[0] * kv[0] + kv[1] * kv[1] + kv[2] * kv[2];
    double kk = sqrt(k2);
    switch (s->p.geometry) {
    case NLSE_SS_3D: {
        if (k2 == 0)
            return 0.0;
        double v = 4.0 * M_PI / 3.0 * (3.0 * kv[2] * kv[2] / k2 - 1.0);
        return s->p.cutoff > 0 ? v * cutoff_factor(kk * s->p.cutoff) : v;
    }
    case NLSE_SS_2D_XY: /* h2D(k / sqrt(2 lambda)), eq. 2.13 */
        return 2.0 - 3.0 * F_erfcx(kk / s->p.kscale);
    case NLSE_SS_2D_XZ: /* j2D(k / sqrt(2 nu), k_z), eq. 2.15, k_z = last axis */
        if (k2 == 0)
            return -1.0;
        return -1.0 + 3.0 * (kv[2] * kv[2] / k2) * F_erfcx(kk / s->p.kscale);
    case NLSE_SS_1D_X: { /* j1D, eq. 2.18 in closed form */
        double xi = kk / s->p.kscale;
        return 0.5 - 1.5 * G_e1(xi * xi);
    }
    case NLSE_SS_1D_Z: { /* h1D, eq. 2.20 in closed form */
        double xi = kk / s->p.kscale;
        return 3.0 * G_e1(xi * xi) - 1.0;
    }
    }
    return 0.0;
}

/* ------------------------------------------------------------------ */
/* parameters and tables                                              */
/* ------------------------------------------------------------------ */

static int check_params(const nlse_ss_params *p)
{
    int nd = nlse_ss_ndim(p->geometry);
    if (!nd)
        return nlse_fail(NLSE_ERR_VALUE, "geometry must be 0-4 (3d, 2d-xy, 2d-xz, 1d-x, 1d-z), got %d",
                         p->geometry);
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype must be COMPLEX64 or COMPLEX128, got %d", p->dtype);
    for (int a = 0; a < nd; ++a) {
        if (p->shape[a] < 4)
            return nlse_fail(NLSE_ERR_VALUE, "shape[%d] must be >= 4 points, got %zu", a,
                             p->shape[a]);
        if (p->shape[a] > (size_t)1 << 30)
            return nlse_fail(NLSE_ERR_VALUE, "shape[%d] = %zu is too large", a, p->shape[a]);
        if (!(p->spacing[a] > 0) || !isfinite(p->spacing[a]))
            return nlse_fail(NLSE_ERR_VALUE, "spacing[%d] must be finite and > 0, got %g", a,
                             p->spacing[a]);
        if (!isfinite(p->trap[a]) || p->trap[a] < 0)
            return nlse_fail(NLSE_ERR_VALUE, "trap[%d] must be finite and >= 0, got %g", a,
                             p->trap[a]);
    }
    if (!(p->dt > 0) || !isfinite(p->dt))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", p->dt);
    if (!(p->kin > 0) || !isfinite(p->kin))
        return nlse_fail(NLSE_ERR_VALUE, "kin must be finite and > 0, got %g", p->kin);
    if (!isfinite(p->g))
        return nlse_fail(NLSE_ERR_VALUE, "g must be finite, got %g", p->g);
    if (!isfinite(p->gdd))
        return nlse_fail(NLSE_ERR_VALUE, "gdd must be finite, got %g", p->gdd);
    if (!isfinite(p->cutoff))
        return nlse_fail(NLSE_ERR_VALUE, "cutoff must be finite, got %g", p->cutoff);
    if (!p->dipolar && p->gdd != 0)
        return nlse_fail(NLSE_ERR_VALUE, "gdd = %g needs the dipolar step (dipolar = 1)", p->gdd);
    if (p->fft_effort < 0 || p->fft_effort > 2)
        return nlse_fail(NLSE_ERR_VALUE, "fft_effort must be 0, 1 or 2, got %d", p->fft_effort);
    return NLSE_OK;
}

/* Crank-Nicolson coefficients of internal axis q for the current dt. */
static int make_cn(struct nlse_ss *s, int q)
{
    size_t n = s->n[q];
    ss_axis *X = &s->ax[q];
    if (n < 3)
        return NLSE_OK;
    double r = s->p.dt * s->p.kin / (s->h[q] * s->h[q]);
    /* imaginary time: A = -r/2, A0 = 1 + r, A0r = 1 - r (eq. 2.42) */
    {
        double A = -0.5 * r, A0 = 1.0 + r, g = -1.0 / A0, al = 0.0;
        X->A_r = A;
        X->A0r_r = 1.0 - r;
        put(s, X->alpha_r, n - 2, 0.0);
        put(s, X->gamma_r, n - 2, g);
        for (size_t i = n - 2; i > 0; --i) {
            al = A * g;
            g = -1.0 / (A0 + A * al);
            put(s, X->alpha_r, i - 1, al);
            put(s, X->gamma_r, i - 1, g);
        }
    }
    /* real time: A = -i r/2, A0 = 1 + i r, A0r = 1 - i r (eqs. 2.29-2.31) */
    {
        double Ar = 0.0, Ai = -0.5 * r, A0r = 1.0, A0i = r;
        double den = A0r * A0r + A0i * A0i;
        double gr = -A0r / den, gi = A0i / den; /* -1 / A0 */
        X->A_c[0] = Ar;
        X->A_c[1] = Ai;
        X->A0r_c[0] = 1.0;
        X->A0r_c[1] = -r;
        put(s, X->alpha_c, 2 * (n - 2), 0.0);
        put(s, X->alpha_c, 2 * (n - 2) + 1, 0.0);
        put(s, X->gamma_c, 2 * (n - 2), gr);
        put(s, X->gamma_c, 2 * (n - 2) + 1, gi);
        for (size_t i = n - 2; i > 0; --i) {
            double alr = Ar * gr - Ai * gi, ali = Ar * gi + Ai * gr; /* alpha = A gamma */
            double dr = A0r + (Ar * alr - Ai * ali), di = A0i + (Ar * ali + Ai * alr);
            double dd = dr * dr + di * di;
            gr = -dr / dd;
            gi = di / dd;
            put(s, X->alpha_c, 2 * (i - 1), alr);
            put(s, X->alpha_c, 2 * (i - 1) + 1, ali);
            put(s, X->gamma_c, 2 * (i - 1), gr);
            put(s, X->gamma_c, 2 * (i - 1) + 1, gi);
        }
    }
    return NLSE_OK;
}

static void make_kernel(struct nlse_ss *s)
{
    const size_t n0 = s->n[0], n1 = s->n[1], nh = s->n[2] / 2 + 1;
    const double invN = 1.0 / (double)s->N;
#pragma omp parallel for schedule(static) if (n0 > 1)
    for (ptrdiff_t i = 0; i < (ptrdiff_t)n0; ++i)
        for (size_t j = 0; j < n1; ++j)
            for (size_t k = 0; k < nh; ++k)
                put(s, s->kern, ((size_t)i * n1 + j) * nh + k, kernel_at(s, (size_t)i, j, k) * invN);
}

#ifdef NLSEPY_FFTW_THREADED
static int fftw_state = 0;
#endif

int ss_fftw_threads_init(void)
{
#ifdef NLSEPY_FFTW_THREADED
    int ok;
#pragma omp critical(nlsepy_fftw)
    {
        if (fftw_state == 0) {
            fftw_state = (fftw_init_threads() && fftwf_init_threads()) ? 1 : -1;
            if (fftw_state == 1) {
                fftw_make_planner_thread_safe();
                fftwf_make_planner_thread_safe();
            }
        }
        ok = fftw_state == 1;
    }
    return ok;
#else
    return 1;
#endif
}

static int make_plans(struct nlse_ss *s)
{
    int st;
    ss_fftw_threads_init();
#pragma omp critical(nlsepy_fftw)
    st = s->p.dtype == NLSE_COMPLEX64 ? ss_make_plans_f(s) : ss_make_plans_d(s);
    return st;
}

static void free_plans(struct nlse_ss *s)
{
#pragma omp critical(nlsepy_fftw)
    {
        if (s->p.dtype == NLSE_COMPLEX64)
            ss_free_plans_f(s);
        else
            ss_free_plans_d(s);
    }
}

/* Dipolar buffers, kernel and plans (at create, or when gdd first becomes
 * nonzero on a solver made without them). */
static int enable_dipolar(struct nlse_ss *s)
{
    if (s->plan_f)
        return NLSE_OK;
    for (int a = 0; a < s->ndim; ++a)
        if (s->p.shape[a] % 2)
            return nlse_fail(NLSE_ERR_VALUE,
                             "shape[%d] = %zu must be even with the dipolar term (the FFT grid "
                             "puts x = 0 at index n/2 of a symmetric box)", a, s->p.shape[a]);
    if (s->p.geometry != NLSE_SS_3D && (!(s->p.kscale > 0) || !isfinite(s->p.kscale)))
        return nlse_fail(NLSE_ERR_VALUE,
                         "kscale (sqrt(2 x confining frequency)) must be finite and > 0 for the "
                         "dipolar term in the %s geometry, got %g", geom_name[s->p.geometry],
                         s->p.kscale);
    size_t rs = rsize(s);
    s->dens = fftw_malloc(s->n[0] * s->n[1] * s->nlp * rs);
    s->kern = malloc(s->nk * rs);
    if (!s->dens || !s->kern)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar buffers (%zu points)", s->N);
    int st = make_plans(s);
    if (st)
        return st;
    make_kernel(s);
    s->p.dipolar = 1;
    return NLSE_OK;
}

static int ensure_scratch(struct nlse_ss *s)
{
    int nt = threads_now();
    if (s->scratch && nt <= s->nthreads)
        return NLSE_OK;
    if (nt < s->nthreads)
        nt = s->nthreads;
    void *w = malloc((size_t)nt * s->scratch_len * rsize(s));
    if (!w)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for %d threads' sweep buffers", nt);
    free(s->scratch);
    s->scratch = w;
    s->nthreads = nt;
    return NLSE_OK;
}

/* Normalised Gaussian of the trap, exp(-sum w_a x_a^2 / 2) with
 * w_a = sqrt(trap_a / kin) (DBEC-GP's imaginary-time start). */
static void gaussian_state(struct nlse_ss *s)
{
    double wq[3] = {1, 1, 1}, c = 1.0;
    for (int q = s->off; q < 3; ++q) {
        double t = s->p.trap[q - s->off];
        wq[q] = t > 0 ? sqrt(t / s->p.kin) : 1.0;
        c *= pow(wq[q] / M_PI, 0.25);
    }
    s->is_real = 1;
    for (size_t i = 0; i < s->n[0]; ++i)
        for (size_t j = 0; j < s->n[1]; ++j)
            for (size_t k = 0; k < s->n[2]; ++k) {
                double e = wq[0] * s->x[0][i] * s->x[0][i] + wq[1] * s->x[1][j] * s->x[1][j] +
                           wq[2] * s->x[2][k] * s->x[2][k];
                put(s, s->psi, (i * s->n[1] + j) * s->n[2] + k, c * exp(-0.5 * e));
            }
}

void nlse_ss_destroy(nlse_ss *s)
{
    if (!s)
        return;
    free_plans(s);
    fftw_free(s->dens);
    free(s->kern);
    free(s->psi);
    free(s->backup);
    free(s->U);
    for (int q = 0; q < 3; ++q) {
        free(s->x[q]);
        free(s->w[q]);
        free(s->vtrap[q]);
        free(s->ob[q]);
        free(s->ax[q].alpha_r);
        free(s->ax[q].gamma_r);
        free(s->ax[q].alpha_c);
        free(s->ax[q].gamma_c);
    }
    free(s->scratch);
    free(s->partial);
    free(s);
}

int nlse_ss_create(const nlse_ss_params *p, nlse_ss **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_ss_create: NULL argument");
    *out = NULL;
    int st = check_params(p);
    if (st)
        return st;
    struct nlse_ss *s = (struct nlse_ss *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->ndim = nlse_ss_ndim(p->geometry);
    s->off = 3 - s->ndim;
    s->N = 1;
    for (int q = 0; q < 3; ++q) {
        int a = q - s->off;
        s->n[q] = a >= 0 ? p->shape[a] : 1;
        s->h[q] = a >= 0 ? p->spacing[a] : 1.0;
        s->N *= s->n[q];
    }
    s->nlp = 2 * (s->n[2] / 2 + 1);
    s->nk = s->n[0] * s->n[1] * (s->n[2] / 2 + 1);
    s->g = p->g;
    s->gdd = p->gdd;
    size_t rs = rsize(s), nmax = 0;
    s->psi = malloc(2 * s->N * rs);
    s->partial = (double *)malloc(s->n[0] * s->n[1] * sizeof(double));
    if (!s->psi || !s->partial)
        goto nomem;
    for (int q = 0; q < 3; ++q) {
        size_t n = s->n[q];
        int a = q - s->off;
        if (n > nmax)
            nmax = n;
        s->x[q] = (double *)malloc(n * sizeof(double));
        s->w[q] = (double *)malloc(n * sizeof(double));
        s->vtrap[q] = malloc(n * rs);
        s->ob[q] = malloc(n * rs);
        s->ax[q].alpha_r = malloc(n * rs);
        s->ax[q].gamma_r = malloc(n * rs);
        s->ax[q].alpha_c = malloc(2 * n * rs);
        s->ax[q].gamma_c = malloc(2 * n * rs);
        if (!s->x[q] || !s->w[q] || !s->vtrap[q] || !s->ob[q] || !s->ax[q].alpha_r ||
            !s->ax[q].gamma_r || !s->ax[q].alpha_c || !s->ax[q].gamma_c)
            goto nomem;
        for (size_t i = 0; i < n; ++i) {
            /* x_i = (i - n/2) h (DBEC-GP); Simpson weights 1,4,2,...,4,2,...,1 times h/3 */
            s->x[q][i] = a >= 0 ? ((double)i - (double)(n / 2)) * s->h[q] : 0.0;
            double c = (i == 0 || i == n - 1) ? 1.0 : (i % 2 ? 4.0 : 2.0);
            s->w[q][i] = a >= 0 ? c * s->h[q] / 3.0 : 1.0;
            put(s, s->vtrap[q], i, a >= 0 ? p->trap[a] * s->x[q][i] * s->x[q][i] : 0.0);
            put(s, s->ob[q], i, 1.0);
        }
        make_cn(s, q);
    }
    {
        size_t m01 = s->n[0] > s->n[1] ? s->n[0] : s->n[1];
        s->scratch_len = s->n[2] + 2 * s->n[2] * m01 + 64;
    }
    st = ensure_scratch(s);
    if (st)
        goto fail;
    if (p->dipolar) {
        s->p.dipolar = 0;
        st = enable_dipolar(s);
        if (st)
            goto fail;
    }
    gaussian_state(s);
    *out = s;
    return NLSE_OK;
nomem:
    st = nlse_fail(NLSE_ERR_NOMEM, "out of memory for a %zu-point grid", s->N);
fail:
    nlse_ss_destroy(s);
    return st;
}

/* ------------------------------------------------------------------ */
/* state and parameters                                               */
/* ------------------------------------------------------------------ */

int nlse_ss_set_state(nlse_ss *s, const void *psi, int is_complex)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_ss_set_state: NULL argument");
    size_t m = (is_complex ? 2 : 1) * s->N, rs = rsize(s);
    for (size_t q = 0; q < m; ++q) {
        double v = s->p.dtype == NLSE_COMPLEX64 ? ((const float *)psi)[q] : ((const double *)psi)[q];
        if (!isfinite(v))
            return nlse_fail(NLSE_ERR_VALUE, "psi contains a non-finite value at flat index %zu",
                             q / (is_complex ? 2 : 1));
    }
    nlse_parallel_memcpy(s->psi, psi, m * rs);
    s->is_real = !is_complex;
    return NLSE_OK;
}

int nlse_ss_state_is_real(const nlse_ss *s) { return s->is_real; }

int nlse_ss_get_state(const nlse_ss *s, void *out)
{
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_ss_get_state: NULL argument");
    if (!s->is_real) {
        nlse_parallel_memcpy(out, s->psi, 2 * s->N * rsize(s));
        return NLSE_OK;
    }
    const ptrdiff_t N = (ptrdiff_t)s->N;
    if (s->p.dtype == NLSE_COMPLEX64) {
        const float *p = (const float *)s->psi;
        float *o = (float *)out;
#pragma omp parallel for schedule(static) if (N > 65536)
        for (ptrdiff_t q = 0; q < N; ++q) {
            o[2 * q] = p[q];
            o[2 * q + 1] = 0;
        }
    } else {
        const double *p = (const double *)s->psi;
        double *o = (double *)out;
#pragma omp parallel for schedule(static) if (N > 65536)
        for (ptrdiff_t q = 0; q < N; ++q) {
            o[2 * q] = p[q];
            o[2 * q + 1] = 0;
        }
    }
    return NLSE_OK;
}

/* A real state becomes complex in place (from the end backwards). */
static void promote(struct nlse_ss *s)
{
    if (!s->is_real)
        return;
    if (s->p.dtype == NLSE_COMPLEX64) {
        float *p = (float *)s->psi;
        for (size_t q = s->N; q-- > 0;) {
            p[2 * q] = p[q];
            p[2 * q + 1] = 0;
        }
    } else {
        double *p = (double *)s->psi;
        for (size_t q = s->N; q-- > 0;) {
            p[2 * q] = p[q];
            p[2 * q + 1] = 0;
        }
    }
    s->is_real = 0;
}

int nlse_ss_set_dt(nlse_ss *s, double dt)
{
    if (!(dt > 0) || !isfinite(dt))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", dt);
    s->p.dt = dt;
    for (int q = 0; q < 3; ++q)
        make_cn(s, q);
    return NLSE_OK;
}

int nlse_ss_set_couplings(nlse_ss *s, double g, double gdd)
{
    if (!isfinite(g))
        return nlse_fail(NLSE_ERR_VALUE, "g must be finite, got %g", g);
    if (!isfinite(gdd))
        return nlse_fail(NLSE_ERR_VALUE, "gdd must be finite, got %g", gdd);
    if (gdd != 0 && !s->plan_f) {
        int st = enable_dipolar(s);
        if (st)
            return st;
    }
    s->g = g;
    s->gdd = gdd;
    return NLSE_OK;
}

int nlse_ss_set_potential(nlse_ss *s, const void *U)
{
    if (!U) {
        free(s->U);
        s->U = NULL;
        return NLSE_OK;
    }
    size_t rs = rsize(s);
    for (size_t q = 0; q < s->N; ++q) {
        double v = s->p.dtype == NLSE_COMPLEX64 ? ((const float *)U)[q] : ((const double *)U)[q];
        if (!isfinite(v))
            return nlse_fail(NLSE_ERR_VALUE, "V contains a non-finite value at flat index %zu", q);
    }
    if (!s->U && !(s->U = malloc(s->N * rs)))
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the potential");
    memcpy(s->U, U, s->N * rs);
    return NLSE_OK;
}

int nlse_ss_set_obstacle(nlse_ss *s, const nlse_ss_obstacle *o)
{
    if (!o) {
        s->have_obst = 0;
        return NLSE_OK;
    }
    const double v[6] = {o->V0, o->sigma, o->velocity, o->start, o->t_move, o->t_off};
    const char *nm[6] = {"V0", "sigma", "velocity", "start", "t_move", "t_off"};
    for (int q = 0; q < 6; ++q)
        if (isnan(v[q]) || (q < 4 && !isfinite(v[q])))
            return nlse_fail(NLSE_ERR_VALUE, "obstacle %s must be %s, got %g", nm[q],
                             q < 4 ? "finite" : "a number", v[q]);
    if (!(o->sigma > 0))
        return nlse_fail(NLSE_ERR_VALUE, "obstacle sigma must be > 0, got %g", o->sigma);
    if (o->t_move < 0 || o->t_off < 0)
        return nlse_fail(NLSE_ERR_VALUE, "obstacle t_move and t_off must be >= 0, got %g and %g",
                         o->t_move, o->t_off);
    if (o->move_axis < 0 || o->move_axis >= s->ndim)
        return nlse_fail(NLSE_ERR_VALUE, "obstacle move_axis must be 0..%d, got %d", s->ndim - 1,
                         o->move_axis);
    if (o->beam_axis < -1 || o->beam_axis >= s->ndim || o->beam_axis == o->move_axis)
        return nlse_fail(NLSE_ERR_VALUE,
                         "obstacle beam_axis must be -1 or a solver axis other than move_axis, got %d",
                         o->beam_axis);
    s->obst = *o;
    s->have_obst = 1;
    return NLSE_OK;
}

double ss_obstacle_centre(const struct nlse_ss *s, double t)
{
    double tm = t < s->obst.t_move ? t : s->obst.t_move;
    if (tm < 0)
        tm = 0;
    return s->obst.start + s->obst.velocity * tm;
}

double ss_obstacle_amp(const struct nlse_ss *s, double t)
{
    if (!s->have_obst)
        return 0.0;
    const nlse_ss_obstacle *o = &s->obst;
    if (t <= o->t_move)
        return o->V0;
    if (o->t_off <= 0 || t >= o->t_move + o->t_off)
        return 0.0;
    return o->V0 * (1.0 - (t - o->t_move) / o->t_off);
}

static void obstacle_at(struct nlse_ss *s, double t)
{
    if (!s->have_obst)
        return;
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_obstacle_factors_f(s, t);
    else
        ss_obstacle_factors_d(s, t);
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */

static double prepare(struct nlse_ss *s, int want)
{
    return s->p.dtype == NLSE_COMPLEX64 ? ss_prepare_f(s, want) : ss_prepare_d(s, want);
}

static void apply_fft(struct nlse_ss *s)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_apply_fft_f(s);
    else
        ss_apply_fft_d(s);
}

static void scale_state(struct nlse_ss *s, double f)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_scale_f(s, f);
    else
        ss_scale_d(s, f);
}

int nlse_ss_step(nlse_ss *s, int mode, long n, double t0, double dg, double dgdd, long *done)
{
    if (done)
        *done = 0;
    if (mode != NLSE_SS_IMAG && mode != NLSE_SS_REAL)
        return nlse_fail(NLSE_ERR_VALUE, "mode must be 0 (imaginary) or 1 (real time), got %d", mode);
    if (n < 0)
        return nlse_fail(NLSE_ERR_VALUE, "steps must be >= 0, got %ld", n);
    if (!isfinite(t0) || !isfinite(dg) || !isfinite(dgdd))
        return nlse_fail(NLSE_ERR_VALUE, "t0, dg and dgdd must be finite");
    if (n == 0)
        return NLSE_OK;
    if (dgdd != 0 && !s->plan_f) {
        int st = enable_dipolar(s);
        if (st)
            return st;
    }
    int st = ensure_scratch(s);
    if (st)
        return st;
    if (mode == NLSE_SS_REAL)
        promote(s);
    size_t bytes = (s->is_real ? 1 : 2) * s->N * rsize(s);
    if (!s->backup && !(s->backup = malloc(2 * s->N * rsize(s))))
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the state backup");
    nlse_parallel_memcpy(s->backup, s->psi, bytes);
    const double g_start = s->g, gdd_start = s->gdd;
    const int want = s->plan_f != NULL && (s->gdd != 0 || dgdd != 0);
    double nrm = prepare(s, want);
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    ss_step_args a;
    a.mode = mode;
    a.dt = s->p.dt;
    a.want_density = want;
    a.scale = mode == NLSE_SS_IMAG ? 1.0 / sqrt(nrm) : 1.0;
    for (long k = 0; k < n; ++k) {
        s->g += dg;
        s->gdd += dgdd;
        double t = mode == NLSE_SS_REAL ? t0 + (double)k * s->p.dt : t0;
        a.amp = ss_obstacle_amp(s, t);
        if (a.amp != 0)
            obstacle_at(s, t);
        a.g = s->g;
        a.gdd = want ? s->gdd : 0.0;
        if (want && s->gdd != 0)
            apply_fft(s);
        nrm = s->p.dtype == NLSE_COMPLEX64 ? ss_step_f(s, &a) : ss_step_d(s, &a);
        if (!isfinite(nrm) || !(nrm > 0)) {
            nlse_parallel_memcpy(s->psi, s->backup, bytes);
            s->g = g_start;
            s->gdd = gdd_start;
            if (done)
                *done = k;
            return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld",
                             k + 1, n);
        }
        if (mode == NLSE_SS_IMAG)
            a.scale = 1.0 / sqrt(nrm);
    }
    if (mode == NLSE_SS_IMAG)
        scale_state(s, a.scale);
    if (done)
        *done = n;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

/* dens <- V_dd * |Psi|^2 of the current state (when the term is on). */
static void dipolar_of_state(struct nlse_ss *s)
{
    if (!s->plan_f)
        return;
    prepare(s, 1);
    apply_fft(s);
}

int nlse_ss_observe(nlse_ss *s, double t, nlse_ss_obs *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_ss_observe: NULL argument");
    int st = ensure_scratch(s);
    if (st)
        return st;
    if (s->gdd != 0)
        dipolar_of_state(s);
    obstacle_at(s, t);
    return s->p.dtype == NLSE_COMPLEX64 ? ss_observe_f(s, t, out) : ss_observe_d(s, t, out);
}

int nlse_ss_dipolar_potential(nlse_ss *s, double *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_ss_dipolar_potential: NULL argument");
    if (!s->plan_f) {
        int st = enable_dipolar(s);
        if (st)
            return st;
    }
    dipolar_of_state(s);
    const size_t rows = s->n[0] * s->n[1], n2 = s->n[2];
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < n2; ++k)
            out[r * n2 + k] = s->p.dtype == NLSE_COMPLEX64
                                  ? (double)((const float *)s->dens)[r * s->nlp + k]
                                  : ((const double *)s->dens)[r * s->nlp + k];
    return NLSE_OK;
}

int nlse_ss_potential(const nlse_ss *s, double t, double *out)
{
    struct nlse_ss *m = (struct nlse_ss *)s;
    obstacle_at(m, t);
    double amp = ss_obstacle_amp(s, t);
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_potential_f(s, amp, out);
    else
        ss_potential_d(s, amp, out);
    return NLSE_OK;
}

int nlse_ss_density(const nlse_ss *s, int keep_mask, double *out)
{
    if (keep_mask < 0 || keep_mask >= (1 << s->ndim))
        return nlse_fail(NLSE_ERR_VALUE, "keep_mask must be 0..%d, got %d", (1 << s->ndim) - 1,
                         keep_mask);
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_density_f(s, keep_mask, out);
    else
        ss_density_d(s, keep_mask, out);
    return NLSE_OK;
}

int nlse_ss_phase_slice(const nlse_ss *s, int axis, long index, double *out)
{
    if (axis < 0 || axis >= s->ndim)
        return nlse_fail(NLSE_ERR_VALUE, "axis must be 0..%d, got %d", s->ndim - 1, axis);
    if (index < 0 || (size_t)index >= s->p.shape[axis])
        return nlse_fail(NLSE_ERR_VALUE, "index must be 0..%zu on axis %d, got %ld",
                         s->p.shape[axis] - 1, axis, index);
    if (s->p.dtype == NLSE_COMPLEX64)
        ss_phase_f(s, axis + s->off, index, out);
    else
        ss_phase_d(s, axis + s->off, index, out);
    return NLSE_OK;
}

int nlse_ss_kernel(const nlse_ss *s, double *out)
{
    const size_t nh = s->n[2] / 2 + 1;
    for (size_t i = 0; i < s->n[0]; ++i)
        for (size_t j = 0; j < s->n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                out[(i * s->n[1] + j) * nh + k] = kernel_at(s, i, j, k);
    return NLSE_OK;
}

/* Traffic model per point and step: pass A reads and writes Psi, reads the
 * dipolar potential (and U); pass B (3D) reads and writes Psi and writes the
 * density; each r2c/c2r transform is counted as one read and one write of
 * the half spectrum per dimension, plus the kernel multiply. */
double nlse_ss_bytes_per_point_step(const nlse_ss *s, int mode)
{
    double r = (double)rsize(s);
    double v = (mode == NLSE_SS_IMAG && s->is_real) ? r : 2 * r;
    int dd = s->plan_f && s->gdd != 0;
    double b = 2 * v + (dd ? r : 0) + (s->U ? r : 0);
    if (s->n[0] > 1)
        b += 2 * v;
    if (dd)
        b += r + 2 * (2.0 * s->ndim * r) + 2.5 * r;
    return b;
}
