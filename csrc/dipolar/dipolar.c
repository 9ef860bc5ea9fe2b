/*
 * dipolar.c -- the CPU split-step Crank-Nicolson solver of the dipolar GPE
 * (Loncar, thesis, chapter 2; DBEC-GP): parameter checks, the grid, the
 * precomputed Crank-Nicolson coefficients (eqs. 2.29-2.34, 2.42), the
 * dipolar kernels (3D with a spherical cutoff; h2D eq. 2.13, j2D eq. 2.15,
 * j1D eq. 2.18, h1D eq. 2.20), FFTW plans, and the step and observable
 * drivers over the kernels of dipolar_kernels.inc (a step call can record
 * the norm and <x_a^2> of eqs. 2.53, 2.56 from each step's last pass).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fftw3.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "dipolar_internal.h"
#include "dipolar_params.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static size_t rsize(const struct nlse_dipolar *s)
{
    return s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
}

/* n real values as complex ones, o[2q] = p[q] and o[2q + 1] = 0: into
 * another array (over the threads), or in place (from the end backwards),
 * for T = float (sfx f) and double (d). */
#define DIPOLAR_REAL_TO_COMPLEX(T, sfx)                                          \
    static void to_complex_##sfx(const T *p, T *o, ptrdiff_t N)                 \
    {                                                                            \
        _Pragma("omp parallel for NLSE_THREADS schedule(static) if (N > 65536)") \
        for (ptrdiff_t q = 0; q < N; ++q) {                                      \
            o[2 * q] = p[q];                                                     \
            o[2 * q + 1] = 0;                                                    \
        }                                                                        \
    }                                                                            \
    static void promote_##sfx(T *p, size_t n)                                    \
    {                                                                            \
        for (size_t q = n; q-- > 0;) {                                           \
            p[2 * q] = p[q];                                                     \
            p[2 * q + 1] = 0;                                                    \
        }                                                                        \
    }
DIPOLAR_REAL_TO_COMPLEX(float, f)
DIPOLAR_REAL_TO_COMPLEX(double, d)
#undef DIPOLAR_REAL_TO_COMPLEX

void dipolar_real_to_complex(const void *psi, void *out, size_t n, int dtype)
{
    if (dtype == NLSE_COMPLEX64)
        to_complex_f((const float *)psi, (float *)out, (ptrdiff_t)n);
    else
        to_complex_d((const double *)psi, (double *)out, (ptrdiff_t)n);
}

void dipolar_promote_real(void *psi, size_t n, int dtype)
{
    if (dtype == NLSE_COMPLEX64)
        promote_f((float *)psi, n);
    else
        promote_d((double *)psi, n);
}

static void put(const struct nlse_dipolar *s, void *dst, size_t i, double v)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        ((float *)dst)[i] = (float)v;
    else
        ((double *)dst)[i] = v;
}

static int threads_now(void)
{
#ifdef _OPENMP
    return nlse_get_num_threads();
#else
    return 1;
#endif
}

/* ------------------------------------------------------------------ */
/* parameters and tables                                              */
/* ------------------------------------------------------------------ */

/* Crank-Nicolson coefficients of internal axis q for the current dt (a
 * slab's axis 0: of the whole axis). */
static int make_cn(struct nlse_dipolar *s, int q)
{
    size_t n = dipolar_axis_len(s, q);
    dipolar_axis *X = &s->ax[q];
    if (n < 3)
        return NLSE_OK;
    double *t = (double *)malloc(6 * n * sizeof(double));
    if (!t)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the Crank-Nicolson tables");
    dipolar_cn_scalars sc;
    dipolar_cn_coefficients(s->p.dt * s->p.kin / (s->h[q] * s->h[q]), n, t, t + n, t + 2 * n, t + 4 * n,
                       &sc);
    X->A_r = sc.A_r;
    X->A0r_r = sc.A0r_r;
    for (int c = 0; c < 2; ++c) {
        X->A_c[c] = sc.A_c[c];
        X->A0r_c[c] = sc.A0r_c[c];
    }
    for (size_t i = 0; i < n; ++i) {
        put(s, X->alpha_r, i, t[i]);
        put(s, X->gamma_r, i, t[n + i]);
    }
    for (size_t i = 0; i < 2 * n; ++i) {
        put(s, X->alpha_c, i, t[2 * n + i]);
        put(s, X->gamma_c, i, t[4 * n + i]);
    }
    free(t);
    return NLSE_OK;
}

/* The rotating frame's tables of both sweeps and kinds of step for the
 * current dt and w (allocated at the first call).  Sweep 0 solves along x
 * (internal axis rq[0]), a line per y point; sweep 1 along y, a line per x
 * point (a slab: its own x rows). */
static int make_rot(struct nlse_dipolar *s)
{
    const size_t rs = rsize(s);
    for (int sw = 0; sw < 2; ++sw) {
        const int q = s->rq[sw], o = s->rq[1 - sw];
        const size_t n = dipolar_axis_len(s, q), lines = s->n[o];
        s->rlines[sw] = lines;
        double *t = (double *)malloc((4 * n + 4) * sizeof(double));
        if (!t)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the rotating frame's tables");
        for (int m = 0; m < 2; ++m) {
            dipolar_rot_table *R = &s->rt[sw][m];
            if (!R->am) {
                R->am = malloc(2 * lines * rs);
                R->ap = malloc(2 * lines * rs);
                R->alpha = malloc(2 * lines * n * rs);
                R->gamma = malloc(2 * lines * n * rs);
                if (!R->am || !R->ap || !R->alpha || !R->gamma) {
                    free(t);
                    return nlse_fail(NLSE_ERR_NOMEM,
                                     "out of memory for the rotating frame's tables");
                }
            }
            const double r = s->p.dt * s->p.kin / (s->h[q] * s->h[q]);
            R->a0r[0] = m ? 1.0 : 1.0 - r; /* 1 - r or 1 - i r */
            R->a0r[1] = m ? -r : 0.0;
            for (size_t l = 0; l < lines; ++l) {
                /* the drift of -w L_z: -w y on the x sweep, w x on the y sweep */
                const double c = sw ? s->rot * s->x[o][l] : -s->rot * s->x[o][l];
                dipolar_rot_line(r, s->p.dt * c / (4.0 * s->h[q]), m, n, t, t + 2, t + 4,
                                 t + 4 + 2 * n);
                for (int c2 = 0; c2 < 2; ++c2) {
                    put(s, R->am, 2 * l + (size_t)c2, t[c2]);
                    put(s, R->ap, 2 * l + (size_t)c2, t[2 + c2]);
                }
                for (size_t i = 0; i < 2 * n; ++i) {
                    put(s, R->alpha, 2 * l * n + i, t[4 + i]);
                    put(s, R->gamma, 2 * l * n + i, t[4 + 2 * n + i]);
                }
            }
        }
        free(t);
    }
    return NLSE_OK;
}

static void free_rot(struct nlse_dipolar *s)
{
    for (int sw = 0; sw < 2; ++sw)
        for (int m = 0; m < 2; ++m) {
            dipolar_rot_table *R = &s->rt[sw][m];
            free(R->am);
            free(R->ap);
            free(R->alpha);
            free(R->gamma);
            R->am = R->ap = R->alpha = R->gamma = NULL;
        }
}

static void make_kernel(struct nlse_dipolar *s)
{
    dipolar_layout L;
    dipolar_make_layout(&s->p, &L);
    const size_t n0 = s->n[0], n1 = s->n[1], nh = s->n[2] / 2 + 1;
    const double invN = 1.0 / (double)s->N;
#pragma omp parallel for NLSE_THREADS schedule(static) if (n0 > 1)
    for (ptrdiff_t i = 0; i < (ptrdiff_t)n0; ++i)
        for (size_t j = 0; j < n1; ++j)
            for (size_t k = 0; k < nh; ++k)
                put(s, s->kern, ((size_t)i * n1 + j) * nh + k, dipolar_kernel_value(&s->p, &L, (size_t)i, j, k) * invN);
}

static int make_plans(struct nlse_dipolar *s)
{
    int st;
    dipolar_fftw_threads_init();
#pragma omp critical(nlsepy_fftw)
    st = s->p.dtype == NLSE_COMPLEX64 ? dipolar_make_plans_f(s) : dipolar_make_plans_d(s);
    return st;
}

static void free_plans(struct nlse_dipolar *s)
{
    if (s->slab)
        return; /* the slab's plans go with it (dipolar_slab_free) */
#pragma omp critical(nlsepy_fftw)
    {
        if (s->p.dtype == NLSE_COMPLEX64)
            dipolar_free_plans_f(s);
        else
            dipolar_free_plans_d(s);
    }
}

/* Dipolar buffers, kernel and plans (at create, or when gdd first becomes
 * nonzero on a solver made without them). */
static int enable_dipolar(struct nlse_dipolar *s)
{
    if (s->plan_f)
        return NLSE_OK;
    if (s->slab)
        return dipolar_slab_enable(s);
    int st0 = dipolar_check_dipolar(&s->p);
    if (st0)
        return st0;
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

static int ensure_scratch(struct nlse_dipolar *s)
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
static void gaussian_state(struct nlse_dipolar *s)
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

void nlse_dipolar_destroy(nlse_dipolar *s)
{
    if (!s)
        return;
    free_plans(s);
    fftw_free(s->dens);
    free(s->kern);
    if (!(s->slab && s->slab->ext)) /* else the state lies in the slab's ext */
        free(s->psi);
    dipolar_slab_free(s);
    free(s->backup);
    free(s->U);
    for (int q = 0; q < 3; ++q) {
        const size_t r0 = q ? 0 : s->row0; /* a slab's axis 0: the table from row0 */
        free(s->x[q] ? s->x[q] - r0 : NULL);
        free(s->w[q] ? s->w[q] - r0 : NULL);
        free(s->vtrap[q] ? (char *)s->vtrap[q] - r0 * rsize(s) : NULL);
        free(s->ob[q] ? (char *)s->ob[q] - r0 * rsize(s) : NULL);
        free(s->ax[q].alpha_r);
        free(s->ax[q].gamma_r);
        free(s->ax[q].alpha_c);
        free(s->ax[q].gamma_c);
    }
    free_rot(s);
    free(s->scratch);
    free(s->partial);
    free(s->partial_z);
    free(s->wz2);
    free(s);
}

/* The grid's shape: the whole grid, or this rank's x rows of a slab. */
static void set_shape(struct nlse_dipolar *s, const nlse_dipolar_params *p)
{
    dipolar_layout L;
    dipolar_make_layout(p, &L);
    s->ndim = L.ndim;
    s->off = L.off;
    s->rq[0] = L.rq[0];
    s->rq[1] = L.rq[1];
    for (int q = 0; q < 3; ++q) {
        s->n[q] = L.n[q];
        s->h[q] = L.h[q];
    }
    const size_t nh = s->n[2] / 2 + 1;
    if (s->slab) { /* the kernel lives on the spectrum's x pencils */
        s->n[0] = s->slab->ni;
        s->nk = s->slab->n0 * s->slab->nj * nh;
    } else {
        s->nk = s->n[0] * s->n[1] * nh;
    }
    s->N = s->n[0] * s->n[1] * s->n[2];
    s->nlp = 2 * nh;
}

/* The allocations and tables of create (no communication).  A slab's
 * axis-0 tables cover the whole axis; x[0], w[0], vtrap[0], ob[0] point at
 * its row row0. */
static int make_tables(struct nlse_dipolar *s, const nlse_dipolar_params *p)
{
    int st;
    size_t rs = rsize(s);
    if (s->slab) {
        if ((st = dipolar_slab_alloc(s)))
            return st;
    } else {
        s->psi = malloc(2 * s->N * rs);
    }
    s->partial = (double *)malloc(s->n[0] * s->n[1] * sizeof(double));
    s->partial_z = (double *)malloc(s->n[0] * s->n[1] * sizeof(double));
    s->wz2 = (double *)malloc(s->n[2] * sizeof(double));
    if (!s->psi || !s->partial || !s->partial_z || !s->wz2)
        goto nomem;
    for (int q = 0; q < 3; ++q) {
        size_t n = dipolar_axis_len(s, q);
        int a = q - s->off;
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
            s->x[q][i] = a >= 0 ? dipolar_coord(i, n, s->h[q]) : 0.0;
            s->w[q][i] = a >= 0 ? dipolar_simpson(i, n, s->h[q]) : 1.0;
            put(s, s->vtrap[q], i, a >= 0 ? p->trap[a] * s->x[q][i] * s->x[q][i] : 0.0);
            put(s, s->ob[q], i, 1.0);
        }
        if ((st = make_cn(s, q)))
            return st;
    }
    const size_t r0 = s->slab ? s->slab->i0 : 0;
    s->row0 = r0; /* from here destroy frees the axis-0 tables from row0 back */
    s->x[0] += r0;
    s->w[0] += r0;
    s->vtrap[0] = (char *)s->vtrap[0] + r0 * rs;
    s->ob[0] = (char *)s->ob[0] + r0 * rs;
    for (size_t k = 0; k < s->n[2]; ++k)
        s->wz2[k] = s->w[2][k] * s->x[2][k] * s->x[2][k];
    {
        size_t n0 = dipolar_axis_len(s, 0), m01 = n0 > s->n[1] ? n0 : s->n[1];
        s->scratch_len = s->n[2] + 2 * s->n[2] * m01 + 64;
    }
    return ensure_scratch(s);
nomem:
    return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a %zu-point grid", s->N);
}

/* A slab plan not (or no longer) attached to a solver, freed (NULL: none). */
static void discard_slab(struct dipolar_slab *slab)
{
    struct nlse_dipolar bare;
    memset(&bare, 0, sizeof bare);
    bare.slab = slab;
    dipolar_slab_free(&bare);
}

/* Create: the whole grid (slab NULL), or the slab `slab` (collective; taken
 * over, freed on failure); p checked. */
static int dipolar_create(const nlse_dipolar_params *p, struct dipolar_slab *slab,
                          nlse_dipolar **out)
{
    struct nlse_dipolar *s = (struct nlse_dipolar *)calloc(1, sizeof *s);
    if (!s) {
        discard_slab(slab);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    }
    s->slab = slab;
    s->p = *p;
    s->g = p->g;
    s->gdd = p->gdd;
    set_shape(s, p);
    int st = make_tables(s, p);
    if (slab) /* every rank goes on, or every rank stops */
        st = dipolar_slab_agree(s, st, NULL);
    if (!st && p->dipolar) {
        s->p.dipolar = 0;
        st = enable_dipolar(s);
    }
    if (st) {
        nlse_dipolar_destroy(s);
        return st;
    }
    gaussian_state(s);
    *out = s;
    return NLSE_OK;
}

int nlse_dipolar_slab_create(const nlse_dipolar_params *p, int rank, int size,
                             const size_t *xcount, const size_t *ycount, const nlse_comm *comm,
                             nlse_dipolar **out)
{
    if (!p || !xcount || !ycount || !comm || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_create: NULL argument");
    *out = NULL;
    int st = dipolar_check_params(p);
    if (!st)
        st = dipolar_check_slab(p, rank, size, xcount, ycount);
    if (st)
        return st; /* the same arguments on every rank: the same answer, before any message */
    struct dipolar_slab *S = dipolar_slab_new(p, rank, size, xcount, ycount, comm);
    /* every rank learns whether one failed, and the x solve: the highest
     * choice of any rank */
    double v[2] = {S == NULL, S ? S->tune.xsolve : 0};
    if ((st = comm->max(comm->ctx, v, 2)) || !S || v[0] != 0) {
        discard_slab(S);
        if (st)
            return st;
        return S ? nlse_fail(NLSE_ERR_INTERNAL, NLSE_DIPOLAR_PEER " another rank failed")
                 : nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    }
    S->xsolve = (int)v[1];
    return dipolar_create(p, S, out);
}

int nlse_dipolar_create(const nlse_dipolar_params *p, nlse_dipolar **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_create: NULL argument");
    *out = NULL;
    int st = dipolar_check_params(p);
    if (st)
        return st;
    return dipolar_create(p, NULL, out);
}

/* ------------------------------------------------------------------ */
/* state and parameters                                               */
/* ------------------------------------------------------------------ */

int nlse_dipolar_set_state(nlse_dipolar *s, const void *psi, int is_complex)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_set_state: NULL argument");
    size_t m = (is_complex ? 2 : 1) * s->N, rs = rsize(s);
    int st = dipolar_check_finite(psi, m, s->p.dtype, is_complex ? 2 : 1, "psi");
    if (st)
        return st;
    nlse_parallel_memcpy(s->psi, psi, m * rs);
    s->is_real = !is_complex;
    return NLSE_OK;
}

int nlse_dipolar_state_is_real(const nlse_dipolar *s) { return s->is_real; }

int nlse_dipolar_get_state(const nlse_dipolar *s, void *out)
{
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_get_state: NULL argument");
    if (!s->is_real) {
        nlse_parallel_memcpy(out, s->psi, 2 * s->N * rsize(s));
        return NLSE_OK;
    }
    dipolar_real_to_complex(s->psi, out, s->N, s->p.dtype);
    return NLSE_OK;
}

/* A real state becomes complex in place. */
static void promote(struct nlse_dipolar *s)
{
    if (!s->is_real)
        return;
    dipolar_promote_real(s->psi, s->N, s->p.dtype);
    s->is_real = 0;
}

int nlse_dipolar_set_dt(nlse_dipolar *s, double dt)
{
    int st = dipolar_check_dt(dt);
    if (st)
        return st;
    s->p.dt = dt;
    for (int q = 0; q < 3; ++q)
        if ((st = make_cn(s, q)))
            return st;
    return s->rot != 0 ? make_rot(s) : NLSE_OK;
}

int nlse_dipolar_set_rotation(nlse_dipolar *s, double w)
{
    int st = dipolar_check_rotation(&s->p, w);
    if (st || w == s->rot)
        return st;
    if (w != 0 && s->slab && (st = dipolar_slab_rotation(s)))
        return st;
    const double w0 = s->rot;
    s->rot = w;
    if (w != 0 && (st = make_rot(s)))
        s->rot = w0;
    return st;
}

int nlse_dipolar_set_lhy(nlse_dipolar *s, double q)
{
    int st = dipolar_check_lhy(q);
    if (!st)
        s->gqf = q;
    return st;
}

int nlse_dipolar_set_couplings(nlse_dipolar *s, double g, double gdd)
{
    int st0 = dipolar_check_couplings(g, gdd);
    if (st0)
        return st0;
    if (gdd != 0 && !s->plan_f) {
        int st = enable_dipolar(s);
        if (st)
            return st;
    }
    s->g = g;
    s->gdd = gdd;
    return NLSE_OK;
}

int nlse_dipolar_set_potential(nlse_dipolar *s, const void *U)
{
    if (!U) {
        free(s->U);
        s->U = NULL;
        return NLSE_OK;
    }
    size_t rs = rsize(s);
    int st = dipolar_check_finite(U, s->N, s->p.dtype, 1, "V");
    if (st)
        return st;
    if (!s->U && !(s->U = malloc(s->N * rs)))
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the potential");
    memcpy(s->U, U, s->N * rs);
    return NLSE_OK;
}

int nlse_dipolar_set_obstacle(nlse_dipolar *s, const nlse_dipolar_obstacle *o)
{
    if (!o) {
        s->have_obst = 0;
        return NLSE_OK;
    }
    int st = dipolar_check_obstacle(o, s->ndim);
    if (st)
        return st;
    s->obst = *o;
    s->have_obst = 1;
    return NLSE_OK;
}

static void obstacle_at(struct nlse_dipolar *s, double t)
{
    if (!s->have_obst)
        return;
    if (s->slab)
        dipolar_slab_obstacle(s, t); /* every x row: the observables' halo rows too */
    else if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_obstacle_factors_f(s, t);
    else
        dipolar_obstacle_factors_d(s, t);
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */

static double prepare(struct nlse_dipolar *s, int want)
{
    return s->p.dtype == NLSE_COMPLEX64 ? dipolar_prepare_f(s, want) : dipolar_prepare_d(s, want);
}

/* dens <- V_dd * dens (a slab: collective). */
static int apply_fft(struct nlse_dipolar *s)
{
    if (s->slab)
        return dipolar_slab_convolve(s);
    if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_apply_fft_f(s);
    else
        dipolar_apply_fft_d(s);
    return NLSE_OK;
}

/* The Simpson norm of the whole grid (and the density when `want`) of the
 * state as it is (a slab: collective). */
static int norm_of_state(struct nlse_dipolar *s, int want, double *nrm)
{
    if (s->slab)
        return dipolar_slab_norm(s, want, nrm);
    *nrm = prepare(s, want);
    return NLSE_OK;
}

/* One step on the grid; *nrm its norm afterwards (a slab: collective). */
static int step_once(struct nlse_dipolar *s, const dipolar_step_args *a, double *nrm)
{
    if (s->slab)
        return dipolar_slab_step(s, a, nrm);
    *nrm = s->p.dtype == NLSE_COMPLEX64 ? dipolar_step_f(s, a) : dipolar_step_d(s, a);
    return NLSE_OK;
}

/* The start of a call that steps or observes: the threads' buffers, and
 * a complex state where `complex_needed` (a slab: every rank goes on or
 * every rank returns, all with the same kind of state). */
static int begin(struct nlse_dipolar *s, int complex_needed)
{
    int st = ensure_scratch(s), any_complex = 0;
    if (s->slab) /* the transposes move the same kind of values everywhere */
        st = dipolar_slab_begin(s, st, &any_complex);
    if (!st && (complex_needed || any_complex))
        promote(s);
    return st;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

static void scale_state(struct nlse_dipolar *s, double f)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_scale_f(s, f);
    else
        dipolar_scale_d(s, f);
}

/* The moments of the state after a step whose last pass filled partial
 * and partial_z: sums over the rows in a fixed order (the same for any
 * thread count; four interleaved partial sums along j, so the loop
 * vectorises), then the row of nlse_dipolar_record. */
static void record_moments(const struct nlse_dipolar *s, double nrm, int imag, double *row)
{
    const size_t n0 = s->n[0], n1 = s->n[1];
    const double *y = s->x[1];
    double ax[4] = {0, 0, 0, 0}, ay[4] = {0, 0, 0, 0}, az[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n0; ++i) {
        const double xi2 = s->x[0][i] * s->x[0][i];
        const double *p = s->partial + i * n1, *pz = s->partial_z + i * n1;
        size_t j = 0;
        for (; j + 4 <= n1; j += 4)
            for (int l = 0; l < 4; ++l) {
                ax[l] += p[j + l] * xi2;
                ay[l] += p[j + l] * (y[j + l] * y[j + l]);
                az[l] += pz[j + l];
            }
        for (; j < n1; ++j) {
            ax[0] += p[j] * xi2;
            ay[0] += p[j] * (y[j] * y[j]);
            az[0] += pz[j];
        }
    }
    const double T[3] = {(ax[0] + ax[1]) + (ax[2] + ax[3]), (ay[0] + ay[1]) + (ay[2] + ay[3]),
                         (az[0] + az[1]) + (az[2] + az[3])};
    dipolar_record_row(row, nrm, T, s->off, imag);
}

int nlse_dipolar_step(nlse_dipolar *s, int mode, long n, double t0, double dg, double dgdd, long *done)
{
    return nlse_dipolar_step_record(s, mode, n, t0, dg, dgdd, NULL, done);
}

int nlse_dipolar_step_record(nlse_dipolar *s, int mode, long n, double t0, double dg,
                             double dgdd, const nlse_dipolar_record *rec, long *done)
{
    if (done)
        *done = 0;
    int st = dipolar_check_step(mode, n, t0, dg, dgdd);
    if (!st)
        st = dipolar_check_record(rec, n);
    if (!st && rec && s->slab)
        st = nlse_fail(NLSE_ERR_VALUE, "a slab of a distributed run records no moments: "
                                       "call nlse_dipolar_observe between steps");
    if (st || n == 0)
        return st; /* the same arguments on every rank of a slab: the same answer */
    if (dgdd != 0 && !s->plan_f && (st = enable_dipolar(s)))
        return st;
    if ((st = begin(s, mode == NLSE_DIPOLAR_REAL || s->rot != 0)))
        return st;
    size_t bytes = (s->is_real ? 1 : 2) * s->N * rsize(s);
    if (!s->backup && !(s->backup = malloc(2 * s->N * rsize(s))))
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the state backup");
    nlse_parallel_memcpy(s->backup, s->psi, bytes);
    const double g_start = s->g, gdd_start = s->gdd;
    const int want = s->plan_f != NULL && (s->gdd != 0 || dgdd != 0);
    if (s->slab)
        memset(s->slab->tm, 0, sizeof s->slab->tm);
    double nrm;
    if ((st = norm_of_state(s, want, &nrm)))
        return st;
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    struct timespec t_start; /* the steps' clock, from after the first norm */
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    dipolar_step_args a;
    a.mode = mode;
    a.dt = s->p.dt;
    a.want_density = want;
    a.want_moments = 0;
    a.scale = mode == NLSE_DIPOLAR_IMAG ? 1.0 / sqrt(nrm) : 1.0;
    double *row = rec ? rec->out : NULL;
    for (long k = 0; k < n; ++k) {
        s->g += dg;
        s->gdd += dgdd;
        double t = mode == NLSE_DIPOLAR_REAL ? t0 + (double)k * s->p.dt : t0;
        a.amp = dipolar_obstacle_amp(s, t);
        if (a.amp != 0)
            obstacle_at(s, t);
        a.g = s->g;
        a.gdd = want ? s->gdd : 0.0;
        a.gqf = s->gqf;
        a.want_moments = rec && (rec->phase + k + 1) % rec->every == 0;
        if ((want && s->gdd != 0 && (st = apply_fft(s))) || (st = step_once(s, &a, &nrm)))
            return st;
        if (!isfinite(nrm) || !(nrm > 0)) {
            nlse_parallel_memcpy(s->psi, s->backup, bytes);
            s->g = g_start;
            s->gdd = gdd_start;
            if (done)
                *done = k;
            return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld",
                             k + 1, n);
        }
        if (a.want_moments) {
            record_moments(s, nrm, mode == NLSE_DIPOLAR_IMAG, row);
            row += NLSE_DIPOLAR_MOMENTS;
        }
        if (mode == NLSE_DIPOLAR_IMAG)
            a.scale = 1.0 / sqrt(nrm);
    }
    if (mode == NLSE_DIPOLAR_IMAG)
        scale_state(s, a.scale);
    s->last_seconds = seconds_since(&t_start);
    if (s->slab)
        s->slab->tm[0] = s->last_seconds;
    if (done)
        *done = n;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

/* dens <- V_dd * |Psi|^2 of the current state (when the term is on; a
 * slab: collective). */
static int dipolar_of_state(struct nlse_dipolar *s)
{
    if (!s->plan_f)
        return NLSE_OK;
    prepare(s, 1);
    return apply_fft(s);
}

int nlse_dipolar_observe(nlse_dipolar *s, double t, nlse_dipolar_obs *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_observe: NULL argument");
    int st = begin(s, 0);
    if (st || (s->gdd != 0 && (st = dipolar_of_state(s))))
        return st;
    obstacle_at(s, t);
    if (s->slab)
        return dipolar_slab_observe(s, t, out);
    return s->p.dtype == NLSE_COMPLEX64 ? dipolar_observe_f(s, t, out) : dipolar_observe_d(s, t, out);
}

int nlse_dipolar_dd_potential(nlse_dipolar *s, double *out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_dd_potential: NULL argument");
    int st = s->plan_f ? NLSE_OK : enable_dipolar(s);
    if (st || (s->slab && (st = begin(s, 0))) || (st = dipolar_of_state(s)))
        return st;
    const size_t rows = s->n[0] * s->n[1], n2 = s->n[2];
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < n2; ++k)
            out[r * n2 + k] = s->p.dtype == NLSE_COMPLEX64
                                  ? (double)((const float *)s->dens)[r * s->nlp + k]
                                  : ((const double *)s->dens)[r * s->nlp + k];
    return NLSE_OK;
}

int nlse_dipolar_potential(const nlse_dipolar *s, double t, double *out)
{
    struct nlse_dipolar *m = (struct nlse_dipolar *)s;
    obstacle_at(m, t);
    double amp = dipolar_obstacle_amp(s, t);
    if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_potential_f(s, amp, out);
    else
        dipolar_potential_d(s, amp, out);
    return NLSE_OK;
}

int nlse_dipolar_density(const nlse_dipolar *s, int keep_mask, double *out)
{
    if (keep_mask < 0 || keep_mask >= (1 << s->ndim))
        return nlse_fail(NLSE_ERR_VALUE, "keep_mask must be 0..%d, got %d", (1 << s->ndim) - 1,
                         keep_mask);
    if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_density_f(s, keep_mask, out);
    else
        dipolar_density_d(s, keep_mask, out);
    return NLSE_OK;
}

int nlse_dipolar_phase_slice(const nlse_dipolar *s, int axis, long index, double *out)
{
    if (axis < 0 || axis >= s->ndim)
        return nlse_fail(NLSE_ERR_VALUE, "axis must be 0..%d, got %d", s->ndim - 1, axis);
    const int q = axis + s->off;
    const size_t lo = q == 0 ? s->row0 : 0, len = s->n[q]; /* a slab: its own x rows */
    if (index < (long)lo || (size_t)index >= lo + len)
        return nlse_fail(NLSE_ERR_VALUE, "index must be %zu..%zu on axis %d, got %ld", lo,
                         lo + len - 1, axis, index);
    index -= (long)lo;
    if (s->p.dtype == NLSE_COMPLEX64)
        dipolar_phase_f(s, axis + s->off, index, out);
    else
        dipolar_phase_d(s, axis + s->off, index, out);
    return NLSE_OK;
}

int nlse_dipolar_kernel(const nlse_dipolar *s, double *out)
{
    const size_t nh = s->n[2] / 2 + 1;
    dipolar_layout L;
    dipolar_make_layout(&s->p, &L);
    for (size_t i = 0; i < s->n[0]; ++i)
        for (size_t j = 0; j < s->n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                out[(i * s->n[1] + j) * nh + k] =
                    dipolar_kernel_value(&s->p, &L, s->row0 + i, j, k);
    return NLSE_OK;
}

/* Traffic model per point and step: pass A reads and writes Psi, reads the
 * dipolar potential (and U); pass B (3D) reads and writes Psi and writes the
 * density; each r2c/c2r transform is counted as one read and one write of
 * the half spectrum per dimension, plus the kernel multiply.  A slab adds
 * the x solve's two transposes, each reading and writing the state twice
 * (packing and the message). */
double nlse_dipolar_bytes_per_point_step(const nlse_dipolar *s, int mode)
{
    double r = (double)rsize(s);
    double v = (mode == NLSE_DIPOLAR_IMAG && s->is_real) ? r : 2 * r;
    int dd = s->plan_f && s->gdd != 0;
    double b = 2 * v + (dd ? r : 0) + (s->U ? r : 0);
    if (s->n[0] > 1)
        b += 2 * v;
    if (dd)
        b += r + 2 * (2.0 * s->ndim * r) + 2.5 * r;
    if (s->slab)
        b += 8 * v;
    return b;
}

size_t nlse_dipolar_memory_bytes(const nlse_dipolar *s)
{
    const size_t rs = rsize(s), N = s->N;
    size_t b = (s->slab ? 2 : 4) * N * rs; /* state and its backup (a slab: its backup) */
    if (s->slab)
        b += dipolar_slab_memory(s);
    if (s->dens)
        b += s->n[0] * s->n[1] * s->nlp * rs + s->nk * rs;
    if (s->U)
        b += N * rs;
    b += (size_t)s->nthreads * s->scratch_len * rs + 2 * s->n[0] * s->n[1] * sizeof(double);
    for (int sw = 0; sw < 2; ++sw) /* the rotating frame's tables */
        if (s->rt[sw][0].am)
            b += 2 * 4 * s->rlines[sw] * (dipolar_axis_len(s, s->rq[sw]) + 1) * rs;
    return b;
}

double nlse_dipolar_last_step_seconds(const nlse_dipolar *s)
{
    return s->last_seconds;
}
