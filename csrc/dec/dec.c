/*
 * dec.c -- the CPU DEC GPE solver (Kivioja, Mönkölä, Rossi, "GPU-accelerated
 * time integration of Gross-Pitaevskii equation with discrete exterior
 * calculus", source 001): the operator of eq. 8 on a tiled crystal block,
 * the leapfrog of eq. 12 (started by one RK4 step unless psi(-dt) is
 * given), and the normalised imaginary-time Euler step of nlsepy/dec.h.
 *
 * Two state buffers: after t steps the current state is buf[par] and
 * psi(n-1) is buf[par ^ 1]; a leapfrog step overwrites psi(n-1) with
 * psi(n+1) in place (the seed's double buffer, section 4.1) and flips par.
 * The kernels (dec_kernels.inc) are compiled for float and double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "dec_internal.h"

/* What the kernels need besides the table: the grid and the trap. */
typedef struct {
    long n[3];
    int cells, periodic;
    double origin[3], edge[3], half_w2[3];
    const double *centre, *vol;
} dec_geom;

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define FN(name) CAT(name, _f)
#include "dec_kernels.inc"
#undef FN
#undef REAL

#define REAL double
#define FN(name) CAT(name, _d)
#include "dec_kernels.inc"
#undef FN
#undef REAL

struct nlse_dec {
    nlse_dec_params p;
    size_t n;
    dec_rows r;
    dec_geom G;
    void *w, *diag;      /* weights and diagonal in the working precision */
    void *buf[2];        /* current state buf[par], psi(n-1) buf[par ^ 1]  */
    void *V;             /* per-cell potential or NULL                     */
    int par, have_prev;
    double last_seconds;
};

static size_t real_size(const nlse_dec *s) { return s->p.dtype == NLSE_COMPLEX64 ? 4 : 8; }

static void *copy_real(const double *x, size_t n, int dtype)
{
    void *out = malloc(n * (dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double)));
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; ++i) {
        if (dtype == NLSE_COMPLEX64)
            ((float *)out)[i] = (float)x[i];
        else
            ((double *)out)[i] = x[i];
    }
    return out;
}

void nlse_dec_destroy(nlse_dec *s)
{
    if (!s)
        return;
    dec_rows_free(&s->r);
    free(s->w);
    free(s->diag);
    free(s->buf[0]);
    free(s->buf[1]);
    free(s->V);
    free(s);
}

int nlse_dec_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_create: NULL output");
    *out = NULL;
    int st = nlse_dec_check(p, t);
    if (st)
        return st;
    nlse_dec *s = calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_create: out of memory");
    s->p = *p;
    s->n = nlse_dec_size(p);
    if ((st = dec_rows_build(p, t, &s->r))) {
        free(s);
        return st;
    }
    dec_geom *G = &s->G;
    for (int q = 0; q < 3; ++q) {
        G->n[q] = p->blocks[q];
        G->origin[q] = p->origin[q];
        G->edge[q] = p->edge[q];
        G->half_w2[q] = 0.5 * p->trap[q] * p->trap[q];
    }
    G->cells = p->cells;
    G->periodic = p->periodic;
    G->centre = s->r.centre;
    G->vol = s->r.vol;
    s->w = copy_real(s->r.w, (size_t)p->rows, p->dtype);
    s->diag = copy_real(s->r.diag, (size_t)p->cells, p->dtype);
    const size_t bytes = 2 * s->n * real_size(s);
    s->buf[0] = calloc(1, bytes);
    s->buf[1] = calloc(1, bytes);
    if (!s->w || !s->diag || !s->buf[0] || !s->buf[1]) {
        nlse_dec_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_create: out of memory for %zu unknowns "
                                         "(%.3g GB)", s->n, 2.0 * bytes / 1e9);
    }
    *out = s;
    return NLSE_OK;
}

int nlse_dec_set_state(nlse_dec *s, const void *psi, const void *psi_prev)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    int st = dec_check_complex(psi, s->n, s->p.dtype, "psi");
    if (!st && psi_prev)
        st = dec_check_complex(psi_prev, s->n, s->p.dtype, "psi_prev");
    if (st)
        return st;
    const size_t bytes = 2 * s->n * real_size(s);
    nlse_parallel_memcpy(s->buf[s->par], psi, bytes);
    if (psi_prev)
        nlse_parallel_memcpy(s->buf[s->par ^ 1], psi_prev, bytes);
    s->have_prev = psi_prev != NULL;
    return NLSE_OK;
}

int nlse_dec_get_state(const nlse_dec *s, void *psi)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_state: NULL argument");
    nlse_parallel_memcpy(psi, s->buf[s->par], 2 * s->n * real_size(s));
    return NLSE_OK;
}

int nlse_dec_set_potential(nlse_dec *s, const void *V)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    if (!V) {
        free(s->V);
        s->V = NULL;
        return NLSE_OK;
    }
    int st = dec_check_real(V, s->n, s->p.dtype, "V");
    if (st)
        return st;
    if (!s->V && !(s->V = malloc(s->n * real_size(s))))
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_set_potential: out of memory");
    nlse_parallel_memcpy(s->V, V, s->n * real_size(s));
    return NLSE_OK;
}

int nlse_dec_set_dt(nlse_dec *s, double dt)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    if (!(isfinite(dt) && dt > 0))
        return nlse_fail(NLSE_ERR_VALUE, "dt must be finite and > 0, got %g", dt);
    if (dt != s->p.dt)
        s->have_prev = 0;
    s->p.dt = dt;
    return NLSE_OK;
}

/* out = x0 + (cre + i cim) H(x1) x1 in the working precision; 1 when a
 * value came out non-finite. */
static int apply(nlse_dec *s, void *out, const void *x0, const void *x1, double cre, double cim,
                 double *norm)
{
    if (s->p.dtype == NLSE_COMPLEX64) {
        const tab_f T = {s->r.start, s->r.cell, s->r.off, s->r.delta, s->w, s->diag};
        return apply_f(&s->G, &T, s->V, (float)s->p.g, out, x0, x1, (float)cre, (float)cim, norm);
    }
    const tab_d T = {s->r.start, s->r.cell, s->r.off, s->r.delta, s->w, s->diag};
    return apply_d(&s->G, &T, s->V, s->p.g, out, x0, x1, cre, cim, norm);
}

/* One classic RK4 step from the current state into buf[par ^ 1] (which
 * then becomes current, with psi(n-1) the old state): low-storage form
 * with two scratch states.  1 when it blew up (state untouched). */
static int rk4_start(nlse_dec *s, int *bad)
{
    const double dt = s->p.dt;
    void *psi = s->buf[s->par], *acc = s->buf[s->par ^ 1];
    void *ya = malloc(2 * s->n * real_size(s)), *yb = malloc(2 * s->n * real_size(s));
    if (!ya || !yb) {
        free(ya);
        free(yb);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_step: out of memory for the RK4 start");
    }
    int b = 0;
    b |= apply(s, acc, psi, psi, 0, -dt / 6, NULL);
    b |= apply(s, ya, psi, psi, 0, -dt / 2, NULL);
    b |= apply(s, acc, acc, ya, 0, -dt / 3, NULL);
    b |= apply(s, yb, psi, ya, 0, -dt / 2, NULL);
    b |= apply(s, acc, acc, yb, 0, -dt / 3, NULL);
    b |= apply(s, ya, psi, yb, 0, -dt, NULL);
    b |= apply(s, acc, acc, ya, 0, -dt / 6, NULL);
    free(ya);
    free(yb);
    *bad = b;
    if (!b) {
        s->par ^= 1;
        s->have_prev = 1;
    }
    return NLSE_OK;
}

int nlse_dec_step(nlse_dec *s, long n, long *done)
{
    int st = dec_check_steps(s, n, done);
    if (st)
        return st;
    const double t0 = dec_now();
    long k = 0;
    int bad = 0;
    if (n > 0 && !s->have_prev) {
        if ((st = rk4_start(s, &bad)))
            return st;
        k = bad ? 0 : 1;
    }
    for (; k < n && !bad; ++k) {
        void *prev = s->buf[s->par ^ 1];
        bad = apply(s, prev, prev, s->buf[s->par], 0, -2 * s->p.dt, NULL);
        if (bad) {
            s->have_prev = 0;  /* psi(n-1) is overwritten; the current state is good */
            break;
        }
        s->par ^= 1;
    }
    if (done)
        *done = k;
    s->last_seconds = dec_now() - t0;
    if (bad)
        return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld", k + 1, n);
    return NLSE_OK;
}

int nlse_dec_imaginary(nlse_dec *s, long n, double norm, long *done)
{
    int st = dec_check_steps(s, n, done);
    if (st)
        return st;
    if (!(isfinite(norm) && norm > 0))
        return nlse_fail(NLSE_ERR_VALUE, "norm must be finite and > 0, got %g", norm);
    const double t0 = dec_now();
    long k = 0;
    int bad = 0;
    for (; k < n; ++k) {
        void *next = s->buf[s->par ^ 1];
        double nn = 0;
        bad = apply(s, next, s->buf[s->par], s->buf[s->par], -s->p.dt, 0, &nn);
        if (bad || !(nn > 0 && isfinite(nn))) {
            bad = 1;
            break;
        }
        const double f = sqrt(norm / nn);
        if (s->p.dtype == NLSE_COMPLEX64)
            scale_f(s->n, next, (float)f);
        else
            scale_d(s->n, next, f);
        s->par ^= 1;
    }
    if (n > 0)
        s->have_prev = 0;
    if (done)
        *done = k;
    s->last_seconds = dec_now() - t0;
    if (bad)
        return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite or zero at imaginary-time "
                                          "step %ld of %ld", k + 1, n);
    return NLSE_OK;
}

int nlse_dec_observe(nlse_dec *s, double *norm, double *energy)
{
    if (!s || !norm || !energy)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_observe: NULL argument");
    if (s->p.dtype == NLSE_COMPLEX64) {
        const tab_f T = {s->r.start, s->r.cell, s->r.off, s->r.delta, s->w, s->diag};
        observe_f(&s->G, &T, s->V, (float)s->p.g, s->buf[s->par], norm, energy);
    } else {
        const tab_d T = {s->r.start, s->r.cell, s->r.off, s->r.delta, s->w, s->diag};
        observe_d(&s->G, &T, s->V, s->p.g, s->buf[s->par], norm, energy);
    }
    return NLSE_OK;
}

int nlse_dec_apply(nlse_dec *s, const void *psi, void *out)
{
    if (!s || !psi || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_apply: NULL argument");
    apply(s, out, NULL, psi, 1, 0, NULL);
    return NLSE_OK;
}

double nlse_dec_bytes_per_cell_step(const nlse_dec *s)
{
    /* read psi(n) once (neighbours from cache), read and write psi(n-1),
     * plus the potential array when set */
    const double r = s ? (double)real_size(s) : 8;
    return 6 * r + (s && s->V ? r : 0);
}

double nlse_dec_last_seconds(const nlse_dec *s) { return s ? s->last_seconds : 0; }
