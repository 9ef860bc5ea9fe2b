/*
 * magnet_internal.h -- the handle of the CPU magnet-design Laplace solver
 * (csrc/magnet/magnet.c) and the row descriptors every backend derives from
 * Table 2.1 of Madhubhashini's thesis (csrc/magnet/magnet_params.c).
 */
#ifndef NLSEPY_MAGNET_INTERNAL_H
#define NLSEPY_MAGNET_INTERNAL_H

#include "nlsepy/magnet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row i of the grid: the rows of Table 2.1 (eq. 2.38 scaling) as
 *   a Phi[i+1,j] + b Phi[i-1,j] + c Phi[i,j+1] + d Phi[i,j-1] + e Phi[i,j] = f
 * with (a, b) = (a1, b1) for j < split, (a2, b2) from split on, and
 * (c, d, f) = (2 gamma, 0, cap) at j = jcap (the magnet's cap, corners C
 * and D), (0, 2 gamma, 0) at j = j1 (boundary 1, corners A and B),
 * (gamma, gamma, 0) elsewhere.  Unknowns are j = js .. je. */
typedef struct {
    int js, je, jcap, split;
    double a1, b1, a2, b2, e;
} magnet_row;

typedef struct {
    int i0, j0, i1, j1;   /* magnet edges and the outer faces in nodes */
    size_t nr, nz;
    double gamma;         /* (dr/dz)^2                                 */
    double cap;           /* f of the cap rows: -2 gamma B dz / mu0     */
    double fnorm;         /* ||f|| (eq. 2.58)                          */
} magnet_geom;

/* The multigrid hierarchy, shared by every backend (magnet_hier.c). */
#define MAGNET_MG_COARSEST 400 /* unknowns at which coarsening stops */
void magnet_fine_stencil(const magnet_geom *g, const magnet_row *R, int j, double c[9]);
int magnet_coarse_dim(int n);
/* Galerkin operator P^T A P of a fine level (fA NULL: the rows of Table 2.1)
 * with fine mask fmask; allocates *cA (9 per node) and *cmask. */
int magnet_galerkin(const magnet_geom *g, const magnet_row *rows, int fnr, int fnz, const unsigned char *fmask,
                const double *fA, int *cnr, int *cnz, double **cA, unsigned char **cmask);
size_t magnet_fine_mask(const magnet_geom *g, const magnet_row *rows, unsigned char *mask);
int magnet_level_count(int nr, int nz, size_t unknowns);
int magnet_coarsest_dense(int nr, int nz, const double *A, const unsigned char *mask, int *idx, int *m,
                      double **dense);
int magnet_lu_factor(double *a, int m, int *piv);
void magnet_lu_solve(const double *lu, const int *piv, int m, double *x);

/* Shared by every backend (magnet_params.c). */
/* The arguments of nlse_magnet_create: NLSE_ERR_VALUE for a NULL one, then
 * *out = NULL and the parameters' checks. */
int magnet_check_create(const nlse_magnet_params *p, nlse_magnet **out);
int magnet_make_geom(const nlse_magnet_params *p, magnet_geom *g);
void magnet_make_rows(const magnet_geom *g, magnet_row *rows); /* nr rows */
/* Rows with Dirichlet data on the outer cylinder, the magnet's surface and
 * the mid-plane (the axis keeps eq. 2.28): every unknown is an interior or
 * axis node. */
void magnet_make_rows_dirichlet(const magnet_geom *g, magnet_row *rows);

#define MAGNET_MU0 (4e-7 * 3.14159265358979323846)

#ifdef __cplusplus
}
#endif

#endif /* NLSEPY_MAGNET_INTERNAL_H */
