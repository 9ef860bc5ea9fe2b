/*
 * magnet_galerkin.h -- the Galerkin coarse operator P^T A P of the
 * magnet-design multigrid (Madhubhashini, thesis, Table 2.1 rows as 3x3
 * stencils; masked bilinear prolongation), one coarse node at a time.
 * Plain functions on plain data, compiled for the host (magnet_hier.c)
 * and, under nvcc, for the device (cuda/magnet/magnet.cu builds the hierarchy on
 * the GPU with the same arithmetic).
 */
#ifndef NLSEPY_MAGNET_GALERKIN_H
#define NLSEPY_MAGNET_GALERKIN_H

#include <stddef.h>
#include "magnet_internal.h"

#ifdef __CUDACC__
#define MAGNET_HD __host__ __device__
#else
#define MAGNET_HD
#endif

/* Table 2.1 row R at column j as a 3x3 stencil c[3 (di + 1) + (dj + 1)]. */
static inline MAGNET_HD void magnet_stencil_of(double gamma, int j1, const magnet_row *R, int j, double c[9])
{
    for (int q = 0; q < 9; ++q)
        c[q] = 0.0;
    double cc = gamma, dd = gamma;
    if (j == R->jcap) {
        cc = 2.0 * gamma;
        dd = 0.0;
    } else if (j == j1) {
        cc = 0.0;
        dd = 2.0 * gamma;
    }
    c[4] = R->e;
    c[7] = j < R->split ? R->a1 : R->a2; /* (i+1, j) */
    c[1] = j < R->split ? R->b1 : R->b2; /* (i-1, j) */
    c[5] = cc;                            /* (i, j+1) */
    c[3] = dd;                            /* (i, j-1) */
}

/* A fine level seen by the Galerkin product. */
typedef struct {
    double gamma;
    int j1;
    const magnet_row *rows;      /* the Table 2.1 rows when A is NULL */
    int nr, nz;
    const unsigned char *mask;
    const double *A;         /* 9 per node, or NULL: the fine rows */
} magnet_view;

static inline MAGNET_HD void magnet_view_stencil(const magnet_view *v, int i, int j, double c[9])
{
    if (!v->A) {
        magnet_stencil_of(v->gamma, v->j1, &v->rows[i], j, c);
    } else {
        const double *a = v->A + 9 * ((size_t)i * v->nz + j);
        for (int q = 0; q < 9; ++q)
            c[q] = a[q];
    }
}

static inline MAGNET_HD int magnet_view_active(const magnet_view *v, int i, int j)
{
    return i >= 0 && j >= 0 && i < v->nr && j < v->nz && v->mask[(size_t)i * v->nz + j];
}

/* Galerkin row of coarse node (I, J): sum_k sum_l P(k, I) A(k, l) P(l, I'). */
static inline MAGNET_HD void magnet_galerkin_row(const magnet_view *f, int I, int J, double row[9])
{
    for (int q = 0; q < 9; ++q)
        row[q] = 0.0;
    for (int fi = 2 * I - 1; fi <= 2 * I + 1; ++fi)
        for (int fj = 2 * J - 1; fj <= 2 * J + 1; ++fj) {
            if (!magnet_view_active(f, fi, fj))
                continue;
            const double wk = (fi == 2 * I ? 1.0 : 0.5) * (fj == 2 * J ? 1.0 : 0.5);
            double c[9];
            magnet_view_stencil(f, fi, fj, c);
            for (int p = -1; p <= 1; ++p)
                for (int q = -1; q <= 1; ++q) {
                    const double a = c[3 * (p + 1) + (q + 1)];
                    const int li = fi + p, lj = fj + q;
                    if (a == 0.0 || !magnet_view_active(f, li, lj))
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

#endif /* NLSEPY_MAGNET_GALERKIN_H */
