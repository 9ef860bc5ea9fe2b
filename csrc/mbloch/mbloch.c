/*
 * mbloch.c -- the CPU Maxwell-Bloch solver (Demeter, "Solving the
 * Maxwell-Bloch equations for resonant nonlinear optics using GPUs", source
 * 004): fields eps_l(z, t) of eq. 1 propagated by eq. 2 through an
 * inhomogeneously broadened ensemble of multi-level atoms obeying the optical
 * Bloch equations, eq. 4 (Hamiltonian of eq. 5), with the polarisation of
 * eq. 6, in the Rabi-frequency units of nlsepy/mbloch.h.
 *
 * Scheme: algorithm 1 -- at each z_j every atom marches the time grid by the
 * RK4 of algorithm 2 (mean coupling at the midpoint stages), the
 * polarisation is reduced over the atoms and the fields advance by
 * Adams-Bashforth 2 in z, started by euler_substeps explicit Euler steps.
 * Algorithm 3 (OpenMP over atoms, one barrier per stage) is reorganised:
 * each thread takes contiguous blocks of atoms and every block marches the
 * whole time grid on its own (mbloch_kernels.inc, float and double), the
 * "one atom's whole evolution, then the next" order of section 3 with the
 * polarisation race avoided by per-thread buffers summed in a fixed order.
 *
 * A distributed run (nlse_mbloch_set_comm) gives each process a block of
 * the atoms: the sum of eq. 6 over D becomes the sum over the processes of
 * their blocks' sums, added by the nlse_comm table in rank order once per
 * atom solve, before the fields advance (so the fields stay the same on
 * every process).
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "mbloch_internal.h"
#include "mbloch_open.h"

/* Flush subnormals to zero in the march (amplitudes of far, weakly coupled
 * levels in single precision); values below 1e-38 carry no physics here. */
#if defined(__SSE2__) || defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define MBLOCH_FTZ_BEGIN const unsigned int mbloch_csr_ = _mm_getcsr(); _mm_setcsr(mbloch_csr_ | 0x8040u);
#define MBLOCH_FTZ_END _mm_setcsr(mbloch_csr_);
#else
#define MBLOCH_FTZ_BEGIN
#define MBLOCH_FTZ_END
#endif

/* The kernels of the march (coefficients, stage, record) are also compiled
 * for x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) and chosen at load
 * time; CMakeLists.txt allows FMA contraction for this file. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12
#define MBLOCH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MBLOCH_CLONES
#endif

/* Helpers of the cloned kernels are inlined into each clone (a call would
 * run them as baseline x86-64 code). */
#if defined(__GNUC__)
#define MBLOCH_INLINE static inline __attribute__((always_inline))
#else
#define MBLOCH_INLINE static inline
#endif

/* One OpenMP thread's buffers: its atoms' sums over t_k (double) and the
 * scratch holding one block's states and coefficients. */
typedef struct {
    double *P;      /* 2 n_t N_F: sum_D w_D sum_m F conj(a_m) b_{m+l}       */
    double *pop;    /* n_t n_lev                                             */
    double dev;     /* max | |psi|^2 - 1 | of its atoms                      */
    void *scratch;  /* block states and coefficients (mbloch_kernels.inc)   */
} mbloch_thread;

/* Rows of the stage kernel: one or two consecutive output levels of the
 * same kind walking the union x0 .. x0+u-1 of their bands; coefficients
 * at c: (re, im) of the first row, then of the second, u entries each. */
typedef struct {
    int row, rows, x0, u, c;
} mbloch_tile;

struct nlse_mbloch {
    nlse_mbloch_params p;
    int nlev, nf;
    long nq;            /* coefficients of both off-diagonal blocks: 2 x couplings */
    /* bands: output level i couples to levels lo[i] + (q - off[i]),
     * q = off[i] .. off[i+1]-1 (ground rows first, then excited rows) */
    int *lo, *off;
    int *src;           /* row i's coefficients read eps from src[i] of the
                           forward-and-reversed copy (mbloch_kernels.inc) */
    mbloch_tile *tile;
    int ntile;
    int *crow, *cu;     /* row i's real parts at crow[i], imaginary cu[i] on */
    long ncoef;         /* coefficients per time level in the tile layout */
    double *hf_r, *hf_i; /* h_t F / 2, sign of the imaginary part (conj on ground rows) */
    /* eq. 6 by mode: mode index L = l - l_min pairs ground m = pm_lo[L] + r
     * with excited m + l, F[m][m + l] = pf[pm_off[L] + r], r < pm_off[L+1] - pm_off[L] */
    int *pm_lo, *pm_off;
    double *pf;
    double *det, *weights, *psi0;
    double *fields, *fnext;   /* eps_l(z_j, t_k), next fields (2 n_t N_F) */
    double *P;          /* polarisation of the last atom solve at a z_j  */
    double *P_prev;     /* that of z_{j-1} (AB2)                          */
    double *P_sub;      /* Euler sub-steps of the start                   */
    double *pop;        /* populations of the last solve that asked       */
    mbloch_thread *thr;
    int nthr;           /* thread buffers allocated */
    int nt_used;        /* threads of the last march */
    long j;             /* z index of the current fields */
    double dev;         /* norm deviation over every atom solve so far */
    double last_seconds;
    const nlse_comm *comm; /* the other processes' atoms (NULL: none)   */
    double *red;        /* 2 n_t N_F + npop: what comm->sum adds           */
    size_t npop;        /* doubles of pop: n_t n_lev, or 2 n_t n_lev^2 (open) */
    mbloch_ocpu *open;  /* the density-matrix atoms of an open system, or NULL */
    double *F;          /* n_g n_e, for nlse_mbloch_set_open */
};

static size_t mbloch_round(size_t b) { return (b + 63) & ~(size_t)63; }

static inline int mbloch_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int mbloch_num_threads(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* RK4 stage kinds of the march (mbloch_kernels.inc) */
enum { MBLOCH_FIRST, MBLOCH_MIDDLE, MBLOCH_LAST };

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define CAT3(a, b, c) CAT(CAT(a, b), c)

/* Atoms per block: two AVX-512 registers of lanes per real or imaginary
 * part (32 float, 16 double: with two rows per tile, 16 independent
 * accumulation chains keep both FMA pipes busy), or half that when the wide
 * blocks would be fewer than the threads (solve_atoms). */
#define REAL float
#define BLK 32
#define FN(name) CAT3(name, _f, BLK)
#include "mbloch_kernels.inc"
#undef BLK
#define BLK 16
#include "mbloch_kernels.inc"
#undef FN
#undef BLK
#undef REAL

#define REAL double
#define BLK 16
#define FN(name) CAT3(name, _d, BLK)
#include "mbloch_kernels.inc"
#undef BLK
#define BLK 8
#include "mbloch_kernels.inc"
#undef FN
#undef BLK
#undef REAL

#define MBLOCH_BLK_MAX 32 /* lanes of the widest block (float) */

/* ------------------------------------------------------------------ */
/* handle                                                             */
/* ------------------------------------------------------------------ */

/* Zeroed memory; sets *fail when there is none. */
static void *mbloch_alloc(size_t n, int *fail)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        *fail = 1;
    return p;
}

/* n bytes at a 64-byte boundary (C99 has no aligned_alloc); free with
 * mbloch_aligned_free. */
static void *mbloch_aligned(size_t n)
{
    void *raw = malloc(n + 64 + sizeof(void *));
    if (!raw)
        return NULL;
    uintptr_t a = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)a)[-1] = raw;
    return (void *)a;
}

static void mbloch_aligned_free(void *p)
{
    if (p)
        free(((void **)p)[-1]);
}

static void free_threads(nlse_mbloch *s)
{
    for (int t = 0; t < s->nthr; ++t) {
        free(s->thr[t].P);
        free(s->thr[t].pop);
        mbloch_aligned_free(s->thr[t].scratch);
    }
    free(s->thr);
    s->thr = NULL;
    s->nthr = 0;
}

void nlse_mbloch_destroy(nlse_mbloch *s)
{
    if (!s)
        return;
    free_threads(s);
    mbloch_ocpu_destroy(s->open);
    void *arr[] = {s->lo,      s->off,    s->src,     s->tile, s->crow,   s->cu,    s->hf_r,
                   s->hf_i,    s->pm_lo,  s->pm_off,  s->pf,   s->det,    s->weights,
                   s->psi0,    s->fields, s->fnext,   s->P,    s->P_prev, s->P_sub, s->pop,
                   s->red,     s->F};
    nlse_free_all(arr, sizeof arr / sizeof arr[0]);
    free(s);
}

/* The bands of eq. 4 (mbloch_internal.h): ground row m couples to excited
 * n = lo_e(m)..hi_e(m) with conj(eps_{n-m}) F[m][n] / 2, excited row n to
 * ground m = lo_g(n)..hi_g(n) with eps_{n-m} F[m][n] / 2. */
static void build_bands(nlse_mbloch *s, const double *F)
{
    const nlse_mbloch_params *p = &s->p;
    const int ng = p->n_g, ne = p->n_e;
    int q = 0;
    for (int i = 0; i < s->nlev; ++i) {
        const int ground = i < ng;
        const int lo = ground ? mbloch_lo_e(i, p->l_min) : mbloch_lo_g(i - ng, p->l_max);
        const int hi = ground ? mbloch_hi_e(i, p->l_max, ne) : mbloch_hi_g(i - ng, p->l_min, ng);
        s->off[i] = q;
        s->lo[i] = hi < lo ? 0 : ground ? ng + lo : lo; /* empty bands read nothing */
        /* mode index of the first coupling, running up (ground) or down */
        const int L0 = ground ? lo - i - p->l_min : (i - ng) - lo - p->l_min;
        s->src[i] = hi < lo ? 0 : ground ? L0 : 2 * s->nf - 1 - L0;
        for (int x = lo; x <= hi; ++x, ++q) {
            const int m = ground ? i : x, n = ground ? x : i - ng;
            const double f = F[(size_t)m * ne + n];
            s->hf_r[q] = 0.5 * p->h_t * f;
            s->hf_i[q] = ground ? -s->hf_r[q] : s->hf_r[q];
        }
    }
    s->off[s->nlev] = q;
    q = 0;
    for (int L = 0; L < s->nf; ++L) {
        const int l = p->l_min + L, lo = mbloch_imax(0, -l), hi = mbloch_imin(ng - 1, ne - 1 - l);
        s->pm_off[L] = q;
        s->pm_lo[L] = hi < lo ? 0 : lo;
        for (int m = lo; m <= hi; ++m, ++q)
            s->pf[q] = F[(size_t)m * ne + m + l];
    }
    s->pm_off[s->nf] = q;
}

/* Pair consecutive rows of each kind into tiles (mbloch_tile); a kind with an
 * odd count ends with a one-row tile. */
static void build_tiles(nlse_mbloch *s)
{
    const int ng = s->p.n_g;
    long c = 0;
    s->ntile = 0;
    for (int i = 0; i < s->nlev;) {
        const int end = i < ng ? ng : s->nlev, rows = i + 1 < end ? 2 : 1;
        int x0 = INT_MAX, x1 = -1; /* the union of the rows' bands */
        for (int r = 0; r < rows; ++r) {
            const int cnt = s->off[i + r + 1] - s->off[i + r];
            if (cnt > 0) {
                x0 = mbloch_imin(x0, s->lo[i + r]);
                x1 = mbloch_imax(x1, s->lo[i + r] + cnt - 1);
            }
        }
        mbloch_tile *T = &s->tile[s->ntile++];
        T->row = i;
        T->rows = rows;
        T->x0 = x1 < 0 ? 0 : x0;
        T->u = x1 < 0 ? 0 : x1 - x0 + 1;
        T->c = (int)c;
        for (int r = 0; r < rows; ++r) {
            const int empty = s->off[i + r + 1] == s->off[i + r];
            s->crow[i + r] = (int)(c + 2 * r * T->u + (empty ? 0 : s->lo[i + r] - T->x0));
            s->cu[i + r] = T->u;
        }
        c += 2L * rows * T->u;
        i += rows;
    }
    s->ncoef = c;
}

int nlse_mbloch_create(const nlse_mbloch_params *p, const double *F, const double *detunings,
                   const double *weights, const double *psi0, const double *fields0, nlse_mbloch **out)
{
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_create: NULL output handle");
    *out = NULL;
    int st = nlse_mbloch_check_params(p);
    if (st || (st = mbloch_check_arrays(p, F, detunings, weights, psi0, fields0)))
        return st;
    nlse_mbloch *s = (nlse_mbloch *)calloc(1, sizeof *s);
    if (!s)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_create: out of memory");
    s->p = *p;
    s->nlev = p->n_g + p->n_e;
    s->nf = p->l_max - p->l_min + 1;
    s->nq = 2 * nlse_mbloch_couplings(p);
    const size_t nl = (size_t)s->nlev, na = (size_t)p->n_atoms, nq = (size_t)s->nq;
    const size_t nfield = 2 * (size_t)p->n_t * s->nf * sizeof(double);
    int fail = 0;
    s->lo = mbloch_alloc(nl * sizeof(int), &fail);
    s->off = mbloch_alloc((nl + 1) * sizeof(int), &fail);
    s->src = mbloch_alloc(nl * sizeof(int), &fail);
    s->tile = mbloch_alloc(nl * sizeof(mbloch_tile), &fail);
    s->crow = mbloch_alloc(nl * sizeof(int), &fail);
    s->cu = mbloch_alloc(nl * sizeof(int), &fail);
    s->hf_r = mbloch_alloc(nq * sizeof(double), &fail);
    s->hf_i = mbloch_alloc(nq * sizeof(double), &fail);
    s->pm_lo = mbloch_alloc((size_t)s->nf * sizeof(int), &fail);
    s->pm_off = mbloch_alloc(((size_t)s->nf + 1) * sizeof(int), &fail);
    s->pf = mbloch_alloc(nq / 2 * sizeof(double), &fail);
    s->det = mbloch_alloc(na * sizeof(double), &fail);
    s->weights = mbloch_alloc(na * sizeof(double), &fail);
    s->psi0 = mbloch_alloc(2 * na * nl * sizeof(double), &fail);
    s->fields = mbloch_alloc(nfield, &fail);
    s->fnext = mbloch_alloc(nfield, &fail);
    s->P = mbloch_alloc(nfield, &fail);
    s->P_prev = mbloch_alloc(nfield, &fail);
    s->P_sub = mbloch_alloc(nfield, &fail);
    s->F = mbloch_alloc((size_t)p->n_g * p->n_e * sizeof(double), &fail);
    s->npop = (size_t)p->n_t * nl;
    s->pop = mbloch_alloc(s->npop * sizeof(double), &fail);
    if (fail) {
        nlse_mbloch_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_create: out of memory (n_t = %d, N_F = %d, "
                         "n_atoms = %d)", p->n_t, s->nf, p->n_atoms);
    }
    build_bands(s, F);
    build_tiles(s);
    memcpy(s->F, F, (size_t)p->n_g * p->n_e * sizeof(double));
    memcpy(s->det, detunings, na * sizeof(double));
    memcpy(s->weights, weights, na * sizeof(double));
    memcpy(s->psi0, psi0, 2 * na * nl * sizeof(double));
    memcpy(s->fields, fields0, nfield);
    *out = s;
    return NLSE_OK;
}

/* Bytes of one thread's scratch (the double layout covers the float one). */
static size_t scratch_bytes(const nlse_mbloch *s)
{
    const size_t st = mbloch_round((size_t)s->nlev * MBLOCH_BLK_MAX * sizeof(float));
    const size_t co = mbloch_round((size_t)s->ncoef * sizeof(double));
    const size_t pf = mbloch_round((size_t)s->pm_off[s->nf] * sizeof(double));
    return 9 * st + 3 * co + pf + mbloch_round(4 * (size_t)s->nf * sizeof(double));
}

/* Thread buffers for nthr threads (kept between calls, grown on demand). */
static int ensure_threads(nlse_mbloch *s, int nthr)
{
    if (nthr <= s->nthr)
        return NLSE_OK;
    free_threads(s);
    s->thr = (mbloch_thread *)calloc((size_t)nthr, sizeof(mbloch_thread));
    if (!s->thr)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch: out of memory for %d threads", nthr);
    s->nthr = nthr;
    const size_t np = 2 * (size_t)s->p.n_t * s->nf, npop = (size_t)s->p.n_t * s->nlev;
    for (int t = 0; t < nthr; ++t) {
        s->thr[t].P = (double *)malloc(np * sizeof(double));
        s->thr[t].pop = (double *)malloc(npop * sizeof(double));
        s->thr[t].scratch = mbloch_aligned(scratch_bytes(s));
        if (!s->thr[t].P || !s->thr[t].pop || !s->thr[t].scratch) {
            free_threads(s);
            return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch: out of memory for the buffers of %d "
                             "threads", nthr);
        }
    }
    return NLSE_OK;
}

static int all_finite(const double *x, size_t n)
{
    int ok = 1;
#pragma omp parallel for NLSE_THREADS schedule(static) reduction(&& : ok) if (n > 65536)
    for (size_t q = 0; q < n; ++q)
        ok = ok && isfinite(x[q]);
    return ok;
}

/* The sums over the processes of a distributed run: s->red holds this
 * process's sum over its atoms of eq. 6 (2 n_t N_F, before beta) and, with
 * pop, its populations (n_t n_lev); afterwards P = beta * the total, pop the
 * total and s->dev the largest norm deviation of every process.  `failed`
 * (a status): this process's atoms were not solved; it takes part with NaN
 * (so that the others see a blow-up and no process waits) and returns it. */
static int reduce_processes(nlse_mbloch *s, double *P, double *pop, int failed)
{
    const size_t np = 2 * (size_t)s->p.n_t * s->nf, npop = s->npop;
    const size_t n = np + (pop ? npop : 0);
    if (failed) {
        for (size_t q = 0; q < n; ++q)
            s->red[q] = NAN;
        s->dev = NAN;
    }
    const char *msg = nlse_last_error();
    char saved[256];
    strncpy(saved, msg ? msg : "", sizeof saved - 1);
    saved[sizeof saved - 1] = '\0';
    int st = s->comm->sum(s->comm->ctx, s->red, n);
    const int st2 = s->comm->max(s->comm->ctx, &s->dev, 1);
    if (failed)
        return nlse_fail(failed, "%s", saved); /* this process's own error */
    if (st || (st = st2))
        return st;
    const double beta = s->p.beta;
    for (size_t q = 0; q < np; ++q)
        P[q] = beta * s->red[q];
    if (pop)
        memcpy(pop, s->red + np, npop * sizeof(double));
    return NLSE_OK;
}

/* The atoms of an open system (mbloch_open.c) at `fields`: P and the
 * ensemble density matrix (pop, when given) as solve_atoms gives its sums. */
static int solve_open(nlse_mbloch *s, const double *fields, double *P, double *pop)
{
    const size_t np = 2 * (size_t)s->p.n_t * s->nf;
    double *sP = s->comm ? s->red : P, *spop = pop && s->comm ? s->red + np : pop;
    int st = mbloch_ocpu_atoms(s->open, fields, s->comm ? 1.0 : s->p.beta, sP, spop, &s->dev);
    if (s->comm && (st = reduce_processes(s, P, pop, st)))
        return st;
    if (st)
        return st;
    if (!all_finite(P, np))
        return nlse_fail(NLSE_ERR_BLOWUP, "nlse_mbloch: the polarisation became non-finite at z "
                         "index %ld (trace deviation %g); the fields of z index %ld are kept",
                         s->j, s->dev, s->j);
    return NLSE_OK;
}

/* Every atom at `fields` (algorithm 1, lines 2-7): P = beta * the sum over
 * threads in thread order (then over the processes of a distributed run),
 * populations into pop when given, the norm deviation into s->dev.
 * NLSE_ERR_BLOWUP when P is not finite. */
static int solve_atoms(nlse_mbloch *s, const double *fields, double *P, double *pop)
{
    if (s->open)
        return solve_open(s, fields, P, pop);
    const int f32 = s->p.dtype == NLSE_COMPLEX64, wide = f32 ? 32 : 16;
    int nthr = nlse_get_num_threads();
    /* the wide blocks unless they would leave threads idle */
    const int blk = (s->p.n_atoms + wide - 1) / wide >= nthr ? wide : wide / 2;
    const int nb = (s->p.n_atoms + blk - 1) / blk;
    if (nthr > nb)
        nthr = nb;
    int st = ensure_threads(s, nthr);
    if (st)
        return s->comm ? reduce_processes(s, P, pop, st) : st;
    const int want = pop != NULL;
    if (f32)
        (blk == 32 ? atoms_f32 : atoms_f16)(s, fields, want, nthr);
    else
        (blk == 16 ? atoms_d16 : atoms_d8)(s, fields, want, nthr);
    const int nt = s->nt_used, nf2 = 2 * s->nf, nlev = s->nlev, n_t = s->p.n_t;
    /* distributed: this process's sums (before beta) into s->red first */
    const double beta = s->comm ? 1.0 : s->p.beta;
    double *sP = s->comm ? s->red : P;
    double *spop = pop && s->comm ? s->red + (size_t)n_t * nf2 : pop;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((long)n_t * nf2 > 65536)
    for (int k = 0; k < n_t; ++k) {
        for (int c = 0; c < nf2; ++c) {
            double acc = 0;
            for (int t = 0; t < nt; ++t)
                acc += s->thr[t].P[(size_t)k * nf2 + c];
            sP[(size_t)k * nf2 + c] = beta * acc;
        }
        if (spop) {
            for (int i = 0; i < nlev; ++i) {
                double acc = 0;
                for (int t = 0; t < nt; ++t)
                    acc += s->thr[t].pop[(size_t)k * nlev + i];
                spop[(size_t)k * nlev + i] = acc;
            }
        }
    }
    for (int t = 0; t < nt; ++t)
        if (!(s->thr[t].dev <= s->dev))
            s->dev = s->thr[t].dev;
    if (s->comm && (st = reduce_processes(s, P, pop, NLSE_OK)))
        return st;
    if (!all_finite(P, (size_t)n_t * nf2))
        return nlse_fail(NLSE_ERR_BLOWUP, "nlse_mbloch: the polarisation became non-finite at z "
                         "index %ld (norm deviation %g); the fields of z index %ld are kept",
                         s->j, s->dev, s->j);
    return NLSE_OK;
}

int nlse_mbloch_atoms(nlse_mbloch *s, int want_pop)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_atoms: NULL solver");
    const double t0 = mbloch_now();
    const int st = solve_atoms(s, s->fields, s->P, want_pop ? s->pop : NULL);
    s->last_seconds = mbloch_now() - t0;
    return st;
}

/* out = in + i h (a P + b Q) (Q may be NULL); 0 when out is not finite. */
static int advance(size_t n, const double *in, double h, double a, const double *P, double b,
                   const double *Q, double *out)
{
    int ok = 1;
#pragma omp parallel for NLSE_THREADS schedule(static) reduction(&& : ok) if (n > 65536)
    for (size_t q = 0; q < n; q += 2) {
        double re = a * P[q], im = a * P[q + 1];
        if (Q) {
            re += b * Q[q];
            im += b * Q[q + 1];
        }
        out[q] = in[q] - h * im;
        out[q + 1] = in[q + 1] + h * re;
        ok = ok && isfinite(out[q]) && isfinite(out[q + 1]);
    }
    return ok;
}

static int blowup_fields(const nlse_mbloch *s)
{
    return nlse_fail(NLSE_ERR_BLOWUP, "nlse_mbloch: the fields became non-finite in the step from "
                     "z index %ld; the fields of z index %ld are kept", s->j, s->j);
}

/* z_0 -> z_1 by euler_substeps Euler steps of h_z / euler_substeps. */
static int euler_start(nlse_mbloch *s, int want_pop)
{
    const size_t n = 2 * (size_t)s->p.n_t * s->nf;
    const int ns = s->p.euler_substeps;
    const double h = s->p.h_z / ns;
    int st = solve_atoms(s, s->fields, s->P, want_pop ? s->pop : NULL);
    if (st)
        return st;
    if (!advance(n, s->fields, h, 1.0, s->P, 0.0, NULL, s->fnext))
        return blowup_fields(s);
    for (int sub = 1; sub < ns; ++sub) {
        if ((st = solve_atoms(s, s->fnext, s->P_sub, NULL)))
            return st;
        if (!advance(n, s->fnext, h, 1.0, s->P_sub, 0.0, NULL, s->fnext))
            return blowup_fields(s);
    }
    return NLSE_OK;
}

int nlse_mbloch_step(nlse_mbloch *s, int want_pop)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_step: NULL solver");
    const double t0 = mbloch_now();
    const size_t n = 2 * (size_t)s->p.n_t * s->nf;
    int st;
    if (s->j == 0) {
        st = euler_start(s, want_pop);
    } else {
        /* algorithm 1, line 10 */
        st = solve_atoms(s, s->fields, s->P, want_pop ? s->pop : NULL);
        if (!st && !advance(n, s->fields, s->p.h_z, 1.5, s->P, -0.5, s->P_prev, s->fnext))
            st = blowup_fields(s);
    }
    if (!st) {
        double *tmp = s->fields;
        s->fields = s->fnext;
        s->fnext = tmp;
        memcpy(s->P_prev, s->P, n * sizeof(double));
        s->j += 1;
    }
    s->last_seconds = mbloch_now() - t0;
    return st;
}

int nlse_mbloch_steps(nlse_mbloch *s, int n)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_steps: NULL solver");
    if (n < 0)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_steps: n = %d must be >= 0", n);
    double sec = 0;
    for (int q = 0; q < n; ++q) {
        const int st = nlse_mbloch_step(s, 0);
        sec += s->last_seconds;
        if (st)
            return st;
    }
    s->last_seconds = sec;
    return NLSE_OK;
}

int nlse_mbloch_pipeline(const nlse_mbloch *s) { return s ? 1 : 0; }

int nlse_mbloch_set_comm(nlse_mbloch *s, const nlse_comm *c)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_comm: NULL solver");
    if (c && (!c->sum || !c->max))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_comm: the table has no sum or max");
    if (c && !s->red) {
        const size_t n = 2 * (size_t)s->p.n_t * s->nf + s->npop;
        s->red = (double *)malloc(n * sizeof(double));
        if (!s->red)
            return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_comm: out of memory (%zu values)", n);
    }
    s->comm = c;
    return NLSE_OK;
}

static int get(const nlse_mbloch *s, const double *src, size_t n, double *out)
{
    if (!s || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch: NULL solver or output array");
    memcpy(out, src, n * sizeof(double));
    return NLSE_OK;
}

int nlse_mbloch_get_fields(const nlse_mbloch *s, double *out)
{
    return get(s, s ? s->fields : NULL, s ? 2 * (size_t)s->p.n_t * s->nf : 0, out);
}

int nlse_mbloch_get_polarisation(const nlse_mbloch *s, double *out)
{
    return get(s, s ? s->P : NULL, s ? 2 * (size_t)s->p.n_t * s->nf : 0, out);
}

int nlse_mbloch_get_populations(const nlse_mbloch *s, double *out)
{
    if (!s || !s->open)
        return get(s, s ? s->pop : NULL, s ? (size_t)s->p.n_t * s->nlev : 0, out);
    if (!out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch: NULL output array");
    const size_t n = (size_t)s->nlev; /* the diagonal of the density matrix */
    for (size_t k = 0; k < (size_t)s->p.n_t; ++k)
        for (size_t i = 0; i < n; ++i)
            out[k * n + i] = s->pop[2 * (k * n * n + i * n + i)];
    return NLSE_OK;
}

int nlse_mbloch_get_density(const nlse_mbloch *s, double *out)
{
    if (s && !s->open)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_get_density: the solver is not open "
                         "(nlse_mbloch_set_open)");
    return get(s, s ? s->pop : NULL, s ? s->npop : 0, out);
}

int nlse_mbloch_set_open(nlse_mbloch *s, const nlse_mbloch_open *o)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_open: NULL solver");
    if (s->open || s->j != 0)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_mbloch_set_open: call it once, before the first step");
    mbloch_ocpu *oc = NULL;
    int st = mbloch_ocpu_create(&s->p, s->F, s->det, s->weights, o, &oc);
    if (st)
        return st;
    const size_t npop = 2 * (size_t)s->p.n_t * s->nlev * s->nlev;
    const size_t nred = 2 * (size_t)s->p.n_t * s->nf + npop;
    double *pop = (double *)calloc(npop, sizeof(double));
    double *red = s->red ? (double *)malloc(nred * sizeof(double)) : NULL;
    if (!pop || (s->red && !red)) {
        free(pop);
        free(red);
        mbloch_ocpu_destroy(oc);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_mbloch_set_open: out of memory (%zu values)", npop);
    }
    free(s->pop);
    s->pop = pop;
    s->npop = npop;
    if (red) {
        free(s->red);
        s->red = red;
    }
    s->open = oc;
    return NLSE_OK;
}

long nlse_mbloch_z_index(const nlse_mbloch *s) { return s ? s->j : -1; }

double nlse_mbloch_norm_deviation(const nlse_mbloch *s) { return s ? s->dev : NAN; }

double nlse_mbloch_last_seconds(const nlse_mbloch *s) { return s ? s->last_seconds : 0.0; }
