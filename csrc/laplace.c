/*
 * laplace.c -- the CPU magnet-design Laplace solver (Madhubhashini, thesis,
 * chapter 2): Phi on colour-reordered storage, the iterations of section 2.2
 * (laplace_kernels.inc, float and double) and the stopping rule of eq. 2.50.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "laplace_cpu.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#include "laplace_kernels.inc"
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#include "laplace_kernels.inc"
#undef FN
#undef REAL

static size_t rsize(const nlse_lp *s)
{
    return s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
}

void nlse_lp_destroy(nlse_lp *s)
{
    if (!s)
        return;
    for (int c = 0; c < 2; ++c) {
        free(s->P[c]);
        free(s->Q[c]);
    }
    lp_mg_free(s);
    free(s->rows);
    free(s->part);
    free(s);
}

int nlse_lp_create(const nlse_lp_params *p, nlse_lp **out)
{
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_lp_create: NULL argument");
    *out = NULL;
    int st = nlse_lp_check_params(p);
    if (st)
        return st;
    nlse_lp *s = (nlse_lp *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->p = *p;
    lp_make_geom(p, &s->g);
    s->hw = s->g.nz / 2 + 2;
    const size_t n = (s->g.nr + 2) * s->hw;
    s->rows = (lp_row *)malloc(s->g.nr * sizeof(lp_row));
    s->part = (double *)malloc(s->g.nr * sizeof(double));
    for (int c = 0; c < 2; ++c)
        s->P[c] = calloc(n, rsize(s));
    if (!s->rows || !s->part || !s->P[0] || !s->P[1]) {
        nlse_lp_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a %zu-node grid", n);
    }
    lp_make_rows(&s->g, s->rows);
    s->fnorm = s->g.fnorm;
    *out = s;
    return NLSE_OK;
}

void nlse_lp_shape(const nlse_lp *s, size_t *nr, size_t *nz)
{
    *nr = s->g.nr;
    *nz = s->g.nz;
}

int nlse_lp_get_phi(const nlse_lp *s, double *phi)
{
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_lp_get_phi: NULL argument");
    if (s->p.dtype == NLSE_COMPLEX64)
        get_phi_f(s, phi);
    else
        get_phi_d(s, phi);
    return NLSE_OK;
}

int nlse_lp_set_phi(nlse_lp *s, const double *phi)
{
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_lp_set_phi: NULL argument");
    for (int i = 0; i < (int)s->g.nr; ++i)
        for (int j = s->rows[i].js; j <= s->rows[i].je; ++j)
            if (!isfinite(phi[(size_t)i * s->g.nz + (size_t)j]))
                return nlse_fail(NLSE_ERR_VALUE,
                                 "phi must be finite at the unknowns, got %g at node (%d, %d)",
                                 phi[(size_t)i * s->g.nz + (size_t)j], i, j);
    if (s->p.dtype == NLSE_COMPLEX64)
        set_phi_f(s, phi);
    else
        set_phi_d(s, phi);
    return NLSE_OK;
}

static double denom(const nlse_lp *s)
{
    return s->fnorm > 0 ? s->fnorm : 1.0; /* f = 0 (B = 0): absolute residual */
}

int nlse_lp_set_dirichlet(nlse_lp *s, const double *values)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_lp_set_dirichlet: NULL solver");
    const int f = s->p.dtype == NLSE_COMPLEX64;
    const size_t nn = s->g.nr * s->g.nz;
    if (!values) {
        lp_make_rows(&s->g, s->rows);
        s->fnorm = s->g.fnorm;
        s->dirichlet = 0;
        for (int c = 0; c < 2; ++c)
            memset(s->P[c], 0, (s->g.nr + 2) * s->hw * rsize(s));
        return NLSE_OK;
    }
    for (size_t q = 0; q < nn; ++q) {
        const int i = (int)(q / s->g.nz), j = (int)(q % s->g.nz);
        if (!(i < s->g.i0 && j < s->g.j0) && !isfinite(values[q]))
            return nlse_fail(NLSE_ERR_VALUE, "boundary values must be finite, got %g at node (%d, %d)",
                             values[q], i, j);
    }
    lp_make_rows_dirichlet(&s->g, s->rows);
    if (f) {
        set_all_f(s, values);
        zero_unknowns_f(s);
    } else {
        set_all_d(s, values);
        zero_unknowns_d(s);
    }
    /* f of the unknowns' equations: the fixed neighbours moved to the right */
    s->fnorm = sqrt(f ? residual_all_f(s) : residual_all_d(s));
    s->dirichlet = 1;
    return NLSE_OK;
}

double nlse_lp_rel_residual(const nlse_lp *s)
{
    double ss = s->p.dtype == NLSE_COMPLEX64 ? residual_all_f(s) : residual_all_d(s);
    return sqrt(ss) / denom(s);
}

void lp_fine_smooth(struct nlse_lp *s)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        (void)sweep_rb_f(s, 1.0);
    else
        (void)sweep_rb_d(s, 1.0);
}

void lp_fine_residual(const struct nlse_lp *s, double *r)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        residual_to_f(s, r);
    else
        residual_to_d(s, r);
}

void lp_fine_correct(struct nlse_lp *s, const double *e)
{
    if (s->p.dtype == NLSE_COMPLEX64)
        add_correction_f(s, e);
    else
        add_correction_d(s, e);
}

static double sweep(nlse_lp *s, int method, double omega)
{
    const int f = s->p.dtype == NLSE_COMPLEX64;
    switch (method) {
    case NLSE_LP_JACOBI: return f ? sweep_jacobi_f(s) : sweep_jacobi_d(s);
    case NLSE_LP_GAUSS_SEIDEL: return f ? sweep_lex_f(s, 1.0) : sweep_lex_d(s, 1.0);
    case NLSE_LP_SOR: return f ? sweep_lex_f(s, omega) : sweep_lex_d(s, omega);
    case NLSE_LP_MULTIGRID:
        lp_mg_cycle(s, 2, 2);
        return f ? residual_all_f(s) : residual_all_d(s);
    default: return f ? sweep_rb_f(s, omega) : sweep_rb_d(s, omega);
    }
}

int nlse_lp_solve(nlse_lp *s, int method, double omega, double tol, long max_iter,
                  double *history, long *iterations, double *rel_residual, int *converged)
{
    if (!s || !iterations || !rel_residual || !converged)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_lp_solve: NULL argument");
    *iterations = 0;
    *rel_residual = NAN;
    *converged = 0;
    if (method < NLSE_LP_JACOBI || method > NLSE_LP_MGCG)
        return nlse_fail(NLSE_ERR_VALUE,
                         "method must be 0-5 (jacobi, gauss-seidel, sor, rbsor, multigrid, mg-cg), "
                         "got %d", method);
    if ((method == NLSE_LP_SOR || method == NLSE_LP_RBSOR) && !(omega > 0 && omega < 2))
        return nlse_fail(NLSE_ERR_VALUE, "omega must be in (0, 2), got %g", omega);
    if (!(tol > 0) || !isfinite(tol))
        return nlse_fail(NLSE_ERR_VALUE, "tol must be finite and > 0, got %g", tol);
    if (max_iter < 1)
        return nlse_fail(NLSE_ERR_VALUE, "max_iter must be >= 1, got %ld", max_iter);
    if (method == NLSE_LP_JACOBI && !s->Q[0]) {
        const size_t n = (s->g.nr + 2) * s->hw;
        for (int c = 0; c < 2; ++c)
            if (!(s->Q[c] = calloc(n, rsize(s))))
                return nlse_fail(NLSE_ERR_NOMEM, "out of memory for Jacobi's second copy");
    }
    if (method == NLSE_LP_JACOBI) /* Q must hold the same fixed values as P */
        for (int c = 0; c < 2; ++c)
            memcpy(s->Q[c], s->P[c], (s->g.nr + 2) * s->hw * rsize(s));
    if (method == NLSE_LP_MULTIGRID || method == NLSE_LP_MGCG) {
        int st = lp_mg_build(s);
        if (st)
            return st;
    }
    const double fn = denom(s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (method == NLSE_LP_MGCG) {
        int st = lp_mgcg_solve(s, tol, max_iter, fn, history, iterations, rel_residual, converged);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        s->last_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        return st;
    }
    for (long it = 1; it <= max_iter; ++it) {
        const double rel = sqrt(sweep(s, method, omega)) / fn;
        if (history)
            history[it - 1] = rel;
        *iterations = it;
        *rel_residual = rel;
        if (!isfinite(rel))
            return nlse_fail(NLSE_ERR_BLOWUP, "the iteration diverged at iteration %ld", it);
        if (rel < tol) {
            *converged = 1;
            break;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->last_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return NLSE_OK;
}

double nlse_lp_last_solve_seconds(const nlse_lp *s)
{
    return s->last_seconds;
}
