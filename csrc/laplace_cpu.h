/*
 * laplace_cpu.h -- the CPU solver's handle (csrc/laplace.c) and its
 * multigrid (csrc/laplace_mg.c) for the magnet-design Laplace problem.
 */
#ifndef NLSEPY_LAPLACE_CPU_H
#define NLSEPY_LAPLACE_CPU_H

#include "laplace_internal.h"

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
    double last_seconds;
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

#endif /* NLSEPY_LAPLACE_CPU_H */
