/*
 * magnet_hier.c -- the multigrid hierarchy of the magnet-design Laplace
 * problem, shared by every backend: the fine rows of Table 2.1
 * (Madhubhashini, thesis, eq. 2.38 form) as 3x3 stencils, masked bilinear
 * prolongation P, and the Galerkin coarse operators P^T A P (9-point
 * stencils, natural layout; the per-node product in magnet_galerkin.h),
 * built on the host.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "magnet_galerkin.h"

void magnet_fine_stencil(const magnet_geom *g, const magnet_row *R, int j, double c[9])
{
    magnet_stencil_of(g->gamma, g->j1, R, j, c);
}

int magnet_coarse_dim(int n) { return n / 2 + 1; }

int magnet_galerkin(const magnet_geom *g, const magnet_row *rows, int fnr, int fnz, const unsigned char *fmask,
                const double *fA, int *cnr, int *cnz, double **cA, unsigned char **cmask)
{
    const magnet_view f = {g->gamma, g->j1, rows, fnr, fnz, fmask, fA};
    const int nrc = magnet_coarse_dim(fnr), nzc = magnet_coarse_dim(fnz);
    const size_t n = (size_t)nrc * nzc;
    double *A = (double *)malloc(9 * n * sizeof(double));
    unsigned char *mask = (unsigned char *)malloc(n);
    if (!A || !mask) {
        free(A);
        free(mask);
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for a multigrid level (%zu nodes)", n);
    }
#pragma omp parallel for NLSE_THREADS schedule(static) if (n > 16384)
    for (int I = 0; I < nrc; ++I)
        for (int J = 0; J < nzc; ++J) {
            double *row = A + 9 * ((size_t)I * nzc + J);
            magnet_galerkin_row(&f, I, J, row);
            mask[(size_t)I * nzc + J] = row[4] != 0.0;
        }
    *cnr = nrc;
    *cnz = nzc;
    *cA = A;
    *cmask = mask;
    return NLSE_OK;
}

/* Unknowns of the fine rows as a mask (natural layout); returns their count. */
size_t magnet_fine_mask(const magnet_geom *g, const magnet_row *rows, unsigned char *mask)
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
int magnet_level_count(int nr, int nz, size_t unknowns)
{
    int nlev = 0;
    size_t cnt = unknowns;
    while (cnt > MAGNET_MG_COARSEST && nr > 3 && nz > 3) {
        nr = magnet_coarse_dim(nr);
        nz = magnet_coarse_dim(nz);
        cnt = (size_t)nr * nz;
        ++nlev;
    }
    return nlev > 0 ? nlev : 1;
}

/* The coarsest level's operator as a dense m x m matrix of its unknowns:
 * idx[node] = unknown number or -1; allocates *dense (row-major). */
int magnet_coarsest_dense(int nr, int nz, const double *A, const unsigned char *mask, int *idx, int *m_out,
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
int magnet_lu_factor(double *a, int m, int *piv)
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

/* x <- A^{-1} x with the factors of magnet_lu_factor. */
void magnet_lu_solve(const double *lu, const int *piv, int m, double *x)
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
