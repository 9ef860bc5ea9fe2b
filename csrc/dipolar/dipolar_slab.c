/*
 * dipolar_slab.c -- the slab plan of the split-step Crank-Nicolson solver of
 * the 3D dipolar GPE (nlse_dipolar_slab_create, nlsepy/dipolar.h): one
 * rank's x rows of a grid distributed over ranks, after the OpenMP/MPI
 * edition of DBEC-GP (Loncar, thesis, chapter 6; the scheme of chapter 2).
 * Every message goes through the communicator table (nlse_comm,
 * nlsepy/common.h), so the C core links no MPI.  Per step:
 *   the dipolar term (section 6.2): the 2D r2c transforms of the slab's x
 *       rows, a transpose of the spectrum to x pencils (y split by ycount),
 *       the transform along x, the kernel, and the way back;
 *   pass A of the single-process kernels on the slab (dipolar_kernels.inc);
 *   the x solve: by substructuring (each slab solves its own rows, the
 *       slabs coupled through their lines' end values: one halo row each way
 *       and two values a line from every rank), or by a transpose to x
 *       pencils, the single-process solve and the transpose back (section
 *       6.2: "transpose, compute as before, transpose back");
 *   the Simpson norm summed over the ranks in rank order (comm->sum), so
 *       every rank takes the same decisions and two runs with the same ranks
 *       give the same bits.
 * The slab's struct nlse_dipolar has n[0] = ni; its axis-0 tables cover the
 * whole axis (the observables read two halo rows each way).  A failure on
 * one rank before a collective part stops the call on every rank; the ranks
 * that did not fail return NLSE_ERR_INTERNAL with NLSE_DIPOLAR_PEER.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fftw3.h>
#include "dipolar_internal.h"
#include "dipolar_params.h"

static int single(const struct nlse_dipolar *s)
{
    return s->p.dtype == NLSE_COMPLEX64;
}

static size_t rsize(const struct nlse_dipolar *s)
{
    return single(s) ? sizeof(float) : sizeof(double);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* the layout and agreement between ranks                             */
/* ------------------------------------------------------------------ */

struct dipolar_slab *dipolar_slab_new(const nlse_dipolar_params *p, int rank, int size,
                                     const size_t *xcount, const size_t *ycount,
                                     const nlse_comm *comm)
{
    struct dipolar_slab *S = (struct dipolar_slab *)calloc(1, sizeof *S);
    const size_t P = (size_t)size;
    if (!S)
        return NULL;
    S->xc = (size_t *)malloc(4 * P * sizeof(size_t));
    S->cnt = (size_t *)malloc(4 * P * sizeof(size_t));
    if (!S->xc || !S->cnt) {
        free(S->xc);
        free(S);
        return NULL;
    }
    S->xs = S->xc + P;
    S->yc = S->xs + P;
    S->ys = S->yc + P;
    for (size_t r = 0; r < P; ++r) {
        S->xc[r] = xcount[r];
        S->yc[r] = ycount[r];
        S->xs[r] = r ? S->xs[r - 1] + S->xc[r - 1] : 0;
        S->ys[r] = r ? S->ys[r - 1] + S->yc[r - 1] : 0;
    }
    S->comm = comm;
    S->rank = rank;
    S->size = size;
    S->n0 = p->shape[0];
    S->ni = xcount[rank];
    S->i0 = S->xs[rank];
    S->nj = ycount[rank];
    S->j0 = S->ys[rank];
    S->spike_mode = -1;
    dipolar_tuning_read(&S->tune);
    return S;
}

int dipolar_slab_agree(struct nlse_dipolar *s, int st, int *any_complex)
{
    const nlse_comm *c = s->slab->comm;
    double v[2] = {st != 0, !s->is_real};
    int rc = c->max(c->ctx, v, 2);
    if (rc)
        return st ? st : rc;
    if (any_complex)
        *any_complex = v[1] != 0;
    if (st)
        return st;
    if (v[0] != 0)
        return nlse_fail(NLSE_ERR_INTERNAL, NLSE_DIPOLAR_PEER " another rank failed");
    return NLSE_OK;
}

static int ensure_xwork(struct nlse_dipolar *s);

int dipolar_slab_begin(struct nlse_dipolar *s, int st, int *any_complex)
{
    if (!st && s->dens) /* the threads may have grown since the last call */
        st = ensure_xwork(s);
    return dipolar_slab_agree(s, st, any_complex);
}

/* x summed over the ranks in rank order (n values in place). */
static int rank_sum(struct nlse_dipolar *s, double *x, size_t n)
{
    struct dipolar_slab *S = s->slab;
    double t = now();
    int st = S->comm->sum(S->comm->ctx, x, n);
    S->tm[4] += now() - t;
    return st;
}

/* ------------------------------------------------------------------ */
/* buffers                                                            */
/* ------------------------------------------------------------------ */

static int spike_buffers(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    const size_t lanes = s->n[1] * s->n[2], P = (size_t)S->size;
    S->sv = (double *)calloc(2 * S->ni, sizeof(double));
    S->sw = (double *)calloc(2 * S->ni, sizeof(double));
    S->kv = (double *)calloc(4 * P, sizeof(double));
    S->kw = (double *)calloc(4 * P, sizeof(double));
    S->dsend = (double *)malloc(4 * lanes * sizeof(double));
    S->drecv = (double *)malloc(4 * lanes * P * sizeof(double));
    S->coef = (double *)malloc(4 * lanes * sizeof(double));
    if (!S->sv || !S->sw || !S->kv || !S->kw || !S->dsend || !S->drecv || !S->coef)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the x solve's buffers");
    return NLSE_OK;
}

int dipolar_slab_alloc(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    const size_t rs = rsize(s), row = 2 * s->n[1] * s->n[2] * rs;
    if (S->xsolve == NLSE_DIPOLAR_XSOLVE_TRANSPOSE) { /* packing buffer and x pencils */
        s->psi = malloc(2 * s->N * rs);
        S->tbuf = malloc(2 * s->N * rs);
        S->pen = malloc(S->nj ? 2 * S->n0 * S->nj * s->n[2] * rs : 1);
        if (!s->psi || !S->tbuf || !S->pen)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a slab of %zu points", s->N);
        return NLSE_OK;
    }
    /* the local systems (halo, own rows, halo) around the state, and the
     * top halo row as received */
    S->ext = malloc((S->ni + 2) * row);
    s->psi = S->ext ? (char *)S->ext + row : NULL;
    S->hrow = malloc(row);
    if (!S->ext || !S->hrow)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a slab of %zu points", s->N);
    return spike_buffers(s);
}

int dipolar_slab_rotation(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    if (S->pen)
        return NLSE_OK;
    const size_t rs = rsize(s);
    free(S->tbuf); /* the spectrum's packing buffer, if any, is smaller */
    S->tbuf = malloc(2 * s->N * rs);
    S->pen = malloc(S->nj ? 2 * S->n0 * S->nj * s->n[2] * rs : 1);
    if (!S->tbuf || !S->pen)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the x pencils of a slab of %zu "
                         "points", s->N);
    return NLSE_OK;
}

static void free_plans(struct nlse_dipolar *s)
{
#pragma omp critical(nlsepy_fftw)
    {
        if (single(s))
            dipolar_slab_free_plans_f(s->slab->fplan);
        else
            dipolar_slab_free_plans_d(s->slab->fplan);
    }
    s->plan_f = s->plan_b = NULL;
}

void dipolar_slab_free(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    if (!S)
        return;
    free_plans(s);
    fftw_free(S->spec);
    fftw_free(S->xwork);
    free(S->tbuf);
    free(S->pen);
    free(S->ext);
    free(S->hrow);
    free(S->sv);
    free(S->sw);
    free(S->kv);
    free(S->kw);
    free(S->dsend);
    free(S->drecv);
    free(S->coef);
    free(S->xc);
    free(S->cnt);
    free(S);
    s->slab = NULL;
}

size_t dipolar_slab_memory(const struct nlse_dipolar *s)
{
    const struct dipolar_slab *S = s->slab;
    const size_t rs = rsize(s), lanes = s->n[1] * s->n[2];
    size_t b = 0;
    if (S->xsolve == NLSE_DIPOLAR_XSOLVE_TRANSPOSE) /* state, packing; pencils */
        b += 4 * s->N * rs + 2 * S->n0 * S->nj * s->n[2] * rs;
    else /* the state inside the local systems' buffer, the top halo row; the
            lines' ends of every rank (and the rotating frame's pencils) */
        b += 2 * (S->ni + 3) * lanes * rs + (8 + 4 * (size_t)S->size) * lanes * sizeof(double) +
             (S->pen ? 2 * s->N * rs + 2 * S->n0 * S->nj * s->n[2] * rs : 0);
    if (S->spec) /* the spectrum's pencils and the packing buffer they need */
        b += 2 * S->n0 * S->nj * (s->n[2] / 2 + 1) * rs +
             (S->xsolve == NLSE_DIPOLAR_XSOLVE_TRANSPOSE ? 0 : s->n[0] * s->n[1] * s->nlp * rs);
    b += (size_t)S->xwork_threads * 2 * S->n0 * DIPOLAR_XBLOCK * rs; /* the x blocks */
    return b;
}

/* ------------------------------------------------------------------ */
/* transposes between the slab and x pencils                          */
/* ------------------------------------------------------------------ */

/* The counts and displacements, in lines, of a transpose, for every rank
 * r: on the slab side (slab[r], slab[P + r]) the ni x yc[r] lines of rank
 * r's y rows, packed in rank order; on the pencil side (pencil[r],
 * pencil[P + r]) rank r's xc[r] x rows of nj lines, in place. */
static void transpose_counts(const struct dipolar_slab *S, size_t *slab, size_t *pencil)
{
    const size_t P = (size_t)S->size;
    size_t off = 0;
    for (size_t r = 0; r < P; ++r) {
        slab[r] = S->ni * S->yc[r];
        slab[P + r] = off;
        pencil[r] = S->xc[r] * S->nj;
        pencil[P + r] = S->xs[r] * S->nj;
        off += S->ni * S->yc[r];
    }
}

/* Between the slab (ni rows of n1 lines of `line` bytes at `slab`) and the
 * packing buffer, where rank r's y rows of every local x row lie together
 * in rank order (displacements disp, in lines): into the buffer (`in`) or
 * out of it.  This rank's own block goes straight to (or comes straight
 * from) its place in the pencils `pen`, at line pdisp, and is left out of
 * the all-to-all (counts c1, c2 of this rank set to 0). */
static void pack(struct nlse_dipolar *s, char *slab, size_t line, const size_t *disp, int in,
                 char *pen, size_t pdisp)
{
    struct dipolar_slab *S = s->slab;
    const size_t P = (size_t)S->size, ni = S->ni, n1 = s->n[1], me = (size_t)S->rank;
    char *buf = (char *)S->tbuf;
#pragma omp parallel for NLSE_THREADS schedule(static) collapse(2) if (ni * n1 * line > 262144)
    for (ptrdiff_t r = 0; r < (ptrdiff_t)P; ++r)
        for (ptrdiff_t i = 0; i < (ptrdiff_t)ni; ++i) {
            char *b = ((size_t)r == me ? pen + pdisp * line : buf + disp[r] * line) +
                      (size_t)i * S->yc[r] * line;
            char *a = slab + ((size_t)i * n1 + S->ys[r]) * line;
            memcpy(in ? b : a, in ? a : b, S->yc[r] * line);
        }
}

/* Slab -> pencils (n0 rows of nj lines at pen): rank r gets the y rows
 * ys[r] .. of every local x row; what arrives from rank r is its x rows,
 * already in place. */
static int to_pencils(struct nlse_dipolar *s, char *src, size_t line, char *pen)
{
    struct dipolar_slab *S = s->slab;
    const size_t P = (size_t)S->size, me = (size_t)S->rank;
    size_t *sc = S->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    transpose_counts(S, sc, rc);
    pack(s, src, line, sd, 1, pen, rd[me]);
    sc[me] = rc[me] = 0;
    return S->comm->alltoallv(S->comm->ctx, line, S->tbuf, sc, sd, pen, rc, rd);
}

/* Pencils -> slab: the reverse of to_pencils. */
static int from_pencils(struct nlse_dipolar *s, char *pen, size_t line, char *dst)
{
    struct dipolar_slab *S = s->slab;
    const size_t P = (size_t)S->size, me = (size_t)S->rank;
    size_t *sc = S->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    transpose_counts(S, rc, sc);
    const size_t own = sd[me];
    sc[me] = rc[me] = 0;
    int st = S->comm->alltoallv(S->comm->ctx, line, pen, sc, sd, S->tbuf, rc, rd);
    if (!st)
        pack(s, dst, line, rd, 0, pen, own);
    return st;
}

/* Rows to the neighbours and from them (collective): `k` rows of `row`
 * bytes from row first_up of `send` to the rank above and from its row 0
 * to the rank below; into `recv` the rank below's at row 0 and the rank
 * above's at row `up_at`. */
static int exchange_rows(struct nlse_dipolar *s, const void *send, size_t first_up, void *recv,
                         size_t up_at, size_t k, size_t row)
{
    struct dipolar_slab *S = s->slab;
    const size_t P = (size_t)S->size, p = (size_t)S->rank;
    size_t *sc = S->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    memset(S->cnt, 0, 4 * P * sizeof(size_t));
    if (p > 0)
        sc[p - 1] = rc[p - 1] = k;
    if (p + 1 < P) {
        sc[p + 1] = rc[p + 1] = k;
        sd[p + 1] = first_up;
        rd[p + 1] = up_at;
    }
    return S->comm->alltoallv(S->comm->ctx, row, send, sc, sd, recv, rc, rd);
}

/* ------------------------------------------------------------------ */
/* the dipolar term                                                   */
/* ------------------------------------------------------------------ */

/* The kernel (times 1/N) on the spectrum's x pencils (n0, nj, nz/2 + 1). */
static void make_kernel(struct nlse_dipolar *s)
{
    const struct dipolar_slab *S = s->slab;
    dipolar_layout G;
    dipolar_make_layout(&s->p, &G);
    const size_t nh = s->n[2] / 2 + 1, nj = S->nj;
    const double invN = 1.0 / (double)(S->n0 * s->n[1] * s->n[2]);
#pragma omp parallel for NLSE_THREADS schedule(static)
    for (ptrdiff_t i = 0; i < (ptrdiff_t)S->n0; ++i)
        for (size_t jl = 0; jl < nj; ++jl)
            for (size_t k = 0; k < nh; ++k) {
                double v = dipolar_kernel_value(&s->p, &G, (size_t)i, S->j0 + jl, k) * invN;
                size_t q = ((size_t)i * nj + jl) * nh + k;
                if (single(s))
                    ((float *)s->kern)[q] = (float)v;
                else
                    ((double *)s->kern)[q] = v;
            }
}

static int make_plans(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    int st;
    dipolar_fftw_threads_init();
#pragma omp critical(nlsepy_fftw)
    st = single(s) ? dipolar_slab_plans_f(s, S->xwork, S->n0, S->fplan)
                   : dipolar_slab_plans_d(s, S->xwork, S->n0, S->fplan);
    s->plan_f = S->fplan[0]; /* the solver's "dipolar term is on" */
    s->plan_b = S->fplan[1];
    return st;
}

/* Room in xwork for every thread's block of x lines (zeroed: the lanes
 * past the last line hold finite values). */
static int ensure_xwork(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    const int nt = s->nthreads > 0 ? s->nthreads : 1;
    if (S->xwork && S->xwork_threads >= nt)
        return NLSE_OK;
    const size_t bytes = (size_t)nt * 2 * S->n0 * DIPOLAR_XBLOCK * rsize(s);
    void *w = fftw_malloc(bytes);
    if (!w)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for %d threads' x transforms", nt);
    memset(w, 0, bytes); /* fftw_malloc's alignment, as the block the plans were made on */
    fftw_free(S->xwork);
    S->xwork = w;
    S->xwork_threads = nt;
    return NLSE_OK;
}

int dipolar_slab_enable(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    int st = dipolar_check_dipolar(&s->p);
    if (st)
        return st; /* the same parameters on every rank: the same answer */
    const size_t rs = rsize(s), nh = s->n[2] / 2 + 1;
    if (!s->dens)
        s->dens = fftw_malloc(s->n[0] * s->n[1] * s->nlp * rs);
    if (!s->kern)
        s->kern = malloc((s->nk ? s->nk : 1) * rs);
    /* one rank: its slab is the whole spectrum's x pencils, nothing moves */
    const int moves = S->size > 1;
    if (moves && !S->spec)
        S->spec = fftw_malloc((S->nj ? 2 * S->n0 * S->nj * nh : 2) * rs);
    if (moves && !S->tbuf) /* the spectrum's packing (the x solve's when it transposes) */
        S->tbuf = malloc(s->n[0] * s->n[1] * s->nlp * rs);
    if (!st)
        st = ensure_xwork(s);
    if (!s->dens || !s->kern || (moves && (!S->spec || !S->tbuf)))
        st = nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar buffers of a slab of %zu "
                       "points", s->N);
    if ((st = dipolar_slab_agree(s, st, NULL)))
        return st;
    if ((st = dipolar_slab_agree(s, make_plans(s), NULL))) {
        free_plans(s);
        return st;
    }
    make_kernel(s);
    s->p.dipolar = 1;
    return NLSE_OK;
}

static void execute(const struct nlse_dipolar *s, void *plan)
{
    if (single(s))
        dipolar_fft_execute_f(plan);
    else
        dipolar_fft_execute_d(plan);
}

int dipolar_slab_convolve(struct nlse_dipolar *s)
{
    struct dipolar_slab *S = s->slab;
    const size_t line = s->nlp * rsize(s); /* nz/2 + 1 complex values */
    const int moves = S->size > 1; /* one rank: the slab is the pencils */
    void *spec = moves ? S->spec : s->dens;
    const double t0 = now();
    execute(s, S->fplan[0]);
    double t = now();
    int st = moves ? to_pencils(s, (char *)s->dens, line, (char *)spec) : NLSE_OK;
    S->tm[3] += now() - t;
    if (st)
        return st;
    const size_t lines = S->nj * (s->n[2] / 2 + 1);
    if (single(s))
        dipolar_slab_xconv_f(spec, s->kern, S->n0, lines, S->fplan[2], S->fplan[3], S->xwork);
    else
        dipolar_slab_xconv_d(spec, s->kern, S->n0, lines, S->fplan[2], S->fplan[3], S->xwork);
    t = now();
    st = moves ? from_pencils(s, (char *)spec, line, (char *)s->dens) : NLSE_OK;
    S->tm[3] += now() - t;
    if (st)
        return st;
    execute(s, S->fplan[1]);
    S->tm[2] += now() - t0;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* the x solve                                                        */
/* ------------------------------------------------------------------ */

/* Each rank solves its own rows' tridiagonal system (the rows next to its
 * slab, received from the neighbours, give the explicit half), with 0 at
 * the bottom and the received row's value at the top, by the recursions of
 * the single-process solve (the table of the x axis taken from the row its
 * distance to the top gives).  The true solution on the own rows is
 *     u = y + L v + (R - h) w,
 * v and w the responses of the local system to a unit bottom and top
 * boundary value (the same for every line: the coefficients are constant),
 * L the last value of the rank below, R the first of the rank above and h
 * the value the local solve took at the top.  The first and last values of
 * every rank, F_q and E_q, solve the 2P x 2P system K X = d whose rows are
 * the two ends of that formula; K depends only on the spikes, so every
 * rank inverts it once and keeps the two rows giving its L = E_(p-1) and
 * R = F_(p+1) (dipolar_spike.c). */

/* The responses and the rows of K^-1 for `mode` at the current dt (every
 * rank computes every rank's ends itself). */
static int spike_prepare(struct nlse_dipolar *s, int mode)
{
    struct dipolar_slab *S = s->slab;
    const double r = s->p.dt * s->p.kin / (s->h[0] * s->h[0]);
    int st = dipolar_spike_setup(r, mode == NLSE_DIPOLAR_REAL, S->size, S->xc, S->rank, S->sv,
                                 S->sw, S->kv, S->kw);
    if (!st) {
        S->spike_mode = mode;
        S->spike_dt = s->p.dt;
    }
    return st;
}

/* The lines' two corrected ends of every rank (an all-gather). */
static int gather_ends(struct nlse_dipolar *s, size_t lanes)
{
    struct dipolar_slab *S = s->slab;
    const size_t P = (size_t)S->size;
    size_t *sc = S->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    for (size_t r = 0; r < P; ++r) {
        sc[r] = rc[r] = 1;
        sd[r] = 0;
        rd[r] = r;
    }
    return S->comm->alltoallv(S->comm->ctx, 4 * lanes * sizeof(double), S->dsend, sc, sd,
                              S->drecv, rc, rd);
}

/* The x solve by substructuring (collective); the correction also leaves
 * the density (when `want`) and this rank's norm (norm_part) from the rows
 * it has just written. */
static int spike_solve_x(struct nlse_dipolar *s, int mode, int want)
{
    struct dipolar_slab *S = s->slab;
    int st;
    /* a new mode or dt: every rank remakes its responses (the same
     * condition everywhere), and they agree before the halo exchange */
    if ((S->spike_mode != mode || S->spike_dt != s->p.dt) &&
        (st = dipolar_slab_agree(s, spike_prepare(s, mode), NULL)))
        return st;
    const int P = S->size, lo = S->rank == 0, hi = S->rank == P - 1;
    const int vals = s->is_real ? 1 : 2;
    const size_t lanes = s->n[1] * s->n[2], rb = lanes * (size_t)vals * rsize(s), ni = S->ni;
    char *ext = (char *)s->psi - rb; /* a row of the rank below, the state, a row above */
    double t = now();
    if ((st = exchange_rows(s, s->psi, ni - 1, ext, ni + 1, 1, rb)))
        return st;
    S->tm[1] += now() - t;
    if (!hi) /* the local solve overwrites the top row; its value is kept */
        memcpy(S->hrow, ext + (ni + 1) * rb, rb);
    const size_t n = ni + 2 - (size_t)lo - (size_t)hi, shift = S->n0 - n;
    void *base = ext + (lo ? rb : 0);
    if (single(s))
        dipolar_solve_x_pencils_f(s, mode, base, n, s->n[1], shift);
    else
        dipolar_solve_x_pencils_d(s, mode, base, n, s->n[1], shift);
    static const double zero2[2] = {0, 0};
    const double *w0 = hi ? zero2 : S->sw, *we = hi ? zero2 : S->sw + 2 * (ni - 1);
    const void *h = hi ? NULL : S->hrow; /* the top value the local solve took */
    if (single(s))
        dipolar_spike_ends_f((const float *)(ext + rb), (const float *)(ext + ni * rb),
                             (const float *)h, lanes, vals, w0, we, S->dsend);
    else
        dipolar_spike_ends_d((const double *)(ext + rb), (const double *)(ext + ni * rb),
                             (const double *)h, lanes, vals, w0, we, S->dsend);
    t = now();
    st = gather_ends(s, lanes);
    S->tm[1] += now() - t;
    if (st)
        return st;
    const double *v = lo ? NULL : S->sv, *w = hi ? NULL : S->sw;
    if (single(s)) {
        dipolar_spike_coefs_f(S->drecv, P, lanes, S->kv, S->kw, (const float *)h, vals, S->coef);
        S->norm_part = dipolar_spike_apply_f((float *)s->psi, (const float *)(ext + rb), ni,
                                             lanes, vals, v, w, S->coef, s, want);
    } else {
        dipolar_spike_coefs_d(S->drecv, P, lanes, S->kv, S->kw, (const double *)h, vals, S->coef);
        S->norm_part = dipolar_spike_apply_d((double *)s->psi, (const double *)(ext + rb), ni,
                                             lanes, vals, v, w, S->coef, s, want);
    }
    S->norm_ready = 1;
    return NLSE_OK;
}

/* The Crank-Nicolson solve along x of the whole grid (collective). */
static int solve_x(struct nlse_dipolar *s, int mode, int want)
{
    struct dipolar_slab *S = s->slab;
    if (S->xsolve == NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE && s->rot == 0)
        return spike_solve_x(s, mode, want);
    const size_t line = (s->is_real ? 1 : 2) * s->n[2] * rsize(s);
    double t = now();
    int st = to_pencils(s, (char *)s->psi, line, (char *)S->pen);
    S->tm[1] += now() - t;
    if (st)
        return st;
    if (single(s))
        dipolar_solve_x_pencils_f(s, mode, S->pen, S->n0, S->nj, 0);
    else
        dipolar_solve_x_pencils_d(s, mode, S->pen, S->n0, S->nj, 0);
    t = now();
    st = from_pencils(s, (char *)S->pen, line, (char *)s->psi);
    S->tm[1] += now() - t;
    return st;
}

/* ------------------------------------------------------------------ */
/* stepping and observables                                           */
/* ------------------------------------------------------------------ */

/* Density (when asked) and the Simpson norm of the whole grid (this rank's
 * part from the x solve's correction when it made it: the same per-row
 * sums in the same order as dipolar_prepare). */
int dipolar_slab_norm(struct nlse_dipolar *s, int want, double *nrm)
{
    struct dipolar_slab *S = s->slab;
    double v = S->norm_ready ? S->norm_part
               : single(s)   ? dipolar_prepare_f(s, want)
                             : dipolar_prepare_d(s, want);
    S->norm_ready = 0;
    int st = rank_sum(s, &v, 1);
    *nrm = v;
    return st;
}

int dipolar_slab_step(struct nlse_dipolar *s, const dipolar_step_args *a, double *nrm)
{
    if (single(s))
        dipolar_pass_a_f(s, a);
    else
        dipolar_pass_a_d(s, a);
    int st = solve_x(s, a->mode, a->want_density);
    return st ? st : dipolar_slab_norm(s, a->want_density, nrm);
}

/* Obstacle factors at time t over every x row (the slab points into them). */
void dipolar_slab_obstacle(struct nlse_dipolar *s, double t)
{
    struct nlse_dipolar G = *s;
    G.n[0] = s->slab->n0;
    G.x[0] = s->x[0] - s->row0;
    G.ob[0] = (char *)s->ob[0] - s->row0 * rsize(s);
    if (single(s))
        dipolar_obstacle_factors_f(&G, t);
    else
        dipolar_obstacle_factors_d(&G, t);
}

/* The observables' sums of this rank's rows (ext: the slab with its halo
 * rows, e_lo below and e_hi above) and |Psi|^2 at the grid's centre when
 * this rank holds it, T[OQ_N]. */
static int observe_rows(struct nlse_dipolar *s, double t, char *ext, size_t e_lo, size_t e_hi,
                        int use_dd, double *T)
{
    struct dipolar_slab *S = s->slab;
    struct nlse_dipolar V = *s; /* the slab with its halo rows */
    const size_t rs = rsize(s);
    V.psi = ext;
    V.n[0] = S->ni + e_lo + e_hi;
    V.N = V.n[0] * s->n[1] * s->n[2];
    V.x[0] = s->x[0] - e_lo;
    V.w[0] = s->w[0] - e_lo;
    V.vtrap[0] = (char *)s->vtrap[0] - e_lo * rs;
    V.ob[0] = (char *)s->ob[0] - e_lo * rs;
    const void *dd = use_dd ? s->dens : NULL;
    int st = single(s) ? dipolar_observe_rows_f(&V, t, e_lo, e_lo + S->ni, s->U, dd, T)
                       : dipolar_observe_rows_d(&V, t, e_lo, e_lo + S->ni, s->U, dd, T);
    const size_t ic = S->n0 / 2;
    if (ic >= S->i0 && ic < S->i0 + S->ni) {
        size_t m = ((ic - S->i0) * s->n[1] + s->n[1] / 2) * s->n[2] + s->n[2] / 2;
        T[OQ_N] = single(s) ? dipolar_density_at_f(s, m) : dipolar_density_at_d(s, m);
    }
    return st;
}

int dipolar_slab_observe(struct nlse_dipolar *s, double t, nlse_dipolar_obs *out)
{
    struct dipolar_slab *S = s->slab;
    const size_t e_lo = S->rank > 0 ? 2 : 0, e_hi = S->rank < S->size - 1 ? 2 : 0;
    const size_t plane = s->n[1] * (s->is_real ? 1 : 2) * s->n[2] * rsize(s);
    char *ext = (char *)malloc((S->ni + e_lo + e_hi) * plane);
    int st = dipolar_slab_agree(
        s, ext ? NLSE_OK : nlse_fail(NLSE_ERR_NOMEM, "out of memory for the halo"), NULL);
    if (!st) {
        /* the own rows in the middle; the lower neighbour's last two rows
         * below them, the upper neighbour's first two above */
        memcpy(ext + e_lo * plane, s->psi, S->ni * plane);
        st = exchange_rows(s, s->psi, S->ni - 2, ext, e_lo + S->ni, 2, plane);
    }
    const int use_dd = s->dens && s->gdd != 0;
    double T[OQ_N + 1] = {0};
    if (!st)
        st = observe_rows(s, t, ext, e_lo, e_hi, use_dd, T);
    free(ext);
    if ((st = dipolar_slab_agree(s, st, NULL)) || (st = rank_sum(s, T, OQ_N + 1)))
        return st;
    dipolar_observe_finish(s, T, use_dd, T[OQ_N], out);
    return NLSE_OK;
}

int nlse_dipolar_slab_timings(const nlse_dipolar *s, double out[5])
{
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_slab_timings: NULL argument");
    if (!s->slab)
        return nlse_fail(NLSE_ERR_VALUE, "the solver is not a slab of a distributed run");
    for (int q = 0; q < 5; ++q)
        out[q] = s->slab->tm[q];
    return NLSE_OK;
}
