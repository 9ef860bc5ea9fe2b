/*
 * fd_params.c -- what every backend of the nlse_fd solver shares: parameter
 * checks with named errors, the grid geometry the kernels use, the smallest
 * grid per stencil and the linear stability bound (NLSEmagic eqs. 18-19).
 */
#include <math.h>
#include <string.h>
#include "fd_internal.h"

static const char *scheme_name(int scheme)
{
    return scheme == NLSE_FD_CD ? "cd" : scheme == NLSE_FD_2SHOC ? "2shoc" : "?";
}

static const char *bc_name(int bc)
{
    switch (bc) {
    case NLSE_BC_DIRICHLET: return "dirichlet";
    case NLSE_BC_MSD: return "msd";
    case NLSE_BC_L0: return "l0";
    case NLSE_BC_PERIODIC: return "periodic";
    case NLSE_BC_ONE_SIDED: return "one-sided";
    default: return "?";
    }
}

size_t nlse_fd_min_points(int scheme, int bc)
{
    (void)scheme;
    return bc == NLSE_BC_ONE_SIDED ? 4 : 3;
}

int nlse_fd_reach(int scheme, int bc)
{
    /* interior: CD reads +-1, 2SHOC +-2 along an axis (D, then D's
     * neighbours); MSD: F_b needs F at the inward neighbour (one more);
     * one-sided ends read 3 points inwards. */
    int r = scheme == NLSE_FD_2SHOC ? 2 : 1;
    if (bc == NLSE_BC_MSD)
        r += 1;
    if (bc == NLSE_BC_ONE_SIDED)
        r = 3;
    return r;
}

int nlse_fd_use_fused(const nlse_fd_params *p, int kernel, int can)
{
    (void)p;
    return can && kernel != NLSE_FD_STAGED;
}

double nlse_fd_max_dt(const nlse_fd_params *p)
{
    double h = p->spacing[0];
    for (int q = 1; q < p->ndim; ++q)
        h = p->spacing[q] < h ? p->spacing[q] : h;
    double k = h * h / (p->ndim * sqrt(2.0) * p->a);
    return p->scheme == NLSE_FD_2SHOC ? 0.75 * k : k;
}

int nlse_fd_check_dt(double dt)
{
    if (!(isfinite(dt) && dt > 0))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", dt);
    return NLSE_OK;
}

int nlse_fd_check_step(const void *s, long nsteps, long **done, long *spare)
{
    if (!*done)
        *done = spare;
    return nlse_check_steps(s, nsteps, *done, "nlse_fd_step", "nsteps");
}

int nlse_fd_check_params(const nlse_fd_params *p)
{
    int st;
    if (p->ndim < 1 || p->ndim > 3)
        return nlse_fail(NLSE_ERR_VALUE, "ndim must be 1, 2 or 3, got %d", p->ndim);
    if (p->scheme != NLSE_FD_CD && p->scheme != NLSE_FD_2SHOC)
        return nlse_fail(NLSE_ERR_VALUE, "scheme: unknown code %d", p->scheme);
    if (p->bc < NLSE_BC_DIRICHLET || p->bc > NLSE_BC_ONE_SIDED)
        return nlse_fail(NLSE_ERR_VALUE, "bc: unknown code %d", p->bc);
    if (p->bc == NLSE_BC_ONE_SIDED && p->ndim != 1)
        return nlse_fail(NLSE_ERR_VALUE, "bc='one-sided' is only available in 1D, got ndim=%d",
                         p->ndim);
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype: unknown code %d", p->dtype);
    if (!(isfinite(p->a) && p->a > 0))
        return nlse_fail(NLSE_ERR_VALUE, "a must be finite and > 0, got %g", p->a);
    if (!isfinite(p->s))
        return nlse_fail(NLSE_ERR_VALUE, "s must be finite, got %g", p->s);
    if ((st = nlse_fd_check_dt(p->dt)) != NLSE_OK)
        return st;
    size_t nmin = nlse_fd_min_points(p->scheme, p->bc);
    for (int q = 0; q < p->ndim; ++q) {
        if (!(isfinite(p->spacing[q]) && p->spacing[q] > 0))
            return nlse_fail(NLSE_ERR_VALUE, "spacing[%d] must be finite and > 0, got %g", q,
                             p->spacing[q]);
        if (p->shape[q] < nmin)
            return nlse_fail(NLSE_ERR_VALUE,
                             "grid too small for the stencil: axis %d has %zu points, "
                             "scheme=%s with bc=%s needs at least %zu",
                             q, p->shape[q], scheme_name(p->scheme), bc_name(p->bc), nmin);
    }
    return NLSE_OK;
}

void nlse_fd_make_geom(const nlse_fd_params *p, fd_geom *g)
{
    memset(g, 0, sizeof *g);
    g->ndim = p->ndim;
    g->m = p->ndim - 1;
    g->npts = 1;
    g->nlines = 1;
    g->dv = 1;
    for (int q = 0; q < p->ndim; ++q) {
        g->n[q] = (ptrdiff_t)p->shape[q];
        g->npts *= g->n[q];
        g->ih2[q] = 1.0 / (p->spacing[q] * p->spacing[q]);
        g->dv *= p->spacing[q];
        if (q < g->m)
            g->nlines *= g->n[q];
    }
    g->len = g->n[g->m];
    g->periodic = (p->bc == NLSE_BC_PERIODIC);
    g->scheme = p->scheme;
    g->bc = p->bc;
    g->a = p->a;
    g->s = p->s;
    g->dt = p->dt;
    /* 2SHOC cross weights (h_i^2 + h_j^2) / (12 h_i^2 h_j^2), see fd_kernels.inc */
    if (g->m == 1) {
        g->cpair[0] = (g->ih2[0] + g->ih2[1]) / 12;
    } else if (g->m == 2) {
        g->cpair[0] = (g->ih2[0] + g->ih2[1]) / 12;
        g->cpair[1] = (g->ih2[0] + g->ih2[2]) / 12;
        g->cpair[2] = (g->ih2[1] + g->ih2[2]) / 12;
    }
}


int nlse_fd_check_rows(const nlse_fd_params *p, size_t first, size_t count)
{
    if (first > p->shape[0] || count > p->shape[0] - first)
        return nlse_fail(NLSE_ERR_VALUE, "rows %zu .. %zu are outside axis 0 of %zu points",
                         first, first + count, p->shape[0]);
    return NLSE_OK;
}
