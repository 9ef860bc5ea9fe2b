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
 *
 * A solver may hold one z slab of a distributed grid (section 4.2,
 * nlse_dec_set_slab): the kernels then sweep its own layers only, the trap
 * is evaluated at the global layer, and with a reduction table
 * (nlse_dec_set_comm) the imaginary-time norm and the blow-up checks are
 * agreed over the processes; where the table swaps halos, the leapfrog
 * steps swap the new state's halo layers themselves, overlapped with the
 * interior layers (leap_overlapped).
 */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dec_internal.h"

/* What the kernels need besides the table: the grid and the trap, the
 * latter as per-axis tables vx[c * nx + bx] = wx^2/2 x^2 with x the
 * circumcentre's coordinate (origin + bx edge + centre), likewise vy, vz,
 * so that the trap at a cell is vx + vy + vz (the sum of eq. 2's trap in
 * the same order). */
typedef struct {
    long n[3];
    long z0, z1;         /* the own layers of blocks along z: z0 .. z1 - 1 */
    long zoff;           /* global index of layer 0 (the trap's z)          */
    long px;             /* a cell's run of a row in the kernels' order: the
                          * nx blocks and a ghost at each end, nx + 2      */
    size_t size;         /* unknowns in the kernels' order, ghosts included */
    long ty;             /* rows of blocks per y tile of the sweep (dec_sweep) */
    int cells, periodic;
    double origin[3], edge[3], half_w2[3];
    const double *centre, *vol;
    double *vx, *vy, *vz;
    double *rownorm;     /* ny nz: each row's norm in imaginary time        */
} dec_geom;

/* The kernels' order of the unknowns: the rows of blocks (by, bz) as in
 * nlsepy/dec.h, but inside a row cell by cell, block by block ("cell
 * major"), each cell's run of the row between two ghost blocks: cell c of
 * block bx is at c px + bx + 1 (px = nx + 2), so that the same cell of
 * consecutive blocks is contiguous.  The ghosts at c px and c px + nx + 1
 * hold what the cell's neighbours across the x sides read: across a
 * periodic side the cell of the row's last and first block (the wrap),
 * across a zero side 0.  Then every block of a row reads its neighbours
 * at the distances of a block inside the grid along x, and the kernels
 * sweep the whole row as one vector loop.  The state, psi(n-1), the
 * scratch states and the potential array are held so; every entry point
 * converts at the boundary (reorder, which writes the ghosts), a row's
 * kernel writes its ghosts after its values, and a row's norm and the
 * observables still sum in the public order. */
#define DEC_AT(G, bx, by, bz, c)                                                            \
    ((size_t)((((bz) * (G)->n[1] + (by)) * (G)->px) * (G)->cells + (long)(c) * (G)->px + \
              (bx) + 1))

/* The sweep of the own rows: y tiles of G->ty rows, each swept layer by
 * layer (z) and inside a layer along y, so that a row's z neighbours were
 * read one or two tile layers ago and are still in cache (the rows in
 * memory order when ty >= ny).  Row k of the sweep is (*by, *bz). */
static inline void dec_sweep(const dec_geom *G, long k, long *by, long *bz)
{
    const long ny = G->n[1], nl = G->z1 - G->z0, ty = G->ty;
    const long j = k / (ty * nl), r = k - j * ty * nl;
    const long w = ny - j * ty < ty ? ny - j * ty : ty;
    *bz = G->z0 + r / w;
    *by = j * ty + r % w;
}

/* The row kernel is also compiled for x86-64-v3 (AVX2) and x86-64-v4
 * (AVX-512) and chosen at load time; its helpers are inlined into each
 * clone.  CMakeLists.txt adds -fopenmp-simd for this file (the `omp simd`
 * loops without OpenMP) and no FMA contraction: the results stay those of
 * the scalar operations. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    __GNUC__ >= 12
#define DEC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define DEC_CLONES
#endif
#if defined(__GNUC__)
#define DEC_INLINE static inline __attribute__((always_inline))
#define DEC_PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define DEC_INLINE static inline
#define DEC_PREFETCH(p) ((void)(p))
#endif

/* Overflow and invalid operation, the FP exceptions that finite operands
 * raise on the way to an infinity or a NaN: where the platform has them,
 * the leapfrog and imaginary-time steps tell a blow-up by these flags of
 * each thread instead of a pass over every value written (FN(apply)); the
 * kernels' other operations raise neither on finite values.  The flags
 * are read after the values are stored (a call the compiler cannot move
 * them past). */
#if defined(FE_OVERFLOW) && defined(FE_INVALID)
#define DEC_FP_FLAGS 1
#define DEC_FP_CLEAR() feclearexcept(FE_OVERFLOW | FE_INVALID)
#define DEC_FP_RAISED() (fetestexcept(FE_OVERFLOW | FE_INVALID) != 0)
#else
#define DEC_FP_FLAGS 0
#define DEC_FP_CLEAR() ((void)0)
#define DEC_FP_RAISED() 0
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define REAL_MAX FLT_MAX
#define FN(name) CAT(name, _f)
#include "dec_kernels.inc"
#undef FN
#undef REAL_MAX
#undef REAL

#define REAL double
#define REAL_MAX DBL_MAX
#define FN(name) CAT(name, _d)
#include "dec_kernels.inc"
#undef FN
#undef REAL_MAX
#undef REAL

/* The kernels' table of solver s (tab_f or tab_d). */
#define DEC_TAB(s)                                                                       \
    {(s)->r.start, (s)->r.cell, (s)->r.off, (s)->delta, (s)->w, (s)->diag, (s)->slot, \
     (s)->cdd, (s)->cw, (s)->p.rows, (s)->deg, (s)->spans, (s)->lead}

struct nlse_dec {
    nlse_dec_params p;
    size_t n;
    dec_rows r;
    dec_geom G;
    void *w, *diag;      /* weights and diagonal in the working precision */
    /* The rows per class of block (dec_kernels.inc): class id
     * cx + 4 cy + 16 cz, c_q = (b_q == 0) + 2 (b_q == n_q - 1); slot[id]
     * is its table or -1, the table slot * rows + k holding the neighbour's
     * distance in reals (wrapped) and the weight (0 for a dropped
     * neighbour, which then points at the cell itself). */
    int slot[64];
    long *cdd;
    long *delta;         /* rows: j - i for an interior block, kernels' order */
    void *cw;
    int deg;             /* rows per cell when the same for all cells, else 0 */
    int spans;           /* every cell has 4, 6 or 8 rows                   */
    long lead;           /* distance to the neighbours' leading row, or -1  */
    void *buf[2];        /* current state buf[par], psi(n-1) buf[par ^ 1]  */
    void *V;             /* per-cell potential or NULL                     */
    char *tmp;           /* two states of scratch for apply and combine (made
                          * on first use, kept; the RK4 start's stage states
                          * when present) or NULL */
    const nlse_comm *comm; /* reductions of a distributed run, or NULL     */
    int par, have_prev;
    double last_seconds;
    double last_wait;    /* of last_seconds, waiting for the halo swap     */
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

/* One value of 4, 8 or 16 bytes (a real or a complex of either dtype). */
typedef struct {
    uint64_t a, b;
} dec_u128;

/* `rows` rows of nx blocks of C values of type T from src to dst: the
 * public order [bx][c] into the kernels' [c][bx + 1] of P = dec_geom's px
 * a cell with the ghosts [c][0] and [c][nx + 1] (in = 1; periodic: the
 * wrapped values, else 0), or back. */
#define DEC_REORDER(name, T)                                                               \
    static void name(T *dst, const T *src, size_t rows, long nx, long P, long C, int in,   \
                     int periodic)                                                         \
    {                                                                                      \
        const size_t L = (size_t)(nx * C), K = (size_t)(P * C);                            \
        const T zero = {0};                                                                \
        _Pragma("omp parallel for NLSE_THREADS schedule(static) if (rows * L > 65536)")    \
        for (size_t r = 0; r < rows; ++r) {                                                \
            if (!in) {                                                                     \
                T *d = dst + r * L;                                                        \
                const T *q = src + r * K + 1;                                              \
                for (long bx = 0; bx < nx; ++bx)                                           \
                    for (long c = 0; c < C; ++c)                                           \
                        d[bx * C + c] = q[c * P + bx];                                     \
                continue;                                                                  \
            }                                                                              \
            T *d = dst + r * K;                                                            \
            const T *q = src + r * L;                                                      \
            for (long bx = 0; bx < nx; ++bx)                                               \
                for (long c = 0; c < C; ++c)                                               \
                    d[c * P + bx + 1] = q[bx * C + c];                                     \
            for (long c = 0; c < C; ++c) {                                                 \
                d[c * P] = periodic ? d[c * P + nx] : zero;                                \
                d[c * P + nx + 1] = periodic ? d[c * P + 1] : zero;                        \
            }                                                                              \
        }                                                                                  \
    }
DEC_REORDER(reorder_4, uint32_t)
DEC_REORDER(reorder_8, uint64_t)
DEC_REORDER(reorder_16, dec_u128)

/* `rows` rows of blocks of values of es bytes (4: a real of complex64's
 * precision, 8, 16: complex128) from src to dst (distinct): the public
 * order of nlsepy/dec.h into the kernels' (in = 1, ghosts written) or back
 * (DEC_AT). */
static void reorder(const nlse_dec *s, void *dst, const void *src, size_t rows, size_t es, int in)
{
    const long nx = s->p.blocks[0], px = s->G.px, C = s->p.cells;
    const int per = s->p.periodic;
    if (es == 4)
        reorder_4(dst, src, rows, nx, px, C, in, per);
    else if (es == 8)
        reorder_8(dst, src, rows, nx, px, C, in, per);
    else
        reorder_16(dst, src, rows, nx, px, C, in, per);
}

/* Bytes of a state in the kernels' order. */
static size_t state_bytes(const nlse_dec *s) { return 2 * s->G.size * real_size(s); }

/* Two scratch states s->tmp (made on first use, kept), or NULL when out of
 * memory. */
static char *scratch(nlse_dec *s)
{
    if (!s->tmp)
        s->tmp = malloc(2 * state_bytes(s));
    return s->tmp;
}

/* The two scratch states, *a and *b after it; NLSE_ERR_NOMEM naming `fn`
 * when they cannot be made. */
static int scratch_pair(nlse_dec *s, const char *fn, char **a, char **b)
{
    *a = scratch(s);
    *b = *a ? *a + state_bytes(s) : NULL;
    return *a ? NLSE_OK : nlse_fail(NLSE_ERR_NOMEM, "%s: out of memory", fn);
}

/* Bytes of x1 and psi(n-1) rows that a y tile of the sweep keeps in cache
 * per thread (dec_sweep). */
#ifndef DEC_TILE_BYTES
#define DEC_TILE_BYTES (1L << 21)
#endif

/* Rows per y tile: three layers of the tile's x1 rows and one of psi(n-1)
 * in DEC_TILE_BYTES, at least 4 rows. */
static long tile_rows(const dec_geom *G, int cells, size_t real_bytes)
{
    const long row = 2 * (long)real_bytes * G->px * cells;
    long ty = DEC_TILE_BYTES / (4 * row);
    ty = ty < 4 ? 4 : ty;
    return ty < G->n[1] ? ty : G->n[1];
}

/* A state's rows (all layers). */
static size_t all_rows(const nlse_dec *s) { return (size_t)(s->p.blocks[1] * s->p.blocks[2]); }

void nlse_dec_destroy(nlse_dec *s)
{
    if (!s)
        return;
    dec_rows_free(&s->r);
    free(s->G.vx);
    free(s->G.vy);
    free(s->G.vz);
    free(s->G.rownorm);
    free(s->w);
    free(s->diag);
    free(s->cdd);
    free(s->cw);
    free(s->delta);
    free(s->buf[0]);
    free(s->buf[1]);
    free(s->V);
    free(s->tmp);
    free(s);
}

/* The trap table of axis q of dec_geom (1 when out of memory); the same
 * operations as the sum 1/2 (wx^2 x^2 + wy^2 y^2 + wz^2 z^2) in one line,
 * at the global block index (zoff added along z). */
static int trap_table(dec_geom *G, int q)
{
    double **t[3] = {&G->vx, &G->vy, &G->vz};
    const int C = G->cells;
    const long off = q == 2 ? G->zoff : 0;
    double *v = malloc(sizeof(double) * (size_t)(G->n[q] * C));
    if (!v)
        return 1;
    free(*t[q]);
    *t[q] = v;
    for (int c = 0; c < C; ++c)
        for (long b = 0; b < G->n[q]; ++b) {
            const double x = G->origin[q] + (b + off) * G->edge[q] + G->centre[3 * c + q];
            v[c * G->n[q] + b] = G->half_w2[q] * x * x;
        }
    return 0;
}

static int trap_tables(dec_geom *G)
{
    return trap_table(G, 0) || trap_table(G, 1) || trap_table(G, 2);
}

/* Row k (of cell c) of a block of class cls: the distance in reals to the
 * neighbour (wrapped across a periodic side), or 0 with *drop = 1 when it
 * lies outside a zero boundary. */
static long class_row(const nlse_dec *s, int cls, int c, int k, int *drop)
{
    const long *n = s->G.n;
    const int *o = s->r.off + 3 * k;
    long m[3];
    *drop = 0;
    for (int q = 0; q < 3; ++q) {
        const int side = (cls >> (2 * q)) & 3;
        m[q] = o[q];
        if ((o[q] < 0 && (side & 1)) || (o[q] > 0 && (side & 2))) {
            *drop |= !s->p.periodic;
            m[q] -= o[q] * n[q];
        }
    }
    if (*drop)
        return 0;
    const long px = s->G.px;
    return 2 * ((m[2] * n[1] + m[1]) * px * s->p.cells + (s->r.cell[k] - c) * px + m[0]);
}

/* The class tables of nlse_dec (1 when out of memory). */
static int class_tables(nlse_dec *s)
{
    const int K = s->p.rows;
    int used = 0, ax[3];
    for (int id = 0; id < 64; ++id) {
        int ok = 1;
        for (int q = 0; q < 3; ++q) {
            ax[q] = (id >> (2 * q)) & 3;
            const long n = s->G.n[q];
            /* inside along x for any nx: the rows' vector loop (ghosts) */
            ok &= (q == 0 && ax[q] == 0) ||
                  (n == 1 ? ax[q] == 3 : n == 2 ? ax[q] == 1 || ax[q] == 2 : ax[q] < 3);
        }
        s->slot[id] = ok ? used++ : -1;
    }
    const size_t r = real_size(s);
    s->cdd = malloc(sizeof(long) * (size_t)used * (size_t)K);
    s->cw = malloc(r * (size_t)used * (size_t)K);
    s->delta = malloc(sizeof(long) * (size_t)K);
    if (!s->cdd || !s->cw || !s->delta)
        return 1;
    const long *n = s->G.n;
    for (int c = 0; c < s->p.cells; ++c)
        for (int k = s->r.start[c]; k < s->r.start[c + 1]; ++k) {
            const int *o = s->r.off + 3 * k;
            s->delta[k] = (o[2] * n[1] + o[1]) * s->G.px * s->p.cells +
                          (s->r.cell[k] - c) * s->G.px + o[0];
        }
    for (int id = 0; id < 64; ++id) {
        if (s->slot[id] < 0)
            continue;
        const size_t o = (size_t)s->slot[id] * (size_t)K;
        for (int c = 0; c < s->p.cells; ++c)
            for (int k = s->r.start[c]; k < s->r.start[c + 1]; ++k) {
                int drop;
                s->cdd[o + k] = class_row(s, id, c, k, &drop);
                const double w = drop ? 0.0 : s->r.w[k];
                if (r == 4)
                    ((float *)s->cw)[o + k] = (float)w;
                else
                    ((double *)s->cw)[o + k] = w;
            }
    }
    return 0;
}

/* What the kernels read off the table: the degree (rows per cell) when
 * the same for all cells, whether every cell has a vectorised kernel (4, 6
 * or 8 rows), and the row of blocks (y, z offsets) farthest ahead in
 * memory, whose data a row reads first (the others were read before). */
static void table_facts(nlse_dec *s)
{
    const long *n = s->G.n;
    s->deg = s->r.start[1];
    s->spans = 1;
    for (int c = 0; c < s->p.cells; ++c) {
        const int d = s->r.start[c + 1] - s->r.start[c];
        s->deg = d == s->deg ? s->deg : 0;
        s->spans &= d == 4 || d == 6 || d == 8;
    }
    s->lead = -1;
    for (int k = 0; k < s->p.rows; ++k) {
        const int *o = s->r.off + 3 * k;
        const long d = (o[2] * n[1] + o[1]) * s->G.px * s->p.cells;
        s->lead = d > s->lead ? d : s->lead;
    }
}

int nlse_dec_create(const nlse_dec_params *p, const nlse_dec_table *t, nlse_dec **out)
{
    int st = dec_check_create(p, t, out);
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
    G->z0 = 0;
    G->z1 = p->blocks[2];
    G->zoff = 0;
    G->cells = p->cells;
    G->px = p->blocks[0] + 2;
    G->ty = tile_rows(G, p->cells, real_size(s));
    G->size = (size_t)(G->px * p->cells) * all_rows(s);
    G->periodic = p->periodic;
    G->centre = s->r.centre;
    G->vol = s->r.vol;
    s->w = copy_real(s->r.w, (size_t)p->rows, p->dtype);
    s->diag = copy_real(s->r.diag, (size_t)p->cells, p->dtype);
    const size_t bytes = state_bytes(s);
    s->buf[0] = calloc(1, bytes);
    s->buf[1] = calloc(1, bytes);
    G->rownorm = malloc(sizeof(double) * all_rows(s));
    const int no_tables = trap_tables(G) || class_tables(s);
    if (!s->w || !s->diag || !s->buf[0] || !s->buf[1] || !G->rownorm || no_tables) {
        const size_t n = s->n;
        nlse_dec_destroy(s);
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_create: out of memory for %zu unknowns "
                                         "(%.3g GB)", n, 2.0 * bytes / 1e9);
    }
    table_facts(s);
    *out = s;
    return NLSE_OK;
}

int nlse_dec_set_state(nlse_dec *s, const void *psi, const void *psi_prev)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    const int st = dec_check_states(psi, psi_prev, s->n, s->p.dtype);
    if (st)
        return st;
    const size_t es = 2 * real_size(s);
    reorder(s, s->buf[s->par], psi, all_rows(s), es, 1);
    if (psi_prev)
        reorder(s, s->buf[s->par ^ 1], psi_prev, all_rows(s), es, 1);
    s->have_prev = psi_prev != NULL;
    return NLSE_OK;
}

int nlse_dec_get_state(const nlse_dec *s, void *psi)
{
    if (!s || !psi)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_state: NULL argument");
    reorder(s, psi, s->buf[s->par], all_rows(s), 2 * real_size(s), 0);
    return NLSE_OK;
}

int nlse_dec_get_prev(const nlse_dec *s, void *psi_prev, int *have)
{
    if (!s || !psi_prev || !have)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_get_prev: NULL argument");
    *have = s->have_prev;
    if (s->have_prev)
        reorder(s, psi_prev, s->buf[s->par ^ 1], all_rows(s), 2 * real_size(s), 0);
    return NLSE_OK;
}

int nlse_dec_set_potential(nlse_dec *s, const void *V)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    if (!V)
        return nlse_drop(&s->V);
    int st = dec_check_real(V, s->n, s->p.dtype, "V");
    if (st)
        return st;
    if (!s->V && !(s->V = malloc(s->G.size * real_size(s))))
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_set_potential: out of memory");
    reorder(s, s->V, V, all_rows(s), real_size(s), 1);
    return NLSE_OK;
}

int nlse_dec_set_dt(nlse_dec *s, double dt)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    return dec_set_dt(&s->p, &s->have_prev, dt);
}

/* out = x0 + (cre + i cim) H(x1) x1 in the working precision; 1 when a
 * value came out non-finite.  own = 1 where x0 and x1 are the solver's
 * own (finite) states: then the FP flags tell it (FN(apply)). */
static int apply_k(nlse_dec *s, void *out, const void *x0, const void *x1, double cre,
                   double cim, double *norm, int own)
{
    if (s->p.dtype == NLSE_COMPLEX64) {
        const tab_f T = DEC_TAB(s);
        return apply_f(&s->G, &T, s->V, (float)s->p.g, out, x0, x1, (float)cre, (float)cim, norm,
                       own);
    }
    const tab_d T = DEC_TAB(s);
    return apply_d(&s->G, &T, s->V, s->p.g, out, x0, x1, cre, cim, norm, own);
}

/* apply_k on the solver's own states (the steps). */
static int apply(nlse_dec *s, void *out, const void *x0, const void *x1, double cre, double cim,
                 double *norm)
{
    return apply_k(s, out, x0, x1, cre, cim, norm, 1);
}

/* One classic RK4 step from the current state into buf[par ^ 1] (which
 * then becomes current, with psi(n-1) the old state): low-storage form
 * with two scratch states.  1 when it blew up (state untouched). */
static int rk4_start(nlse_dec *s, int *bad)
{
    const double dt = s->p.dt;
    void *psi = s->buf[s->par], *acc = s->buf[s->par ^ 1];
    /* the two scratch states when apply or combine made them, else two of
     * its own for this step */
    char *own = s->tmp ? NULL : malloc(2 * state_bytes(s));
    char *ya = s->tmp ? s->tmp : own, *yb = ya + state_bytes(s);
    if (!ya)
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_step: out of memory for the RK4 start");
    int b = 0;
    b |= apply(s, acc, psi, psi, 0, -dt / 6, NULL);
    b |= apply(s, ya, psi, psi, 0, -dt / 2, NULL);
    b |= apply(s, acc, acc, ya, 0, -dt / 3, NULL);
    b |= apply(s, yb, psi, ya, 0, -dt / 2, NULL);
    b |= apply(s, acc, acc, yb, 0, -dt / 3, NULL);
    b |= apply(s, ya, psi, yb, 0, -dt, NULL);
    b |= apply(s, acc, acc, ya, 0, -dt / 6, NULL);
    free(own);
    *bad = b;
    if (!b) {
        s->par ^= 1;
        s->have_prev = 1;
    }
    return NLSE_OK;
}

/* Layers a .. b - 1 of the leapfrog step out = out - 2 i dt H(cur) cur
 * (the kernels sweep G.z0 .. G.z1 - 1); 1 when a value blew up.  Each
 * point is computed as by the whole slab's sweep, so the bits do not
 * depend on how the layers are split. */
static int leap_layers(nlse_dec *s, void *out, const void *cur, long a, long b)
{
    const long z0 = s->G.z0, z1 = s->G.z1;
    s->G.z0 = a;
    s->G.z1 = b;
    const int bad = apply(s, out, out, cur, 0, -2 * s->p.dt, NULL);
    s->G.z0 = z0;
    s->G.z1 = z1;
    return bad;
}

/* Interior layers computed between two chances for the library to move
 * the halo messages. */
#ifndef DEC_OVERLAP_PARTS
#define DEC_OVERLAP_PARTS 4
#endif

/* The time waiting for a halo swap's call c, added to s->last_wait. */
#define DEC_WAIT(s, c)                                 do {                                                   const double w0_ = dec_now();                      st = (c);                                          (s)->last_wait += dec_now() - w0_;             } while (0)

/* One leapfrog step into `out` (psi(n-1) there) with the halo swap of the
 * new state overlapped (source 001, section 4.2, on the host): the own
 * first and last layers first, their swap with the neighbours started,
 * the interior layers in parts with the swap progressing between them,
 * then the swap finished, so that the halo layers of psi(n+1) are the
 * neighbours' when the step returns.  The swap writes out's halo layers,
 * which this step does not read (it reads out's own layers and cur's).
 * *bad: 1 when a value blew up; returns an nlse_status. */
static int leap_overlapped(nlse_dec *s, void *out, const void *cur, int *bad)
{
    const long z0 = s->G.z0, z1 = s->G.z1, nz = s->G.n[2];
    const size_t K = 2 * (size_t)(s->G.px * s->p.cells * s->p.blocks[1]) * real_size(s);
    char *o = (char *)out;
    int st;
    *bad = leap_layers(s, out, cur, z0, z0 + 1);
    if (z1 - 1 > z0)
        *bad |= leap_layers(s, out, cur, z1 - 1, z1);
    const nlse_comm *c = s->comm;
    DEC_WAIT(s, c->halo_start(c->ctx, z0 > 0 ? o + (size_t)z0 * K : NULL,
                              z0 > 0 ? o + (size_t)(z0 - 1) * K : NULL,
                              z1 < nz ? o + (size_t)(z1 - 1) * K : NULL,
                              z1 < nz ? o + (size_t)z1 * K : NULL, K));
    if (st)
        return st;
    const long inner = z1 - z0 - 2;
    const long part = inner > DEC_OVERLAP_PARTS ? (inner + DEC_OVERLAP_PARTS - 1) / DEC_OVERLAP_PARTS
                                                : 1;
    for (long a = z0 + 1; a < z1 - 1; a += part) {
        *bad |= leap_layers(s, out, cur, a, a + part < z1 - 1 ? a + part : z1 - 1);
        DEC_WAIT(s, c->halo_progress(c->ctx));
        if (st)
            break;
    }
    const int fin = c->halo_finish(c->ctx);  /* always: no request left in flight */
    DEC_WAIT(s, st ? st : fin);
    return st;
}

/* Whether the steps swap the halo layers themselves: a slab with a
 * neighbour and a table that swaps (else the caller refreshes them). */
static int swaps_halos(const nlse_dec *s)
{
    return s->comm && s->comm->halo_start && s->comm->halo_progress && s->comm->halo_finish &&
           (s->G.z0 > 0 || s->G.z1 < s->G.n[2]);
}

int nlse_dec_step(nlse_dec *s, long n, long *done)
{
    int st = dec_check_steps(s, n, done);
    if (st)
        return st;
    if (n > 0 && !s->have_prev && s->comm)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_step: a distributed solver does not start by "
                                         "RK4 (its halos need refreshing between the stages): "
                                         "start with nlse_dec_combine or give psi(-dt)");
    const double t0 = dec_now();
    const int swap = swaps_halos(s);
    long k = 0;
    int bad = 0;
    s->last_wait = 0;
    if (n > 0 && !s->have_prev) {
        if ((st = rk4_start(s, &bad)))
            return st;
        k = bad ? 0 : 1;
    }
    for (; k < n && !bad; ++k) {
        void *prev = s->buf[s->par ^ 1];
        if (!swap)
            bad = apply(s, prev, prev, s->buf[s->par], 0, -2 * s->p.dt, NULL);
        else if ((st = leap_overlapped(s, prev, s->buf[s->par], &bad))) {
            s->have_prev = 0;
            break;
        }
        if ((st = dec_agree_bad(s->comm, &bad))) {
            s->have_prev = 0;
            break;
        }
        if (bad) {
            s->have_prev = 0;  /* psi(n-1) is overwritten; the current state is good */
            break;
        }
        s->par ^= 1;
    }
    s->last_seconds = dec_now() - t0;
    return dec_steps_end(st, bad, k, n, done, DEC_REAL_BLOWUP);
}

int nlse_dec_imaginary(nlse_dec *s, long n, double norm, long *done)
{
    int st = dec_check_steps(s, n, done);
    if (st)
        return st;
    if (!(isfinite(norm) && norm > 0))
        return nlse_fail(NLSE_ERR_VALUE, "norm must be finite and > 0, got %g", norm);
    const double t0 = dec_now();
    s->last_wait = 0;
    long k = 0;
    int bad = 0;
    for (; k < n; ++k) {
        void *next = s->buf[s->par ^ 1];
        double nn = 0;
        bad = apply(s, next, s->buf[s->par], s->buf[s->par], -s->p.dt, 0, &nn);
        if (s->comm) { /* the norm of every process's own layers; NaN: one blew up */
            nn = bad ? NAN : nn;
            if ((st = s->comm->sum(s->comm->ctx, &nn, 1)))
                break;
        }
        if (bad || !(nn > 0 && isfinite(nn))) {
            bad = 1;
            break;
        }
        const double f = sqrt(norm / nn);
        if (s->p.dtype == NLSE_COMPLEX64)
            scale_f(s->G.size, next, (float)f);
        else
            scale_d(s->G.size, next, f);
        s->par ^= 1;
    }
    if (n > 0)
        s->have_prev = 0;
    s->last_seconds = dec_now() - t0;
    return dec_steps_end(st, bad, k, n, done, DEC_IMAG_BLOWUP);
}

int nlse_dec_observe(nlse_dec *s, double *norm, double *energy)
{
    if (!s || !norm || !energy)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_observe: NULL argument");
    if (s->p.dtype == NLSE_COMPLEX64) {
        const tab_f T = DEC_TAB(s);
        observe_f(&s->G, &T, s->V, (float)s->p.g, s->buf[s->par], norm, energy);
    } else {
        const tab_d T = DEC_TAB(s);
        observe_d(&s->G, &T, s->V, s->p.g, s->buf[s->par], norm, energy);
    }
    return NLSE_OK;
}

int nlse_dec_apply(nlse_dec *s, const void *psi, void *out)
{
    char *y, *x;
    if (!s || !psi || !out)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_apply: NULL argument");
    const size_t es = 2 * real_size(s);
    int st = scratch_pair(s, "nlse_dec_apply", &y, &x);
    if (st)
        return st;
    /* psi into the second scratch state in the kernels' order, y = 0 +
     * H(psi) psi (the kernels always add to a state), y back into out */
    reorder(s, x, psi, all_rows(s), es, 1);
    memset(y, 0, state_bytes(s));
    apply_k(s, y, y, x, 1, 0, NULL, 0);
    reorder(s, out, y, all_rows(s), es, 0);
    return NLSE_OK;
}

int nlse_dec_set_slab(nlse_dec *s, long z_offset, long first, long count)
{
    if (!s)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec: NULL solver");
    int st = dec_check_layers(&s->p, first, count, "nlse_dec_set_slab");
    if (st)
        return st;
    const long old = s->G.zoff;
    s->G.zoff = z_offset;
    if (trap_table(&s->G, 2)) {
        s->G.zoff = old;
        return nlse_fail(NLSE_ERR_NOMEM, "nlse_dec_set_slab: out of memory");
    }
    s->G.z0 = first;
    s->G.z1 = first + count;
    return NLSE_OK;
}

/* The reals of one layer of blocks, in the public order. */
static size_t layer_reals(const nlse_dec *s)
{
    return 2 * (size_t)s->p.cells * (size_t)s->p.blocks[0] * (size_t)s->p.blocks[1];
}

/* Layers first .. first + count - 1 of the state out (copy_out) or in;
 * `what` names the C function in the errors; `check` refuses non-finite
 * values coming in. */
static int copy_layers(const nlse_dec *s, long first, long count, const void *in, void *out,
                       int check, const char *what)
{
    if (!s || !(in || out))
        return nlse_fail(NLSE_ERR_VALUE, "%s: NULL argument", what);
    int st = dec_check_layers(&s->p, first, count, what);
    if (st)
        return st;
    const size_t r = real_size(s), L = layer_reals(s), rows = (size_t)(count * s->p.blocks[1]);
    const size_t K = 2 * (size_t)(s->G.px * s->p.cells * s->p.blocks[1]); /* kernels' layer */
    char *state = (char *)s->buf[s->par] + (size_t)first * K * r;
    if (out) {
        reorder(s, out, state, rows, 2 * r, 0);
        return NLSE_OK;
    }
    if (check && (st = dec_check_real(in, (size_t)count * L, s->p.dtype, "layers")))
        return st;
    reorder(s, state, in, rows, 2 * r, 1);
    return NLSE_OK;
}

int nlse_dec_get_layers(const nlse_dec *s, long first, long count, void *out)
{
    return copy_layers(s, first, count, NULL, out, 0, "nlse_dec_get_layers");
}

int nlse_dec_set_layers(nlse_dec *s, long first, long count, const void *in)
{
    return copy_layers(s, first, count, in, NULL, 1, "nlse_dec_set_layers");
}

/* The CPU's backend memory is host memory: plain copies of the layers
 * (no check of the values: halo layers from a neighbour's finite step). */
int nlse_dec_layers_to(const nlse_dec *s, long first, long count, void *dst)
{
    return copy_layers(s, first, count, NULL, dst, 0, "nlse_dec_layers_to");
}

int nlse_dec_layers_from(nlse_dec *s, long first, long count, const void *src)
{
    return copy_layers(s, first, count, src, NULL, 0, "nlse_dec_layers_from");
}

int nlse_dec_set_comm(nlse_dec *s, const nlse_comm *c)
{
    return dec_set_comm(s ? &s->comm : NULL, c);
}

int nlse_dec_has_prev(const nlse_dec *s) { return s ? s->have_prev : 0; }

int nlse_dec_combine(nlse_dec *s, const void *x0, const void *x1, double cre, double cim,
                     void *out, int *bad)
{
    if (!s || !x0 || !x1 || !out || !bad)
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_combine: NULL argument");
    if (!(isfinite(cre) && isfinite(cim)))
        return nlse_fail(NLSE_ERR_VALUE, "nlse_dec_combine: the coefficient (%g, %g) is not "
                                         "finite", cre, cim);
    char *y, *z;
    const size_t es = 2 * real_size(s);
    int st = scratch_pair(s, "nlse_dec_combine", &y, &z);
    if (st)
        return st;
    /* x1 and x0 into the two scratch states in the kernels' order, then the
     * result back into out (x0 and x1 are read before out is written: either
     * may be out too) */
    reorder(s, y, x1, all_rows(s), es, 1);
    reorder(s, z, x0, all_rows(s), es, 1);
    *bad = apply_k(s, z, z, y, cre, cim, NULL, 0);
    reorder(s, out, z, all_rows(s), es, 0);
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

double nlse_dec_last_wait_seconds(const nlse_dec *s) { return s ? s->last_wait : 0; }

const char *nlse_dec_kernel(const nlse_dec *s) { return s ? "rows" : ""; }
