/*
 * laplace_hier.c -- the multigrid hierarchy of the magnet-design Laplace
 * problem, shared by every backend: the fine rows of Table 2.1
 * (Madhubhashini, thesis, eq. 2.38 form) as 3x3 stencils, masked bilinear
 * prolongation P, and the Galerkin coarse operators P^T A P (9-point
 * stencils, natural layout), built on the host.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "laplace_internal.h"

void lp_fine_stencil(const lp_geom *g, const lp_row *R, int j, double c[9])
{
    memset(c, 0, 9 * sizeof(double));
    double cc = g->gamma, dd = g->gamma;
    if (j == R->jcap) {
        cc = 2.0 * g->gamma;
        dd = 0.0;
    } else if (j == g->j1) {
        cc = 0.0;
        dd = 2.0 * g->gamma;
    }
    c[4] = R->e;
    c[7] = j < R->split ? R->a1 : R->a2; /* (i+1, j) */
    c[1] = j < R->split ? R->b1 : R->b2; /* (i-1, j) */
    c[5] = cc;                            /* (i, j+1) */
    c[3] = dd;                            /* (i, j-1) */
}

int lp_coarse_dim(int n) { return n / 2 + 1; }

typedef struct {
    const lp_geom *g;
    const lp_row *rows;
    int nr, nz;
    const unsigned char *mask;
    const double *A; /* NULL: the fine rows */
} view;

static void stencil_at(const view *v, int i, int j, double c[9])
{
    if (!v->A)
        lp_fine_stencil(v->g, &v->rows[i], j, c);
    else
        memcpy(c, v->A + 9 * ((size_t)i * v->nz + j), 9 * sizeof(double));
}

static int active(const view *v, int i, int j)
{
    return i >= 0 && j >= 0 && i < v->nr && j < v->nz && v->mask[(size_t)i * v->nz + j];
}

/* Galerkin row of coarse node (I, J): sum_k sum_l P(k, I) A(k, l) P(l, I'). */
static void galerkin_row(const view *f, int I, int J, double row[9])
{
    memset(row, 0, 9 * sizeof(double));
    for (int fi = 2 * I - 1; fi <= 2 * I + 1; ++fi)
        for (int fj = 2 * J - 1; fj <= 2 * J + 1; ++fj) {
            if (!active(f, fi, fj))
                continue;
            const double wk = (fi == 2 * I ? 1.0 : 0.5) * (fj == 2 * J ? 1.0 : 0.5);
            double c[9];
            stencil_at(f, fi, fj, c);
            for (int p = -1; p <= 1; ++p)
                for (int q = -1; q <= 1; ++q) {
                    const double a = c[3 * (p + 1) + (q + 1)];
                    const int li = fi + p, lj = fj + q;
                    if (a == 0.0 || !active(f, li, lj))
                        continue;
                    const int i_lo = li / 2, i_hi = (li + 1) / 2;
                    const int j_lo = lj / 2, j_hi = (lj + 1) / 2;
                    const double wi = li % 2 ? 0.5 : 1.0, wj = lj % 2 ? 0.5 : 1.0;
                    for (int ci = i_lo; ci <= i_hi; ++ci)
                        for (int cj = j_lo; cj <= j_hi; ++cj)
                            row[3 * (ci - I + 1) + (cj - J + 1)] += wk * a * wi * wj;
                }
        }
}

int lp_galerkin(const lp_geom *g, const lp_row *rows, int fnr, int fnz, const unsigned char *fmask,
                const double *fA, int *cnr, int *cnz, double **cA, unsigned char **cmask)
{
    const view f = {g, rows, fnr, fnz, fmask, fA};
    const int nrc = lp_coarse_dim(fnr), nzc = lp_coarse_dim(fnz);
    const size_t n = (size_t)nrc * nzc;
    double *A = (double *)malloc(9 * n * sizeof(double));
    unsigned char *mask = (unsigned char *)malloc(n);
    if (!A || !mask) {
        free(A);
        free(mask);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a multigrid level (%zu nodes)", n);
    }
#pragma omp parallel for schedule(static) if (n > 16384)
    for (int I = 0; I < nrc; ++I)
        for (int J = 0; J < nzc; ++J) {
            double *row = A + 9 * ((size_t)I * nzc + J);
            galerkin_row(&f, I, J, row);
            mask[(size_t)I * nzc + J] = row[4] != 0.0;
        }
    *cnr = nrc;
    *cnz = nzc;
    *cA = A;
    *cmask = mask;
    return NLSE_OK;
}

/* Unknowns of the fine rows as a mask (natural layout); returns their count. */
size_t lp_fine_mask(const lp_geom *g, const lp_row *rows, unsigned char *mask)
{
    size_t unk = 0;
    memset(mask, 0, g->nr * g->nz);
    for (int i = 0; i < (int)g->nr; ++i)
        for (int j = rows[i].js; j <= rows[i].je; ++j) {
            mask[(size_t)i * g->nz + j] = 1;
            ++unk;
        }
    return unk;
}

/* Coarse levels below the fine grid until the unknowns fit the dense
 * coarsest solve (at least one). */
int lp_level_count(int nr, int nz, size_t unknowns)
{
    int nlev = 0;
    size_t cnt = unknowns;
    while (cnt > LP_MG_COARSEST && nr > 3 && nz > 3) {
        nr = lp_coarse_dim(nr);
        nz = lp_coarse_dim(nz);
        cnt = (size_t)nr * nz;
        ++nlev;
    }
    return nlev > 0 ? nlev : 1;
}

/* The coarsest level's operator as a dense m x m matrix of its unknowns:
 * idx[node] = unknown number or -1; allocates *dense (row-major). */
int lp_coarsest_dense(int nr, int nz, const double *A, const unsigned char *mask, int *idx, int *m_out,
                      double **dense)
{
    const size_t n = (size_t)nr * nz;
    int m = 0;
    for (size_t q = 0; q < n; ++q)
        idx[q] = mask[q] ? m++ : -1;
    double *D = (double *)calloc((size_t)m * m + 1, sizeof(double));
    if (!D)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the coarsest level (%d unknowns)", m);
    for (int I = 0; I < nr; ++I)
        for (int J = 0; J < nz; ++J) {
            const int k = idx[(size_t)I * nz + J];
            if (k < 0)
                continue;
            const double *row = A + 9 * ((size_t)I * nz + J);
            for (int p = -1; p <= 1; ++p)
                for (int q = -1; q <= 1; ++q) {
                    const int ii = I + p, jj = J + q;
                    if (ii < 0 || jj < 0 || ii >= nr || jj >= nz)
                        continue;
                    const int c = idx[(size_t)ii * nz + jj];
                    if (c >= 0)
                        D[(size_t)k * m + c] += row[3 * (p + 1) + (q + 1)];
                }
        }
    *m_out = m;
    *dense = D;
    return NLSE_OK;
}

/* LU with partial pivoting in place (a: m x m row-major). */
int lp_lu_factor(double *a, int m, int *piv)
{
    for (int k = 0; k < m; ++k) {
        int pk = k;
        for (int i = k + 1; i < m; ++i)
            if (fabs(a[(size_t)i * m + k]) > fabs(a[(size_t)pk * m + k]))
                pk = i;
        piv[k] = pk;
        if (a[(size_t)pk * m + k] == 0.0)
            return nlse_fail(NLSE_ERR_INTERNAL, "the coarsest multigrid operator is singular");
        if (pk != k)
            for (int j = 0; j < m; ++j) {
                double t = a[(size_t)k * m + j];
                a[(size_t)k * m + j] = a[(size_t)pk * m + j];
                a[(size_t)pk * m + j] = t;
            }
        for (int i = k + 1; i < m; ++i) {
            const double l = a[(size_t)i * m + k] / a[(size_t)k * m + k];
            a[(size_t)i * m + k] = l;
            for (int j = k + 1; j < m; ++j)
                a[(size_t)i * m + j] -= l * a[(size_t)k * m + j];
        }
    }
    return NLSE_OK;
}

/* x <- A^{-1} x with the factors of lp_lu_factor. */
void lp_lu_solve(const double *lu, const int *piv, int m, double *x)
{
    for (int k = 0; k < m; ++k) {
        const int pk = piv[k];
        double t = x[k];
        x[k] = x[pk];
        x[pk] = t;
        for (int i = k + 1; i < m; ++i)
            x[i] -= lu[(size_t)i * m + k] * x[k];
    }
    for (int k = m - 1; k >= 0; --k) {
        double v = x[k];
        for (int j = k + 1; j < m; ++j)
            v -= lu[(size_t)k * m + j] * x[j];
        x[k] = v / lu[(size_t)k * m + k];
    }
}
