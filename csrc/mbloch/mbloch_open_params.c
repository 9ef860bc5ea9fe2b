/*
 * mbloch_open_params.c -- the checks and tables of an open Maxwell-Bloch
 * solver (nlsepy/mbloch.h, nlse_mbloch_set_open): the Lindblad master
 * equation's decay channels and dephasing turned into one damping rate per
 * density-matrix element and the population feeds of each level
 * (docs/models/mbloch.md, "Open systems"), shared by every backend.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mbloch_internal.h"

void mbloch_open_free(mbloch_open_tab *t)
{
    if (!t)
        return;
    free(t->damp);
    free(t->feed_off);
    free(t->feed_from);
    free(t->feed_rate);
    memset(t, 0, sizeof *t);
}

static int open_finite(const double *x, size_t n, const char *name)
{
    for (size_t q = 0; q < n; ++q)
        if (!isfinite(x[q]))
            return nlse_fail(NLSE_ERR_VALUE, "%s must be finite: element %zu is %g", name, q, x[q]);
    return NLSE_OK;
}

static int open_check(const nlse_mbloch_params *p, const nlse_mbloch_open *o)
{
    const int n = p->n_g + p->n_e;
    if (!o || !o->rho0 || o->n_decay < 0 || (o->n_decay && (!o->decay_from || !o->decay_to ||
                                                             !o->decay_rate)))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_open: NULL or inconsistent arguments");
    for (int c = 0; c < o->n_decay; ++c) {
        const int f = o->decay_from[c], t = o->decay_to[c];
        const double g = o->decay_rate[c];
        if (!(isfinite(g) && g >= 0))
            return nlse_fail(NLSE_ERR_VALUE, "decay[%d]: the rate must be finite and >= 0, got %g", c, g);
        if (f < 0 || f >= n)
            return nlse_fail(NLSE_ERR_VALUE, "decay[%d]: from level %d does not exist (levels 0..%d)", c,
                             f, n - 1);
        if (t < 0 || t >= n)
            return nlse_fail(NLSE_ERR_VALUE, "decay[%d]: to level %d does not exist (levels 0..%d)", c, t,
                             n - 1);
        if (f == t)
            return nlse_fail(NLSE_ERR_VALUE, "decay[%d]: from and to are the same level %d", c, f);
    }
    for (size_t q = 0; o->gam && q < (size_t)n * n; ++q)
        if (!(isfinite(o->gam[q]) && o->gam[q] >= 0))
            return nlse_fail(NLSE_ERR_VALUE, "dephasing[%zu][%zu] must be finite and >= 0, got %g",
                             q / n, q % n, o->gam[q]);
    for (int i = 0; o->gam && i < n; ++i)
        for (int j = 0; j < i; ++j)
            if (o->gam[(size_t)i * n + j] != o->gam[(size_t)j * n + i])
                return nlse_fail(NLSE_ERR_VALUE, "dephasing must be symmetric: [%d][%d] = %g, [%d][%d] = %g",
                                 i, j, o->gam[(size_t)i * n + j], j, i, o->gam[(size_t)j * n + i]);
    int st = open_finite(o->rho0, 2 * (size_t)p->n_atoms * n * n, "the initial density matrices");
    if (!st && o->shift)
        st = open_finite(o->shift, (size_t)p->n_atoms * n, "the level shifts");
    return st;
}

int mbloch_open_build(const nlse_mbloch_params *p, const nlse_mbloch_open *o, mbloch_open_tab *t)
{
    memset(t, 0, sizeof *t);
    int st = open_check(p, o);
    if (st)
        return st;
    const int n = p->n_g + p->n_e, nd = o->n_decay;
    t->nlev = n;
    t->n_decay = nd;
    t->damp = (double *)calloc((size_t)n * n, sizeof(double));
    t->feed_off = (int *)calloc((size_t)n + 1, sizeof(int));
    t->feed_from = (int *)calloc((size_t)nd + 1, sizeof(int));
    t->feed_rate = (double *)calloc((size_t)nd + 1, sizeof(double));
    double *out = (double *)calloc((size_t)n, sizeof(double));
    if (!t->damp || !t->feed_off || !t->feed_from || !t->feed_rate || !out) {
        free(out);
        mbloch_open_free(t);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_open: out of memory");
    }
    for (int c = 0; c < nd; ++c)
        out[o->decay_from[c]] += o->decay_rate[c];
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            t->damp[(size_t)i * n + j] = i == j ? out[i] : 0.5 * (out[i] + out[j]) +
                                                  (o->gam ? o->gam[(size_t)i * n + j] : 0.0);
    int q = 0;
    for (int i = 0; i < n; ++i) {
        t->feed_off[i] = q;
        for (int c = 0; c < nd; ++c)
            if (o->decay_to[c] == i) {
                t->feed_from[q] = o->decay_from[c];
                t->feed_rate[q++] = o->decay_rate[c];
            }
    }
    t->feed_off[n] = q;
    free(out);
    return NLSE_OK;
}
