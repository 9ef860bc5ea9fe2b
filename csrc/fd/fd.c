/*
 * fd.c -- the CPU nlse_fd solver handle (NLSEmagic section 3): buffers, state
 * and potential, dispatch to the float/double kernels of fd_kernels.inc.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fd_internal.h"

int nlse_fd_create(const nlse_fd_params *p, nlse_fd **out)
{
    int st;
    nlse_fd *s;
    if (!p || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_create: NULL argument");
    *out = NULL;
    if ((st = nlse_fd_check_params(p)) != NLSE_OK)
        return st;
    s = (nlse_fd *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory allocating the solver");
    s->p = *p;
    nlse_fd_make_geom(p, &s->g);
    s->real_size = (p->dtype == NLSE_COMPLEX64) ? sizeof(float) : sizeof(double);
    s->kernel = NLSE_FD_AUTO;
    s->last_kernel = -1;
    size_t bytes = (size_t)s->g.npts * 2 * s->real_size;
    s->psi = calloc(1, bytes);
    s->acc = calloc(1, bytes);
    s->ta = calloc(1, bytes);
    s->tb = calloc(1, bytes);
    /* D: the first step of the two-step 2SHOC (periodic grids compose the
     * two steps and need none, fd_kernels.inc) */
    const int hasD = p->scheme == NLSE_FD_2SHOC && !s->g.periodic;
    if (hasD)
        s->D = calloc(1, bytes);
    if (!s->psi || !s->acc || !s->ta || !s->tb || (hasD && !s->D)) {
        nlse_fd_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory: the solver needs %zu bytes",
                         bytes * (hasD ? 5 : 4));
    }
    *out = s;
    return NLSE_OK;
}

void nlse_fd_destroy(nlse_fd *s)
{
    if (!s)
        return;
    free(s->psi);
    free(s->acc);
    free(s->ta);
    free(s->tb);
    free(s->D);
    free(s->V);
    free(s->snap[0]);
    free(s->snap[1]);
    free(s);
}

static int all_finite(const nlse_fd *s, const void *x, int real_only)
{
    return s->p.dtype == NLSE_COMPLEX64 ? nlse_fd_all_finite_f(s, x, real_only)
                                        : nlse_fd_all_finite_d(s, x, real_only);
}

int nlse_fd_set_state(nlse_fd *s, const void *psi)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_state: NULL argument");
    if (!all_finite(s, psi, 0))
        return nlse_fail(NLSE_ERR_VALUE, "psi contains non-finite values (NaN or Inf)");
    memcpy(s->psi, psi, (size_t)s->g.npts * 2 * s->real_size);
    s->undo_ok = 0;
    return NLSE_OK;
}

int nlse_fd_get_state(const nlse_fd *s, void *psi)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_get_state: NULL argument");
    memcpy(psi, s->psi, (size_t)s->g.npts * 2 * s->real_size);
    return NLSE_OK;
}

int nlse_fd_snapshot(nlse_fd *s, int slot)
{
    if (!s || slot < 0 || slot > 1)
        return nlse_fail(NLSE_ERR_VALUE, "snapshot slot must be 0 or 1, got %d", slot);
    const size_t bytes = (size_t)s->g.npts * 2 * s->real_size;
    if (!s->snap[slot] && !(s->snap[slot] = malloc(bytes)))
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory for a snapshot (%zu bytes)", bytes);
    nlse_parallel_memcpy(s->snap[slot], s->psi, bytes);
    return NLSE_OK;
}

int nlse_fd_fetch(nlse_fd *s, int slot, void *psi)
{
    if (!s || !psi || slot < 0 || slot > 1 || !s->snap[slot])
        return nlse_fail(NLSE_ERR_VALUE, "fetch: slot %d holds no snapshot", slot);
    nlse_parallel_memcpy(psi, s->snap[slot], (size_t)s->g.npts * 2 * s->real_size);
    return NLSE_OK;
}

int nlse_fd_set_potential(nlse_fd *s, const void *V)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_potential: NULL solver");
    if (!V)
        return nlse_drop(&s->V);
    if (!all_finite(s, V, 1))
        return nlse_fail(NLSE_ERR_VALUE, "V contains non-finite values (NaN or Inf)");
    size_t bytes = (size_t)s->g.npts * s->real_size;
    if (!s->V && !(s->V = malloc(bytes)))
        return nlse_fail(NLSE_ERR_NOMEM, "out of host memory for V (%zu bytes)", bytes);
    memcpy(s->V, V, bytes);
    return NLSE_OK;
}

int nlse_fd_set_dt(nlse_fd *s, double dt)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_dt: NULL solver");
    int st = nlse_fd_check_dt(dt);
    if (st)
        return st;
    s->p.dt = dt;
    s->g.dt = dt;
    return NLSE_OK;
}

/* tiles of T points per axis over the grid */
static ptrdiff_t fused_ntiles(const fd_geom *g, const ptrdiff_t *T)
{
    ptrdiff_t n = 1;
    for (int a = 0; a < g->ndim; ++a)
        n *= (g->n[a] + T[a] - 1) / T[a];
    return n;
}

/* Tile of the fused step, points per axis (chosen with bench/fd.py --forms
 * at 256^3; the measurements in docs/models/fd.md).  Periodic 2D/3D (the
 * box streamed along axis 0): 64 x 256 points across, chunks of up to 256
 * planes along axis 0 in 3D (128 in 2D).  Where that
 * leaves fewer tiles than the threads want, 3D tiles narrow along axis 1
 * (to 32), then along the contiguous axis (to 128), then along axis 0 (to
 * 32), until there are two tiles a thread (narrow tiles keep the long
 * chunks, whose planes along axis 0 recompute less); 2D chunks shorten (to
 * 32) until there are four.  Otherwise (whole boxes): 3D CD 16 x 16 x 256,
 * 3D 2SHOC 32 x 32 x 64, 2D 64 x 512, 1D 4096. */
static void fused_tile(const nlse_fd *s, ptrdiff_t *T)
{
    const fd_geom *g = &s->g;
    static const ptrdiff_t t1[1] = {4096}, t2[2] = {64, 512}, t3[3] = {32, 32, 64},
                           t3cd[3] = {16, 16, 256}, r2[2] = {128, 2048}, r3[3] = {256, 64, 256};
    const ptrdiff_t *t = g->ndim == 1 ? t1 : g->periodic ? (g->ndim == 2 ? r2 : r3)
                         : g->ndim == 2 ? t2 : g->scheme == NLSE_FD_CD ? t3cd : t3;
    for (int a = 0; a < g->ndim; ++a)
        T[a] = g->n[a] < t[a] ? g->n[a] : t[a];
    if (g->periodic && g->ndim == 3) {
        static const ptrdiff_t least[3] = {32, 32, 128};
        static const int order[3] = {1, 2, 0};
        const ptrdiff_t want = 2 * (ptrdiff_t)nlse_get_num_threads();
        for (int q = 0; q < 3; ++q) {
            const int a = order[q];
            while (T[a] / 2 >= least[a] && fused_ntiles(g, T) < want)
                T[a] /= 2;
        }
    } else if (g->periodic && g->ndim == 2) {
        const ptrdiff_t want = 4 * (ptrdiff_t)nlse_get_num_threads();
        while (T[0] > 32 && fused_ntiles(g, T) < want)
            T[0] /= 2;
    }
}

int nlse_fd_step(nlse_fd *s, long nsteps, long *done)
{
    long spare;
    int st = nlse_fd_check_step(s, nsteps, &done, &spare);
    if (st)
        return st;
    if (nlse_fd_use_fused(&s->p, s->kernel, 1)) {
        ptrdiff_t T[3];
        fused_tile(s, T);
        st = s->p.dtype == NLSE_COMPLEX64 ? nlse_fd_advance_fused_f(s, nsteps, done, T)
                                          : nlse_fd_advance_fused_d(s, nsteps, done, T);
        s->last_kernel = NLSE_FD_FUSED;
    } else {
        st = s->p.dtype == NLSE_COMPLEX64 ? nlse_fd_advance_f(s, nsteps, done)
                                          : nlse_fd_advance_d(s, nsteps, done);
        s->last_kernel = NLSE_FD_STAGED;
    }
    s->undo_ok = *done > 0;
    return st;
}

int nlse_fd_fused_tile(const nlse_fd *s, size_t tile[3])
{
    ptrdiff_t T[3];
    if (!s)
        return 0;
    fused_tile(s, T);
    for (int a = 0; a < s->g.ndim; ++a)
        tile[a] = (size_t)T[a];
    return 1;
}

int nlse_fd_set_kernel(nlse_fd *s, int kernel)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_set_kernel: NULL solver");
    if (kernel < NLSE_FD_STAGED || kernel > NLSE_FD_AUTO)
        return nlse_fail(NLSE_ERR_VALUE, "kernel must be 0 (staged), 1 (fused) or 2 (auto), "
                         "got %d", kernel);
    s->kernel = kernel;
    return NLSE_OK;
}

int nlse_fd_last_kernel(const nlse_fd *s)
{
    return s ? s->last_kernel : -1;
}

double nlse_fd_fused_bytes_per_point_step(const nlse_fd *s)
{
    ptrdiff_t T[3];
    double tile = 1, box = 1;
    const double H = 4.0 * nlse_fd_reach(s->p.scheme, s->p.bc);
    fused_tile(s, T);
    for (int a = 0; a < s->g.ndim; ++a) {
        double n = (double)s->g.n[a], b = (double)T[a] + 2 * H;
        tile *= (double)T[a];
        box *= s->g.periodic || b < n ? b : n; /* a box is cut back to a closed grid */
    }
    /* read Psi^n (and V) over the box, write Psi^{n+1} over the tile */
    double c = 2.0 * (double)s->real_size;
    return c * (box / tile + 1) + (s->V ? (double)s->real_size * box / tile : 0);
}

int nlse_fd_rows_to(const nlse_fd *s, size_t first, size_t count, void *dst)
{
    return nlse_fd_get_rows(s, first, count, dst);
}

int nlse_fd_rows_from(nlse_fd *s, size_t first, size_t count, const void *src)
{
    return nlse_fd_set_rows(s, first, count, src);
}

int nlse_fd_undo_step(nlse_fd *s)
{
    if (!s || !s->undo_ok)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_undo_step: no step to undo");
    void *t = s->psi;
    s->psi = s->acc;
    s->acc = t;
    s->undo_ok = 0;
    return NLSE_OK;
}

int nlse_fd_observe(nlse_fd *s, double *norm, double *energy)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_observe: NULL solver");
    return nlse_fd_observe_rows(s, 0, s->p.shape[0], norm, energy);
}

int nlse_fd_observe_rows(nlse_fd *s, size_t first, size_t count, double *norm, double *energy)
{
    double n, e;
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_fd_observe_rows: NULL solver");
    int st = nlse_fd_check_rows(&s->p, first, count);
    if (st)
        return st;
    const ptrdiff_t r0 = (ptrdiff_t)first, r1 = (ptrdiff_t)(first + count);
    if (s->p.dtype == NLSE_COMPLEX64)
        nlse_fd_measure_f(s, r0, r1, &n, &e);
    else
        nlse_fd_measure_d(s, r0, r1, &n, &e);
    if (norm)
        *norm = n;
    if (energy)
        *energy = e;
    return NLSE_OK;
}

/* bytes of `count` rows of axis 0 and the offset of row `first` */
static void row_bytes(const nlse_fd *s, size_t first, size_t count, size_t *off, size_t *len)
{
    const size_t row = (size_t)s->g.npts / s->p.shape[0] * 2 * s->real_size;
    *off = first * row;
    *len = count * row;
}

/* The checks of get_rows / set_rows (`fn`, with the caller's buffer
 * `buf`), then the bytes of those rows as row_bytes gives them. */
static int rows_range(const nlse_fd *s, const void *buf, const char *fn, size_t first,
                      size_t count, size_t *off, size_t *len)
{
    *off = *len = 0;
    if (!s || !buf)
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL argument", fn);
    int st = nlse_fd_check_rows(&s->p, first, count);
    if (!st)
        row_bytes(s, first, count, off, len);
    return st;
}

int nlse_fd_get_rows(const nlse_fd *s, size_t first, size_t count, void *out)
{
    size_t off, len;
    int st = rows_range(s, out, "nlse_fd_get_rows", first, count, &off, &len);
    if (!st)
        memcpy(out, (const char *)s->psi + off, len);
    return st;
}

int nlse_fd_set_rows(nlse_fd *s, size_t first, size_t count, const void *in)
{
    size_t off, len;
    int st = rows_range(s, in, "nlse_fd_set_rows", first, count, &off, &len);
    if (!st)
        memcpy((char *)s->psi + off, in, len);
    return st;
}

double nlse_fd_bytes_per_point_step(const nlse_fd *s)
{
    /* complex values moved per point and step: stage 1 reads Psi^n and
     * writes acc and ta (3); stages 2-3 read x, Psi^n, acc and write acc and
     * the next input (5 each); stage 4 reads x and acc and writes acc (3).
     * The two-step 2SHOC (non-periodic grids) adds, per stage, a D write
     * and a D read plus a second read of the input (3 x 4); the composed
     * one of periodic grids reads what CD reads.  The potential adds one
     * real read per stage. */
    double c = 2.0 * (double)s->real_size;
    double b = 16 * c;
    if (s->p.scheme == NLSE_FD_2SHOC && !s->g.periodic)
        b += 12 * c;
    if (s->V)
        b += 4 * (double)s->real_size;
    return b;
}
