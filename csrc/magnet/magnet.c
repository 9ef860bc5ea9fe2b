/*
 * magnet.c -- the CPU magnet-design Laplace solver (Madhubhashini, thesis,
 * chapter 2): the handle, Phi on colour-reordered storage, and the solve
 * loop with the stopping rule of eq. 2.50.  The top file of the model: it
 * calls the multigrid (magnet_mg.c) and the fine-grid sweeps
 * (magnet_sweeps.c); neither calls back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "magnet_cpu.h"

static size_t rsize(const nlse_magnet *s)
{
    return s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double);
}

void nlse_magnet_destroy(nlse_magnet *s)
{
    if (!s)
        return;
    for (int c = 0; c < 2; ++c) {
        free(s->P[c]);
        free(s->Q[c]);
    }
    magnet_mg_free(s);
    free(s->rows);
    free(s->part);
    free(s);
}

int nlse_magnet_create(const nlse_magnet_params *p, nlse_magnet **out)
{
    int st = magnet_check_create(p, out);
    if (st)
        return st;
    nlse_magnet *s = (nlse_magnet *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->p = *p;
    magnet_make_geom(p, &s->g);
    s->hw = s->g.nz / 2 + 2;
    const size_t n = (s->g.nr + 2) * s->hw;
    s->rows = (magnet_row *)malloc(s->g.nr * sizeof(magnet_row));
    s->part = (double *)malloc(s->g.nr * sizeof(double));
    for (int c = 0; c < 2; ++c)
        s->P[c] = calloc(n, rsize(s));
    if (!s->rows || !s->part || !s->P[0] || !s->P[1]) {
        nlse_magnet_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a %zu-node grid", n);
    }
    magnet_make_rows(&s->g, s->rows);
    s->fnorm = s->g.fnorm;
    *out = s;
    return NLSE_OK;
}

void nlse_magnet_shape(const nlse_magnet *s, size_t *nr, size_t *nz)
{
    *nr = s->g.nr;
    *nz = s->g.nz;
}

int nlse_magnet_get_phi(const nlse_magnet *s, double *phi)
{
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_get_phi: NULL argument");
    magnet_phi_out(s, phi);
    return NLSE_OK;
}

int nlse_magnet_set_phi(nlse_magnet *s, const double *phi)
{
    if (!s || !phi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_set_phi: NULL argument");
    for (int i = 0; i < (int)s->g.nr; ++i)
        for (int j = s->rows[i].js; j <= s->rows[i].je; ++j)
            if (!isfinite(phi[(size_t)i * s->g.nz + (size_t)j]))
                return nlse_fail(NLSE_ERR_VALUE,
                                 "phi must be finite at the unknowns, got %g at node (%d, %d)",
                                 phi[(size_t)i * s->g.nz + (size_t)j], i, j);
    magnet_mgcg_close(s);
    magnet_phi_in(s, phi);
    return NLSE_OK;
}

int nlse_magnet_restart(nlse_magnet *s)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_restart: NULL solver");
    magnet_mgcg_close(s);
    return NLSE_OK;
}

static double denom(const nlse_magnet *s)
{
    return s->fnorm > 0 ? s->fnorm : 1.0; /* f = 0 (B = 0): absolute residual */
}

int nlse_magnet_set_dirichlet(nlse_magnet *s, const double *values)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_set_dirichlet: NULL solver");
    magnet_mgcg_close(s);
    const size_t nn = s->g.nr * s->g.nz;
    if (!values) {
        magnet_make_rows(&s->g, s->rows);
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
    magnet_make_rows_dirichlet(&s->g, s->rows);
    magnet_boundary_in(s, values);
    /* f of the unknowns' equations: the fixed neighbours moved to the right */
    s->fnorm = sqrt(magnet_residual_sq(s));
    s->dirichlet = 1;
    return NLSE_OK;
}

double nlse_magnet_rel_residual(const nlse_magnet *s)
{
    return sqrt(magnet_residual_sq(s)) / denom(s);
}

static double sweep(nlse_magnet *s, int method, double omega)
{
    if (method != NLSE_MAGNET_MULTIGRID)
        return magnet_sweep(s, method, omega);
    magnet_mg_cycle(s, 2, 2);
    return magnet_residual_sq(s);
}

int nlse_magnet_solve(nlse_magnet *s, int method, double omega, double tol, long max_iter,
                  double *history, long *iterations, double *rel_residual, int *converged)
{
    if (!s || !iterations || !rel_residual || !converged)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_magnet_solve: NULL argument");
    *iterations = 0;
    *rel_residual = NAN;
    *converged = 0;
    if (method < NLSE_MAGNET_JACOBI || method > NLSE_MAGNET_MGCG)
        return nlse_fail(NLSE_ERR_VALUE,
                         "method must be 0-5 (jacobi, gauss-seidel, sor, rbsor, multigrid, mg-cg), "
                         "got %d", method);
    if ((method == NLSE_MAGNET_SOR || method == NLSE_MAGNET_RBSOR) && !(omega > 0 && omega < 2))
        return nlse_fail(NLSE_ERR_VALUE, "omega must be in (0, 2), got %g", omega);
    if (!(tol > 0) || !isfinite(tol))
        return nlse_fail(NLSE_ERR_VALUE, "tol must be finite and > 0, got %g", tol);
    if (max_iter < 1)
        return nlse_fail(NLSE_ERR_VALUE, "max_iter must be >= 1, got %ld", max_iter);
    if (method != NLSE_MAGNET_MGCG)
        magnet_mgcg_close(s); /* Phi moves on: the Krylov iteration no longer applies */
    if (method == NLSE_MAGNET_JACOBI && !s->Q[0]) {
        const size_t n = (s->g.nr + 2) * s->hw;
        for (int c = 0; c < 2; ++c)
            if (!(s->Q[c] = calloc(n, rsize(s))))
                return nlse_fail(NLSE_ERR_NOMEM, "out of memory for Jacobi's second copy");
    }
    if (method == NLSE_MAGNET_JACOBI) /* Q must hold the same fixed values as P */
        for (int c = 0; c < 2; ++c)
            memcpy(s->Q[c], s->P[c], (s->g.nr + 2) * s->hw * rsize(s));
    if (method == NLSE_MAGNET_MULTIGRID || method == NLSE_MAGNET_MGCG) {
        int st = magnet_mg_build(s);
        if (st)
            return st;
    }
    const double fn = denom(s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (method == NLSE_MAGNET_MGCG) {
        int st = magnet_mgcg_solve(s, tol, max_iter, fn, history, iterations, rel_residual, converged);
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

double nlse_magnet_last_solve_seconds(const nlse_magnet *s)
{
    return s->last_seconds;
}
