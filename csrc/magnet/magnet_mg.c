/*
 * magnet_mg.c -- geometric multigrid for the magnet-design Laplace problem
 * (the rows of Table 2.1 of Madhubhashini's thesis, eq. 2.38 form), beyond
 * the source's SOR.
 *
 * V-cycles: red-black Gauss-Seidel smoothing on the fine grid (the rows of
 * Table 2.1, colour-reordered storage), bilinear prolongation P, restriction
 * P^T, and Galerkin coarse operators A_{l+1} = P^T A_l P (9-point stencils).
 * P is masked: it interpolates into unknowns only, so the magnet's corner,
 * its cap and side and the Dirichlet mid-plane are carried exactly onto
 * every coarse level even where the magnet's edges fall between coarse grid
 * lines (r0 = 0.25 m at h = 1 mm is node 250, odd after one halving).  A
 * coarse node is an unknown when its Galerkin row has a nonzero diagonal.
 * The coarsest level (at most a few hundred unknowns) is solved by dense LU.
 * Coarse levels run in double precision whatever the fine precision.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "magnet_cpu.h"


static void level_free(magnet_level *L)
{
    free(L->A);
    free(L->mask);
    free(L->b);
    free(L->e);
    free(L->r);
    free(L->idx);
    free(L->piv);
    free(L->LU);
}

void magnet_mg_free(struct nlse_magnet *s)
{
    magnet_mgcg_close(s);
    if (s->lev)
        for (int l = 0; l <= s->nlev; ++l)
            level_free(&s->lev[l]);
    free(s->lev);
    free(s->r0);
    free(s->e0);
    free(s->mask0);
    s->lev = NULL;
    s->r0 = s->e0 = NULL;
    s->mask0 = NULL;
    s->nlev = 0;
}

static int build_level(struct nlse_magnet *s, int l)
{
    magnet_level *L = &s->lev[l];
    const magnet_level *F = &s->lev[l - 1];
    int st = magnet_galerkin(&s->g, s->rows, l == 1 ? (int)s->g.nr : F->nr,
                         l == 1 ? (int)s->g.nz : F->nz, l == 1 ? s->mask0 : F->mask,
                         l == 1 ? NULL : F->A, &L->nr, &L->nz, &L->A, &L->mask);
    if (st)
        return st;
    const size_t n = (size_t)L->nr * L->nz;
    L->b = (double *)calloc(n, sizeof(double));
    L->e = (double *)calloc(n, sizeof(double));
    L->r = (double *)calloc(n, sizeof(double));
    if (!L->b || !L->e || !L->r)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for multigrid level %d (%zu nodes)", l, n);
    return NLSE_OK;
}

/* dense LU of the coarsest level's unknowns */
static int build_coarsest(magnet_level *L)
{
    const size_t n = (size_t)L->nr * L->nz;
    L->idx = (int *)malloc(n * sizeof(int));
    if (!L->idx)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    int st = magnet_coarsest_dense(L->nr, L->nz, L->A, L->mask, L->idx, &L->nunk, &L->LU);
    if (st)
        return st;
    L->piv = (int *)malloc(((size_t)L->nunk + 1) * sizeof(int));
    if (!L->piv)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    return magnet_lu_factor(L->LU, L->nunk, L->piv);
}

static void solve_coarsest(magnet_level *L)
{
    double *x = L->r; /* scratch: the unknowns' values in LU order */
    const size_t n = (size_t)L->nr * L->nz;
    for (size_t q = 0; q < n; ++q)
        if (L->idx[q] >= 0)
            x[L->idx[q]] = L->b[q];
    magnet_lu_solve(L->LU, L->piv, L->nunk, x);
    for (size_t q = n; q-- > 0;)
        L->e[q] = L->idx[q] >= 0 ? x[L->idx[q]] : 0.0;
}

int magnet_mg_build(struct nlse_magnet *s)
{
    if (s->lev && s->mg_rows_dirichlet == s->dirichlet)
        return NLSE_OK;
    magnet_mg_free(s);
    const size_t nn = s->g.nr * s->g.nz;
    s->mask0 = (unsigned char *)calloc(nn, 1);
    s->r0 = (double *)malloc(nn * sizeof(double));
    s->e0 = (double *)malloc(nn * sizeof(double));
    if (!s->mask0 || !s->r0 || !s->e0)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the multigrid fine-level buffers");
    const size_t unk = magnet_fine_mask(&s->g, s->rows, s->mask0);
    const int nlev = magnet_level_count((int)s->g.nr, (int)s->g.nz, unk);
    s->lev = (magnet_level *)calloc((size_t)nlev + 1, sizeof(magnet_level));
    if (!s->lev)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory");
    s->nlev = nlev;
    for (int l = 1; l <= nlev; ++l) {
        int st = build_level(s, l);
        if (st)
            return st;
    }
    int st = build_coarsest(&s->lev[nlev]);
    if (st)
        return st;
    s->mg_rows_dirichlet = s->dirichlet;
    return NLSE_OK;
}

/* ---------------------------------------------------------------- cycle */

/* sum of the 9-point row `row` against x around node q (center included
 * unless skip_center); entries pointing off the grid are 0 */
static inline double row_dot(const double *row, const double *x, size_t q, int nz, int skip_center)
{
    double v = 0.0;
    for (int p = -1; p <= 1; ++p)
        for (int r = -1; r <= 1; ++r) {
            const double a = row[3 * (p + 1) + (r + 1)];
            if (a != 0.0 && !(skip_center && !p && !r))
                v += a * x[q + (ptrdiff_t)p * nz + r];
        }
    return v;
}

static void gs_sweep(magnet_level *L, int first_colour)
{
    const int nr = L->nr, nz = L->nz;
    for (int cc = 0; cc < 2; ++cc) {
        const int colour = cc ^ first_colour;
        /* five-point rows (the fine level): a colour's nodes are independent */
#pragma omp parallel for NLSE_THREADS schedule(static) if (L->five_point && (size_t)nr * nz > 65536)
        for (int I = 0; I < nr; ++I)
            for (int J = (I + colour) & 1; J < nz; J += 2) {
                const size_t q = (size_t)I * nz + J;
                if (!L->mask[q])
                    continue;
                const double *row = L->A + 9 * q;
                L->e[q] = (L->b[q] - row_dot(row, L->e, q, nz, 1)) / row[4];
            }
    }
}

static void residual(magnet_level *L)
{
    const int nr = L->nr, nz = L->nz;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((size_t)nr * nz > 65536)
    for (int I = 0; I < nr; ++I)
        for (int J = 0; J < nz; ++J) {
            const size_t q = (size_t)I * nz + J;
            L->r[q] = L->mask[q] ? L->b[q] - row_dot(L->A + 9 * q, L->e, q, nz, 0) : 0.0;
        }
}

/* b_c = P^T r_f (r_f zero off the unknowns) */
static void restrict_to(const double *rf, int nrf, int nzf, magnet_level *C)
{
    const int nrc = C->nr, nzc = C->nz;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((size_t)nrc * nzc > 16384)
    for (int I = 0; I < nrc; ++I)
        for (int J = 0; J < nzc; ++J) {
            double v = 0.0;
            for (int fi = 2 * I - 1; fi <= 2 * I + 1; ++fi) {
                if (fi < 0 || fi >= nrf)
                    continue;
                const double wi = fi == 2 * I ? 1.0 : 0.5;
                for (int fj = 2 * J - 1; fj <= 2 * J + 1; ++fj) {
                    if (fj < 0 || fj >= nzf)
                        continue;
                    v += wi * (fj == 2 * J ? 1.0 : 0.5) * rf[(size_t)fi * nzf + fj];
                }
            }
            C->b[(size_t)I * nzc + J] = C->mask[(size_t)I * nzc + J] ? v : 0.0;
        }
}

/* ef = P e_c on the fine unknowns (0 elsewhere); add = 1 adds to ef. */
static void prolong(const magnet_level *C, double *ef, int nrf, int nzf, const unsigned char *maskf,
                    int add)
{
    const int nzc = C->nz;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((size_t)nrf * nzf > 65536)
    for (int i = 0; i < nrf; ++i)
        for (int j = 0; j < nzf; ++j) {
            const size_t q = (size_t)i * nzf + j;
            double v = 0.0;
            if (maskf[q]) {
                const int i0 = i / 2, i1 = (i + 1) / 2, j0 = j / 2, j1 = (j + 1) / 2;
                const double wi = i % 2 ? 0.5 : 1.0, wj = j % 2 ? 0.5 : 1.0;
                v = wi * wj * C->e[(size_t)i0 * nzc + j0];
                if (i1 != i0)
                    v += wi * wj * C->e[(size_t)i1 * nzc + j0];
                if (j1 != j0)
                    v += wi * wj * C->e[(size_t)i0 * nzc + j1];
                if (i1 != i0 && j1 != j0)
                    v += wi * wj * C->e[(size_t)i1 * nzc + j1];
            }
            ef[q] = add ? ef[q] + v : v;
        }
}

/* y = A x on the unknowns of level L (0 elsewhere) */
static void matvec(const magnet_level *L, const double *x, double *y)
{
    const int nr = L->nr, nz = L->nz;
#pragma omp parallel for NLSE_THREADS schedule(static) if ((size_t)nr * nz > 65536)
    for (int I = 0; I < nr; ++I)
        for (int J = 0; J < nz; ++J) {
            const size_t q = (size_t)I * nz + J;
            y[q] = L->mask[q] ? row_dot(L->A + 9 * q, x, q, nz, 0) : 0.0;
        }
}

static void vcycle(struct nlse_magnet *s, int l, int nu1, int nu2)
{
    magnet_level *L = &s->lev[l];
    if (l == s->nlev) {
        solve_coarsest(L);
        return;
    }
    magnet_level *C = &s->lev[l + 1];
    for (int k = 0; k < nu1; ++k)
        gs_sweep(L, 0);
    residual(L);
    restrict_to(L->r, L->nr, L->nz, C);
    memset(C->e, 0, (size_t)C->nr * C->nz * sizeof(double));
    vcycle(s, l + 1, nu1, nu2);
    prolong(C, L->e, L->nr, L->nz, L->mask, 1);
    for (int k = 0; k < nu2; ++k)
        gs_sweep(L, 1);
}

void magnet_mg_cycle(struct nlse_magnet *s, int nu1, int nu2)
{
    const int nr = (int)s->g.nr, nz = (int)s->g.nz;
    for (int k = 0; k < nu1; ++k)
        magnet_fine_smooth(s);
    magnet_fine_residual(s, s->r0);
    magnet_level *C = &s->lev[1];
    restrict_to(s->r0, nr, nz, C);
    memset(C->e, 0, (size_t)C->nr * C->nz * sizeof(double));
    vcycle(s, 1, nu1, nu2);
    prolong(C, s->e0, nr, nz, s->mask0, 0);
    magnet_fine_correct(s, s->e0);
    for (int k = 0; k < nu2; ++k)
        magnet_fine_smooth(s);
}

/* ------------------------------------------------------- mg-preconditioned Krylov */

/* The fine level as an explicit operator (lev[0]) for the preconditioner. */
static int build_fine_explicit(struct nlse_magnet *s)
{
    magnet_level *L = &s->lev[0];
    if (L->A)
        return NLSE_OK;
    L->nr = (int)s->g.nr;
    L->nz = (int)s->g.nz;
    L->five_point = 1;
    const size_t n = (size_t)L->nr * L->nz;
    L->A = (double *)calloc(9 * n, sizeof(double));
    L->mask = (unsigned char *)malloc(n);
    L->b = (double *)calloc(n, sizeof(double));
    L->e = (double *)calloc(n, sizeof(double));
    L->r = (double *)calloc(n, sizeof(double));
    if (!L->A || !L->mask || !L->b || !L->e || !L->r)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the explicit fine operator");
    memcpy(L->mask, s->mask0, n);
    for (int i = 0; i < L->nr; ++i)
        for (int j = s->rows[i].js; j <= s->rows[i].je; ++j)
            magnet_fine_stencil(&s->g, &s->rows[i], j, L->A + 9 * ((size_t)i * L->nz + j));
    return NLSE_OK;
}

/* z = M^{-1} v: one V(2,2) cycle on A z = v from z = 0 */
static void precondition(struct nlse_magnet *s, const double *v, double *z)
{
    magnet_level *L = &s->lev[0];
    const size_t n = (size_t)L->nr * L->nz;
    memcpy(L->b, v, n * sizeof(double));
    memset(L->e, 0, n * sizeof(double));
    vcycle(s, 0, 2, 2);
    memcpy(z, L->e, n * sizeof(double));
}

/* a . b as a fixed-order sum (nlse_sum_parts): the same bits for any number
 * of threads, so that a resumed solve repeats an uninterrupted one. */
static double dot(const double *a, const double *b, size_t n)
{
    double part[NLSE_SUM_PARTS], t;
    const size_t len = nlse_sum_part_len(n);
    const int np = n ? nlse_sum_nparts(n) : 0;
#pragma omp parallel for NLSE_THREADS schedule(static) if (n > 65536)
    for (int p = 0; p < np; ++p) {
        const size_t q1 = (size_t)p * len, q2 = q1 + len < n ? q1 + len : n;
        double u = 0.0;
#pragma omp simd reduction(+ : u)
        for (size_t q = q1; q < q2; ++q)
            u += a[q] * b[q];
        part[p] = u;
    }
    nlse_sum_parts(part, np, 1, &t);
    return t;
}

/* Bytes of one colour of Phi (halos included). */
static size_t colour_bytes(const struct nlse_magnet *s)
{
    return (s->g.nr + 2) * s->hw * (s->p.dtype == NLSE_COMPLEX64 ? sizeof(float) : sizeof(double));
}

void magnet_mgcg_close(struct nlse_magnet *s)
{
    free(s->kv);
    free(s->kb[0]);
    free(s->kb[1]);
    s->kv = NULL;
    s->kb[0] = s->kb[1] = NULL;
    s->kopen = 0;
}

/* Begin BiCGSTAB on A d = f - A Phi from d = 0: r = rh = the residual,
 * p = v = 0, rho = alpha = omega = 1, the first Phi kept. */
static int mgcg_open(struct nlse_magnet *s)
{
    const size_t n = s->g.nr * s->g.nz, cb = colour_bytes(s);
    s->kv = (double *)calloc(8 * n, sizeof(double));
    s->kb[0] = malloc(cb);
    s->kb[1] = malloc(cb);
    if (!s->kv || !s->kb[0] || !s->kb[1]) {
        magnet_mgcg_close(s);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the Krylov vectors (%zu nodes)", n);
    }
    memcpy(s->kb[0], s->P[0], cb);
    memcpy(s->kb[1], s->P[1], cb);
    magnet_fine_residual(s, s->kv + n);
    memcpy(s->kv + 2 * n, s->kv + n, n * sizeof(double));
    s->krho = s->kalpha = s->komega = 1.0;
    s->krel = NAN;
    s->kopen = 1;
    return NLSE_OK;
}

/* One BiCGSTAB iteration (right-preconditioned by a V-cycle) on the vectors
 * and scalars kept in s; returns ||r|| of the new residual. */
static double bicgstab_step(struct nlse_magnet *s)
{
    const size_t n = s->g.nr * s->g.nz;
    double *x = s->kv, *r = x + n, *rh = r + n, *p = rh + n, *v = p + n;
    double *y = v + n, *z = y + n, *t = z + n;
    const double rho1 = dot(rh, r, n);
    const double beta = (rho1 / s->krho) * (s->kalpha / s->komega), om = s->komega;
    s->krho = rho1;
    for (size_t q = 0; q < n; ++q)
        p[q] = r[q] + beta * (p[q] - om * v[q]);
    precondition(s, p, y);
    matvec(&s->lev[0], y, v);
    const double alpha = s->krho / dot(rh, v, n);
    s->kalpha = alpha;
    for (size_t q = 0; q < n; ++q) {
        x[q] += alpha * y[q];
        r[q] -= alpha * v[q]; /* s = r - alpha v, kept in r */
    }
    precondition(s, r, z);
    matvec(&s->lev[0], z, t);
    const double tt = dot(t, t, n);
    const double omega = tt > 0 ? dot(t, r, n) / tt : 0.0;
    s->komega = omega;
    for (size_t q = 0; q < n; ++q) {
        x[q] += omega * z[q];
        r[q] -= omega * t[q];
    }
    return sqrt(dot(r, r, n));
}

/* BiCGSTAB with the V-cycle as right preconditioner on A d = r0 (the rows of
 * Table 2.1 are not symmetrisable, so plain CG does not apply); Phi = Phi0 + d.
 * The iteration lives in the handle between calls: a call continues the one
 * in progress, and the iterates, residuals and Phi after k calls of m_1 ..
 * m_k iterations are those of one call of m_1 + .. + m_k, bit for bit. */
int magnet_mgcg_solve(struct nlse_magnet *s, double tol, long max_iter, double fn, double *history,
                  long *iterations, double *rel_residual, int *converged)
{
    int st = build_fine_explicit(s);
    if (st)
        return st;
    if (!s->kopen && (st = mgcg_open(s)))
        return st;
    *converged = 0;
    *rel_residual = s->krel;
    for (long it = 1; it <= max_iter && s->kopen == 1; ++it) {
        const double rel = bicgstab_step(s) / fn;
        if (history)
            history[it - 1] = rel;
        *iterations = it;
        *rel_residual = s->krel = rel;
        if (!isfinite(rel)) {
            magnet_mgcg_close(s); /* Phi stays that of the previous call */
            return nlse_fail(NLSE_ERR_BLOWUP, "mg-cg diverged at iteration %ld", it);
        }
        if (rel < tol)
            *converged = 1;
        else if (s->komega == 0.0 || s->krho == 0.0)
            s->kopen = 2; /* breakdown: the residual reached is reported */
        if (*converged)
            break;
    }
    const size_t cb = colour_bytes(s);
    memcpy(s->P[0], s->kb[0], cb);
    memcpy(s->P[1], s->kb[1], cb);
    magnet_fine_correct(s, s->kv);
    if (*converged)
        magnet_mgcg_close(s);
    return NLSE_OK;
}
