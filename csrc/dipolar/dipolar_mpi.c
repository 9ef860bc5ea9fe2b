/*
 * dipolar_mpi.c -- the distributed split-step Crank-Nicolson solver of the
 * 3D dipolar GPE (Loncar, thesis, chapter 6, the OpenMP/MPI edition of
 * DBEC-GP; the scheme of chapter 2): x slabs of FFTW's MPI layout (section
 * 6.1), the dipolar convolution with FFTW's MPI r2c/c2r transforms in
 * transposed order (section 6.2), the x solve on x pencils reached by a
 * transpose with MPI_Alltoallv and back (section 6.2) or, in place of the
 * transposes, by substructuring (the local tridiagonal systems coupled
 * through their end values, spike_*), observables reduced over the ranks in
 * rank order (section 2.4 with the sums of section 6.2).
 * The arithmetic on each slab is that of the single-process kernels
 * (dipolar_kernels.inc), called on a `struct nlse_dipolar` that describes
 * the slab.  Compiled only into the `_mpi` extension.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fftw3-mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "dipolar_internal.h"
#include "dipolar_params.h"
#include "dipolar_mpi.h"
#include "dipolar_tuning.h"

/* Axis-0 tables (coordinates, Simpson weights, trap and obstacle factors)
 * cover the whole x axis; the slab's point into them at row i0. */
struct nlse_dipolar_mpi {
    struct nlse_dipolar L;   /* the slab: n = (ni, ny, nz), the state, buffers   */
    nlse_dipolar_params gp;  /* the global problem                               */
    MPI_Comm comm;
    int rank, size;
    const nlse_comm *red;    /* rank-ordered sums                                */
    size_t n0, n1, n2;       /* global grid                                      */
    size_t ni, i0, nj, j0;   /* local x rows; y rows of the x pencils            */
    size_t *xc, *xs, *yc, *ys; /* x rows and y rows of every rank               */
    double *X0, *W0;         /* x_i and Simpson weights of all n0 rows           */
    void *V0, *O0;           /* trap and obstacle factors of all n0 rows (REAL)  */
    void *pen;               /* x pencils (n0, nj, nz), complex                   */
    void *tbuf;              /* packing buffer of the slab's size, complex        */
    int *cnt;                /* 4 x size: send counts/displs, receive counts/displs */
    unsigned long *rows;     /* x rows of every rank, as gathered                */
    MPI_Datatype line[2];    /* one z line: real values, complex values         */
    int have_types;
    size_t alloc_local;      /* complex values of FFTW's local buffer            */
    size_t kn1, k1;          /* ky rows of the transposed spectrum               */
    double tm[4];            /* step, transposes, FFTs, reductions (seconds)     */
    dipolar_tuning tune;     /* the tuning switches, read at create              */
    /* the x solve by substructuring (spike_*): */
    int xsolve;              /* NLSE_DIPOLAR_XSOLVE_* agreed by the ranks        */
    void *ext;               /* (ni + 2, ny, nz) complex: halo, own rows, halo;  */
                             /* the state lives in it from its second row       */
    void *hrow;              /* the top halo row as received, complex            */
    double *sv, *sw;         /* bottom and top responses on the own rows, complex */
    double *kv, *kw;         /* rows of K^-1 giving E(p-1) and F(p+1), 2P complex */
    double *dsend, *drecv, *coef; /* the lines' ends, every rank's, (L, R - h)   */
    int spike_mode;          /* mode the responses were made for, -1: none       */
    double spike_dt;
    int norm_ready;          /* the x solve's correction left the norm's part:   */
    double norm_part;        /* this rank's Simpson norm (and the density)       */
};

static int single(const struct nlse_dipolar_mpi *M)
{
    return M->gp.dtype == NLSE_COMPLEX64;
}

static size_t rsize(const struct nlse_dipolar_mpi *M)
{
    return single(M) ? sizeof(float) : sizeof(double);
}

static void put(const struct nlse_dipolar_mpi *M, void *dst, size_t i, double v)
{
    if (single(M))
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
/* FFTW's MPI interface                                               */
/* ------------------------------------------------------------------ */

static int mpi_fftw_state = 0;

/* fftw_mpi_init once per process (after FFTW's threads, as FFTW asks). */
static void mpi_fftw_init(void)
{
    dipolar_fftw_threads_init();
#pragma omp critical(nlsepy_fftw)
    {
        if (!mpi_fftw_state) {
            fftw_mpi_init();
            fftwf_mpi_init();
            mpi_fftw_state = 1;
        }
    }
}

int nlse_dipolar_mpi_slab(MPI_Comm comm, const size_t shape[3], size_t *ni, size_t *i0)
{
    ptrdiff_t ln0, l0, ln1, l1;
    mpi_fftw_init();
    fftw_mpi_local_size_3d_transposed((ptrdiff_t)shape[0], (ptrdiff_t)shape[1],
                                      (ptrdiff_t)(shape[2] / 2 + 1), comm, &ln0, &l0, &ln1, &l1);
    *ni = (size_t)ln0;
    *i0 = (size_t)l0;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* agreement between ranks                                            */
/* ------------------------------------------------------------------ */

/* Every rank learns whether any failed (st != 0) and whether any holds a
 * complex state; a rank that did not fail returns the peer status. */
static int agree(struct nlse_dipolar_mpi *M, int st, int *any_complex)
{
    int in[2] = {st != 0, !M->L.is_real}, out[2] = {0, 0};
    int rc = MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, M->comm);
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Allreduce failed (error %d)", rc);
    if (any_complex)
        *any_complex = out[1];
    if (st)
        return st;
    if (out[0])
        return nlse_fail(NLSE_ERR_INTERNAL, NLSE_DIPOLAR_MPI_PEER " another rank failed");
    return NLSE_OK;
}

/* x summed over the ranks in rank order (n values in place). */
static int rank_sum(struct nlse_dipolar_mpi *M, double *x, size_t n)
{
    double t = MPI_Wtime();
    int st = M->red->sum(M->red->ctx, x, n);
    M->tm[3] += MPI_Wtime() - t;
    return st;
}

/* ------------------------------------------------------------------ */
/* the slab                                                           */
/* ------------------------------------------------------------------ */

/* Crank-Nicolson tables of internal axis q for n points at the current dt. */
static int make_cn(struct nlse_dipolar_mpi *M, int q, size_t n)
{
    dipolar_axis *X = &M->L.ax[q];
    if (n < 3)
        return NLSE_OK;
    double *t = (double *)malloc(6 * n * sizeof(double));
    if (!t)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the Crank-Nicolson tables");
    dipolar_cn_scalars sc;
    dipolar_cn_coefficients(M->gp.dt * M->gp.kin / (M->L.h[q] * M->L.h[q]), n, t, t + n, t + 2 * n,
                            t + 4 * n, &sc);
    X->A_r = sc.A_r;
    X->A0r_r = sc.A0r_r;
    for (int c = 0; c < 2; ++c) {
        X->A_c[c] = sc.A_c[c];
        X->A0r_c[c] = sc.A0r_c[c];
    }
    for (size_t i = 0; i < n; ++i) {
        put(M, X->alpha_r, i, t[i]);
        put(M, X->gamma_r, i, t[n + i]);
    }
    for (size_t i = 0; i < 2 * n; ++i) {
        put(M, X->alpha_c, i, t[2 * n + i]);
        put(M, X->gamma_c, i, t[4 * n + i]);
    }
    free(t);
    return NLSE_OK;
}

static size_t axis_len(const struct nlse_dipolar_mpi *M, int q)
{
    return q == 0 ? M->n0 : M->L.n[q];
}

/* Per-axis tables: axis 0 over all n0 rows (the slab points at row i0). */
static int make_tables(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    const size_t rs = rsize(M);
    M->X0 = (double *)malloc(M->n0 * sizeof(double));
    M->W0 = (double *)malloc(M->n0 * sizeof(double));
    M->V0 = malloc(M->n0 * rs);
    M->O0 = malloc(M->n0 * rs);
    if (!M->X0 || !M->W0 || !M->V0 || !M->O0)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the axis tables");
    for (int q = 0; q < 3; ++q) {
        size_t n = axis_len(M, q);
        double *x = q ? (double *)malloc(n * sizeof(double)) : M->X0;
        double *w = q ? (double *)malloc(n * sizeof(double)) : M->W0;
        void *vt = q ? malloc(n * rs) : M->V0, *ob = q ? malloc(n * rs) : M->O0;
        dipolar_axis *X = &L->ax[q];
        X->alpha_r = malloc(n * rs);
        X->gamma_r = malloc(n * rs);
        X->alpha_c = malloc(2 * n * rs);
        X->gamma_c = malloc(2 * n * rs);
        if (q) {
            L->x[q] = x;
            L->w[q] = w;
            L->vtrap[q] = vt;
            L->ob[q] = ob;
        }
        if (!x || !w || !vt || !ob || !X->alpha_r || !X->gamma_r || !X->alpha_c || !X->gamma_c)
            return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the axis tables");
        for (size_t i = 0; i < n; ++i) {
            x[i] = dipolar_coord(i, n, L->h[q]);
            w[i] = dipolar_simpson(i, n, L->h[q]);
            put(M, vt, i, M->gp.trap[q] * x[i] * x[i]);
            put(M, ob, i, 1.0);
        }
        int st = make_cn(M, q, n);
        if (st)
            return st;
    }
    L->x[0] = M->X0 + M->i0;
    L->w[0] = M->W0 + M->i0;
    L->vtrap[0] = (char *)M->V0 + M->i0 * rs;
    L->ob[0] = (char *)M->O0 + M->i0 * rs;
    return NLSE_OK;
}

static int ensure_scratch(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    int nt = threads_now();
    if (L->scratch && nt <= L->nthreads)
        return NLSE_OK;
    if (nt < L->nthreads)
        nt = L->nthreads;
    void *w = malloc((size_t)nt * L->scratch_len * rsize(M));
    if (!w)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for %d threads' sweep buffers", nt);
    free(L->scratch);
    L->scratch = w;
    L->nthreads = nt;
    return NLSE_OK;
}

/* The slab of the trap's normalised Gaussian (as the single-process start). */
static void gaussian_state(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    double wq[3], c = 1.0;
    for (int q = 0; q < 3; ++q) {
        double t = M->gp.trap[q];
        wq[q] = t > 0 ? sqrt(t / M->gp.kin) : 1.0;
        c *= pow(wq[q] / 3.14159265358979323846, 0.25);
    }
    L->is_real = 1;
    for (size_t i = 0; i < L->n[0]; ++i)
        for (size_t j = 0; j < L->n[1]; ++j)
            for (size_t k = 0; k < L->n[2]; ++k) {
                double e = wq[0] * L->x[0][i] * L->x[0][i] + wq[1] * L->x[1][j] * L->x[1][j] +
                           wq[2] * L->x[2][k] * L->x[2][k];
                put(M, L->psi, (i * L->n[1] + j) * L->n[2] + k, c * exp(-0.5 * e));
            }
}

static int alloc_layout(struct nlse_dipolar_mpi *M)
{
    const size_t P = (size_t)M->size;
    M->xc = (size_t *)calloc(P, sizeof(size_t));
    M->xs = (size_t *)calloc(P, sizeof(size_t));
    M->yc = (size_t *)calloc(P, sizeof(size_t));
    M->ys = (size_t *)calloc(P, sizeof(size_t));
    M->cnt = (int *)calloc(4 * P, sizeof(int));
    M->rows = (unsigned long *)calloc(P, sizeof(unsigned long));
    if (!M->xc || !M->xs || !M->yc || !M->ys || !M->cnt || !M->rows)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the layout");
    return NLSE_OK;
}

/* Collective: rows per rank, x from every rank's FFTW slab, y split evenly
 * (the first ny % ranks ranks one row more). */
static int gather_layout(struct nlse_dipolar_mpi *M)
{
    const int P = M->size;
    unsigned long mine = (unsigned long)M->ni;
    int rc = MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG, M->rows, 1, MPI_UNSIGNED_LONG, M->comm);
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Allgather failed (error %d)", rc);
    for (int r = 0; r < P; ++r) {
        M->xc[r] = (size_t)M->rows[r];
        M->yc[r] = M->n1 / (size_t)P + ((size_t)r < M->n1 % (size_t)P);
    }
    for (int r = 0; r < P; ++r) {
        M->xs[r] = r ? M->xs[r - 1] + M->xc[r - 1] : 0;
        M->ys[r] = r ? M->ys[r - 1] + M->yc[r - 1] : 0;
    }
    M->nj = M->yc[M->rank];
    M->j0 = M->ys[M->rank];
    return NLSE_OK;
}

/* The most ranks whose FFTW slabs of n0 rows all hold >= 2 rows. */
static int max_ranks(size_t n0)
{
    int best = 1;
    for (size_t P = 2; P <= n0 / 2; ++P) {
        size_t b = (n0 + P - 1) / P;
        if ((P - 1) * b < n0 && n0 - (P - 1) * b >= 2)
            best = (int)P;
    }
    return best;
}

static int check_layout(const struct nlse_dipolar_mpi *M)
{
    for (int r = 0; r < M->size; ++r)
        if (M->xc[r] < 2)
            return nlse_fail(NLSE_ERR_VALUE,
                             "%d ranks split the %zu x rows of the grid into FFTW's slabs of "
                             "ceil(nx / ranks) rows, which leaves rank %d %zu rows; the "
                             "distributed solver needs at least 2 per rank: use at most %d ranks",
                             M->size, M->n0, r, M->xc[r], max_ranks(M->n0));
    return NLSE_OK;
}

static int make_types(struct nlse_dipolar_mpi *M)
{
    MPI_Datatype base = single(M) ? MPI_FLOAT : MPI_DOUBLE;
    for (int c = 0; c < 2; ++c) {
        if (MPI_Type_contiguous((int)((size_t)(c + 1) * M->n2), base, &M->line[c]) != MPI_SUCCESS ||
            MPI_Type_commit(&M->line[c]) != MPI_SUCCESS)
            return nlse_fail(NLSE_ERR_BACKEND, "MPI could not make the line datatype");
    }
    M->have_types = 1;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* dipolar term                                                       */
/* ------------------------------------------------------------------ */

/* The threads FFTW's plans of precision P (fftwf or fftw) run on. */
#ifdef NLSEPY_FFTW_THREADED
#define PLAN_THREADS(P, nt) P##_plan_with_nthreads(nt)
#else
#define PLAN_THREADS(P, nt) ((void)(nt))
#endif

/* The density's forward (r2c, transposed out) and backward (c2r,
 * transposed in) plans of FFTW's MPI interface in precision P (fftwf or
 * fftw, real type R), in place in d. */
#define MPI_PLANS(P, R)                                                                  \
    static void plans_##P(void *d, const ptrdiff_t *nn, MPI_Comm comm, unsigned flags,  \
                          int nt, void **pf, void **pb)                                 \
    {                                                                                   \
        PLAN_THREADS(P, nt);                                                            \
        *pf = P##_mpi_plan_dft_r2c(3, nn, (R *)d, (P##_complex *)d, comm,               \
                                   flags | FFTW_MPI_TRANSPOSED_OUT);                    \
        *pb = P##_mpi_plan_dft_c2r(3, nn, (P##_complex *)d, (R *)d, comm,               \
                                   flags | FFTW_MPI_TRANSPOSED_IN);                     \
    }
MPI_PLANS(fftwf, float)
MPI_PLANS(fftw, double)
#undef MPI_PLANS
#undef PLAN_THREADS

static int make_plans(struct nlse_dipolar_mpi *M)
{
    const ptrdiff_t nn[3] = {(ptrdiff_t)M->n0, (ptrdiff_t)M->n1, (ptrdiff_t)M->n2};
    unsigned flags = M->gp.fft_effort == NLSE_DIPOLAR_FFT_PATIENT  ? FFTW_PATIENT
                     : M->gp.fft_effort == NLSE_DIPOLAR_FFT_MEASURE ? FFTW_MEASURE
                                                                    : FFTW_ESTIMATE;
    void *d = M->L.dens, *pf = NULL, *pb = NULL;
    int nt = M->L.nthreads;
#pragma omp critical(nlsepy_fftw)
    {
        if (single(M))
            plans_fftwf(d, nn, M->comm, flags, nt, &pf, &pb);
        else
            plans_fftw(d, nn, M->comm, flags, nt, &pf, &pb);
    }
    M->L.plan_f = pf;
    M->L.plan_b = pb;
    if (!pf || !pb)
        return nlse_fail(NLSE_ERR_INTERNAL, "FFTW's MPI interface could not plan this grid");
    return NLSE_OK;
}

static void free_plans(struct nlse_dipolar_mpi *M)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) /* MPI is gone: the plans' communicators cannot be freed */
        return;
#pragma omp critical(nlsepy_fftw)
    {
        void *p[2] = {M->L.plan_f, M->L.plan_b};
        for (int q = 0; q < 2; ++q) {
            if (!p[q])
                continue;
            if (single(M))
                fftwf_destroy_plan((fftwf_plan)p[q]);
            else
                fftw_destroy_plan((fftw_plan)p[q]);
        }
    }
    M->L.plan_f = M->L.plan_b = NULL;
}

/* The kernel (times 1/N) on the transposed spectrum: (ky slab, kx, kz). */
static void make_kernel(struct nlse_dipolar_mpi *M)
{
    dipolar_layout G;
    dipolar_make_layout(&M->gp, &G);
    const size_t nh = M->n2 / 2 + 1, n0 = M->n0;
    const double invN = 1.0 / (double)(M->n0 * M->n1 * M->n2);
#pragma omp parallel for NLSE_THREADS schedule(static)
    for (ptrdiff_t jl = 0; jl < (ptrdiff_t)M->kn1; ++jl)
        for (size_t i = 0; i < n0; ++i)
            for (size_t k = 0; k < nh; ++k)
                put(M, M->L.kern, ((size_t)jl * n0 + i) * nh + k,
                    dipolar_kernel_value(&M->gp, &G, i, M->k1 + (size_t)jl, k) * invN);
}

/* Collective: buffers, plans and kernel of the dipolar term. */
static int enable_dipolar(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    if (L->plan_f)
        return NLSE_OK;
    int st = dipolar_check_dipolar(&M->gp);
    if (st)
        return st; /* the same parameters on every rank: the same answer */
    const size_t rs = rsize(M), nk = M->kn1 * M->n0 * (M->n2 / 2 + 1);
    if (!L->dens)
        L->dens = fftw_malloc(2 * M->alloc_local * rs);
    if (!L->kern)
        L->kern = malloc((nk ? nk : 1) * rs);
    if (!L->dens || !L->kern)
        st = nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar buffers (%zu values)",
                       2 * M->alloc_local);
    if ((st = agree(M, st, NULL)))
        return st;
    st = agree(M, make_plans(M), NULL);
    if (st) {
        free_plans(M);
        return st;
    }
    L->nk = nk;
    make_kernel(M);
    M->gp.dipolar = L->p.dipolar = 1;
    return NLSE_OK;
}

/* Collective: dens <- V_dd * |Psi|^2 from the density in dens. */
static void dipolar_fft(struct nlse_dipolar_mpi *M)
{
    double t = MPI_Wtime();
    if (single(M))
        dipolar_apply_fft_f(&M->L);
    else
        dipolar_apply_fft_d(&M->L);
    M->tm[2] += MPI_Wtime() - t;
}

/* ------------------------------------------------------------------ */
/* create and destroy                                                 */
/* ------------------------------------------------------------------ */

void nlse_dipolar_mpi_destroy(nlse_dipolar_mpi *M)
{
    if (!M)
        return;
    struct nlse_dipolar *L = &M->L;
    free_plans(M);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
        if (M->have_types) {
            MPI_Type_free(&M->line[0]);
            MPI_Type_free(&M->line[1]);
        }
        if (M->comm != MPI_COMM_NULL)
            MPI_Comm_free(&M->comm);
    }
    fftw_free(L->dens);
    free(L->kern);
    if (!M->ext) /* else the state lies in ext */
        free(L->psi);
    free(L->backup);
    free(L->U);
    for (int q = 0; q < 3; ++q) {
        if (q) {
            free(L->x[q]);
            free(L->w[q]);
            free(L->vtrap[q]);
            free(L->ob[q]);
        }
        free(L->ax[q].alpha_r);
        free(L->ax[q].gamma_r);
        free(L->ax[q].alpha_c);
        free(L->ax[q].gamma_c);
    }
    free(M->X0);
    free(M->W0);
    free(M->V0);
    free(M->O0);
    free(L->scratch);
    free(L->partial);
    free(M->pen);
    free(M->tbuf);
    free(M->xc);
    free(M->xs);
    free(M->yc);
    free(M->ys);
    free(M->cnt);
    free(M->rows);
    free(M->ext);
    free(M->hrow);
    free(M->sv);
    free(M->sw);
    free(M->kv);
    free(M->kw);
    free(M->dsend);
    free(M->drecv);
    free(M->coef);
    free(M);
}

static int spike_buffers(struct nlse_dipolar_mpi *M); /* the substructured x solve, below */

/* The local allocations of create (no communication). */
static int create_local(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    const size_t rs = rsize(M);
    int st;
    L->ndim = 3;
    L->off = 0;
    L->n[0] = M->ni;
    L->n[1] = M->n1;
    L->n[2] = M->n2;
    for (int q = 0; q < 3; ++q)
        L->h[q] = M->gp.spacing[q];
    L->N = M->ni * M->n1 * M->n2;
    L->nlp = 2 * (M->n2 / 2 + 1);
    L->g = M->gp.g;
    L->gdd = M->gp.gdd;
    L->p = M->gp;
    L->p.dipolar = 0;
    L->backup = malloc(2 * L->N * rs);
    L->partial = (double *)malloc(M->ni * M->n1 * sizeof(double));
    int have_x; /* the x solve's buffers */
    if (M->xsolve == NLSE_DIPOLAR_XSOLVE_TRANSPOSE) { /* packing buffer and x pencils */
        L->psi = malloc(2 * L->N * rs);
        M->tbuf = malloc(2 * L->N * rs);
        M->pen = malloc((M->nj ? 2 * M->n0 * M->nj * M->n2 : 1) * rs);
        have_x = M->tbuf && M->pen;
    } else { /* the local systems (halo, own rows, halo) around the state, and
                the top halo row */
        M->ext = malloc(2 * (M->ni + 2) * M->n1 * M->n2 * rs);
        L->psi = M->ext ? (char *)M->ext + 2 * M->n1 * M->n2 * rs : NULL;
        M->hrow = malloc(2 * M->n1 * M->n2 * rs);
        have_x = M->ext && M->hrow;
    }
    if (!L->psi || !L->backup || !L->partial || !have_x)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a slab of %zu points", L->N);
    if (M->xsolve != NLSE_DIPOLAR_XSOLVE_TRANSPOSE && (st = spike_buffers(M)))
        return st;
    if ((st = make_tables(M)))
        return st;
    size_t m01 = M->n0 > M->n1 ? M->n0 : M->n1;
    L->scratch_len = M->n2 + 2 * M->n2 * m01 + 64;
    if ((st = ensure_scratch(M)))
        return st;
    return make_types(M);
}

/* Every rank's NLSEPY_DIPOLAR_XSOLVE (M->tune); the highest choice wins
 * (collective).  Substructuring is the default: faster than the transposes
 * on CPU ranks (bench/RESULTS.md, dipolar section). */
static int choose_x_solve(struct nlse_dipolar_mpi *M)
{
    int mine = M->tune.xsolve, all = 0;
    int rc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, M->comm);
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Allreduce failed (error %d)", rc);
    M->xsolve = all;
    return NLSE_OK;
}

int nlse_dipolar_mpi_x_solve(const nlse_dipolar_mpi *M) { return M->xsolve; }

int nlse_dipolar_mpi_create(const nlse_dipolar_params *p, MPI_Comm comm, const nlse_comm *red,
                            nlse_dipolar_mpi **out)
{
    if (!p || !out || !red)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_mpi_create: NULL argument");
    *out = NULL;
    int st = dipolar_check_params(p);
    if (!st && p->geometry != NLSE_DIPOLAR_3D)
        st = nlse_fail(NLSE_ERR_VALUE, "the distributed solver runs the 3d geometry only, got %s",
                       dipolar_geometry_name(p->geometry));
    if (st)
        return st; /* the same parameters on every rank: the same answer, before any message */
    struct nlse_dipolar_mpi *M = (struct nlse_dipolar_mpi *)calloc(1, sizeof *M);
    if (!M)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    M->comm = MPI_COMM_NULL;
    if (MPI_Comm_dup(comm, &M->comm) != MPI_SUCCESS) {
        free(M);
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Comm_dup failed");
    }
    MPI_Comm_rank(M->comm, &M->rank);
    MPI_Comm_size(M->comm, &M->size);
    M->red = red;
    M->gp = *p;
    M->gp.dipolar = 0;
    M->n0 = p->shape[0];
    M->n1 = p->shape[1];
    M->n2 = p->shape[2];
    ptrdiff_t ln0, l0, ln1, l1;
    mpi_fftw_init();
    M->alloc_local = (size_t)fftw_mpi_local_size_3d_transposed(
        (ptrdiff_t)M->n0, (ptrdiff_t)M->n1, (ptrdiff_t)(M->n2 / 2 + 1), M->comm, &ln0, &l0, &ln1,
        &l1);
    M->ni = (size_t)ln0;
    M->i0 = (size_t)l0;
    M->kn1 = (size_t)ln1;
    M->k1 = (size_t)l1;
    M->L.is_real = 1;
    M->spike_mode = -1;
    dipolar_tuning_read(&M->tune);
    st = choose_x_solve(M);
    if (!st)
        st = agree(M, alloc_layout(M), NULL);
    if (!st)
        st = gather_layout(M);
    if (!st)
        st = check_layout(M); /* every rank knows every slab: the same answer */
    if (!st)
        st = agree(M, create_local(M), NULL);
    if (!st && p->dipolar)
        st = enable_dipolar(M);
    if (st) {
        nlse_dipolar_mpi_destroy(M);
        return st;
    }
    gaussian_state(M);
    *out = M;
    return NLSE_OK;
}

void nlse_dipolar_mpi_local(const nlse_dipolar_mpi *M, size_t *ni, size_t *i0, size_t *nj,
                            size_t *j0)
{
    *ni = M->ni;
    *i0 = M->i0;
    *nj = M->nj;
    *j0 = M->j0;
}

/* ------------------------------------------------------------------ */
/* state and parameters                                               */
/* ------------------------------------------------------------------ */

/* The first non-finite value of a slab array, named by its global index. */
static int check_finite(const struct nlse_dipolar_mpi *M, const void *a, int per_point,
                        const char *name)
{
    const size_t m = M->L.N * (size_t)per_point;
    for (size_t q = 0; q < m; ++q) {
        double v = single(M) ? ((const float *)a)[q] : ((const double *)a)[q];
        if (!isfinite(v)) {
            size_t pt = q / (size_t)per_point, k = pt % M->n2, j = (pt / M->n2) % M->n1;
            size_t i = M->i0 + pt / (M->n2 * M->n1);
            return nlse_fail(NLSE_ERR_VALUE, "%s contains a non-finite value at grid index "
                             "(%zu, %zu, %zu)", name, i, j, k);
        }
    }
    return NLSE_OK;
}

int nlse_dipolar_mpi_set_state(nlse_dipolar_mpi *M, const void *psi, int is_complex)
{
    if (!M || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dipolar_mpi_set_state: NULL argument");
    int st = check_finite(M, psi, is_complex ? 2 : 1, "psi");
    if (st)
        return st;
    nlse_parallel_memcpy(M->L.psi, psi, (is_complex ? 2 : 1) * M->L.N * rsize(M));
    M->L.is_real = !is_complex;
    return NLSE_OK;
}

int nlse_dipolar_mpi_state_is_real(const nlse_dipolar_mpi *M) { return M->L.is_real; }

int nlse_dipolar_mpi_get_state(const nlse_dipolar_mpi *M, void *out)
{
    const struct nlse_dipolar *L = &M->L;
    if (!L->is_real) {
        nlse_parallel_memcpy(out, L->psi, 2 * L->N * rsize(M));
        return NLSE_OK;
    }
    dipolar_real_to_complex(L->psi, out, L->N, M->gp.dtype);
    return NLSE_OK;
}

/* A real state becomes complex in place. */
static void promote(struct nlse_dipolar_mpi *M)
{
    struct nlse_dipolar *L = &M->L;
    if (!L->is_real)
        return;
    dipolar_promote_real(L->psi, L->N, M->gp.dtype);
    L->is_real = 0;
}

int nlse_dipolar_mpi_set_dt(nlse_dipolar_mpi *M, double dt)
{
    int st = dipolar_check_dt(dt);
    if (st)
        return st;
    M->gp.dt = M->L.p.dt = dt;
    for (int q = 0; q < 3; ++q)
        if ((st = make_cn(M, q, axis_len(M, q))))
            return st;
    return NLSE_OK;
}

int nlse_dipolar_mpi_set_couplings(nlse_dipolar_mpi *M, double g, double gdd)
{
    int st = dipolar_check_couplings(g, gdd);
    if (st)
        return st;
    if (gdd != 0 && !M->L.plan_f && (st = enable_dipolar(M)))
        return st;
    M->L.g = M->gp.g = g;
    M->L.gdd = M->gp.gdd = gdd;
    return NLSE_OK;
}

int nlse_dipolar_mpi_set_potential(nlse_dipolar_mpi *M, const void *U)
{
    struct nlse_dipolar *L = &M->L;
    if (!U) {
        free(L->U);
        L->U = NULL;
        return NLSE_OK;
    }
    int st = check_finite(M, U, 1, "V");
    if (st)
        return st;
    if (!L->U && !(L->U = malloc(L->N * rsize(M))))
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the potential");
    memcpy(L->U, U, L->N * rsize(M));
    return NLSE_OK;
}

int nlse_dipolar_mpi_set_obstacle(nlse_dipolar_mpi *M, const nlse_dipolar_obstacle *o)
{
    if (!o) {
        M->L.have_obst = 0;
        return NLSE_OK;
    }
    int st = dipolar_check_obstacle(o, 3);
    if (st)
        return st;
    M->L.obst = *o;
    M->L.have_obst = 1;
    return NLSE_OK;
}

/* Obstacle factors at time t over every x row (the slab points into them). */
static void obstacle_at(struct nlse_dipolar_mpi *M, double t)
{
    if (!M->L.have_obst)
        return;
    struct nlse_dipolar G = M->L;
    G.n[0] = M->n0;
    G.x[0] = M->X0;
    G.ob[0] = M->O0;
    if (single(M))
        dipolar_obstacle_factors_f(&G, t);
    else
        dipolar_obstacle_factors_d(&G, t);
}

/* ------------------------------------------------------------------ */
/* the x solve on x pencils                                           */
/* ------------------------------------------------------------------ */

/* The counts and displacements, in lines, of the transposes between the
 * slab and the pencils, for every rank r: on the slab side (slab[r],
 * slab[P + r]) the ni x yc[r] lines of rank r's y rows, packed in rank
 * order; on the pencil side (pencil[r], pencil[P + r]) rank r's xc[r] x
 * rows of nj lines, in place. */
static void transpose_counts(const struct nlse_dipolar_mpi *M, int *slab, int *pencil)
{
    const int P = M->size;
    size_t off = 0;
    for (int r = 0; r < P; ++r) {
        slab[r] = (int)(M->ni * M->yc[r]);
        slab[P + r] = (int)off;
        pencil[r] = (int)(M->xc[r] * M->nj);
        pencil[P + r] = (int)(M->xs[r] * M->nj);
        off += M->ni * M->yc[r];
    }
}

/* Slab (ni, ny, nz) -> pencils (nx, nj, nz): rank r gets the y rows
 * ys[r] .. of every local x row; what arrives from rank r is its x rows,
 * already in place in the pencil layout. */
static int to_pencils(struct nlse_dipolar_mpi *M)
{
    const int P = M->size, c = !M->L.is_real;
    const size_t line = (size_t)(c + 1) * M->n2 * rsize(M), n1 = M->n1, ni = M->ni;
    int *sc = M->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    transpose_counts(M, sc, rc);
    const char *src = (const char *)M->L.psi;
    char *buf = (char *)M->tbuf;
#pragma omp parallel for NLSE_THREADS schedule(static) collapse(2) if (ni * n1 * line > 262144)
    for (int r = 0; r < P; ++r)
        for (ptrdiff_t i = 0; i < (ptrdiff_t)ni; ++i)
            memcpy(buf + ((size_t)sd[r] + (size_t)i * M->yc[r]) * line,
                   src + ((size_t)i * n1 + M->ys[r]) * line, M->yc[r] * line);
    int rcode = MPI_Alltoallv(M->tbuf, sc, sd, M->line[c], M->pen, rc, rd, M->line[c], M->comm);
    if (rcode != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Alltoallv failed (error %d)", rcode);
    return NLSE_OK;
}

/* Pencils -> slab: the reverse of to_pencils. */
static int from_pencils(struct nlse_dipolar_mpi *M)
{
    const int P = M->size, c = !M->L.is_real;
    const size_t line = (size_t)(c + 1) * M->n2 * rsize(M), n1 = M->n1, ni = M->ni;
    int *sc = M->cnt, *sd = sc + P, *rc = sd + P, *rd = rc + P;
    transpose_counts(M, rc, sc);
    int rcode = MPI_Alltoallv(M->pen, sc, sd, M->line[c], M->tbuf, rc, rd, M->line[c], M->comm);
    if (rcode != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Alltoallv failed (error %d)", rcode);
    const char *buf = (const char *)M->tbuf;
    char *dst = (char *)M->L.psi;
#pragma omp parallel for NLSE_THREADS schedule(static) collapse(2) if (ni * n1 * line > 262144)
    for (int r = 0; r < P; ++r)
        for (ptrdiff_t i = 0; i < (ptrdiff_t)ni; ++i)
            memcpy(dst + ((size_t)i * n1 + M->ys[r]) * line,
                   buf + ((size_t)rd[r] + (size_t)i * M->yc[r]) * line, M->yc[r] * line);
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* the x solve by substructuring                                      */
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
 * R = F_(p+1).  A step moves one halo row each way and gathers the two
 * ends of every line from every rank (2 values a line) instead of two
 * transposes of the state. */

/* The substructured solve's small buffers (create: agreed by every rank). */
static int spike_buffers(struct nlse_dipolar_mpi *M)
{
    const size_t lanes = M->n1 * M->n2, P = (size_t)M->size;
    if (4 * lanes > (size_t)INT_MAX) /* the same on every rank */
        return nlse_fail(NLSE_ERR_VALUE, "%zu lines are too many for one message", lanes);
    M->sv = (double *)calloc(2 * M->ni, sizeof(double));
    M->sw = (double *)calloc(2 * M->ni, sizeof(double));
    M->kv = (double *)calloc(4 * P, sizeof(double));
    M->kw = (double *)calloc(4 * P, sizeof(double));
    M->dsend = (double *)malloc(4 * lanes * sizeof(double));
    M->drecv = (double *)malloc(4 * lanes * P * sizeof(double));
    M->coef = (double *)malloc(4 * lanes * sizeof(double));
    if (!M->sv || !M->sw || !M->kv || !M->kw || !M->dsend || !M->drecv || !M->coef)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the x solve's buffers");
    return NLSE_OK;
}

/* The responses and the rows of K^-1 for `mode` at the current dt
 * (dipolar_spike_setup: every rank computes every rank's ends itself). */
static int spike_prepare(struct nlse_dipolar_mpi *M, int mode)
{
    const double r = M->gp.dt * M->gp.kin / (M->L.h[0] * M->L.h[0]);
    int st = dipolar_spike_setup(r, mode == NLSE_DIPOLAR_REAL, M->size, M->xc, M->rank, M->sv,
                                 M->sw, M->kv, M->kw);
    if (!st) {
        M->spike_mode = mode;
        M->spike_dt = M->gp.dt;
    }
    return st;
}

/* The neighbours' rows next to the slab: the bottom one into `below` (the
 * row before the state), the top one into hrow (collective between
 * neighbours). */
static int spike_halo(struct nlse_dipolar_mpi *M, size_t rb, char *below)
{
    const int P = M->size, p = M->rank;
    const int up = p + 1 < P ? p + 1 : MPI_PROC_NULL, dn = p > 0 ? p - 1 : MPI_PROC_NULL;
    const char *psi = (const char *)M->L.psi;
    if (rb > (size_t)INT_MAX)
        return nlse_fail(NLSE_ERR_VALUE, "a row of %zu bytes is too long for one message", rb);
    int rc = MPI_Sendrecv(psi, (int)rb, MPI_BYTE, dn, 71, M->hrow, (int)rb, MPI_BYTE, up, 71,
                          M->comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        rc = MPI_Sendrecv(psi + (M->ni - 1) * rb, (int)rb, MPI_BYTE, up, 72, below, (int)rb,
                          MPI_BYTE, dn, 72, M->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Sendrecv failed (error %d)", rc);
    return NLSE_OK;
}

/* The Crank-Nicolson solve along x by substructuring (collective); the
 * correction also leaves the density (when `want`) and this rank's norm
 * (M->norm_part) from the rows it has just written. */
static int spike_solve_x(struct nlse_dipolar_mpi *M, int mode, int want)
{
    int st;
    /* a new mode or dt: every rank remakes its responses (the same
     * condition everywhere), and they agree before the halo exchange */
    if ((M->spike_mode != mode || M->spike_dt != M->gp.dt) &&
        (st = agree(M, spike_prepare(M, mode), NULL)))
        return st;
    struct nlse_dipolar *L = &M->L;
    const int P = M->size, lo = M->rank == 0, hi = M->rank == P - 1;
    const int vals = L->is_real ? 1 : 2;
    const size_t lanes = M->n1 * M->n2, rb = lanes * (size_t)vals * rsize(M), ni = M->ni;
    char *ext = (char *)L->psi - rb; /* a row of the rank below, the state, a row above */
    double t = MPI_Wtime();
    if ((st = spike_halo(M, rb, ext)))
        return st;
    M->tm[1] += MPI_Wtime() - t;
    if (!hi)
        memcpy(ext + (ni + 1) * rb, M->hrow, rb);
    const size_t n = ni + 2 - lo - hi, shift = M->n0 - n;
    void *base = ext + (lo ? rb : 0);
    if (single(M))
        dipolar_solve_x_pencils_f(L, mode, base, n, M->n1, shift);
    else
        dipolar_solve_x_pencils_d(L, mode, base, n, M->n1, shift);
    static const double zero2[2] = {0, 0};
    const double *w0 = hi ? zero2 : M->sw, *we = hi ? zero2 : M->sw + 2 * (ni - 1);
    const void *h = hi ? NULL : M->hrow; /* the top value the local solve took */
    if (single(M))
        dipolar_spike_ends_f((const float *)(ext + rb), (const float *)(ext + ni * rb),
                             (const float *)h, lanes, vals, w0, we, M->dsend);
    else
        dipolar_spike_ends_d((const double *)(ext + rb), (const double *)(ext + ni * rb),
                             (const double *)h, lanes, vals, w0, we, M->dsend);
    t = MPI_Wtime();
    int rc = MPI_Allgather(M->dsend, (int)(4 * lanes), MPI_DOUBLE, M->drecv, (int)(4 * lanes),
                           MPI_DOUBLE, M->comm);
    M->tm[1] += MPI_Wtime() - t;
    if (rc != MPI_SUCCESS)
        return nlse_fail(NLSE_ERR_BACKEND, "MPI_Allgather failed (error %d)", rc);
    const double *v = lo ? NULL : M->sv, *w = hi ? NULL : M->sw;
    if (single(M)) {
        dipolar_spike_coefs_f(M->drecv, P, lanes, M->kv, M->kw, (const float *)h, vals, M->coef);
        M->norm_part = dipolar_spike_apply_f((float *)L->psi, (const float *)(ext + rb), ni, lanes,
                                             vals, v, w, M->coef, L, want);
    } else {
        dipolar_spike_coefs_d(M->drecv, P, lanes, M->kv, M->kw, (const double *)h, vals, M->coef);
        M->norm_part = dipolar_spike_apply_d((double *)L->psi, (const double *)(ext + rb), ni,
                                             lanes, vals, v, w, M->coef, L, want);
    }
    M->norm_ready = 1;
    return NLSE_OK;
}

/* The Crank-Nicolson solve along x of the whole grid (collective). */
static int solve_x(struct nlse_dipolar_mpi *M, int mode, int want)
{
    if (M->xsolve == NLSE_DIPOLAR_XSOLVE_SUBSTRUCTURE)
        return spike_solve_x(M, mode, want);
    double t = MPI_Wtime();
    int st = to_pencils(M);
    M->tm[1] += MPI_Wtime() - t;
    if (st)
        return st;
    if (single(M))
        dipolar_solve_x_pencils_f(&M->L, mode, M->pen, M->n0, M->nj, 0);
    else
        dipolar_solve_x_pencils_d(&M->L, mode, M->pen, M->n0, M->nj, 0);
    t = MPI_Wtime();
    st = from_pencils(M);
    M->tm[1] += MPI_Wtime() - t;
    return st;
}

/* ------------------------------------------------------------------ */
/* stepping                                                           */
/* ------------------------------------------------------------------ */

/* Density (when asked) and the Simpson norm of the whole grid (this rank's
 * part from the x solve's correction when it made it: the same per-row
 * sums in the same order as dipolar_prepare). */
static int global_norm(struct nlse_dipolar_mpi *M, int want, double *nrm)
{
    double v = M->norm_ready ? M->norm_part
               : single(M)   ? dipolar_prepare_f(&M->L, want)
                             : dipolar_prepare_d(&M->L, want);
    M->norm_ready = 0;
    int st = rank_sum(M, &v, 1);
    *nrm = v;
    return st;
}

/* Local preparations of a collective call, then agreement: every rank
 * goes on, or every rank returns. */
static int begin(struct nlse_dipolar_mpi *M, int st, int complex_needed)
{
    if (!st)
        st = ensure_scratch(M);
    int any_complex = 0;
    st = agree(M, st, &any_complex);
    if (!st && (any_complex || complex_needed))
        promote(M); /* the transposes move the same kind of values everywhere */
    return st;
}

static void scale_state(struct nlse_dipolar_mpi *M, double f)
{
    if (single(M))
        dipolar_scale_f(&M->L, f);
    else
        dipolar_scale_d(&M->L, f);
}

int nlse_dipolar_mpi_step(nlse_dipolar_mpi *M, int mode, long n, double t0, double dg, double dgdd,
                          long *done)
{
    struct nlse_dipolar *L = &M->L;
    if (done)
        *done = 0;
    int st = dipolar_check_step(mode, n, t0, dg, dgdd);
    if (st || n == 0)
        return st; /* the same arguments on every rank */
    if (dgdd != 0 && !L->plan_f && (st = enable_dipolar(M)))
        return st;
    if ((st = begin(M, NLSE_OK, mode == NLSE_DIPOLAR_REAL)))
        return st;
    for (int q = 0; q < 4; ++q)
        M->tm[q] = 0;
    const double t_start = MPI_Wtime();
    const size_t bytes = (L->is_real ? 1 : 2) * L->N * rsize(M);
    nlse_parallel_memcpy(L->backup, L->psi, bytes);
    const double g_start = L->g, gdd_start = L->gdd;
    const int want = L->plan_f != NULL && (L->gdd != 0 || dgdd != 0);
    double nrm;
    M->norm_ready = 0;
    if ((st = global_norm(M, want, &nrm)))
        return st;
    if (!(nrm > 0) || !isfinite(nrm))
        return nlse_fail(nrm == 0 ? NLSE_ERR_VALUE : NLSE_ERR_BLOWUP,
                         nrm == 0 ? "the state is zero everywhere" : "the state is not finite");
    dipolar_step_args a;
    a.mode = mode;
    a.dt = M->gp.dt;
    a.want_density = want;
    a.scale = mode == NLSE_DIPOLAR_IMAG ? 1.0 / sqrt(nrm) : 1.0;
    for (long k = 0; k < n; ++k) {
        L->g += dg;
        L->gdd += dgdd;
        double t = mode == NLSE_DIPOLAR_REAL ? t0 + (double)k * M->gp.dt : t0;
        a.amp = dipolar_obstacle_amp(L, t);
        if (a.amp != 0)
            obstacle_at(M, t);
        a.g = L->g;
        a.gdd = want ? L->gdd : 0.0;
        if (want && L->gdd != 0)
            dipolar_fft(M);
        if (single(M))
            dipolar_pass_a_f(L, &a);
        else
            dipolar_pass_a_d(L, &a);
        if ((st = solve_x(M, mode, want)) || (st = global_norm(M, want, &nrm)))
            return st;
        if (!isfinite(nrm) || !(nrm > 0)) {
            nlse_parallel_memcpy(L->psi, L->backup, bytes);
            L->g = g_start;
            L->gdd = gdd_start;
            if (done)
                *done = k;
            return nlse_fail(NLSE_ERR_BLOWUP, "the state became non-finite at step %ld of %ld",
                             k + 1, n);
        }
        if (mode == NLSE_DIPOLAR_IMAG)
            a.scale = 1.0 / sqrt(nrm);
    }
    if (mode == NLSE_DIPOLAR_IMAG)
        scale_state(M, a.scale);
    M->tm[0] = MPI_Wtime() - t_start;
    L->last_seconds = M->tm[0];
    if (done)
        *done = n;
    return NLSE_OK;
}

/* ------------------------------------------------------------------ */
/* observables                                                        */
/* ------------------------------------------------------------------ */

/* Collective: dens <- V_dd * |Psi|^2 of the current state. */
static void dd_of_state(struct nlse_dipolar_mpi *M)
{
    if (single(M))
        dipolar_prepare_f(&M->L, 1);
    else
        dipolar_prepare_d(&M->L, 1);
    dipolar_fft(M);
}

/* The slab with e_lo rows below and e_hi above from the neighbours (the
 * five-point x derivative), in ext. */
static int halo(struct nlse_dipolar_mpi *M, char *ext, size_t e_lo, size_t e_hi)
{
    const int c = !M->L.is_real;
    const size_t plane = M->n1 * (size_t)(c + 1) * M->n2 * rsize(M);
    const int lines = (int)(2 * M->n1);
    memcpy(ext + e_lo * plane, M->L.psi, M->ni * plane);
    int below = M->rank > 0 ? M->rank - 1 : MPI_PROC_NULL;
    int above = M->rank < M->size - 1 ? M->rank + 1 : MPI_PROC_NULL;
    /* my last two rows up, the lower neighbour's last two rows in */
    int rc = MPI_Sendrecv((char *)M->L.psi + (M->ni - 2) * plane, lines, M->line[c], above, 71,
                          ext, e_lo ? lines : 0, M->line[c], below, 71, M->comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        rc = MPI_Sendrecv(M->L.psi, lines, M->line[c], below, 72, ext + (e_lo + M->ni) * plane,
                          e_hi ? lines : 0, M->line[c], above, 72, M->comm, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? NLSE_OK
                             : nlse_fail(NLSE_ERR_BACKEND, "MPI_Sendrecv failed (error %d)", rc);
}

int nlse_dipolar_mpi_observe(nlse_dipolar_mpi *M, double t, nlse_dipolar_obs *out)
{
    struct nlse_dipolar *L = &M->L;
    const size_t e_lo = M->rank > 0 ? 2 : 0, e_hi = M->rank < M->size - 1 ? 2 : 0;
    const size_t plane = M->n1 * 2 * M->n2 * rsize(M);
    char *ext = (char *)malloc((M->ni + e_lo + e_hi) * plane);
    int st = begin(M, ext ? NLSE_OK : nlse_fail(NLSE_ERR_NOMEM, "out of memory for the halo"), 0);
    if (st) {
        free(ext);
        return st;
    }
    const int use_dd = L->dens && L->gdd != 0;
    if (use_dd)
        dd_of_state(M);
    obstacle_at(M, t);
    if ((st = halo(M, ext, e_lo, e_hi))) {
        free(ext);
        return st;
    }
    struct nlse_dipolar V = *L; /* the slab with its halo rows */
    const size_t rs = rsize(M), first = M->i0 - e_lo;
    V.psi = ext;
    V.n[0] = M->ni + e_lo + e_hi;
    V.N = V.n[0] * M->n1 * M->n2;
    V.x[0] = M->X0 + first;
    V.w[0] = M->W0 + first;
    V.vtrap[0] = (char *)M->V0 + first * rs;
    V.ob[0] = (char *)M->O0 + first * rs;
    double T[OQ_N + 1] = {0};
    const void *dd = use_dd ? L->dens : NULL;
    st = single(M) ? dipolar_observe_rows_f(&V, t, e_lo, e_lo + M->ni, L->U, dd, T)
                   : dipolar_observe_rows_d(&V, t, e_lo, e_lo + M->ni, L->U, dd, T);
    free(ext);
    const size_t ic = M->n0 / 2;
    if (ic >= M->i0 && ic < M->i0 + M->ni) {
        size_t m = ((ic - M->i0) * M->n1 + M->n1 / 2) * M->n2 + M->n2 / 2;
        T[OQ_N] = single(M) ? dipolar_density_at_f(L, m) : dipolar_density_at_d(L, m);
    }
    if ((st = agree(M, st, NULL)) || (st = rank_sum(M, T, OQ_N + 1)))
        return st;
    dipolar_observe_finish(L, T, use_dd, T[OQ_N], out);
    return NLSE_OK;
}

int nlse_dipolar_mpi_dd_potential(nlse_dipolar_mpi *M, double *out)
{
    struct nlse_dipolar *L = &M->L;
    int st = L->plan_f ? NLSE_OK : enable_dipolar(M);
    if (st || (st = begin(M, NLSE_OK, 0)))
        return st;
    dd_of_state(M);
    const size_t rows = M->ni * M->n1, n2 = M->n2;
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < n2; ++k)
            out[r * n2 + k] = single(M) ? (double)((const float *)L->dens)[r * L->nlp + k]
                                        : ((const double *)L->dens)[r * L->nlp + k];
    return NLSE_OK;
}

int nlse_dipolar_mpi_potential(nlse_dipolar_mpi *M, double t, double *out)
{
    obstacle_at(M, t);
    double amp = dipolar_obstacle_amp(&M->L, t);
    if (single(M))
        dipolar_potential_f(&M->L, amp, out);
    else
        dipolar_potential_d(&M->L, amp, out);
    return NLSE_OK;
}

int nlse_dipolar_mpi_density_part(const nlse_dipolar_mpi *M, int keep_mask, double *out)
{
    if (keep_mask < 0 || keep_mask > 7)
        return nlse_fail(NLSE_ERR_VALUE, "keep_mask must be 0..7, got %d", keep_mask);
    if (single(M))
        dipolar_density_f(&M->L, keep_mask, out);
    else
        dipolar_density_d(&M->L, keep_mask, out);
    return NLSE_OK;
}

int nlse_dipolar_mpi_kernel(const nlse_dipolar_mpi *M, double *out)
{
    dipolar_layout G;
    dipolar_make_layout(&M->gp, &G);
    const size_t nh = M->n2 / 2 + 1;
    for (size_t i = 0; i < M->ni; ++i)
        for (size_t j = 0; j < M->n1; ++j)
            for (size_t k = 0; k < nh; ++k)
                out[(i * M->n1 + j) * nh + k] = dipolar_kernel_value(&M->gp, &G, M->i0 + i, j, k);
    return NLSE_OK;
}

/* The single-process traffic model of the slab plus the transposes (each
 * reads and writes the state twice: packing and the message). */
double nlse_dipolar_mpi_bytes_per_point_step(const nlse_dipolar_mpi *M, int mode)
{
    const struct nlse_dipolar *L = &M->L;
    double r = (double)rsize(M);
    double v = (mode == NLSE_DIPOLAR_IMAG && L->is_real) ? r : 2 * r;
    int dd = L->plan_f && L->gdd != 0;
    double b = 4 * v + (dd ? r : 0) + (L->U ? r : 0) + 8 * v;
    if (dd)
        b += r + 2 * (6.0 * r) + 2.5 * r;
    return b;
}

size_t nlse_dipolar_mpi_memory_bytes(const nlse_dipolar_mpi *M)
{
    const struct nlse_dipolar *L = &M->L;
    const size_t rs = rsize(M), N = L->N;
    size_t b = 2 * N * rs; /* backup */
    if (M->xsolve == NLSE_DIPOLAR_XSOLVE_TRANSPOSE) /* state, packing; pencils */
        b += 4 * N * rs + 2 * M->n0 * M->nj * M->n2 * rs;
    else /* the state inside the local systems' buffer, the top halo row; the
            lines' ends of every rank */
        b += 2 * (M->ni + 3) * M->n1 * M->n2 * rs +
             (8 + 4 * (size_t)M->size) * M->n1 * M->n2 * sizeof(double);
    if (L->dens)
        b += 2 * M->alloc_local * rs + L->nk * rs;
    if (L->U)
        b += N * rs;
    b += (size_t)L->nthreads * L->scratch_len * rs + M->ni * M->n1 * sizeof(double);
    return b;
}

void nlse_dipolar_mpi_timings(const nlse_dipolar_mpi *M, double out[4])
{
    for (int q = 0; q < 4; ++q)
        out[q] = M->tm[q];
}
