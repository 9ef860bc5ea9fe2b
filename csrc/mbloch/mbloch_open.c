/*
 * mbloch_open.c -- the density-matrix atoms of an open Maxwell-Bloch solver
 * on the CPU (nlsepy/mbloch.h, nlse_mbloch_set_open; docs/models/mbloch.md,
 * "Open systems"): the Lindblad master equation
 *   d rho/dt = i [H_D, rho] + decay channels + pure dephasing
 * with H_D the Hamiltonian of eq. 4 of source 004, each atom stepped by the
 * RK4 of algorithm 2, the polarisation of eq. 6 as sum F rho_{b a}.
 * mbloch.c calls it in place of its amplitude march and keeps the z march,
 * the reductions over processes and the outputs.  OpenMP over blocks of
 * atoms, each thread summing into its own buffers, added in thread order.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "mbloch_internal.h"
#include "mbloch_open.h"

typedef struct {
    double *P, *rho, dev;
    void *scratch;
} ocpu_thread;

struct mbloch_ocpu {
    nlse_mbloch_params p;
    int nlev, n2, nf, nq;
    mbloch_open_tab tab;
    /* rows of V (eq. 4): row i's entries q = off[i] .. off[i+1]-1 at column
     * col[q], 0.5 h_t F in hf[q], mode index mode[q], conjugated when conj[q] */
    int *off, *col, *mode, *conj;
    double *hf;
    /* eq. 6: mode L sums pm_f[q] rho[pm_e[q]], q = pm_off[L] .. pm_off[L+1]-1 */
    int *pm_off, *pm_e;
    double *pm_f;
    double *det, *weights, *shift, *rho0;
    ocpu_thread *thr;
    int nthr, nt_used;
};

static size_t ocpu_round(size_t b) { return (b + 63) & ~(size_t)63; }

static inline int ocpu_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int ocpu_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

enum { MBLOCH_OPEN_FIRST, MBLOCH_OPEN_MIDDLE, MBLOCH_OPEN_LAST };

/* The stage and record kernels are also compiled for x86-64-v3 (AVX2, FMA)
 * and x86-64-v4 (AVX-512) and chosen at load time, as in mbloch.c. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12
#define OCPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OCPU_CLONES
#endif
#if defined(__GNUC__)
#define OCPU_INLINE static inline __attribute__((always_inline))
#else
#define OCPU_INLINE static inline
#endif

#define OCAT_(a, b) a##b
#define OCAT(a, b) OCAT_(a, b)
#define REAL float
#define BLK 16
#define FN(name) OCAT(name, _f)
#include "mbloch_open_kernels.inc"
#undef FN
#undef BLK
#undef REAL
#define REAL double
#define BLK 8
#define FN(name) OCAT(name, _d)
#include "mbloch_open_kernels.inc"
#undef FN
#undef BLK
#undef REAL

static void free_othreads(mbloch_ocpu *o)
{
    for (int t = 0; t < o->nthr; ++t) {
        free(o->thr[t].P);
        free(o->thr[t].rho);
        free(o->thr[t].scratch);
    }
    free(o->thr);
    o->thr = NULL;
    o->nthr = 0;
}

void mbloch_ocpu_destroy(mbloch_ocpu *o)
{
    if (!o)
        return;
    free_othreads(o);
    mbloch_open_free(&o->tab);
    void *arr[] = {o->off, o->col, o->mode, o->conj, o->hf, o->pm_off, o->pm_e, o->pm_f,
                   o->det, o->weights, o->shift, o->rho0};
    nlse_free_all(arr, sizeof arr / sizeof arr[0]);
    free(o);
}

/* The rows of V and the terms of eq. 6 (the bands of mbloch_internal.h). */
static void build_rows(mbloch_ocpu *o, const double *F)
{
    const nlse_mbloch_params *p = &o->p;
    const int ng = p->n_g, ne = p->n_e;
    int q = 0;
    for (int i = 0; i < o->nlev; ++i) {
        const int g = i < ng, r = g ? i : i - ng;
        const int lo = g ? mbloch_lo_e(r, p->l_min) : mbloch_lo_g(r, p->l_max);
        const int hi = g ? mbloch_hi_e(r, p->l_max, ne) : mbloch_hi_g(r, p->l_min, ng);
        o->off[i] = q;
        for (int x = lo; x <= hi; ++x, ++q) {
            const int m = g ? r : x, n = g ? x : r;
            o->col[q] = g ? ng + x : x;
            o->hf[q] = 0.5 * p->h_t * F[(size_t)m * ne + n];
            o->mode[q] = n - m - p->l_min;
            o->conj[q] = g;
        }
    }
    o->off[o->nlev] = q;
    q = 0;
    for (int L = 0; L < o->nf; ++L) {
        const int l = p->l_min + L, lo = mbloch_imax(0, -l), hi = mbloch_imin(ng - 1, ne - 1 - l);
        o->pm_off[L] = q;
        for (int m = lo; m <= hi; ++m, ++q) {
            o->pm_e[q] = (ng + m + l) * o->nlev + m;
            o->pm_f[q] = F[(size_t)m * ne + m + l];
        }
    }
    o->pm_off[o->nf] = q;
}

static void *oalloc(size_t n, int *fail)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        *fail = 1;
    return p;
}

int mbloch_ocpu_create(const nlse_mbloch_params *p, const double *F, const double *det, const double *weights,
                       const nlse_mbloch_open *op, mbloch_ocpu **out)
{
    *out = NULL;
    mbloch_ocpu *o = (mbloch_ocpu *)calloc(1, sizeof *o);
    if (!o)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_open: out of memory");
    int st = mbloch_open_build(p, op, &o->tab);
    if (st) {
        mbloch_ocpu_destroy(o);
        return st;
    }
    o->p = *p;
    o->nlev = p->n_g + p->n_e;
    o->n2 = o->nlev * o->nlev;
    o->nf = p->l_max - p->l_min + 1;
    const long K = nlse_mbloch_couplings(p);
    o->nq = (int)(2 * K);
    const size_t nq = (size_t)o->nq, na = (size_t)p->n_atoms, nl = (size_t)o->nlev;
    int fail = 0;
    o->off = oalloc((nl + 1) * sizeof(int), &fail);
    o->col = oalloc(nq * sizeof(int), &fail);
    o->mode = oalloc(nq * sizeof(int), &fail);
    o->conj = oalloc(nq * sizeof(int), &fail);
    o->hf = oalloc(nq * sizeof(double), &fail);
    o->pm_off = oalloc(((size_t)o->nf + 1) * sizeof(int), &fail);
    o->pm_e = oalloc((size_t)K * sizeof(int), &fail);
    o->pm_f = oalloc((size_t)K * sizeof(double), &fail);
    o->det = oalloc(na * sizeof(double), &fail);
    o->weights = oalloc(na * sizeof(double), &fail);
    o->rho0 = oalloc(2 * na * o->n2 * sizeof(double), &fail);
    if (op->shift)
        o->shift = oalloc(na * nl * sizeof(double), &fail);
    if (fail) {
        mbloch_ocpu_destroy(o);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_open: out of memory (n_atoms = %d, n_lev = %d)",
                         p->n_atoms, o->nlev);
    }
    build_rows(o, F);
    memcpy(o->det, det, na * sizeof(double));
    memcpy(o->weights, weights, na * sizeof(double));
    memcpy(o->rho0, op->rho0, 2 * na * o->n2 * sizeof(double));
    if (op->shift)
        memcpy(o->shift, op->shift, na * nl * sizeof(double));
    *out = o;
    return NLSE_OK;
}

static int ensure_othreads(mbloch_ocpu *o, int nthr, int want_rho)
{
    if (nthr <= o->nthr && (!want_rho || o->thr[0].rho))
        return NLSE_OK;
    free_othreads(o);
    o->thr = (ocpu_thread *)calloc((size_t)nthr, sizeof(ocpu_thread));
    if (!o->thr)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch: out of memory for %d threads", nthr);
    o->nthr = nthr;
    const size_t scr = o->p.dtype == NLSE_COMPLEX64 ? oscratch_f(o) : oscratch_d(o);
    for (int t = 0; t < nthr; ++t) {
        ocpu_thread *th = &o->thr[t];
        th->P = (double *)malloc(2 * (size_t)o->p.n_t * o->nf * sizeof(double));
        th->rho = want_rho ? (double *)malloc(2 * (size_t)o->p.n_t * o->n2 * sizeof(double)) : NULL;
        th->scratch = malloc(scr + 64);
        if (!th->P || (want_rho && !th->rho) || !th->scratch) {
            free_othreads(o);
            return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch: out of memory for the density-matrix buffers "
                             "of %d threads", nthr);
        }
    }
    return NLSE_OK;
}

int mbloch_ocpu_atoms(mbloch_ocpu *o, const double *fields, double scale, double *P, double *rho, double *dev)
{
    const int f32 = o->p.dtype == NLSE_COMPLEX64, blk = f32 ? 16 : 8;
    const int nb = (o->p.n_atoms + blk - 1) / blk;
    int nthr = nlse_get_num_threads();
    if (nthr > nb)
        nthr = nb;
    int st = ensure_othreads(o, nthr, rho != NULL);
    if (st)
        return st;
    if (f32)
        oatoms_f(o, fields, rho != NULL, nthr);
    else
        oatoms_d(o, fields, rho != NULL, nthr);
    const int nt = o->nt_used, nf2 = 2 * o->nf, nr = 2 * o->n2, n_t = o->p.n_t;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((long)n_t * nf2 > 65536)
    for (int k = 0; k < n_t; ++k) {
        for (int c = 0; c < nf2; ++c) {
            double acc = 0;
            for (int t = 0; t < nt; ++t)
                acc += o->thr[t].P[(size_t)k * nf2 + c];
            P[(size_t)k * nf2 + c] = scale * acc;
        }
        for (int c = 0; rho && c < nr; ++c) {
            double acc = 0;
            for (int t = 0; t < nt; ++t)
                acc += o->thr[t].rho[(size_t)k * nr + c];
            rho[(size_t)k * nr + c] = acc;
        }
    }
    for (int t = 0; t < nt; ++t)
        if (!(o->thr[t].dev <= *dev))
            *dev = o->thr[t].dev;
    return NLSE_OK;
}
