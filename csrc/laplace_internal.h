/*
 * laplace_internal.h -- the handle of the CPU magnet-design Laplace solver
 * (csrc/laplace.c) and the row descriptors every backend derives from
 * Table 2.1 of Madhubhashini's thesis (csrc/laplace_params.c).
 */
#ifndef NLSEPY_LAPLACE_INTERNAL_H
#define NLSEPY_LAPLACE_INTERNAL_H

#include "nlsepy/laplace.h"

/* Row i of the grid: the rows of Table 2.1 (eq. 2.38 scaling) as
 *   a Phi[i+1,j] + b Phi[i-1,j] + c Phi[i,j+1] + d Phi[i,j-1] + e Phi[i,j] = f
 * with (a, b) = (a1, b1) for j < split, (a2, b2) from split on, and
 * (c, d, f) = (2 gamma, 0, cap) at j = jcap (the magnet's cap, corners C
 * and D), (0, 2 gamma, 0) at j = j1 (boundary 1, corners A and B),
 * (gamma, gamma, 0) elsewhere.  Unknowns are j = js .. je. */
typedef struct {
    int js, je, jcap, split;
    double a1, b1, a2, b2, e;
} lp_row;

typedef struct {
    int i0, j0, i1, j1;   /* magnet edges and the outer faces in nodes */
    size_t nr, nz;
    double gamma;         /* (dr/dz)^2                                 */
    double cap;           /* f of the cap rows: -2 gamma B dz / mu0     */
    double fnorm;         /* ||f|| (eq. 2.58)                          */
} lp_geom;

/* One coarse level of the multigrid solver (laplace_mg.c): 9-point
 * Galerkin operator, natural layout (i nz + j), double precision. */
typedef struct {
    int nr, nz;
    double *A;            /* 9 per node: A[9 (i nz + j) + 3 (di + 1) + (dj + 1)] */
    unsigned char *mask;  /* unknowns                                        */
    double *b, *e, *r;    /* right-hand side, correction, residual           */
    int five_point;       /* rows without diagonal couplings (fine level)    */
    int nunk;             /* coarsest level: dense LU of the unknowns        */
    int *idx, *piv;
    double *LU;
} lp_level;

struct nlse_lp {
    nlse_lp_params p;
    lp_geom g;
    lp_row *rows;
    size_t hw;        /* stored values per row and colour (with halo) */
    void *P[2], *Q[2];/* Phi by colour; Q: Jacobi's second copy       */
    double *part;     /* per-row partial sums                          */
    double fnorm;     /* ||f|| of the unknowns' equations (eq. 2.58)   */
    int dirichlet;    /* boundary data given (nlse_lp_set_dirichlet)    */
    /* multigrid (built at the first multigrid solve) */
    int nlev;         /* coarse levels 1..nlev                          */
    lp_level *lev;    /* lev[0]: the fine level as an explicit operator,
                         built for mg-cg only (the V-cycle of the plain
                         multigrid smooths Phi itself)                 */
    double *r0, *e0;  /* fine residual and correction (natural layout)  */
    unsigned char *mask0;
    int mg_rows_dirichlet; /* which rows the hierarchy was built for   */
};

/* Multigrid (laplace_mg.c). */
int lp_mg_build(struct nlse_lp *s);
void lp_mg_free(struct nlse_lp *s);
void lp_mg_cycle(struct nlse_lp *s, int nu1, int nu2); /* one V-cycle on Phi */
int lp_mgcg_solve(struct nlse_lp *s, double tol, long max_iter, double fn, double *history,
                  long *iterations, double *rel_residual, int *converged);
/* Fine-level hooks for the multigrid (laplace.c, precision dispatch). */
void lp_fine_smooth(struct nlse_lp *s);
void lp_fine_residual(const struct nlse_lp *s, double *r);
void lp_fine_correct(struct nlse_lp *s, const double *e);

/* The multigrid hierarchy, shared by every backend (laplace_hier.c). */
#define LP_MG_COARSEST 400 /* unknowns at which coarsening stops */
void lp_fine_stencil(const lp_geom *g, const lp_row *R, int j, double c[9]);
int lp_coarse_dim(int n);
/* Galerkin operator P^T A P of a fine level (fA NULL: the rows of Table 2.1)
 * with fine mask fmask; allocates *cA (9 per node) and *cmask. */
int lp_galerkin(const lp_geom *g, const lp_row *rows, int fnr, int fnz, const unsigned char *fmask,
                const double *fA, int *cnr, int *cnz, double **cA, unsigned char **cmask);

/* Shared by every backend (laplace_params.c). */
int lp_make_geom(const nlse_lp_params *p, lp_geom *g);
void lp_make_rows(const lp_geom *g, lp_row *rows); /* nr rows */
/* Rows with Dirichlet data on the outer cylinder, the magnet's surface and
 * the mid-plane (the axis keeps eq. 2.28): every unknown is an interior or
 * axis node. */
void lp_make_rows_dirichlet(const lp_geom *g, lp_row *rows);

#define LP_MU0 (4e-7 * 3.14159265358979323846)

#endif /* NLSEPY_LAPLACE_INTERNAL_H */
