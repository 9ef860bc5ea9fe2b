/*
 * mbloch_params.c -- parameter checks of the Maxwell-Bloch solver (source
 * 004, section 3: the grids z_j = j h_z, t_k = k h_t, the mode set
 * l_min .. l_max, the ensemble of N_Delta atoms), shared by every backend.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stddef.h>
#include <time.h>

#include "mbloch_internal.h"

double mbloch_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int finite_pos(double x, const char *name)
{
    if (!(isfinite(x) && x > 0))
        return nlse_fail(NLSE_ERR_VALUE, "%s must be finite and > 0, got %g", name, x);
    return NLSE_OK;
}

int nlse_mbloch_check_params(const nlse_mbloch_params *p)
{
    if (!p)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch: NULL parameters");
    if (p->n_g < 1)
        return nlse_fail(NLSE_ERR_VALUE, "n_g must be >= 1, got %d", p->n_g);
    if (p->n_e < 1)
        return nlse_fail(NLSE_ERR_VALUE, "n_e must be >= 1, got %d", p->n_e);
    if (p->l_max < p->l_min)
        return nlse_fail(NLSE_ERR_VALUE, "the mode set is empty: l_max = %d < l_min = %d", p->l_max,
                         p->l_min);
    if (p->n_atoms < 1)
        return nlse_fail(NLSE_ERR_VALUE, "n_atoms must be >= 1, got %d", p->n_atoms);
    if (p->n_t < 2)
        return nlse_fail(NLSE_ERR_VALUE, "n_t must be >= 2, got %d", p->n_t);
    int st;
    if ((st = finite_pos(p->h_t, "h_t")) || (st = finite_pos(p->h_z, "h_z")))
        return st;
    const double v[4] = {p->beta, p->kappa_g, p->kappa_e, p->delta};
    const char *nm[4] = {"beta", "kappa_g", "kappa_e", "delta"};
    for (int q = 0; q < 4; ++q)
        if (!isfinite(v[q]))
            return nlse_fail(NLSE_ERR_VALUE, "%s must be finite, got %g", nm[q], v[q]);
    if (p->euler_substeps < 1)
        return nlse_fail(NLSE_ERR_VALUE, "euler_substeps must be >= 1, got %d", p->euler_substeps);
    if (p->dtype != NLSE_COMPLEX64 && p->dtype != NLSE_COMPLEX128)
        return nlse_fail(NLSE_ERR_TYPE, "dtype must be NLSE_COMPLEX64 or NLSE_COMPLEX128, got %d",
                         p->dtype);
    if (nlse_mbloch_couplings(p) < 1)
        return nlse_fail(NLSE_ERR_VALUE,
                         "no mode of l_min..l_max = %d..%d couples a ground level (0..%d) to an "
                         "excited level (0..%d)", p->l_min, p->l_max, p->n_g - 1, p->n_e - 1);
    return NLSE_OK;
}

long nlse_mbloch_couplings(const nlse_mbloch_params *p)
{
    long c = 0;
    for (int n = 0; n < p->n_e; ++n) {
        const int lo = mbloch_lo_g(n, p->l_max), hi = mbloch_hi_g(n, p->l_min, p->n_g);
        if (hi >= lo)
            c += hi - lo + 1;
    }
    return c;
}

static int all_finite(const double *x, size_t n, const char *name)
{
    if (!x)
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL array", name);
    for (size_t q = 0; q < n; ++q)
        if (!isfinite(x[q]))
            return nlse_fail(NLSE_ERR_VALUE, "%s must be finite: element %zu is %g", name, q, x[q]);
    return NLSE_OK;
}

int mbloch_check_arrays(const nlse_mbloch_params *p, const double *F, const double *detunings,
                    const double *weights, const double *psi0, const double *fields0)
{
    const size_t nl = (size_t)(p->n_g + p->n_e), nf = (size_t)(p->l_max - p->l_min + 1);
    int st;
    if ((st = all_finite(F, (size_t)p->n_g * p->n_e, "F")) ||
        (st = all_finite(detunings, (size_t)p->n_atoms, "detunings")) ||
        (st = all_finite(weights, (size_t)p->n_atoms, "weights")) ||
        (st = all_finite(psi0, 2 * (size_t)p->n_atoms * nl, "initial_state")) ||
        (st = all_finite(fields0, 2 * (size_t)p->n_t * nf, "fields0")))
        return st;
    for (int d = 0; d < p->n_atoms; ++d)
        if (weights[d] < 0)
            return nlse_fail(NLSE_ERR_VALUE, "weights must be >= 0: weights[%d] = %g", d, weights[d]);
    return NLSE_OK;
}
